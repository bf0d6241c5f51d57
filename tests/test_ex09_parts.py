"""Exercise 09, parts B and C: the cases of each check tell its mistakes apart at every seed, and the course's own
references (the byte prediction, the intended loss, the server that compiles once) agree with what they are checked
against.

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
from autograder.oracles import autograd_gradient, central_difference

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


def _buggy_without_inference_mode(student, teacher, temperature, inputs):
    """The notebook's buggy loss with inference_mode read as no_grad: its value is the intended loss's."""
    with torch.no_grad():
        target = cuts.standardised(teacher(inputs))
        prediction = cuts.standardised(student(inputs))
    scale = prediction.abs().max().item()
    return ((prediction / scale - temperature * target) ** 2).mean()


@pytest.mark.parametrize("seed", SEEDS[:20])
def test_the_intended_loss_is_the_buggy_value_and_its_oracles_agree(seed):
    """The value of the team's loss, once it runs, is the intended loss (the part says "the same value"); autograd
    and central differences agree on it; the constant-scale mistake differs from it in every case."""
    for student, teacher, temperature, inputs in cuts._cases(seed):
        with torch.no_grad():
            target = cuts.standardised(teacher(inputs))
        values = [p.detach() for p in student.parameters()] + [temperature.detach()]
        intended = cuts.intended_loss(student, target, inputs)
        torch.testing.assert_close(_buggy_without_inference_mode(student, teacher, temperature, inputs).detach(),
                                   intended(*values).detach(), rtol=1e-12, atol=0)
        auto = torch.cat([g.reshape(-1) for g in autograd_gradient(intended, *values)])
        fd = torch.cat([g.reshape(-1) for g in central_difference(intended, *values)])
        torch.testing.assert_close(auto, fd, rtol=1e-5, atol=1e-8)
        constant = torch.cat([g.reshape(-1) for g in autograd_gradient(
            cuts.intended_loss(student, target, inputs, constant_scale=True), *values)])
        assert armed([misconceptions.SCALE_CONSTANT.looks_like(constant)], auto, rtol=1e-6, atol=1e-9)


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
