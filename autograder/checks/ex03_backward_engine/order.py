"""Part A: backward_order(graph, roots, sequence_nr), the order in which PyTorch's engine runs the nodes of a backward
pass from several roots, through nodes with several outputs (an edge (node, k) names output k): dependency counts
per edge, the roots' seeds counted as deliveries, a ready queue that runs the ready node with the highest sequence
number first, and for every node that runs the output slots a delivery or a seed reached.

An order is judged against the engine's (:func:`.graphs.run_engine` on the graph reduced to node names), and a wrong
one is named by the mistake whose order it is: the engine's own order run with another rule (the lowest number, a
plain queue or a stack, every root ready from the start, counts over the whole graph, a consumer counted once per
node, one root only, counts from each root added), a depth-first sort (exercise 02's, valid but not the engine's),
every node sorted by number, or, when no rule gives it, by what is wrong with it (a node twice, a node too many or
missing, an input before its consumer). The slots are judged against :func:`.graphs.received_slots`, itself checked
against what PyTorch's pre-hooks receive (:func:`.graphs.torch_slots`), and named by the slot rule that gives them
(the right slots out of increasing order are said to be so)."""

from __future__ import annotations

import copy

from ...checking import CourseBug, GradingFailure, Misconception, check, trial
from ...seeding import generator
from .graphs import (
    BRIDGE_GRAPH,
    LEAVES_FIRST_GRAPH,
    LESSON_GRAPH,
    SKIP_GRAPH,
    Graph,
    _breadth_first,
    _call_plain_python,
    _preorder,
    _show_graph,
    depth_first_order,
    names_graph,
    node_of,
    random_graph,
    random_numbers,
    random_roots,
    random_split_graph,
    received_slots,
    run_engine,
    slot_of,
    torch_slots,
    traversal_kind,
)
from .misconceptions import (
    BREADTH_FIRST,
    COUNTED_CONSUMERS,
    COUNTS_NEVER_ZERO,
    DEPTH_FIRST_SORT,
    FIRST_OUTPUT_ONLY,
    FIRST_ROOT_ONLY,
    FORWARD_ORDER,
    INPUT_BEFORE_CONSUMER,
    KEY_ORDER,
    LOWEST_FIRST,
    NO_VISITED_SET,
    NUMBERS_IGNORED,
    ONE_RUN_PER_OUTPUT,
    PER_ROOT_COUNTS,
    PREORDER,
    ROOTS_AT_START,
    SEED_SLOT_FORGOTTEN,
    SORTED_BY_NUMBER,
    UNREACHABLE,
    WHOLE_GRAPH_COUNTS,
    WHOLE_GRAPH_SLOTS,
)

Numbers = dict[str, int]

#: The lesson's sequence numbers, as this version of PyTorch stamps them: p, q, r, L in the order the forward pass
#: created them, the leaf's AccumulateGrad the largest possible number. The engine runs L, r, q, p, x.
LESSON_NUMBERS: Numbers = {"p": 4, "q": 5, "r": 6, "L": 7, "x": 2**64 - 1}
#: The same graph with r's node from another thread's counter: its number is the largest of the operations.
THREADS_NUMBERS: Numbers = {"p": 4, "q": 5, "r": 61, "L": 7, "x": 2**64 - 1}
SKIP_NUMBERS: Numbers = {"z": 12, "a": 3, "c": 9, "b": 25, "out": 7, "log": 20}
#: The lesson's graph, keys listed leaves first, with p numbered above q: they become ready together, q first.
LEAVES_NUMBERS: Numbers = {"x": 2**64 - 1, "q": 3, "L": 9, "p": 6, "r": 8}
BRIDGE_NUMBERS: Numbers = {"w": 2**64 - 1, "k": 8, "h": 14, "g": 4, "u": 11, "y": 6, "spare": 2}

#: Two graphs on which every named rule gives an order of its own, different from the engine's and from every other
#: rule's (found by a search over drawn graphs): each mistake shows, unmistaken, in both.
CONTRAST_GRAPH: Graph = {"y": ["n"], "q": ["z"], "m": ["v"], "k": [], "v": ["r", "q", "b", "y"], "r": ["k"],
                         "b": ["n", "q"], "z": ["r"], "f": [], "n": []}
CONTRAST_ROOTS = ["r", "v"]
CONTRAST_NUMBERS: Numbers = {"q": 3, "f": 2**64 - 2, "n": 2**64 - 3, "r": 9, "v": 11, "y": 13, "z": 15, "m": 17,
                             "b": 19, "k": 2**64 - 1}
WIDE_GRAPH: Graph = {"u": ["z"], "s": ["z"], "n": [], "e": ["y", "z", "m", "s", "u"], "m": ["n"], "c": [],
                     "k": ["y"], "z": ["k"], "q": [], "y": ["c"], "g": ["e"]}
WIDE_ROOTS = ["y", "e"]
WIDE_NUMBERS: Numbers = {"z": 3, "e": 5, "y": 7, "q": 9, "s": 11, "m": 13, "u": 15, "k": 17, "n": 19, "g": 21, "c": 23}


def _violation(order: list[str], graph: Graph) -> tuple[str, str] | None:
    """The first (input, consumer) pair where the input comes first, or None if none does."""
    position = {node: i for i, node in enumerate(order)}
    for consumer in order:
        for source in graph[consumer]:
            if position[source] < position[consumer]:
                return source, consumer
    return None


def _mistaken_orders(graph: Graph, roots: list[str], numbers: Numbers) -> list[tuple[Misconception, list[str]]]:
    """The order each named mistake gives on this case (the right order never: this case checks it is not)."""
    def engine(**mistake) -> list[str]:
        return run_engine(graph, roots, numbers, **mistake)

    needed = depth_first_order(graph, roots)
    sorts = [depth_first_order(graph, list(start), flip) for start in (roots, roots[::-1]) for flip in (False, True)]
    return [(LOWEST_FIRST, engine(pick="lowest")),
            (NUMBERS_IGNORED, engine(pick="first")), (NUMBERS_IGNORED, engine(pick="last")),
            (SORTED_BY_NUMBER, sorted(needed, key=lambda node: -numbers[node])),
            (ROOTS_AT_START, engine(roots_ready=True)), (ROOTS_AT_START, engine(roots_ready=True, once=True)),
            (WHOLE_GRAPH_COUNTS, engine(whole_graph=True)), (COUNTED_CONSUMERS, engine(per_consumer=True)),
            *([(FIRST_ROOT_ONLY, run_engine(graph, roots[:1], numbers)), (PER_ROOT_COUNTS, engine(per_root=True))]
              if len(roots) > 1 else []),
            *((DEPTH_FIRST_SORT, order) for order in sorts)]


def _what_is_wrong(order: list[str], graph: Graph, roots: list[str], numbers: Numbers,
                   right: list[str]) -> tuple[str, Misconception | None]:
    """What is wrong with an order that is not the engine's, and the mistake its shape alone suggests."""
    twice = sorted({node for node in order if order.count(node) > 1})
    if twice:
        return f"{', '.join(map(repr, twice))} run more than once", NO_VISITED_SET
    unknown = sorted(set(order) - set(graph))
    if unknown:
        return f"{', '.join(map(repr, unknown))} listed, but the graph has no such node", None
    extra = sorted(set(order) - set(right))
    if extra:
        return f"{', '.join(map(repr, extra))} listed, but no root depends on it", UNREACHABLE
    missing = [node for node in right if node not in order]
    if missing:
        return (f"{', '.join(map(repr, missing))} missing: every node the roots depend on runs once, the roots "
                "and the leaves included", COUNTS_NEVER_ZERO if set(order) <= set(roots) else None)
    violation = _violation(order, graph)
    if violation is not None:
        source, consumer = violation
        problem = f"{source!r} runs before {consumer!r}, but {consumer!r} consumes {source!r}"
        if len(roots) > 1:
            return problem, INPUT_BEFORE_CONSUMER
        output = roots[0]
        if order == [node for node in graph if node in right]:  # the dict's own order: named if no walk gives it
            walks = [_breadth_first(graph, output), _preorder(graph, output), _preorder(graph, output, True)]
            kind = traversal_kind(order, graph.__getitem__, output)
            return problem, KEY_ORDER if kind == "early" and order not in walks else INPUT_BEFORE_CONSUMER
        return problem, ORDER_MISTAKES[traversal_kind(order, graph.__getitem__, output)]
    return _first_difference(order, graph, roots, numbers), None


def _first_difference(order: list[str], graph: Graph, roots: list[str], numbers: Numbers) -> str:
    """The first step at which a valid order leaves the engine's: the ready nodes then, with their numbers."""
    right = run_engine(graph, roots, numbers)
    step = next(i for i, (mine, theirs) in enumerate(zip(order, right)) if mine != theirs)
    ran = set(right[:step])
    waiting = {node: sum(graph[c].count(node) for c in right) + roots.count(node) for node in right if node not in ran}
    for node in right[:step]:
        for source in graph[node]:
            if source not in ran:
                waiting[source] -= 1
    ready = sorted((node for node, count in waiting.items() if count == 0), key=lambda node: -numbers[node])
    shown = ", ".join(f"{node!r} (number {numbers[node]})" for node in ready)
    return (f"after {right[:step]!r} have run, the nodes every consumer has delivered to are {shown}; your order "
            f"runs {order[step]!r} next")


def order_problem(order: list[str], graph: Graph, roots: list[str],
                  numbers: Numbers) -> tuple[str, tuple[Misconception, ...]] | None:
    """(what is wrong, the mistakes it looks like) for a proposed run order; None if it is the engine's."""
    right = run_engine(graph, roots, numbers)
    if order == right:
        return None
    issue, shape = _what_is_wrong(order, graph, roots, numbers, right)
    named = set(mistake for mistake, theirs in _mistaken_orders(graph, roots, numbers) if theirs == order)
    if len(named) > 1:  # rules that agree on this case: it cannot tell them apart, and names none of them
        return issue, ()
    return issue, tuple(named) or ((shape,) if shape else ())


#: The misconception each kind of invalid order (traversal_kind) is named by.
ORDER_MISTAKES = {"forward": FORWARD_ORDER, "breadth-first": BREADTH_FIRST, "preorder": PREORDER,
                  "early": INPUT_BEFORE_CONSUMER}


def as_order(answer, what: str) -> list[str]:
    # Exact types only: a str subclass could answer every comparison the check makes with whatever it likes.
    if type(answer) is not list:
        raise GradingFailure(f"{what} returned a {type(answer).__name__}: {answer!r:.120}; the part asks for a list "
                             "of node names (list(...) converts it).")
    if not all(type(node) is str for node in answer):
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of node names (strings).")
    return answer


def order_failure(what: str, order: list[str], graph: Graph, roots: list[str], numbers: Numbers,
                  label: str = "your order") -> GradingFailure | None:
    problem = order_problem(order, graph, roots, numbers)
    if problem is None:
        return None
    issue, looks_like = problem
    return GradingFailure("\n".join([
        f"{what} is wrong.", f"  {label + ':':19} {order!r:.300}",
        f"  problem:            {issue}",
        "  (one order is right: the engine's, with its counts and its ready queue)"]), suspects=looks_like)


#: Corners of Part A's domain, run at every seed (after the visible graphs, before the drawn ones): a root that
#: another root consumes, numbered above it (it must wait all the same); a root with a consumer of its own that is
#: no root; a leaf as the only root; keys listed leaves first with a consumer before its inputs; two roots that share
#: inputs and consume nothing of each other; the two graphs on which every rule's order differs.
ORDER_CORNERS = [(LESSON_GRAPH, ["r", "L"], THREADS_NUMBERS), (BRIDGE_GRAPH, ["h", "g"], BRIDGE_NUMBERS),
                 (BRIDGE_GRAPH, ["w"], BRIDGE_NUMBERS), (LEAVES_FIRST_GRAPH, ["L"], LEAVES_NUMBERS),
                 (SKIP_GRAPH, ["log", "b"], SKIP_NUMBERS), (CONTRAST_GRAPH, CONTRAST_ROOTS, CONTRAST_NUMBERS),
                 (WIDE_GRAPH, WIDE_ROOTS, WIDE_NUMBERS)]


#: Nodes with several outputs (the try-it cell's unbind: a = s[0] * 2, L = a + s[2], spare = s[1] * 5; and a
#: consumer of two outputs of one node). Run at every seed: an output consumed only off the roots' paths (its slot
#: empty), a root that is an output of s (its seed fills that slot), s a root's only node, s delivered to three
#: times by two consumers.
SPLIT_GRAPH = {"L": ["a", ("s", 2)], "a": [("s", 0)], "s": ["x"], "spare": [("s", 1)], "x": []}
SPLIT_NUMBERS: Numbers = {"s": 3, "a": 4, "L": 5, "spare": 6, "x": 2**64 - 1}
PAIR_GRAPH = {"y": ["m", ("s", 1)], "d": [("s", 2)], "m": [("s", 0), ("s", 1)], "k": ["w"], "s": ["w", "k"],
              "w": []}
PAIR_NUMBERS: Numbers = {"y": 9, "m": 7, "s": 5, "k": 8, "w": 2**64 - 1, "d": 11}
#: c uses two outputs of s and runs before d, s's other consumer: s must still wait for d.
TWICE_GRAPH = {"L": ["c", "d"], "d": [("s", 2)], "c": [("s", 0), ("s", 1)], "s": ["x"], "x": []}
TWICE_NUMBERS: Numbers = {"L": 2, "c": 6, "d": 3, "s": 5, "x": 2**64 - 1}
SPLIT_CORNERS = [(SPLIT_GRAPH, ["L"], SPLIT_NUMBERS), (SPLIT_GRAPH, [("s", 1), "L"], SPLIT_NUMBERS),
                 (SPLIT_GRAPH, [("s", 2)], SPLIT_NUMBERS), (PAIR_GRAPH, ["y"], PAIR_NUMBERS),
                 (PAIR_GRAPH, ["m", ("s", 2)], PAIR_NUMBERS), (TWICE_GRAPH, ["L"], TWICE_NUMBERS),
                 (TWICE_GRAPH, [("s", 1), "L"], TWICE_NUMBERS)]


def _order_cases(grading_seed: int | None):
    if grading_seed is None:
        yield LESSON_GRAPH, ["L"], LESSON_NUMBERS
        yield SKIP_GRAPH, ["out"], SKIP_NUMBERS
        yield BRIDGE_GRAPH, ["y", "u"], BRIDGE_NUMBERS
        yield from ORDER_CORNERS
        yield from SPLIT_CORNERS
        return
    yield from ORDER_CORNERS
    yield from SPLIT_CORNERS
    gen = generator("03/backward_order", grading_seed)
    for _ in range(2):
        graph, output = random_graph(gen)
        yield graph, random_roots(gen, graph, output), random_numbers(gen, graph)
    for _ in range(3):
        graph, roots = random_split_graph(gen)
        yield graph, roots, random_numbers(gen, graph)


def as_runs(answer, what: str) -> tuple[list[str], list[list[int]]]:
    """The node names and the output numbers of an answer that must be a list of (node, outputs) pairs."""
    # Exact types only: a str or int subclass could answer every comparison the check makes with whatever it likes.
    if type(answer) is not list:
        raise GradingFailure(f"{what} returned a {type(answer).__name__}: {answer!r:.120}; the part asks for a list "
                             "of (node, outputs) pairs.")
    for item in answer:
        if (type(item) not in (tuple, list) or len(item) != 2 or type(item[0]) is not str
                or type(item[1]) not in (list, tuple) or not all(type(k) is int for k in item[1])):
            raise GradingFailure(f"{what} returned {answer!r:.160}; every entry must be a pair (node, outputs): a "
                                 f"node name and a list of output numbers (ints), and one entry is {item!r:.60}.")
    return [item[0] for item in answer], [list(item[1]) for item in answer]


def _several_outputs(graph) -> set[str]:
    return {node_of(ref) for refs in graph.values() for ref in refs if slot_of(ref) > 0}


def _slot_failure(what: str, answer: list, graph, roots: list, names: list[str],
                  slots: list[list[int]]) -> GradingFailure | None:
    """The first node whose filled slots are not the engine's, with what PyTorch's pre-hook saw there."""
    right = received_slots(graph, roots)
    seen = torch_slots(graph, roots)
    if any(seen.get(node) != right[node] for node in right if graph[node]):
        raise CourseBug(f"the reference slots and PyTorch's pre-hooks disagree for {what}: {right} / {seen}.")
    yours = dict(zip(names, slots))
    wrong = next((node for node in names if yours[node] != right[node]), None)
    if wrong is None:
        return None
    if sorted(yours[wrong]) == right[wrong]:
        return GradingFailure("\n".join([
            f"{what} is wrong.", f"  your answer:        {answer!r:.300}",
            f"  problem:            your answer has {wrong!r} run with outputs {yours[wrong]} filled: the right "
            f"outputs, but not in increasing order (the part lists them as {right[wrong]})",
            "  (the order of the nodes is right)"]))
    mistakes = [(WHOLE_GRAPH_SLOTS, received_slots(graph, roots, whole_graph=True)),
                (SEED_SLOT_FORGOTTEN, received_slots(graph, roots, seeds=False)),
                (FIRST_OUTPUT_ONLY, {node: [0] for node in right})]
    named = [mistake for mistake, theirs in mistakes if theirs == yours and theirs != right]
    count = min(1 + max([k for k in right[wrong] + yours[wrong] if k >= 0] + [0]), 8)
    saw = ", ".join("tensor" if k in right[wrong] else "None" for k in range(count))
    return GradingFailure("\n".join([
        f"{what} is wrong.", f"  your answer:        {answer!r:.300}",
        f"  problem:            your answer has {wrong!r} run with outputs {yours[wrong]} filled; a pre-hook on that "
        f"node in PyTorch (the graph built from custom Functions, backward from the same roots) receives "
        f"grad_outputs ({saw}{',' if count == 1 else ''}).",
        "  (the order of the nodes is right)"]), suspects=tuple(named[:1]) if len(named) == 1 else ())


def _check_order(backward_order_fn, graph, roots: list, numbers: Numbers) -> None:
    __tracebackhide__ = True
    graph, roots, numbers = copy.deepcopy(graph), list(roots), dict(numbers)  # the learner gets these very objects
    what = f"backward_order(graph, {roots!r}, sequence_nr) for graph = {_show_graph(graph)}, sequence_nr = {numbers}"
    answer = _call_plain_python(backward_order_fn, graph, roots, numbers, what=what,
                                names=("graph", "roots", "sequence_nr"))
    names, slots = as_runs(answer, what)
    twice = {node for node in names if names.count(node) > 1}
    if twice and twice <= _several_outputs(graph):
        raise GradingFailure("\n".join([
            f"{what} is wrong.", f"  your answer:        {answer!r:.300}",
            f"  problem:            {', '.join(map(repr, sorted(twice)))} run more than once: PyTorch's pre-hook on "
            "such a node fires once per backward pass"]), suspects=(ONE_RUN_PER_OUTPUT,))
    failure = order_failure(what, names, names_graph(graph), [node_of(root) for root in roots], numbers,
                            label="your order of nodes")
    if failure is None:
        failure = _slot_failure(what, answer, graph, roots, names, slots)
    if failure is not None:
        raise failure


@check
def check_backward_order(backward_order_fn, grading_seed: int | None = None) -> None:
    """Part A: backward_order(graph, roots, sequence_nr) lists the nodes in the order PyTorch's engine runs them.

    Domain: ``graph`` a dict str -> list of inputs (a name, or a pair (name, k) for output k of a node with several
    outputs; a consumer may use two outputs of one node), a DAG in which every node is a key and a leaf maps to [],
    keys in any order, at most 30 nodes, nodes shared by several consumers, branches no root depends on; ``roots`` a
    list of 1 to 3 distinct names or pairs, one of which may consume another (pinned at every seed: ORDER_CORNERS,
    with a consumed root numbered above its consumer, a leaf root and roots that share inputs; SPLIT_CORNERS, an
    output only consumed off the roots' paths, a root that is one output, two edges from one consumer);
    ``sequence_nr`` a distinct int for every node, in no relation to the edges, leaves sometimes the largest.
    Contracts and their checks: "a **list** of pairs (node, outputs)" -> as_runs, exact types; "runs **once**" ->
    ONE_RUN_PER_OUTPUT when only nodes with several outputs repeat; "outputs" -> received_slots, checked against
    PyTorch's pre-hooks, named WHOLE_GRAPH_SLOTS, SEED_SLOT_FORGOTTEN, FIRST_OUTPUT_ONLY; "the order the engine runs
    them" -> the names equal to run_engine's (COUNTED_CONSUMERS among the rules), and a wrong order
    named by the rule that gives it (_mistaken_orders: DEPTH_FIRST_SORT, LOWEST_FIRST, NUMBERS_IGNORED,
    SORTED_BY_NUMBER, ROOTS_AT_START, WHOLE_GRAPH_COUNTS, FIRST_ROOT_ONLY, PER_ROOT_COUNTS) or by its shape
    (NO_VISITED_SET, UNREACHABLE, COUNTS_NEVER_ZERO when only roots ran, an invalid order by the walk that makes
    it: traversal_kind, KEY_ORDER); "do not modify" -> deep copies compared afterwards (CHANGED_DICTS); plain
    Python -> no autograd (AUTOGRAD_IN_BOOKKEEPING).
    """
    __tracebackhide__ = True
    for graph, roots, numbers in _order_cases(grading_seed):
        with trial():
            _check_order(backward_order_fn, graph, roots, numbers)
