"""Part A: ``diagnose(trace)`` names the failure mode behind a training trace, graded on example runs and on fresh
runs of every kind drawn from the grading seed."""

from __future__ import annotations

import copy
import math

import torch

from ...checking import GradingFailure, Misconception, call_learner, check, fmt, proven_failure, trial
from ...seeding import generator
from .misconceptions import (
    ACCUMULATION_AS_EXPLOSION,
    CHANGED_TRACE,
    CLIMB_BEFORE_PROFILE,
    GRADIENT_SIZE,
    HELD_OUT_TOO_STRICT,
    IGNORED_EXCEPTION,
    MISSED_BOUNCE,
    NOISE_AS_BOUNCE,
    STOPPED_AT_LOSS,
    SWAPPED,
    THRESHOLD_PAST_BOUND,
    TRAINING_LOSS_AS_HELD_OUT,
    TRUSTED_TRAINING_LOSS,
    WAITED_FOR_NAN,
)
from .traces import EDGE_RUNS, KINDS, LABELS, VISIBLE_RUNS, depth_ratio, finite, held_out, training_trace


def _misread(mode: str, variant: str, got: str) -> Misconception | None:
    """The mistake a wrong label reveals, if any (named when two traces agree)."""
    if mode == "in-place on a leaf":
        return IGNORED_EXCEPTION
    if variant == "summed" and got == "exploding gradients":
        return GRADIENT_SIZE
    if variant == "summed" and got == "broadcasting bug":  # its val_loss is the plain run's: the loss's size misled
        return TRAINING_LOSS_AS_HELD_OUT
    if {mode, got} == {"vanishing gradients", "exploding gradients"}:
        return SWAPPED
    if mode == "exploding gradients" and variant in ("clipped", "shallow"):
        return CLIMB_BEFORE_PROFILE if got == "missing zero_grad" else WAITED_FOR_NAN
    if mode == "missing zero_grad":
        return ACCUMULATION_AS_EXPLOSION if got == "exploding gradients" else MISSED_BOUNCE
    if got == "missing zero_grad":
        return NOISE_AS_BOUNCE
    if {mode, got} == {"vanishing gradients", "broadcasting bug"}:
        return STOPPED_AT_LOSS
    if (mode, got) == ("broadcasting bug", "healthy"):
        return TRUSTED_TRAINING_LOSS
    if (mode, got) == ("healthy", "broadcasting bug"):
        return HELD_OUT_TOO_STRICT
    return None


def _summary(trace: dict) -> str:
    """What the trace shows, on a few lines (the numbers, not the verdict)."""
    loss, grad, layers = trace["loss"], trace["grad_norm"], trace["layer_grad_norms"]
    finite = [t for t in range(len(loss)) if math.isfinite(loss[t])]
    best = min(finite, key=lambda t: loss[t]) if finite else 0
    return "\n".join([
        f"  steps logged:       {len(loss)}; raised: {trace['raised']}",
        f"  loss:               {fmt(loss[0])} at the start, best {fmt(loss[best])} (step {best}), largest after the "
        f"best {fmt(max(loss[best:], key=lambda v: v if math.isfinite(v) else math.inf))}, {fmt(loss[-1])} at the end",
        f"  grad_norm:          {fmt(grad[0])} at the start, {fmt(grad[-1])} at the end",
        f"  val_loss:           {fmt(trace['val_loss'][-1])} at the end; baseline_loss {fmt(trace['baseline_loss'])}",
        f"  layer_grad_norms:   first {fmt(layers[0])}, last {fmt(layers[-1])}"])


def _same(a, b) -> bool:
    """Equal, with nan equal to nan (traces hold nan once a run has diverged)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _pushed(trace: dict, mode: str) -> tuple[str, float, str, dict] | None:
    """For a run of ``mode`` whose table quantity lies inside its stated band: (the quantity, its value, the stated
    band, a copy of the trace with only that quantity pushed far beyond the band). None for the other kinds."""
    probe = copy.deepcopy(trace)
    if mode in ("vanishing gradients", "exploding gradients") and finite(trace):
        ratio = depth_ratio(trace)
        far = 1e-12 if mode == "vanishing gradients" else 1e12
        band = "at most 1e-4" if mode == "vanishing gradients" else "at least 1e4"
        if not (ratio <= 1e-4 if mode == "vanishing gradients" else ratio >= 1e4):
            return None
        probe["layer_grad_norms"][0] *= far / ratio
        return "depth ratio", ratio, band, probe
    if mode == "missing zero_grad":
        loss = trace["loss"]
        value, t = max((loss[t] / min(loss[:t]), t) for t in range(1, len(loss)))
        probe["loss"][t] = 1e3 * min(loss[:t])
        return "climb", value, "at least 4.5", probe
    if mode in ("healthy", "broadcasting bug"):
        low, high = held_out(trace)
        factor = 0.01 / high if mode == "healthy" else 5.0 / low
        probe["val_loss"] = [v * factor for v in trace["val_loss"]]
        return "held-out ratio", high if mode == "healthy" else low, \
            "at most 0.25" if mode == "healthy" else "at least 0.8", probe
    return None


def _past_bound(diagnose, trace: dict, mode: str, what: str) -> str | None:
    """Whether ``diagnose`` names this run right once its own table quantity is pushed far beyond the stated band:
    then the threshold, not the choice of quantity, is what failed (a sentence saying so), else None."""
    pushed = _pushed(trace, mode)
    if pushed is None:
        return None
    quantity, value, band, probe = pushed
    try:
        label = call_learner(diagnose, probe, what=what)
    except GradingFailure:
        return None
    if not (isinstance(label, str) and label.strip() == mode):
        return None
    return (f"  This run's {quantity} is {fmt(value)}, inside the table's band for {mode!r} ({band}); the same "
            f"trace with only its {quantity} pushed far beyond that band is named {mode!r} by your diagnose.")


def _judge_label(diagnose, trace: dict, mode: str, variant: str, what: str) -> None:
    __tracebackhide__ = True
    before = copy.deepcopy(trace)
    label = call_learner(diagnose, trace, what=what)  # the caller's own trace: diagnose must leave it alone
    if not _same(trace, before):
        changed = [key for key in before if not _same(trace.get(key), before[key])] or sorted(set(trace) - set(before))
        raise proven_failure(f"{what} changed the trace it was given (the field(s) {', '.join(map(str, changed))}).",
                             CHANGED_TRACE)
    if not isinstance(label, str) or label.strip() not in LABELS:
        raise GradingFailure(f"{what} returned {label!r:.80}; expected one of the labels {LABELS}.")
    got = label.strip()
    if got != mode:
        kind = f" ({variant})" if variant else ""
        message = f"{what} returned {got!r}, but this run was trained with: {mode!r}{kind}.\n{_summary(before)}"
        proof = _past_bound(diagnose, before, mode, what)
        if proof:  # the quantity is read, its threshold is what failed
            raise proven_failure(f"{message}\n{proof}", THRESHOLD_PAST_BOUND)
        mistake = _misread(mode, variant, got)
        raise GradingFailure(message, suspects=(mistake,) if mistake else ())


@check
def check_diagnose(diagnose, grading_seed: int | None = None) -> None:
    """Part A: diagnose(trace) names the failure mode of a real training trace (one of LABELS), leaving the trace
    unchanged. Visible: fixed runs of every kind in KINDS (:data:`VISIBLE_RUNS`, the margins' edge runs and the hard
    runs among them). Hidden: the edge and hard runs again (:data:`EDGE_RUNS`), then a fresh run of every kind in a
    random order; the fresh runs keep every margin's edge, so the grade of a rule on the margins' quantities does not
    depend on the seed. A failed run whose own table quantity lies inside its stated band is tried once more with
    only that quantity pushed far beyond it: a right label then proves a threshold past the bound.

    Domain: traces of :func:`training_trace` (40 steps, or fewer when ``raised`` is set: 1 step for an update outside
    no_grad); ``loss`` and ``grad_norm`` finite except in a diverging exploding run (inf and nan); ``loss`` a mean or,
    for a healthy run's summed variant, a sum over 256 examples (every loss and gradient 256 times larger);
    ``layer_grad_norms`` 3 to 17 positive floats; ``val_loss`` and ``baseline_loss`` positive. Corners at every seed:
    the edge runs of :data:`.traces.MARGINS` (the quiet run that climbs most, the bounce that climbs least, the healthy
    run nearest the baseline, the stuck run furthest below it, the extreme depth ratios, a summed loss) and, drawn, a
    one-step run that raised and a run whose loss turns to nan. Contracts checked: a label among LABELS (a string,
    surrounding spaces allowed); the trace unchanged afterwards (deep comparison with a copy, nan equal to nan)."""
    __tracebackhide__ = True
    if grading_seed is None:
        runs = list(VISIBLE_RUNS)
    else:
        gen = generator("09/diagnose", grading_seed)
        runs = [*EDGE_RUNS, *[(*KINDS[i], gen) for i in torch.randperm(len(KINDS), generator=gen).tolist()]]
    for number, (mode, variant, source) in enumerate(runs, start=1):
        with trial():
            trace = training_trace(mode, source, variant)
            _judge_label(diagnose, trace, mode, variant, what=f"diagnose(trace) for trace {number} of {len(runs)}")
