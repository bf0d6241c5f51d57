"""Part B: the gradient of F.cross_entropy(logits, targets, weight=w, label_smoothing=ε, ignore_index=k) with respect
to the logits, by hand, with PyTorch's semantics exactly (its mean divides by the kept targets, or by the sum of their
weights; smoothing mixes in the uniform distribution over all C classes, each class with its own weight), for class
indices and for class probabilities as targets (then a plain mean over all N rows, each row's gradient
(Σ_c w_c t_c)·p − w⊙t with t the smoothed probabilities, whatever the row sums to)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...checking import GradingFailure, NotWritten, Symptom, check, trial
from ...seeding import choice, uniform
from ..cases import case_stream
from ..shared import CE_NOT_DIVIDED
from .common import Case, distinct, literal_symptoms, make_case, run_case, unstable_softmaxes
from .misconceptions import (
    CE_BATCH_AXIS,
    CE_BY_CLASSES,
    CE_NO_TARGET,
    CE_REVERSED,
    DIVIDED_BY_ALL_ROWS,
    FACTOR_IN_FLOAT32,
    IGNORED_BY_VALUE,
    IGNORED_ROWS_KEPT,
    SMOOTHING_IGNORED,
    SMOOTHING_OVER_OTHERS,
    SMOOTHING_TARGET_UNSCALED,
    SMOOTHING_UNIFORM_MISSING,
    SMOOTHING_WEIGHTED_BY_TARGET,
    SOFT_AS_ARGMAX,
    SOFT_AS_INDICES,
    SOFT_DIVIDED_BY_WEIGHTS,
    SOFT_ROW_SUM_ASSUMED,
    SOFT_ZERO_ROWS_DROPPED,
    WEIGHT_IGNORED,
    WEIGHTED_MEAN_BY_ROWS,
)

Tensor = torch.Tensor

DEFAULT_IGNORE = -100


def _target_distribution(targets: Tensor, kept: Tensor, classes: int, smoothing: float, *,
                         spread: str = "all") -> Tensor:
    """q per row (float64): the one-hot of the target mixed with a uniform part; ``spread`` reproduces mistakes
    ("others": ε/(C − 1) on the other classes, "none": no uniform part, "unscaled": the one-hot not scaled, "ignored":
    the one-hot itself)."""
    onehot = F.one_hot(torch.where(kept, targets, 0), classes).to(torch.float64)
    if spread == "others":
        return (1 - smoothing) * onehot + smoothing / (classes - 1) * (1 - onehot)
    if spread == "none":
        return (1 - smoothing) * onehot
    if spread == "ignored":
        return onehot
    if spread == "unscaled":
        return onehot + smoothing / classes
    return (1 - smoothing) * onehot + smoothing / classes


def _gradient(p: Tensor, q: Tensor, kept: Tensor, count: float) -> Tensor:
    return (p - q) * kept.unsqueeze(-1) / count


def _weighted_gradient(p: Tensor, targets: Tensor, kept: Tensor, weight: Tensor, smoothing: float, *,
                       by_rows: bool = False, by_target: bool = False, in_float32: str = "") -> Tensor:
    """PyTorch's gradient with class weights: row i's loss (1 − ε)·w_(y_i)·(−log p_(i,y_i)) + (ε/C)·Σ_c w_c·(−log
    p_(i,c)), the sum over the kept rows divided by Σ w_(y_i) over them. ``by_rows`` divides by the number of kept rows
    instead; ``by_target`` weights the whole row, smoothing included, by w_(y_i); ``in_float32`` ("smoothing" or
    "target") rounds ε/C or 1 − ε to float32, as a bool mask times a Python number does."""
    classes = p.shape[-1]
    w_y = weight[torch.where(kept, targets, 0)] * kept
    denominator = float(kept.sum()) if by_rows else float(w_y.sum())
    if by_target:
        q = _target_distribution(targets, kept, classes, smoothing)
        return (p - q) * w_y.unsqueeze(-1) / denominator
    onehot = F.one_hot(torch.where(kept, targets, 0), classes).to(torch.float64)
    share, rest = smoothing / classes, 1 - smoothing
    if in_float32 == "smoothing":
        share = float(torch.tensor(share, dtype=torch.float32))
    if in_float32 == "target":
        rest = float(torch.tensor(rest, dtype=torch.float32))
    rows = rest * w_y.unsqueeze(-1) * (p - onehot) + (weight.sum() * p - weight) * kept.unsqueeze(-1) * share
    return rows / denominator


def _float32_factors(p: Tensor, targets: Tensor, kept: Tensor, weight: Tensor, smoothing: float) -> list:
    """ε/C or 1 − ε rounded to float32: recognised only within float64's noise of that value (the mistake is 1e-8
    relative)."""
    return [FACTOR_IN_FLOAT32.looks_like(_weighted_gradient(p, targets, kept, weight, smoothing, in_float32=where),
                                         rtol=1e-12, atol=1e-15)
            for where in ("smoothing", "target")]


def _weighted_case(logits: Tensor, targets: Tensor, smoothing: float, ignore_index: int, weight: Tensor) -> Case:
    n, c = logits.shape
    kept = targets != ignore_index
    p = torch.softmax(logits, dim=-1)
    right = _weighted_gradient(p, targets, kept, weight, smoothing)
    mistakes = [(WEIGHT_IGNORED, _gradient(p, _target_distribution(targets, kept, c, smoothing), kept,
                                           float(kept.sum()))),
                (WEIGHTED_MEAN_BY_ROWS, _weighted_gradient(p, targets, kept, weight, smoothing, by_rows=True)),
                (SMOOTHING_WEIGHTED_BY_TARGET, _weighted_gradient(p, targets, kept, weight, smoothing, by_target=True)),
                (CE_REVERSED, -right)]
    mistakes += [(mistake, _weighted_gradient(unstable, targets, kept, weight, smoothing))
                 for mistake, unstable in unstable_softmaxes(logits)]
    symptoms = [*literal_symptoms(mistakes), *_float32_factors(p, targets, kept, weight, smoothing),
                _rows_ignored_kept(right, kept)]
    options: dict = {"weight": weight}
    if smoothing:
        options["label_smoothing"] = smoothing
    if ignore_index != DEFAULT_IGNORE:
        options["ignore_index"] = ignore_index
    weight_sum = float((weight[torch.where(kept, targets, 0)] * kept).sum())
    note = (f"N = {n} rows ({int(kept.sum())} kept, their targets' weights sum to {weight_sum:.6g}), C = {c} classes, "
            f"targets {targets.tolist()}, weight {[round(w, 6) for w in weight.tolist()]}, "
            f"label_smoothing = {smoothing:g}, ignore_index = {ignore_index}")
    return make_case("softmax_cross_entropy_backward", {"logits": logits, "targets": targets},
                     {"dlogits": "logits"},
                     lambda z: F.cross_entropy(z, targets, weight=weight, label_smoothing=smoothing,
                                               ignore_index=ignore_index),
                     (logits,), (symptoms,), options=options, note=note)


def _weighted_corners() -> list[tuple[Tensor, Tensor, float, int, Tensor]]:
    """Part B's corners with class weights, (logits, targets, label_smoothing, ignore_index, weight), the same at
    every seed: no smoothing, the kept targets' weights summing to 16.25 over 3 rows; smoothing 0.4 with
    ignore_index a class (1, the heaviest); smoothing 1 on rows near ±1000 with a −100 row."""
    rows = lambda *values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    labels = lambda *values: torch.tensor(values)  # noqa: E731
    return [
        (rows([0.7, -0.4, 1.2], [0.1, 0.9, -1.3], [1.5, 0.3, -0.2], [-0.8, 0.6, 2.1]), labels(0, -100, 0, 2), 0.0,
         DEFAULT_IGNORE, rows(8.0, 1.0, 0.25)),
        (rows([0.5, -1.2, 0.8, 1.9], [1.4, 0.3, -0.7, 0.2], [-0.9, 2.2, 0.6, -0.1], [0.0, -0.5, 1.1, 0.4],
              [1.3, 0.8, -1.6, -0.3]), labels(2, 1, 0, 3, 2), 0.4, 1, rows(0.05, 5.0, 2.0, 0.5)),
        (rows([1000.0, 998.0, 1001.5], [-1000.0, -999.0, -1002.5], [0.3, -0.6, 1.4]), labels(2, 0, -100), 1.0,
         DEFAULT_IGNORE, rows(3.0, 0.2, 1.5)),
    ]


def _weighted_drawn(gen: torch.Generator, grading_seed: int | None) -> tuple[Tensor, Tensor, float, int, Tensor]:
    """A weighted batch with one −100 row, weights spread over [0.05, 20] (public: fixed sizes; hidden: drawn)."""
    n, c = (6, 4) if grading_seed is None else tuple(distinct(gen, 2, 3, 7))
    smoothing = 0.2 if grading_seed is None else choice(gen, [0.1, 0.2, 0.3, 0.5])
    targets = torch.randint(c, (n,), generator=gen)
    targets[int(torch.randint(n, (), generator=gen))] = DEFAULT_IGNORE
    weight = torch.exp(uniform(gen, (c,), -3.0, 3.0))
    return uniform(gen, (n, c), -3, 3), targets, smoothing, DEFAULT_IGNORE, weight


def _rows_ignored_kept(right: Tensor, kept: Tensor) -> Symptom:
    """The kept rows right and some ignored row not zero (whatever the learner put there)."""

    def matches(answer: Tensor) -> bool:
        if answer.shape != right.shape or bool(kept.all()) or not bool(torch.isfinite(answer).all()):
            return False
        good = torch.allclose(answer[kept], right[kept], rtol=1e-8, atol=1e-12)
        return good and bool((answer[~kept].abs() > 1e-9).any())

    return IGNORED_ROWS_KEPT.when(matches)


def _cross_entropy_case(logits: Tensor, targets: Tensor, smoothing: float, ignore_index: int) -> Case:
    n, c = logits.shape
    kept = targets != ignore_index
    count = float(kept.sum())
    p = torch.softmax(logits, dim=-1)
    q = _target_distribution(targets, kept, c, smoothing)
    right = _gradient(p, q, kept, count)
    by_value = targets >= 0
    mistakes = [(CE_NOT_DIVIDED, _gradient(p, q, kept, 1.0)), (CE_BY_CLASSES, _gradient(p, q, kept, c)),
                (CE_REVERSED, -right), (CE_BATCH_AXIS, _gradient(torch.softmax(logits, dim=0), q, kept, count)),
                (CE_NO_TARGET, _gradient(p, 0 * q, kept, count)), (DIVIDED_BY_ALL_ROWS, _gradient(p, q, kept, n)),
                (IGNORED_BY_VALUE, _gradient(p, _target_distribution(targets, by_value, c, smoothing), by_value,
                                             float(by_value.sum())))]
    mistakes += [(mistake, _gradient(p, _target_distribution(targets, kept, c, smoothing, spread=spread), kept,
                                     count))
                 for mistake, spread in [(SMOOTHING_OVER_OTHERS, "others"), (SMOOTHING_UNIFORM_MISSING, "none"),
                                         (SMOOTHING_TARGET_UNSCALED, "unscaled"), (SMOOTHING_IGNORED, "ignored")]]
    mistakes += [(mistake, _gradient(unstable, q, kept, count)) for mistake, unstable in unstable_softmaxes(logits)]
    symptoms = [*literal_symptoms(mistakes), *_float32_factors(p, targets, kept, torch.ones(c, dtype=torch.float64),
                                                                smoothing), _rows_ignored_kept(right, kept)]
    options = {}
    if smoothing:
        options["label_smoothing"] = smoothing
    if ignore_index != DEFAULT_IGNORE:
        options["ignore_index"] = ignore_index
    note = (f"N = {n} rows ({int(count)} kept), C = {c} classes, targets {targets.tolist()}, "
            f"label_smoothing = {smoothing:g}, ignore_index = {ignore_index}")
    return make_case("softmax_cross_entropy_backward", {"logits": logits, "targets": targets},
                     {"dlogits": "logits"},
                     lambda z: F.cross_entropy(z, targets, label_smoothing=smoothing, ignore_index=ignore_index),
                     (logits,), (symptoms,), options=options, note=note)


def _corners() -> list[tuple[Tensor, Tensor, float, int]]:
    """Part B's corners, (logits, targets, label_smoothing, ignore_index), the same at every seed: the plain
    two-argument call on one row; logits near 1000 with smoothing; rows ignored with the default −100; ignore_index
    a real class (0) with smoothing; smoothing 1 on rows ±800 apart with an ignored row; rows at ±1000 and one spread
    over 1400, the last class the one ignored; smoothing 0.3 with no row ignored."""
    rows = lambda *values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    labels = lambda *values: torch.tensor(values)  # noqa: E731
    return [
        (rows([0.3, -1.2, 2.0, 0.7]), labels(3), 0.0, DEFAULT_IGNORE),
        (1000 + rows([0.5, -1.0, 2.0], [1.5, 0.0, -2.5], [-0.5, 3.0, 1.0]), labels(2, 0, 1), 0.1, DEFAULT_IGNORE),
        (rows([0.2, 1.0, -0.5], [1.5, -0.3, 0.4], [-1.0, 0.6, 2.2], [0.9, 0.1, -1.4], [0.0, -2.0, 1.1]),
         labels(2, -100, 0, -100, 1), 0.0, DEFAULT_IGNORE),
        (rows([0.5, -0.2, 1.3, 0.1], [1.1, 0.4, -0.9, 2.0], [-0.6, 1.8, 0.2, -1.1], [0.3, -1.5, 0.8, 0.6]),
         labels(0, 2, 1, 3), 0.2, 0),
        (rows([800.0, 801.5, 799.0], [-800.0, -801.0, -798.5], [1.0, -2.0, 0.5]), labels(1, -100, 2), 1.0,
         DEFAULT_IGNORE),
        (rows([1000.0, 998.5, 1001.0, 997.0], [-1000.0, -1002.0, -999.5, -1001.0], [700.0, 0.0, -700.0, 2.0]),
         labels(3, 1, 2), 0.05, 3),
        (rows([0.4, -1.1, 2.3, 0.0, 0.9], [1.7, 0.2, -0.6, 1.1, -2.0], [-0.3, 0.8, 0.5, -1.4, 1.6],
              [2.1, -0.9, 0.3, 0.7, -0.2]), labels(4, 0, 2, 2), 0.3, DEFAULT_IGNORE),
    ]


def _drawn(gen: torch.Generator, grading_seed: int | None) -> list[tuple[Tensor, Tensor, float, int]]:
    """Two batches: one with rows ignored by −100, one whose ignore_index is the last class (public: fixed; hidden:
    drawn sizes, smoothing and labels)."""
    found = []
    for index in range(2):
        n, c = (4, 3) if grading_seed is None and index == 0 else (5, 6) if grading_seed is None \
            else tuple(distinct(gen, 2, 3, 7))
        smoothing = (0.1, 0.05)[index] if grading_seed is None else choice(gen, [0.05, 0.1, 0.2, 0.3])
        targets = torch.randint(c, (n,), generator=gen)
        ignore_index = DEFAULT_IGNORE if index == 0 else c - 1
        if index == 0:
            targets[int(torch.randint(n, (), generator=gen))] = DEFAULT_IGNORE
        else:  # the last class is ignored wherever it occurs; at least one row uses it and one does not
            targets[0], targets[1] = c - 1, int(torch.randint(c - 1, (), generator=gen))
        found.append((uniform(gen, (n, c), -3, 3), targets, smoothing, ignore_index))
    return found


def _soft_gradient(p: Tensor, targets: Tensor, weight: Tensor, smoothing: float, *, divisor: str = "n",
                   plain: bool = False) -> Tensor:
    """PyTorch's gradient for class-probability targets: t = (1 − ε)·targets + ε/C, row i's loss
    −Σ_c w_c·t_(i,c)·log p_(i,c), the sum over all N rows divided by N. ``divisor``: "weights" divides by
    Σ_i Σ_c w_c·t_(i,c) (the class-index rule), "nonzero" by the rows whose targets are not all 0; ``plain``: the
    lesson's p − t per row (weights ignored, as if each row's weighted targets summed to 1)."""
    n, classes = p.shape
    t = (1 - smoothing) * targets + smoothing / classes
    rows = p - t if plain else (t * weight).sum(-1, keepdim=True) * p - weight * t
    if divisor == "weights":
        return rows / float((t * weight).sum())
    if divisor == "nonzero":
        return rows / float((targets != 0).any(-1).sum())
    return rows / n


def _soft_case(logits: Tensor, targets: Tensor, smoothing: float, weight: Tensor | None) -> Case:
    n, c = logits.shape
    w = torch.ones(c, dtype=torch.float64) if weight is None else weight
    p = torch.softmax(logits, dim=-1)
    right = _soft_gradient(p, targets, w, smoothing)
    labels = targets.argmax(-1)
    mistakes = [(SOFT_ROW_SUM_ASSUMED, _soft_gradient(p, targets, w, smoothing, plain=True)),
                (SOFT_DIVIDED_BY_WEIGHTS, _soft_gradient(p, targets, w, smoothing, divisor="weights")),
                (SOFT_ZERO_ROWS_DROPPED, _soft_gradient(p, targets, w, smoothing, divisor="nonzero")),
                (SOFT_AS_ARGMAX, _weighted_gradient(p, labels, torch.ones(n, dtype=torch.bool), w, smoothing)),
                (SMOOTHING_IGNORED, _soft_gradient(p, targets, w, 0.0)),
                (CE_REVERSED, -right)]
    mistakes += [(mistake, _soft_gradient(unstable, targets, w, smoothing))
                 for mistake, unstable in unstable_softmaxes(logits)]
    options: dict = {}
    if weight is not None:
        options["weight"] = weight
    if smoothing:
        options["label_smoothing"] = smoothing
    sums = [round(v, 6) for v in targets.sum(-1).tolist()]
    note = (f"N = {n} rows, C = {c} classes, targets are class probabilities (float64, shape {tuple(targets.shape)}), "
            f"their row sums {sums}, "
            + (f"weight {[round(v, 6) for v in weight.tolist()]}, " if weight is not None else "no weight, ")
            + f"label_smoothing = {smoothing:g}")
    return make_case("softmax_cross_entropy_backward", {"logits": logits, "targets": targets},
                     {"dlogits": "logits"},
                     lambda z: F.cross_entropy(z, targets, weight=weight, label_smoothing=smoothing),
                     (logits,), (literal_symptoms(mistakes),), options=options, note=note)


def _soft_corners() -> list[tuple[Tensor, Tensor, float, Tensor | None]]:
    """Part B's corners with class probabilities as targets, (logits, targets, label_smoothing, weight), the same at
    every seed: no weight, rows summing to 1, 0 and 1.5 (a row of zeros still counts in N); one-hot rows with weights
    from 0.25 to 8 (the class-index rule would divide by 17.25, not by 4); smoothing 0.3 with weights from 0.05 to 5,
    a zero row and rows near ±1000."""
    rows = lambda *values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    return [
        (rows([0.4, -1.0, 1.3], [1.1, 0.2, -0.5], [-0.7, 0.9, 0.6], [0.3, 1.6, -1.2]),
         rows([0.7, 0.2, 0.1], [0.0, 0.0, 0.0], [0.9, 0.3, 0.3], [0.0, 1.0, 0.0]), 0.0, None),
        (rows([0.7, -0.4, 1.2], [0.1, 0.9, -1.3], [1.5, 0.3, -0.2], [-0.8, 0.6, 2.1]),
         rows([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]), 0.0, rows(8.0, 1.0, 0.25)),
        (rows([1000.0, 998.0, 1001.5, 999.0], [-1000.0, -999.0, -1002.5, -1001.0], [0.3, -0.6, 1.4, 0.2],
              [1.2, 0.4, -0.9, -0.3], [0.8, -1.1, 0.5, 1.7]),
         rows([0.1, 0.6, 0.3, 0.0], [0.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.8, 0.0],
              [0.5, 0.0, 0.0, 1.5]), 0.3, rows(0.05, 5.0, 2.0, 0.5)),
    ]


def _soft_drawn(gen: torch.Generator, grading_seed: int | None) -> tuple[Tensor, Tensor, float, Tensor | None]:
    """A batch of probability targets with one row of zeros and row sums spread over [0, 2], weights over
    [0.05, 20] (public: fixed sizes; hidden: drawn)."""
    n, c = (5, 4) if grading_seed is None else tuple(distinct(gen, 2, 3, 7))
    smoothing = 0.1 if grading_seed is None else choice(gen, [0.1, 0.2, 0.4])
    targets = torch.rand(n, c, generator=gen, dtype=torch.float64)
    targets = targets / targets.sum(-1, keepdim=True) * uniform(gen, (n, 1), 0.3, 2.0)
    targets[int(torch.randint(n, (), generator=gen))] = 0.0
    weight = torch.exp(uniform(gen, (c,), -3.0, 3.0))
    return uniform(gen, (n, c), -3, 3), targets, smoothing, weight


@check
def check_softmax_cross_entropy_backward(softmax_cross_entropy_backward, grading_seed: int | None = None) -> None:
    """Part B: the gradient of F.cross_entropy(logits, targets, weight=w, label_smoothing=ε, ignore_index=k) (mean
    reduction) with respect to the logits, by hand (no autograd), a new float64 tensor; called with two arguments it is
    the plain mean cross-entropy's gradient.

    Domain: logits float64 (N, C), N >= 1, C >= 2, any finite values; targets int64 (N,), each in [0, C) or equal to
    ignore_index, at least one not ignored; label_smoothing in [0, 1] and ignore_index any int (a class index too),
    both keyword arguments, left out when they have their defaults (0.0 and −100); or targets float64 (N, C) class
    probabilities; weight None (left out) or float64
    (C,) with positive entries, a keyword argument. Corners at every seed
    (:func:`_corners`): one row with two arguments, logits near 1000 (a naive exp gives nan), −100 rows,
    ignore_index 0 with smoothing, smoothing 1, rows at ±1000 with the last class ignored, smoothing 0.3 with
    nothing ignored; then two batches of
    distinct sizes (public: fixed; hidden: drawn); then, with class weights, the corners of
    :func:`_weighted_corners` and one batch of :func:`_weighted_drawn`; last, class probabilities as targets (float64
    (N, C), non-negative, rows summing to anything, zeros included; ignore_index left at its default), the corners of
    :func:`_soft_corners` and one batch of :func:`_soft_drawn`."""
    __tracebackhide__ = True
    gen = case_stream("04/cross_entropy", grading_seed)
    for logits, targets, smoothing, ignore_index in _corners() + _drawn(gen, grading_seed):
        case = _cross_entropy_case(logits, targets, smoothing, ignore_index)
        with trial():
            run_case(softmax_cross_entropy_backward, case)
    for logits, targets, smoothing, ignore_index, weight in [*_weighted_corners(), _weighted_drawn(gen, grading_seed)]:
        case = _weighted_case(logits, targets, smoothing, ignore_index, weight)
        with trial():
            run_case(softmax_cross_entropy_backward, case)
    for logits, targets, smoothing, weight in [*_soft_corners(), _soft_drawn(gen, grading_seed)]:
        case = _soft_case(logits, targets, smoothing, weight)
        with trial():
            try:
                run_case(softmax_cross_entropy_backward, case)
            except GradingFailure as failure:
                if not isinstance(failure, NotWritten) and isinstance(failure.raised, (IndexError, RuntimeError)):
                    raise GradingFailure(f"{failure.message}\n  here:               {case.note}",
                                         suspects=(SOFT_AS_INDICES,), raised=failure.raised) from None
                raise
