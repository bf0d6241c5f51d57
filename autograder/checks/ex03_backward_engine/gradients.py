"""Part B: accumulate_gradients(graph, local_grads, seeds, inputs, sequence_nr) -> (grads, ran), the engine of
``torch.autograd.grad(roots, inputs, grad_outputs=seeds)``: only the nodes with a requested input below them run (a
requested input is captured from its buffer and runs only when another requested input lies below it), in the
engine's order (:mod:`.order`), and each requested input gets the sum over its paths.

The oracles are PyTorch itself, on the same graph built from float64 scalars: ``torch.autograd.grad`` for the
gradients (checked by central differences) and pre-hooks on every node for the set of nodes that run."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from ...checking import CourseBug, GradingFailure, as_answer, check, expect_close, trial
from ...oracles import central_difference
from ...seeding import generator, uniform
from .graphs import (
    BRIDGE_GRAPH,
    BRIDGE_LOCAL,
    LESSON_GRAPH,
    LESSON_LOCAL,
    SKIP_GRAPH,
    SKIP_LOCAL,
    Graph,
    Local,
    _call_plain_python,
    _show_graph,
    _show_local,
    depth_first_order,
    engine_runs,
    random_graph,
    random_local,
    random_numbers,
    random_roots,
    run_engine,
)
from .misconceptions import FULL_RUN, INPUTS_RAN, MISSING_UPSTREAM, OVERWROTE, SEEDS_AS_ONE, STOPPED_AT_INPUT
from .order import (
    BRIDGE_NUMBERS,
    CONTRAST_GRAPH,
    CONTRAST_NUMBERS,
    LESSON_NUMBERS,
    SKIP_NUMBERS,
    THREADS_NUMBERS,
    WIDE_GRAPH,
    WIDE_NUMBERS,
    Numbers,
    as_order,
    order_problem,
)

Seeds = dict[str, float]

#: The rules a wrong answer may have pruned by, and the mistake each is: every node the roots depend on runs (the
#: lesson's engine), the requested inputs run too, a requested input never runs (not even above another one).
PRUNE_MISTAKES = (("all", FULL_RUN), ("inputs", INPUTS_RAN), ("stop", STOPPED_AT_INPUT))


def engine_grad(graph: Graph, local: Local, seeds: Seeds, inputs: list[str], numbers: Numbers, *,
                rule: str = "needed", upstream: bool = True, overwrite: bool = False) -> tuple[list[float], list[str]]:
    """(gradient of each requested input, the nodes that run in the engine's order) for ``torch.autograd.grad``.

    ``rule`` says which nodes run: "needed" (the engine: a requested input lies below the node, one edge or more),
    or a mistake of PRUNE_MISTAKES; ``upstream=False`` sends the local derivative alone; ``overwrite`` replaces a
    buffer instead of adding to it."""
    wanted = set(inputs)
    below: dict[str, bool] = {}

    def leads(node: str) -> bool:
        if node not in below:
            below[node] = any(source in wanted or leads(source) for source in graph[node])
        return below[node]

    def may_run(node: str) -> bool:
        return {"needed": leads(node), "all": True, "inputs": leads(node) or node in wanted,
                "stop": leads(node) and node not in wanted}[rule]

    runs = {root for root in seeds if may_run(root)}
    stack = list(runs)
    while stack:
        for source in graph[stack.pop()]:
            if source not in runs and may_run(source):
                runs.add(source)
                stack.append(source)
    pruned = {node: [source for source in graph[node] if source in runs] for node in runs}
    ran = run_engine(pruned, [root for root in seeds if root in runs], numbers)
    buffer = dict.fromkeys(runs | wanted, 0.0)
    for root, seed in seeds.items():
        if root in buffer:
            buffer[root] += seed
    for node in ran:
        for source in graph[node]:
            if source in buffer:
                sent = local[node, source] * (buffer[node] if upstream else 1.0)
                buffer[source] = sent if overwrite else buffer[source] + sent
    return [buffer[node] for node in inputs], ran


def _torch_oracles(graph: Graph, local: Local, seeds: Seeds, inputs: list[str]):
    """What PyTorch does on this graph, built from float64 scalars (node = its own leaf × 1 + sum(local × input)):
    torch.autograd.grad's gradient for each requested input, central differences of the same (a nudge added to each
    requested input), and the set of nodes whose pre-hook fires."""
    nodes = depth_first_order(graph, list(seeds))
    ran: set[str] = set()

    def build(nudges: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        value: dict[str, torch.Tensor] = {}
        for node in reversed(nodes):  # inputs before consumers
            total = torch.zeros((), dtype=torch.float64, requires_grad=nudges is None) * 1.0
            for source in graph[node]:
                total = total + local[node, source] * value[source]
            if nudges is not None and node in inputs:
                total = total + nudges[inputs.index(node)]
            if nudges is None:
                total.grad_fn.register_prehook(lambda grad_outputs, node=node: ran.add(node))
            value[node] = total
        return value

    value = build()
    grads = torch.autograd.grad([value[root] for root in seeds], [value[node] for node in inputs],
                                grad_outputs=[torch.tensor(seed, dtype=torch.float64) for seed in seeds.values()])

    def weighted_roots(nudges: torch.Tensor) -> torch.Tensor:
        moved = build(nudges)
        return sum(seed * moved[root] for root, seed in seeds.items())

    fd = central_difference(weighted_roots, torch.zeros(len(inputs), dtype=torch.float64))[0]
    return torch.stack(grads).detach(), fd, ran


def _as_triple(answer, inputs: list[str], what: str) -> tuple[dict, list[str]]:
    """The learner's answer checked against the contract: a tuple (grads, ran), grads a dict with a float for every
    requested input and nothing else, ran a list of node names."""
    if type(answer) is not tuple or len(answer) != 2:
        raise GradingFailure(f"{what} returned a {type(answer).__name__}: {answer!r:.120}; the part asks for a tuple "
                             "of two, (grads, ran).")
    grads, ran = answer
    if type(grads) is not dict or not all(type(node) is str for node in grads):
        raise GradingFailure(f"{what} returned {type(grads).__name__} as grads; expected a dict node name -> "
                             "gradient.")
    missing = [node for node in inputs if node not in grads]
    extra = [node for node in grads if node not in inputs]
    if missing or extra:
        raise GradingFailure(f"{what} gives gradients for {sorted(grads)!r:.200}; grads has one entry for each "
                             f"requested input, {inputs!r}, and no other.")
    not_floats = {node: type(value).__name__ for node, value in grads.items() if not isinstance(value, float)}
    if not_floats:
        raise GradingFailure(f"{what} gives {not_floats} as gradients; expected a Python float for every requested "
                             "input, as the part says (1.0, not 1; float(value) converts an int or a 0-d tensor).")
    return grads, as_order(ran, f"{what}: ran")


def _ran_failure(what: str, ran: list[str], graph: Graph, local: Local, seeds: Seeds, inputs: list[str],
                 numbers: Numbers, right: list[str]) -> GradingFailure | None:
    """What is wrong with the nodes the learner ran, and the mistake whose run it is (None if right)."""
    if ran == right:
        return None
    named = {mistake for rule, mistake in PRUNE_MISTAKES
             if engine_grad(graph, local, seeds, inputs, numbers, rule=rule)[1] == ran}
    suspects: tuple = tuple(named) if len(named) == 1 else ()
    twice = sorted({node for node in ran if ran.count(node) > 1})
    extra = [node for node in ran if node not in right]
    missing = [node for node in right if node not in ran]
    if twice:
        issue = f"{', '.join(map(repr, twice))} run more than once"
    elif extra or missing:
        parts = []
        if extra:
            parts.append(f"you ran {', '.join(map(repr, extra))}, whose pre-hook PyTorch never fires on this graph")
        if missing:
            parts.append(f"you did not run {', '.join(map(repr, missing))}, whose pre-hook PyTorch fires")
        issue = "; ".join(parts)
    else:
        pruned = {node: [source for source in graph[node] if source in right] for node in right}
        problem = order_problem(ran, pruned, [root for root in seeds if root in right], numbers)
        issue, looks = problem if problem is not None else ("not the engine's order", ())
        suspects = suspects or looks
    return GradingFailure("\n".join([
        f"{what}: the nodes that ran are wrong.", f"  {'the nodes you ran:':19} {ran!r:.300}",
        f"  problem:            {issue}",
        "  (PyTorch's pre-hooks on the same graph say which nodes run; the engine's order says when)"]),
        suspects=suspects)


def _gradient_symptoms(graph: Graph, local: Local, seeds: Seeds, inputs: list[str], numbers: Numbers,
                       skipped: bool) -> list:
    """The mistakes the gradients may show; a requested input that did not run only where the learner's ``ran``
    leaves out a node that runs (``skipped``): the same numbers come from a run that captured an input's gradient
    before its buffer was complete."""
    def grads(**mistake) -> list[float]:
        return engine_grad(graph, local, mistake.pop("seeds", seeds), inputs, numbers, **mistake)[0]

    return [SEEDS_AS_ONE.looks_like(grads(seeds=dict.fromkeys(seeds, 1.0))),
            MISSING_UPSTREAM.looks_like(grads(upstream=False)),
            OVERWROTE.looks_like(grads(overwrite=True)),
            *([STOPPED_AT_INPUT.looks_like(grads(rule="stop"))] if skipped else [])]


# Two paths from `out` to `c` that cancel (2 · 1.5 + 1 · (-3) = 0) and a zero local derivative (b -> y): `c` and `y`
# get gradient 0; `spare` consumes `c` but no root depends on it.
CANCEL_GRAPH: Graph = {"spare": ["c"], "out": ["a", "b"], "a": ["c"], "b": ["c", "y"], "c": ["z"], "y": ["z"],
                       "z": []}
CANCEL_LOCAL: Local = {("out", "a"): 2.0, ("out", "b"): 1.0, ("a", "c"): 1.5, ("b", "c"): -3.0, ("b", "y"): 0.0,
                       ("c", "z"): 1.25, ("y", "z"): -0.5, ("spare", "c"): 4.0}
CANCEL_NUMBERS: Numbers = {"spare": 30, "out": 9, "a": 7, "b": 8, "c": 5, "y": 6, "z": 2**64 - 1}
CONTRAST_LOCAL = random_local(generator("03/contrast", 0), CONTRAST_GRAPH)
WIDE_LOCAL = random_local(generator("03/wide", 0), WIDE_GRAPH)
#: Corners of Part B's domain, run at every seed (after the visible graphs, before the drawn ones): a requested root
#: that another root consumes (it runs nothing itself); a requested input above another requested one (it must run);
#: gradients of exactly 0 (paths that cancel, a zero local derivative); a root no requested input lies below (it
#: never runs, although another root consumes it); a requested leaf and a requested root that nothing consumes.
GRADIENT_CORNERS = [(LESSON_GRAPH, LESSON_LOCAL, {"r": -0.5, "L": 2.0}, ["r"], THREADS_NUMBERS),
                    (LESSON_GRAPH, LESSON_LOCAL, {"r": -0.5, "L": 2.0}, ["x", "p"], THREADS_NUMBERS),
                    (CANCEL_GRAPH, CANCEL_LOCAL, {"out": 1.0}, ["y", "c"], CANCEL_NUMBERS),
                    (WIDE_GRAPH, WIDE_LOCAL, {"y": -1.5, "e": 1.0}, ["z", "m"], WIDE_NUMBERS),
                    (CONTRAST_GRAPH, CONTRAST_LOCAL, {"r": 0.5, "v": 1.0}, ["k", "v", "z"], CONTRAST_NUMBERS),
                    (SKIP_GRAPH, SKIP_LOCAL, {"log": 1.0, "b": 2.0}, ["c", "a"], SKIP_NUMBERS)]


def _gradient_cases(grading_seed: int | None):
    if grading_seed is None:
        yield LESSON_GRAPH, LESSON_LOCAL, {"L": 1.0}, ["x"], LESSON_NUMBERS
        yield LESSON_GRAPH, LESSON_LOCAL, {"L": 1.0}, ["q", "p"], LESSON_NUMBERS
        yield SKIP_GRAPH, SKIP_LOCAL, {"out": 1.0}, ["c", "a"], SKIP_NUMBERS
        yield BRIDGE_GRAPH, BRIDGE_LOCAL, {"y": 1.0, "u": 0.5}, ["g", "w"], BRIDGE_NUMBERS
        yield from GRADIENT_CORNERS
        return
    yield from GRADIENT_CORNERS
    gen = generator("03/accumulate_gradients", grading_seed)
    for _ in range(3):
        graph, output = random_graph(gen)
        roots = random_roots(gen, graph, output)
        seeds = {root: round(float(uniform(gen, (), -2.0, 2.0)), 2) or 1.0 for root in roots}
        reached = depth_first_order(graph, roots)
        count = min(len(reached), int(torch.randint(1, 4, (), generator=gen)))
        inputs = [reached[i] for i in torch.randperm(len(reached), generator=gen)[:count].tolist()]
        yield graph, random_local(gen, graph), seeds, inputs, random_numbers(gen, graph)


@contextlib.contextmanager
def _with_course_order(fn: Callable):
    """While Part B runs, the name ``backward_order`` in the learner's notebook means the course's own (correct)
    order, so that an answer built on Part A, as the text suggests, is graded on Part B's own work."""
    namespace = getattr(fn, "__globals__", None)
    if type(namespace) is not dict or "backward_order" not in namespace:
        yield
        return
    own = namespace["backward_order"]
    namespace["backward_order"] = engine_runs
    try:
        yield
    finally:
        namespace["backward_order"] = own


def _check_gradients(accumulate_gradients_fn, graph: Graph, local: Local, seeds: Seeds, inputs: list[str],
                     numbers: Numbers) -> None:
    __tracebackhide__ = True
    graph, local, seeds, inputs, numbers = (copy.deepcopy(graph), dict(local), dict(seeds), list(inputs),
                                            dict(numbers))
    what = (f"accumulate_gradients(graph, local_grads, {seeds!r}, {inputs!r}, sequence_nr) for graph = "
            f"{_show_graph(graph)}, local_grads = {_show_local(local)}, sequence_nr = {numbers}")
    with _with_course_order(accumulate_gradients_fn):
        answer = _call_plain_python(accumulate_gradients_fn, graph, local, seeds, inputs, numbers, what=what,
                                    names=("graph", "local_grads", "seeds", "inputs", "sequence_nr"))
    grads, ran = _as_triple(answer, inputs, what)
    expected, fd, torch_ran = _torch_oracles(graph, local, seeds, inputs)
    reference, right = engine_grad(graph, local, seeds, inputs, numbers)
    if set(right) != torch_ran or not torch.allclose(torch.tensor(reference, dtype=torch.float64), expected):
        raise CourseBug(f"the reference engine and PyTorch disagree for {what} (ran {right} / {sorted(torch_ran)}).")
    values = torch.tensor([float(as_answer(grads[node], what=f"{what}[{node!r}]", shape=())) for node in inputs],
                          dtype=torch.float64)
    expect_close(values, expected, what=f"{what}: grads", fd=fd,
                 extra=f"  requested inputs, by index: {inputs}\n  (autograd: torch.autograd.grad on the same graph "
                       "built from float64 scalars)",
                 symptoms=_gradient_symptoms(graph, local, seeds, inputs, numbers,
                                             skipped=any(node not in ran for node in right)))
    failure = _ran_failure(what, ran, graph, local, seeds, inputs, numbers, right)
    if failure is not None:
        raise failure


@check
def check_accumulate_gradients(accumulate_gradients_fn, grading_seed: int | None = None) -> None:
    """Part B: accumulate_gradients(graph, local_grads, seeds, inputs, sequence_nr) -> (grads, ran), the engine of
    torch.autograd.grad(roots, inputs, grad_outputs=seeds) by plain Python, leaving its arguments unchanged.

    Domain: ``graph`` and ``sequence_nr`` as in Part A; ``seeds`` a dict root -> float for 1 to 3 roots, one of which
    may consume another; ``inputs`` 1 to 3 distinct nodes the roots depend on (roots and leaves included), one of
    which may lie below another; ``local_grads`` a float for every edge, of any sign or 0 (pinned at every seed:
    GRADIENT_CORNERS). Contracts and their checks: "a tuple (grads, ran)" -> exactly a tuple of two; "grads: a dict
    with a float for each requested input" -> exactly those keys, float values; "the gradient of each requested
    input" -> torch.autograd.grad on the same graph, checked by central differences (SEEDS_AS_ONE,
    MISSING_UPSTREAM, OVERWROTE, STOPPED_AT_INPUT); "ran: a list, the nodes that run, in the engine's order" -> the
    set PyTorch's pre-hooks record, in run_engine's order on the pruned graph (FULL_RUN, INPUTS_RAN,
    STOPPED_AT_INPUT, or Part A's order mistakes); "do not modify" -> CHANGED_DICTS; "no autograd" ->
    AUTOGRAD_IN_BOOKKEEPING; "graded with the course's backward_order" -> _with_course_order.
    """
    __tracebackhide__ = True
    for graph, local, seeds, inputs, numbers in _gradient_cases(grading_seed):
        with trial():
            _check_gradients(accumulate_gradients_fn, graph, local, seeds, inputs, numbers)
