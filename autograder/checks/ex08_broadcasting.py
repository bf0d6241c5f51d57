"""Checks for exercise 08, broadcasting: ``unbroadcast``, a per-example centring function that rejects the wrong
shapes, and the fixed version of a training snippet with a broadcasting bug.

Every check's docstring states the domain its part allows, and each corner of it is a fixed case that runs first at
every seed (a 0-d shape, a torch.Size, a size-1 dimension to sum, an empty leading dimension, one example, one
feature...); the seed varies only the rest. Every case is a :func:`trial`, built so that each catalogued mistake shows
in at least two of them; a case never names a mistake whose value there is the right answer
(:func:`~autograder.misconceptions.armed`).

The contract for a wrong shape (stated to learners): ``raise ValueError`` whose message shows both shapes. An
``assert`` is not enough: it vanishes under ``python -O`` and raises AssertionError, the signal of a broken
invariant inside your own code rather than of a caller's bad argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..checking import (
    GradingFailure,
    Misconception,
    Route,
    as_answer,
    call_learner,
    check,
    expect_close,
    expect_no_alias,
    fmt,
    proven_failure,
    trial,
)
from ..oracles import autograd_gradient, central_difference
from ..routes import watch_calls
from ..seeding import choice, generator, uniform

Tensor = torch.Tensor
Shape = tuple[int, ...]


# ---------------------------------------------------------------------------------------------------------------
# Part A: unbroadcast(grad, shape)

SUMMED_ALL = Misconception(
    "summed over every dimension",
    "Careful: t.sum(dim=()) with an empty tuple sums over ALL dimensions in PyTorch. Only call sum when there is a "
    "dimension to sum.")
LEADING_KEPT = Misconception(
    "leading dimensions not removed",
    "Broadcasting lines shapes up from the right and adds dimensions in front: sum over the first "
    "grad.dim() - len(shape) dimensions.")
NO_KEEPDIM = Misconception(
    "missing keepdim for size-1 dimensions",
    "Where shape has a 1 and grad does not, sum with keepdim=True so the dimension stays (and later dimension "
    "numbers stay right).")
WRONG_AXIS = Misconception(
    "sum over the wrong axis",
    "Extra dimensions are added on the LEFT (broadcasting aligns shapes from the right); size-1 dimensions are summed "
    "where shape has the 1. Compare grad.shape and shape aligned from the right.")
MEAN_NOT_SUM = Misconception(
    "mean instead of sum",
    "Each element of the small tensor was used once per copy, so its gradient is the SUM over the copies, not their "
    "mean.")
STRETCHED_NOT_SUMMED = Misconception(
    "size-1 dimensions not summed",
    "Broadcasting also stretched every dimension where shape has a 1 (and grad does not): each element there was used "
    "once per copy, so sum over that dimension too, with keepdim=True so that it stays as size 1.")
NOT_A_TENSOR = Misconception(
    "a Python number where a tensor is asked for",
    "A 0-d tensor is still a tensor: grad.sum() is one, grad.sum().item() or float(...) is a Python number, which "
    "the caller cannot use as a gradient (no shape, no dtype, no device). Return the tensor.")
EMPTY_NOT_SUMMED = Misconception(
    "a size-1 dimension stretched to size 0 left unsummed",
    "A 1 in shape broadcasts to ANY size in grad, 0 included: then each element was used zero times and its gradient "
    "is 0, a sum over nothing kept as size 1. A test such as grad.shape[i] > 1 skips it; what tells a stretched "
    "dimension is shape[i] == 1 and grad.shape[i] != 1.")
LEADING_SHIFTED = Misconception(
    "leading dimensions summed with a shifting index",
    "grad.sum(dim=i) without keepdim removes dimension i, so every later dimension moves one place left: a loop "
    "grad = grad.sum(dim=i) for i in range(lead) sums dimensions 0, 2, 4... of the original grad (or runs out of "
    "dimensions). Sum at position 0 each time, or all leading dimensions in one call.")
SUM_TO_SIZE = Misconception(
    "Tensor.sum_to_size where the part asks you to write it",
    "sum_to_size is this exercise in one call. Write it yourself: sum over the leading dimensions, then over the "
    "size-1 dimensions with keepdim=True.")


#: Bound when this module is imported, so that learner code cannot swap it.
_SUM_TO_SIZE = torch.Tensor.sum_to_size


def broadcast_pair(gen: torch.Generator, *, leading: int | None = None, ones: int | None = None,
                   ndim: int | None = None) -> tuple[Shape, Shape]:
    """A random ``(grad_shape, shape)`` such that a tensor of ``shape`` broadcasts to ``grad_shape``.

    ``shape`` has ``ndim`` dimensions (random 1-3 if None); ``leading`` dimensions are added in front (random 0-2 if
    None); ``ones`` of the shape's dimensions are size 1 and get expanded (random if None). Sizes that differ are
    never 1, so every broadcast really happens.
    """
    if ndim is None:
        ndim = choice(gen, [1, 2, 3]) if ones is None else max(ones, choice(gen, [1, 2, 3]))
    ones = int(torch.randint(0, ndim + 1, (), generator=gen)) if ones is None else ones
    expanded = set(torch.randperm(ndim, generator=gen)[:ones].tolist())
    shape, grad_shape = [], []
    for dim in range(ndim):
        size = int(torch.randint(2, 5, (), generator=gen))
        shape.append(1 if dim in expanded else size)
        grad_shape.append(size)
    leading = choice(gen, [0, 1, 2]) if leading is None else leading
    front = [int(torch.randint(2, 5, (), generator=gen)) for _ in range(leading)]
    return tuple(front + grad_shape), tuple(shape)


VISIBLE_PAIRS: list[tuple[Shape, Shape]] = [
    ((4, 3), (3,)),          # a leading dimension to remove
    ((4, 3), (4, 1)),        # a size-1 dimension: sum it, keep it
    ((2, 3, 4), (3, 1)),     # both
    ((3, 3), (3,)),          # square: summing over the wrong axis gives the right shape, wrong numbers
    ((2, 3), ()),            # a scalar
    ((3, 4), (3, 4)),        # nothing to do
    ((2, 1, 4), (1, 1, 4)),  # a size-1 dimension that was never expanded stays as it is
]


#: Part A's corners, tried at every seed (after the visible pairs in the public test, first in the hidden one).
CORNER_PAIRS: list[tuple[Shape, Shape]] = [
    ((2, 3, 4), torch.Size([3, 1])),  # shape given as a torch.Size, with a leading and a size-1 dimension to sum
    ((3, 4, 5), (4, 1)),     # a size-1 dimension of shape that grad stretched: summed, kept as 1
    ((), ()),                # a 0-d grad for a 0-d shape: nothing to do
    ((4, 2), ()),            # down to a scalar: a 0-d tensor, not a Python number
    ((0, 3), (3,)),          # an empty leading dimension: the sum over nothing is 0
    ((0, 3), (1, 3)),        # a size-1 dimension stretched to size 0: zeros of shape (1, 3), not an empty tensor
    ((2, 0), (2, 1)),        # the same on the last dimension
    ((2, 3, 4), (4,)),       # two leading dimensions to remove (numbered again after each sum without keepdim)
]


def _unbroadcast_cases(grading_seed: int | None) -> list[tuple[Shape, Shape, Tensor]]:
    """Visible: the fixed pairs and the corners, then a property check on 12 random pairs. Hidden: the corners, then
    structured and random pairs."""
    if grading_seed is None:
        gen = generator("08/unbroadcast/property", 0)
        pairs = VISIBLE_PAIRS + CORNER_PAIRS + [broadcast_pair(gen) for _ in range(12)]
    else:
        gen = generator("08/unbroadcast", grading_seed)
        # Each mistake shows in at least two structured cases: leading dimensions (summed from the wrong end, or
        # kept), one size-1 dimension (keepdim forgotten, without crashing), nothing to sum (sum(dim=()) sums all).
        pairs = CORNER_PAIRS + [broadcast_pair(gen, leading=choice(gen, [1, 2]), ones=0),  # leading dims only
                 broadcast_pair(gen, leading=choice(gen, [1, 2]), ones=0),
                 broadcast_pair(gen, leading=0, ones=1, ndim=choice(gen, [2, 3])),  # one size-1 dim only
                 broadcast_pair(gen, leading=1, ones=1, ndim=choice(gen, [2, 3])),  # one of each
                 broadcast_pair(gen, leading=0, ones=0),                     # nothing to do
                 broadcast_pair(gen, leading=1, ones=2),                     # both
                 (broadcast_pair(gen, leading=1, ones=0)[0], ())]            # to a scalar
        pairs += [broadcast_pair(gen) for _ in range(6)]
    return [(tuple(grad_shape), shape, uniform(gen, tuple(grad_shape))) for grad_shape, shape in pairs]


def _shape_suspect(got: Shape, shape: Shape, grad_shape: Shape) -> tuple[Misconception, ...]:
    """The mistake a wrong result shape points to (a suspect: named only when two cases agree); none when the shape
    fits several (a one-element result for an all-ones shape: summed over everything, or lost a size-1 dimension)."""
    if math.prod(got) == 1 and math.prod(shape) == 1:
        return ()
    return (_shape_mistake(got, shape, grad_shape),)


def _stretched_kept(got: Shape, shape: Shape, grad_shape: Shape) -> bool:
    """The leading dimensions are gone, but some dimension where shape has a 1 still has grad's size."""
    trailing = grad_shape[len(grad_shape) - len(shape):] if shape else ()
    if len(got) != len(shape) or len(trailing) != len(shape):
        return False
    return any(s == 1 and g != 1 and o == g for o, s, g in zip(got, shape, trailing)) and all(
        o == s for o, s, g in zip(got, shape, trailing) if not (s == 1 and g != 1))


def _empty_kept(got: Shape, shape: Shape, grad_shape: Shape) -> bool:
    """The result differs from shape only where shape has a 1 that grad stretched to 0, and keeps that 0."""
    trailing = grad_shape[len(grad_shape) - len(shape):] if shape else ()
    if len(got) != len(shape) or len(trailing) != len(shape) or tuple(got) == tuple(shape):
        return False
    return all(o == s or (s == 1 and g == 0 and o == 0) for o, s, g in zip(got, shape, trailing))


def _shifted_leading(grad: Tensor, shape: Shape) -> Tensor | None:
    """The mistake of summing the leading dimensions with ``grad.sum(dim=i)`` for ``i`` in ``range(lead)`` (the
    dimensions renumber after each sum), then the size-1 dimensions correctly; None when that raises, or when there
    are fewer than two leading dimensions (one is summed right)."""
    lead = grad.dim() - len(shape)
    if lead < 2:
        return None
    for i in range(lead):
        if i >= grad.dim():
            return None
        grad = grad.sum(dim=i)
    for dim, size in enumerate(shape):
        if size == 1 and grad.shape[dim] != 1:
            grad = grad.sum(dim=dim, keepdim=True)
    return grad


def _shifted_raises(grad_shape: Shape, shape: Shape) -> bool:
    """Whether the shifting-index loop over the leading dimensions runs out of dimensions (an IndexError)."""
    lead = len(grad_shape) - len(shape)
    return any(i >= len(grad_shape) - i for i in range(lead))


def _shape_mistake(got: Shape, shape: Shape, grad_shape: Shape) -> Misconception:
    if math.prod(got) == 1 and math.prod(shape) > 1:
        return SUMMED_ALL
    if len(got) > len(shape):
        return LEADING_KEPT
    if _empty_kept(got, shape, grad_shape):
        return EMPTY_NOT_SUMMED
    shifted = _shifted_leading(torch.zeros(grad_shape), shape)
    if shifted is not None and tuple(shifted.shape) == tuple(got):
        return LEADING_SHIFTED
    if _stretched_kept(got, shape, grad_shape):
        return STRETCHED_NOT_SUMMED
    if len(got) < len(shape) or [s for s in got if s != 1] == [s for s in shape if s != 1]:
        return NO_KEEPDIM
    return WRONG_AXIS


def _wrong_axis(grad: Tensor, shape: Shape) -> Tensor | None:
    """The mistake of removing the extra dimensions from the end instead of the front (None if it cannot run)."""
    while grad.dim() > len(shape):
        grad = grad.sum(dim=-1)
    if any(a != b and b != 1 for a, b in zip(grad.shape, shape)):
        return None
    for dim, size in enumerate(shape):
        if size == 1:
            grad = grad.sum(dim=dim, keepdim=True)
    return grad


def _returned_or_raised(fn: Callable, *args) -> tuple:
    """(value, None) when ``fn(*args)`` returns, (None, (exception class, message)) when it raises; NotImplementedError
    stays loud. Called inside call_learner, so that the message is read there: a learner's exception class may define
    its own __str__."""
    try:
        return fn(*args), None
    except NotImplementedError:
        raise
    except Exception as error:
        return None, (type(error), str(error))


def _attempt(fn: Callable) -> Callable:
    """``fn(grad, shape)`` as :func:`_returned_or_raised` (named arguments: a changed one is named in the message)."""
    def attempt(grad, shape):
        return _returned_or_raised(fn, grad, shape)
    return attempt


def _run_unbroadcast(unbroadcast, grad_shape: Shape, shape: Shape, grad: Tensor) -> None:
    __tracebackhide__ = True
    what = f"unbroadcast(grad of shape {grad_shape}, shape={shape})"
    with watch_calls([_SUM_TO_SIZE]) as watch:  # the caller's own grad: call_learner fails an answer that changes it
        received, error = call_learner(_attempt(unbroadcast), grad, shape, what=what, forbid=[Route.AUTOGRAD])
    if watch.used:
        raise proven_failure(f"{what} called Tensor.sum_to_size, which this part rules out.", SUM_TO_SIZE)
    if error is not None:
        kind, message = error
        # A loop that sums the leading dimensions at a shifting index runs out of dimensions exactly here.
        shifted = issubclass(kind, IndexError) and _shifted_raises(grad_shape, tuple(shape))
        raise GradingFailure(f"{what} raised {kind.__name__}: {message}",
                             suspects=(LEADING_SHIFTED,) if shifted else ())
    if isinstance(received, (bool, int, float)):
        raise proven_failure(f"{what} returned the Python {type(received).__name__} {received!r:.40}; expected a "
                             f"tensor of shape {tuple(shape)}.", NOT_A_TENSOR)
    got = as_answer(received, what=what)
    if tuple(got.shape) != tuple(shape):
        raise GradingFailure(f"{what} returned shape {tuple(got.shape)}; expected {tuple(shape)}.",
                             suspects=_shape_suspect(tuple(got.shape), tuple(shape), grad_shape))

    def f(t):  # a tensor of `shape`, broadcast into the output, weighted by grad: d f / d t = unbroadcast(grad)
        return ((t + torch.zeros(grad_shape, dtype=torch.float64)) * grad).sum()

    start = torch.zeros(tuple(shape), dtype=torch.float64)
    (expected,) = autograd_gradient(f, start)
    (fd,) = central_difference(f, start)
    count = grad.numel() // max(expected.numel(), 1)
    wrong_axis = _wrong_axis(grad, shape)
    symptoms = [MEAN_NOT_SUM.looks_like(expected / count)] if count else []
    if wrong_axis is not None:
        symptoms.append(WRONG_AXIS.looks_like(wrong_axis))
    shifted = _shifted_leading(grad, tuple(shape))
    if shifted is not None and shifted.shape == expected.shape:
        symptoms.append(LEADING_SHIFTED.looks_like(shifted))
    expect_close(got, expected, what=what, fd=fd, symptoms=symptoms, extra=f"  grad: {fmt(grad)}")


@check
def check_unbroadcast(unbroadcast, grading_seed: int | None = None) -> None:
    """Part A: unbroadcast(grad, shape) sums grad down to shape, a tensor (not a Python number) of exactly that shape,
    equal to autograd's gradient for a broadcast, written with sums (no autograd, no Tensor.sum_to_size), leaving grad
    unchanged.

    Returning ``grad`` itself when there is nothing to sum is allowed (no aliasing check): autograd's own backward
    functions pass gradients through unchanged, and the part's text says so.

    Domain: grad a float64 tensor of any shape (0-d and size-0 dimensions included); shape a tuple of ints or a
    torch.Size (``()`` a scalar) that broadcasts to grad's shape. Corners at every seed (:data:`CORNER_PAIRS`): a
    torch.Size, a size-1 dimension to sum and keep, a 0-d grad and shape, a scalar shape, an empty leading dimension,
    a size-1 dimension stretched to size 0 (twice: zeros of size 1 come back), two leading dimensions; then the
    visible pairs and 12 random ones (public), or structured and random pairs (hidden)."""
    __tracebackhide__ = True
    for grad_shape, shape, grad in _unbroadcast_cases(grading_seed):
        with trial():
            _run_unbroadcast(unbroadcast, grad_shape, shape, grad)


# ---------------------------------------------------------------------------------------------------------------
# Part B: center_per_example(x, means)

PER_FEATURE = Misconception(
    "per-feature broadcasting (missing or wrong-side unsqueeze)", "(n, d) - (n,) and (n, d) - (1, n) line the means "
    "up with the LAST axis, the features: that runs only when n == d, and then subtracts the wrong numbers. Each "
    "example's mean must become a column: means.reshape(-1, 1) or means.unsqueeze(1), not unsqueeze(0).")
COLUMN_UNSQUEEZED = Misconception(
    "an (n, 1) means unsqueezed again", "unsqueeze adds a dimension every time: an (n,) means becomes the (n, 1) "
    "column you want, but a means that is already (n, 1) becomes (n, 1, 1), and (n, d) minus (n, 1, 1) broadcasts "
    "to an (n, n, d) block. Bring both valid shapes to (n, 1) with one operation that sets the shape, or unsqueeze "
    "only the (n,) one.")
EMPTY_RESHAPE = Misconception(
    "reshape with -1 on an empty batch", "An empty batch (n = 0) is valid. With no elements PyTorch cannot work out "
    "the size a -1 stands for, so means.reshape(n, -1) (or view) raises there; give that size yourself, it is 1.")
NO_CHECK = Misconception(
    "no shape check", "PyTorch complains only when the sizes happen to clash, and its message names neither "
    "argument; otherwise (means of shape (1, n), x of shape (n,)...) it broadcasts without a word. Check "
    "x.dim() == 2 and means.shape in {(n,), (n, 1)} yourself and raise ValueError naming both shapes.")
LOOSE_CHECK = Misconception(
    "a shape check that lets wrong shapes through", "Your function refused some wrong shapes but returned a result "
    "for others. Compare the shapes themselves: x.dim() == 2 and tuple(means.shape) in {(n,), (n, 1)}. A check on "
    "the number of elements or the number of dimensions alone accepts (1, n), (n, 1, 1) or a 1-D x.")
ASSERTED = Misconception(
    "a shape check with assert", "assert is for your own invariants: it disappears under python -O and says "
    "AssertionError, not 'bad argument'. For a caller's wrong shape, raise ValueError.")
WRONG_EXCEPTION = Misconception(
    "the wrong exception type", "The contract is ValueError, Python's exception for an argument of the right type "
    "with a wrong value (here: a wrong shape); TypeError, IndexError or RuntimeError tell the caller something else.")
NO_SHAPES = Misconception(
    "an error message without the shapes", "Say what you got and what you expected, e.g. f\"means must have shape "
    "({n},) or ({n}, 1) for x of shape {tuple(x.shape)}, got {tuple(means.shape)}\".")

#: What PyTorch says when two shapes do not broadcast (its own error, not the learner's check).
TORCH_BROADCAST_ERRORS = ("must match the size", "size of tensor", "shape mismatch")


#: Part B's corners, tried at every seed: valid shapes at the edges (one example, one feature, where (n, 1) minus
#: (n,) would be an (n, n) table, an empty batch) and wrong shapes that broadcast silently or are 0-d.
CORNER_VALID: list[tuple[Shape, Shape]] = [((1, 4), (1,)), ((1, 4), (1, 1)), ((3, 1), (3,)), ((3, 1), (3, 1)),
                                           ((0, 3), (0,))]
CORNER_INVALID: list[tuple[Shape, Shape]] = [((4, 3), ()), ((4, 3), (1,)), ((1, 4), (4,)), ((3, 1), (1, 3)),
                                             ((), ())]


def _centring_cases(grading_seed: int | None) -> tuple[list[tuple[Shape, Shape]], list[tuple[Shape, Shape]]]:
    """(valid (x shape, means shape) pairs, pairs that must raise ValueError); traps come first, corners last."""
    valid, invalid = _drawn_centring_cases(grading_seed)
    return valid + CORNER_VALID, invalid + CORNER_INVALID


def _drawn_centring_cases(grading_seed: int | None) -> tuple[list[tuple[Shape, Shape]], list[tuple[Shape, Shape]]]:
    if grading_seed is None:
        valid = [((4, 3), (4,)), ((4, 3), (4, 1)), ((3, 3), (3,)), ((2, 5), (2, 1))]
        invalid = [((4, 3), (3,)), ((3, 3), (1, 3)), ((4, 3), (4, 3)), ((4, 3), (2,)), ((5,), (5,)),
                   ((4, 3, 2), (4,)), ((4, 3), (4, 1, 1))]
        return valid, invalid
    gen = generator("08/center_per_example", grading_seed)
    n, d = choice(gen, [(2, 5), (3, 4), (4, 3), (5, 2), (6, 3), (3, 6)])
    square = choice(gen, [2, 3, 4, 5])
    valid = [((n, d), (n,)), ((n, d), (n, 1)), ((square, square), (square,)), ((square, square), (square, 1))]
    invalid = [((n, d), (d,)), ((square, square), (1, square)), ((n, d), (n, d)), ((n, d), (n + 1,)),
               ((n, d, 2), (n,)), ((n,), (n,)), ((n, d), (n, 1, 1))]
    return valid, invalid


def _outcome(fn: Callable, x: Tensor, means: Tensor, *, what: str):
    """:func:`_returned_or_raised` of the learner's code, called on the caller's own x and means (which must stay
    unchanged)."""
    def attempt(x, means):
        return _returned_or_raised(fn, x, means)
    return call_learner(attempt, x, means, what=what)


def _mentions_shape(message: str, shape: Shape) -> bool:
    return str(tuple(shape)) in message or str(list(shape)) in message


def _describe(x: Tensor, means: Tensor) -> str:
    return f"center_per_example(x of shape {tuple(x.shape)}, means of shape {tuple(means.shape)})"


def _check_valid(center_per_example, x: Tensor, means: Tensor) -> None:
    __tracebackhide__ = True
    what = _describe(x, means)
    value, error = _outcome(center_per_example, x, means, what=what)
    if error is not None:
        kind, message = error
        if x.shape[0] == 0 and issubclass(kind, RuntimeError) and "unspecified dimension size -1" in message:
            raise proven_failure(f"{what} raised {kind.__name__}: {message}\nAn empty batch is valid: means of shape "
                                 "(n,) or (n, 1) for x of shape (n, d), n = 0 included.", EMPTY_RESHAPE)
        sizes = issubclass(kind, RuntimeError) and any(text in message for text in TORCH_BROADCAST_ERRORS)
        raise GradingFailure(f"{what} raised {kind.__name__}: {message}\nThese shapes are valid: means of "
                             f"shape (n,) or (n, 1) for x of shape (n, d).", suspects=(PER_FEATURE,) if sizes else ())
    expect_no_alias(value, {"x": x, "means": means}, what=what)
    got = as_answer(value, what=what)
    expected = x - means.reshape(-1, 1)
    if got.shape != expected.shape:
        n, d = x.shape
        column_unsqueezed = means.dim() == 2 and tuple(got.shape) == (n, n, d)
        raise GradingFailure(f"{what} returned shape {tuple(got.shape)}; expected {tuple(expected.shape)}, the shape "
                             "of x.", suspects=(COLUMN_UNSQUEEZED if column_unsqueezed else PER_FEATURE,))
    symptoms = [PER_FEATURE.looks_like(x - means.reshape(1, -1))] if x.shape[0] == x.shape[1] else []
    expect_close(got, expected, what=what, source="expected", rtol=1e-12, atol=1e-12, symptoms=symptoms,
                 extra=f"  x: {fmt(x)}\n  means: {fmt(means)}")


def _invalid_failure(x: Tensor, means: Tensor, outcome, refused_some: bool) -> GradingFailure | None:
    """The failure for one wrong-shape case (None if it raised the right error), its suspect chosen knowing whether
    the function refused any of the wrong shapes with a ValueError."""
    what = _describe(x, means)
    intro = f"{what} must raise ValueError: means needs shape (n,) or (n, 1) for x of shape (n, d)"
    value, error = outcome
    if error is None:
        shape = f"shape {tuple(value.shape)}" if type(value) is torch.Tensor else type(value).__name__
        return GradingFailure(f"{intro}, but it returned a result ({shape}).",
                              suspects=(LOOSE_CHECK if refused_some else NO_CHECK,))
    kind, message = error
    if issubclass(kind, AssertionError):
        return GradingFailure(f"{intro}; it raised {kind.__name__}: {message}", suspects=(ASSERTED,))
    if not issubclass(kind, ValueError):
        torch_error = issubclass(kind, RuntimeError) and any(text in message for text in TORCH_BROADCAST_ERRORS)
        suspect = (LOOSE_CHECK if refused_some else NO_CHECK) if torch_error else WRONG_EXCEPTION
        return GradingFailure(f"{intro}; it raised {kind.__name__}: {message}", suspects=(suspect,))
    if not (_mentions_shape(message, tuple(x.shape)) and _mentions_shape(message, tuple(means.shape))):
        return GradingFailure(f"{what} raised ValueError({message!r}); the message must show both shapes, "
                              f"{tuple(x.shape)} and {tuple(means.shape)} (as tuple(t.shape) or t.shape prints them).",
                              suspects=(NO_SHAPES,))
    return None


@check
def check_center_per_example(center_per_example, grading_seed: int | None = None) -> None:
    """Part B: subtract one mean per example into a new tensor of x's shape, leaving x and means unchanged; any other
    shape raises ValueError whose message shows both shapes.

    Domain: x float64; valid when x is (n, d) with n >= 0, d >= 1 and means is (n,) or (n, 1); every other pair of
    shapes (x not 2-D, means 0-d, (1,), (d,), (1, n), (n, d), (n, 1, 1)...) must raise. Corners at every seed
    (:data:`CORNER_VALID`, :data:`CORNER_INVALID`): n = 1, d = 1, an empty batch; means 0-d or (1,), a (1, n) batch
    with (n,) means, a (n, 1) batch with (1, n) means, both 0-d; then the traps (a square batch, per-feature means)
    with fixed (public) or drawn (hidden) sizes."""
    __tracebackhide__ = True
    gen = generator("08/center_per_example/values", 0 if grading_seed is None else grading_seed)
    valid, invalid = _centring_cases(grading_seed)
    for x_shape, means_shape in valid:
        with trial():
            _check_valid(center_per_example, uniform(gen, x_shape), uniform(gen, means_shape))
    # Every wrong shape is tried first, then judged: whether the function refused any of them decides between
    # "no shape check" and "a check that lets some through".
    cases = []
    for x_shape, means_shape in invalid:
        x, means = uniform(gen, x_shape), uniform(gen, means_shape)
        try:
            cases.append((x, means, _outcome(center_per_example, x, means, what=_describe(x, means))))
        except GradingFailure as failure:  # e.g. it changed x or means: reported in its own trial below
            cases.append((x, means, failure))
    refused_some = any(type(outcome) is tuple and outcome[1] is not None and issubclass(outcome[1][0], ValueError)
                       for _, _, outcome in cases)
    for x, means, outcome in cases:
        with trial():
            if isinstance(outcome, GradingFailure):
                raise outcome
            failure = _invalid_failure(x, means, outcome, refused_some)
            if failure is not None:
                raise failure


# ---------------------------------------------------------------------------------------------------------------
# Part C: the fixed weighted_mse(x, y, sample_weight, w, b)

PAIRWISE = Misconception(
    "(n, 1) minus (n,) broadcast to (n, n)", "pred = x @ w + b has shape (n, 1) and y has shape (n,): their "
    "difference is an (n, n) table of every prediction minus every target. y.unsqueeze(0) gives (1, n) and the same "
    "table. Make both (n,): pred.squeeze(1).")
WEIGHTS_WITHOUT_EFFECT = Misconception(
    "sample weights without effect (the plain mean)", "Your loss equals the plain, unweighted mean of the squared "
    "errors. Either the weights were never used, or (n,) weights met (n, 1) errors (after y.unsqueeze(1)) and "
    "broadcast to an (n, n) table whose mean is mean(weights) · mean(errors), so dividing by mean(weights) cancels "
    "them. Keep everything per example, of shape (n,).")
DIVIDED_BY_COUNT = Misconception(
    "divided by the number of examples instead of the sum of the weights", "The weighted mean divides the weighted "
    "sum by the sum of the weights, sum_i s_i, not by n.")
DETACHED = Misconception(
    "a loss cut off from w and b", "Training needs the loss's gradient: compute it from the tensors, without "
    ".item(), .detach(), float() or NumPy, so that it stays attached to w and b.")


def intended_weighted_mse(x: Tensor, y: Tensor, sample_weight: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """sum_i s_i (x_i . w + b - y_i)^2 / sum_i s_i, written with explicit per-example shapes."""
    pred = (x @ w).squeeze(1) + b  # (n,)
    return (sample_weight * (pred - y) ** 2).sum() / sample_weight.sum()


def buggy_weighted_mse(x: Tensor, y: Tensor, sample_weight: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """The notebook's snippet: (n, 1) predictions minus (n,) targets make an (n, n) table."""
    err = (x @ w + b - y) ** 2
    return (sample_weight * err).mean() / sample_weight.mean()


def _pairwise_losses(x: Tensor, y: Tensor, s: Tensor, w: Tensor, b: Tensor) -> list[Tensor]:
    """The (n, n) table's losses: (n, 1) predictions minus (n,) targets, the weights lined up with the targets (as
    (n,)) or with the predictions (as a column), divided by the sum or by the mean of the weights."""
    table = (x @ w + b - y) ** 2  # [i, j]: prediction i minus target j
    losses = []
    for weights in (s, s.unsqueeze(1)):
        weighted = weights * table
        losses += [weighted.sum() / s.sum(), weighted.mean() / s.mean()]
    return losses


def _mse_symptoms(x: Tensor, y: Tensor, s: Tensor, w: Tensor, b: Tensor) -> list:
    errors = ((x @ w).squeeze(1) + b - y) ** 2
    return [*(PAIRWISE.looks_like(loss) for loss in _pairwise_losses(x, y, s, w, b)),
            WEIGHTS_WITHOUT_EFFECT.looks_like(errors.mean()),
            DIVIDED_BY_COUNT.looks_like((s * errors).sum() / len(y))]


#: Part C's corners, (n, d), tried at every seed: one example (the (n, n) table is 1 x 1 and the bug is exact),
#: one feature, as many examples as features.
MSE_CORNERS = [(1, 3), (5, 1), (3, 3)]


def _mse_cases(grading_seed: int | None) -> list[tuple[Tensor, ...]]:
    gen = generator("08/weighted_mse", 0 if grading_seed is None else grading_seed)
    sizes = [(5, 2), (4, 3)] if grading_seed is None else [(choice(gen, [3, 4, 5, 6, 7]), choice(gen, [1, 2, 3, 4]))
                                                  for _ in range(3)]
    sizes = MSE_CORNERS + sizes
    return [(uniform(gen, (n, d)), uniform(gen, (n,)), uniform(gen, (n,), 0.5, 2.0), uniform(gen, (d, 1)),
             uniform(gen, (1,))) for n, d in sizes]


def _expect_mse_gradients(value, case: tuple[Tensor, ...], leaves: tuple[Tensor, Tensor], what: str) -> None:
    """The learner's loss must be differentiable, with autograd's and finite differences' gradients for w and b."""
    __tracebackhide__ = True
    if not (isinstance(value, torch.Tensor) and value.requires_grad):
        raise proven_failure(f"{what} returned a value that is not attached to w and b (requires_grad=False).",
                             DETACHED)
    x, y, s, w, b = case
    # Backward may run learner code (a custom autograd.Function, a hook), so it is called like learner code.
    grads = call_learner(torch.autograd.grad, value, leaves, allow_unused=True, what=f"backward through {what}")

    def loss(w_, b_):
        return intended_weighted_mse(x, y, s, w_, b_)

    for name, grad, want, fd in zip("wb", grads, autograd_gradient(loss, w, b), central_difference(loss, w, b)):
        got = torch.zeros_like(want) if grad is None else grad
        expect_close(got, want, what=f"the gradient of {what} with respect to {name}", fd=fd)


@check
def check_weighted_mse(weighted_mse, grading_seed: int | None = None) -> None:
    """Part C: the fixed weighted_mse returns a 0-d tensor attached to w and b that equals the intended loss, and so
    do its gradients for w and b; it leaves its arguments unchanged (no backward of its own).

    Domain: x (n, d), y (n,), sample_weight (n,) positive, w (d, 1) and b (1,) requiring grad, float64, n, d >= 1.
    Corners at every seed (:data:`MSE_CORNERS`): n = 1, d = 1, n = d; then two (public) or three (hidden) cases of
    fixed or drawn sizes."""
    __tracebackhide__ = True
    for case in _mse_cases(grading_seed):
        with trial():
            x, y, s, w, b = case
            what = (f"weighted_mse(x of shape {tuple(x.shape)}, y {tuple(y.shape)}, sample_weight {tuple(s.shape)}, "
                    f"w {tuple(w.shape)}, b {tuple(b.shape)})")
            inputs = (x.clone(), y.clone(), s.clone(), w.clone().requires_grad_(True), b.clone().requires_grad_(True))
            value = call_learner(weighted_mse, *inputs, what=what)  # the caller's own tensors, checked unchanged
            got = as_answer(value, what=what)
            if got.dim() != 0:
                raise GradingFailure(f"{what} returned a tensor of shape {tuple(got.shape)}; expected a 0-d tensor "
                                     "(shape ()), the single number of the loss, as .sum() or .mean() over all "
                                     "elements gives it.")
            expect_close(got, intended_weighted_mse(*case), what=what,
                         source="expected", rtol=1e-10, atol=1e-12, symptoms=_mse_symptoms(*case))
            _expect_mse_gradients(value, case, inputs[3:], what)
