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
        "sum of `b` twice (shape `(2, 1)`). Then run the try-it cell on shapes of your own, `(0, 3)` and `()` "
        "included: every shape your function returns must be its operand's own (gradcheck cannot see that, as its "
        "lazy `a + b` shows), and gradcheck must say True.",
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
        "`given_score` says it returns one score per sentence. What shape does it return for the 64 sentences, and "
        "what does the training loss make of that shape against targets `y` of shape `(64,)`?",
        "A smaller case: two sentences, `L = d = 2`, x `[[[1., 2.], [30., 40.]], [[5., 6.], [7., 8.]]]`, mask "
        "`[[1., 0.], [1., 1.]]`. The pooled vectors must be `[[1., 2.], [6., 7.]]`, shape `(2, 2)`: the first "
        "sentence's one real token, the mean of the second one's two. Print what the given pooling line gives for "
        "this case, and its shape.",
        "Each sentence's mask must weigh that sentence's own positions only. Either multiply elementwise, after "
        "giving the mask a size-1 axis where x has its features, or make the matrix product a batched one, one "
        "`(1, L)` row per sentence; divide by the counts kept as a column. The try-it cell's two changes (more "
        "padding, fewer batch-mates) must then move no score by more than round-off."),
        checks=("check_score",), cells=("score",)),
})
