"""SiLU's backward, ``silu_backward(x, dy)``, which the learner derives by hand (SiLU, x·σ(x)): its cases run first
in Part C.2's check (:mod:`.residual`), since Part E's given backward and the learner's residual block use it."""

from __future__ import annotations

import torch

from ...checking import Route, call_learner, check, expect_close, expect_tensor, fmt, trial
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import EXP_OVERFLOW_SILU, MISSING_UPSTREAM, PRODUCT_RULE_HALF, SIGMOID_DERIVATIVE

Tensor = torch.Tensor


def silu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def _run_silu(silu_backward, x: Tensor, dy: Tensor) -> None:
    __tracebackhide__ = True
    what = f"silu_backward(x, dy) for x of shape {tuple(x.shape)}"
    got = expect_tensor(call_learner(silu_backward, x, dy, what=what, forbid=[Route.AUTOGRAD]), what,
                         tuple(x.shape))
    s = torch.sigmoid(x)
    far = x.abs() > 709.0                     # exp(|x|) overflows float64 there
    (expected,) = autograd_gradient(lambda t: (silu(t) * dy).sum(), x)
    (fd,) = central_difference(lambda t: (silu(t) * dy).sum(), x)
    expect_close(got, expected, what=what, fd=fd, extra=f"  inputs:             x = {fmt(x)}, dy = {fmt(dy)}",
                 symptoms=[SIGMOID_DERIVATIVE.looks_like(dy * s * (1 - s)), PRODUCT_RULE_HALF.looks_like(dy * s),
                           PRODUCT_RULE_HALF.looks_like(dy * x * s * (1 - s)),
                           MISSING_UPSTREAM.looks_like(s * (1 + x * (1 - s))),
                           EXP_OVERFLOW_SILU.when(lambda a: bool(far.any()) and not bool(torch.isfinite(a[far]).all())
                                                  and bool(torch.isfinite(a[~far]).all()))])


def _silu_cases(grading_seed: int | None) -> list[tuple[Tensor, Tensor]]:
    gen = case_stream("11/silu", grading_seed)
    f64 = dict(dtype=torch.float64)
    corners = [(torch.tensor([0.0, -40.0, 40.0, -1.5, 2.5, -800.0, 800.0], **f64),
                torch.tensor([1.0, 0.5, -2.0, -0.5, 0.0, 1.0, 1.0], **f64)),
               (torch.tensor([[-1000.0, 3.0], [750.0, -720.0]], **f64),      # e^{±x} overflows float64 here
                torch.tensor([[2.0, 1.0], [-1.0, 0.5]], **f64)),
               (uniform(gen, (), -3, 3), uniform(gen, (), -1, 1))]          # a 0-d scalar
    if grading_seed is None:
        return corners + [(uniform(gen, (3, 4), -3, 3), uniform(gen, (3, 4), -1, 1))]
    shapes = [(randint(gen, 3, 8),), (randint(gen, 2, 4), randint(gen, 2, 5))]
    return corners + [(uniform(gen, shape, -3, 3), uniform(gen, shape, -1, 1)) for shape in shapes]


@check
def check_silu_backward(silu_backward, grading_seed: int | None = None) -> None:
    """SiLU's backward alone (Part C.2's check runs its cases first): silu_backward(x, dy) = dy · d(x·σ(x))/dx, by
    hand (no autograd), x and dy unchanged.

    Domain (the part's text): x and dy float64 tensors of one shape (any, 0-d included), x in [-1000, 1000], dy of
    any sign, zeros included. Corners pinned at every seed: x = 0, x = ±40 (σ saturated), |x| of 720 to 1000 (e^{±x}
    overflows float64: a derivative written with e^{-x} gives nan), a zero dy, a 0-d scalar.
    Contracts checked: a plain tensor shaped like x (a Python float fails, also for a 0-d x); no autograd; x and dy
    unchanged (values, versions).
    """
    __tracebackhide__ = True
    for x, dy in _silu_cases(grading_seed):
        with trial():
            _run_silu(silu_backward, x, dy)
