"""Part C: backward() alone, on nodes that carry the course's local rules."""

from __future__ import annotations

import contextlib
import math
import sys
from collections import Counter
from collections.abc import Sequence

import torch

from ...checking import (
    GradingFailure,
    Misconception,
    call_learner,
    check,
    expect_close,
    fmt,
    proven_failure,
    trial,
)
from ...oracles import autograd_gradient, central_difference
from ...seeding import generator, uniform
from ..ex03_backward_engine import BREADTH_FIRST, INPUT_BEFORE_CONSUMER, PREORDER, traversal_kind
from .misconceptions import (
    DEEP_RECURSION,
    NO_VISITED,
    NOT_ALL,
    NOT_SEEDED,
    RAISED_LIMIT,
    UNREACHABLE_RAN,
    WRONG_ORDER,
)
from .programs import (
    Program,
    Step,
    _local_rule,
    _oracles,
    _random_program,
    _read,
    _run_backward,
    _signed,
    _value_class,
    _write,
)

# Part C: backward() alone, on nodes that carry the course's local rules

#: The spare nodes, made from an input that the output does not use, by trace number: one made after the
#: program's first step, so BEFORE out (a backward that replays every node made up to out runs it), one after out.
SPARES = {-1: "s1 = 3 * x", -2: "s2 = 3 * x"}
#: A spare node's leftover gradient (as if from an earlier backward) and its local derivative: running its rule
#: adds SPARE_GRAD * SPARE_LOCAL to the input it was made from, which the output's gradient shows.
SPARE_GRAD, SPARE_LOCAL = 0.5, 3.0


def _spare(Value: type, nodes: list, data: list, number: int, trace: list) -> None:
    name = SPARES[number]
    node = call_learner(Value, SPARE_LOCAL * data[0], (nodes[0],), what=f"Value(..., (x,)) for `{name}`")
    _write(node, "_backward", _recording_rule(node, number, [(nodes[0], SPARE_LOCAL)], trace), f"`{name}`")
    _write(node, "grad", SPARE_GRAD, f"`{name}`")


def _build_traced(Value: type, program: Program, values: Sequence[float], *, spare: bool = False):
    """Learner Value nodes for the program whose _backward are the course's rules, logging (node, node.grad); with
    ``spare``, two more nodes made from the first input, each holding SPARE_GRAD, that the output does not use: s1
    right after the program's first step (before out), s2 after out."""
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
        if spare and index == 0:
            _spare(Value, nodes, data, -1, trace)
    if spare:
        _spare(Value, nodes, data, -2, trace)
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
    ran = [SPARES[n] for n in SPARES if calls[n]]
    if ran:
        return UNREACHABLE_RAN, (f"the _backward of {' and of '.join(ran)} ran, though out does not use "
                                 f"{'them' if len(ran) > 1 else 'it'} (each spare held .grad = {fmt(SPARE_GRAD)} "
                                 "from before)")
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
    extra = "; s1 = 3 * x made after u1 and s2 = 3 * x after out (out uses neither)" if spare else ""
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


#: Part C's cases: (program or None for a leaf output, values, with spare nodes made before and after out).
def _traced_cases(grading_seed: int | None) -> list[tuple[Program | None, tuple[float, ...], bool]]:
    if grading_seed is None:
        return [(_two_routes(), (3.0, 5.0), False), (_diamond(1.0, 2.0), (1.5, -2.0), False),
                (_long_and_short(), (0.5, -0.8), True), (None, (0.7,), False), (_two_routes(), (-1.2, 0.9), True)]
    gen = generator("02/backward", grading_seed)
    x, y = _signed(gen, 0.5, 2.0), _signed(gen, 0.5, 2.0)
    c1 = round(math.copysign(float(uniform(gen, (), 0.5, 2.0)), x * y), 2)  # u1 + c1 stays away from 0
    cases = [(_diamond(c1, _signed(gen, 0.5, 3.0, 2)), (x, y), False)]
    corners = generator("02/backward/corners", grading_seed)
    cases += [(_long_and_short(), (_signed(corners, 0.3, 0.8), _signed(corners, 0.5, 1.0)), True),
              (None, (_signed(corners, 0.5, 2.0),), False),
              (_two_routes(), (_signed(corners, 0.5, 2.0), _signed(corners, 0.5, 2.0)), True)]
    cases += [(*_random_program(gen, in_place=False), False) for _ in range(2)]
    return cases


#: Part C's long chain: a training loop s = s + w * x over CHAIN numbers, 2 * CHAIN + 2 nodes of which CHAIN + 2
#: lie on one path (s, back to the first s, then w), run under
#: Python's default recursion limit (RECURSION_LIMIT; lower already stays as it is).
CHAIN, RECURSION_LIMIT = 5000, 1000


def _build_chain(Value: type, w: float, xs: list[float], runs: list[int], limits: set[int]):
    """w, and s = s + w * x for every x on learner Values whose _backward are the course's rules: each counts its run
    in ``runs`` and notes the recursion limit it ran under in ``limits``."""
    def rule(node, shares, number):
        def _backward():
            runs[number] += 1
            limits.add(sys.getrecursionlimit())
            for child, partial in shares:
                child.grad += partial * node.grad
        return _backward

    weight, s = Value(w), Value(0.0)
    for i, x in enumerate(xs):
        product = Value(w * x, (weight,))
        product._backward = rule(product, [(weight, x)], 2 * i)
        total = Value(s.data + product.data, (s, product))
        total._backward = rule(total, [(s, 1.0), (product, 1.0)], 2 * i + 1)
        s = total
    return weight, s


@contextlib.contextmanager
def _recursion_limit(limit: int, asked: list[int]):
    """Python's recursion limit at most ``limit`` inside, each limit learner code asks for noted in ``asked``."""
    before, set_limit = sys.getrecursionlimit(), sys.setrecursionlimit

    def noted(new_limit):
        asked.append(new_limit)
        set_limit(new_limit)

    set_limit(min(before, limit))
    sys.setrecursionlimit = noted
    try:
        yield
    finally:
        sys.setrecursionlimit = set_limit
        set_limit(before)


def _check_chain(Value, w: float, xs: list[float]) -> None:
    """backward() from the end of the chain: every rule once, under the recursion limit it was called with, and w's
    gradient, the sum of the numbers, against autograd and central differences."""
    __tracebackhide__ = True
    what = (f"backward() on the training loop w = Value({fmt(w)}); s = Value(0.0); s = s + w * x for {len(xs)} "
            f"numbers x ({fmt(xs[0])}, {fmt(xs[1])}, ...), {2 * len(xs) + 2} nodes")
    runs, limits, asked = [0] * (2 * len(xs)), set(), []
    with _recursion_limit(RECURSION_LIMIT, asked):
        limit = sys.getrecursionlimit()
        weight, out = call_learner(_build_chain, Value, w, xs, runs, limits, what=f"{what}: building it")
        try:
            _run_backward(out, what)
        except GradingFailure as failure:
            if failure.proven is None and isinstance(failure.raised, RecursionError):
                raise proven_failure(f"{failure.message}\n  Python allows {limit} nested calls here; the chain's "
                                     f"longest path has {len(xs) + 2} nodes.", DEEP_RECURSION) from None
            raise
        after = sys.getrecursionlimit()
    if limits - {limit} or after != limit or asked:
        raise proven_failure(f"{what}: the recursion limit was {limit} when backward() was called, and it was set to "
                             f"{max(limits | {after} | set(asked))} while it ran.", RAISED_LIMIT)
    if min(runs) != 1 or max(runs) != 1:
        count = min(runs) if min(runs) != 1 else max(runs)
        raise proven_failure(f"{what}: a node's _backward ran {count} times (each must run once).",
                             NOT_ALL if count == 0 else NO_VISITED)
    vector = torch.tensor(xs, dtype=torch.float64)
    f = lambda v: (v * vector).sum()  # noqa: E731
    at = torch.tensor(w, dtype=torch.float64)
    expect_close(_read(weight, "grad", f"{what}: w"), autograd_gradient(f, at)[0], fd=central_difference(f, at)[0],
                 what=f"{what}: w.grad")


def _chain_numbers(grading_seed: int | None) -> tuple[float, list[float]]:
    if grading_seed is None:
        return 0.5, [round(math.sin(i), 3) for i in range(1, CHAIN + 1)]
    gen = generator("02/backward/chain", grading_seed)
    return _signed(gen, 0.5, 2.0), [round(float(v), 3) for v in uniform(gen, (CHAIN,), -1.0, 1.0)]


@check
def check_backward(Value, grading_seed: int | None = None) -> None:
    """Part C: Value.backward() seeds 1.0 and runs every node's _backward once, in reversed topological order.

    Domain: the output of a DAG of Values (nodes reused by several consumers, the same node twice in one operation),
    every node starting at .grad = 0.0 (the text: "you need not reset them"; adding to or resetting what is there
    are both right, since backward() runs once), graphs of any size and depth (the text: a training loop over 5000
    numbers, under Python's recursion limit, unchanged); a Value made from nothing is an output too. Pinned at every
    seed (the program's numbers drawn): a diamond (u1 used
    by two nodes that meet again), a node used by the output directly and through a longer path, a leaf output, and
    nodes made from an input that the output does not use and that hold gradient from before, one made before out
    (a backward that replays every node made up to out runs it) and one after (twice at every seed). Contracts and their
    checks: "a topological order of every node reachable from self ... each node appears once" -> the course's rules
    log each run (NO_VISITED, NOT_ALL, UNREACHABLE_RAN); "seed self.grad = 1.0" -> the output's rule sees 1.0
    (NOT_SEEDED); "call node._backward() for every node in the reversed order" -> every node runs after all its
    consumers, and a wrong order is named by the walk that makes it (WRONG_ORDER for a topological order not
    reversed, BREADTH_FIRST, PREORDER, INPUT_BEFORE_CONSUMER); the inputs' .grad against autograd and finite
    differences; no autograd; "as deep as you like, with Python's recursion limit as it is" -> a chain of CHAIN
    steps under RECURSION_LIMIT (DEEP_RECURSION: a RecursionError; RAISED_LIMIT: a rule ran under another limit).
    """
    __tracebackhide__ = True
    Value = _value_class(Value)
    for program, values, spare in _traced_cases(grading_seed):
        with trial():
            if program is None:
                _check_leaf_output(Value, *values)
            else:
                _check_traced(Value, program, values, spare=spare)
    with trial():
        _check_chain(Value, *_chain_numbers(grading_seed))


