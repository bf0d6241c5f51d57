"""Part A: add_dot_backward(grad, a, b, c), the backward of out = a + (b * c).sum(dim=-1) by hand, when all three
operands broadcast and the product's last axis is summed away.

The sum's backward is a broadcast: the upstream gradient gets the summed axis back (size k, the product's last size)
and every one of the k terms receives it. Each factor's gradient is that times the other factor, at the product's
broadcast shape (with every dimension the output added in front), then summed down to the factor's own shape; a's
gradient is grad summed down to a's shape. The oracles are autograd and central differences of
f(a, b, c) = sum(grad * (a + (b * c).sum(-1))) in float64.
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
    AXIS_NOT_RESTORED,
    EMPTY_NOT_SUMMED,
    FACTOR_MISSING,
    LEADING_KEPT,
    LEADING_SHIFTED,
    LEFT_ALIGNED,
    MEAN_NOT_SUM,
    NO_KEEPDIM,
    NOT_A_TENSOR,
    OWN_FACTOR,
    STRETCHED_NOT_SUMMED,
    SUM_TO_SIZE,
    SUMMED_ALL,
    TERMS_NOT_COPIED,
    WRONG_AXIS,
)

Tensor = torch.Tensor
Shape = tuple[int, ...]

#: Bound when this module is imported, so that learner code cannot swap it.
_SUM_TO_SIZE = torch.Tensor.sum_to_size

#: Part A's corners (shapes of a, b, c), tried at every seed.
CORNER_TRIPLES: list[tuple[Shape, Shape, Shape]] = [
    ((), (3,), (2, 3)),             # out (2,): grad times c without the summed axis back cannot line up
    ((3,), (3, 3), (3, 3)),         # square: grad times c without the summed axis back runs, along the wrong axis
    ((3,), (2, 3, 4), (3, 1)),      # c's size 1 meets the product's 4: compared from the left, it meets the 3
    ((2, 1), (4,), (3, 4)),         # a stretched to (2, 3): b and c sum over the dimension a added
    ((3, 1, 1), (2, 1, 3), (4, 3)),  # a size-1 dimension in the middle of b; a adds a dimension in front of all
    ((2,), (2, 3), ()),             # a 0-d c: the product's last size 3 comes from b alone
    ((2,), (2, 1), (5,)),           # b's size-1 last dimension stretched to 5, then summed away
    ((), (4,), (4,)),               # a plain dot product: out and grad are 0-d
    ((1,), (0, 3), (3,)),           # an empty batch, a's size 1 stretched to 0: zeros of each operand's shape
    ((2,), (2, 0), (1,)),           # an empty sum (k = 0): b's gradient is empty, c's is a zero
    ((2, 3), (3, 4), (4,)),         # a's leading dimension added in front of the product's
]


def _random_triple(gen) -> tuple[Shape, Shape, Shape]:
    """Three shapes: a product shape P of 1 to 3 dimensions of sizes 2 to 4; b and c each drop some leading
    dimensions of P and set some of the rest to 1 (P[-1] kept in one of them); a lines up with P[:-1] the same way,
    sometimes with one dimension more in front."""
    product = tuple(randint(gen, 2, 4) for _ in range(randint(gen, 1, 3)))

    def operand(shape):
        kept = shape[randint(gen, 0, len(shape)):]
        return tuple(1 if randint(gen, 0, 2) == 0 else size for size in kept)

    b, c = operand(product), operand(product)
    if randint(gen, 0, 1):
        b, c = b[:-1] + product[-1:] if b else product[-1:], c
    else:
        c = c[:-1] + product[-1:] if c else product[-1:]
    a = operand(product[:-1])
    if randint(gen, 0, 2) == 0:      # a dimension in front of all of the product's: a's own, padded with ones
        a = (randint(gen, 2, 3),) + (1,) * (len(product) - 1 - len(a)) + a
    return a, b, c


def _out_shape(a: Shape, b: Shape, c: Shape) -> Shape:
    return tuple(torch.broadcast_shapes(a, tuple(torch.broadcast_shapes(b, c))[:-1]))


def _cases(grading_seed: int | None) -> list[tuple[Tensor, ...]]:
    """The corners, then 8 (public: fixed) or 10 (hidden: drawn) random triples; (grad, a, b, c) in float64."""
    gen = case_stream("08/add_dot_backward", grading_seed)
    triples = CORNER_TRIPLES + [_random_triple(gen) for _ in range(8 if grading_seed is None else 10)]
    cases = []
    for shapes in triples:
        a, b, c = (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2 for shape in shapes)
        cases.append((torch.rand(_out_shape(*shapes), generator=gen, dtype=torch.float64) * 4 - 2, a, b, c))
    return cases


def per_term(grad: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """The sum's backward: grad with the summed axis back, one copy for each of the product's k terms."""
    size = tuple(torch.broadcast_shapes(b.shape, c.shape))[-1]
    return grad.unsqueeze(-1).expand(*grad.shape, size)


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


def _left_aligned(grad: Tensor, shape: Shape) -> Tensor | None:
    """The mistake of summing the size-1 dimensions of ``shape`` compared with grad's FIRST dimensions, before the
    dimensions broadcasting added in front are summed away (None when that cannot run or changes nothing)."""
    if grad.dim() == len(shape):
        return None
    for dim, size in enumerate(shape):
        if size == 1 and grad.shape[dim] != 1:
            grad = grad.sum(dim=dim, keepdim=True)
    while grad.dim() > len(shape):
        grad = grad.sum(dim=0)
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


def _broadcasts_not(grad: Tensor, factor: Tensor) -> bool:
    """Whether grad and a factor of the product, as they come, cannot broadcast together."""
    try:
        torch.broadcast_shapes(grad.shape, factor.shape)
    except RuntimeError:
        return True
    return False


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


def _without_axis(grad: Tensor, other: Tensor, shape: Shape) -> Tensor | None:
    """The mistake of multiplying grad by the other factor as it comes (the summed axis not given back), then summing
    down to the operand's shape; None when that cannot run or gives another shape."""
    try:
        value = unbroadcast(grad * other, shape)
    except (RuntimeError, IndexError):
        return None
    return value if tuple(value.shape) == shape else None


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
    other = {"b": operands["c"], "c": operands["b"]}.get(name)
    terms = per_term(grad, operands["b"], operands["c"])
    upstream = grad if other is None else terms * other       # at the full shape: out, then the k terms
    if tuple(got.shape) != shape:
        copied = (other is not None and shape and shape[-1] != 1 and got.dim() == len(shape) and got.shape[-1] == 1
                  and tuple(got.shape[:-1]) == shape[:-1])
        left = _left_aligned(upstream, shape)
        stripped = tuple(upstream.shape)[upstream.dim() - len(shape):]        # the leading dimensions summed alone
        from_left = left is not None and tuple(left.shape) == tuple(got.shape) != stripped
        mistake = (TERMS_NOT_COPIED if copied else LEFT_ALIGNED if from_left else
                   _shape_mistake(tuple(got.shape), shape, tuple(upstream.shape)))
        raise GradingFailure(f"{label} has shape {tuple(got.shape)}; expected {shape}, the shape of {name}.",
                             suspects=(mistake,) if mistake else ())
    count = upstream.numel() // max(operand.numel(), 1)
    symptoms = [MEAN_NOT_SUM.looks_like(expected / count)] if count > 1 else []
    for mistake, value in ((WRONG_AXIS, _wrong_axis(upstream, shape)), (LEFT_ALIGNED, _left_aligned(upstream, shape)),
                           (LEADING_SHIFTED, _shifted_leading(upstream, shape))):
        if value is not None and tuple(value.shape) == shape:
            symptoms.append(mistake.looks_like(value))
    if other is not None:
        symptoms += [FACTOR_MISSING.looks_like(unbroadcast(terms, shape)),
                     OWN_FACTOR.looks_like(unbroadcast(terms * operand, shape))]
        lined_up = _without_axis(grad, other, shape)
        if lined_up is not None:
            symptoms.append(AXIS_NOT_RESTORED.looks_like(lined_up))
    expect_close(got, expected, what=label, fd=fd, symptoms=symptoms,
                 extra=f"  grad (shape {out}): {fmt(grad)}\n  a {tuple(operands['a'].shape)}, b "
                       f"{tuple(operands['b'].shape)}, c {tuple(operands['c'].shape)}")


def _run(backward_fn, grad: Tensor, a: Tensor, b: Tensor, c: Tensor) -> None:
    __tracebackhide__ = True
    what = (f"add_dot_backward(grad {tuple(grad.shape)}, a {tuple(a.shape)}, b {tuple(b.shape)}, "
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
        full = tuple(grad.shape) + tuple(torch.broadcast_shapes(b.shape, c.shape))[-1:]
        shifted = issubclass(kind, IndexError) and any(
            len(size) - x.dim() >= 2 and _shifted_leading(torch.zeros(size), tuple(x.shape)) is None
            for x, size in ((a, tuple(grad.shape)), (b, full), (c, full)))
        lined_up = issubclass(kind, RuntimeError) and any(
            text in message for text in ("must match the size", "size of tensor", "shape mismatch")) and any(
            _broadcasts_not(grad, x) for x in (b, c))
        suspects = (LEADING_SHIFTED,) if shifted else (AXIS_NOT_RESTORED,) if lined_up else ()
        raise GradingFailure(f"{what} raised {kind.__name__}: {message}", suspects=suspects)
    if type(received) not in (tuple, list) or len(received) != 3:
        raise GradingFailure(f"{what} returned {received!r:.100}; expected a tuple of three gradients, "
                             "(grad_a, grad_b, grad_c).")

    def f(a_, b_, c_):
        return (grad * (a_ + (b_ * c_).sum(dim=-1))).sum()

    expected, fd = autograd_gradient(f, a, b, c), central_difference(f, a, b, c)
    operands = {"a": a, "b": b, "c": c}
    for name, got, want, diff in zip("abc", received, expected, fd):
        _expect_operand(got, name, operands, grad, want, diff, what)


@check
def check_add_dot_backward(backward_fn, grading_seed: int | None = None) -> None:
    """Part A: add_dot_backward(grad, a, b, c) returns (grad_a, grad_b, grad_c), the gradients of
    sum(grad * (a + (b * c).sum(dim=-1))), each a tensor of its operand's shape, computed by hand with sums (no
    autograd, no Tensor.sum_to_size), leaving its arguments unchanged (returning grad itself where nothing is summed is
    fine).

    Domain: b and c float64 tensors that broadcast together to a shape P of at least one dimension (either may be
    0-d), a a float64 tensor that broadcasts with P[:-1], grad a float64 tensor of the shape of a + (b * c).sum(-1);
    size-0 and size-1 dimensions anywhere, the summed one included. Corners at every seed (:data:`CORNER_TRIPLES`):
    grad against c that cannot line up, a square product where it lines up along the wrong axis, a (3, 1) c under a
    (2, 3, 4) product (size-1 dimensions compared from the left go wrong), a dimension a adds
    in front, a size-1 dimension in the middle, a 0-d c, a size-1 summed dimension of b, a 0-d output, an empty
    batch, an empty sum; then 8 (public: fixed) or 10 (hidden: drawn) random triples.

    Contracts checked: no autograd (the engine's run counter) and no Tensor.sum_to_size (watched), the arguments
    unchanged, a tuple of three tensors (a Python number for a 0-d operand is named); a sum over an empty tuple of
    dimensions is observed and named when the case fails."""
    __tracebackhide__ = True
    for grad, a, b, c in _cases(grading_seed):
        with trial():
            _run(backward_fn, grad, a, b, c)
