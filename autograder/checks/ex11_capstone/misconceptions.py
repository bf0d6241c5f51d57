"""Exercise 11's named mistakes, one place for all six parts (what each check recognises them by is in its part's
module)."""

from __future__ import annotations

from ...misconceptions import Misconception

# Part A: the Value MLP
TANH_ON_OUTPUT = Misconception(
    "nonlinearity on the output layer",
    "The last layer is linear: its neurons return w·x + b without tanh, so the output can be any real number "
    "(the loss, not the network, decides what to do with it). Only hidden layers apply tanh.")
NO_BIAS = Misconception(
    "neurons without a bias", "Each neuron computes tanh(w·x + b) (hidden) or w·x + b (output): b is a parameter too, "
    "listed after the neuron's weights.")
BIAS_LISTED_FIRST = Misconception(
    "parameters() lists each neuron's bias before its weights",
    "The part fixes the order of parameters(): layer by layer, neuron by neuron, each neuron's weights first and then "
    "its bias. Listed [b] + w, the values a caller sets (or an optimiser updates) by position land on the wrong "
    "parameters.")
WRONG_ACTIVATION = Misconception(
    "relu where the part asks for tanh", "Hidden layers apply tanh, as the part says; relu makes a different network.")
ZERO_GRAD_INCOMPLETE = Misconception(
    "zero_grad() that misses parameters",
    "zero_grad() must set .grad = 0.0 on every parameter that parameters() lists, or the next backward() adds to "
    "stale gradients.")
LIST_OF_ONE = Misconception(
    "a list of one Value for a one-neuron output layer",
    "When the last layer has one neuron the MLP returns that Value itself, not [value]: a caller writes "
    "model(x) * sign or model(x).data. Unwrap the list at the end of MLP.__call__ (a list stays a list when the last "
    "layer has several neurons).")
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
MISSING_UPSTREAM = Misconception(
    "local derivative not multiplied by dy", "Multiply the local derivative by dy, the gradient arriving from above.")

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
    "batch variance (divided by N − 1), while training-mode normalisation uses the biased one (divided by N).")
RUNNING_UPDATED_AT_EVAL = Misconception(
    "running statistics updated at evaluation",
    "training=False must change nothing: evaluating a model (on a test set, or on a single example) must not move "
    "its running statistics, or the next evaluation gives another answer.")
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

# Part E: the network
SILU_SKIPPED = Misconception(
    "the nonlinearity's backward skipped",
    "The gradient reaching the SiLU's input is silu_backward(a, dh), with a the SiLU's input (the BatchNorm's "
    "output): you passed dh through as if the nonlinearity were the identity.")
SILU_AT_OUTPUT = Misconception(
    "SiLU derivative taken at its output",
    "silu_backward needs the SiLU's input a (the BatchNorm's output), not h = silu(a).")
BN_SKIPPED = Misconception(
    "the BatchNorm backward skipped",
    "Between the SiLU and the first linear layer sits the BatchNorm: dz = batchnorm_backward(z, gamma, da, eps)[0], "
    "and gamma and beta get their own gradients; you passed da through as if the layer were not there.")

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
