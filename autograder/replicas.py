"""Data-parallel training simulated with threads, for lesson 03: ranks, a toy all-reduce, and pictures of both.

Two (or more) threads play the ranks of a data-parallel job. Each holds its own copy of a tiny two-layer network
(:class:`Problem`) and its own shard of the batch, runs forward and backward, and synchronises gradients through a
:class:`ToyAllReduce` from hooks that the lesson writes itself and passes in::

    def attach(params, rank, collective, note):          # the lesson's part: how a rank hooks its parameters
        for name, param in params.items():
            param.register_post_accumulate_grad_hook(...)

    world = run_world(attach, reaches_backward=[True, True])
    world.events(0)         # ['backward starts', 'W2: enter all-reduce', ...]

The all-reduce blocks on a :class:`threading.Barrier` until every rank has arrived (or a timeout passes, like a real
collective's process-group timeout), so a rank that never reaches backward leaves the others waiting inside theirs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Problem:
    """A batch and the starting weights of a two-layer tanh network with a mean squared error, all float64."""

    inputs: torch.Tensor
    targets: torch.Tensor
    initial: Params

    @classmethod
    def make(cls, seed: int = 0, batch: int = 8, features: int = 3, hidden: int = 4) -> Problem:
        gen = torch.Generator().manual_seed(seed)
        inputs = torch.randn(batch, features, dtype=torch.float64, generator=gen)
        targets = torch.randn(batch, 1, dtype=torch.float64, generator=gen)
        initial = {"W1": 0.5 * torch.randn(features, hidden, dtype=torch.float64, generator=gen),
                   "W2": 0.5 * torch.randn(hidden, 1, dtype=torch.float64, generator=gen)}
        return cls(inputs, targets, initial)

    def fresh_params(self) -> Params:
        """A replica: leaf copies of the starting weights that require grad."""
        return {name: value.clone().requires_grad_(True) for name, value in self.initial.items()}

    def loss(self, params: Params, rows: slice = slice(None)) -> torch.Tensor:
        """Mean squared error of the network on ``rows`` of the batch."""
        hidden = torch.tanh(self.inputs[rows] @ params["W1"])
        return ((hidden @ params["W2"] - self.targets[rows]) ** 2).mean()

    def gradient(self, rows: slice = slice(None)) -> Params:
        """The gradient of :meth:`loss` on ``rows`` at the starting weights, by one plain backward pass."""
        params = self.fresh_params()
        self.loss(params, rows).backward()
        return {name: param.grad for name, param in params.items()}


class ToyAllReduce:
    """Averages one tensor per key across ``world_size`` threads; each call blocks until every rank has arrived."""

    def __init__(self, world_size: int, timeout: float):
        self.world_size = world_size
        self.barrier = threading.Barrier(world_size, timeout=timeout)
        self.inbox: dict[tuple[str, int], torch.Tensor] = {}

    def average(self, rank: int, key: str, tensor: torch.Tensor) -> torch.Tensor:
        self.inbox[key, rank] = tensor.detach().clone()
        self.barrier.wait()  # the collective: nobody leaves until everybody has arrived (or the timeout)
        return sum(self.inbox[key, r] for r in range(self.world_size)) / self.world_size


#: attach(params, rank, collective, note): registers a rank's synchronising hooks; note(event) logs an event.
Attach = Callable[[Params, int, ToyAllReduce, Callable[[str], None]], None]


@dataclass
class World:
    """What one simulated step left behind: every rank's parameters and the log of (rank, time, event)."""

    replicas: dict[int, Params] = field(default_factory=dict)
    log: list[tuple[int, float, str]] = field(default_factory=list)

    def events(self, rank: int) -> list[str]:
        """One rank's events, in time order."""
        return [event for r, _, event in sorted(self.log, key=lambda entry: entry[1]) if r == rank]

    def time_of(self, rank: int, event: str) -> float:
        return next(t for r, t, e in self.log if r == rank and e == event)


def run_rank(problem: Problem, attach: Attach, rank: int, collective: ToyAllReduce, world: World,
             reaches_backward: bool = True, micro_batches: int = 1) -> None:
    """One rank's step: a replica, its hooks, then forward and (unless it never gets there) backward on its shard,
    split into ``micro_batches`` equal parts whose gradients accumulate in .grad (each loss divided by their number,
    so that the sum is the gradient of the shard's mean loss)."""
    params = problem.fresh_params()
    world.replicas[rank] = params

    def note(event: str) -> None:
        world.log.append((rank, time.perf_counter(), event))

    attach(params, rank, collective, note)
    shard = len(problem.inputs) // collective.world_size
    size = shard // micro_batches
    starts = range(shard * rank, shard * (rank + 1), size)
    losses = [problem.loss(params, slice(start, start + size)) / micro_batches for start in starts]
    if not reaches_backward:  # it crashed, its data ran out a step early, a rank-dependent `if` skipped the step
        note("never calls backward")
        return
    for loss in losses:
        note("backward starts")
        try:
            loss.backward()
            note("backward done")
        except threading.BrokenBarrierError:
            note("gave up waiting (BrokenBarrierError)")
            return


def run_world(attach: Attach, reaches_backward: list[bool], timeout: float = 0.3, problem: Problem | None = None,
              micro_batches: int = 1) -> World:
    """One data-parallel step, one thread per rank; ``reaches_backward[r]`` says whether rank r calls backward."""
    problem = problem or Problem.make()
    collective, world = ToyAllReduce(len(reaches_backward), timeout), World()
    threads = [threading.Thread(target=run_rank, args=(problem, attach, rank, collective, world, reaches,
                                                       micro_batches))
               for rank, reaches in enumerate(reaches_backward)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return world


# -------------------------------------------------------------------------------------------------- pictures

def plot_lanes(world: World, ax, title: str, unit: float = 1e3, unit_name: str = "ms"):
    """One lane per rank: grey while computing, red while waiting inside an all-reduce, a dot per event."""
    t0 = min(t for _, t, _ in world.log)
    ranks = sorted({r for r, _, _ in world.log})
    for rank in ranks:
        events = [(t, e) for r, t, e in sorted(world.log, key=lambda entry: entry[1]) if r == rank]
        if len(events) > 1:
            ax.plot([(events[0][0] - t0) * unit, (events[-1][0] - t0) * unit], [rank, rank], color="0.75", lw=6)
        entered = None
        for t, event in events:
            if "enter" in event:
                entered = t
            elif entered is not None and ("done" in event or "gave up" in event):
                ax.plot([(entered - t0) * unit, (t - t0) * unit], [rank, rank], color="#dc2626", lw=6)
                entered = None
            ax.plot((t - t0) * unit, rank, "o", color="black", ms=4)
        ax.annotate(events[-1][1], ((events[-1][0] - t0) * unit, rank), textcoords="offset points",
                    xytext=(0, 9), ha="right", fontsize=8)
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.set_ylim(-0.6, max(ranks) + 0.6)
    ax.set_xlabel(f"time since the first event ({unit_name})")
    ax.set_title(title, fontsize=10)
    return ax


def plot_arrivals(arrivals: list[tuple[str, str, float]], ax, xlabel: str = "order in which the hooks fired"):
    """One column per hook call, in firing order: ``("complete", who, value)`` on the top row (a tensor hook saw a
    finished gradient), ``("sent", who, value)`` on the bottom row (a node hook saw a contribution leave)."""
    rows = {"complete": 1, "sent": 0}
    for step, (kind, who, value) in enumerate(arrivals, start=1):
        ax.scatter(step, rows[kind], s=90, color="#1d4ed8" if kind == "complete" else "#c2410c", zorder=3)
        ax.annotate(f"{who}\n= {value:g}", (step, rows[kind]), textcoords="offset points",
                    xytext=(0, 12 if kind == "complete" else -28), ha="center", fontsize=8)
    for row in rows.values():
        ax.plot([1, len(arrivals)], [row, row], color="0.85", zorder=1)
    ax.set_yticks([0, 1], ["node sends\n(node hook)", "gradient complete\n(tensor hook)"])
    ax.set_xticks(range(1, len(arrivals) + 1))
    ax.set_xlabel(xlabel)
    ax.set_ylim(-0.8, 1.7)
    ax.set_xlim(0.4, len(arrivals) + 0.6)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return ax
