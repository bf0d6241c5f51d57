"""Exercise 09, parts B and C: the cases of each check tell its mistakes apart at every seed, and the course's own
references (the byte prediction, the locator of broken stages, the server that compiles once) agree with what they
are checked against.

A mistake is named only when two cases agree on it, so each part's fixed cases are built (and drawn again) until every
mistake the catalogue names shows, with a value of its own, in at least two of them, at every grading seed.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

from autograder.checks.ex09_wider_system import breaks as part_c2
from autograder.checks.ex09_wider_system import cuts, memory, misconceptions
from autograder.misconceptions import armed

SEEDS = [None, *range(60)]


def _armed_counts(cases) -> dict[str, int]:
    counts: dict[str, int] = {}
    for symptoms, expected, rtol, atol in cases:
        for symptom in armed(symptoms, torch.as_tensor(expected, dtype=torch.float64), rtol=rtol, atol=atol):
            counts[symptom.misconception.name] = counts.get(symptom.misconception.name, 0) + 1
    return counts


# ------------------------------------------------------------------------------------------ Part B2


@pytest.mark.parametrize("seed", SEEDS)
def test_every_byte_mistake_shows_in_two_cases_and_the_prediction_is_the_measurement(seed):
    cases = []
    for model, n, described in memory._bytes_cases(seed):
        inputs = torch.randn(n, model[0].in_features, dtype=model[0].weight.dtype)
        assert memory.predicted(model, n) == memory.measured_bytes(model, inputs), described
        cases.append((memory.symptoms(model, n), float(memory.predicted(model, n)), 0.0, 0.5))
    counts = _armed_counts(cases)
    for mistake in memory.MISTAKES:
        assert counts.get(mistake.name, 0) >= 2, (seed, mistake.name, counts)


def test_what_each_layer_saves():
    """The facts Part B2 is built on (PyTorch 2.13, CPU): ReLU and in-place LeakyReLU save their output, GELU and
    LeakyReLU their input, dropout a mask in the activations' dtype, LayerNorm its input and two (n, 1) statistics."""
    x = torch.randn(4, 3, dtype=torch.float64)
    assert memory.saved_by(nn.ReLU(), x) == ["the output: shape (4, 3), float64, 96 bytes"]
    assert memory.saved_by(nn.LeakyReLU(inplace=True), x) == [
        "the output, written over the input (in place): shape (4, 3), float64, 96 bytes"]
    assert memory.saved_by(nn.LeakyReLU(), x) == ["the input: shape (4, 3), float64, 96 bytes"]
    assert memory.saved_by(nn.GELU(), x) == ["the input: shape (4, 3), float64, 96 bytes"]
    assert memory.saved_by(nn.Dropout(0.5), x) == ["another tensor: shape (4, 3), float64, 96 bytes"]
    assert memory.saved_by(nn.Dropout(0.5).eval(), x) == []
    norm = memory.saved_by(nn.LayerNorm(3, dtype=torch.float64), x)
    assert sorted(line for line in norm if not line.startswith("the parameter")) == [
        "another tensor: shape (4, 1), float64, 32 bytes", "another tensor: shape (4, 1), float64, 32 bytes",
        "the input: shape (4, 3), float64, 96 bytes"]
    hinted = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 1))
    assert memory.measured_bytes(hinted, torch.randn(2, 3)) == 104  # Part B2's second hint


def test_the_prediction_may_not_run_the_model():
    from autograder.checking import GradingFailure

    def measured(model, n):
        return memory.measured_bytes(model, torch.zeros(n, model[0].in_features, dtype=model[0].weight.dtype))

    with pytest.raises(GradingFailure, match="measured instead of predicting"):
        memory.check_predicted_bytes(measured)


# ------------------------------------------------------------------------------------------ Part C1


@pytest.mark.parametrize("seed", SEEDS[:20])
def test_every_pipeline_keeps_the_promise_and_shows_every_mistake(seed):
    """At every seed: each kind shows sound and broken in the first two pipelines (the straight-through sort among
    the broken ones, so a plain sum misses it; one stage that records no graph in each pipeline, and an inference
    tensor handed on; a broken clip that agrees with central differences at the pipeline's inputs, only not at its
    own); every pipeline starts and ends with a sound stage; the tests' own locator names exactly the
    broken stages; and on fresh random weightings a broken stage is off by more than 1 % of its gradient's largest
    entry and a sound one agrees within 1e-6, as the part promises."""
    cases = list(cuts._cases(seed))
    assert len(cases) == cuts.CASES
    shown = {(name, name in expected) for stages, _, expected in cases[:2] for name, _ in stages}
    assert shown == {(kind, broken) for kind in cuts.KINDS for broken in (True, False)}
    assert any("sort" in expected for _, _, expected in cases[:2])
    gen = torch.Generator().manual_seed(1000 + (seed or 0))
    handed_inference = False
    for stages, inputs, expected in cases:
        names = [name for name, _ in stages]
        assert 5 <= len(names) <= 9 and len(set(names)) == len(names)
        assert names[0] not in expected and names[-1] not in expected
        assert any(name in cuts.NO_GRAPH for name in expected)
        assert cuts.reference_find_cuts(stages, inputs) == expected
        values = inputs
        for name, stage in stages:
            handed_inference |= values.is_inference()
            with torch.no_grad():
                output = stage(values)
            for _ in range(3):
                weights = torch.rand(output.shape, generator=gen, dtype=torch.float64) * 2 - 1
                recorded, differences = cuts.stage_gradients(stage, values, weights)
                gap = ((recorded - differences).abs().max() / differences.abs().max()).item()
                assert (gap > 0.01) if name in expected else (gap < 1e-6), (name, gap)
            values = output
    assert handed_inference
    # a locator that measures every stage at the pipeline's inputs misses a broken clip that serve feeds
    assert [cuts._at_the_start(stages, inputs) != expected for stages, inputs, expected in cases] == [
        "clip" in expected for _, _, expected in cases]


def test_the_team_pipelines_keep_the_promise_too():
    for seed in range(10):
        stages, inputs = cuts.team_pipeline(seed)
        found = cuts.reference_find_cuts(stages, inputs)
        assert 2 <= len(found) <= 4 and stages[0][0] not in found and stages[-1][0] not in found


# ------------------------------------------------------------------------------------------ Part C2


@pytest.mark.parametrize("seed", SEEDS)
def test_every_serving_mistake_shows_in_two_requests(seed):
    """Every stream has two requests on which a float32 limit changes the clipped scores and padding to 16 rows
    changes the fraction, and the stream's shape is the text's: three requests of one size first (only the limit
    changes), then a single row, a full batch and two more sizes."""
    cases = []
    for model, stream in part_c2._cases(seed):
        sizes = [inputs.shape[0] for inputs, _ in stream]
        assert sizes[0] == sizes[1] == sizes[2] and 5 <= sizes[0] < part_c2.MAX_BATCH
        assert min(sizes[3:]) == 1 and max(sizes) == part_c2.MAX_BATCH
        assert len({limit for _, limit in stream}) == len(stream) == 7
        for inputs, limit in stream:
            with torch.no_grad():
                scores = model(inputs).squeeze(1)
                rounded = torch.tensor(limit, dtype=torch.float32).item()
                padded = torch.cat([scores, model(inputs.new_zeros(16 - len(scores), inputs.shape[1])).squeeze(1)])
            cases.append(([misconceptions.LIMIT_FLOAT32.looks_like(scores.clamp(-rounded, rounded), rtol=1e-13,
                                                                   atol=1e-15)], scores.clamp(-limit, limit), 1e-12,
                          1e-15))
            if len(scores) < part_c2.MAX_BATCH:
                fraction = (scores.abs() > limit).double().mean()
                cases.append(([misconceptions.PADDING_COUNTED.looks_like((scores.abs() > limit).double().sum() / 16,
                                                                         rtol=1e-6, atol=1e-12),
                               misconceptions.PADDING_COUNTED.looks_like((padded.abs() > limit).double().mean(),
                                                                         rtol=1e-6, atol=1e-12)],
                              fraction, 1e-6, 1e-12))
    counts = _armed_counts(cases)
    for mistake in (misconceptions.LIMIT_FLOAT32, misconceptions.PADDING_COUNTED):
        assert counts.get(mistake.name, 0) >= 2, (seed, mistake.name, counts)


def test_the_lesson_way_recompiles_and_the_reference_compiles_once():
    """The given function compiled as in the lesson gets a graph at the limit-only request, at the new batch size and
    at the single row; the reference's server compiles one graph, holding the model's Linear layers."""
    model, stream = next(part_c2._cases(None))

    def clipped_scores(model, inputs, limit):
        scores = model(inputs).squeeze(1)
        return scores.clamp(-limit, limit), (scores.abs() > limit).to(scores.dtype).mean()

    def serve_all(make_server):
        torch._dynamo.reset()
        counter = part_c2._Counter()
        serve = make_server(model, counter)
        with torch.no_grad():
            for request, (inputs, limit) in enumerate(stream):
                counter.request = request
                serve(inputs, limit)
        torch._dynamo.reset()
        return counter

    def lesson(model, backend):
        compiled = torch.compile(clipped_scores, backend=backend, fullgraph=True)
        return lambda inputs, limit: compiled(model, inputs, limit)

    def reference(model, backend):
        compiled = torch.compile(clipped_scores, backend=backend, fullgraph=True, dynamic=True)

        def serve(inputs, limit):
            n = inputs.shape[0]
            clipped, fraction = compiled(model, torch.cat([inputs, inputs]) if n == 1 else inputs, limit)
            return clipped[:n], fraction

        return serve

    arrivals = [request for request, _ in serve_all(lesson).graphs]
    assert arrivals[:2] == [0, 1] and stream[arrivals[-1]][0].shape[0] in (1, part_c2.MAX_BATCH) and len(arrivals) >= 3
    graphs = serve_all(reference).graphs
    assert [request for request, _ in graphs] == [0] and part_c2._linears(graphs[0][1]) == 2
