"""Exercise 07's named mistakes, one place for every part (what each check recognises them by is in its part's
module). A learner reads a mistake's question while working; its explanation comes with graded feedback."""

from __future__ import annotations

from ...checking import Misconception

NOT_A_FLOAT = Misconception(
    "a tensor where the part asks for a Python float",
    "Return plain Python numbers (float(value), or value.item() for a 0-d tensor): a tensor can carry a graph and "
    "share memory with the caller's tensors, a float does neither.",
    question="What type does the part ask each number to be?")

# ---------------------------------------------------------------------------------- Part A: the gradient profile

PRODUCT_OF_SIZES = Misconception(
    "the sizes of the layers multiplied (the scalar chain's trick)",
    "For numbers, |abc| = |a||b||c|, so the log of the ratio is a sum of logs. For matrices the size of a product is "
    "NOT the product of the sizes (‖AB‖ ≤ ‖A‖‖B‖, and usually far below): adding log‖J_k‖ gives an upper bound. "
    "Carry the gradient vector itself back, v ← J_kᵀv, and keep its size in range by dividing it by its norm after "
    "every layer while you add up the logs of those norms.",
    question="Is the length of J₁ᵀJ₂ᵀv the product of the sizes of J₁, J₂ and v, for matrices?")
NOT_TRANSPOSED = Misconception(
    "the Jacobian applied untransposed",
    "Backward carries a row vector: ∂L/∂h_(k-1) = J_kᵀ ∂L/∂h_k with J_k = diag(tanh'(z_k)) W_k, so the gradient "
    "goes through W_kᵀ(tanh'(z_k) ⊙ v), not tanh'(z_k) ⊙ (W_k v).",
    question="Which side of W_k does the gradient multiply on its way back: W_k v or W_kᵀ v?")
DIAGONAL_SIDE = Misconception(
    "tanh' applied after Wᵀ instead of before",
    "J_k = diag(tanh'(z_k)) W_k, so J_kᵀ v = W_kᵀ (tanh'(z_k) ⊙ v): the slopes of layer k's outputs multiply the "
    "gradient arriving at those outputs, before Wᵀ carries it to the inputs.",
    question="tanh' belongs to layer k's outputs: does it meet the gradient before or after Wᵀ?")
TANH_AT_OUTPUT = Misconception(
    "tanh' read from the residual layer's output",
    "1 − h_k² is tanh'(z_k) only in a plain layer, where h_k = tanh(z_k). In a residual layer h_k = h_(k-1) + "
    "tanh(z_k): use 1 − tanh(z_k)² from the pre-activation.",
    question="In a residual layer, is h_k the tanh of anything?")
NO_IDENTITY = Misconception(
    "the identity left out of a residual layer's Jacobian",
    "A residual layer's Jacobian is I + diag(tanh'(z_k)) W_k: the gradient also passes straight through, "
    "v ← v + W_kᵀ(tanh'(z_k) ⊙ v).",
    question="What does the skip path of a residual layer add to the gradient on its way back?")
IDENTITY_FOR_PLAIN = Misconception(
    "the identity added to a plain layer's Jacobian",
    "Only a residual layer adds its input back; a plain layer's Jacobian is diag(tanh'(z_k)) W_k alone.",
    question="Does a plain layer have a path that skips its weights?")
NATURAL_LOG = Misconception(
    "natural logarithm instead of log10",
    "The part asks for base-10 logarithms (orders of magnitude): math.log10 or torch.log10, or a natural log "
    "divided by ln 10.",
    question="In which base does the part count orders of magnitude?")
OUT_OF_RANGE = Misconception(
    "the gradient formed before its logarithm",
    "Through hundreds of layers the gradient leaves float64's range (about 1e-308 to 1.8e308): it becomes 0 or inf "
    "before its logarithm is taken. Divide the vector by its norm after every layer and add up the log10 of those "
    "norms.",
    question="What does float64 hold for a vector whose length is 1e-366?")
PROFILE_REVERSED = Misconception(
    "the profile in reverse order",
    "Entry k belongs to h_k: the input h_0 first, the output h_n (log10 ‖upstream‖) last, although backward "
    "computes them from the output down.",
    question="Which end of your list is the input, and which the output?")
FLOAT32_PROFILE = Misconception(
    "the profile computed in float32",
    "Your walk is right, but your numbers are off in the 7th or 8th significant digit: float32 rounding. Keep the "
    "float64 you are given (no .float(), no dtype=torch.float32).",
    question="In which precision did your arithmetic run?")

# ---------------------------------------------------------------------------------- Part B: clipping

PER_TENSOR = Misconception(
    "per-tensor instead of global clipping",
    "Clip by the GLOBAL norm: one norm over all parameters' gradients together, sqrt(sum of every squared element), "
    "and the same factor for every tensor. Clipping each tensor by its own norm changes the direction of the step.",
    question="Is there one norm for all the gradients together, or one per tensor?")
NO_SQUARE_ROOT = Misconception(
    "norm without the square root", "The L2 norm is sqrt(sum of squares); you used the sum of squares itself.",
    question="What separates the sum of squares from a length?")
CLIPPED_BELOW = Misconception(
    "clipping even below max_norm",
    "Scale only when the total norm exceeds max_norm: the factor is min(1, max_norm / (total_norm + 1e-6)); below "
    "the threshold the gradients must stay exactly as they were.",
    question="What should happen to gradients whose total norm is already below max_norm?")
NOT_MODIFIED = Misconception(
    "gradients not modified",
    "You did not change the parameters' .grad: multiply each p.grad in place (p.grad.mul_(coef)); scaling a copy "
    "(g = p.grad * coef) leaves p.grad unchanged.",
    question="Which tensors did your scaling write into?")
GENERATOR_TWICE = Misconception(
    "a generator of parameters iterated twice",
    "Your function left the gradients alone when `parameters` was a generator (like model.parameters()): a generator "
    "can be iterated only once, so a second loop over it sees nothing. Make a list first: params = list(parameters).",
    question="How many times can a generator such as model.parameters() be looped over?")
CLAMPED = Misconception(
    "clipped values instead of the norm",
    "clip_grad_norm_ rescales the whole gradient vector; clamping each element to [-max_norm, max_norm] is "
    "clip_grad_value_.",
    question="Does clipping by norm change the direction of the gradient?")
NONE_NOT_SKIPPED = Misconception(
    "a .grad of None not skipped",
    "A parameter that took no part in the loss has .grad None: leave it out of the norm and leave it alone "
    "(`if p.grad is not None`).",
    question="What does .grad hold for a parameter that took no part in the loss?")
NONE_FILLED = Misconception(
    "a gradient given to a parameter that had none",
    "A parameter whose .grad is None took no part in the loss: clip_grad_norm_ skips it and leaves .grad None "
    "(an optimizer then skips it too, while a zero gradient would still feed momentum and weight decay).",
    question="What does an optimizer do with a .grad of None, and with a .grad of zeros?")
REPLACED_GRAD = Misconception(
    "replaced .grad instead of scaling it in place",
    "Scale the existing gradient tensors in place (p.grad.mul_(coef)), as clip_grad_norm_ does; assigning a new "
    "tensor to p.grad breaks every reference to the old one (an optimizer's or DDP's gradient buckets).",
    question="Who else may hold a reference to the .grad tensor you replaced?")
ZERO_NORM = Misconception(
    "a division by a zero total norm",
    "When every gradient is zero the total norm is 0, and max_norm / total divides by zero. That is what the 1e-6 in "
    "max_norm / (total + 1e-6) is for (or scale only `if total > max_norm`): then nothing changes and the norm "
    "returned is 0.",
    question="What is the total norm when every gradient is zero, and what does your factor do with it?")
NORM_AFTER = Misconception(
    "returned the norm after clipping",
    "Return the total norm measured BEFORE clipping, as clip_grad_norm_ does (it is what you log to spot exploding "
    "gradients).",
    question="Which norm does clip_grad_norm_ report: before or after it scales?")

# ---------------------------------------------------------------------------------- Part C: hooks

REVERSED = Misconception(
    "layers in reverse order",
    "Backward reaches the last layer first, so hooks fire from last to first. Store each norm at its layer's "
    "position (first layer = index 0), or reverse the list.",
    question="In which order does backward reach the layers, and where does each norm go?")
WEIGHT_GRADIENTS = Misconception(
    "weight gradients instead of output gradients",
    "Measure the gradient with respect to each layer's OUTPUT (what a backward hook receives as grad_output[0], or a "
    "tensor hook on the output), not layer.weight.grad.",
    question="Whose gradient does the part ask for: the layer's weight, or the layer's output?")
HOOKS_LEFT = Misconception(
    "hooks left registered",
    "Keep the handle that each register_*_hook returns and call handle.remove() before returning, also when the "
    "forward or backward pass raises; otherwise every later forward or backward pass runs your hooks again.",
    question="What happens to your hooks after your function returns?")
PER_EXAMPLE_MEAN = Misconception(
    "per-example norms averaged",
    "The part asks for one norm over the whole gradient tensor (all examples together): grad.norm(), not "
    "grad.norm(dim=-1).mean() or a mean over the batch of each example's norm.",
    question="Is the norm taken over the whole batch at once, or example by example?")
KEPT_BETWEEN_CALLS = Misconception(
    "norms kept between calls",
    "Each call must build and return a new list: a list created outside the function (or a default argument) keeps "
    "the previous call's norms, or changes under the caller's feet the list an earlier call returned.",
    question="Where does your list of norms live, and what does a second call see in it?")
BACKWARD_CONTRACT = Misconception(
    "not exactly one backward pass",
    "Run loss_fn(model(x)).backward() exactly once: it adds this loss's gradient into every .grad, as the part's "
    "contract asks. torch.autograd.grad returns gradients without touching .grad, and a second backward adds them "
    "twice (or fails on a graph already freed).",
    question="How many backward passes did your function run, and what did each add to .grad?")
TOP_LEVEL_ONLY = Misconception(
    "only the model's top-level layers",
    "model.children() lists only the modules directly inside the model, not the Linear layers nested in its blocks "
    "(a ModuleList, a residual block). model.modules() walks the whole tree: use it to find every nn.Linear.",
    question="Does your search for the Linear layers look inside the model's sub-modules?")
GRADS_WIPED = Misconception(
    "the caller's gradients wiped",
    "The caller may be accumulating gradients (several batches before one step): backward adds into .grad, and "
    "your function must leave each .grad as what it held before plus this loss's gradient. Do not call "
    "model.zero_grad() or set .grad to None inside it.",
    question="What did the parameters' .grad hold before your call, and where did it go?")
ONE_CALL_KEPT = Misconception(
    "one call's gradient kept for a layer that runs twice",
    "A layer that runs twice produces two outputs, and backward delivers a gradient to each: your hook runs twice "
    "for that layer, and storing the norm at the layer's position keeps only one of them. Add up the squared norms "
    "of every arriving gradient and take the square root once all have arrived.",
    question="How many times does your hook run for a layer that ran twice in the forward pass?")
NORMS_ADDED = Misconception(
    "the norms of a layer's outputs added",
    "The entry is the norm of all of the layer's output gradients taken together, as one long vector: the square "
    "root of the sum of their squared norms, not the sum of their norms.",
    question="Is the length of two vectors put end to end the sum of their lengths?")
ONE_ENTRY_PER_CALL = Misconception(
    "one entry per call instead of one per layer",
    "The list has one entry per nn.Linear module, whether it runs once or twice: gather the gradients of a layer "
    "that runs twice into its one entry.",
    question="How many entries does a layer that runs twice get in your list?")
