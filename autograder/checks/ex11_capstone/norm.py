"""Part C.1: ``norm_backward(x, dy)``, the backward of the row-wise Euclidean norm y_i = ‖x_i‖, by hand: the next
case after lesson 11's tanh, a node whose textbook backward, x / ‖x‖, is wrong at two corners of its domain. At a row
of zeros the norm has a kink and x / ‖x‖ is 0 / 0 (a decision: the value the symmetric difference measures there);
on rows whose squares leave float64's range (entries near 1e-200 or 1e200) the sum of squares underflows to 0 or
overflows to inf, torch's own ``vector_norm`` included, while the gradient itself is an ordinary unit vector (Part A's
stability idea again: scale by the row's largest entry, which the norm is homogeneous in).

The oracles are the norm computed scaled, ``s·vector_norm(x / s)`` with the case's constant s = max |x|: autograd of
it, and central differences with a step of 1e-6·s (at a zero row both measure 0).
"""

from __future__ import annotations

import torch

from ...checking import Route, call_learner, check, expect_close, expect_tensor, fmt, trial
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    DY_WRONG_AXIS,
    KINK_VALUE,
    MISSING_UPSTREAM,
    SQUARED_NORM_RULE,
    SQUARES_OUT_OF_RANGE,
    ZERO_ROW_NAN,
)

Tensor = torch.Tensor


def _scale(x: Tensor) -> float:
    largest = float(x.abs().max()) if x.numel() else 0.0
    return largest if largest > 0 else 1.0


def _direction(x: Tensor) -> Tensor:
    """x_i / ‖x_i‖ row by row, scaled so that nothing over- or underflows; nan on a zero row (for the variants)."""
    s = _scale(x)
    scaled = x / s
    return scaled / torch.linalg.vector_norm(scaled, dim=1, keepdim=True)


def _run_norm(norm_backward, x: Tensor, dy: Tensor, note: str) -> None:
    __tracebackhide__ = True
    what = f"norm_backward(x, dy) for x of shape {tuple(x.shape)}{note}"
    got = expect_tensor(call_learner(norm_backward, x, dy, what=what, forbid=[Route.AUTOGRAD]), what,
                        tuple(x.shape))
    s = _scale(x)

    def weighted(t: Tensor) -> Tensor:
        return (dy * s * torch.linalg.vector_norm(t / s, dim=1)).sum()

    (expected,) = autograd_gradient(weighted, x)
    (fd,) = central_difference(weighted, x, h=1e-6 * s)
    zero_rows = (x == 0).all(dim=1)
    direction = _direction(x)
    symptoms = [MISSING_UPSTREAM.looks_like(direction), SQUARED_NORM_RULE.looks_like(2 * dy[:, None] * x),
                SQUARED_NORM_RULE.looks_like(2 * x)]
    if x.shape[0] == x.shape[1]:  # a square x: dy broadcast along the features runs without an error
        symptoms.append(DY_WRONG_AXIS.looks_like(dy[None, :] * direction))
    if zero_rows.any():
        symptoms += [ZERO_ROW_NAN.when(lambda a: not bool(torch.isfinite(a[zero_rows]).all())),
                     KINK_VALUE.when(lambda a: bool(torch.isfinite(a[zero_rows]).all())
                                     and bool((a[zero_rows] != 0).any()))]
    if s < 1e-150 or s > 1e150:  # the squares leave float64's range
        symptoms.append(SQUARES_OUT_OF_RANGE.when(
            lambda a: not bool(torch.isfinite(a).all()) or bool((a.abs() <= 1e-100).all())))
    expect_close(got, expected, what=what, fd=fd, extra=f"  inputs:             x = {fmt(x)}, dy = {fmt(dy)}",
                 symptoms=symptoms)


def _norm_cases(grading_seed: int | None) -> list[tuple[Tensor, Tensor, str]]:
    """Corners at every seed, then the visible case or two drawn ones (one square, one not)."""
    gen = case_stream("11/norm", grading_seed)
    f64 = dict(dtype=torch.float64)
    cases = [(torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [-1.0, 2.0, 2.0]], **f64),
              torch.tensor([1.0, 2.0, -0.5], **f64), ", a row of zeros among ordinary rows"),
             (torch.tensor([[-2.0], [0.0], [5.0]], **f64), torch.tensor([1.0, 3.0, 3.0], **f64),
              ", D = 1 (the absolute value), a zero included"),
             (uniform(gen, (3, 3), -2, 2), uniform(gen, (3,), -1, 1), ", a square x (N = D)"),
             (1e-200 * torch.tensor([[3.0, -4.0], [0.0, 5.0]], **f64), torch.tensor([1.0, -2.0], **f64),
              ", entries near 1e-200 (their squares underflow)"),
             (1e200 * torch.tensor([[3.0, 4.0, 12.0], [-1.0, 0.0, 0.0]], **f64), torch.tensor([2.0, 1.0], **f64),
              ", entries near 1e200 (their squares overflow)")]
    if grading_seed is None:
        return cases + [(uniform(gen, (4, 4), -3, 3), uniform(gen, (4,), -1, 1), ", a square x (N = D)")]
    n = randint(gen, 2, 6)
    x = uniform(gen, (n, n), -3, 3)
    x[randint(gen, 0, n - 1)] = 0.0
    d = randint(gen, 2, 5)
    far = 10.0 ** (randint(gen, 160, 290) * (1 if randint(gen, 0, 1) else -1))
    return cases + [(x, uniform(gen, (n,), -1, 1), ", a square x (N = D) with a row of zeros"),
                    (far * uniform(gen, (d + 1, d), -3, 3), uniform(gen, (d + 1,), -1, 1),
                     f", entries near {far:.0e}")]


@check
def check_norm_backward(norm_backward, grading_seed: int | None = None) -> None:
    """Part C.1: norm_backward(x, dy) = dy_i · ∂‖x_i‖/∂x_i row by row, by hand (no autograd), x and dy unchanged.

    Domain (the part's text): x float64 (N, D), N, D >= 1, any finite values (rows of zeros, entries from 1e-300 to
    1e300 included); dy float64 (N,), any sign. At a row of zeros the expected gradient is 0, the value the
    symmetric (central) difference measures at the kink and torch's own norm returns. Corners pinned at every seed:
    a zero row among ordinary ones, D = 1 with a zero, a square x (N = D: dy broadcast along the wrong axis runs),
    entries near 1e-200 and near 1e200. Contracts checked: a plain tensor shaped like x; no autograd; x and dy
    unchanged (values, versions).
    """
    __tracebackhide__ = True
    for x, dy, note in _norm_cases(grading_seed):
        with trial():
            _run_norm(norm_backward, x, dy, note)
