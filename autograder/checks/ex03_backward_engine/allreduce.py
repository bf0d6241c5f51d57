"""Part C: attach_allreduce_hooks(replicas, all_reduce, bucket_size), a bucketed gradient all-reduce made of hooks
across simulated data-parallel replicas."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from ...checking import GradingFailure, Misconception, call_learner, check, expect_close, proven_failure, trial
from ...seeding import choice, generator, uniform
from ..cases import mean_loss_gradients, random_mlp
from .misconceptions import (
    AVERAGED_EARLY,
    BYPASSED_ALL_REDUCE,
    CHANGED_PARAMETERS,
    FIRST_ROUND_ONLY,
    FORWARD_BUCKETS,
    LATE_ALL_REDUCE,
    NO_AVERAGING,
    ONE_BUCKET,
    ONLY_FIRED,
    PER_PARAMETER,
    SHARED_GRAD,
    STRICT_BOUNDARY,
    SUMMED,
    TENSOR_HOOK_READS_GRAD,
    TENSOR_TRUTH_VALUE,
)


def fill_buckets(numels: list[tuple[str, int]], bucket_size: int, strict: bool = False) -> list[list[str]]:
    """Consecutive names of ``numels`` (name, number of elements), a bucket closed as soon as it holds at least
    ``bucket_size`` elements (``strict``: more than, a mistake); the last bucket may hold fewer."""
    buckets, current, filled = [], [], 0
    for name, numel in numels:
        current.append(name)
        filled += numel
        if filled > bucket_size or (filled == bucket_size and not strict):
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


@dataclass
class ReplicaCase:
    sizes: tuple[int, ...]
    model: nn.Sequential
    bucket_size: int
    rounds: list[tuple[torch.Tensor, torch.Tensor, list[int]]]  # (batch inputs, batch targets, backward order)

    @property
    def replicas(self) -> int:
        return len(self.rounds[0][2])

    def shard(self, round_index: int, replica: int) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets, _ = self.rounds[round_index]
        rows = slice(replica * len(inputs) // self.replicas, (replica + 1) * len(inputs) // self.replicas)
        return inputs[rows], targets[rows]

    def numels(self) -> list[tuple[str, int]]:
        return [(name, param.numel()) for name, param in self.model.named_parameters()]

    def buckets(self, reverse: bool = True, strict: bool = False) -> list[list[str]]:
        """The buckets of the part's text (reverse order of model.parameters()); ``reverse=False``: filled in the
        forward order instead, ``strict``: closed only past bucket_size (mistakes)."""
        return fill_buckets(self.numels()[::-1] if reverse else self.numels(), self.bucket_size, strict)

    def describe_buckets(self) -> str:
        numel = dict(self.numels())
        return ", ".join(f"[{', '.join(bucket)}] ({sum(numel[name] for name in bucket)} numbers)"
                         for bucket in self.buckets())


def _replica_case(gen: torch.Generator, sizes, replicas: int, shard: int, bucket_size: int,
                  orders: list[list[int]]) -> ReplicaCase:
    batch = replicas * shard
    rounds = [(uniform(gen, (batch, sizes[0])), uniform(gen, (batch, sizes[-1])), order) for order in orders]
    return ReplicaCase(tuple(sizes), random_mlp(gen, sizes), bucket_size, rounds)


def _orders(gen: torch.Generator, replicas: int) -> list[list[int]]:
    """Two rounds' backward orders: the first does not end with the last replica (so it is not 0, 1, 2...), the
    second differs from the first."""
    first = torch.randperm(replicas, generator=gen).tolist()
    if first[-1] == replicas - 1:
        first.reverse()
    second = torch.randperm(replicas, generator=gen).tolist()
    if second == first:
        second.reverse()
    return [first, second]


#: Corners of Part C's domain, run at every seed (after the visible cases, before the drawn ones): bucket_size 1
#: (every parameter its own bucket, with two replicas; the last layer's bias holds exactly 1 number) and a
#: bucket_size larger than the model (one bucket for everything, with three replicas).
def _corner_cases():
    gen = generator("03/allreduce/corners", 0)
    yield _replica_case(gen, (3, 4, 1), 2, 3, 1, [[1, 0], [0, 1]])
    yield _replica_case(gen, (2, 3, 1), 3, 2, 1000, [[2, 0, 1], [1, 2, 0]])


def _drawn_bucket_size(gen: torch.Generator, case_numels: list[tuple[str, int]], exact: bool = False) -> int:
    """A bucket_size that gives two buckets or more, one of them with two parameters or more; ``exact``: one where
    some bucket reaches exactly bucket_size (closing it only past bucket_size gives other buckets)."""
    reverse = case_numels[::-1]
    sizes = [size for size in range(2, sum(n for _, n in reverse))
             if 1 < len(fill_buckets(reverse, size)) < len(reverse)]
    boundary = [size for size in sizes if fill_buckets(reverse, size, strict=True) != fill_buckets(reverse, size)]
    return choice(gen, boundary if exact and boundary else sizes)


def _replica_cases(grading_seed: int | None):
    """Every case has two rounds; round 1 never runs the replicas in index order (it does not end with the last
    one), so a hook that waits for the last replica by index fires too early."""
    if grading_seed is None:
        gen = generator("03/allreduce/public", 0)
        # buckets [2.bias, 2.weight, 0.bias] (14: across layers; a count that started from 1 would close after
        # 2.weight) and [0.weight] (12)
        yield _replica_case(gen, (3, 4, 2), 2, 3, 11, [[1, 0], [0, 1]])
        # buckets [2.bias, 2.weight] (4, closed exactly) and [0.bias, 0.weight] (9: a bucket that counts its own
        # elements from 0 again; one that went on from 1 would close after 0.bias)
        yield _replica_case(gen, (2, 3, 1), 3, 2, 4, [[2, 0, 1], [1, 2, 0]])
        yield from _corner_cases()
        return
    yield from _corner_cases()
    gen = generator("03/allreduce", grading_seed)
    for pinned in ([2], [3, 4]):  # two replicas, then more than two, at every seed
        replicas = choice(gen, pinned)
        sizes = (choice(gen, [2, 3, 4]), choice(gen, [3, 5]), *([choice(gen, [2, 3])] if choice(gen, [0, 1]) else []),
                 choice(gen, [1, 2]))
        model_numels = [(name, param.numel()) for name, param in random_mlp(gen, sizes).named_parameters()]
        bucket_size = _drawn_bucket_size(gen, model_numels, exact=pinned == [2])
        yield _replica_case(gen, sizes, replicas, choice(gen, [2, 3]), bucket_size, _orders(gen, replicas))


class _Wire:
    """The check's side of one set of replicas: every gradient's arrival (seen by tensor hooks registered before the
    learner's, so they fire first) and every all_reduce call, in one log."""

    def __init__(self, models: list[nn.Module]):
        self.replicas = len(models)
        self.log: list[tuple] = []  # ("arrive", replica, name) or ("call", [flat tensor per replica])
        for replica, model in enumerate(models):
            for name, param in model.named_parameters():
                param.register_hook(partial(self._arrived, replica, name))

    def _arrived(self, replica: int, name: str, grad: torch.Tensor) -> None:
        self.log.append(("arrive", replica, name))

    def all_reduce(self, tensors):
        """The network: one 1-D tensor per replica in, their element-wise sum out (a new tensor)."""
        if type(tensors) not in (list, tuple) or len(tensors) != self.replicas or not all(
                isinstance(t, torch.Tensor) and t.dim() == 1 for t in tensors):
            raise TypeError(f"all_reduce takes a list with one 1-D tensor per replica ({self.replicas} here); it got "
                            f"{_describe_tensors(tensors)}")
        if len({t.numel() for t in tensors}) != 1:
            raise ValueError(f"all_reduce needs tensors of the same length from every replica; it got lengths "
                             f"{[t.numel() for t in tensors]}")
        flats = [t.detach().to(torch.float64).clone() for t in tensors]
        self.log.append(("call", flats))
        return torch.stack(flats).sum(0)

    def arrivals(self) -> list[tuple[int, str]]:
        return [(entry[1], entry[2]) for entry in self.log if entry[0] == "arrive"]

    def calls(self) -> list[tuple[int, list[torch.Tensor]]]:
        """Each call with the number of gradients that had arrived when it was made."""
        calls, arrived = [], 0
        for entry in self.log:
            if entry[0] == "arrive":
                arrived += 1
            else:
                calls.append((arrived, entry[1]))
        return calls


def _describe_tensors(tensors) -> str:
    if type(tensors) not in (list, tuple):
        return f"a {type(tensors).__name__}"
    kinds = [f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__ for t in tensors]
    return f"a {type(tensors).__name__} of {len(tensors)}: {', '.join(kinds)}"


@dataclass
class _Setup:
    models: list[nn.Module]
    wire: _Wire
    versions: list[list[int]]  # every parameter's version counter once the hooks are attached


def _label(case: ReplicaCase) -> str:
    shard = len(case.rounds[0][0]) // case.replicas
    return (f"attach_allreduce_hooks(replicas, all_reduce, bucket_size={case.bucket_size}) for {case.replicas} "
            f"replicas of an MLP with layer sizes {case.sizes}, each running backward on a shard of {shard} examples "
            f"(mean squared error); buckets: {case.describe_buckets()}")


def _fresh_replicas(attach_allreduce_hooks_fn, case: ReplicaCase) -> _Setup:
    __tracebackhide__ = True
    models = [copy.deepcopy(case.model) for _ in range(case.replicas)]
    wire = _Wire(models)
    call_learner(attach_allreduce_hooks_fn, models, wire.all_reduce, case.bucket_size, what=_label(case))
    return _Setup(models, wire, [[param._version for param in model.parameters()] for model in models])


def _backward(case: ReplicaCase, setup: _Setup, round_index: int, replicas: list[int],
              caught: list[BaseException] | None = None) -> None:
    """Each replica in ``replicas``, in turn, runs forward and backward on its shard of the round's batch."""
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    for replica in replicas:
        inputs, targets = case.shard(round_index, replica)
        loss = F.mse_loss(setup.models[replica](inputs), targets)

        def run(loss=loss):
            try:
                loss.backward()
            except Exception as error:
                if caught is not None:
                    caught.append(error)
                raise

        call_learner(run, what=f"round {round_index + 1} (backward order {order}): replica {replica}'s "
                               "loss.backward() (your hooks run inside it)")


def _runs_with_grads_set(attach_allreduce_hooks_fn, case: ReplicaCase, round_index: int, ran: list[int],
                         unset: int | None = None) -> bool:
    """Replay the backward calls ``ran`` of a round on fresh replicas whose every .grad (but replica ``unset``'s)
    already holds zeros: does the learner's code now run through?"""
    try:
        setup = _fresh_replicas(attach_allreduce_hooks_fn, case)
        for replica, model in enumerate(setup.models):
            for param in model.parameters():
                param.grad = None if replica == unset else torch.zeros_like(param)
        _backward(case, setup, round_index, ran)
    except GradingFailure:
        return False
    return True


def _not_arrived(case: ReplicaCase, arrivals: list[tuple[int, str]]) -> str:
    names = [name for name, _ in case.numels()]
    parts = []
    for replica in range(case.replicas):
        missing = [name for name in names if (replica, name) not in arrivals]
        if len(missing) == len(names):
            parts.append(f"replica {replica}: all (its backward had not run yet)")
        elif missing:
            parts.append(f"replica {replica}: {', '.join(missing)}")
    return "; ".join(parts)


def _crash_cause(attach_allreduce_hooks_fn, case: ReplicaCase, setup: _Setup, round_index: int, position: int,
                 error: BaseException | None) -> tuple[str, Misconception] | None:
    """Why the backward of the replica at ``position`` of the round's order crashed: a tensor asked for a truth
    value, or (shown by a replay) a .grad that was still None: its own, read in a hook that fires before .grad is
    written, or one whose gradient had not arrived yet."""
    if isinstance(error, RuntimeError) and "Boolean value of Tensor" in str(error):
        return "  your hook compared tensors (or tested one) where it needed a single True/False.", TENSOR_TRUTH_VALUE
    order = case.rounds[round_index][2]
    ran, replica = order[:position + 1], order[position]
    if not _runs_with_grads_set(attach_allreduce_hooks_fn, case, round_index, ran):
        return None  # not about .grad at all
    arrivals = setup.wire.arrivals()
    completing = bool(arrivals) and any(
        arrivals[-1][1] in bucket and all((r, name) in arrivals for r in range(case.replicas) for name in bucket)
        for bucket in case.buckets())
    if completing and not _runs_with_grads_set(attach_allreduce_hooks_fn, case, round_index, ran, unset=replica):
        return (f"  it crashed as replica {replica}'s {arrivals[-1][1]} completed its bucket; replayed with every "
                f"other replica's .grad set, it still crashed: your hook read replica {replica}'s own .grad before "
                "backward had written it.", TENSOR_HOOK_READS_GRAD)
    last = f"just after replica {arrivals[-1][0]}'s {arrivals[-1][1]} arrived; " if arrivals else ""
    return (f"  it crashed {last}these gradients of round {round_index + 1} had not arrived yet: "
            f"{_not_arrived(case, arrivals)}\n  (replayed with every .grad already set, your hooks ran through: they "
            "read a .grad that was still None.)", AVERAGED_EARLY)


def _run_round(attach_allreduce_hooks_fn, case: ReplicaCase, setup: _Setup, round_index: int) -> None:
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    for model in setup.models:
        model.zero_grad()
    setup.wire.log.clear()
    for position, replica in enumerate(order):
        caught: list[BaseException] = []
        try:
            _backward(case, setup, round_index, [replica], caught)
        except GradingFailure as failure:
            cause = _crash_cause(attach_allreduce_hooks_fn, case, setup, round_index, position,
                                 caught[-1] if caught else None)
            if cause is None:
                raise
            raise GradingFailure(f"{_label(case)}:\n  {failure.message}\n{cause[0]}", suspects=(cause[1],)) from None


def _close(a: torch.Tensor | None, b: torch.Tensor) -> bool:
    return a is not None and a.shape == b.shape and torch.allclose(a.detach().double(), b, rtol=1e-6, atol=1e-8)


def _flat(grads: dict[str, torch.Tensor], bucket: list[str]) -> torch.Tensor:
    return torch.cat([grads[name].reshape(-1) for name in bucket])


def _check_calls(case: ReplicaCase, setup: _Setup, round_index: int, own: list[dict[str, torch.Tensor]],
                 expected: dict[str, torch.Tensor]) -> None:
    """The round's all_reduce calls: one per bucket, each with the replicas' gradients of that bucket in replica
    order, made from the hook whose gradient completed the bucket (before any other gradient arrived)."""
    __tracebackhide__ = True
    order = case.rounds[round_index][2]
    where = f"{_label(case)}; round {round_index + 1} (backward order {order})"
    calls, arrivals = setup.wire.calls(), setup.wire.arrivals()
    buckets = case.buckets()
    numel = dict(case.numels())
    lengths = sorted(sum(numel[name] for name in bucket) for bucket in buckets)
    if not calls:
        grads = [{name: param.grad for name, param in model.named_parameters()} for model in setup.models]
        kept_own = all(_close(grads[r][name], own[r][name]) for r in range(case.replicas) for name in numel)
        averaged = all(_close(grads[r][name], expected[name]) for r in range(case.replicas) for name in numel)
        message = f"{where}: all_reduce was never called (expected one call per bucket)."
        if kept_own or averaged:
            raise proven_failure(message, NO_AVERAGING if kept_own else BYPASSED_ALL_REDUCE)
        raise GradingFailure(message)
    got = sorted(flats[0].numel() for _, flats in calls)
    if got != lengths:
        forward = sorted(sum(numel[name] for name in bucket) for bucket in case.buckets(reverse=False))
        strict = sorted(sum(numel[name] for name in bucket) for bucket in case.buckets(strict=True))
        looks = [(PER_PARAMETER, got == sorted(numel.values())), (ONE_BUCKET, got == [sum(numel.values())]),
                 (FORWARD_BUCKETS, got == forward), (STRICT_BOUNDARY, got == strict)]
        raise GradingFailure(
            f"{where}: your hooks called all_reduce {len(calls)} time(s), with tensors of "
            f"{', '.join(str(flats[0].numel()) for _, flats in calls)} numbers; expected one call per bucket: "
            f"{case.describe_buckets()}.", suspects=tuple(mistake for mistake, seen in looks if seen))
    complete_at = {tuple(bucket): 1 + max(arrivals.index((r, name)) for r in range(case.replicas) for name in bucket)
                   for bucket in buckets}
    sent: set[tuple[str, ...]] = set()
    for number, (arrived, flats) in enumerate(calls, start=1):
        wanted = {tuple(bucket): [_flat(own[r], bucket) for r in range(case.replicas)] for bucket in buckets}
        match = [bucket for bucket, parts in wanted.items()
                 if all(_close(flat, part) for flat, part in zip(flats, parts))]
        if not match:
            unwritten = [hole for bucket, parts in wanted.items() for hole in _one_gradient_zero(flats, parts, bucket,
                                                                                                 numel)]
            raise GradingFailure("\n".join([
                f"{where}: all_reduce call {number} was sent {len(flats)} tensors of {flats[0].numel()} numbers that "
                "are not the replicas' gradients of one bucket.",
                "  expected: for each replica in order (replicas[0] first), the gradients of the bucket's "
                "parameters, flattened and concatenated in the bucket's order (the reverse of model.parameters()).",
                f"  buckets:            {case.describe_buckets()}",
                f"  your call, replica 0: {_show_flat(flats[0])}",
                *(f"  bucket [{', '.join(bucket)}], replica 0: {_show_flat(parts[0])}{_first_difference(flats, parts)}"
                  for bucket, parts in wanted.items() if parts[0].numel() == flats[0].numel()),
                *(["  your numbers are that bucket's, in another order: each replica's tensor must hold its own "
                   "gradients, parameter after parameter in the bucket's order."]
                  if any(_same_numbers(flats, parts) for parts in wanted.values()) else []),
                *(f"  your call matches that bucket except replica {replica}'s {name}, sent as all zeros"
                  for replica, name in unwritten[:1])]), suspects=(TENSOR_HOOK_READS_GRAD,) if unwritten else ())
        bucket = match[0]
        if bucket in sent:
            raise GradingFailure(f"{where}: bucket [{', '.join(bucket)}] was sent to all_reduce twice in one round.")
        sent.add(bucket)
        if arrived != complete_at[bucket]:
            completing = arrivals[complete_at[bucket] - 1]
            raise proven_failure(
                f"{where}: bucket [{', '.join(bucket)}] was complete when replica {completing[0]}'s {completing[1]} "
                f"arrived (gradient {complete_at[bucket]} of the round), but your all_reduce call for it came only "
                f"after {arrived} gradients had arrived.", LATE_ALL_REDUCE)


def _one_gradient_zero(flats: list[torch.Tensor], parts: list[torch.Tensor], bucket: tuple[str, ...],
                       numel: dict[str, int]) -> list[tuple[int, str]]:
    """The (replica, parameter) whose gradient the call carries as zeros, everything else right: what a hook reads
    from a .grad that does not hold this round's gradient yet (None, taken as zeros)."""
    if any(flat.shape != part.shape for flat, part in zip(flats, parts)):
        return []
    found = []
    for replica, part in enumerate(parts):
        start = 0
        for name in bucket:
            stop = start + numel[name]
            hole = [other.clone() for other in parts]
            hole[replica][start:stop] = 0.0
            if part[start:stop].abs().max() > 0 and all(_close(flat, want) for flat, want in zip(flats, hole)):
                found.append((replica, name))
            start = stop
    return found


def _same_numbers(flats: list[torch.Tensor], parts: list[torch.Tensor]) -> bool:
    """The call carries exactly the bucket's numbers, arranged differently (replicas or parameters swapped)."""
    mine, theirs = torch.cat(flats).detach().double(), torch.cat(parts)
    return mine.shape == theirs.shape and torch.allclose(mine.sort().values, theirs.sort().values, rtol=1e-6,
                                                         atol=1e-8)


def _first_difference(flats: list, parts: list) -> str:
    """Where a call's tensors first differ from a bucket's (replica, position, both numbers): the first six numbers
    shown may agree while a later one does not."""
    for replica, (flat, part) in enumerate(zip(flats, parts)):
        differ = ~torch.isclose(flat.double(), part.double(), rtol=1e-6, atol=1e-9)
        if differ.any():
            at = int(differ.nonzero()[0])
            return (f"\n    first difference: replica {replica}, position {at}: yours {float(flat[at]):.6g}, the "
                    f"bucket's {float(part[at]):.6g}")
    return ""


def _show_flat(flat: torch.Tensor) -> str:
    values = ", ".join(f"{v:.6g}" for v in flat[:6].tolist())
    return f"[{values}{', ...' if flat.numel() > 6 else ''}] ({flat.numel()} numbers)"


def _replica_symptoms(grads_now: list, replica: int, expected: torch.Tensor, own: torch.Tensor,
                      replicas: int) -> list:
    kept_own = _close(grads_now[replica], own)
    others_averaged = any(_close(g, expected) for r, g in enumerate(grads_now) if r != replica)
    return [SUMMED.looks_like(replicas * expected), ONLY_FIRED.given(kept_own and others_averaged)]


def _check_round(case: ReplicaCase, setup: _Setup, round_index: int) -> None:
    __tracebackhide__ = True
    inputs, targets, order = case.rounds[round_index]
    expected, fd = mean_loss_gradients(case.model, F.mse_loss, inputs, targets)
    own = [mean_loss_gradients(case.model, F.mse_loss, *case.shard(round_index, r), fd=False)[0]
           for r in range(case.replicas)]
    _check_calls(case, setup, round_index, own, expected)
    where = f"{_label(case)}; round {round_index + 1} (backward order {order})"
    for name, _ in case.model.named_parameters():
        grads_now = [dict(m.named_parameters())[name].grad for m in setup.models]
        for replica, grad in enumerate(grads_now):
            what = f"{where}: replica {replica}'s {name}.grad"
            if grad is None:
                raise GradingFailure(f"{what} is None: every replica must hold the averaged gradient.")
            expect_close(grad, expected[name], what=what, fd=fd[name], extra=(
                "  expected:           the gradient of the mean loss over the whole batch (= the average of the "
                "replicas' own gradients)"),
                symptoms=_replica_symptoms(grads_now, replica, expected[name], own[replica][name], case.replicas))
        pointers = [grad.untyped_storage().data_ptr() for grad in grads_now]
        if len(set(pointers)) < len(pointers):
            raise proven_failure(f"{where}: the replicas' {name}.grad are not separate tensors (two or more share "
                                 "memory).", SHARED_GRAD)


def _play_round(attach_allreduce_hooks_fn, case: ReplicaCase, setup: _Setup, round_index: int) -> None:
    __tracebackhide__ = True
    _run_round(attach_allreduce_hooks_fn, case, setup, round_index)
    for replica, model in enumerate(setup.models):
        for (name, param), original, version in zip(model.named_parameters(), case.model.parameters(),
                                                    setup.versions[replica]):
            if not torch.equal(param.detach(), original.detach()) or param._version != version:
                raise proven_failure(f"{_label(case)}; round {round_index + 1}: replica {replica}'s parameter {name} "
                                     "was changed during backward.", CHANGED_PARAMETERS)
    _check_round(case, setup, round_index)


def _passes_as_first_round(attach_allreduce_hooks_fn, case: ReplicaCase, round_index: int) -> bool:
    """Does round ``round_index`` pass on fresh replicas, as the first round they ever run?"""
    try:
        _play_round(attach_allreduce_hooks_fn, case, _fresh_replicas(attach_allreduce_hooks_fn, case), round_index)
    except GradingFailure:
        return False
    return True


def _check_replicas(attach_allreduce_hooks_fn, case: ReplicaCase) -> None:
    __tracebackhide__ = True
    setup = _fresh_replicas(attach_allreduce_hooks_fn, case)
    for round_index in range(len(case.rounds)):
        try:
            _play_round(attach_allreduce_hooks_fn, case, setup, round_index)
        except GradingFailure as failure:
            if round_index and _passes_as_first_round(attach_allreduce_hooks_fn, case, round_index):
                raise proven_failure(f"{failure.message}\n  Round {round_index + 1} alone, on fresh replicas, passes: "
                                     "your hooks kept something from round 1.", FIRST_ROUND_ONLY) from None
            raise


@check
def check_attach_allreduce_hooks(attach_allreduce_hooks_fn, grading_seed: int | None = None) -> None:
    """Part C: attach_allreduce_hooks(replicas, all_reduce, bucket_size) registers hooks that, in every round, send
    each bucket once through all_reduce as soon as it is complete and leave in every replica's .grad the full-batch
    gradient, in a tensor of its own, the parameters unchanged.

    Domain: a list of 2 to 4 identical float64 MLPs (same weights; every parameter gets a gradient in every
    backward), hooks attached once, then rounds of zero_grad() (every .grad None) and one backward per replica on
    equal shards, in an order that is not 0, 1, 2...; bucket_size a positive int. Pinned at every seed
    (_corner_cases): bucket_size 1 (one bucket per parameter, two replicas) and a bucket_size larger than the model
    (one bucket, three replicas); drawn: two replicas and three or four, two buckets or more with at least one of two
    parameters or more; round 1 never ends with the last replica, round 2 differs. Contracts and their checks: "the
    average of that parameter's gradients over the replicas" -> each replica's .grad against the full-batch gradient
    (autograd and finite differences), after every round (SUMMED, ONLY_FIRED; FIRST_ROUND_ONLY when the failing
    round passes as a first round on fresh replicas); "once per bucket" -> the calls the check's all_reduce
    recorded: their number and lengths (PER_PARAMETER, ONE_BUCKET, FORWARD_BUCKETS), none at all (NO_AVERAGING,
    BYPASSED_ALL_REDUCE), each bucket once; "replica i's gradients ... flattened and concatenated in the bucket's
    order" -> each call's tensors against the replicas' own shard gradients; "as soon as the bucket is complete" ->
    the call comes before any other gradient arrives (LATE_ALL_REDUCE); "in some order" -> hooks that reduce early
    crash on a None .grad (AVERAGED_EARLY, TENSOR_HOOK_READS_GRAD, by replay; TENSOR_TRUTH_VALUE from the error);
    "a tensor of its own" -> storage pointers differ (SHARED_GRAD); "the parameters never change" -> values and
    version counters (CHANGED_PARAMETERS).
    """
    __tracebackhide__ = True
    for case in _replica_cases(grading_seed):
        with trial():
            _check_replicas(attach_allreduce_hooks_fn, case)
