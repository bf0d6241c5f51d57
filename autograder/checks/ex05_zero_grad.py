"""Checks for exercise 05, gradients accumulate: the training loop, micro-batch accumulation, reading a .grad history.

Models are small float64 modules; the loss of Parts A and B is a mean over the examples. Every check's docstring states
the domain its part allows, and each corner of it is a fixed case that runs first at every seed (k = 1, micro-batches of
one example, a single update or micro-batch, a model that arrives without gradients, an empty or one-step history...);
the seed varies only the rest. Every case is a :func:`~autograder.checking.trial`, and each misconception below shows in
at least two cases of the visible test and of the hidden test, so that it can be named; a case never names a mistake
whose value there is the right answer (:func:`~autograder.misconceptions.armed`).
"""

from __future__ import annotations

import contextlib
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
from .shared import read_losses

FRESH, ACCUMULATED, EMPTY = "fresh", "accumulated", "empty"
LABELS = (FRESH, ACCUMULATED, EMPTY)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([param.detach().reshape(-1) for param in model.parameters()])


def _model_words(sizes: tuple[int, ...]) -> str:
    """What random_mlp(gen, sizes) builds, in words: one Linear layer, or Linear layers with tanh between them."""
    if len(sizes) == 2:
        return f"nn.Sequential(nn.Linear({sizes[0]}, {sizes[1]})) (one linear layer)"
    return f"an MLP of widths {sizes} (nn.Linear layers with tanh between them)"


def _layout(model: nn.Module) -> str:
    return ", ".join(f"{name} {tuple(param.shape)}" for name, param in model.named_parameters())


def _looks_like(candidates: list[tuple[Misconception, torch.Tensor]]) -> list:
    """A symptom per (mistake, the value it produces); expect_close arms only those that differ from the right
    answer and from each other (:func:`autograder.misconceptions.armed`)."""
    return [mistake.looks_like(value) for mistake, value in candidates]


# ---------------------------------------------------------------------------------------------- Parts A and B

STALE = Misconception(
    "did not reset .grad before accumulating",
    "The model arrived with stale gradients in .grad and your result includes them: reset once, before the first "
    "micro-batch (and, in a training loop, again after every update).")
RESET_PER_MICRO_BATCH = Misconception(
    "zero_grad inside the micro-batch loop",
    "Resetting before every micro-batch throws away the ones before it: only the last micro-batch's gradient is "
    "left. Reset once per update, never between the micro-batches of one update.")
ONE_BACKWARD = Misconception(
    "one backward on the whole batch where micro-batches are asked for",
    "The point of micro-batches is that only one of them is in memory at a time: run forward and backward once per "
    "micro-batch and let .grad add them up.")
STEPPED = Misconception(
    "took an optimizer step",
    "This function only computes the gradient: leave the parameters as they are (no optimizer, no update).")


def _with_stale(model: nn.Module, stale: list[torch.Tensor] | None) -> nn.Module:
    """A copy of ``model`` whose .grad holds ``stale`` (gradients left over from earlier work; None: no gradients)."""
    model = copy.deepcopy(model)
    for param, grad in zip(model.parameters(), stale or ()):
        param.grad = grad.clone()
    return model


NOT_IN_PLACE = Misconception(
    "parameters replaced instead of updated in place",
    "p.data = p.data - lr * p.grad (or model.weight = nn.Parameter(...)) gives the model new tensors: an optimizer "
    "or anyone else holding the old ones never sees the update. Change the parameters themselves: optimizer.step(), "
    "or p -= lr * p.grad under torch.no_grad().")


def _storage(model: nn.Module) -> list[tuple[int, int]]:
    """Which tensor object, and which memory, every parameter is."""
    return [(id(param), param.untyped_storage().data_ptr()) for param in model.parameters()]


def _expect_in_place(model: nn.Module, before: list[tuple[int, int]], what: str) -> None:
    __tracebackhide__ = True
    names = [name for name, _ in model.named_parameters()]
    moved = [name for name, was, now in zip(names, before, _storage(model)) if was != now]
    if moved or len(names) != len(before):
        raise _proven(f"{what} replaced the parameter tensor(s) {', '.join(moved) or 'of the model'} instead of "
                      "updating them in place.", NOT_IN_PLACE)


@contextlib.contextmanager
def _recording_forwards(model: nn.Module):
    """The inputs of every forward pass through ``model`` while the block runs, seen at its first layer (so that
    ``model.forward(x)``, which skips the model's own hooks, is seen too)."""
    seen: list[torch.Tensor] = []
    first = next(module for module in model.modules() if not list(module.children()))
    handle = first.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone())
                                              if args and isinstance(args[0], torch.Tensor) else None)
    try:
        yield seen
    finally:
        handle.remove()


def _same_pieces(seen: list[torch.Tensor], pieces: list[torch.Tensor]) -> bool:
    return len(seen) == len(pieces) and all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(seen, pieces))


def _expect_backward_runs(routes: Routes, wanted: int, whole: int, what: str) -> None:
    """``wanted`` backward runs (one per micro-batch); ``whole`` runs is one backward per update or whole batch."""
    __tracebackhide__ = True
    if routes.backward_runs == wanted:
        return
    message = (f"{what} ran backward {routes.backward_runs} time(s); {wanted} micro-batches take {wanted} backward "
               "runs, one each.")
    if routes.backward_runs == whole:
        raise _proven(message, ONE_BACKWARD)
    raise GradingFailure(message)


# ---------------------------------------------------------------------------------------------- Part A

NOT_DIVIDED = Misconception(
    "did not divide by k",
    "Each micro-batch loss is already a mean over its own examples, so k backward calls add up to k times the "
    "gradient of the group's mean loss: divide each micro-batch loss by k = accumulate_every before backward().")
STEP_EVERY_MICRO_BATCH = Misconception(
    "stepped after every micro-batch",
    "Accumulating means one update per k micro-batches: call step() only when a group of k is complete.")
OFF_BY_ONE = Misconception(
    "stepped after the first micro-batch of each group (off by one)",
    "With enumerate starting at 0, `i % k == 0` is true at the FIRST micro-batch of a group. Step when "
    "(i + 1) % k == 0, i.e. after the k-th.")
ZERO_GRAD_BEFORE_STEP = Misconception(
    "zero_grad between backward and step",
    "The parameters never moved: a reset just before step() throws the accumulated gradient away before the "
    "update can use it. Reset right after step() instead.")
NO_RESET_AFTER_STEP = Misconception(
    "no reset after the update",
    "Without a reset after each step(), the next group's gradients are added to the last group's: every update "
    "after the first uses the sum of all gradients so far. Reset after every step().")
CHANGED_MICRO_BATCHES = Misconception(
    "changed the list of micro-batches",
    "The caller may reuse micro_batches (the next epoch runs over the same list): read it, never pop from it, "
    "append to it or reorder it. A for loop over the list, or over a copy (list(micro_batches)), leaves it as it "
    "was.")
LOSS_SUMMED = Misconception(
    "update loss summed over the group instead of averaged",
    "The loss of an update is the mean of its k micro-batch losses (the loss its gradient belongs to): add "
    "loss.item() / k, not loss.item().")


@dataclass
class LoopCase:
    description: str
    model: nn.Module
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]]
    lr: float
    k: int
    stale: list[torch.Tensor] | None  # what .grad holds when the loop is called (None: no gradients at all)

    @property
    def updates(self) -> int:
        return len(self.micro_batches) // self.k


def _loop_case(gen, sizes: tuple[int, ...], k: int, updates: int, size: int, lr: float,
               stale: bool = True) -> LoopCase:
    model = random_mlp(gen, sizes)
    micro_batches = [(uniform(gen, (size, sizes[0])), uniform(gen, (size, sizes[-1]))) for _ in range(k * updates)]
    grads = [uniform(gen, tuple(param.shape)) for param in model.parameters()] if stale else None
    description = (f"{_model_words(sizes)}, {k * updates} micro-batch(es) of {size} example(s)"
                   + ("" if stale else ", arriving with .grad None (no gradients yet)"))
    return LoopCase(description, model, micro_batches, lr, k, grads)


def _loop_corners():
    """Part A's corners, the same at every seed: k = 1 (a step per micro-batch), micro-batches of one example, a
    single update, and a model that arrives with no gradients (.grad None)."""
    gen = generator("05/train/corners", 0)
    yield _loop_case(gen, (2, 1), k=1, updates=3, size=2, lr=0.1)
    yield _loop_case(gen, (3, 2), k=3, updates=2, size=1, lr=0.1)
    yield _loop_case(gen, (2, 3, 1), k=2, updates=1, size=3, lr=0.1)
    yield _loop_case(gen, (3, 2), k=2, updates=2, size=2, lr=0.1, stale=False)


def _loop_cases(grading_seed: int | None):
    """The corners, then two cases, each with stale gradients and at least two updates: every mistake shows in
    both."""
    yield from _loop_corners()
    if grading_seed is None:
        gen = generator("05/train/public", 0)
        yield _loop_case(gen, (3, 1), k=4, updates=2, size=2, lr=0.1)
        yield _loop_case(gen, (2, 3, 2), k=2, updates=3, size=3, lr=0.1)
        return
    gen = generator("05/train", grading_seed)
    for _ in range(2):
        sizes = choice(gen, [(3, 1), (2, 3, 1), (4, 2), (3, 4, 2)])
        yield _loop_case(gen, sizes, k=choice(gen, [2, 3, 4]), updates=choice(gen, [2, 3]),
                         size=choice(gen, [2, 3]), lr=round(float(uniform(gen, (), 0.05, 0.2)), 3))


def reference_loop(case: LoopCase, *, scale: bool = True, reset: str = "per update", step: str = "after k"):
    """(parameters after the loop, the loss of every update) of SGD with gradient accumulation.

    The defaults are the right loop; the variants are the mistakes the check recognises: ``scale=False`` (no 1/k),
    ``reset`` "per micro-batch" or "after steps only" (stale gradients kept), ``step`` "every micro-batch" or
    "off by one" (at the first micro-batch of each group).
    """
    model = _with_stale(case.model, case.stale)
    optimizer = torch.optim.SGD(model.parameters(), lr=case.lr)
    if reset != "after steps only":
        optimizer.zero_grad()
    reset_after_step = reset != "once"
    losses, running = [], 0.0
    for i, (inputs, targets) in enumerate(case.micro_batches):
        if reset == "per micro-batch":
            optimizer.zero_grad()
        loss = F.mse_loss(model(inputs), targets)
        (loss / case.k if scale else loss).backward()
        running += loss.item() / case.k
        due = {"after k": (i + 1) % case.k == 0, "every micro-batch": True, "off by one": i % case.k == 0}[step]
        if due:
            optimizer.step()
            if reset_after_step:
                optimizer.zero_grad()
        if (i + 1) % case.k == 0:
            losses.append(running)
            running = 0.0
    return _flat(model), torch.tensor(losses, dtype=torch.float64)


def _run_loop(train_fn, case: LoopCase) -> None:
    __tracebackhide__ = True
    model = _with_stale(case.model, case.stale)
    what = f"train(model, micro_batches, lr={case.lr:g}, accumulate_every={case.k}) for {case.description}"
    routes, batches, before = Routes(), list(case.micro_batches), _storage(model)
    with _recording_forwards(model) as seen:
        losses = call_learner(train_fn, model, batches, case.lr, case.k, what=what, routes=routes,
                              may_change=["model"])
    if len(batches) != len(case.micro_batches) or any(a is not b for a, b in zip(batches, case.micro_batches)):
        raise _proven(f"{what} changed the list micro_batches: it held {len(case.micro_batches)} pairs, it now "
                      f"holds {len(batches)}" + ("." if len(batches) != len(case.micro_batches) else
                                                  ", not the same ones in the same order."), CHANGED_MICRO_BATCHES)
    _expect_in_place(model, before, what)
    _expect_backward_runs(routes, len(case.micro_batches), case.updates, what)
    if not _same_pieces(seen, [inputs for inputs, _ in case.micro_batches]):
        count, size = len(case.micro_batches), len(case.micro_batches[0][0])
        raise GradingFailure(f"{what} ran the model {len(seen)} time(s), on batches of {[len(s) for s in seen]} "
                             f"examples; the part asks for one forward per micro-batch, on each micro-batch's "
                             f"inputs in order ({count} forwards of {size}).")
    expected, expected_losses = reference_loop(case)
    symptoms = _looks_like([(ZERO_GRAD_BEFORE_STEP, _flat(case.model)),
                                    (NOT_DIVIDED, reference_loop(case, scale=False)[0]),
                                    (NO_RESET_AFTER_STEP, reference_loop(case, reset="once")[0]),
                                    (STALE, reference_loop(case, reset="after steps only")[0]),
                                    (RESET_PER_MICRO_BATCH, reference_loop(case, reset="per micro-batch")[0]),
                                    (STEP_EVERY_MICRO_BATCH, reference_loop(case, step="every micro-batch")[0]),
                                    (OFF_BY_ONE, reference_loop(case, step="off by one")[0])])
    expect_close(_flat(model), expected, what=f"{what}: the trained parameter vector", source="reference loop",
                 extra=f"  parameters, flattened in this order: {_layout(model)}", symptoms=symptoms)
    expect_close(read_losses(losses, case.updates, what), expected_losses, source="reference loop",
                 what=f"{what}: the returned losses (one per update: the mean of its micro-batch losses)",
                 symptoms=[LOSS_SUMMED.looks_like(case.k * expected_losses)])


@check
def check_train(train_fn, grading_seed: int | None = None) -> None:
    """Part A: train(model, micro_batches, lr, accumulate_every) takes one plain SGD step per k micro-batches on
    their mean loss (one forward and one backward per micro-batch, in order; stale gradients dropped first), trains
    ``model`` in place (the same parameter tensors; the only argument it changes) and returns the loss of every
    update as a Python float.

    Domain: model a float64 nn.Module whose parameters' .grad is None or stale; micro_batches a list of
    (inputs, targets) pairs, all of one size >= 1, whose length is a multiple of k = accumulate_every >= 1; lr > 0.
    Corners at every seed (:func:`_loop_corners`): k = 1, micro-batches of one example, a single update, a model
    without gradients; then two cases with stale gradients and two or more updates (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    for case in _loop_cases(grading_seed):
        with trial():
            _run_loop(train_fn, case)


# ---------------------------------------------------------------------------------------------- Part B

EQUAL_WEIGHTS = Misconception(
    "divided by k although the micro-batches differ in size",
    "Dividing every micro-batch loss by k is exact only for equal micro-batches. The full-batch mean weights each "
    "micro-batch mean by its share of the examples: multiply micro-batch j's loss by n_j / n.")
NOT_SCALED = Misconception(
    "micro-batch losses not scaled",
    "Each micro-batch loss is a mean over its own examples, and .grad adds them all up: weight micro-batch j's "
    "loss by n_j / n so that the sum is the full-batch mean.")
DIVIDED_BY_N = Misconception(
    "divided by the batch size",
    "Each micro-batch loss is already a mean; dividing it by n shrinks it twice. Weight it by n_j / n, its share of "
    "the examples.")
DIVIDED_BY_SIZE = Misconception(
    "divided by the micro-batch size",
    "Each micro-batch loss is already a mean over its n_j examples; dividing by n_j again gives small micro-batches "
    "the largest weight. Weight it by n_j / n.")
NOT_IN_GRAD = Misconception(
    "full-batch gradient not left in .grad",
    "The part asks for the full-batch gradient accumulated in .grad (the caller may step with it next) and for "
    "copies of it in the dict: let backward() on each scaled micro-batch loss add into .grad (torch.autograd.grad "
    "never writes .grad), and do not reset it after taking the copies.")
SUMMED_OVER_OUTPUTS = Misconception(
    "summed the loss, then divided by the number of examples only",
    "loss_fn's mean divides by every element it averages: for F.mse_loss that is examples x outputs. A sum divided "
    "by n alone is as many times too large as the model has outputs. Call loss_fn as given and weight its mean by "
    "the micro-batch's share n_j / n of the examples.")
IGNORED_SIZES = Misconception(
    "micro-batches not of the given sizes",
    "The sizes are what fits in memory: cut the batch, in order, into pieces of exactly those sizes "
    "(inputs.split(sizes)).")


@dataclass
class AccumulationCase:
    description: str
    model: nn.Module
    loss_fn: Callable
    inputs: torch.Tensor
    targets: torch.Tensor
    sizes: list[int]
    stale: list[torch.Tensor] | None  # what .grad holds when the function is called (None: no gradients at all)


def _accumulation_case(gen, layers: tuple[int, ...], sizes: list[int], classify: bool,
                       stale: bool = True) -> AccumulationCase:
    model, examples = random_mlp(gen, layers), sum(sizes)
    if classify:  # class indices for a cross-entropy loss
        loss_fn, targets = F.cross_entropy, torch.randint(layers[-1], (examples,), generator=gen)
    else:
        loss_fn, targets = F.mse_loss, uniform(gen, (examples, layers[-1]))
    grads = [uniform(gen, tuple(param.shape)) for param in model.parameters()] if stale else None
    description = (f"{_model_words(layers)}, sizes={sizes}, loss_fn = F.{loss_fn.__name__}"
                   + ("" if stale else ", arriving with .grad None (no gradients yet)"))
    return AccumulationCase(description, model, loss_fn, uniform(gen, (examples, layers[0])), targets, sizes, grads)


def _unequal_sizes(gen) -> list[int]:
    """3 or 4 micro-batch sizes from 1 to 6, not all equal."""
    while True:
        sizes = [int(v) for v in torch.randint(1, 7, (choice(gen, [3, 4]),), generator=gen)]
        if len(set(sizes)) > 1:
            return sizes


def _accumulation_corners():
    """Part B's corners, the same at every seed: one micro-batch holding the whole batch, equal sizes (where 1/k is
    right), and micro-batches of one example in a model that arrives with no gradients (.grad None)."""
    gen = generator("05/accumulate/corners", 0)
    yield _accumulation_case(gen, (3, 2), [5], classify=False)
    yield _accumulation_case(gen, (2, 3, 3), [3, 3], classify=True)
    yield _accumulation_case(gen, (3, 2), [1, 4, 1], classify=False, stale=False)


def _accumulation_cases(grading_seed: int | None):
    """The corners, then two cases, both with unequal micro-batches and stale gradients, one with each loss."""
    yield from _accumulation_corners()
    if grading_seed is None:
        gen = generator("05/accumulate/public", 0)
        yield _accumulation_case(gen, (3, 2), [6, 4, 2], classify=False)  # the lesson's sizes
        yield _accumulation_case(gen, (3, 4, 3), [2, 5, 3], classify=True)
        return
    gen = generator("05/accumulate", grading_seed)
    for classify in (False, True):
        layers = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), choice(gen, [2, 3]))
        yield _accumulation_case(gen, layers, _unequal_sizes(gen), classify)


def _as_gradient_dict(answer, model: nn.Module, what: str) -> dict:
    __tracebackhide__ = True
    names = [name for name, _ in model.named_parameters()]
    if type(answer) is not dict or not all(type(key) is str for key in answer) or sorted(answer) != sorted(names):
        keys = sorted(map(str, answer)) if isinstance(answer, dict) else type(answer).__name__
        raise GradingFailure(f"{what} returned {keys!r:.120}; expected a dict with one gradient per parameter, "
                             f"keyed by the names of model.named_parameters(): {names}.")
    return answer


def _elements_per_example(case: AccumulationCase) -> int:
    """How many elements loss_fn averages over per example: the outputs for MSE, 1 for cross-entropy (one target
    class per example)."""
    return case.targets[0].numel()


def _micro_batch_gradients(case: AccumulationCase) -> list[dict[str, torch.Tensor]]:
    pieces = zip(case.inputs.split(case.sizes), case.targets.split(case.sizes))
    return [mean_loss_gradients(case.model, case.loss_fn, x, y, fd=False)[0] for x, y in pieces]


def _run_accumulation(accumulated_gradient_fn, case: AccumulationCase) -> None:
    __tracebackhide__ = True
    model = _with_stale(case.model, case.stale)
    what = f"accumulated_gradient(model, loss_fn, inputs, targets, sizes) for {case.description}"
    routes = Routes()
    with _recording_forwards(model) as seen:
        answer = call_learner(accumulated_gradient_fn, model, case.loss_fn, case.inputs, case.targets, case.sizes,
                              what=what, routes=routes, may_change=["model"])
    for (name, param), original in zip(model.named_parameters(), case.model.parameters()):
        if not torch.equal(param.detach(), original.detach()) or not param.requires_grad:
            raise _proven(f"{what} changed the parameter {name} (only its .grad may change).", STEPPED)
    _expect_backward_runs(routes, len(case.sizes), 1, what)
    if not _same_pieces(seen, list(case.inputs.split(case.sizes))):
        sizes = [len(inputs) for inputs in seen]
        order = " (those sizes, but not the pieces inputs.split(sizes) gives, in order)" if sizes == case.sizes else ""
        raise _proven(f"{what} ran the model on micro-batches of {sizes} examples{order}; the sizes asked for are "
                      f"{case.sizes}.", IGNORED_SIZES)
    answer = _as_gradient_dict(answer, model, what)
    expect_no_alias(answer, {"model": model}, what=f"{what}: the returned dict")
    expected, fd = mean_loss_gradients(case.model, case.loss_fn, case.inputs, case.targets)
    micro, n = _micro_batch_gradients(case), len(case.inputs)
    for index, (name, param) in enumerate(model.named_parameters()):
        right, parts = expected[name], [g[name] for g in micro]
        symptoms = _looks_like([(EQUAL_WEIGHTS, sum(parts) / len(parts)), (NOT_SCALED, sum(parts)),
                                (DIVIDED_BY_N, sum(parts) / n),
                                (DIVIDED_BY_SIZE, sum(g / size for g, size in zip(parts, case.sizes))),
                                (RESET_PER_MICRO_BATCH, parts[-1] * case.sizes[-1] / n),
                                (SUMMED_OVER_OUTPUTS, right * _elements_per_example(case)),
                                (STALE, (0 if case.stale is None else case.stale[index]) + right)])
        expect_close(as_answer(answer[name], what=f"{what}[{name!r}]", shape=param.shape), right,
                     what=f"{what}: the gradient of {name}", fd=fd[name], symptoms=symptoms)
    index_of = {name: index for index, (name, _) in enumerate(model.named_parameters())}
    for name, param in model.named_parameters():  # the gradient stays in .grad, and the copy is a copy of it
        left = param.grad
        if left is None or left.shape != param.shape or not torch.allclose(left.detach(), expected[name]):
            stale = case.stale is not None and left is not None and torch.equal(left, case.stale[index_of[name]])
            held = "None" if left is None else ("zeros" if not bool(left.any()) else
                                                "the stale gradient it arrived with" if stale else "something else")
            raise _proven(f"{what} returned the right gradients, but afterwards {name}.grad holds {held}: the part "
                          "asks for the full-batch gradient accumulated in .grad, and for copies of it.", NOT_IN_GRAD)


@check
def check_accumulated_gradient(accumulated_gradient_fn, grading_seed: int | None = None) -> None:
    """Part B: accumulated_gradient over micro-batches of the given (unequal) sizes, cut in order, one forward and
    backward each, no update; afterwards .grad holds the full-batch mean-loss gradient, and the dict returned holds
    copies of it.

    Domain: model a float64 nn.Module whose parameters' .grad is None or stale; loss_fn a mean loss (F.mse_loss,
    F.cross_entropy); inputs and targets of n >= 1 examples; sizes positive ints adding up to n, k = len(sizes) >= 1,
    equal or not. Corners at every seed (:func:`_accumulation_corners`): one micro-batch of the whole batch, equal
    sizes, micro-batches of one example in a model without gradients; then two cases with unequal sizes and stale
    gradients, one per loss (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    for case in _accumulation_cases(grading_seed):
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
NOTHING_TO_ADD_ONTO = Misconception(
    "'accumulated' with nothing before it to add onto",
    "At step 0, or right after an empty step, .grad held nothing before this step's backward(), so it equals the "
    "fresh gradient whether or not anyone reset it: the part labels such a step 'fresh'. 'accumulated' needs a "
    "previous .grad that is not empty (and step 0 has no previous step: grad_history[-1] is the LAST one).")
ADDED_TO_NONE = Misconception(
    "added to a None .grad",
    "The step before this one was empty with .grad None, and None + tensor raises a TypeError. Nothing was left in "
    ".grad to add onto, so a step after an empty one can only be 'fresh': look at the previous .grad (is it empty?) "
    "before you compute anything with it.")
NON_ZERO_CALLED_EMPTY = Misconception(
    "a non-zero .grad labelled empty",
    "'empty' means the step had nothing to apply: .grad is None or every element is exactly 0. A gradient whose "
    "entries cancel (they sum to 0) or that is tiny (near a minimum: allclose to zeros) still moves the weights. "
    "Ask whether any element is non-zero, not whether the sum or the size is about zero.")
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


def _exact_history(fresh_values: list[list[float]], labels: list[str]) -> History:
    """A history without round-off, from literal fresh gradients (so that sums come out exactly as written)."""
    fresh = [torch.tensor(values, dtype=torch.float64) for values in fresh_values]
    grads, previous = [], None
    for label, new in zip(labels, fresh):
        grad = {FRESH: new.clone(), ACCUMULATED: None if previous is None else previous + new,
                EMPTY: torch.zeros_like(new)}[label]
        grads.append(grad)
        previous = grad
    if reference_labels(grads, fresh) != labels:
        raise CourseBug("a corner .grad history does not follow its labels.")
    return History(grads, fresh, grads)


def _history_corners():
    """Part C's corners, the same at every seed: the lesson's 0-d history (x.grad = 6, 12, 18), an empty history (no
    steps), one step, a history that starts with an empty .grad (None), an all-zero step followed by a fresh one
    (which 0 + fresh also matches: 'fresh' by the part's rule), gradients whose entries cancel (sum exactly 0, not
    empty) and a tiny gradient (1e-10, allclose to zeros, not empty)."""
    six = torch.tensor(6.0, dtype=torch.float64)
    lesson = [six * 1, six * 2, six * 3]
    yield History(lesson, [six, six, six], lesson)
    yield History([], [], [])
    gen = generator("05/grad_history/corners", 0)
    yield _history(gen, [FRESH], (3,))
    yield _history(gen, [EMPTY, FRESH, ACCUMULATED], (2,))
    yield _history(gen, [FRESH, EMPTY, FRESH, ACCUMULATED], (3,), empty_as_zeros=True)
    yield _exact_history([[0.75, -0.75], [0.5, -0.5], [-1.5, 1.5]], [FRESH, ACCUMULATED, FRESH])
    yield _exact_history([[0.5, -1.0, 1.5], [0.25, 0.5, -0.5], [3e-10, -2e-10, 1e-10]], [FRESH, ACCUMULATED, FRESH])


def _history_cases(grading_seed: int | None):
    """The corners, then growing and shrinking traps (size), two histories with None and two with zeros (empty
    .grad), every one with round-off (==): each mistake shows in two histories."""
    yield from _history_corners()
    if grading_seed is None:
        gen = generator("05/grad_history/public", 0)
        yield _history(gen, [FRESH] * 5, (3,), trap="growing")
        yield _history(gen, [FRESH] + [ACCUMULATED] * 4, (2, 2), trap="shrinking")
        yield _history(gen, [EMPTY] * 4, (3,))
        yield _history(gen, [FRESH, ACCUMULATED, EMPTY, FRESH, EMPTY], (2,))
        yield _history(gen, [FRESH, ACCUMULATED, FRESH, ACCUMULATED, EMPTY, FRESH], (3,), empty_as_zeros=True)
        yield _history(gen, [EMPTY, FRESH, EMPTY], (2, 2), empty_as_zeros=True)
        return
    gen = generator("05/grad_history", grading_seed)
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
    if type(answer) is not list or len(answer) != len(grads) or \
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


def _raises_after_none(diagnose_fn, history: History, what: str) -> str | None:
    """Where the learner raised on a history: the shortest start of it (itself a history) on which it raises. If its
    last step follows a None .grad, is not None itself, and the same start with zeros for None runs, what that shows
    (the step after a None, not the None, is the trouble); otherwise None. Observed, so named at once."""
    for length in range(1, len(history.grads) + 1):
        start = History(history.grads[:length], history.fresh[:length], history.exact[:length])
        if _behaviour(diagnose_fn, start, what) != "raised":
            continue
        t = length - 1
        if t == 0 or history.grads[t - 1] is not None or history.grads[t] is None:
            return None
        as_zeros = start.with_empties(as_zeros=True)
        if as_zeros is None or _behaviour(diagnose_fn, as_zeros, what) == "raised":
            return None
        return (f"  Your function runs on steps 0 to {t - 1} of this history (step {t - 1} is None) and raises "
                f"once step {t} is added, the step after the None; with zeros in place of the None it runs.")
    return None


def _something_before(diagnose_fn, history: History, t: int, what: str) -> str | None:
    """The learner called step t 'accumulated' where nothing came before it (t = 0, or an empty step t - 1). Proof
    that this is why: on steps 0..t alone (t = 0), or with a non-empty fresh .grad at step t - 1 that is half the
    size of step t's and points the other way (so that judging by size would still say 'accumulated'), the learner
    calls step t 'fresh'. The hint, if so; else None."""
    if t == 0:
        variant, shown = History(history.grads[:1], history.fresh[:1], history.exact[:1]), \
            "  On step 0 alone your function says 'fresh': it added what grad_history[-1], the LAST step, held."
    else:
        before = -0.5 * history.fresh[t]
        variant = History(history.grads[:t - 1] + [before, history.grads[t]],
                          history.fresh[:t - 1] + [before, history.fresh[t]],
                          history.exact[:t - 1] + [before, history.exact[t]])
        shown = (f"  The same steps with a non-empty .grad at step {t - 1} (half of step {t}'s, pointing the other "
                 f"way): your function calls step {t} 'fresh'. So the empty .grad before it is what made it say "
                 "'accumulated'.")
    return shown if _behaviour(diagnose_fn, variant, what) == "right" else None


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
        after_none = _raises_after_none(diagnose_fn, history, what)
        if after_none is not None:
            raise _proven(f"{failure.message}\n{after_none}", ADDED_TO_NONE) from None
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
    if answer[t] == EMPTY:  # observed: a step with a non-zero element called empty
        raise _proven(f"{message}\n  Step {t}'s .grad has a non-zero element: it is not empty.", NON_ZERO_CALLED_EMPTY)
    if (answer[t], expected[t]) == (ACCUMULATED, FRESH) and (t == 0 or _is_empty(grads[t - 1])):
        shown = _something_before(diagnose_fn, history, t, what)
        if shown is not None:
            raise _proven(f"{message}\n{shown}", NOTHING_TO_ADD_ONTO)
    raise GradingFailure(message, suspects=(BY_SIZE,) if _by_size(grads, t, answer[t], expected[t]) else ())


@check
def check_diagnose_grad_history(diagnose_fn, grading_seed: int | None = None) -> None:
    """Part C: diagnose_grad_history(grad_history, fresh_history) returns a list of one label per step,
    fresh/accumulated/empty, comparing with a tolerance and leaving the histories unchanged.

    Domain: two lists of equal length T >= 0; fresh_history[t] a float64 tensor (any shape, 0-d included, one shape
    per history), grad_history[t] None or a tensor of that shape; "empty" is None or every element exactly 0 (a sum
    of 0 or a tiny gradient is not empty); "accumulated" needs t > 0 and a non-empty grad_history[t - 1], so a step
    after an empty one that equals its fresh gradient is "fresh" (the part's rule: then every step fits exactly one
    label); the log carries round-off of relative size 1e-10. Corners at every seed (:func:`_history_corners`): the
    lesson's 0-d history, T = 0, T = 1, a history starting with None, zeros followed by a fresh step, entries that
    cancel, a 1e-10 gradient; then histories that defeat judging by size, with None and with zeros for empty steps
    (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    for number, history in enumerate(_history_cases(grading_seed), start=1):
        with trial():
            _run_history(diagnose_fn, number, history)
