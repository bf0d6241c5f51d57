"""Programs (what every case is made of), running learner code on them, and random graphs that reuse nodes."""


from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...checking import (
    GradingFailure,
    Route,
    as_answer,
    call_learner,
    fmt,
    proven_failure,
)
from ...oracles import autograd_gradient, central_difference
from ...seeding import choice, uniform
from .misconceptions import INPLACE, REFLECTED_LOOP, RETURNED_SELF

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



def _signed(gen: torch.Generator, low: float, high: float, digits: int = 3) -> float:
    """A number with magnitude in [low, high) and a random sign, rounded for readable messages."""
    magnitude = float(uniform(gen, (), low, high))
    return round(magnitude if float(torch.rand((), generator=gen)) < 0.5 else -magnitude, digits)


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


