"""Checks for exercise 08, broadcasting, one module per part: the backward of out = a + (b * c).sum(dim) when all three
operands broadcast and the caller picks the summed axis, by hand (:mod:`.backward`); which output columns of a batch
function depend on an example's batch-mates (:mod:`.mixing`); a bug hunt in a colleague's scorer of four hand-written
Functions (:mod:`.colleague`), one of whose backward passes is wrong only on some batches (:mod:`.pooling`);
:mod:`.misconceptions` holds every mistake they name; the hint book (:data:`hint`) is here.

Every check first runs its corner cases (the edges of the domain its docstring states), the same at every seed, then
the cases it draws. Oracles: autograd and central differences in float64 (Parts A and C), functions whose mixing
columns are known by construction and the batches the learner's code handed them (Part B).
"""

from ...hints import HintBook, PartHints
from . import colleague
from .backward import check_add_dot_backward
from .mixing import check_mixed_features
from .pooling import check_bug_batches, check_bug_hunt, sentence_data

__all__ = ["check_add_dot_backward", "check_bug_batches", "check_bug_hunt", "check_mixed_features", "colleague", "hint",
           "sentence_data"]

#: For each part a question, then a check value or a smaller case, then the approach in words.
hint = HintBook({
    "A": PartHints(texts=(
        "`grad` has the shape of `out`. With `b` of shape `(2, 3)`, `c` of shape `(2, 1)`, `a` of shape `(5, 1)` and "
        "`dim` 0, what shape has `grad`? Which of its axes came from `a` alone, which from the product, and where, "
        "among them, was the axis that the sum removed?",
        "A smaller case to test against: `b = torch.arange(6.).reshape(2, 3)`, `c = torch.tensor([[1.], [2.]])`, `a` "
        "any tensor of shape `(2, 1)`, `dim` 0 and `grad = torch.tensor([[1., 0., 0.], [0., 0., 1.]])`. Then "
        "`grad_a` is `[[1.], [1.]]`, `grad_b` is `[[1., 0., 1.], [2., 0., 2.]]` and `grad_c` is `[[2.], [8.]]`. "
        "Then run the try-it cell on shapes and dims of your own, with an `a` that adds a dimension in front among "
        "them: every shape your function returns must be its operand's own, and gradcheck must say True.",
        "Trace one entry of that case: `b[1, 2]` appears in one term of `out[0, 2]` and one of `out[1, 2]`, each "
        "time times `c[1, 0]`, so its gradient is `(grad[0, 2] + grad[1, 2]) * c[1, 0]`, which is 2. Arrange `grad` "
        "so that every output's entry meets each of its k terms: which axis does it need back, and of what size when "
        "only one factor has the k? Where does that axis go among `grad`'s axes? Number the axes of `grad` and of the "
        "product from both ends: from which end do the numbers agree whatever `a` adds in front? From there each "
        "factor goes as in the lesson: times the other factor, then summed down to its own shape."),
        checks=("check_add_dot_backward",), cells=("add_dot_backward",)),
    "B": PartHints(texts=(
        "To see whether example $i$'s output depends on its batch-mates, what must stay the same between two calls "
        "of `fn`, and what must change? Which changes leave a column's mean or maximum exactly as they were?",
        "A smaller case: `fn = lambda x: x - x.mean(dim=0)` on `x = torch.arange(6.).reshape(3, 2)`. Shuffle the "
        "rows and look at row 0's output: the same. Replace rows 1 and 2 with other numbers: different. Then try "
        "`lambda x: x / len(x)`, `lambda x: x - x[0]` and the lesson's `lambda x: x - x.mean(dim=1)` on a `(3, 3)` "
        "batch with your probes, and print what a batch of one does to `(x - x.mean(0)) / x.std(0)`.",
        "For every example, keep its row and change the others: once with new values at the same batch size, once "
        "with a different number of batch-mates (skip a probe that fn refuses). Compare its output row with the "
        "original column by column, counting a nan as a change and using a tolerance far above round-off, relative "
        "to the column's size."),
        checks=("check_mixed_features",), cells=("mixed_features",)),
    "C": PartHints(texts=(
        "gradcheck of the whole scorer says False: with respect to which of `w`, `b` and `scale` (one parameter at a "
        "time)? If every stage then passes a gradcheck alone, what do the notebook's sentences have that your test "
        "batch did not?",
        "Check values. On the notebook's data in float64 at the fitted parameters, the relative errors are round-off "
        "for `w` and `b` (below 1e-9) and about 1.37 for `scale`; for the first sentence alone all three are "
        "round-off. A small batch to test a stage on: two sentences of one feature, padded to 3 positions, with "
        "mask `[[1., 1., 1.], [1., 0., 0.]]` and an upstream gradient of ones of shape `(2, 1)`; central differences "
        "give you the numbers to match.",
        "gradcheck each stage alone on float64 inputs built like the notebook's batch: several sentences, padded, "
        "with the mask as data (gradcheck with respect to the other input only). For the two masks, start from a "
        "batch on which pool's gradcheck says False and change one thing at a time (how many sentences, how many "
        "real tokens each has, where the padding is) until it says True: which change flips it? For the prediction, "
        "follow each parameter's gradient from the loss back to the stage where the parameter enters: does it pass "
        "through the wrong backward? For the fix, as in lesson 01, count the routes by which a real token's "
        "feature, and a padding position's, reach the pooled vector, on the two-sentence batch."),
        checks=("check_bug_batches", "check_bug_hunt"), cells=("bug_stage", "bug_batches", "bug_hunt")),
})
