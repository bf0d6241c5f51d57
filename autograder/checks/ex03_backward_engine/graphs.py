"""The graphs of Parts A and B: plain dicts ``node -> list of input nodes`` (strings, a DAG of at most 30 nodes,
every node a key, a leaf mapping to ``[]``) and local derivatives ``(node, input) -> float``; the course's examples,
random graphs drawn from a seed, the walks a wrong answer may have taken (:func:`traversal_kind`, also used by
exercise 02) and the plain-Python guard both parts run the learner's code under."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Hashable

import torch

from ...checking import Route, Routes, call_learner, proven_failure
from ...seeding import choice, uniform
from .misconceptions import AUTOGRAD_IN_BOOKKEEPING, CHANGED_DICTS

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

def depth_first_order(graph: Graph, roots: list[str], flip: bool = False) -> list[str]:
    """Every node the roots depend on, consumers before inputs: a depth-first postorder from each root in turn
    (inputs in list order, or reversed with ``flip``), reversed. A valid backward order (exercise 02's sort), and
    in general not the engine's."""
    order, seen = [], set()

    def visit(node: str) -> None:
        if node not in seen:
            seen.add(node)
            for source in reversed(graph[node]) if flip else graph[node]:
                visit(source)
            order.append(node)

    for root in roots:
        visit(root)
    return order[::-1]


def reference_order(graph: Graph, output: str) -> list[str]:
    """One valid backward order from one output (a depth-first sort)."""
    return depth_first_order(graph, [output])


def run_engine(graph: Graph, roots: list[str], sequence_nr: dict[str, int], *, pick: str = "highest",
               roots_ready: bool = False, whole_graph: bool = False, once: bool = False,
               per_consumer: bool = False, per_root: bool = False) -> list[str]:
    """The order in which PyTorch's engine runs the nodes of a backward pass from ``roots``: count, for every node
    the roots depend on, the edges arriving from the nodes the roots depend on, plus one for a root's seed; deliver
    the seeds; then, while a node is ready (its count at 0), run the ready node with the highest sequence number,
    delivering to each of its inputs.

    The other keywords give the orders of mistakes: ``pick`` "lowest", "first" (a first-in first-out queue) or
    "last" (a stack) instead of the highest number; ``roots_ready``: every root ready from the start, its seed not
    counted; ``whole_graph``: edges counted from every node of the graph; ``once``: a node that ran is skipped;
    ``per_consumer``: a consumer counted once however many edges it has to a node (each edge still delivers);
    ``per_root``: the counts taken from each root on its own and added (an edge that two roots reach counted twice)."""
    needed = list(graph) if whole_graph else depth_first_order(graph, roots)
    waiting = dict.fromkeys(needed, 0)
    for counted in [depth_first_order(graph, [root]) for root in roots] if per_root else [needed]:
        for node in counted:
            for source in set(graph[node]) if per_consumer else graph[node]:
                waiting[source] += 1
    ready: list[str] = list(roots) if roots_ready else []

    def deliver(node: str) -> None:
        waiting[node] -= 1
        if waiting[node] == 0:
            ready.append(node)

    if not roots_ready:
        for root in roots:
            waiting[root] += 1
        for root in roots:
            deliver(root)
    order: list[str] = []
    while ready:
        if pick in ("first", "last"):
            node = ready.pop(0 if pick == "first" else -1)
        else:
            node = (max if pick == "highest" else min)(ready, key=sequence_nr.__getitem__)
            ready.remove(node)
        if once and node in order:
            continue
        order.append(node)
        for source in graph[node]:
            deliver(source)
    return order


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
    return "{" + ", ".join(f"{node}: [{', '.join(map(_show_ref, inputs))}]" for node, inputs in graph.items()) + "}"


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


def random_roots(gen: torch.Generator, graph: Graph, output: str) -> list[str]:
    """``output`` and 0 to 2 more roots, in random order: nodes the output depends on (so one root consumes another)
    or a consumer the output does not depend on."""
    others = [node for node in graph if node != output and graph[node]]
    count = int(torch.randint(0, 3, (), generator=gen))
    roots = [output] + [others[i] for i in torch.randperm(len(others), generator=gen)[:count].tolist()]
    return [roots[i] for i in torch.randperm(len(roots), generator=gen).tolist()]


def random_numbers(gen: torch.Generator, graph: Graph) -> dict[str, int]:
    """A distinct sequence number for every node, in no relation to the edges (as when parts of a graph were built
    in different threads); in half of the graphs every leaf gets one of the largest numbers, as in PyTorch."""
    keys = list(graph)
    numbers = {keys[i]: 3 + 2 * rank for rank, i in enumerate(torch.randperm(len(keys), generator=gen).tolist())}
    if int(torch.randint(0, 2, (), generator=gen)):
        for rank, leaf in enumerate(node for node in keys if not graph[node]):
            numbers[leaf] = 2**64 - 1 - rank
    return numbers


def _call_plain_python(fn: Callable, *args, what: str, names: tuple[str, ...]):
    """Call a Part A/B answer on the caller's own dicts: no autograd inside, and the dicts come back unchanged."""
    __tracebackhide__ = True
    before = copy.deepcopy(args)
    routes = Routes()
    answer = call_learner(fn, *args, what=what, routes=routes)
    if routes.used(Route.AUTOGRAD):
        raise proven_failure(f"{what} used {Route.AUTOGRAD.value}, which Parts A and B rule out.",
                             AUTOGRAD_IN_BOOKKEEPING)
    for name, old, new in zip(names, before, args):
        if type(new) is not type(old) or new != old:
            raise proven_failure(f"{what} changed its argument {name}: it was {old!r:.200} and is now "
                                 f"{new!r:.200}.", CHANGED_DICTS)
    return answer


# ---------------------------------------------------------------------------------------------- several outputs
# Part A's graphs may hold nodes with several outputs (split, unbind, chunk): an edge names a node alone (its only
# output, or output 0) or a pair (node, k), output k of that node, as PyTorch's next_functions pair a node with an
# output number. A root is such a reference too. The node is still one node: it runs once, with one gradient slot
# per output, and a slot nothing delivers to stays empty (its pre-hook sees None, its backward uses zeros).

Ref = str | tuple[str, int]
Runs = list[tuple[str, list[int]]]


def node_of(ref: Ref) -> str:
    return ref if isinstance(ref, str) else ref[0]


def slot_of(ref: Ref) -> int:
    return 0 if isinstance(ref, str) else ref[1]


def names_graph(graph: dict) -> Graph:
    """The same graph with every edge reduced to the node it points at (one entry per edge, so a consumer of two
    outputs of one node lists that node twice): the order of the engine depends on this alone."""
    return {node: [node_of(ref) for ref in refs] for node, refs in graph.items()}


def received_slots(graph: dict, roots: list, *, whole_graph: bool = False, seeds: bool = True) -> dict[str, list]:
    """For every node a backward pass from ``roots`` runs, the output numbers whose slot receives a gradient before
    it runs: one per edge from a node that runs, and a root's own slot (its seed). The keywords give the slots of two
    mistakes: ``whole_graph``, edges from every node of the graph counted; ``seeds=False``, the seeds forgotten."""
    needed = depth_first_order(names_graph(graph), [node_of(root) for root in roots])
    filled: dict[str, set[int]] = {node: set() for node in needed}
    for consumer in graph if whole_graph else needed:
        for ref in graph[consumer]:
            if node_of(ref) in filled:
                filled[node_of(ref)].add(slot_of(ref))
    if seeds:
        for root in roots:
            filled[node_of(root)].add(slot_of(root))
    return {node: sorted(slots) for node, slots in filled.items()}


def engine_runs(graph: dict, roots: list, sequence_nr: dict[str, int]) -> Runs:
    """Part A's answer: (node, the output numbers whose slot received a gradient), in the order the engine runs."""
    slots = received_slots(graph, roots)
    return [(node, slots[node]) for node in run_engine(names_graph(graph), [node_of(root) for root in roots],
                                                       sequence_nr)]


class _Outputs(torch.autograd.Function):
    """A node with ``count`` outputs, output i = (i + 1) × the sum of the inputs (float64 scalars)."""

    @staticmethod
    def forward(ctx, count, *inputs):
        ctx.inputs = len(inputs)
        total = sum(inputs)
        return tuple(total * (i + 1) for i in range(count))

    @staticmethod
    def backward(ctx, *grads):
        total = sum(grad * (i + 1) for i, grad in enumerate(grads))
        return (None, *[total] * ctx.inputs)


def torch_slots(graph: dict, roots: list) -> dict[str, list[int]]:
    """What PyTorch's pre-hooks see: the graph built from float64 scalars (every node that has inputs one custom
    Function with as many outputs as the graph and the roots refer to), backward from the roots, and for every
    node that ran and has inputs, the output numbers of its grad_outputs that were not None."""
    outputs: dict[str, int] = {}
    for ref in [ref for refs in graph.values() for ref in refs] + list(roots):
        outputs[node_of(ref)] = max(outputs.get(node_of(ref), 1), slot_of(ref) + 1)
    seen: dict[str, list[int]] = {}
    value: dict[str, tuple] = {}
    for node in reversed(depth_first_order(names_graph(graph), list(graph))):  # inputs before consumers
        if not graph[node]:
            value[node] = (torch.tensor(1.0, dtype=torch.float64, requires_grad=True),)
            continue
        made = _Outputs.apply(outputs.get(node, 1), *(value[node_of(ref)][slot_of(ref)] for ref in graph[node]))
        value[node] = made if isinstance(made, tuple) else (made,)
        value[node][0].grad_fn.register_prehook(lambda grad_outputs, node=node: seen.update(
            {node: [i for i, grad in enumerate(grad_outputs) if grad is not None]}))
    tensors = [value[node_of(root)][slot_of(root)] for root in roots]
    torch.autograd.backward(tensors, [torch.ones((), dtype=torch.float64) for _ in tensors])
    return seen


def _show_ref(ref: Ref) -> str:
    return ref if isinstance(ref, str) else f"({ref[0]}, {ref[1]})"


def random_split_graph(gen: torch.Generator) -> tuple[dict, list]:
    """A random graph (:func:`random_graph`) with a node ``s`` of three outputs planted: output 0 feeds a node the
    output consumes, output 1 that node too or the output itself or nothing, output 2 only a consumer the roots do
    not depend on (its slot stays empty unless a root is that output). Returns the graph and 1 to 3 roots, a pair
    (s, k) among them in one graph out of two."""
    graph, out = random_graph(gen)
    free = [name for name in NAMES if name not in graph]
    s, m, spare = (free[i] for i in torch.randperm(len(free), generator=gen)[:3].tolist())
    below = [node for node in depth_first_order(graph, [out]) if node != out]
    graph[s] = [choice(gen, below)]
    one = int(torch.randint(0, 3, (), generator=gen))
    graph[m] = [(s, 0)] + ([(s, 1)] if one == 0 else [])
    graph[out] = graph[out] + [m] + ([(s, 1)] if one == 1 else [])
    graph[spare] = [(s, 2)]
    roots: list = random_roots(gen, graph, out)
    if int(torch.randint(0, 2, (), generator=gen)):
        roots.insert(int(torch.randint(0, len(roots) + 1, (), generator=gen)),
                     (s, int(torch.randint(1, 3, (), generator=gen))))
        roots = roots[:3] if out in roots[:3] else roots[:2] + [out]
    keys = list(graph)
    return {keys[i]: graph[keys[i]] for i in torch.randperm(len(keys), generator=gen)}, roots
