"""Part E: activation checkpointing in groups of k blocks: the same output and gradients as a plain forward from the
same random state, with the saved tensors a group of k allows."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ...checking import GradingFailure, Routes, call_learner, check, expect_close, trial
from ...checking import proven_failure as _proven
from ...seeding import uniform
from ..cases import case_stream, randint, random_mlp
from .misconceptions import (
    DETACHED_INPUT,
    GROUPS_NOT_K,
    LATE_BINDING,
    NOT_CHECKPOINTED,
    OUTSIDE_CHECKPOINT,
    RNG_NOT_PRESERVED,
    SWITCHED_MODE,
)

Tensor = torch.Tensor

def make_blocks(gen: torch.Generator, count: int, width: int, hidden: int, dropout: float = 0.2) -> nn.ModuleList:
    """``count`` residual-free blocks Linear → Tanh → Dropout → Linear (float64, training mode)."""
    blocks = nn.ModuleList()
    for _ in range(count):
        mlp = random_mlp(gen, (width, hidden, width))
        blocks.append(nn.Sequential(mlp[0], mlp[1], nn.Dropout(dropout), mlp[2]))
    return blocks.train()


def _groups(count: int, k: int) -> list[list[int]]:
    """The blocks of each checkpoint: consecutive groups of k from the first, the last one holding the rest."""
    return [list(range(start, min(start + k, count))) for start in range(0, count, k)]


def _saved_storages(run: Callable):
    """({storage pointer: bytes} the forward graph saved, the result of run()), seen by saved-tensor hooks."""
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()
    return saved, result


class _BlockRuns:
    """How often each block ran, seen through its first layer (every way of running a block calls it), and each
    block's input in its first run (kept alive, so that no later tensor can take its address)."""

    def __init__(self, blocks: nn.ModuleList):
        self.runs = [0] * len(blocks)
        self.inputs: list[Tensor | None] = [None] * len(blocks)
        self.handles = [block[0].register_forward_pre_hook(self._hook(i)) for i, block in enumerate(blocks)]

    def _hook(self, i: int):
        def hook(module, args):
            self.runs[i] += 1
            if self.inputs[i] is None and args and isinstance(args[0], Tensor):
                self.inputs[i] = args[0]
        return hook

    def saved(self, storages: dict[int, int]) -> list[int]:
        """The blocks whose input is among the saved storages."""
        return [i for i, t in enumerate(self.inputs) if t is not None and t.untyped_storage().data_ptr() in storages]

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


def _reference(blocks: nn.ModuleList, x: Tensor, weights: Tensor, seed: int, *, k: int | None, rng: bool = True):
    """Plain forward (k None) or checkpoints of k blocks with preserve_rng_state=rng: (bytes, out, gradients)."""
    leaf = x.detach().clone().requires_grad_(True)

    def run():
        h = leaf
        if k is None:
            for block in blocks:
                h = block(h)
            return h
        for group in _groups(len(blocks), k):
            h = checkpoint(nn.Sequential(*[blocks[i] for i in group]), h, use_reentrant=False, preserve_rng_state=rng)
        return h

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        saved, out = _saved_storages(run)
        grads = _gradients_after(blocks, leaf, out, weights)
    return sum(saved.values()), out.detach(), grads


def _blocks(indices: list[int]) -> str:
    """Blocks by their 1-based numbers: 'block 2', 'blocks 1 and 3', 'blocks 1–3'."""
    numbers = [i + 1 for i in indices]
    if len(numbers) == 1:
        return f"block {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
        return f"blocks {numbers[0]}–{numbers[-1]}"
    return "blocks " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


def _describe(groups: list[list[int]]) -> str:
    return "; ".join(_blocks(group) for group in groups)


def _made(starts: list[int], count: int) -> list[list[int]]:
    """The checkpoints an answer made, from the blocks whose inputs the graph saved."""
    bounds = [*starts, count]
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


def _late_binding(reruns: list[int], groups: list[list[int]]) -> bool:
    """Every checkpoint reran the last group: only its blocks ran again in backward, some more than once."""
    last = set(groups[-1])
    return len(groups) > 1 and max(reruns) > 1 and all(r == 0 for i, r in enumerate(reruns) if i not in last)


def _run_checkpoint(checkpointed_forward, blocks: nn.ModuleList, x0: Tensor, k: int, weights: Tensor,
                    seed: int) -> None:
    __tracebackhide__ = True
    count, width = len(blocks), x0.shape[1]
    groups = _groups(count, k)
    what = (f"checkpointed_forward(blocks, x, k={k}) for {count} block{'s' * (count > 1)} of width {width} and x of "
            f"shape {tuple(x0.shape)}")
    asked = f"k = {k} asks for {len(groups)} checkpoint{'s' * (len(groups) > 1)}: {_describe(groups)}"
    plain_bytes, plain_out, plain_grads = _reference(blocks, x0, weights, seed, k=None)
    x = x0.clone().requires_grad_(True)
    modes = [m.training for m in blocks.modules()]
    runs = _BlockRuns(blocks)
    failed = None
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            routes = Routes()
            saved, out = _saved_storages(lambda: call_learner(checkpointed_forward, blocks, x, k, what=what,
                                                              routes=routes))
            forward_runs = list(runs.runs)
            if routes.backward_runs:
                raise GradingFailure(f"{what} ran {routes.backward_runs} backward pass(es) itself; the part asks for "
                                     "the forward pass only (the test runs backward on your output).")
            if [m.training for m in blocks.modules()] != modes:
                blocks.train()
                raise _proven(f"{what} changed the blocks' training mode.", SWITCHED_MODE)
            if not isinstance(out, Tensor) or type(out) is not Tensor or out.grad_fn is None:
                raise GradingFailure(f"{what} returned {type(out).__name__} without a graph: backward could not reach "
                                     "the parameters.")
            expect_close(out.detach(), plain_out, what=f"{what}: the output", source="a plain forward", rtol=1e-10,
                         atol=1e-12)
            try:
                grads = _gradients_after(blocks, x, out, weights)
            except RuntimeError as error:
                failed = str(error).splitlines()[0]
            reruns = [after - before for before, after in zip(forward_runs, runs.runs)]
    finally:
        runs.remove()
    if _late_binding(reruns, groups):
        ran = [f"{_blocks([i])} ran {r} times" for i, r in enumerate(reruns) if r]
        raise _proven(f"{what}: during backward {', '.join(ran)}, and the other blocks never: every checkpoint "
                      f"reran the last group ({asked}).", LATE_BINDING)
    if failed is not None:
        raise GradingFailure(f"{what}: backward through your output failed: {failed}")
    if grads[0] is None:
        raise _proven(f"{what}: after backward, x.grad is None: x got no gradient, so your output does not depend on "
                      "the x you were given.", DETACHED_INPUT)
    wrong_rng = _reference(blocks, x0, weights, seed, k=k, rng=False)[2]
    for name, got, want, other in zip(_tensor_names(blocks), grads, plain_grads, wrong_rng):
        if got is None:
            raise GradingFailure(f"{what}: after backward, {name}.grad is None: that parameter got no gradient.")
        expect_close(got, want, what=f"{what}: the gradient of {name}", source="a plain forward", rtol=1e-8,
                     atol=1e-12, symptoms=[RNG_NOT_PRESERVED.looks_like(other)])
    if forward_runs != [1] * count:
        raise GradingFailure(f"{what} ran the blocks {forward_runs} times in the forward pass; each runs once.")
    plain = [i for i, rerun in enumerate(reruns) if rerun == 0]
    inputs_bytes = len(groups) * x0.numel() * x0.element_size()
    total = sum(saved.values())
    if len(plain) == count:
        raise _proven(f"{what}: no block ran again during backward, and the graph saved {total} bytes, as a plain "
                      f"forward does ({plain_bytes}); {asked}, which save only their inputs, {inputs_bytes} bytes.",
                      NOT_CHECKPOINTED)
    if plain:
        raise _proven(f"{what}: {_blocks(plain)} did not run again during backward: "
                      f"{'it was' if len(plain) == 1 else 'they were'} not checkpointed ({asked}).",
                      OUTSIDE_CHECKPOINT)
    if max(reruns) > 1:
        raise GradingFailure(f"{what}: during backward the blocks ran {reruns} times; in one checkpoint per group "
                             "each block runs once more.")
    made = _made(runs.saved(saved), count) if runs.saved(saved)[:1] == [0] else None
    if made is not None and made != groups:
        raise _proven(f"{what}: the graph saved the inputs of {_blocks([g[0] for g in made])}, so your checkpoints "
                      f"held {_describe(made)}; {asked}.", GROUPS_NOT_K)
    if total > inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {total} bytes; one checkpoint per group of k blocks saves "
                             f"only the groups' inputs, {inputs_bytes} (a plain forward saves {plain_bytes}).")
    if total < inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {total} bytes, less than the inputs of the {len(groups)} "
                             f"groups ({inputs_bytes}) that one checkpoint per group keeps.")


@check
def check_checkpointed_forward(checkpointed_forward, grading_seed: int | None = None) -> None:
    """Part E: checkpointed_forward(blocks, x, k) runs x through the blocks with one checkpoint per group of k
    consecutive blocks (the last group holds the rest).

    Domain: ``blocks`` an nn.ModuleList of count >= 1 float64 blocks Linear → Tanh → Dropout → Linear in training
    mode, all of one width; ``x`` a (B, width) float64 leaf that requires grad, B >= 1; ``k`` an int >= 1, possibly
    larger than count. Corners at every seed: k = 1 with a batch of one, two groups of two (a late-binding closure
    runs and is silently wrong), five blocks by two (a short last group), k = count (one group), k > count, seven
    blocks by three (3, 3, 1: groups balanced as 3, 2, 2 or the short group first show there). Contract:
    the output and, after backward, the gradients of x and every parameter of a plain forward from the same random
    state (dropout included), each named in a failure; every block runs once forward and once more in backward;
    the graph saves each group's input and nothing else (saved-tensor hooks), which shows the groups; the training
    mode, the parameters and x unchanged; no backward pass inside.
    """
    __tracebackhide__ = True
    fixed = [(3, 1, 5, 10, 1), (4, 2, 3, 6, 4), (5, 2, 4, 6, 3), (3, 3, 4, 8, 3), (2, 5, 3, 6, 2), (7, 3, 3, 6, 2)]
    gen = case_stream("10/checkpoint", grading_seed)
    drawn = [(3, 2, 4, 8, 3)] if grading_seed is None else []  # (count, k, width, hidden, batch)
    for _ in range(0 if grading_seed is None else 2):
        count = randint(gen, 2, 6)
        drawn.append((count, randint(gen, 1, count), randint(gen, 3, 8), randint(gen, 6, 16), randint(gen, 2, 6)))
    corner_gen = torch.Generator().manual_seed(1011)
    for i, (count, k, width, hidden, batch) in enumerate(fixed + drawn):
        source = corner_gen if i < len(fixed) else gen
        blocks = make_blocks(source, count, width, hidden)
        x, weights = uniform(source, (batch, width)), uniform(source, (batch, width))
        with trial():
            _run_checkpoint(checkpointed_forward, blocks, x, k, weights, randint(source, 0, 10**6))
