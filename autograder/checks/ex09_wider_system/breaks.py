"""Part C2: ``clipped_scores_one_graph(model, inputs, limit)`` is the notebook's ``clipped_scores`` rewritten so that
``torch.compile(..., fullgraph=True)`` captures it as one graph: the same clipped scores (carrying the model's
gradient) and fraction, with no graph break left."""

from __future__ import annotations

import inspect

import torch
import torch._dynamo

from ...checking import CourseBug, GradingFailure, call_learner, check, expect_close, proven_failure, trial
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint, random_mlp
from .misconceptions import FIXED_LIMIT, FLOAT32_REBUILT, FRACTION_NOT_TENSOR, GRAPH_BREAK, GRAPH_CUT, ONE_SIDED
from .traces import ATTEMPTS

CASES = 3
#: No score lies closer than this to ±limit: clamp's kink stays out of the central differences' reach.
KINK_GAP = 1e-3


def _cases(grading_seed: int | None):
    """(model, inputs, limit) for each case: a float64 MLP d -> w -> 1 with tanh, and a limit that some scores pass
    on each side while others stay inside (drawn again until they do, none within :data:`KINK_GAP` of ±limit)."""
    gen = case_stream("09/clipped_scores", grading_seed)
    for _ in range(CASES):
        for _ in range(ATTEMPTS):
            d, width, n = randint(gen, 2, 4), randint(gen, 4, 8), randint(gen, 6, 12)
            model, inputs = random_mlp(gen, (d, width, 1)), uniform(gen, (n, d))
            limit = float(uniform(gen, (), 0.2, 1.0))
            with torch.no_grad():
                scores = model(inputs).squeeze(1)
            if (scores > limit).any() and (scores < -limit).any() and (scores.abs() < limit).any() and bool(
                    ((scores.abs() - limit).abs() > KINK_GAP).all()):
                break
        else:
            raise CourseBug("no draw of Part C2's case had scores on both sides of the limit.")
        yield model, inputs, limit


def _compiled(fn):
    """``fn`` as written (:func:`inspect.unwrap`: without the wrappers of functools.wraps decorators, such as the
    trampolines mutation testing puts around it) compiled with fullgraph=True, returning Dynamo's refusal (an
    exception) instead of raising it."""
    written = inspect.unwrap(fn)

    def call(model, inputs, limit):
        torch._dynamo.reset()
        try:
            return torch.compile(written, backend="eager", fullgraph=True)(model, inputs, limit)
        except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as refusal:
            return refusal
        finally:
            torch._dynamo.reset()

    return call


def _weighted_clipped(model, inputs: torch.Tensor, limit: float, weights: torch.Tensor):
    """(weights · the clipped scores) as a function of the model's parameters: the oracles' function."""
    names = [name for name, _ in model.named_parameters()]

    def weighted(*values):
        output = torch.func.functional_call(model, dict(zip(names, values)), (inputs,)).squeeze(1)
        return (output.clamp(-limit, limit) * weights).sum()

    return weighted


def _first_lines(error: Exception, count: int = 3) -> str:
    return "\n".join(["    " + line.strip() for line in str(error).splitlines() if line.strip()][:count])


def _pair(answer, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    __tracebackhide__ = True
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a pair (clipped scores, fraction).")
    clipped, fraction = answer
    if not isinstance(clipped, torch.Tensor):
        raise GradingFailure(f"{what} returned clipped scores of type {type(clipped).__name__}; expected a tensor.")
    if not isinstance(fraction, torch.Tensor) or fraction.numel() != 1:
        raise proven_failure(f"{what} returned the fraction as {type(fraction).__name__} {fraction!r:.40}; expected a "
                             "0-d tensor.", FRACTION_NOT_TENSOR)
    return clipped, fraction.reshape(())


@check
def check_clipped_scores_one_graph(clipped_scores_one_graph, grading_seed: int | None = None) -> None:
    """Part C2: clipped_scores_one_graph(model, inputs, limit) returns (the scores model(inputs).squeeze(1) clamped to
    [-limit, limit], in the scores' dtype, carrying the model's graph; the fraction of scores whose absolute value is
    above limit, as a 0-d tensor), and torch.compile(fn, backend="eager", fullgraph=True) runs it (no graph break).

    Domain: ``model`` a float64 MLP (Linear, Tanh, Linear) d -> 4..8 -> 1, 2 <= d <= 4, weights in [-1, 1); ``inputs``
    float64 (n, d), 6 <= n <= 12, in [-2, 2); ``limit`` a Python float in [0.2, 1) with scores beyond it on both sides
    and inside it, none within 1e-3 of ±limit. Three cases (a fixed stream for the visible test). Contracts checked:
    a pair, the fraction a one-number tensor (rtol 1e-6: float32 counts); the clipped scores' values (rtol 1e-12:
    float32 is named) and the gradient of a weighted sum of them with respect to the model's parameters (autograd and
    central differences of the clamp); the function as written compiled with fullgraph=True (Dynamo's refusal is
    shown); the arguments unchanged."""
    __tracebackhide__ = True
    for number, (model, inputs, limit) in enumerate(_cases(grading_seed), start=1):
        with trial():
            what = f"clipped_scores_one_graph(model, inputs of shape {tuple(inputs.shape)}, limit={limit:.4g})"
            clipped, fraction = _pair(call_learner(clipped_scores_one_graph, model, inputs, limit, what=what), what)
            with torch.no_grad():
                scores = model(inputs).squeeze(1)
            expected = scores.clamp(-limit, limit)
            expect_close(clipped.detach(), expected, what=f"{what}[0] (the clipped scores)", source="expected",
                         rtol=1e-12, atol=1e-15, symptoms=[
                             FLOAT32_REBUILT.looks_like(expected.float(), rtol=1e-12, atol=1e-15),
                             FIXED_LIMIT.looks_like(scores.clamp(-3.0, 3.0), rtol=1e-12, atol=1e-15),
                             ONE_SIDED.looks_like(scores.clamp(max=limit), rtol=1e-12, atol=1e-15)])
            expect_close(fraction.detach(), (scores.abs() > limit).double().mean(), what=f"{what}[1] (the fraction)",
                         source="expected", rtol=1e-6, atol=1e-12,
                         symptoms=[ONE_SIDED.looks_like((scores > limit).double().mean(), rtol=1e-6, atol=1e-12)])
            if not clipped.requires_grad:
                raise proven_failure(f"{what}: the clipped scores do not require grad; no gradient can reach the "
                                     "model's parameters through them.", GRAPH_CUT)
            parameters = list(model.parameters())
            weights = uniform(torch.Generator().manual_seed(number), tuple(expected.shape))
            got = torch.autograd.grad((clipped * weights).sum(), parameters, allow_unused=True)
            weighted = _weighted_clipped(model, inputs, limit, weights)
            values = [p.detach() for p in parameters]
            flat = lambda gradients: torch.cat([g.reshape(-1) for g in gradients])  # noqa: E731
            expect_close(flat([torch.zeros_like(p) if g is None else g for p, g in zip(values, got)]),
                         flat(autograd_gradient(weighted, *values)), fd=flat(central_difference(weighted, *values)),
                         what=f"{what}: d (weights · clipped scores) / d (model's parameters)", rtol=1e-9, atol=1e-12)
            refusal = call_learner(_compiled(clipped_scores_one_graph), model, inputs, limit,
                                   what=f"torch.compile(clipped_scores_one_graph, fullgraph=True) on case {number}")
            if isinstance(refusal, Exception):
                raise proven_failure(f"torch.compile(clipped_scores_one_graph, backend='eager', fullgraph=True) "
                                     f"refused case {number} with {type(refusal).__name__}:\n{_first_lines(refusal)}",
                                     GRAPH_BREAK)
