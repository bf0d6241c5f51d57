"""Checks for exercise 05, gradients accumulate: the training loop, micro-batch accumulation, reading a .grad history.

Each ``check_*`` function is one test cell's whole body: without ``seed`` it runs the public cases, with
``seed=grading_seed()`` fresh random ones. Models are small float64 modules; the loss of Parts A and B is a mean
over the examples. Every case is a :func:`~autograder.checking.trial`, and each misconception below shows in at least
two cases of the visible test and of the hidden test, so that it can be named.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Routes,
    as_answer,
    call_learner,
    check,
    expect_close,
    expect_no_alias,
    trial,
)
from ..checking import proven_failure as _proven
from ..seeding import choice, generator, uniform
from .cases import mean_loss_gradients, random_mlp

FRESH, ACCUMULATED, EMPTY = "fresh", "accumulated", "empty"
LABELS = (FRESH, ACCUMULATED, EMPTY)


class Scale(nn.Module):
    """prediction = w * x: the lesson's one-weight model."""

    def __init__(self, w: float):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w * x


def lesson_problem() -> tuple[Scale, tuple[torch.Tensor, torch.Tensor]]:
    """The lesson's loop: w = 0.5, prediction 2w, target 10, so the loss is (2w - 10)² (minimum at w = 5)."""
    return Scale(0.5), (torch.tensor([2.0], dtype=torch.float64), torch.tensor([10.0], dtype=torch.float64))


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([param.detach().reshape(-1) for param in model.parameters()])


def _layout(model: nn.Module) -> str:
    return ", ".join(f"{name} {tuple(param.shape)}" for name, param in model.named_parameters())


def _distinct(expected: torch.Tensor, candidates: list[tuple[Misconception, torch.Tensor]]):
    """Symptoms for the candidates whose value differs from the right one and from every other candidate's: a value
    two mistakes share (or the right answer shares) would name a mistake by coincidence."""
    def close(a, b):
        return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-3, atol=1e-6))

    return [m.looks_like(value) for i, (m, value) in enumerate(candidates)
            if not close(value, expected) and not any(close(value, other) for j, (_, other) in
                                                       enumerate(candidates) if j != i)]


LOSSES_AS_TENSORS = Misconception(
    "losses kept as tensors instead of Python floats",
    "Keep each loss as a number, loss.item(): a stored loss tensor keeps its whole computation graph alive for as "
    "long as the list lives, and the part asks for floats.")


def _losses(answer, length: int, what: str) -> torch.Tensor:
    """The learner's losses: a list of ``length`` Python floats, as a float64 vector."""
    __tracebackhide__ = True
    if type(answer) not in (list, tuple) or len(answer) != length:
        size = f" of length {len(answer)}" if type(answer) in (list, tuple) else ""
        raise GradingFailure(f"{what} returned {type(answer).__name__}{size}; expected a list of {length} losses, "
                             "one per step.")
    tensors = [value for value in answer if isinstance(value, torch.Tensor)]
    if tensors:
        graph = " attached to a graph" if any(t.requires_grad for t in tensors) else ""
        raise _proven(f"{what} returned losses that are tensors{graph}; expected Python floats.", LOSSES_AS_TENSORS)
    if not all(isinstance(value, float) for value in answer):
        kinds = sorted({type(value).__name__ for value in answer})
        raise GradingFailure(f"{what} returned losses of type {', '.join(kinds)}; expected Python floats "
                             "(loss.item()).")
    return torch.tensor([float(value) for value in answer], dtype=torch.float64)


# ---------------------------------------------------------------------------------------------- Part A

ZERO_GRAD_BEFORE_STEP = Misconception(
    "zero_grad between backward and step",
    "The parameters never moved: zero_grad() after backward() throws the gradient away before step() can use it. "
    "Reset at the start of the step, before backward().")
NEVER_RESET = Misconception(
    "gradient never reset (zero_grad missing, or called once before the loop)",
    "Without a reset at every step, .grad holds the sum of all past gradients (momentum with no damping). Call "
    "optimizer.zero_grad() inside the loop, before backward().")
SUM_LOSS = Misconception(
    "sum loss instead of mean",
    "The loss is the MEAN squared error over the examples (F.mse_loss's default); a sum makes every step as many "
    "times larger as there are elements.")


@dataclass
class TrainCase:
    description: str
    model: nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    lr: float
    steps: int


def _train_cases(seed: int | None):
    if seed is None:
        model, (inputs, targets) = lesson_problem()
        yield TrainCase("the lesson's model w * x with w = 0.5, x = [2], target [10]", model, inputs, targets,
                        0.01, 100)
        gen = generator("05/train/public", 0)
        yield TrainCase("a Linear(3, 1) layer and 6 examples", random_mlp(gen, (3, 1)), uniform(gen, (6, 3)),
                        uniform(gen, (6, 1)), 0.05, 8)
        yield TrainCase("an MLP with layer sizes (2, 3, 2) and 4 examples", random_mlp(gen, (2, 3, 2)),
                        uniform(gen, (4, 2)), uniform(gen, (4, 2)), 0.05, 6)
        return
    gen = generator("05/train", seed)
    for _ in range(2):
        sizes, examples = choice(gen, [(3, 1), (2, 3, 1), (4, 2), (3, 4, 2)]), choice(gen, [4, 6, 8])
        yield TrainCase(f"an MLP with layer sizes {sizes} and {examples} examples", random_mlp(gen, sizes),
                        uniform(gen, (examples, sizes[0])), uniform(gen, (examples, sizes[-1])),
                        round(float(uniform(gen, (), 0.02, 0.1)), 3), int(torch.randint(5, 11, (), generator=gen)))


def reference_train(case: TrainCase, reset: str = "before backward", reduction: str = "mean"):
    """(parameters after training, per-step losses) of plain SGD on a copy of the model.

    ``reset`` is where zero_grad() runs: "before backward" (right), "after backward" or "never"; ``reduction``
    "mean" (right) or "sum". The variants are the mistakes the check recognises.
    """
    model = copy.deepcopy(case.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=case.lr)
    losses = []
    for _ in range(case.steps):
        if reset == "before backward":
            optimizer.zero_grad()
        loss = F.mse_loss(model(case.inputs), case.targets, reduction=reduction)
        loss.backward()
        if reset == "after backward":
            optimizer.zero_grad()
        optimizer.step()
        losses.append(loss.item())
    return _flat(model), torch.tensor(losses, dtype=torch.float64)


@check
def check_train(train_fn, seed: int | None = None) -> None:
    """Part A: train(model, data, lr, steps) runs SGD on the mean squared error, resets .grad every step, trains
    ``model`` in place (the only argument it changes) and returns the losses as Python floats."""
    __tracebackhide__ = True
    for case in _train_cases(seed):
        with trial():
            model = copy.deepcopy(case.model)
            what = f"train(model, data, lr={case.lr:g}, steps={case.steps}) for {case.description}"
            losses = call_learner(train_fn, model, (case.inputs, case.targets), case.lr, case.steps, what=what,
                                  may_change=["model"])
            expected, expected_losses = reference_train(case)
            symptoms = _distinct(expected, [(ZERO_GRAD_BEFORE_STEP, _flat(case.model)),
                                            (NEVER_RESET, reference_train(case, reset="never")[0]),
                                            (SUM_LOSS, reference_train(case, reduction="sum")[0])])
            expect_close(_flat(model), expected, what=f"{what}: the trained parameter vector",
                         source="reference loop", extra=f"  parameters, flattened in this order: {_layout(model)}",
                         symptoms=symptoms)
            expect_close(_losses(losses, case.steps, what), expected_losses, source="reference loop",
                         what=f"{what}: the returned losses (one per step, computed before that step's update)")


# ---------------------------------------------------------------------------------------------- Part B

NOT_DIVIDED = Misconception(
    "did not divide by k",
    "Each micro-batch loss is already a mean over its own n/k examples, so k backward calls add up to k times the "
    "full-batch gradient: divide each micro-batch loss by k.")
DIVIDED_BY_N = Misconception(
    "divided by the wrong k: the batch size",
    "Divide each micro-batch loss by the number of micro-batches k, not by the number of examples n.")
DIVIDED_BY_SIZE = Misconception(
    "divided by the wrong k: the micro-batch size",
    "Divide each micro-batch loss by the number of micro-batches k, not by the micro-batch size n/k.")
RESET_PER_MICRO_BATCH = Misconception(
    "zero_grad inside the micro-batch loop",
    "Your result is the last micro-batch's gradient alone: resetting before every micro-batch throws away the ones "
    "before it. Reset once, before the loop.")
STALE = Misconception(
    "did not reset .grad before accumulating",
    "The model arrived with stale gradients in .grad and your result includes them: call model.zero_grad() once, "
    "before the first micro-batch.")
ONE_BACKWARD = Misconception(
    "one backward on the whole batch where micro-batches are asked for",
    "The point of micro-batches is that only one of them is in memory at a time: run forward and backward once per "
    "micro-batch and let .grad add them up.")
PIECES_OF_K = Misconception(
    "split into pieces of k examples instead of k pieces",
    "inputs.split(k) cuts pieces of k examples each (n/k of them); the part asks for k micro-batches of n/k "
    "examples: inputs.chunk(k), or inputs.split(n // k).")
STEPPED = Misconception(
    "took an optimizer step",
    "This function only computes the gradient: leave the parameters as they are (no optimizer, no update).")


@dataclass
class AccumulationCase:
    description: str
    model: nn.Module
    loss_fn: Callable
    inputs: torch.Tensor
    targets: torch.Tensor
    k: int
    stale: list[torch.Tensor]  # what .grad holds when the function is called


def _accumulation_case(gen, sizes, examples: int, k: int, classify: bool) -> AccumulationCase:
    model = random_mlp(gen, sizes)
    if classify:  # class indices for a cross-entropy loss
        loss_fn, targets = F.cross_entropy, torch.randint(sizes[-1], (examples,), generator=gen)
    else:
        loss_fn, targets = F.mse_loss, uniform(gen, (examples, sizes[-1]))
    stale = [uniform(gen, tuple(param.shape)) for param in model.parameters()]
    description = f"an MLP with layer sizes {sizes}, {examples} examples, loss_fn = F.{loss_fn.__name__}"
    return AccumulationCase(description, model, loss_fn, uniform(gen, (examples, sizes[0])), targets, k, stale)


#: (k, n/k) pairs: n/k differs from k and from 1, so k, n/k and n are three different numbers, and pieces of k
#: examples are never k pieces.
_SPLITS = [(2, 3), (2, 5), (3, 2), (3, 5), (4, 3), (4, 5)]


def _accumulation_cases(seed: int | None):
    if seed is None:
        gen = generator("05/accumulate/public", 0)
        yield _accumulation_case(gen, (3, 1), 12, 3, classify=False)
        yield _accumulation_case(gen, (3, 4, 3), 10, 2, classify=True)
        return
    gen = generator("05/accumulate", seed)
    for classify in (False, True):
        k, per_micro_batch = choice(gen, _SPLITS)
        sizes = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), choice(gen, [2, 3]))
        yield _accumulation_case(gen, sizes, k * per_micro_batch, k, classify)


def _as_gradient_dict(answer, model: nn.Module, what: str) -> dict:
    __tracebackhide__ = True
    names = [name for name, _ in model.named_parameters()]
    if type(answer) is not dict or not all(type(key) is str for key in answer) or sorted(answer) != sorted(names):
        keys = sorted(map(str, answer)) if isinstance(answer, dict) else type(answer).__name__
        raise GradingFailure(f"{what} returned {keys!r:.120}; expected a dict with one gradient per parameter, "
                             f"keyed by the names of model.named_parameters(): {names}.")
    return answer


def _expect_backward_runs(routes: Routes, case: AccumulationCase, what: str) -> None:
    __tracebackhide__ = True
    runs, n = routes.backward_runs, len(case.inputs)
    if runs == case.k:
        return
    message = f"{what} ran backward {runs} time(s); {case.k} micro-batches take {case.k} backward runs."
    if runs == 1:
        raise _proven(message, ONE_BACKWARD)
    if runs == n // case.k:
        raise _proven(message, PIECES_OF_K)
    raise GradingFailure(message)


def _run_accumulation(accumulated_gradient_fn, case: AccumulationCase) -> None:
    __tracebackhide__ = True
    model = copy.deepcopy(case.model)
    for param, stale in zip(model.parameters(), case.stale):
        param.grad = stale.clone()
    what = f"accumulated_gradient(model, loss_fn, inputs, targets, k={case.k}) for {case.description}"
    routes = Routes()
    answer = call_learner(accumulated_gradient_fn, model, case.loss_fn, case.inputs, case.targets, case.k,
                          what=what, routes=routes, may_change=["model"])
    for (name, param), original in zip(model.named_parameters(), case.model.parameters()):
        if not torch.equal(param.detach(), original.detach()) or not param.requires_grad:
            raise _proven(f"{what} changed the parameter {name} (only its .grad may change).", STEPPED)
    _expect_backward_runs(routes, case, what)
    answer = _as_gradient_dict(answer, model, what)
    expect_no_alias(answer, {"model": model}, what=f"{what}: the returned dict")
    expected, fd = mean_loss_gradients(case.model, case.loss_fn, case.inputs, case.targets)
    size, k, n = len(case.inputs) // case.k, case.k, len(case.inputs)
    last, _ = mean_loss_gradients(case.model, case.loss_fn, case.inputs[-size:], case.targets[-size:], fd=False)
    for index, (name, param) in enumerate(model.named_parameters()):
        right = expected[name]
        symptoms = _distinct(right, [(NOT_DIVIDED, k * right), (DIVIDED_BY_N, k * right / n),
                                     (DIVIDED_BY_SIZE, k * right / size), (RESET_PER_MICRO_BATCH, last[name] / k),
                                     (STALE, case.stale[index] + right)])
        expect_close(as_answer(answer[name], what=f"{what}[{name!r}]", shape=param.shape), right,
                     what=f"{what}: the gradient of {name}", fd=fd[name], symptoms=symptoms)


@check
def check_accumulated_gradient(accumulated_gradient_fn, seed: int | None = None) -> None:
    """Part B: accumulated_gradient over k equal micro-batches (k backward runs, no optimizer step, parameters and
    data unchanged) returns copies of the full-batch mean-loss gradient."""
    __tracebackhide__ = True
    for case in _accumulation_cases(seed):
        with trial():
            _run_accumulation(accumulated_gradient_fn, case)


# ---------------------------------------------------------------------------------------------- Part C

NONE_NOT_EMPTY = Misconception(
    "a None .grad not read as empty",
    "zero_grad() sets .grad to None by default (set_to_none=True); a None at step time means zero_grad() ran "
    "between backward() and step(), so the step had nothing to apply. Test `grad is None` first, before any "
    "tensor operation, and label the step 'empty'.")
ZEROS_NOT_EMPTY = Misconception(
    "an all-zero .grad not read as empty",
    "zero_grad(set_to_none=False) leaves zeros instead of None: an all-zero .grad also means the step had nothing "
    "to apply. Label it 'empty' too.")
EXACT_COMPARISON = Misconception(
    "compared gradients with == instead of a tolerance",
    "Logged gradients carry round-off: the same sum computed in another order differs in the last bits. Compare "
    "with torch.allclose, never with == or torch.equal.")
BY_SIZE = Misconception(
    "judged by the size of the gradient",
    "A fresh gradient can be larger than the last one (a diverging run) and an accumulated one smaller (the new "
    "gradient points back). Compare with the fresh gradient instead: .grad == fresh means reset; .grad == previous "
    ".grad + fresh means not reset.")


def _is_empty(grad) -> bool:
    return grad is None or not bool(grad.any())


def reference_labels(grads: list, fresh: list[torch.Tensor]) -> list[str]:
    """The label of every step, by the definitions of Part C."""
    labels = []
    for t, (grad, new) in enumerate(zip(grads, fresh)):
        if _is_empty(grad):
            labels.append(EMPTY)
        elif torch.allclose(grad, new):
            labels.append(FRESH)
        elif t > 0 and not _is_empty(grads[t - 1]) and torch.allclose(grad, grads[t - 1] + new):
            labels.append(ACCUMULATED)
        else:
            raise CourseBug(f"step {t} of a history fits no label.")
    return labels


def _signs(gen, shape) -> torch.Tensor:
    return torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)


@dataclass
class History:
    """A logged run: what .grad held before each step() (``grads``) and each step's fresh gradient (``fresh``).

    ``exact`` is the same history without the round-off a log carries (the recorded sums differ from previous +
    fresh in their last bits, as a sum taken in another order does).
    """

    grads: list
    fresh: list[torch.Tensor]
    exact: list

    def with_empties(self, as_zeros: bool) -> History | None:
        """The same history with every empty .grad written as zeros (or None); None if that changes nothing."""
        def swap(grad, new):
            if not _is_empty(grad):
                return grad
            return torch.zeros_like(new) if as_zeros else None

        grads = [swap(g, f) for g, f in zip(self.grads, self.fresh)]
        if all((a is None) == (b is None) for a, b in zip(grads, self.grads)):
            return None
        return History(grads, self.fresh, [swap(g, f) for g, f in zip(self.exact, self.fresh)])


def _history(gen, labels: list[str], shape: tuple[int, ...], trap: str = "", empty_as_zeros: bool = False,
             noise: bool = True) -> History:
    """A history that follows ``labels``.

    trap="growing": the fresh gradients grow elementwise (a diverging run, reset every step);
    trap="shrinking": every accumulated .grad is smaller than the one before (the fresh gradient points back).
    Either defeats telling a reset from the size of .grad. ``noise`` adds round-off (relative 1e-10) to what the
    log recorded, well inside torch.allclose's tolerance.
    """
    grads, exact, fresh, previous = [], [], [], None
    for label in labels:
        new = uniform(gen, shape, 0.2, 2.0) * _signs(gen, shape)
        if trap == "growing" and fresh:
            new = fresh[-1] * uniform(gen, shape, 1.3, 1.8) * _signs(gen, shape)
        if trap == "shrinking" and label == ACCUMULATED:
            new = previous * (uniform(gen, (), -0.7, -0.3) + 0.05 * uniform(gen, shape, -1.0, 1.0))
        fresh.append(new)
        if label == FRESH:
            grad = new.clone()
        elif label == ACCUMULATED:
            grad = previous + new
        else:
            grad = torch.zeros(shape, dtype=torch.float64) if empty_as_zeros else None
        exact.append(grad)
        if grad is not None and noise and label != EMPTY:
            grad = grad * (1 + 1e-10 * uniform(gen, shape, 0.5, 1.0) * _signs(gen, shape))
        grads.append(grad)
        previous = grad
    if reference_labels(grads, fresh) != labels or reference_labels(exact, fresh) != labels:
        raise CourseBug("a generated .grad history does not follow its labels.")
    return History(grads, fresh, exact)


def _random_labels(gen, length: int) -> list[str]:
    """A random reset schedule with at least one accumulated and two empty steps."""
    labels = [FRESH, ACCUMULATED, EMPTY] + [choice(gen, list(LABELS)) for _ in range(length - 4)] + [EMPTY]
    for t in range(1, length):
        if labels[t] == ACCUMULATED and labels[t - 1] == EMPTY:  # nothing to accumulate onto: it is fresh
            labels[t] = FRESH
    return labels


def _history_cases(seed: int | None):
    """Growing and shrinking traps (size), two histories with None and two with zeros (empty .grad), every one but
    the lesson's with round-off (==): each mistake shows in two histories."""
    if seed is None:
        six = torch.tensor(6.0, dtype=torch.float64)
        lesson = [six * 1, six * 2, six * 3]
        yield History(lesson, [six, six, six], lesson)  # the lesson: x.grad = 6, 12, 18
        gen = generator("05/grad_history/public", 0)
        yield _history(gen, [FRESH] * 5, (3,), trap="growing")
        yield _history(gen, [FRESH] + [ACCUMULATED] * 4, (2, 2), trap="shrinking")
        yield _history(gen, [EMPTY] * 4, (3,))
        yield _history(gen, [FRESH, ACCUMULATED, EMPTY, FRESH, EMPTY], (2,))
        yield _history(gen, [FRESH, ACCUMULATED, FRESH, ACCUMULATED, EMPTY, FRESH], (3,), empty_as_zeros=True)
        yield _history(gen, [EMPTY, FRESH, EMPTY], (2, 2), empty_as_zeros=True)
        return
    gen = generator("05/grad_history", seed)
    yield _history(gen, [FRESH] * int(torch.randint(4, 7, (), generator=gen)), (choice(gen, [2, 3, 4]),),
                   trap="growing")
    yield _history(gen, [FRESH] + [ACCUMULATED] * int(torch.randint(3, 6, (), generator=gen)),
                   (choice(gen, [2, 3, 4]),), trap="shrinking")
    for zeros in (False, False, True, True):
        yield _history(gen, _random_labels(gen, int(torch.randint(5, 9, (), generator=gen))),
                       choice(gen, [(3,), (2, 3)]), empty_as_zeros=zeros)


def _short(value) -> str:
    if value is None:
        return "None"
    if value.dim() == 0:
        return f"{value.item():.4g}"
    return "[" + ", ".join(f"{v:.4g}" for v in value.reshape(-1).tolist()) + "]"


def _history_table(grads: list, fresh: list, got: list[str], expected: list[str]) -> str:
    rows = [(str(t), _short(grad), _short(new), got[t], expected[t] + ("" if got[t] == expected[t] else "   <-- wrong"))
            for t, (grad, new) in enumerate(zip(grads, fresh))]
    rows.insert(0, ("step", ".grad before step()", "fresh gradient of the step", "yours", "expected"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " | " + row[4]
                     for row in rows)


CHANGED_LISTS = Misconception(
    "changed the history it was reading",
    "A diagnosis reads the log; it must not write into it. Leave grad_history and fresh_history as they are.")


def _labels(diagnose_fn, grads: list, fresh: list, what: str) -> list[str]:
    """The learner's labels for one history; the history's lists and tensors must come back unchanged."""
    __tracebackhide__ = True
    held = [list(grads), list(fresh)]
    answer = call_learner(diagnose_fn, grads, fresh, what=what)
    if [len(grads), len(fresh)] != [len(held[0]), len(held[1])] or any(
            a is not b for a, b in zip(held[0] + held[1], grads + fresh)):
        raise _proven(f"{what} replaced entries of the history lists it was given.", CHANGED_LISTS)
    # Exact types only: a str subclass could declare itself equal to every expected label.
    if type(answer) not in (list, tuple) or len(answer) != len(grads) or \
            not all(type(label) is str and label in LABELS for label in answer):
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of {len(grads)} labels, each "
                             f"one of {', '.join(map(repr, LABELS))}.")
    return list(answer)


def _behaviour(diagnose_fn, history: History, what: str) -> str:
    """"right", "wrong" or "raised": how the learner does on a variant of a history (to isolate one difference)."""
    try:
        labels = _labels(diagnose_fn, history.grads, history.fresh, what)
    except GradingFailure as failure:
        if failure.proven is not None:
            raise
        return "raised"
    return "right" if labels == reference_labels(history.grads, history.fresh) else "wrong"


def _by_size(grads: list, t: int, got: str, expected: str) -> bool:
    previous = grads[t - 1] if t else None
    if _is_empty(previous) or _is_empty(grads[t]):
        return False
    grew = bool(grads[t].norm() > previous.norm())
    return (expected, got, grew) in ((ACCUMULATED, FRESH, False), (FRESH, ACCUMULATED, True))


_VARIANTS = {NONE_NOT_EMPTY: "with zeros where .grad was None", ZEROS_NOT_EMPTY: "with None where .grad was zeros",
             EXACT_COMPARISON: "without round-off"}


def _isolated(diagnose_fn, history: History, answer: list[str] | None, what: str) -> tuple[Misconception, str] | None:
    """The one difference that makes the learner right (or stops it raising), if there is one, and what the learner
    did on that variant. Observed, so named at once. The variants: None written as zeros (when the learner raised,
    or mislabelled a None step), zeros written as None (when it mislabelled an all-zero step), the history without
    round-off."""
    def mislabelled(empty) -> bool:
        return answer is not None and any(empty(g) and a != EMPTY for g, a in zip(history.grads, answer))

    exact = History(history.exact, history.fresh, history.exact)
    variants = [(NONE_NOT_EMPTY, history.with_empties(as_zeros=True), answer is None or mislabelled(
                    lambda g: g is None)),
                (ZEROS_NOT_EMPTY, history.with_empties(as_zeros=False), mislabelled(
                    lambda g: g is not None and _is_empty(g))),
                (EXACT_COMPARISON, exact, any(g is not e for g, e in zip(history.grads, history.exact)))]
    for misconception, variant, relevant in variants:
        if variant is None or not relevant:
            continue
        behaviour = _behaviour(diagnose_fn, variant, what)
        if behaviour == "right" or (answer is None and behaviour == "wrong" and misconception is NONE_NOT_EMPTY):
            done = "labels it right" if behaviour == "right" else "no longer raises"
            return misconception, f"  The same history {_VARIANTS[misconception]}: your function {done}."
    return None


def _run_history(diagnose_fn, number: int, history: History) -> None:
    __tracebackhide__ = True
    grads, fresh = history.grads, history.fresh
    what = f"diagnose_grad_history(grad_history, fresh_history) for history #{number} ({len(grads)} steps)"
    expected = reference_labels(grads, fresh)
    try:
        answer = _labels(diagnose_fn, grads, fresh, what)
    except GradingFailure as failure:
        if failure.proven is not None:
            raise
        isolated = _isolated(diagnose_fn, history, None, what)
        if isolated is None:
            raise
        raise _proven(f"{failure.message}\n{isolated[1]}", isolated[0]) from None
    if answer == expected:
        return
    t = next(t for t in range(len(grads)) if answer[t] != expected[t])
    message = "\n".join([f"{what} is wrong at step {t}: you said {answer[t]!r}, expected {expected[t]!r}.",
                         _history_table(grads, fresh, answer, expected)])
    isolated = _isolated(diagnose_fn, history, answer, what)
    if isolated is not None:
        raise _proven(f"{message}\n{isolated[1]}", isolated[0])
    raise GradingFailure(message, suspects=(BY_SIZE,) if _by_size(grads, t, answer[t], expected[t]) else ())


@check
def check_diagnose_grad_history(diagnose_fn, seed: int | None = None) -> None:
    """Part C: diagnose_grad_history(grad_history, fresh_history) labels every step fresh/accumulated/empty,
    comparing with a tolerance and leaving the histories unchanged."""
    __tracebackhide__ = True
    for number, history in enumerate(_history_cases(seed), start=1):
        with trial():
            _run_history(diagnose_fn, number, history)
