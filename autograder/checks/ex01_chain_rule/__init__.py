"""Checks for exercise 01, the chain rule: central differences (Part A), the worked derivatives and what twelve
backward engines (rule order, += or =) make of them (Part B, in :mod:`.routes`), a gradient checker (Part C);
:mod:`.answers` reads plain Python answers, :mod:`.hints` holds the hint book.

Every case runs as a trial, and each catalogued mistake shows in at least two cases of the public and of the hidden
test, so that it can be named.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator

import torch

from ... import oracles
from ...checking import (
    GradingFailure,
    Misconception,
    Route,
    Symptom,
    call_learner,
    check,
    expect_close,
    fmt,
    proven_failure,
    trial,
)
from ...oracles import autograd_gradient, central_difference, forward_difference
from ...routes import MISCONCEPTIONS as ROUTE_MISCONCEPTIONS
from ...seeding import choice, generator, uniform
from .answers import _tuple_of
from .hints import hint
from .routes import check_engine_reports, check_route_sum, check_routes, check_surviving_routes

__all__ = ["check_central_difference", "check_engine_reports", "check_route_sum", "check_routes",
           "check_surviving_routes", "check_worst_relative_error", "hint"]

# ---------------------------------------------------------------------------------------------- Part A

# Smooth scalar functions of a tensor, named as a learner would read them in a failure message.
TEST_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum(x**3)": lambda x: (x**3).sum(),
    "sum(sin(x) * x)": lambda x: (torch.sin(x) * x).sum(),
    "sum(exp(x / 2))": lambda x: torch.exp(x / 2).sum(),
    "sum(log(1 + x**2))": lambda x: torch.log1p(x**2).sum(),
    "sum(tanh(x))**2": lambda x: torch.tanh(x).sum() ** 2,
}

#: Functions that return a view of their argument (an element of it, no new tensor): allowed by the text ("f returns a
#: scalar tensor"), and the only ones where an answer that keeps f's output while it changes its copy in place goes
#: wrong. Pinned in CENTRAL_CORNERS, never drawn.
VIEW_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "x[1] (a view of x)": lambda x: x[1],
    "x[2, 0] (a view of x)": lambda x: x[2, 0],
}

#: Run only with large elements (LARGE_X): a slope of ±1 where f is about 1e9; and, at the default step only, a
#: function that curves fast near 0 (third derivative -1e6·cos), where a step of 1e-4 is off by 1.7e-5, relatively:
#: the V's right arm, as x = 1e9 is its left one (CURVED_X).
LARGE_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum(sqrt(1 + x**2))": lambda x: torch.sqrt(1 + x**2).sum(),
    "sum(sin(100 * x))": lambda x: torch.sin(100 * x).sum(),
}

#: Functions that read the caller's own x, the very tensor passed to central_difference, besides their argument t:
#: f(t) = F(t, x). Its gradient is F's derivative in t alone; an answer that steps the caller's x in place (even
#: one that puts the values back) moves both and measures the derivative of F(t, t) (STEPPED_CALLERS_X).
CLOSURE_FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "sum(sin(x) * c), c the caller's x itself, read by f": lambda t, c: (torch.sin(t) * c).sum(),
    "sum(x**2 * c), c the caller's x itself, read by f": lambda t, c: (t**2 * c).sum(),
}

SHAPES = [(3,), (2, 3), (4,), (2, 2, 2)]

FORWARD_DIFFERENCE = Misconception(
    "forward difference",
    "Your numbers match the forward quotient (f(x + h) - f(x)) / h, element by element. Its error shrinks only like h "
    "(about h·f''/2: at h = 1e-3 that is far above the tolerance), while the quotient the part defines straddles x, "
    "and its f'' terms cancel.",
    question="Which two points does your quotient compare, and do they lie on both sides of x?")
SIGN_ERROR = Misconception("sign error", "Your numbers are exactly the negative of the derivative, element by "
                           "element: the two evaluations in your numerator are in the opposite order to the text's.",
    question="In the text's numerator, which evaluation of f is subtracted from which?")
DIVIDED_BY_H = Misconception("divided by h instead of 2h", "Your numbers are twice the derivative: the two points "
                             "x - h and x + h are 2h apart.",
    question="How far apart are the two points at which you evaluate f?")
HALF_STEP = Misconception("half the step", "Your numbers are half the derivative: divide by 2h, not 4h.",
    question="How far apart are the two points at which you evaluate f, and what did you divide by?")
ROUND_OFF = Misconception(
    "round-off in float32",
    "Your function is right for float64 inputs but not for float32 ones. In float32, x + 1e-6 keeps about 7 "
    "significant digits, so f(x + h) - f(x - h) is mostly rounding noise, and dividing by a tiny 2h magnifies it: "
    "the left arm of the lesson's V. Returning float64 is not enough if the steps were taken in float32: in which "
    "dtype did yours happen?",
    question="In which dtype were your x + h and x - h formed, and how many digits of a 1e-6 step survive there?")
IGNORED_STEP = Misconception(
    "ignored the step h it was given",
    "With a large h the central difference is not the derivative: for sum(x**3) it is 3x² + h². Your numbers are "
    "the derivative itself, so your function stepped by its own h. Use the h argument.",
    question="Which step did your function take when the call passed h=0.5?")

KEPT_VIEW = Misconception(
    "kept f's output while changing its input in place",
    "f may return a view of its argument (f(t) = t[1] is an element of t itself, not a copy), so a value of f that "
    "you keep as a tensor follows the tensor you passed: writing into that tensor afterwards changed the values you "
    "had kept, and each quotient came out 0. Which of your tensors still change after f has read them?",
    question="Is what f returned a new tensor or a piece of its argument, and did that argument change afterwards?")
STEPPED_CALLERS_X = Misconception(
    "stepped the caller's x in place while f could read it",
    "f may read the caller's x itself (here it multiplies its argument by it), so while your function has that "
    "tensor stepped, f sees the step twice: once in its argument and once in what it reads. Putting the values back "
    "afterwards does not undo the numbers measured meanwhile: your estimate is the derivative of f with both moved.",
    question="Which tensor did you step, and could f see that tensor by any other way than its argument?")
AUTOGRAD_IN_ESTIMATE = Misconception(
    "used autograd inside the finite-difference estimate",
    "A central difference is built from evaluations of f alone: it is the independent check that autograd's "
    "gradients are measured against, so backward(), torch.autograd.grad or torch.func must not run inside it, not "
    "even to compare with: a check that leans on what it checks checks nothing.",
    question="Can an estimate that asks autograd tell you whether autograd is right?")

ORACLE_REUSED = Misconception(
    "called the course's own finite-difference oracle instead of writing one",
    "The lesson imports central_difference from autograder.oracles to check its own numbers; this part asks you to "
    "write that estimate yourself, from evaluations of f. A wrapper around the oracle returns its numbers, not "
    "yours.",
    question="Whose estimate does your function return: one it computed, or the one the lesson imported?")

@contextlib.contextmanager
def _watch_oracles(seen: list[str]) -> Iterator[None]:
    """Record in ``seen`` every run of the course's finite-difference oracles inside the block: both call the
    module's ``_difference``, looked up when they run, so a recording stand-in sees them however they were imported
    (no profiler: grading forbids sys.setprofile)."""
    original = oracles._difference

    def recording(*args, **kwargs):
        seen.append("central_difference" if tuple(args[3]) == (1.0, -1.0) else "forward_difference")
        return original(*args, **kwargs)

    oracles._difference = recording
    try:
        yield
    finally:
        oracles._difference = original


# A step large enough that the central quotient differs from the derivative by far more than the tolerance.
LARGE_STEPS = (0.5, 0.25)

FIXED_STEP = Misconception(
    "a step fixed at 1e-6 where x is large",
    "Near x = 1e9 the float64 numbers are about 1.2e-7 apart, so x + 1e-6 lands on a neighbour that is not 1e-6 "
    "away, and f's round-off (eps·|f|) divided by a step of 1e-6 swamps a small slope: the bottom of the lesson's V "
    "moves with the size of x. With no h given, the step is yours to choose, element by element.",
    question="Where along h does the V of the error bottom out at x = 1e9, and where at x = 1?")


ONE_STEP = Misconception(
    "one step for the whole tensor, sized for its largest element",
    "The elements near 1e9 come out right, but the small ones in the same tensor are far off: a step sized for the "
    "largest element (a thousand or so at 1e9) is a huge step for an element near 1, where the function curves "
    "within that step. Where the V of the error bottoms out depends on each element's own size.",
    question="For the element near 1 in this tensor, what step did your code use, and where does the V bottom out "
             "for an element of that size?")


def _scaled_fd(f, x: torch.Tensor) -> torch.Tensor:
    """The course's float64 central difference with each element's step scaled to its size, cbrt(eps)·max(1, |x_i|)
    (the independent estimate shown next to a large-x case)."""
    flat = x.detach().to(torch.float64).reshape(-1)
    out = torch.empty_like(flat)
    for i in range(flat.numel()):
        (estimate,) = central_difference(f, x, h=6e-6 * max(1.0, abs(float(flat[i]))))
        out[i] = estimate.reshape(-1)[i]
    return out.reshape(x.shape)


def _difference_symptoms(f, x: torch.Tensor, h: float, quotient: torch.Tensor,
                         derivative: torch.Tensor, right_in_float64: bool = False) -> list[Symptom]:
    symptoms = [FORWARD_DIFFERENCE.looks_like(forward_difference(f, x.to(torch.float64), h=h)[0]),
                SIGN_ERROR.looks_like(-quotient), DIVIDED_BY_H.looks_like(2 * quotient),
                HALF_STEP.looks_like(quotient / 2)]
    if x.dtype == torch.float32 and right_in_float64:  # float32-specific: the same call in float64 was right
        # Named only when the answer is off by no more than float32 steps can make it: rounding of f's values
        # (eps·|f|/h) and of x + h itself (eps·|x|/h of the step, times the slope), with a wide margin.
        x64 = x.detach().to(torch.float64)
        eps = torch.finfo(torch.float32).eps
        reach = 8 * eps * (abs(float(f(x64))) + float(x64.abs().max()) * float(quotient.abs().max()) + 1.0) / h
        symptoms.append(ROUND_OFF.when(
            lambda got: not torch.allclose(got, quotient, rtol=1e-5, atol=1e-6)
            and float((got - quotient).abs().max()) <= reach))
    if h in LARGE_STEPS:
        symptoms.append(IGNORED_STEP.looks_like(derivative, rtol=1e-7))
    return symptoms


def _watched(f: Callable[[torch.Tensor], torch.Tensor], outputs: list) -> Callable[[torch.Tensor], torch.Tensor]:
    """f, recording every tensor it returns with its value at that moment (a view can change afterwards)."""
    def watched(t):
        out = f(t)
        if isinstance(out, torch.Tensor):
            outputs.append((out, out.detach().clone()))
        return out
    return watched


def _reading(name: str, x: torch.Tensor, x_before: torch.Tensor, seen: list) -> Callable:
    """CLOSURE_FUNCTIONS[name] as f, reading the caller's x; each read of x while it is not x_before goes to seen."""
    def f(t):
        seen.extend([x.detach().clone()] * (not torch.equal(x.detach(), x_before)))
        return CLOSURE_FUNCTIONS[name](t, x)
    return f


def _run_central_difference(central_difference_fn, name: str, x: torch.Tensor, h: float | None) -> None:
    __tracebackhide__ = True
    x_before, seen = x.detach().clone(), []  # seen: the caller's x as f read it, when not x's own values
    f = {**TEST_FUNCTIONS, **VIEW_FUNCTIONS, **LARGE_FUNCTIONS}.get(name) or _reading(name, x, x_before, seen)
    kwargs = {} if h is None else {"h": h}
    values = fmt(x.reshape(-1)) if x.dim() > 1 else fmt(x)  # the shape is said once, below
    what = f"central_difference(f, x{', h=' + format(h, 'g') if h is not None else ''}) for f(x) = {name}, " \
           f"x = {values} ({str(x.dtype).replace('torch.', '')}, shape {tuple(x.shape)})"
    outputs: list = []
    # The caller's own x: the check sees an answer that changes it, even one that puts the values back.
    oracle_calls: list[str] = []
    try:
        with _watch_oracles(oracle_calls):
            received = call_learner(central_difference_fn, _watched(f, outputs), x, what=what,
                                    forbid=[Route.AUTOGRAD], **kwargs)
    except GradingFailure as failure:
        if failure.proven is ROUTE_MISCONCEPTIONS[Route.AUTOGRAD]:  # named for what this part is: an estimate
            raise proven_failure(failure.message, AUTOGRAD_IN_ESTIMATE) from None
        raise
    if oracle_calls:
        raise proven_failure(f"{what} called autograder.oracles.{oracle_calls[0]}, the course's own estimate.",
                             ORACLE_REUSED)
    if not isinstance(received, torch.Tensor):  # "a float64 tensor shaped like x": a 0-d x gets a 0-d tensor
        raise GradingFailure(f"{what} returned {type(received).__name__} ({received!r:.60}); the part asks for a "
                             f"float64 tensor shaped like x, here shape {tuple(x.shape)}.")
    (derivative,) = autograd_gradient(f, x)
    step = 1e-6 if h is None else h
    symptoms = []
    if h is None and float(x.abs().max()) > 1e5:  # large elements: the step is the learner's to choose
        large = x.detach().abs() > 1e5

        def right(got: torch.Tensor, where: torch.Tensor) -> bool:
            return bool(torch.allclose(got[where], derivative[where], rtol=1e-5, atol=1e-6))

        expect_close(received, derivative, what=what, fd=_scaled_fd(f, x), rtol=1e-5, atol=1e-6, symptoms=[
            FIXED_STEP.when(lambda got: not right(got, large)),
            ONE_STEP.when(lambda got: right(got, large) and not right(got, ~large))])
        if received.dtype != torch.float64:
            raise GradingFailure(f"{what} returned a tensor of dtype {received.dtype}; the part asks for a float64 "
                                 "tensor, the estimate at full float64 precision.")
        return
    right_in_float64 = False
    if x.dtype == torch.float32:  # round-off is named only if the same call on x in float64 is right (not truncation)
        with contextlib.suppress(GradingFailure):
            again = call_learner(central_difference_fn, f, x.to(torch.float64), what=what, forbid=[Route.AUTOGRAD],
                                 **kwargs)
            right_in_float64 = isinstance(again, torch.Tensor) and again.shape == x.shape and bool(
                torch.allclose(again.to(torch.float64), derivative, rtol=1e-5, atol=1e-6))
    if name in VIEW_FUNCTIONS:  # outputs of f that changed after f returned them: kept, then written into
        changed = any(not torch.equal(out.detach(), value) for out, value in outputs)
        symptoms.append(KEPT_VIEW.when(lambda got: changed and bool((got == 0).all())))
    extra = ""
    if seen:  # f read the caller's x while the answer had it stepped: named where the numbers are f's with both moved
        (both,) = autograd_gradient(lambda t: CLOSURE_FUNCTIONS[name](t, t), x)
        symptoms.append(STEPPED_CALLERS_X.when(lambda got: bool(torch.allclose(got, both, rtol=1e-5, atol=1e-6))))
        extra = (f"While your function ran, f read the caller's x {len(seen)} time(s) with values other than "
                 f"{fmt(x_before)}, e.g. {fmt(seen[0])}; c in f is that tensor.")
    if h in LARGE_STEPS:  # the answer is the quotient the text defines, which here is not the derivative
        (quotient,) = central_difference(f, x, h=h)
        expect_close(received, quotient, what=what, rtol=1e-5, atol=1e-6, source=f"quotient at h={h:g}",
                     symptoms=_difference_symptoms(f, x, step, quotient, derivative))
    else:
        (fd,) = central_difference(f, x, h=1e-6)
        # h = 1e-3 keeps a forward difference's O(h) error far above the allowed error; central's O(h²) stays below.
        expect_close(received, derivative, what=what, fd=fd, rtol=1e-5, atol=1e-6, extra=extra,
                     symptoms=[*_difference_symptoms(f, x, step, derivative, derivative, right_in_float64),
                               *symptoms])
    if received.dtype != torch.float64:  # a tensor: expect_close accepted it
        raise GradingFailure(f"{what} returned a tensor of dtype {received.dtype}; the part asks for a float64 "
                             "tensor, the estimate at full float64 precision.")


def _t32(values) -> torch.Tensor: return torch.tensor(values, dtype=torch.float32)


def _t64(values) -> torch.Tensor: return torch.tensor(values, dtype=torch.float64)


#: Corners of Part A's domain, run at every seed (and in the visible test): a 0-d x (the text's "shaped like x"
#: includes shape ()), zeros and both signs in a non-square matrix, a 3-D x with a dimension of size 1 in float32,
#: and two functions that return a view of their argument (a 1-D and a non-square 2-D x).
CENTRAL_CORNERS = [("sum(sin(x) * x)", _t64(-0.7), 1e-3),
                   ("sum(exp(x / 2))", _t32(1.3), None),
                   ("sum(exp(x / 2))", _t64([[0.0, -1.2, 0.8], [1.5, -0.4, 2.0]]), 1e-3),
                   ("sum(log(1 + x**2))", _t32([[[0.5, -1.5, 0.0]], [[-0.25, 1.0, 2.0]]]), None),
                   ("x[1] (a view of x)", _t64([0.5, -1.0, 2.0]), None),
                   ("x[2, 0] (a view of x)", _t64([[0.3, -0.8], [1.1, 0.0], [-2.0, 0.6]]), 1e-3),
                   ("sum(sin(x) * c), c the caller's x itself, read by f", _t64([1.0, -0.5, 2.0]), None),
                   ("sum(x**2 * c), c the caller's x itself, read by f", _t64([[0.8, -1.5], [1.2, 0.4]]), 1e-3)]
#: A fast-curving function at the default step, every seed (the hidden test adds a drawn x): |cos(100·x)| ≥ 0.88.
CURVED_X = ("sum(sin(100 * x))", _t64([0.0, 0.03, -0.065]), None)
#: Large elements at the default step, run last at every seed: where x + 1e-6 is no longer x moved by 1e-6 and f's
#: round-off over a 1e-6 step swamps the slope (FIXED_STEP).
LARGE_X = [("sum(sqrt(1 + x**2))", _t64([[3e8, -2e8], [6e8, -1e9]]), None),
           ("sum(x**3)", _t32([2e6, -1.5e6, 3e6]), None)]
#: Large and small elements in one tensor, at the default step, every seed after LARGE_X (the hidden test adds a
#: drawn one): log(1 + x²) keeps f near 40, so the small elements' slopes stand clear of f's round-off, and a step
#: sized for the largest element (1e3 at 1e9) flattens them (ONE_STEP).
MIXED_X = [("sum(log(1 + x**2))", _t64([1e9, 0.5, -2.0]), None),
           ("sum(log(1 + x**2))", _t64([[-3e8, 1.5], [0.0, 7e8]]), None)]


@check
def check_central_difference(central_difference_fn, grading_seed: int | None = None) -> None:
    """Part A: central_difference(f, x, h=None) returns the central quotient elementwise (with the step given, or
    with no h one the learner chose), as a float64 tensor shaped like x, from evaluations of f only (no autograd),
    leaving x unchanged.

    Domain (what the part's text allows, each corner pinned in CENTRAL_CORNERS, visible and at every seed):
    x is a tensor of any shape, 0-d ``()`` included, of dtype float32 or float64, with any real values (zeros and
    both signs); f maps a tensor shaped like x to a scalar tensor, possibly a view of its argument (VIEW_FUNCTIONS,
    where an answer that keeps f's output while it writes into its copy returns zeros: KEPT_VIEW); h is None (the
    learner's step), 1e-3, or a large step (0.5, 0.25) where the quotient is not the derivative; with no h, elements
    up to 1e9 in size (LARGE_X, last at every seed, and one drawn: FIXED_STEP), large and small elements in one
    tensor (MIXED_X, every seed, and one drawn: ONE_STEP, a step sized for the largest element), and a function that
    curves fast near 0 (CURVED_X and one drawn: a step of 1e-4 fails there). Contracts and their checks:
    "a float64 tensor shaped like x" -> a plain torch.Tensor (a Python float for a 0-d x fails), of x's shape
    (as_answer), of dtype float64; "x must not change at all" -> call_learner's snapshot (CHANGED_INPUT, in
    place even if undone), and "during the call" -> CLOSURE_FUNCTIONS, f reading the caller's x (two corners: a
    change through .data, unseen by _version, gives f's derivative with both moved, STEPPED_CALLERS_X); "it may
    arrive as float32" -> float32 cases (ROUND_OFF); "use the h you are given" -> the large-step cases
    (IGNORED_STEP); "use only evaluations of f: no autograd" -> Route.AUTOGRAD forbidden, named
    AUTOGRAD_IN_ESTIMATE.
    """
    __tracebackhide__ = True
    if grading_seed is None:
        cases = [("sum(x**3)", _t64([1.0, 2.0, 3.0]), None),
                 ("sum(x**3)", _t64([1.0, 2.0, 3.0]), 1e-3),
                 ("sum(sin(x) * x)", _t64([[0.5, -1.0, 2.0], [0.0, 1.5, -0.3]]), 1e-3),
                 ("sum(x**3)", _t32([1.0, 2.0, 3.0]), None),
                 ("sum(exp(x / 2))", _t32([[0.5, 1.5], [2.0, 1.0]]), None),
                 ("sum(x**3)", _t64([1.0, 2.0, 3.0]), 0.5),
                 ("sum(exp(x / 2))", _t64([[0.5, 1.5], [2.0, 1.0]]), 0.25),
                 *CENTRAL_CORNERS, CURVED_X]
        large_cases = [*LARGE_X, *MIXED_X]
    else:
        gen = generator("01/central_difference", grading_seed)
        # Two float64 cases with h = 1e-3, where a forward difference's O(h) error shows, two float32 cases with the
        # default h, where round-off shows, and two with a large h, where ignoring h shows: each mistake is seen
        # twice, so it can be named. The four shapes are all used, in a random order (1-D and higher-D every time).
        shapes = [SHAPES[i] for i in torch.randperm(len(SHAPES), generator=gen).tolist()]
        shapes += [choice(gen, SHAPES), choice(gen, SHAPES)]
        settings = [(torch.float64, 1e-3), (torch.float32, None), (torch.float64, 1e-3), (torch.float32, None),
                    (torch.float64, LARGE_STEPS[0]), (torch.float64, LARGE_STEPS[1])]
        drawn = [(choice(gen, list(TEST_FUNCTIONS)), uniform(gen, shape, 0.5, 2.0).to(dtype), h)
                 for shape, (dtype, h) in zip(shapes, settings)]
        large = (10 ** uniform(gen, (choice(gen, [2, 3, 4]),), 6.0, 9.0)) * torch.where(
            torch.rand(1, generator=gen) < 0.5, -1.0, 1.0).double()
        curved = (torch.randint(-3, 4, (3,), generator=gen) * math.pi + uniform(gen, (3,), -0.5, 0.5)) / 100
        cases = [*CENTRAL_CORNERS, CURVED_X, *drawn, ("sum(sin(100 * x))", curved.round(decimals=5).double(), None)]
        mixed = torch.cat([10 ** uniform(gen, (2,), 7.0, 9.0), uniform(gen, (2,), 0.3, 2.0)])
        mixed = (mixed * torch.where(torch.rand(4, generator=gen) < 0.5, -1.0, 1.0))[torch.randperm(4, generator=gen)]
        large_cases = [*LARGE_X, ("sum(sqrt(1 + x**2))", large, None), *MIXED_X,
                       ("sum(log(1 + x**2))", mixed.double().reshape(2, 2), None)]
    passed = []
    for name, x, h in cases:
        with trial():
            _run_central_difference(central_difference_fn, name, x.clone(), h)
            passed.append(name)
    if len(passed) < len(cases):  # the step at large x is judged once the quotient itself is right
        return
    for name, x, h in large_cases:
        with trial():
            _run_central_difference(central_difference_fn, name, x.clone(), h)


# ---------------------------------------------------------------------------------------------- Part C

#: The checker's verdict, stated in the part's text: a gradient fails when the worst error exceeds this.
TOLERANCE = 1e-6

NO_GUARD = Misconception(
    "relative error without a guard for zero",
    "Where both values are 0 the relative error is 0/0 = nan, and where only the analytic one is 0 it is inf: nan "
    "compares False with everything, so it hides the real worst element, and inf turns round-off into an alarm. A "
    "relative error needs a denominator that never drops to 0, nor below what round-off makes.",
    question="What is your error at an element where both values are exactly 0, or where only one of them is?")
FLAT_INDEX = Misconception(
    "flat index", "argmax on a flattened tensor gives a position in the flat view; the part asks for the element's "
    "position in the tensor's own shape, one index per dimension.",
    question="What does the part ask worst_index to be: one number, or one entry per dimension of the tensor?")
WRONG_UNRAVEL = Misconception(
    "flat position unravelled with the wrong sizes",
    "In a tensor of shape (R, C) the flat position of element (i, j) is i·C + j: the row is the flat position // C "
    "(the size of the LAST dimension) and the column is the position % C. Dividing by R, or peeling the dimensions "
    "off from the first one, only works for square matrices.",
    question="In a 2×3 tensor, which element sits at flat position 4?")
NOT_PLAIN_PYTHON = Misconception(
    "a tensor or NumPy number returned where the part asks for a Python float and ints",
    "Compute with any tensor operations you like, but what you return is plain Python: a 0-d tensor or a "
    "numpy.int64 prints like a number, yet it is not the Python float or int the text asks for (type() tells).",
    question="What does type() say about each value you return?")
FLOOR_BELOW_ROUND_OFF = Misconception(
    "a denominator that drops below the round-off of the numerical gradient",
    "Where the gradient is tiny or exactly 0, a right analytic gradient and a float64 central difference still "
    "differ by the estimate's round-off (up to about 1e-7 for these functions): that difference is not an error "
    "relative to anything. Divided by a tiny gradient, or by a floor far below round-off / tolerance, it becomes a "
    "false alarm. Measure the round-off on right gradients and keep the denominator above it divided by the "
    "tolerance.",
    question="Where the gradient is 0 or tiny, how large a difference does a RIGHT gradient show, and what does your "
             "error divide it by?")
FLOOR_TOO_LARGE = Misconception(
    "a floor so large that real errors at small gradients pass",
    "A gradient between 2e-4 and 1e-3 reported 60 % too large is a thousand times above round-off, yet a "
    "denominator that never drops below a large floor divides it into nothing. The floor has to stay below the "
    "smallest error you must catch divided by the tolerance.",
    question="An element whose right gradient is below 1e-3 comes out 60 % wrong: what error does yours give it, and "
             "which part of your denominator made it small?")
SUM_OF_SIZES = Misconception(
    "divided by the sum of the two sizes",
    "Where the gradient is large, the text asks for the error relative to its size: an element 1 % off reports about "
    "0.01. Dividing by |a| + |n| divides by twice the gradient's size, and a 1 % error reports about 0.005.",
    question="For a = 303 and n = 300, what does your error report, and how large is the gradient there?")
ABSOLUTE = Misconception(
    "absolute instead of relative error",
    "Your worst error is the largest |analytic - numerical| itself, but a gradient of several hundred carries a "
    "difference of a few units when it is 1 % wrong, and a gradient of 1e-4 a difference of 1e-4 when it is 100 % "
    "wrong: where the gradient is large, the error is relative to its size.",
    question="Is a difference of 3 on a gradient of 300 a larger error than 1e-4 on a gradient of 1e-4?")
SIZES_NOT_DIFFERENCE = Misconception(
    "difference of the sizes instead of the size of the difference",
    "The numerator is |a - n|, the size of the difference. ||a| - |n|| is 0 when a = -n, so a gradient with the "
    "wrong sign looks perfect. The numerator is the size of the difference.",
    question="What is your error for a = 2 and n = -2?")

#: Kinds of element in a planted gradient, each one term of f(t) = Σ g_i(t_i): "large" A·exp(t) (a gradient of 50 to
#: 300), "tiny" B·(t - c)² near its minimum (a gradient of 2e-4 to 1e-3), "zero" K·(exp(t - c) - t) at its minimum
#: (autograd exactly 0, the central difference round-off, nonzero by construction), "unused" no term (0 and 0).
KINDS = ("large", "tiny", "zero", "unused")
#: Planted mistakes: each changes one element of the analytic gradient by at least 1 % and 1e-4 (the text's promise).
BUGS = {"tiny": "60 % too large at a gradient of about 2e-4 to 1e-3",
        "zero": "1.05e-4 away from the central difference where the gradient is exactly 0",
        "sign": "the sign flipped", "dropped": "0 where the gradient is large",
        "percent": "1 % to 2 % off a gradient of several hundred"}
#: What a planted mistake needs at its element.
BUG_KIND = {"tiny": "tiny", "zero": "zero", "sign": "large", "dropped": "large", "percent": "large"}


def _term(gen: torch.Generator, kind: str) -> tuple[float, float, float, float, float]:
    """(A, K, B, c, x) for one element of ``kind``."""
    if kind == "large":
        x = float(uniform(gen, (), 0.3, 1.0))
        return float(uniform(gen, (), 50.0, 300.0)) / math.exp(x), 0.0, 0.0, 0.0, x
    if kind == "tiny":
        c = float(uniform(gen, (), -1.0, 1.0))
        delta = float(uniform(gen, (), 1.5e-4, 4e-4)) * choice(gen, [-1.0, 1.0])
        return 0.0, 0.0, float(uniform(gen, (), 0.6, 1.5)), c, c + delta
    if kind == "zero":
        c = float(uniform(gen, (), -1.0, 1.0))
        return 0.0, float(uniform(gen, (), 40.0, 100.0)), 0.0, c, c
    return 0.0, 0.0, 0.0, 0.0, float(uniform(gen, (), -1.0, 1.0))


def _function(terms: list[tuple[float, ...]]) -> Callable[[torch.Tensor], torch.Tensor]:
    A, K, B, c, _ = (torch.tensor(column, dtype=torch.float64) for column in zip(*terms))
    return lambda t: (A * torch.exp(t.reshape(-1)) + K * (torch.exp(t.reshape(-1) - c) - t.reshape(-1))
                      + B * (t.reshape(-1) - c) ** 2).sum()


#: The round-off of a right gradient at an exact zero of a function of size just below 1000 (the text's largest),
#: two units in the last place of f over 2h; every case stays at or below it, and PINNED_RIGHT's "near 1000"
#: reaches it. With the planted error at a zero, ZERO_BUG (1e-4 and 5 %), the floors that pass are the same at
#: every seed: from RIGHT_ROUND_OFF / TOLERANCE ≈ 0.114 up to ZERO_BUG / TOLERANCE = 105.
RIGHT_ROUND_OFF, ZERO_BUG = 2 * math.ulp(999.0) / 2e-6, 1.05e-4
#: "An element 1 % off reports about 0.01" where the gradient is 50 or more: within this factor of its relative error.
#: |a| + |n| reports half (SUM_OF_SIZES); a floor above 90 reports less than 1/1.8 of it at a gradient of 50.
PERCENT_BAND = 1.8


def _gradient_pair(gen: torch.Generator, shape: tuple[int, ...], kinds: list[str]):
    """(analytic, numerical, |f|) for a right gradient: autograd, and the course's float64 central difference at
    h = 1e-6. A "zero" element is redrawn until its central difference is not exactly 0 (round-off against an
    exact 0), a small one whose round-off exceeds RIGHT_ROUND_OFF until it does not."""
    terms = [_term(gen, kind) for kind in kinds]
    for _ in range(60):
        f = _function(terms)
        x = torch.tensor([term[4] for term in terms], dtype=torch.float64).reshape(shape)
        (numerical,) = central_difference(f, x)
        (analytic,) = autograd_gradient(f, x)
        off = (analytic - numerical).abs().reshape(-1)
        redraw = [i for i, kind in enumerate(kinds) if kind != "large" and (
            off[i] > RIGHT_ROUND_OFF or (kind == "zero" and numerical.reshape(-1)[i] == 0))]
        if not redraw:
            break
        for i in redraw:
            terms[i] = _term(gen, kinds[i])
    return analytic, numerical, abs(float(f(x)))


#: Right gradients pinned at every seed, each of f(t) = offset + Σ 100·(exp(t - c) - t) at x = c + shift (slope 0
#: where the shift is 0): the measurement cell's (|f| ≈ 990, 1-D), the same as a matrix, and one more of size 980,
#: each with a zero whose round-off is RIGHT_ROUND_OFF, the largest any case holds (the matrix's last zero, exact on
#: both sides, takes ZERO_BUG).
PINNED_RIGHT = {"measured": (308.2, (0.02, -0.22, -0.28, -0.53, 0.31, -0.12), (0.0, 4e-3, 0.0, 3e-6, -2e-3, 0.0),
                             (6,)),
                "near 1000": (308.2, (0.02, -0.22, -0.28, -0.53, 0.31, -0.12), (0.0, 4e-3, 0.0, 3e-6, -2e-3, 0.0),
                              (2, 3)),
                "near 1000, again": (421.7, (-0.12, 0.67, 0.15, -0.05, 0.02, -0.26),
                                     (0.0, 4e-3, 0.0, 3e-6, -2e-3, 0.0), (3, 2))}
#: The same kind of function with a gradient of exactly 50 (the smallest the text calls large) at index 1, where a
#: 1 % to 2 % error is planted at every seed.
PERCENT_AT_50 = (308.2, (0.02, -0.22, -0.28, -0.53, 0.31, -0.12), (0.0, math.log(1.5), 0.0, 3e-6, -2e-3, 0.0), (3, 2))


def _pinned(offset: float, c, shift, shape) -> tuple[torch.Tensor, torch.Tensor, float]:
    c = torch.tensor(c, dtype=torch.float64)
    f = lambda t: offset + (100 * (torch.exp(t.reshape(-1) - c) - t.reshape(-1))).sum()  # noqa: E731
    x = (c + torch.tensor(shift, dtype=torch.float64)).reshape(shape)
    return autograd_gradient(f, x)[0], central_difference(f, x)[0], abs(float(f(x)))


def _plant(analytic: torch.Tensor, numerical: torch.Tensor, at: int, bug: str, gen: torch.Generator) -> None:
    flat = analytic.view(-1)
    if bug == "tiny":
        flat[at] *= 1.6
    elif bug == "zero":  # ZERO_BUG away from the central difference: round-off neither adds nor takes away
        flat[at] = numerical.view(-1)[at] + ZERO_BUG * choice(gen, [-1.0, 1.0])
    elif bug == "sign":
        flat[at] = -flat[at]
    elif bug == "dropped":
        flat[at] = 0.0
    else:
        flat[at] *= 1 + float(uniform(gen, (), 0.01, 0.02)) * choice(gen, [-1.0, 1.0])


#: The visible cases: (shape, kinds in flat order, planted mistake or None, its flat position).
VISIBLE_CHECKS = [
    ((6,), ["large", "tiny", "zero", "unused", "tiny", "zero"], None, None),
    ((2, 3), ["tiny", "zero", "large", "zero", "tiny", "unused"], None, None),
    ((), ["tiny"], None, None),
    ((2, 3), ["zero", "large", "tiny", "tiny", "zero", "unused"], "tiny", 3),
    ((3, 2), ["large", "tiny", "zero", "unused", "tiny", "zero"], "zero", 5),
    ((2, 3, 2), ["tiny", "zero", "large", "unused", "tiny", "zero", "large", "tiny", "zero", "unused", "tiny",
                 "large"], "sign", 6),
    ((4,), ["zero", "tiny", "tiny", "large"], "sign", 1),
    ((2, 2), ["tiny", "large", "zero", "large"], "percent", 3),
    ((3,), ["large", "zero", "tiny"], "percent", 0),
    ((), ["large"], "dropped", 0),
]
CHECK_SHAPES = [(5,), (2, 3), (3, 2), (2, 2, 3), (3, 4)]
#: Pinned at every seed: two planted mistakes in non-square matrices, at positions every usual wrong unravelling
#: (_wrong_unravels) moves, so an index unravelled wrongly always fails twice and is named.
PINNED_BUGS = {"tiny": ((2, 3), 4), "zero": ((3, 4), 6)}


def _checker_plan(grading_seed: int | None) -> list:
    if grading_seed is None:
        return VISIBLE_CHECKS
    gen = generator("01/gradient_checker", grading_seed)
    plan = []
    for bug in (None, None, None, "tiny", "zero", "sign", "sign", "percent", "percent", "dropped"):
        shape = PINNED_BUGS[bug][0] if bug in PINNED_BUGS else choice(gen, CHECK_SHAPES)
        count = math.prod(shape)
        kinds = [KINDS[int(k)] for k in torch.randint(len(KINDS), (count,), generator=gen)]
        kinds[int(torch.randint(count, (), generator=gen))] = "tiny"  # every case holds a tiny gradient
        at = None
        if bug is not None:
            at = PINNED_BUGS[bug][1] if bug in PINNED_BUGS else int(torch.randint(count, (), generator=gen))
            if bug == "sign" and plan[-1][2] == "sign":  # the second sign flip at a tiny gradient
                kinds[at] = "tiny"
            else:
                kinds[at] = BUG_KIND[bug]
        if kinds.count("large") > 2:  # |f| stays below 1000: the size the part's text promises
            kinds = [k if k != "large" or i == at else "tiny" for i, k in enumerate(kinds)]
        plan.append((shape, kinds, bug, at))
    plan.append(((), ["tiny"], None, None))
    return plan


def _checker_cases(grading_seed: int | None):
    """(analytic, numerical, |f|, bug, flat position of the bug): the plan, then the corners pinned at every seed,
    PINNED_RIGHT and the function near 1000 with ZERO_BUG at its last zero."""
    gen = generator("01/gradient_checker/visible" if grading_seed is None else "01/gradient_checker/values",
                    0 if grading_seed is None else grading_seed)
    for shape, kinds, bug, at in _checker_plan(grading_seed):
        analytic, numerical, size = _gradient_pair(gen, shape, kinds)
        if bug is not None:
            _plant(analytic, numerical, at, bug, gen)
        yield analytic, numerical, size, bug, at
    for spec in PINNED_RIGHT.values():
        yield *_pinned(*spec), None, None
    analytic, numerical, size = _pinned(*PERCENT_AT_50)  # the smallest large gradient, 1 % to 2 % off
    _plant(analytic, numerical, 1, "percent", generator("01/gradient_checker/percent at 50", 0))
    yield analytic, numerical, size, "percent", 1
    analytic, numerical, size = _pinned(*PINNED_RIGHT["near 1000"])
    _plant(analytic, numerical, 5, "zero", generator("01/gradient_checker/near 1000", 0))
    yield analytic, numerical, size, "zero", 5


def _index_of(flat: int, shape: torch.Size) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))


def _wrong_unravels(index: tuple[int, ...], shape: tuple[int, ...]) -> set[tuple[int, ...]]:
    """The indices the usual wrong unravellings of ``index``'s flat position give: the sizes peeled off from the first
    dimension (then reversed), column-major order, and for a matrix divmod by the number of rows. The first and the
    last equal the right index for a square matrix: only a non-square or 3-D shape tells them apart."""
    flat = 0
    for i, n in zip(index, shape):
        flat = flat * n + i
    peeled, rest = [], flat
    for n in shape:
        peeled.append(rest % n)
        rest //= n
    column_major, rest = [], flat
    for n in shape:
        column_major.append(rest % n)
        rest //= n
    wrong = {tuple(reversed(peeled)), tuple(column_major)}
    if len(shape) == 2:
        wrong.add(divmod(flat, shape[0]))
    return wrong - {tuple(index)}


def _index_tuple(index, *, what: str, shape: tuple[int, ...], want: tuple[int, ...] | None) -> tuple[int, ...]:
    """The learner's index as a tuple of ints, or the failure naming what it is instead."""
    __tracebackhide__ = True
    dims = len(shape)
    expected = "an empty tuple, (), for a 0-d tensor" if dims == 0 else \
        f"a tuple with one integer per dimension ({dims} here)"
    where = "" if want is None else f", here {want}"
    if isinstance(index, numbers.Integral) or (isinstance(index, torch.Tensor) and index.dim() == 0):
        raise GradingFailure(f"{what} returned the index {fmt(index)}, a single number; expected {expected}{where}.",
                             suspects=(FLAT_INDEX,))
    if type(index) is not tuple:
        raise GradingFailure(f"{what} returned the index as {type(index).__name__} ({index!r:.60}); expected a "
                             "tuple of ints.")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in index):  # numpy.int64 is not an int
        kinds = ", ".join(sorted({f"{type(i).__module__}.{type(i).__name__}".removeprefix("builtins.")
                                  for i in index}))
        message = (f"{what} returned the index {fmt(index)} made of {kinds}; expected Python ints, as the "
                   "part asks.")
        if all(isinstance(i, (torch.Tensor, numbers.Integral)) for i in index):  # tensors or NumPy integers
            raise proven_failure(message, NOT_PLAIN_PYTHON)
        raise GradingFailure(message)
    if len(index) != dims:
        raise GradingFailure(f"{what} returned the index {index}, with {len(index)} entries; expected "
                             f"{expected}{where}.", suspects=(FLAT_INDEX,) if len(index) == 1 and dims > 1 else ())
    index = tuple(int(i) for i in index)
    if any(not 0 <= i < n for i, n in zip(index, shape)):
        wrong = (WRONG_UNRAVEL,) if want is not None and index in _wrong_unravels(want, shape) else ()
        raise GradingFailure(f"{what} returned the index {index}, outside the shape {shape}.", suspects=wrong)
    return index


def _run_checker(worst_relative_error, analytic: torch.Tensor, numerical: torch.Tensor, size: float,
                 bug: str | None, at: int | None) -> None:
    __tracebackhide__ = True
    what = f"worst_relative_error(analytic={fmt(analytic)}, numerical={fmt(numerical)})"
    # The caller's own tensors: an answer that changes them (in place, even if undone) fails.
    answer = call_learner(worst_relative_error, analytic, numerical, what=what)
    error, index = _tuple_of(answer, ("worst_error", "worst_index"), what=what)
    if isinstance(error, torch.Tensor):
        raise proven_failure(f"{what} returned the worst error as a tensor ({fmt(error)}); the part asks for a "
                             "Python float.", NOT_PLAIN_PYTHON)
    if not isinstance(error, float):
        raise GradingFailure(f"{what} returned the worst error as {type(error).__name__} ({error!r:.60}); expected "
                             "a Python float.")
    shape = tuple(analytic.shape)
    want = None if at is None else _index_of(at, analytic.shape)
    source = (f"numerical: a float64 central difference (h = 1e-6) of a function of size |f| ≈ {size:.0f}; "
              f"analytic: autograd's gradient")
    zero_anywhere = bool((analytic == 0).any())
    if not math.isfinite(error):
        raise GradingFailure(f"{what} returned the worst error {fmt(error)}; a checker needs a number to compare "
                             f"with the tolerance {TOLERANCE:g}. ({source}.)", suspects=(NO_GUARD,) * zero_anywhere)
    index = _index_tuple(index, what=what, shape=shape, want=want)
    a, n = float(analytic[index]), float(numerical[index])
    small = max(abs(a), abs(n)) < 1e-2
    if bug is None:
        if error > TOLERANCE:
            largest = float((analytic - numerical).abs().max())
            raise GradingFailure(
                f"{what} returned the worst error {fmt(error)}, above the tolerance {TOLERANCE:g}, so the check "
                f"fails this gradient, but it is right: {source}, unchanged. The two differ by at most "
                f"{largest:.1e} anywhere, round-off. At the element you report, {index}, analytic {a:.6g} and "
                f"numerical {n:.6g}.", suspects=(FLOOR_BELOW_ROUND_OFF,) * small)
        return
    a_bug, n_bug = float(analytic.view(-1)[at]), float(numerical.view(-1)[at])
    planted = (f"{source}, with ONE element of it made wrong, at {want}: analytic {a_bug:.6g} where the central "
               f"difference says {n_bug:.6g}")
    if not error > TOLERANCE:
        suspects = []
        if bug == "sign":
            suspects.append(SIZES_NOT_DIFFERENCE)
        if max(abs(a_bug), abs(n_bug)) < 1e-2:
            suspects.append(FLOOR_TOO_LARGE)
        raise GradingFailure(f"{what} returned the worst error {fmt(error)}, within the tolerance {TOLERANCE:g}, so "
                             f"the check passes this gradient, but it is wrong: {planted}.", suspects=tuple(suspects))
    if index != want:
        suspects = [WRONG_UNRAVEL] if index in _wrong_unravels(want, shape) else []
        if small and index != want:
            suspects.append(FLOOR_BELOW_ROUND_OFF)
        raise GradingFailure(f"{what} reported the worst element at {index} (analytic {a:.6g}, numerical {n:.6g}); "
                             f"{planted}, and everywhere else the two agree to round-off.", suspects=tuple(suspects))
    if bug == "percent":
        relative = abs(a_bug - n_bug) / abs(n_bug)
        if not relative / PERCENT_BAND <= error <= PERCENT_BAND * relative:
            raise GradingFailure(
                f"{what} returned the worst error {fmt(error)} at {want}, where the gradient ({n_bug:.6g}) is off by "
                f"{abs(a_bug - n_bug):.4g}, a relative error of {relative:.4g}: where the gradient is large, the "
                f"error is relative to its size, and the part accepts within a factor {PERCENT_BAND:g} of that "
                f"relative error. ({planted}.)",
                suspects=(ABSOLUTE,) * math.isclose(error, abs(a_bug - n_bug), rel_tol=1e-6)
                + (SUM_OF_SIZES,) * math.isclose(error * (abs(a_bug) + abs(n_bug)), abs(a_bug - n_bug), rel_tol=0.02))


@check
def check_worst_relative_error(worst_relative_error, grading_seed: int | None = None) -> None:
    """Part C: worst_relative_error(analytic, numerical) returns (worst error as a float, its index as a tuple of
    ints), leaving both tensors unchanged; "the worst error > TOLERANCE" must fail every planted wrong gradient, at
    the planted element, and pass every right one.

    Domain: two float64 tensors of one shape (0-d, 1-D, non-square 2-D, 3-D), numerical a float64 central difference
    at h = 1e-6 of a function of size below 1000, analytic autograd's gradient (right) or that gradient with
    ONE element wrong by at least 1 % and 1e-4 (BUGS). Every case holds tiny gradients; most hold exact zeros on one
    side (round-off against an exact 0, "zero") or both ("unused"). Pinned at every seed (PINNED_RIGHT): the
    measurement cell's gradient and two functions of size near 1000 whose round-off reaches RIGHT_ROUND_OFF (no case
    exceeds it), one also with ZERO_BUG planted at a zero; so the verdicts pin the floor between RIGHT_ROUND_OFF /
    TOLERANCE (FLOOR_BELOW_ROUND_OFF below it) and ZERO_BUG / TOLERANCE (FLOOR_TOO_LARGE above it) whatever the
    seed; a sign flip catches ||a| - |n|| (SIZES_NOT_DIFFERENCE); a 1 % to 2 % error on a gradient of 50 or more
    (one pinned at 50, PERCENT_AT_50, every seed) must report within PERCENT_BAND of its relative error (ABSOLUTE;
    SUM_OF_SIZES, |a| + |n| + 1, reports half); a non-finite error is NO_GUARD; index type, length, range and
    unravelling as _index_tuple says.

    The floors (of max(|a|, |n|)) that pass, the same at every seed, measured: from 0.114 (0.11 fails, 0.12 passes)
    to 90 (85 passes, 100 fails). The lower end is the round-off of a right gradient of a function of size 990 (near
    the largest the text allows, and the measurement cell's), so a floor read off the measurement passes and a round
    guess below it (0.1) fails; the upper end is set by the text's "about 0.01 where the gradient is 50 or more"
    (a floor above 90 reports a 1 % error at 50 as less than 0.0056), below ZERO_BUG / TOLERANCE = 105 (the smallest
    error the text promises to catch). The hint's range (0.2 to 50) lies inside.
    """
    __tracebackhide__ = True
    for analytic, numerical, size, bug, at in _checker_cases(grading_seed):
        with trial():
            _run_checker(worst_relative_error, analytic, numerical, size, bug, at)

