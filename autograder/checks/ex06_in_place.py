"""Checks for exercise 06, in-place operations and leaf tensors: a manual SGD step with weight decay, a manual
training loop that keeps a history of the weights, and sorting snippets the lesson did not show into "raises" /
"silently wrong" / "fine" with the mechanism that decides each.

Two decisions the exercise states to learners:

* a reset gradient is ``None`` (what ``optimizer.zero_grad()`` does since PyTorch 2.0) or all zeros: both pass;
* an update written into ``p.data`` (``p.data -= ...``, ``p.data.sub_(...)``) writes the parameter's own memory and
  gives the same numbers as one under ``torch.no_grad()``, so it passes Parts A and B; assigning ``p.data = ...``
  does not write in place (a view of the parameter keeps the old values) and fails Part A. Where ``.data`` really
  is wrong — an intermediate that backward needs, overwritten behind the version counter's back — is what Part C
  asks about.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.optim.sgd import sgd

from ..checking import (
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
from ..checking import proven_failure as _proven
from ..contracts import Snapshot
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform
from .shared import read_losses

Tensor = torch.Tensor
VERDICTS = ("raises", "silently wrong", "fine")


def _plain(value) -> bool:
    """A real tensor, not a subclass whose methods would run learner code (__torch_function__)."""
    return type(value) in (torch.Tensor, torch.nn.Parameter)


def _grad_is_reset(p: Tensor) -> bool:
    return p.grad is None or (_plain(p.grad) and not bool(p.grad.detach().abs().max() > 0))


def _describe(names: Sequence[str], tensors: Sequence[Tensor]) -> str:
    return "[" + ", ".join(f"{n} {tuple(t.shape)}" for n, t in zip(names, tensors)) + "]"


# ---------------------------------------------------------------------------------------------------------------
# Part A: sgd_step(params, lr, weight_decay=0.0)

OUTSIDE_NO_GRAD = Misconception(
    "in-place update outside torch.no_grad()",
    "While autograd records, PyTorch refuses an in-place write into a leaf that requires grad. Do the update inside "
    "`with torch.no_grad():`, where nothing is recorded.")
NO_GRADIENT = Misconception(
    "a parameter without a gradient",
    "A parameter that took no part in the loss has .grad None. Skip it (`if p.grad is None: continue`), as "
    "torch.optim.SGD does.")
RESET_FIRST = Misconception(
    "gradient reset before the update",
    "You cleared .grad first and then stepped by a zero gradient. Update with the gradient, then reset it.")
REBINDING = Misconception(
    "rebinding (w = w - lr * w.grad)",
    "`p = p - lr * p.grad` builds a new tensor and binds it to a local name: the caller's parameter never changes. "
    "Update in place: `with torch.no_grad(): p -= lr * p.grad`.")
UPHILL = Misconception("moved uphill", "Gradient descent subtracts lr * grad.")
NO_LR = Misconception("learning rate ignored", "Scale the gradient by lr.")
NOT_A_LEAF = Misconception(
    "w stops being a leaf",
    "`params[i] = p - lr * p.grad` replaces the parameter by the output of a subtraction, and the model still uses "
    "the old one; update the same tensor in place instead.")
NOT_RESET = Misconception(
    "gradient not reset",
    "backward() adds into .grad, so the next step would use the sum of both gradients. Set p.grad = None (or "
    "p.grad.zero_()) after the update.")
NEW_STORAGE = Misconception(
    "p.data = ... is not an in-place update",
    "Assigning to p.data gives the parameter new memory: p shows the new numbers, but every view of the old memory "
    "(a tied weight, a slice another module holds, an optimizer's buffer) keeps the old ones. Write into the "
    "existing memory: `p -= ...` or `p.sub_(...)` under torch.no_grad() (p.data.sub_(...) writes in place too).")
DECAY_IGNORED = Misconception(
    "weight decay ignored",
    "With weight_decay = λ the step is p ← p − lr·(p.grad + λ·p): the decay term shrinks every parameter that has a "
    "gradient, also when λ·p is small next to the gradient.")
DECAY_NO_LR = Misconception(
    "weight decay not scaled by lr",
    "The decay is part of the gradient, so lr scales it too: p ← p − lr·(p.grad + λ·p), not p − lr·p.grad − λ·p.")
DECAY_SIGN = Misconception(
    "weight decay with the wrong sign", "Weight decay pulls every weight towards 0: subtract lr·λ·p, never add it.")
DECAY_AFTER = Misconception(
    "weight decay taken from the updated weight",
    "Both terms use the weight as it was before the step: p ← p − lr·(p.grad + λ·p). Shrinking after the "
    "gradient step multiplies the gradient step by (1 − lr·λ) too.")
ZERO_SKIPPED = Misconception(
    "a zero gradient taken for no gradient",
    "A gradient that is exactly zero is still a gradient: the parameter took part in the loss (its .grad is a tensor "
    "of zeros, not None), so torch.optim.SGD still decays it: p ← p − lr·(0 + λ·p). Skip only `p.grad is None`.")
DECAY_FROZEN = Misconception(
    "weight decay applied to a parameter without a gradient",
    "A parameter whose .grad is None took no part in this loss; torch.optim.SGD skips it entirely, decay included. "
    "Skip it before computing anything.")


@dataclass
class StepCase:
    """Parameters (by name), a loss of those that require a step, and one that takes no part in the loss."""

    description: str
    names: list[str]
    start: list[Tensor]
    loss: Callable[..., Tensor]
    lr: float
    weight_decay: float = 0.0
    frozen: Tensor | None = None  # a parameter whose .grad stays None

    def expected(self, point: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
        """One step of torch.optim.SGD(lr, weight_decay) from ``point``."""
        return [p - self.lr * (g + self.weight_decay * p) for p, g in zip(point, grads)]

    @property
    def call(self) -> str:
        decay = f", weight_decay={self.weight_decay:g}" if self.weight_decay else ""
        return f"lr={self.lr:g}{decay}"


def _linear_case(gen: torch.Generator, n: int, d_in: int, d_out: int, lr: float, weight_decay: float) -> StepCase:
    x, y = uniform(gen, (n, d_in)), uniform(gen, (n, d_out))
    weight, bias = 0.5 * uniform(gen, (d_in, d_out)), uniform(gen, (d_out,))
    return StepCase(f"loss = mean((x @ W + b - y)**2), x of shape {(n, d_in)}", ["W", "b"], [weight, bias],
                    lambda w, b: ((x @ w + b - y) ** 2).mean(), lr, weight_decay, frozen=uniform(gen, (d_out,)))


def _step_corners() -> list[StepCase]:
    """The corners of Part A's domain, run at every seed: the lesson's 0-d parameter (weight_decay at its default 0)
    beside a 0-d parameter whose .grad is None; a parameter whose gradient is exactly zero (it still decays) next to
    a row vector and a matrix of opposite-sign entries, with weight decay."""
    def t(*values):
        return torch.tensor(values, dtype=torch.float64)
    lesson = StepCase("loss = (2w - 10)**2 (lesson 05's loop)", ["w"], [torch.tensor(0.5, dtype=torch.float64)],
                      lambda w: (2 * w - 10.0) ** 2, 0.01, frozen=torch.tensor(1.5, dtype=torch.float64))
    x, y = t(1.0, -2.0, 0.5).reshape(3, 1), t(0.5, 1.5, -1.0).reshape(3, 1)
    zero = StepCase("loss = mean((x @ W + b - y)**2) + 0 * sum(c), x of shape (3, 1): c's gradient is exactly 0",
                    ["W", "b", "c"], [t(-0.8).reshape(1, 1), t(0.6), t(1.0, -2.0)],
                    lambda w, b, c: ((x @ w + b - y) ** 2).mean() + 0.0 * c.sum(), 0.1, 0.3, frozen=t(2.0, -1.0))
    return [lesson, zero]


def _step_cases(grading_seed: int | None) -> list[StepCase]:
    """The corners first, at every seed, then two linear layers, each with a parameter whose .grad is None (so that
    skipping it is seen twice) and weight decay."""
    cases = _step_corners()
    if grading_seed is None:
        return cases + [_linear_case(torch.Generator().manual_seed(6), 4, 3, 2, 0.1, 0.05)]
    gen = generator("06/sgd_step", grading_seed)
    return cases + [_linear_case(gen, choice(gen, [3, 4, 5]), choice(gen, [2, 3, 4]), choice(gen, [1, 2, 3]),
                                 round(float(uniform(gen, (), 0.05, 0.3)), 3),
                                 round(float(uniform(gen, (), 0.05, 0.5)), 3)) for _ in range(2)]


def _step_symptoms(case: StepCase, before: Tensor, grad: Tensor, p: Tensor) -> list:
    """What the catalogued step mistakes give for one parameter. Rebinding (the parameter unchanged, its .grad
    kept) and a reset before the update (a step by a zero gradient: only the decay, .grad cleared) are told apart by
    its .grad afterwards, and only for a gradient that is not zero (a zero gradient stays 'reset' either way)."""
    lr, wd = case.lr, case.weight_decay
    moving = bool(grad.abs().max() > 0)
    zero_step = before - lr * wd * before  # what a step by a gradient cleared too early gives
    return [RESET_FIRST.when(lambda got: moving and _grad_is_reset(p) and torch.allclose(got, zero_step)),
            REBINDING.when(lambda got: moving and not _grad_is_reset(p) and torch.equal(got, before)),
            UPHILL.looks_like(before + lr * (grad + wd * before)), NO_LR.looks_like(before - (grad + wd * before)),
            DECAY_IGNORED.looks_like(before - lr * grad), DECAY_NO_LR.looks_like(before - lr * grad - wd * before),
            DECAY_SIGN.looks_like(before - lr * (grad - wd * before)),
            DECAY_AFTER.looks_like((before - lr * grad) * (1 - lr * wd))]


def _expect_parameters(params: list, originals: list[Tensor], names: list[str], what: str) -> None:
    """The caller's list still holds the same leaf tensors, each still requiring grad."""
    __tracebackhide__ = True
    for name, held, original in zip(names, params, originals):
        if held is not original:
            raise _proven(f"{what}: params now holds a different {type(held).__name__} for {name}. The model still "
                          "uses the old one.", NOT_A_LEAF)
        if not (original.is_leaf and original.requires_grad):
            raise GradingFailure(f"{what}: afterwards {name} has is_leaf={original.is_leaf}, requires_grad="
                                 f"{original.requires_grad}; a parameter must stay a leaf that requires grad.")


def _expect_same_memory(used: list[Tensor], views: list[Tensor], names: list[str], what: str) -> None:
    """Behaviour of an in-place update: a view taken of each parameter before the step (what a tied weight or another
    module would hold) shows the new values afterwards."""
    __tracebackhide__ = True
    for name, p, view in zip(names, used, views):
        if not torch.equal(view, p.detach()):
            raise _proven(f"{what}: {name} shows the new values, but a view of {name} taken before the step still "
                          f"holds {fmt(view)}: the update went to new memory, not into the parameter's own.",
                          NEW_STORAGE)


def _replica(case: StepCase, frozen: bool) -> tuple[list[Tensor], list[Tensor], list[str]]:
    """(params as passed, the parameters the loss uses, names): fresh leaves with their gradients computed."""
    used = [t.clone().requires_grad_(True) for t in case.start]
    extra = [case.frozen.clone().requires_grad_(True)] if frozen and case.frozen is not None else []
    params = used[:1] + extra + used[1:]  # a parameter without gradient in the middle of the list
    names = case.names[:1] + ["frozen"] * len(extra) + case.names[1:]
    case.loss(*used).backward()
    return params, used, names


def _step(sgd_step, params: list, case: StepCase, what: str, **options) -> None:
    """Call the learner's step with weight_decay only when the case uses it (the lesson's call is sgd_step(params,
    lr)), so that weight_decay=0.0 is also checked as the default."""
    kwargs = {"weight_decay": case.weight_decay} if case.weight_decay else {}
    call_learner(sgd_step, params, case.lr, what=what, may_change=["params"], **options, **kwargs)


def _works_when(sgd_step, case: StepCase, *, frozen: bool, no_grad: bool) -> bool:
    """Whether the learner's step is right on a fresh replica of the case with one thing changed: without the
    parameter whose .grad is None, or called inside torch.no_grad(). It isolates why a step raised."""
    params, used, _ = _replica(case, frozen)
    point = [t.clone() for t in case.start]
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            _step(sgd_step, params, case, "sgd_step")
    except GradingFailure:
        return False
    want = case.expected(point, autograd_gradient(case.loss, *point))
    return all(torch.allclose(p.detach(), w) for p, w in zip(used, want))


def _call_step(sgd_step, case: StepCase, params: list[Tensor], what: str) -> None:
    __tracebackhide__ = True
    try:
        _step(sgd_step, params, case, what, forbid=[Route.OPTIMIZER, Route.AUTOGRAD])
    except GradingFailure as failure:
        if failure.proven is not None:
            raise
        if case.frozen is not None and _works_when(sgd_step, case, frozen=False, no_grad=False):
            raise _proven(f"{failure.message}\n  Without the parameter whose .grad is None, your step works.",
                          NO_GRADIENT) from None
        if _works_when(sgd_step, case, frozen=True, no_grad=True):
            raise _proven(f"{failure.message}\n  Called inside torch.no_grad(), your step works.",
                          OUTSIDE_NO_GRAD) from None
        raise


def _step_and_compare(sgd_step, case: StepCase, params: list[Tensor], names: list[str], used: list[Tensor],
                      point: list[Tensor], what: str) -> list[Tensor]:
    """Run one learner step from ``point`` (the current values) and compare with both oracles; return new values."""
    __tracebackhide__ = True
    grads = autograd_gradient(case.loss, *point)
    fd_grads = central_difference(case.loss, *point)
    views = [p.detach() for p in used]  # share the parameters' memory: an in-place update shows in them
    arg = list(params)
    _call_step(sgd_step, case, arg, what)
    _expect_parameters(arg, params, names, what)
    moved_right = []  # parameters with a gradient that is not zero, found right
    for name, p, before, want, fd, grad in zip(case.names, used, point, case.expected(point, grads),
                                               case.expected(point, fd_grads), grads):
        zero = not bool(grad.abs().max() > 0)
        if zero and moved_right and not torch.equal(want, before) and torch.equal(p.detach(), before):
            # Observed: decayed where the gradient is not zero, untouched where it is exactly zero.
            raise _proven(f"{what}: {', '.join(moved_right)} took the step, but {name}, whose gradient is exactly "
                          f"zero, was left at {fmt(before)}; with weight decay it must become {fmt(want)}.",
                          ZERO_SKIPPED)
        expect_close(p.detach(), want, what=f"{what}: new {name}", fd=fd,
                     symptoms=_step_symptoms(case, before, grad, p), source="SGD with autograd's gradient",
                     extra=f"  {name} before the step: {fmt(before)}; its gradient: {fmt(grad)}")
        if not zero:
            moved_right.append(name)
    _expect_same_memory(used, views, case.names, what)
    return [p.detach().clone() for p in used]


def _expect_reset(case: StepCase, used: list[Tensor], what: str) -> None:
    __tracebackhide__ = True
    for name, p in zip(case.names, used):
        if not _grad_is_reset(p):
            raise _proven(f"{what}: afterwards {name}.grad still holds {fmt(p.grad)}.", NOT_RESET)


def _expect_frozen_alone(case: StepCase, frozen: list[Tensor], what: str) -> None:
    __tracebackhide__ = True
    for f in frozen:
        if f.grad is None and f.requires_grad and torch.equal(f.detach(), case.frozen):
            continue
        decayed = case.weight_decay and torch.allclose(f.detach(), case.frozen * (1 - case.lr * case.weight_decay))
        message = (f"{what}: the parameter whose .grad was None changed (to {fmt(f)}, .grad "
                   f"{fmt(f.grad) if f.grad is not None else None}); leave it alone.")
        raise _proven(message, DECAY_FROZEN) if decayed else GradingFailure(message)


def _run_sgd_step(sgd_step, case: StepCase) -> None:
    __tracebackhide__ = True
    params, used, names = _replica(case, frozen=True)
    frozen = [p for p, name in zip(params, names) if name == "frozen"]
    what = f"sgd_step(params={_describe(names, params)}, {case.call}) after backward of {case.description}"
    point = _step_and_compare(sgd_step, case, params, names, used, [t.clone() for t in case.start], what)
    _expect_frozen_alone(case, frozen, what)
    _expect_reset(case, used, what)
    # The next iteration of a training loop must work on the same parameters.
    what_next = f"a second sgd_step({case.call}) after a fresh forward and backward ({case.description})"
    call_learner(lambda: case.loss(*used).backward(), what="After your sgd_step, the next forward/backward",
                 may_change=True)
    _step_and_compare(sgd_step, case, params, names, used, point, what_next)


@check
def check_sgd_step(sgd_step, grading_seed: int | None = None) -> None:
    """Part A: sgd_step(params, lr, weight_decay=0.0) updates every parameter with a gradient in place by
    p ← p − lr·(p.grad + weight_decay·p) (no torch.optim, no autograd), resets its gradient, leaves the others and the
    list alone.

    Domain (the part's text): ``params`` a list of float64 leaf tensors that require grad, of any shape (0-d
    included), whose .grad a backward just filled (any sign, exactly zero included) or left None; ``lr`` > 0;
    ``weight_decay`` >= 0, 0 by default (called without it). Corners pinned at every seed: :func:`_step_corners`.
    Contracts checked: the new values (autograd and finite differences); in place, by behaviour (a view of each
    parameter taken before the step shows the new values, so `p.data = ...` fails) and the list holds the same leaf
    objects that still require grad; .grad reset (None or zeros); a parameter whose .grad is None unchanged; no
    torch.optim step and no autograd inside (Routes); nothing else changed (call_learner); a second forward,
    backward and step work on the same parameters.
    """
    __tracebackhide__ = True
    for case in _step_cases(grading_seed):
        with trial():
            _run_sgd_step(sgd_step, case)


# ---------------------------------------------------------------------------------------------------------------
# Part B: train_manually(params, loss_fn, lr, steps)

LOSS_ONCE = Misconception(
    "the loss computed once, outside the loop",
    "backward() frees the graph it walks, and the weights change every step: call loss_fn() anew in every step.")
ACCUMULATED = Misconception(
    "gradients accumulated across steps",
    "backward() adds into .grad; reset it after every update, or each step uses the sum of all gradients so far.")
NEVER_MOVED = Misconception(
    "the parameters never moved",
    "The loss stayed at its first value: your updates never reached the tensors loss_fn() uses. Typical causes: "
    "rebinding (`w = w - lr * w.grad` builds a new tensor) or clearing .grad before the update. Update in place "
    "under torch.no_grad(), then reset .grad.")
LOSS_AFTER = Misconception(
    "loss recorded after the step",
    "Record each step's loss before updating, as an optimizer loop does (the loss that backward() differentiated).")
SNAPSHOT_SHARED = Misconception(
    "a snapshot that shares memory with the parameter",
    "p.detach() (like p.data, or p itself) is the parameter's own memory under another name: the next in-place "
    "update rewrites that snapshot too, so every entry ends up holding the latest values. Copy the memory: "
    "p.detach().clone().")
SNAPSHOT_IN_GRAPH = Misconception(
    "a snapshot that requires grad",
    "p.clone() is recorded by autograd: the copy requires grad and keeps a node of the graph alive (and "
    "copy.deepcopy of a parameter is another parameter). A record of values belongs outside the graph: "
    "p.detach().clone().")
SNAPSHOT_BEFORE = Misconception(
    "snapshots taken before the update",
    "history[k] holds the values right after update k: copy the parameters after the step, not before it.")
STALE_GRADIENT = Misconception(
    "a gradient left from before the loop used in the first step",
    "The parameters arrived with a .grad from an earlier backward pass (an evaluation, a previous run). backward() "
    "adds into it, so your first update used the sum of the old and the new gradient. Clear the gradients before "
    "every backward, the first one included, as optimizer.zero_grad() does in the loop the part shows.")


@dataclass
class Regression:
    x: Tensor
    y: Tensor
    start: tuple[Tensor, Tensor]
    lr: float
    steps: int
    stale: tuple[Tensor, Tensor] | None = None  # .grad the parameters arrive with (from an earlier backward)

    def loss(self, w: Tensor, b: Tensor) -> Tensor:
        return ((self.x @ w + b - self.y) ** 2).mean()


def _regression(gen: torch.Generator, n: int, d: int, lr: float, steps: int, bias_shape: tuple = (1,),
                stale: bool = False) -> Regression:
    x = uniform(gen, (n, d), -1.0, 1.0)
    y = x @ uniform(gen, (d,), -2.0, 2.0) + 0.5 + 0.1 * uniform(gen, (n,))
    start = (0.1 * uniform(gen, (d,)), 0.1 * uniform(gen, bias_shape))
    # A leftover gradient, as an evaluation pass or an earlier run leaves it: fixed numbers, readable in a message.
    old = (torch.full((d,), 0.75, dtype=torch.float64), torch.full(bias_shape, -0.5, dtype=torch.float64))
    return Regression(x, y, start, lr, steps, old if stale else None)


def _regressions(grading_seed: int | None) -> list[Regression]:
    """The corner first, at every seed: one step (where a snapshot that shares memory still holds the right values,
    so only what happens to it afterwards tells), a single feature, a 0-d bias, and parameters that arrive with a
    .grad left from an earlier backward. Then two problems, so that every mistake shows twice; their parameters
    arrive with a leftover .grad too (in one step, using it cannot be told from never resetting: two steps can)."""
    cases = [_regression(torch.Generator().manual_seed(60), 4, 1, 0.2, 1, bias_shape=(), stale=True)]
    if grading_seed is None:
        gen = torch.Generator().manual_seed(6)
        return cases + [_regression(gen, 6, 2, 0.1, 5, stale=True), _regression(gen, 5, 1, 0.15, 4, stale=True)]
    gen = generator("06/train_manually", grading_seed)
    return cases + [_regression(gen, choice(gen, [5, 6, 7, 8]), choice(gen, [1, 2, 3]),
                                round(float(uniform(gen, (), 0.05, 0.15)), 3), choice(gen, [2, 3, 4, 5]),
                                stale=True)
                    for _ in range(2)]


def _trajectory(problem: Regression, gradient: Callable, reset: bool = True,
                stale: bool = False) -> tuple[list[float], list[list]]:
    """Losses before each step and the parameters after each step of plain gradient descent; or of a loop without
    reset (``reset=False``), or of one whose first step also adds the .grad the parameters arrived with
    (``stale=True``)."""
    params = [t.clone() for t in problem.start]
    total = [t.clone() for t in problem.stale] if stale and problem.stale else [torch.zeros_like(t) for t in params]
    losses, history = [], []
    for step in range(problem.steps):
        losses.append(float(problem.loss(*params)))
        grads = gradient(problem.loss, *params)
        carried = not reset or (step == 0 and stale)
        total = [a + g for a, g in zip(total, grads)] if carried else list(grads)
        params = [p - problem.lr * g for p, g in zip(params, total)]
        history.append(params)
    return losses, history


def _optimizer_trajectory(problem: Regression) -> tuple[list[float], list[list]]:
    """The same loop driven by torch.optim's SGD: the reference the learner's loop must reproduce.

    It calls ``torch.optim.sgd.sgd``, the function ``torch.optim.SGD.step`` runs, because constructing the
    ``torch.optim.SGD`` object imports torch._dynamo: seconds on a busy machine, for the same arithmetic.
    """
    params = [t.clone().requires_grad_(True) for t in problem.start]
    losses, history = [], []
    for _ in range(problem.steps):
        loss = problem.loss(*params)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            sgd(params, list(grads), [None] * len(params), weight_decay=0.0, momentum=0.0, lr=problem.lr,
                dampening=0.0, nesterov=False, maximize=False)
        losses.append(loss.item())
        history.append([p.detach().clone() for p in params])
    return losses, history


def _flat(history: list[list[Tensor]]) -> Tensor:
    return torch.cat([t.reshape(-1) for entry in history for t in entry])


def _read_history(history, params: list[Tensor], steps: int, what: str) -> list[list[Tensor]]:
    """The learner's history: ``steps`` lists of one plain tensor per parameter, each a copy outside the graph."""
    __tracebackhide__ = True
    if type(history) not in (list, tuple) or len(history) != steps:
        size = f" of length {len(history)}" if type(history) in (list, tuple) else ""
        raise GradingFailure(f"{what}: history is a {type(history).__name__}{size}; expected a list of {steps} "
                             "entries, one per step.")
    for k, entry in enumerate(history):
        if type(entry) not in (list, tuple) or len(entry) != len(params):
            raise GradingFailure(f"{what}: history[{k}] is {type(entry).__name__} ({entry!r:.60}); expected a list "
                                 f"of {len(params)} tensors, one per parameter.")
        for i, (snapshot, param) in enumerate(zip(entry, params)):
            if snapshot is param:
                raise _proven(f"{what}: history[{k}][{i}] is the parameter itself, not a copy of its values.",
                              SNAPSHOT_SHARED)
            if not isinstance(snapshot, torch.Tensor) or not _plain(snapshot):
                raise GradingFailure(f"{what}: history[{k}][{i}] is a {type(snapshot).__name__}; expected a plain "
                                     "tensor.")
            if snapshot.requires_grad:
                kind = ("is a leaf that requires grad (a copy.deepcopy of a parameter, or a new leaf made with "
                        "requires_grad=True)" if snapshot.grad_fn is None else
                        f"requires grad (grad_fn {type(snapshot.grad_fn).__name__}: a copy recorded by autograd)")
                raise _proven(f"{what}: history[{k}][{i}] {kind}; a snapshot is a copy of values outside the graph.",
                              SNAPSHOT_IN_GRAPH)
            if snapshot.shape != param.shape:
                raise GradingFailure(f"{what}: history[{k}][{i}] has shape {tuple(snapshot.shape)}; the parameter "
                                     f"has shape {tuple(param.shape)}.")
    return [list(entry) for entry in history]


def _expect_history_kept(history: list[list[Tensor]], params: list[Tensor], what: str) -> None:
    """Behaviour, not records: training goes on (an in-place update of every parameter) and the history must keep
    its values."""
    __tracebackhide__ = True
    kept = [[t.detach().clone() for t in entry] for entry in history]
    with torch.no_grad():
        for p in params:
            p.add_(1.0)
    for k, (entry, copy) in enumerate(zip(history, kept)):
        for i, (snapshot, value) in enumerate(zip(entry, copy)):
            if not torch.equal(snapshot.detach(), value):
                raise _proven(f"{what}: after the parameters were updated in place once more, history[{k}][{i}] "
                              f"changed with them (from {fmt(value)} to {fmt(snapshot)}).", SNAPSHOT_SHARED)


def _run_training(train_manually, problem: Regression) -> None:
    __tracebackhide__ = True
    w, b = (t.clone().requires_grad_(True) for t in problem.start)
    arrival = ""
    if problem.stale is not None:
        w.grad, b.grad = (t.clone() for t in problem.stale)
        arrival = f" (they arrive with w.grad = {fmt(w.grad)}, b.grad = {fmt(b.grad)} from an earlier backward)"
    what = (f"train_manually([w, b], loss_fn, lr={problem.lr:g}, steps={problem.steps}) for loss_fn() = "
            f"mean((x @ w + b - y)**2), x of shape {tuple(problem.x.shape)}, starting at w = {fmt(w)}, b = {fmt(b)}"
            f"{arrival}")
    calls = []

    def loss_fn():
        calls.append(None)
        return problem.loss(w, b)

    data, routes = Snapshot({"x": problem.x, "y": problem.y}), Routes()
    try:
        returned = call_learner(train_manually, [w, b], loss_fn, problem.lr, problem.steps, what=what,
                                forbid=[Route.OPTIMIZER], routes=routes, may_change=["params"])
    except GradingFailure as failure:
        # Observed: more backward passes than losses, so some loss was backpropagated twice.
        if failure.proven is None and routes.backward_runs > len(calls):
            raise _proven(f"{failure.message}\n  loss_fn() was called {len(calls)} time(s), backward ran "
                          f"{routes.backward_runs} time(s).", LOSS_ONCE) from None
        raise
    changed = data.changes()
    if changed:
        raise GradingFailure(f"{what} changed the data loss_fn() reads: {'; '.join(changed)}.")
    if type(returned) is not tuple or len(returned) != 2:
        raise GradingFailure(f"{what} returned {type(returned).__name__} ({returned!r:.60}); expected a pair "
                             "(losses, history).")
    losses = read_losses(returned[0], problem.steps, what, per="step")
    history = _read_history(returned[1], [w, b], problem.steps, what)
    ref_losses, ref_history = _optimizer_trajectory(problem)
    fd_losses, fd_history = _trajectory(problem, central_difference)
    # A loop that never resets accumulates from the leftover .grad (if it never clears it) or from zero (if it
    # clears it once, before the loop); one that resets only after each update carries the leftover into step 1.
    accumulated = [_trajectory(problem, autograd_gradient, reset=False, stale=stale) for stale in (True, False)]
    stale_losses, stale_history = _trajectory(problem, autograd_gradient, stale=True)
    stale_shown = problem.stale is not None
    start = [t.clone() for t in problem.start]
    unchanged = [float(problem.loss(*problem.start))] * problem.steps
    after = ref_losses[1:] + [float(problem.loss(*ref_history[-1]))]
    expect_close(losses, ref_losses, what=f"{what}: the returned list of losses", fd=fd_losses,
                 source="torch.optim.SGD",
                 symptoms=[NEVER_MOVED.looks_like(unchanged), LOSS_AFTER.looks_like(after),
                           *(ACCUMULATED.looks_like(acc_losses) for acc_losses, _ in accumulated),
                           *([STALE_GRADIENT.looks_like(stale_losses)] if stale_shown else [])])
    _expect_parameters([w, b], [w, b], ["w", "b"], what)
    for i, (name, got, ref, fd, first) in enumerate(zip("wb", (w, b), ref_history[-1], fd_history[-1], start)):
        expect_close(got.detach(), ref, what=f"{what}: the final {name}", fd=fd, source="torch.optim.SGD",
                     symptoms=[NEVER_MOVED.looks_like(first),
                               *(ACCUMULATED.looks_like(acc_history[-1][i]) for _, acc_history in accumulated),
                               *([STALE_GRADIENT.looks_like(stale_history[-1][i])] if stale_shown else [])])
    final = ref_history[-1]
    expect_close(_flat(history), _flat(ref_history), what=f"{what}: history, every step's [w, b] flattened in order",
                 fd=_flat(fd_history), source="torch.optim.SGD",
                 symptoms=[SNAPSHOT_SHARED.looks_like(_flat([final] * problem.steps)),
                           SNAPSHOT_BEFORE.looks_like(_flat([start] + ref_history[:-1])),
                           NEVER_MOVED.looks_like(_flat([start] * problem.steps)),
                           *(ACCUMULATED.looks_like(_flat(acc_history)) for _, acc_history in accumulated),
                           *([STALE_GRADIENT.looks_like(_flat(stale_history))] if stale_shown else [])])
    _expect_history_kept(history, [w, b], what)


@check
def check_train_manually(train_manually, grading_seed: int | None = None) -> None:
    """Part B: train_manually(params, loss_fn, lr, steps), without torch.optim, reproduces torch.optim.SGD's losses
    (as Python floats), final weights and the weights after every step, returned as (losses, history).

    Domain (the part's text): ``params`` a list of float64 leaf tensors that require grad, of any shape (0-d
    included) that may arrive with a .grad left from an earlier backward (which must not reach the first update, as
    in the optimizer loop the part shows, which calls zero_grad() first); ``loss_fn()`` a scalar loss of their
    current values; ``lr`` > 0; ``steps`` >= 1. Corner pinned at every seed: one step, one feature, a 0-d bias, a
    leftover .grad on arrival (on every problem, so that the mistake shows in two of them). Contracts checked:
    no torch.optim step (Routes); losses as Python floats recorded before each update; the caller's parameters
    trained in place and still leaves; the data loss_fn reads unchanged; history[k][i] a plain tensor of the
    parameter's shape that does not require grad, holds the values after step k, and keeps them when the parameters
    change in place afterwards (behaviour, not identity).
    """
    __tracebackhide__ = True
    for problem in _regressions(grading_seed):
        with trial():
            _run_training(train_manually, problem)


# ---------------------------------------------------------------------------------------------------------------
# Part C: raises / silently wrong / fine, measured by running each snippet; and the mechanism behind it

#: What decides a snippet's outcome (the learner names it for every snippet).
MECHANISMS = ("leaf guard", "version counter", ".data", "detach", "rebinding", "accumulation", "fine")


@dataclass(frozen=True)
class Snippet:
    """A few lines of code; ``kind`` says what the code is meant to do and so how its verdict is measured.

    * "gradient": ``x`` is a leaf (float64, requires grad); the code computes ``loss`` and then ``loss.backward()``
      runs. Fine means x.grad equals the central finite difference of the same code.
    * "update": ``w`` is a model's parameter (a leaf), ``loss_of(w)`` a scalar loss, ``lr`` and ``steps`` numbers;
      the code means to do gradient descent on ``w`` (``steps`` times if it loops, else once; ``steps`` >= 2, as the
      part says: with a single step, forgetting to reset .grad does no harm yet). Fine means the parameter that was
      passed in holds what plain gradient descent gives.

    ``verdict`` is what running it gives on this PyTorch (the check runs it and treats a disagreement as a course
    bug); ``group`` decides the mechanism (:data:`GROUPS`).
    """

    id: str
    group: str
    kind: str
    verdict: str
    source: str

    @property
    def mechanism(self) -> str:
        return GROUPS[self.group][0]


def _bank(*entries: tuple[str, str, str, str]) -> list[Snippet]:
    return [Snippet(f"S{number:02d}", *entry) for number, entry in enumerate(entries, start=1)]


RAISES, WRONG, FINE = VERDICTS
#: None of these is a snippet of lesson 06: each is a variant of a mechanism the lesson shows (a saved INPUT where
#: the lesson overwrote saved outputs, a write through a view or through .data into a saved input, an in-place op
#: whose backward needs its own result, a loop that trains a copy, a reset that comes too early...).
SNIPPETS = _bank(
    ("saved", "gradient", RAISES, "y = x * 3\nz = y ** 2\ny.add_(1)\nloss = z.sum()"),
    ("harmless", "gradient", FINE, "y = x * 2\ny.exp_()\nloss = y.sum()"),
    ("data_intermediate", "gradient", WRONG, "y = x.tanh()\ny.data.mul_(0.5)\nloss = y.sum()"),
    ("no_grad_update", "update", FINE, "for _ in range(steps):\n    loss_of(w).backward()\n"
                                       "    with torch.no_grad():\n        w.sub_(lr * w.grad)\n"
                                       "        w.grad.zero_()"),
    ("leaf", "gradient", RAISES, "x.clamp_(-1.0, 1.0)\nloss = (x ** 2).sum()"),
    ("detach_write", "gradient", RAISES, "y = torch.tanh(x)\nd = y.detach()\nd[0] = 0.0\nloss = y.sum()"),
    ("rebinding", "update", WRONG, "loss_of(w).backward()\nwith torch.no_grad():\n    w = w - lr * w.grad"),
    ("clone", "gradient", FINE, "y = x.exp()\nz = y.clone()\nz[0] = 0.0\nloss = (y + z).sum()"),
    ("no_reset", "update", WRONG, "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                                  "        w -= lr * w.grad"),
    ("data_update", "update", FINE, "for _ in range(steps):\n    loss_of(w).backward()\n"
                                    "    w.data.add_(w.grad, alpha=-lr)\n    w.grad.zero_()"),
    ("saved", "gradient", RAISES, "y = x.sin()\nz = y * x\ny.zero_()\nloss = z.sum()"),
    ("leaf", "update", RAISES, "for _ in range(steps):\n    loss_of(w).backward()\n    w.sub_(lr * w.grad)\n"
                               "    w.grad = None"),
    ("detach_cut", "gradient", WRONG, "y = x.sin()\nloss = (y * x.detach()).sum()"),
    ("data_intermediate", "gradient", WRONG, "y = x * 3\nz = y ** 2\ny.data.add_(1)\nloss = z.sum()"),
    ("rebinding", "update", WRONG, "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                                   "        w = w - lr * w.grad\n    w.requires_grad_(True)"),
    ("clone", "gradient", FINE, "y = torch.sigmoid(x)\ny = y.clone()\ny.mul_(2)\nloss = y.sum()"),
    ("saved", "gradient", RAISES, "y = x.tanh()\ny[1:] = 0.0\nloss = y.sum()"),
    ("harmless", "gradient", FINE, "y = x + 1\ny.mul_(3)\nloss = (y * x).sum()"),
    ("detach_write", "gradient", RAISES, "y = x.exp()\nz = y.detach()\nz += 1\nloss = (y * 2).sum()"),
    ("no_grad_update", "update", FINE, "for _ in range(steps):\n    w.grad = None\n    loss_of(w).backward()\n"
                                       "    with torch.no_grad():\n        w.copy_(w - lr * w.grad)"),
    ("no_reset", "update", WRONG, "w.grad = None\nfor _ in range(steps):\n    loss_of(w).backward()\n"
                                  "    with torch.no_grad():\n        w -= lr * w.grad"),
    ("detach_cut", "gradient", WRONG, "y = x.exp()\nloss = (y * y.detach()).sum()"),
    ("data_update", "update", FINE, "loss_of(w).backward()\nw.data.sub_(lr * w.grad)\nw.grad.zero_()"),
    ("leaf", "gradient", RAISES, "x.mul_(1.0)\nloss = x.sum()"),
)

#: Every group: its mechanism, and what a wrong answer on a snippet of the group most likely means.
GROUPS = {
    "leaf": ("leaf guard", Misconception(
        "a write into a leaf goes through", "Outside torch.no_grad(), an in-place write into a leaf that requires "
        "grad is refused on the spot by the leaf guard: RuntimeError 'a leaf Variable that requires grad is being "
        "used in an in-place operation'.")),
    "saved": ("version counter", Misconception(
        "overwriting a tensor that backward saved", "Backward nodes keep what their derivative needs: exp, tanh and "
        "sigmoid their output, a power or a product its inputs. An in-place edit of such a tensor (also through an "
        "index, y[1:] = 0) bumps its version counter, and backward() raises 'modified by an inplace operation'.")),
    "detach_write": ("version counter", Misconception(
        "detach() gives an independent copy", "detach() shares memory and the version counter with the original: "
        "writing into it changes the saved tensor, the counter sees it, and backward raises. Use clone() for a "
        "copy you may modify.")),
    "data_intermediate": (".data", Misconception(
        ".data makes an in-place edit safe", "Writes through .data skip the version counter: no error, but backward "
        "multiplies by the overwritten values. The gradient is wrong and only a finite-difference check shows it.")),
    "detach_cut": ("detach", Misconception(
        "a detached term still sends gradient", "A tensor made by detach() is a constant to backward: whatever is "
        "computed from it contributes nothing to x.grad, so the gradient is wrong without an error.")),
    "rebinding": ("rebinding", Misconception(
        "w = w - lr * w.grad updates the parameter", "It builds a new tensor and binds the name w to it: the "
        "parameter that was passed in keeps its values, and nothing tells you. Even in a loop that runs without an "
        "error (a new leaf made with requires_grad_), what trains is a copy, not the parameter.")),
    "no_reset": ("accumulation", Misconception(
        "backward() overwrites .grad", "backward() adds into .grad. Without a reset after every update, the second "
        "step uses the sum of both gradients: no error, wrong weights.")),
    "harmless": ("fine", Misconception(
        "every in-place operation is an error", "An in-place edit only matters when it overwrites a leaf or a tensor "
        "that a backward node saved. Adding or multiplying by a constant saves nothing, so editing y = x * 2 or "
        "x + 1 in place is fine; and an in-place op such as exp_() saves its own new result, which nothing edits "
        "afterwards.")),
    "clone": ("fine", Misconception(
        "writing into a clone spoils the original", "clone() copies the memory: editing the copy leaves the original "
        "and everything backward saved from it alone, and gradients still flow through the clone.")),
    "no_grad_update": ("fine", Misconception(
        "an in-place update inside no_grad is an error", "Inside torch.no_grad() nothing is recorded, so the leaf "
        "guard allows the write; w stays the same leaf and, with .grad reset each step, this is exactly SGD.")),
    "data_update": ("fine", Misconception(
        "a weight update through .data gives wrong numbers", "For a plain step, w.data -= lr * w.grad writes the "
        "same memory as a no_grad update, so the numbers are right. Its danger is elsewhere: it hides the write "
        "from the version counter, so a graph that saved w would silently use the new value.")),
}


#: What naming another mechanism for a snippet means, by the mechanism that really decides it.
MECHANISM_MISTAKES = {
    "leaf guard": Misconception(
        "did not recognise the leaf guard", "An in-place write into a leaf that requires grad, while autograd "
        "records, is refused on the spot, before any backward ('a leaf Variable that requires grad is being used in "
        "an in-place operation'). The version counter only speaks inside backward()."),
    "version counter": Misconception(
        "did not recognise the version counter", "An in-place write into a tensor that a backward node saved bumps "
        "its version counter, and backward() refuses ('modified by an inplace operation'). detach() shares that "
        "counter with the original, so a write through it is caught the same way; only .data has a counter of "
        "its own."),
    ".data": Misconception(
        "did not recognise a .data write", "A write through .data changes a saved tensor without moving its version "
        "counter: backward uses the new values and no guard fires."),
    "detach": Misconception(
        "did not recognise a detach() cut", "Nothing is written here: detach() returns a tensor outside the graph, so "
        "the term computed from it sends no gradient back. The gradient is wrong because a path is missing."),
    "rebinding": Misconception(
        "did not recognise rebinding", "w = w - lr * w.grad makes a new tensor and moves the name: the parameter "
        "that was passed in is left behind, whatever is done to the new w afterwards."),
    "accumulation": Misconception(
        "did not recognise accumulation", "Nothing is written in place wrongly here: .grad is simply not reset "
        "between steps, so backward() adds each new gradient to the old ones."),
    "fine": Misconception(
        "named a mechanism for a snippet that is fine", "No guard fires and the result is right: the snippet "
        "overwrites nothing backward needs and updates the parameter itself. Its mechanism is 'fine'."),
}


@dataclass(frozen=True)
class SnippetInputs:
    x: Tensor        # for "gradient" snippets
    w: Tensor        # for "update" snippets: start value, and loss_of(w) = sum((w * a - b)**2)
    a: Tensor
    b: Tensor
    lr: float
    steps: int

    def describe(self, kind: str) -> str:
        if kind == "gradient":
            return f"x = {fmt(self.x)}"
        return f"w = {fmt(self.w)}, loss_of(w) = sum((w * {fmt(self.a)} - {fmt(self.b)})**2), lr = {self.lr:g}, " \
               f"steps = {self.steps}"


def _run_source(source: str, namespace: dict) -> dict:
    with warnings.catch_warnings():  # e.g. reading .grad of a non-leaf: part of what a snippet does, not news
        warnings.simplefilter("ignore")
        exec(compile(source, "<snippet>", "exec"), namespace)
    return namespace


def _first_line(error: Exception) -> str:
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message if len(message) <= 220 else message[:217] + '...'}"


def measure(snippet: Snippet, inputs: SnippetInputs) -> tuple[str, str]:
    """Run a snippet on the installed PyTorch: its verdict and the evidence for it (a CourseBug if the verdict is
    not the one the bank records, so that a mechanism is never graded against a behaviour that changed)."""
    verdict, evidence = _measure(snippet, inputs)
    if verdict != snippet.verdict:
        raise CourseBug(f"snippet {snippet.id} is {verdict!r} on PyTorch {torch.__version__} ({evidence}), but the "
                        f"exercise records {snippet.verdict!r}.")
    return verdict, evidence


def _measure(snippet: Snippet, inputs: SnippetInputs) -> tuple[str, str]:
    if snippet.kind == "gradient":
        x = inputs.x.clone().requires_grad_(True)
        try:
            _run_source(snippet.source, {"torch": torch, "x": x})["loss"].backward()
        except Exception as error:
            return RAISES, _first_line(error)
        (fd,) = central_difference(lambda v: _run_source(snippet.source, {"torch": torch, "x": v.clone()})["loss"],
                                   inputs.x)
        got, truth = x.grad, fd
        evidence = f"x.grad = {fmt(got)}, finite differences of the same code = {fmt(fd)}"
    else:
        w = inputs.w.clone().requires_grad_(True)

        def loss_of(v):
            return ((v * inputs.a - inputs.b) ** 2).sum()

        try:
            _run_source(snippet.source, {"torch": torch, "w": w, "loss_of": loss_of, "lr": inputs.lr,
                                         "steps": inputs.steps})
        except Exception as error:
            return RAISES, _first_line(error)
        truth = inputs.w.clone()
        for _ in range(inputs.steps if "range(steps)" in snippet.source else 1):
            (grad,) = central_difference(loss_of, truth)
            truth = truth - inputs.lr * grad
        got = w.detach()
        evidence = f"the parameter passed in now holds {fmt(got)}; gradient descent gives {fmt(truth)}"
    fine = bool(torch.allclose(got.to(torch.float64), truth, rtol=1e-6, atol=1e-8))
    return (FINE if fine else WRONG), evidence


#: The corner of Part C's domain, run at every seed: x with a zero entry and entries of both signs, the fewest
#: steps the part allows (2: at 1, the two "accumulation" snippets would be fine). The part's x is never all zeros:
#: there, S13's missing term sin(x) vanishes and S13 would be fine.
CORNER_INPUTS = SnippetInputs(torch.tensor([0.0, -1.2, 0.7], dtype=torch.float64),
                              torch.tensor([0.4, -0.3, 1.1], dtype=torch.float64),
                              torch.tensor([1.0, 0.5, 1.5], dtype=torch.float64),
                              torch.tensor([0.3, 1.0, -0.2], dtype=torch.float64), 0.1, 2)

def _snippet_inputs(gen: torch.Generator | None) -> SnippetInputs:
    """The part's domain: x a 1-D float64 leaf of 3 to 5 entries in [-1.5, 1.5), not all zero (a uniform draw never
    is); w of 3 to 5 entries in [-2, 2),
    a in [0.5, 1.5), b in [-2, 2) (so w is not at the minimum of loss_of), lr in [0.05, 0.2), steps 2 to 4."""
    if gen is None:
        return CORNER_INPUTS
    n = choice(gen, [3, 4, 5])
    return SnippetInputs(uniform(gen, (n,), -1.5, 1.5), uniform(gen, (n,)), uniform(gen, (n,), 0.5, 1.5),
                         uniform(gen, (n,)), round(float(uniform(gen, (), 0.05, 0.2)), 3), choice(gen, [2, 3, 4]))


def _snippets_to_check(grading_seed: int | None, *, every: bool = False) -> list[tuple[Snippet, SnippetInputs]]:
    """Visible: the first snippet of every group (``every``: every snippet), on the corner inputs. Hidden: every
    snippet on the corner inputs (at every seed), then every snippet again on its own random inputs (a wrong answer on
    any snippet loses the points at every seed)."""
    if grading_seed is None and every:
        return [(snippet, CORNER_INPUTS) for snippet in SNIPPETS]
    if grading_seed is None:
        groups: dict[str, Snippet] = {}
        for snippet in SNIPPETS:
            groups.setdefault(snippet.group, snippet)
        return [(snippet, CORNER_INPUTS) for snippet in groups.values()]
    gen = generator("06/classify_snippets", grading_seed)
    return [(snippet, CORNER_INPUTS) for snippet in SNIPPETS] + [(snippet, _snippet_inputs(gen))
                                                                 for snippet in SNIPPETS]


def _words(text: str) -> str:
    return " ".join(text.strip().lower().replace("_", " ").replace("-", " ").replace("()", "").split())


def _one_of(value, options: tuple[str, ...]) -> str | None:
    """``value`` read as one of ``options`` (case, '_', '-', '()' and a leading '.' do not matter), else None."""
    if type(value) is not str:
        return None
    wanted = _words(value).lstrip(".")
    return next((option for option in options if _words(option).lstrip(".") == wanted), None)


def _read_answers(answer, what: str) -> dict[str, tuple[str, str]]:
    """{snippet id: (verdict, mechanism)} from the learner's dict, or a GradingFailure saying what is missing."""
    __tracebackhide__ = True
    example = "{'S01': ('raises', 'version counter'), 'S02': ('fine', 'fine'), ...}"
    if type(answer) is not dict:
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict such as {example}.")
    missing = [s.id for s in SNIPPETS if s.id not in answer]
    if missing:
        raise GradingFailure(f"{what} has no answer for {', '.join(missing)}: give one for every snippet.")
    read, invalid = {}, []
    for snippet in SNIPPETS:
        pair = answer[snippet.id]
        if type(pair) not in (tuple, list) or len(pair) != 2:
            invalid.append(f"{snippet.id}: {pair!r:.40} is not a pair (verdict, mechanism)")
            continue
        verdict, mechanism = _one_of(pair[0], VERDICTS), _one_of(pair[1], MECHANISMS)
        if verdict is None:
            invalid.append(f"{snippet.id}: verdict {pair[0]!r:.30} is not one of {', '.join(map(repr, VERDICTS))}")
        if mechanism is None:
            invalid.append(f"{snippet.id}: mechanism {pair[1]!r:.30} is not one of "
                           f"{', '.join(map(repr, MECHANISMS))}")
        read[snippet.id] = (verdict, mechanism)
    if invalid:
        raise GradingFailure(f"{what}: {'; '.join(invalid[:4])}{' ...' if len(invalid) > 4 else ''}. Expected a "
                             f"dict such as {example}.")
    return read


def _snippet_failure(what: str, snippet: Snippet, inputs: SnippetInputs, said: str, evidence: str,
                     suspect: Misconception) -> GradingFailure:
    code = "\n".join("      " + line for line in snippet.source.splitlines())
    return GradingFailure(f"{what}: {snippet.id} ({snippet.kind} snippet, run with {inputs.describe(snippet.kind)}):"
                          f"\n{code}\n    you said {said!r}; {evidence}.", suspects=(suspect,))


@check
def check_classify_snippets(classify_snippets, grading_seed: int | None = None) -> None:
    """Part C, verdicts: the verdict given for each snippet is the one running it gives. A verdict is what a learner
    can observe (run the snippet, compare with finite differences), so the visible test checks every snippet's and
    no hidden verdict comes as a surprise; the reason, the mechanism, is graded by :func:`check_snippet_mechanisms`,
    and a snippet whose mechanism alone is wrong costs only those points. A wrong verdict is named after its group's
    misconception when two snippets (or one snippet on two inputs) agree.

    Domain (the part's text): the bank's snippets with their inputs (:func:`_snippet_inputs`): gradient snippets on
    a float64 leaf x of 3 to 5 entries in [-1.5, 1.5), not all zero, update snippets with lr in [0.05, 0.2) and
    steps >= 2. Corner pinned at every seed: :data:`CORNER_INPUTS` (a zero entry, both signs, steps = 2). Contracts
    checked: a dict with a pair (verdict, mechanism) from the two lists for every snippet; each verdict is the one
    running the snippet on the installed PyTorch gives (a recorded verdict that disagrees is a course bug, not the
    learner's).
    """
    __tracebackhide__ = True
    what = "classify_snippets()"
    answers = _read_answers(call_learner(classify_snippets, what=what), what)
    for snippet, inputs in _snippets_to_check(grading_seed, every=True):
        with trial():
            truth, evidence = measure(snippet, inputs)
            verdict = answers[snippet.id][0]
            if verdict != truth:
                raise _snippet_failure(f"{what}, verdict", snippet, inputs, verdict,
                                       f"running it: {truth!r} ({evidence})", GROUPS[snippet.group][1])


@check
def check_snippet_mechanisms(classify_snippets, grading_seed: int | None = None) -> None:
    """Part C, mechanisms: the mechanism named for each snippet checked is the one that decides its outcome; a wrong
    one is named after the true mechanism when two snippets of that mechanism agree. Visible: one snippet of every
    group (the reasoning for the others is the learner's); hidden: every snippet. Same domain and corner as
    :func:`check_classify_snippets`."""
    __tracebackhide__ = True
    what = "classify_snippets()"
    answers = _read_answers(call_learner(classify_snippets, what=what), what)
    for snippet, inputs in _snippets_to_check(grading_seed):
        with trial():
            truth, evidence = measure(snippet, inputs)
            if answers[snippet.id][1] != snippet.mechanism:
                raise _snippet_failure(f"{what}, mechanism", snippet, inputs, answers[snippet.id][1],
                                       f"the mechanism that decides it is {snippet.mechanism!r} (running it: "
                                       f"{truth!r}, {evidence})", MECHANISM_MISTAKES[snippet.mechanism])


def run_snippet(snippet_id: str, *, steps: int = 2, x=None) -> None:
    """Run one snippet of the bank as the tests do and print what happened: the error it raises, or the result beside
    the right one (finite differences of the same code, or plain gradient descent). The verdict follows from that;
    the mechanism is for the learner to find. ``steps`` (update snippets) and ``x`` (gradient snippets) default to
    the visible tests' inputs."""
    snippet = next((s for s in SNIPPETS if s.id == str(snippet_id).upper()), None)
    if snippet is None:
        raise ValueError(f"no snippet {snippet_id!r}: the bank has S01 to S{len(SNIPPETS):02d}.")
    inputs = CORNER_INPUTS
    if x is not None:
        inputs = dataclasses.replace(inputs, x=torch.as_tensor(x, dtype=torch.float64).detach().clone())
    inputs = dataclasses.replace(inputs, steps=int(steps))
    verdict, evidence = _measure(snippet, inputs)
    print(f"{snippet.id} ({snippet.kind} snippet, run with {inputs.describe(snippet.kind)}):")
    print("\n".join("    " + line for line in snippet.source.splitlines()))
    print(f"-> {verdict}: {evidence}")


def show_snippets() -> None:
    """Display the bank of snippets (what is in scope for each kind, then every snippet's code)."""
    from IPython.display import Markdown, display

    lines = []
    for snippet in SNIPPETS:
        lines += [f"**{snippet.id}** — *{snippet.kind}*", "", "```python", snippet.source, "```", ""]
    display(Markdown("\n".join(lines)))
