"""Part B.1, second half: ``exact_probes(n, bandwidth)``, the fewest probes for which Hutchinson's mean of z ⊙ Hz is
the diagonal exactly, for every Hessian whose entries vanish more than ``bandwidth`` places off the diagonal."""

from __future__ import annotations

import math

import torch

from ...checking import GradingFailure, call_learner, check, fmt, trial
from ...checking import proven_failure as _proven
from ..cases import case_stream, randint
from .misconceptions import (
    BAND_OFF_BY_ONE,
    EVERY_ELEMENT,
    INDICATORS_UNSCALED,
    RANDOM_PROBES,
    SIGNS_ONLY,
    WASTED_PROBES,
)

Tensor = torch.Tensor

#: Smaller than this and the probes' products count as exact (float64, entries of order one).
EXACT = 1e-9


def fewest(n: int, bandwidth: int) -> int:
    """w + 1 consecutive columns must be orthogonal to each other and of mean square 1: no fewer than min(n, w + 1)
    rows, and period-(w + 1) scaled indicators reach it."""
    return min(n, bandwidth + 1)


def _fewest_signs(n: int, bandwidth: int) -> int:
    """With ±1 entries: min(n, w + 1) mutually orthogonal sign vectors need a length of 1, 2 or a multiple of 4 (a
    power of two here: bandwidths up to 6)."""
    need = fewest(n, bandwidth)
    return need if need <= 2 else 4 * math.ceil(need / 4)


def _banded_hessian(gen: torch.Generator, n: int, bandwidth: int) -> Tensor:
    """A random symmetric Hessian with entries of order one within the band and exact zeros outside it."""
    raw = torch.rand(n, n, generator=gen, dtype=torch.float64) * 2 - 1
    band = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs() <= bandwidth
    return torch.where(band, raw + raw.T, torch.zeros((), dtype=torch.float64))


def probing_cases(grading_seed: int | None) -> list[tuple[int, int]]:
    """(n, bandwidth). The corners (every seed), in this order: a diagonal Hessian (w = 0); w = 1; w = 2 (real
    entries need 3 rows, signs 4); n = 1; n smaller than w + 1 (every element its own probe: k = n); n = w + 1; a
    long x with w = 5 (6 rows against 8 for signs). Then three drawn: n from 4 to 30, w from 1 to 6, below n."""
    corners = [(5, 0), (6, 1), (7, 2), (1, 0), (3, 5), (4, 3), (40, 5)]
    gen = case_stream("10/probing", grading_seed)
    drawn = []
    for _ in range(3):
        n = randint(gen, 4, 30)
        drawn.append((n, randint(gen, 1, min(6, n - 1))))
    return corners + drawn


def _probes(answer, n: int, what: str) -> Tensor:
    __tracebackhide__ = True
    if not isinstance(answer, Tensor) or type(answer) is not Tensor:
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a tensor of shape "
                             f"(k, {n}), one probe per row.")
    if answer.requires_grad:
        raise GradingFailure(f"{what} returned a tensor with requires_grad=True; probes are plain numbers.")
    if answer.dtype != torch.float64:
        raise GradingFailure(f"{what} returned a tensor of dtype {answer.dtype}; expected torch.float64.")
    if answer.dim() != 2 or answer.shape[1] != n or answer.shape[0] < 1:
        raise GradingFailure(f"{what} returned shape {tuple(answer.shape)}; expected (k, {n}) with k >= 1, one probe "
                             "of n entries per row.")
    if not bool(torch.isfinite(answer).all()):
        raise GradingFailure(f"{what} returned probes with entries that are not finite.")
    return answer.detach().clone()


def _run_probing(exact_probes, n: int, bandwidth: int, gen: torch.Generator) -> None:
    __tracebackhide__ = True
    what = f"exact_probes(n={n}, bandwidth={bandwidth})"
    probes = _probes(call_learner(exact_probes, n, bandwidth, what=what), n, what)
    k = probes.shape[0]
    pairs = probes.T @ probes / k  # entry (i, j): the mean over the probes of z_i z_j
    offset = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    inside = (offset <= bandwidth) & (offset > 0)
    diagonal_error = (pairs.diagonal() - 1).abs()
    cross_error = torch.where(inside, pairs.abs(), torch.zeros((), dtype=torch.float64))
    hessian = _banded_hessian(gen, n, bandwidth)
    estimate = (probes * (probes @ hessian)).mean(dim=0)
    error = (estimate - hessian.diagonal()).abs()
    measured = (f"  measured: on a random Hessian of bandwidth {bandwidth} (entries of order one), the mean of "
                f"z ⊙ Hz over your {k} probe{'s' * (k > 1)} misses its diagonal by up to {fmt(float(error.max()))}")
    signs = bool((probes.abs() == 1).all())
    if float(diagonal_error.max()) > EXACT or float(cross_error.max()) > EXACT:
        if float(diagonal_error.max()) > EXACT:
            i = int(diagonal_error.argmax())
            where = (f"the mean of z_{i}² over your probes is {fmt(float(pairs[i, i]))}, so the estimate of H_{i}{i} "
                     f"is that multiple of it")
        else:
            i, j = divmod(int(cross_error.argmax()), n)
            where = (f"the mean of z_{i} z_{j} over your probes is {fmt(float(pairs[i, j]))} although |{i} − {j}| = "
                     f"{abs(i - j)} <= {bandwidth}: H_{i}{j} leaks into the estimate of H_{i}{i}")
        message = (f"{what}: the estimate with these {k} probe{'s' * (k > 1)} is not exact for every Hessian of "
                   f"this bandwidth: {where}.")
        suspects = []
        if float(cross_error.max()) <= EXACT and bool(((probes == 0) | (probes == 1)).all()):
            suspects.append(INDICATORS_UNSCALED)
        elif signs and k > fewest(n, bandwidth) and not bool((probes == probes[0]).all()):
            suspects.append(RANDOM_PROBES)
        elif bandwidth > 0 and bool((cross_error[offset == bandwidth] > EXACT).any()) and bool(
                (cross_error[(offset < bandwidth) & (offset > 0)] <= EXACT).all()):
            suspects.append(BAND_OFF_BY_ONE)
        raise GradingFailure(message + "\n" + measured, suspects=tuple(suspects))
    need = fewest(n, bandwidth)
    if k > need:
        message = (f"{what} returned {k} probes, and they are exact (measured: off by at most "
                   f"{fmt(float(error.max()))}); exact probes for bandwidth {bandwidth} with fewer rows exist, and "
                   "each row is one more product H·z.")
        if bool((probes.abs().sum(dim=1) == 0).any()):
            raise _proven(message, WASTED_PROBES)
        if k == n and bool(((probes != 0).sum(dim=0) == 1).all()):
            raise _proven(message, EVERY_ELEMENT)
        if signs and k == _fewest_signs(n, bandwidth):
            raise _proven(message, SIGNS_ONLY)
        if signs and k > max(_fewest_signs(n, bandwidth), n):  # more sign rows than elements: no design in them
            raise _proven(message, RANDOM_PROBES)
        raise GradingFailure(message)


@check
def check_exact_probes(exact_probes, grading_seed: int | None = None) -> None:
    """Part B.1: exact_probes(n, bandwidth) returns a (k, n) float64 tensor of probes, k the fewest possible, whose
    mean of z ⊙ Hz is diag(H) exactly for every symmetric H with H_ij = 0 when |i − j| > bandwidth.

    Domain: ``n`` >= 1 and ``bandwidth`` >= 0 integers, bandwidth up to 6 (n may be smaller than bandwidth + 1).
    Exact means: the mean over the probes of z_i² is 1 for every i, and of z_i z_j is 0 for 0 < |i − j| <= bandwidth
    (to 1e-9); then the estimate is exact for every such Hessian (measured on a random one and shown). Fewest: k =
    min(n, bandwidth + 1), since bandwidth + 1 neighbouring columns must be orthogonal. Corners at every seed: w = 0,
    w = 1, w = 2 (signs need 4 rows), n = 1, n < w + 1, n = w + 1, n = 40 with w = 5. Contract: a float64 tensor of
    shape (k, n) without a graph, finite entries (any real numbers, not only ±1).
    """
    __tracebackhide__ = True
    gen = case_stream("10/probing-measured", grading_seed)
    for n, bandwidth in probing_cases(grading_seed):
        with trial():
            _run_probing(exact_probes, n, bandwidth, gen)
