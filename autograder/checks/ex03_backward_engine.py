"""Checks for exercise 03, the backward engine: a valid backward order, accumulated gradients, an all-reduce by hooks.

A graph is a plain dict ``node -> list of input nodes`` (strings, a DAG): every node is a key and a leaf maps to
``[]``. Local derivatives are a dict ``(node, input) -> float``. Each ``check_*`` function is one test cell's whole
body: without ``seed`` it runs the public cases, with ``seed=grading_seed()`` fresh random ones.

Models come from :mod:`autograder.checks.cases` (shared with exercise 05).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..checking import GradingFailure, Misconception, as_answer, call_learner, call_with_none_hint, expect_close
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

NAMES = list("abcdefghkmnpqrstuvwyz")


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


# ---------------------------------------------------------------------------------------------- Part A

FORWARD_HINT = ("Your order is valid read backwards: you listed inputs before their consumers, which is the order "
                "of the forward pass. Reverse it (a depth-first postorder from the output, reversed).")
EARLY_HINT = ("A node may run only once every node that consumes it has run, otherwise its gradient is still "
              "incomplete when it passes it on. Visiting a node the first time you meet it (breadth-first, or "
              "depth-first preorder) breaks this when a node is reached by paths of different lengths. Use a "
              "depth-first postorder reversed, or count each node's consumers and run it when the count hits 0.")


def _violation(order: list[str], graph: Graph) -> tuple[str, str] | None:
    """The first (input, consumer) pair where the input comes first, or None if none does."""
    position = {node: i for i, node in enumerate(order)}
    for consumer in order:
        for source in graph[consumer]:
            if position[source] < position[consumer]:
                return source, consumer
    return None


def _order_problem(order: list[str], graph: Graph, output: str) -> tuple[str, str] | None:
    """(what is wrong, likely misconception or '') for a proposed backward order; None if it is valid."""
    needed = reference_order(graph, output)
    twice = sorted({node for node in order if order.count(node) > 1})
    if twice:
        return (f"{', '.join(map(repr, twice))} listed more than once",
                "no visited set. A node reached by two paths must still be listed once: keep a set of visited "
                "nodes and skip a node you have already placed.")
    unknown = sorted(set(order) - set(graph))
    if unknown:
        return f"{', '.join(map(repr, unknown))} listed, but the graph has no such node", ""
    extra = sorted(set(order) - set(needed))
    if extra:
        return (f"{', '.join(map(repr, extra))} listed, but the output does not depend on it",
                "included nodes the output does not depend on. Walk from the output through the inputs; do not "
                "list every key of the graph.")
    missing = [node for node in needed if node not in order]
    if missing:
        return (f"{', '.join(map(repr, missing))} missing: every node the output depends on must be listed, "
                "the output itself and the leaves included", "")
    violation = _violation(order, graph)
    if violation is None:
        return None
    source, consumer = violation
    return (f"{source!r} comes before {consumer!r}, but {consumer!r} consumes {source!r}",
            "input visited before its consumer. " + EARLY_HINT if _violation(order[::-1], graph)
            else "forward order. " + FORWARD_HINT)


def _as_order(answer, what: str) -> list[str]:
    # Exact types only: a str subclass could answer every comparison the check makes with whatever it likes.
    if type(answer) not in (list, tuple) or not all(type(node) is str for node in answer):
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of node names (strings).")
    return list(answer)


def _order_cases(seed: int | None):
    if seed is None:
        yield LESSON_GRAPH, "L"
        yield LESSON_GRAPH, "r"
        yield SKIP_GRAPH, "out"
        return
    gen = generator("03/backward_order", seed)
    for _ in range(3):
        yield random_graph(gen)


def check_backward_order(backward_order_fn, seed: int | None = None) -> None:
    """Part A: backward_order(graph, output) lists every node the output depends on once, consumers first."""
    __tracebackhide__ = True
    for graph, output in _order_cases(seed):
        what = f"backward_order(graph, {output!r}) for graph = {_show_graph(graph)}"
        order = _as_order(call_learner(backward_order_fn, copy.deepcopy(graph), output, what=what), what)
        problem = _order_problem(order, graph, output)
        if problem is None:
            continue
        issue, mistake = problem
        lines = [f"{what} is wrong.",
                 f"  your order:         {order!r:.300}",
                 f"  a valid order:      {reference_order(graph, output)!r} (one of several: any order that lists "
                 "each node the output depends on once, before all of its inputs, is accepted)",
                 f"  problem:            {issue}"]
        if mistake:
            lines.append(f"Likely misconception: {mistake}")
        raise GradingFailure("\n".join(lines))


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


def _gradient_mistakes(graph: Graph, local: Local, output: str, nodes: list[str]) -> list[Misconception]:
    def by_rule(rule):
        return lambda received: _every_node(received, graph, local, nodes, rule)

    return [
        Misconception("output's gradient not set to 1", "Start backward with d output / d output = 1.",
                      value=torch.zeros(len(nodes))),
        Misconception("missing the upstream gradient", "Each edge sends local derivative × the consumer's "
                      "gradient, not the local derivative alone.",
                      value=_run_in_order(graph, local, output, nodes, upstream=False)),
        Misconception("passed a gradient on before it was complete", EARLY_HINT,
                      value=_run_in_order(graph, local, output, _breadth_first(graph, output))),
        Misconception("overwrote instead of summing at a branch point", "A node used by several consumers gets "
                      "one contribution from each; add them (+=), do not replace (=).",
                      legacy_when=by_rule(lambda value, parts: any(_near(value, part) for part in parts))),
        Misconception("averaged the paths", "Contributions of different paths add up; they are never averaged.",
                      legacy_when=by_rule(lambda value, parts: _near(value, sum(parts) / len(parts)))),
    ]


def _as_gradients(answer, nodes: list[str], what: str) -> torch.Tensor:
    """The learner's dict as a float64 vector in ``nodes`` order; extra nodes are allowed only with gradient 0."""
    if type(answer) is not dict or not all(type(node) is str for node in answer):
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict node name -> gradient.")
    missing = [node for node in nodes if node not in answer]
    if missing:
        raise GradingFailure(f"{what} has no gradient for {', '.join(map(repr, missing))}; expected one entry for "
                             f"every node the output depends on: {nodes}.")
    values = {node: float(as_answer(value, what=f"{what}[{node!r}]", shape=())) for node, value in answer.items()}
    stray = {node: value for node, value in values.items() if node not in nodes and value != 0.0}
    if stray:
        raise GradingFailure(f"{what} gives gradients {stray} to nodes the output does not depend on; their gradient "
                             "is 0 (or leave them out).\nLikely misconception: included nodes the output does not "
                             "depend on. Start from the output and follow inputs only.")
    return torch.tensor([values[node] for node in nodes], dtype=torch.float64)


def _gradient_cases(seed: int | None):
    if seed is None:
        yield LESSON_GRAPH, LESSON_LOCAL, "L"
        yield SKIP_GRAPH, SKIP_LOCAL, "out"
        return
    gen = generator("03/accumulate_gradients", seed)
    for _ in range(3):
        graph, output = random_graph(gen)
        yield graph, random_local(gen, graph), output


def check_accumulate_gradients(accumulate_gradients_fn, seed: int | None = None) -> None:
    """Part B: accumulate_gradients(graph, local_grads, output) -> {node: d output / d node} (sum over paths)."""
    __tracebackhide__ = True
    for graph, local, output in _gradient_cases(seed):
        what = (f"accumulate_gradients(graph, local_grads, {output!r}) for graph = {_show_graph(graph)}, "
                f"local_grads = {_show_local(local)}")
        answer = call_learner(accumulate_gradients_fn, copy.deepcopy(graph), dict(local), output, what=what)
        nodes, expected, fd = _gradient_oracles(graph, local, output)
        expect_close(_as_gradients(answer, nodes, what), expected, what=what, fd=fd,
                     extra=f"  nodes, by index:    {nodes}",
                     misconceptions=_gradient_mistakes(graph, local, output, nodes))


# ---------------------------------------------------------------------------------------------- models

# ---------------------------------------------------------------------------------------------- Part C

@dataclass
class ReplicaCase:
    sizes: tuple[int, ...]
    model: nn.Sequential
    rounds: list[tuple[torch.Tensor, torch.Tensor, list[int]]]  # (batch inputs, batch targets, backward order)

    @property
    def replicas(self) -> int:
        return len(self.rounds[0][2])


def _replica_case(gen: torch.Generator, sizes, replicas: int, shard: int, orders: list[list[int]]) -> ReplicaCase:
    batch = replicas * shard
    rounds = [(uniform(gen, (batch, sizes[0])), uniform(gen, (batch, sizes[-1])), order) for order in orders]
    return ReplicaCase(tuple(sizes), random_mlp(gen, sizes), rounds)


def _replica_cases(seed: int | None):
    if seed is None:
        gen = generator("03/allreduce/public", 0)
        yield _replica_case(gen, (3, 4, 2), 2, 3, [[0, 1], [1, 0]])
        yield _replica_case(gen, (2, 3, 1), 3, 2, [[0, 1, 2], [2, 0, 1]])
        return
    gen = generator("03/allreduce", seed)
    for _ in range(2):
        replicas = choice(gen, [2, 3, 4])
        orders = [torch.randperm(replicas, generator=gen).tolist() for _ in range(2)]
        if orders[1][-1] == replicas - 1:  # the second round never ends with the last replica
            orders[1].reverse()
        sizes = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), choice(gen, [1, 2]))
        yield _replica_case(gen, sizes, replicas, choice(gen, [2, 3]), orders)


NONE_HINT = ("\nLikely misconception: averaged before every replica had its gradient. A replica whose backward "
             "has not run yet still has .grad = None. Count the arrivals for each parameter and average only when "
             "the last replica's gradient has arrived, whatever order the replicas run in.")


def _replica_mistakes(case: ReplicaCase, round_index: int, grads_now, name: str, replica: int,
                      expected: torch.Tensor, local: list[dict[str, torch.Tensor]]) -> list[Misconception]:
    def close(a, b):
        return a is not None and torch.allclose(a.detach().double(), b, rtol=1e-6, atol=1e-8)

    own = close(grads_now[replica], local[replica][name])
    others_averaged = any(close(g, expected) for r, g in enumerate(grads_now) if r != replica)
    return [
        Misconception("averaging only in the first step", "Your hooks worked in round 1 but not in round 2: "
                      "reset the arrival count (or list) once the average is written, so that every backward "
                      "round is averaged.", legacy_when=lambda _: own and round_index > 0),
        Misconception("only updated the replica that fired", "The hook that completes the set must write the "
                      "average into .grad of EVERY replica, not only of the one whose backward is running.",
                      legacy_when=lambda _: own and others_averaged),
        Misconception("no averaging happened", "Every replica kept its own shard's gradient: register a hook on "
                      "each parameter of each replica (param.register_post_accumulate_grad_hook(fn)).",
                      legacy_when=lambda _: own),
        Misconception("summed instead of averaging", f"Divide the sum by the number of replicas "
                      f"({case.replicas}): the mean loss over the full batch is the average of the shard losses.",
                      value=case.replicas * expected),
    ]


def _run_backward_round(case: ReplicaCase, models: list[nn.Module], round_index: int) -> None:
    inputs, targets, order = case.rounds[round_index]
    for model in models:
        model.zero_grad()
    for replica in order:
        shard = slice(replica * len(inputs) // case.replicas, (replica + 1) * len(inputs) // case.replicas)
        loss = F.mse_loss(models[replica](inputs[shard]), targets[shard])
        call_with_none_hint(loss.backward, hint=NONE_HINT,
                            what=f"round {round_index + 1} (backward order {order}): replica {replica}'s "
                                 "loss.backward() (your hooks run inside it)")


def check_attach_allreduce_hooks(attach_allreduce_hooks_fn, seed: int | None = None) -> None:
    """Part C: after every replica's backward on its shard, every replica's .grad is the full-batch gradient."""
    __tracebackhide__ = True
    for case in _replica_cases(seed):
        models = [copy.deepcopy(case.model) for _ in range(case.replicas)]
        shard = len(case.rounds[0][0]) // case.replicas
        label = (f"attach_allreduce_hooks(replicas) for {case.replicas} replicas of an MLP with layer sizes "
                 f"{case.sizes}, each running backward on a shard of {shard} examples (mean squared error)")
        call_learner(attach_allreduce_hooks_fn, models, what=label)
        for round_index, (inputs, targets, order) in enumerate(case.rounds):
            _run_backward_round(case, models, round_index)
            expected, fd = mean_loss_gradients(case.model, F.mse_loss, inputs, targets)
            local = [mean_loss_gradients(case.model, F.mse_loss, inputs[r * shard:(r + 1) * shard],
                                         targets[r * shard:(r + 1) * shard], fd=False)[0]
                     for r in range(case.replicas)]
            for replica, model in enumerate(models):
                for name, param in model.named_parameters():
                    what = (f"{label}; round {round_index + 1} (backward order {order}): replica {replica}'s "
                            f"{name}.grad")
                    if param.grad is None:
                        raise GradingFailure(f"{what} is None: every replica must hold the averaged gradient.")
                    grads_now = [dict(m.named_parameters())[name].grad for m in models]
                    expect_close(param.grad, expected[name], what=what, fd=fd[name], extra=(
                        "  expected:           the gradient of the mean loss over the whole batch (= the average "
                        "of the replicas' own gradients)"),
                        misconceptions=_replica_mistakes(case, round_index, grads_now, name, replica,
                                                         expected[name], local))
        for model in models:
            for (name, param), original in zip(model.named_parameters(), case.model.parameters()):
                if not torch.equal(param.detach(), original.detach()):
                    raise GradingFailure(f"{label}: your hooks changed the parameter {name}; they must only "
                                         "write .grad.")
