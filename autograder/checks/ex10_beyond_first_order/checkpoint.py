"""Part E: checkpoint only the blocks a memory budget needs, chosen by measuring: the same output and gradients as a
plain forward from the same random state, at most ``budget`` saved bytes, the fewest blocks run again."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ...checking import CourseBug, GradingFailure, Routes, call_learner, check, expect_close, trial
from ...checking import proven_failure as _proven
from ...seeding import choice, uniform
from ..cases import case_stream, randint, random_mlp
from .misconceptions import (
    BY_POSITION,
    BY_WIDTH,
    DETACHED_INPUT,
    EVERY_BLOCK,
    FORGOT_CHECKPOINT_INPUT,
    GROUPED_BLOCKS,
    LATE_BINDING,
    MEASUREMENT_MOVED_RNG,
    OVER_BUDGET,
    RNG_NOT_PRESERVED,
    STRICT_BUDGET,
    SWITCHED_MODE,
)

Tensor = torch.Tensor

#: The activations a block may have, by name.
ACTIVATIONS = {"Tanh": nn.Tanh, "ReLU": nn.ReLU, "GELU": nn.GELU}


def make_block(gen: torch.Generator, width: int, hidden: int, activation: str, dropout: bool) -> nn.Sequential:
    """Linear(width, hidden) → activation → (Dropout(0.2)) → Linear(hidden, width), float64, training mode."""
    mlp = random_mlp(gen, (width, hidden, width))
    layers = [mlp[0], ACTIVATIONS[activation]()] + ([nn.Dropout(0.2)] if dropout else []) + [mlp[2]]
    return nn.Sequential(*layers).train()


class SavedStorages:
    """The storages autograd saves while some code runs (saved-tensor hooks), those of ``exclude`` left out: their
    bytes, all of them or only those a graph still holds (a graph the answer built and dropped, such as a
    measurement run without hooks of its own, is not counted)."""

    def __init__(self, exclude: list[Tensor]):
        self.skip = {t.untyped_storage().data_ptr() for t in exclude}
        self.packed: list[tuple[weakref.ref, int, int]] = []

    def run(self, run: Callable):
        def pack(t):
            storage = t.untyped_storage()
            held = t.detach()  # what the graph keeps: an alias without a grad_fn, so that no cycle keeps it alive
            if storage.data_ptr() not in self.skip:
                self.packed.append((weakref.ref(held), storage.data_ptr(), storage.nbytes()))
            return held

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda held: held):
            return run()

    def total(self, *, alive: bool = False) -> int:
        """The bytes of every storage saved, or (``alive``) of those a graph still holds: count before any backward
        pass, which frees them."""
        def count(held_only: bool) -> int:
            return sum({pointer: size for ref, pointer, size in self.packed
                        if not held_only or ref() is not None}.values())

        if alive and count(True) != count(False):
            gc.collect()  # a dropped graph whose saved outputs refer back to it goes only with a collection
        return count(alive)


def saved_bytes(run: Callable, exclude: list[Tensor]) -> int:
    storages = SavedStorages(exclude)
    storages.run(run)
    return storages.total()


class _Starts:
    """How often each block started, seen through its first layer (every way of running a block calls it)."""

    def __init__(self, blocks: nn.ModuleList):
        self.runs = [0] * len(blocks)
        self.handles = [block[0].register_forward_pre_hook(self._hook(i)) for i, block in enumerate(blocks)]

    def _hook(self, i: int):
        def hook(module, args):
            self.runs[i] += 1
        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _tensor_names(blocks: nn.ModuleList) -> list[str]:
    """'x', then every parameter as a learner would index it: 'blocks[1][0].weight'."""
    names = ["x"]
    for name, _ in blocks.named_parameters():
        *path, attribute = name.split(".")
        names.append("blocks" + "".join(f"[{p}]" for p in path) + f".{attribute}")
    return names


def _gradients_after(blocks: nn.ModuleList, x: Tensor, out: Tensor, weights: Tensor) -> list[Tensor | None]:
    """The gradients of x and of every parameter after (out * weights).sum().backward(). backward(), not
    torch.autograd.grad, since a reentrant checkpoint (use_reentrant=True, a correct answer) supports only backward();
    the parameters' .grad are put back to None (also when backward fails)."""
    params = list(blocks.parameters())
    try:
        (out * weights).sum().backward()
        return [None if t.grad is None else t.grad.detach().clone() for t in [x, *params]]
    finally:
        for param in params:
            param.grad = None


@dataclass
class _Plan:
    """What the check knows of a case: each block's bytes when plain, a checkpoint's bytes (its input), and so the
    fewest checkpoints for a budget."""

    plain: list[int]
    input_bytes: int
    widths: list[int]

    def bytes_of(self, chosen: set[int]) -> int:
        return sum(b for i, b in enumerate(self.plain) if i not in chosen) + len(chosen) * self.input_bytes

    def greedy(self, budget: float, order: list[int], gives_back: Callable[[int], int] | None = None) -> set[int]:
        """Checkpoint blocks in ``order`` until the bytes fit the budget (by the plan's count, or by ``gives_back``,
        a mistaken count of what a checkpoint gives back)."""
        gives_back = gives_back or (lambda i: self.plain[i] - self.input_bytes)
        total, chosen = sum(self.plain), set()
        for i in order:
            if total <= budget:
                break
            total -= gives_back(i)
            chosen.add(i)
        return chosen

    def by_savings(self) -> list[int]:
        return sorted(range(len(self.plain)), key=lambda i: -self.plain[i])

    def fewest(self, budget: float) -> set[int]:
        return self.greedy(budget, self.by_savings())


def measure(blocks: nn.ModuleList, batch: int, width: int) -> _Plan:
    """Each block's saved bytes, plain and checkpointed, on a leaf of the batch's shape (the random state put back)."""
    probe = torch.zeros(batch, width, dtype=torch.float64, requires_grad=True)
    with torch.random.fork_rng(devices=[]):
        plain = [saved_bytes(lambda b=b: b(probe), list(b.parameters())) for b in blocks]
        ck = saved_bytes(lambda: checkpoint(blocks[0], probe, use_reentrant=False), list(blocks[0].parameters()))
    return _Plan(plain, ck, [block[0].out_features for block in blocks])


def _run_forward(blocks: nn.ModuleList, x: Tensor, chosen: set[int], rng: bool = True) -> Tensor:
    h = x
    for i, block in enumerate(blocks):
        h = checkpoint(block, h, use_reentrant=False, preserve_rng_state=rng) if i in chosen else block(h)
    return h


def _reference(blocks: nn.ModuleList, x: Tensor, weights: Tensor, seed: int, chosen: set[int], rng: bool = True):
    """(output, gradients, the random state after the forward pass) of a forward with ``chosen`` checkpointed."""
    leaf = x.detach().clone().requires_grad_(True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = _run_forward(blocks, leaf, chosen, rng)
        after = torch.get_rng_state()
        grads = _gradients_after(blocks, leaf, out, weights)
    return out.detach(), grads, after


def _blocks(indices) -> str:
    """Blocks by their 1-based numbers: 'none', 'block 2', 'blocks 1, 3 and 4'."""
    numbers = sorted(i + 1 for i in indices)
    if not numbers:
        return "none"
    if len(numbers) == 1:
        return f"block {numbers[0]}"
    return "blocks " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


def _describe(blocks: nn.ModuleList, plan: _Plan) -> str:
    parts = []
    for i, block in enumerate(blocks):
        act = type(block[1]).__name__
        drop = " + Dropout" if any(isinstance(m, nn.Dropout) for m in block) else ""
        parts.append(f"{i + 1}: {plan.widths[i]} {act}{drop}")
    return "; ".join(parts)


def _named(candidates: dict, chosen: set[int]):
    """The one mistake whose choice of blocks is the answer's (None when none is, or when several mistakes choose
    the same blocks here: the case cannot tell them apart)."""
    matching = [mistake for mistake, blocks in candidates.items() if blocks == chosen]
    return matching[0] if len(matching) == 1 else None


def _over_budget_mistakes(plan: _Plan, budget: float) -> dict:
    return {FORGOT_CHECKPOINT_INPUT: plan.greedy(budget, plan.by_savings(), gives_back=lambda i: plan.plain[i]),
            OVER_BUDGET: set()}


def _extra_checkpoint_mistakes(plan: _Plan, budget: float) -> dict:
    count = len(plan.plain)
    strict = plan.greedy(budget - 0.5, plan.by_savings())
    return {EVERY_BLOCK: set(range(count)), BY_POSITION: plan.greedy(budget, list(range(count))),
            BY_WIDTH: plan.greedy(budget, sorted(range(count), key=lambda i: -plan.widths[i])),
            STRICT_BUDGET: strict if len(strict) > len(plan.fewest(budget)) else None}


def _run_budget(budgeted_forward, blocks: nn.ModuleList, x0: Tensor, budget: int, weights: Tensor,
                seed: int) -> None:
    __tracebackhide__ = True
    count, (batch, width) = len(blocks), x0.shape
    plan = measure(blocks, batch, width)
    fewest = plan.fewest(budget)
    if plan.bytes_of(set(range(count))) > budget:
        raise CourseBug(f"a budget of {budget} bytes that checkpointing every block cannot meet.")
    what = (f"budgeted_forward(blocks, x, budget={budget}) for {count} block{'s' * (count > 1)} of width {width} "
            f"({_describe(blocks, plan)}) and x of shape {tuple(x0.shape)}")
    plain_out, plain_grads, plain_after = _reference(blocks, x0, weights, seed, set())
    parameters = list(blocks.parameters())
    x = x0.clone().requires_grad_(True)
    modes = [m.training for m in blocks.modules()]
    starts = _Starts(blocks)
    failed = grads = None
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            routes = Routes()
            storages = SavedStorages(parameters)
            out = storages.run(lambda: call_learner(budgeted_forward, blocks, x, budget, what=what, routes=routes))
            saved = storages.total(alive=True)  # before backward frees the graph
            after = torch.get_rng_state()
            forward_runs = list(starts.runs)
            if routes.backward_runs:
                raise GradingFailure(f"{what} ran {routes.backward_runs} backward pass(es) itself; the part asks for "
                                     "the forward pass only (the test runs backward on your output).")
            if [m.training for m in blocks.modules()] != modes:
                blocks.train()
                raise _proven(f"{what} changed the blocks' training mode.", SWITCHED_MODE)
            if not isinstance(out, Tensor) or type(out) is not Tensor or out.grad_fn is None:
                raise GradingFailure(f"{what} returned {type(out).__name__} without a graph: backward could not reach "
                                     "the parameters.")
            same_output = tuple(out.shape) == tuple(plain_out.shape) and bool(
                torch.allclose(out.detach(), plain_out, rtol=1e-10, atol=1e-12))
            if not same_output and not torch.equal(after, plain_after):
                raise _proven(f"{what}: the output differs from a plain forward from the same random state, and the "
                              "global random state after your call is not where a plain forward leaves it: your "
                              "function drew other random numbers than the forward pass alone draws.",
                              MEASUREMENT_MOVED_RNG)
            expect_close(out.detach(), plain_out, what=f"{what}: the output", source="a plain forward", rtol=1e-10,
                         atol=1e-12)
            try:
                grads = _gradients_after(blocks, x, out, weights)
            except RuntimeError as error:
                failed = str(error).splitlines()[0]
            reruns = [now - before for before, now in zip(forward_runs, starts.runs)]
    finally:
        starts.remove()
    again = {i for i, r in enumerate(reruns) if r}
    if len(again) == 1 and max(reruns) > 1:
        raise _proven(f"{what}: during backward {_blocks(again)} ran {max(reruns)} times and no other block ran: "
                      "every checkpoint reran the same block.", LATE_BINDING)
    if failed is not None:
        raise GradingFailure(f"{what}: backward through your output failed: {failed}")
    if grads[0] is None:
        raise _proven(f"{what}: after backward, x.grad is None: x got no gradient, so your output does not depend on "
                      "the x you were given.", DETACHED_INPUT)
    wrong_rng = _reference(blocks, x0, weights, seed, again, rng=False)[1]
    for name, got, want, other in zip(_tensor_names(blocks), grads, plain_grads, wrong_rng):
        if got is None:
            raise GradingFailure(f"{what}: after backward, {name}.grad is None: that parameter got no gradient.")
        expect_close(got, want, what=f"{what}: the gradient of {name}", source="a plain forward", rtol=1e-8,
                     atol=1e-12, symptoms=[RNG_NOT_PRESERVED.looks_like(other)])
    if max(reruns) > 1:
        raise GradingFailure(f"{what}: during backward the blocks started {reruns} times; a block in its own "
                             "checkpoint starts once more, a plain one not at all.")
    expected_bytes = plan.bytes_of(again)
    facts = (f"the blocks save {plan.plain} bytes each when plain and {plan.input_bytes} in a checkpoint of their "
             f"own; you checkpointed {_blocks(again)}")
    if saved < expected_bytes:
        raise _proven(f"{what}: the graph saved {saved} bytes, less than one checkpoint per rerun block saves "
                      f"({expected_bytes}): {facts}.", GROUPED_BLOCKS)
    if saved > expected_bytes:
        raise GradingFailure(f"{what}: the graph saved {saved} bytes, more than one checkpoint per rerun block and "
                             f"the other blocks plain save ({expected_bytes}): {facts}.")
    if saved > budget:
        message = f"{what}: the graph saved {saved} bytes, over the budget of {budget}: {facts}."
        mistake = _named(_over_budget_mistakes(plan, budget), again)
        raise _proven(message, mistake) if mistake else GradingFailure(message)
    if len(again) > len(fewest):
        message = (f"{what}: {len(again)} blocks ran again during backward ({_blocks(again)}), saving {saved} "
                   f"bytes; {len(fewest)} checkpoint{'s' * (len(fewest) != 1)} can meet the budget of {budget} "
                   f"(the blocks save {plan.plain} bytes each when plain, {plan.input_bytes} in a checkpoint).")
        mistake = _named(_extra_checkpoint_mistakes(plan, budget), again)
        raise _proven(message, mistake) if mistake else GradingFailure(message)
    if len(again) < len(fewest):  # within the budget with fewer than the fewest: the check's own count is wrong
        raise CourseBug(f"{what} met the budget with {_blocks(again)}, fewer than the check's {_blocks(fewest)}.")


def _spec(gen: torch.Generator) -> tuple[int, str, bool]:
    return randint(gen, 4, 16), choice(gen, list(ACTIVATIONS)), bool(randint(gen, 0, 1))


def _budget_between(plan: _Plan, count: int, exact: bool = False) -> int:
    """A budget that needs exactly ``count`` checkpoints: the bytes with the best ``count`` (``exact``), or halfway
    to the bytes with one fewer."""
    order = plan.by_savings()
    with_count = plan.bytes_of(set(order[:count]))
    if exact or count == 0:
        return with_count
    return (with_count + plan.bytes_of(set(order[:count - 1]))) // 2


#: The corners: (blocks as (hidden, activation, dropout), batch, checkpoints the budget needs, the budget exactly
#: the bytes of the best plan). One block that fits without a checkpoint; every block needed; the budget exactly the
#: best plan's bytes (strictly below it costs one more); the widest block a Tanh without dropout that saves less than
#: narrower GELU and dropout blocks (by width is wrong); the first blocks the smallest savers (by position is wrong);
#: a batch of one; equal savers (any of them is right).
CORNERS = [
    ([(12, "GELU", True)], 3, 0, False),
    ([(6, "Tanh", True), (8, "ReLU", False), (5, "GELU", True)], 2, 3, False),
    ([(9, "ReLU", True), (7, "Tanh", False), (6, "GELU", True), (10, "Tanh", False)], 3, 2, True),
    ([(16, "Tanh", False), (7, "GELU", True), (9, "GELU", False), (6, "ReLU", True), (12, "ReLU", False)], 4, 2, False),
    ([(4, "Tanh", False), (5, "ReLU", False), (8, "GELU", True), (12, "Tanh", True), (10, "GELU", True)], 1, 2,
     False),
    ([(8, "Tanh", True), (8, "ReLU", True), (8, "Tanh", True), (5, "Tanh", False)], 2, 1, False),
]


@check
def check_budgeted_forward(budgeted_forward, grading_seed: int | None = None) -> None:
    """Part E: budgeted_forward(blocks, x, budget) runs x through the blocks, each plainly or in its own checkpoint,
    with the graph saving at most ``budget`` bytes and the fewest blocks checkpointed.

    Domain: ``blocks`` an nn.ModuleList of count >= 1 float64 blocks Linear → Tanh, ReLU or GELU → (Dropout) →
    Linear in training mode, all of one width; ``x`` a (B, width) float64 leaf that requires grad, B >= 1; ``budget``
    an int at least the bytes of every block checkpointed. Corners at every seed: one block and no checkpoint needed,
    every block needed, the budget exactly the best plan's bytes, the widest block not the biggest saver, the first
    blocks the smallest savers, a batch of one, equal savers. Contract: the output and, after backward, the gradients
    of x and every parameter of a plain forward from the same random state (dropout included); the saved bytes (the
    storages still held after the call, parameters left out) equal one checkpoint per rerun block and are at most the
    budget; the blocks that start again in backward, once each, are as few as the budget allows (the check's own
    measurement, greedy by bytes given back); the training mode, the parameters and x unchanged; no backward pass
    inside.
    """
    __tracebackhide__ = True
    corner_gen = torch.Generator().manual_seed(1011)
    gen = case_stream("10/budget", grading_seed)
    cases = []
    for specs, batch, needed, exact in CORNERS:
        cases.append((corner_gen, specs, batch, needed, exact))
    for _ in range(1 if grading_seed is None else 2):
        count = randint(gen, 3, 6)
        cases.append((gen, [_spec(gen) for _ in range(count)], randint(gen, 2, 5), randint(gen, 1, count - 1), False))
    width = 5
    for source, specs, batch, needed, exact in cases:
        blocks = nn.ModuleList(make_block(source, width, *spec) for spec in specs)
        x, weights = uniform(source, (batch, width)), uniform(source, (batch, width))
        seed = randint(source, 0, 10**6)
        budget = _budget_between(measure(blocks, batch, width), needed, exact)
        with trial():
            _run_budget(budgeted_forward, blocks, x, budget, weights, seed)
