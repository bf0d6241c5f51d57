"""Part B of exercise 06: train_keep_best trains by SGD with momentum (the notebook's given step), measures the
held-out loss of the start and of every update's weights, and leaves the model holding the best ones, written into
its own parameters. Oracles: torch.optim.SGD's step function driven by autograd's and by finite differences'
gradients; the symptoms of the catalogued mistakes are runs with one mistake made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim.sgd import sgd

from ...checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Route,
    Routes,
    call_learner,
    check,
    expect_close,
    fmt,
    trial,
)
from ...checking import proven_failure as _proven
from ...contracts import Snapshot
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from ..shared import read_losses
from .misconceptions import (
    ACCUMULATED,
    BEST_AMONG_UPDATES,
    BUFFERS_LIST_REBOUND,
    BUFFERS_NOT_RESET,
    BUFFERS_NOT_RESTORED,
    HELD_OUT_RECORDED,
    LATER_ON_TIES,
    LOSS_ONCE,
    MOMENTUM_IGNORED,
    NEIGHBOUR_RESTORED,
    NEW_STORAGE,
    NOT_RESTORED,
    OUTSIDE_NO_GRAD,
    PARAMETERS_REPLACED,
    STALE_GRADIENT,
    START_SKIPPED,
    TRAINED_ON_HELD_OUT,
)

Tensor = torch.Tensor


#: The .grad every model arrives with (from an earlier backward): a readable number.
STALE = 0.5
#: What PyTorch's leaf guard says (an in-place write into a leaf that requires grad while autograd records).
LEAF_GUARD = "a leaf Variable that requires grad is being used in an in-place operation"


class _CallersList(list):
    """The caller's momentum_buffers: a list that notes whether anything wrote over an entry that held a tensor, or
    changed it as a whole (a restore does; the given step only fills entries that are still None), so that a list
    never written after training (a restore that rebound a name) is told apart from one given the wrong tensors."""

    written = False

    def __setitem__(self, index, value):
        if isinstance(index, slice) or self[index] is not None:
            self.written = True
        super().__setitem__(index, value)


@dataclass
class _BufferEvidence:
    """What the cases of one check showed of the buffers the caller's list got back. A case whose best step is 0 and
    whose list holds tensors where torch.optim.SGD's buffers are None looks the same whether the list was never
    written (rebinding) or was written only where the record held tensors; the cases with a later best step tell
    the two apart, so such a failure's diagnosis is settled once every case has run (:meth:`settle`)."""

    stale: set = field(default_factory=set)  # the diagnoses a later-best case's buffers matched
    right: bool = False  # some later-best case got its buffers right
    pending: list = field(default_factory=list)  # (failure, the diagnosis the list's writes point to)

    def settle(self) -> None:
        for failure, stale in self.pending:
            failure.suspects = (stale,) if stale in self.stale else (BUFFERS_NOT_RESET,) if self.right else ()


def _noting(name: str):
    def method(self, *args, **kwargs):
        self.written = True
        return getattr(list, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("__delitem__", "__iadd__", "__imul__", "append", "extend", "insert", "pop", "remove", "clear", "sort",
              "reverse"):
    setattr(_CallersList, _name, _noting(_name))


def _mlp(sizes: tuple[int, int], values: Sequence[Tensor] = ()) -> nn.Module:
    """Linear(d, h), Tanh, Linear(h, 1) in float64, its parameters set to ``values`` when given."""
    d, h = sizes
    model = nn.Sequential(nn.Linear(d, h, dtype=torch.float64), nn.Tanh(), nn.Linear(h, 1, dtype=torch.float64))
    with torch.no_grad():
        for p, value in zip(model.parameters(), values):
            p.copy_(value)
    return model


@dataclass
class EarlyStopProblem:
    """A small tanh MLP (``sizes``: inputs, hidden units) from ``start``, trained by SGD with momentum on (x, y) and
    measured on (x_held, y_held); it arrives with every .grad full of :data:`STALE`."""

    description: str
    sizes: tuple[int, int]
    start: list[Tensor]
    x: Tensor
    y: Tensor
    x_held: Tensor
    y_held: Tensor
    lr: float
    momentum: float
    steps: int
    kind: str = "middle"

    def __post_init__(self) -> None:
        self.template = _mlp(self.sizes)
        self.names = [name for name, _ in self.template.named_parameters()]

    def loss(self, *values: Tensor, held: bool = False) -> Tensor:
        inputs, targets = (self.x_held, self.y_held) if held else (self.x, self.y)
        outputs = torch.func.functional_call(self.template, dict(zip(self.names, values)), (inputs,))
        return ((outputs - targets) ** 2).mean()

    def run(self, gradient: Callable, mistake: Misconception | None = None,
            clears_once: bool = False) -> tuple[list[float], list[list[Tensor]]]:
        """Held-out losses and weights at the start and after every update, by torch.optim.SGD with momentum, the
        gradients by ``gradient`` (an oracle); or with ``mistake`` made (``clears_once``: the accumulating loop
        that clears .grad once, before the first step)."""
        values, buffers = [t.clone() for t in self.start], [None] * len(self.start)
        carried = [torch.full_like(t, STALE if not clears_once else 0.0) for t in values]
        held, weights = [float(self.loss(*values, held=True))], [values]
        for step in range(self.steps):
            grads = list(gradient(lambda *ps: self.loss(*ps, held=mistake is TRAINED_ON_HELD_OUT), *values))
            if mistake is ACCUMULATED or (mistake is STALE_GRADIENT and step == 0):
                grads = carried = [c + g for c, g in zip(carried, grads)]
            values = [v.clone() for v in values]
            momentum = 0.0 if mistake is MOMENTUM_IGNORED else self.momentum
            sgd(values, grads, buffers, weight_decay=0.0, momentum=momentum, lr=self.lr, dampening=0.0,
                nesterov=False, maximize=False)
            held.append(float(self.loss(*values, held=True)))
            weights.append(values)
        return held, weights

    def buffers(self, gradient: Callable) -> list[list[Tensor | None]]:
        """The momentum buffers torch.optim.SGD holds after 0, 1, ..., steps updates (after 0: all None)."""
        values, buffers = [t.clone() for t in self.start], [None] * len(self.start)
        log = [list(buffers)]
        for _ in range(self.steps):
            grads = list(gradient(lambda *ps: self.loss(*ps), *values))
            values = [v.clone() for v in values]
            sgd(values, grads, buffers, weight_decay=0.0, momentum=self.momentum, lr=self.lr, dampening=0.0,
                nesterov=False, maximize=False)
            log.append([None if b is None else b.clone() for b in buffers])
        return log


def _early_stop_problem(gen: torch.Generator, kind: str) -> EarlyStopProblem:
    """``kind``: "ties" (the training targets are the start's own outputs: no gradient, nothing moves, every held-out
    loss ties, best step 0), "start" (the held-out targets are the start's outputs: the first update already makes
    it worse), or "middle" (held-out targets near the outputs of the weights after a drawn step between the first
    and the last, redrawn until that minimum is clear and the last and neighbouring weights are far from it)."""
    for _ in range(50):
        sizes = (randint(gen, 1, 3), randint(gen, 2, 4))
        model = _mlp(sizes)
        start = [uniform(gen, tuple(p.shape), -1.0, 1.0) for p in model.parameters()]
        n, n_held = randint(gen, 6, 10), randint(gen, 5, 8)
        x, x_held = uniform(gen, (n, sizes[0])), uniform(gen, (n_held, sizes[0]))
        y = uniform(gen, (n, 1))
        steps = randint(gen, 4, 7)
        lr, momentum = round(float(uniform(gen, (), 0.1, 0.3)), 2), round(float(uniform(gen, (), 0.5, 0.9)), 2)
        problem = EarlyStopProblem("", sizes, start, x, y, x_held, torch.zeros(n_held, 1, dtype=torch.float64), lr,
                                   momentum, steps)
        target = 0 if kind != "middle" else randint(gen, 1, steps - 2)
        weights = problem.run(autograd_gradient)[1] if kind == "middle" else [start]
        noise = 0.02 * uniform(gen, (n_held, 1)) if kind == "middle" else 0.0
        with torch.no_grad():
            problem.y_held = _mlp(sizes, weights[target])(x_held) + noise
            if kind == "ties":
                problem.y, problem.y_held = _mlp(sizes, start)(x), uniform(gen, (n_held, 1))
        held, weights = problem.run(autograd_gradient)
        best = min(range(len(held)), key=held.__getitem__)
        if kind == "ties" or _clear_minimum(held, weights, best, kind):
            problem.kind = kind
            problem.description = {"ties": "the training targets are the start's own outputs",
                                   "start": "held-out targets the start's own outputs",
                                   "middle": "held-out targets near the weights of a later step"}[kind]
            return problem
    raise CourseBug(f"no {kind!r} early-stopping problem found in 50 draws.")


def _clear_minimum(held: list[float], weights: list[list[Tensor]], best: int, kind: str) -> bool:
    """The lowest held-out loss is at the place ``kind`` wants and clearly below the others, and the weights a
    mistaken restore would give (the last, a neighbour) are far from the best ones."""
    where = best == 0 if kind == "start" else 0 < best < len(held) - 2
    others = sorted(held[:best] + held[best + 1:])
    far = [weights[k] for k in {len(held) - 1, best - 1, best + 1} - {best} if 0 <= k < len(held)]
    return where and others[0] > held[best] * 1.001 + 1e-9 and all(
        max(float((a - b).abs().max()) for a, b in zip(w, weights[best])) > 1e-3 for w in far)


def _early_stop_problems(grading_seed: int | None) -> list[EarlyStopProblem]:
    """Corners at every seed: nothing moves (every held-out loss ties: the earliest wins), the best weights are the
    start's; then two problems whose best weights come between the first and the last update."""
    corners = torch.Generator().manual_seed(66)
    gen = case_stream("06/train_keep_best", grading_seed)
    return [_early_stop_problem(corners, "ties"), _early_stop_problem(corners, "start"),
            _early_stop_problem(gen, "middle"), _early_stop_problem(gen, "middle")]


def _run_early_stop(train_keep_best, problem: EarlyStopProblem, evidence: _BufferEvidence) -> None:
    __tracebackhide__ = True
    model = _mlp(problem.sizes, problem.start)
    params = list(model.parameters())
    for p in params:
        p.grad = torch.full_like(p, STALE)
    views = [p.detach() for p in params]
    train_calls, recorded = [], []

    def train_loss():
        train_calls.append(None)
        return ((model(problem.x) - problem.y) ** 2).mean()

    def held_out_loss():
        recorded.append(torch.is_grad_enabled())
        return ((model(problem.x_held) - problem.y_held) ** 2).mean()

    d, h = problem.sizes
    state = _CallersList([None] * len(params))
    what = (f"train_keep_best(model, train_loss, held_out_loss, lr={problem.lr:g}, momentum={problem.momentum:g}, "
            f"steps={problem.steps}, momentum_buffers) for a Linear({d}, {h}), Tanh, Linear({h}, 1) model, mean "
            f"squared errors, {problem.description} (the model arrives with every .grad full of {STALE:g})")
    data = Snapshot({"x": problem.x, "y": problem.y, "x_held": problem.x_held, "y_held": problem.y_held})
    routes = Routes()
    try:
        arguments = (model, train_loss, held_out_loss, problem.lr, problem.momentum, problem.steps, state)
        returned = call_learner(train_keep_best, *arguments, what=what, forbid=[Route.OPTIMIZER], routes=routes,
                                may_change=[0, 6])  # the model and the buffers, by position: any names
    except GradingFailure as failure:
        if failure.proven is None and routes.backward_runs > len(train_calls):
            raise _proven(f"{failure.message}\n  train_loss() was called {len(train_calls)} time(s), backward ran "
                          f"{routes.backward_runs} time(s).", LOSS_ONCE) from None
        if failure.proven is None and LEAF_GUARD in failure.message:
            raise _proven(failure.message, OUTSIDE_NO_GRAD) from None
        raise
    if data.changes():
        raise GradingFailure(f"{what} changed the data the losses read: {'; '.join(data.changes())}.")
    now = list(model.parameters())
    if len(now) != len(params) or any(a is not b for a, b in zip(now, params)) or not all(p.is_leaf for p in now):
        raise _proven(f"{what}: afterwards the model holds other parameter tensors than it had.", PARAMETERS_REPLACED)
    if type(returned) is not tuple or len(returned) != 2:
        raise GradingFailure(f"{what} returned {type(returned).__name__} ({returned!r:.60}); expected a pair "
                             "(held_out_losses, best_step).")
    held = read_losses(returned[0], problem.steps + 1, what, per="set of weights (the start, then after each update)")
    ref_held, ref_weights = problem.run(autograd_gradient)
    fd_held, fd_weights = problem.run(central_difference)
    runs = [problem.run(autograd_gradient, mistake) for mistake in (STALE_GRADIENT, ACCUMULATED, MOMENTUM_IGNORED,
                                                                    TRAINED_ON_HELD_OUT)]
    runs.append(problem.run(autograd_gradient, ACCUMULATED, clears_once=True))
    mistakes = (STALE_GRADIENT, ACCUMULATED, MOMENTUM_IGNORED, TRAINED_ON_HELD_OUT, ACCUMULATED)
    expect_close(held, ref_held, what=f"{what}: held_out_losses", fd=fd_held, source="torch.optim.SGD",
                 symptoms=[m.looks_like(run[0]) for m, run in zip(mistakes, runs)])
    if any(recorded):
        raise _proven(f"{what}: held_out_loss() ran {sum(recorded)} of {len(recorded)} time(s) while autograd was "
                      "recording.", HELD_OUT_RECORDED)
    if routes.backward_runs != problem.steps:
        raise GradingFailure(f"{what}: backward ran {routes.backward_runs} times for {problem.steps} updates.")
    best = min(range(len(ref_held)), key=ref_held.__getitem__)
    best_step = returned[1]
    if type(best_step) is not int or best_step != best:
        suspects = [BEST_AMONG_UPDATES] if best and best_step == best - 1 else []
        suspects += [LATER_ON_TIES] if problem.kind == "ties" and best_step == problem.steps else []
        suspects += [START_SKIPPED] if not best and best_step == 1 + min(range(problem.steps),
                                                                         key=ref_held[1:].__getitem__) else []
        raise GradingFailure(f"{what}: best_step is {best_step!r:.40} ({type(best_step).__name__}); the held-out "
                             f"losses are {fmt(torch.tensor(ref_held))}.", suspects=tuple(suspects))
    for i, (name, p) in enumerate(zip(problem.names, params)):
        expect_close(p.detach(), ref_weights[best][i], what=f"{what}: the model's {name} afterwards",
                     fd=fd_weights[best][i], source="torch.optim.SGD, weights after best_step updates",
                     symptoms=[NOT_RESTORED.looks_like(ref_weights[-1][i]),
                               *(NEIGHBOUR_RESTORED.looks_like(ref_weights[k][i]) for k in (best - 1, best + 1)
                                 if 0 <= k <= problem.steps)])
    for name, p, view in zip(problem.names, params, views):
        if not torch.equal(view, p.detach()):
            raise _proven(f"{what}: the model's {name} holds the right values, but a view of it taken before training "
                          f"still holds {fmt(view)}: the weights went to new memory, not into the parameter's own.",
                          NEW_STORAGE)
    _expect_buffers(problem, state, best, what, evidence)


def _expect_buffers(problem: EarlyStopProblem, state: list, best: int, what: str, evidence: _BufferEvidence) -> None:
    """The caller's list holds torch.optim.SGD's buffers after ``best`` updates (None everywhere for 0), each a
    tensor of its own; what a case with a later best step shows goes to ``evidence``."""
    __tracebackhide__ = True
    log, fd_log = problem.buffers(autograd_gradient), problem.buffers(central_difference)
    if not isinstance(state, list) or len(state) != len(problem.names):
        raise GradingFailure(f"{what}: momentum_buffers is no longer a list of {len(problem.names)} entries.")
    stale = BUFFERS_NOT_RESTORED if getattr(state, "written", True) else BUFFERS_LIST_REBOUND
    for i, (name, got) in enumerate(zip(problem.names, state)):
        want, last = log[best][i], log[-1][i]
        where = f"{what}: momentum_buffers[{i}] ({name}) afterwards"
        if want is None or got is None:
            if (want is None) != (got is None):
                shown = "None" if got is None else fmt(got)
                failure = GradingFailure(f"{where} is {shown}; after best_step = {best} update(s) torch.optim.SGD's "
                                         f"buffer {'is None' if want is None else 'holds ' + fmt(want)}"
                                         f"{', as before the first update' if want is None else ''}.",
                                         suspects=(stale,) if best else ())
                if want is None:  # diagnosed by the cases with a later best step (_BufferEvidence)
                    evidence.pending.append((failure, stale))
                raise failure
            continue
        if type(got) is not torch.Tensor or got.shape != want.shape:
            raise GradingFailure(f"{where} is {type(got).__name__} {tuple(getattr(got, 'shape', ()))}; expected a "
                                 f"tensor of shape {tuple(want.shape)}.")
        symptoms = [stale.looks_like(last)] if best != problem.steps else []
        try:
            expect_close(got.detach(), want, what=where, fd=fd_log[best][i], symptoms=symptoms,
                         source=f"torch.optim.SGD, its buffer after best_step = {best} update(s)")
        except GradingFailure as failure:
            evidence.stale.update(s for s in failure.suspects if s is stale)
            raise
    tensors = [b for b in state if b is not None]
    if len({b.data_ptr() for b in tensors}) != len(tensors):
        raise GradingFailure(f"{what}: two entries of momentum_buffers share memory.")
    evidence.right = evidence.right or best > 0


@check
def check_train_keep_best(train_keep_best, grading_seed: int | None = None) -> None:
    """Part B: train_keep_best(model, train_loss, held_out_loss, lr, momentum, steps, momentum_buffers) trains by
    SGD with momentum
    (torch.optim.SGD's numbers, no torch.optim step), measures the held-out loss of the start and of the weights
    after every update, and leaves the model holding the weights with the lowest one (the earliest on a tie),
    written into its own parameters, and the caller's momentum_buffers holding the buffers of that step; returns
    (held_out_losses, best_step).

    Domain (the part's text): ``model`` an nn.Module of float64 parameters that may arrive with a .grad from an
    earlier backward; ``train_loss()`` and ``held_out_loss()`` scalar losses of its current weights; ``lr`` > 0,
    0 < ``momentum`` < 1, ``steps`` >= 1. Corners pinned at every seed: :func:`_early_stop_problems` (every loss
    tied; the best weights the start's). Contracts checked: the held-out losses as Python floats, steps + 1 of them
    (torch.optim.SGD with autograd's and with finite differences' gradients); best_step an int; the model's final
    weights; one backward per update; the same parameter tensors, written in place (a view taken before training
    shows the final values); held_out_loss() never called while autograd records; no torch.optim step (Routes); the
    data unchanged.
    """
    __tracebackhide__ = True
    evidence = _BufferEvidence()
    for problem in _early_stop_problems(grading_seed):
        with trial():
            _run_early_stop(train_keep_best, problem, evidence)
    evidence.settle()

