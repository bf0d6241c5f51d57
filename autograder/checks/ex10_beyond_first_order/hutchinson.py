"""Part B: Hutchinson's estimate of the Hessian's diagonal: ``rademacher_probes`` (fair, independent random signs from
the caller's generator) and ``hessian_diagonal`` (one H·z per probe)."""

from __future__ import annotations

import itertools

import torch

from ...checking import GradingFailure, Routes, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...seeding import choice, uniform
from ..cases import case_stream, randint
from .hvp import DRAWN, FUNCTIONS, LINEAR_1D, SEPARABLE, Watched, full_hessian, not_required, tensor_like, vector
from .misconceptions import (
    DIVIDED_BY_DIMENSION,
    FINITE_DIFFERENCES,
    FORGOT_PROBE,
    FULL_HESSIAN,
    NO_GRAPH,
    NOT_AVERAGED,
    NOT_FROM_GENERATOR,
    PROBES_NOT_SIGNS,
    TORCH_FUNC_HVP,
    TRACE_ESTIMATE,
)

Tensor = torch.Tensor

def _probe_cases(grading_seed: int | None) -> list[tuple[int, int]]:
    """(count, n): the corners (one probe of one entry, one probe, one entry), two drawn shapes, and a large draw
    whose statistics show fair, independent signs."""
    gen = case_stream("10/probes", grading_seed)
    drawn = [(3, 5), (6, 4)] if grading_seed is None else [(randint(gen, 2, 8), randint(gen, 3, 8)) for _ in range(2)]
    return [(1, 1), (1, 6), (5, 1), *drawn, (2000, 5)]


def _draw_probes(rademacher_probes, count: int, n: int, gen: torch.Generator, global_seed: int, what: str):
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)
        return call_learner(rademacher_probes, count, n, gen, what=what)


def _signs(answer, count: int, n: int, what: str) -> Tensor:
    __tracebackhide__ = True
    if not isinstance(answer, Tensor) or type(answer) is not Tensor:
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a float64 tensor "
                             f"of shape {(count, n)}.")
    if tuple(answer.shape) != (count, n):
        raise GradingFailure(f"{what} returned shape {tuple(answer.shape)}; expected {(count, n)}: one row per probe, "
                             "one column per entry of x.")
    values = answer.detach().double()
    if not bool(torch.isfinite(values).all()) or not bool((values.abs() == 1).all()):
        seen = sorted({float(v) for v in values.reshape(-1)[:2000].tolist()})
        listing = ", ".join(fmt(v) for v in seen[:5]) + (", ..." if len(seen) > 5 else "")
        kind = f"the values {listing}; a probe's entries are −1 and +1 only"
        raise _proven(f"{what} returned {kind}.", PROBES_NOT_SIGNS)
    if answer.dtype != torch.float64:
        raise GradingFailure(f"{what} returned signs of dtype {answer.dtype}; expected float64, like every tensor in "
                             "this exercise.")
    if answer.requires_grad:
        raise GradingFailure(f"{what} returned probes that require grad; probes are data, not parameters.")
    return values


def _fairness(z: Tensor, what: str) -> None:
    """A large draw: signs fair overall and per column, neighbours uncorrelated (bounds of 6 to 10 standard errors,
    so a correct answer passes at every seed)."""
    __tracebackhide__ = True
    count = z.shape[0]
    share = float((z > 0).double().mean())
    columns = z.mean(dim=0)
    across = (z[:, :-1] * z[:, 1:]).mean(dim=0)
    down = (z[:-1] * z[1:]).mean(dim=0)
    problems = []
    if abs(share - 0.5) > 0.05:
        problems.append(f"{share:.1%} of the entries are +1 (fair signs: 50% ± 5%)")
    if float(columns.abs().max()) > 0.2:
        problems.append(f"a column averages {fmt(columns[columns.abs().argmax()])} (fair: 0 ± 0.2)")
    if float(across.abs().max()) > 0.15 or float(down.abs().max()) > 0.15:
        problems.append(f"neighbouring entries agree on average by {fmt(max(across.abs().max(), down.abs().max()))} "
                        "(independent signs: 0 ± 0.15)")
    if problems:
        raise GradingFailure(f"{what}: {count} probes are not independent fair signs: {'; '.join(problems)}.")


def _run_probes(rademacher_probes, count: int, n: int, gen_seed: int) -> None:
    __tracebackhide__ = True
    what = f"rademacher_probes({count}, {n}, generator)"
    gen = torch.Generator().manual_seed(gen_seed)
    before = gen.get_state()
    z = _signs(_draw_probes(rademacher_probes, count, n, gen, 1, what), count, n, what)
    advanced = not torch.equal(gen.get_state(), before)
    again = _signs(_draw_probes(rademacher_probes, count, n, torch.Generator().manual_seed(gen_seed), 2, what),
                   count, n, what)
    if not torch.equal(z, again):
        raise _proven(f"{what} returned different probes for two generators in the same state (the global random "
                      "state was different).", NOT_FROM_GENERATOR)
    if not advanced:
        raise _proven(f"{what} returned probes, but the generator it was given is still in the state it came in: "
                      "nothing was drawn from it, so the next call would return the same probes.",
                      NOT_FROM_GENERATOR)
    if count * n >= 24:  # two fair draws agree with probability 2**-24: only a fixed draw does
        other = _signs(_draw_probes(rademacher_probes, count, n, torch.Generator().manual_seed(gen_seed + 1), 1,
                                    what), count, n, what)
        if torch.equal(z, other):
            raise _proven(f"{what} returned the same probes for two generators seeded differently.",
                          NOT_FROM_GENERATOR)
        following = _signs(_draw_probes(rademacher_probes, count, n, gen, 1, what), count, n, what)
        if torch.equal(z, following):
            raise _proven(f"{what} returned the same probes on two calls in a row with one generator (it should "
                          "have moved on).", NOT_FROM_GENERATOR)
    if count >= 1000:
        _fairness(z, what)


@check
def check_rademacher_probes(rademacher_probes, grading_seed: int | None = None) -> None:
    """Part B: rademacher_probes(count, n, generator) draws a (count, n) float64 tensor of independent fair signs ±1.

    Domain: integers count >= 1 and n >= 1 (count = 0 is outside the part), a torch.Generator. Corners at every
    seed: (1, 1), (1, 6), (5, 1); a draw of 2000 x 5 for the statistics. Contract: exactly the shape (count, n),
    float64, every entry -1 or +1; drawn from ``generator`` itself: it advances (its state after the call differs;
    two calls in a row give two draws), the same state gives the same probes whatever the global random state, two
    seeds give two draws; fair and independent (share of +1, column means, neighbours' agreement, within 6 to 10
    standard errors).
    """
    __tracebackhide__ = True
    gen = case_stream("10/probe-seeds", grading_seed)
    for count, n in _probe_cases(grading_seed):
        with trial():
            _run_probes(rademacher_probes, count, n, randint(gen, 0, 10**9))


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
        raise _proven(f"{what} ran {runs} backward passes for x of {n} elements and {probes_text}; two per probe "
                      "are enough.", FULL_HESSIAN)
    if runs > 2 * count:
        raise GradingFailure(f"{what} ran {runs} backward passes for {probes_text}; one H·z per probe needs at "
                             "most two.")
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


@check
def check_hessian_diagonal(hessian_diagonal, grading_seed: int | None = None) -> None:
    """Part B: hessian_diagonal(f, x, probes) is Hutchinson's estimate: the mean over the rows z of probes of
    z ⊙ (H(x)·z).

    Domain: ``f`` a smooth scalar function of a 1-D float64 ``x`` of n >= 1 elements, possibly linear (H = 0);
    ``probes`` a (k, n) float64 tensor of ±1, k >= 1. Corners at every seed: all 2^n sign vectors (the estimate
    equals diag(H) exactly), k = 1, a diagonal Hessian, n = 1, k = 2 for n = 8, a linear f (zeros). Contract: H·z by
    double backward (at most two passes per probe; the full Hessian named when its n + 1 passes show); f evaluated
    at x only; no torch.func; x and probes unchanged; a float64 tensor of x's shape without a graph; zeros for a
    linear f.
    """
    __tracebackhide__ = True
    for name, x, probes in _diagonal_cases(grading_seed):
        with trial():
            _run_diagonal(hessian_diagonal, name, x, probes)
