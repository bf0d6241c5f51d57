"""Part B of exercise 01: the routes of u = x·y, v = sin(u) + x, z = u·v, the gradient they add up to, and what
twelve backward engines (rule order, += or =) keep of them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch

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
from ...misconceptions import armed
from ...seeding import generator, uniform
from ...time_limit import OutOfTime, time_limit
from .answers import _python_number, _tuple_of

# ---------------------------------------------------------------------------------------------- Part B

HARD_CODED = Misconception("hard-coded answer", "Your answer here is the one the visible test expects, but this "
                           "input is different: compute the result from the arguments.",
    question="Do your numbers come from the arguments, or from the visible test?")
MISSING_INNER = Misconception(
    "missing the inner derivative",
    "A route multiplies EVERY local derivative along its edges, including the first one out of the input: a route "
    "from x through u = x·y carries the factor ∂u/∂x = y (and from y, ∂u/∂y = x).",
    question="Does each route's product include its first arrow, the one out of x (or y)?")
SIN_SIGN = Misconception("derivative of sin taken as -cos", "d(sin u)/du = cos u, with a plus sign (it is the "
                         "derivative of cos that carries the minus).",
    question="What is the slope of sin at 0: +1 or -1?")
WRONG_POINT = Misconception(
    "local derivative evaluated at the wrong input",
    "A local derivative is evaluated at the value that went INTO its operation: sin receives u = x·y, not x, so its "
    "local derivative is taken at u. Forward values first, then the local derivatives at those values.",
    question="Which value goes into sin here, and at which value is its local derivative taken?")
OWN_FACTOR = Misconception(
    "product rule: own factor instead of the other",
    "For z = u·v, ∂z/∂u = v and ∂z/∂v = u: each input of a product receives the OTHER factor.",
    question="Nudge u by ε in the product u·v: by how much does the product move?")
STOPPED_EARLY = Misconception("route stopped before the output", "A route's product runs all the way from x to z: "
    "every arrow along it contributes its local derivative, the last one, into z, included. Your share for the route "
    "x → v → z stops after its first arrow.", question="Does each route's product run all the way to z?")


def _forward(x: float, y: float) -> tuple[float, float]:
    u = x * y
    return u, math.sin(u) + x


def _all_routes(x: float, y: float, *, inner: bool = True, sign: float = 1.0, cos_at_x: bool = False,
                own: bool = False) -> tuple[tuple[float, float, float], tuple[float, float]]:
    """The routes of x (x→u→z, x→u→v→z, x→v→z) and of y (y→u→z, y→u→v→z), right or made with one of the
    catalogued mistakes: no inner derivative, the wrong sign of sin's derivative, cos taken at x, the own factor."""
    u, v = _forward(x, y)
    du_dx, du_dy = (y, x) if inner else (1.0, 1.0)
    dv_du = sign * math.cos(x if cos_at_x else u)
    dz_du, dz_dv = (u, v) if own else (v, u)
    return (du_dx * dz_du, du_dx * dv_du * dz_dv, dz_dv), (du_dy * dz_du, du_dy * dv_du * dz_dv)


def _routes(x: float, y: float) -> tuple[float, float, float]: return _all_routes(x, y)[0]


def _y_routes(x: float, y: float) -> tuple[float, float]: return _all_routes(x, y)[1]


def _mistaken(x: float, y: float) -> dict[Misconception, tuple]:
    """What each catalogued mistake gives for (routes of x, routes of y) at (x, y)."""
    return {MISSING_INNER: _all_routes(x, y, inner=False), SIN_SIGN: _all_routes(x, y, sign=-1.0),
            WRONG_POINT: _all_routes(x, y, cos_at_x=True), OWN_FACTOR: _all_routes(x, y, own=True)}


def _well_separated(x: float, y: float) -> bool:
    """Every catalogued mistake changes every number it touches by more than 5 %, so no diagnosis hides."""
    u, v = _forward(x, y)
    right = [*_routes(x, y), *_y_routes(x, y), sum(_routes(x, y)), sum(_y_routes(x, y))]
    for routes, y_routes in _mistaken(x, y).values():
        wrong = [*routes, *y_routes, sum(routes), sum(y_routes)]
        if any(abs(w - r) <= 0.05 * abs(r) for w, r in zip(wrong, right) if w != r):
            return False
    parts = [*_routes(x, y), *_y_routes(x, y)]
    return (min(abs(p) for p in parts) > 0.2 and abs(abs(u) - 1) > 0.1 and abs(v) > 0.3
            and abs(sum(_routes(x, y))) > 0.2 and abs(sum(_y_routes(x, y))) > 0.2
            and min(abs(a - b) for i, a in enumerate(parts) for b in parts[i + 1:]) > 0.05)


VISIBLE_POINTS = [(1.2, 0.6), (-1.5, 0.8)]
#: Corners of Part B's domain (x and y are any real numbers): both sign patterns, x = 0 and y = 0, where u = x·y = 0
#: and a local derivative computed by dividing by x, y or u raises. The visible test runs the first set, the hidden
#: test the second, at every seed, before its drawn points.
VISIBLE_CORNERS = [(1.4, -1.2), (0.0, 0.7), (1.3, 0.0)]
HIDDEN_CORNERS = [(1.5, -0.6), (-1.3, 0.6), (0.0, -1.1), (-0.9, 0.0)]
#: A formula derived by hand is exact to ~1e-15 in float64 at these well-separated points; a central difference is
#: off by ~1e-10, so this tolerance tells them apart.
EXACT = 1e-11

DIVIDED_BY_ZERO = Misconception(
    "a local derivative obtained by dividing by a value that can be 0",
    "∂u/∂x = y and ∂u/∂y = x can be read straight off u = x·y; computing them as u / x or u / y (or ∂z/∂u as "
    "z / u) raises where that value is 0, and x = 0 or y = 0 is a point like any other. Write each local derivative "
    "from its operation's rule, with no division.",
    question="Which of your local derivatives divides by a value that can be 0, and can it be read off its "
             "operation instead?")


def _derivation_points(stream: str, grading_seed: int | None) -> list[tuple[float, float]]:
    """The visible points and corners, or the hidden corners and three random points where every mistake shows
    clearly."""
    if grading_seed is None:
        return [*VISIBLE_POINTS, *VISIBLE_CORNERS]
    gen = generator(stream, grading_seed)
    points: list[tuple[float, float]] = []
    while len(points) < 3:
        x, y = (round(float(v) * (1 if float(s) < 0.5 else -1), 3) for v, s in
                zip(uniform(gen, (2,), 0.5, 2.0), torch.rand(2, generator=gen)))
        if _well_separated(x, y):
            points.append((x, y))
    return [*HIDDEN_CORNERS, *points]


def _call_derivation(fn, x: float, y: float, *, what: str):
    """Call a Part B answer (no autograd); a division by zero at a point where x or y is 0 is the mistake seen."""
    __tracebackhide__ = True
    try:
        return call_learner(fn, x, y, what=what, forbid=[Route.AUTOGRAD])
    except GradingFailure as failure:
        if failure.proven is None and 0.0 in (x, y) and failure.message.startswith(f"{what} raised ZeroDivision"):
            raise proven_failure(failure.message, DIVIDED_BY_ZERO) from None
        raise


def _numbers(answer, names: tuple[str, ...], *, what: str) -> tuple[float, ...]:
    __tracebackhide__ = True
    answer = _tuple_of(answer, names, what=what)
    return tuple(_python_number(a, what=what, name=n) for a, n in zip(answer, names))


def _hard_coded(grading_seed: int | None, values: list[float]) -> list[Symptom]:
    """In the hidden test, the answer a learner who copied the visible test's numbers would give."""
    return [] if grading_seed is None else [HARD_CODED.looks_like(value, rtol=1e-6) for value in values]


#: The routes to z, as the part asks them written: the variables each passes through, from x (or y) to z.
ROUTES = (("x", "u", "z"), ("x", "u", "v", "z"), ("x", "v", "z"))
Y_ROUTES = (("y", "u", "z"), ("y", "u", "v", "z"))
#: The edges of the graph of u = x·y, v = sin(u) + x, z = u·v: each variable and the variables computed from it.
EDGES = {"x": ("u", "v"), "y": ("u",), "u": ("v", "z"), "v": ("z",), "z": ()}
MISSED_ROUTE = Misconception(
    "missed a route",
    "An input reaches z along every path of arrows from it to z, and a path branches wherever a variable is used by "
    "more than one equation (x is used twice, and so is another variable). Read each equation for the variables it "
    "uses and follow every arrow out of x, and out of y, to the end.",
    "Which variables does each equation use? Follow every arrow that leaves x, and every one that leaves y: where "
    "does each one lead?")


def _show_route(route) -> str:
    return " → ".join(route) if isinstance(route, tuple) else repr(route)


def _route_dict(answer, *, what: str) -> dict[tuple[str, ...], float]:
    """The learner's {route: share} as numbers; the routes must be exactly x's and y's routes to z."""
    __tracebackhide__ = True
    example = '("y", "u", "z")'
    if not isinstance(answer, dict):
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.80}); expected a dict with one "
                             f"entry per route from x or y to z, each route a tuple of variable names such as "
                             f"{example}.")
    for route in answer:
        if not isinstance(route, tuple) or not route or not all(isinstance(name, str) for name in route):
            raise GradingFailure(f"{what} has the key {route!r:.60}; a route is a tuple of variable names, from x or "
                                 f"y to z, such as {example}.")
        if route[0] not in ("x", "y") or route[-1] != "z":
            raise GradingFailure(f"{what} has the key {route!r}: a route starts at \"x\" or \"y\" and ends at "
                                 "\"z\".")
        missing_edge = next(((a, b) for a, b in zip(route, route[1:]) if b not in EDGES.get(a, ())), None)
        if missing_edge is not None:
            a, b = missing_edge
            raise GradingFailure(f"{what} has the route {_show_route(route)}, but no equation computes {b} from {a} "
                                 "directly: every step of a route is one equation's input → its result.")
    for start, routes in (("x", ROUTES), ("y", Y_ROUTES)):
        if any(route not in answer for route in routes):
            listed = [_show_route(route) for route in answer if route[0] == start] or ["none"]
            raise GradingFailure(f"{what} lists {len(listed) - (listed == ['none'])} route(s) of {start}, "
                                 f"{', '.join(listed)}, and misses some path of arrows from {start} to z.",
                                 suspects=(MISSED_ROUTE,))
    return {route: _python_number(answer[route], what=what, name=f"the route {_show_route(route)}")
            for route in ROUTES + Y_ROUTES}


def _digits(got: float, want: float) -> str:
    """A line with every digit of both numbers, when the usual 8 digits show them equal."""
    return f"  to 17 digits:       yours {got!r}, expected {want!r}" if fmt(got) == fmt(want) else ""


@check
def check_routes(routes_to_z, grading_seed: int | None = None) -> None:
    """Part B1: routes_to_z(x, y) returns {route: share} for every route from x to z, (x, u, z), (x, u, v, z) and
    (x, v, z), and from y to z, (y, u, z) and (y, u, v, z), for u = x·y, v = sin(u) + x, z = u·v, as Python floats,
    by hand (no autograd).

    Domain: x and y are Python floats, any real numbers (the text sets no range): both signs, and 0 (pinned:
    VISIBLE_CORNERS, HIDDEN_CORNERS at every seed). Contracts and their checks: "a dict with one entry per route
    from x or y to z, the key the tuple of the variables it passes through" -> a dict whose keys are tuples of str,
    each a path of EDGES from "x" or "y" to "z", all five routes there (MISSED_ROUTE when some are missing: neither
    their count nor the routes are said); "the value that route's share" -> each compared with its own route (the
    right numbers on other routes are said so); "return Python floats, not tensors" -> _python_number (a tensor is
    TENSOR_FOR_NUMBER); "no autograd" -> Route.AUTOGRAD forbidden; "exact to a relative 1e-11" -> rtol=EXACT.
    """
    __tracebackhide__ = True
    for x, y in _derivation_points("01/routes", grading_seed):
        with trial():
            what = f"routes_to_z({x!r}, {y!r})"  # floats as floats: 0.0, not 0
            shares = _route_dict(_call_derivation(routes_to_z, x, y, what=what), what=what)
            mistaken = _mistaken(x, y)
            for side, (routes, right) in enumerate(((ROUTES, _routes(x, y)), (Y_ROUTES, _y_routes(x, y)))):
                answer = tuple(shares[route] for route in routes)
                if all(math.isclose(a, r, rel_tol=1e-9) for a, r in zip(sorted(answer), sorted(right))) and \
                        not all(math.isclose(a, r, rel_tol=1e-9) for a, r in zip(answer, right)):
                    raise GradingFailure(f"{what} returned the right numbers for {routes[0][0]}'s routes, "
                                         f"{fmt(sorted(answer))}, but some on the wrong routes: each route's share is "
                                         "the product of the local derivatives along that route.")
                for k, route in enumerate(routes):
                    symptoms = [m.looks_like(values[side][k], rtol=1e-6) for m, values in mistaken.items()]
                    if route == ("x", "v", "z"):
                        symptoms.append(STOPPED_EARLY.looks_like(1.0, rtol=1e-6))
                    symptoms += _hard_coded(grading_seed, [_all_routes(*point)[side][k] for point in VISIBLE_POINTS])
                    expect_close(answer[k], right[k], what=f"{what}: the route {_show_route(route)}", rtol=EXACT,
                                 atol=1e-12, source="expected", symptoms=symptoms,
                                 extra=_digits(answer[k], right[k]))


# ---------------------------------------------------------------------------------------------- Part B2

#: The labels of a chain a_0 → a_1 → ... → a_n with skip arrows a_j → a_{j+2}: main[j] on a_j → a_{j+1}, skip[j] on
#: a_j → a_{j+2}. The routes from a_0 to a_n number Fibonacci(n + 1): 2.5e12 at n = 60.
FACTORED = Misconception(
    "each variable's incoming labels summed, and those sums multiplied along the chain",
    "A product of per-variable sums picks one incoming arrow at EVERY variable, as if every route entered every "
    "a_k; a route that takes the skip arrow over a_k never enters it, so most of those products are no route at all "
    "(and some routes are missing).",
    question="With every label 1 and n = 3, how many routes lead from a_0 to a_3, and what does your product give?")
MAIN_ONLY = Misconception(
    "only the route along the main arrows",
    "A skip arrow starts routes too: a route from a_0 to a_n may take any mix of main and skip arrows, and the sum "
    "runs over all of them.",
    question="Which routes from a_0 to a_n use a skip arrow, and are they in your sum?")
UNMIXED = Misconception(
    "only the routes that never mix the two kinds of arrow",
    "A route may take a main arrow, then a skip arrow, then a main arrow again: the routes that mix the two kinds "
    "are routes too, and there are far more of them than the two unmixed ones.",
    question="With n = 3, which routes take one main arrow and one skip arrow, and are they in your sum?")
AVERAGED = Misconception(
    "routes averaged instead of added",
    "Lesson 01's pitfall: routes are never averaged. Each route is its own contribution to the derivative, so the "
    "products of all the routes are added, at every variable where routes meet as well as at a_n.",
    question="With n = 2, main = [2, 3] and skip = [5], the two routes carry 6 and 5: what is their sum, and what "
             "did your function return?")
LISTED = Misconception(
    "listed the routes one by one",
    "Writing out every route, as the lesson does for two routes, takes as many steps as there are routes, and a "
    "chain of n = 60 with skip arrows has about 2.5e12 of them: no program lists them. The sum has to be built "
    "without visiting the routes one at a time.",
    question="Write the sums for n = 2, 3 and 4 by hand, with letters for the labels: which sums of the shorter "
             "chains appear inside the longer ones?")
#: Seconds one call of route_sum may run: a sum that does not list the routes takes well under a millisecond at n = 60;
#: listing them finishes n = 20 (10,946 routes) within it, never n = 60 (2.5e12).
ROUTE_BUDGET = 1.0
#: Visible cases (main, skip): one arrow; the smallest skip; mixed signs; every label 1 (the route count) at n = 3
#: and n = 60; main arrows all 0 at an odd and an even n (only skip arrows left); a chain of n = 40 with labels
#: between -1 and 1.
VISIBLE_CHAINS = [([2.0], []), ([2.0, 3.0], [5.0]), ([2.0, -3.0, 0.5, -1.5], [0.25, 4.0, 1.5]),
                  ([1.0] * 3, [1.0] * 2), ([1.0] * 60, [1.0] * 59), ([0.0] * 7, [2.0, -1.0, 3.0, 0.5, 1.5, 2.0]),
                  ([0.0] * 6, [2.0, -1.0, 3.0, 0.5, 1.5]),
                  ([round(math.cos(0.3 * j + 0.7), 3) for j in range(40)], [round(1 - 0.04 * j, 3) for j in range(39)])]


def _chain_sums(main, skip, absolute: bool = False) -> float:
    """The sum over routes from a_0 to a_n of the product of their labels, computed exactly (fractions), and the
    float nearest to it; with ``absolute`` the same sum over the labels' absolute values (the round-off scale)."""
    from fractions import Fraction
    into = [Fraction(1)] + [Fraction(0)] * len(main)
    value = (lambda t: abs(Fraction(t))) if absolute else Fraction
    for k in range(1, len(main) + 1):
        into[k] = into[k - 1] * value(main[k - 1]) + (into[k - 2] * value(skip[k - 2]) if k >= 2 else 0)
    return float(into[-1])


def _labels(values: list[float]) -> str:
    """A list of labels as the failure message shows it: all of a short one, the start and end of a long one."""
    shown = [f"{v:g}" for v in values]
    return f"[{', '.join(shown)}]" if len(values) <= 8 else \
        f"[{', '.join(shown[:4])}, ... ({len(values) - 6} more), {', '.join(shown[-2:])}]"


def _chain_mistakes(main, skip) -> dict[Misconception, float]:
    n = len(main)
    factored = math.prod(main[k - 1] + (skip[k - 2] if k >= 2 else 0.0) for k in range(1, n + 1))
    unmixed = math.prod(main) + (math.prod(skip[0::2]) if n % 2 == 0 else 0.0)
    into = [1.0] + [0.0] * n   # the lesson's averaging mistake, at every variable where two routes meet
    for k in range(1, n + 1):
        into[k] = into[k - 1] * main[k - 1] if k < 2 else (into[k - 1] * main[k - 1] + into[k - 2] * skip[k - 2]) / 2
    return {FACTORED: factored, MAIN_ONLY: math.prod(main), UNMIXED: unmixed, AVERAGED: into[-1]}


def _chain_cases(grading_seed: int | None) -> list[tuple[list[float], list[float]]]:
    """The visible chains, or corners (n = 1, n = 2, main arrows 0, every label 1) and three drawn chains."""
    if grading_seed is None:
        return VISIBLE_CHAINS
    gen = generator("01/route_sum", grading_seed)
    lengths = [int(n) for n in torch.randint(20, 61, (5,), generator=gen)]

    def labels(count: int) -> list[float]:
        sizes = uniform(gen, (count,), 0.3, 1.6)
        signs = torch.where(torch.rand(count, generator=gen) < 0.3, -1.0, 1.0)
        return [round(float(v), 3) for v in sizes * signs]

    # Odd and even n alike; at an odd n the unmixed routes are the main chain alone, so the even ones tell UNMIXED.
    odd, count, drawn = lengths[0] | 1, lengths[1] & ~1, [lengths[2] & ~1, lengths[3] & ~1, lengths[4] | 1]
    cases = [(labels(1), []), (labels(2), labels(1)), ([0.0] * odd, labels(odd - 1)),
             ([1.0] * count, [1.0] * (count - 1))]
    cases += [(labels(n), labels(n - 1)) for n in drawn]
    return cases


@check
def check_route_sum(route_sum, grading_seed: int | None = None) -> None:
    """Part B2: route_sum(main, skip) returns the sum over every route from a_0 to a_n of the product of its labels,
    main[j] the label of a_j → a_{j+1} (n of them), skip[j] that of a_j → a_{j+2} (n - 1), as a Python float.

    Domain: n from 1 to 60, labels any real numbers (both signs and 0). Cases: VISIBLE_CHAINS, or n = 1, n = 2, main
    labels all 0 at an odd n, every label 1 at a drawn n, and drawn chains (n from 20 to 60) at every seed. Compared
    with the exact sum (fractions) to a relative 1e-11 plus 1e-12 times the sum over the labels' absolute values (the
    round-off of any order of float64 sums). No autograd. FACTORED (the lesson's "add at a node, multiply along"
    applied per variable: the ported answer), MAIN_ONLY, UNMIXED and AVERAGED (the lesson's pitfall, at every
    variable where routes meet) by their numbers; HARD_CODED in the hidden test. Each call has ROUTE_BUDGET seconds:
    an answer that lists the routes (the lesson's way, Fibonacci(n + 1) of them) is stopped at the first long chain,
    and the check with it, a proven LISTED, with n, the route count and how far its sums were right.
    """
    __tracebackhide__ = True
    visible, right_so_far = [_chain_sums(main, skip) for main, skip in VISIBLE_CHAINS], []
    for main, skip in _chain_cases(grading_seed):
        with trial():
            what = f"route_sum(main, skip) with n = {len(main)}, main = {_labels(main)}, skip = {_labels(skip)}"
            count = int(_chain_sums([1.0] * len(main), [1.0] * len(skip)))
            try:
                with time_limit(ROUTE_BUDGET):
                    answer = call_learner(route_sum, list(main), list(skip), what=what, forbid=[Route.AUTOGRAD])
            except OutOfTime as out:
                done = ", ".join(map(str, sorted(set(right_so_far))))
                shorter = f" Your sums for the shorter chains (n = {done}) were right." if done else ""
                out.failure = proven_failure(
                    f"{what} was still running after {ROUTE_BUDGET:g} s, so the test stopped it (and this test's "
                    f"other cases). This chain has {count:,} routes from a_0 to a_{len(main)} ({count:.1e}): a "
                    f"function that visits them one at a time cannot finish.{shorter} The sum has to come from "
                    "fewer steps than there are routes.", LISTED)
                raise
            got = _python_number(answer, what=what, name="the sum")
            right, scale = _chain_sums(main, skip), _chain_sums(main, skip, absolute=True)
            if abs(got - right) <= EXACT * abs(right) + 1e-12 * scale:
                right_so_far.append(len(main))
                continue
            symptoms = [m.looks_like(value, rtol=1e-9, atol=1e-12) for m, value in _chain_mistakes(main, skip).items()]
            symptoms += _hard_coded(grading_seed, visible)
            wanted, yours = torch.tensor(right, dtype=torch.float64), torch.tensor(got, dtype=torch.float64)
            suspects = tuple(dict.fromkeys(s.misconception for s in armed(symptoms, wanted, rtol=EXACT,
                                                                          atol=1e-12 * scale) if s.matches(yours)))
            raise GradingFailure(f"{what}: your sum, {got!r}, is not the sum over the {count} routes from a_0 to "
                                 f"a_{len(main)} of the products of their labels. "
                                 f"{_shortest_wrong(route_sum, main, skip)}", suspects=suspects)


def _chain_routes(main, skip) -> list[tuple[str, float]]:
    """Every route from a_0 to a_n of a short chain, written out, with its product."""
    n, found = len(main), []

    def walk(at: int, path: list[int], product: float) -> None:
        if at == n:
            found.append((" → ".join(f"a_{k}" for k in path), product))
        for step, labels in ((1, main), (2, skip)):
            if at + step <= n:
                walk(at + step, [*path, at + step], product * labels[at])

    walk(0, [0], 1.0)
    return found


def _shortest_wrong(route_sum, main, skip) -> str:
    """The shortest start of the chain where the learner's sum is already wrong, with its routes when it is short:
    evidence that never states the sum of the failing case."""
    __tracebackhide__ = True
    for m in range(1, len(main) + 1):
        head, head_skip = list(main[:m]), list(skip[:m - 1])
        what = f"route_sum({_labels(head)}, {_labels(head_skip)})"
        got = _python_number(call_learner(route_sum, head, head_skip, what=what, forbid=[Route.AUTOGRAD]),
                             what=what, name="the sum")
        right, scale = _chain_sums(head, head_skip), _chain_sums(head, head_skip, absolute=True)
        if not abs(got - right) <= EXACT * abs(right) + 1e-12 * scale:   # nan included
            break
    else:
        return "Yet every shorter start of this chain gets its sum right: does your function give the same number " \
               "for the same labels each time it is called?"
    if m <= 4:
        routes = "; ".join(f"{path} (product {product:g})" for path, product in _chain_routes(head, head_skip))
        start = "Its routes are" if m == len(main) else \
            f"Its first {m} main label(s) alone already go wrong: {what} returns {got!r}, and that chain's routes are"
        return f"{start} {routes}. Which of them does your sum leave out, or count in a way no route is?"
    return (f"Your sums are right for the chains made of its first 1 to {m - 1} main labels, and wrong from {m} on: "
            f"{what} returns {got!r}. What does the last variable add to the routes of the shorter chains?")


#: The orders an engine may run the three rules in (the backward order is z, v, u), each tested with both writes.
ORDERS = tuple(itertools.permutations(("z", "v", "u")))
LOSES_NOTHING = Misconception("reported the true gradient for an engine that loses shares", "An engine reports what "
    "its rules leave in x.grad and y.grad: a rule run before every share reached the .grad it reads passes on what is "
    "there then, and a rule writing = replaces the share before it. Only one order and one write lose nothing.",
    question="When this engine runs u's rule, which shares has u.grad received, and which survive the writes?")
ORDER_IGNORED = Misconception("traced the backward order z, v, u whatever order the engine runs", "The rules run in "
    "the order given, each reading its .grad as it stands then: a share that reaches u after u's rule ran is lost.",
    question="In this order, which shares has u.grad received when u's rule runs?")
WRITE_IGNORED = Misconception("the engine that writes = traced as if it added", "With =, a rule replaces what the "
    ".grad held: of the shares written into one .grad, only the last one stays.",
    question="Which rule writes x.grad last in this order, and what did x.grad hold before?")
FIRST_WRITE_KEPT = Misconception("with =, the first share written kept instead of the last", "= replaces what a "
    ".grad held: a later write wins.", question="After two rules wrote x.grad with =, which share does it hold?")


def _engine(x: float, y: float, order, write: str, *, first_kept: bool = False) -> tuple[float, float]:
    """(x.grad, y.grad) after the rules run in ``order``, each writing "+=" or "="; ``first_kept``: = writes only
    into a .grad that holds 0 (FIRST_WRITE_KEPT)."""
    (u, v), grad = _forward(x, y), {"z": 1.0, "u": 0.0, "v": 0.0, "x": 0.0, "y": 0.0}
    rules = {"z": (("u", v), ("v", u)), "v": (("u", math.cos(u)), ("x", 1.0)), "u": (("x", y), ("y", x))}
    for rule, (target, local) in ((name, edge) for name in order for edge in rules[name]):
        share, kept = grad[rule] * local, first_kept and grad[target] != 0.0
        grad[target] = grad[target] + share if write == "+=" else grad[target] if kept else share
    return grad["x"], grad["y"]


def _fits(value: float, routes, shares) -> list[tuple]:
    """Every set of ``routes`` whose shares sum to ``value`` (the empty set sums to 0)."""
    return [subset for k in range(len(routes) + 1) for subset in itertools.combinations(routes, k)
            if math.isclose(value, sum(shares[routes.index(r)] for r in subset), rel_tol=1e-9, abs_tol=1e-12)]


def _held(fits: list[tuple]) -> str:
    """The sets of routes a value is the sum of, said in words, never the right value."""
    words = ["the empty sum (no route's share)" if not fit else f"the share of {_show_route(fit[0])}"
             if len(fit) == 1 else f"the sum of the shares of {' + '.join(map(_show_route, fit))}" for fit in fits]
    return words[0] if len(words) == 1 else f"here both {words[0]} and {words[1]}" if len(words) == 2 else \
        f"here each of {', '.join(words)}"


def _tells_apart(x: float, y: float) -> bool:
    """Whether at (x, y) every set of x's routes, and every set of y's, has a sum of shares of its own: only there
    does a wrong number point at one mistake (where x or y is 0 every share is 0, and every mistake reports 0)."""
    return all(len(_fits(sum(c), routes, shares)) == 1 for routes, shares in ((ROUTES, _routes(x, y)),
                                                                              (Y_ROUTES, _y_routes(x, y)))
               for k in range(len(routes) + 1) for c in itertools.combinations(shares, k))


@check
def check_engine_reports(engine_reports, grading_seed: int | None = None) -> None:
    """Part B3: engine_reports(x, y, order, write) returns (x.grad, y.grad) of an engine that runs z's, v's and u's
    rules in ``order`` (each of ORDERS), each rule reading its own .grad as it stands and writing its shares with
    ``write`` ("+=" or "="), z.grad = 1 and the others 0 first. Domain as check_routes, all twelve engines at every
    point, the points where the routes are told apart first (_tells_apart). A wrong value is described by the routes
    whose shares it sums (_fits), never by the expected value, or as no such sum (a local derivative to check);
    LOSES_NOTHING (the ported lesson: every share), ORDER_IGNORED, WRITE_IGNORED and FIRST_WRITE_KEPT by their
    numbers, only at points that tell the routes apart (elsewhere many mistakes report the same 0)."""
    __tracebackhide__ = True
    points = sorted(_derivation_points("01/engine", grading_seed), key=lambda p: not _tells_apart(*p))
    for (x, y), order, write in itertools.product(points, ORDERS, ("+=", "=")):
        with trial():
            what = f"engine_reports({x!r}, {y!r}, {order!r}, {write!r})"
            answer = _numbers(call_learner(engine_reports, x, y, order, write, what=what, forbid=[Route.AUTOGRAD]),
                              ("x_grad", "y_grad"), what=what)
            mistakes = {LOSES_NOTHING: (sum(_routes(x, y)), sum(_y_routes(x, y))),
                        ORDER_IGNORED: _engine(x, y, ("z", "v", "u"), write),
                        WRITE_IGNORED: _engine(x, y, order, "+=" if write == "=" else "="),
                        FIRST_WRITE_KEPT: _engine(x, y, order, write, first_kept=write == "=")}
            for k, (routes, shares) in enumerate(((ROUTES, _routes(x, y)), (Y_ROUTES, _y_routes(x, y)))):
                got, want = answer[k], _engine(x, y, order, write)[k]
                if not math.isclose(got, want, rel_tol=EXACT, abs_tol=1e-12):
                    symptoms = armed([m.looks_like(values[k], rtol=1e-9, atol=1e-12) for m, values in mistakes.items()],
                                     torch.tensor(want, dtype=torch.float64), rtol=EXACT, atol=1e-12)
                    name, fits = routes[0][0], _fits(got, routes, shares)
                    exact = ("This engine loses nothing: it reports the true gradient, the sum of every share "
                             f"routes_to_z gives {name}. ") * (order == ("z", "v", "u") and write == "+=")
                    question = (f"Which shares reach {name}.grad, and which does a later write replace?" if fits else
                                "No set of routes gives this number: which local derivative in your rules differs "
                                "from its arrow's, taken at the forward values?")
                    held = _held(fits) if fits else "no sum of the routes' shares"
                    raise GradingFailure(
                        f"{what}: your {name}_grad, {got:.10g}, is {held} (a route's share: the product of the local "
                        f"derivatives along it), and not what this engine leaves in {name}.grad. {exact}{question}",
                        suspects=tuple(s.misconception for s in symptoms if _tells_apart(x, y)
                                       and s.matches(torch.tensor(got, dtype=torch.float64))))


#: Where the check measures an engine for Part B4's evidence: no two sums of x's (or y's) shares lie within 0.3.
PROBE = (0.9, 1.4)
ALL_ROUTES = frozenset(ROUTES + Y_ROUTES)
ALL_SURVIVE = Misconception("every route kept, whatever the engine", "An engine keeps only the shares its rules "
    "leave in x.grad and y.grad: a rule run before a share reached its .grad, or a = that replaced it, loses routes.",
    question="In this engine, which shares reach x.grad and stay there?")
NOT_MEASURED = Misconception("routes decided without running the engine", "Which routes an engine keeps is a "
    "property of that engine, and the only way to it here is what the engine reports: your function never called the "
    "engine it was given.", question="What does this engine report, at a point you choose?")
TWELVE_TABLE = Misconception(
    "routes looked up among the twelve engines, not read off this engine's numbers",
    "Your set is the one some engine of engine_reports keeps, but this engine is none of the twelve: it keeps other "
    "routes, and the numbers it reported to you do not sum to your routes' shares.",
    question="At the point you measured, do your routes' shares add up to what this engine reported?")
MEASURED_AT_ZERO = Misconception("routes decided where every share is 0", "Where x or y is 0, u = x·y is 0, and with "
    "it every share of x's routes and the share of y → u → v → z: many sets of routes sum to the same number there, "
    "so a measurement at such a point cannot tell them apart. The routes an engine keeps do not depend on the point, "
    "the numbers that show them do.",
    question="At the point you measured, do different sets of routes give different sums?")
MEASURED_AT_TIE = Misconception(
    "measured where two sets of routes give the same sum",
    "At the point you measured, two different sets of routes have the same sum of shares (a share of 0 where "
    "cos u = 0, or two equal shares, as where sin u = 0): the engine's number fits both, and you picked the wrong one. "
    "A point where every sum is different decides.",
    question="At your point, which two sets of routes sum to the same number?")
TOO_TIGHT = Misconception(
    "a comparison tighter than the engine's round-off",
    "Your set is empty, yet at a point you measured the engine reported a number other than 0 that one set of "
    "routes fits: no set passed your comparison. The engine's numbers are its sums up "
    "to round-off (the part allows a relative 1e-12), so an exact == or a tolerance below that rejects the right set "
    "too.", question="By how much does the engine's number differ from the sum of the set that fits it best, and "
                     "does your comparison allow that much?")
#: Engines beyond the twelve (x's routes kept, y's routes kept, as positions in ROUTES and Y_ROUTES): none of the
#: twelve keeps these sets, so only a measurement answers them. The visible test runs these, the hidden test draws.
UNSEEN_VISIBLE = (((0, 1), (1,)), ((1, 2), ()), ((0,), (1,)))


def _kept(order, write) -> frozenset[tuple[str, ...]]:
    """The routes whose shares the engine's x.grad and y.grad hold, read off at PROBE (unique there)."""
    kept: set = set()
    for k, (routes, shares) in enumerate(((ROUTES, _routes(*PROBE)), (Y_ROUTES, _y_routes(*PROBE)))):
        kept |= set(_fits(_engine(*PROBE, order, write)[k], routes, shares)[0])
    return frozenset(kept)


TWELVE = {_kept(order, write) for order, write in itertools.product(ORDERS, ("+=", "="))}


def _keeping(kept: frozenset) -> Callable:
    """An engine that keeps the shares of the routes in ``kept``: (x.grad, y.grad) as Python floats."""
    def engine(x, y):
        x, y = float(x), float(y)
        return tuple(sum((s for r, s in zip(routes, shares) if r in kept), 0.0)
                     for routes, shares in ((ROUTES, _routes(x, y)), (Y_ROUTES, _y_routes(x, y))))
    return engine


def _running(order, write) -> Callable:
    """The engine of engine_reports that runs ``order`` with ``write``, as a function of (x, y) alone."""
    return lambda x, y: _engine(float(x), float(y), order, write)


def _engines(grading_seed: int | None) -> list[tuple[str, Callable, frozenset]]:
    """(how the engine is named, the engine, the routes it keeps): the twelve of engine_reports, then engines that
    keep sets of routes none of them keeps (UNSEEN_VISIBLE, or three drawn from the grading seed)."""
    engines = [(f"the engine {order!r} with {write!r}", _running(order, write), _kept(order, write))
               for order, write in itertools.product(ORDERS, ("+=", "="))]
    if grading_seed is None:
        unseen = [frozenset([ROUTES[i] for i in xs] + [Y_ROUTES[i] for i in ys]) for xs, ys in UNSEEN_VISIBLE]
    else:
        gen, unseen = generator("01/surviving", grading_seed), []
        while len(unseen) < 3:
            bits = torch.rand(5, generator=gen) < 0.5
            kept = frozenset(r for r, b in zip(ROUTES + Y_ROUTES, bits.tolist()) if b)
            if kept not in TWELVE and kept not in unseen:
                unseen.append(kept)
    engines += [("an engine none of engine_reports' twelve is", _keeping(kept), kept) for kept in unseen]
    return [(name, _rounded(engine), kept) for name, engine, kept in engines]


#: The relative round-off every engine's numbers carry, as a float64 engine adding in an order of its own would: far
#: below what tells two sums apart at a point that decides, but it breaks a tie (two sets with the same sum, as where
#: cos u = 0 or sin u = 0) away from the set that happens to come first.
ROUND_OFF = 2.0**-43


def _rounded(engine: Callable) -> Callable:
    return lambda x, y: tuple(r * (1 + ROUND_OFF) for r in engine(x, y))


def _sums(routes, x: float, y: float) -> tuple[float, float]:
    shares = dict(zip(ROUTES + Y_ROUTES, (*_routes(x, y), *_y_routes(x, y))))
    return tuple(sum((shares[r] for r in routes if r[0] == start), 0.0) for start in "xy")


def _diagnosis(answer: frozenset, kept: frozenset, calls: list) -> tuple[Misconception, ...]:
    """The mistake a wrong set shows, from where the learner ran the engine: never, at a point where its numbers fit
    the wrong set too (every share 0, or a tie), or elsewhere with a set one of the twelve engines keeps."""
    if not calls:
        return (ALL_SURVIVE,) if answer == ALL_ROUTES else (NOT_MEASURED,)
    fitting = [p for p in calls if all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in
                                       zip(_sums(answer, *p), _sums(kept, *p)))]
    if fitting:
        return (MEASURED_AT_ZERO,) if all(0.0 in p for p in fitting) else (MEASURED_AT_TIE,)
    if answer in TWELVE and kept not in TWELVE:
        return (TWELVE_TABLE,)
    if not answer and kept:   # no set passed the learner's comparison, for either input, on one of the twelve
        return (TOO_TIGHT,)
    return (ALL_SURVIVE,) * (answer == ALL_ROUTES)


@check
def check_surviving_routes(surviving_routes, grading_seed: int | None = None) -> None:
    """Part B4: surviving_routes(engine) returns the set of routes (x's and y's, tuples from the start variable to
    "z") whose shares ``engine`` keeps, engine(x, y) -> (x.grad, y.grad) a black box whose numbers are, at every
    point, the sums of the shares of one fixed set of routes: the twelve engines of check_engine_reports, and engines
    keeping sets none of them keeps (_engines), so a table of the twelve fails. The engine records where it was run.
    Evidence on failure: that engine's x.grad and y.grad at PROBE and what the learner's routes sum to there, never
    the set. ALL_SURVIVE (the ported lesson), NOT_MEASURED, MEASURED_AT_ZERO, MEASURED_AT_TIE, TOO_TIGHT and
    TWELVE_TABLE as _diagnosis decides them from where the engine ran."""
    __tracebackhide__ = True
    for name, engine, kept in _engines(grading_seed):
        with trial():
            what, calls = f"surviving_routes(engine) for {name}", []

            def recorded(x, y, engine=engine, calls=calls):
                reports = engine(x, y)
                if len(calls) < 1000:
                    calls.append((float(x), float(y)))
                return reports

            answer = call_learner(surviving_routes, recorded, what=what, forbid=[Route.AUTOGRAD])
            if not isinstance(answer, (set, frozenset)) or not all(r in ALL_ROUTES for r in answer):
                raise GradingFailure(f"{what} returned {answer!r:.100}; expected a set of routes, each a tuple "
                                     'from "x" or "y" to "z", as routes_to_z\'s keys, such as ("y", "u", "z").')
            if frozenset(answer) != kept:
                x_grad, y_grad = engine(*PROBE)
                sums = _sums(answer, *PROBE)
                raise GradingFailure(
                    f"{what} returned {sorted(answer)}, not the routes this engine keeps. The test's own measurement, "
                    f"at (x, y) = {PROBE} (not necessarily your point): the engine reports x.grad {x_grad:.6g} "
                    f"and y.grad {y_grad:.6g}; the routes you "
                    f"returned carry shares that sum to {sums[0]:.6g} for x and {sums[1]:.6g} for y. Which routes' "
                    "shares add up to what the engine reports?",
                    suspects=_diagnosis(frozenset(answer), kept, calls))
