"""Part A: add_dot_backward(grad, a, b, c, dim), the backward of out = a + (b * c).sum(dim) by hand, when all three
operands broadcast and the caller picks the product's summed axis, dim, positive or negative.

dim numbers the axes of the product's broadcast shape P. grad has out's shape, P without that axis, lined up from the
right with a, which may add dimensions in front: a positive dim therefore names a different axis of grad as soon as a
adds one, and the axis is found counted from the right. The sum's backward is a broadcast: the upstream gradient gets
the summed axis back there (size k = P[dim]) and every one of the k terms receives it. Each factor's gradient is that
times the other factor, then summed down to the factor's own shape; a's gradient is grad summed down to a's shape. The
oracles are autograd and central differences of f(a, b, c) = sum(grad * (a + (b * c).sum(dim))) in float64.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from ...checking import (
    GradingFailure,
    Misconception,
    NotWritten,
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
    AXIS_MISPLACED,
    AXIS_NOT_RESTORED,
    DIM_FROM_LEFT,
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

#: Part A's corners (shapes of a, b, c, and dim), tried at every seed.
CORNERS: list[tuple[Shape, Shape, Shape, int]] = [
    ((), (3,), (2, 3), -1),             # out (2,): grad times c without the summed axis back cannot line up
    ((3,), (3, 3), (3, 3), -1),         # square: grad times c without the summed axis back runs, along the wrong axis
    ((3, 1), (2, 3, 4, 2), (2,), 3),    # a (3, 1) under out (2, 3, 4): its 1 meets the 4, compared from the left the 3
    ((5, 1, 4), (2, 3, 4), (3, 1), 1),  # a adds a dimension in front: grad's axis 1 is not the product's axis 1
    ((3, 1), (3, 4), (3, 1), 0),        # the same, and a's 3 is k: the axis back at grad's front runs, silently wrong
    ((), (4,), (3, 4), 0),              # dim 0 of the product, k = 3 from c alone: b has no axis 0 of its own
    ((2, 1, 1), (3, 1, 5), (4, 5), -2),  # a middle axis, k from c alone, a adds a dimension in front
    ((3, 1, 1), (2, 1, 3), (4, 3), 0),  # the product's axis 0, from b alone, with a's dimension in front of grad
    ((3,), (3, 1), (2, 3, 4), -1),      # b's (3, 1) meets the product's (3, 4): compared from the left, (2, 3)
    ((2, 1), (4,), (3, 4), -1),         # a stretched to (2, 3): b and c sum over the dimension a added
    ((2,), (2, 3), (), 1),              # a 0-d c: the product's size 3 comes from b alone
    ((2,), (2, 1), (5,), -1),           # b's size-1 last dimension stretched to 5, then summed away
    ((), (4,), (4,), 0),                # a plain dot product: out and grad are 0-d
    ((1,), (0, 3), (3,), -1),           # an empty batch, a's size 1 stretched to 0: zeros of each operand's shape
    ((2,), (2, 0), (1,), -1),           # an empty sum (k = 0): b's gradient is empty, c's is a zero
    ((3,), (0, 3), (1, 1), 0),          # an empty sum over axis 0: c's gradient is a zero of shape (1, 1)
    ((2, 3), (3, 4), (4,), -1),         # a's leading dimension added in front of the product's
    ((2, 1), (1, 3), (2, 4, 3), 1),     # k from c alone, c longer than b: a positive dim counted in b's own dimensions
]


def _random_case(gen) -> tuple[Shape, Shape, Shape, int]:
    """Three shapes and a dim: a product shape P of 1 to 3 dimensions of sizes 2 to 4 and an axis of it, dim, drawn
    positive or negative; b and c each drop some leading dimensions of P and set some of the rest to 1 (P[dim] kept in
    one of them); a lines up with P without that axis the same way, sometimes with one dimension more in front."""
    product = tuple(randint(gen, 2, 4) for _ in range(randint(gen, 1, 3)))
    axis = randint(gen, 0, len(product) - 1)
    positive = randint(gen, 0, 1)

    def operand(shape):
        kept = shape[randint(gen, 0, len(shape)):]
        return tuple(1 if randint(gen, 0, 2) == 0 else size for size in kept)

    def keep_axis(shape):        # the factor that carries k: long enough to reach the axis, with P's size there
        full = product[len(product) - max(len(shape), len(product) - axis):]
        padded = (1,) * (len(full) - len(shape)) + shape
        at = len(full) - (len(product) - axis)
        return padded[:at] + (product[axis],) + padded[at + 1:]

    b, c = operand(product), operand(product)
    if randint(gen, 0, 1):
        b = keep_axis(b)
    else:
        c = keep_axis(c)
    a = operand(product[:axis] + product[axis + 1:])
    if randint(gen, 0, 2) == 0:      # a dimension in front of all of the output's: a's own, padded with ones
        a = (randint(gen, 2, 3),) + (1,) * (len(product) - 1 - len(a)) + a
    rank = max(len(b), len(c))       # the rank of b * c, which may have fewer dimensions than the drawn product
    dim = axis - (len(product) - rank) if positive else axis - len(product)
    return a, b, c, dim


def _out_shape(a: Shape, b: Shape, c: Shape, dim: int) -> Shape:
    product = list(torch.broadcast_shapes(b, c))
    del product[dim]
    return tuple(torch.broadcast_shapes(a, tuple(product)))


def _cases(grading_seed: int | None) -> list[tuple[Tensor, Tensor, Tensor, Tensor, int]]:
    """The corners, then 8 (public: fixed) or 10 (hidden: drawn) random ones; (grad, a, b, c) in float64, and dim."""
    gen = case_stream("08/add_dot_backward", grading_seed)
    drawn = CORNERS + [_random_case(gen) for _ in range(8 if grading_seed is None else 10)]
    cases = []
    for *shapes, dim in drawn:
        a, b, c = (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2 for shape in shapes)
        grad = torch.rand(_out_shape(*shapes, dim), generator=gen, dtype=torch.float64) * 4 - 2
        cases.append((grad, a, b, c, dim))
    return cases


def summed_axis(b: Tensor, c: Tensor, dim: int) -> tuple[int, int]:
    """The summed axis counted from the right (a negative index, the same in P and in grad's copy) and its size k."""
    product = tuple(torch.broadcast_shapes(b.shape, c.shape))
    axis = dim % len(product) - len(product)
    return axis, product[axis]


def _given_back(grad: Tensor, place: int, size: int) -> Tensor:
    """grad with an axis of ``size`` inserted at index ``place`` (0 to grad.dim()), the same copy along it."""
    copy = grad.unsqueeze(place)
    sizes = list(copy.shape)
    sizes[place] = size
    return copy.expand(sizes)


def per_term(grad: Tensor, b: Tensor, c: Tensor, dim: int) -> Tensor:
    """The sum's backward: grad with the summed axis back, one copy for each of the product's k terms."""
    axis, size = summed_axis(b, c, dim)
    return _given_back(grad, grad.dim() + 1 + axis, size)


def _misplaced(grad: Tensor, other: Tensor, shape: Shape, b: Tensor, c: Tensor, dim: int) -> list[Tensor | None]:
    """The mistake of giving the summed axis back at another place of grad (a positive dim counted in grad's own
    dimensions, the last axis whatever dim, ...): for each other place, the gradient it gives once summed down to
    ``shape``, or None where the product cannot broadcast."""
    axis, size = summed_axis(b, c, dim)
    values = []
    for place in range(grad.dim() + 1):
        if place == grad.dim() + 1 + axis:
            continue
        try:
            values.append(unbroadcast(_given_back(grad, place, size) * other, shape))
        except RuntimeError:
            values.append(None)
    return values


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


_CLASH = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                    r"dimension (\d+)")


def _clash(message: str) -> tuple | None:
    """What a broadcasting error says: the two sizes that clash (in either order) and the dimension, or None."""
    found = _CLASH.search(message)
    return None if found is None else (frozenset(found.group(1, 2)), found.group(3))


def _clashes(pairs: list[tuple[Tensor, Tensor]]) -> set:
    """The broadcasting errors that multiplying each pair raises (a mistake's fingerprint when the learner's code
    raises)."""
    said = set()
    for left, right in pairs:
        for x, y in ((left, right), (right, left)):
            try:
                x * y
            except RuntimeError as error:
                said.add(_clash(str(error)))
    return said - {None}


def _attempt(fn):
    """``fn(grad, a, b, c, dim)``: its result, or the exception it raised, so that a check can tell the two apart."""
    def attempt(grad, a, b, c, dim):
        try:
            return fn(grad, a, b, c, dim), None
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


def _expect_operand(got, name: str, operands: dict[str, Tensor], dim: int, grad: Tensor, expected: Tensor,
                    fd: Tensor, what: str) -> None:
    """One operand's gradient: a tensor of the operand's shape, equal to autograd's (and finite differences')."""
    __tracebackhide__ = True
    operand, out = operands[name], tuple(grad.shape)
    shape, label = tuple(operand.shape), f"{what}: the gradient of {name}"
    if isinstance(got, (bool, int, float)):
        raise proven_failure(f"{label} is the Python {type(got).__name__} {got!r:.40}; expected a tensor of shape "
                             f"{shape}.", NOT_A_TENSOR)
    got = as_answer(got, what=label)
    other = {"b": operands["c"], "c": operands["b"]}.get(name)
    terms = per_term(grad, operands["b"], operands["c"], dim)
    upstream = grad if other is None else terms * other       # at the full shape: out, with the k terms' axis back
    misplaced = [] if other is None else _misplaced(grad, other, shape, operands["b"], operands["c"], dim)
    if tuple(got.shape) != shape:
        at = len(shape) + summed_axis(operands["b"], operands["c"], dim)[0]       # the summed axis in the operand
        copied = (other is not None and at >= 0 and shape[at] != 1 and got.dim() == len(shape) and got.shape[at] == 1
                  and all(g == s for i, (g, s) in enumerate(zip(got.shape, shape)) if i != at))
        left = _left_aligned(upstream, shape)
        stripped = tuple(upstream.shape)[upstream.dim() - len(shape):]        # the leading dimensions summed alone
        from_left = left is not None and tuple(left.shape) == tuple(got.shape) != stripped
        moved = any(value is not None and tuple(value.shape) == tuple(got.shape) for value in misplaced)
        mistake = (TERMS_NOT_COPIED if copied else LEFT_ALIGNED if from_left else AXIS_MISPLACED if moved else
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
        symptoms += [AXIS_MISPLACED.looks_like(value) for value in misplaced
                     if value is not None and tuple(value.shape) == shape]
    expect_close(got, expected, what=label, fd=fd, symptoms=symptoms,
                 extra=f"  grad (shape {out}): {fmt(grad)}\n  a {tuple(operands['a'].shape)}, b "
                       f"{tuple(operands['b'].shape)}, c {tuple(operands['c'].shape)}, dim {dim}")


@dataclass(frozen=True)
class _Outcome:
    """What the learner's code did on one case: the failure (None: the case passed), whether it raised, and the
    gradients of b and c it returned (float64 copies), when it returned tensors there."""

    failure: GradingFailure | None
    raised: bool = False
    factors: tuple[Tensor, Tensor] | None = None


def _run(backward_fn, grad: Tensor, a: Tensor, b: Tensor, c: Tensor, dim: int) -> _Outcome:
    __tracebackhide__ = True
    what = (f"add_dot_backward(grad {tuple(grad.shape)}, a {tuple(a.shape)}, b {tuple(b.shape)}, "
            f"c {tuple(c.shape)}, dim={dim})")
    received, error, factors = None, None, None
    try:
        # the caller's own tensors: call_learner fails a change to them
        with watch_calls([_SUM_TO_SIZE]) as watch, _EmptySums() as empty:
            received, error = call_learner(_attempt(backward_fn), grad, a, b, c, dim, what=what,
                                           forbid=[Route.AUTOGRAD])
        if type(received) in (tuple, list) and len(received) == 3 and all(type(g) is Tensor for g in received[1:]):
            factors = tuple(g.detach().to(torch.float64).clone() for g in received[1:])
        if watch.used:
            raise proven_failure(f"{what} called Tensor.sum_to_size, which this part rules out.", SUM_TO_SIZE)
        try:
            _check_result(received, error, grad, a, b, c, dim, what)
        except GradingFailure as failure:
            if empty.seen and failure.proven is None:
                raise proven_failure(f"{failure.message}\n  Your code called sum with an empty tuple of dimensions "
                                     "on a tensor that has dimensions.", SUMMED_ALL) from None
            raise
    except NotWritten:
        raise
    except GradingFailure as failure:
        return _Outcome(failure, raised=error is not None, factors=factors)
    return _Outcome(None)


#: The mistaken counts of the place where the summed axis goes back among grad's axes (an index for unsqueeze),
#: and the mistake each is: dim as given (from the left of grad when positive), a positive dim turned negative with
#: one factor's own number of dimensions, and the last axis whatever dim.
_COUNTS = {
    "left": (DIM_FROM_LEFT, lambda grad, b, c, dim: dim),
    "b": (AXIS_MISPLACED, lambda grad, b, c, dim: dim - b.dim() if dim >= 0 else dim),
    "c": (AXIS_MISPLACED, lambda grad, b, c, dim: dim - c.dim() if dim >= 0 else dim),
    "last": (AXIS_MISPLACED, lambda grad, b, c, dim: grad.dim()),
}


def _counted(grad: Tensor, b: Tensor, c: Tensor, dim: int, place: int, copied: bool,
             stretched: bool = True) -> tuple[Tensor, Tensor] | None:
    """The gradients of b and c when the summed axis goes back at ``place`` (an unsqueeze argument), copied to its k
    terms (``copied``) or left at size 1 for broadcasting to stretch, times the other factor, stretched to the
    product's shape (``stretched``) or not, each then summed down to its factor's shape; None when that raises."""
    product = torch.broadcast_shapes(b.shape, c.shape)
    try:
        back = grad.unsqueeze(place)
        if copied:
            sizes = list(back.shape)
            sizes[place] = product[dim]
            back = back.expand(sizes)
        full = torch.broadcast_shapes(back.shape, product)
        return tuple(unbroadcast((back * other).expand(full) if stretched else back * other, tuple(own.shape))
                     for own, other in ((b, c), (c, b)))
    except (RuntimeError, IndexError):
        return None


def _fits(outcome: _Outcome, value: tuple[Tensor, Tensor] | None, right: tuple[Tensor, Tensor]) -> bool:
    """Whether one case's outcome is what a count giving ``value`` there does: pass where it is right, raise where it
    raises, and its numbers where it is wrong."""
    if value is not None and all(v.shape == r.shape and bool(torch.allclose(v, r, rtol=1e-6, atol=1e-8))
                                 for v, r in zip(value, right)):
        return outcome.failure is None
    if outcome.failure is None or outcome.failure.proven is not None:
        return False
    if value is None:
        return outcome.raised
    return outcome.factors is not None and all(
        g.shape == v.shape and bool(torch.allclose(g, v, rtol=1e-6, atol=1e-8)) for g, v in zip(outcome.factors, value))


def _miscounted(cases, outcomes: list[_Outcome]) -> tuple[Misconception, str] | None:
    """The mistaken count of the summed axis's place (:data:`_COUNTS`) that gives, on every case, what the learner's
    code did (passed, raised or returned the same numbers), when it failed two cases or more; with the evidence."""
    failed = [i for i, outcome in enumerate(outcomes) if outcome.failure is not None]
    if len(failed) < 2:
        return None
    for name, (mistake, count) in _COUNTS.items():
        for copied, stretched in ((False, True), (True, False), (True, True), (False, False)):
            fits = True
            for (grad, _, b, c, dim), outcome in zip(cases, outcomes):
                right = _counted(grad, b, c, dim, dim % max(b.dim(), c.dim()) - max(b.dim(), c.dim()), True)
                value = _counted(grad, b, c, dim, count(grad, b, c, dim), copied, stretched)
                if right is None or not _fits(outcome, value, right):
                    fits = False
                    break
            if fits:
                return mistake, _evidence(name, cases, failed)
    return None


def _evidence(name: str, cases, failed: list[int]) -> str:
    """Which cases failed, and what they share that the passed ones lack."""
    shown = "; ".join(f"a {tuple(cases[i][1].shape)}, b {tuple(cases[i][2].shape)}, c {tuple(cases[i][3].shape)}, "
                      f"dim={cases[i][4]}" for i in failed[:3])
    more = "; ..." if len(failed) > 3 else ""
    text = f"\n  Your function failed {len(failed)} of the {len(cases)} cases ({shown}{more}) and passed the others."
    if name == "left":
        adds = [i for i, (grad, a, b, c, dim) in enumerate(cases) if i not in failed
                and grad.dim() > max(b.dim(), c.dim()) - 1]
        negative = sum(1 for i in adds if cases[i][4] < 0)
        text += (f" Every failed case has a dim >= 0 and an a that adds dimensions in front of grad; among the passed "
                 f"ones, {negative} have an a that adds dimensions and a negative dim.")
    return text


def _check_result(received, error, grad: Tensor, a: Tensor, b: Tensor, c: Tensor, dim: int, what: str) -> None:
    __tracebackhide__ = True
    if error is not None:
        kind, message = error
        full = tuple(per_term(grad, b, c, dim).shape)
        shifted = issubclass(kind, IndexError) and any(
            len(size) - x.dim() >= 2 and _shifted_leading(torch.zeros(size), tuple(x.shape)) is None
            for x, size in ((a, tuple(grad.shape)), (b, full), (c, full)))
        said = _clash(message) if issubclass(kind, RuntimeError) else None
        axis, size = summed_axis(b, c, dim)
        lined_up = _clashes([(grad, x) for x in (b, c)])
        moved = _clashes([(_given_back(grad, place, k), x) for place in range(grad.dim() + 1)
                          if place != grad.dim() + 1 + axis for k in {size, 1} for x in (b, c)])
        suspects = ((LEADING_SHIFTED,) if shifted else
                    (AXIS_NOT_RESTORED,) if said in lined_up - moved else
                    (AXIS_MISPLACED,) if said in moved - lined_up else ())
        raise GradingFailure(f"{what} raised {kind.__name__}: {message}", suspects=suspects)
    if type(received) not in (tuple, list) or len(received) != 3:
        raise GradingFailure(f"{what} returned {received!r:.100}; expected a tuple of three gradients, "
                             "(grad_a, grad_b, grad_c).")

    def f(a_, b_, c_):
        return (grad * (a_ + (b_ * c_).sum(dim=dim))).sum()

    expected, fd = autograd_gradient(f, a, b, c), central_difference(f, a, b, c)
    operands = {"a": a, "b": b, "c": c}
    for name, got, want, diff in zip("abc", received, expected, fd):
        _expect_operand(got, name, operands, dim, grad, want, diff, what)


@check
def check_add_dot_backward(backward_fn, grading_seed: int | None = None) -> None:
    """Part A: add_dot_backward(grad, a, b, c, dim) returns (grad_a, grad_b, grad_c), the gradients of
    sum(grad * (a + (b * c).sum(dim=dim))), each a tensor of its operand's shape, computed by hand with sums (no
    autograd, no Tensor.sum_to_size), leaving its arguments unchanged (returning grad itself where nothing is summed is
    fine).

    Domain: b and c float64 tensors that broadcast together to a shape P of at least one dimension (either may be
    0-d), dim an int with -len(P) <= dim < len(P), a a float64 tensor that broadcasts with P without axis dim (it may
    add dimensions in front), grad a float64 tensor of the shape of a + (b * c).sum(dim); size-0 and size-1
    dimensions anywhere, the summed one included. Corners at every seed (:data:`CORNERS`): grad against c that cannot
    line up, a square product where it lines up along the wrong axis, a (1, 3) a under a (4, 2, 3) output and a (3, 1)
    b under a (2, 3, 4) product (size-1 dimensions compared from the left go wrong), positive and negative dims other
    than the last with a dimension a adds in front (a positive dim counted in grad's dimensions goes wrong), k from one
    factor alone (and from a c longer than b, where a positive dim counted in b's dimensions goes wrong), a 0-d c,
    a size-1 summed dimension of b, a 0-d output, an empty batch, empty sums over the last axis
    and the first; then 8 (public: fixed) or 10 (hidden: drawn) random cases, dim drawn positive or negative.

    Contracts checked: no autograd (the engine's run counter) and no Tensor.sum_to_size (watched), the arguments
    unchanged, a tuple of three tensors (a Python number for a 0-d operand is named); a sum over an empty tuple of
    dimensions is observed and named when the case fails. A mistaken count of the summed axis's place in grad
    (:data:`_COUNTS`) is named when it gives, case by case, what the learner's code did: passed, raised, or the same
    gradients, on two failed cases at least."""
    __tracebackhide__ = True
    cases = _cases(grading_seed)
    outcomes = [_run(backward_fn, *case) for case in cases]
    miscounted = _miscounted(cases, outcomes)
    for outcome in outcomes:
        with trial():
            if outcome.failure is None:
                continue
            if miscounted is None or outcome.failure.proven is not None:
                raise outcome.failure
            mistake, evidence = miscounted
            raise GradingFailure(outcome.failure.message + evidence, suspects=(mistake,))
