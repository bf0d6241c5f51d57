"""Part B: accumulate_gradients(graph, local_grads, seeds, sequence_nr) -> (grads, order), the engine run with its
buffers: backward from several roots, each starting with its seed (``torch.autograd.backward(roots, seeds)``), and
the order the nodes ran in, which must be the engine's (:mod:`.order`)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from ...checking import CourseBug, GradingFailure, as_answer, check, expect_close, proven_failure, trial
from ...oracles import autograd_gradient, central_difference
from ...seeding import generator, uniform
from .graphs import (
    BRIDGE_GRAPH,
    BRIDGE_LOCAL,
    LEAVES_FIRST_GRAPH,
    LESSON_GRAPH,
    LESSON_LOCAL,
    SKIP_GRAPH,
    SKIP_LOCAL,
    Graph,
    Local,
    _breadth_first,
    _call_plain_python,
    _preorder,
    _show_graph,
    _show_local,
    depth_first_order,
    random_graph,
    random_local,
    random_numbers,
    random_roots,
    run_engine,
)
from .misconceptions import (
    AVERAGED_PATHS,
    BREADTH_FIRST,
    INPUT_BEFORE_CONSUMER,
    MISSING_UPSTREAM,
    OUTPUT_NOT_ONE,
    OVERWROTE,
    PREORDER,
    ROOTS_AT_START,
    SEED_REPLACED,
    SEEDS_AS_ONE,
    UNREACHABLE,
    ZERO_LEFT_OUT,
)
from .order import (
    BRIDGE_NUMBERS,
    CONTRAST_GRAPH,
    CONTRAST_NUMBERS,
    LEAVES_NUMBERS,
    LESSON_NUMBERS,
    SKIP_NUMBERS,
    THREADS_NUMBERS,
    WIDE_GRAPH,
    WIDE_NUMBERS,
    Numbers,
    as_order,
    order_failure,
)

Seeds = dict[str, float]


def _run_in_order(graph: Graph, local: Local, seeds: Seeds, order: list[str], upstream: bool = True,
                  replace_seed: bool = False) -> list[float]:
    """Gradients from running ``order`` (a node listed twice sends its whole buffer twice) with ``+=``, every root's
    buffer starting with its seed (the reference when the order is valid); ``replace_seed``: a root's buffer is set
    to its seed when it runs."""
    nodes = depth_first_order(graph, list(seeds))
    grad = dict.fromkeys(nodes, 0.0)
    for root, seed in seeds.items():
        grad[root] += seed
    for node in order:
        if replace_seed and node in seeds:
            grad[node] = seeds[node]
        for source in graph[node]:
            grad[source] += local[node, source] * (grad[node] if upstream else 1.0)
    return [grad[node] for node in nodes]


def _gradient_oracles(graph: Graph, local: Local, seeds: Seeds):
    """d(sum of seed × root)/dNode for every node the roots depend on, by autograd and by central differences.

    The same graph is built from float64 scalars: node = nudge + sum(local * input). The derivative with respect to
    a node's additive nudge (at 0) is the gradient with respect to that node, intermediates included.
    """
    nodes = depth_first_order(graph, list(seeds))
    index = {node: i for i, node in enumerate(nodes)}

    def weighted_roots(nudges: torch.Tensor) -> torch.Tensor:
        value: dict[str, torch.Tensor] = {}
        for node in reversed(nodes):  # inputs before consumers
            value[node] = nudges[index[node]] + sum(local[node, source] * value[source] for source in graph[node])
        return sum(seed * value[root] for root, seed in seeds.items())

    zeros = torch.zeros(len(nodes), dtype=torch.float64)
    return nodes, autograd_gradient(weighted_roots, zeros)[0], central_difference(weighted_roots, zeros)[0]


def _every_node(values: torch.Tensor, graph: Graph, local: Local, seeds: Seeds, nodes: list[str],
                rule: Callable) -> bool:
    """True if at every node that receives two shares or more, rule(value, [its seed, if a root, and local *
    consumer's value for each consumer]) holds."""
    index = {node: i for i, node in enumerate(nodes)}
    sent: dict[str, list[float]] = {node: [seeds[node]] if node in seeds else [] for node in nodes}
    for consumer in nodes:
        for source in graph[consumer]:
            sent[source].append(local[consumer, source] * float(values[index[consumer]]))
    shared = {node: parts for node, parts in sent.items() if len(parts) > 1}
    return bool(shared) and all(rule(float(values[index[node]]), parts) for node, parts in shared.items())


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-8 + 1e-6 * abs(b)


def _walk_symptoms(graph: Graph, local: Local, seeds: Seeds) -> list:
    """What accumulating in a breadth-first or a depth-first preorder from one root gives. Where the two give the
    same numbers the answer cannot say which walk it was, only what both did (an input before its consumer)."""
    if len(seeds) > 1:
        return []
    output = next(iter(seeds))
    walked = torch.tensor(_run_in_order(graph, local, seeds, _breadth_first(graph, output)))
    preorders = [torch.tensor(_run_in_order(graph, local, seeds, _preorder(graph, output, reverse)))
                 for reverse in (False, True)]
    same = [p for p in preorders if torch.allclose(p, walked, rtol=1e-9, atol=1e-12)]
    return [(INPUT_BEFORE_CONSUMER if same else BREADTH_FIRST).looks_like(walked),
            *(PREORDER.looks_like(p) for p in preorders if not any(p is q for q in same))]


def _gradient_symptoms(graph: Graph, local: Local, seeds: Seeds, numbers: Numbers, nodes: list[str]) -> list:
    def by_rule(rule):
        return lambda received: _every_node(received, graph, local, seeds, nodes, rule)

    roots, right = list(seeds), run_engine(graph, list(seeds), numbers)
    early = [run_engine(graph, roots, numbers, roots_ready=True, once=once) for once in (False, True)]
    return [OUTPUT_NOT_ONE.looks_like(torch.zeros(len(nodes))),
            SEEDS_AS_ONE.looks_like(_run_in_order(graph, local, dict.fromkeys(seeds, 1.0), right)),
            SEED_REPLACED.looks_like(_run_in_order(graph, local, seeds, right, replace_seed=True)),
            *(ROOTS_AT_START.looks_like(_run_in_order(graph, local, seeds, order)) for order in early),
            MISSING_UPSTREAM.looks_like(_run_in_order(graph, local, seeds, right, upstream=False)),
            *_walk_symptoms(graph, local, seeds),
            OVERWROTE.when(by_rule(lambda value, parts: any(_near(value, part) for part in parts))),
            AVERAGED_PATHS.when(by_rule(lambda value, parts: _near(value, sum(parts) / len(parts))))]


def _as_gradients(grads, nodes: list[str], expected: torch.Tensor, what: str) -> torch.Tensor:
    """The learner's dict as a float64 vector in ``nodes`` order; extra nodes are allowed only with gradient 0."""
    if type(grads) is not dict or not all(type(node) is str for node in grads):
        raise GradingFailure(f"{what} returned {type(grads).__name__} as grads; expected a dict node name -> "
                             "gradient.")
    missing = [node for node in nodes if node not in grads]
    if missing:
        message = (f"{what} has no gradient for {', '.join(map(repr, missing))}; expected one entry for every node "
                   f"the roots depend on: {nodes}.")
        zeros = {node for node, value in zip(nodes, expected.tolist()) if value == 0.0}
        if set(missing) <= zeros:  # seen: only nodes whose gradient is 0 are left out
            raise proven_failure(message + "\n  Every node left out has gradient 0.", ZERO_LEFT_OUT)
        raise GradingFailure(message)
    not_floats = {node: type(value).__name__ for node, value in grads.items() if not isinstance(value, float)}
    if not_floats:
        raise GradingFailure(f"{what} gives {not_floats} as gradients; expected a Python float for every node, as "
                             "the part says (1.0, not 1; float(value) converts an int or a 0-d tensor).")
    values = {node: float(as_answer(value, what=f"{what}[{node!r}]", shape=())) for node, value in grads.items()}
    stray = {node: value for node, value in values.items() if node not in nodes and value != 0.0}
    if stray:
        raise GradingFailure(f"{what} gives gradients {stray} to nodes no root depends on; their gradient is 0.0 "
                             "(or leave them out).", suspects=(UNREACHABLE,))
    return torch.tensor([values[node] for node in nodes], dtype=torch.float64)


def _as_pair(answer, what: str) -> tuple:
    if type(answer) not in (tuple, list) or len(answer) != 2:
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a pair (grads, order): a dict of gradients "
                             "and the list of nodes in the order they ran.")
    return answer[0], answer[1]


# Two paths from `out` to `c` that cancel (2 · 1.5 + 1 · (-3) = 0) and a zero local derivative (b -> y): `c`, `y` and
# `z` have gradient 0 and must still be listed; `spare` consumes `c` but `out` does not depend on it.
CANCEL_GRAPH: Graph = {"spare": ["c"], "out": ["a", "b"], "a": ["c"], "b": ["c", "y"], "c": ["z"], "y": ["z"],
                       "z": []}
CANCEL_LOCAL: Local = {("out", "a"): 2.0, ("out", "b"): 1.0, ("a", "c"): 1.5, ("b", "c"): -3.0, ("b", "y"): 0.0,
                       ("c", "z"): 1.25, ("y", "z"): -0.5, ("spare", "c"): 4.0}
CANCEL_NUMBERS: Numbers = {"spare": 30, "out": 9, "a": 7, "b": 8, "c": 5, "y": 6, "z": 2**64 - 1}
#: Corners of Part B's domain, run at every seed (after the visible graphs, before the drawn ones): local derivatives
#: of both signs and 0, paths that cancel to an exact 0; a root that another root consumes, numbered above it, with
#: a negative seed; a leaf as the only root; keys listed leaves first; two roots that share their inputs; the two
#: graphs on which every rule of Part A gives an order of its own.
GRADIENT_CORNERS = [(CANCEL_GRAPH, CANCEL_LOCAL, {"out": 1.0}, CANCEL_NUMBERS),
                    (LESSON_GRAPH, LESSON_LOCAL, {"r": -0.5, "L": 2.0}, THREADS_NUMBERS),
                    (BRIDGE_GRAPH, BRIDGE_LOCAL, {"w": 1.5}, BRIDGE_NUMBERS),
                    (LEAVES_FIRST_GRAPH, LESSON_LOCAL, {"L": 1.0, "p": 0.25}, LEAVES_NUMBERS),
                    (SKIP_GRAPH, SKIP_LOCAL, {"log": 1.0, "b": 2.0}, SKIP_NUMBERS),
                    (CONTRAST_GRAPH, random_local(generator("03/contrast", 0), CONTRAST_GRAPH), {"r": 0.5, "v": 1.0},
                     CONTRAST_NUMBERS),
                    (WIDE_GRAPH, random_local(generator("03/wide", 0), WIDE_GRAPH), {"y": -1.5, "e": 1.0},
                     WIDE_NUMBERS)]


def _gradient_cases(grading_seed: int | None):
    if grading_seed is None:
        yield LESSON_GRAPH, LESSON_LOCAL, {"L": 1.0}, LESSON_NUMBERS
        yield SKIP_GRAPH, SKIP_LOCAL, {"out": 1.0}, SKIP_NUMBERS
        yield BRIDGE_GRAPH, BRIDGE_LOCAL, {"y": 1.0, "u": 0.5}, BRIDGE_NUMBERS
        yield from GRADIENT_CORNERS
        return
    yield from GRADIENT_CORNERS
    gen = generator("03/accumulate_gradients", grading_seed)
    for _ in range(3):
        graph, output = random_graph(gen)
        roots = random_roots(gen, graph, output)
        seeds = {root: round(float(uniform(gen, (), -2.0, 2.0)), 2) or 1.0 for root in roots}
        yield graph, random_local(gen, graph), seeds, random_numbers(gen, graph)


@contextlib.contextmanager
def _with_course_order(fn: Callable):
    """While Part B runs, the name ``backward_order`` in the learner's notebook means the course's own (correct)
    order, so that an answer built on Part A, as the text suggests, is graded on Part B's own work."""
    namespace = getattr(fn, "__globals__", None)
    if type(namespace) is not dict or "backward_order" not in namespace:
        yield
        return
    own = namespace["backward_order"]
    namespace["backward_order"] = run_engine
    try:
        yield
    finally:
        namespace["backward_order"] = own


def _check_gradients(accumulate_gradients_fn, graph: Graph, local: Local, seeds: Seeds, numbers: Numbers) -> None:
    __tracebackhide__ = True
    graph, local, seeds, numbers = copy.deepcopy(graph), dict(local), dict(seeds), dict(numbers)
    what = (f"accumulate_gradients(graph, local_grads, {seeds!r}, sequence_nr) for graph = {_show_graph(graph)}, "
            f"local_grads = {_show_local(local)}, sequence_nr = {numbers}")
    with _with_course_order(accumulate_gradients_fn):
        answer = _call_plain_python(accumulate_gradients_fn, graph, local, seeds, numbers, what=what,
                                    names=("graph", "local_grads", "seeds", "sequence_nr"))
    grads, order = _as_pair(answer, what)
    nodes, expected, fd = _gradient_oracles(graph, local, seeds)
    if not torch.allclose(fd, expected, rtol=1e-4, atol=1e-6):
        raise CourseBug(f"the oracles disagree for {what} (autograd {expected.tolist()}, finite differences "
                        f"{fd.tolist()}).")
    expect_close(_as_gradients(grads, nodes, expected, what), expected, what=f"{what}: grads", source="sum over paths",
                 extra=f"  nodes, by index:    {nodes}\n  (the sums over paths are computed by autograd and checked "
                       "by central differences, both on this graph)",
                 symptoms=_gradient_symptoms(graph, local, seeds, numbers, nodes))
    failure = order_failure(f"{what}: the order", as_order(order, f"{what}: the order"), graph, list(seeds), numbers,
                            label="the order you ran")
    if failure is not None:
        raise failure


@check
def check_accumulate_gradients(accumulate_gradients_fn, grading_seed: int | None = None) -> None:
    """Part B: accumulate_gradients(graph, local_grads, seeds, sequence_nr) -> (grads, order): {node: d(sum of
    seed × root) / d node} (sum over paths) as floats, and the nodes in the order the engine runs them, by plain
    Python (no autograd), leaving its arguments unchanged.

    Domain: ``graph`` and ``sequence_nr`` as in Part A; ``seeds`` a dict root -> float for 1 to 3 roots (any real
    value), one of which may consume another; ``local_grads`` a float for every edge (node, input), positive,
    negative or 0 (pinned at every seed: GRADIENT_CORNERS, with paths that cancel to an exact 0, a consumed root with
    a negative seed numbered above its consumer, a leaf root, keys listed leaves first). Contracts and their checks:
    "a pair (grads, order)" -> a tuple or list of two; "a dict {node: gradient} ... for every node the roots depend
    on" -> an entry for each, 0 included (ZERO_LEFT_OUT when exactly those are missing); "a Python float" -> every
    value a float; "the sum over all paths, each root starting with its seed" -> autograd and central differences on
    the same graph built from float64 scalars (OUTPUT_NOT_ONE, SEEDS_AS_ONE, SEED_REPLACED, ROOTS_AT_START,
    MISSING_UPSTREAM, the walks, OVERWROTE, AVERAGED_PATHS); "order: the engine's" -> as Part A's check
    (order_failure); "nodes no root depends on may be left out (or given 0.0)" -> any other value there is
    UNREACHABLE; "do not modify" -> compared afterwards (CHANGED_DICTS); "no autograd" -> Route.AUTOGRAD
    (AUTOGRAD_IN_BOOKKEEPING); "graded with the course's backward_order" -> the name is the course's own during the
    call (_with_course_order).
    """
    __tracebackhide__ = True
    for graph, local, seeds, numbers in _gradient_cases(grading_seed):
        with trial():
            _check_gradients(accumulate_gradients_fn, graph, local, seeds, numbers)
