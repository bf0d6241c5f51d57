"""Part B1: ``held_out_loss(model, inputs, targets)`` evaluates in the middle of training and leaves no trace: a
number computed in evaluation mode without recording a graph, the model's mode and the grad mode put back as they
were, also when the model raises (and the exception reaches the caller)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from ...checking import GradingFailure, call_learner, check, expect_close, proven_failure, trial
from ...contracts import counting_saved
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BROADCAST_LOSS,
    DROPOUT_ON,
    EVAL_MODE_LEFT,
    GRAD_MODE_FORCED,
    GRAD_MODE_LEFT,
    MODES_FLATTENED,
    NOT_A_NUMBER,
    NOT_RESTORED_ON_ERROR,
    RECORDED_GRAPH,
    ROOT_MEAN,
    SQUEEZED_AGAINST_COLUMN,
    STATS_UPDATED,
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
    frozen: bool = False  # the batch norm layer in the other mode than the rest of the model


#: Part B1's cases, at every seed: a batch of one with (1,) targets (where the broadcast (1, 1) - (1,) happens to give
#: the right answer) and with (1, 1) ones, the second model in evaluation mode; a caller inside no_grad; two batches the
#: model cannot take (in both modes and both grad modes); drawn batches of both target shapes; then two training
#: models whose batch norm is frozen in evaluation mode (fine-tuning), one of them given a batch it cannot take.
LOSS_CASES = (LossCase(True, True, False, n=1), LossCase(False, False, False, n=1), LossCase(True, False, True),
              LossCase(True, True, False, breaks=True), LossCase(False, False, True, breaks=True),
              LossCase(True, True, False), LossCase(True, False, False), LossCase(False, True, False),
              LossCase(True, False, False, frozen=True), LossCase(True, True, False, breaks=True, frozen=True),
              LossCase(True, True, False, frozen=True))


def _model(gen: torch.Generator, d: int, width: int) -> nn.Sequential:
    """A float64 regression MLP with batch norm and dropout, weights uniform in [-1, 1), running statistics drawn
    (means in [-1, 1), variances in [0.5, 2), 3 to 20 batches tracked)."""
    p = float(uniform(gen, (), 0.3, 0.6))
    model = nn.Sequential(nn.Linear(d, width, dtype=torch.float64), nn.BatchNorm1d(width, dtype=torch.float64),
                          nn.Tanh(), nn.Dropout(p), nn.Linear(width, 1, dtype=torch.float64))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(uniform(gen, tuple(parameter.shape), -1.0, 1.0))
        norm = model[1]
        norm.running_mean.copy_(uniform(gen, (width,), -1.0, 1.0))
        norm.running_var.copy_(uniform(gen, (width,), 0.5, 2.0))
        norm.num_batches_tracked.fill_(randint(gen, 3, 20))
    return model


def _loss_cases(grading_seed: int | None):
    """(case, model, inputs, targets) for every entry of :data:`LOSS_CASES`."""
    gen = case_stream("09/held_out_loss", grading_seed)
    for case in LOSS_CASES:
        d, width, n = randint(gen, 1, 4), randint(gen, 3, 6), case.n or randint(gen, 6, 12)
        model = _model(gen, d, width).train(case.training)
        if case.frozen:
            model[1].train(not case.training)
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


def _flags(modes: list[bool]) -> str:
    return "[" + ", ".join("T" if mode else "F" for mode in modes) + "]"


def _statistics(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: buffer.clone() for name, buffer in model.named_buffers()}


def _expect_statistics(model: nn.Module, before: dict[str, torch.Tensor], what: str) -> None:
    """Fail unless the batch norm's buffers are as they were (an evaluation in training mode updates them)."""
    __tracebackhide__ = True
    changed = [name for name, buffer in model.named_buffers() if not torch.equal(buffer, before[name])]
    if changed:
        tracked = dict(model.named_buffers())["1.num_batches_tracked"]
        raise proven_failure(f"{what} changed the model's buffers {changed}: num_batches_tracked went from "
                             f"{int(before['1.num_batches_tracked'])} to {int(tracked)}.", STATS_UPDATED)


def _dropout_watch(model: nn.Module) -> tuple[list[bool], list]:
    """Hooks that note whether each dropout or batch norm layer ran in training mode."""
    seen: list[bool] = []
    hooks = [module.register_forward_pre_hook(lambda module, args: seen.append(module.training))
             for module in model.modules() if isinstance(module, (nn.Dropout, nn.BatchNorm1d))]
    return seen, hooks


def _expect_restored(model: nn.Module, modes: list[bool], recording: bool, what: str, *, raised: bool) -> None:
    """Fail unless every module's training flag and the grad mode are as they were before the call."""
    __tracebackhide__ = True
    now = torch.is_grad_enabled()
    if now != recording:
        mistake = NOT_RESTORED_ON_ERROR if raised else GRAD_MODE_LEFT if recording else GRAD_MODE_FORCED
        raise proven_failure(f"{what} {'raised, and ' if raised else ''}left autograd's recording "
                             f"{'on' if now else 'off'} (it was {'on' if recording else 'off'} when called).", mistake)
    now = _modes(model)
    if now != modes:
        if len(set(modes)) > 1 and now == [modes[0]] * len(now):
            raise proven_failure(f"{what} {'raised, and ' if raised else ''}left every module's training flag "
                                 f"{modes[0]}; it came in with the model {modes[0]} but its batch norm layer "
                                 f"{not modes[0]}: {_flags(modes)} became {_flags(now)}.", MODES_FLATTENED)
        mistake = NOT_RESTORED_ON_ERROR if raised else EVAL_MODE_LEFT if modes[0] else TRAIN_MODE_FORCED
        raise proven_failure(f"{what} {'raised, and ' if raised else ''}left model.training {model.training} (it was "
                             f"{modes[0]}; every module's flag: {_flags(modes)} became {_flags(now)}): the caller's "
                             "model is no longer in the mode it was in.", mistake)


def _call(held_out_loss, model, inputs, targets, what: str, *, breaks: bool):
    """Call the learner: (the answer, or what it raised on a batch the model cannot take; whether a dropout or batch
    norm layer ran in training mode; the tensors saved for backward). A change of the batch norm's buffers, and a
    batch norm that refused a batch of one in training mode, are named as such."""
    __tracebackhide__ = True
    saved: list = []
    seen, hooks = _dropout_watch(model)
    before = _statistics(model)
    try:
        answer = call_learner(counting_saved(_raising(held_out_loss) if breaks else held_out_loss, saved), model,
                              inputs, targets, what=what)
    except GradingFailure as failure:
        _expect_statistics(model, before, what)
        if any(seen) and isinstance(failure.raised, ValueError):
            raise proven_failure(f"{failure.message}\n(its batch norm layer ran in training mode, where it needs more "
                                 "than one example to compute the batch's statistics)", DROPOUT_ON) from None
        raise
    finally:
        for hook in hooks:
            hook.remove()
    _expect_statistics(model, before, what)
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
    modes = {module: module.training for module in model.modules()}
    with torch.no_grad():
        predictions = model.eval()(inputs)
    for module, training in modes.items():
        module.training = training
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

    Domain: ``model`` a float64 MLP (Linear, BatchNorm1d with drawn running statistics, Tanh, Dropout with p in
    [0.3, 0.6), Linear) from d inputs to one output, parameters that require grad, in training or evaluation mode, or
    in training mode with its batch norm frozen in evaluation mode; ``inputs`` float64 of shape (n, d), 1 <= d <= 4,
    values in [-2, 2), or (n, d + 1) for a batch the model cannot take (its first Linear raises a RuntimeError);
    ``targets`` float64 (n,) or (n, 1) in [-2, 2); n = 1 (pinned, both target shapes) or 6 to 12. Called with
    recording on, or inside torch.no_grad(). Corners at every seed: see :data:`LOSS_CASES`.
    Contracts checked: a Python float (a tensor, even 0-d, is named); every dropout and batch norm layer in evaluation
    mode while the model runs (forward pre-hooks); the batch norm's buffers unchanged (named); no tensor saved for
    backward while it runs (saved-tensor hooks); the arguments unchanged (values, requires_grad, .grad, versions:
    call_learner); every module's training flag and the grad mode as before, after a return and after a raise (one flag
    for all, where they differed, is named); the model's RuntimeError propagated. Both broadcasts are named where they
    differ from the answer.
    """
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
