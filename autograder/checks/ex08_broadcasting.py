"""Checks for exercise 08, broadcasting: ``unbroadcast``, a per-example centring function that rejects the wrong
shapes, and the fixed version of a training snippet with a broadcasting bug.

Each ``check_*`` function is one test cell's whole body. Without ``seed`` it runs the public cases a learner sees;
the hidden test cells pass ``seed=grading_seed()`` and get fresh random cases.

The contract for a wrong shape (stated to learners): ``raise ValueError`` whose message shows both shapes. An
``assert`` is not enough: it vanishes under ``python -O`` and raises AssertionError, the signal of a broken
invariant inside your own code rather than of a caller's bad argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..checking import GradingFailure, Misconception, as_answer, call_learner, expect_close, fmt
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform

Tensor = torch.Tensor
Shape = tuple[int, ...]


# ---------------------------------------------------------------------------------------------------------------
# Part A: unbroadcast(grad, shape)

def broadcast_pair(gen: torch.Generator, *, leading: int | None = None, ones: int | None = None) -> tuple[Shape, Shape]:
    """A random ``(grad_shape, shape)`` such that a tensor of ``shape`` broadcasts to ``grad_shape``.

    ``leading`` dimensions are added in front (random 0-2 if None); ``ones`` of the shape's dimensions are size 1
    and get expanded (random if None). Sizes that differ are never 1, so every broadcast really happens.
    """
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


def _unbroadcast_cases(seed: int | None) -> list[tuple[Shape, Shape, Tensor]]:
    """Visible: the fixed pairs, then a property check on 12 random pairs. Hidden: structured then random pairs."""
    if seed is None:
        gen = generator("08/unbroadcast/property", 0)
        pairs = VISIBLE_PAIRS + [broadcast_pair(gen) for _ in range(12)]
    else:
        gen = generator("08/unbroadcast", seed)
        pairs = [broadcast_pair(gen, leading=choice(gen, [1, 2]), ones=0),  # leading dims only
                 broadcast_pair(gen, leading=0, ones=1),                     # one size-1 dim only
                 broadcast_pair(gen, leading=1, ones=2),                     # both
                 (broadcast_pair(gen, leading=1, ones=0)[0], ())]            # to a scalar
        pairs += [broadcast_pair(gen) for _ in range(6)]
    return [(grad_shape, shape, uniform(gen, grad_shape)) for grad_shape, shape in pairs]


def _diagnose_shape(got: Shape, shape: Shape) -> Misconception:
    """Name the mistake behind a wrong result shape."""
    if math.prod(got) == 1 and math.prod(shape) > 1:
        return Misconception("summed over every dimension", "Careful: t.sum(dim=()) with an empty tuple sums over "
                             "ALL dimensions in PyTorch. Only call sum when there is a dimension to sum.")
    if len(got) > len(shape):
        return Misconception("leading dimensions not removed", "Broadcasting lines shapes up from the right and "
                             "adds dimensions in front: sum over the first grad.dim() - len(shape) dimensions.")
    if len(got) < len(shape) or [s for s in got if s != 1] == [s for s in shape if s != 1]:
        return Misconception("missing keepdim for size-1 dimensions", "Where shape has a 1 and grad does not, sum "
                             "with keepdim=True so the dimension stays (and later dimension numbers stay right).")
    return Misconception("sum over the wrong axis", "Extra dimensions are added on the LEFT; size-1 dimensions are "
                         "summed where shape has the 1. Compare grad.shape and shape aligned from the right.")


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


def _run_unbroadcast(unbroadcast, grad_shape: Shape, shape: Shape, grad: Tensor) -> None:
    __tracebackhide__ = True
    what = f"unbroadcast(grad of shape {grad_shape}, shape={shape})"
    given = grad.clone()
    received = call_learner(unbroadcast, given, shape, what=what)
    if not torch.equal(given, grad):
        raise GradingFailure(f"{what} changed grad in place; return a new tensor and leave the argument alone.")
    got = as_answer(received, what=what)
    if tuple(got.shape) != shape:
        mistake = _diagnose_shape(tuple(got.shape), shape)
        raise GradingFailure(f"{what} returned shape {tuple(got.shape)}; expected {shape}.\n"
                             f"Likely misconception: {mistake.name}. {mistake.hint}")

    def f(t):  # a tensor of `shape`, broadcast into the output, weighted by grad: d f / d t = unbroadcast(grad)
        return ((t + torch.zeros(grad_shape, dtype=torch.float64)) * grad).sum()

    start = torch.zeros(shape, dtype=torch.float64)
    (expected,) = autograd_gradient(f, start)
    (fd,) = central_difference(f, start)
    count = grad.numel() // max(expected.numel(), 1)
    wrong_axis = _wrong_axis(grad, shape)
    expect_close(got, expected, what=what, fd=fd, misconceptions=[
        *([Misconception("sum over the wrong axis", "The extra dimensions are the LEADING ones: broadcasting aligns "
                         "shapes from the right.", value=wrong_axis)] if wrong_axis is not None else []),
        Misconception("mean instead of sum", "Each element of the small tensor was used once per copy, so its "
                      "gradient is the SUM over the copies, not their mean.", value=expected / count)],
        extra=f"  grad: {fmt(grad)}")


def check_unbroadcast(unbroadcast, seed: int | None = None) -> None:
    """Part A: unbroadcast(grad, shape) sums grad down to shape, equal to autograd's gradient for a broadcast."""
    __tracebackhide__ = True
    for grad_shape, shape, grad in _unbroadcast_cases(seed):
        _run_unbroadcast(unbroadcast, grad_shape, shape, grad)


# ---------------------------------------------------------------------------------------------------------------
# Part B: center_per_example(x, means)

PER_FEATURE = Misconception(
    "per-feature broadcasting (missing or wrong-side unsqueeze)", "(n, d) - (n,) and (n, d) - (1, n) line the means "
    "up with the LAST axis, the features: that runs only when n == d, and then subtracts the wrong numbers. Each "
    "example's mean must become a column: means.reshape(-1, 1) or means.unsqueeze(1), not unsqueeze(0).")
SILENT = Misconception(
    "no shape check: a silent broadcast", "PyTorch broadcast the means against the features without a word. Check "
    "x.dim() == 2 and means.shape in {(n,), (n, 1)} yourself and raise ValueError otherwise.")
ASSERTED = Misconception(
    "a shape check with assert", "assert is for your own invariants: it disappears under python -O and says "
    "AssertionError, not 'bad argument'. For a caller's wrong shape, raise ValueError.")
TORCH_ERROR = Misconception(
    "PyTorch's broadcasting error instead of a ValueError", "PyTorch only complains when the shapes happen not to "
    "broadcast (for (n, d) - (d,) it says nothing at all), and its message names neither argument. Check the shapes "
    "first and raise ValueError naming both.")
NO_SHAPES = Misconception(
    "an error message without the shapes", "Say what you got and what you expected, e.g. f\"means must have shape "
    "({n},) or ({n}, 1) for x of shape {tuple(x.shape)}, got {tuple(means.shape)}\".")


def _centring_cases(seed: int | None) -> tuple[list[tuple[Shape, Shape]], list[tuple[Shape, Shape]]]:
    """(valid (x shape, means shape) pairs, pairs that must raise ValueError); traps come first."""
    if seed is None:
        valid = [((4, 3), (4,)), ((4, 3), (4, 1)), ((3, 3), (3,)), ((2, 5), (2, 1))]
        invalid = [((4, 3), (3,)), ((3, 3), (1, 3)), ((4, 3), (4, 3)), ((4, 3), (2,)), ((5,), (5,))]
        return valid, invalid
    gen = generator("08/center_per_example", seed)
    n, d = choice(gen, [(2, 5), (3, 4), (4, 3), (5, 2), (6, 3), (3, 6)])
    square = choice(gen, [2, 3, 4, 5])
    valid = [((n, d), (n,)), ((n, d), (n, 1)), ((square, square), (square,)), ((square, square), (square, 1))]
    invalid = [((n, d), (d,)), ((square, square), (1, square)), ((n, d), (n, d)), ((n, d), (n + 1,)),
               ((n, d, 2), (n,)), ((n,), (n,))]
    return valid, invalid


def _outcome(fn: Callable, *args, what: str):
    """(returned value, None) or (None, (exception class, message)) of the learner's code.

    The message is read inside call_learner: a learner's exception class may define its own __str__.
    NotImplementedError stays loud.
    """
    def attempt():
        try:
            return fn(*args), None
        except NotImplementedError:
            raise
        except Exception as error:  # noqa: BLE001 - what was raised is the answer here
            return None, (type(error), str(error))
    return call_learner(attempt, what=what)


def _mentions_shape(message: str, shape: Shape) -> bool:
    return str(tuple(shape)) in message or str(list(shape)) in message


def _check_valid(center_per_example, x: Tensor, means: Tensor) -> None:
    __tracebackhide__ = True
    what = f"center_per_example(x of shape {tuple(x.shape)}, means of shape {tuple(means.shape)})"
    given = x.clone()
    value, error = _outcome(center_per_example, given, means.clone(), what=what)
    if error is not None:
        kind, message = error
        sizes = issubclass(kind, RuntimeError) and "must match the size" in message
        hint = f"\nLikely misconception: {PER_FEATURE.name}. {PER_FEATURE.hint}" if sizes else ""
        raise GradingFailure(f"{what} raised {kind.__name__}: {message}\nThese shapes are valid: means of "
                             f"shape (n,) or (n, 1) for x of shape (n, d).{hint}")
    if not torch.equal(given, x):
        raise GradingFailure(f"{what} changed x in place; return a new tensor.")
    got = as_answer(value, what=what)
    expected = x - means.reshape(-1, 1)
    if got.shape != expected.shape:
        raise GradingFailure(f"{what} returned shape {tuple(got.shape)}; expected {tuple(expected.shape)}, the shape "
                             f"of x.\nLikely misconception: {PER_FEATURE.name}. {PER_FEATURE.hint}")
    per_feature = x - means.reshape(1, -1) if x.shape[0] == x.shape[1] else None
    expect_close(got, expected, what=what, source="expected", rtol=1e-12, atol=1e-12,
                 misconceptions=[Misconception(PER_FEATURE.name, PER_FEATURE.hint, value=per_feature)],
                 extra=f"  x: {fmt(x)}\n  means: {fmt(means)}")


def _check_invalid(center_per_example, x: Tensor, means: Tensor) -> None:
    __tracebackhide__ = True
    what = f"center_per_example(x of shape {tuple(x.shape)}, means of shape {tuple(means.shape)})"
    value, error = _outcome(center_per_example, x.clone(), means.clone(), what=what)
    intro = f"{what} must raise ValueError: means needs shape (n,) or (n, 1) for x of shape (n, d)"
    if error is None:
        shape = f"shape {tuple(value.shape)}" if type(value) is torch.Tensor else type(value).__name__
        raise GradingFailure(f"{intro}, but it returned a result ({shape}).\n"
                             f"Likely misconception: {SILENT.name}. {SILENT.hint}")
    kind, message = error
    if not issubclass(kind, ValueError):
        mistake = ASSERTED if issubclass(kind, AssertionError) else TORCH_ERROR
        raise GradingFailure(f"{intro}; it raised {kind.__name__}: {message}\n"
                             f"Likely misconception: {mistake.name}. {mistake.hint}")
    if not (_mentions_shape(message, tuple(x.shape)) and _mentions_shape(message, tuple(means.shape))):
        raise GradingFailure(f"{what} raised ValueError({message!r}); the message must show both shapes, "
                             f"{tuple(x.shape)} and {tuple(means.shape)} (as tuple(t.shape) or t.shape prints them)."
                             f"\nLikely misconception: {NO_SHAPES.name}. {NO_SHAPES.hint}")


def check_center_per_example(center_per_example, seed: int | None = None) -> None:
    """Part B: subtract one mean per example; any other shape raises ValueError naming both shapes."""
    __tracebackhide__ = True
    gen = generator("08/center_per_example/values", 0 if seed is None else seed)
    valid, invalid = _centring_cases(seed)
    for x_shape, means_shape in valid:
        _check_valid(center_per_example, uniform(gen, x_shape), uniform(gen, means_shape))
    for x_shape, means_shape in invalid:
        _check_invalid(center_per_example, uniform(gen, x_shape), uniform(gen, means_shape))


# ---------------------------------------------------------------------------------------------------------------
# Part C: the fixed weighted_mse(x, y, sample_weight, w, b)

def intended_weighted_mse(x: Tensor, y: Tensor, sample_weight: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """sum_i s_i (x_i . w + b - y_i)^2 / sum_i s_i, written with explicit per-example shapes."""
    pred = (x @ w).squeeze(1) + b  # (n,)
    return (sample_weight * (pred - y) ** 2).sum() / sample_weight.sum()


def buggy_weighted_mse(x: Tensor, y: Tensor, sample_weight: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """The notebook's snippet: (n, 1) predictions minus (n,) targets make an (n, n) table."""
    err = (x @ w + b - y) ** 2
    return (sample_weight * err).mean() / sample_weight.mean()


def _half_fixed(x: Tensor, y: Tensor, sample_weight: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """y.unsqueeze(1) fixes the difference, but (n,) weights times (n, 1) errors broadcast to (n, n) again."""
    err = (x @ w + b - y.unsqueeze(1)) ** 2
    return (sample_weight * err).mean() / sample_weight.mean()


def _mse_mistakes(*args: Tensor) -> list[Misconception]:
    return [
        Misconception("(n, 1) minus (n,) broadcast to (n, n)", "pred = x @ w + b has shape (n, 1) and y has shape "
                      "(n,): their difference is an (n, n) table of every prediction minus every target. "
                      "y.unsqueeze(0) gives (1, n) and the same table. Make both (n,): pred.squeeze(1).",
                      value=buggy_weighted_mse(*args)),
        Misconception("a second broadcast: (n,) weights times (n, 1) errors", "With y.unsqueeze(1) the errors have "
                      "shape (n, 1), and sample_weight of shape (n,) times them is an (n, n) table again. Squeeze "
                      "the predictions to (n,) instead, or reshape the weights to (n, 1) as well. (The result is the "
                      "plain, unweighted mean of the squared errors.)",
                      value=_half_fixed(*args)),
    ]


def _mse_cases(seed: int | None) -> list[tuple[Tensor, ...]]:
    gen = generator("08/weighted_mse", 0 if seed is None else seed)
    sizes = [(5, 2), (4, 3)] if seed is None else [(choice(gen, [3, 4, 5, 6, 7]), choice(gen, [1, 2, 3, 4]))
                                                  for _ in range(3)]
    return [(uniform(gen, (n, d)), uniform(gen, (n,)), uniform(gen, (n,), 0.5, 2.0), uniform(gen, (d, 1)),
             uniform(gen, (1,))) for n, d in sizes]


def _expect_mse_gradients(value, case: tuple[Tensor, ...], leaves: tuple[Tensor, Tensor], what: str) -> None:
    """The learner's loss must be differentiable, with autograd's and finite differences' gradients for w and b."""
    __tracebackhide__ = True
    if not (isinstance(value, torch.Tensor) and value.requires_grad):
        raise GradingFailure(f"{what} returned a value that is not attached to w and b (requires_grad=False): "
                             "training needs its gradient. Compute it from the tensors, without .item(), .detach() "
                             "or NumPy.")
    x, y, s, w, b = case
    # Backward may run learner code (a custom autograd.Function, a hook), so it is called like learner code.
    grads = call_learner(torch.autograd.grad, value, leaves, allow_unused=True, what=f"backward through {what}")

    def loss(w_, b_):
        return intended_weighted_mse(x, y, s, w_, b_)

    for name, grad, want, fd in zip("wb", grads, autograd_gradient(loss, w, b), central_difference(loss, w, b)):
        got = torch.zeros_like(want) if grad is None else grad
        expect_close(got, want, what=f"the gradient of {what} with respect to {name}", fd=fd)


def check_weighted_mse(weighted_mse, seed: int | None = None) -> None:
    """Part C: the fixed weighted_mse equals the intended loss, and so do its gradients for w and b."""
    __tracebackhide__ = True
    for case in _mse_cases(seed):
        x, y, s, w, b = case
        what = (f"weighted_mse(x of shape {tuple(x.shape)}, y {tuple(y.shape)}, sample_weight {tuple(s.shape)}, "
                f"w {tuple(w.shape)}, b {tuple(b.shape)})")
        leaves = (w.clone().requires_grad_(True), b.clone().requires_grad_(True))
        value = call_learner(weighted_mse, x.clone(), y.clone(), s.clone(), *leaves, what=what)
        expect_close(as_answer(value, what=what, shape=()), intended_weighted_mse(*case), what=what,
                     source="expected", rtol=1e-10, atol=1e-12, misconceptions=_mse_mistakes(*case))
        _expect_mse_gradients(value, case, leaves, what)
