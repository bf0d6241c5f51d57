"""Part A of exercise 06: sgd_momentum_step takes torch.optim.SGD's step (momentum, dampening, Nesterov, weight
decay) in place, step after step, its momentum buffers kept in the list the caller hands it. Oracles: torch.optim.SGD's
own step function from the same state, driven by autograd's and by finite differences' gradients; the symptoms of the
catalogued mistakes are runs of the same step with one mistake made."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.optim.sgd import sgd

from ...checking import (
    GradingFailure,
    Misconception,
    Route,
    call_learner,
    check,
    expect_close,
    fmt,
    trial,
)
from ...checking import proven_failure as _proven
from ...contracts import aliases
from ...oracles import autograd_gradient, central_difference
from ...seeding import choice, uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BUFFER_FOR_NONE,
    BUFFER_SHARED,
    BUFFER_SIGN,
    BUFFER_WITH_LR,
    DAMPENING_SWAPPED,
    DECAY_IGNORED,
    DECAY_OUTSIDE,
    DECAY_SIGN,
    FIRST_STEP_DAMPED,
    FROZEN_STEPPED,
    GRAD_CHANGED,
    NESTEROV_IGNORED,
    NESTEROV_UNDECAYED,
    NEVER_MOVED,
    NEW_STORAGE,
    NO_GRADIENT,
    NO_LR,
    NOT_A_LEAF,
    OUTSIDE_NO_GRAD,
    STATE_LOST,
    UPHILL,
    ZERO_SKIPPED,
)

Tensor = torch.Tensor


def _plain(value) -> bool:
    """A real tensor, not a subclass whose methods would run learner code (__torch_function__)."""
    return type(value) in (torch.Tensor, torch.nn.Parameter)


def _t(*values) -> Tensor:
    return torch.tensor(values, dtype=torch.float64)


@dataclass
class MomentumCase:
    """Parameters (by name) and the loss of each step; ``joins[i]`` is the first step (0-based) at which parameter i
    takes part in the loss (None: never, its .grad stays None); the caller resets .grad between steps by
    ``reset`` ("none": p.grad = None; "zero": p.grad.zero_(), where the next backward adds into that tensor)."""

    description: str
    names: list[str]
    start: list[Tensor]
    loss: Callable[..., Tensor]  # loss(step, *params)
    joins: list[int | None]
    lr: float
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    steps: int = 3
    reset: str = "none"

    def active(self, step: int) -> list[bool]:
        return [join is not None and step >= join for join in self.joins]

    @property
    def options(self) -> dict:
        """The keyword arguments a caller passes (those that differ from the defaults: the defaults are tested)."""
        given = {"momentum": self.momentum, "dampening": self.dampening, "weight_decay": self.weight_decay,
                 "nesterov": self.nesterov}
        return {k: v for k, v in given.items() if v}

    @property
    def call(self) -> str:
        return ", ".join([f"lr={self.lr:g}", *(f"{k}={v:g}" if k != "nesterov" else "nesterov=True"
                                                for k, v in self.options.items())])


def _with_extras(description: str, names: list[str], start: list[Tensor], core: Callable, *, late: bool,
                 zero: bool, frozen: bool) -> tuple[str, list[str], list[Tensor], Callable, list]:
    """A core loss of the first parameters, plus: ``zero``, a parameter c whose gradient is exactly 0 (0·sum(c));
    ``late``, one that joins the loss at step 2; ``frozen``, one that never does. The extras sit between the core
    parameters, so that an index mix-up shows."""
    n = len(start)
    extra = ([("c", _t(1.0, -2.0), 0)] if zero else []) + ([("late", _t(0.5), 1)] if late else []) + \
        ([("frozen", _t(1.5, -0.5), None)] if frozen else [])
    order = list(range(1)) + [n + k for k in range(len(extra))] + list(range(1, n))
    all_names = names + [e[0] for e in extra]
    all_start = start + [e[1] for e in extra]
    all_joins = [0] * n + [e[2] for e in extra]
    texts = [description] + (["0·sum(c)"] if zero else []) + (["(2·late − 1)² from step 2"] if late else [])

    def loss(step: int, *ordered):
        params = [None] * len(order)
        for position, index in enumerate(order):
            params[index] = ordered[position]
        total = core(*params[:n])
        if zero:
            total = total + 0.0 * params[n].sum()
        if late and step >= 1:
            total = total + ((2 * params[n + int(zero)] - 1.0) ** 2).sum()
        return total

    return (" + ".join(texts), [all_names[i] for i in order], [all_start[i] for i in order], loss,
            [all_joins[i] for i in order])


def _linear_core(gen: torch.Generator, n: int, d_in: int, d_out: int):
    x, y = uniform(gen, (n, d_in)), uniform(gen, (n, d_out))
    start = [0.5 * uniform(gen, (d_in, d_out)), uniform(gen, (d_out,))]
    return (f"mean((x @ W + b - y)**2), x of shape {(n, d_in)}", ["W", "b"], start,
            lambda w, b: ((x @ w + b - y) ** 2).mean())


def _case(core, **settings) -> MomentumCase:
    extras = {k: settings.pop(k, False) for k in ("late", "zero", "frozen")}
    description, names, start, loss, joins = _with_extras(*core, **extras)
    return MomentumCase(description, names, start, loss, joins, **settings)


def _momentum_corners() -> list[MomentumCase]:
    """The corners of Part A's domain, run at every seed: the lesson's 0-d parameter with momentum 0 (the defaults:
    no buffer may appear) beside a parameter without gradient; momentum without decay and .grad reset in place by
    zero_() (a buffer that is .grad under another name is wiped), with a gradient of exact zeros and a parameter
    whose first gradient comes at step 2; Nesterov with weight decay; dampening with decay, the zero gradient and
    the late parameter again."""
    gen = torch.Generator().manual_seed(606)
    lesson = ("(2w − 10)² (lesson 05's loss)", ["w"], [_t(0.5).reshape(())], lambda w: (2 * w - 10.0) ** 2)
    return [_case(lesson, frozen=True, lr=0.01, steps=2),
            _case(_linear_core(gen, 3, 1, 1), zero=True, late=True, lr=0.1, momentum=0.9, reset="zero"),
            _case(_linear_core(gen, 4, 2, 1), frozen=True, lr=0.1, momentum=0.8, weight_decay=0.1, nesterov=True),
            _case(_linear_core(gen, 3, 2, 2), zero=True, late=True, lr=0.05, momentum=0.9, dampening=0.5,
                  weight_decay=0.2, reset="zero")]


def _momentum_cases(grading_seed: int | None) -> list[MomentumCase]:
    """The corners, then two drawn linear layers: one heavy-ball step with dampening, one Nesterov step, each with
    weight decay, every parameter kind and a reset style drawn."""
    gen = case_stream("06/sgd_momentum_step", grading_seed)
    drawn = []
    for nesterov in (False, True):
        core = _linear_core(gen, randint(gen, 3, 5), randint(gen, 1, 3), randint(gen, 1, 2))
        drawn.append(_case(core, zero=True, late=True, frozen=True, lr=round(float(uniform(gen, (), 0.02, 0.2)), 3),
                           momentum=round(float(uniform(gen, (), 0.5, 0.95)), 2),
                           dampening=0.0 if nesterov else round(float(uniform(gen, (), 0.1, 0.6)), 2),
                           weight_decay=round(float(uniform(gen, (), 0.05, 0.4)), 2), nesterov=nesterov,
                           steps=3, reset=choice(gen, ["none", "zero"])))
    return _momentum_corners() + drawn


#: The mistakes a simulated run can make (one at a time), for the symptoms.
_VARIANTS = (FIRST_STEP_DAMPED, DAMPENING_SWAPPED, NESTEROV_IGNORED, NESTEROV_UNDECAYED, DECAY_OUTSIDE, DECAY_IGNORED,
             DECAY_SIGN, UPHILL, NO_LR)


def _variant_step(case: MomentumCase, values: list, buffers: list, grads: list, active: list,
                  mistake: Misconception) -> tuple[list, list]:
    """One step as torch.optim.SGD takes it, but with ``mistake`` made."""
    values, buffers = list(values), list(buffers)
    m, damp, wd = case.momentum, case.dampening, case.weight_decay
    for i, (p, g) in enumerate(zip(values, grads)):
        if not active[i]:
            continue
        decay = {DECAY_IGNORED: 0.0, DECAY_SIGN: -wd, DECAY_OUTSIDE: 0.0}.get(mistake, wd)
        decayed = g + decay * p
        direction = decayed
        if m:
            if buffers[i] is None:
                buffers[i] = (1 - damp) * decayed if mistake is FIRST_STEP_DAMPED else decayed.clone()
            else:
                buffers[i] = m * buffers[i] + (damp if mistake is DAMPENING_SWAPPED else 1 - damp) * decayed
            lookahead = g if mistake is NESTEROV_UNDECAYED else decayed
            nesterov = case.nesterov and mistake is not NESTEROV_IGNORED
            direction = lookahead + m * buffers[i] if nesterov else buffers[i]
        if mistake is DECAY_OUTSIDE:
            direction = direction + wd * p
        scale = {UPHILL: -case.lr, NO_LR: 1.0}.get(mistake, case.lr)
        values[i] = p - scale * direction
    return values, buffers


def _torch_step(case: MomentumCase, values: list, buffers: list, grads: list, active: list) -> tuple[list, list]:
    """One step of torch.optim.SGD (the function its step() runs) on copies."""
    values, buffers = [v.clone() for v in values], [None if b is None else b.clone() for b in buffers]
    chosen = [i for i, on in enumerate(active) if on]
    held = [buffers[i] for i in chosen]
    sgd([values[i] for i in chosen], [grads[i] for i in chosen], held, weight_decay=case.weight_decay,
        momentum=case.momentum, lr=case.lr, dampening=case.dampening, nesterov=case.nesterov, maximize=False)
    for i, buffer in zip(chosen, held):
        buffers[i] = buffer
    return values, buffers


def _run_of(case: MomentumCase, gradient: Callable, mistake: Misconception | None = None) -> list[tuple[list, list]]:
    """(values, buffers) after every step, from the start, by torch.optim.SGD or with ``mistake`` made; the
    gradients by ``gradient`` (an oracle) at each step's own point."""
    values, buffers, run = [t.clone() for t in case.start], [None] * len(case.start), []
    for step in range(case.steps):
        grads = gradient(lambda *ps, step=step: case.loss(step, *ps), *values)
        active = case.active(step)
        values, buffers = (_torch_step(case, values, buffers, grads, active) if mistake is None else
                           _variant_step(case, values, buffers, grads, active, mistake))
        run.append((values, buffers))
    return run


def _diagnose_raise(sgd_momentum_step, case: MomentumCase, failure: GradingFailure) -> GradingFailure:
    """Why the first step raised, found by running it again on fresh copies with one thing changed: inside
    torch.no_grad(), or without the parameters whose .grad is None."""
    def first_step_works(no_grad: bool, drop_none: bool) -> bool:
        params = [t.clone().requires_grad_(True) for t in case.start]
        case.loss(0, *params).backward()
        kept = [p for p, on in zip(params, case.active(0)) if on or not drop_none]
        try:
            with torch.no_grad() if no_grad else contextlib.nullcontext():
                call_learner(sgd_momentum_step, kept, [None] * len(kept), case.lr, what="sgd_momentum_step",
                             may_change=True, **case.options)
        except GradingFailure:
            return False
        return True

    if not all(case.active(0)) and first_step_works(no_grad=False, drop_none=True):
        return _proven(f"{failure.message}\n  Without the parameters whose .grad is None, your step runs.",
                       NO_GRADIENT)
    if first_step_works(no_grad=True, drop_none=False):
        return _proven(f"{failure.message}\n  Called inside torch.no_grad(), your step runs.", OUTSIDE_NO_GRAD)
    return failure


def _expect_buffers(case: MomentumCase, buffers: list, expected: list, runs: dict, step: int, params: list,
                    grads: list, what: str) -> None:
    """Every buffer is None exactly where torch.optim.SGD keeps none, and equals torch's elsewhere."""
    __tracebackhide__ = True
    for i, (name, got, want) in enumerate(zip(case.names, buffers, expected)):
        if want is None and got is not None:
            why = "momentum is 0" if not case.momentum else "it has had no gradient yet"
            raise _proven(f"{what}: momentum_buffers[{i}] ({name}) holds {fmt(got)}, but torch.optim.SGD keeps no "
                          f"buffer for it ({why}).", BUFFER_FOR_NONE)
        if want is not None and got is None:
            zero = grads[i] is not None and not bool(grads[i].abs().max() > 0)
            raise _proven(f"{what}: momentum_buffers[{i}] ({name}) is None; torch.optim.SGD's buffer for it holds "
                          f"{fmt(want)}{' (its gradient is exactly zero)' if zero else ''}.",
                          ZERO_SKIPPED if zero else STATE_LOST)
        if want is None:
            continue
        if not _plain(got) or got.shape != want.shape:
            raise GradingFailure(f"{what}: momentum_buffers[{i}] ({name}) is {type(got).__name__} "
                                 f"{tuple(getattr(got, 'shape', ()))}; expected a tensor of shape {tuple(want.shape)}.")
        symptoms = [BUFFER_WITH_LR.looks_like(case.lr * want), BUFFER_SIGN.looks_like(-want),
                    BUFFER_SIGN.looks_like(-case.lr * want)]
        symptoms += [mistake.looks_like(run[step][1][i]) for mistake, run in runs.items()
                     if run[step][1][i] is not None]
        expect_close(got.detach(), want, what=f"{what}: momentum_buffers[{i}] ({name})", symptoms=symptoms,
                     source="torch.optim.SGD")


def _check_step(sgd_momentum_step, case: MomentumCase, params: list, buffers: list, step: int, reference: list,
                fd: list, runs: dict, what: str) -> None:
    """One learner step on the live parameters, against torch.optim.SGD's step from the same state."""
    __tracebackhide__ = True
    before = [p.detach().clone() for p in params]
    grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
    grad_objects = [p.grad for p in params]  # the tensors the caller's zero_() and the next backward write into
    views = [p.detach() for p in params]  # share the parameters' memory: an in-place update shows in them
    listed = list(params)
    try:
        call_learner(sgd_momentum_step, listed, buffers, case.lr, what=what, forbid=[Route.OPTIMIZER, Route.AUTOGRAD],
                     may_change=[0, 1],  # params and the buffers, by position: the learner's names are hers
                     **case.options)
    except GradingFailure as failure:
        raise (failure if failure.proven or step else _diagnose_raise(sgd_momentum_step, case, failure)) from None
    for name, held, original in zip(case.names, listed, params):
        if held is not original or not (original.is_leaf and original.requires_grad):
            raise _proven(f"{what}: afterwards params holds a {type(held).__name__} for {name} with is_leaf="
                          f"{held.is_leaf}; the model still uses the parameter it had.", NOT_A_LEAF)
    for name, p, grad in zip(case.names, params, grads):
        if (p.grad is None) != (grad is None) or (grad is not None and not torch.equal(p.grad.detach(), grad)):
            now = "None" if p.grad is None else fmt(p.grad)
            raise _proven(f"{what}: {name}.grad was {fmt(grad) if grad is not None else None} before your step and "
                          f"is {now} after it.", GRAD_CHANGED)
    if type(buffers) is not list or len(buffers) != len(params):
        raise GradingFailure(f"{what}: momentum_buffers is no longer a list of {len(params)} entries.")
    live = {f"{n}.grad": g for n, g in zip(case.names, grad_objects) if g is not None}
    live.update({n: p for n, p in zip(case.names, params)})
    shared = aliases(buffers, live, "momentum_buffers")
    if shared:
        raise _proven(f"{what}: {'; '.join(shared)}.", BUFFER_SHARED)
    values, expected_buffers = reference[step]
    moved_right = []
    for i, (name, p, old, want, want_fd) in enumerate(zip(case.names, params, before, values, fd[step][0])):
        if not case.active(step)[i]:
            if not torch.equal(p.detach(), old):
                raise _proven(f"{what}: {name}, whose .grad is None, changed from {fmt(old)} to {fmt(p)}.",
                              FROZEN_STEPPED)
            continue
        zero = not bool(grads[i].abs().max() > 0)
        if zero and moved_right and torch.equal(p.detach(), old) and not torch.equal(want, old):
            raise _proven(f"{what}: {', '.join(moved_right)} took the step, but {name}, whose gradient is exactly "
                          f"zero, was left at {fmt(old)}; torch.optim.SGD moves it to {fmt(want)}.", ZERO_SKIPPED)
        symptoms = [NEVER_MOVED.looks_like(old)] if not zero else []
        symptoms += [mistake.looks_like(run[step][0][i]) for mistake, run in runs.items()]
        expect_close(p.detach(), want, what=f"{what}: new {name}", fd=want_fd, symptoms=symptoms,
                     source="torch.optim.SGD", extra=f"  {name} before the step: {fmt(old)}; its .grad: "
                                                     f"{fmt(grads[i])}")
        if not zero:
            moved_right.append(name)
    _expect_buffers(case, buffers, expected_buffers, runs, step, params, grads, what)
    for name, p, view in zip(case.names, params, views):
        if not torch.equal(view, p.detach()):
            raise _proven(f"{what}: {name} shows the new values, but a view of {name} taken before the step still "
                          f"holds {fmt(view)}: the update went to new memory, not into the parameter's own.",
                          NEW_STORAGE)


def _run_momentum(sgd_momentum_step, case: MomentumCase) -> None:
    __tracebackhide__ = True
    reference, fd = _run_of(case, autograd_gradient), _run_of(case, central_difference)
    runs = {mistake: _run_of(case, autograd_gradient, mistake) for mistake in _VARIANTS}
    params = [t.clone().requires_grad_(True) for t in case.start]
    buffers: list = [None] * len(params)
    reset = "p.grad.zero_()" if case.reset == "zero" else "p.grad = None"
    for step in range(case.steps):
        for p in params:
            if case.reset == "zero" and p.grad is not None:
                p.grad.zero_()
            else:
                p.grad = None
        call_learner(lambda s=step: case.loss(s, *params).backward(), what="After your step, the next forward and "
                     "backward", may_change=True)
        what = (f"sgd_momentum_step(params=[{', '.join(case.names)}], momentum_buffers, {case.call}), step {step + 1} "
                f"of {case.steps} on loss = {case.description} (the caller resets .grad by {reset})")
        _check_step(sgd_momentum_step, case, params, buffers, step, reference, fd, runs, what)


@check
def check_sgd_momentum_step(sgd_momentum_step, grading_seed: int | None = None) -> None:
    """Part A: sgd_momentum_step(params, momentum_buffers, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
    nesterov=False) takes torch.optim.SGD's step, in place, step after step, keeping the momentum buffers in the list
    the caller hands it.

    Domain (the part's text): ``params`` a list of float64 leaves that require grad, of any shape (0-d included),
    whose .grad a backward filled (any sign, exactly zero included) or left None; ``momentum_buffers`` a list of the
    same length, None before a parameter's first step with momentum; ``lr`` > 0, 0 <= momentum < 1,
    0 <= dampening < 1, ``weight_decay`` >= 0, ``nesterov`` only with momentum > 0 and dampening 0; the caller
    resets .grad between steps to None or in place by zero_(). Corners pinned at every seed:
    :func:`_momentum_corners`. Contracts checked, at every step: new values and buffers (torch.optim.SGD from the
    same state, with autograd's and with finite differences' gradients); the same leaf objects in params; .grad left
    as it was; no buffer sharing memory with a parameter or a .grad; a buffer exactly where torch keeps one;
    parameters without .grad untouched; in place by behaviour (a view taken before the step shows the new values);
    no torch.optim step and no autograd inside (Routes); nothing else changed (call_learner).
    """
    __tracebackhide__ = True
    for case in _momentum_cases(grading_seed):
        with trial():
            _run_momentum(sgd_momentum_step, case)

