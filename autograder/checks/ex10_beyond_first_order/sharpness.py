"""Part A.2: ``sharpness(f, xs)``, the largest eigenvalue of the Hessian of a function of several tensors, from
Hessian-vector products alone, where the eigenvalue of largest size may be a negative one (a saddle)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...checking import CourseBug, GradingFailure, Routes, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...routes import LargestTensor
from ...seeding import choice, uniform
from ..cases import case_stream, randint
from .hvp import ALL_LINEAR, BILINEAR, IGNORES_W, MULTI, Watched, _flat, _on_flat, full_hessian, not_required, vector
from .misconceptions import (
    BUILT_MATRIX,
    FINITE_DIFFERENCES,
    FIXED_START,
    LARGEST_MAGNITUDE,
    SHIFT_KEPT,
    SHIFT_TOO_SMALL,
    SPECTRAL_RADIUS,
    TORCH_FUNC_HVP,
    ZERO_NORMALISED,
)

Tensor = torch.Tensor

#: The backward passes a call may run: a few hundred products, fewer than the 801 of the full Hessian at n = 800.
BUDGET = 600
#: The tests' promise: the largest eigenvalue lies at least this share of max |λ| above every smaller one.
GAP = 0.2
#: A spectrum is steep when λmin < −(λmax + STEEP): there power iteration on H + cI with a fixed c <= STEEP / 2
#: still finds λmin (it needs c > (|λmin| − λmax) / 2), while a small spectrum converges too slowly for a large c.
STEEP = 20.0


@dataclass
class Case:
    """One function of the tensors ``xs`` (named ``args``), as the learner reads it (``name``), its Hessian's
    eigenvalues at xs (ascending) and, when ones is an eigenvector, its eigenvalue (a fixed start's answer)."""

    name: str
    args: tuple[str, ...]
    f: Callable[..., Tensor]
    xs: list[Tensor]
    eigenvalues: Tensor
    along_ones: float | None = None


def _reflected(lambdas: Tensor, h: Tensor, wiggle: float) -> Callable[[Tensor], Tensor]:
    """θ ↦ ½ Σ λ_i (Qθ)_i² + wiggle · Σ cos θ, Q = I − 2hhᵀ a reflection (dense, orthogonal, never built)."""
    def f(theta: Tensor) -> Tensor:
        turned = theta - 2 * h * (h * theta).sum()
        return 0.5 * (lambdas * turned**2).sum() + wiggle * torch.cos(theta).sum()
    return f


def _quadratic_case(gen: torch.Generator, shapes: dict[str, tuple[int, ...]], lambdas: list[float] | Tensor,
                    wiggle: float) -> Case:
    args = tuple(shapes)
    xs = [uniform(gen, shapes[a], -1.5, 1.5) for a in args]
    lambdas = torch.as_tensor(lambdas, dtype=torch.float64)
    h = torch.randn(lambdas.numel(), generator=gen, dtype=torch.float64)
    flat_f = _reflected(lambdas, h / h.norm(), wiggle)
    sizes = [x.numel() for x in xs]

    def f(*ts: Tensor) -> Tensor:
        return flat_f(torch.cat([t.reshape(-1) for t in ts]))

    if lambdas.numel() <= 100:
        eigenvalues = torch.linalg.eigvalsh(full_hessian(flat_f, torch.cat([x.reshape(-1) for x in xs])))
    elif wiggle == 0:  # the reflection keeps the spectrum: exactly the λ
        eigenvalues = lambdas.sort().values
    else:
        raise CourseBug("a large case must be a pure quadratic")
    cos = f" + {wiggle:g} Σ cos θ" if wiggle else ""
    name = (f"½ Σ λ_i (Qθ)_i²{cos}, θ = ({', '.join(args)}) flattened ({sum(sizes)} numbers), Q = I − 2hhᵀ a "
            "reflection")
    return Case(name, args, f, xs, eigenvalues)


def _gap_holds(eigenvalues: Tensor) -> bool:
    top, radius = float(eigenvalues[-1]), float(eigenvalues.abs().max())
    below = eigenvalues[eigenvalues < top - 1e-9 * max(radius, 1.0)]
    return below.numel() == 0 or top - float(below.max()) >= GAP * radius


def _multi_case(name: str, xs: list[Tensor]) -> Case:
    args, f = MULTI[name]
    eigenvalues = torch.linalg.eigvalsh(full_hessian(_on_flat(f, xs), _flat(xs)))
    return Case(name, args, f, xs, eigenvalues)


def _reflection_free_case() -> Case:
    """f(a, b) = 1.5 (a − b)² − (a + b)²: eigenvalues 6 along (1, −1) and −4 along (1, 1), the vector of ones."""
    def f(a: Tensor, b: Tensor) -> Tensor:
        return 1.5 * (a - b) ** 2 - (a + b) ** 2

    return Case("1.5 (a − b)**2 − (a + b)**2", ("a", "b"), f, [vector(0.3), vector(-0.7)], vector([-4.0, 6.0]),
                along_ones=-4.0)


def sharpness_cases(grading_seed: int | None) -> list[Case]:
    """The corners (every seed), in this order: the lesson's case for a matrix and a vector (the largest eigenvalue
    is the largest in size); a saddle, whose most negative eigenvalue is the largest in size; a bilinear f, λ = ±1
    (equal in size); an f linear in every tensor (H = 0); two 0-d tensors whose top eigenvector is orthogonal to the
    vector of ones (a start there never leaves −4); an f that ignores a matrix (zero rows and columns in H); a
    piecewise linear f (its gradient has a graph, and H = 0 all the same); a concave f (every eigenvalue negative);
    800 numbers in a matrix and a vector, a saddle again, where the full Hessian would be 640,000 entries; two steep
    saddles (λ from −900 to 120 and from −400 to 40), where a shift learned from a small spectrum, or a fixed one,
    is too small. Then three drawn: 2 or 3 tensors of 4 to 12 numbers in all, a saddle, a sharp minimum-like point or
    a concave one, and a fourth, a steep saddle with max |λ| from 100 to 1000; every spectrum with the gap the part
    promises."""
    fixed = torch.Generator().manual_seed(1011)
    big_lambdas = torch.cat([vector([-5.0, 2.0]), uniform(fixed, (798,), -4.5, 1.0)])
    corners = [
        _quadratic_case(fixed, {"W": (2, 3), "b": (3,)}, [4.0, 2.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0], 0.1),
        _quadratic_case(fixed, {"W": (2, 2), "s": ()}, [1.5, 0.6, 0.1, -0.8, -4.0], 0.1),
        _multi_case(BILINEAR, [vector([0.4, -1.1, 0.9]), vector([1.3, 0.2, -0.7])]),
        _multi_case(ALL_LINEAR, [vector([0.1, -0.2, 0.3]), uniform(fixed, (2, 2), -1.0, 1.0)]),
        _reflection_free_case(),
        _multi_case(IGNORES_W, [vector([0.8, -0.4, 1.1]), uniform(fixed, (2, 2), -1.0, 1.0)]),
        Case("sum(abs(u)) − 2 * sum(relu(w))", ("u", "w"),
             lambda u, w: u.abs().sum() - 2 * torch.relu(w).sum(), [vector([0.5, -1.2]), vector([0.7, -0.3, 1.4])],
             torch.zeros(5, dtype=torch.float64)),
        _quadratic_case(fixed, {"x": (3,)}, [-0.5, -1.5, -3.0], 0.0),
        _quadratic_case(fixed, {"W": (20, 30), "u": (200,)}, big_lambdas, 0.0),
        _quadratic_case(fixed, {"W": (3, 4), "b": (4,)},
                        torch.cat([vector([120.0, -900.0]), uniform(fixed, (14,), -880.0, -80.0)]), 0.5),
        _quadratic_case(fixed, {"u": (5,), "s": ()},
                        torch.cat([vector([40.0, -400.0]), uniform(fixed, (4,), -390.0, -60.0)]), 0.2),
    ]
    gen = case_stream("10/sharpness", grading_seed)
    drawn: list[Case] = []
    while len(drawn) < 3:
        m = randint(gen, 2, 3)
        sizes = [randint(gen, 1, 4) for _ in range(m)]
        shapes = {name: ((size,) if i % 2 else (2, size)) for i, (name, size) in enumerate(zip("WbU", sizes))}
        n = sum(math.prod(s) for s in shapes.values())
        radius = float(uniform(gen, (), 1.0, 5.0))
        kind = choice(gen, ["saddle", "sharp", "concave"])
        share = float(uniform(gen, (), 0.1, 0.7))
        top, bottom = {"saddle": (share, -1.0), "sharp": (1.0, -share), "concave": (-share / 3, -1.0)}[kind]
        rest = uniform(gen, (n - 2,), bottom, top - 0.3)
        lambdas = radius * torch.cat([vector([top, bottom]), rest])
        case = _quadratic_case(gen, shapes, lambdas, 0.05 * radius)
        if _gap_holds(case.eigenvalues):
            drawn.append(case)
    while len(drawn) < 4:  # a steep saddle: λmin = −radius, far below −(λmax + STEEP)
        sizes = [randint(gen, 2, 6), randint(gen, 2, 6)]
        shapes = {"W": (2, sizes[0]), "b": (sizes[1],)}
        n = 2 * sizes[0] + sizes[1]
        radius = float(uniform(gen, (), 100.0, 1000.0))
        share = float(uniform(gen, (), 0.05, 0.5))
        rest = uniform(gen, (n - 2,), -1.0, share - 0.3)
        case = _quadratic_case(gen, shapes, radius * torch.cat([vector([share, -1.0]), rest]), 0.01 * radius)
        if _gap_holds(case.eigenvalues) and float(case.eigenvalues[0]) < -(float(case.eigenvalues[-1]) + STEEP):
            drawn.append(case)
    for case in corners:
        if not _gap_holds(case.eigenvalues):
            raise CourseBug(f"the corner {case.name} breaks the part's promise of a gap")
    return corners + drawn


def _number(answer, what: str) -> float:
    __tracebackhide__ = True
    if isinstance(answer, Tensor) and answer.requires_grad:
        raise GradingFailure(f"{what} returned a tensor with requires_grad=True; expected a plain number.")
    if isinstance(answer, bool) or not isinstance(answer, (int, float, Tensor)) or (
            isinstance(answer, Tensor) and (type(answer) is not Tensor or answer.numel() != 1)):
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a float, one "
                             "eigenvalue.")
    return float(answer)


def _run_sharpness(sharpness, case: Case) -> None:
    __tracebackhide__ = True
    f = Watched(case.f, *case.xs)
    n = sum(x.numel() for x in case.xs)
    shapes = ", ".join(f"{a} {tuple(x.shape)}" for a, x in zip(case.args, case.xs))
    what = f"sharpness(f, xs) for f({', '.join(case.args)}) = {case.name}, at xs of shapes {shapes}"
    routes, largest = Routes(), LargestTensor() if n > 100 else None
    try:
        if largest is None:
            answer = call_learner(sharpness, f, case.xs, what=what, routes=routes)
        else:
            with largest:
                answer = call_learner(sharpness, f, case.xs, what=what, routes=routes)
    except GradingFailure as failure:
        raise not_required(failure, routes, constant=case.name == ALL_LINEAR) from None
    if f.transformed:  # dual numbers of torch.autograd.forward_ad (forward-over-reverse) are allowed, as in A.1
        raise _proven(f"{what} ran f under a torch.func transform.", TORCH_FUNC_HVP)
    if f.elsewhere:
        raise _proven(f"{what} evaluated f at {f.elsewhere} point(s) other than xs.", FINITE_DIFFERENCES)
    if largest is not None and largest.numel >= n * n:
        raise _proven(f"{what} made a tensor of shape {largest.shape} ({largest.numel:,} entries) for {n} numbers: "
                      f"an {n} × {n} matrix, which H·v products never need.", BUILT_MATRIX)
    if routes.backward_runs > BUDGET:
        raise GradingFailure(f"{what} ran {routes.backward_runs} backward passes; the part allows {BUDGET}.")
    value = _number(answer, what)
    eigenvalues = case.eigenvalues
    top, bottom = float(eigenvalues[-1]), float(eigenvalues[0])
    radius = max(abs(top), abs(bottom))
    if math.isnan(value) and radius == 0:
        raise _proven(f"{what} returned nan; f is linear here, H = 0 and every H·v is a zero vector.",
                      ZERO_NORMALISED)
    # λmin at a steep saddle: a shift too small for it (one value names one mistake; with no shift at all the
    # earlier, small saddles fail first and name the lesson's loop)
    found_bottom = SHIFT_TOO_SMALL if bottom < -(top + STEEP) else LARGEST_MAGNITUDE
    symptoms = [found_bottom.looks_like(bottom), SPECTRAL_RADIUS.looks_like(radius),
                SHIFT_KEPT.looks_like(top + radius), SHIFT_KEPT.looks_like(top - bottom),
                SHIFT_KEPT.looks_like(top + 2 * radius)]
    second = eigenvalues[eigenvalues < top - 1e-9 * max(radius, 1.0)]
    extra = (f"  (the Hessian's {n} eigenvalues here run from {fmt(bottom)} to {fmt(top)}"
             + (f"; the next below the largest: {fmt(float(second.max()))}" if second.numel() else "") + "; tolerance "
             f"1e-6 · max |λ|; {routes.backward_runs} backward passes ran)")
    try:
        expect_close(value, top, what=what, source="eigvalsh of the full Hessian", rtol=0,
                     atol=1e-6 * radius + 1e-9, extra=extra, symptoms=symptoms)
    except GradingFailure as failure:  # a start along (1, 1) stays there: its -4, or 0/0 once shifted by 4
        if case.along_ones is not None and (math.isnan(value) or abs(value - case.along_ones) <= 1e-6 * radius):
            raise GradingFailure(failure.message, proven=FIXED_START) from None
        raise


@check
def check_sharpness(sharpness, grading_seed: int | None = None) -> None:
    """Part A.2: sharpness(f, xs) is λmax, the largest eigenvalue (with its sign) of the Hessian of f at xs, over all
    the tensors together.

    Domain: ``f`` a smooth scalar function of m >= 1 float64 tensors (vectors, matrices, 0-d), ``xs`` the tensors
    (requires_grad False); the Hessian's eigenvalues of any signs: the one of largest size may be negative, or equal in
    size to λmax, H may be 0 (then 0); λmax lies at least 0.2 · max|λ| above every smaller eigenvalue (copies of λmax
    allowed). Corners at every seed: the lesson's case, a saddle, λ = ±1, H = 0, a top eigenvector orthogonal to the
    vector of ones, a concave f, n = 800, steep saddles (λmin < −(λmax + 20), max |λ| up to 1000: no fixed shift
    passes both these and the small spectra). Contract: H·v products only (never an n × n matrix, watched at
    n = 800); at most 600 backward passes; f evaluated at xs only; no torch.func (forward-over-reverse with
    torch.autograd.forward_ad allowed); xs unchanged; a number within 1e-6 · max|λ| of
    λmax (eigvalsh of the full Hessian, or the exact spectrum the function was built with).
    """
    __tracebackhide__ = True
    for case in sharpness_cases(grading_seed):
        with trial():
            _run_sharpness(sharpness, case)
