"""Checks for exercise 02, a scalar autograd engine: the learner's ``Value`` class, one part at a time.

Every case is a small *program* of steps (``u1 = x * y; out = 2 - u1``) that runs three ways: on the learner's
``Value`` objects, on float64 torch scalars (the autograd oracle) and through central differences. The parts are
graded independently:

* Parts A (arithmetic) and B (nonlinearities, power) run one operation with the learner's operators, give the
  inputs a non-zero ``.grad`` already and the output a random upstream ``.grad``, then run the learner's ``_backward``
  closures with the course's own traversal (never the learner's ``backward()``), so ``=`` for ``+=`` and a missing
  upstream factor both show.
* Part C runs the learner's ``backward()`` on graphs of the learner's ``Value`` nodes that carry the course's own
  local rules; the rules record when they run, which names the traversal mistake (double visits, wrong order, ...).
* Part D runs the whole engine on expressions and random graphs that reuse nodes, with numbers on either side, then
  grades a bug hunt: three helpers that each wrap a float read from .data in a new Value, of which only one
  (third_moment) loses a route; the learner names it, reports the gap measured with engine vs central differences,
  and fixes it.

Part A also asks for ``maximum``, whose ties (the next case after lesson 02's "max routes") are decided by measuring:
central differences and torch.maximum split a tie in halves.

The engine is built from scratch, so learner code runs with autograd forbidden (``Route.AUTOGRAD``). Every case is a
trial; each catalogued mistake shows in at least two cases of the public and of the hidden test (a mistake the check
observes directly, such as a node run twice or an operand changed in place, is named at once).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
    proven_failure,
    trial,
)
from ..hints import HintBook, PartHints
from ..oracles import as_float64, autograd_gradient, central_difference
from ..seeding import choice, generator, uniform
from .ex03_backward_engine import BREADTH_FIRST, INPUT_BEFORE_CONSUMER, PREORDER, traversal_kind

# ---------------------------------------------------------------------------------------------------------------
# Programs: what every case is made of

BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
IN_PLACE = {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv}
METHODS = ("relu", "tanh", "exp", "log")


@dataclass(frozen=True)
class Step:
    """One operation. ``args`` holds node indices (int) or constants (float); ``exponent`` is the constant of ``**``."""

    op: str  # a key of BINARY or IN_PLACE, "neg", "max" (a.maximum(b)), one of METHODS, or "**"
    args: tuple
    exponent: int | float | None = None


@dataclass(frozen=True)
class Program:
    """Inputs (by name) and steps; node i is input i, then one node per step; the last node is the output."""

    inputs: tuple[str, ...]
    steps: tuple[Step, ...]

    def name(self, node: int) -> str:
        if node < len(self.inputs):
            return self.inputs[node]
        return "out" if node == len(self.inputs) + len(self.steps) - 1 else f"u{node - len(self.inputs) + 1}"

    def line(self, index: int) -> str:
        step, target = self.steps[index], self.name(len(self.inputs) + index)
        args = [self.name(a) if isinstance(a, int) else (f"({a:g})" if a < 0 else f"{a:g}") for a in step.args]
        if step.op in BINARY:
            return f"{target} = {args[0]} {step.op} {args[1]}"
        if step.op in IN_PLACE:
            return f"{target} = {args[0]}; {target} {step.op} {args[1]}"
        if step.op == "neg":
            return f"{target} = -{args[0]}"
        if step.op == "max":
            return f"{target} = {args[0]}.maximum({args[1]})"
        if step.op == "**":
            return f"{target} = {args[0]} ** {step.exponent:g}"
        return f"{target} = {args[0]}.{step.op}()"

    def text(self, sep: str = "; ") -> str:
        return sep.join(self.line(i) for i in range(len(self.steps)))

    def at(self, values: Sequence[float]) -> str:
        return ", ".join(f"{name} = {fmt(float(v))}" for name, v in zip(self.inputs, values))


def _is_node(arg: Any, node: int) -> bool:
    """Whether a step argument is a reference to ``node`` (constants are floats, even 1.0)."""
    return isinstance(arg, int) and arg == node


def _apply(step: Step, args: list, *, in_place: bool) -> Any:
    """The step's operation on ``args`` (Values, tensors or numbers); in-place forms only when ``in_place``."""
    if step.op in BINARY:
        return BINARY[step.op](*args)
    if step.op in IN_PLACE:
        return IN_PLACE[step.op](*args) if in_place else BINARY[step.op[0]](*args)
    if step.op == "neg":
        return -args[0]
    if step.op == "max":  # torch.maximum on tensors, the learner's method on Values
        return torch.maximum(args[0], torch.as_tensor(args[1], dtype=torch.float64)) \
            if isinstance(args[0], torch.Tensor) else args[0].maximum(args[1])
    if step.op == "**":
        return args[0] ** step.exponent
    return getattr(args[0], step.op)()


def _run_torch(program: Program, inputs: Sequence) -> torch.Tensor:
    """The program on torch scalars (out-of-place forms only, so leaves that require grad are never modified)."""
    nodes = list(inputs)
    for step in program.steps:
        nodes.append(_apply(step, [nodes[a] if isinstance(a, int) else a for a in step.args], in_place=False))
    return nodes[-1]


def _oracles(program: Program, values: Sequence[float], upstream: float = 1.0):
    """(autograd, central difference) gradients of ``upstream * out`` with respect to every input."""
    f = lambda *xs: upstream * _run_torch(program, xs)  # noqa: E731
    return autograd_gradient(f, *values), central_difference(f, *values)


def _local_rule(step: Step, arg_values: list) -> tuple[float, list[float]]:
    """The step's value and its partial derivative with respect to each argument position (0 for constants)."""
    leaves = [torch.tensor(float(v), dtype=torch.float64, requires_grad=isinstance(a, int))
              for a, v in zip(step.args, arg_values)]
    out = _apply(step, leaves, in_place=False)
    wanted = [x for x in leaves if x.requires_grad]
    partials = iter(torch.autograd.grad(out, wanted))
    return float(out.detach()), [float(next(partials)) if x.requires_grad else 0.0 for x in leaves]


# ---------------------------------------------------------------------------------------------------------------
# Running learner code

def _value_class(Value) -> type:
    if not isinstance(Value, type):
        raise GradingFailure(f"Pass the class itself to the check (Value), not {type(Value).__name__}.")
    return Value


def _number(value: Any, what: str) -> torch.Tensor:
    """A learner's number as a 0-d float64 tensor (a plain float stays float64, never rounded through float32)."""
    if type(value) in (bool, int, float):
        return torch.tensor(float(value), dtype=torch.float64)
    return as_answer(value, what=what, shape=())


def _read(node, attribute: str, what: str) -> torch.Tensor:
    """``node.data`` or ``node.grad`` as a number; reading it is learner code (it may be a property)."""
    __tracebackhide__ = True
    return _number(call_learner(getattr, node, attribute, what=f"{what}: reading .{attribute}"),
                   what=f"{what}: .{attribute}")


def _write(node, attribute: str, value: Any, what: str) -> None:
    __tracebackhide__ = True
    call_learner(setattr, node, attribute, value, what=f"{what}: setting .{attribute}")


def _run_values(Value: type, program: Program, values: Sequence[float]) -> list:
    """The program on the learner's Values, step by step, checking that each step makes a new node."""
    __tracebackhide__ = True
    nodes = [call_learner(Value, v, what=f"Value({fmt(v)})") for v in values]
    before = [float(v) for v in values]
    for index, step in enumerate(program.steps):
        line = program.line(index)
        args = [nodes[a] if isinstance(a, int) else a for a in step.args]
        try:
            result = call_learner(_apply, step, args, in_place=True, what=f"`{line}`", forbid=[Route.AUTOGRAD])
        except GradingFailure as failure:
            number_first = not isinstance(step.args[0], int)
            if failure.proven is None and number_first and "raised RecursionError" in failure.message:
                raise proven_failure(f"{failure.message}\nA number on the left of {step.op} makes Python call the "
                                     f"Value's reflected method.", REFLECTED_LOOP) from None
            if "has no attribute" in str(failure) and not all(isinstance(a, int) for a in step.args) \
                    and not _uses_part_b(failure.message) and "'maximum'" not in failure.message:
                raise GradingFailure(f"{failure}\nA plain number has no .data or .grad: turn it into a node first "
                                     "(other = as_value(other)).") from None
            raise
        if not isinstance(result, Value):
            raise GradingFailure(f"`{line}` with {program.at(values)} gave {type(result).__name__} "
                                 f"{result!r:.60}; expected a new Value (a node of the graph), so that gradients "
                                 "can flow back through it.")
        _check_operands_untouched(program, index, values, nodes, before, result)
        nodes.append(result)
        before.append(float(_read(result, "data", f"`{line}`")))
    return nodes


def _check_operands_untouched(program, index, values, nodes, before, result) -> None:
    """Fail with the in-place diagnosis if a step returned, or changed, a node made earlier."""
    __tracebackhide__ = True
    line = program.line(index)
    for node, old, position in zip(nodes, before, range(len(nodes))):
        now = float(_read(node, "data", f"`{line}`"))
        if now != old:
            raise proven_failure(f"`{line}` with {program.at(values)} changed {program.name(position)}.data from "
                                 f"{fmt(old)} to {fmt(now)}; the old node must stay as it was, because other parts "
                                 "of the graph may still use it.", INPLACE)
        if node is result:  # the same object back: an in-place form that returned self, or no new node at all
            in_place = program.steps[index].op in IN_PLACE
            raise proven_failure(f"`{line}` with {program.at(values)} returned {program.name(position)} itself; "
                                 + ("the old node must stay as it was, because other parts of the graph may still "
                                    "use it." if in_place else "every operation must return a new node."),
                                 INPLACE if in_place else RETURNED_SELF)


#: The methods Part B adds to Value: hidden while Part A is checked, as they are when the notebook runs top to bottom.
PART_B_METHODS = ("__pow__", "relu", "tanh", "exp", "log")


@contextlib.contextmanager
def _without_part_b(Value: type):
    hidden = {name: Value.__dict__[name] for name in PART_B_METHODS if name in Value.__dict__}
    for name in hidden:
        delattr(Value, name)
    try:
        yield
    finally:
        for name, method in hidden.items():
            setattr(Value, name, method)


def _uses_part_b(message: str) -> bool:
    """Whether a failure's message says that a Part B operation was missing (Value ** number, .exp(), ...)."""
    return "for ** or pow(): 'Value'" in message or any(f"has no attribute '{m}'" in message for m in METHODS)


def _propagate(root) -> None:
    """The course's own backward traversal over learner nodes (root.grad already set): reversed topological order."""
    order, seen = [], set()

    def visit(node):
        if id(node) not in seen:
            seen.add(id(node))
            for child in getattr(node, "_prev", ()):
                visit(child)
            order.append(node)

    visit(root)
    for node in reversed(order):
        node._backward()


def _ancestors(root) -> set[int]:
    found, todo = set(), [root]
    while todo:
        node = todo.pop()
        if id(node) not in found:
            found.add(id(node))
            todo.extend(getattr(node, "_prev", ()))
    return found


def _run_backward(out, what: str) -> None:
    __tracebackhide__ = True
    method = call_learner(getattr, out, "backward", None, what=f"{what}: looking up out.backward")
    if method is None:
        raise GradingFailure(f"{what}: Value has no method backward(); define it and attach it with "
                             "`Value.backward = backward`.")
    call_learner(method, what=f"{what}: out.backward()", forbid=[Route.AUTOGRAD])


# ---------------------------------------------------------------------------------------------------------------
# Named mistakes

OVERWRITE = Misconception("overwrote the gradient (= instead of +=)",
                    "A node can get gradient from several places (x * x, or x used by two later nodes), and "
                    "may already hold some; each _backward must add its share with +=, never replace it with =.")
NO_UPSTREAM = Misconception("missing the upstream gradient (out.grad)",
                      "The chain rule multiplies each local derivative by the gradient arriving from above: "
                      "self.grad += local_derivative * out.grad.")
OVERWRITE_NO_UPSTREAM = Misconception("overwrote the gradient (= instead of +=) and missing the upstream gradient "
                                      "(out.grad)",
                                "Write self.grad += local_derivative * out.grad in every _backward.")
SIGN = Misconception("sign error in the local derivative",
               "Your gradient has the right size but the wrong sign: d(a - b)/db = -1, d(a / b)/db = -a / b**2.")
NO_RULE = Misconception("no gradient arrived (the local rule is missing)",
                  "The input's .grad did not change: set out._backward to a function that adds local derivative "
                  "× out.grad to the input's .grad.")
NOT_RECORDED = Misconception("result does not record its inputs",
                       "Create the result as Value(data, (self, other)) (or (self,)) so that the graph, and "
                       "backward, can find the nodes it came from.")
RSUB = Misconception("reflected subtraction flipped (c - a computed as a - c)",
               "c - a with a number c calls a.__rsub__(c), where self is a and other is c: return other - self "
               "(e.g. as_value(other) - self), not self - other.")
RDIV = Misconception("reflected division flipped (c / a computed as a / c)",
               "c / a with a number c calls a.__rtruediv__(c), where self is a and other is c: return "
               "other / self, whose derivative with respect to a is -c / a**2.")
INPLACE = Misconception("in-place operator changed its operand",
                  "Without an __iadd__, Python runs a += b as a = a + b: a new node, and the old a stays as it was "
                  "for the other nodes that use it. Delete your in-place method (or make it return a new node).")
RETURNED_SELF = Misconception(
    "returned its input instead of a new node",
    "Every operation must create a new Value, even when its number equals an input's (relu of a positive x, x * 1): "
    "out = Value(result, (self,), op) records the operation and gets a .grad of its own. Returned as it is, the input "
    "and the output are one node, so the graph loses the operation and the output's gradient lands straight in the "
    "input's .grad.")
REFLECTED_LOOP = Misconception(
    "a reflected operator that calls itself",
    "2 + a runs a.__radd__(2). If __radd__ returns other + self, Python tries int.__add__(2, a), which gives up, and "
    "then a.__radd__(2) again: the calls never end. Put the Value first: return self + other (addition and "
    "multiplication commute); for __rsub__ and __rtruediv__, as_value(other) - self and as_value(other) / self.")
PART_B_IN_A = Misconception(
    "Part A built on Part B's operations",
    "Part A may use only + - * / and negation: ** and exp come from Part B's cell, which Part A's test hides (and "
    "which has not run yet when the notebook is graded top to bottom). Give / its own local rule: ∂(a/b)/∂a = 1/b, "
    "∂(a/b)/∂b = -a/b².")
TANH_OVERFLOW = Misconception(
    "a tanh formula that overflows where tanh saturates",
    "For a large |x|, tanh(x) is ±1.0 and its derivative 1 - t**2 is 0, but math.cosh(x) overflows beyond |x| ≈ 710 "
    "(its square beyond 355), as does math.exp(2 * x): take the value from math.tanh and the rule from the output, "
    "1 - t**2.",
    "Which quantity in your derivative's formula stops being a finite float at x = 800, although tanh(800) itself is "
    "an ordinary 1.0? Could the derivative be written with a value you already have?")
RELU = Misconception("relu gradient on the wrong side",
               "relu lets the gradient through where its input was positive and blocks it where it was negative: "
               "self.grad += (1.0 if self.data > 0 else 0.0) * out.grad.")
TANH = Misconception("tanh derivative as 1 - tanh instead of 1 - tanh²",
               "d tanh(x)/dx = 1 - tanh(x)**2: square the output t = tanh(x) before subtracting it from 1.")
TANH_INPUT = Misconception("tanh derivative from the input (1 - x² instead of 1 - tanh²)",
                     "d tanh(x)/dx = 1 - t**2 with t = tanh(x), the output, not the input x.")
POW = Misconception("power rule missing the exponent",
              "d(x**k)/dx = k * x**(k - 1): the exponent comes down as a factor.")
NO_VISITED = Misconception("no visited set (double counting)",
                     "A node reachable by two routes had its _backward run more than once. Put each node in the "
                     "topological order only once (keep a visited set), so that its _backward runs once, with its "
                     "complete gradient.")
WRONG_ORDER = Misconception("traversed in topological order instead of reversed",
                      "A node's _backward ran before every node that uses it had sent its gradient back. Walk the "
                      "topological order in reverse: the output first, the inputs last.")
NOT_SEEDED = Misconception("output gradient not seeded with 1.0",
                     "Set self.grad = 1.0 (d out/d out) before the traversal; starting from 0.0, every gradient "
                     "stays 0.")
UNREACHABLE_RAN = Misconception(
    "ran the rule of a node the output does not depend on",
    "backward() must run the _backward of the nodes out was computed from, found from self through _prev, and no "
    "others: a node made elsewhere (still holding .grad from an earlier backward, say) adds its stale gradient into "
    "nodes it shares with out. Build the order from self, not from a list of every node ever made.")
DIVIDES_BY_OPERAND = Misconception(
    "a local rule that divides by an operand",
    "A local derivative written as out.data / self.data (for a·b, or k·x**k / x for a power) raises when that operand "
    "is 0, and 0 is a value like any other. Use the rule itself: d(a·b)/da = b.data, d(a/b)/da = 1 / b.data, "
    "d(x**k)/dx = k * x.data ** (k - 1).")
POW_ABS = Misconception(
    "power rule through |x|",
    "d(x**k)/dx = k * x**(k - 1) with x itself, not |x|: for a negative x and an even k (2, -2, ...) |x|**(k - 1) "
    "has the wrong sign. Python computes x**(k - 1) for a negative x whenever k is an integer.")
MAX_TIE = Misconception(
    "a tie of maximum not split (all, both or none)",
    "Where a.data == b.data, maximum(a, b) has a kink: nudged up, either input moves it; nudged down, neither does. "
    "Central differences average the two sides, half the upstream gradient to each input, as torch.maximum does.",
    "At a tie, what do central differences give each input of the maximum, and what does torch.maximum give?")
MAX_LOSER = Misconception("maximum's gradient sent to the smaller input", "Max routes (lesson 02): the input that "
                          "won, the larger one, gets the whole upstream gradient.")
NOT_ALL = Misconception("not every node's _backward ran",
                  "backward() must call _backward() on every node the output was computed from, found by following "
                  "_prev recursively (a topological sort), not only on the output itself.")


# ---------------------------------------------------------------------------------------------------------------
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
    grads, fds = _oracles(program, values, g)
    for i, (name, node, before) in enumerate(zip(program.inputs, inputs, case.preset)):
        local = float(grads[i]) / g + 0.0  # + 0.0: a blocked relu reads 0, not -0
        expect_close(_read(node, "grad", f"{what}: {name}"), before + grads[i], fd=before + fds[i],
                     what=f"{what}: {name}.grad after out.grad = {fmt(g)} flowed back ({name}.grad was "
                          f"{fmt(before)} before)",
                     extra=f"  expected:           {fmt(before)} already there + out.grad {fmt(g)} × local "
                           f"derivative {fmt(local)}",
                     symptoms=_gradient_mistakes(program, values, i, g, before))


def _signed(gen: torch.Generator, low: float, high: float, digits: int = 3) -> float:
    """A number with magnitude in [low, high) and a random sign, rounded for readable messages."""
    magnitude = float(uniform(gen, (), low, high))
    return round(magnitude if float(torch.rand((), generator=gen)) < 0.5 else -magnitude, digits)


# Part A's operations; "c" and "C" stand for two numbers: on either side, the same node twice, in-place forms.
# Operations that are often built from others (a - b as a + (-b)) come after the ones they are built from; the
# reflected - and / come twice (with c and with C), so that a flipped one shows in two cases and can be named.
ARITHMETIC = [("+", (0, 1)), ("+", (0, "c")), ("+", ("c", 0)), ("+", (0, 0)),
              ("*", (0, 1)), ("*", (0, "c")), ("*", ("c", 0)), ("*", (0, 0)),
              ("/", (0, 1)), ("/", (0, "c")), ("/", ("c", 0)), ("neg", (0,)),
              ("-", (0, 1)), ("-", (0, "c")), ("-", ("c", 0)),
              ("+=", (0, 1)), ("-=", (0, 1)), ("*=", (0, 1)), ("/=", (0, "c")),
              ("/", ("C", 0)), ("-", ("C", 0))]


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
    twice (a + a, a * a, a.maximum(a)); maximum with a Value or a number as other, a winner on either side or a tie
    (MAXIMUM: the tie split half and half, as central differences and torch.maximum measure, MAX_TIE; the gradient
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
#: sign), and tanh saturated at x = 800 and -750 (where a rule through cosh or exp overflows).
FUNCTION_CORNERS = [("relu", None, 1.3), ("relu", None, -0.4), ("**", 2, 0.0), ("**", 3, 0.0), ("**", 2, -1.25),
                    ("**", -2, -0.8), ("tanh", None, 800.0), ("tanh", None, -750.0)]


def _function_cases(grading_seed: int | None) -> list[Case]:
    if grading_seed is None:
        return [Case(_function_program(op, k), (x,), 2.0, (0.25,)) for op, k, x in VISIBLE_FUNCTIONS + FUNCTION_CORNERS]
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
                    for p, v in zip(programs, values)]


@check
def check_functions(Value, grading_seed: int | None = None) -> None:
    """Part B: relu, tanh, exp, log and ** by a constant (int or float), with their local rules.

    Domain (as the part's text states it): relu at any x but 0 (the tests never use x = 0), tanh at any x, saturated
    ones included, exp where the result is finite (x below about 709; the tests stay at moderate x), log at x > 0, x
    ** k for a constant k != 0, int or float, wherever the power and its derivative are real (any x for a positive
    int k, 0 included; x != 0 for a negative int k; x > 0 for a fractional k; never 0 ** 0). Pinned at every seed:
    relu twice on each side of 0 (RELU is named only where its value differs from "no gradient at all"; a relu rule
    without out.grad, NO_UPSTREAM, shows on the positive side only), x ** 2 and x ** 3 at x = 0, a negative base
    under k = 2 and k = -2, tanh at x = 800 and
    -750 (FUNCTION_CORNERS: a formula through cosh or exp overflows there, TANH_OVERFLOW), an int and a float
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
                if failure.proven is None and step.op == "tanh" and "raised OverflowError" in failure.message:
                    x = case.values[0]
                    raise proven_failure(f"{failure.message}\n  tanh({fmt(x)}) is {math.tanh(x):g} and its derivative "
                                         "0.", TANH_OVERFLOW) from None
                raise


# ---------------------------------------------------------------------------------------------------------------
# Part C: backward() alone, on nodes that carry the course's local rules

#: The trace number of the spare node: a node made from an input that the output does not use.
SPARE = -1
#: The spare node's leftover gradient (as if from an earlier backward) and its local derivative: running its rule
#: adds SPARE_GRAD * SPARE_LOCAL to the input it was made from, which the output's gradient shows.
SPARE_GRAD, SPARE_LOCAL = 0.5, 3.0


def _build_traced(Value: type, program: Program, values: Sequence[float], *, spare: bool = False):
    """Learner Value nodes for the program whose _backward are the course's rules, logging (node, node.grad); with
    ``spare``, one more node made from the first input, holding SPARE_GRAD, that the output does not use."""
    nodes = [call_learner(Value, v, what=f"Value({fmt(v)})") for v in values]
    data = [float(v) for v in values]
    trace: list[tuple[int, float]] = []
    for index, step in enumerate(program.steps):
        value, partials = _local_rule(step, [data[a] if isinstance(a, int) else a for a in step.args])
        children = tuple(nodes[a] for a in step.args if isinstance(a, int))
        node = call_learner(Value, value, children, what=f"Value({fmt(value)}, children) for `{program.line(index)}`")
        shares = [(nodes[a], p) for a, p in zip(step.args, partials) if isinstance(a, int)]
        _write(node, "_backward", _recording_rule(node, len(nodes), shares, trace), f"`{program.line(index)}`")
        nodes.append(node)
        data.append(value)
    if spare:
        node = call_learner(Value, SPARE_LOCAL * data[0], (nodes[0],), what="Value(..., (x,)) for `spare = 3 * x`")
        _write(node, "_backward", _recording_rule(node, SPARE, [(nodes[0], SPARE_LOCAL)], trace), "`spare = 3 * x`")
        _write(node, "grad", SPARE_GRAD, "`spare = 3 * x`")
    return nodes, trace


def _recording_rule(node, number: int, shares: list, trace: list):
    def _backward():
        trace.append((number, float(node.grad)))
        for child, partial in shares:
            child.grad += partial * node.grad
    return _backward


#: The misconception each kind of wrong order (traversal_kind) is named by.
ORDER_MISTAKES = {"forward": WRONG_ORDER, "breadth-first": BREADTH_FIRST, "preorder": PREORDER,
                  "early": INPUT_BEFORE_CONSUMER}


def _diagnose_traversal(program: Program, trace: list[tuple[int, float]]) -> tuple[Misconception, str] | None:
    """What the traversal did wrong, seen in the log of which node's _backward ran when: (mistake, what was seen).
    A wrong order is named by the walk that makes it (traversal_kind), judged on the nodes that carry a rule."""
    first = len(program.inputs)
    internal = range(first, first + len(program.steps))
    root = internal[-1]
    calls = Counter(number for number, _ in trace)
    if calls[SPARE]:
        return UNREACHABLE_RAN, ("the _backward of spare = 3 * x ran, though out does not use spare (spare held "
                                 f".grad = {fmt(SPARE_GRAD)} from before)")
    twice = [n for n in internal if calls[n] > 1]
    if twice:
        return NO_VISITED, f"{program.name(twice[0])}'s _backward ran {calls[twice[0]]} times"
    if calls[root] and (seed := next(g for n, g in trace if n == root)) != 1.0:
        return NOT_SEEDED, f"out's _backward ran with out.grad = {fmt(seed)}"
    never = [n for n in internal if calls[n] == 0]
    if never:
        return NOT_ALL, f"{program.name(never[0])}'s _backward never ran"
    order = [number for number, _ in trace]
    # Node references are ints, constants floats (2 == 2.0: filter before removing repeats).
    inputs = {first + i: list(dict.fromkeys(a for a in step.args if isinstance(a, int) and a >= first))
              for i, step in enumerate(program.steps)}
    kind = traversal_kind(order, inputs.__getitem__, root)
    if kind == "valid":
        return None
    position = {number: i for i, number in enumerate(order)}
    n, consumer = next((n, c) for c in order for n in inputs[c] if position[n] < position[c])
    ran = " → ".join(program.name(number) for number in order)
    return ORDER_MISTAKES[kind], (f"the rules ran in the order {ran}: {program.name(n)}'s before that of "
                                  f"{program.name(consumer)}, which uses {program.name(n)}")


def _check_traced(Value, program: Program, values: Sequence[float], *, spare: bool = False) -> None:
    __tracebackhide__ = True
    extra = "; spare = 3 * x (out does not use it)" if spare else ""
    what = f"backward() on `{program.text()}{extra}` with {program.at(values)}"
    nodes, trace = _build_traced(Value, program, values, spare=spare)
    _run_backward(nodes[-1], what)
    diagnosis = _diagnose_traversal(program, trace)
    grads, fds = _oracles(program, values)
    try:
        for i, name in enumerate(program.inputs):
            expect_close(_read(nodes[i], "grad", f"{what}: {name}"), grads[i], fd=fds[i],
                         what=f"{what}: {name}.grad")
    except GradingFailure as failure:
        if diagnosis is None:
            raise
        mistake, seen = diagnosis
        raise proven_failure(f"{failure.message}\n  What backward() did: {seen}.", mistake) from None
    if diagnosis is not None:
        mistake, seen = diagnosis
        raise proven_failure(f"{what}: the gradients happen to be right here, but {seen}.", mistake)


def _check_leaf_output(Value, value: float) -> None:
    """backward() on a Value that was computed from nothing: its own gradient, 1.0."""
    __tracebackhide__ = True
    what = f"x = Value({fmt(value)}); x.backward() (the output is a leaf)"
    x = call_learner(Value, value, what=f"Value({fmt(value)})")
    _run_backward(x, what)
    expect_close(_read(x, "grad", what), 1.0, what=f"{what}: x.grad", source="expected",
                 symptoms=[NOT_SEEDED.looks_like(0.0)])


def _two_routes() -> Program:
    return Program(("x", "y"), (Step("*", (0, 1)), Step("+", (2, 0))))


def _diamond(c1: float, c2: float) -> Program:
    """u1 feeds two nodes that meet again at the output: a traversal without a visited set runs u1 twice, a
    depth-first preorder runs u1 before one of its consumers whichever way it turns."""
    return Program(("x", "y"), (Step("*", (0, 1)), Step("+", (2, c1)), Step("*", (c2, 2)), Step("*", (3, 4))))


def _long_and_short() -> Program:
    """out uses u2 directly and through u3 -> u4, and u2 has an input of its own: a breadth-first walk runs u2 (level
    1) before u3 (level 2), and no depth-first walk gives its order."""
    return Program(("x", "y"), (Step("*", (0, 1)), Step("exp", (2,)), Step("*", (3, 1)), Step("tanh", (4,)),
                                Step("+", (5, 3))))


#: Part C's cases: (program or None for a leaf output, values, with a spare node).
def _traced_cases(grading_seed: int | None) -> list[tuple[Program | None, tuple[float, ...], bool]]:
    if grading_seed is None:
        return [(_two_routes(), (3.0, 5.0), False), (_diamond(1.0, 2.0), (1.5, -2.0), False),
                (_long_and_short(), (0.5, -0.8), False), (None, (0.7,), False), (_two_routes(), (-1.2, 0.9), True)]
    gen = generator("02/backward", grading_seed)
    x, y = _signed(gen, 0.5, 2.0), _signed(gen, 0.5, 2.0)
    c1 = round(math.copysign(float(uniform(gen, (), 0.5, 2.0)), x * y), 2)  # u1 + c1 stays away from 0
    cases = [(_diamond(c1, _signed(gen, 0.5, 3.0, 2)), (x, y), False)]
    corners = generator("02/backward/corners", grading_seed)
    cases += [(_long_and_short(), (_signed(corners, 0.3, 0.8), _signed(corners, 0.5, 1.0)), False),
              (None, (_signed(corners, 0.5, 2.0),), False),
              (_two_routes(), (_signed(corners, 0.5, 2.0), _signed(corners, 0.5, 2.0)), True)]
    cases += [(*_random_program(gen, in_place=False), False) for _ in range(2)]
    return cases


@check
def check_backward(Value, grading_seed: int | None = None) -> None:
    """Part C: Value.backward() seeds 1.0 and runs every node's _backward once, in reversed topological order.

    Domain: the output of a DAG of Values (nodes reused by several consumers, the same node twice in one operation),
    every node starting at .grad = 0.0 (the text: "you need not reset them"; adding to or resetting what is there
    are both right, since backward() runs once), fewer than 40 nodes (the text's bound: a recursive DFS is fine); a
    Value made from nothing is an output too. Pinned at every seed (the program's numbers drawn): a diamond (u1 used
    by two nodes that meet again), a node used by the output directly and through a longer path, a leaf output, and
    a node made from an input that the output does not use and that holds gradient from before. Contracts and their
    checks: "a topological order of every node reachable from self ... each node appears once" -> the course's rules
    log each run (NO_VISITED, NOT_ALL, UNREACHABLE_RAN); "seed self.grad = 1.0" -> the output's rule sees 1.0
    (NOT_SEEDED); "call node._backward() for every node in the reversed order" -> every node runs after all its
    consumers, and a wrong order is named by the walk that makes it (WRONG_ORDER for a topological order not
    reversed, BREADTH_FIRST, PREORDER, INPUT_BEFORE_CONSUMER); the inputs' .grad against autograd and finite
    differences; no autograd.
    """
    __tracebackhide__ = True
    Value = _value_class(Value)
    for program, values, spare in _traced_cases(grading_seed):
        with trial():
            if program is None:
                _check_leaf_output(Value, *values)
            else:
                _check_traced(Value, program, values, spare=spare)


# ---------------------------------------------------------------------------------------------------------------
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
GAP_SIGN = Misconception("the gap measured the other way round (central differences minus engine)",
                         "The gap is engine_gradient minus numeric_gradient: positive where the engine's is too large.")


def _third_moment(values: torch.Tensor, cut: bool = False) -> torch.Tensor:
    return ((values - (values.mean().detach() if cut else values.mean())) ** 3).mean()


#: Each helper of the notebook as float64 torch, with its read of .data as a detach (what the engine computes).
AS_WRITTEN = {"log_softmax_first": lambda v: torch.log_softmax(v - v.max().detach(), 0)[0],
              "variance": lambda v: ((v - v.mean().detach()) ** 2).mean(),
              "third_moment": lambda v: _third_moment(v, cut=True)}


def _hunt_points(grading_seed: int | None) -> list[list[float]]:
    if grading_seed is None:
        return [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75, 1.0]]
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
        try:
            expect_close(got, written - truth, source="expected", what=f"gap, {BUGGY}'s engine gradient minus central "
                         f"differences at {list(GAP_AT)}", extra=f"  engine gradient:    {fmt(written)}\n  central "
                         f"differences: {fmt(central_difference(_third_moment, at)[0])}")
        except GradingFailure as failure:  # three numbers that match the mistake exactly are proof enough
            if torch.allclose(got, truth - written, rtol=1e-6, atol=1e-8):
                raise proven_failure(failure.message, GAP_SIGN) from None
            raise
    for numbers in _hunt_points(grading_seed):
        with trial():
            what = f"fixed(values) with values = [{', '.join(f'Value({n})' for n in numbers)}]"
            values = [Value(n) for n in numbers]
            out = call_learner(fixed, values, what=what, forbid=[Route.AUTOGRAD])
            vector = torch.tensor(numbers, dtype=torch.float64)
            expect_close(_read(out, "data", what), _third_moment(vector), what=f"{what}: .data",
                         source="third_moment's value")
            _run_backward(out, what)
            grads, cut = (autograd_gradient(lambda v, c=c: _third_moment(v, c), vector)[0] for c in (False, True))
            fd = central_difference(_third_moment, vector)[0]
            got = torch.stack([_read(v, "grad", f"{what} .grad") for v in values])
            expect_close(got, grads, fd=fd, what=f"{what}: the inputs' .grad", symptoms=[CUT_GRAPH.looks_like(cut)])


# ---------------------------------------------------------------------------------------------------------------
# Random graphs that reuse nodes

EXPONENTS = (2, 3, -1, 0.5, 1.5)


def _pick_node(gen: torch.Generator, count: int) -> int:
    """A node index, usually one of the last three made (so graphs grow deep), sometimes any earlier one."""
    if float(torch.rand((), generator=gen)) < 0.6:
        return count - 1 - int(torch.randint(min(count, 3), (), generator=gen))
    return int(torch.randint(count, (), generator=gen))


def _random_step(gen: torch.Generator, ops: list[str], count: int) -> Step:
    op = choice(gen, ops)
    if op not in BINARY and op not in IN_PLACE:
        return Step(op, (_pick_node(gen, count),), choice(gen, list(EXPONENTS)) if op == "**" else None)
    left = _pick_node(gen, count)
    right = left if float(torch.rand((), generator=gen)) < 0.25 else _pick_node(gen, count)  # e.g. x * x
    side = float(torch.rand((), generator=gen))
    constant = _signed(gen, 0.5, 3.0, 2)
    if side < 0.2 and op in BINARY:
        return Step(op, (constant, right))
    return Step(op, (left, constant if side < 0.4 else right))


def _well_conditioned(step: Step, args: list[float], value: float) -> bool:
    """Keep values moderate and away from kinks and singularities, so that finite differences are accurate."""
    op = step.op.rstrip("=") if step.op in IN_PLACE else step.op
    if not math.isfinite(value) or abs(value) > 20:
        return False
    if op == "/":
        return abs(args[1]) >= 0.3
    if op == "log":
        return args[0] >= 0.3
    if op == "relu":
        return abs(args[0]) >= 0.1
    if op == "exp":
        return args[0] <= 2.0
    if op == "**":
        return (float(step.exponent).is_integer() or args[0] >= 0.3) and (step.exponent > 0 or abs(args[0]) >= 0.3)
    return True


def _random_program(gen: torch.Generator, *, in_place: bool, n_inputs: int = 3,
                    n_steps: int = 7) -> tuple[Program, tuple[float, ...]]:
    """A random DAG over x, y, z: operands drawn from earlier nodes (the same one twice at times) or numbers on
    either side; every node that nothing uses is added into the output, so every node matters."""
    values = [_signed(gen, 0.5, 2.0) for _ in range(n_inputs)]
    data = list(values)
    ops = [*BINARY, "neg", *METHODS, "**", *(IN_PLACE if in_place else ())]
    steps: list[Step] = []
    while len(steps) < n_steps:
        step = _random_step(gen, ops, len(data))
        args = [data[a] if isinstance(a, int) else a for a in step.args]
        value = float(_apply(step, [torch.tensor(a, dtype=torch.float64) for a in args], in_place=False))
        if _well_conditioned(step, args, value):
            steps.append(step)
            data.append(value)
    used = {a for step in steps for a in step.args if isinstance(a, int)}
    unused = [n for n in range(len(data)) if n not in used]
    total = unused[-1]
    for n in reversed(unused[:-1]):
        steps.append(Step("+", (total, n)))
        data.append(data[total] + data[n])
        total = len(data) - 1
    return Program(("x", "y", "z")[:n_inputs], tuple(steps)), tuple(values)


# ---------------------------------------------------------------------------------------------------------------
# Hints

hint = HintBook({
    "A": PartHints(checks=("check_arithmetic",), cells=("Value",), texts=(
        "At a tie, `a.data == b.data`, how far does the maximum move when `a` is nudged up by h, and when it is "
        "nudged down? What do central differences make of the two sides? And after `out = a * a`, how many "
        "contributions reach `a.grad`?",
        "Check values: `a = Value(3.0)`, `out` made from it, `out.grad = 2.0` and `a.grad = 0.25`, then the rules run "
        "(`out._backward()` for one operation). `a.grad` after: 12.25 for `a * a`, -1.75 for `4 - a`, about -0.19444 "
        "for `2 / a`, 0.25 for `a.maximum(4)`, 2.25 for `a.maximum(a)`; a tie of two `Value(1.5)` (`b.grad = -0.5`): "
        "1.25 and 0.5.",
        "A trace, `a = Value(3.0)`, `b = Value(-2.0)`, `u = a * b`, `v = 2 - u`, `out = v / a` (8/3), `out.grad = 1`. "
        "out's rule: v 1/3, a -8/9 ($-v/a^2$). v's rule: u -1/3. u's rule: a 2/3 more, -2/9 in all (right: $-2/a^2$); "
        "b -1. A tie at a = b = 1.5: nudged up by h the maximum moves by h, nudged down it stays, so a's central "
        "difference is (h - 0) / 2h, and b's too. Which of a's two contributions would `=` lose, and what if `b` is "
        "`a` itself?")),
    "B": PartHints(checks=("check_functions",), cells=("nonlinearities",), texts=(
        "Which value does each local derivative need: the node's input, or the output it has already computed? Could "
        "a way of writing a derivative overflow at an input where the function's own value is an ordinary float?",
        "Check values, the new node's gradient 1.0 and the input's 0 before `out._backward()`: tanh at 0.5 gives the "
        "input about 0.78645, at 800 and -750 exactly 0.0; exp at 0.5 about 1.64872; log at 4 0.25; `Value(4.0) ** "
        "0.5` 0.25, `Value(2.0) ** -1` -0.25, `Value(-2.0) ** 3` 12.0, `Value(0.0) ** 3` 0.0; relu at -1 0.0, at 2 "
        "1.0. With the new node's gradient at 2.0, every one doubles.",
        "A trace, `x = Value(0.5)`, `t = x.tanh()` (0.462117), `e = t.exp()` (1.587431), `out = e ** 2`, `out.grad = "
        "1`. out's rule: e gets 2 × 1.587431 = 3.174863. e's rule: t gets exp's output × e's gradient, 5.039876. t's "
        "rule: x gets (1 - 0.462117²) × 5.039876 = 3.963599, as autograd says. Each rule reads a number of the "
        "forward pass and the gradient that reached its node; relu passes it on, or not, by its input's sign.")),
    "C": PartHints(checks=("check_backward",), cells=("backward",), texts=(
        "In lesson 02's $u = ab$, $v = u + b$, $L = uv$, $u$ reaches $L$ directly and through $v$: may $u$'s rule run "
        "before $v$'s has added its share to `u.grad`? And how does a node reached by two routes run its rule only "
        "once?",
        "Check values at $a = 2$, $b = 3$: $L = 54$, `u.grad` 15, `v.grad` 6, `a.grad` 45 and `b.grad` 36. If "
        "`a.grad` is 27 and `b.grad` 24, $u$'s rule ran before $v$'s and passed on 9 of its 15. A smaller case of a "
        "reused node: `x = Value(2.0)`, `y = x * x`, `z = y * x + y` gives $z = 12$, `y.grad` 3 and `x.grad` 16.",
        "A trace to turn into code, lesson 02's graph at $a = 2$, $b = 3$ ($u = 6$, $v = 9$, $L = 54$). A list in "
        "which every node comes after the nodes it was computed from: a, b, u, v, L (b, a, u, v, L works too). Read "
        "backwards, with the gradients after each rule: L starts at 1; L's rule: u 9, v 6; v's rule: u 15, b 6; u's "
        "rule: a 45, b 36; a and b have no rule to run. A depth-first walk from L meets u twice, once from L and once "
        "from v: at which moment of a visit may a node join the list, and what must the second meeting do?")),
    "D": PartHints(checks=("check_engine", "check_bug_hunt"), cells=("bug_hunt",), texts=(
        "For which helper do `engine_gradient` and `numeric_gradient` disagree at the same numbers? And for each "
        "helper, would its value change, to first order, if the number it reads from `.data` were a little different?",
        "Measure a smaller case first: at [1.0, 3.0], central differences give about (0.8808, -0.8808) for "
        "log_softmax_first, (-1.0, 1.0) for variance and (0.0, 0.0) for third_moment; compare each with "
        "engine_gradient. End to end: at $(x, y) = (0.5, -1.5)$ the try-it expression gives out ≈ 3.4932342623, dx ≈ "
        "1.7760542730, dy ≈ -1.3244673993, as PyTorch does.",
        "A trace of a harmless cut, variance at [1.0, 3.0]: mean 2, deviations -1 and 1. With the mean a constant, "
        "each input gets 2 × deviation / 2: (-1, 1). The route through the mean would add (1/2) × (-2 × sum of "
        "deviations / 2) = 0 to each: nothing is lost. Do the same for the helper whose gap is not 0: what does its "
        "mean's route carry, and is it your gap? In the fix, compute every part of the value from the Values.")),
})
