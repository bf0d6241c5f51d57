"""Exercise 11's named mistakes, one place for all six parts (what each check recognises them by is in its part's
module)."""

from __future__ import annotations

from ...misconceptions import Misconception

# Part A: logsumexp, a node of many inputs
LSE_OVERFLOW = Misconception(
    "exp of a large input overflows: no shift by the largest input",
    "exp(1000) is beyond float64 (math.exp raises OverflowError, torch gives inf). log Σ exp(v) = m + log Σ exp(v − m) "
    "for any m: with m the largest input every exponent is at most 0, so nothing overflows and the largest term is 1.",
    question="What is exp(1000) in float64, and what may you subtract from every input without changing the result?")
LSE_COMPOSED = Misconception(
    "logsumexp built from the engine's other operations instead of one node",
    "The part asks for one node of your engine whose inputs are the given Values and whose backward you write: a "
    "composition of exp, + and log gets its gradient from those operations' rules, not from your derivation (and "
    "overflows where exp does).",
    question="How many nodes does your logsumexp add to the graph, and whose backward rule computes the inputs' "
             "gradients?")
GRAD_ASSIGNED = Misconception(
    "gradient assigned instead of accumulated",
    "A node's backward adds its share into each input's .grad (+=): an input used elsewhere, or listed twice, "
    "receives several shares, and = keeps only the last one.",
    question="What happens to a Value's .grad when it is an input of two nodes, or listed twice?")
LSE_UPSTREAM_MISSING = Misconception(
    "local derivative not multiplied by the node's gradient",
    "Each input's share is its local derivative, exp(v − out), times out.grad, the gradient that reached the node "
    "from above: out.grad is 1 only when the node is the very last one.",
    question="When logsumexp's output is multiplied by 3 further on, what does its backward receive in out.grad?")
LSE_NOT_NORMALISED = Misconception(
    "exp(v) as the local derivative, without dividing by the sum",
    "d log(S)/d v = (1/S)·dS/dv with S = Σ exp(v): the local derivative is exp(v)/S = exp(v − out), the input's "
    "softmax weight; the weights of all inputs add up to 1.",
    question="What do the local derivatives of all the inputs add up to?")
MAX_ROUTE_COUNTED = Misconception(
    "a route through the shift counted",
    "The shift m cancels: m + log Σ exp(v − m) is the same function of the inputs whatever m is, so no gradient "
    "flows through m (take it as a constant, the largest input's value). Each input's derivative is its softmax "
    "weight, the largest one's included.",
    question="Does the value of logsumexp change if you shift by another m, and what does that say about a gradient "
             "through m?")
# Part B: training on the moons
HINGE_WITH_01_LABELS = Misconception(
    "the labels 0 and 1 used as the hinge's sign",
    "The hinge max(0, 1 − s·score) needs s = +1 for label 1 and s = −1 for label 0: with s = 0 a class-0 point's loss "
    "is the constant 1, it never pushes, and the model learns to call every point class 1.")
STEPPED_UP = Misconception(
    "stepped up the gradient",
    "Gradient descent subtracts: p.data -= lr * p.grad (with momentum, velocity = μ·velocity + p.grad and "
    "p.data -= lr * velocity). Adding moves every parameter in the direction that makes the loss larger, so the "
    "loss climbs instead of falling.")
ZERO_GRAD_FORGOTTEN = Misconception(
    "zero_grad forgotten: gradients pile up across steps",
    "backward() adds into .grad, it never overwrites it: call model.zero_grad() on every step, before "
    "loss.backward(), or each update follows the sum of every gradient so far instead of this batch's.")
MODEL_NOT_TRAINED = Misconception(
    "trained another model than the one given",
    "train_moons(model, points, labels) must train the model it is passed, in place (the test measures that one): "
    "call model(x), model.parameters() and model.zero_grad() on it, not on a model built inside.")
LOSSES_AS_VALUES = Misconception(
    "losses kept as Values instead of Python floats",
    "Keep each loss as a number (loss.data): a stored Value keeps the whole graph of its step alive.")
# Part C: SiLU
SIGMOID_DERIVATIVE = Misconception(
    "used the sigmoid's derivative for SiLU",
    "SiLU(x) = x·σ(x) is a product: its derivative is σ(x) + x·σ(x)(1 − σ(x)), not σ(x)(1 − σ(x)) alone.")
PRODUCT_RULE_HALF = Misconception(
    "product rule with one term",
    "d(x·σ(x))/dx has two terms, σ(x)·1 and x·σ'(x); you kept one.")
EXP_OVERFLOW_SILU = Misconception(
    "SiLU's derivative written with exp(−x), which overflows",
    "σ'(x) = e^{−x}/(1 + e^{−x})² is right on paper, but e^{−x} is inf in float64 for x below about −709 (and e^{x} "
    "above 709), and inf·0 or inf/inf is nan. Written with σ itself, σ(1 − σ), and σ from torch.sigmoid, which "
    "stays finite everywhere, nothing overflows: SiLU's derivative tends to 0 on the far left and to 1 on the far "
    "right.",
    question="What is exp(1000) in float64, and can you write σ'(x) with σ(x) alone?")
MISSING_UPSTREAM = Misconception(
    "local derivative not multiplied by dy", "Multiply the local derivative by dy, the gradient arriving from above.")

# Part C.2: the residual block
SKIP_FORGOTTEN = Misconception(
    "the skip connection's gradient forgotten",
    "y = x + f(x): x reaches y directly as well as through the branch, and the identity passes the gradient from "
    "above through unchanged, so dx is dy plus what comes back through the branch. Without the skip, a block whose "
    "branch starts at zero would pass no gradient down at all.",
    question="By how many routes does x reach y, and what does the route without any layer on it add to dx?")
BRANCH_FORGOTTEN = Misconception(
    "the branch's gradient to x forgotten",
    "dx collects both routes from x to y: the skip's dy and what flows back through the branch, from dh through "
    "SiLU and the first layer's weights. Only when the branch's output is constant in x (W2 = 0) is dx = dy.",
    question="Does the branch's output change when x changes, and what does that add to dx?")
SILU_AT_OUTPUT = Misconception(
    "SiLU derivative taken at its output",
    "SiLU's derivative is evaluated at SiLU's input, the pre-activation u = x·W1 + b1, not at its output "
    "h = silu(u): keep u from the forward pass.",
    question="At which tensor of the forward pass is SiLU's derivative evaluated: its input or its output?")
TANH_RULE_PORTED = Misconception(
    "tanh's derivative rule used for SiLU",
    "1 − h² is tanh's derivative written with tanh's output; SiLU has a derivative of its own, "
    "σ(u)·(1 + u·(1 − σ(u))) at its input u, which no formula in its output alone gives.",
    question="Whose derivative is 1 − h², and what is SiLU's, written with σ(u) and u?")
PRE_ACTIVATION_READ = Misconception(
    "second layer's weight gradient from the pre-activation",
    "The second linear layer reads h = silu(u), so the gradient of W2 is hᵀ·dy; the pre-activation u is what the "
    "first layer produces, before SiLU.",
    question="Which tensor does the second linear layer multiply by W2: the pre-activation or SiLU's output?")
SAVED_TOO_MUCH = Misconception(
    "the forward saved more than the backward needs",
    "Every saved tensor stays in memory from the forward pass until the backward has run, for every layer of the "
    "network at once. The inputs are kept by the caller anyway; of the new tensors, one of shape (N, H) is enough, "
    "because everything else the backward reads can be rebuilt from it with elementwise work.",
    question="Of the (N, H) tensors your forward saves, can the backward rebuild one from another, and which one "
             "determines all the others?")
FORWARD_RECOMPUTED = Misconception(
    "the backward ran the forward's matrix product again",
    "Recomputing x·W1 in the backward saves memory at the price of a whole matrix product per step, which this part "
    "does not allow: the backward needs four products (two per linear layer) and elementwise work. Save what that "
    "product gave, within the budget, and read it back.",
    question="Which matrix products does the backward need, and is x·W1 among them?")
READ_OUTSIDE_SAVED = Misconception(
    "the backward read something besides saved and dy",
    "Autograd may run many forward passes before it runs their backward passes (a model applies the block at every "
    "layer; checkpointing reruns forwards), so a backward gets everything it needs through saved: a global, an "
    "attribute of the function or a closure left by the last forward belongs to whichever call ran last.",
    question="If another forward ran between your forward and your backward, what would your backward read?")

# Part D: BatchNorm
UNBIASED_NORMALISATION = Misconception(
    "normalised with the unbiased variance",
    "In training mode BatchNorm divides by sqrt(var + eps) with the biased variance, the mean of (x − mean)² over "
    "the N examples: x.var(0, unbiased=False). torch.var's default divides by N − 1; PyTorch uses that one only "
    "for the running variance. Forward and backward must use the same one.")
EPS_OUTSIDE = Misconception(
    "eps added outside the square root",
    "The denominator is sqrt(var + eps), eps inside: it is what keeps a feature whose values are all equal "
    "(var = 0) finite. sqrt(var) + eps is another function, and its derivative is infinite at var = 0.")
RUNNING_IN_TRAINING = Misconception(
    "running statistics used in training mode",
    "In training mode BatchNorm normalises with the statistics of the batch it is given (that is what makes every "
    "example's output, and gradient, depend on the whole batch); the running statistics are only updated there, "
    "and used at evaluation.")
BATCH_AT_EVAL = Misconception(
    "batch statistics used at evaluation",
    "At evaluation (training=False) BatchNorm normalises with running_mean and running_var, so an example's output "
    "does not depend on which other examples share its batch, and a batch of one works. Batch statistics are for "
    "training mode only.")
RUNNING_NOT_IN_PLACE = Misconception(
    "running statistics not updated in place",
    "The caller keeps its running_mean and running_var tensors (a model's buffers): update those very tensors, "
    "running_mean.mul_(1 - momentum).add_(momentum * mean) or running_mean.copy_(...). running_mean = ... only "
    "rebinds your local name, and running_mean.data = ... gives the tensor new memory that views of it never see.")
MOMENTUM_SWAPPED = Misconception(
    "momentum the other way round",
    "PyTorch's convention: running = (1 − momentum)·running + momentum·batch statistic, so momentum = 0.1 moves "
    "the running value a tenth of the way towards the batch's. You weighted the old value by momentum (Keras's "
    "convention).")
BIASED_RUNNING_VAR = Misconception(
    "running variance updated with the biased variance",
    "The running variance estimates the variance of the whole data set, so PyTorch updates it with the unbiased "
    "batch variance (divided by N − 1), while training-mode normalisation uses the biased one (divided by N).",
    question="Train nn.BatchNorm1d(1, momentum=None) on one batch of 2: how does its running_var compare with the "
             "batch's variance divided by N?")
SCALE_INVERTED = Misconception(
    "evaluation's scale the other way round",
    "Evaluation divides x − μ by sqrt(running_var + ε) where training divided it by sqrt(σ² + ε), σ² the batch's "
    "biased variance: the ratio of the evaluation output to the training output is the second over the first, so "
    "it is below 1 when the running variance is the larger.",
    question="Which standard deviation divides the evaluation output, which one the training output, and which of "
             "the two is larger here?")
RUNNING_TAKEN_AS_SETTLED = Misconception(
    "running variance taken as settled",
    "After a finite number of training calls the running variance still holds a share of its starting value: "
    "(1 − m)^k of it after k calls with momentum m, and c/(c + k) of it with momentum=None from a counter at c. "
    "It reaches the unbiased batch variance only in the limit (at once only with momentum=None from a counter "
    "at 0).",
    question="After k calls, what share of the starting running_var is still in it, for your momentum and counter?")
SCALE_STEPPED = Misconception(
    "eval_scale stepped through the training calls one by one",
    "A loop that applies the update once per training call costs time in proportion to the number of calls, so it "
    "cannot answer for 10^12 calls. The running variance after k calls is a mix of its start and of the batch's "
    "variance that nn.BatchNorm1d keeps, and the start's share has a closed form in k: (1 − m)^k with momentum m, "
    "c/(c + k) with momentum=None from a counter at c.",
    question="After k calls, how does the share of the starting running_var depend on k, written without the "
             "calls in between?")
RUNNING_UPDATED_AT_EVAL = Misconception(
    "running statistics updated at evaluation",
    "training=False must change nothing: evaluating a model (on a test set, or on a single example) must not move "
    "its running statistics, or the next evaluation gives another answer.")
CUMULATIVE_OFF_BY_ONE = Misconception(
    "cumulative average weighted off by one",
    "With momentum=None the running statistics are the plain average of the statistics of every training batch "
    "counted so far, each batch once whatever its size: after the call that makes num_batches_tracked equal t, "
    "this batch weighs 1/t and the average of the t − 1 before it (t − 1)/t. So a counter at 0 makes the first "
    "batch replace the initial values entirely, and a counter at 5 gives the next batch 1/6.",
    question="Once this call is counted, how many batches does the average cover, and what share of it is this "
             "batch's?")
COUNTER_NOT_ADVANCED = Misconception(
    "batch counter not advanced in the caller's tensor",
    "num_batches_tracked counts every training-mode batch, whatever momentum is (nn.BatchNorm1d's buffer does the "
    "same), and the caller keeps it from call to call: add 1 to that very tensor, in place. Binding a new number "
    "to the name leaves the caller's count where it was, and the next cumulative average weighs its batch wrongly.",
    question="Which tensor does the caller read at its next call, and did your call change it, whatever the "
             "momentum?")
BATCH_OF_ONE_TRAINED = Misconception(
    "a batch of one accepted in training mode",
    "With one example the batch variance is 0 divided by N and 0/0 divided by N − 1: every output would be beta "
    "and the running variance would turn nan or inf. nn.BatchNorm1d raises ValueError on such a batch in training "
    "mode; so must yours, before it changes anything.",
    question="What is the unbiased variance of a single number, and what does nn.BatchNorm1d do with one example "
             "in training mode?")
REFUSED_BATCH_COUNTED = Misconception(
    "a refused batch still changed the layer's state",
    "A call that raises must leave the caller's tensors as they were. nn.BatchNorm1d itself counts the batch of "
    "one before it refuses it (its num_batches_tracked moves: measure it), so every later cumulative average is "
    "diluted by a batch that never arrived; the part asks for the refusal before any change.",
    question="In what order does your function look at the batch and change the caller's tensors?")
RUNNING_IN_GRAPH = Misconception(
    "running statistics recorded by autograd",
    "In a network, x is the output of a layer being trained (x = X @ W with W requiring grad), so the batch's mean "
    "and variance are nodes of this step's graph. An in-place update that autograd records makes the caller's "
    "running_mean and running_var nodes of that graph too: each step's graph stays alive through them, chained to "
    "the next step's, and a backward through an evaluation-mode output reaches back into old steps. The running "
    "statistics are bookkeeping, not something to differentiate: update them where autograd does not record. "
    "nn.BatchNorm1d's buffers never require grad.",
    question="Which graph does your running mean belong to after this call, and what keeps that graph alive?")
MOMENTUM_ZERO_AS_NONE = Misconception(
    "momentum 0 taken for None",
    "momentum=0.0 is a number, not a missing one: PyTorch's exponential average with m = 0 leaves the running "
    "statistics exactly as they were (a frozen layer), while num_batches_tracked still counts the batch. Only "
    "momentum=None asks for the cumulative average; a test of momentum's truth value cannot tell 0 from None.",
    question="What does (1 − m)·running + m·batch give for m = 0, and which of your two averages ran for it?")
LIBRARY_BATCHNORM = Misconception(
    "used torch's batch_norm where the part asks for your own",
    "This part is batch normalisation by hand: compute the mean, the variance and the normalisation with tensor "
    "operations, without torch.nn.functional.batch_norm or nn.BatchNorm1d.")
STATS_AS_CONSTANTS = Misconception(
    "batch mean and variance treated as constants",
    "In training mode the mean and the variance are computed from the batch, so they depend on every x: a change "
    "in one example moves them, and every example's output with them. dx has three terms, dx̂/σ plus what flows "
    "back through the mean and through the variance; dout·gamma/σ is only the first.")
VARIANCE_AS_CONSTANT = Misconception(
    "batch variance treated as a constant",
    "You kept what flows back through the mean but not through the variance: var = mean((x − μ)²) depends on x too, "
    "which adds −x̂·mean(dx̂·x̂)/σ to every example's gradient.")
MEAN_AS_CONSTANT = Misconception(
    "batch mean treated as a constant",
    "You kept what flows back through the variance but not through the mean: μ = mean(x) depends on every x, "
    "which adds −mean(dx̂)/σ to every example's gradient.")
MISSING_1_OVER_N = Misconception(
    "the 1/N of the batch mean and variance forgotten",
    "μ = (1/N)·Σ x and var = (1/N)·Σ (x − μ)²: each x_i reaches them with weight 1/N, so what flows back from "
    "dμ and dvar to x_i is divided by N (dμ/N and dvar·2(x_i − μ)/N).")
DGAMMA_WRONG_AXIS = Misconception(
    "dgamma or dbeta summed over the wrong axis",
    "gamma and beta have one entry per feature and act on every example, so their gradients sum over the batch "
    "(axis 0): dgamma = (dout·x̂).sum(0), dbeta = dout.sum(0), one number per feature.")
DGAMMA_FROM_X = Misconception(
    "dgamma computed from x instead of x̂",
    "out = gamma·x̂ + beta, so d out / d gamma is the normalised x̂ = (x − μ)/sqrt(var + eps), not the raw x.")
DBETA_MEAN = Misconception(
    "dbeta averaged instead of summed",
    "beta is added to every example's output, so every example's dout reaches it: dbeta = dout.sum(0). (Any 1/N "
    "of a mean loss is already inside dout.)")

# Part E: the bug hunt
BUG_LEFT_IN = Misconception(
    "the planted bug left in",
    "Your gradients are the given backward's own, wrong where it is wrong. A gate that compares each of the five "
    "gradients with autograd's, on batches of a few sizes, shows which one disagrees and how the disagreement "
    "changes with the batch; the stage to re-derive is the last one that gradient passes through before the ones "
    "that agree.",
    question="Which of the five gradients disagrees with autograd, and on which stages of the backward does it "
             "depend that the others do not?")
N_MINUS_1_IN_BACKWARD = Misconception(
    "N − 1 in BatchNorm's backward where the forward divides by N",
    "A backward differentiates the forward that ran: training-mode BatchNorm takes the batch's mean and its biased "
    "variance, both sums divided by N, so each example reaches them with weight 1/N, and that weight is what flows "
    "back along each route. The unbiased N − 1 belongs to the running variance, which no gradient flows through.",
    question="By what does the forward divide when it takes the batch's mean and variance, and is each route of "
             "your backward divided by the same?")
BUG_FACTOR_UNDONE = Misconception(
    "the culprit line multiplied by the factor back, eps scaled with it",
    "Multiplying the given line by (n/(n−1))^1.5 turns (unbiased variance + eps)^(-3/2) into (biased variance + "
    "eps·(n−1)/n)^(-3/2): right only where eps is negligible beside the batch's variance, and off on small batches "
    "and on features that barely vary. The line must read the variance the forward normalised with, eps as it is.",
    question="What does your correction do to the eps inside the power, and on which batches does eps matter beside "
             "the variance?")
FIX_AT_ONE_BATCH_SIZE = Misconception(
    "a fix that holds at one batch size only",
    "Your gradients agree with autograd on a batch of the try-it cell's size and not on others: a number measured "
    "or written for that batch stands where the batch's own size belongs. The network trains on batches of any "
    "size and its gate runs on a few examples: derive the stage for any N and check it at N = 2, 3 and 64.",
    question="Does your backward still agree with autograd on a batch of 3, and what in it depends on the batch's "
             "size?")
RIGHT_STAGE_CHANGED = Misconception(
    "changed a stage the given backward had right",
    "The given backward gets four of the five gradients right: a fix belongs in the stage where the wrong one "
    "starts, and the forward pass must stay the network's (checks.mlp_loss). After your change one of the four "
    "that were right disagrees with autograd; compare each gradient before and after your change.",
    question="Which gradients agreed with autograd before your change, and do they still?")
WRONG_GRADIENT_NAMED = Misconception(
    "named a gradient the given backward gets right",
    "WRONG_GRADIENT names the one parameter whose gradient, as the given backward computes it, disagrees with "
    "autograd's. Compare all five, key by key, on a few examples (a gate that reports each key) before naming one: "
    "a norm plot alone can hide an error of a percent.",
    question="Which key does a key-by-key comparison of the given backward with autograd flag?")
LESSON_NETWORK_PORTED = Misconception(
    "the lesson's network backward in place of the given one",
    "This part's network has no first-layer bias, a BatchNorm and SiLU, so its parameters are W1, gamma, beta, W2 "
    "and b2; the lesson's gradients() is the backward of a tanh network with b1 and no BatchNorm. Start from "
    "given_gradients, the backward of this network, and fix its one bug.",
    question="Which parameters does this part's network have, and which does the lesson's?")
W1_ERRORS_FROM_NORMS = Misconception(
    "the error measured by comparing norms",
    "Two gradients can have nearly the same norm and still point in different directions: the relative error of a "
    "gradient is the norm of the difference, ||given − autograd|| / ||autograd||, taken on the tensors themselves.",
    question="For two tensors whose norms agree, how far apart can the tensors themselves be?")
W1_ERRORS_OF_A_RIGHT_BACKWARD = Misconception(
    "the error measured on a right backward",
    "Your numbers are round-off: they measure a backward that agrees with autograd (your fix, or autograd against "
    "itself), not the given one. The part asks how far given_gradients' W1 gradient is from autograd's.",
    question="Which function's gradient did you compare with autograd's?")
W1_ERRORS_AS_VERDICTS = Misconception(
    "the gate's verdicts reported instead of the errors",
    "A gate answers yes or no at one tolerance; the part asks for the size of the error at each batch size, a "
    "number, which is what tells you whether a gate with a given tolerance and batch would have caught the bug.",
    question="At which tolerance would your gate stop passing the given backward on 64 examples?")
W1_ERRORS_TYPED_IN = Misconception(
    "the notebook's numbers returned whatever the case",
    "w1_errors is a measurement: called on other parameters, other examples or other batch sizes, it must measure "
    "those. Numbers typed in from a run, or a measurement that always starts from the notebook's start_params and "
    "first digits, answer only the notebook's case: compute G and A from the params, X, targets and sizes it is given.",
    question="What does your w1_errors return when it is called with another start, other digits and other sizes?")

DVAR_FACTOR_INVERTED = Misconception(
    "the factor of the variance's gradient upside down",
    "dvar_factor(n) is the given backward's dvar divided by the right one. The given line raises a larger variance "
    "than the forward's to a negative power, so its dvar is the smaller of the two and the ratio is below 1.",
    question="Is the variance the given line reads larger or smaller than the forward's, and what does the power "
             "-3/2 do to that?")
DVAR_FACTOR_POWER = Misconception(
    "the ratio of the two variances taken for the ratio of the two gradients",
    "The two variances differ by a factor that depends on n alone, but dvar reads its variance through a power: "
    "the ratio of the two dvars is the ratio of the variances raised to that power.",
    question="Through which power of (variance + eps) does dvar depend on the variance?")
DVAR_FACTOR_ONE = Misconception(
    "the factor of a right backward (1 at every n)",
    "1 is what a backward compared with itself gives. The part asks how the given backward's dvar, the one in "
    "given_gradients, compares with autograd's gradient of the loss with respect to the batch variance.",
    question="Which two gradients of the variance did you divide, and which one comes from given_gradients?")
DVAR_FACTOR_ONE_SIZE = Misconception(
    "the factor measured at one batch size, returned for every n",
    "dvar_factor is a formula in n: the gap between the given line's variance and the forward's depends on the "
    "batch's size, so one number measured on one batch answers for that size only.",
    question="What does your dvar_factor return for a batch of 2, and what do you measure on a batch of 2?")
SILU_FROM_C2_WRONG = Misconception(
    "Part C.2's silu_backward is wrong, and Part E's code calls it",
    "given_gradients and your mlp_gradients take SiLU's backward from your Part C.2 silu_backward: while it is wrong, "
    "every gradient below the SiLU (gamma, beta, W1) disagrees with autograd whatever Part E's fix. Part C.2's test "
    "says what is wrong with it; fix it there first, then run Part E's test again.",
    question="Does your silu_backward pass Part C.2's test?")

# Part F: training the digits
TRAINED_WITH_AUTOGRAD = Misconception(
    "trained with autograd where the part asks for your own backward",
    "Every update must take its gradients from the gradients argument (your mlp_gradients when you run it); "
    "autograd may run only inside the gradcheck gate, on the steps the gate runs.")
IGNORED_GRADIENTS = Misconception(
    "trained without the gradients argument",
    "train_digits receives the function to take its gradients from: call gradients(params, X_batch, y_batch) on "
    "every step (and in the gate), not mlp_gradients or anything else by name. The test hands it functions of its "
    "own to see what your loop does with them.")
NOT_CLIPPED = Misconception(
    "gradients not clipped",
    "When the global norm exceeds max_norm, scale every gradient by max_norm / global norm before the update: the "
    "step then moves the parameters lr·max_norm at most. Computing (or recording) the clipped norm is not clipping.")
PER_TENSOR_CLIPPING = Misconception(
    "clipped each tensor on its own instead of by the global norm",
    "Global-norm clipping computes ONE norm over all the gradients, sqrt(Σ over layers of ‖g‖²), and scales them all "
    "by the same factor, so the update keeps its direction; clipping each tensor to max_norm changes it.")
SCALED_EVERY_STEP = Misconception(
    "every update scaled to max_norm",
    "Clipping scales only when the global norm exceeds max_norm: the factor is min(1, max_norm / norm). Below the "
    "threshold the gradients must stay exactly as they are; scaling every step to norm max_norm is normalisation.")
NO_GATE = Misconception(
    "no gradcheck gate",
    "At step 0 and every gate_every steps, compare gradients(params, X, y) on a few examples with autograd's "
    "gradient of the same loss and raise if they disagree: a training run that trusts an unchecked backward can "
    "train on wrong gradients for hours. A gate that only prints, or compares a function with itself, stops nothing.")
GATE_SKIPS_PARAMETER = Misconception(
    "a gradcheck gate that skips a parameter",
    "The gate must compare the gradient of every parameter, W1, gamma, beta, W2 and b2, with autograd's: a backward "
    "can be wrong in any one of them (a BatchNorm's dgamma, a bias summed over the wrong axis) while the others are "
    "right.")
LOOSE_GATE = Misconception(
    "a gradcheck gate too loose to catch a 0.1 % error",
    "A right hand-derived gradient agrees with autograd to about 1e-12 in float64, so the gate can be strict: "
    "torch.allclose(mine, auto, rtol=1e-6, atol=1e-9) for example. A looser tolerance (rtol 1e-3, a percent) lets a "
    "backward that is subtly wrong train on.")
GATE_MISSED = Misconception(
    "the gate skipped a step it should run on",
    "The gate runs on the parameters of step 0, gate_every, 2·gate_every, ... (step % gate_every == 0, counting "
    "steps from 0): a gradient function that goes wrong later must be stopped at the next of those steps.")
GATE_OFF_SCHEDULE = Misconception(
    "the gate ran on a step gate_every does not ask for",
    "The gate runs on the parameters of step 0, gate_every, 2·gate_every, ... only (step % gate_every == 0, "
    "counting steps from 0): autograd is expensive, which is why the gate runs every gate_every steps and not on "
    "every one.")
RUNNING_NOT_TRACKED = Misconception(
    "running statistics never updated during training",
    "The network is evaluated with its running statistics, so training must update them at every step: call your "
    "batchnorm_forward in training mode on each batch's z = X·W1 with the running_mean and running_var you return.")
NORMS_AFTER_CLIPPING = Misconception(
    "gradient norms recorded after clipping",
    "history['grad_norms'] shows each layer's gradient norm as gradients returned it, before clipping: the plot is "
    "there to show what the clipping acts on.")

# Part C.1: the norm's backward
ZERO_ROW_NAN = Misconception(
    "0 / 0 at a row of zeros: the norm's kink left undecided",
    "x / ‖x‖ is 0 / 0 on a row of zeros, where the norm has a kink (like |x| at 0) and no derivative. A backward must "
    "still return a number there: the symmetric choice 0, which is what a central difference measures at the kink "
    "and what torch's norm returns. Decide it explicitly, without computing the 0 / 0 (a nan in an unused branch of "
    "a where still poisons the gradient that flows through it).",
    question="What does a central difference measure at a row of zeros, and which value does your formula produce "
             "there?")
KINK_VALUE = Misconception(
    "a gradient other than 0 at the norm's kink",
    "At a row of zeros the norm is ‖x‖ = ‖0 + h‖ = ‖0 − h‖ for every nudge h: the symmetric difference, and torch's "
    "norm, give 0 there. Any other value is a one-sided choice that moves the row along an arbitrary direction.",
    question="What is (‖0 + h·e_j‖ − ‖0 − h·e_j‖) / 2h?")
SQUARES_OUT_OF_RANGE = Misconception(
    "squares under- or overflow: the norm not scaled by the row's largest entry",
    "(1e-200)² underflows to 0 and (1e200)² overflows to inf in float64 (torch.linalg.vector_norm too), yet "
    "x / ‖x‖ is an ordinary unit vector. The norm is homogeneous, ‖x‖ = m·‖x / m‖ for any m > 0: with m the row's "
    "largest absolute entry every scaled entry is at most 1, and the m cancels in x / ‖x‖ (Part A's shift, for a "
    "product instead of a sum).",
    question="What is (1e200)² in float64, and by what may you divide a row without changing x / ‖x‖?")
SQUARED_NORM_RULE = Misconception(
    "the derivative of ‖x‖² used for ‖x‖",
    "2x is the derivative of the squared norm Σ x_j². The norm is its square root: by the chain rule "
    "∂‖x‖/∂x_j = x_j / ‖x‖, a unit vector.",
    question="‖x‖ is the square root of what, and what does the chain rule add for the square root?")
DY_WRONG_AXIS = Misconception(
    "dy broadcast along the features instead of the examples",
    "dy holds one number per row (example); each row's gradient is its dy_i times its own direction. Broadcasting a "
    "shape-(N,) tensor against (N, D) lines it up with the last axis, the features: for N ≠ D it raises, for N = D it "
    "runs and mixes the examples. Make dy a column first.",
    question="Which axis of x does a shape-(N,) dy line up with when the two are multiplied, and which should it?")
