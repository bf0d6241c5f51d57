"""Part B: mixed_features(fn, x), the output columns of a batch function that depend on an example's batch-mates.

Every case is a function of a known family whose mixed columns are known by construction: per-example functions,
functions that combine the batch in a way that cancels (so that only round-off moves), statistics over the batch
(mean, standard deviation, maximum, softmax over the batch), a dependence on the batch's size alone, on an earlier
row (the first example, a running sum), the lesson's square-batch bug, which runs only on square batches, and a
per-example function that depends on an example's row (a positional encoding: no mixing). The
check watches the batches the learner's code hands to ``fn`` (:class:`Recorder`): what they were (x itself, its rows
shuffled, x repeated, its first rows, other rows) is the evidence a failure shows, and it proves the mistakes a
probe cannot see past.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ...checking import GradingFailure, Misconception, call_learner, check, proven_failure, trial
from ..cases import case_stream, randint
from .misconceptions import (
    FIRST_ROWS_KEPT,
    NAN_UNSEEN,
    POSITION_MOVED,
    PROBE_REFUSED,
    ROUNDOFF_COUNTED,
    SIZE_BLIND,
    STATISTICS_KEPT,
)

Tensor = torch.Tensor


#: What a probe batch is, in relation to x: x itself, its rows shuffled, x repeated, its first rows, some other of
#: its rows, or rows of which at least one is not x's.
ITSELF, SHUFFLED, REPEATED, PREFIX, SOME, OTHER = ("x itself", "x shuffled", "x repeated", "x's first rows",
                                                   "some of x's rows", "new rows")


@dataclass(frozen=True)
class BatchFunction:
    """One case: ``fn`` on the batch ``x``; ``mixed`` its mixing output columns; ``blind`` the kinds of probe that
    cannot see its mixing, and ``mistake`` the one to name when every probe was of those kinds; ``words`` what it
    computes, as a failure shows it."""

    words: str
    fn: Callable[[Tensor], Tensor]
    x: Tensor
    mixed: tuple[int, ...]
    blind: frozenset[str] = frozenset()
    mistake: Misconception | None = None
    roundoff: bool = False


def _columns(out: Tensor, columns: tuple[int, ...], mixed: Tensor) -> Tensor:
    """``out`` with ``columns`` taken from ``mixed`` (the rest stay per-example)."""
    out = out.clone()
    out[:, list(columns)] = mixed[:, list(columns)]
    return out


def _softmax_shifted(x: Tensor) -> Tensor:
    """A softmax over each row's features, shifted by the batch's maximum: per example in mathematics."""
    e = torch.exp(x - x.max())
    return e / e.sum(dim=1, keepdim=True)


def _undone(x: Tensor) -> Tensor:
    """A batch normalisation, undone: per example up to round-off."""
    mu, sd = x.mean(dim=0), x.std(dim=0, unbiased=False) + 1
    return (x - mu) / sd * sd + mu


STATS = frozenset({ITSELF, SHUFFLED, REPEATED})
EARLIER = frozenset({ITSELF, PREFIX, REPEATED})
SAME = frozenset({ITSELF, SHUFFLED})


def _cases(grading_seed: int | None) -> list[BatchFunction]:
    """Every family once, with fixed (public) or drawn (hidden) sizes, columns and data: n from 3 to 6 examples, d
    from 3 to 5 features, square families n = d from 3 to 4; the last entry of every x is 0.001."""
    gen = case_stream("08/mixed_features", grading_seed)
    n, d, square = randint(gen, 3, 6), randint(gen, 3, 5), randint(gen, 3, 4)
    columns = tuple(sorted(torch.randperm(d, generator=gen)[:randint(gen, 1, d - 1)].tolist()))
    weights = torch.rand((d, 2), generator=gen, dtype=torch.float64) * 2 - 1
    every, cols = tuple(range(d)), list(columns)
    families = [
        ("relu(x @ W + bias), W of shape (d, 2), the second unit dead (its bias -100: always 0)",
         lambda x: torch.relu(x @ weights + torch.tensor([0.0, -100.0], dtype=x.dtype)), (), frozenset(), None),
        ("each row standardised over its own features",
         lambda x: (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True), (), frozenset(), None),
        ("a softmax over each row's features, shifted by the batch's maximum", _softmax_shifted, (), frozenset(),
         "roundoff"),
        ("a batch normalisation of 1e5 * x, undone: (y - mean_0) / sd_0 * sd_0 + mean_0 for y = 1e5 * x",
         lambda x: _undone(1e5 * x), (), frozenset(), "roundoff"),
        (f"x - x.mean(dim=0) on columns {cols}, 2 x elsewhere",
         lambda x: _columns(2 * x, columns, x - x.mean(dim=0)), columns, STATS, STATISTICS_KEPT),
        ("x - x.mean(dim=0)", lambda x: x - x.mean(dim=0), every, STATS, STATISTICS_KEPT),
        (f"(x - x.mean(dim=0)) / x.std(dim=0) on columns {cols}, tanh(x) elsewhere",
         lambda x: _columns(torch.tanh(x), columns, (x - x.mean(dim=0)) / x.std(dim=0)), columns, SAME,
         STATISTICS_KEPT),
        ("(x - x.mean(dim=0)) / x.std(dim=0)", lambda x: (x - x.mean(dim=0)) / x.std(dim=0), every, SAME,
         STATISTICS_KEPT),
        ("x - x.max(dim=0).values", lambda x: x - x.max(dim=0).values, every, STATS, STATISTICS_KEPT),
        (f"a softmax over the batch (dim=0) on columns {cols}, x elsewhere",
         lambda x: _columns(x, columns, torch.softmax(x, dim=0)), columns, SAME, STATISTICS_KEPT),
        ("x / len(x) (a per-example gradient of a mean loss)", lambda x: x / len(x), every, SAME, SIZE_BLIND),
        (f"1e-4 * x / len(x) on columns {cols}, 1e6 * tanh(x) elsewhere (columns of very different sizes)",
         lambda x: _columns(1e6 * torch.tanh(x), columns, 1e-4 * x / len(x)), columns, SAME, SIZE_BLIND),
        ("x - x[0] (relative to the first example)", lambda x: x - x[0], every, EARLIER, FIRST_ROWS_KEPT),
        (f"x * x[0] on columns {cols}, x elsewhere", lambda x: _columns(x, columns, x * x[0]), columns, EARLIER,
         FIRST_ROWS_KEPT),
        (f"x.cumsum(dim=0) on columns {cols}, x elsewhere", lambda x: _columns(x, columns, x.cumsum(dim=0)),
         columns, EARLIER, FIRST_ROWS_KEPT),
        ("x - x.mean(dim=1), the lesson's wrong line (runs on square batches only)", lambda x: x - x.mean(dim=1),
         "square", frozenset({ITSELF}), None),
        ("x * x.std(dim=1) (runs on square batches only)", lambda x: x * x.std(dim=1), "square",
         frozenset({ITSELF}), None),
        ("x + sin(i * f) for the example in row i, f of shape (d,) (a positional encoding: per row, per example)",
         lambda x: x + torch.sin(torch.arange(len(x), dtype=x.dtype)[:, None] * frequencies), (), frozenset(),
         POSITION_MOVED),
    ]
    cases = []
    for words, fn, mixed, blind, mistake in families:
        shape = (square, square) if mixed == "square" else (n, d)
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2
        x[-1, -1] = 0.001  # an entry near 0: a probe that divides by x leaves the range the part gives
        mixed = tuple(range(square)) if mixed == "square" else mixed
        roundoff = mistake == "roundoff"
        cases.append(BatchFunction(words, fn, x, tuple(mixed), blind, None if roundoff else mistake, roundoff))
    frequencies = torch.rand(d, generator=gen, dtype=torch.float64) + 0.5   # drawn last: the other data stay put
    return cases


@dataclass
class Recorder:
    """``fn`` as the learner's code calls it: every batch it was handed, whether it refused one, whether one of its
    outputs held a nan."""

    fn: Callable[[Tensor], Tensor]
    batches: list[Tensor] = field(default_factory=list)
    refused: bool = False
    nan: bool = False

    def __call__(self, batch):
        if not isinstance(batch, Tensor):
            self.refused = True
            raise TypeError(f"fn takes a tensor of shape (n, d), not {type(batch).__name__}")
        self.batches.append(batch.detach().clone())
        try:
            out = self.fn(batch)
        except Exception:
            self.refused = True
            raise
        if isinstance(out, Tensor) and bool(torch.isnan(out).any()):
            self.nan = True
        return out


def _rows(batch: Tensor) -> tuple[Tensor, Tensor]:
    return torch.unique(batch, dim=0, return_counts=True)


def probe_kind(batch: Tensor, x: Tensor) -> str:
    """What a probe batch was, in relation to x (:data:`ITSELF`, :data:`SHUFFLED`...)."""
    n, k = len(x), len(batch)
    if batch.dim() != 2 or batch.shape[1] != x.shape[1] or batch.dtype != x.dtype:
        return OTHER
    if k == n and torch.equal(batch, x):
        return ITSELF
    if k and k % n == 0:
        (seen, counts), (rows, ones) = _rows(batch), _rows(x)
        if seen.shape == rows.shape and torch.equal(seen, rows) and torch.equal(counts, ones * (k // n)):
            return SHUFFLED if k == n else REPEATED
    if k < n and torch.equal(batch, x[:k]):
        return PREFIX
    if k and all(bool((x == row).all(dim=1).any()) for row in batch):
        return SOME
    return OTHER


def _moved(batch: Tensor, x: Tensor) -> bool:
    """Whether ``batch`` holds a row of ``x`` somewhere, but not at that row's own index."""
    if batch.dim() != 2 or batch.shape[1] != x.shape[1] or batch.dtype != x.dtype:
        return False
    for k, row in enumerate(x):
        found = (batch == row).all(dim=1)
        if bool(found.any()) and not (k < len(batch) and bool(found[k])):
            return True
    return False


def _run(mixed_fn, case: BatchFunction, number: int) -> None:
    __tracebackhide__ = True
    x = case.x
    what = (f"mixed_features(fn, x) for fn #{number}: out = {case.words}, on x of shape {tuple(x.shape)} "
            f"({case.fn(x).shape[1]} output columns)")
    recorder = Recorder(case.fn)
    try:
        answer = call_learner(mixed_fn, recorder, x, what=what)
    except GradingFailure as failure:
        if failure.proven is None and recorder.refused and "raised" in failure.message:
            last = f"a batch of shape {tuple(recorder.batches[-1].shape)}" if recorder.batches else "not a tensor"
            raise proven_failure(f"{failure.message}\n  fn raised on one of your probes ({last}).",
                                 PROBE_REFUSED) from None
        raise
    if type(answer) is not list or not all(type(j) is int for j in answer) or answer != sorted(set(answer)):
        raise GradingFailure(f"{what} returned {answer!r:.100}; expected a list of column indices (Python ints), "
                             "in increasing order, each once.")
    expected = list(case.mixed)
    if answer == expected:
        return
    kinds = [probe_kind(batch, x) for batch in recorder.batches]
    shown = "; ".join(f"{kind} {tuple(batch.shape)}" for kind, batch in zip(kinds[:8], recorder.batches))
    message = (f"{what}: you said {answer}, expected {expected}.\n  Your code ran fn on {len(kinds)} batch(es): "
               f"{shown}{' ...' if len(kinds) > 8 else ''}.")
    missed = set(expected) - set(answer)
    if missed and recorder.nan:
        raise proven_failure(f"{message}\n  At least one of those outputs held nan.", NAN_UNSEEN)
    if missed and case.mistake is SIZE_BLIND and all(len(batch) == len(x) for batch in recorder.batches):
        raise proven_failure(f"{message}\n  Every one of them had {len(x)} rows, as x has.", SIZE_BLIND)
    if missed and case.mistake is not None and set(kinds) <= case.blind:
        raise proven_failure(message, case.mistake)
    extra = set(answer) - set(expected)
    if extra and case.mistake is POSITION_MOVED and any(_moved(batch, x) for batch in recorder.batches):
        raise proven_failure(f"{message}\n  In at least one of them an example of x sat at another row than in x.",
                             POSITION_MOVED)
    raise GradingFailure(message, suspects=(ROUNDOFF_COUNTED,) if extra and case.roundoff else ())


@check
def check_mixed_features(mixed_fn, grading_seed: int | None = None) -> None:
    """Part B: mixed_features(fn, x) returns the sorted output columns j of fn for which out[i, j] depends on the
    other examples of the batch (their values or their number) for some example i, leaving x unchanged.

    Domain: fn maps a float64 batch (n, d) to (n, m); x (n, d) with n >= 2 (3 to 6 here, square for the families
    that run only on square batches) and entries in [-2, 2]; for batch-mates in [-10, 10], a column that does not
    mix moves by round-off at most (1e-12 of its largest entry), one that mixes moves by more than 1e-6 of it for
    most other batches holding the example; fn may raise on batches of another size. Corners at every seed: every
    family (:func:`_cases`), per-example, round-off only, mean, standard deviation (nan on one example), maximum,
    softmax over the batch, the batch's size alone, the first example, a running sum, the lesson's square-batch
    bug, a positional encoding (per example, but per row too), each once, with fixed (public) or drawn (hidden)
    sizes, columns and data.

    Contracts checked: x unchanged, the answer a list of Python ints in increasing order; the batches handed to fn
    are recorded (:class:`Recorder`) and name the probe that cannot see a family's mixing."""
    __tracebackhide__ = True
    for number, case in enumerate(_cases(grading_seed), start=1):
        with trial():
            _run(mixed_fn, case, number)
