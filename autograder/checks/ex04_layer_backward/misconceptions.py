"""Exercise 04's named mistakes, one place for all five parts (what each check recognises them by is in its part's
module). Each has the question a learner reads while working and the explanation graded feedback adds."""

from __future__ import annotations

from ...checking import Misconception, Route
from ...routes import MISCONCEPTIONS as ROUTE_MISCONCEPTIONS

AUTOGRAD = ROUTE_MISCONCEPTIONS[Route.AUTOGRAD]

FLOAT32_RESULT = Misconception(
    "result in float32 where the part asks for float64", "The inputs are float64 and so must the result be: float32 "
    "keeps about 7 significant digits, float64 about 16. A tensor built from Python numbers (torch.tensor of a list, "
    "torch.zeros or torch.empty without a dtype) is float32 by default; compute from the inputs, or give their dtype.",
    question="Which of your tensors was created without the inputs' dtype?")

# Part A: layer normalisation
NORMALISATION_AS_CONSTANT = Misconception(
    "the mean and the standard deviation treated as constants",
    "μ and σ are computed from the row itself, so every x_j reaches the loss also through them: "
    "dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) / σ with dx̂ = γ·dy. Dividing dx̂ by σ alone is the derivative of a "
    "layer that scales by a constant.",
    question="x_j changes the row's mean and variance too: which paths from x_j to the loss does your dx follow?")
MEAN_PATH_MISSING = Misconception(
    "the path through the mean left out",
    "Every x_j moves the row mean μ, which every x̂_k subtracts: that path contributes −mean(dx̂)/σ to each dx_j.",
    question="How much does the row's mean move when one x_j moves, and what does that do to every x̂_k?")
VARIANCE_PATH_MISSING = Misconception(
    "the path through the variance left out",
    "Every x_j moves the row variance, which every x̂_k is divided by: that path contributes "
    "−x̂_j·mean(dx̂·x̂)/σ to each dx_j.",
    question="How much does σ move when one x_j moves, and what does that do to every x̂_k?")
UNBIASED_VARIANCE = Misconception(
    "unbiased variance (divided by D − 1)",
    "Layer normalisation divides the squared deviations by D, not D − 1 (torch.var's default is unbiased: pass "
    "unbiased=False or correction=0, or take the mean of the squared deviations).",
    question="Is the variance F.layer_norm uses divided by D or by D − 1?")
EPS_MISSING = Misconception(
    "ε left out of the standard deviation", "σ = √(var + ε): without ε a row whose values are all equal divides by "
    "zero, and every other row is off by about ε/(2·var).",
    question="What is σ for a row whose values are all equal?")
EPS_OUTSIDE = Misconception(
    "ε added outside the square root", "F.layer_norm uses σ = √(var + ε), not √var + ε.",
    question="Where does F.layer_norm put ε: under the square root or after it?")
EPS_IGNORED = Misconception(
    "eps argument ignored", "The tests pass eps themselves (0.1 in some cases): use the argument, not a fixed 1e-5.",
    question="Which ε do the cases with eps = 0.1 ask for, and which did you use?")
CANCELLING_VARIANCE = Misconception(
    "variance as mean(x²) − mean(x)² (cancels on rows far from 0)",
    "For a row near 1000 with a spread of 0.01, mean(x²) and mean(x)² are both about 10⁶ and agree in their first ten "
    "digits, so their float64 difference keeps almost none of the variance's. Subtract the mean first and average "
    "the squared deviations (two passes).",
    question="How many correct digits survive mean(x²) − mean(x)² for a row near 1000 with a spread of 0.01?")
GAMMA_FORGOTTEN = Misconception(
    "γ left out of dx", "y = γ·x̂ + β, so the gradient that reaches x̂ is dx̂ = γ·dy, not dy.",
    question="What gradient reaches x̂ through y = γ·x̂ + β?")
DGAMMA_WITHOUT_XHAT = Misconception(
    "dγ without x̂", "γ multiplies x̂, so dγ = Σ dy·x̂ over the rows (dβ is the plain Σ dy).",
    question="What does γ multiply in y = γ·x̂ + β?")
PARAMETER_GRADIENT_AVERAGED = Misconception(
    "parameter gradient averaged over the rows",
    "γ and β are used once per row and the rows' contributions add: Σ over the rows, not the mean (any averaging is "
    "the loss's, already inside dy).",
    question="γ and β are used by every row: do the rows' contributions add up or average?")

# Part B: cross-entropy with label smoothing and ignore_index
CE_BY_CLASSES = Misconception(
    "divided by the number of classes", "The loss is a mean over the rows (the kept targets), not over the C classes.",
    question="Does the mean run over the rows or over the classes?")
CE_REVERSED = Misconception(
    "y − p instead of p − y", "Your gradient has the wrong sign: raising the target's logit lowers the loss, so the "
    "gradient is negative at the target.",
    question="Raising the target's logit lowers the loss: what sign must the gradient have there?")
CE_BATCH_AXIS = Misconception(
    "softmax over the batch axis", "Each row is one example, so its softmax runs over the classes (the last "
    "dimension), not down the batch.",
    question="Along which dimension does one example's softmax run?")
CE_NO_TARGET = Misconception(
    "target distribution not subtracted", "Each kept row's gradient is p − q, with q the (smoothed) target "
    "distribution: the −log p of the target contributes −q.",
    question="What does the −log p term contribute to the gradient at the target?")
DIVIDED_BY_ALL_ROWS = Misconception(
    "divided by all N rows instead of the kept ones",
    "With ignore_index, F.cross_entropy's mean divides by the number of targets it kept, not by N.",
    question="When some targets are ignored, how many rows does F.cross_entropy's mean divide by?")
IGNORED_ROWS_KEPT = Misconception(
    "ignored rows still get a gradient", "A target equal to ignore_index takes no part in the loss, so its row of "
    "the gradient is exactly zero.",
    question="What does an ignored row contribute to the loss, and so to the gradient?")
IGNORED_BY_VALUE = Misconception(
    "ignored labels found by their value instead of ignore_index",
    "ignore_index may be any class index (0, C − 1...): a row is ignored when its target equals ignore_index, "
    "whatever that is; a test like targets >= 0 only works for the default −100.",
    question="What if ignore_index is a real class, such as 0?")
SMOOTHING_IGNORED = Misconception(
    "label_smoothing ignored", "With label_smoothing = ε the target is no longer the one-hot y but "
    "q = (1 − ε)·y + ε/C: every kept row's gradient is p − q.",
    question="Which target distribution does label_smoothing = ε stand for?")
SMOOTHING_OVER_OTHERS = Misconception(
    "label smoothing spread over the other C − 1 classes",
    "PyTorch mixes the one-hot target with the uniform distribution over all C classes: q = (1 − ε)·y + ε/C, "
    "so the target class gets 1 − ε + ε/C and every other class ε/C (not ε/(C − 1)).",
    question="Does F.cross_entropy's uniform part give the target class a share too?")
SMOOTHING_UNIFORM_MISSING = Misconception(
    "label smoothing without its uniform part", "q = (1 − ε)·y + ε/C: scaling the one-hot by 1 − ε is half of it; "
    "every class also receives ε/C.",
    question="Does your smoothed target still sum to 1?")
SMOOTHING_TARGET_UNSCALED = Misconception(
    "label smoothing without the (1 − ε) on the one-hot", "q = (1 − ε)·y + ε/C: the one-hot part is scaled down "
    "by 1 − ε so that q still sums to 1.",
    question="Does your smoothed target still sum to 1?")

WEIGHT_IGNORED = Misconception(
    "class weights ignored", "With weight = w, a kept row whose target is y counts w_y times in the loss, and "
    "F.cross_entropy's mean divides by the sum of the kept targets' weights: an unweighted gradient is right only "
    "when every w_c is 1.",
    question="What does weight = w change in each row's loss, and in what the mean divides by?")
WEIGHTED_MEAN_BY_ROWS = Misconception(
    "weighted loss divided by the number of kept rows instead of the sum of their weights",
    "With weight = w, F.cross_entropy's mean is a weighted mean: Σ_i w_(y_i)·loss_i / Σ_i w_(y_i) over the kept rows, "
    "so it divides by the sum of the kept targets' weights, not by how many rows were kept.",
    question="With class weights, is the mean over rows or a weighted mean, and what is its denominator?")
SMOOTHING_WEIGHTED_BY_TARGET = Misconception(
    "smoothing term weighted by the target's weight instead of each class's",
    "With weight = w the smoothing term of a row is (ε/C)·Σ_c w_c·(−log p_c): class c's share carries w_c, not the "
    "row's w_y, so the row's gradient is no longer a multiple of p − q.",
    question="In the smoothing term's sum over the classes, whose weight multiplies −log p_c?")

SOFT_ROW_SUM_ASSUMED = Misconception(
    "the lesson's p − y applied to a probability row, as if its weighted targets summed to 1",
    "p − y is the gradient of −log p_y for one unweighted label. A row of probabilities t (after smoothing) with "
    "class weights w has the loss −Σ_c w_c·t_c·log p_c, and each class's term pulls on every logit through the "
    "softmax: the row's gradient is a combination of p and t whose coefficients depend on the row, equal to p − t "
    "only when Σ_c w_c·t_c is 1.",
    question="Differentiate −Σ_c w_c·t_c·log p_c with respect to one logit: how much of p does it carry?")
SOFT_DIVIDED_BY_WEIGHTS = Misconception(
    "probability targets divided by a sum of weights (the class-index rule)",
    "The weighted mean, Σ w·loss / Σ w, is F.cross_entropy's rule for class indices. With class probabilities as "
    "targets its mean reduction is a plain mean over all N rows: the weights stay inside each row's loss and the "
    "sum is divided by N.",
    question="With probability targets and class weights, what does F.cross_entropy's mean divide by?")
SOFT_ZERO_ROWS_DROPPED = Misconception(
    "rows of zeros left out of the mean",
    "A row whose target probabilities are all 0 adds nothing to the sum, but with probability targets "
    "F.cross_entropy's mean still counts it: it divides by N, every row (there is no ignore_index for "
    "probabilities).",
    question="With probability targets, does a row of zeros count in what the mean divides by?")
SOFT_AS_INDICES = Misconception(
    "probability targets read as class indices",
    "targets may be a float64 (N, C) tensor of class probabilities as well as N class indices: F.cross_entropy tells "
    "the two apart by the dtype (and the shape), and a row of probabilities cannot index a weight or build a one-hot.",
    question="What do you do when targets is a float tensor of shape (N, C)?")
SOFT_AS_ARGMAX = Misconception(
    "probability targets turned into their most likely class",
    "A row of probabilities is the target itself, not a stand-in for one label: every class with t_c > 0 pulls on "
    "the logits, and the rules for class indices (the weighted mean) do not apply.",
    question="What does a target row of 0.6 and 0.4 ask of the two classes, and what does its argmax ask?")

FACTOR_IN_FLOAT32 = Misconception(
    "a factor rounded to float32 (a bool mask times a Python number)",
    "A bool tensor times a Python float gives a float32 tensor: the factor (ε/C or 1 − ε) keeps about 7 digits, and "
    "the gradient is off by about 1e-8 relative, far above float64's noise. Multiply the mask into a float64 "
    "tensor, or convert it to the logits' dtype first.",
    question="What dtype does a bool tensor times a Python float have?")

# Part C: attention, causal
MISSING_SCALE = Misconception(
    "missing 1/√d scale", "The scale τ = 1/√d that multiplies S in the forward pass multiplies both dQ and dK in the "
    "backward pass (and neither dV nor dP); your dQ or dK is √d times too large, or the recomputed forward lacks it.",
    question="Where does the 1/√d that scaled S come back in the backward pass?")
SCALE_BY_D = Misconception(
    "scaled by 1/d instead of 1/√d", "The scale is τ = 1/√d, in the forward pass and in dQ and dK.",
    question="Is the scale 1/d or 1/√d?")
NO_SOFTMAX_BACKWARD = Misconception(
    "skipped the softmax backward", "P = softmax(S) row by row, so dS is not dP: every row of dP goes through the "
    "softmax backward, with that row of P.",
    question="What lies between dP and dS?")
CAUSAL_IGNORED = Misconception(
    "causal flag ignored", "With causal=True query i sees only keys 0..i: the masked scores are −∞ before the softmax, "
    "so their probabilities and their gradients are exactly 0.",
    question="Which keys may query 0 see when causal=True?")
MASK_BOTTOM_RIGHT = Misconception(
    "causal mask aligned to the bottom right",
    "PyTorch's is_causal aligns the mask to the top left: query i sees keys 0..i whatever m is (torch.ones(n, m)"
    ".tril()). Aligning the last query with the last key (tril(m − n)) is another convention.",
    question="When n ≠ m, which keys does query 0 see under is_causal=True?")
MASK_WRONG_TRIANGLE = Misconception(
    "causal mask on the wrong triangle", "Query i sees keys j ≤ i (the lower triangle, diagonal included): the "
    "upper triangle lets queries see the future, and a strict triangle leaves query 0 with no key at all (0/0).",
    question="Which keys may query i see: j ≤ i, j < i or j ≥ i?")

FULL_SCORE_MATRIX = Misconception(
    "formed the whole score matrix",
    "FlashAttention's backward never holds (..., n, m) numbers: it recomputes P one block of keys at a time from that "
    "block's scores and lse, and takes D_i = Σ_j P_ij·dP_ij as Σ_k dO_ik·O_ik, which needs no block. A mask of shape "
    "(n, m) counts too: build each block's mask from its own key numbers.",
    question="Which of your tensors has one entry per (query, key) pair, and could it be one block's instead?")
BLOCK_ROW_SUM = Misconception(
    "D summed over one block instead of over all the keys",
    "The softmax backward dS = P∘(dP − D) needs D_i = Σ_j P_ij·dP_ij over every key j the query sees, not only the "
    "keys of the current block; Σ_k dO_ik·O_ik gives the whole sum at once.",
    question="Over which keys does the softmax backward's row sum run?")
BLOCK_SOFTMAX = Misconception(
    "a softmax within each block",
    "Each block's P is exp(S_block − lse): lse normalises over all the keys a query sees. A softmax within the block "
    "makes every block's row sum to 1 on its own.",
    question="What do the entries of one row of P sum to over one block, and over all the blocks?")
BLOCK_MASK_LOCAL = Misconception(
    "causal mask built from the block's own column numbers",
    "Column c of the block that starts at key s is key s + c: query i sees it when s + c ≤ i. A mask built from c "
    "alone repeats the first block's triangle in every block.",
    question="Which key number does column c of the block starting at s stand for?")

# Part D: a Function that saves only what its backward uses
FORGOT_SAVE = Misconception(
    "forgot to save tensors for backward",
    "In forward, hand backward its tensors with ctx.save_for_backward(...); read them back from ctx.saved_tensors.",
    question="How does backward get the tensors it needs?")
TENSOR_ON_CTX = Misconception(
    "a tensor kept as a plain ctx attribute",
    "Only tensors handed over with ctx.save_for_backward get autograd's bookkeeping (the version check, the release "
    "after backward) and are seen by saved-tensor hooks, which is how memory is measured; a plain attribute "
    "escapes both.",
    question="Which of your tensors does autograd not know you kept?")
TENSOR_OUTSIDE_CTX = Misconception(
    "a tensor kept in a global or a class attribute",
    "Hand backward its tensors through ctx.save_for_backward: a global or a class attribute is overwritten by the "
    "next call, so two calls in flight mix up their tensors.",
    question="What happens to that tensor when a second forward runs before the first backward?")
SAVED_UNNEEDED = Misconception(
    "saved what backward will not use",
    "dX needs only W, dW only X and db nothing: save W only if ctx.needs_input_grad says X needs a gradient, and X "
    "only if W does (ctx.needs_input_grad is already set in forward). A frozen layer then keeps no copy of its "
    "input alive until backward.",
    question="Which of the saved tensors does backward use when this input needs no gradient?")
GRADIENT_NOBODY_NEEDS = Misconception(
    "returned a gradient nobody needs", "Return None for every input whose ctx.needs_input_grad entry is False: the "
    "gradient costs a matrix product and is thrown away (and for b = None autograd refuses it).",
    question="Which entries of ctx.needs_input_grad are False here?")
LEADING_DIMS_IGNORED = Misconception(
    "dW or db not summed over every leading dimension",
    "X may be (..., D_in): W and b are used once per row of every leading dimension, so dW and db sum over all of "
    "them (flatten the leading dimensions first).",
    question="How many times is W used when X has shape (B, T, D_in)?")
WEIGHT_GRADIENT_TRANSPOSED = Misconception(
    "transposed weight gradient", "W has nn.Linear's layout (D_out, D_in) here: dW = dYᵀ·X has that shape.",
    question="Which product of dY and X has W's shape (D_out, D_in)?")
BIAS_AVERAGED = Misconception(
    "bias gradient averaged over the rows", "b is added to every row: its gradient sums the rows (a mean is the "
    "loss's business, already inside dY).",
    question="b is added to every row: do the rows' contributions add up or average?")

# Part E: the hunt
FLOAT32_GRADCHECK = Misconception(
    "gradcheck in float32", "In float32 the central differences gradcheck compares with are mostly rounding noise "
    "(about 7 significant digits, a step of 1e-6): it rejects correct backwards. Check float64 copies of the "
    "floating-point inputs.",
    question="What are central differences with h = 1e-6 worth in float32?")
TOLERANCE_TOO_LOOSE = Misconception(
    "tolerances too loose to see the planted error",
    "gradcheck's defaults (atol 1e-5, rtol 1e-3) let errors of 1e-5 relative through. In float64 the central "
    "differences are good to about 1e-9: choose atol and rtol between that noise and the error you must see.",
    question="How large is the planted error, and how large an error do your tolerances let through?")
TOLERANCE_BELOW_NOISE = Misconception(
    "tolerances below the finite differences' own noise",
    "Central differences in float64 (h = 1e-6) carry rounding noise of about 1e-10 to 1e-9: a tolerance below it "
    "rejects correct backwards. Measure the noise on a correct Function and stay above it.",
    question="How closely do central differences match a backward you know to be right?")
FIRST_WRONG_ONLY = Misconception(
    "only the first wrong input reported",
    "gradcheck stops at the first Jacobian that disagrees; to know every wrong input, check one input at a time "
    "(only it requires grad, the others are constants).",
    question="When two inputs are wrong, where does gradcheck stop?")
WHOLE_FUNCTION_BLAMED = Misconception(
    "every input blamed when one is wrong",
    "A gradcheck over all inputs at once only says that something is wrong. Check one input at a time: the others "
    "as constants that do not require grad.",
    question="How can one gradcheck tell you which input is wrong?")

# Stability (Parts B and C): a softmax computed without its shift
SHIFT_RULE = ("Shift each row by a constant that makes all its exponents at most 0: the shift cancels between "
              "numerator and denominator, so it is the same softmax (torch.softmax and F.cross_entropy do this).")
NAIVE_SOFTMAX = Misconception(
    "softmax without the max shift (exp overflows)", "In float64 exp(z) is inf once z > 709.78 and 0 once "
    "z < −745.1, so exp(z) / exp(z).sum() becomes inf / inf or 0 / 0 = nan on large logits. " + SHIFT_RULE,
    question="What is exp(1000) in float64?")
GLOBAL_SHIFT = Misconception(
    "shifted by the largest logit of the whole tensor instead of each row's",
    "One shift for all rows is exact on paper, but a row whose logits lie hundreds below the tensor's maximum "
    "underflows: every exp in it is 0, and 0 / 0 = nan. Each row (each slice along the last dimension) needs its "
    "own shift.",
    question="What happens to a row whose logits lie 2000 below the tensor's largest one?")
