"""Part A: ``rules()`` states the diagnosis as data, an ordered list of (label, quantity, side, threshold): the first
rule that holds names a training trace, and a trace no rule names is "healthy". Graded on the visible runs (with every
threshold moved a quarter both ways: a threshold must sit inside its gap, not at its edge) and on fresh runs of every
kind drawn from the grading seed."""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable
from typing import NamedTuple

import torch

from ...checking import GradingFailure, Misconception, call_learner, check, fmt, proven_failure, trial
from ...seeding import generator
from .misconceptions import (
    ACCUMULATION_AS_EXPLOSION,
    BOUNCE_IN_UNITS,
    CHANGED_TRACE,
    CLIMB_BEFORE_PROFILE,
    GRADIENT_SIZE,
    HELD_OUT_TOO_STRICT,
    IGNORED_EXCEPTION,
    MISSED_BOUNCE,
    NOISE_AS_BOUNCE,
    STOPPED_AT_LOSS,
    SWAPPED,
    THRESHOLD_AT_EDGE,
    THRESHOLD_PAST_GAP,
    TRAINING_LOSS_AS_HELD_OUT,
    TRUSTED_TRAINING_LOSS,
    WAITED_FOR_NAN,
)
from .traces import BATCH, EDGE_RUNS, KINDS, LABELS, VISIBLE_RUNS, climb, depth_ratio, finite, held_out, training_trace

#: How far the visible test moves each threshold, up and down (a factor): a threshold that sits within this factor of
#: a run of the kinds it separates is at the edge of its gap, where fresh runs cross it.
WOBBLE = 1.25
SIDES = (">", "<")


class Rule(NamedTuple):
    """One rule of Part A: name the trace ``label`` when ``quantity(trace)`` is above (``">"``) or below (``"<"``)
    ``threshold``. A plain 4-tuple in this order is a rule too."""

    label: str
    quantity: Callable[[dict], float]
    side: str
    threshold: float

    def holds(self, value: float) -> bool:
        return value > self.threshold if self.side == ">" else value < self.threshold

    def moved(self, factor: float) -> Rule:
        return self._replace(threshold=self.threshold * factor)

    def describe(self) -> str:
        name = getattr(self.quantity, "__name__", "")
        name = "quantity" if not isinstance(name, str) or not name.isidentifier() else name
        return f"{self.label!r} if {name}(trace) {self.side} {fmt(float(self.threshold))}"


def apply_rules(rules, trace: dict) -> str:
    """The label the first rule that holds gives ``trace``; "healthy" when none holds (the notebook's ``diagnose``)."""
    for rule in map(Rule._make, rules):
        if rule.holds(rule.quantity(trace)):
            return rule.label
    return "healthy"


def _stated(rules) -> list[Rule]:
    """The learner's rules() as a list of :class:`Rule`, or a GradingFailure saying what is malformed."""
    __tracebackhide__ = True
    stated = call_learner(rules, what="rules()")
    if not isinstance(stated, (list, tuple)) or not stated:
        raise GradingFailure(f"rules() returned {stated!r:.80}; expected a non-empty list of (label, quantity, side, "
                             "threshold) rules.")
    found = []
    for number, entry in enumerate(stated, start=1):
        if not isinstance(entry, tuple) or len(entry) != 4:
            raise GradingFailure(f"rule {number} is {entry!r:.80}; expected a 4-tuple (label, quantity, side, "
                                 "threshold).")
        label, quantity, side, threshold = entry
        if not (isinstance(label, str) and label in LABELS):
            raise GradingFailure(f"rule {number}'s label {label!r:.60} is not one of the labels {LABELS}.")
        if not callable(quantity):
            raise GradingFailure(f"rule {number}'s quantity is {quantity!r:.60}; expected a function of a trace.")
        if side not in SIDES:
            raise GradingFailure(f"rule {number}'s side is {side!r:.20}; expected '>' or '<'.")
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold):
            raise GradingFailure(f"rule {number}'s threshold is {threshold!r:.40}; expected a finite number.")
        found.append(Rule(label, quantity, side, float(threshold)))
    return found


def _value(rule: Rule, number: int, trace: dict, what: str) -> float:
    """``rule.quantity(trace)`` as a float (nan stays nan: it holds no side), or a GradingFailure."""
    __tracebackhide__ = True
    value = call_learner(rule.quantity, trace, what=f"rule {number}'s quantity on {what}")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, numbers.Real) or type(value).__module__ == "numpy" and hasattr(value, "__float__"):
        return float(value)
    raise GradingFailure(f"rule {number}'s quantity returned {type(value).__name__} {value!r:.60} on {what}; "
                         "expected a number.")


def _walk(rules: list[Rule], trace: dict, what: str) -> tuple[str, list[str], list[float]]:
    """(the label the rules give ``trace``, a line per rule tried, the value each rule tried read)."""
    __tracebackhide__ = True
    lines, values = [], []
    for number, rule in enumerate(rules, start=1):
        value = _value(rule, number, trace, what)
        values.append(value)
        holds = rule.holds(value)
        lines.append(f"  rule {number} ({rule.describe()}): {fmt(value)}, {'names it' if holds else 'does not hold'}")
        if holds:
            return rule.label, lines, values
    lines.append("  no rule holds: 'healthy'")
    return "healthy", lines, values


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
    steps = [t for t in range(len(loss)) if math.isfinite(loss[t])]
    best = min(steps, key=lambda t: loss[t]) if steps else 0
    return "\n".join([
        "  The trace:",
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


ORDINARY_DEPTH = ("missing zero_grad", "broadcasting bug", "healthy")  # kinds whose first and last layers match


def _pushed(trace: dict, mode: str) -> list[tuple[str, float, dict]]:
    """For a run of the kinds the course's own rules tell apart by one measurement: (that measurement's name, its
    value, a copy of the trace with only that measurement pushed far out, away from every other kind), and for the
    kinds with nothing wrong in depth, the same with the depth ratio set to 1."""
    probes = []
    if mode in ("vanishing gradients", "exploding gradients") and finite(trace):
        probe = copy.deepcopy(trace)
        probe["layer_grad_norms"][0] *= (1e-12 if mode == "vanishing gradients" else 1e12) / depth_ratio(trace)
        probes.append(("depth ratio (layer_grad_norms, first over last)", depth_ratio(trace), probe))
    if mode == "missing zero_grad":
        loss, probe = trace["loss"], copy.deepcopy(trace)
        value, t = max((loss[t] / min(loss[:t]), t) for t in range(1, len(loss)))
        probe["loss"][t] = 1e3 * min(loss[:t])
        probes.append(("climb (loss[t] / min(loss[:t]))", value, probe))
    if mode in ("healthy", "broadcasting bug"):
        (low, high), probe = held_out(trace), copy.deepcopy(trace)
        factor = 0.01 / high if mode == "healthy" else 5.0 / low
        probe["val_loss"] = [v * factor for v in trace["val_loss"]]
        probes.append(("held-out ratio (val_loss / baseline_loss)", high if mode == "healthy" else low, probe))
    if mode in ORDINARY_DEPTH:
        probe = copy.deepcopy(trace)
        probe["layer_grad_norms"][0] = probe["layer_grad_norms"][-1]
        probes.append(("depth ratio (layer_grad_norms, first over last)", depth_ratio(trace), probe))
    return probes


def _past_gap(rules: list[Rule], trace: dict, mode: str, what: str) -> str | None:
    """Whether the rules name this run right once one of the course's measurements for its kind is pushed far out:
    then that measurement is read and a threshold is what failed (a sentence saying so), else None."""
    for quantity, value, probe in _pushed(trace, mode):
        try:
            label = _walk(rules, probe, what)[0]
        except GradingFailure:
            continue
        if label == mode:
            where = "set to 1" if probe["layer_grad_norms"][0] == probe["layer_grad_norms"][-1] else \
                "pushed far out, away from every other kind"
            return (f"  This run's {quantity} is {fmt(value)}; the same trace with only that value {where} is named "
                    f"{mode!r} by your rules.")
    return None


def _named_when_averaged(rules: list[Rule], trace: dict, mode: str, what: str) -> bool:
    """Whether the rules name a summed run right once its losses and gradients are divided by the batch size (the
    same run with its loss averaged): then the size of a number, not its shape, misled them."""
    probe = copy.deepcopy(trace)
    for key in ("loss", "grad_norm", "layer_grad_norms"):
        probe[key] = [value / BATCH for value in trace[key]]
    try:
        return _walk(rules, probe, what)[0] == mode
    except GradingFailure:
        return False


def _judge(rules: list[Rule], trace: dict, mode: str, variant: str, what: str) -> None:
    """Fail unless the rules name ``trace`` (a run of ``mode``) right and leave it unchanged."""
    __tracebackhide__ = True
    before = copy.deepcopy(trace)
    label, lines, _ = _walk(rules, trace, what)
    if not _same(trace, before):
        changed = [key for key in before if not _same(trace.get(key), before[key])] or sorted(set(trace) - set(before))
        raise proven_failure(f"A quantity changed {what} it was given (the field(s) {', '.join(map(str, changed))}).",
                             CHANGED_TRACE)
    if label == mode:
        return
    kind = f" ({variant})" if variant else ""
    message = "\n".join([f"Your rules name {what} {label!r}, but this run was trained with: {mode!r}{kind}.", *lines,
                         _summary(before)])
    proof = _past_gap(rules, before, mode, what)
    if proof:
        raise proven_failure(f"{message}\n{proof}", THRESHOLD_PAST_GAP)
    mistake = _misread(mode, variant, label)
    if variant == "summed" and label == "missing zero_grad" and _named_when_averaged(rules, before, mode, what):
        mistake = BOUNCE_IN_UNITS
    raise GradingFailure(message, suspects=(mistake,) if mistake else ())


def _judge_wobble(rules: list[Rule], named: list[tuple[dict, str, str, str]]) -> None:
    """Fail when moving one threshold by :data:`WOBBLE` (up or down) loses a run the rules named right."""
    __tracebackhide__ = True
    for number, rule in enumerate(rules, start=1):
        for factor in (WOBBLE, 1 / WOBBLE):
            moved = [*rules[:number - 1], rule.moved(factor), *rules[number:]]
            for trace, mode, variant, what in named:
                label, _, values = _walk(moved, trace, what)
                if label == mode:
                    continue
                kind = f" ({variant})" if variant else ""
                value = f" reads {fmt(values[number - 1])} there" if len(values) >= number else ""
                raise proven_failure(
                    f"Your rules name all {len(named)} visible runs right; the last case moves each threshold a "
                    f"quarter. With rule {number} ({rule.describe()}) moved to {fmt(rule.threshold * factor)} "
                    f"({'up' if factor > 1 else 'down'} by a quarter), {what}, a {mode!r}{kind} run, is named "
                    f"{label!r}. Rule {number}'s quantity{value}: a fresh run of that kind can fall on the other side "
                    "of the threshold.", THRESHOLD_AT_EDGE)


def _held_out_at(step: int) -> Callable[[dict], float]:
    return lambda trace: trace["val_loss"][step] / trace["baseline_loss"]


#: The measurements the hidden test's promise covers (the margins of :data:`.traces.MARGINS` and ``raised``), as
#: functions of a clean trace: a learner's quantity that orders the clean visible runs as one of these does (up to a
#: monotone change of scale, a logarithm or a reciprocal) is one of them.
COVERED = (lambda trace: float(trace["raised"] is not None), depth_ratio, climb,
           lambda trace: trace["grad_norm"][-1] / trace["grad_norm"][0], _held_out_at(-1), _held_out_at(-2),
           _held_out_at(-3), lambda trace: held_out(trace)[0], lambda trace: held_out(trace)[1],
           lambda trace: sum(trace["val_loss"][-3:]) / 3 / trace["baseline_loss"])


def _order(values: list[float]) -> list[int]:
    return [(a > b) - (a < b) for i, a in enumerate(values) for b in values[i + 1:]]


def _uncovered(rules: list[Rule], named: list[tuple[dict, str, str, str]]) -> list[str]:
    """A line for every rule whose quantity orders the clean visible runs as none of :data:`COVERED` does."""
    clean = [trace for trace, *_ in named if trace["raised"] is None and finite(trace)]
    covered = [_order([measure(trace) for trace in clean]) for measure in COVERED]
    lines = []
    for number, rule in enumerate(rules, start=1):
        try:
            values = [_value(rule, number, copy.deepcopy(trace), "a visible run") for trace in clean]
        except GradingFailure:
            continue
        if not all(math.isfinite(value) for value in values):
            continue
        order = _order(values)
        if not any(order in (known, [-sign for sign in known]) for known in covered):
            lines.append(f"  Note: rule {number} ({rule.describe()}) reads a quantity that orders the visible runs "
                         "like none of the four ratios the hidden test's promise covers (nor `raised`): the visible "
                         "runs nearest its gap are not pinned for it, and a fresh run may cross its threshold at some "
                         "grading seed.")
    return lines


@check
def check_rules(rules, grading_seed: int | None = None) -> None:
    """Part A: rules() returns the diagnosis as an ordered list of (label, quantity, side, threshold); the first rule
    whose quantity(trace) lies on its side of its threshold names the trace, and a trace no rule names is "healthy".
    Visible: the fixed runs of :data:`.traces.VISIBLE_RUNS` (every kind of KINDS, the margins' edge runs and the hard
    runs among them), then, once every one is named right, each threshold moved up and down by a factor of
    :data:`WOBBLE`, one at a time: every visible run must still be named right. Hidden: the edge and hard runs again,
    then a fresh run of every kind in a random order; the fresh runs keep every margin's edge, so the grade of rules
    on the margins' quantities does not depend on the seed. A misnamed run whose own kind's measurement, pushed a
    far out, is named right proves a threshold past its gap.

    Domain: traces of :func:`.traces.training_trace` (40 steps, or fewer when ``raised`` is set: 1 step for an update
    outside no_grad); ``loss`` and ``grad_norm`` finite except in a diverging exploding run (inf and nan); ``loss`` a
    mean or, for a healthy run's summed variant, a sum over 256 examples; ``layer_grad_norms`` 3 to 17 positive
    floats; ``val_loss`` and ``baseline_loss`` positive. Corners at every seed: the edge runs of
    :data:`.traces.MARGINS` and the hard runs, and, drawn, a one-step run that raised and a run whose loss turns to nan.
    Contracts checked: rules() a non-empty list of 4-tuples (a label among LABELS, a callable, '>' or '<', a finite
    number); every quantity returns a number (a one-element tensor or a numpy number counts) and leaves the trace
    unchanged (deep comparison with a copy, nan equal to nan)."""
    __tracebackhide__ = True
    stated = _stated(rules)
    if grading_seed is None:
        runs = list(VISIBLE_RUNS)
    else:
        gen = generator("09/diagnose", grading_seed)
        runs = [*EDGE_RUNS, *[(*KINDS[i], gen) for i in torch.randperm(len(KINDS), generator=gen).tolist()]]
    named = []
    for number, (mode, variant, source) in enumerate(runs, start=1):
        with trial():
            trace = training_trace(mode, source, variant)
            what = f"trace {number} of {len(runs)}"
            _judge(stated, trace, mode, variant, what)
            named.append((trace, mode, variant, what))
    if grading_seed is None and len(named) == len(runs):
        with trial():
            _judge_wobble(stated, named)
            for line in _uncovered(stated, named):
                print(line)
