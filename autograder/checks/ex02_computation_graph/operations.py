"""Parts A and B: one operation at a time, the learner's local rules run by the course's traversal."""


from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...checking import (
    GradingFailure,
    Route,
    Symptom,
    call_learner,
    check,
    expect_close,
    fmt,
    proven_failure,
    trial,
)
from ...oracles import as_float64
from ...seeding import choice, generator, uniform
from .misconceptions import (
    DIVIDES_BY_OPERAND,
    MAX_LOSER,
    MAX_TIE,
    NO_RULE,
    NO_UPSTREAM,
    NOT_RECORDED,
    ONE_SHARE,
    OVERWRITE,
    OVERWRITE_NO_UPSTREAM,
    PART_B_IN_A,
    POW,
    POW_ABS,
    RDIV,
    RELU,
    RSUB,
    SIGN,
    TANH,
    TANH_CANCELS,
    TANH_INPUT,
    TANH_OVERFLOW,
    TANH_ZEROED,
)
from .programs import (
    METHODS,
    Program,
    Step,
    _ancestors,
    _is_node,
    _local_rule,
    _oracles,
    _propagate,
    _read,
    _run_torch,
    _run_values,
    _signed,
    _uses_part_b,
    _value_class,
    _without_part_b,
    _write,
)

# Parts A and B: one operation at a time

@dataclass(frozen=True)
class Case:
    """One operation, its input values, the gradient its output receives, and what the inputs hold already."""

    program: Program
    values: tuple[float, ...]
    upstream: float
    preset: tuple[float, ...]


def _one_step(op: str, *args, exponent=None) -> Program:
    inputs = ("a", "b")[: 1 + max((a for a in args if isinstance(a, int)), default=0)]
    return Program(("x",) if exponent is not None or op in METHODS else inputs,
                   (Step(op, tuple(args), exponent),))


def _data_mistakes(program: Program, values: Sequence[float]) -> list[Symptom]:
    """Forward-value mistakes of reflected operators: c - a computed as a - c, c / a as a / c."""
    step = program.steps[0]
    if step.op in ("-", "/") and not isinstance(step.args[0], int):
        constant, a = step.args[0], values[step.args[1]]
        return [RSUB.looks_like(a - constant)] if step.op == "-" else [RDIV.looks_like(a / constant)]
    return []


def _gradient_mistakes(program: Program, values, node: int, upstream: float, preset: float):
    """What the common wrong local rules give for ``node.grad`` in a one-step case."""
    step = program.steps[0]
    arg_values = [values[a] if isinstance(a, int) else a for a in step.args]
    _, partials = _local_rule(step, arg_values)
    shares = [p for a, p in zip(step.args, partials) if _is_node(a, node)]
    total, x = sum(shares), arg_values[0]
    specific = []
    if step.op == "relu":
        specific.append(RELU.looks_like(preset + upstream * (1.0 if x < 0 else 0.0)))
    elif step.op == "tanh":
        t = math.tanh(x)
        specific += [TANH.looks_like(preset + upstream * (1 - t)),
                     TANH_INPUT.looks_like(preset + upstream * (1 - x * x))]
    elif step.op == "**":
        specific.append(POW.looks_like(preset + upstream * x ** (step.exponent - 1)))
        if x != 0:
            specific.append(POW_ABS.looks_like(preset + upstream * step.exponent * abs(x) ** (step.exponent - 1)))
    elif step.op == "/" and not isinstance(step.args[0], int):
        specific.append(RDIV.looks_like(preset + upstream / step.args[0]))
    # A tie of maximum: this input got the whole gradient (twice over for a.maximum(a)) or none of it; "none" is also
    # what a missing rule gives, and at a tie the tie is named instead.
    tie = step.op == "max" and arg_values[0] == arg_values[1]
    if step.op == "max":
        specific += [MAX_TIE.looks_like(preset + len(shares) * upstream), MAX_TIE.looks_like(preset)] if tie \
            else [MAX_LOSER.looks_like(preset + upstream * (1.0 - total))]
    if step.op not in METHODS and step.op not in ("**", "max"):  # a sign slip (for a power, |x| gives the same)
        specific.append(SIGN.looks_like(preset - upstream * total))
    if len(shares) == 2:  # one node on both sides: only one of its two shares arrived
        specific += [ONE_SHARE.looks_like(preset + upstream * p) for p in shares]
    return [*specific, *(OVERWRITE.looks_like(upstream * p) for p in shares), NO_UPSTREAM.looks_like(preset + total),
            *(OVERWRITE_NO_UPSTREAM.looks_like(p) for p in shares), *([] if tie else [NO_RULE.looks_like(preset)])]


def _check_one_step(Value, case: Case) -> None:
    """The forward value, the recorded inputs and each input's accumulated gradient of a one-operation case."""
    __tracebackhide__ = True
    program, values, g = case.program, case.values, case.upstream
    what = f"`{program.text()}` with {program.at(values)}"
    nodes = _run_values(Value, program, values)
    out, inputs = nodes[-1], nodes[: len(values)]
    expected = _run_torch(program, as_float64(*values))
    expect_close(_read(out, "data", what), expected, what=f"{what}: out.data", source="expected",
                 symptoms=_data_mistakes(program, values))
    reachable = call_learner(_ancestors, out, what=f"{what}: following out._prev")
    for name, node in zip(program.inputs, inputs):
        if id(node) not in reachable:
            raise proven_failure(f"{what}: {name} is not among the nodes out was computed from (out._prev, "
                                 "recursively), so no gradient can reach it.", NOT_RECORDED)
    for node, before in zip(inputs, case.preset):
        _write(node, "grad", before, what)
    _write(out, "grad", g, what)
    try:
        call_learner(_propagate, out, what=f"{what}: running the _backward closures with out.grad = {fmt(g)}",
                     forbid=[Route.AUTOGRAD])
    except GradingFailure as failure:
        operands = [values[a] if isinstance(a, int) else a for a in program.steps[0].args]
        if failure.proven is None and 0.0 in operands and "raised ZeroDivisionError" in failure.message:
            raise proven_failure(f"{failure.message}\n  An operand is 0 in this case, and a correct local rule never "
                                 "divides by it.", DIVIDES_BY_OPERAND) from None
        raise
    if _saturated(program, values):
        _expect_exact_tanh(_read(inputs[0], "grad", f"{what}: x"), values[0], g, what=f"{what}: x.grad after out.grad "
                           f"= {fmt(g)} flowed back (x.grad was 0 before)")
        return
    grads, fds = _oracles(program, values, g)
    step = program.steps[0]
    tie = step.op == "max" and len({values[a] if isinstance(a, int) else a for a in step.args}) == 1
    for i, (name, node, before) in enumerate(zip(program.inputs, inputs, case.preset)):
        if tie:
            _expect_tie(_read(node, "grad", f"{what}: {name}"), before + grads[i], program, values, i,
                        what=f"{what}: {name}.grad after out.grad = {fmt(g)} flowed back ({name}.grad was "
                             f"{fmt(before)} before)", symptoms=_gradient_mistakes(program, values, i, g, before))
            continue
        expect_close(_read(node, "grad", f"{what}: {name}"), before + grads[i], fd=before + fds[i],
                     what=f"{what}: {name}.grad after out.grad = {fmt(g)} flowed back ({name}.grad was "
                          f"{fmt(before)} before)",
                     extra=f"  expected:           {fmt(before)} already there + what out.grad {fmt(g)} brings "
                           f"back through `{program.text()}`",
                     symptoms=_gradient_mistakes(program, values, i, g, before))


def _expect_tie(got, expected, program: Program, values: Sequence[float], i: int, *, what: str, symptoms) -> None:
    """x.grad at a tie of maximum: the evidence is the slope of out measured on each side of the tie (float64, a
    step of 1e-6), never the expected value or the error, from which the split could be read off."""
    __tracebackhide__ = True
    try:
        expect_close(got, expected, what=what, symptoms=symptoms)
    except GradingFailure as failure:
        h, at = 1e-6, list(values)
        out = [float(_run_torch(program, as_float64(*at[:i], at[i] + d, *at[i + 1:]))) for d in (h, 0.0, -h)]
        up, down = (out[0] - out[1]) / h, (out[1] - out[2]) / h
        raise GradingFailure(f"{what} is wrong.\n  your value:         {fmt(got)}\n  a tie: the slope of out in "
                             f"{program.inputs[i]}, one side at a time (float64, step 1e-6): {up:.6g} nudged up, "
                             f"{down:.6g} nudged down. Which gradient does that make, and "
                             "what do central differences and torch.maximum say?", suspects=failure.suspects) from None


#: Where tanh counts as saturated (x.grad against the exact derivative): 1 - tanh(x)² has lost 1e-10 of its accuracy.
SATURATED = 8.0
#: Part B's tolerance for tanh's derivative where it saturates: relative, and absolute below the smallest float a
#: few roundings of an accurate form can reach (the derivative is below 1e-300 beyond |x| ≈ 346).
TANH_RTOL, TANH_ATOL = 1e-9, 1e-300


def _saturated(program: Program, values: Sequence[float]) -> bool:
    return program.steps[0].op == "tanh" and abs(values[0]) >= SATURATED


def exact_tanh_derivative(x: float) -> float:
    """sech²(x) = 4 / (e^x + e^-x)², computed with 50 decimal digits (no overflow: decimal's exponent range is vast),
    then rounded to the nearest float."""
    with decimal.localcontext() as context:
        context.prec = 50
        e = decimal.Decimal(abs(x)).exp()
        return float(4 / (e + 1 / e) ** 2)


def _expect_exact_tanh(got, x: float, g: float, *, what: str) -> None:
    """x.grad of a saturated tanh (x.grad 0 before) against g · sech²(x) exactly: autograd and central differences
    in float64 lose it to the same cancellation as 1 - t², so they are shown, not used."""
    __tracebackhide__ = True
    t = math.tanh(x)
    fd = (math.tanh(x + 1e-6) - math.tanh(x - 1e-6)) / 2e-6
    extra = (f"  autograd (float64): {fmt(g * (1 - t * t))} and central differences: {fmt(g * fd)}: both computed "
             "from tanh's rounded values, so neither can tell")
    # 1 - t² names its cancellation only where it is not yet 0 (|x| < 19.1): from there on a 0 is what any rule that
    # drops the tiny derivative gives, named TANH_ZEROED wherever the derivative is still above the allowance.
    exact = exact_tanh_derivative(x)
    symptoms = [TANH_CANCELS.looks_like(g * form, rtol=1e-10, atol=0.0) for form in {1 - t * t, (1 - t) * (1 + t)}
                if form]
    if exact > 2 * TANH_ATOL:
        symptoms.append(TANH_ZEROED.looks_like(0.0, rtol=0.0, atol=0.0))
    expect_close(got, g * exact, what=what, rtol=TANH_RTOL, atol=TANH_ATOL, extra=extra,
                 source="exact (50 digits)", symptoms=symptoms)


# Part A's operations; "c" and "C" stand for two numbers: on either side, the same node twice, in-place forms.
# Operations that are often built from others (a - b as a + (-b)) come after the ones they are built from; the
# reflected - and / come twice (with c and with C), so that a flipped one shows in two cases and can be named; the
# same node on both sides last (a - a, its in-place forms, a / a): two shares on one node that cancel or add, where a
# rule that keeps one share shows (ONE_SHARE; a + a and a * a come earlier).
ARITHMETIC = [("+", (0, 1)), ("+", (0, "c")), ("+", ("c", 0)), ("+", (0, 0)),
              ("*", (0, 1)), ("*", (0, "c")), ("*", ("c", 0)), ("*", (0, 0)),
              ("/", (0, 1)), ("/", (0, "c")), ("/", ("c", 0)), ("neg", (0,)),
              ("-", (0, 1)), ("-", (0, "c")), ("-", ("c", 0)),
              ("+=", (0, 1)), ("-=", (0, 1)), ("*=", (0, 1)), ("/=", (0, "c")),
              ("/", ("C", 0)), ("-", ("C", 0)), ("-", (0, 0)), ("-=", (0, 0)), ("*=", (0, 0)), ("/", (0, 0))]


# maximum's cases: (arguments, a, b); "t" stands for a number equal to a (a tie with a constant). One input wins
# (a, b, or a number), then ties, which are the next case after lesson 02's "max routes": two inputs that are equal,
# a number equal to a, and the same node twice. They come after the cases with a winner, so that a missing rule is
# named by those first.
MAXIMUM = [((0, 1), 3.0, -2.0), ((0, 1), -0.5, 1.25), ((0, 4.0), 3.0, None), ((0, -1.0), 3.0, None),
           ((0, 1), 1.5, 1.5), ((0, 1), -0.75, -0.75), ((0, "t"), 1.5, None), ((0, 0), 3.0, None), ((0, 0), -2.0, None)]


def _maximum_cases(grading_seed: int | None) -> list[Case]:
    """MAXIMUM's cases as listed (visible; upstream 3 for a.maximum(a), where half of 2 is the 1 of a rule without
    out.grad), or at drawn numbers that keep each case's order: who wins, or the tie (hidden)."""
    gen = None if grading_seed is None else generator("02/maximum", grading_seed)
    cases = []
    for args, a, b in MAXIMUM:
        n, other = 1 + (1 in args), b if 1 in args else a if args[1] in (0, "t") else args[1]
        upstream, preset = (3.0 if args == (0, 0) else 2.0), (0.25, -0.5)
        if gen is not None:
            side, a = (other > a) - (other < a), _signed(gen, 0.5, 2.0)
            other = round(a + side * float(uniform(gen, (), 0.5, 2.0)), 3)
            upstream, preset = _signed(gen, 1.5, 3.0), (_signed(gen, 0.2, 1.0), _signed(gen, 0.2, 1.0))
        step = (0, 1) if n == 2 else (0, 0) if args == (0, 0) else (0, other)
        cases.append(Case(_one_step("max", *step), (a, other)[:n], upstream, preset[:n]))
    return cases


# Corners of Part A's domain, visible and at every seed: an operand equal to 0 (a Value, a = 0, on either side of *
# and as the numerator of /, and the number 0 itself), where a local rule that divides by an operand raises. Each is
# (operation, arguments, the value of a); "0" stands for the number 0.
ARITHMETIC_CORNERS = [("*", (0, 1), 0.0), ("*", ("c", 0), 0.0), ("/", (0, 1), 0.0), ("/", (0, "c"), 0.0),
                      ("*", (0, "0"), -1.5)]


def _arithmetic_program(op: str, args: tuple, c: float, big_c: float) -> Program:
    return _one_step(op, *({"c": c, "C": big_c, "0": 0.0}.get(a, a) for a in args))


def _arithmetic_corners(grading_seed: int | None) -> list[Case]:
    if grading_seed is None:
        return [Case(p, (a, -2.0)[: len(p.inputs)], 2.0, (0.25, -0.5)[: len(p.inputs)])
                for p, a in ((_arithmetic_program(op, args, 4.0, -1.5), a) for op, args, a in ARITHMETIC_CORNERS)]
    gen = generator("02/arithmetic/corners", grading_seed)
    cases = []
    for op, args, a in ARITHMETIC_CORNERS:
        program = _arithmetic_program(op, args, _signed(gen, 0.5, 3.0, 2), 0.0)
        n = len(program.inputs)
        cases.append(Case(program, (a, _signed(gen, 0.5, 2.0))[:n], _signed(gen, 1.5, 3.0),
                          tuple(_signed(gen, 0.2, 1.0) for _ in range(n))))
    return cases


def _arithmetic_cases(grading_seed: int | None) -> list[Case]:
    if grading_seed is None:
        programs = [_arithmetic_program(op, args, 4.0, -1.5) for op, args in ARITHMETIC]
        return [*(Case(p, (3.0, -2.0)[: len(p.inputs)], 2.0, (0.25, -0.5)[: len(p.inputs)]) for p in programs),
                *_arithmetic_corners(grading_seed)]
    gen = generator("02/arithmetic", grading_seed)
    cases = _arithmetic_corners(grading_seed)
    for op, args in ARITHMETIC:
        a, b = _signed(gen, 0.5, 2.0), _signed(gen, 0.5, 2.0)
        # Constants of the opposite sign to a: c - a != a - c and c / a != a / c.
        c, big_c = (round(-math.copysign(float(uniform(gen, (), 0.5, 3.0)), a), 2) for _ in range(2))
        program = _arithmetic_program(op, args, c, big_c)
        n = len(program.inputs)
        cases.append(Case(program, (a, b)[:n], _signed(gen, 1.5, 3.0),
                          tuple(_signed(gen, 0.2, 1.0) for _ in range(n))))
    return cases


@check
def check_arithmetic(Value, grading_seed: int | None = None) -> None:
    """Part A: +, -, *, / with Values or numbers on either side, in-place forms and negation, with their local rules.

    Domain: Values holding any real float, numbers (int or float) on either side, a divisor never 0; the same node
    twice (a + a, a * a, a - a, a -= a, a *= a, a / a, a.maximum(a): ONE_SHARE when one of the two shares is
    lost); maximum with a Value or a number as other, a winner on either side or
    a tie (MAXIMUM: the tie split half and half, as central differences and torch.maximum measure, MAX_TIE; the gradient
    to the smaller input, MAX_LOSER); a node that already holds gradient (.grad preset) and an output gradient other
    than 1.
    Pinned at every seed: each operation with both operand orders and in-place forms (ARITHMETIC), reflected - and /
    with a number of the opposite sign to a (so c - a != a - c), and an operand equal to 0 (ARITHMETIC_CORNERS).
    Contracts and their checks: "returns a new Value created as Value(result, (self, other), op)" -> a new Value
    object whose .data is right and whose _prev reaches every input (NOT_RECORDED), operands unchanged (INPLACE);
    "_backward adds local derivative × out.grad to the .grad of each operand" -> preset .grad and upstream other
    than 1 (OVERWRITE, NO_UPSTREAM, SIGN, NO_RULE, DIVIDES_BY_OPERAND); "a plain Python number on either side" ->
    reflected forms (RSUB, RDIV; a reflected method that recurses is REFLECTED_LOOP); "do not write __iadd__" -> +=,
    -=, *=, /= leave the old node as it was; "a new Value" -> the result is never an operand (RETURNED_SELF); "use
    only Part A's operations here, not ** or exp" -> Part B's methods are hidden while this check runs
    (_without_part_b), and a failure for their absence is PART_B_IN_A; no autograd (Route.AUTOGRAD).
    """
    __tracebackhide__ = True
    Value = _value_class(Value)
    with _without_part_b(Value):
        for case in _arithmetic_cases(grading_seed) + _maximum_cases(grading_seed):
            with trial():
                try:
                    _check_one_step(Value, case)
                except GradingFailure as failure:
                    if failure.proven is None and _uses_part_b(failure.message):
                        raise proven_failure(failure.message, PART_B_IN_A) from None
                    raise


def _function_program(op: str, exponent=None) -> Program:
    return _one_step(op, 0, exponent=exponent)


# Part B's visible cases: (operation, exponent, x).
VISIBLE_FUNCTIONS = [("relu", None, 0.75), ("relu", None, -1.5), ("tanh", None, 0.5), ("tanh", None, -1.2),
                     ("exp", None, 0.5), ("log", None, 2.0), ("**", 3, -1.5), ("**", -1, 2.0), ("**", 0.5, 4.0)]
#: Corners of Part B's domain, visible and (with other gradients) at every seed: relu a second time on each side (the
#: text never uses x = 0; two live cases, so that a relu rule without out.grad is named), an integer power at x = 0
#: (where k * out / x raises), a negative base under an even power, 2 and -2 (where |x| ** (k - 1) has the wrong
#: sign).
FUNCTION_CORNERS = [("relu", None, 1.3), ("relu", None, -0.4), ("**", 2, 0.0), ("**", 3, 0.0), ("**", 2, -1.25),
                    ("**", -2, -0.8)]
#: tanh where it saturates, the corners its form decides (x.grad starts at 0, or the tiny gradient would vanish in
#: it): 1 - t² is off by more than 1e-9 from |x| ≈ 9.5 and exactly 0 from 19.1 (TANH_CANCELS); the derivative stays
#: above the 1e-300 allowance up to |x| ≈ 346, so a rule that returns 0 past some cut-off fails in the band from 19.1
#: to 346 (TANH_ZEROED: 1/cosh² is accurate up to 355, where its square overflows); a form through cosh or exp
#: overflows past 355 or 710 (TANH_OVERFLOW). Visible: these; hidden: two x drawn in each signed band, the whole
#: promised domain (|x| from about 10 to 1000) at every seed.
SATURATED_TANH = (12.0, -19.0, 20.0, -25.0, 45.0, -100.0, 200.0, -320.0, 345.0, 400.0, 800.0, -750.0)
SATURATED_BANDS = ((11.0, 18.5), (19.5, 30.0), (30.0, 100.0), (100.0, 200.0), (200.0, 300.0), (300.0, 340.0),
                   (340.0, 345.5), (346.0, 360.0), (360.0, 700.0), (712.0, 1000.0))


def _saturated_cases(grading_seed: int | None) -> list[Case]:
    if grading_seed is None:
        return [Case(_function_program("tanh"), (x,), 2.0, (0.0,)) for x in SATURATED_TANH]
    gen = generator("02/functions/saturated", grading_seed)
    xs = [_signed(gen, low, high, 2) for low, high in SATURATED_BANDS for _ in range(2)]
    return [Case(_function_program("tanh"), (x,), _signed(gen, 1.5, 3.0), (0.0,)) for x in xs]


def _function_cases(grading_seed: int | None) -> list[Case]:
    if grading_seed is None:
        return [*(Case(_function_program(op, k), (x,), 2.0, (0.25,)) for op, k, x in VISIBLE_FUNCTIONS
                  + FUNCTION_CORNERS), *_saturated_cases(None)]
    corners = generator("02/functions/corners", grading_seed)
    cases = [Case(_function_program(op, k), (x,), _signed(corners, 1.5, 3.0), (_signed(corners, 0.2, 1.0),))
             for op, k, x in FUNCTION_CORNERS]
    gen = generator("02/functions", grading_seed)
    int_k, float_k = choice(gen, [2, 3, -1, -2]), choice(gen, [0.5, 1.5, -0.5, 2.5])
    programs = [*(_function_program(op) for op in ("relu", "relu", "tanh", "tanh", "exp", "log")),
                _function_program("**", int_k), _function_program("**", float_k)]
    values = [float(uniform(gen, (), 0.2, 0.95)), -float(uniform(gen, (), 0.3, 2.0)),  # relu on both sides of 0
              _signed(gen, 0.3, 1.5), _signed(gen, 0.3, 1.5),  # tanh twice
              _signed(gen, 0.2, 1.5), float(uniform(gen, (), 0.3, 3.0)),
              -float(uniform(gen, (), 0.5, 2.0)), float(uniform(gen, (), 0.5, 2.5))]  # x ** int with x < 0
    return cases + [Case(p, (round(v, 3),), _signed(gen, 1.5, 3.0), (_signed(gen, 0.2, 1.0),))
                    for p, v in zip(programs, values)] + _saturated_cases(grading_seed)


@check
def check_functions(Value, grading_seed: int | None = None) -> None:
    """Part B: relu, tanh, exp, log and ** by a constant (int or float), with their local rules.

    Domain (as the part's text states it): relu at any x but 0 (the tests never use x = 0), tanh at any x, saturated
    ones included, exp where the result is finite (x below about 709; the tests stay at moderate x), log at x > 0, x
    ** k for a constant k != 0, int or float, wherever the power and its derivative are real (any x for a positive
    int k, 0 included; x != 0 for a negative int k; x > 0 for a fractional k; never 0 ** 0). Pinned at every seed:
    relu twice on each side of 0 (RELU is named only where its value differs from "no gradient at all"; a relu rule
    without out.grad, NO_UPSTREAM, shows on the positive side only), x ** 2 and x ** 3 at x = 0, a negative base
    under k = 2 and k = -2 (FUNCTION_CORNERS); tanh saturated (SATURATED_TANH, SATURATED_BANDS: x.grad against the
    exact sech², 1e-9 relative, where 1 - t² cancels, TANH_CANCELS, over the band up to |x| ≈ 346 where a derivative
    cut to 0 is wrong, TANH_ZEROED, and where cosh or exp overflow, TANH_OVERFLOW);
    an int and a float
    exponent, an int power of a negative base. Contracts and their checks: "a new Value (one input: (self,)) with
    its local rule" -> as Part A (NOT_RECORDED, RETURNED_SELF, OVERWRITE, NO_UPSTREAM); each function's derivative
    -> RELU, TANH, TANH_INPUT, POW, POW_ABS, DIVIDES_BY_OPERAND; "an int or a float" exponent -> both kinds every
    time; no autograd (Route.AUTOGRAD).
    """
    __tracebackhide__ = True
    Value = _value_class(Value)
    for case in _function_cases(grading_seed):
        with trial():
            try:
                _check_one_step(Value, case)
            except GradingFailure as failure:
                step = case.program.steps[0]
                if failure.proven is None and step.op == "tanh" and isinstance(failure.raised, OverflowError):
                    x = case.values[0]
                    raise proven_failure(f"{failure.message}\n  tanh({fmt(x)}) is {math.tanh(x):g}, an ordinary "
                                         "float.", TANH_OVERFLOW) from None
                raise


