"""Checks for exercise 08, broadcasting, one module per part: the backward of out = a + b * c when all three operands
broadcast, by hand (:mod:`.backward`); which output columns of a batch function depend on an example's batch-mates
(:mod:`.mixing`); a sentence scorer whose pooling broadcasts its mask along the wrong axis, fixed (:mod:`.pooling`);
:mod:`.misconceptions` holds every mistake they name; the hint book (:data:`hint`) is here.

Every check first runs its corner cases (the edges of the domain its docstring states), the same at every seed, then
the cases it draws. Oracles: autograd and central differences in float64 (Parts A and C), functions whose mixing
columns are known by construction and the batches the learner's code handed them (Part B).
"""

from ...hints import HintBook, PartHints
from .backward import check_add_mul_backward
from .mixing import check_mixed_features
from .pooling import check_score, sentence_data

__all__ = ["check_add_mul_backward", "check_mixed_features", "check_score", "hint", "sentence_data"]

#: For each part a question, then a check value or a smaller case, then the approach in words.
hint = HintBook({
    "A": PartHints(texts=(
        "Element $b_j$ of a broadcast operand is used once in every position of the output it was copied to. By the "
        "chain rule, what does its gradient add up, and what does each of those terms hold besides the upstream "
        "gradient?",
        "Smaller cases to test against: with `a` of shape `(2, 3)`, `b` of shape `(3,)`, `c` of shape `(2, 1)` and "
        "`grad` all ones, `grad_b` holds `c[0, 0] + c[1, 0]` three times over (shape `(3,)`) and `grad_c` holds the "
        "sum of `b` twice (shape `(2, 1)`). Then compare with autograd on random shapes of your own: the try-it cell's "
        "`gradcheck` says yes or no for any shapes you give it, `(0, 3)` and `()` included.",
        "For each operand: multiply the upstream gradient by that operand's local derivative at the output's shape; "
        "then sum away the dimensions broadcasting added in front, and sum with keepdim every dimension where the "
        "operand has size 1 and the output has not. Write that summing once, as a helper, and use it three times."),
        checks=("check_add_mul_backward",), cells=("add_mul_backward",)),
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
        "The same sentences raise when padded to 12 positions and run when padded to 8. Which sizes of `x` does "
        "that change, which other size of `x` do they then equal, and what in `given_score` could care?",
        "Print the shape of every intermediate tensor of the given `score` for `L = 8` and `d = 8`, then again for "
        "`L = 5`, `d = 8`. A smaller case: one sentence, `L = d = 2`, mask `[[1., 0.]]`, x `[[[1., 2.], [30., "
        "40.]]]`: the pooled vector must be `[1., 2.]` (the one real token), whatever the padding holds.",
        "Give every per-position quantity the shape that lines it up with the positions axis of x, keep the "
        "per-sentence counts as a column, and check with the smaller case and the try-it cell that the padding's "
        "content no longer changes a score."),
        checks=("check_score",), cells=("score",)),
})
