"""Checks for exercise 03, the backward engine: a valid backward order, accumulated gradients, an all-reduce by hooks.

A graph is a plain dict ``node -> list of input nodes`` (strings, a DAG): every node is a key and a leaf maps to
``[]``. Local derivatives are a dict ``(node, input) -> float``. Each ``check_*`` function is one test cell's whole
body: without ``seed`` it runs the public cases, with ``seed=grading_seed()`` fresh random ones. Every case is a
:func:`~autograder.checking.trial`, and each misconception below shows in at least two cases of the visible and of the
hidden test, so that it can be named (one coincidence never is).

Parts A and B are plain Python: autograd is forbidden inside them and the learner's ``graph`` and ``local_grads``
must come back unchanged. Part C's hooks run inside backward passes the check drives itself.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..checking import (
    GradingFailure,
    Misconception,
    Route,
    as_answer,
    call_learner,
    check,
    expect_close,
    proven_failure,
    trial,
)
from ..contracts import CHANGED_INPUT
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform
from .cases import mean_loss_gradients, random_mlp

Graph = dict[str, list[str]]
Local = dict[tuple[str, str], float]

# The lesson's running example at x = 2: L = r + p, r = q * p, q = x**2, p = 3x (dL/dx = 39).
LESSON_GRAPH: Graph = {"L": ["r", "p"], "r": ["q", "p"], "q": ["x"], "p": ["x"], "x": []}
LESSON_LOCAL: Local = {("L", "r"): 1.0, ("L", "p"): 1.0, ("r", "q"): 6.0, ("r", "p"): 4.0,
                       ("q", "x"): 4.0, ("p", "x"): 3.0}
# `out` reaches `a` directly and through b -> c; `log` consumes `a` but `out` does not depend on it.
SKIP_GRAPH: Graph = {"out": ["a", "b"], "b": ["c"], "c": ["a"], "a": ["z"], "z": [], "log": ["a"]}
SKIP_LOCAL: Local = {("out", "a"): 2.0, ("out", "b"): 1.5, ("b", "c"): 0.5, ("c", "a"): 3.0, ("a", "z"): 1.25,
                     ("log", "a"): 7.0}
# The same trap one level deeper: `y` reaches `h` directly and through u -> g -> h, `w` is shared, `spare` unused.
BRIDGE_GRAPH: Graph = {"y": ["h", "u"], "u": ["g"], "g": ["h"], "h": ["w", "k"], "k": ["w"], "w": [],
                       "spare": ["u"]}
BRIDGE_LOCAL: Local = {("y", "h"): 0.5, ("y", "u"): 2.0, ("u", "g"): 1.5, ("g", "h"): 1.25, ("h", "w"): 3.0,
                       ("h", "k"): 2.0, ("k", "w"): 0.25, ("spare", "u"): 4.0}

NAMES = list("abcdefghkmnpqrstuvwyz")

# ---------------------------------------------------------------------------------------------- misconceptions

EARLY_HINT = ("A node may run only once every node that consumes it has run, otherwise its gradient is still "
              "incomplete when it passes it on. Visiting a node the first time you meet it (breadth-first, or "
              "depth-first preorder) breaks this when a node is reached by paths of different lengths. Use a "
              "depth-first postorder reversed, or count each node's consumers and run it when the count hits 0.")

NO_VISITED_SET = Misconception(
    "no visited set", "A node reached by two paths must still be listed once: keep a set of visited nodes and skip "
    "a node you have already placed.")
UNREACHABLE = Misconception(
    "included nodes the output does not depend on", "Start from the output and follow inputs only: a graph may hold "
    "branches the output never uses, and they get no place in the order (and no gradient).")
FORWARD_ORDER = Misconception(
    "forward order", "Your order is valid read backwards: you listed inputs before their consumers, which is the "
    "order of the forward pass. Reverse it (a depth-first postorder from the output, reversed).")
INPUT_BEFORE_CONSUMER = Misconception("input visited before its consumer", EARLY_HINT)
BREADTH_FIRST = Misconception(
    "breadth-first order",
    "A breadth-first walk from the output takes the nodes level by level, but a node reached by a short path and by "
    "a longer one is still waiting for the longer path's share when its level comes up, so it passes on an "
    "incomplete gradient. A node may run only after every node that uses it: reverse a depth-first postorder, or "
    "count each node's consumers and run it when the count reaches 0.")
PREORDER = Misconception(
    "depth-first preorder",
    "A depth-first walk that takes a node the first time it meets it (preorder) reaches a shared node through one "
    "consumer while another consumer has not run yet. Append a node after everything below it (postorder) and "
    "reverse that list, or count each node's consumers and run it when the count reaches 0.")

OUTPUT_NOT_ONE = Misconception("output's gradient not set to 1", "Start backward with d output / d output = 1.")
MISSING_UPSTREAM = Misconception(
    "missing the upstream gradient", "Each edge sends local derivative × the consumer's gradient, not the local "
    "derivative alone.")
OVERWROTE = Misconception(
    "overwrote instead of summing at a branch point", "A node used by several consumers gets one contribution from "
    "each; add them (+=), do not replace (=).")
ZERO_LEFT_OUT = Misconception(
    "left out the nodes whose gradient is 0",
    "Every node the output depends on gets an entry, also when its gradient is 0 (a zero local derivative, or paths "
    "whose contributions cancel): start every such node at 0.0 and add to it, instead of creating an entry when a "
    "non-zero contribution arrives.")
AVERAGED_PATHS = Misconception(
    "averaged the paths", "Contributions of different paths add up; they are never averaged.")

SUMMED = Misconception(
    "summed instead of averaging", "Divide the sum by the number of replicas: the mean loss over the full batch is "
    "the average of the shard losses, so its gradient is the average of the shard gradients.")
ONLY_FIRED = Misconception(
    "only updated the replica that fired", "The hook that completes the set must write the average into .grad of "
    "EVERY replica, not only of the one whose backward is running.")
NO_AVERAGING = Misconception(
    "no averaging happened", "Every replica kept its own shard's gradient: register a hook on each parameter of "
    "each replica (param.register_post_accumulate_grad_hook(fn)) and let the last arrival write the average.")
FIRST_ROUND_ONLY = Misconception(
    "averaging only in the first step", "Your hooks worked in round 1 but not later: reset the arrival count (or "
    "list) once the average is written, so that every backward round is averaged.")
AVERAGED_EARLY = Misconception(
    "averaged before every replica had its gradient", "A replica whose backward has not run yet still has "
    ".grad = None. Count the arrivals for each parameter and average only when the last replica's gradient has "
    "arrived, whatever order the replicas run in.")
TENSOR_HOOK_READS_GRAD = Misconception(
    "read .grad in a hook that runs before .grad is written", "Tensor.register_hook calls fn(grad) BEFORE this "
    "backward's gradient reaches param.grad, so inside it param.grad is still None (or an old value). Use the grad "
    "argument such a hook receives, or register_post_accumulate_grad_hook, which runs after .grad is written.")
SHARED_GRAD = Misconception(
    "replicas share one .grad tensor", "Every replica's .grad is the same tensor object, so the next in-place "
    "accumulation into one replica's .grad (a second micro-batch, a gradient clip) changes all of them. Give each "
    "replica its own copy: p.grad = average.clone().")
CHANGED_PARAMETERS = Misconception(
    "hooks changed the parameters", "An all-reduce hook only writes .grad; the parameters change in the optimizer "
    "step, never inside backward.")


# ---------------------------------------------------------------------------------------------- traversals

def _levels(inputs_of: Callable[[Hashable], list], root: Hashable) -> dict:
    """Each node's shortest distance from ``root`` (edges from a node to its inputs)."""
    level, queue = {root: 0}, deque([root])
    while queue:
        node = queue.popleft()
        for source in inputs_of(node):
            if source not in level:
                level[source] = level[node] + 1
                queue.append(source)
    return level


def _is_depth_first(order: list, inputs_of: Callable[[Hashable], list]) -> bool:
    """Whether ``order`` is a depth-first preorder from its first node: every node after the first is an input of
    the deepest node on the current path that still has an input not yet visited."""
    visited, path = {order[0]}, [order[0]]
    for node in order[1:]:
        while path and all(source in visited for source in inputs_of(path[-1])):
            path.pop()
        if not path or node not in inputs_of(path[-1]):
            return False
        visited.add(node)
        path.append(node)
    return True


def traversal_kind(order: list, inputs_of: Callable[[Hashable], list], root: Hashable) -> str:
    """What a traversal that visited (or ran) every node of ``order`` once did, seen from that order alone:

    * "valid": every node before all of its inputs, as backward needs;
    * "forward": the reverse of a valid order (inputs first, a topological order not reversed);
    * "breadth-first": level by level from the root (shortest distance never decreasing), and no depth-first walk
      gives this order;
    * "preorder": a depth-first walk that lists a node when it first meets it, and not level by level;
    * "early": some node comes before one of its consumers, and the order is not told apart as one of those (both
      a breadth-first and a depth-first order, or neither).

    ``inputs_of(node)`` lists a node's inputs among the nodes of ``order`` (leaves may be left out altogether: a
    node without inputs can be met at any time, by either walk).
    """
    position = {node: i for i, node in enumerate(order)}
    edges = [(node, source) for node in order for source in inputs_of(node)]
    if all(position[node] < position[source] for node, source in edges):
        return "valid"
    if all(position[node] > position[source] for node, source in edges):
        return "forward"
    if not order or order[0] != root:
        return "early"
    level = _levels(inputs_of, root)
    by_level = all(level[a] <= level[b] for a, b in zip(order, order[1:]))
    depth_first = _is_depth_first(order, inputs_of)
    if by_level and not depth_first:
        return "breadth-first"
    if depth_first and not by_level:
        return "preorder"
    return "early"


# ---------------------------------------------------------------------------------------------- graphs

def reference_order(graph: Graph, output: str) -> list[str]:
    """One valid backward order: depth-first postorder from ``output``, reversed (consumers before inputs)."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(node: str) -> None:
        if node not in seen:
            seen.add(node)
            for source in graph[node]:
                visit(source)
            order.append(node)

    visit(output)
    return order[::-1]


def _breadth_first(graph: Graph, output: str) -> list[str]:
    """Nodes in the order a breadth-first walk first meets them: NOT a valid backward order in general."""
    order, queue = [output], deque([output])
    while queue:
        for source in graph[queue.popleft()]:
            if source not in order:
                order.append(source)
                queue.append(source)
    return order


def _preorder(graph: Graph, output: str, reverse: bool = False) -> list[str]:
    """Nodes in the order a depth-first walk first meets them (inputs in list order, or reversed as an explicit
    stack pops them): NOT a valid backward order in general."""
    order: list[str] = []

    def visit(node: str) -> None:
        if node not in order:
            order.append(node)
            for source in reversed(graph[node]) if reverse else graph[node]:
                visit(source)

    visit(output)
    return order


def _show_graph(graph: Graph) -> str:
    return "{" + ", ".join(f"{node}: [{', '.join(inputs)}]" for node, inputs in graph.items()) + "}"


def _show_local(local: Local) -> str:
    return "{" + ", ".join(f"({node}, {source}): {value:g}" for (node, source), value in local.items()) + "}"


def random_graph(gen: torch.Generator) -> tuple[Graph, str]:
    """A random DAG with shared nodes, nodes the output does not depend on, and keys in random order.

    Planted in every graph: the output consumes ``a`` directly and through ``b -> c -> a`` (so a walk that visits a
    node the first time it meets it runs ``a`` too early), and ``a`` has an input (so running it early loses
    gradient).
    """
    names = iter([NAMES[i] for i in torch.randperm(len(NAMES), generator=gen)])
    z, z2, a, c, b, out, dead, lonely = (next(names) for _ in range(8))
    leaves, created = [z, z2], [a, c, b]
    inputs: Graph = {z: [], z2: [], a: [z], c: [a], b: [c]}
    for _ in range(int(torch.randint(1, 4, (), generator=gen))):
        pool = leaves + created
        picks = torch.randperm(len(pool), generator=gen)[: int(torch.randint(1, 4, (), generator=gen))]
        node = next(names)
        inputs[node] = [pool[i] for i in picks]
        created.append(node)
    consumed = {source for sources in inputs.values() for source in sources}
    inputs[out] = [a, b] + [n for n in created + leaves if n not in consumed and n not in (a, b)]
    inputs[dead] = [choice(gen, created + [out])]  # a consumer the output does not depend on
    inputs[lonely] = []
    keys = list(inputs)
    return {keys[i]: inputs[keys[i]] for i in torch.randperm(len(keys), generator=gen)}, out


def random_local(gen: torch.Generator, graph: Graph) -> Local:
    """A positive local derivative for every edge (2 decimals), so paths never cancel and every mistake shows."""
    return {(node, source): round(float(uniform(gen, (), 0.5, 2.5)), 2)
            for node, sources in graph.items() for source in sources}


def _call_plain_python(fn: Callable, *args, what: str):
    """Call a Part A/B answer on the caller's own dicts: no autograd inside, and the dicts come back unchanged."""
    __tracebackhide__ = True
    before = copy.deepcopy(args)
    answer = call_learner(fn, *args, what=what, forbid=[Route.AUTOGRAD])
    for name, old, new in zip(("graph", "local_grads"), before, args):
        if type(new) is not type(old) or new != old:
            raise proven_failure(f"{what} changed its argument {name}: it was {old!r:.200} and is now "
                                 f"{new!r:.200}.", CHANGED_INPUT)
    return answer


# ---------------------------------------------------------------------------------------------- Part A

def _violation(order: list[str], graph: Graph) -> tuple[str, str] | None:
    """The first (input, consumer) pair where the input comes first, or None if none does."""
    position = {node: i for i, node in enumerate(order)}
    for consumer in order:
        for source in graph[consumer]:
            if position[source] < position[consumer]:
                return source, consumer
    return None


def _order_problem(order: list[str], graph: Graph, output: str) -> tuple[str, Misconception | None] | None:
    """(what is wrong, the misconception it looks like or None) for a proposed backward order; None if valid."""
    needed = reference_order(graph, output)
    twice = sorted({node for node in order if order.count(node) > 1})
    if twice:
        return f"{', '.join(map(repr, twice))} listed more than once", NO_VISITED_SET
    unknown = sorted(set(order) - set(graph))
    if unknown:
        return f"{', '.join(map(repr, unknown))} listed, but the graph has no such node", None
    extra = sorted(set(order) - set(needed))
    if extra:
        return f"{', '.join(map(repr, extra))} listed, but the output does not depend on it", UNREACHABLE
    missing = [node for node in needed if node not in order]
    if missing:
        return (f"{', '.join(map(repr, missing))} missing: every node the output depends on must be listed, "
                "the output itself and the leaves included", None)
    violation = _violation(order, graph)
    if violation is None:
        return None
    source, consumer = violation
    kind = traversal_kind(order, graph.__getitem__, output)
    return f"{source!r} comes before {consumer!r}, but {consumer!r} consumes {source!r}", ORDER_MISTAKES[kind]


#: The misconception each kind of invalid order (traversal_kind) is named by.
ORDER_MISTAKES = {"forward": FORWARD_ORDER, "breadth-first": BREADTH_FIRST, "preorder": PREORDER,
                  "early": INPUT_BEFORE_CONSUMER}


def _as_order(answer, what: str) -> list[str]:
    # Exact types only: a str subclass could answer every comparison the check makes with whatever it likes.
    if type(answer) not in (list, tuple) or not all(type(node) is str for node in answer):
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of node names (strings).")
    return list(answer)


#: Corners of Part A's domain, run at every seed (after the visible graphs, before the drawn ones): an output with a
#: consumer the order must leave out, and an output that is a leaf (its order is just [output]).
ORDER_CORNERS = [(LESSON_GRAPH, "r"), (BRIDGE_GRAPH, "w")]


def _order_cases(seed: int | None):
    if seed is None:
        yield LESSON_GRAPH, "L"
        yield SKIP_GRAPH, "out"
        yield BRIDGE_GRAPH, "y"
        yield from ORDER_CORNERS
        return
    yield from ORDER_CORNERS
    gen = generator("03/backward_order", seed)
    for _ in range(3):
        yield random_graph(gen)


def _check_order(backward_order_fn, graph: Graph, output: str) -> None:
    __tracebackhide__ = True
    graph = copy.deepcopy(graph)  # the learner gets this very dict; the module's own examples stay pristine
    what = f"backward_order(graph, {output!r}) for graph = {_show_graph(graph)}"
    order = _as_order(_call_plain_python(backward_order_fn, graph, output, what=what), what)
    problem = _order_problem(order, graph, output)
    if problem is None:
        return
    issue, looks_like = problem
    raise GradingFailure("\n".join([
        f"{what} is wrong.",
        f"  your order:         {order!r:.300}",
        f"  a valid order:      {reference_order(graph, output)!r} (one of several: any order that lists each node "
        "the output depends on once, before all of its inputs, is accepted)",
        f"  problem:            {issue}"]), suspects=(looks_like,) if looks_like else ())


@check
def check_backward_order(backward_order_fn, seed: int | None = None) -> None:
    """Part A: backward_order(graph, output) lists every node the output depends on once, consumers first.

    Domain: ``graph`` a dict str -> list of str, a DAG in which every node is a key and a leaf maps to [], keys in
    any order, nodes shared by several consumers, branches the output does not depend on; ``output`` any key: the
    top node, an intermediate with consumers of its own, or a leaf (pinned at every seed: ORDER_CORNERS). Contracts
    and their checks: "a list of node names" -> exact list (or tuple) of exact str; "every node that output depends
    on ... once" -> nothing missing, nothing twice (NO_VISITED_SET); "every node comes before all of its inputs" ->
    every edge checked, any valid order accepted, an invalid one named by the walk that makes it (traversal_kind:
    FORWARD_ORDER, BREADTH_FIRST, PREORDER, or INPUT_BEFORE_CONSUMER); "no node that output does not depend on" ->
    UNREACHABLE; "do not modify graph" -> a deep copy compared afterwards (CHANGED_INPUT); plain Python -> no
    autograd (Route.AUTOGRAD).
    """
    __tracebackhide__ = True
    for graph, output in _order_cases(seed):
        with trial():
            _check_order(backward_order_fn, graph, output)


# ---------------------------------------------------------------------------------------------- Part B

def _run_in_order(graph: Graph, local: Local, output: str, order: list[str], upstream: bool = True) -> list[float]:
    """Gradients from visiting ``order`` once each with ``+=`` (the reference when the order is valid)."""
    grad = dict.fromkeys(order, 0.0)
    grad[output] = 1.0
    for node in order:
        for source in graph[node]:
            grad[source] += local[node, source] * (grad[node] if upstream else 1.0)
    return [grad[node] for node in reference_order(graph, output)]


def _gradient_oracles(graph: Graph, local: Local, output: str):
    """dOutput/dNode for every node the output depends on, by autograd and by central differences.

    The same graph is built from float64 scalars: node = nudge + sum(local * input). The derivative with respect to
    a node's additive nudge (at 0) is the gradient with respect to that node, intermediates included.
    """
    nodes = reference_order(graph, output)
    index = {node: i for i, node in enumerate(nodes)}

    def output_value(nudges: torch.Tensor) -> torch.Tensor:
        value: dict[str, torch.Tensor] = {}
        for node in reversed(nodes):  # inputs before consumers
            value[node] = nudges[index[node]] + sum(local[node, source] * value[source] for source in graph[node])
        return value[output]

    zeros = torch.zeros(len(nodes), dtype=torch.float64)
    return nodes, autograd_gradient(output_value, zeros)[0], central_difference(output_value, zeros)[0]


def _every_node(values: torch.Tensor, graph: Graph, local: Local, nodes: list[str], rule: Callable) -> bool:
    """True if at every node below the output, rule(value, [local * consumer's value for each consumer]) holds."""
    index = {node: i for i, node in enumerate(nodes)}
    sent: dict[str, list[float]] = {node: [] for node in nodes}
    for consumer in nodes:
        for source in graph[consumer]:
            sent[source].append(local[consumer, source] * float(values[index[consumer]]))
    return all(rule(float(values[index[node]]), parts) for node, parts in sent.items() if parts)


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-8 + 1e-6 * abs(b)


def _walk_symptoms(graph: Graph, local: Local, output: str) -> list:
    """What accumulating in a breadth-first or a depth-first preorder gives. Where the two give the same numbers the
    answer cannot say which walk it was, only what both did (an input before its consumer)."""
    walked = torch.tensor(_run_in_order(graph, local, output, _breadth_first(graph, output)))
    preorders = [torch.tensor(_run_in_order(graph, local, output, _preorder(graph, output, reverse)))
                 for reverse in (False, True)]
    same = [p for p in preorders if torch.allclose(p, walked, rtol=1e-9, atol=1e-12)]
    return [(INPUT_BEFORE_CONSUMER if same else BREADTH_FIRST).looks_like(walked),
            *(PREORDER.looks_like(p) for p in preorders if not any(p is q for q in same))]


def _gradient_symptoms(graph: Graph, local: Local, output: str, nodes: list[str]) -> list:
    def by_rule(rule):
        return lambda received: _every_node(received, graph, local, nodes, rule)

    return [OUTPUT_NOT_ONE.looks_like(torch.zeros(len(nodes))),
            MISSING_UPSTREAM.looks_like(_run_in_order(graph, local, output, nodes, upstream=False)),
            *_walk_symptoms(graph, local, output),
            OVERWROTE.when(by_rule(lambda value, parts: any(_near(value, part) for part in parts))),
            AVERAGED_PATHS.when(by_rule(lambda value, parts: _near(value, sum(parts) / len(parts))))]


def _as_gradients(answer, nodes: list[str], expected: torch.Tensor, what: str) -> torch.Tensor:
    """The learner's dict as a float64 vector in ``nodes`` order; extra nodes are allowed only with gradient 0."""
    if type(answer) is not dict or not all(type(node) is str for node in answer):
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict node name -> gradient.")
    missing = [node for node in nodes if node not in answer]
    if missing:
        message = (f"{what} has no gradient for {', '.join(map(repr, missing))}; expected one entry for every node "
                   f"the output depends on: {nodes}.")
        zeros = {node for node, value in zip(nodes, expected.tolist()) if value == 0.0}
        if set(missing) <= zeros:  # seen: only nodes whose gradient is 0 are left out
            raise proven_failure(message + "\n  Every node left out has gradient 0.",
                                 ZERO_LEFT_OUT)
        raise GradingFailure(message)
    not_numbers = {node: type(value).__name__ for node, value in answer.items()
                   if isinstance(value, bool) or not isinstance(value, (int, float))}
    if not_numbers:
        raise GradingFailure(f"{what} gives {not_numbers} as gradients; expected Python floats (a float per node, "
                             "as the part says: float(value) converts a 0-d tensor).")
    values = {node: float(as_answer(value, what=f"{what}[{node!r}]", shape=())) for node, value in answer.items()}
    stray = {node: value for node, value in values.items() if node not in nodes and value != 0.0}
    if stray:
        raise GradingFailure(f"{what} gives gradients {stray} to nodes the output does not depend on; their gradient "
                             "is 0 (or leave them out).", suspects=(UNREACHABLE,))
    return torch.tensor([values[node] for node in nodes], dtype=torch.float64)


# Two paths from `out` to `c` that cancel (2 · 1.5 + 1 · (-3) = 0) and a zero local derivative (b -> y): `c`, `y` and
# `z` have gradient 0 and must still be listed; `spare` consumes `c` but `out` does not depend on it.
CANCEL_GRAPH: Graph = {"spare": ["c"], "out": ["a", "b"], "a": ["c"], "b": ["c", "y"], "c": ["z"], "y": ["z"],
                       "z": []}
CANCEL_LOCAL: Local = {("out", "a"): 2.0, ("out", "b"): 1.0, ("a", "c"): 1.5, ("b", "c"): -3.0, ("b", "y"): 0.0,
                       ("c", "z"): 1.25, ("y", "z"): -0.5, ("spare", "c"): 4.0}
#: Corners of Part B's domain, run at every seed (after the visible graphs, before the drawn ones): local derivatives
#: of both signs and 0, paths that cancel to an exact 0, an output with a consumer, an output that is a leaf.
GRADIENT_CORNERS = [(CANCEL_GRAPH, CANCEL_LOCAL, "out"), (LESSON_GRAPH, LESSON_LOCAL, "r"),
                    (BRIDGE_GRAPH, BRIDGE_LOCAL, "w")]


def _gradient_cases(seed: int | None):
    if seed is None:
        yield LESSON_GRAPH, LESSON_LOCAL, "L"
        yield SKIP_GRAPH, SKIP_LOCAL, "out"
        yield BRIDGE_GRAPH, BRIDGE_LOCAL, "y"
        yield from GRADIENT_CORNERS
        return
    yield from GRADIENT_CORNERS
    gen = generator("03/accumulate_gradients", seed)
    for _ in range(3):
        graph, output = random_graph(gen)
        yield graph, random_local(gen, graph), output


def _check_gradients(accumulate_gradients_fn, graph: Graph, local: Local, output: str) -> None:
    __tracebackhide__ = True
    graph, local = copy.deepcopy(graph), dict(local)  # the learner gets these very dicts
    what = (f"accumulate_gradients(graph, local_grads, {output!r}) for graph = {_show_graph(graph)}, "
            f"local_grads = {_show_local(local)}")
    answer = _call_plain_python(accumulate_gradients_fn, graph, local, output, what=what)
    nodes, expected, fd = _gradient_oracles(graph, local, output)
    expect_close(_as_gradients(answer, nodes, expected, what), expected, what=what, fd=fd,
                 extra=f"  nodes, by index:    {nodes}", symptoms=_gradient_symptoms(graph, local, output, nodes))


@check
def check_accumulate_gradients(accumulate_gradients_fn, seed: int | None = None) -> None:
    """Part B: accumulate_gradients(graph, local_grads, output) -> {node: d output / d node} (sum over paths), as
    floats, by plain Python (no autograd), leaving graph and local_grads unchanged.

    Domain: ``graph`` and ``output`` as in Part A; ``local_grads`` a float for every edge (node, input), any real
    value: positive, negative, 0 (pinned at every seed: GRADIENT_CORNERS, with paths that cancel to an exact 0, an
    output with a consumer and a leaf output). Contracts and their checks: "a dict {node: gradient} ... for every
    node the output depends on" -> an entry for each, 0 included (ZERO_LEFT_OUT when exactly those are missing);
    "a Python float, not a tensor" -> int or float values only; "the sum over all paths" -> autograd and central
    differences on the same graph built from float64 scalars; "nodes the output does not depend on may be left out
    (or given 0)" -> any other value there is UNREACHABLE; "do not modify graph or local_grads" -> compared
    afterwards (CHANGED_INPUT); "no autograd" -> Route.AUTOGRAD.
    """
    __tracebackhide__ = True
    for graph, local, output in _gradient_cases(seed):
        with trial():
            _check_gradients(accumulate_gradients_fn, graph, local, output)


# ---------------------------------------------------------------------------------------------- Part C

@dataclass
class ReplicaCase:
    sizes: tuple[int, ...]
    model: nn.Sequential
    rounds: list[tuple[torch.Tensor, torch.Tensor, list[int]]]  # (batch inputs, batch targets, backward order)

    @property
    def replicas(self) -> int:
        return len(self.rounds[0][2])

    def shard(self, round_index: int, replica: int) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets, _ = self.rounds[round_index]
        rows = slice(replica * len(inputs) // self.replicas, (replica + 1) * len(inputs) // self.replicas)
        return inputs[rows], targets[rows]


def _replica_case(gen: torch.Generator, sizes, replicas: int, shard: int, orders: list[list[int]]) -> ReplicaCase:
    batch = replicas * shard
    rounds = [(uniform(gen, (batch, sizes[0])), uniform(gen, (batch, sizes[-1])), order) for order in orders]
    return ReplicaCase(tuple(sizes), random_mlp(gen, sizes), rounds)


def _replica_cases(seed: int | None):
    """Two cases of two rounds each. In every case the first round ends with a replica other than 0 (so replica 0,
    checked first, shows whether the others were updated) and the second round does not end with the last replica
    (so a hook on the last replica only fires too early)."""
    if seed is None:
        gen = generator("03/allreduce/public", 0)
        yield _replica_case(gen, (3, 4, 2), 2, 3, [[0, 1], [1, 0]])
        yield _replica_case(gen, (2, 3, 1), 3, 2, [[0, 1, 2], [2, 0, 1]])
        return
    gen = generator("03/allreduce", seed)
    for pinned in ([2], [3, 4]):  # two replicas, then more than two, at every seed
        replicas = choice(gen, pinned)
        orders = [torch.randperm(replicas, generator=gen).tolist() for _ in range(2)]
        if orders[0][-1] == 0:
            orders[0].reverse()
        if orders[1][-1] == replicas - 1:
            orders[1].reverse()
        sizes = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), choice(gen, [1, 2]))
        yield _replica_case(gen, sizes, replicas, choice(gen, [2, 3]), orders)


def _backward(case: ReplicaCase, models: list[nn.Module], round_index: int, replicas: list[int]) -> None:
    """Each replica in ``replicas``, in turn, runs forward and backward on its shard of the round's batch."""
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    for replica in replicas:
        loss = F.mse_loss(models[replica](case.shard(round_index, replica)[0]), case.shard(round_index, replica)[1])
        call_learner(loss.backward, what=f"round {round_index + 1} (backward order {order}): replica {replica}'s "
                                         "loss.backward() (your hooks run inside it)")


def _fresh_replicas(attach_allreduce_hooks_fn, case: ReplicaCase, label: str) -> list[nn.Module]:
    __tracebackhide__ = True
    models = [copy.deepcopy(case.model) for _ in range(case.replicas)]
    call_learner(attach_allreduce_hooks_fn, models, what=label)
    return models


def _runs_with_grads_set(attach_allreduce_hooks_fn, case: ReplicaCase, round_index: int, ran: list[int],
                         label: str, unset: int | None = None) -> bool:
    """Replay the backward calls ``ran`` of a round on fresh replicas whose every .grad (but replica ``unset``'s)
    already holds zeros: does the learner's code now run through?"""
    try:
        models = _fresh_replicas(attach_allreduce_hooks_fn, case, label)
        for replica, model in enumerate(models):
            for param in model.parameters():
                param.grad = None if replica == unset else torch.zeros_like(param)
        _backward(case, models, round_index, ran)
    except GradingFailure:
        return False
    return True


def _crash_cause(attach_allreduce_hooks_fn, case: ReplicaCase, round_index: int, position: int,
                 label: str) -> tuple[str, Misconception] | None:
    """Why the backward of the replica at ``position`` of the round's order crashed, when a replay shows that it was a
    missing .grad: its own (read in a hook that fires before .grad is written) or another replica's."""
    order = case.rounds[round_index][2]
    ran, replica, waiting = order[:position + 1], order[position], order[position + 1:]
    if not _runs_with_grads_set(attach_allreduce_hooks_fn, case, round_index, ran, label):
        return None  # not about .grad at all
    if not _runs_with_grads_set(attach_allreduce_hooks_fn, case, round_index, ran, label, unset=replica):
        return (f"  replayed with every other replica's .grad set, it still crashed: your hook read replica "
                f"{replica}'s own .grad before backward had written it.", TENSOR_HOOK_READS_GRAD)
    if waiting:
        return (f"  at that moment replicas {waiting} had not run backward yet in this round, so their .grad was "
                "None (replayed with every .grad set, your hooks ran through).", AVERAGED_EARLY)
    return None


def _run_round(attach_allreduce_hooks_fn, case: ReplicaCase, models: list[nn.Module], round_index: int,
               label: str) -> None:
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    for model in models:
        model.zero_grad()
    for position, replica in enumerate(order):
        try:
            _backward(case, models, round_index, [replica])
        except GradingFailure as failure:
            cause = _crash_cause(attach_allreduce_hooks_fn, case, round_index, position, label)
            if cause is None:
                raise
            raise GradingFailure(f"{failure.message}\n{cause[0]}", suspects=(cause[1],)) from None


def _replica_symptoms(round_index: int, grads_now: list, replica: int, expected: torch.Tensor,
                      own: torch.Tensor, replicas: int) -> list:
    def close(a, b):
        return a is not None and torch.allclose(a.detach().double(), b, rtol=1e-6, atol=1e-8)

    kept_own = close(grads_now[replica], own)
    others_averaged = any(close(g, expected) for r, g in enumerate(grads_now) if r != replica)
    return [SUMMED.looks_like(replicas * expected),
            ONLY_FIRED.given(kept_own and others_averaged),
            NO_AVERAGING.given(kept_own and not others_averaged and round_index == 0),
            FIRST_ROUND_ONLY.given(kept_own and not others_averaged and round_index > 0)]


def _check_round(case: ReplicaCase, models: list[nn.Module], round_index: int, label: str) -> None:
    __tracebackhide__ = True
    inputs, targets, order = case.rounds[round_index]
    expected, fd = mean_loss_gradients(case.model, F.mse_loss, inputs, targets)
    own = [mean_loss_gradients(case.model, F.mse_loss, *case.shard(round_index, r), fd=False)[0]
           for r in range(case.replicas)]
    for name, _ in case.model.named_parameters():
        grads_now = [dict(m.named_parameters())[name].grad for m in models]
        for replica, grad in enumerate(grads_now):
            what = f"{label}; round {round_index + 1} (backward order {order}): replica {replica}'s {name}.grad"
            if grad is None:
                raise GradingFailure(f"{what} is None: every replica must hold the averaged gradient.")
            expect_close(grad, expected[name], what=what, fd=fd[name], extra=(
                "  expected:           the gradient of the mean loss over the whole batch (= the average of the "
                "replicas' own gradients)"),
                symptoms=_replica_symptoms(round_index, grads_now, replica, expected[name], own[replica][name],
                                           case.replicas))
        pointers = [grad.untyped_storage().data_ptr() for grad in grads_now]
        if len(set(pointers)) < len(pointers):
            raise proven_failure(f"{label}; round {round_index + 1}: the replicas' {name}.grad are not separate "
                                 "tensors (two or more share memory).", SHARED_GRAD)


def _check_replicas(attach_allreduce_hooks_fn, case: ReplicaCase) -> None:
    __tracebackhide__ = True
    shard = len(case.rounds[0][0]) // case.replicas
    label = (f"attach_allreduce_hooks(replicas) for {case.replicas} replicas of an MLP with layer sizes "
             f"{case.sizes}, each running backward on a shard of {shard} examples (mean squared error)")
    models = _fresh_replicas(attach_allreduce_hooks_fn, case, label)
    versions = [[param._version for param in model.parameters()] for model in models]
    for round_index in range(len(case.rounds)):
        _run_round(attach_allreduce_hooks_fn, case, models, round_index, label)
        for replica, model in enumerate(models):
            for (name, param), original, version in zip(model.named_parameters(), case.model.parameters(),
                                                        versions[replica]):
                if not torch.equal(param.detach(), original.detach()) or param._version != version:
                    raise proven_failure(f"{label}; round {round_index + 1}: replica {replica}'s parameter {name} "
                                         "was changed during backward.", CHANGED_PARAMETERS)
        _check_round(case, models, round_index, label)


@check
def check_attach_allreduce_hooks(attach_allreduce_hooks_fn, seed: int | None = None) -> None:
    """Part C: after every replica's backward on its shard, every replica's .grad is the full-batch gradient, in a
    tensor of its own, and the parameters are unchanged.

    Domain: a list of 2 or more identical float64 MLPs (same weights), hooks attached once, then rounds of
    zero_grad() (every .grad None) and one backward per replica on equal shards, in an order that is not 0, 1, 2...
    Pinned at every seed: two replicas in the first case and three or four in the second; round 1 ends with a
    replica other than 0 and round 2 does not end with the last one; two rounds. Contracts and their checks: "every
    parameter of every replica must hold ... the average" -> each replica's .grad against the full-batch gradient
    (autograd and finite differences), after every round (FIRST_ROUND_ONLY, ONLY_FIRED, SUMMED, NO_AVERAGING); "in
    some order" -> hooks that average early crash on a None .grad (AVERAGED_EARLY, TENSOR_HOOK_READS_GRAD, by
    replay); "its own tensor" -> storage pointers differ (SHARED_GRAD); "never change the parameters" -> values and
    version counters (CHANGED_PARAMETERS).
    """
    __tracebackhide__ = True
    for case in _replica_cases(seed):
        with trial():
            _check_replicas(attach_allreduce_hooks_fn, case)
