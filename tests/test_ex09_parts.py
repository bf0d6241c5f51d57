"""Exercise 09, parts B and C: the cases of each check tell its mistakes apart at every seed, and the course's own
references (the byte prediction, the intended loss, the clipped scores) agree with what they are checked against.

A mistake is named only when two cases agree on it, so each part's fixed cases are built (and drawn again) until every
mistake the catalogue names shows, with a value of its own, in at least two of them, at every grading seed.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autograder.checks.ex09_wider_system import breaks as part_c2
from autograder.checks.ex09_wider_system import cuts, evaluation, memory, misconceptions
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


# ------------------------------------------------------------------------------------------ Part B1


@pytest.mark.parametrize("seed", SEEDS)
def test_every_held_out_loss_mistake_shows_in_two_cases(seed):
    cases = []
    for case, model, inputs, targets in evaluation._loss_cases(seed):
        if case.breaks:
            with pytest.raises(RuntimeError):
                model(inputs)
            continue
        with torch.no_grad():
            predictions = model.eval()(inputs)
        errors = (predictions.reshape(-1) - targets.reshape(-1)) ** 2
        pairwise = ((predictions - targets.reshape(1, -1)) ** 2).mean()
        broadcast = misconceptions.BROADCAST_LOSS if targets.dim() == 1 else misconceptions.SQUEEZED_AGAINST_COLUMN
        symptoms = [misconceptions.SUM_NOT_MEAN.looks_like(errors.sum()),
                    misconceptions.ROOT_MEAN.looks_like(errors.mean().sqrt()),
                    broadcast.looks_like(pairwise, rtol=1e-8, atol=1e-12)]
        cases.append((symptoms, errors.mean(), 1e-9, 1e-12))
    counts = _armed_counts(cases)
    for mistake in (misconceptions.SUM_NOT_MEAN, misconceptions.ROOT_MEAN, misconceptions.BROADCAST_LOSS,
                    misconceptions.SQUEEZED_AGAINST_COLUMN):
        assert counts.get(mistake.name, 0) >= 2, (seed, mistake.name, counts)


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
def test_every_clipping_mistake_shows_in_two_cases(seed):
    cases = []
    for model, inputs, limit in part_c2._cases(seed):
        with torch.no_grad():
            scores = model(inputs).squeeze(1)
        assert ((scores.abs() - limit).abs() > part_c2.KINK_GAP).all()
        expected = scores.clamp(-limit, limit)
        cases.append(([misconceptions.FLOAT32_REBUILT.looks_like(expected.float(), rtol=1e-12, atol=1e-15),
                       misconceptions.FIXED_LIMIT.looks_like(scores.clamp(-3.0, 3.0), rtol=1e-12, atol=1e-15),
                       misconceptions.ONE_SIDED.looks_like(scores.clamp(max=limit), rtol=1e-12, atol=1e-15)],
                      expected, 1e-12, 1e-15))
    counts = _armed_counts(cases)
    for mistake in (misconceptions.FLOAT32_REBUILT, misconceptions.FIXED_LIMIT, misconceptions.ONE_SIDED):
        assert counts.get(mistake.name, 0) >= 2, (seed, mistake.name, counts)


def test_the_serving_code_breaks_and_the_reference_compiles():
    """The notebook's clipped_scores gives the clipped values in float32 and is refused by fullgraph=True; the clamp
    version compiles as one graph."""
    import torch._dynamo

    model, inputs, limit = next(part_c2._cases(None))

    def clipped_scores(model, inputs, limit):
        scores = model(inputs).squeeze(1)
        clipped = torch.tensor([max(-limit, min(limit, score)) for score in scores.tolist()])
        fraction = sum(abs(score) > limit for score in scores.tolist()) / len(clipped)
        if fraction > 0.5:
            print(f"warning: {fraction:.0%} of the scores needed clipping")
        return clipped, fraction

    refusal = part_c2._compiled(clipped_scores)(model, inputs, limit)
    assert isinstance(refusal, torch._dynamo.exc.Unsupported)
    clipped, _ = clipped_scores(model, inputs, limit)
    assert clipped.dtype == torch.float32

    def one_graph(model, inputs, limit):
        scores = model(inputs).squeeze(1)
        return scores.clamp(-limit, limit), (scores.abs() > limit).double().mean()

    clipped, fraction = part_c2._compiled(one_graph)(model, inputs, limit)
    assert clipped.requires_grad and fraction.dim() == 0
