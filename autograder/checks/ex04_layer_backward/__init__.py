"""Checks for exercise 04, the backward passes of the layers a transformer is built from, one module per part: layer
normalisation by hand (:mod:`.layernorm`), cross-entropy with label smoothing and ignore_index
(:mod:`.cross_entropy`), attention with the causal mask over batches and heads (:mod:`.attention`), a Function that
saves only what its backward uses (:mod:`.function`), and the hunt for a Function's wrong gradient with gradcheck
(:mod:`.hunt`); :mod:`.common` holds what Parts A–C share (a case, its oracles and how an answer is compared) and
:mod:`.misconceptions` every mistake they name.

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
        "What target distribution q does F.cross_entropy compare the softmax with when label_smoothing = ε, and "
        "what does its mean divide by when some targets equal ignore_index?",
        "Ask PyTorch on a small case outside your function: logits of shape (3, 4), targets [1, −100, 2], "
        "label_smoothing = 0.2; autograd's gradient has a zero row, and each other row sums to zero. Compare it "
        "with the (P − Y)/N you know.",
        "Build q row by row (the one-hot target mixed with the uniform distribution, with the weights PyTorch's "
        "documentation gives), take the softmax minus q, zero the rows whose target is ignore_index, and divide "
        "by the number of rows kept. A label equal to ignore_index need not be a class, so replace it before "
        "you make a one-hot."),
        checks=("check_softmax_cross_entropy_backward",), cells=("softmax_cross_entropy_backward",)),
    "C": PartHints(texts=(
        "With causal=True, what are the masked entries of P, and what does the softmax backward give for dS "
        "there?",
        "A smaller case: n = 2 queries, m = 3 keys, causal. Query 0 sees key 0 only, so its row of P is [1, 0, 0] "
        "and its row of dS is zero; key 2 is seen by nobody, so its rows of dK and dV are zero.",
        "Recompute the forward pass with the masked scores set to −∞ before the softmax (PyTorch's mask: query i "
        "sees keys j ≤ i). From there the backward runs as without the mask, step by step: the masked entries "
        "drop out by themselves. For leading dimensions, transpose the last two dimensions only."),
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
