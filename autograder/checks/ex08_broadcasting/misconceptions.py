"""Every mistake exercise 08's checks name: the name, the explanation graded feedback adds, and the question a learner
reads while working (never the fix)."""

from __future__ import annotations

from ...checking import Misconception

# ---------------------------------------------------------------------------------------------- Part A: backward

SUMMED_ALL = Misconception(
    "summed over every dimension",
    "Careful: t.sum(dim=()) with an empty tuple sums over ALL dimensions in PyTorch. Only call sum when there is a "
    "dimension to sum.",
    "What does t.sum(dim=()) return when the tuple of dimensions is empty?")
LEADING_KEPT = Misconception(
    "leading dimensions not removed",
    "Broadcasting lines shapes up from the right and adds dimensions in front: sum over the first "
    "grad.dim() - operand.dim() dimensions.",
    "Which dimensions did broadcasting add to the smaller operand, and where?")
NO_KEEPDIM = Misconception(
    "missing keepdim for size-1 dimensions",
    "Where the operand has a 1 and grad does not, sum with keepdim=True so the dimension stays (and later dimension "
    "numbers stay right).",
    "After summing a dimension where the operand has size 1, how many dimensions does your result have?")
WRONG_AXIS = Misconception(
    "sum over the wrong axis",
    "Extra dimensions are added on the LEFT (broadcasting aligns shapes from the right); size-1 dimensions are "
    "summed where the operand has the 1. Compare grad.shape and the operand's shape aligned from the right.",
    "Aligned from the right or from the left: which dimensions of grad belong to the operand?")
MEAN_NOT_SUM = Misconception(
    "mean instead of sum",
    "Each element of a broadcast operand was used once per copy, so its gradient is the SUM over the copies, not "
    "their mean.",
    "An element used k times: does its gradient add the k contributions or average them?")
STRETCHED_NOT_SUMMED = Misconception(
    "size-1 dimensions not summed",
    "Broadcasting also stretched every dimension where the operand has a 1 (and grad does not): each element there "
    "was used once per copy, so sum over that dimension too, with keepdim=True so that it stays as size 1.",
    "Besides the dimensions added in front, which dimensions of the operand did broadcasting stretch?")
NOT_A_TENSOR = Misconception(
    "a Python number where a tensor is asked for",
    "A 0-d tensor is still a tensor: grad.sum() is one, grad.sum().item() or float(...) is a Python number, which "
    "the caller cannot use as a gradient (no shape, no dtype, no device). Return the tensor.",
    "Is a 0-d tensor a Python number?")
EMPTY_NOT_SUMMED = Misconception(
    "a size-1 dimension stretched to size 0 left unsummed",
    "A 1 in the operand's shape broadcasts to ANY size in grad, 0 included: then each element was used zero times "
    "and its gradient is 0, a sum over nothing kept as size 1. A test such as grad.shape[i] > 1 skips it; what "
    "tells a stretched dimension is operand.shape[i] == 1 and grad.shape[i] != 1.",
    "What does broadcasting do with a size-1 dimension when the other size is 0?")
LEADING_SHIFTED = Misconception(
    "leading dimensions summed with a shifting index",
    "grad.sum(dim=i) without keepdim removes dimension i, so every later dimension moves one place left: a loop "
    "grad = grad.sum(dim=i) for i in range(lead) sums dimensions 0, 2, 4... of the original grad (or runs out of "
    "dimensions). Sum at position 0 each time, or all leading dimensions in one call.",
    "After grad.sum(dim=0) without keepdim, which dimension of the original grad is dimension 1?")
SUM_TO_SIZE = Misconception(
    "Tensor.sum_to_size where the part asks you to write it",
    "sum_to_size is the un-broadcasting in one call, which this part asks you to write: sum over the leading "
    "dimensions, then over the stretched size-1 dimensions with keepdim=True.",
    "Which library call did the part rule out, and why?")
FACTOR_MISSING = Misconception(
    "the product's other factor left out",
    "For out = a + b * c, d out / d b = c (elementwise): multiply the upstream gradient by c at the broadcast shape, "
    "then sum it down to b's shape (and the same for c with b). Summing grad alone is the rule for an addition.",
    "What is the derivative of b * c with respect to b?")
OWN_FACTOR = Misconception(
    "multiplied by the operand itself instead of the other factor",
    "d(b * c)/db is c, not b: b's gradient is grad * c summed down to b's shape; c's is grad * b summed down to c's.",
    "In b * c, which factor does the derivative with respect to b leave behind?")
SUMMED_BEFORE_PRODUCT = Misconception(
    "summed before multiplying",
    "Multiply first, at the broadcast shape, then sum: sum(grad * c) over the broadcast dimensions is not "
    "sum(grad) * sum(c) (nor sum(grad) times c), because c varies along the dimensions you sum.",
    "Does c stay the same along the dimensions you sum over?")

# ---------------------------------------------------------------------------------------------- Part B: mixing

STATISTICS_KEPT = Misconception(
    "probes that keep the batch's statistics",
    "Shuffling the rows of x, or repeating the whole batch, leaves every column's mean, standard deviation and "
    "maximum as they were: a function that mixes examples through such a statistic answers exactly as before. "
    "Change the batch-mates themselves: new values for the other rows, or fewer or more of them.",
    "Which statistics of a column change when you shuffle the rows, or repeat the batch?")
FIRST_ROWS_KEPT = Misconception(
    "batch-mates changed only after the example",
    "A sub-batch of the first rows (the lesson's 8 of 64) keeps row 0 and the rows before each example: a function "
    "that reads an earlier row (the first example, a running sum) gives those examples the same output. Change "
    "every other example, whichever side of it.",
    "Which batch-mates of example 3 does x[:5] still contain?")
SIZE_BLIND = Misconception(
    "the batch's size never changed",
    "A function can depend on the batch through its size alone (a per-example gradient of a mean loss is divided by "
    "n): new values for the other rows leave that unchanged. Change how many batch-mates there are too.",
    "Could an output depend on the number of examples without depending on their values?")
NAN_UNSEEN = Misconception(
    "a nan compared as no change",
    "Every comparison with nan is False, so |a - b| > tol is False when a probe's output is nan (a batch statistic "
    "of one example: the unbiased std divides by n - 1 = 0). A nan where the batch gave a number is a change; or "
    "keep at least two examples in every probe.",
    "What is nan > 1e-9?")
PROBE_REFUSED = Misconception(
    "a probe the function refuses stops the search",
    "Some functions run only on batches of a certain size (the lesson's x - x.mean(dim=1) needs n == d). A probe "
    "that fn refuses says nothing either way: catch its exception and probe another way (new values for the other "
    "rows keep the size).",
    "What should your function do when fn raises on one of your probes?")
POSITION_MOVED = Misconception(
    "the example moved to another row",
    "A per-example function may still depend on WHERE an example sits in the batch (a positional encoding, a weight "
    "per row): that is its position, not its batch-mates. A probe that puts example i at another row changes its "
    "position as well as its company; keep it at its own row and change only the other rows.",
    "In your probes, does example i sit at the same row as in x?")
ROUNDOFF_COUNTED = Misconception(
    "round-off counted as mixing",
    "A function can combine the batch in a way that cancels exactly in mathematics (a softmax shifted by the "
    "batch's maximum, a normalisation undone): its outputs then move by round-off, around 1e-16 relative, when the "
    "batch changes. That is no mixing: compare with a tolerance far above round-off.",
    "How large are the differences you flagged, compared with float64's round-off?")

# ---------------------------------------------------------------------------------------------- Part C: pooling

MASK_ACROSS_BATCH = Misconception(
    "every sentence pooled with every sentence's mask",
    "torch.matmul reads a 2-D first operand as ONE matrix and broadcasts it over x's batch dimension: mask (n, L) @ "
    "x (n, L, d) has shape (n, n, d), and its entry [a, b] is sentence a's tokens weighted by sentence b's mask. "
    "Each sentence's mask must meet its own tokens only, and the (n, n) table of scores that follows is the "
    "lesson's (n, 1)-against-(n,) table: the training loss broadcast it against the (n,) targets without a word.",
    "What shape does mask @ x have, and whose mask meets sentence a's tokens in its entry [a, b]?")
MASK_ON_FEATURES = Misconception(
    "the mask lined up with the features",
    "mask.unsqueeze(1) has shape (n, 1, L): in an elementwise product with x (n, L, d) it is read as one number per "
    "FEATURE, which runs only when L == d and zeroes the wrong entries. The mask must say one number per position "
    "of its own sentence, with a size-1 axis where x has its features.",
    "Against x of shape (n, L, d), which axis of x does a mask of shape (n, 1, L) line up with?")
PADDING_IN_MEAN = Misconception(
    "padding counted in the mean",
    "The pooled vector is the mean over a sentence's real tokens: divide the masked sum by the number of real "
    "tokens, kept as one number per sentence, not by L (a mean over the positions axis divides by every position, "
    "padding included).",
    "What does the pooled mean divide by: real tokens, or all L positions?")
COUNT_PER_FEATURE = Misconception(
    "token counts lined up with the features",
    "mask.sum(dim=1) has shape (n,): dividing an (n, d) sum by it lines the counts up with the features, which runs "
    "only when n == d. Keep the counts as a column, (n, 1).",
    "Against an (n, d) tensor, which axis does a tensor of shape (n,) line up with?")
CENTRED_PER_FEATURE = Misconception(
    "pooled vectors centred over the batch",
    "The text centres each sentence's pooled vector on its OWN mean (over its d features, keepdim=True). A mean "
    "over dim=0 subtracts the batch's mean of each feature, which mixes sentences: a sentence's score then depends "
    "on its batch-mates.",
    "Which mean does the centring subtract: the sentence's own, or the batch's?")
DETACHED = Misconception(
    "a score cut off from w, b and scale",
    "Training needs the score's gradient: compute it from the tensors, without .item(), .detach(), float() or NumPy, "
    "so that it stays attached to w, b and scale.",
    "Can autograd still reach w from the tensor you return?")
