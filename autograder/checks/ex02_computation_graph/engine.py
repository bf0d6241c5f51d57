"""Part D: the whole engine against autograd, and the bug hunt."""


from __future__ import annotations

import contextvars
from collections.abc import Sequence

import torch

from ...checking import (
    GradingFailure,
    Misconception,
    Route,
    as_answer,
    call_learner,
    check,
    expect_close,
    fmt,
    proven_failure,
    trial,
)
from ...oracles import as_float64, autograd_gradient, central_difference
from ...routes import MISCONCEPTIONS as ROUTE_MISCONCEPTIONS
from ...seeding import generator, uniform
from .backward import _two_routes, check_backward
from .operations import check_arithmetic, check_functions
from .programs import (
    Program,
    Step,
    _oracles,
    _random_program,
    _read,
    _run_backward,
    _run_torch,
    _run_values,
    _value_class,
)

# Part D: the whole engine

def _check_engine_case(Value, program: Program, values: Sequence[float]) -> None:
    __tracebackhide__ = True
    what = f"your engine on\n    {program.text(chr(10) + '    ')}\n  with {program.at(values)}:"
    nodes = _run_values(Value, program, values)
    out = nodes[-1]
    expected = _run_torch(program, as_float64(*values))
    expect_close(_read(out, "data", f"{what} out"), expected, what=f"{what} out.data", source="expected")
    _run_backward(out, what.removesuffix(":"))
    grads, fds = _oracles(program, values)
    for i, name in enumerate(program.inputs):
        expect_close(_read(nodes[i], "grad", f"{what} {name}"), grads[i], fd=fds[i], what=f"{what} {name}.grad")


def _branches() -> Program:
    """Reflected -, / and * (a number on the left), the same node twice, relu on both sides of 0, reuse, an integer
    power of a negative number.

    Safe for x in [-1.5, -1], y in [0.5, 1]: u5 <= -3 (dead relu), u7 >= 0.5 (live relu), u2 >= 2, u14 = x**3 < 0.
    """
    return Program(("x", "y"), (
        Step("*", (0, 1)), Step("-", (1.5, 2)), Step("*", (3, 3)), Step("*", (0.25, 4)),  # u1..u4
        Step("-", (0, 3)), Step("relu", (6,)), Step("+", (3, 0)), Step("relu", (8,)),  # u5..u8
        Step("*", (9, 1)), Step("/", (2.0, 3)), Step("+", (5, 7)), Step("+", (12, 10)), Step("+", (13, 11)),  # ..u13
        Step("**", (0,), 3), Step("+", (14, 15))))


def _updates() -> Program:
    """In-place forms whose old node is used again, a number on the left of +, **, tanh, exp, log.

    Safe for x in [0.6, 1], y in [-2, -1.2]: the tanh input u9 stays in [-1.2, -0.4] (so 1 - t and 1 - t² differ),
    the log input u14 >= 1.36, and out >= 0.7.
    """
    return Program(("x", "y"), (
        Step("*", (0, 1)), Step("**", (0,), 3), Step("+=", (2, 3)), Step("*=", (4, 0.5)),  # u1..u4
        Step("/", (2, 3.0)), Step("-", (5, 6)), Step("/", (1.0, 1)), Step("-=", (7, 8)),  # u5..u8
        Step("neg", (9,)), Step("tanh", (10,)), Step("neg", (2,)), Step("exp", (12,)),  # u9..u12
        Step("*", (0, 0)), Step("+", (1.0, 14)), Step("log", (15,)),  # u13..u15
        Step("+", (11, 13)), Step("+", (17, 16)), Step("/=", (18, 2.0)), Step("**", (19,), 2)))


def _zeros() -> Program:
    """A node that is exactly 0 (x - x) used as a factor, as a base of ** 3 and as a numerator, and a negative x under
    ** 2 and ** -2: the corners of Parts A and B, inside one graph.

    Safe for x in [-1.5, -0.6], y in [0.5, 1.5]: y is the only divisor.
    """
    return Program(("x", "y"), (
        Step("-", (0, 0)), Step("*", (2, 1)), Step("**", (2,), 3), Step("**", (0,), 2),  # u1..u4
        Step("**", (0,), -2), Step("/", (2, 1)), Step("+", (3, 4)), Step("+", (8, 5)),  # u5..u8
        Step("+", (9, 6)), Step("+", (10, 7))))


def _engine_cases(grading_seed: int | None) -> list[tuple[Program, tuple[float, ...]]]:
    if grading_seed is None:
        return [(_two_routes(), (3.0, 5.0)), (_branches(), (-1.25, 0.75)), (_updates(), (0.8, -1.6)),
                (_zeros(), (-1.1, 0.8))]
    gen = generator("02/engine", grading_seed)
    corners = generator("02/engine/corners", grading_seed)
    return [(_branches(), _point(gen, (-1.5, -1.0), (0.5, 1.0))), (_updates(), _point(gen, (0.6, 1.0), (-2.0, -1.2))),
            (_zeros(), _point(corners, (-1.5, -0.6), (0.5, 1.5))),
            *(_random_program(gen, in_place=True) for _ in range(2))]


def _point(gen: torch.Generator, *ranges: tuple[float, float]) -> tuple[float, ...]:
    return tuple(round(float(uniform(gen, (), low, high)), 3) for low, high in ranges)


@check
def check_engine(Value, grading_seed: int | None = None) -> None:
    """Part D: the whole engine (operators, functions, backward) against autograd and finite differences.

    Domain: the union of Parts A-C's, in one graph: expressions with numbers on either side (a number on the left of
    +, -, * and / in the pinned programs), reused nodes, in-place forms whose old node is still used, relu on both
    sides of 0, and random DAGs over three inputs (fewer than 40 nodes). Pinned at every seed: _branches, _updates
    and _zeros (an exact 0 as a factor, a base and a numerator; a negative base under even
    powers), with drawn inputs. Contract: "your whole engine against PyTorch" -> out.data and every input's .grad
    against float64 autograd and central differences; a failure names the first of Parts A-C that fails too.
    """
    __tracebackhide__ = True
    Value = _value_class(Value)
    where: list[str] = []
    for program, values in _engine_cases(grading_seed):
        with trial():
            try:
                _check_engine_case(Value, program, values)
            except GradingFailure as failure:
                where = where or [_which_part(Value)]
                raise GradingFailure(f"{failure.message}\n{where[0]}", suspects=failure.suspects,
                                     proven=failure.proven) from None


def _which_part(Value) -> str:
    """Where a whole-engine failure comes from: the first of Parts A-C whose public cases fail, and the first failure
    there (its test cell names the mistake). Run in a fresh context, outside this check's trials."""
    for part, part_check in (("A", check_arithmetic), ("B", check_functions), ("C", check_backward)):
        try:
            contextvars.Context().run(part_check.__wrapped__, Value)
        except GradingFailure as failure:
            return f"Part {part}'s test fails too (see its test cell for the likely mistake): " \
                   f"{failure.message.splitlines()[0]}"
    return ("Parts A-C pass on their own, so look at how the pieces meet: does every operation return a new Value "
            "with its inputs in _prev, and does backward() use only _prev and _backward?")


# ---------------------------------------------------------------------------------------------------------------
# Part D: the bug hunt (the notebook's three helpers, each of which builds a Value from a float read from .data;
# third_moment's cut loses the route through the mean, variance's and log_softmax_first's cost nothing)

#: The helpers, the buggy one, and where the notebook asks for the gap (engine minus central differences) of it.
HELPERS, BUGGY, GAP_AT = ("log_softmax_first", "variance", "third_moment"), "third_moment", (0.5, -1.0, 2.0)
BLAMED_DATA = Misconception(
    "blamed a harmless read of .data",
    "A Value built from a float read from .data is a constant to backward. That costs nothing where the value does not "
    "depend on that number to first order (softmax ignores a shift shared by every input; the sum of squared "
    "deviations is flat in the centre at the mean) and loses the route through it everywhere else. Only a "
    "measurement settles which: your engine's gradient against central differences of the same helper.",
    "At the numbers you measured, did the helper you named disagree with central differences at all?")
CUT_GRAPH = Misconception(
    "the graph still cut at a value rebuilt from .data",
    "A Value made from a plain number (Value(x.data), or any float from .data) is a new leaf: backward stops there, "
    "and the route through it is lost. Compute every part of the value that depends on the inputs from the Values.",
    "Which of your result's nodes are leaves that are none of the inputs?")
TORCH_FOR_ENGINE = Misconception(
    "let PyTorch's autograd compute the fix's gradients instead of your engine",
    "The fix is a graph on your own engine: Value operations that keep the route through the mean, so that your "
    "backward() reaches every input along it. Gradients that torch computed and copied into a node say nothing about "
    "whether your engine's graph is whole.",
    "Which engine computes the gradients your fix reports: yours, or PyTorch's?")
GAP_SIGN = Misconception("the gap measured the other way round (central differences minus engine)",
                         "The gap is engine_gradient minus numeric_gradient: positive where the engine's is too large.")


def _third_moment(values: torch.Tensor, cut: bool = False) -> torch.Tensor:
    return ((values - (values.mean().detach() if cut else values.mean())) ** 3).mean()


#: Each helper of the notebook as float64 torch, with its read of .data as a detach (what the engine computes).
AS_WRITTEN = {"log_softmax_first": lambda v: torch.log_softmax(v - v.max().detach(), 0)[0],
              "variance": lambda v: ((v - v.mean().detach()) ** 2).mean(),
              "third_moment": lambda v: _third_moment(v, cut=True)}


def _hunt_points(grading_seed: int | None) -> list[list[float]]:
    if grading_seed is None:  # not GAP_AT: a failure there would print the gradient the gap is measured from
        return [[0.8, -1.4, 0.3], [1.5, 0.25, -0.75, 1.0]]
    gen = generator("02/bug_hunt", grading_seed)
    return [[round(float(v), 3) for v in uniform(gen, (n,), 0.3, 2.0) * torch.tensor([1.0, -1.0] * 3)[:n]]
            for n in (3, 4, 5)]


@check
def check_bug_hunt(Value, buggy, gap, fixed, grading_seed: int | None = None) -> None:
    """Part D, the hunt: ``buggy`` names the helper whose gradients are wrong (third_moment: its mean, rebuilt from
    .data, is a constant to backward, and the third moment is not flat in the mean); ``gap`` is the measurement that
    shows it, engine gradient minus central differences of that helper at GAP_AT; ``fixed(values)`` computes
    third_moment's value with the gradient of that value, on the learner's engine.

    Domain: lists of 3 to 5 Values of magnitude 0.3 to 2, signs mixed (never all equal). Contracts and their checks:
    "the name of the helper" -> one of HELPERS, BUGGY (a decoy named is BLAMED_DATA, proven, with the decoy's
    gradient as written against central differences); "engine gradient minus numeric gradient" -> 3 numbers (a
    list, a tuple or a tensor) against the float64 gap of the helper as written (GAP_SIGN: proven when
    all three match); "the same value" -> out.data against float64; "right gradients" -> every input's .grad
    against autograd and central differences (CUT_GRAPH when they are the gradients with the mean held constant).
    """
    __tracebackhide__ = True
    Value = _value_class(Value)
    at = torch.tensor(GAP_AT, dtype=torch.float64)
    if buggy != BUGGY:
        if buggy in HELPERS:
            written, fd = autograd_gradient(AS_WRITTEN[buggy], at)[0], central_difference(AS_WRITTEN[buggy], at)[0]
            raise proven_failure(f"buggy = {buggy!r}: at {list(GAP_AT)}, {buggy} as written (.data read as a constant) "
                                 f"has the gradient {fmt(written)}, and central differences of its value give "
                                 f"{fmt(fd)}: they agree, so its read of .data costs nothing.", BLAMED_DATA)
        raise GradingFailure(f"buggy = {buggy!r:.60}; expected the name of one of the helpers, {', '.join(HELPERS)}.")
    with trial():
        written, truth = autograd_gradient(AS_WRITTEN[BUGGY], at)[0], autograd_gradient(_third_moment, at)[0]
        plain = type(gap) in (list, tuple) and all(type(x) in (int, float) for x in gap)  # else a tensor, or fail
        got = as_answer(torch.tensor(gap, dtype=torch.float64) if plain else gap, what=f"gap = {gap!r:.60}", shape=(3,))
        # Not expect_close: its message would print the gap itself, and the gap is the measurement asked for.
        wrong = [i + 1 for i in range(3) if not torch.isclose(got[i], written[i] - truth[i], rtol=1e-6, atol=1e-8)]
        if wrong:
            message = (f"gap, {BUGGY}'s engine gradient minus central differences at {list(GAP_AT)}, is wrong at "
                       f"input {', '.join(map(str, wrong))} of 3 (allowed: rel 1e-06 + abs 1e-08).\n  your gap:  "
                       f"{fmt(got)}\n  Measure {BUGGY} at these numbers with engine_gradient and numeric_gradient "
                       "and subtract, input by input.")
            if torch.allclose(got, truth - written, rtol=1e-6, atol=1e-8):  # three numbers that match exactly
                raise proven_failure(message, GAP_SIGN)
            raise GradingFailure(message)
    for numbers in _hunt_points(grading_seed):
        with trial():
            what = f"fixed(values) with values = [{', '.join(f'Value({n})' for n in numbers)}]"
            values = [Value(n) for n in numbers]
            try:
                out = call_learner(fixed, values, what=what, forbid=[Route.AUTOGRAD])
            except GradingFailure as failure:  # named for what this part asks: operations of the learner's engine
                if failure.proven is ROUTE_MISCONCEPTIONS[Route.AUTOGRAD]:
                    raise proven_failure(failure.message, TORCH_FOR_ENGINE) from None
                raise
            vector = torch.tensor(numbers, dtype=torch.float64)
            expect_close(_read(out, "data", what), _third_moment(vector), what=f"{what}: .data",
                         source="third_moment's value")
            _run_backward(out, what)
            grads, cut = (autograd_gradient(lambda v, c=c: _third_moment(v, c), vector)[0] for c in (False, True))
            fd = central_difference(_third_moment, vector)[0]
            got = torch.stack([_read(v, "grad", f"{what} .grad") for v in values])
            expect_close(got, grads, fd=fd, what=f"{what}: the inputs' .grad", symptoms=[CUT_GRAPH.looks_like(cut)])


