"""Checks for exercise 05, Parts A and B: an accumulating training loop over a ragged epoch of padded sequences
(Part A), and where zero_grad() sat in a run, read from a float32 log of its weights (Part B); also the helpers Part C
(:mod:`.duel`) shares with them.

Every check's docstring states the domain its part allows, and each corner of it is a fixed case that runs first at
every seed (k = 1, a last group of one micro-batch, a micro-batch of padding only, a model that arrives without
gradients; an empty log, a run that never moved, weights in the hundreds...); the seed varies only the rest. Every
case is a :func:`~autograder.checking.trial`, and each misconception below shows in at least two cases of the
visible test and of the hidden test, or is observed directly (a variant of the same case on which the answer is
right), so that it can be named; a case never names a mistake whose value there is the right answer
(:func:`~autograder.misconceptions.armed`).
"""
from __future__ import annotations

import contextlib
import copy
import functools
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

from ...checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Routes,
    call_learner,
    check,
    expect_close,
    fmt,
    trial,
)
from ...checking import proven_failure as _proven
from ..cases import case_stream, randint, random_mlp
from ..shared import read_losses

Tensor = torch.Tensor

#: The target of a padded position: token_loss leaves it out (F.cross_entropy's ignore_index).
PAD = -100


def token_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """The notebook's token_loss: the mean cross-entropy over the counted tokens (targets != PAD) of padded
    sequences; nan for a batch without a counted token (a mean over nothing)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD)


def _flat(model: nn.Module) -> Tensor:
    return torch.cat([param.detach().reshape(-1) for param in model.parameters()])


def _layout(model: nn.Module) -> str:
    return ", ".join(f"{name} {tuple(param.shape)}" for name, param in model.named_parameters())


# ---------------------------------------------------------------------------------------------- Part A

STALE = Misconception(
    "did not reset .grad before accumulating",
    "The model arrived with stale gradients in .grad and your first update includes them: reset once, before the "
    "first micro-batch (and again after every update).",
    "What did .grad hold before your first backward()?")
RESET_PER_MICRO_BATCH = Misconception(
    "zero_grad inside the micro-batch loop",
    "Resetting before every micro-batch throws away the ones before it: only the last micro-batch's gradient is "
    "left. Reset once per update, never between the micro-batches of one update.",
    "How many micro-batches' gradients are still in .grad when step() runs?")
STEP_EVERY_MICRO_BATCH = Misconception(
    "stepped after every micro-batch",
    "Accumulating means one update per group of micro-batches: call step() only when a group is complete (or the "
    "epoch ends).",
    "How many updates should a group of micro-batches make?")
ZERO_GRAD_BEFORE_STEP = Misconception(
    "zero_grad between backward and step",
    "The parameters never moved: a reset just before step() throws the accumulated gradient away before the update "
    "can use it. Reset right after step() instead.",
    "What does .grad hold at the moment step() reads it?")
CHANGED_MICRO_BATCHES = Misconception(
    "changed the micro-batches' tensors",
    "The loader may hand out the same tensors again next epoch: read the inputs and targets, never write into them.",
    "Which of your lines writes into a tensor the loader gave you?")
LOOKED_AHEAD = Misconception(
    "looked ahead in the stream",
    "The loader hands out the next micro-batch only once the last one's forward and backward have run (only one "
    "fits in memory), so a group's token count is known only after its last micro-batch. Backpropagate what does "
    "not need that count, and apply the count to the accumulated .grad once it is known, before step().",
    "When you ask the loader for micro-batch j + 1, has micro-batch j's backward run yet?")
RUNNING_SHARES = Misconception(
    "micro-batches weighted by the tokens seen so far in their group",
    "c_j / (c_1 + ... + c_j) is micro-batch j's share of the tokens seen so far, not of its group's: the earlier "
    "micro-batches weigh too much. The group's count is known only at its end: divide there.",
    "When micro-batch j is weighted, which tokens of its group are not counted yet?")
NOT_DIVIDED = Misconception(
    "token sums accumulated but never divided by the group's count",
    "Backpropagating each micro-batch's token sum (its mean times c_j) accumulates the gradient of the group's "
    "token sum: it still has to be divided by the group's count C before step().",
    "What is the gradient of a sum of C token losses, compared with that of their mean?")
NOT_IN_PLACE = Misconception(
    "parameters replaced instead of updated in place",
    "p.data = p.data - lr * p.grad (or model.weight = nn.Parameter(...)) gives the model new tensors: an optimizer "
    "or anyone else holding the old ones never sees the update. Change the parameters themselves: optimizer.step(), "
    "or p -= lr * p.grad under torch.no_grad().",
    "After your update, are the model's parameters the same tensor objects, in the same memory, as before?")
ONE_BACKWARD = Misconception(
    "one backward per group where one per micro-batch is asked for",
    "Only one micro-batch fits in memory: run forward and backward once per micro-batch and let .grad add them up.",
    "How many micro-batches were in memory at once in your loop?")
EQUAL_WEIGHTS = Misconception(
    "every micro-batch weighted the same (its mean times 1/k)",
    "Dividing each micro-batch's mean by k (or by the group's number of micro-batches) is exact only when every "
    "micro-batch holds as many counted tokens. The group's token mean weights micro-batch j's mean by c_j / C: its "
    "counted tokens over the group's.",
    "Do the micro-batches of a group hold the same number of counted tokens?")
SEQUENCE_WEIGHTS = Misconception(
    "micro-batches weighted by their number of sequences",
    "token_loss is a mean over counted tokens, not over sequences: a sequence of 4 tokens counts four times as much "
    "as a sequence of 1. Weight micro-batch j's mean by its counted tokens over the group's.",
    "What does token_loss average over: sequences, or tokens?")
PADDING_COUNTED = Misconception(
    "padded positions counted in the weights",
    "Padded positions (target PAD) are no part of any mean: count only the targets that are not PAD when you weight "
    "a micro-batch.",
    "Which positions does token_loss leave out of its mean, and did your count leave them out too?")
NOT_SCALED = Misconception(
    "micro-batch losses not scaled",
    "Each micro-batch loss is a mean over its own tokens and .grad adds them up: unscaled, the group's gradient is "
    "the sum of its micro-batch means. Weight each by its share of the group's counted tokens.",
    "What does .grad hold after backward() on several means, each unscaled?")
LAST_GROUP_DROPPED = Misconception(
    "the last, incomplete group never stepped",
    "When the number of micro-batches is not a multiple of k, the micro-batches left at the end form a last group "
    "of their own: it makes an update too (on the mean over its own tokens).",
    "What happens to the micro-batches left over at the end when their number is not a multiple of k?")
NAN_LOSS = Misconception(
    "a padding-only micro-batch's nan in the update's loss",
    "token_loss of a micro-batch without one counted token is a mean over nothing: nan. It adds nothing to the "
    "gradient (its weight c_j / C is 0), so leave it out of the loss too: skip it, or use a sum over tokens.",
    "What does token_loss return for a micro-batch without a single counted token?")
LOSS_UNWEIGHTED = Misconception(
    "update loss averaged over micro-batches instead of tokens",
    "The loss of an update is the group's token mean: the micro-batch means weighted by their counted tokens, the "
    "same weights as the gradient's.",
    "Is the loss you report the loss whose gradient your update used?")
LOSS_SUMMED = Misconception(
    "update loss summed over micro-batches",
    "Adding the micro-batch means gives k times a mean; the loss of an update is the group's token mean.",
    "What do the micro-batch means add up to, compared with the group's mean?")


@dataclass
class EpochCase:
    description: str
    model: nn.Module
    micro_batches: list[tuple[Tensor, Tensor]]
    lr: float
    k: int
    stale: list[Tensor] | None  # what .grad holds when train is called (None: no gradients at all)

    @property
    def groups(self) -> list[list[int]]:
        indices = list(range(len(self.micro_batches)))
        return [indices[start:start + self.k] for start in range(0, len(indices), self.k)]

    @property
    def counts(self) -> list[int]:
        """The counted tokens (targets != PAD) of every micro-batch."""
        return [int((targets != PAD).sum()) for _, targets in self.micro_batches]


def _with_stale(model: nn.Module, stale: list[Tensor] | None) -> nn.Module:
    """A copy of ``model`` whose .grad holds ``stale`` (gradients left over from earlier work; None: no gradients)."""
    model = copy.deepcopy(model)
    for param, grad in zip(model.parameters(), stale or ()):
        param.grad = grad.clone()
    return model


def _micro_batch(gen, features: int, classes: int, lengths: list[int], width: int) -> tuple[Tensor, Tensor]:
    """Sequences of the given lengths padded to ``width`` positions: inputs (b, width, features), targets (b, width)
    with PAD past each sequence's end (the padded inputs hold numbers too, which the loss must not count)."""
    inputs = (torch.rand((len(lengths), width, features), generator=gen, dtype=torch.float64) * 4 - 2)
    targets = torch.randint(classes, (len(lengths), width), generator=gen)
    for row, length in enumerate(lengths):
        targets[row, length:] = PAD
    return inputs, targets


def _epoch_case(gen, sizes: tuple[int, ...], k: int, shapes: list[list[int]], lr: float,
                stale: bool = True) -> EpochCase:
    """``shapes`` holds one list of sequence lengths per micro-batch; each micro-batch is padded to its longest
    sequence (at least 1 position)."""
    model = random_mlp(gen, sizes)
    batches = [_micro_batch(gen, sizes[0], sizes[-1], lengths, max(max(lengths), 1)) for lengths in shapes]
    grads = [torch.rand(tuple(p.shape), generator=gen, dtype=torch.float64) * 4 - 2 for p in model.parameters()] \
        if stale else None
    description = (f"{len(shapes)} micro-batch(es) of sequence lengths {shapes} (a model of widths {sizes}"
                   + (")" if stale else ", arriving with .grad None)"))
    return EpochCase(description, model, batches, lr, k, grads)


def _epoch_corners():
    """Part A's corners, the same at every seed: k = 1 (a step per micro-batch); groups that fill exactly, of unequal
    token counts; a last group of one micro-batch with a padding-only micro-batch before it and .grad None; a
    padding-only micro-batch in the last group; a single group smaller than k (the whole epoch, sequences of one
    token)."""
    gen = case_stream("05/train/corners", None)
    yield _epoch_case(gen, (2, 3), k=1, shapes=[[2, 1], [3], [1, 1, 2]], lr=0.1)
    yield _epoch_case(gen, (3, 2), k=2, shapes=[[3, 1], [2], [1, 1], [4, 2, 3]], lr=0.1)
    yield _epoch_case(gen, (2, 3, 2), k=3, shapes=[[2, 2], [0, 0], [1], [3, 1]], lr=0.2, stale=False)
    yield _epoch_case(gen, (3, 3), k=2, shapes=[[1, 3], [2], [2, 2], [0], [1, 2]], lr=0.1)
    yield _epoch_case(gen, (2, 2), k=4, shapes=[[1], [1, 1], [1]], lr=0.1)


def _random_shapes(gen, count: int) -> list[list[int]]:
    """``count`` micro-batches of 1 to 3 sequences of 0 to 4 tokens, each with at least one counted token."""
    shapes = []
    for _ in range(count):
        lengths = [randint(gen, 0, 4) for _ in range(randint(gen, 1, 3))]
        lengths[0] = max(lengths[0], 1)
        shapes.append(lengths)
    return shapes


def _epoch_cases(grading_seed: int | None):
    """The corners, then two cases with an incomplete last group and unequal token counts (public: fixed; hidden:
    drawn)."""
    yield from _epoch_corners()
    gen = case_stream("05/train", grading_seed)
    for _ in range(2):
        k = randint(gen, 2, 3)
        count = k * randint(gen, 1, 2) + randint(gen, 1, k - 1)
        sizes = ((randint(gen, 2, 3), randint(gen, 2, 4)) if randint(gen, 0, 1) else
                 (randint(gen, 2, 3), 3, randint(gen, 2, 3)))
        yield _epoch_case(gen, sizes, k, _random_shapes(gen, count), lr=round(0.05 + 0.15 * float(
            torch.rand((), generator=gen)), 3))


def _scales(case: EpochCase, weighting: str) -> list[float]:
    """The factor each micro-batch's token_loss is multiplied by before backward(): the right one ("tokens": its
    counted tokens over its group's) or a mistaken one."""
    counts, sequences = case.counts, [len(targets) for _, targets in case.micro_batches]
    so_far = {j: sum(counts[i] for i in group if i <= j) for group in case.groups for j in group}
    positions = [targets.numel() for _, targets in case.micro_batches]
    scales = [0.0] * len(counts)
    for group in case.groups:
        for j in group:
            scales[j] = {"tokens": counts[j] / sum(counts[i] for i in group),
                         "equal": 1 / len(group), "k": 1 / case.k,
                         "sequences": sequences[j] / sum(sequences[i] for i in group),
                         "positions": positions[j] / sum(positions[i] for i in group),
                         "none": 1.0, "sum": float(counts[j]),
                         "running": counts[j] / max(so_far[j], 1)}[weighting]
    return scales


def reference_epoch(case: EpochCase, *, weighting: str = "tokens", steps: str = "after group",
                    reset: str = "per update", reset_first: bool = True, stale_divided: bool = False) -> Tensor:
    """The parameters after the loop, flattened: the right loop by default, or one of the mistakes the check
    recognises. ``steps``: "after group", "every micro-batch", "full groups" (the last, incomplete group never
    steps); ``reset``: "per update", "per micro-batch", "before step" (between backward and step);
    ``reset_first=False``: stale gradients kept (``stale_divided``: and divided by the first group's count, with the
    gradient of its token sum)."""
    model = _with_stale(case.model, case.stale)
    if stale_divided and case.stale is not None:
        for param in model.parameters():
            param.grad /= sum(case.counts[j] for j in case.groups[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=case.lr)
    if reset_first:
        optimizer.zero_grad()
    scales, last = _scales(case, weighting), {group[-1] for group in case.groups}
    full = {group[-1] for group in case.groups if len(group) == case.k}
    for j, (inputs, targets) in enumerate(case.micro_batches):
        if reset == "per micro-batch":
            optimizer.zero_grad()
        if case.counts[j]:  # a padding-only micro-batch adds a zero gradient
            (token_loss(model(inputs), targets) * scales[j]).backward()
        if j in {"after group": last, "every micro-batch": range(len(scales)), "full groups": full}[steps]:
            if reset == "before step":
                optimizer.zero_grad()
            optimizer.step()
            optimizer.zero_grad()
    return _flat(model)


def _group_losses(case: EpochCase) -> tuple[Tensor, Tensor, Tensor]:
    """(the right loss of every update, the plain mean and the sum of its micro-batch means), all at the weights
    before that update in the right run; padding-only micro-batches left out of the mistaken ones."""
    model = _with_stale(case.model, None)
    optimizer = torch.optim.SGD(model.parameters(), lr=case.lr)
    right, plain, summed = [], [], []
    for group in case.groups:
        optimizer.zero_grad()
        means, weights = [], []
        for j in group:
            inputs, targets = case.micro_batches[j]
            if case.counts[j]:
                loss = token_loss(model(inputs), targets)
                (loss * case.counts[j] / sum(case.counts[i] for i in group)).backward()
                means.append(loss.item())
                weights.append(case.counts[j])
        right.append(sum(m * w for m, w in zip(means, weights)) / sum(weights))
        plain.append(sum(means) / len(means))
        summed.append(sum(means))
        optimizer.step()
    return tuple(torch.tensor(v, dtype=torch.float64) for v in (right, plain, summed))


@contextlib.contextmanager
def _recording_forwards(model: nn.Module, backs: list[int] | None = None):
    """The inputs of every forward pass through ``model`` while the block runs, seen at its first layer (so that
    ``model.forward(x)``, which skips the model's own hooks, is seen too); ``backs`` gets a 1 each time a gradient
    reaches the output of its last layer (a backward run through that forward)."""
    seen: list[Tensor] = []
    leaves = [module for module in model.modules() if not list(module.children())]
    handles = [leaves[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone())
                                                   if args and isinstance(args[0], Tensor) else None),
               leaves[-1].register_forward_hook(lambda module, args, out: None if backs is None or not out.requires_grad
                                                else out.register_hook(lambda g: backs.append(1)) and None)]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


class LookedAhead(RuntimeError):
    """Raised by :func:`_stream` when learner code asks for a micro-batch before the last one's backward ran."""


def _stream(case: EpochCase, seen: list[Tensor], backs: list[int]):
    """The micro-batches as a data loader gives them (a generator: no len(), no indexing, one pass): the next one only
    once every micro-batch handed out so far that holds a counted token went through a forward and a backward."""
    for given, pair in enumerate(case.micro_batches):
        counted = sum(1 for count in case.counts[:given] if count)
        if counted > min(len(seen), len(backs)):
            raise LookedAhead(f"micro-batch {given + 1} asked for after {len(seen)} forward(s), {len(backs)} "
                              f"backward(s): the {counted} with counted tokens handed out so far need one of each.")
        yield pair


def _forwards_in_order(seen: list[Tensor], case: EpochCase) -> bool:
    """Whether the forwards were the micro-batches' inputs, in order, each once, padding-only ones optional."""
    position = 0
    for j, (inputs, _) in enumerate(case.micro_batches):
        here = position < len(seen) and seen[position].shape == inputs.shape and torch.equal(seen[position], inputs)
        if here:
            position += 1
        elif case.counts[j]:
            return False
    return position == len(seen)


def _storage(model: nn.Module) -> list[tuple[int, int]]:
    """Which tensor object, and which memory, every parameter is."""
    return [(id(param), param.untyped_storage().data_ptr()) for param in model.parameters()]


def _run_epoch(train_fn, case: EpochCase) -> None:
    __tracebackhide__ = True
    model = _with_stale(case.model, case.stale)
    what = f"train(model, micro_batches, lr={case.lr:g}, accumulate_every={case.k}) for {case.description}"
    routes, before, backs = Routes(), _storage(model), []
    originals = [(inputs.clone(), targets.clone()) for inputs, targets in case.micro_batches]
    with _recording_forwards(model, backs) as seen:
        try:
            losses = call_learner(train_fn, model, _stream(case, seen, backs), case.lr, case.k, what=what,
                                  routes=routes, may_change=[0])  # the model, by position: any name
        except GradingFailure as failure:
            if isinstance(failure.raised, LookedAhead):
                raise _proven(f"{what}: {failure.raised}", LOOKED_AHEAD) from None
            raise
    if any(not (torch.equal(x, x0) and torch.equal(y, y0))
           for (x, y), (x0, y0) in zip(case.micro_batches, originals)):
        raise _proven(f"{what} changed the values of the micro-batches' tensors.", CHANGED_MICRO_BATCHES)
    moved = [name for (name, _), was, now in zip(model.named_parameters(), before, _storage(model)) if was != now]
    if moved or len(before) != len(list(model.parameters())):
        raise _proven(f"{what} replaced the parameter tensor(s) {', '.join(moved) or 'of the model'} instead of "
                      "updating them in place.", NOT_IN_PLACE)
    counted = sum(1 for count in case.counts if count)
    if not counted <= routes.backward_runs <= len(case.micro_batches):
        message = (f"{what} ran backward {routes.backward_runs} time(s); {len(case.micro_batches)} micro-batches "
                   f"({counted} with counted tokens) take one backward run each, at most.")
        if routes.backward_runs == len(case.groups):
            raise _proven(message, ONE_BACKWARD)
        raise GradingFailure(message)
    if not _forwards_in_order(seen, case):
        raise GradingFailure(f"{what} ran the model {len(seen)} time(s), on inputs of shapes "
                             f"{[tuple(s.shape) for s in seen]}; the part asks for one forward per micro-batch, on "
                             "each micro-batch's inputs, in order (one that holds only padding may be skipped).")
    tokens = " | ".join(" ".join(str(case.counts[j]) for j in group) for group in case.groups)
    expected, full = reference_epoch(case), sum(1 for group in case.groups if len(group) == case.k)
    if type(losses) in (list, tuple) and len(losses) == full != len(case.groups) and not torch.allclose(
            _flat(model), expected):
        raise _proven(f"{what} returned {len(losses)} loss(es), and the parameters differ from the reference loop's: "
                      f"its {len(case.micro_batches)} micro-batches make {len(case.groups)} groups of at most "
                      f"{case.k}, the last of {len(case.groups[-1])}, so {len(case.groups)} updates.",
                      LAST_GROUP_DROPPED)
    if torch.allclose(_flat(model), expected, rtol=1e-6, atol=1e-8):
        variants = []  # right: no mistake to recognise, and no need to run every mistaken loop
    else:
        variants = _epoch_variants(case)
    expect_close(_flat(model), expected, what=f"{what}: the trained parameter vector",
                 source="reference loop", symptoms=[mistake.looks_like(value) for mistake, value in variants],
                 extra=f"  parameters, flattened in this order: {_layout(model)}\n"
                       f"  counted tokens of each micro-batch, by group: {tokens}")
    _expect_losses(losses, case, what, tokens)


def _epoch_variants(case: EpochCase) -> list[tuple[Misconception, Tensor]]:
    """(mistake, the parameters its loop ends with) for every mistake the check recognises in Part A."""
    return [(ZERO_GRAD_BEFORE_STEP, _flat(case.model)),
            (STALE, reference_epoch(case, reset_first=False)),
            (STALE, reference_epoch(case, reset_first=False, stale_divided=True)),
            (RESET_PER_MICRO_BATCH, reference_epoch(case, reset="per micro-batch")),
            (STEP_EVERY_MICRO_BATCH, reference_epoch(case, steps="every micro-batch")),
            (LAST_GROUP_DROPPED, reference_epoch(case, steps="full groups")),
            (EQUAL_WEIGHTS, reference_epoch(case, weighting="k")),
            (EQUAL_WEIGHTS, reference_epoch(case, weighting="equal")),
            (SEQUENCE_WEIGHTS, reference_epoch(case, weighting="sequences")),
            (PADDING_COUNTED, reference_epoch(case, weighting="positions")),
            (NOT_SCALED, reference_epoch(case, weighting="none")),
            (NOT_DIVIDED, reference_epoch(case, weighting="sum")),
            (RUNNING_SHARES, reference_epoch(case, weighting="running"))]


def _expect_losses(losses, case: EpochCase, what: str, tokens: str) -> None:
    """The returned losses: one Python float per update, the token mean over its group."""
    __tracebackhide__ = True
    right, plain, summed = _group_losses(case)
    got = read_losses(losses, len(case.groups), what)
    if any(case.counts[j] == 0 for j in range(len(case.counts))) and bool(torch.isnan(got).any()):
        raise _proven(f"{what} returned the losses {fmt(got)}: nan for a group holding a micro-batch of padding "
                      "only.", NAN_LOSS)
    expect_close(got, right, source="reference loop", symptoms=[LOSS_UNWEIGHTED.looks_like(plain),
                                                                  LOSS_SUMMED.looks_like(summed)],
                 what=f"{what}: the returned list of losses (one per update: the token mean over its group)",
                 extra=f"  counted tokens of each micro-batch, by group: {tokens}")


@check
def check_train(train_fn, grading_seed: int | None = None) -> None:
    """Part A: train(model, micro_batches, lr, accumulate_every) takes one plain SGD step per group of k consecutive
    micro-batches (the last group holds what is left) on the mean over the group's counted tokens, with one forward
    and at most one backward per micro-batch, in order (padding-only ones may be skipped), stale gradients dropped
    first; trains ``model`` in place (the same parameter tensors; the only argument it changes) and returns every
    update's token-mean loss as a Python float.

    Domain: model a float64 module acting on the last dimension, whose parameters' .grad is None or stale;
    micro_batches a stream (:func:`_stream`: no len, no indexing, the next micro-batch only after the last one's
    forward and backward) of (inputs (b, L, features), targets (b, L) with PAD past each sequence's end) pairs, b >= 1
    and L >= 1 free per micro-batch, a micro-batch may hold padding only, every group holds a counted token;
    k = accumulate_every >= 1, not necessarily a divisor of the stream's length; lr > 0. Corners at every seed
    (:func:`_epoch_corners`): k = 1; full groups of unequal token counts; a last group of one micro-batch, a
    padding-only micro-batch and .grad None; a padding-only micro-batch in the last group; one group smaller than k
    (sequences of one token); then two cases with an incomplete last group (public: fixed; hidden: drawn).

    Contracts checked: the stream read in order without looking ahead, its tensors unchanged, the parameters
    updated in place, backward runs and forwards as above, losses as Python floats (a nan from a padding-only
    micro-batch is named)."""
    __tracebackhide__ = True
    for case in _epoch_cases(grading_seed):
        with trial():
            _run_epoch(train_fn, case)


# ---------------------------------------------------------------------------------------------- Part B

EPSILON = torch.finfo(torch.float32).eps
#: A wrong reading misses the log by at least this many times the log's round-off (the part's promise).
MARGIN = 100.0

TOO_TIGHT = Misconception(
    "a tolerance finer than the log's round-off",
    "The weights were stored in float32, so (w_t - w_t+1) / lr is off by up to the spacing of float32 numbers near "
    "w_t (about 1.2e-7 times |w_t|), divided by lr: far more than torch.allclose's default tolerance. Measure the "
    "round-off of a run you know, and compare with a tolerance per weight that follows |w| / lr.",
    "How far from the right sum can (weights[t] - weights[t+1]) / lr be when the weights are float32?")
WEIGHT_BLIND = Misconception(
    "a tolerance that ignores the size of the weights",
    "Float32 numbers near 300 are 256 times further apart than near 1, so the round-off in (w_t - w_t+1) / lr grows "
    "with |w_t|. A single tolerance for every weight is too tight for large weights or too loose for small ones: "
    "scale it with |w_t| / lr, weight by weight.",
    "How far apart are neighbouring float32 numbers near 300, and near 1?")
TOO_LOOSE = Misconception(
    "a tolerance looser than the gap between two readings",
    "Two readings can differ by a small gradient: fresh[s] is 0.1 % of the sum when the run was near a minimum at "
    "iteration s. A tolerance that loose accepts both; take the tolerance from the log's round-off instead, which "
    "is far smaller.",
    "How small can the difference between two neighbouring readings be, compared with your tolerance?")
NO_LR = Misconception(
    "the learning rate left out",
    "SGD moved the weights by lr times .grad: .grad at the step is (weights[t] - weights[t+1]) / lr.",
    "By how much did step() move the weights, in terms of .grad?")
REVERSED = Misconception(
    "the step's direction reversed",
    "SGD subtracts: weights[t+1] = weights[t] - lr * .grad, so .grad = (weights[t] - weights[t+1]) / lr.",
    "Does gradient descent add lr * .grad to the weights, or subtract it?")
TWO_READINGS = Misconception(
    "only two readings tried (this iteration's gradient alone, or everything since iteration 0)",
    "A reset can happen at any iteration: .grad at a step is fresh[s] + ... + fresh[t] for the last reset before it, "
    "s anywhere from 0 to t. Try every s.",
    "Where could the last zero_grad() before a step have been, besides iteration 0 and iteration t?")
STILL_READ = Misconception(
    "a reading for an iteration whose weights did not move",
    "weights[t+1] equals weights[t] exactly: no step ran, or it ran on an empty .grad. The part's answer for such "
    "an iteration is None.",
    "What did step() have to apply in an iteration whose weights did not change at all?")
MOVED_NONE = Misconception(
    "None for an iteration whose weights moved",
    "The weights changed in this iteration, so a step ran on a non-empty .grad: find which sum of fresh gradients "
    "it applied.",
    "The weights changed in this iteration: what did the step apply?")


@dataclass(frozen=True)
class Run:
    """How a logged run is made: the loop of every iteration (zero_grad before backward, between backward and step,
    step, zero_grad after step), the data, the start, the offset the loss sees the weights from, lr and the scale of
    every iteration's loss. :meth:`log` simulates it."""

    loops: tuple[tuple[bool, bool, bool, bool], ...]
    data: tuple[tuple[Tensor, Tensor], ...]
    start: Tensor
    offset: Tensor
    lr: float
    scales: tuple[float, ...]

    def readings(self) -> list[int | None]:
        """The right answer: per iteration None (no step, or a step on an empty .grad) or the first iteration whose
        gradient .grad held at the step."""
        found, first, empty = [], 0, True
        for t, (before, between, step, after) in enumerate(self.loops):
            if before:
                empty = True
            if empty:
                first, empty = t, False
            if between:
                empty = True
            found.append(first if step and not empty else None)
            if after:
                empty = True
        return found

    def log(self, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """(weights (T+1, P), fresh (T, P)) of the run in ``dtype``, with a real torch.optim.SGD and backward()."""
        weight = nn.Parameter(self.start.to(dtype).clone())
        optimizer = torch.optim.SGD([weight], lr=self.lr)
        offset = self.offset.to(dtype)

        def loss(t: int, w: Tensor) -> Tensor:
            inputs, targets = self.data[t]
            return self.scales[t] * ((torch.tanh(inputs.to(dtype) @ (w - offset)) - targets.to(dtype)) ** 2).mean()

        weights, fresh = [weight.detach().clone()], []
        for t, (before, between, step, after) in enumerate(self.loops):
            probe = weight.detach().clone().requires_grad_(True)
            fresh.append(torch.autograd.grad(loss(t, probe), probe)[0])
            if before:
                optimizer.zero_grad()
            loss(t, weight).backward()
            if between:
                optimizer.zero_grad()
            if step:
                optimizer.step()
            if after:
                optimizer.zero_grad()
            weights.append(weight.detach().clone())
        return torch.stack(weights), torch.stack(fresh) if fresh else torch.zeros((0, len(self.start)), dtype=dtype)


def misses(weights: Tensor, fresh: Tensor, lr: float, t: int, reading: int | None) -> Tensor:
    """How far ``reading`` misses what iteration t applied, per weight, in units of the log's round-off there:
    |(w_t - w_t+1) / lr - (fresh[s] + ... + fresh[t])| / (eps (|w_t| + |w_t+1|) / lr), eps float32's epsilon."""
    w, g = weights.double(), fresh.double()
    applied = (w[t] - w[t + 1]) / lr
    total = torch.zeros_like(applied) if reading is None else g[reading:t + 1].sum(dim=0)
    roundoff = EPSILON * (w[t].abs() + w[t + 1].abs()) / lr
    return (applied - total).abs() / roundoff


def _residual(weights: Tensor, fresh: Tensor, lr: float, t: int, reading: int | None) -> Tensor:
    """|(w_t - w_t+1) / lr - (fresh[s] + ... + fresh[t])| per weight, in float64 (the evidence a failure shows)."""
    return misses(weights, fresh, lr, t, reading) * EPSILON * (weights[t].double().abs()
                                                               + weights[t + 1].double().abs()) / lr


def _checked(run: Run, description: str) -> tuple[Run, str]:
    """``run`` if its float32 and float64 logs keep the part's promise (the right reading within the round-off in
    every weight, every other reading a hundred times further in some weight), else a CourseBug."""
    for dtype in (torch.float32, torch.float64):
        weights, fresh = run.log(dtype)
        for t, right in enumerate(run.readings()):
            if right is None and not torch.equal(weights[t], weights[t + 1]):
                raise CourseBug(f"iteration {t} of {description} has no step, yet its weights moved.")
            if dtype == torch.float32 and float(misses(weights, fresh, run.lr, t, right).max()) > 0.5:
                raise CourseBug(f"iteration {t} of {description} misses its own reading.")
            if right is not None and float(misses(weights, fresh, run.lr, t, None).max()) < MARGIN:
                raise CourseBug(f"the step of iteration {t} of {description} barely moved the weights.")
            others = [s for s in range(t + 1) if s != right]
            if any(float(misses(weights, fresh, run.lr, t, s).max()) < MARGIN for s in others):
                raise CourseBug(f"two readings fit iteration {t} of {description}.")
    return run, description


HEALTHY, NEVER, BETWEEN = (True, False, True, False), (False, False, True, False), (False, True, True, False)


def _run(gen, loops, *, size: int = 4, lr: float = 0.01, offsets=(), scales=None, description: str) -> tuple[Run, str]:
    """A run of ``loops`` over ``size`` weights: the weights start 0.5 to 3 from their offsets (0, or ``offsets``
    for the first weights), and the loss of iteration t is scaled by scales[t] (1 by default). Start and data are
    drawn again until the run keeps the part's promise (:func:`_checked`) and, with ``scales``, until every
    unscaled iteration's fresh gradient has a norm of 0.3 or more (so that a scaled one is under 1 % of it)."""
    offset = torch.zeros(size, dtype=torch.float64)
    offset[:len(offsets)] = torch.tensor(offsets, dtype=torch.float64)
    for _ in range(50):
        signs = torch.where(torch.rand(size, generator=gen) < 0.5, -1.0, 1.0).double()
        start = offset + signs * (0.5 + 2.5 * torch.rand(size, generator=gen, dtype=torch.float64))
        data = tuple((torch.randn((3, size), generator=gen, dtype=torch.float64),
                      torch.rand(3, generator=gen, dtype=torch.float64) * 2 - 1) for _ in loops)
        run = Run(tuple(loops), data, start, offset, lr, tuple(scales or [1.0] * len(loops)))
        if scales and any(scale == 1 and float(gradient.norm()) < 0.3
                          for scale, gradient in zip(scales, run.log(torch.float64)[1])):
            continue
        try:
            return _checked(run, description)
        except CourseBug:
            continue
    raise CourseBug(f"no draw of {description} kept the part's promise in 50 draws.")


def _accumulate(k: int, count: int):
    return [(False, False, (t + 1) % k == 0, (t + 1) % k == 0) for t in range(count)]


@functools.cache
def _log_corners() -> tuple[tuple[Run, str], ...]:
    """Part B's corners, the same at every seed (made once a process: a run is only ever simulated again, its data
    never reach learner code): an empty log; the lesson's loop; no zero_grad at all; zero_grad between backward
    and step (nothing ever moves); deliberate accumulation over 3; a reset every 2 iterations with a step in each;
    weights near ±300 (a round-off 256 times that of weights near 1); and twice an iteration whose gradient is
    0.3 % of the next one's, with weights near 1 and near 300 (readings that differ by that little)."""
    gen = case_stream("05/weight_log/corners", None)
    return (
        _run(gen, [], description="log #1"),
        _run(gen, [HEALTHY] * 4, description="log #2"),
        _run(gen, [NEVER] * 5, lr=0.005, description="log #3"),
        _run(gen, [BETWEEN] * 3, description="log #4"),
        _run(gen, _accumulate(3, 7), lr=0.02, description="log #5"),
        _run(gen, [(t % 2 == 0, False, True, False) for t in range(6)], description="log #6"),
        _run(gen, [HEALTHY, NEVER, HEALTHY, NEVER, NEVER], size=5, offsets=(300.0, -300.0),
             description="log #7"),
        _run(gen, _accumulate(2, 4), lr=0.05, scales=[0.003, 1.0, 0.003, 1.0], description="log #8"),
        _run(gen, [NEVER] * 3, size=5, lr=0.05, offsets=(300.0,), scales=[0.003, 1.0, 1.0],
             description="log #9"),
    )


def _random_loop(gen) -> tuple[bool, bool, bool, bool]:
    before, between = bool(torch.rand((), generator=gen) < 0.4), bool(torch.rand((), generator=gen) < 0.1)
    return before, between, bool(torch.rand((), generator=gen) < 0.7), bool(torch.rand((), generator=gen) < 0.3)


def _log_cases(grading_seed: int | None):
    """The corners, then three runs of random loops (each iteration: resets and a step drawn on their own), some
    with weights in the hundreds (public: fixed; hidden: drawn)."""
    yield from _log_corners()
    gen = case_stream("05/weight_log", grading_seed)
    for number in range(3):
        loops = [_random_loop(gen) for _ in range(randint(gen, 4, 8))]
        offsets = (float(200 * randint(gen, -1, 1)),) * randint(gen, 0, 2)
        size = randint(gen, 2, 5)
        # at least one weight near 1: with every weight in the hundreds and lr 0.01, no draw in 50 may keep the promise
        yield _run(gen, loops, size=size, lr=float(10 ** -randint(gen, 1, 2)) * randint(gen, 1, 5),
                   offsets=offsets[:size - 1], description=f"log #{10 + number}")


def _call(read_fn, weights: Tensor, fresh: Tensor, lr: float, what: str) -> list:
    """The learner's readings, checked for their form: a list of len(fresh) entries, each None or an int in 0..t."""
    __tracebackhide__ = True
    answer = call_learner(read_fn, weights, fresh, lr, what=what)
    if type(answer) is not list or len(answer) != len(fresh) or not all(
            entry is None or (type(entry) is int and 0 <= entry <= t) for t, entry in enumerate(answer)):
        raise GradingFailure(f"{what} returned {answer!r:.120}; expected a list of {len(fresh)} entries, entry t "
                             "being None or an int from 0 to t.")
    return answer


def _right_on(read_fn, run: Run, what: str, *, dtype=torch.float64, negate: bool = False, **changes) -> bool:
    """Whether the learner reads a variant of ``run`` right (the same loops, simulated again with ``changes``;
    ``negate``: fresh gradients of the opposite sign, which only a reversed step fits)."""
    variant = replace(run, **changes)
    weights, fresh = variant.log(dtype)
    try:
        return _call(read_fn, weights, -fresh if negate else fresh, variant.lr, what) == variant.readings()
    except GradingFailure as failure:
        if failure.proven is not None:
            raise
        return False


def _observed(read_fn, run: Run, what: str) -> tuple[Misconception, str] | None:
    """The one change of the run that makes the learner right, if there is one: then that change names the mistake
    (observed, so named at once)."""
    variants = [(TOO_TIGHT, {}, "logged in float64 instead of float32"),
                (REVERSED, {"negate": True}, "with every fresh gradient negated"),
                (NO_LR, {"lr": 1.0}, "with lr = 1 instead")]
    if bool(run.offset.abs().max() > 0):
        variants.insert(0, (WEIGHT_BLIND, {"dtype": torch.float32, "offset": torch.zeros_like(run.offset),
                                           "start": run.start - run.offset},
                            "with every weight moved near 1 (the same steps, still logged in float32)"))
    for mistake, changes, words in variants:
        if _right_on(read_fn, run, what, **changes):
            return mistake, f"  The same run, {words}: your function reads it right."
    return None


def _table(weights: Tensor, fresh: Tensor, lr: float, got: list, right: list) -> str:
    rows = [("t", "max |w_t - w_t+1| / lr", "yours", "expected")]
    for t in range(len(fresh)):
        step = float(((weights[t].double() - weights[t + 1].double()).abs() / lr).max())
        rows.append((str(t), f"{step:.4g}", str(got[t]), str(right[t]) + ("" if got[t] == right[t] else "   <--")))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join("  " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " | " + row[3]
                     for row in rows)


def _run_log(read_fn, run: Run, description: str) -> None:
    __tracebackhide__ = True
    weights, fresh = run.log()
    what = (f"read_weight_log(weights, fresh, lr={run.lr:g}) for {description} ({len(fresh)} iterations, "
            f"{weights.shape[1]} weights)")
    right = run.readings()
    try:
        got = _call(read_fn, weights, fresh, run.lr, what)
    except GradingFailure as failure:
        if failure.proven is not None:
            raise
        observed = _observed(read_fn, run, what)
        if observed is None:
            raise
        raise _proven(f"{failure.message}\n{observed[1]}", observed[0]) from None
    if got == right:
        return
    t = next(t for t in range(len(right)) if got[t] != right[t])
    theirs, ours = _residual(weights, fresh, run.lr, t, got[t]), _residual(weights, fresh, run.lr, t, right[t])
    message = "\n".join([
        f"{what} is wrong at iteration {t}: you said {got[t]}, expected {right[t]}.",
        _table(weights, fresh, run.lr, got, right),
        f"  At iteration {t}, (weights[t] - weights[t+1]) / lr differs from the sum of fresh gradients your reading "
        f"names by up to {float(theirs.max()):.3g} (weight {int(theirs.argmax())}), from the expected reading's by up "
        f"to {float(ours.max()):.3g} (weight {int(ours.argmax())}).",
        f"  weights[t]:   {fmt(weights[t])}\n  weights[t+1]: {fmt(weights[t + 1])}"])
    observed = _observed(read_fn, run, what)
    if observed is not None:
        raise _proven(f"{message}\n{observed[1]}", observed[0])
    if right[t] is None:
        raise _proven(f"{message}\n  weights[{t}] and weights[{t + 1}] are equal, element for element.", STILL_READ)
    if got[t] is None:
        raise _proven(f"{message}\n  weights[{t}] and weights[{t + 1}] differ.", MOVED_NONE)
    applied = (weights[t].double() - weights[t + 1].double()) / run.lr
    close = float((applied - fresh[got[t]:t + 1].double().sum(dim=0)).norm() / applied.norm()) < 0.02
    two = got[t] in (0, t) and 0 < right[t] < t
    raise GradingFailure(message, suspects=tuple(m for m, seen in ((TOO_LOOSE, close), (TWO_READINGS, two)) if seen))


@check
def check_read_weight_log(read_fn, grading_seed: int | None = None) -> None:
    """Part B: read_weight_log(weights, fresh, lr) returns, for every iteration t of a plain-SGD run, None when the
    weights did not move, else the first iteration s whose gradient .grad held at the step (.grad = fresh[s] + ...
    + fresh[t]), leaving the log unchanged.

    Domain: weights (T+1, P) and fresh (T, P) float32, T >= 0, P >= 1; lr > 0; .grad empty before iteration 0;
    every iteration one backward, at most one step after it, zero_grad anywhere or nowhere; the right reading
    matches (weights[t] - weights[t+1]) / lr within the round-off of the float32 weights in every weight, every other
    reading (None for a step included) misses by at least a hundred times that round-off in some weight (each run
    is built so, :func:`_checked`). Corners at every seed (:func:`_log_corners`): an empty log; the lesson's loop; no
    zero_grad; zero_grad between backward and step; accumulation over 3; a reset every 2 with a step in each;
    weights near ±300; twice a gradient 0.3 % of the next one's (near 1 and near 300); then three runs of random
    loops (public: fixed; hidden: drawn).

    Contracts checked: the form of the answer (a list of None or ints in 0..t), the log's tensors unchanged."""
    __tracebackhide__ = True
    for run, description in _log_cases(grading_seed):
        with trial():
            _run_log(read_fn, run, description)
