"""Part A: ``logsumexp(values)``, an operation the learner's exercise-02 engine does not have and lesson 11 never
shows: one node with many inputs, log Σ exp(v), stable for inputs in the thousands, whose backward the learner derives
(each input's share is its softmax weight), checked against autograd on the same numbers."""

from __future__ import annotations

import torch

from ...checking import GradingFailure, NotWritten, Route, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...oracles import autograd_gradient
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    GRAD_ASSIGNED,
    LSE_COMPOSED,
    LSE_NOT_NORMALISED,
    LSE_OVERFLOW,
    LSE_UPSTREAM_MISSING,
    MAX_ROUTE_COUNTED,
)
from .value_mlp import expect_value_class, is_value

Tensor = torch.Tensor


def _expected(xs: Tensor, pattern: list[int], c: float, d: float):
    """(log Σ exp over the list, the leaves' gradients of c·logsumexp(list) + d·leaf0, by autograd)."""
    (grad,) = autograd_gradient(lambda x: c * torch.logsumexp(x[pattern], 0) + d * x[0], xs)
    return torch.logsumexp(xs[pattern], 0), grad


def _variants(xs: Tensor, pattern: list[int], c: float, d: float) -> dict[str, list[Tensor]]:
    """What each catalogued mistake leaves in the leaves' .grad, for the same expression."""
    values = xs[pattern]
    weights = torch.softmax(values, 0)
    count = torch.zeros_like(xs).index_add_(0, torch.tensor(pattern), weights)   # Σ of each leaf's shares
    one = torch.zeros_like(xs).index_copy_(0, torch.tensor(pattern), weights)    # one share per leaf
    extra = torch.zeros_like(xs)
    extra[0] = d
    top = torch.zeros_like(xs)
    top[pattern[int(values.argmax())]] = c
    exps = torch.zeros_like(xs).index_add_(0, torch.tensor(pattern), torch.exp(values))
    return {"assigned": [c * one, c * one + extra], "upstream": [count + extra],
            "not normalised": [c * exps + extra], "max counted": [c * count + extra + top]}


def _run_logsumexp(Value, logsumexp, xs: Tensor, pattern: list[int], c: float, d: float, note: str) -> None:
    __tracebackhide__ = True
    listed = [round(float(xs[i]), 6) for i in pattern]
    what = f"logsumexp(values) for the Values {fmt(listed)}{note}"
    leaves = call_learner(lambda: [Value(float(x)) for x in xs], what=f"{what}: Value(x) for each x")
    values = [leaves[i] for i in pattern]
    try:
        out = call_learner(logsumexp, values, what=what, forbid=[Route.AUTOGRAD])
    except NotWritten:
        raise
    except GradingFailure as failure:
        if isinstance(failure.raised, OverflowError):
            raise _proven(f"{failure}", LSE_OVERFLOW) from None
        raise
    if not is_value(out):
        raise GradingFailure(f"{what} returned {out!r:.80}; expected one Value of your engine.")
    parents = getattr(out, "_prev", None)
    if parents is None:
        raise GradingFailure(f"{what}: the Value it returned has no _prev; your engine's nodes keep their inputs "
                             "there (exercise 02).")
    if {id(p) for p in parents} != {id(v) for v in values}:
        raise _proven(f"{what} returned a Value whose inputs (_prev) are {len(parents)} other nodes, not the "
                      f"{len({id(v) for v in values})} Values it was given: one node, built from the engine's other "
                      "operations, not a node of its own.", LSE_COMPOSED)
    data, grad = _expected(xs, pattern, c, d)
    if not torch.isfinite(torch.tensor(float(out.data))):
        raise _proven(f"{what}: its data is {out.data}; the inputs reach {max(listed):g}, where exp overflows in "
                      "float64.", LSE_OVERFLOW)
    expect_close(float(out.data), data, what=f"{what}: .data", source="expected", rtol=1e-12, atol=1e-12)
    total = call_learner(lambda: out * c + leaves[0] * d, what=f"{what}: out * {c:g} + values[0] * {d:g}")
    call_learner(total.backward, what=f"backward() of logsumexp(values) * {c:g} + values[0] * {d:g}{note}",
                 forbid=[Route.AUTOGRAD])
    variants = _variants(xs, pattern, c, d)
    mistakes = {"assigned": GRAD_ASSIGNED, "upstream": LSE_UPSTREAM_MISSING, "not normalised": LSE_NOT_NORMALISED,
                "max counted": MAX_ROUTE_COUNTED}
    expect_close(torch.tensor([float(v.grad) for v in leaves], dtype=torch.float64), grad,
                 what=f"the .grad of each distinct Value after backward() of logsumexp(values) * {c:g} + "
                      f"values[0] * {d:g}{note}",
                 symptoms=[mistakes[key].looks_like(value) for key, values_ in variants.items() for value in values_])


def _lse_cases(grading_seed: int | None) -> list[tuple[Tensor, list[int], float, float, str]]:
    """(distinct inputs, the list as indices into them, c, d, note): corners at every seed, then drawn lists."""
    gen = case_stream("11/logsumexp", grading_seed)
    f64 = dict(dtype=torch.float64)

    def coefficients():
        return float(uniform(gen, (), 1.5, 3.0)), float(uniform(gen, (), 0.5, 1.0))

    cases = [(torch.tensor([0.7], **f64), [0], *coefficients(), ", a single Value"),
             (torch.tensor([0.5, -1.0], **f64), [0, 1, 0], *coefficients(), ", the first Value listed twice"),
             (torch.tensor([1000.0, 999.0, -1000.0, 0.0], **f64), [0, 1, 2, 3], *coefficients(),
              ", inputs up to 1000"),
             (torch.tensor([-1000.0, 2.0, 1000.0], **f64), [0, 1, 2], *coefficients(),
              ", the largest input last, 2000 above the first"),
             (torch.tensor([-2.0, -2.0, -2.0], **f64), [0, 1, 2], *coefficients(), ", three equal inputs")]
    if grading_seed is None:
        return cases + [(torch.tensor([0.3, -1.2, 2.0, 0.9], **f64), [0, 1, 2, 3], 2.0, 0.5, "")]
    drawn = []
    for _ in range(2):
        size = randint(gen, 2, 6)
        xs = uniform(gen, (size,), -3.0, 3.0) + float(uniform(gen, (), -800.0, 800.0))
        drawn.append((xs, list(range(size)), *coefficients(), ""))
    return cases + drawn


@check
def check_logsumexp(Value, logsumexp, grading_seed: int | None = None) -> None:
    """Part A: logsumexp(values) returns one new node of the learner's engine, whose inputs (_prev) are the given
    Values, whose data is log Σ exp(v.data), stable for inputs in the thousands, and whose backward adds each input's
    share, exp(v − out)·out.grad, to its .grad.

    Domain (the part's text): values a non-empty list of Values of the learner's engine (a Value may be listed more
    than once), data of any size (|x| up to 1000 and beyond). Corners pinned at every seed: a single Value; a Value
    listed twice; inputs 1000, 999, -1000 and 0 (a naive exp overflows); -1000, 2, 1000 (a shift by the first or
    the mean overflows); three equal inputs. Hidden: lists of 2 to 6
    drawn around an offset up to ±800. Contracts checked: one Value whose _prev are exactly the given Values; its data
    against torch.logsumexp; after backward() of c·logsumexp(values) + d·values[0], every distinct Value's .grad
    against autograd (the upstream gradient, accumulation with another use and with a repeated Value); no autograd.
    """
    __tracebackhide__ = True
    expect_value_class(Value)
    for xs, pattern, c, d, note in _lse_cases(grading_seed):
        with trial():
            _run_logsumexp(Value, logsumexp, xs, pattern, c, d, note)
