"""Checks for exercise 01, the chain rule: central differences, the worked derivatives, a gradient checker.

Each ``check_*`` function is one test cell's whole body. Without ``seed`` it runs the public cases a learner sees;
the hidden test cells pass ``seed=grading_seed()`` and get fresh random cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..checking import (
    GradingFailure,
    Misconception,
    Route,
    Symptom,
    as_answer,
    call_learner,
    check,
    expect_close,
    fmt,
    trial,
)
from ..oracles import autograd_gradient, central_difference, forward_difference
from ..seeding import choice, generator, uniform

# Smooth scalar functions of a tensor, named as a learner would read them in a failure message.
TEST_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum(x**3)": lambda x: (x**3).sum(),
    "sum(sin(x) * x)": lambda x: (torch.sin(x) * x).sum(),
    "sum(exp(x / 2))": lambda x: torch.exp(x / 2).sum(),
    "sum(log(1 + x**2))": lambda x: torch.log1p(x**2).sum(),
    "sum(tanh(x))**2": lambda x: torch.tanh(x).sum() ** 2,
}

def hard_coded(visible_value: float) -> Misconception:
    return Misconception("hard-coded answer", "Your answer here is the one the visible test expects, but this "
                         "input is different: compute the result from the arguments.", value=visible_value)


STEP_HINT = "Use (f(x + h) - f(x - h)) / (2h) for every element, with x converted to float64 first."

FORWARD_DIFFERENCE = Misconception(
    "forward difference", "Your numbers match (f(x + h) - f(x)) / h, whose error shrinks only like h. " + STEP_HINT)
SIGN_ERROR = Misconception("sign error", "Your numbers are the negative of the derivative: subtract f(x - h) from "
                           "f(x + h), not the other way round.")
DIVIDED_BY_H = Misconception("divided by h instead of 2h", "Your numbers are twice the derivative: the two points "
                             "x - h and x + h are 2h apart.")
HALF_STEP = Misconception("half the step", "Your numbers are half the derivative: divide by 2h, not 4h.")
ROUND_OFF = Misconception(
    "round-off in float32",
    "Your function is right for float64 inputs but not for float32 ones. In float32, x + 1e-6 is rounded to about "
    "7 significant digits, so f(x + h) - f(x - h) is mostly rounding noise and dividing by a tiny 2h magnifies it. "
    "Convert x to float64 before stepping (x.to(torch.float64)).")


def _difference_symptoms(f, x: torch.Tensor, h: float, expected: torch.Tensor) -> list[Symptom]:
    symptoms = [FORWARD_DIFFERENCE.looks_like(forward_difference(f, x.to(torch.float64), h=h)[0]),
                SIGN_ERROR.looks_like(-expected), DIVIDED_BY_H.looks_like(2 * expected),
                HALF_STEP.looks_like(expected / 2)]
    if x.dtype == torch.float32:  # the only float32-specific way to be wrong where float64 is right
        symptoms.append(ROUND_OFF.when(lambda received: True))
    return symptoms


def _run_central_difference(central_difference_fn, name: str, x: torch.Tensor, h: float | None) -> None:
    __tracebackhide__ = True
    f = TEST_FUNCTIONS[name]
    kwargs = {} if h is None else {"h": h}
    what = f"central_difference(f, x{', h=' + format(h, 'g') if h is not None else ''}) for f(x) = {name}, " \
           f"x = {fmt(x)} ({str(x.dtype).replace('torch.', '')})"
    # The caller's own x: the check sees an answer that changes it, even one that puts the values back.
    received = call_learner(central_difference_fn, f, x, what=what, forbid=[Route.AUTOGRAD], **kwargs)
    (expected,) = autograd_gradient(f, x)
    (fd,) = central_difference(f, x, h=1e-6)
    # h = 1e-3 keeps a forward difference's O(h) error far above the allowed error; central's O(h²) stays below.
    expect_close(received, expected, what=what, fd=fd, rtol=1e-5, atol=1e-6,
                 symptoms=_difference_symptoms(f, x, 1e-6 if h is None else h, expected))


@check
def check_central_difference(central_difference_fn, seed: int | None = None) -> None:
    """Part A: central_difference(f, x, h=1e-6) returns ∂f/∂x elementwise, in float64, shaped like x, by finite
    differences (no autograd), leaving x unchanged."""
    __tracebackhide__ = True
    if seed is None:
        cases = [("sum(x**3)", torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), None),
                 ("sum(x**3)", torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 1e-3),
                 ("sum(sin(x) * x)", torch.tensor([[0.5, -1.0, 2.0], [0.0, 1.5, -0.3]], dtype=torch.float64), 1e-3),
                 ("sum(x**3)", torch.tensor([1.0, 2.0, 3.0], dtype=torch.float32), None),
                 ("sum(exp(x / 2))", torch.tensor([[0.5, 1.5], [2.0, 1.0]], dtype=torch.float32), None)]
    else:
        gen = generator("01/central_difference", seed)
        cases = []
        # Two float64 cases with h = 1e-3, where a forward difference's O(h) error shows, then two float32 cases with
        # the default h, where round-off shows: each mistake is seen twice, so it can be named.
        for dtype, h in ((torch.float64, 1e-3), (torch.float64, 1e-3), (torch.float32, None), (torch.float32, None)):
            shape = choice(gen, [(3,), (2, 3), (4,), (2, 2, 2)])
            cases.append((choice(gen, list(TEST_FUNCTIONS)), uniform(gen, shape, 0.5, 2.0).to(dtype), h))
    for name, x, h in cases:
        with trial():
            _run_central_difference(central_difference_fn, name, x, h)


def check_chain_rule_example(chain_rule_example, seed: int | None = None) -> None:
    """Part B1: for y = 3x + 1, z = y**2, chain_rule_example(x) returns (y, dz_dy, dy_dx, dz_dx)."""
    __tracebackhide__ = True
    points = [2.0] if seed is None else [round(float(v), 3) for v in uniform(generator("01/chain", seed), (3,), -5, 5)]
    for x in points:
        what = f"chain_rule_example({x:g})"
        answer = call_learner(chain_rule_example, x, what=what)
        if not isinstance(answer, (tuple, list)) or len(answer) != 4:
            raise GradingFailure(f"{what} returned {answer!r:.80}; expected a tuple (y, dz_dy, dy_dx, dz_dx).")
        y_value, dz_dy, dy_dx, dz_dx = (as_answer(a, what=what, shape=()) for a in answer)
        y = 3 * x + 1
        (dz_dx_autograd,) = autograd_gradient(lambda t: (3 * t + 1) ** 2, x)
        (dz_dx_fd,) = central_difference(lambda t: (3 * t + 1) ** 2, x)
        expect_close(y_value, y, what=f"{what}: y = 3x + 1", source="expected", misconceptions=[hard_coded(7.0)])
        expect_close(dz_dy, 2 * y, what=f"{what}: dz/dy",
                     misconceptions=[Misconception("derivative of y**2 taken as y", "d(y²)/dy = 2y.", value=y)])
        expect_close(dy_dx, 3.0, what=f"{what}: dy/dx", source="expected")
        expect_close(dz_dx, dz_dx_autograd, what=f"{what}: dz/dx", fd=dz_dx_fd, misconceptions=[
            Misconception("missing the inner derivative", "The chain rule multiplies dz/dy by dy/dx = 3; "
                          "you returned dz/dy alone.", value=2 * y),
            Misconception("added instead of multiplied", "Along one route the chain rule multiplies local "
                          "derivatives: dz/dx = dz/dy · dy/dx.", value=2 * y + 3),
            hard_coded(42.0)])


def _two_routes_mistakes(x: float, y: float) -> list[Misconception]:
    return [
        Misconception("dropped branch term", "x reaches z by two routes, through x·y (local derivative y) and "
                      "directly (local derivative 1). Gradients of routes add: dz/dx = y + 1, not y.", value=y),
        Misconception("averaged the routes", "Routes into a node add up, they are never averaged: "
                      "dz/dx = y + 1.", value=(y + 1) / 2),
        hard_coded(6.0),
    ]


def check_two_routes_example(two_routes_example, seed: int | None = None) -> None:
    """Part B2: for z = x*y + x, two_routes_example(x, y) returns (dz_dx, dz_dy)."""
    __tracebackhide__ = True
    if seed is None:
        points = [(3.0, 5.0)]
    else:
        values = uniform(generator("01/two_routes", seed), (3, 2), -5, 5)
        points = [(round(float(a), 3), round(float(b), 3)) for a, b in values]
    for x, y in points:
        what = f"two_routes_example({x:g}, {y:g})"
        answer = call_learner(two_routes_example, x, y, what=what)
        if not isinstance(answer, (tuple, list)) or len(answer) != 2:
            raise GradingFailure(f"{what} returned {answer!r:.80}; expected a tuple (dz_dx, dz_dy).")
        dz_dx, dz_dy = (as_answer(a, what=what, shape=()) for a in answer)
        z = lambda a, b: a * b + a  # noqa: E731 - the exercise's function, read in one line
        grad_x, grad_y = autograd_gradient(z, x, y)
        fd_x, fd_y = central_difference(z, x, y)
        expect_close(dz_dx, grad_x, what=f"{what}: dz/dx", fd=fd_x, misconceptions=_two_routes_mistakes(x, y))
        expect_close(dz_dy, grad_y, what=f"{what}: dz/dy", fd=fd_y)


def _reference_worst(analytic: torch.Tensor, numerical: torch.Tensor, floor: float):
    error = (analytic - numerical).abs() / torch.clamp(torch.maximum(analytic.abs(), numerical.abs()), min=floor)
    flat = int(torch.argmax(error.reshape(-1)))
    return float(error.reshape(-1)[flat]), tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), error.shape))


def _checker_cases(seed: int | None):
    if seed is None:
        yield torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.3])
        yield torch.tensor([0.0, 1.0, -2.0]), torch.tensor([0.0, 1.0, -2.0])
        yield torch.tensor([[0.5, 0.0], [2.0, -1.0]]), torch.tensor([[0.5, 0.0], [2.0, -1.5]])
        yield torch.tensor([0.0, 4.0]), torch.tensor([1e-3, 4.0])
        yield torch.tensor([1e-3, 4.0]), torch.tensor([0.0, 4.0])
        return
    gen = generator("01/gradient_checker", seed)
    for case in range(4):
        shape = choice(gen, [(3, 4), (2, 3, 2), (5,)])
        analytic = uniform(gen, shape)
        numerical = analytic + 1e-9 * uniform(gen, shape)
        size = analytic.numel()
        zero, planted = torch.randperm(size, generator=gen)[:2].tolist()
        analytic.view(-1)[zero] = numerical.view(-1)[zero] = 0.0  # both exactly zero: 0/0 without the guard
        # The planted error makes one side larger, alternately the analytic and the numerical one.
        larger = analytic if case % 2 == 0 else numerical
        larger.view(-1)[planted] *= float(uniform(gen, (), 1.5, 3.0))
        yield analytic, numerical


def check_worst_relative_error(worst_relative_error, seed: int | None = None) -> None:
    """Part C: worst_relative_error(analytic, numerical, floor=1e-8) returns (worst error, its index tuple)."""
    __tracebackhide__ = True
    for analytic, numerical in _checker_cases(seed):
        analytic, numerical = analytic.to(torch.float64), numerical.to(torch.float64)
        what = f"worst_relative_error(analytic={fmt(analytic)}, numerical={fmt(numerical)})"
        answer = call_learner(worst_relative_error, analytic.clone(), numerical.clone(), what=what)
        if not isinstance(answer, (tuple, list)) or len(answer) != 2:
            raise GradingFailure(f"{what} returned {answer!r:.80}; expected a pair (worst_error, worst_index).")
        error, index = answer
        want_error, want_index = _reference_worst(analytic, numerical, 1e-8)
        error = as_answer(error, what=what, shape=())
        if not math.isfinite(float(error)):
            raise GradingFailure(
                f"{what} returned error {fmt(float(error))}, expected {fmt(want_error)}.\nLikely misconception: "
                "relative error without a guard for zero. Where both values are 0, |a - n| / |n| is 0/0 = nan; "
                "divide by max(|a|, |n|, floor) instead.")
        index_tuple = _as_index(index)
        if index_tuple != want_index:
            hint = ""
            if isinstance(index, int) or (torch.is_tensor(index) and index.dim() == 0):
                hint = ("\nLikely misconception: flat index. argmax on a flattened tensor gives a position in the "
                        "flat view; turn it into one index per dimension (torch.unravel_index).")
            raise GradingFailure(f"{what} reported the worst element at {index!r}, expected {want_index} "
                                 f"(error {fmt(want_error)} there).{hint}")
        expect_close(error, want_error, what=f"{what}: worst error", rtol=1e-6, atol=1e-12, source="expected",
                     misconceptions=[
            *(Misconception("denominator from one side only", f"You divided by |{side}| alone. Use "
                            "max(|analytic|, |numerical|, floor) so the error is symmetric and a zero on either side "
                            "is guarded.", value=_one_sided(analytic, numerical, index_tuple, side))
              for side in ("analytic", "numerical")),
            Misconception("absolute instead of relative error", "Divide |analytic - numerical| by "
                          "max(|analytic|, |numerical|, floor).",
                          value=float((analytic - numerical).abs().reshape(-1).max()))])


def _as_index(index) -> tuple | None:
    if torch.is_tensor(index):
        index = index.tolist()
    if isinstance(index, int):
        return None
    try:
        return tuple(int(i) for i in index)
    except (TypeError, ValueError):
        return None


def _one_sided(analytic: torch.Tensor, numerical: torch.Tensor, index: tuple, side: str) -> float:
    a, n = float(analytic[index]), float(numerical[index])
    return abs(a - n) / max(abs(a if side == "analytic" else n), 1e-8)
