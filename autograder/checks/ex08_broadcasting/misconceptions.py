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
    "Each term b[..., t] * c[..., t] of the sum has derivative c[..., t] with respect to b[..., t]: the gradient that "
    "reaches b's copies is the upstream gradient times c, at the product's shape, before any summing down. Summing "
    "grad alone is the rule for an addition.",
    "What is the derivative of a term b_t * c_t with respect to b_t?")
OWN_FACTOR = Misconception(
    "multiplied by the operand itself instead of the other factor",
    "In a term b_t * c_t the derivative with respect to b_t is c_t, not b_t: b's gradient is built from c, c's from "
    "b.",
    "In b_t * c_t, which factor does the derivative with respect to b_t leave behind?")
LEFT_ALIGNED = Misconception(
    "size-1 dimensions compared from the left",
    "Broadcasting lines shapes up from the RIGHT: an operand's last dimension meets grad's last one. Comparing the "
    "operand's size-1 dimensions with grad's first dimensions, before the dimensions broadcasting added in front "
    "are gone, sums the wrong dimensions whenever the operand has fewer dimensions than grad.",
    "When the operand has fewer dimensions than grad, which dimension of grad does the operand's dimension 0 meet?")
AXIS_NOT_RESTORED = Misconception(
    "the summed axis not given back to grad",
    "grad has the output's shape, which has lost the product's summed axis. Multiplied by a factor as it comes, its "
    "axes line up, from the right, with the factor's axes, the summed one included: an error when the sizes differ, "
    "and a silently wrong gradient when they happen to agree (a square product), the lesson's bug inside a backward.",
    "Aligned from the right, which axis of c meets grad's last axis, and which axis of the product did grad's last "
    "axis come from?")
AXIS_MISPLACED = Misconception(
    "the summed axis given back at the wrong place",
    "dim numbers the axes of the product's broadcast shape P, b and c lined up from the right. grad has out's shape: "
    "P without that axis, lined up from the right with a, which may add dimensions in front. So a positive dim, "
    "counted from the left of P, names another axis of grad as soon as a adds one (and a count in one factor's own "
    "dimensions is off when the other factor has more); the summed axis is not always the last one either. Give "
    "the copies of grad their axis where the product had it, counted from the right.",
    "In this case, number the axes of the product and those of grad: which of grad's axes sits where the "
    "product's axis dim was, and does it carry the same number?")
DIM_FROM_LEFT = Misconception(
    "dim counted from the left of grad",
    "dim numbers the axes of the product's broadcast shape P from the left, but grad has out's shape: P without that "
    "axis, lined up from the right with a, which may add dimensions in front. Where a adds some, grad's axis number "
    "dim (counted from the left) is not the one that came from the product's axis dim; counted from the right, the "
    "numbers of grad and P agree whatever a adds.",
    "When a adds dimensions in front of grad, which of the product's axes does grad's axis number dim come from?")
TERMS_NOT_COPIED = Misconception(
    "the sum's k terms not each given the gradient",
    "The sum over axis dim added k terms, k the product's size there, which may come from one factor alone (a "
    "0-d or size-1 other factor). Each term receives the upstream gradient, so the gradient of a factor whose size "
    "on that axis is k has that size too, whatever the other factor's size there.",
    "How many terms did the sum add, and which factor's shape says so when the other has size 1 (or none) there?")

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

SYMPTOM_STAGE = Misconception(
    "the stage where the wrong gradient shows blamed",
    "scale's gradient is wrong, but a backward can only pass on what it receives: the scale stage multiplies the "
    "gradient that reaches its output by the token features, and that gradient comes back through the stages after "
    "it. Test each stage alone (gradcheck on float64 inputs of your own, shaped and filled like the notebook's), or "
    "look at the gradient arriving at each stage's input with a hook.",
    "Is the scale stage's backward wrong, or is the gradient it receives already wrong?")
OTHER_STAGE = Misconception(
    "a stage whose backward is right blamed",
    "Each stage is a Function of its own: gradcheck it alone, on float64 inputs like the notebook's batch (several "
    "sentences, padded, of different lengths; the mask is data, with no gradient), and the stage whose backward is "
    "wrong says False; the others say True on any inputs.",
    "What does gradcheck say about each stage alone, on a batch like the notebook's?")
AFFECTED_DOWNSTREAM = Misconception(
    "a parameter after the wrong stage counted as affected",
    "A backward runs from the loss towards the inputs: a parameter's gradient is made by the stage where it enters, "
    "from the gradient that reaches that stage. A parameter that enters after the wrong stage has its gradient "
    "before that backward runs.",
    "On its way from the loss to each parameter you named, does the gradient pass through the wrong stage's "
    "backward?")
AFFECTED_MISSED = Misconception(
    "a parameter before the wrong stage counted as safe",
    "A parameter that enters the scorer before the wrong stage gets its gradient from what that stage's backward "
    "passes back: a wrong backward there makes it wrong, on the batches where the bug shows.",
    "Which parameters enter the scorer before the wrong stage?")
HIDING_SHOWS = Misconception(
    "a batch on which the bug shows offered as hiding it",
    "On this batch the given backward and the formula's gradient disagree by far more than round-off: the bug "
    "shows. A batch that hides it is one on which the given backward's arithmetic and the forward's coincide.",
    "On the batches where your gradcheck of the wrong stage said True, what did the sentences have in common that "
    "this batch's sentences lack?")
SHOWING_HIDES = Misconception(
    "a batch on which the bug hides offered as showing it",
    "On this batch the given backward agrees with the formula's gradient to round-off, whatever the upstream "
    "gradient: a gradcheck on it says True, and a test written with it would pass the bug.",
    "Which batches made your gradcheck of the wrong stage say False, and what does this one lack?")
RELATIVE_TO_GIVEN = Misconception(
    "the error measured relative to the given gradient",
    "The part asks for ||given - right|| / ||right||: the error relative to the RIGHT gradient, which is what the "
    "optimiser should have received.",
    "Which gradient does the relative error divide by?")
NOT_RELATIVE = Misconception(
    "an absolute error where a relative one is asked for",
    "The part asks for the error relative to the size of the right gradient: divide the norm of the difference by "
    "the norm of the right gradient.",
    "Is your number relative to the gradient's size?")
COLLEAGUE_BACKWARD = Misconception(
    "the colleague's backward returned unchanged",
    "On every batch the test tried, this fixed_backward gives the numbers the colleague's pool stage passes back: "
    "it is right exactly where the given backward is right, and keeps its bug everywhere else. Derive the stage's "
    "backward from its forward instead: how much does p[i] move when one real token's feature of sentence i moves?",
    "On which of the batches listed does the given backward agree with autograd, and what do those batches have that "
    "the others lack?")
PADDING_COUNTED = Misconception(
    "padding counted in the mean",
    "The forward averages over a sentence's real tokens only: dividing by the padded length L counts the padding, "
    "and is right only for sentences without any.",
    "How many tokens does sentence i's mean divide by in the forward?")
PADDING_GRADIENT = Misconception(
    "a gradient sent to padding positions",
    "A padding position is multiplied by a 0 of the mask in the forward: its features never reach the output, so "
    "their gradient is 0.",
    "Does a padding token's feature change the pooled vector?")
NOT_AVERAGED = Misconception(
    "the pool's division left out of its backward",
    "Each real token's feature enters its sentence's mean with a weight of one over the sentence's count: the "
    "backward carries that weight too.",
    "By how much does p[i] move when one real token's feature moves by 1?")
