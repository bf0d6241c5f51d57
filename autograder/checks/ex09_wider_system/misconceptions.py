"""Exercise 09's named mistakes, one place for every part (what each check recognises them by is in its part's
module)."""

from __future__ import annotations

from ...checking import Misconception

NOT_A_NUMBER = Misconception(
    "a tensor where the part asks for a Python number",
    "Return a plain Python number (loss.item(), float(...), int(...)): a tensor can keep its graph, and everything "
    "that graph saved, alive for as long as the caller keeps the result.")

SWAPPED = Misconception(
    "vanishing and exploding swapped",
    "layer_grad_norms runs from the FIRST layer (input side) to the LAST. A first layer whose gradient is orders of "
    "magnitude smaller than the last one's received a gradient that shrank on its way back (vanishing); larger, one "
    "that grew (exploding).")
ACCUMULATION_AS_EXPLOSION = Misconception(
    "a missing zero_grad called 'exploding'",
    "The loss bounces back up, but everything stays finite and the per-layer norms are ordinary: nothing is "
    "multiplied through depth. The step grows because .grad keeps the SUM of all earlier gradients: accumulation, "
    "not explosion.")
WAITED_FOR_NAN = Misconception(
    "waited for inf/nan to call it exploding",
    "Runs that clip their gradients keep a finite loss, yet their gradients still grow by orders of magnitude from "
    "the last layer to the first. The per-layer profile is the fingerprint; inf/nan is only its loudest outcome.")
TRUSTED_TRAINING_LOSS = Misconception(
    "trusted the falling training loss",
    "The training loss falls smoothly, but val_loss ends near baseline_loss: the model learned no more than the mean "
    "of the targets, because it optimised another loss than intended ((n, 1) predictions minus (n,) targets "
    "broadcast to an (n, n) matrix).")
STOPPED_AT_LOSS = Misconception(
    "stopped at the loss",
    "Vanishing gradients and the broadcasting bug both end at the baseline, with the same loss curve. Only the "
    "per-layer profile tells them apart: a first layer that receives almost nothing is vanishing; ordinary "
    "per-layer norms mean the loss itself is wrong.")
NOISE_AS_BOUNCE = Misconception(
    "mini-batch noise read as a bounce",
    "Each step's loss is computed on a random mini-batch, so even a healthy curve rises a little now and then. A "
    "missing zero_grad makes the loss climb several times above its best after it has fallen: set your threshold in "
    "the gap the example traces show between the two.")
MISSED_BOUNCE = Misconception(
    "missed the bounce",
    "This run fell fast and then climbed back several times above its best loss, with ordinary per-layer norms: "
    "the accumulated .grad overshoots. Look for the bounce before judging the end of the run.")
IGNORED_EXCEPTION = Misconception(
    "ignored the exception",
    "Training stopped with an exception: trace['raised'] is the loudest symptom of all, so read it first.")
HELD_OUT_TOO_STRICT = Misconception(
    "held-out threshold too strict",
    "A healthy run ends with val_loss a fraction of baseline_loss, never zero (the targets are noisy); the "
    "broadcasting bug ends near baseline_loss itself. Put the cut in the gap between the two.")
GRADIENT_SIZE = Misconception(
    "judged by the size of the gradients",
    "A gradient's size depends on how the loss is written: a loss summed over the mini-batch instead of averaged "
    "makes every loss and gradient 256 times larger, and trains exactly the same. Exploding is growth through depth: "
    "compare the first layer's gradient with the last one's (a ratio has no units).")
CLIMB_BEFORE_PROFILE = Misconception(
    "read the climb before the per-layer profile",
    "An exploding run that clips its gradients keeps a finite loss, and that loss can climb far above its best, as "
    "a missing zero_grad does: the climb alone does not tell the two apart. Its per-layer profile does (a depth ratio "
    "of 10^4 or more, never reached by a missing zero_grad): check it before the climb.")
THRESHOLD_PAST_BOUND = Misconception(
    "threshold past the table's bound",
    "This run's value of the quantity lies inside the band the table states for its kind, and your diagnose names the "
    "same trace right once that value is pushed far beyond: the quantity is read, but the threshold sits past the "
    "stated bound. Put it inside the gap between the kinds' bounds (in its middle, on a log scale for ratios), not "
    "just past the examples.")
TRAINING_LOSS_AS_HELD_OUT = Misconception(
    "compared the training loss with the baseline",
    "loss is the training code's own number: a run that sums its loss over the mini-batch logs 256 times the mean, "
    "so its training loss says nothing about how far the model got. val_loss is computed the same way in every run "
    "(a mean squared error on held-out data): compare that with baseline_loss.")
CHANGED_TRACE = Misconception(
    "changed the trace it reads",
    "diagnose only reads the trace: the caller keeps plotting and logging it. Clean or sort into new lists "
    "(sorted(...), a list comprehension) instead of assigning into the trace or sorting its lists in place.")

RECORDED_GRAPH = Misconception(
    "recorded a graph during evaluation",
    "Autograd saved tensors for a backward pass that never comes: evaluation needs no gradients. Run the model "
    "inside torch.no_grad() (or torch.inference_mode()) so that nothing is recorded; detaching or calling .item() "
    "afterwards is too late, the graph was already built.")
BROADCAST_LOSS = Misconception(
    "(n, 1) predictions against (n,) targets",
    "The model returns shape (n, 1); targets shaped (n,) broadcast against it to an (n, n) matrix of every "
    "prediction minus every target, and its mean is not the mean squared error. Bring both to the same shape first "
    "(targets.reshape(predictions.shape), or flatten both).")
SUM_NOT_MEAN = Misconception(
    "summed the squared errors",
    "The mean squared error divides the sum of squared errors by the number of examples, so that it does not grow "
    "with the size of the held-out set.")
SQUEEZED_AGAINST_COLUMN = Misconception(
    "(n,) predictions against (n, 1) targets",
    "Your predictions were flattened to (n,) but the targets here are (n, 1): the subtraction broadcasts to an (n, n) "
    "matrix of every prediction minus every target again, whose mean is not the mean squared error (it can even lie "
    "close to it). Bring BOTH to one shape (reshape one to the other's shape, or flatten both).")
GRAD_MODE_LEFT = Misconception(
    "switched recording off for the rest of training",
    "torch.set_grad_enabled(False) (or torch.autograd.set_grad_enabled) called on its own switches autograd off for "
    "everything that runs after it, the next training steps included: their backward finds no graph. Use it as a "
    "context manager, `with torch.no_grad():`, so that recording comes back when the evaluation ends.")
EVAL_MODE_LEFT = Misconception(
    "switched the model to eval mode",
    "held_out_loss runs in the middle of training: model.eval() without putting the flag back leaves dropout and "
    "batch norm in evaluation mode for every later training step. eval() is not what stops the recording (no_grad "
    "does); leave model.training as you found it, or restore it before returning.")
TRAIN_MODE_FORCED = Misconception(
    "put the model in training mode whatever its mode was",
    "model.train() at the end switches a model that came in evaluation mode to training mode. Remember the flag "
    "before you change it and put that value back: model.train(was_training).")
ROOT_MEAN = Misconception(
    "root of the mean squared error",
    "The traces log the mean squared error itself, without a square root, so that it compares with the training "
    "loss.")

DOUBLE_COUNTED = Misconception(
    "counted a shared storage twice",
    "A tensor saved by two operations (an activation's output is saved by the activation and by the next Linear) "
    "is one block of memory: key the sizes by the storage (tensor.untyped_storage().data_ptr()) and count each once.")
PARAMETERS_COUNTED = Misconception(
    "counted the parameters",
    "Linear saves its weight too, but the parameters exist whether or not a graph is recorded: leave out every "
    "storage that belongs to a parameter of the model.")
TENSOR_NOT_STORAGE = Misconception(
    "counted the view, not its storage",
    "A saved view (here the inputs, a slice of a larger batch) keeps its WHOLE storage alive: count "
    "tensor.untyped_storage().nbytes(), not the view's numel() * element_size().")
FOUR_BYTES = Misconception(
    "four bytes per number",
    "float64 takes 8 bytes per number, float32 4: read the size from the storage (untyped_storage().nbytes()) "
    "rather than assuming one.")
GRAD_MODE_IGNORED = Misconception(
    "measured under the caller's no_grad",
    "Recording is a setting of the thread, not of the model: called inside torch.no_grad(), your forward pass "
    "recorded nothing. Switch it back on for the measurement with torch.enable_grad().")

ANSWERED_BY_POSITION = Misconception(
    "answered by position",
    "Your function returned the same letter for two different orders of the same options. The options come in a "
    "new order under new letters at grading time: choose by content (letter_of(options, phrase)), not by letter.")

INFERENCE_AS_NO_GRAD = Misconception(
    "inference_mode taken for no_grad",
    "Both switch recording off, but inference_mode also marks its outputs as inference tensors, which autograd may "
    "never save for backward: t * a needs a to compute t's gradient, so it raises at once, in the forward pass. A "
    "result of no_grad is an ordinary constant. Compute cached values under no_grad, or .clone() an inference tensor "
    "before it enters a recorded computation.")
RECORDING_OFF_FORBIDDEN = Misconception(
    "a result of no_grad taken for one autograd refuses",
    "A tensor computed under no_grad is an ordinary tensor that does not require grad: a constant to autograd. It may "
    "enter a recorded computation like any other constant; only inference tensors (inference_mode) may not be saved "
    "for backward.")
CONSTANT_BLOCKS_GRADIENT = Misconception(
    "a constant factor taken for a blocked gradient",
    "b is a constant to autograd, but t requires grad: t * b is recorded, and t's gradient is b's sum, 6. The "
    "stop-gradient only means nothing flows back into whatever computed b.")
CLIPPED_PER_TENSOR = Misconception(
    "clipping taken per tensor",
    "clip_grad_norm_ clips the GLOBAL norm of all the gradients together: one factor, max_norm / total norm, "
    "multiplies every one of them, so a small gradient shrinks with the large one.")
CLIPPING_EQUALISES = Misconception(
    "clipping taken to even out the layers",
    "Clipping multiplies every gradient by the same factor, so every ratio between layers stays exactly what it was: "
    "it tames the size, never the profile.")
CLIP_ONLY_MEASURES = Misconception(
    "clip_grad_norm_ taken to only measure",
    "The trailing underscore means in place: clip_grad_norm_ rescales every .grad and also returns the total norm it "
    "measured before clipping.")
INTERMEDIATE_GRAD = Misconception(
    "intermediate tensors keep .grad",
    "Only leaves keep a .grad (an intermediate one only after retain_grad()), and backward frees the graph unless "
    "asked to retain it.")
BACKWARD_RETURNS = Misconception(
    "backward returns the gradients",
    "backward() returns None and stores the gradients in the leaves' .grad; torch.autograd.grad is the function "
    "that returns them.")
BACKWARD_UPDATES = Misconception(
    "backward updates the weights",
    "backward() only computes gradients; the optimizer's step(), or your own update under no_grad, changes the "
    "weights.")
GRAD_OVERWRITTEN = Misconception(
    "backward overwrites .grad",
    "backward() adds the new gradient into .grad; it never replaces what is there. Three backward calls without a "
    "reset leave the sum of all three, which is why a training loop clears .grad once per step.")
FILLED_GRAD_RAISES = Misconception(
    "backward refuses a filled .grad",
    "backward() raises nothing: it silently adds, which is exactly why a forgotten reset is dangerous.")
GRAPH_REUSED = Misconception(
    "one graph assumed for every pass of the loop",
    "The forward line runs again on every pass of the loop and records a new graph, so every backward has a fresh "
    "graph to walk; only .grad carries over from one pass to the next.")
IDENTITY_SCALED = Misconception(
    "identity path scaled by F′",
    "The identity y = x has derivative 1: it passes the upstream gradient on unchanged, and the branch adds F′(x) "
    "times it.")
ROUTES_AVERAGED = Misconception(
    "routes averaged", "Gradients arriving by two routes add up; they are never shared out or averaged.")
ONE_NOT_UPSTREAM = Misconception(
    "1 added instead of the upstream gradient",
    "The identity path contributes ∂L/∂y · 1, the upstream gradient itself, not the number 1.")

CHOSE_BY_FORM = Misconception(
    "chose by the form of the options",
    "Every wrong choice you made shares a form (the longest option, the shortest, or the one repeating the "
    "question's words), not a content. The options here are alike in length and form on purpose: read what each "
    "one claims and pick the one the course showed to be true.")
