"""Exercise 09's named mistakes, one place for every part (what each check recognises them by is in its part's
module). A learner reads a mistake's question while working; its explanation comes with graded feedback."""

from __future__ import annotations

from ...checking import Misconception

NOT_A_NUMBER = Misconception(
    "a tensor where the part asks for a Python number",
    "Return a plain Python number (loss.item(), float(...), int(...)): a tensor can keep its graph, and everything "
    "that graph saved, alive for as long as the caller keeps the result.",
    question="What type does the part ask the function to return?")

# ------------------------------------------------------------------------------------------ Part A: rules

SWAPPED = Misconception(
    "vanishing and exploding swapped",
    "layer_grad_norms runs from the FIRST layer (input side) to the LAST. A first layer whose gradient is orders of "
    "magnitude smaller than the last one's received a gradient that shrank on its way back (vanishing); larger, one "
    "that grew (exploding).",
    question="Which end of layer_grad_norms is the input side, and which way does each failure bend the profile?")
ACCUMULATION_AS_EXPLOSION = Misconception(
    "a missing zero_grad called 'exploding'",
    "The loss bounces back up, but everything stays finite and the per-layer norms are ordinary: nothing is "
    "multiplied through depth. The step grows because .grad keeps the SUM of all earlier gradients: accumulation, "
    "not explosion.",
    question="Does anything in this run grow through depth, or only from one step to the next?")
WAITED_FOR_NAN = Misconception(
    "waited for inf/nan to call it exploding",
    "Runs that clip their gradients keep a finite loss, yet their gradients still grow by orders of magnitude from "
    "the last layer to the first. The per-layer profile is the fingerprint; inf/nan is only its loudest outcome.",
    question="What does a run that clips its gradients keep finite, and what does clipping leave as it was?")
TRUSTED_TRAINING_LOSS = Misconception(
    "trusted the falling training loss",
    "The training loss falls smoothly, but val_loss ends near baseline_loss: the model learned no more than the mean "
    "of the targets, because it optimised another loss than intended ((n, 1) predictions minus (n,) targets "
    "broadcast to an (n, n) matrix).",
    question="How does this run's held-out loss compare with predicting the mean of the targets?")
STOPPED_AT_LOSS = Misconception(
    "stopped at the loss",
    "Vanishing gradients and the broadcasting bug both end at the baseline, with the same loss curve. Only the "
    "per-layer profile tells them apart: a first layer that receives almost nothing is vanishing; ordinary "
    "per-layer norms mean the loss itself is wrong.",
    question="Two kinds end at the same plateau: which field still differs between them?")
NOISE_AS_BOUNCE = Misconception(
    "mini-batch noise read as a bounce",
    "Each step's loss is computed on a random mini-batch, so even a healthy curve rises a little now and then. A "
    "missing zero_grad makes the loss climb several times above its best after it has fallen: set your threshold in "
    "the gap the traces show between the two.",
    question="How far above its best does a healthy mini-batch loss climb, and how far does a missing zero_grad's?")
BOUNCE_IN_UNITS = Misconception(
    "a bounce measured in the loss's own units",
    "A rise of the loss measured as a difference grows with the loss's scale: a healthy run that sums its loss over "
    "the mini-batch logs every loss 256 times larger, so its ordinary wiggles become differences of tens. How many "
    "times above its best the loss climbs does not depend on the scale.",
    question="Would your bounce still look the same if every loss of the run were 256 times larger?")
MISSED_BOUNCE = Misconception(
    "missed the bounce",
    "This run fell fast and then climbed back several times above its best loss, with ordinary per-layer norms: "
    "the accumulated .grad overshoots. Look for the bounce before judging the end of the run.",
    question="What does this run's loss do after its best step?")
IGNORED_EXCEPTION = Misconception(
    "ignored the exception",
    "Training stopped with an exception: trace['raised'] is the loudest symptom of all, so read it first.",
    question="Which field says that training stopped, and does a rule read it before any other?")
HELD_OUT_TOO_STRICT = Misconception(
    "held-out threshold too strict",
    "A healthy run ends with val_loss a fraction of baseline_loss, never zero (the targets are noisy); the "
    "broadcasting bug ends near baseline_loss itself. Put the cut in the gap between the two.",
    question="How close to zero does a healthy run's held-out loss get, given noisy targets?")
GRADIENT_SIZE = Misconception(
    "judged by the size of the gradients",
    "A gradient's size depends on how the loss is written: a loss summed over the mini-batch instead of averaged "
    "makes every loss and gradient 256 times larger, and trains exactly the same. Exploding is growth through depth: "
    "compare the first layer's gradient with the last one's (a ratio has no units).",
    question="Would your rule still hold if the loss were summed over the batch instead of averaged?")
CLIMB_BEFORE_PROFILE = Misconception(
    "read the climb before the per-layer profile",
    "An exploding run that clips its gradients keeps a finite loss, and that loss can climb far above its best, as "
    "a missing zero_grad does: the climb alone does not tell the two apart. Its per-layer profile does (the first "
    "layer's gradient thousands of times the last one's, never reached by a missing zero_grad): check it first.",
    question="Which kinds besides a missing zero_grad can climb far above their best loss?")
THRESHOLD_PAST_GAP = Misconception(
    "threshold past the gap",
    "Your rules read the right measurement for this run's kind (the same trace with only that value pushed far out "
    "is named right), but the threshold sits beyond the runs of that kind. Put it in the middle of the gap between "
    "the kinds it separates (on a log scale for ratios), measured on all the labelled runs, not just a few.",
    question="Where does this run's value sit against your threshold, and where do the other runs of its kind sit?")
THRESHOLD_AT_EDGE = Misconception(
    "threshold at the edge of its gap",
    "A threshold that separates the runs you have by a hair is crossed by the next fresh run. Put each threshold in "
    "the middle of its gap: on a log scale for ratios, the geometric mean of the nearest values on either side, so "
    "that moving it by a quarter keeps every run on its side.",
    question="How far is this threshold from the nearest run on each side of it?")
TRAINING_LOSS_AS_HELD_OUT = Misconception(
    "compared the training loss with the baseline",
    "loss is the training code's own number: a run that sums its loss over the mini-batch logs 256 times the mean, "
    "so its training loss says nothing about how far the model got. val_loss is computed the same way in every run "
    "(a mean squared error on held-out data): compare that with baseline_loss.",
    question="Is the training loss of every run on the same scale as baseline_loss?")
CHANGED_TRACE = Misconception(
    "changed the trace it reads",
    "A quantity only reads the trace: the caller keeps plotting and logging it. Clean or sort into new lists "
    "(sorted(...), a list comprehension) instead of assigning into the trace or sorting its lists in place.",
    question="Which of your quantities writes into the lists it was given?")

# ------------------------------------------------------------------------------------------ Part B1: evaluating

RECORDED_GRAPH = Misconception(
    "recorded a graph during evaluation",
    "Autograd saved tensors for a backward pass that never comes: evaluation needs no gradients. Inside the block "
    "recording must be off, so that nothing is recorded; detaching or calling .item() afterwards is too late, the "
    "graph was already built.",
    question="Was recording off while the model ran inside the block, or only afterwards?")
GRAD_MODE_LEFT = Misconception(
    "switched recording off for the rest of training",
    "Switching autograd off with a plain call (not a block that ends) leaves it off for everything that runs after "
    "it: the training step's later forward passes record nothing, and their backward finds no graph. The grad mode "
    "must come back when the evaluation ends.",
    question="Is recording on again for the rest of the caller's training step?")
GRAD_MODE_FORCED = Misconception(
    "switched recording on for a caller that had it off",
    "Switching recording on at the end turns it on whatever it was before: a caller evaluating inside its own "
    "torch.no_grad() now records again. Put back the mode you found, not the mode you expect.",
    question="What was the caller's grad mode before the block, and what is it after?")
EVAL_MODE_LEFT = Misconception(
    "left the model in eval mode",
    "The evaluation runs in the middle of training: switching to evaluation mode without putting the flags back "
    "leaves dropout and batch norm in evaluation mode for the rest of training. Note each module's training flag "
    "before the block and put each back when it ends.",
    question="In which mode does the rest of the training step find the model?")
TRAIN_MODE_FORCED = Misconception(
    "put the model in training mode whatever its mode was",
    "Switching to training mode at the end turns a model that came in evaluation mode into a training one. Note "
    "the flags before you change them and put those values back.",
    question="In which mode did this model come in?")
MODES_FLATTENED = Misconception(
    "the modes put back as one flag",
    "model.train(flag) sets that flag on every submodule. A model can come in with its modules in different modes "
    "(a batch norm frozen in evaluation mode while the rest trains, as in fine-tuning): putting back the top "
    "module's flag alone unfreezes it, and its running statistics start moving at the next training step.",
    question="Did every module of this model come in with the same training flag?")
STATS_UPDATED = Misconception(
    "running statistics updated by the evaluation",
    "A batch norm layer in training mode updates its running_mean, running_var and num_batches_tracked on every "
    "forward pass, whether or not autograd records: torch.no_grad() stops the graph, not the buffers. The held-out "
    "batch leaks into the statistics the model later evaluates with.",
    question="Which buffers of the model did your evaluation change, and does no_grad govern them?")
DROPOUT_ON = Misconception(
    "evaluated in training mode",
    "In training mode dropout zeroes a random part of the activations at every call, and batch norm normalises with "
    "the batch's own statistics (it refuses a batch of one, and moves its running statistics): what the block "
    "measures is noisy and not the model's. Inside the block every module must be in evaluation mode.",
    question="Which layers of this model behave differently in training and in evaluation mode?")
SOME_MODULES_EVAL = Misconception(
    "evaluation mode for some modules only",
    "Dropout and batch norm are the layers of torch.nn that read their training flag, but any module may: a custom "
    "layer of the caller's (its own noise, its own statistics) reads self.training as they do. A manager that picks "
    "the layers it knows to matter guesses at code it has not seen; the contract is every module of the model.",
    question="Which modules of a model you did not write could read their own training flag?")
NOT_RESTORED_ON_ERROR = Misconception(
    "restored the state only when the block ended normally",
    "When the block raises, the exception comes out of the manager at the point where the block ran: whatever "
    "restoring follows that point runs only if it is written to run on the way out of an exception too. The caller "
    "who catches the error and goes on training then finds the model in evaluation mode or recording off.",
    question="Which of your lines run when the body of the `with` block raises?")
SWALLOWED_ERROR = Misconception(
    "swallowed the block's exception",
    "A batch the model cannot take is the caller's problem to see: a manager that catches the exception (or whose "
    "exit reports it as handled) makes the `with` statement end as if all went well. Put the modes back and let the "
    "exception go on.",
    question="What does the caller learn when the model raises inside your block?")
NESTED_STATE = Misconception(
    "one shared memory for every block",
    "A block inside another block (an evaluation helper that itself uses evaluating, inside an evaluation loop) "
    "must undo only its own changes: the inner block notes the modes it found (all evaluation) and puts those back, "
    "and the outer block still has what it noted. Modes kept in one place that every call overwrites are lost.",
    question="Where does each of two nested blocks keep the modes it found?")
UNFROZE = Misconception(
    "unfroze the frozen layer",
    "Turning requires_grad off for the evaluation and back on afterwards switches it on for every parameter, those "
    "the caller had frozen too: the optimizer then trains a layer that was meant to stay fixed. Recording can be "
    "switched off without touching the parameters' flags.",
    question="Which parameters required grad before the block, and which after?")
GRADS_TOUCHED = Misconception(
    "the pending gradients touched",
    "In the middle of a step the .grad fields hold gradients that are not finished (gradient accumulation: earlier "
    "micro-batches) and the step's backward has still to add to them. The evaluation reads the model; it has no "
    "business with its gradients.",
    question="What were the .grad fields holding when the block began, and who still needs them?")
WRITTEN_BACK = Misconception(
    "put the state back by writing it",
    "Writing the saved values back (copy_, load_state_dict, an assignment into .data) is an in-place write: every "
    "tensor written gets a new version counter, even when the values are the same. The training step's graph saved "
    "some of these tensors (batch norm keeps its running statistics and the Linear layers their weights) and its "
    "backward refuses tensors whose version moved. State that was never changed needs no writing back.",
    question="What do the _version counters of the model's buffers and parameters say before and after the block?")
INFERENCE_OUTPUTS = Misconception(
    "inference tensors out of the block",
    "Under inference_mode the outputs are inference tensors: lesson 09 showed that a recorded computation may not "
    "save them, so the rest of the training step cannot multiply by what the evaluation computed (a weight, a "
    "pseudo-label scaled by a learnable factor). no_grad gives ordinary tensors.",
    question="What may the rest of the step still do with a tensor computed inside your block?")

SELF_CALIBRATED = Misconception(
    "evaluation mode trusted to keep every buffer still",
    "Evaluation mode stops only the modules that read their training flag: a layer that recalibrates on every batch "
    "writes its buffer in place whatever its mode, and that buffer is the very tensor the step's graph saved. "
    "Copying the old value back afterwards moves its version counter too; the evaluation has to run on buffers that "
    "are not the step's, with the step's own tensors put back (the same objects) when the block ends.",
    question="Which of the model's buffers does its forward pass write in evaluation mode too, and which tensor did "
             "the step's graph save?")

# ------------------------------------------------------------------------------------------ Part B2: predicted_bytes

RAN_THE_MODEL = Misconception(
    "measured instead of predicting",
    "predicted_bytes must predict from what each layer saves, without running the model or autograd: measuring "
    "(with saved-tensor hooks, measured_bytes or a forward pass) is what the test does to check the prediction.",
    question="Which part of your function runs a forward pass?")
PARAMETERS_COUNTED = Misconception(
    "counted the parameters",
    "Linear and LayerNorm save their weights too, but the parameters exist whether or not a graph is recorded: leave "
    "out every parameter.",
    question="Would those bytes be in memory without a graph too?")
FOUR_BYTES = Misconception(
    "four bytes per number",
    "float64 takes 8 bytes per number, float32 4: read the size from the model's dtype (a parameter's "
    "element_size()) rather than assuming one.",
    question="How many bytes does one float64 number take?")
INPUTS_MISSED = Misconception(
    "left out the batch itself",
    "The first Linear saves its input, the batch, to compute its weight's gradient: those n × d numbers stay alive "
    "with the graph.",
    question="What does the first Linear need from the forward pass to compute its weight's gradient?")
OUTPUT_COUNTED = Misconception(
    "counted the model's output",
    "Nothing after the last layer saves its output: the output is what the caller holds, not what the graph keeps.",
    question="Which operation would save the model's output?")
LINEAR_SAVES_OUTPUT = Misconception(
    "Linear taken to save its output",
    "A Linear layer saves its input (for its weight's gradient) and its weight, never its output: its backward "
    "needs only those. An output is kept only when the next operation saves it.",
    question="What does a Linear layer's backward need: its input, or its output?")
SAVES_OUTPUT_LIKE_RELU = Misconception(
    "every activation taken to save its output, as ReLU does",
    "ReLU, tanh and sigmoid save their output, which the next Linear saves too: one storage. GELU and LeakyReLU save "
    "their INPUT, the Linear's output before them, and the next Linear saves their output: two storages.",
    question="What does GELU's or LeakyReLU's derivative need: the input or the output?")
INPLACE_LIKE_OUT_OF_PLACE = Misconception(
    "in-place LeakyReLU counted like the out-of-place one",
    "In place, LeakyReLU overwrites its input, so it cannot save it: it saves its output instead (the sign of the "
    "output tells the slope), and that is the very storage the next Linear saves. One storage, not two.",
    question="After an in-place activation, how many distinct blocks of memory hold its input and its output?")
MASK_MISSED = Misconception(
    "dropout taken to save nothing",
    "In training mode dropout multiplies by a random mask (0 or 1/(1-p)), and its backward needs that mask: on the "
    "CPU it is saved as a tensor of the activations' size and dtype.",
    question="What does dropout's backward multiply the incoming gradient by?")
MASK_ONE_BYTE = Misconception(
    "dropout's mask counted at one byte a number",
    "A mask of zeros and ones could be stored as bools, but on the CPU dropout saves its scaled mask in the "
    "activations' own dtype: 4 bytes a number in float32, 8 in float64.",
    question="Which dtype does the saved mask have here?")
DROPOUT_IN_EVAL = Misconception(
    "dropout counted in evaluation mode",
    "In evaluation mode dropout is the identity: it returns its input unchanged and saves nothing, so the next "
    "Linear saves the very storage that came in.",
    question="What does dropout do to its input when the model is in evaluation mode?")
RESIDUAL_ADD_SAVES = Misconception(
    "the residual sum taken to save its inputs",
    "x + f(x) has the derivative 1 with respect to each input: its backward needs nothing, and it saves nothing. The "
    "block's input is kept by the block's first Linear, and the sum by whatever layer comes next.",
    question="What does the backward of an addition need to know?")
LAYERNORM_STATS_MISSED = Misconception(
    "LayerNorm's statistics left out",
    "LayerNorm saves its input and, per example, the mean and the reciprocal standard deviation it computed: two "
    "tensors of n numbers each, besides its weight and bias.",
    question="What besides its input does LayerNorm's backward reuse from the forward pass?")
LAYERNORM_STATS_FULL = Misconception(
    "LayerNorm's statistics counted at the activations' size",
    "The mean and the reciprocal standard deviation are one number per example (shape (n, 1)), not one per feature.",
    question="How many numbers does one example's mean take?")
LINEAR_INPUTS_ONLY = Misconception(
    "only what the Linear layers save counted",
    "Counting the batch and one activation per Linear layer is lesson 09's tanh model: there every activation saves "
    "what the next Linear saves anyway. GELU, LeakyReLU, dropout and LayerNorm each save something of their own.",
    question="Which layers of this model save something that no Linear layer saves?")

# ------------------------------------------------------------------------------------------ Part C1: the cuts

CUT_PREFIX = Misconception(
    "judged each stage by the pipeline up to it",
    "Comparing autograd with central differences on the pipeline from its input to a stage tests every stage before "
    "it as well: once one stage is broken, every later prefix disagrees too. Test each stage on its own, at the input "
    "it receives, as a fresh leaf.",
    question="When the pipeline up to a stage disagrees with central differences, which stages could be at fault?")
CUT_NO_GRAPH = Misconception(
    "looked for a missing graph instead of measuring",
    "A stage can return an output that requires grad and has a grad_fn and still give a wrong gradient: a detached "
    "statistic, a hook that rewrites the gradient, a hand-written backward. Only a comparison with central "
    "differences, which never looks at the graph, sees them.",
    question="Which broken stages still hand back an output that requires grad?")
CUT_SUM_DIRECTION = Misconception(
    "compared the gradients along one direction only",
    "Autograd gives the gradient of one number: reducing a stage's output by a plain sum tests one direction, and a "
    "stage can be right along it and wrong along others (a straight-through sort: the sum of the sorted values does "
    "not depend on the order; a normalisation: its output always sums to zero). Reduce with weights drawn at random.",
    question="Does the sum of a stage's output see every way the stage's gradient can be wrong?")
CUT_EXACT = Misconception(
    "central differences expected to match exactly",
    "Central differences carry a truncation and a round-off error (about 1e-9 relative in float64 at a step of 1e-6): "
    "a sound stage never matches autograd to the last bit. Compare with a tolerance between that error and the size "
    "of a real disagreement.",
    question="How close do autograd and central differences come on a stage you know is sound?")
CUT_TIGHT = Misconception(
    "a tolerance tighter than central differences' own error",
    "Central differences are accurate to about 1e-9 of a gradient's largest entry only where the function is smooth "
    "around the point: at a tie (two entries sharing a row's largest magnitude, as after a clamp) or a kink, a sound "
    "stage's gradient and central differences part by the order of the step itself. Where 'agrees' ends must lie "
    "above the worst of that noise, measured, and below the least broken stage.",
    question="How far do central differences stray on a sound stage whose input has a tie, and how far off is the "
             "least broken stage?")
CUT_SUFFIX = Misconception(
    "judged each stage with everything after it",
    "Comparing autograd with central differences on the pipeline from a stage to its end tests every stage after it "
    "as well: every stage before the last broken one is named with it. Test each stage on its own, at the input it "
    "receives, as a fresh leaf.",
    question="When the pipeline from a stage to its end disagrees with central differences, which stages could be at "
             "fault?")
CUT_LOOSE = Misconception(
    "a tolerance looser than the smallest real disagreement",
    "Central differences in float64 agree with a sound stage's gradient to about 1e-9 of its largest entry; a broken "
    "stage can be off by only a few per cent (a hand-written backward with a wrong constant factor). A tolerance "
    "picked by habit, far above that noise, lets such a stage through: where 'agrees' ends is a measurement of both "
    "sides, not a convention.",
    question="How close do central differences come on a stage you know is sound, and how far off is the least "
             "broken stage you found?")
CUT_PIPELINE_INPUT = Misconception(
    "measured every stage at the pipeline's input",
    "A stage's gradient can be right on part of its domain and wrong on the rest (a clamp whose hand-written backward "
    "lets the gradient through where the value was clamped): measured at the pipeline's input, it is measured where "
    "it never runs. Each stage is on trial at the values the stage before it hands on.",
    question="At which values does each stage run when the pipeline runs on `inputs`, and at which did you measure it?")
CUT_INFERENCE_LEAF = Misconception(
    "an inference tensor made a leaf",
    "A stage run under inference_mode hands the next stage an inference tensor: it may not be set to require grad "
    "outside inference_mode (lesson 09: clone it first, which gives an ordinary tensor).",
    question="What kind of tensor does the stage after an inference_mode stage receive?")
CUT_CRASHED = Misconception(
    "a stage that records nothing crashed the locator",
    "A stage whose output does not require grad, even for an input that does, has cut the graph entirely: its "
    "recorded gradient is zero everywhere, and that is a finding, not an error.",
    question="What is autograd's gradient for a stage whose output records no graph?")
# ------------------------------------------------------------------------------------------ Part C2: compiled once

GRAPH_BREAK = Misconception(
    "a graph break left in the compiled function",
    "A graph break splits the function into several graphs, each compiled on its own (and fullgraph=True refuses "
    "it): a print, .item() or .tolist() feeding Python, or a call Dynamo cannot trace. Keep such lines out of the "
    "compiled function, in the plain Python around it.",
    question="Which line of your compiled function does Dynamo hand back to Python?")
NEVER_COMPILED = Misconception(
    "the given backend never called",
    "The test counts compilations through the backend it passes in: a function compiled with another backend, or "
    "not compiled at all, never reaches it.",
    question="Which backend does your torch.compile call use?")
EAGER_FALLBACK = Misconception(
    "some requests answered without the compiled graph",
    "A server that compiles once must also run what it compiled: answering later requests with the plain function "
    "(eager) gives the right numbers and hides every recompilation the stream would cause.",
    question="Which of your server's requests ran the graph the backend compiled?")
MODEL_OUTSIDE = Misconception(
    "the model run outside the compiled function",
    "A compiled function that receives the model's scores captures only the clipping: the model's layers, the "
    "bulk of the work, run eagerly on every request. The graph must hold the forward pass.",
    question="Which Linear layers does the graph the backend receives contain?")
LIMIT_SPECIALISED = Misconception(
    "the limit compiled in as a constant",
    "Dynamo first treats a Python number argument as a constant of the graph, guarded by its value: the next "
    "request with another limit fails the guard and compiles again. A tensor argument is guarded by its dtype and "
    "shape only, and a function compiled as dynamic treats numbers as symbols from the start.",
    question="Which arguments does Dynamo guard by their value, and which by their shape and dtype only?")
BATCH_SPECIALISED = Misconception(
    "the batch size compiled in",
    "Dynamo compiles for the shapes it sees first and guards on them: a request with a new batch size fails the "
    "guard and compiles again (the second time with the size as a symbol). Compile for a symbolic batch size from "
    "the start, or give every request the same shape.",
    question="What did your server's first compilation assume about the batch size?")
ONE_SPECIALISED = Misconception(
    "a batch of one compiled separately",
    "Even a dynamic size is specialised when it is 0 or 1: Dynamo assumes a symbolic size is at least 2 (so that "
    "broadcasting stays decidable), and a request of one row fails that guard. An axis made by expand has stride "
    "0, which another guard sees. The single request needs the shape and strides the graph was compiled for.",
    question="Which batch sizes does a symbolic size stand for, and what did your server hand the graph for a "
             "single request?")
EXPANDED_ROW = Misconception(
    "a single row widened by expand (stride 0)",
    "expand makes a view without copying: the rows it adds share the original row's memory, so its batch axis has "
    "stride 0. Dynamo guards on strides as well as sizes, and the graph compiled for ordinary batches (each row its "
    "own memory) does not fit such a view: it compiles again.",
    question="What strides did the tensor your server handed the graph for a single request have, and those of the "
             "batches before it?")
LIMIT_FLOAT32 = Misconception(
    "the limit turned into a float32 tensor",
    "torch.tensor of a Python float is float32 unless told otherwise: the limit is rounded to the nearest float32, "
    "and clipped float64 scores differ from the answer around the 8th digit.",
    question="Which dtype has the limit your graph compares with, and which do the scores have?")
PADDING_COUNTED = Misconception(
    "the padding rows counted in the fraction",
    "Rows added to give every request the same shape are not requests: the fraction is over the request's own "
    "rows, and padding rows must neither count as clipped nor enlarge the denominator.",
    question="Over how many rows is your fraction averaged, and how many did the request have?")
FRACTION_NOT_TENSOR = Misconception(
    "the fraction returned as a Python number",
    "The part asks for the fraction as a 0-d tensor, as the given function returns it; the caller turns it into a "
    "number when it prints.",
    question="What type does the part ask the fraction to be?")
