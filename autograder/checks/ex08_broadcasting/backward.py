"""Part A: add_mul_backward(grad, a, b, c), the backward of out = a + b * c when all three operands broadcast, by hand.

Each operand's gradient is the upstream gradient times the operand's local derivative (1 for a, c for b, b for c),
taken at the broadcast shape, then summed down to the operand's own shape: over the dimensions broadcasting added in
front, and, keeping them, over the size-1 dimensions it stretched. The oracles are autograd and central differences
of f(a, b, c) = sum(grad * (a + b * c)) in float64.
"""

from __future__ import annotations

import math

import torch
from torch.overrides import TorchFunctionMode

from ...checking import (
    GradingFailure,
    Misconception,
    Route,
    as_answer,
    call_learner,
    check,
    expect_close,
    fmt,
    proven_failure,
    trial,
)
from ...oracles import autograd_gradient, central_difference
from ...routes import watch_calls
from ..cases import case_stream, randint
from .misconceptions import (
    EMPTY_NOT_SUMMED,
    FACTOR_MISSING,
    LEADING_KEPT,
    LEADING_SHIFTED,
    MEAN_NOT_SUM,
    NO_KEEPDIM,
    NOT_A_TENSOR,
    OWN_FACTOR,
    STRETCHED_NOT_SUMMED,
    SUM_TO_SIZE,
    SUMMED_ALL,
    SUMMED_BEFORE_PRODUCT,
    WRONG_AXIS,
)

Tensor = torch.Tensor
Shape = tuple[int, ...]

#: Bound when this module is imported, so that learner code cannot swap it.
_SUM_TO_SIZE = torch.Tensor.sum_to_size

#: Part A's corners (shapes of a, b, c), tried at every seed.
CORNER_TRIPLES: list[tuple[Shape, Shape, Shape]] = [
    ((), (3,), (2, 1)),          # a 0-d a, b gains a leading dimension, c's size-1 dimension stretched: out (2, 3)
    ((2, 3), (2, 3), (2, 3)),    # nothing to sum
    ((3,), (3, 1), (3, 3)),      # square: a sum over the wrong axis keeps every shape
    ((1, 4), (2, 1, 4), ()),     # a size-1 dimension that stays size 1 in the output is no broadcast
    ((0, 3), (1, 3), (3,)),      # an empty dimension: sums over nothing are zeros of the operand's shape
    ((2, 0), (2, 1), (1,)),      # the same on the last dimension
    ((4,), (2, 3, 1), (3, 4)),   # two leading dimensions for a (numbered again after each sum without keepdim)
    ((), (), ()),                # all 0-d: gradients are 0-d tensors, not Python numbers
]


def _random_triple(gen) -> tuple[Shape, Shape, Shape]:
    """Three shapes that broadcast to a random output of 1 to 3 dimensions of sizes 2 to 4: each operand drops some
    leading dimensions and has some of the rest set to 1 (the first operand always broadcasts somewhere)."""
    out = tuple(randint(gen, 2, 4) for _ in range(randint(gen, 1, 3)))
    shapes = []
    for index in range(3):
        while True:
            kept = out[randint(gen, 0, len(out)):]
            shape = tuple(1 if randint(gen, 0, 2) == 0 else size for size in kept)
            if index or shape != out:
                break
        shapes.append(shape)
    return shapes[0], shapes[1], shapes[2]


def _cases(grading_seed: int | None) -> list[tuple[Tensor, ...]]:
    """The corners, then 8 (public: fixed) or 10 (hidden: drawn) random triples; (grad, a, b, c) in float64."""
    gen = case_stream("08/add_mul_backward", grading_seed)
    triples = CORNER_TRIPLES + [_random_triple(gen) for _ in range(8 if grading_seed is None else 10)]
    cases = []
    for shapes in triples:
        a, b, c = (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2 for shape in shapes)
        out = tuple(torch.broadcast_shapes(*shapes))
        cases.append((torch.rand(out, generator=gen, dtype=torch.float64) * 4 - 2, a, b, c))
    return cases


def unbroadcast(grad: Tensor, shape: Shape) -> Tensor:
    """``grad`` summed down to ``shape`` (the check's own: the mistakes below are variants of it)."""
    while grad.dim() > len(shape):
        grad = grad.sum(dim=0)
    for dim, size in enumerate(shape):
        if size == 1 and grad.shape[dim] != 1:
            grad = grad.sum(dim=dim, keepdim=True)
    return grad


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


def _shifted_leading(grad: Tensor, shape: Shape) -> Tensor | None:
    """The mistake of summing the leading dimensions with ``grad.sum(dim=i)`` for ``i`` in ``range(lead)`` (the
    dimensions renumber after each sum), then the size-1 dimensions right; None when that raises, or with fewer than
    two leading dimensions (one is summed right)."""
    lead = grad.dim() - len(shape)
    if lead < 2:
        return None
    for i in range(lead):
        if i >= grad.dim():
            return None
        grad = grad.sum(dim=i)
    return unbroadcast(grad, shape) if grad.dim() == len(shape) else None


def _trailing(out: Shape, shape: Shape) -> Shape:
    return out[len(out) - len(shape):] if shape else ()


def _shape_mistake(got: Shape, shape: Shape, out: Shape) -> Misconception | None:
    """The un-broadcasting mistake a wrong result shape points to; None when the shape fits several (a one-element
    result for an all-ones shape: summed over everything, or lost a size-1 dimension)."""
    if math.prod(got) == 1 and math.prod(shape) == 1:
        return None
    if (math.prod(got) == 1 and math.prod(shape) > 1) or (not got and shape):
        return SUMMED_ALL
    if len(got) > len(shape):
        return LEADING_KEPT
    trailing = _trailing(out, shape)
    if len(got) == len(shape) and all(o == s or (s == 1 and g == 0 and o == 0) for o, s, g in
                                      zip(got, shape, trailing)):
        return EMPTY_NOT_SUMMED
    shifted = _shifted_leading(torch.zeros(out), shape)
    if shifted is not None and tuple(shifted.shape) == tuple(got):
        return LEADING_SHIFTED
    if len(got) == len(shape) and any(s == 1 and g != 1 and o == g for o, s, g in zip(got, shape, trailing)):
        return STRETCHED_NOT_SUMMED
    if len(got) < len(shape) or [s for s in got if s != 1] == [s for s in shape if s != 1]:
        return NO_KEEPDIM
    return WRONG_AXIS


class _EmptySums(TorchFunctionMode):
    """Sees a sum over an empty tuple of dimensions (``t.sum(dim=())``, which sums over every dimension) of a tensor
    that has dimensions."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "sum" and args and isinstance(args[0], Tensor) and args[0].dim():
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if isinstance(dim, (tuple, list)) and not dim:
                self.seen = True
        return func(*args, **kwargs)


def _attempt(fn):
    """``fn(grad, a, b, c)``: its result, or the exception it raised, so that a check can tell the two apart."""
    def attempt(grad, a, b, c):
        try:
            return fn(grad, a, b, c), None
        except NotImplementedError:
            raise
        except Exception as error:
            return None, (type(error), str(error))
    return attempt


def _expect_operand(got, name: str, operands: dict[str, Tensor], grad: Tensor, expected: Tensor, fd: Tensor,
                    what: str) -> None:
    """One operand's gradient: a tensor of the operand's shape, equal to autograd's (and finite differences')."""
    __tracebackhide__ = True
    operand, out = operands[name], tuple(grad.shape)
    shape, label = tuple(operand.shape), f"{what}: the gradient of {name}"
    if isinstance(got, (bool, int, float)):
        raise proven_failure(f"{label} is the Python {type(got).__name__} {got!r:.40}; expected a tensor of shape "
                             f"{shape}.", NOT_A_TENSOR)
    got = as_answer(got, what=label)
    if tuple(got.shape) != shape:
        other = {"b": operands["c"], "c": operands["b"]}.get(name)
        product = None if other is None else unbroadcast(grad, shape) * other
        mistake = (SUMMED_BEFORE_PRODUCT if product is not None and product.shape == got.shape and torch.allclose(
            product, got) else _shape_mistake(tuple(got.shape), shape, out))
        raise GradingFailure(f"{label} has shape {tuple(got.shape)}; expected {shape}, the shape of {name}.",
                             suspects=(mistake,) if mistake else ())
    factor = {"a": torch.ones_like(grad), "b": operands["c"].expand(out), "c": operands["b"].expand(out)}[name]
    upstream = grad * factor
    count = grad.numel() // max(operand.numel(), 1)
    symptoms = [MEAN_NOT_SUM.looks_like(expected / count)] if count > 1 else []
    for mistake, value in ((WRONG_AXIS, _wrong_axis(upstream, shape)), (LEADING_SHIFTED,
                                                                         _shifted_leading(upstream, shape))):
        if value is not None and tuple(value.shape) == shape:
            symptoms.append(mistake.looks_like(value))
    if name != "a":
        symptoms += [FACTOR_MISSING.looks_like(unbroadcast(grad, shape)),
                     OWN_FACTOR.looks_like(unbroadcast(grad * operand.expand(out), shape))]
    expect_close(got, expected, what=label, fd=fd, symptoms=symptoms,
                 extra=f"  grad (shape {out}): {fmt(grad)}\n  a {tuple(operands['a'].shape)}, b "
                       f"{tuple(operands['b'].shape)}, c {tuple(operands['c'].shape)}")


def _run(backward_fn, grad: Tensor, a: Tensor, b: Tensor, c: Tensor) -> None:
    __tracebackhide__ = True
    what = (f"add_mul_backward(grad {tuple(grad.shape)}, a {tuple(a.shape)}, b {tuple(b.shape)}, "
            f"c {tuple(c.shape)})")
    # the caller's own tensors: call_learner fails a change to them
    with watch_calls([_SUM_TO_SIZE]) as watch, _EmptySums() as empty:
        received, error = call_learner(_attempt(backward_fn), grad, a, b, c, what=what, forbid=[Route.AUTOGRAD])
    if watch.used:
        raise proven_failure(f"{what} called Tensor.sum_to_size, which this part rules out.", SUM_TO_SIZE)
    try:
        _check_result(received, error, grad, a, b, c, what)
    except GradingFailure as failure:
        if empty.seen and failure.proven is None:
            raise proven_failure(f"{failure.message}\n  Your code called sum with an empty tuple of dimensions on a "
                                 "tensor that has dimensions.", SUMMED_ALL) from None
        raise


def _check_result(received, error, grad: Tensor, a: Tensor, b: Tensor, c: Tensor, what: str) -> None:
    __tracebackhide__ = True
    if error is not None:
        kind, message = error
        shifted = issubclass(kind, IndexError) and any(
            grad.dim() - x.dim() >= 2 and _shifted_leading(torch.zeros(grad.shape), tuple(x.shape)) is None
            for x in (a, b, c))
        raise GradingFailure(f"{what} raised {kind.__name__}: {message}", suspects=(LEADING_SHIFTED,) if shifted
                             else ())
    if type(received) not in (tuple, list) or len(received) != 3:
        raise GradingFailure(f"{what} returned {received!r:.100}; expected a tuple of three gradients, "
                             "(grad_a, grad_b, grad_c).")

    def f(a_, b_, c_):
        return (grad * (a_ + b_ * c_)).sum()

    expected, fd = autograd_gradient(f, a, b, c), central_difference(f, a, b, c)
    operands = {"a": a, "b": b, "c": c}
    for name, got, want, diff in zip("abc", received, expected, fd):
        _expect_operand(got, name, operands, grad, want, diff, what)


@check
def check_add_mul_backward(backward_fn, grading_seed: int | None = None) -> None:
    """Part A: add_mul_backward(grad, a, b, c) returns (grad_a, grad_b, grad_c), the gradients of
    sum(grad * (a + b * c)), each a tensor of its operand's shape, computed by hand with sums (no autograd, no
    Tensor.sum_to_size), leaving its arguments unchanged (returning grad itself where nothing is summed is fine).

    Domain: a, b, c float64 tensors of any shapes that broadcast together (0-d and size-0 dimensions included), grad
    a float64 tensor of the broadcast shape. Corners at every seed (:data:`CORNER_TRIPLES`): a 0-d operand, nothing
    to sum, a square output (wrong-axis sums keep the shapes), a size-1 dimension that is no broadcast, two empty
    dimensions, two leading dimensions, all 0-d; then 8 (public: fixed) or 10 (hidden: drawn) random triples.

    Contracts checked: no autograd (the engine's run counter) and no Tensor.sum_to_size (watched), the arguments
    unchanged, a tuple of three tensors (a Python number for a 0-d operand is named); a sum over an empty tuple of
    dimensions is observed and named when the case fails."""
    __tracebackhide__ = True
    for grad, a, b, c in _cases(grading_seed):
        with trial():
            _run(backward_fn, grad, a, b, c)
