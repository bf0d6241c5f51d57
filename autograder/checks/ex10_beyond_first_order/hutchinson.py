"""Part B.1: Hutchinson's estimate of the Hessian's diagonal, ``hessian_diagonal`` (all the probes' H·z in one batched
backward pass); Part B.2: ``probes_needed``, how many probes a given accuracy costs."""

from __future__ import annotations

import itertools
import math

import torch

from ...checking import CourseBug, GradingFailure, Routes, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...seeding import choice, uniform
from ..cases import case_stream, randint
from .hvp import DRAWN, FUNCTIONS, LINEAR_1D, SEPARABLE, Watched, full_hessian, not_required, tensor_like, vector
from .misconceptions import (
    DIVIDED_BY_DIMENSION,
    ERROR_AS_ONE_OVER_K,
    ERROR_NOT_SQUARED,
    FINITE_DIFFERENCES,
    FORGOT_PROBE,
    FULL_HESSIAN,
    GAUSSIAN_VARIANCE,
    NO_GRAPH,
    NO_PROBE_FOR_DIAGONAL,
    NOISE_WITH_DIAGONAL,
    NOT_AVERAGED,
    PAIRS_ONCE,
    PASS_PER_PROBE,
    PER_ENTRY_ERROR,
    PROBES_BELOW_ONE,
    ROUNDED_TO_NEAREST,
    TORCH_FUNC_HVP,
    TRACE_ESTIMATE,
)

Tensor = torch.Tensor

def _all_signs(n: int) -> Tensor:
    return torch.tensor(list(itertools.product([-1.0, 1.0], repeat=n)), dtype=torch.float64)


def _random_signs(gen: torch.Generator, count: int, n: int) -> Tensor:
    return torch.randint(0, 2, (count, n), generator=gen).double() * 2 - 1


def _diagonal_cases(grading_seed: int | None) -> list[tuple[str, Tensor, Tensor]]:
    """The corners (every seed): all 2^3 sign vectors (the estimate IS the diagonal); one probe; a separable f (a
    diagonal Hessian: exact with any probes); one element; two probes for eight elements (the full Hessian's nine
    passes show); a linear f (H = 0: zeros). Then three drawn functions, 4 to 7 elements, 2 to 5 probes (never as
    many probes as elements)."""
    fixed = torch.Generator().manual_seed(10)
    corners = [
        ("sum(tanh(x))**2", vector([0.3, -0.8, 1.1]), _all_signs(3)),
        ("sum(x**4)/4 + sum(x[:-1] * x[1:])", vector([0.5, -1.0, 1.2, 0.0, -0.4]), _random_signs(fixed, 1, 5)),
        (SEPARABLE, vector([-1.3, 0.2, 0.9, -0.1]), _random_signs(fixed, 2, 4)),
        ("log(1 + sum(x**2))", vector([0.6]), vector([[1.0], [-1.0], [1.0]])),
        ("sum(exp(x / 2)) * sum(sin(x))", uniform(fixed, (8,), -1.5, 1.5), _random_signs(fixed, 2, 8)),
        (LINEAR_1D, vector([0.4, -0.9, 1.3]), _random_signs(fixed, 2, 3)),
    ]
    gen = case_stream("10/diagonal", grading_seed)
    drawn = []
    for _ in range(3):
        name = choice(gen, DRAWN)
        n = 4 if grading_seed is None else randint(gen, 4, 7)
        count = 3 if grading_seed is None else randint(gen, 2, 5)
        count = count if count != n else count - 1
        drawn.append((name, uniform(gen, (n,), -1.5, 1.5), _random_signs(gen, count, n)))
    return corners + drawn


def _run_diagonal(hessian_diagonal, name: str, x: Tensor, probes: Tensor) -> None:
    __tracebackhide__ = True
    f = Watched(FUNCTIONS[name], x)
    count, n = probes.shape
    probes_text = f"{count} probe{'s' * (count > 1)}"
    what = f"hessian_diagonal(f, x, probes) for f(x) = {name}, x = {fmt(x)} and {probes_text}"
    routes = Routes()
    try:
        answer = call_learner(hessian_diagonal, f, x, probes, what=what, routes=routes)
    except GradingFailure as failure:
        raise not_required(failure, routes, constant=name == LINEAR_1D) from None
    runs = routes.backward_runs
    if f.transformed or routes.forward_ad:
        raise _proven(f"{what} ran f under a torch.func transform.", TORCH_FUNC_HVP)
    if f.elsewhere:
        raise _proven(f"{what} evaluated f at {f.elsewhere} point(s) other than x.", FINITE_DIFFERENCES)
    if runs >= n + 1 and n + 1 > 2 * count:  # more than two per probe: only the full Hessian's n + 1 reach it
        raise _proven(f"{what} ran {runs} backward passes for x of {n} elements and {probes_text}; two in all are "
                      "enough.", FULL_HESSIAN)
    hessian = full_hessian(FUNCTIONS[name], x)
    products = probes @ hessian  # row k: (H z_k)ᵀ, H symmetric
    estimates = probes * products
    expected = estimates.mean(dim=0)
    if n > 1 and isinstance(answer, Tensor) and answer.dim() == 0 and not answer.requires_grad:  # n = 1: trace = diag
        trace = float((probes * products).sum(dim=1).mean())
        if abs(float(answer) - trace) <= 1e-6 * (1 + abs(trace)):
            raise GradingFailure(f"{what} returned one number, {fmt(answer)}, the mean of zᵀHz; expected the "
                                 f"{n} entries {fmt(expected)}.", suspects=(TRACE_ESTIMATE,))
    answer = tensor_like(answer, x, what)
    expect_close(answer, expected, what=what, source="mean of z ⊙ Hz", rtol=1e-6, atol=1e-9,
                 extra=f"  (the exact diagonal of H here: {fmt(hessian.diagonal())})",
                 symptoms=[NO_GRAPH.looks_like(torch.zeros_like(x)), NOT_AVERAGED.looks_like(estimates.sum(dim=0)),
                           DIVIDED_BY_DIMENSION.looks_like(estimates.sum(dim=0) / n),
                           FULL_HESSIAN.looks_like(hessian.diagonal()),
                           FORGOT_PROBE.looks_like(products.mean(dim=0))])
    if runs > 2:  # the values are right: the route is not
        per_probe = runs in (count + 1, 2 * count)  # one shared first gradient, or Part A's hvp, per probe
        message = (f"{what} returned the right estimate but ran {runs} backward passes for {probes_text}; the part "
                   "asks for at most two whatever the number of probes (one first gradient, one pass for them all).")
        raise _proven(message, PASS_PER_PROBE) if per_probe else GradingFailure(message)


@check
def check_hessian_diagonal(hessian_diagonal, grading_seed: int | None = None) -> None:
    """Part B.1: hessian_diagonal(f, x, probes) is Hutchinson's estimate: the mean over the rows z of probes of
    z ⊙ (H(x)·z).

    Domain: ``f`` a smooth scalar function of a 1-D float64 ``x`` of n >= 1 elements, possibly linear (H = 0);
    ``probes`` a (k, n) float64 tensor of ±1, k >= 1. Corners at every seed: all 2^n sign vectors (the estimate
    equals diag(H) exactly), k = 1, a diagonal Hessian, n = 1, k = 2 for n = 8, a linear f (zeros). Contract: the
    products H·z by double backward, all k in one batched pass (at most two backward passes in all, whatever k: the
    full Hessian named when its n + 1 passes show, a pass per probe when k + 1 or 2k show); f evaluated
    at x only; no torch.func; x and probes unchanged; a float64 tensor of x's shape without a graph; zeros for a
    linear f.
    """
    __tracebackhide__ = True
    for name, x, probes in _diagonal_cases(grading_seed):
        with trial():
            _run_diagonal(hessian_diagonal, name, x, probes)


# ------------------------------------------------------------------------------------- B.2: how many probes

#: The error targets a drawn case takes one of (round numbers a learner would ask for).
TARGETS = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05)


def _noise(hessian: Tensor) -> tuple[float, float, Tensor]:
    """(S, D, per-entry noise): S = Σ_{i≠j} H_ij², the expected squared error of one probe's z ⊙ Hz; D = ‖diag H‖²;
    the per-entry terms Σ_{j≠i} H_ij²."""
    squares = hessian**2
    per_entry = squares.sum(dim=1) - hessian.diagonal() ** 2
    return float(per_entry.sum()), float((hessian.diagonal() ** 2).sum()), per_entry


def _smallest_k(ratio: float) -> int:
    return max(1, math.ceil(ratio))


def probes_for(hessian: Tensor, rel_error: float) -> int:
    """The smallest k with E‖d̂_k − diag H‖² = S / k at most rel_error² ‖diag H‖²."""
    s, d, _ = _noise(hessian)
    return _smallest_k(s / (rel_error**2 * d))


def measured_error(hessian: Tensor, k: int, gen: torch.Generator, draws: int = 20_000) -> float:
    """The RMS relative error of the k-probe estimate, measured: ``draws`` single Rademacher probes give the mean
    squared error of one probe, and the mean of k independent probes has 1/k of it."""
    n = hessian.shape[0]
    z = _random_signs(gen, draws, n)
    errors = (z * (z @ hessian) - hessian.diagonal()).pow(2).sum(dim=1).mean()
    return math.sqrt(float(errors) / k) / float(hessian.diagonal().norm())


def _near_whole(ratio: float) -> bool:
    return abs(ratio - round(ratio)) <= 1e-6 * max(1.0, ratio)


def _probes_cases(grading_seed: int | None) -> list[tuple[str, Tensor, float]]:
    """(function, x, rel_error). The corners (every seed): a separable f (a diagonal Hessian: one probe is exact, for
    any target); n = 1; a target of 1 that one probe already meets though H is not diagonal; 691 probes for 5 %;
    three bounds just above a whole number (2.46, 50.4 and 26.2 probes: rounding to the nearest falls short).
    Then three drawn functions, points and round targets for which 3 to 400 probes are needed, never within 1e-6 of
    a whole number."""
    corners = [
        (SEPARABLE, vector([-1.3, 0.2, 0.9, -0.1]), 0.1),
        ("log(1 + sum(x**2))", vector([0.6]), 0.05),
        ("sum(exp(x / 2)) * sum(sin(x))", vector([1.0, 2.0, 3.0]), 1.0),
        ("log(1 + sum(x**2))", vector([1.0, 2.0, 3.0]), 0.05),
        ("log(1 + sum(x**2))", vector([0.5, -1.0, 1.5, 0.25]), 0.5),
        ("sum(x**4)/4 + sum(x[:-1] * x[1:])", vector([0.3, -0.2, 0.4]), 0.5),
        ("sum(tanh(x))**2", vector([0.3, -0.8, 1.1]), 0.2),
    ]
    gen = case_stream("10/probes-needed", grading_seed)
    drawn: list[tuple[str, Tensor, float]] = []
    while len(drawn) < 3:
        name = choice(gen, DRAWN)
        x = uniform(gen, (4 if grading_seed is None else randint(gen, 3, 7),), -1.5, 1.5)
        s, d, _ = _noise(full_hessian(FUNCTIONS[name], x))
        fits = [r for r in TARGETS if 3 <= s / (r * r * d) <= 400 and not _near_whole(s / (r * r * d))]
        if d > 1e-6 and fits:
            drawn.append((name, x, choice(gen, fits)))
    return corners + drawn


def _probes_symptoms(hessian: Tensor, rel_error: float) -> list:
    s, d, per_entry = _noise(hessian)
    r2 = rel_error**2
    ratio = s / (r2 * d)
    nonzero = hessian.diagonal() != 0
    per_entry_k = float((per_entry[nonzero] / (r2 * hessian.diagonal()[nonzero] ** 2)).max()) if bool(nonzero.any()) \
        else math.inf
    values = {NOISE_WITH_DIAGONAL: (s + d) / (r2 * d), GAUSSIAN_VARIANCE: (s + 2 * d) / (r2 * d),
              PAIRS_ONCE: s / 2 / (r2 * d), ERROR_NOT_SQUARED: s / (rel_error * d),
              ERROR_AS_ONE_OVER_K: math.sqrt(ratio), PER_ENTRY_ERROR: per_entry_k}
    symptoms = [mistake.looks_like(_smallest_k(value)) for mistake, value in values.items() if math.isfinite(value)]
    if ratio > 1:
        symptoms.append(ROUNDED_TO_NEAREST.looks_like(max(1, round(ratio))))
    return symptoms


def _whole_number(answer, what: str) -> int:
    """The learner's k: a Python int, or a float or 0-d tensor holding a whole number."""
    __tracebackhide__ = True
    if isinstance(answer, bool) or not isinstance(answer, (int, float, Tensor)) or (
            isinstance(answer, Tensor) and (type(answer) is not Tensor or answer.numel() != 1)):
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected an int, a number "
                             "of probes.")
    value = float(answer)
    if not math.isfinite(value) or value != math.floor(value):
        raise GradingFailure(f"{what} returned {fmt(value)}; a number of probes is a whole number.")
    return int(value)


def _run_probes_needed(probes_needed, name: str, x: Tensor, rel_error: float, gen: torch.Generator) -> None:
    __tracebackhide__ = True
    f = Watched(FUNCTIONS[name], x)
    what = f"probes_needed(f, x, rel_error={rel_error!r}) for f(x) = {name}, x = {fmt(x)}"
    answer = call_learner(probes_needed, f, x, rel_error, what=what)
    if f.elsewhere:
        raise GradingFailure(f"{what} evaluated f at {f.elsewhere} point(s) other than x; the Hessian at x is all "
                             "this part needs.")
    k = _whole_number(answer, what)
    hessian = full_hessian(FUNCTIONS[name], x)
    s, _, _ = _noise(hessian)
    if k < 1:
        raise _proven(f"{what} returned {k}; at least one probe is needed for an estimate at all (here the "
                      f"off-diagonal entries of H are {'all zero' if s == 0 else 'not all zero'}).",
                      NO_PROBE_FOR_DIAGONAL if s == 0 else PROBES_BELOW_ONE)
    expected = probes_for(hessian, rel_error)
    exact = math.sqrt(s / expected) / float(hessian.diagonal().norm())
    measured = measured_error(hessian, 1, gen)
    if abs(measured - math.sqrt(s) / float(hessian.diagonal().norm())) > 0.15 * measured + 1e-12:
        raise CourseBug(f"the measured error of one probe ({measured}) and the exact one disagree for {what}.")
    at_k, below = measured / math.sqrt(k), (measured / math.sqrt(k - 1) if k > 1 else math.inf)
    extra = (f"  measured at your k = {k}: RMS relative error {at_k:.4g} (20,000 drawn probes, the mean of k of "
             f"them has 1/k of one probe's mean squared error); at k − 1 = {k - 1}: "
             f"{'no estimate' if k == 1 else f'{below:.4g}'}; the target: {rel_error}; exact at the expected k "
             f"= {expected}: {exact:.4g}")
    expect_close(k, expected, what=what, source="expected", rtol=0, atol=0.25, extra=extra,
                 symptoms=_probes_symptoms(hessian, rel_error))


@check
def check_probes_needed(probes_needed, grading_seed: int | None = None) -> None:
    """Part B.2: probes_needed(f, x, rel_error) is the smallest k ≥ 1 for which the k-probe Hutchinson estimate has an
    RMS relative error √(E‖d̂_k − diag H‖²) / ‖diag H‖ of at most rel_error: k = max(1, ⌈S / (rel_error² ‖diag H‖²)⌉)
    with S = Σ_{i≠j} H_ij².

    Domain: ``f`` a smooth scalar function of a 1-D float64 ``x`` (n >= 1) with diag H(x) not all zero; ``rel_error``
    a float in (0, 1], the bound never within 1e-6 of a whole number of probes. Corners at every seed: a diagonal
    Hessian (k = 1), n = 1, a target one probe meets, hundreds of probes, bounds just above a whole number.
    Contract: a whole number (an int, or a float or 0-d tensor holding one), at least 1, equal to the expected k; f
    evaluated at x only; x unchanged. The exact expectation is checked against the test's own measurement (20,000
    drawn probes), which every failure shows at the learner's k.
    """
    __tracebackhide__ = True
    gen = case_stream("10/probes-measured", grading_seed)
    for name, x, rel_error in _probes_cases(grading_seed):
        with trial():
            _run_probes_needed(probes_needed, name, x, rel_error, gen)
