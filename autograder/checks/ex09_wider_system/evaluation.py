"""Part B1: ``evaluating(model)``, a context manager for an evaluation in the middle of a training step: inside the
block every module is in evaluation mode and nothing is recorded; when the block ends, by its end or by an exception
(which reaches the caller), every module's own mode and the grad mode are back, and the model's parameters, buffers
(values and version counters), ``requires_grad`` flags and pending ``.grad`` are as they were, so that the training
step's pending backward runs and gives the gradients it gives without the evaluation."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import torch
from torch import nn

from ...checking import GradingFailure, call_learner, check, proven_failure, trial
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    DROPOUT_ON,
    EVAL_MODE_LEFT,
    GRAD_MODE_FORCED,
    GRAD_MODE_LEFT,
    GRADS_TOUCHED,
    INFERENCE_OUTPUTS,
    MODES_FLATTENED,
    NESTED_STATE,
    NOT_RESTORED_ON_ERROR,
    RECORDED_GRAPH,
    SELF_CALIBRATED,
    SOME_MODULES_EVAL,
    STATS_UPDATED,
    SWALLOWED_ERROR,
    TRAIN_MODE_FORCED,
    UNFROZE,
    WRITTEN_BACK,
)


@dataclass(frozen=True)
class LossCase:
    """One fixed case of Part B1 (sizes and values are drawn)."""

    training: bool  # the model comes in training mode (else evaluation mode)
    flat: bool  # held-out targets shaped (n,) rather than (n, 1)
    no_grad: bool  # the caller has recording off around the block
    breaks: bool = False  # the held-out batch has one feature too many: the block raises
    n: int | None = None  # held-out batch size (None: 6 to 12, drawn)
    frozen: bool = False  # the batch norm layer in the other mode than the rest of the model
    frozen_linear: bool = False  # the first Linear's parameters do not require grad (a frozen layer)
    nested: bool = False  # the block holds a second evaluating(model) block
    calibrating: bool = False  # the model ends in a SelfCalibrating layer (it writes its buffer in every mode)


#: Part B1's cases, at every seed: a training model evaluated on a batch of one (batch norm in training mode refuses
#: it); a model in evaluation mode; a caller inside no_grad; two blocks that raise (in both modes and both grad modes);
#: drawn batches, one with the first Linear frozen and one with a nested block; then three training models whose batch
#: norm is frozen in evaluation mode (fine-tuning), one block raising, one nested with a frozen first Linear; last,
#: two models ending in a SelfCalibrating layer (one training; one in evaluation mode, nested, inside no_grad).
LOSS_CASES = (LossCase(True, True, False, n=1), LossCase(False, False, False, n=1), LossCase(True, False, True),
              LossCase(True, True, False, breaks=True), LossCase(False, False, True, breaks=True),
              LossCase(True, True, False, frozen_linear=True), LossCase(True, False, False, nested=True),
              LossCase(False, True, False), LossCase(True, False, False, frozen=True),
              LossCase(True, True, False, breaks=True, frozen=True),
              LossCase(True, True, False, frozen=True, frozen_linear=True, nested=True),
              LossCase(True, False, False, calibrating=True),
              LossCase(False, True, True, calibrating=True, nested=True))


class SelfCalibrating(nn.Module):
    """Divides its input by a scale it recalibrates on every batch, in training and in evaluation mode alike (a
    buffer written in place before it is used, so a recorded forward pass saves it)."""

    def __init__(self, width: int, dtype=torch.float64):
        super().__init__()
        self.register_buffer("scale", torch.ones(width, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.scale.mul_(0.9).add_(0.1 * (x.abs().mean(0) + 0.5))
        return x / self.scale


def _model(gen: torch.Generator, d: int, width: int, calibrating: bool = False) -> nn.Sequential:
    """A float64 regression MLP with batch norm and dropout, weights uniform in [-1, 1), running statistics drawn
    (means in [-1, 1), variances in [0.5, 2), 3 to 20 batches tracked); ending in a SelfCalibrating layer if asked."""
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
    if calibrating:
        model.append(SelfCalibrating(1))
    return model


def _loss_cases(grading_seed: int | None):
    """(case, model, inputs, targets) for every entry of :data:`LOSS_CASES`: the model, and the held-out batch the
    block evaluates (one feature too wide where the case breaks)."""
    gen = case_stream("09/held_out_loss", grading_seed)
    for case in LOSS_CASES:
        d, width, n = randint(gen, 1, 4), randint(gen, 3, 6), case.n or randint(gen, 6, 12)
        model = _model(gen, d, width, case.calibrating).train(case.training)
        if case.frozen:
            model[1].train(not case.training)
        inputs = uniform(gen, (n, d + 1 if case.breaks else d))
        targets = uniform(gen, (n,) if case.flat else (n, 1))
        yield case, model, inputs, targets


@dataclass
class Step:
    """A training step with gradient accumulation, stopped between its second forward pass and its backward."""

    model: nn.Module
    loss: torch.Tensor
    seeds: tuple[int, int]
    batches: list = field(default_factory=list)


def _forward(model: nn.Module, inputs, targets, seed: int) -> torch.Tensor:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ((model(inputs).reshape(-1) - targets) ** 2).mean()


def _start_step(model: nn.Module, gen: torch.Generator) -> Step:
    """Two micro-batches: the first one's backward already ran (its gradients wait in .grad), the second one's graph
    is pending."""
    d = model[0].in_features
    sizes = (randint(gen, 6, 12), randint(gen, 6, 12))
    batches = [(uniform(gen, (m, d)), uniform(gen, (m,))) for m in sizes]
    seeds = (randint(gen, 0, 10_000), randint(gen, 0, 10_000))
    _forward(model, *batches[0], seeds[0]).backward()
    return Step(model, _forward(model, *batches[1], seeds[1]), seeds, batches)


def _finish_twin(twin: nn.Module, step: Step) -> nn.Module:
    """The same step on a copy of the model, with no evaluation in it: the gradients to expect."""
    _forward(twin, *step.batches[0], step.seeds[0]).backward()
    _forward(twin, *step.batches[1], step.seeds[1]).backward()
    return twin


def _modes(model: nn.Module) -> list[bool]:
    return [module.training for module in model.modules()]


def _flags(modes: list[bool]) -> str:
    return "[" + ", ".join("T" if mode else "F" for mode in modes) + "]"


@dataclass
class Seen:
    """What the test's block saw: the training flags dropout and batch norm ran with, those every other module ran
    with (by type), the tensors saved for backward, the outputs, the modes when the (outer) block began and after an
    inner block, and the exception that left the block."""

    flags: list[bool] = field(default_factory=list)
    others: list[tuple[str, bool]] = field(default_factory=list)
    entered: list[bool] | None = None
    modes: list[bool] = field(default_factory=list)  # every module's flag before the block
    saved: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    inner: tuple | None = None
    raised: BaseException | None = None
    escaped: BaseException | None = None


def _forward_watched(model: nn.Module, inputs: torch.Tensor, seen: Seen) -> None:
    def watch(module, args):
        if isinstance(module, (nn.Dropout, nn.BatchNorm1d)):
            seen.flags.append(module.training)
        else:
            seen.others.append((type(module).__name__, module.training))

    hooks = [module.register_forward_pre_hook(watch) for module in model.modules()]
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.saved.append(tuple(t.shape)) or t, lambda t: t):
            seen.outputs.append(model(inputs))
    except RuntimeError as error:  # the batch one feature too wide: the test's own exception, inside the block
        seen.raised = error
        raise
    finally:
        for hook in hooks:
            hook.remove()


def _block(evaluating, model: nn.Module, inputs: torch.Tensor, case: LossCase, seen: Seen):
    """The test's use of the learner's manager: a held-out forward pass inside ``with evaluating(model):`` (a second
    block inside the first where the case nests); the block's own exception is caught here, after it left the
    manager."""
    def run():
        manager = evaluating(model)
        if not (hasattr(manager, "__enter__") and hasattr(manager, "__exit__")):
            raise GradingFailure(f"evaluating(model) returned {type(manager).__name__} {manager!r:.60}, not a context "
                                 "manager: the test uses it as `with evaluating(model):`.")
        try:
            with manager:
                seen.entered = _modes(model)
                if case.nested:
                    with evaluating(model):
                        _forward_watched(model, inputs, seen)
                    seen.inner = (_modes(model), torch.is_grad_enabled())
                _forward_watched(model, inputs, seen)
        except RuntimeError as error:
            if error is not seen.raised:
                raise
            seen.escaped = error

    return run


def _expect_inside(seen: Seen, what: str) -> None:
    """Inside the block: dropout and batch norm in evaluation mode, nothing saved, outputs that are ordinary tensors;
    after an inner block, the outer one still in force."""
    __tracebackhide__ = True
    if any(seen.flags):
        raise proven_failure(f"{what}: inside the block, dropout or batch norm ran in training mode "
                             f"({sum(seen.flags)} of {len(seen.flags)} such layer calls).", DROPOUT_ON)
    trained = list(dict.fromkeys(name for name, training in seen.others if training))
    if trained:
        raise proven_failure(f"{what}: inside the block, dropout and batch norm ran in evaluation mode, but "
                             f"{', '.join(trained)} ran with the training flag on (every module's flag when the "
                             f"block began: {_flags(seen.entered or [])}).", SOME_MODULES_EVAL)
    if seen.saved:
        raise proven_failure(f"{what}: inside the block, autograd saved {len(seen.saved)} tensor(s) for backward "
                             f"(shapes {seen.saved[:3]}) during the held-out forward pass.", RECORDED_GRAPH)
    if seen.inner is not None and seen.inner[1]:
        raise proven_failure(f"{what}: after the inner `with evaluating(model):` ended, the outer block was still "
                             "running, but autograd's recording was on again.", GRAD_MODE_FORCED)
    if seen.inner is not None and seen.inner[0] != seen.entered:
        message = (f"{what}: the outer block set the modules' flags to {_flags(seen.entered or [])}; after the inner "
                   f"`with evaluating(model):` ended, with the outer block still running, they were "
                   f"{_flags(seen.inner[0])}.")
        if seen.inner[0] == seen.modes:  # the inner block put back what the outer one found: one memory for both
            raise proven_failure(message + " Those are the flags the model came in with, before the outer block.",
                                 NESTED_STATE)
        raise GradingFailure(message)
    inference = [output for output in seen.outputs if output.is_inference()]
    if inference:
        raise proven_failure(f"{what}: the block's output is an inference tensor; the rest of the step cannot use it "
                             "as a factor of anything it records (autograd refuses to save it).", INFERENCE_OUTPUTS)


def _expect_restored(model: nn.Module, modes: list[bool], recording: bool, what: str, *, raised: bool,
                     nested: bool) -> None:
    """Fail unless every module's training flag and the grad mode are as they were before the block."""
    __tracebackhide__ = True
    ended = "raised, and the block " if raised else ""
    now = torch.is_grad_enabled()
    if now != recording:
        mistake = NOT_RESTORED_ON_ERROR if raised else GRAD_MODE_LEFT if recording else GRAD_MODE_FORCED
        raise proven_failure(f"{what} {ended}left autograd's recording {'on' if now else 'off'} (it was "
                             f"{'on' if recording else 'off'} when the block began).", mistake)
    now = _modes(model)
    if now != modes:
        if nested:
            raise proven_failure(f"{what}: two blocks, one inside the other, left the modules' flags "
                                 f"{_flags(now)}; one block alone puts back {_flags(modes)}.", NESTED_STATE)
        if len(set(modes)) > 1 and now == [modes[0]] * len(now):
            raise proven_failure(f"{what} {ended}left every module's training flag {modes[0]}; the model came in "
                                 f"{modes[0]} but its batch norm layer {not modes[0]}: {_flags(modes)} became "
                                 f"{_flags(now)}.", MODES_FLATTENED)
        mistake = NOT_RESTORED_ON_ERROR if raised else EVAL_MODE_LEFT if modes[0] else TRAIN_MODE_FORCED
        raise proven_failure(f"{what} {ended}left model.training {model.training} (it was {modes[0]}; every "
                             f"module's flag: {_flags(modes)} became {_flags(now)}): the rest of the training step "
                             "finds the model in another mode.", mistake)


def _state(model: nn.Module) -> dict[str, tuple]:
    """Every parameter and buffer: (value, version counter, requires_grad, .grad)."""
    return {name: (tensor.detach().clone(), tensor._version, tensor.requires_grad,
                   None if tensor.grad is None else tensor.grad.clone())
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]}


def _same(a, b) -> bool:
    return (a is None) == (b is None) and (a is None or torch.equal(a, b))


def _expect_state(model: nn.Module, before: dict[str, tuple], what: str) -> None:
    """The parameters and buffers as the step left them before the block: flags, gradients, values, versions."""
    __tracebackhide__ = True
    now = _state(model)
    gone = [name for name in before if name not in now]
    if gone:
        raise GradingFailure(f"{what}: after the block the model no longer has {gone} among its parameters and "
                             "buffers (set to None or removed): the rest of the step cannot run.")
    unfrozen = [name for name in before if now[name][2] != before[name][2]]
    if unfrozen:
        raise proven_failure(f"{what}: requires_grad of {unfrozen} went from {before[unfrozen[0]][2]} to "
                             f"{now[unfrozen[0]][2]}; the model came in with its first layer "
                             f"{'frozen' if not before[unfrozen[0]][2] else 'trained'}.", UNFROZE)
    touched = [name for name in before if not _same(now[name][3], before[name][3])]
    if touched:
        old, new = before[touched[0]][3], now[touched[0]][3]
        describe = [None if g is None else f"norm {float(g.norm()):.6g}" for g in (old, new)]
        raise proven_failure(f"{what}: the .grad of {touched} changed ({touched[0]}: {describe[0]} before the block, "
                             f"{describe[1]} after): the first micro-batch's gradients were waiting there.",
                             GRADS_TOUCHED)
    moved = [name for name in before if not torch.equal(now[name][0], before[name][0])]
    calibrated = [name for name in moved if name.endswith(".scale")]
    if calibrated:
        raise proven_failure(f"{what}: the block changed {calibrated}, the SelfCalibrating layer's scale, from "
                             f"{before[calibrated[0]][0].tolist()} to {now[calibrated[0]][0].tolist()} (version "
                             f"{before[calibrated[0]][1]} to {now[calibrated[0]][1]}); the step's pending backward "
                             "saved that tensor.", SELF_CALIBRATED)
    if moved:
        raise proven_failure(f"{what}: the block changed {moved}"
                             + (f"; num_batches_tracked went from {int(before['1.num_batches_tracked'][0])} to "
                                f"{int(now['1.num_batches_tracked'][0])}" if "1.num_batches_tracked" in moved else "")
                             + ".", STATS_UPDATED)
    bumped = [name for name in before if now[name][1] != before[name][1]]
    if bumped:
        raise proven_failure(f"{what}: every value came back, but the version counters of {bumped} moved "
                             f"({bumped[0]}: {before[bumped[0]][1]} before the block, {now[bumped[0]][1]} after).",
                             WRITTEN_BACK)


def _expect_step(step: Step, twin: nn.Module, what: str) -> None:
    """The pending backward runs and accumulates exactly the gradients the step gives without the evaluation."""
    __tracebackhide__ = True
    try:
        step.loss.backward()
    except RuntimeError as error:
        raise proven_failure(f"{what}: the training step's backward, after the block, raised RuntimeError: "
                             f"{str(error).splitlines()[0]:.200}", WRITTEN_BACK) from None
    wrong = [name for (name, p), (_, q) in zip(step.model.named_parameters(), twin.named_parameters())
             if not _same(p.grad, q.grad)]
    if wrong:
        raise proven_failure(f"{what}: after the block the training step's gradients of {wrong} are not the ones the "
                             "same step gives without an evaluation in it.", GRADS_TOUCHED)


@check
def check_evaluating(evaluating, grading_seed: int | None = None) -> None:
    """Part B1: ``with evaluating(model):`` used between a training step's forward pass and its backward: inside,
    every module in evaluation mode and nothing recorded, outputs ordinary tensors; afterwards (also when the block
    raises, whose exception must reach the caller, and after a block nested in another) every module's own training
    flag and the grad mode as before, the parameters and buffers unchanged in value, version counter, requires_grad
    and .grad, and the pending backward giving exactly the gradients of the same step without the evaluation.

    Domain: ``model`` a float64 MLP (Linear, BatchNorm1d with drawn running statistics, Tanh, Dropout with p in
    [0.3, 0.6), Linear) from d inputs to one output, in training or evaluation mode, or in training mode with its batch
    norm frozen in evaluation mode, its first Linear frozen (requires_grad False) or not, ending in a SelfCalibrating
    layer (which writes its buffer in every mode) or not; the block runs the model on
    a held-out float64 batch (n, d), n = 1 (pinned) or 6 to 12, or (n, d + 1), which raises inside the block; the
    caller records, or is inside torch.no_grad(). The step: two micro-batches of 6 to 12 examples, the first one's
    backward done, the second one's pending. Corners at every seed: see :data:`LOSS_CASES`.
    Contracts checked: every module in evaluation mode inside the block (forward pre-hooks on all of them, dropout
    and batch norm told apart from the rest), the outer block's flags and grad mode back after an inner one, no
    tensor saved for backward inside it (saved-tensor hooks), outputs not inference tensors; every module's flag and
    the grad mode
    after the block (one flag for all, where they differed, is named; a nested block too); the block's RuntimeError
    reaching the caller; requires_grad, .grad, values and _version of every parameter and buffer; the pending
    backward running and its gradients equal (exactly) to a copy's that ran the same step without the block.
    """
    __tracebackhide__ = True
    gen = case_stream("09/evaluating", grading_seed)
    for case, model, inputs, _targets in _loss_cases(grading_seed):
        with trial():
            if case.frozen_linear:
                model[0].requires_grad_(False)
            twin = copy.deepcopy(model)
            step = _start_step(model, gen)
            _finish_twin(twin, step)
            n, d = inputs.shape
            mode = "training" if case.training else "evaluation"
            mode += ", batch norm frozen" if case.frozen else ""
            mode += ", first Linear frozen" if case.frozen_linear else ""
            caller = " inside torch.no_grad()" if case.no_grad else ""
            inner = " with a second `with evaluating(model):` inside it" if case.nested else ""
            what = (f"`with evaluating(model):`{caller}{inner}, model in {mode} mode, between a training step's "
                    f"forward and backward, its block running the model on a held-out batch of shape {(n, d)}")
            modes, recording, before = _modes(model), not case.no_grad, _state(model)
            attributes = [set(vars(module)) for module in model.modules()]
            seen = Seen(modes=modes)
            try:
                with torch.no_grad() if case.no_grad else contextlib.nullcontext():
                    try:
                        call_learner(_block(evaluating, model, inputs, case, seen), what=what)
                    except GradingFailure as failure:
                        if any(seen.flags) and isinstance(failure.raised, ValueError):
                            raise proven_failure(f"{failure.message}\n(its batch norm layer ran in training mode, "
                                                 "where it needs more than one example to compute the batch's "
                                                 "statistics)", DROPOUT_ON) from None
                        raise
                    _expect_inside(seen, what)
                    if case.breaks and seen.escaped is None:
                        raise proven_failure(f"{what}: the model raised RuntimeError inside the block (one feature "
                                             "too many), and the `with` statement ended without it: the caller "
                                             "never learns that the batch was wrong.", SWALLOWED_ERROR)
                    _expect_restored(model, modes, recording, what, raised=case.breaks, nested=case.nested)
            finally:
                torch.set_grad_enabled(True)
            _expect_state(model, before, what)
            added = sorted({name for module, names in zip(model.modules(), attributes) for name in vars(module)
                            if name not in names})
            if added:
                raise GradingFailure(f"{what}: after the block the model's modules carry attributes they did not "
                                     f"have before: {added[:4]}.")
            _expect_step(step, twin, what)
