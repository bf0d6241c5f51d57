"""Checks for exercise 04, the backward passes of the layers a transformer is built from, one module per part: layer
normalisation by hand (:mod:`.layernorm`), cross-entropy with class weights, label smoothing and ignore_index
(:mod:`.cross_entropy`), attention's backward block by block from O and the log-sum-exp (:mod:`.attention`), a
Function that saves only what its backward uses (:mod:`.function`), and the hunt for a Function's wrong gradient
with gradcheck (:mod:`.hunt`); :mod:`.common` holds what Parts A–C share (a case, its oracles and how an answer is
compared) and :mod:`.misconceptions` every mistake they name.

Every check's docstring states the domain its part allows (shapes, dtypes, values) and every corner of that domain is a
case that runs first, at every seed; the seed varies only the rest. Every gradient is compared with autograd and
float64 central differences, on shapes where the usual mistakes cannot hide. Each case is a
:func:`~autograder.checking.trial`, and every mistake named shows in at least two cases of the visible and of the
hidden test; a case never names a mistake whose value there is the right answer
(:func:`~autograder.misconceptions.armed`). Parts A–C run the learner's function with autograd forbidden
(:class:`~autograder.routes.Route`), on the caller's own tensors, which must come back unchanged and must not be
aliased by the result.
"""

from ...hints import HintBook, PartHints
from .attention import check_attention_backward
from .cross_entropy import check_softmax_cross_entropy_backward
from .function import check_linear_function
from .hunt import check_wrong_inputs
from .layernorm import check_layernorm_backward
from .misconceptions import GLOBAL_SHIFT, NAIVE_SOFTMAX

__all__ = ["GLOBAL_SHIFT", "NAIVE_SOFTMAX", "check_attention_backward", "check_layernorm_backward",
           "check_linear_function", "check_softmax_cross_entropy_backward", "check_wrong_inputs", "hint"]

hint = HintBook({
    "A": PartHints(texts=(
        "x_j reaches the loss through x̂_j, and also through the row's mean and its σ, which every x̂_k of the row "
        "uses: how many paths lead from x_j to the loss?",
        "Two checks your dx must pass, for eps close to 0: every row of dx sums to zero, and is orthogonal to that "
        "row's x̂ (adding a constant to a row, or scaling it, changes nothing after normalisation). A smaller case "
        "to derive first: D = 2, where x̂ is ±1 whatever the row.",
        "Write x̂ = (x − μ)·r with r = 1/σ. Take dx̂ = γ·dy, then collect, for each x_j, the direct term and the "
        "terms through μ and through r (dμ/dx_j = 1/D; dvar/dx_j = 2(x_j − μ)/D). Each sum over the row becomes "
        "a mean along the last dimension; dγ and dβ sum over every leading dimension."),
        checks=("check_layernorm_backward",), cells=("layernorm_backward",)),
    "B": PartHints(texts=(
        "Write one kept row's loss with every option on: which weight multiplies −log p of the target, which "
        "multiplies −log p_c inside the smoothing sum, and what does the mean divide by once the classes are "
        "weighted? And for a row of probabilities: how many classes pull on each logit, and can the mean tell a "
        "row of zeros from any other row?",
        "Ask PyTorch on a case small enough to do by hand: logits all zero of shape (2, 3), targets [0, 1], weight "
        "[4, 1, 1]. Without smoothing autograd gives rows [−0.5333, 0.2667, 0.2667] and [0.0667, −0.1333, 0.0667] "
        "(a denominator of 5, not 2); with label_smoothing = 0.3, [−0.4133, 0.2067, 0.2067] and [0.0067, −0.0733, "
        "0.0667]: the second row is no longer a multiple of p − q. The same labels as one-hot probability rows, "
        "[[1, 0, 0], [0, 1, 0]], with the same weight: [−1.3333, 0.6667, 0.6667] and [0.1667, −0.3333, 0.1667]. "
        "Probability rows [[1, 1, 0], [0, 0, 0]] with that weight: [−1.1667, 0.3333, 0.8333] and a row of zeros; "
        "without the weight, [−0.1667, −0.1667, 0.3333].",
        "Treat the terms separately. The target's term (1 − ε)·w_y·(−log p_y) differentiates to the lesson's p − y "
        "scaled by w_y, and each class's share of the smoothing term gives its own scaled copy of the same form; "
        "an ignored row takes no part, and the label it holds need not be a class. For probability rows, every "
        "class is a term of that same form with its own coefficient: add them up and collect what multiplies p "
        "before you write code, then test your rule on the second hint's rows by hand. What the mean divides by is "
        "one experiment per kind of target: append a row that should count for nothing and see by what factor the "
        "other rows' gradients change."),
        checks=("check_softmax_cross_entropy_backward",), cells=("softmax_cross_entropy_backward",)),
    "C": PartHints(texts=(
        "The forward kept lse_i = log Σ_j exp(S_ij) over the keys query i sees: what is exp(S_ij − lse_i), and "
        "which scores does it need besides S_ij itself?",
        "Check values on the try-it cell's causal batch (seed 0), head 0, query 2: lse = 1.9772 and D = 1.6275, "
        "whether you sum P∘dP over all its keys or dO∘O over its outputs; with blocks of 2 keys, the two blocks it "
        "sees give 0.3871 and 1.2403, neither of which is D. A smaller case for the mask: n = 2, m = 3, blocks of 2; "
        "in the second block, column 0 is key 2, which neither query sees.",
        "Compute D once from dO and O (expand Σ_j P_ij·dP_ij with dP = dO·Vᵀ and O = P·V to see why). Then, for each "
        "block of keys starting at s: its scores from Q and that block of K; the causal mask from the real key "
        "numbers s, s + 1, ... compared with each query's number; P as the exponential of the scores minus lse; the "
        "block's rows of dV from P and dO; dS from P, the block's dP and D; the block's rows of dK; and dQ added up "
        "over the blocks. Finally join the blocks' rows of dK and dV along the key dimension."),
        checks=("check_attention_backward",), cells=("attention_backward",)),
    "D": PartHints(texts=(
        "Which tensor does dX need, which does dW need, and which does db need?",
        "Measure it: with X of shape (4, 3) as data (no grad) and W, b trained, PyTorch's own F.linear saves "
        "one tensor of 12 numbers; with W and b frozen, one of 6. Count what your forward saves with "
        "torch.autograd.graph.saved_tensors_hooks, as the text's try-it cell does.",
        "ctx.needs_input_grad holds one bool per argument of forward, already in forward: save a tensor only "
        "when a gradient that uses it is needed (None in its place otherwise), and in backward return None for "
        "every input whose entry is False. Flatten the leading dimensions of X and dY for dW and db."),
        checks=("check_linear_function",), cells=("Linear",)),
    "E": PartHints(texts=(
        "gradcheck on all inputs at once says yes or no: how can it tell you which input is wrong, and how small "
        "an error can its default tolerances see?",
        "Measure first: on a Function you know is right (F.layer_norm wrapped as in the try-it cell, float64), how "
        "large is the largest gap between the analytical and the numerical Jacobian? And how large is the error "
        "the part promises for a wrong one?",
        "Check one floating-point input at a time: float64 copies of every floating input, only the one under "
        "test requiring grad, integer and boolean inputs passed as they are; ask gradcheck for a verdict instead "
        "of an exception, with atol and rtol set between the noise you measured and the promised error."),
        checks=("check_wrong_inputs",), cells=("wrong_inputs",)),
})
