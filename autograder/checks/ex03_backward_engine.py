"""Checks for exercise 03, the backward engine: a valid backward order, accumulated gradients, a bucketed all-reduce
by hooks.

A graph is a plain dict ``node -> list of input nodes`` (strings, a DAG of at most 30 nodes): every node is a key and a
leaf maps to ``[]``. Local derivatives are a dict ``(node, input) -> float``. Every case is a
:func:`~autograder.checking.trial`, and each misconception below shows in at least two cases of the visible and of the
hidden test, so that it can be named (one coincidence never is).

Parts A and B are plain Python: autograd is forbidden inside them and the learner's ``graph`` and ``local_grads``
must come back unchanged. Part B is graded with the course's own ``backward_order`` in the learner's namespace, so
that a mistake in Part A costs Part A only. Part C's hooks run inside backward passes the check drives itself, and
talk to each other only through the check's own ``all_reduce``, which records every call.
"""

from __future__ import annotations

import contextlib
import copy
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from ..checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Route,
    Routes,
    as_answer,
    call_learner,
    check,
    expect_close,
    proven_failure,
    trial,
)
from ..hints import HintBook, PartHints
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
# Its keys are listed in no particular order (the order they are written in says nothing about the edges).
BRIDGE_GRAPH: Graph = {"h": ["w", "k"], "y": ["h", "u"], "w": [], "g": ["h"], "spare": ["u"], "k": ["w"], "u": ["g"]}
# The lesson's graph with a leaf listed first and a consumer before its inputs: its keys in dict order are no
# backward order (x, q, L, p, r), neither a forward one (L comes before r and p).
LEAVES_FIRST_GRAPH: Graph = {"x": [], "q": ["x"], "L": ["r", "p"], "p": ["x"], "r": ["q", "p"]}
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
    "breadth-first order", "A breadth-first walk from the output takes the nodes level by level, but a node reached "
    "by a short path and by a longer one is still waiting for the longer path's share when its level comes up, so it "
    "passes on an incomplete gradient. A node may run only after every node that uses it: reverse a depth-first "
    "postorder, or count each node's consumers and run it when the count reaches 0.")
PREORDER = Misconception(
    "depth-first preorder", "A depth-first walk that takes a node the first time it meets it (preorder) reaches a "
    "shared node through one consumer while another consumer has not run yet. Append a node after everything below it "
    "(postorder) and reverse that list, or count each node's consumers and run it when the count reaches 0.")

KEY_ORDER = Misconception(
    "followed the order of the graph's keys",
    "The keys of the dict come in any order: the order in which a graph is written down says nothing about which "
    "node consumes which. Derive the order from the edges alone: walk from the output (depth-first postorder, "
    "reversed), or count each node's consumers and take a node when its count reaches 0.")
WHOLE_GRAPH_COUNTS = Misconception(
    "counted consumers the output does not depend on",
    "Count only the edges that come from nodes the output depends on. A consumer on another branch (or a consumer of "
    "the output itself) never runs in this backward pass, so a node that waits for it waits for ever and never "
    "gets listed: first find the nodes reachable from the output, then count consumers among those only.")
CHANGED_DICTS = Misconception(
    "changed the graph or local_grads it was given",
    "The test hands you its own dicts and compares them afterwards: build new lists and dicts of your own. Never "
    "pop from or append to graph[node], add or delete keys, or remove entries from local_grads; if your algorithm "
    "consumes edges, work on a copy first ({node: list(inputs) for node, inputs in graph.items()}).")
AUTOGRAD_IN_BOOKKEEPING = Misconception(
    "ran autograd in a plain-Python part", "Parts A and B are the engine's bookkeeping done by hand on the numbers "
    "you are given: walk the dict and propagate the numbers yourself with Python arithmetic (+= and *) along the "
    "edges. No tensors, backward() or torch.autograd.grad inside them.")

OUTPUT_NOT_ONE = Misconception("output's gradient not set to 1", "Start backward with d output / d output = 1.")
MISSING_UPSTREAM = Misconception(
    "missing the upstream gradient", "Each edge sends local derivative × the consumer's gradient, not the local "
    "derivative alone.")
OVERWROTE = Misconception(
    "overwrote instead of summing at a branch point", "A node used by several consumers gets one contribution from "
    "each; add them (+=), do not replace (=).")
ZERO_LEFT_OUT = Misconception(
    "left out the nodes whose gradient is 0", "Every node the output depends on gets an entry, also when its gradient "
    "is 0 (a zero local derivative, or paths whose contributions cancel): start every such node at 0.0 and add to it, "
    "instead of creating an entry when a non-zero contribution arrives.")
AVERAGED_PATHS = Misconception(
    "averaged the paths", "Contributions of different paths add up; they are never averaged.")

SUMMED = Misconception(
    "summed instead of averaging", "all_reduce returns the SUM over the replicas (like torch.distributed's default "
    "operation): divide it by the number of replicas. The mean loss over the full batch is the average of the shard "
    "losses, so its gradient is the average of the shard gradients.")
ONLY_FIRED = Misconception(
    "only updated the replica that fired", "The hook that completes a bucket must write the average into .grad of "
    "EVERY replica, not only of the one whose backward is running.")
NO_AVERAGING = Misconception(
    "no averaging happened", "all_reduce was never called and every replica kept its own shard's gradient: your "
    "hooks never found a bucket complete. A bucket is complete once every replica's gradient of every one of its "
    "parameters has arrived: hook every parameter of every replica, count those arrivals per bucket, and let the "
    "hook that completes the count call all_reduce.",
    question="Did any bucket ever look complete to your hooks? Count what arrives per bucket in a backward pass.")
BYPASSED_ALL_REDUCE = Misconception(
    "averaged without all_reduce", "The .grad values are right, but the replicas stand for processes on different "
    "machines: their gradients may be combined only through the all_reduce the test hands you, once per bucket per "
    "round. Send each bucket through it and write back what it returns, divided by the number of replicas.")
FIRST_ROUND_ONLY = Misconception(
    "only the first round was right", "Your hooks work in a first round but not in the next: whatever they record "
    "during a round (arrival counts, sets, stashed gradients) must be reset once its bucket has been reduced, so "
    "that every backward round starts from an empty record.")
AVERAGED_EARLY = Misconception(
    "reduced a bucket before all of its gradients had arrived",
    "A bucket is complete only when every replica's gradient of every one of its parameters has arrived: count "
    "one arrival per (replica, parameter) and reduce when the count reaches replicas × parameters in the bucket, "
    "whatever order the replicas run in. Common causes: counting replicas instead of (replica, parameter) pairs, "
    "one record shared by all buckets, a hard-coded number of replicas, or a hook defined in a loop that sees the "
    "loop's LAST bucket (bind it: def hook(param, bucket=bucket, record=record)).",
    question="When is a bucket complete? Which record and which bucket does each of your hooks see when it runs?")
TENSOR_HOOK_READS_GRAD = Misconception(
    "read .grad in a hook that runs before .grad is written", "Tensor.register_hook calls fn(grad) BEFORE this "
    "backward's gradient reaches param.grad, so inside it param.grad is still None (or an old value). Use the grad "
    "argument such a hook receives, or register_post_accumulate_grad_hook, which runs after .grad is written.")
SHARED_GRAD = Misconception(
    "replicas share one .grad tensor", "Every replica's .grad is the same tensor object, so the next in-place "
    "accumulation into one replica's .grad (a second micro-batch, a gradient clip) changes all of them. Give each "
    "replica its own copy: .clone() the averaged piece once per replica.")
CHANGED_PARAMETERS = Misconception(
    "hooks changed the parameters", "An all-reduce hook only writes .grad; the parameters change in the optimizer "
    "step, never inside backward.")
PER_PARAMETER = Misconception(
    "one all_reduce per parameter instead of per bucket", "Buckets exist to send fewer, larger messages: group the "
    "parameters (in reverse order of model.parameters()) until a bucket holds at least bucket_size numbers, and "
    "call all_reduce once per bucket with the bucket's gradients concatenated.")
ONE_BUCKET = Misconception(
    "one all_reduce for the whole model", "One message at the end cannot overlap with backward: split the "
    "parameters into buckets of at least bucket_size numbers (in reverse order of model.parameters()) and send each "
    "bucket as soon as it is complete.")
FORWARD_BUCKETS = Misconception(
    "filled the buckets in the order of model.parameters()", "Backward produces the last layer's gradients first, "
    "so the buckets are filled in the REVERSE order of model.parameters(): the first bucket is complete (and sent) "
    "while the earlier layers' gradients are still being computed.")
LATE_ALL_REDUCE = Misconception(
    "sent a bucket only after later gradients had arrived", "Call all_reduce from the hook whose gradient completes "
    "the bucket: that is what lets DDP's communication overlap the rest of backward. Waiting for more gradients (or "
    "for the end of backward) gives the right numbers but no overlap.")
TENSOR_TRUTH_VALUE = Misconception(
    "asked a tensor for a single True/False", "A tensor with more than one element has no truth value: list.index(p), "
    "p in some_list, p == q and if p.grad: all ask for one. Find a parameter by identity (is, or a dict keyed by "
    "id(p)), and test p.grad is None.")


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
    order, seen = [], set()

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
    return "{" + ", ".join(f"({node}, {source}): {value!r}" for (node, source), value in local.items()) + "}"


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
    routes = Routes()
    answer = call_learner(fn, *args, what=what, routes=routes)
    if routes.used(Route.AUTOGRAD):
        raise proven_failure(f"{what} used {Route.AUTOGRAD.value}, which Parts A and B rule out.",
                             AUTOGRAD_IN_BOOKKEEPING)
    for name, old, new in zip(("graph", "local_grads"), before, args):
        if type(new) is not type(old) or new != old:
            raise proven_failure(f"{what} changed its argument {name}: it was {old!r:.200} and is now "
                                 f"{new!r:.200}.", CHANGED_DICTS)
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
        counted_all = set(order) == _counted_over_whole_graph(graph, output)
        return (f"{', '.join(map(repr, missing))} missing: every node the output depends on must be listed, "
                "the output itself and the leaves included", WHOLE_GRAPH_COUNTS if counted_all else None)
    violation = _violation(order, graph)
    if violation is None:
        return None
    source, consumer = violation
    problem = f"{source!r} comes before {consumer!r}, but {consumer!r} consumes {source!r}"
    if order == [node for node in graph if node in needed]:  # the dict's own order: named only if no walk gives it
        walks = [_breadth_first(graph, output), _preorder(graph, output), _preorder(graph, output, reverse=True)]
        kind = traversal_kind(order, graph.__getitem__, output)
        return problem, KEY_ORDER if kind == "early" and order not in walks else INPUT_BEFORE_CONSUMER
    return problem, ORDER_MISTAKES[traversal_kind(order, graph.__getitem__, output)]


def _counted_over_whole_graph(graph: Graph, output: str) -> set[str]:
    """The nodes a consumer-counting walk from ``output`` lists when it counts the consumers over the whole graph: a
    node with a consumer the output does not depend on never reaches 0, and nothing below it is listed either."""
    waiting = dict.fromkeys(graph, 0)
    for sources in graph.values():
        for source in sources:
            waiting[source] += 1
    listed, ready = {output}, [output]
    while ready:
        for source in graph[ready.pop()]:
            waiting[source] -= 1
            if waiting[source] == 0:
                listed.add(source)
                ready.append(source)
    return listed


#: The misconception each kind of invalid order (traversal_kind) is named by.
ORDER_MISTAKES = {"forward": FORWARD_ORDER, "breadth-first": BREADTH_FIRST, "preorder": PREORDER,
                  "early": INPUT_BEFORE_CONSUMER}


def _as_order(answer, what: str) -> list[str]:
    # Exact types only: a str subclass could answer every comparison the check makes with whatever it likes.
    if type(answer) is not list:
        raise GradingFailure(f"{what} returned a {type(answer).__name__}: {answer!r:.120}; the part asks for a list "
                             "of node names (list(...) converts it).")
    if not all(type(node) is str for node in answer):
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of node names (strings).")
    return answer


#: Corners of Part A's domain, run at every seed (after the visible graphs, before the drawn ones): an output with a
#: consumer the order must leave out, an output that is a leaf (its order is just [output]), and keys listed leaves
#: first with a consumer before its inputs (so the dict's own order is no answer).
ORDER_CORNERS = [(LESSON_GRAPH, "r"), (BRIDGE_GRAPH, "w"), (LEAVES_FIRST_GRAPH, "L")]


def _order_cases(grading_seed: int | None):
    if grading_seed is None:
        yield LESSON_GRAPH, "L"
        yield SKIP_GRAPH, "out"
        yield BRIDGE_GRAPH, "y"
        yield from ORDER_CORNERS
        return
    yield from ORDER_CORNERS
    gen = generator("03/backward_order", grading_seed)
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
        f"{what} is wrong.", f"  your order:         {order!r:.300}",
        f"  a valid order:      {reference_order(graph, output)!r} (one of several: any order that lists each node "
        "the output depends on once, before all of its inputs, is accepted)",
        f"  problem:            {issue}"]), suspects=(looks_like,) if looks_like else ())


@check
def check_backward_order(backward_order_fn, grading_seed: int | None = None) -> None:
    """Part A: backward_order(graph, output) lists every node the output depends on once, consumers first.

    Domain: ``graph`` a dict str -> list of str, a DAG in which every node is a key and a leaf maps to [], keys in
    any order (a leaves-first listing pinned at every seed, the visible BRIDGE_GRAPH unordered, the drawn graphs
    shuffled), at most 30 nodes, nodes shared by several consumers, branches the output does not depend on;
    ``output`` any key: the top node, an intermediate with consumers of its own, or a leaf (pinned at every seed:
    ORDER_CORNERS). Contracts and their checks: "a **list** of node names" -> exactly a list of exact str (a tuple
    fails); "every node that output depends on ... once" -> nothing missing (WHOLE_GRAPH_COUNTS when exactly the
    nodes a whole-graph consumer count reaches are listed), nothing twice (NO_VISITED_SET); "every node comes before
    all of its inputs" -> every edge checked, any valid order accepted, an invalid one named by the walk that makes
    it (traversal_kind: FORWARD_ORDER, BREADTH_FIRST, PREORDER, or INPUT_BEFORE_CONSUMER) or KEY_ORDER when it is the
    dict's own order and no walk's; "no node that output does not depend on" -> UNREACHABLE; "do not modify graph" ->
    a deep copy compared afterwards (CHANGED_DICTS); plain Python -> no autograd (AUTOGRAD_IN_BOOKKEEPING).
    """
    __tracebackhide__ = True
    for graph, output in _order_cases(grading_seed):
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
            raise proven_failure(message + "\n  Every node left out has gradient 0.", ZERO_LEFT_OUT)
        raise GradingFailure(message)
    not_floats = {node: type(value).__name__ for node, value in answer.items() if not isinstance(value, float)}
    if not_floats:
        raise GradingFailure(f"{what} gives {not_floats} as gradients; expected a Python float for every node, as "
                             "the part says (1.0, not 1; float(value) converts an int or a 0-d tensor).")
    values = {node: float(as_answer(value, what=f"{what}[{node!r}]", shape=())) for node, value in answer.items()}
    stray = {node: value for node, value in values.items() if node not in nodes and value != 0.0}
    if stray:
        raise GradingFailure(f"{what} gives gradients {stray} to nodes the output does not depend on; their gradient "
                             "is 0.0 (or leave them out).", suspects=(UNREACHABLE,))
    return torch.tensor([values[node] for node in nodes], dtype=torch.float64)


# Two paths from `out` to `c` that cancel (2 · 1.5 + 1 · (-3) = 0) and a zero local derivative (b -> y): `c`, `y` and
# `z` have gradient 0 and must still be listed; `spare` consumes `c` but `out` does not depend on it.
CANCEL_GRAPH: Graph = {"spare": ["c"], "out": ["a", "b"], "a": ["c"], "b": ["c", "y"], "c": ["z"], "y": ["z"],
                       "z": []}
CANCEL_LOCAL: Local = {("out", "a"): 2.0, ("out", "b"): 1.0, ("a", "c"): 1.5, ("b", "c"): -3.0, ("b", "y"): 0.0,
                       ("c", "z"): 1.25, ("y", "z"): -0.5, ("spare", "c"): 4.0}
#: Corners of Part B's domain, run at every seed (after the visible graphs, before the drawn ones): local derivatives
#: of both signs and 0, paths that cancel to an exact 0, an output with a consumer, an output that is a leaf, keys
#: listed leaves first (an answer that walks the dict's keys in their order passes gradients on too early).
GRADIENT_CORNERS = [(CANCEL_GRAPH, CANCEL_LOCAL, "out"), (LESSON_GRAPH, LESSON_LOCAL, "r"),
                    (BRIDGE_GRAPH, BRIDGE_LOCAL, "w"), (LEAVES_FIRST_GRAPH, LESSON_LOCAL, "L")]


def _gradient_cases(grading_seed: int | None):
    if grading_seed is None:
        yield LESSON_GRAPH, LESSON_LOCAL, "L"
        yield SKIP_GRAPH, SKIP_LOCAL, "out"
        yield BRIDGE_GRAPH, BRIDGE_LOCAL, "y"
        yield from GRADIENT_CORNERS
        return
    yield from GRADIENT_CORNERS
    gen = generator("03/accumulate_gradients", grading_seed)
    for _ in range(3):
        graph, output = random_graph(gen)
        yield graph, random_local(gen, graph), output


@contextlib.contextmanager
def _with_course_order(fn: Callable):
    """While Part B runs, the name ``backward_order`` in the learner's notebook means the course's own (correct)
    order, so that an answer built on Part A, as the text suggests, is graded on Part B's own work."""
    namespace = getattr(fn, "__globals__", None)
    if type(namespace) is not dict or "backward_order" not in namespace:
        yield
        return
    own = namespace["backward_order"]
    namespace["backward_order"] = reference_order
    try:
        yield
    finally:
        namespace["backward_order"] = own


def _check_gradients(accumulate_gradients_fn, graph: Graph, local: Local, output: str) -> None:
    __tracebackhide__ = True
    graph, local = copy.deepcopy(graph), dict(local)  # the learner gets these very dicts
    what = (f"accumulate_gradients(graph, local_grads, {output!r}) for graph = {_show_graph(graph)}, "
            f"local_grads = {_show_local(local)}")
    with _with_course_order(accumulate_gradients_fn):
        answer = _call_plain_python(accumulate_gradients_fn, graph, local, output, what=what)
    nodes, expected, fd = _gradient_oracles(graph, local, output)
    if not torch.allclose(fd, expected, rtol=1e-4, atol=1e-6):
        raise CourseBug(f"the oracles disagree for {what} (autograd {expected.tolist()}, finite differences "
                        f"{fd.tolist()}).")
    expect_close(_as_gradients(answer, nodes, expected, what), expected, what=what, source="sum over paths",
                 extra=f"  nodes, by index:    {nodes}\n  (the sums over paths are computed by autograd and checked "
                       "by central differences, both on this graph)",
                 symptoms=_gradient_symptoms(graph, local, output, nodes))


@check
def check_accumulate_gradients(accumulate_gradients_fn, grading_seed: int | None = None) -> None:
    """Part B: accumulate_gradients(graph, local_grads, output) -> {node: d output / d node} (sum over paths), as
    floats, by plain Python (no autograd), leaving graph and local_grads unchanged.

    Domain: ``graph`` and ``output`` as in Part A; ``local_grads`` a float for every edge (node, input), any real
    value: positive, negative, 0 (pinned at every seed: GRADIENT_CORNERS, with paths that cancel to an exact 0, an
    output with a consumer, a leaf output and keys listed leaves first). Contracts and their checks: "a dict {node:
    gradient} ... for every node the output depends on" -> an entry for each, 0 included (ZERO_LEFT_OUT when exactly
    those are missing); "a Python float, not a tensor" -> every value a float (an int or a tensor fails); "the sum
    over all paths" -> autograd and central differences on the same graph built from float64 scalars; "nodes the
    output does not depend on may be left out (or given 0.0)" -> any other value there is UNREACHABLE; "do not modify
    graph or local_grads" -> compared afterwards (CHANGED_DICTS); "no autograd" -> Route.AUTOGRAD
    (AUTOGRAD_IN_BOOKKEEPING); "graded with the course's backward_order" -> the name is the course's own during
    the call (_with_course_order).
    """
    __tracebackhide__ = True
    for graph, local, output in _gradient_cases(grading_seed):
        with trial():
            _check_gradients(accumulate_gradients_fn, graph, local, output)


# ---------------------------------------------------------------------------------------------- Part C

def fill_buckets(numels: list[tuple[str, int]], bucket_size: int) -> list[list[str]]:
    """Consecutive names of ``numels`` (name, number of elements), a bucket closed as soon as it holds at least
    ``bucket_size`` elements; the last bucket may hold fewer."""
    buckets, current, filled = [], [], 0
    for name, numel in numels:
        current.append(name)
        filled += numel
        if filled >= bucket_size:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


@dataclass
class ReplicaCase:
    sizes: tuple[int, ...]
    model: nn.Sequential
    bucket_size: int
    rounds: list[tuple[torch.Tensor, torch.Tensor, list[int]]]  # (batch inputs, batch targets, backward order)

    @property
    def replicas(self) -> int:
        return len(self.rounds[0][2])

    def shard(self, round_index: int, replica: int) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets, _ = self.rounds[round_index]
        rows = slice(replica * len(inputs) // self.replicas, (replica + 1) * len(inputs) // self.replicas)
        return inputs[rows], targets[rows]

    def numels(self) -> list[tuple[str, int]]:
        return [(name, param.numel()) for name, param in self.model.named_parameters()]

    def buckets(self, reverse: bool = True) -> list[list[str]]:
        """The buckets of the part's text (reverse order of model.parameters()); ``reverse=False``: filled in the
        forward order instead (a mistake)."""
        return fill_buckets(self.numels()[::-1] if reverse else self.numels(), self.bucket_size)

    def describe_buckets(self) -> str:
        numel = dict(self.numels())
        return ", ".join(f"[{', '.join(bucket)}] ({sum(numel[name] for name in bucket)} numbers)"
                         for bucket in self.buckets())


def _replica_case(gen: torch.Generator, sizes, replicas: int, shard: int, bucket_size: int,
                  orders: list[list[int]]) -> ReplicaCase:
    batch = replicas * shard
    rounds = [(uniform(gen, (batch, sizes[0])), uniform(gen, (batch, sizes[-1])), order) for order in orders]
    return ReplicaCase(tuple(sizes), random_mlp(gen, sizes), bucket_size, rounds)


def _orders(gen: torch.Generator, replicas: int) -> list[list[int]]:
    """Two rounds' backward orders: the first does not end with the last replica (so it is not 0, 1, 2...), the
    second differs from the first."""
    first = torch.randperm(replicas, generator=gen).tolist()
    if first[-1] == replicas - 1:
        first.reverse()
    second = torch.randperm(replicas, generator=gen).tolist()
    if second == first:
        second.reverse()
    return [first, second]


#: Corners of Part C's domain, run at every seed (after the visible cases, before the drawn ones): bucket_size 1
#: (every parameter its own bucket, with two replicas) and a bucket_size larger than the model (one bucket for
#: everything, with three replicas).
def _corner_cases():
    gen = generator("03/allreduce/corners", 0)
    yield _replica_case(gen, (3, 4, 2), 2, 3, 1, [[1, 0], [0, 1]])
    yield _replica_case(gen, (2, 3, 1), 3, 2, 1000, [[2, 0, 1], [1, 2, 0]])


def _drawn_bucket_size(gen: torch.Generator, case_numels: list[tuple[str, int]]) -> int:
    """A bucket_size that gives two buckets or more, one of them with two parameters or more."""
    reverse = case_numels[::-1]
    sizes = [size for size in range(2, sum(n for _, n in reverse))
             if 1 < len(fill_buckets(reverse, size)) < len(reverse)]
    return choice(gen, sizes)


def _replica_cases(grading_seed: int | None):
    """Every case has two rounds; round 1 never runs the replicas in index order (it does not end with the last
    one), so a hook that waits for the last replica by index fires too early."""
    if grading_seed is None:
        gen = generator("03/allreduce/public", 0)
        # buckets [2.bias, 2.weight, 0.bias] (14: across layers; a count that started from 1 would close after
        # 2.weight) and [0.weight] (12)
        yield _replica_case(gen, (3, 4, 2), 2, 3, 11, [[1, 0], [0, 1]])
        # buckets [2.bias, 2.weight] (4, closed exactly) and [0.bias, 0.weight] (9: a bucket that counts its own
        # elements from 0 again; one that went on from 1 would close after 0.bias)
        yield _replica_case(gen, (2, 3, 1), 3, 2, 4, [[2, 0, 1], [1, 2, 0]])
        yield from _corner_cases()
        return
    yield from _corner_cases()
    gen = generator("03/allreduce", grading_seed)
    for pinned in ([2], [3, 4]):  # two replicas, then more than two, at every seed
        replicas = choice(gen, pinned)
        sizes = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), *([choice(gen, [2, 3])] if choice(gen, [0, 1]) else []),
                 choice(gen, [1, 2]))
        model_numels = [(name, param.numel()) for name, param in random_mlp(gen, sizes).named_parameters()]
        bucket_size = _drawn_bucket_size(gen, model_numels)
        yield _replica_case(gen, sizes, replicas, choice(gen, [2, 3]), bucket_size, _orders(gen, replicas))


class _Wire:
    """The check's side of one set of replicas: every gradient's arrival (seen by tensor hooks registered before the
    learner's, so they fire first) and every all_reduce call, in one log."""

    def __init__(self, models: list[nn.Module]):
        self.replicas = len(models)
        self.log: list[tuple] = []  # ("arrive", replica, name) or ("call", [flat tensor per replica])
        for replica, model in enumerate(models):
            for name, param in model.named_parameters():
                param.register_hook(partial(self._arrived, replica, name))

    def _arrived(self, replica: int, name: str, grad: torch.Tensor) -> None:
        self.log.append(("arrive", replica, name))

    def all_reduce(self, tensors):
        """The network: one 1-D tensor per replica in, their element-wise sum out (a new tensor)."""
        if type(tensors) not in (list, tuple) or len(tensors) != self.replicas or not all(
                isinstance(t, torch.Tensor) and t.dim() == 1 for t in tensors):
            raise TypeError(f"all_reduce takes a list with one 1-D tensor per replica ({self.replicas} here); it got "
                            f"{_describe_tensors(tensors)}")
        if len({t.numel() for t in tensors}) != 1:
            raise ValueError(f"all_reduce needs tensors of the same length from every replica; it got lengths "
                             f"{[t.numel() for t in tensors]}")
        flats = [t.detach().to(torch.float64).clone() for t in tensors]
        self.log.append(("call", flats))
        return torch.stack(flats).sum(0)

    def arrivals(self) -> list[tuple[int, str]]:
        return [(entry[1], entry[2]) for entry in self.log if entry[0] == "arrive"]

    def calls(self) -> list[tuple[int, list[torch.Tensor]]]:
        """Each call with the number of gradients that had arrived when it was made."""
        calls, arrived = [], 0
        for entry in self.log:
            if entry[0] == "arrive":
                arrived += 1
            else:
                calls.append((arrived, entry[1]))
        return calls


def _describe_tensors(tensors) -> str:
    if type(tensors) not in (list, tuple):
        return f"a {type(tensors).__name__}"
    kinds = [f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__ for t in tensors]
    return f"a {type(tensors).__name__} of {len(tensors)}: {', '.join(kinds)}"


@dataclass
class _Setup:
    models: list[nn.Module]
    wire: _Wire
    versions: list[list[int]]  # every parameter's version counter once the hooks are attached


def _label(case: ReplicaCase) -> str:
    shard = len(case.rounds[0][0]) // case.replicas
    return (f"attach_allreduce_hooks(replicas, all_reduce, bucket_size={case.bucket_size}) for {case.replicas} "
            f"replicas of an MLP with layer sizes {case.sizes}, each running backward on a shard of {shard} examples "
            f"(mean squared error); buckets: {case.describe_buckets()}")


def _fresh_replicas(attach_allreduce_hooks_fn, case: ReplicaCase) -> _Setup:
    __tracebackhide__ = True
    models = [copy.deepcopy(case.model) for _ in range(case.replicas)]
    wire = _Wire(models)
    call_learner(attach_allreduce_hooks_fn, models, wire.all_reduce, case.bucket_size, what=_label(case))
    return _Setup(models, wire, [[param._version for param in model.parameters()] for model in models])


def _backward(case: ReplicaCase, setup: _Setup, round_index: int, replicas: list[int],
              caught: list[BaseException] | None = None) -> None:
    """Each replica in ``replicas``, in turn, runs forward and backward on its shard of the round's batch."""
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    for replica in replicas:
        inputs, targets = case.shard(round_index, replica)
        loss = F.mse_loss(setup.models[replica](inputs), targets)

        def run(loss=loss):
            try:
                loss.backward()
            except Exception as error:
                if caught is not None:
                    caught.append(error)
                raise

        call_learner(run, what=f"round {round_index + 1} (backward order {order}): replica {replica}'s "
                               "loss.backward() (your hooks run inside it)")


def _runs_with_grads_set(attach_allreduce_hooks_fn, case: ReplicaCase, round_index: int, ran: list[int],
                         unset: int | None = None) -> bool:
    """Replay the backward calls ``ran`` of a round on fresh replicas whose every .grad (but replica ``unset``'s)
    already holds zeros: does the learner's code now run through?"""
    try:
        setup = _fresh_replicas(attach_allreduce_hooks_fn, case)
        for replica, model in enumerate(setup.models):
            for param in model.parameters():
                param.grad = None if replica == unset else torch.zeros_like(param)
        _backward(case, setup, round_index, ran)
    except GradingFailure:
        return False
    return True


def _not_arrived(case: ReplicaCase, arrivals: list[tuple[int, str]]) -> str:
    names = [name for name, _ in case.numels()]
    parts = []
    for replica in range(case.replicas):
        missing = [name for name in names if (replica, name) not in arrivals]
        if len(missing) == len(names):
            parts.append(f"replica {replica}: all (its backward had not run yet)")
        elif missing:
            parts.append(f"replica {replica}: {', '.join(missing)}")
    return "; ".join(parts)


def _crash_cause(attach_allreduce_hooks_fn, case: ReplicaCase, setup: _Setup, round_index: int, position: int,
                 error: BaseException | None) -> tuple[str, Misconception] | None:
    """Why the backward of the replica at ``position`` of the round's order crashed: a tensor asked for a truth
    value, or (shown by a replay) a .grad that was still None: its own, read in a hook that fires before .grad is
    written, or one whose gradient had not arrived yet."""
    if isinstance(error, RuntimeError) and "Boolean value of Tensor" in str(error):
        return "  your hook compared tensors (or tested one) where it needed a single True/False.", TENSOR_TRUTH_VALUE
    order = case.rounds[round_index][2]
    ran, replica = order[:position + 1], order[position]
    if not _runs_with_grads_set(attach_allreduce_hooks_fn, case, round_index, ran):
        return None  # not about .grad at all
    arrivals = setup.wire.arrivals()
    completing = bool(arrivals) and any(
        arrivals[-1][1] in bucket and all((r, name) in arrivals for r in range(case.replicas) for name in bucket)
        for bucket in case.buckets())
    if completing and not _runs_with_grads_set(attach_allreduce_hooks_fn, case, round_index, ran, unset=replica):
        return (f"  it crashed as replica {replica}'s {arrivals[-1][1]} completed its bucket; replayed with every "
                f"other replica's .grad set, it still crashed: your hook read replica {replica}'s own .grad before "
                "backward had written it.", TENSOR_HOOK_READS_GRAD)
    last = f"just after replica {arrivals[-1][0]}'s {arrivals[-1][1]} arrived; " if arrivals else ""
    return (f"  it crashed {last}these gradients of round {round_index + 1} had not arrived yet: "
            f"{_not_arrived(case, arrivals)}\n  (replayed with every .grad already set, your hooks ran through: they "
            "read a .grad that was still None.)", AVERAGED_EARLY)


def _run_round(attach_allreduce_hooks_fn, case: ReplicaCase, setup: _Setup, round_index: int) -> None:
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    for model in setup.models:
        model.zero_grad()
    setup.wire.log.clear()
    for position, replica in enumerate(order):
        caught: list[BaseException] = []
        try:
            _backward(case, setup, round_index, [replica], caught)
        except GradingFailure as failure:
            cause = _crash_cause(attach_allreduce_hooks_fn, case, setup, round_index, position,
                                 caught[-1] if caught else None)
            if cause is None:
                raise
            raise GradingFailure(f"{_label(case)}:\n  {failure.message}\n{cause[0]}", suspects=(cause[1],)) from None


def _close(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    return a is not None and a.shape == b.shape and torch.allclose(a.detach().double(), b, rtol=1e-6, atol=1e-8)


def _flat(grads: dict[str, torch.Tensor], bucket: list[str]) -> torch.Tensor:
    return torch.cat([grads[name].reshape(-1) for name in bucket])


def _check_calls(case: ReplicaCase, setup: _Setup, round_index: int, own: list[dict[str, torch.Tensor]],
                 expected: dict[str, torch.Tensor]) -> None:
    """The round's all_reduce calls: one per bucket, each with the replicas' gradients of that bucket in replica
    order, made from the hook whose gradient completed the bucket (before any other gradient arrived)."""
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    where = f"{_label(case)}; round {round_index + 1} (backward order {order})"
    calls, arrivals = setup.wire.calls(), setup.wire.arrivals()
    buckets = case.buckets()
    numel = dict(case.numels())
    lengths = sorted(sum(numel[name] for name in bucket) for bucket in buckets)
    if not calls:
        grads = [{name: param.grad for name, param in model.named_parameters()} for model in setup.models]
        kept_own = all(_close(grads[r][name], own[r][name]) for r in range(case.replicas) for name in numel)
        averaged = all(_close(grads[r][name], expected[name]) for r in range(case.replicas) for name in numel)
        message = f"{where}: all_reduce was never called (expected one call per bucket)."
        if kept_own or averaged:
            raise proven_failure(message, NO_AVERAGING if kept_own else BYPASSED_ALL_REDUCE)
        raise GradingFailure(message)
    got = sorted(flats[0].numel() for _, flats in calls)
    if got != lengths:
        forward = sorted(sum(numel[name] for name in bucket) for bucket in case.buckets(reverse=False))
        looks = [(PER_PARAMETER, got == sorted(numel.values())), (ONE_BUCKET, got == [sum(numel.values())]),
                 (FORWARD_BUCKETS, got == forward)]
        raise GradingFailure(
            f"{where}: your hooks called all_reduce {len(calls)} time(s), with tensors of "
            f"{', '.join(str(flats[0].numel()) for _, flats in calls)} numbers; expected one call per bucket: "
            f"{case.describe_buckets()}.", suspects=tuple(mistake for mistake, seen in looks if seen))
    complete_at = {tuple(bucket): 1 + max(arrivals.index((r, name)) for r in range(case.replicas) for name in bucket)
                   for bucket in buckets}
    sent: set[tuple[str, ...]] = set()
    for number, (arrived, flats) in enumerate(calls, start=1):
        wanted = {tuple(bucket): [_flat(own[r], bucket) for r in range(case.replicas)] for bucket in buckets}
        match = [bucket for bucket, parts in wanted.items()
                 if all(_close(flat, part) for flat, part in zip(flats, parts))]
        if not match:
            raise GradingFailure("\n".join([
                f"{where}: all_reduce call {number} was sent {len(flats)} tensors of {flats[0].numel()} numbers that "
                "are not the replicas' gradients of one bucket.",
                "  expected: for each replica in order (replicas[0] first), the gradients of the bucket's "
                "parameters, flattened and concatenated in the bucket's order (the reverse of model.parameters()).",
                f"  buckets:            {case.describe_buckets()}",
                f"  your call, replica 0: {_show_flat(flats[0])}",
                *(f"  bucket [{', '.join(bucket)}], replica 0: {_show_flat(parts[0])}" for bucket, parts in
                  wanted.items() if parts[0].numel() == flats[0].numel()),
                *(["  your numbers are that bucket's, in another order: each replica's tensor must hold its own "
                   "gradients, parameter after parameter in the bucket's order."]
                  if any(_same_numbers(flats, parts) for parts in wanted.values()) else [])]))
        bucket = match[0]
        if bucket in sent:
            raise GradingFailure(f"{where}: bucket [{', '.join(bucket)}] was sent to all_reduce twice in one round.")
        sent.add(bucket)
        if arrived != complete_at[bucket]:
            completing = arrivals[complete_at[bucket] - 1]
            raise proven_failure(
                f"{where}: bucket [{', '.join(bucket)}] was complete when replica {completing[0]}'s {completing[1]} "
                f"arrived (gradient {complete_at[bucket]} of the round), but your all_reduce call for it came only "
                f"after {arrived} gradients had arrived.", LATE_ALL_REDUCE)


def _same_numbers(flats: list[torch.Tensor], parts: list[torch.Tensor]) -> bool:
    """The call carries exactly the bucket's numbers, arranged differently (replicas or parameters swapped)."""
    mine, theirs = torch.cat(flats).detach().double(), torch.cat(parts)
    return mine.shape == theirs.shape and torch.allclose(mine.sort().values, theirs.sort().values, rtol=1e-6,
                                                         atol=1e-8)


def _show_flat(flat: torch.Tensor) -> str:
    values = ", ".join(f"{v:.6g}" for v in flat[:6].tolist())
    return f"[{values}{', ...' if flat.numel() > 6 else ''}] ({flat.numel()} numbers)"


def _replica_symptoms(grads_now: list, replica: int, expected: torch.Tensor, own: torch.Tensor,
                      replicas: int) -> list:
    kept_own = _close(grads_now[replica], own)
    others_averaged = any(_close(g, expected) for r, g in enumerate(grads_now) if r != replica)
    return [SUMMED.looks_like(replicas * expected), ONLY_FIRED.given(kept_own and others_averaged)]


def _check_round(case: ReplicaCase, setup: _Setup, round_index: int) -> None:
    __tracebackhide__ = True
    inputs, targets, order = case.rounds[round_index]
    expected, fd = mean_loss_gradients(case.model, F.mse_loss, inputs, targets)
    own = [mean_loss_gradients(case.model, F.mse_loss, *case.shard(round_index, r), fd=False)[0]
           for r in range(case.replicas)]
    _check_calls(case, setup, round_index, own, expected)
    where = f"{_label(case)}; round {round_index + 1} (backward order {order})"
    for name, _ in case.model.named_parameters():
        grads_now = [dict(m.named_parameters())[name].grad for m in setup.models]
        for replica, grad in enumerate(grads_now):
            what = f"{where}: replica {replica}'s {name}.grad"
            if grad is None:
                raise GradingFailure(f"{what} is None: every replica must hold the averaged gradient.")
            expect_close(grad, expected[name], what=what, fd=fd[name], extra=(
                "  expected:           the gradient of the mean loss over the whole batch (= the average of the "
                "replicas' own gradients)"),
                symptoms=_replica_symptoms(grads_now, replica, expected[name], own[replica][name], case.replicas))
        pointers = [grad.untyped_storage().data_ptr() for grad in grads_now]
        if len(set(pointers)) < len(pointers):
            raise proven_failure(f"{where}: the replicas' {name}.grad are not separate tensors (two or more share "
                                 "memory).", SHARED_GRAD)


def _play_round(attach_allreduce_hooks_fn, case: ReplicaCase, setup: _Setup, round_index: int) -> None:
    __tracebackhide__ = True
    _run_round(attach_allreduce_hooks_fn, case, setup, round_index)
    for replica, model in enumerate(setup.models):
        for (name, param), original, version in zip(model.named_parameters(), case.model.parameters(),
                                                    setup.versions[replica]):
            if not torch.equal(param.detach(), original.detach()) or param._version != version:
                raise proven_failure(f"{_label(case)}; round {round_index + 1}: replica {replica}'s parameter {name} "
                                     "was changed during backward.", CHANGED_PARAMETERS)
    _check_round(case, setup, round_index)


def _passes_as_first_round(attach_allreduce_hooks_fn, case: ReplicaCase, round_index: int) -> bool:
    """Does round ``round_index`` pass on fresh replicas, as the first round they ever run?"""
    try:
        _play_round(attach_allreduce_hooks_fn, case, _fresh_replicas(attach_allreduce_hooks_fn, case), round_index)
    except GradingFailure:
        return False
    return True


def _check_replicas(attach_allreduce_hooks_fn, case: ReplicaCase) -> None:
    __tracebackhide__ = True
    setup = _fresh_replicas(attach_allreduce_hooks_fn, case)
    for round_index in range(len(case.rounds)):
        try:
            _play_round(attach_allreduce_hooks_fn, case, setup, round_index)
        except GradingFailure as failure:
            if round_index and _passes_as_first_round(attach_allreduce_hooks_fn, case, round_index):
                raise proven_failure(f"{failure.message}\n  Round {round_index + 1} alone, on fresh replicas, passes: "
                                     "your hooks kept something from round 1.", FIRST_ROUND_ONLY) from None
            raise


@check
def check_attach_allreduce_hooks(attach_allreduce_hooks_fn, grading_seed: int | None = None) -> None:
    """Part C: attach_allreduce_hooks(replicas, all_reduce, bucket_size) registers hooks that, in every round, send
    each bucket once through all_reduce as soon as it is complete and leave in every replica's .grad the full-batch
    gradient, in a tensor of its own, the parameters unchanged.

    Domain: a list of 2 to 4 identical float64 MLPs (same weights; every parameter gets a gradient in every
    backward), hooks attached once, then rounds of zero_grad() (every .grad None) and one backward per replica on
    equal shards, in an order that is not 0, 1, 2...; bucket_size a positive int. Pinned at every seed
    (_corner_cases): bucket_size 1 (one bucket per parameter, two replicas) and a bucket_size larger than the model
    (one bucket, three replicas); drawn: two replicas and three or four, two buckets or more with at least one of two
    parameters or more; round 1 never ends with the last replica, round 2 differs. Contracts and their checks: "the
    average of that parameter's gradients over the replicas" -> each replica's .grad against the full-batch gradient
    (autograd and finite differences), after every round (SUMMED, ONLY_FIRED; FIRST_ROUND_ONLY when the failing
    round passes as a first round on fresh replicas); "once per bucket" -> the calls the check's all_reduce
    recorded: their number and lengths (PER_PARAMETER, ONE_BUCKET, FORWARD_BUCKETS), none at all (NO_AVERAGING,
    BYPASSED_ALL_REDUCE), each bucket once; "replica i's gradients ... flattened and concatenated in the bucket's
    order" -> each call's tensors against the replicas' own shard gradients; "as soon as the bucket is complete" ->
    the call comes before any other gradient arrives (LATE_ALL_REDUCE); "in some order" -> hooks that reduce early
    crash on a None .grad (AVERAGED_EARLY, TENSOR_HOOK_READS_GRAD, by replay; TENSOR_TRUTH_VALUE from the error);
    "a tensor of its own" -> storage pointers differ (SHARED_GRAD); "the parameters never change" -> values and
    version counters (CHANGED_PARAMETERS).
    """
    __tracebackhide__ = True
    for case in _replica_cases(grading_seed):
        with trial():
            _check_replicas(attach_allreduce_hooks_fn, case)


# ---------------------------------------------------------------------------------------------- hints

hint = HintBook({
    "A": PartHints(checks=("check_backward_order",), cells=("backward_order",), texts=(
        "A node may be listed only after all of its consumers: which depth-first walk writes a node down only after "
        "everything below it? And why can the order of the dict's keys tell you nothing?",
        "A smaller case: from \"out\", `{\"out\": [\"a\", \"b\"], \"b\": [\"a\"], \"a\": []}` has one valid order, "
        "out, b, a (level by level gives out, a, b: wrong); from \"b\" it is b, a.",
        "Walk depth-first from the output alone: a node's inputs first, then the node, skipping the nodes already "
        "seen. Return a new list of that walk read backwards.")),
    "B": PartHints(checks=("check_accumulate_gradients",), cells=("accumulate_gradients",), texts=(
        "When may a node pass its gradient on to its inputs: what must it have received first, and from whom?",
        "A smaller case: `{\"out\": [\"a\", \"b\"], \"b\": [\"a\"], \"a\": []}` with 2.0 on (out, a), 3.0 on "
        "(out, b) and 4.0 on (b, a) gives out 1.0, b 3.0, a 14.0 (2 + 3 · 4). With 1.0 on (out, b) and -2.0 on (b, "
        "a), a's two paths cancel: a is still there, as 0.0.",
        "Start the output at 1.0 and every node it depends on at 0.0. Visit consumers before their inputs (Part A's "
        "order, or consumer counts that reach 0), each adding local derivative × its gradient to each input's.")),
    "C": PartHints(checks=("check_attach_allreduce_hooks",), cells=("attach_allreduce_hooks",), texts=(
        "When is a bucket complete: how many gradients must arrive for it, from how many replicas? Which hook sees it?",
        "For the text's model, `bucket_size=11` gives [2.bias, 2.weight, 0.bias] (14 numbers) and [0.weight] (12). "
        "3 replicas running backward in the order 2, 0, 1 with `bucket_size=10`: the first call comes as replica "
        "1's 2.weight arrives, the 6th gradient of its bucket.",
        "Buckets once (positions in the reversed parameter list), each with one arrival count shared by its hooks in "
        "every replica, both bound to a hook as you define it. The hook that completes the count resets it, sends the "
        "replicas' flattened bucket gradients, divides the sum by the replica count, gives every .grad its own copy.")),
})
