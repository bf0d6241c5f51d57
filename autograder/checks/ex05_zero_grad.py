"""Checks for exercise 05, gradients accumulate: the training loop, micro-batch accumulation, reading a .grad history.

Each ``check_*`` function is one test cell's whole body: without ``seed`` it runs the public cases, with
``seed=grading_seed()`` fresh random ones. Models are small float64 modules; the loss of Parts A and B is a mean
over the examples.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..checking import GradingFailure, Misconception, as_answer, call_learner, call_with_none_hint, expect_close
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


def _numbers(answer, length: int, what: str) -> torch.Tensor:
    """A list of ``length`` numbers (floats or one-element tensors) as a float64 vector."""
    if isinstance(answer, torch.Tensor):
        answer = list(answer.detach().reshape(-1))
    if type(answer) not in (list, tuple) or len(answer) != length:
        raise GradingFailure(f"{what} returned {answer!r:.100}; expected a list of {length} numbers.")
    return torch.stack([as_answer(value.reshape(()) if isinstance(value, torch.Tensor) and value.numel() == 1
                                  else value, what=what, shape=()) for value in answer])


# ---------------------------------------------------------------------------------------------- Part A

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


def _train_mistakes(case: TrainCase) -> list[Misconception]:
    return [
        Misconception("zero_grad between backward and step", "The parameters never moved: zero_grad() after "
                      "backward() throws the gradient away before step() can use it. Reset at the start of the "
                      "step, before backward().", value=_flat(case.model)),
        Misconception("gradient never reset (zero_grad missing, or called once before the loop)", "Without a "
                      "reset at every step, .grad holds the sum of all past gradients (momentum with no damping). "
                      "Call optimizer.zero_grad() inside the loop, before backward().",
                      value=reference_train(case, reset="never")[0]),
        Misconception("sum loss instead of mean", "The loss is the MEAN squared error over the examples "
                      "(F.mse_loss's default); a sum makes every step as many times larger as there are elements.",
                      value=reference_train(case, reduction="sum")[0]),
    ]


def check_train(train_fn, seed: int | None = None) -> None:
    """Part A: train(model, data, lr, steps) runs SGD on the mean squared error, resets .grad every step."""
    __tracebackhide__ = True
    for case in _train_cases(seed):
        model = copy.deepcopy(case.model)
        what = f"train(model, data, lr={case.lr:g}, steps={case.steps}) for {case.description}"
        losses = call_learner(train_fn, model, (case.inputs.clone(), case.targets.clone()), case.lr, case.steps,
                              what=what, may_change=True)
        expected, expected_losses = reference_train(case)
        trained = _flat(model)
        known = () if torch.allclose(trained, expected, rtol=1e-6, atol=1e-8) else _train_mistakes(case)
        expect_close(trained, expected, what=f"{what}: the trained parameter vector", source="reference loop",
                     extra=f"  parameters, flattened in this order: {_layout(model)}", misconceptions=known)
        expect_close(_numbers(losses, case.steps, what), expected_losses, source="reference loop",
                     what=f"{what}: the returned losses (one per step, computed before that step's update)")


# ---------------------------------------------------------------------------------------------- Part B

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


def _accumulation_cases(seed: int | None):
    if seed is None:
        gen = generator("05/accumulate/public", 0)
        yield _accumulation_case(gen, (3, 1), 12, 3, classify=False)
        yield _accumulation_case(gen, (3, 4, 3), 6, 2, classify=True)
        return
    gen = generator("05/accumulate", seed)
    for classify in (False, True):
        k = choice(gen, [2, 3, 4])
        per_micro_batch = choice(gen, [m for m in (2, 3, 5) if m != k])  # k != n/k: every wrong divisor shows
        sizes = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), choice(gen, [2, 3]))
        yield _accumulation_case(gen, sizes, k * per_micro_batch, k, classify)


def _accumulation_mistakes(case: AccumulationCase, name: str, index: int, expected: torch.Tensor,
                           last_micro_batch: torch.Tensor) -> list[Misconception]:
    k, n = case.k, len(case.inputs)
    return [
        Misconception("did not divide by k", f"Each micro-batch loss is already a mean over its own {n // k} "
                      f"examples, so the {k} backward calls add up to {k} times the full-batch gradient: divide "
                      f"each micro-batch loss by k = {k}.", value=k * expected),
        Misconception("divided by the wrong k: the batch size", f"Divide each micro-batch loss by the number of "
                      f"micro-batches (k = {k}), not by the number of examples ({n}).", value=k * expected / n),
        Misconception("divided by the wrong k: the micro-batch size", f"Divide each micro-batch loss by the "
                      f"number of micro-batches (k = {k}), not by the micro-batch size ({n // k}).",
                      value=k * expected / (n // k)),
        Misconception("zero_grad inside the micro-batch loop", "Your result is the last micro-batch's gradient "
                      "alone: resetting before every micro-batch throws away the ones before it. Reset once, "
                      "before the loop.", value=last_micro_batch / k),
        Misconception("did not reset .grad before accumulating", "The model arrived with stale gradients in "
                      ".grad and your result includes them: call model.zero_grad() once, before the first "
                      "micro-batch.", value=case.stale[index] + expected),
    ]


def _as_gradient_dict(answer, model: nn.Module, what: str) -> dict:
    names = [name for name, _ in model.named_parameters()]
    if type(answer) is not dict or not all(type(key) is str for key in answer) or sorted(answer) != sorted(names):
        keys = sorted(map(str, answer)) if isinstance(answer, dict) else type(answer).__name__
        raise GradingFailure(f"{what} returned {keys!r:.120}; expected a dict with one gradient per parameter, "
                             f"keyed by the names of model.named_parameters(): {names}.")
    return answer


def check_accumulated_gradient(accumulated_gradient_fn, seed: int | None = None) -> None:
    """Part B: accumulated_gradient over k equal micro-batches equals the full-batch mean-loss gradient."""
    __tracebackhide__ = True
    for case in _accumulation_cases(seed):
        model = copy.deepcopy(case.model)
        for param, stale in zip(model.parameters(), case.stale):
            param.grad = stale.clone()
        what = f"accumulated_gradient(model, loss_fn, inputs, targets, k={case.k}) for {case.description}"
        answer = call_learner(accumulated_gradient_fn, model, case.loss_fn, case.inputs.clone(),
                              case.targets.clone(), case.k, what=what, may_change=True)
        if not torch.equal(_flat(model), _flat(case.model)):
            raise GradingFailure(f"{what} changed the model's parameters. Likely misconception: took an optimizer "
                                 "step. This function only computes the gradient; do not update the weights.")
        answer = _as_gradient_dict(answer, model, what)
        expected, fd = mean_loss_gradients(case.model, case.loss_fn, case.inputs, case.targets)
        size = len(case.inputs) // case.k
        last, _ = mean_loss_gradients(case.model, case.loss_fn, case.inputs[-size:], case.targets[-size:], fd=False)
        for index, (name, param) in enumerate(model.named_parameters()):
            expect_close(as_answer(answer[name], what=f"{what}[{name!r}]", shape=param.shape), expected[name],
                         what=f"{what}: the gradient of {name}", fd=fd[name],
                         misconceptions=_accumulation_mistakes(case, name, index, expected[name], last[name]))


# ---------------------------------------------------------------------------------------------- Part C

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
        else:
            assert t > 0 and not _is_empty(grads[t - 1]) and torch.allclose(grad, grads[t - 1] + new)
            labels.append(ACCUMULATED)
    return labels


def _signs(gen, shape) -> torch.Tensor:
    return torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)


def _history(gen, labels: list[str], shape: tuple[int, ...], trap: str = "", empty_as_zeros: bool = False):
    """(grad_history, fresh_history) that follows ``labels``.

    trap="growing": the fresh gradients grow elementwise (a diverging run, reset every step);
    trap="shrinking": every accumulated .grad is smaller than the one before (the fresh gradient points back).
    Either defeats telling a reset from the size of .grad.
    """
    grads, fresh, previous = [], [], None
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
        grads.append(grad)
        previous = grad
    assert reference_labels(grads, fresh) == labels
    return grads, fresh


def _random_labels(gen, length: int) -> list[str]:
    """A random reset schedule with at least one accumulated and one empty step."""
    labels = [FRESH, ACCUMULATED] + [choice(gen, list(LABELS)) for _ in range(length - 3)] + [EMPTY]
    for t in range(1, length):
        if labels[t] == ACCUMULATED and labels[t - 1] == EMPTY:  # nothing to accumulate onto: it is fresh
            labels[t] = FRESH
    return labels


def _history_cases(seed: int | None):
    if seed is None:
        six = torch.tensor(6.0, dtype=torch.float64)
        yield [six * 1, six * 2, six * 3], [six, six, six]  # the lesson: x.grad = 6, 12, 18
        gen = generator("05/grad_history/public", 0)
        yield _history(gen, [FRESH] * 5, (3,), trap="growing")
        yield _history(gen, [FRESH] + [ACCUMULATED] * 4, (2, 2), trap="shrinking")
        yield _history(gen, [EMPTY] * 4, (3,))
        yield _history(gen, [FRESH, ACCUMULATED, FRESH, ACCUMULATED, EMPTY, FRESH], (3,), empty_as_zeros=True)
        return
    gen = generator("05/grad_history", seed)
    yield _history(gen, [FRESH] * int(torch.randint(4, 7, (), generator=gen)), (choice(gen, [2, 3, 4]),),
                   trap="growing")
    yield _history(gen, [FRESH] + [ACCUMULATED] * int(torch.randint(3, 6, (), generator=gen)),
                   (choice(gen, [2, 3, 4]),), trap="shrinking")
    for zeros in (False, True):
        yield _history(gen, _random_labels(gen, int(torch.randint(5, 9, (), generator=gen))),
                       choice(gen, [(3,), (2, 3)]), empty_as_zeros=zeros)


def _label_mistake(grads: list, t: int, got: str, expected: str) -> str:
    """A likely-misconception line for the first wrong label, or ''."""
    grad, previous = grads[t], grads[t - 1] if t else None
    if expected == EMPTY and got == FRESH:
        return ("Likely misconception: took an empty .grad for a reset. .grad is None (or zeros) when step() "
                "runs only if zero_grad() ran between backward() and step(): the optimizer had nothing to apply.")
    if expected == EMPTY:
        return ("Likely misconception: missed an empty .grad. None and an all-zero tensor (what "
                "zero_grad(set_to_none=False) leaves) both mean that step() had nothing to apply.")
    if not _is_empty(previous) and not _is_empty(grad):
        grew = bool(grad.norm() > previous.norm())
        if (expected, got, grew) in ((ACCUMULATED, FRESH, False), (FRESH, ACCUMULATED, True)):
            return ("Likely misconception: judged by the size of the gradient. A fresh gradient can be larger than "
                    "the last one (a diverging run) and an accumulated one smaller (the new gradient points back). "
                    "Compare with the fresh gradient instead: .grad == fresh means reset; .grad == previous .grad "
                    "+ fresh means not reset.")
    return ""


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


EMPTY_HINT = ("\nLikely misconception: did not handle an empty .grad. When zero_grad() runs between backward() and "
              "step(), .grad is None at step time: label such a step 'empty' before comparing tensors.")


def check_diagnose_grad_history(diagnose_fn, seed: int | None = None) -> None:
    """Part C: diagnose_grad_history(grad_history, fresh_history) labels every step fresh/accumulated/empty."""
    __tracebackhide__ = True
    for number, (grads, fresh) in enumerate(_history_cases(seed), start=1):
        what = f"diagnose_grad_history(grad_history, fresh_history) for history #{number} ({len(grads)} steps)"
        answer = call_with_none_hint(diagnose_fn, [None if g is None else g.clone() for g in grads],
                                     [f.clone() for f in fresh], hint=EMPTY_HINT, what=what)
        # Exact types only: a str subclass could declare itself equal to every expected label.
        if type(answer) not in (list, tuple) or len(answer) != len(grads) or \
                not all(type(label) is str and label in LABELS for label in answer):
            raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of {len(grads)} labels, each "
                                 f"one of {', '.join(map(repr, LABELS))}.")
        expected = reference_labels(grads, fresh)
        wrong = [t for t in range(len(grads)) if answer[t] != expected[t]]
        if wrong:
            t = wrong[0]
            lines = [f"{what} is wrong at step {t}: you said {answer[t]!r}, expected {expected[t]!r}.",
                     _history_table(grads, fresh, list(answer), expected),
                     _label_mistake(grads, t, answer[t], expected[t])]
            raise GradingFailure("\n".join(line for line in lines if line))
