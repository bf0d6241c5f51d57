"""Part B1: ``held_out_loss(model, inputs, targets)`` evaluates in the middle of training and leaves no trace: a
number computed in evaluation mode without recording a graph, the model's mode and the grad mode put back as they
were, also when the model raises (and the exception reaches the caller)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from ...checking import call_learner, check, expect_close, proven_failure, trial
from ...contracts import counting_saved
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BROADCAST_LOSS,
    DROPOUT_ON,
    EVAL_MODE_LEFT,
    GRAD_MODE_FORCED,
    GRAD_MODE_LEFT,
    NOT_A_NUMBER,
    NOT_RESTORED_ON_ERROR,
    RECORDED_GRAPH,
    ROOT_MEAN,
    SQUEEZED_AGAINST_COLUMN,
    SUM_NOT_MEAN,
    SWALLOWED_ERROR,
    TRAIN_MODE_FORCED,
)


@dataclass(frozen=True)
class LossCase:
    """One fixed case of Part B1 (sizes and values are drawn)."""

    training: bool  # the model comes in training mode (else evaluation mode)
    flat: bool  # targets shaped (n,) rather than (n, 1)
    no_grad: bool  # the caller has recording off
    breaks: bool = False  # the inputs have one feature too many: the model raises
    n: int | None = None  # batch size (None: 6 to 12, drawn)


#: Part B1's cases, at every seed: a batch of one with (1,) targets (where the broadcast (1, 1) - (1,) happens to give
#: the right answer) and with (1, 1) ones, the second model in evaluation mode; a caller inside no_grad; two batches the
#: model cannot take (in both modes and both grad modes); then drawn batches of both target shapes.
LOSS_CASES = (LossCase(True, True, False, n=1), LossCase(False, False, False, n=1), LossCase(True, False, True),
              LossCase(True, True, False, breaks=True), LossCase(False, False, True, breaks=True),
              LossCase(True, True, False), LossCase(True, False, False), LossCase(False, True, False))


def _model(gen: torch.Generator, d: int, width: int) -> nn.Sequential:
    """A float64 regression MLP with dropout, weights uniform in [-1, 1)."""
    p = float(uniform(gen, (), 0.3, 0.6))
    model = nn.Sequential(nn.Linear(d, width, dtype=torch.float64), nn.Tanh(), nn.Dropout(p),
                          nn.Linear(width, 1, dtype=torch.float64))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(uniform(gen, tuple(parameter.shape), -1.0, 1.0))
    return model


def _loss_cases(grading_seed: int | None):
    """(case, model, inputs, targets) for every entry of :data:`LOSS_CASES`."""
    gen = case_stream("09/held_out_loss", grading_seed)
    for case in LOSS_CASES:
        d, width, n = randint(gen, 1, 4), randint(gen, 3, 6), case.n or randint(gen, 6, 12)
        model = _model(gen, d, width).train(case.training)
        inputs = uniform(gen, (n, d + 1 if case.breaks else d))
        targets = uniform(gen, (n,) if case.flat else (n, 1))
        yield case, model, inputs, targets


def _raising(held_out_loss):
    """``held_out_loss``, returning what it raised (None if it returned) rather than raising it."""
    def call(model, inputs, targets):
        try:
            held_out_loss(model, inputs, targets)
        except NotImplementedError:
            raise
        except Exception as error:  # the model's own error, expected to come through
            return error
        return None

    return call


def _modes(model: nn.Module) -> list[bool]:
    return [module.training for module in model.modules()]


def _dropout_watch(model: nn.Module) -> tuple[list[bool], list]:
    """Hooks that note whether each dropout layer ran in training mode."""
    seen: list[bool] = []
    hooks = [module.register_forward_pre_hook(lambda module, args: seen.append(module.training))
             for module in model.modules() if isinstance(module, nn.Dropout)]
    return seen, hooks


def _expect_restored(model: nn.Module, modes: list[bool], recording: bool, what: str, *, raised: bool) -> None:
    """Fail unless every module's training flag and the grad mode are as they were before the call."""
    __tracebackhide__ = True
    now = torch.is_grad_enabled()
    if now != recording:
        mistake = NOT_RESTORED_ON_ERROR if raised else GRAD_MODE_LEFT if recording else GRAD_MODE_FORCED
        raise proven_failure(f"{what} {'raised, and ' if raised else ''}left autograd's recording "
                             f"{'on' if now else 'off'} (it was {'on' if recording else 'off'} when called).", mistake)
    if _modes(model) != modes:
        mistake = NOT_RESTORED_ON_ERROR if raised else EVAL_MODE_LEFT if modes[0] else TRAIN_MODE_FORCED
        raise proven_failure(f"{what} {'raised, and ' if raised else ''}left model.training {model.training} (it was "
                             f"{modes[0]}): the caller's model is no longer in the mode it was in.", mistake)


def _call(held_out_loss, model, inputs, targets, what: str, *, breaks: bool):
    """Call the learner: (the answer, or what it raised on a batch the model cannot take; whether a dropout layer ran
    in training mode; the tensors saved for backward)."""
    __tracebackhide__ = True
    saved: list = []
    seen, hooks = _dropout_watch(model)
    try:
        answer = call_learner(counting_saved(_raising(held_out_loss) if breaks else held_out_loss, saved), model,
                              inputs, targets, what=what)
    finally:
        for hook in hooks:
            hook.remove()
    return answer, any(seen), saved


def _judge_error(error, what: str) -> None:
    """A batch the model cannot take: its RuntimeError must reach the caller."""
    __tracebackhide__ = True
    if error is None:
        raise proven_failure(f"{what} returned normally, but the model raises on these inputs (one feature too many): "
                             "the caller never learns that the batch was wrong.", SWALLOWED_ERROR)
    if not isinstance(error, RuntimeError):
        raise proven_failure(f"{what} raised {type(error).__name__}: {error}; the model itself raises a RuntimeError "
                             "on these inputs, and the caller should see it.", SWALLOWED_ERROR)


def _judge_value(answer, dropout_on: bool, saved: list, model, inputs, targets, what: str) -> None:
    __tracebackhide__ = True
    if dropout_on:
        raise proven_failure(f"{what} ran the model's dropout in training mode: the loss it returned is one random "
                             "draw of dropped activations.", DROPOUT_ON)
    if saved:
        raise proven_failure(f"{what} recorded a graph: autograd saved {len(saved)} tensor(s) for backward while it "
                             "ran.", RECORDED_GRAPH)
    if isinstance(answer, torch.Tensor) or not isinstance(answer, float):
        raise proven_failure(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a Python float.",
                             NOT_A_NUMBER)
    training = model.training
    with torch.no_grad():
        predictions = model.eval()(inputs)
    model.train(training)
    errors = (predictions.reshape(-1) - targets.reshape(-1)) ** 2
    pairwise = ((predictions - targets.reshape(1, -1)) ** 2).mean()  # every prediction minus every target
    # the pairwise mean can lie within 1e-4 of the answer: told apart at the check's own tolerance
    symptoms = [SUM_NOT_MEAN.looks_like(errors.sum()), ROOT_MEAN.looks_like(errors.mean().sqrt()),
                (BROADCAST_LOSS if targets.dim() == 1 else SQUEEZED_AGAINST_COLUMN).looks_like(pairwise, rtol=1e-8,
                                                                                             atol=1e-12)]
    expect_close(answer, errors.mean(), what=what, source="expected", rtol=1e-9, atol=1e-12, symptoms=symptoms)


@check
def check_held_out_loss(held_out_loss, grading_seed: int | None = None) -> None:
    """Part B1: held_out_loss(model, inputs, targets) is the mean squared error of model(inputs) in evaluation mode
    against targets ((n,) or (n, 1)), as a Python float, computed without recording a graph; the model's mode (every
    module's training flag) and the grad mode are as they were when it returns, and when the model raises, the
    exception reaches the caller with both put back.

    Domain: ``model`` a float64 MLP (Linear, Tanh, Dropout with p in [0.3, 0.6), Linear) from d inputs to one output,
    parameters that require grad, in training or evaluation mode; ``inputs`` float64 of shape (n, d), 1 <= d <= 4,
    values in [-2, 2), or (n, d + 1) for a batch the model cannot take (its first Linear raises a RuntimeError);
    ``targets`` float64 (n,) or (n, 1) in [-2, 2); n = 1 (pinned, both target shapes) or 6 to 12. Called with
    recording on, or inside torch.no_grad(). Corners at every seed: see :data:`LOSS_CASES`.
    Contracts checked: a Python float (a tensor, even 0-d, is named); every dropout layer in evaluation mode while the
    model runs (forward pre-hooks); no tensor saved for backward while it runs (saved-tensor hooks); the arguments
    unchanged (values, requires_grad, .grad, versions: call_learner); every module's training flag and the grad mode
    as before, after a return and after a raise; the model's RuntimeError propagated. Both broadcasts are named where
    they differ from the answer."""
    __tracebackhide__ = True
    for case, model, inputs, targets in _loss_cases(grading_seed):
        with trial():
            n, d = inputs.shape
            mode = "training" if case.training else "evaluation"
            caller = ", called inside torch.no_grad()" if case.no_grad else ""
            what = (f"held_out_loss(model in {mode} mode, inputs of shape {(n, d)}, targets of shape "
                    f"{tuple(targets.shape)}){caller}")
            modes, recording = _modes(model), not case.no_grad
            try:
                with torch.no_grad() if case.no_grad else contextlib.nullcontext():
                    answer, dropout_on, saved = _call(held_out_loss, model, inputs, targets, what, breaks=case.breaks)
                    _expect_restored(model, modes, recording, what, raised=case.breaks and answer is not None)
            finally:
                torch.set_grad_enabled(True)
            if case.breaks:
                _judge_error(answer, what)
            else:
                _judge_value(answer, dropout_on, saved, model, inputs, targets, what)
