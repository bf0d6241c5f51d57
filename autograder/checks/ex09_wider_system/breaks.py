"""Part C2: ``compiled_server(model, backend)`` returns ``serve(inputs, limit)``, the notebook's one-graph
``clipped_scores`` served through ``torch.compile(..., backend=backend)`` so that a whole stream of requests, each
with its own batch size (a single row among them) and its own limit, is compiled exactly once."""

from __future__ import annotations

import torch
import torch._dynamo
from torch import nn

from ...checking import GradingFailure, call_learner, check, expect_close, proven_failure, trial
from ...seeding import uniform
from ..cases import case_stream, randint, random_mlp
from .misconceptions import (
    BATCH_SPECIALISED,
    EAGER_FALLBACK,
    EXPANDED_ROW,
    FRACTION_NOT_TENSOR,
    GRAPH_BREAK,
    LIMIT_FLOAT32,
    LIMIT_SPECIALISED,
    MODEL_OUTSIDE,
    NEVER_COMPILED,
    ONE_SPECIALISED,
    PADDING_COUNTED,
)

CASES = 2
#: The largest batch of a request (a server that pads may rely on it: the part's text states it).
MAX_BATCH = 16
#: Dynamo's own refusals (fullgraph=True meeting a graph break).
REFUSALS = (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError)


def _cases(grading_seed: int | None):
    """(model, stream) for each case: a float64 MLP d -> w -> 1 with tanh, and a stream of (inputs, limit) requests:
    three of one batch size n0 (5 to 15, never the feature count) with three limits, then, shuffled, batches of 1,
    MAX_BATCH and two sizes from 2 to 15; every limit its own, in [0.2, 1)."""
    gen = case_stream("09/compiled_server", grading_seed)
    for _ in range(CASES):
        d, width = randint(gen, 2, 4), randint(gen, 4, 8)
        model = random_mlp(gen, (d, width, 1))
        n0 = randint(gen, 5, MAX_BATCH - 1)  # above d: Dynamo gives equal sizes one symbol when it compiles
        later = [1, MAX_BATCH, randint(gen, 2, MAX_BATCH - 1), randint(gen, 2, MAX_BATCH - 1)]
        sizes = [n0] * 3 + [later[i] for i in torch.randperm(len(later), generator=gen).tolist()]
        stream = [(uniform(gen, (n, d)), float(uniform(gen, (), 0.2, 1.0))) for n in sizes]
        yield model, stream


class _Counter:
    """The backend the test hands in: it notes the request during which each graph arrives, and the graph itself,
    then runs the graph as it is (like backend="eager"), noting each request that ran a compiled graph (``ran``)."""

    def __init__(self) -> None:
        self.request = -1
        self.graphs: list[tuple[int, torch.fx.GraphModule]] = []
        self.ran: set[int] = set()
        self.strided: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}   # request: an input with a 0 stride

    def __call__(self, graph_module, example_inputs):
        self.graphs.append((self.request, graph_module))
        for example in example_inputs:
            if isinstance(example, torch.Tensor) and example.dim() and \
                    any(stride == 0 and size > 1 for size, stride in zip(example.shape, example.stride())):
                self.strided.setdefault(self.request, (tuple(example.shape), tuple(example.stride())))

        def run(*args):
            self.ran.add(self.request)
            return graph_module.forward(*args)

        return run


def _linears(graph_module) -> int:
    return sum(node.op in ("call_function", "call_module") and "linear" in str(node.target).lower()
               for node in graph_module.graph.nodes)


def _describe(stream, request: int) -> str:
    inputs, limit = stream[request]
    return f"request {request} (batch of {inputs.shape[0]}, limit {limit:.4g})"


def _judge_compilations(counter: _Counter, stream, model: nn.Module) -> None:
    """Exactly one graph over the stream, holding the model's Linear layers; else the first extra compilation
    named by what changed at its request."""
    __tracebackhide__ = True
    if not counter.graphs:
        raise proven_failure(f"The backend passed to compiled_server was never called over {len(stream)} requests: "
                             "nothing was compiled through it.", NEVER_COMPILED)
    requests = [request for request, _ in counter.graphs]
    listing = "; ".join(_describe(stream, request) for request in requests)
    if len(set(requests)) < len(requests):
        twice = next(request for request in requests if requests.count(request) > 1)
        raise proven_failure(f"The backend received {requests.count(twice)} graphs during {_describe(stream, twice)}: "
                             "one call of your server ran as several graphs.", GRAPH_BREAK)
    wanted = sum(isinstance(module, nn.Linear) for module in model.modules())
    found = _linears(counter.graphs[0][1])
    if found < wanted:
        raise proven_failure(f"The graph your server compiled holds {found} of the model's {wanted} Linear layers "
                             "(counted in the graph the backend received).", MODEL_OUTSIDE)
    if len(requests) == 1:
        skipped = [request for request in range(len(stream)) if request not in counter.ran]
        if skipped:
            raise proven_failure(f"The backend compiled one graph, but {len(skipped)} of the {len(stream)} requests "
                                 f"never ran it, the first {_describe(stream, skipped[0])}.", EAGER_FALLBACK)
        return
    extra = requests[1]
    size = stream[extra][0].shape[0]
    seen = {stream[request][0].shape[0] for request in range(extra)}
    if size == 1 and extra in counter.strided:
        shape, strides = counter.strided[extra]
        mistake, changed = EXPANDED_ROW, (f"its single row was the first batch of one, and the graph then received a "
                                          f"tensor of shape {shape} with strides {strides}")
    elif size == 1:
        mistake, changed = ONE_SPECIALISED, "its single row was the first batch of one"
    elif size in seen:
        mistake, changed = LIMIT_SPECIALISED, f"a batch of {size} had been served before: only the limit was new"
    else:
        mistake, changed = BATCH_SPECIALISED, f"its batch size {size} was new (served before: {sorted(seen)})"
    sizes = ", ".join(str(inputs.shape[0]) for inputs, _ in stream)
    raise proven_failure(f"Over a stream of {len(stream)} requests (batch sizes {sizes}), the backend compiled "
                         f"{len(requests)} graphs, at {listing}; a server should compile once. The first "
                         f"recompilation came at request {extra}: {changed}.", mistake)


def _judge_answer(answer, model: nn.Module, inputs: torch.Tensor, limit: float, what: str) -> None:
    __tracebackhide__ = True
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a pair (clipped scores, fraction).")
    clipped, fraction = answer
    if not isinstance(clipped, torch.Tensor):
        raise GradingFailure(f"{what} returned clipped scores of type {type(clipped).__name__}; expected a tensor.")
    if not isinstance(fraction, torch.Tensor) or fraction.numel() != 1:
        raise proven_failure(f"{what} returned the fraction as {type(fraction).__name__} {fraction!r:.40}; expected a "
                             "0-d tensor.", FRACTION_NOT_TENSOR)
    scores = model(inputs).squeeze(1)
    rounded = torch.tensor(limit, dtype=torch.float32).item()
    expect_close(clipped.detach(), scores.clamp(-limit, limit), what=f"{what}[0] (the clipped scores)",
                 source="expected", rtol=1e-12, atol=1e-15,
                 symptoms=[LIMIT_FLOAT32.looks_like(scores.clamp(-rounded, rounded), rtol=1e-13, atol=1e-15)])
    clipped_rows = (scores.abs() > limit).double()
    padded = torch.cat([scores, model(inputs.new_zeros(MAX_BATCH - len(scores), inputs.shape[1])).squeeze(1)])
    symptoms = [PADDING_COUNTED.looks_like(clipped_rows.sum() / MAX_BATCH, rtol=1e-6, atol=1e-12),
                PADDING_COUNTED.looks_like((padded.abs() > limit).double().mean(), rtol=1e-6, atol=1e-12)]
    expect_close(fraction.detach().reshape(()).double(), clipped_rows.mean(), what=f"{what}[1] (the fraction)",
                 source="expected", rtol=1e-6, atol=1e-12, symptoms=symptoms if len(scores) < MAX_BATCH else [])


def _serve(serve, counter: _Counter, request: int, inputs: torch.Tensor, limit: float, what: str):
    """One request, served without recording; Dynamo's refusal of a graph break named as such."""
    __tracebackhide__ = True
    counter.request = request
    try:
        with torch.no_grad():
            return call_learner(serve, inputs, limit, what=what)
    except GradingFailure as failure:
        if isinstance(getattr(failure, "raised", None), REFUSALS):
            lines = [line.strip() for line in str(failure.raised).splitlines() if line.strip()][:3]
            raise proven_failure(f"{what}: torch.compile refused the function:\n    " + "\n    ".join(lines),
                                 GRAPH_BREAK) from None
        raise


@check
def check_compiled_server(compiled_server, grading_seed: int | None = None) -> None:
    """Part C2: compiled_server(model, backend) returns serve(inputs, limit) -> (model(inputs).squeeze(1) clamped to
    [-limit, limit]; the fraction of scores whose absolute value is above limit, a 0-d tensor), computed through
    torch.compile(..., backend=backend): over a stream of requests the backend receives exactly one graph, and that
    graph holds the model's Linear layers.

    Domain: ``model`` a float64 MLP (Linear, Tanh, Linear) d -> 4..8 -> 1, 2 <= d <= 4, weights in [-1, 1); a stream
    of seven requests, each float64 inputs (n, d) in [-2, 2) and a Python float limit in [0.2, 1): three of one batch
    size n0 in [5, 15] (only the limit changes), then in a drawn order batches of 1, 16 and two sizes in [2, 15].
    Served inside torch.no_grad(), after torch._dynamo.reset(). Two streams per test (a fixed one for the visible
    test). Contracts checked: every answer (values rtol 1e-12, the fraction rtol 1e-6); the graphs the backend
    received, and the request at which each arrived (several in one request: a graph break; a second one: named by
    what changed at its request); the model's Linear layers in the graph; the arguments unchanged."""
    __tracebackhide__ = True
    for model, stream in _cases(grading_seed):
        torch._dynamo.reset()
        counter, serve = _Counter(), None
        try:
            with trial():
                serve = call_learner(compiled_server, model, counter, what="compiled_server(model, backend)")
                if not callable(serve):
                    raise GradingFailure(f"compiled_server(model, backend) returned {type(serve).__name__}; expected "
                                         "a function serve(inputs, limit).")
            if not callable(serve):
                continue
            for request, (inputs, limit) in enumerate(stream):  # each request a case: its values judged on their own
                with trial():
                    what = f"serve(inputs of shape {tuple(inputs.shape)}, limit={limit:.4g}) (request {request})"
                    answer = _serve(serve, counter, request, inputs, limit, what)
                    with torch.no_grad():
                        _judge_answer(answer, model, inputs, limit, what)
            with trial():
                _judge_compilations(counter, stream, model)
        finally:
            torch._dynamo.reset()
