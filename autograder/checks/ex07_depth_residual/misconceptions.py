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

# ---------------------------------------------------------------------------------- Part B: per-example clipping

BATCH_CLIPPED = Misconception(
    "the batch's mean gradient clipped once (the lesson's clipping)",
    "Clipping the mean gradient caps the step, but one example with a huge gradient still dominates its direction. "
    "Per-example clipping bounds what EACH example can contribute: clip every example's own gradient (its norm over "
    "all parameters), then average the clipped gradients.",
    question="If one example's gradient is a hundred times larger than the others', whose contribution does "
             "clipping the mean gradient shrink?")
PER_TENSOR = Misconception(
    "each example clipped tensor by tensor",
    "An example's gradient is one long vector over ALL parameters: one norm per example, sqrt of the sum of every "
    "squared element of every parameter's gradient, and one factor for all of its tensors.",
    question="How many norms does one example's gradient have: one, or one per parameter tensor?")
SHARE_CLIPPED = Misconception(
    "each example's share of the mean clipped (its gradient already divided by the batch size)",
    "The gradient of mean(losses) with respect to example i is its own gradient divided by B: clipping that share "
    "compares ‖g_i‖/B with max_norm, so almost nothing is clipped. Clip each example's own gradient, the gradient of "
    "losses[i], and divide by B after clipping.",
    question="Whose norm does max_norm bound: the example's gradient, or the example's gradient divided by B?")
SUMMED = Misconception(
    "the clipped gradients summed instead of averaged",
    "The part asks for the mean over the batch of the clipped gradients: divide their sum by the number of examples.",
    question="What do you divide the sum of the clipped gradients by?")
CLIPPED_BELOW = Misconception(
    "every example scaled to max_norm, also those below it",
    "Clipping only scales down: the factor is min(1, max_norm / (norm + 1e-6)), so an example whose norm is "
    "already below max_norm keeps its gradient as it is.",
    question="What should happen to an example whose gradient's norm is already below max_norm?")
BIAS_NOT_IN_NORM = Misconception(
    "the biases left out of each example's norm",
    "An example's gradient runs over every parameter, the biases included: a Linear's bias gradient for example i "
    "is the gradient at the layer's output for that example, and its squared norm belongs in the example's sum of "
    "squares with the weights'.",
    question="Which parameters does an example's norm run over: the weights only, or the biases too?")
TENSOR_NORMS_ADDED = Misconception(
    "the norms of an example's tensors added, not their squares",
    "An example's gradient is one long vector over all parameters: its norm is the square root of the sum of the "
    "squared norms of its pieces (every weight and bias), not the sum of their norms.",
    question="Is the length of a vector cut into pieces the sum of the pieces' lengths?")
PER_LAYER = Misconception(
    "each example clipped layer by layer",
    "An example's gradient is one long vector over the parameters of ALL layers: one norm per example (the square "
    "root of the sum of its layers' squared norms) and one factor that scales every layer's part of it. Clipping "
    "each layer's part by its own norm bends the example's gradient: a layer whose part is short keeps it whole "
    "while a long one is cut.",
    question="How many clipping factors does one example get: one, or one per layer?")
FIRST_PASS_LEFT = Misconception(
    "a first backward pass's gradients left in .grad",
    "backward() adds into .grad: what a first .backward() of the batch's losses put there (their summed or mean "
    "gradient) is still there when the clipped mean is added to it. The part asks for .grad to hold the clipped "
    "mean alone, so the first pass's parameter gradients must not stay in .grad.",
    question="What did each .grad already hold when the clipped mean was added to it?")
NO_SQRT = Misconception(
    "the squared norms returned (no square root)",
    "Summing ‖g_i‖²‖a_i‖² over the layers (plus ‖g_i‖² for each bias) gives the example's SQUARED norm; the norm the "
    "part asks for, and the one the clipping factor divides by, is its square root.",
    question="Is the sum of the squares of a vector's entries its length, or its length squared?")
NO_EPS = Misconception(
    "the clipping factor without the + 1e-6",
    "The part's formula (torch's clip_grad_norm_'s) divides max_norm by the norm plus 1e-6; without it the factor of "
    "a clipped example is off by about 1e-6 / its norm, relative, which the tests' tolerance of 1e-6 notices.",
    question="What does the part's formula add to the norm before dividing?")
LOOPED_BACKWARD = Misconception(
    "a backward pass per example",
    "A backward pass per example costs B passes: what this part replaces. One backward pass of the batch's summed "
    "loss already delivers, at every Linear's output, one row per example, and each row is that example's own "
    "gradient there (the examples do not mix). With the layer's input, that row is all that example's gradient of "
    "the layer is made of (lesson 04's dW = dYᵀX is a sum over the batch's rows).",
    question="What does one backward pass of the whole batch deliver at a Linear layer's output, row by row?")
PER_EXAMPLE_HELD = Misconception(
    "the per-example gradients held in memory",
    "vmap(grad), is_grads_batched or a batched outer product hold B copies of the model's gradient at once: the "
    "memory DP-SGD cannot afford for a large model. Example i's weight gradient of a Linear is an outer product of "
    "two vectors the batch's forward and backward already hold, and the norm of an outer product needs neither it "
    "nor its entries.",
    question="What is the norm of an outer product u vᵀ, in terms of u and v?")
FORWARD_PER_EXAMPLE = Misconception(
    "the model run more than once",
    "The part asks for one forward pass of the whole batch (each Linear runs once during the call): a forward per "
    "example, per parameter (finite differences) or a second forward for a second backward is what it rules out.",
    question="How many times did your function run the model?")
NORM_AFTER = Misconception(
    "returned the norms after clipping",
    "Return each example's norm measured BEFORE clipping (what you log to see which examples are clipped).",
    question="Which norms does the part ask for: before or after clipping?")

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
