"""Exercise 09, Part A: the margins every trace keeps, the visible runs at their edges, and the rules graded on them.

Part A's text promises margins (:data:`traces.MARGINS`) without their numbers: on the depth ratio, the climb above
the best loss and the held-out ratio, every run of a kind stays on its side of a round bound, and the hidden runs stay
within the visible test's runs nearest to it (the edges). So rules whose thresholds separate the visible runs separate
the hidden runs at every grading seed, and rules tuned just past the examples fail the visible test (by name, or when
their thresholds are moved a quarter). The hidden test's own draws prove it here: ``EX09_MARGIN_SEEDS`` grading seeds
(default 6; the proof run takes 500, every kind at each, about half an hour on one core)::

    EX09_MARGIN_SEEDS=500 .venv/bin/python -m pytest -n 0 -q -s tests/test_ex09_traces.py -k drawn_runs

The quantities are computed here afresh from the trace's fields, not with the module's helpers.
"""

from __future__ import annotations

import math
import os

import pytest
import torch

from autograder.checking import GradingFailure
from autograder.checks.ex09_wider_system import rules as part_a
from autograder.checks.ex09_wider_system import traces
from autograder.seeding import generator

SEEDS = int(os.environ.get("EX09_MARGIN_SEEDS", "6"))


def _depth_ratio(trace):
    return trace["layer_grad_norms"][0] / trace["layer_grad_norms"][-1]


def _climb(trace):
    loss = trace["loss"]
    return max([loss[t] / min(loss[:t]) for t in range(1, len(loss)) if math.isfinite(loss[t])], default=1.0)


def _held_out(trace):
    ratios = [v / trace["baseline_loss"] for v in trace["val_loss"][-3:]]
    return min(ratios), max(ratios)


def _last_held_out(trace):
    return trace["val_loss"][-1] / trace["baseline_loss"]


def _value(margin, trace):
    if margin.quantity == "depth ratio":
        return _depth_ratio(trace)
    if margin.quantity == "climb":
        return _climb(trace)
    if margin.quantity == "grad_norm growth":
        return trace["grad_norm"][-1] / trace["grad_norm"][0]
    if margin.quantity == "largest held-out ratio":
        return _held_out(trace)[1]
    return _held_out(trace)[1 if margin.at_most else 0]


def _visible_value(margin):
    mode, variant, seed = margin.run
    return _value(margin, traces.training_trace(mode, seed, variant))


def _rule(explode, vanish, bounce, stuck, *, strict=True):
    """A diagnose() in the reference's order with the given thresholds (> and <, or >= and <= when not strict)."""
    above = (lambda a, b: a > b) if strict else (lambda a, b: a >= b)

    def diagnose(trace):
        if trace["raised"] is not None:
            return "in-place on a leaf"
        ratio = _depth_ratio(trace)
        if not all(math.isfinite(v) for v in trace["loss"]) or above(ratio, explode):
            return "exploding gradients"
        if above(1 / ratio, 1 / vanish):
            return "vanishing gradients"
        if above(_climb(trace), bounce):
            return "missing zero_grad"
        if above(trace["val_loss"][-1] / trace["baseline_loss"], stuck):
            return "broadcasting bug"
        return "healthy"

    return diagnose


def _as_rules(explode, vanish, bounce, stuck):
    """The reference's order with these thresholds, as Part A's rules() (the quantities computed afresh here)."""
    def rules():
        return [("in-place on a leaf", lambda trace: trace["raised"] is not None, ">", 0.5),
                ("exploding gradients", _depth_ratio, ">", explode), ("vanishing gradients", _depth_ratio, "<", vanish),
                ("missing zero_grad", _climb, ">", bounce),
                ("broadcasting bug", _last_held_out, ">", stuck)]

    return rules


def _tightest_rules():
    """The two rules with thresholds exactly at the visible runs' extremes: on the side of the ordinary runs (strict
    comparisons) and on the side of the failures (inclusive ones). Both pass the visible test by construction."""
    value = {(m.quantity, m.kinds, m.at_most): _visible_value(m) for m in traces.MARGINS}
    ordinary_high = value["depth ratio", traces.ORDINARY, True]
    ordinary_low = value["depth ratio", traces.ORDINARY, False]
    quiet = value["climb", traces.QUIET, True]
    trained = value["held-out ratio", traces.HEALTHY, True]
    exploding = value["depth ratio", traces.EXPLODING, False]
    vanishing = value["depth ratio", (("vanishing gradients", ""),), True]
    bouncing = value["climb", (("missing zero_grad", ""),), False]
    stuck = value["held-out ratio", traces.STUCK, False]
    return {"at the ordinary runs' extremes": _rule(ordinary_high, ordinary_low, quiet, trained),
            "at the failures' extremes": _rule(exploding, vanishing, bouncing, stuck, strict=False)}


def test_drawn_runs_keep_the_margins():
    """The hidden test's own draws, at SEEDS grading seeds: every run keeps the stated margins and the visible edges
    of its kind, raises exactly when it is an in-place run, logs inf/nan only when it diverges, and both tightest
    rules that pass the visible test name it right."""
    rules = _tightest_rules()
    extremes: dict[int, float] = {}
    count = 0
    for seed in range(SEEDS):
        gen = generator("09/diagnose", seed)
        for i in torch.randperm(len(traces.KINDS), generator=gen).tolist():
            mode, variant = traces.KINDS[i]
            trace = traces.training_trace(mode, gen, variant)
            count += 1
            where = (seed, mode, variant)
            assert (trace["raised"] is not None) == (mode == "in-place on a leaf"), where
            finite = all(math.isfinite(v) for v in trace["loss"] + trace["grad_norm"])
            assert finite == ((mode, variant) != ("exploding gradients", "diverges")), where
            for k, margin in enumerate(traces.MARGINS):
                if (mode, variant) not in margin.kinds:
                    continue
                value = _value(margin, trace)
                keeps = (value <= margin.edge <= margin.stated) if margin.at_most else \
                    (value >= margin.edge >= margin.stated)
                assert keeps, (where, margin.quantity, value, margin.edge)
                extremes[k] = (max if margin.at_most else min)(extremes.get(k, value), value)
            for name, rule in rules.items():
                assert rule(trace) == mode, (where, name)
    print(f"\n{count} drawn runs ({SEEDS} grading seeds x {len(traces.KINDS)} kinds); the most extreme value of each "
          "margin among them:")
    for k, margin in enumerate(traces.MARGINS):
        side = "at most" if margin.at_most else "at least"
        print(f"  {margin.quantity} of {len(margin.kinds)} kind(s), {side} {margin.stated:g} (edge {margin.edge:g}): "
              f"{extremes.get(k, math.nan):.6g}")


def test_the_visible_runs_sit_at_the_edges():
    """Each margin's edge is its visible run's value rounded toward the kinds' side, by less than 0.05 %; the run is
    in the visible test and in the hidden test's pinned runs."""
    for margin in traces.MARGINS:
        assert margin.run in traces.VISIBLE_RUNS and margin.run in traces.EDGE_RUNS
        assert margin.run[:2] in margin.kinds
        value = _visible_value(margin)
        if margin.at_most:
            assert margin.edge <= value <= margin.stated, (margin, value)
        else:
            assert margin.stated <= value <= margin.edge, (margin, value)
        assert abs(value - margin.edge) <= 5e-4 * abs(value), (margin, value)
    assert {run[:2] for run in traces.VISIBLE_RUNS} == set(traces.KINDS)
    assert all(run in traces.VISIBLE_RUNS for run in traces.EDGE_RUNS)


def test_the_visible_runs_keep_the_stated_margins():
    for mode, variant, seed in traces.VISIBLE_RUNS:
        trace = traces.training_trace(mode, seed, variant)
        assert traces.shows_fingerprint(mode, variant, trace, drawn=False), (mode, variant, seed)


def _example_extremes():
    """The extremes of the four extra runs of every kind (example_traces() after the visible ones)."""
    examples = {label: [traces.training_trace(label, seed) for seed in traces.EXAMPLE_SEEDS] for label in traces.LABELS}
    ordinary = [t for label in ("missing zero_grad", "broadcasting bug", "healthy") for t in examples[label]]
    quiet = [t for label in ("vanishing gradients", "broadcasting bug", "healthy") for t in examples[label]]
    return {"explode": max(map(_depth_ratio, ordinary)), "vanish": min(map(_depth_ratio, ordinary)),
            "bounce": max(map(_climb, quiet)), "stuck": max(_held_out(t)[1] for t in examples["healthy"])}


SOUND = {"explode": 1e2, "vanish": 1e-3, "bounce": 3.0, "stuck": 0.45}


@pytest.mark.parametrize("threshold", ["explode", "vanish", "bounce", "stuck"])
def test_a_threshold_just_past_the_examples_fails_the_visible_test(threshold):
    """Issue 21: a learner who set one threshold 5 % past the examples' extreme (the others in the middle of their
    gaps) used to pass the visible test and then fail hidden runs at some seeds only. The visible runs at the edges
    now catch it."""
    past = _example_extremes()[threshold] * (0.95 if threshold == "vanish" else 1.05)
    edge = {"explode": (traces.ORDINARY, True), "vanish": (traces.ORDINARY, False), "bounce": (traces.QUIET, True),
            "stuck": (traces.HEALTHY, True)}[threshold]
    (margin,) = [m for m in traces.MARGINS if (m.kinds, m.at_most) == edge]
    visible = _visible_value(margin)
    assert past < visible if margin.at_most else past > visible  # inside the examples' gap, not the visible runs'
    with pytest.raises(GradingFailure):
        part_a.check_rules(_as_rules(**{**SOUND, threshold: past}))


def test_a_rule_in_the_middle_of_the_margins_passes_visible_and_hidden():
    rules = _as_rules(**SOUND)
    part_a.check_rules(rules)
    part_a.check_rules(rules, grading_seed=914)


@pytest.mark.parametrize("threshold, factor", [("explode", 1.2), ("vanish", 1 / 1.2), ("bounce", 1.2), ("stuck", 1.2)])
def test_a_threshold_that_separates_the_visible_runs_by_a_hair_fails_the_wobble(threshold, factor):
    """A threshold within a quarter of a visible run's value, on the side that still names every visible run right,
    passes the naming and fails once the check moves it by checks.WOBBLE: named a threshold at the edge of its gap."""
    edge = {"explode": ("depth ratio", traces.EXPLODING, False),
            "vanish": ("depth ratio", (("vanishing gradients", ""),), True),
            "bounce": ("climb", (("missing zero_grad", ""),), False),
            "stuck": ("held-out ratio", traces.STUCK, False)}[threshold]
    (margin,) = [m for m in traces.MARGINS if (m.quantity, m.kinds, m.at_most) == edge]
    near = _visible_value(margin) / factor
    if threshold == "stuck":  # the rule reads the last step's held-out ratio: the nearest stuck run there
        near = min(_last_held_out(traces.training_trace(mode, seed, variant)) for mode, variant, seed in
                   traces.VISIBLE_RUNS if (mode, variant) in traces.STUCK) / factor
    with pytest.raises(GradingFailure, match="threshold at the edge of its gap"):
        part_a.check_rules(_as_rules(**{**SOUND, threshold: near}))


def test_a_summed_loss_is_the_same_training_with_every_number_256_times_larger():
    plain, summed = (traces.training_trace("healthy", 1149, variant) for variant in ("", "summed"))
    scale = traces.BATCH
    for field in ("loss", "grad_norm", "layer_grad_norms"):
        torch.testing.assert_close(torch.tensor(summed[field]), scale * torch.tensor(plain[field]), rtol=1e-9, atol=0)
    torch.testing.assert_close(torch.tensor(summed["val_loss"]), torch.tensor(plain["val_loss"]), rtol=1e-9, atol=0)
    assert summed["grad_norm"][0] > 100 > max(plain["grad_norm"])


def test_the_mid_run_bounce_is_a_fall_then_a_climb():
    for seed in range(6):
        trace = traces.training_trace("missing zero_grad", generator("09/bounce", seed))
        climb, fell_to = traces.bounce(trace)
        assert climb >= 4.5 and fell_to <= 0.5


def test_the_examples_and_visible_runs_are_fixed():
    assert traces.example_traces() == traces.example_traces()
    assert traces.training_trace("healthy", 3) == traces.training_trace("healthy", 3)


def _climb_first():
    """The blind review's order: nan, then the climb, before the depth ratio."""
    sound = _as_rules(**SOUND)()
    return [sound[0], ("exploding gradients", lambda trace: not all(math.isfinite(v) for v in trace["loss"]), ">", 0.5),
            sound[3], *sound[1:3], sound[4]]


def _grad_norm_trend():
    """The blind review's rule on a quantity the margins do not bound: zero_grad when grad_norm ends 1.5x higher."""
    sound = _as_rules(**SOUND)()
    return [*sound[:3], ("missing zero_grad", lambda trace: trace["grad_norm"][-1] / trace["grad_norm"][0], ">", 1.5),
            sound[4]]


@pytest.mark.parametrize("rules", [_climb_first, _grad_norm_trend])
def test_a_hard_run_fails_a_wrong_order_at_every_seed(rules):
    """The hard runs are pinned in the visible test and again at the start of the hidden one: a climb read before the
    depth ratio, or a rule on grad_norm's trend, fails both (it used to pass the visible test and fail the hidden one
    at some seeds only)."""
    with pytest.raises(GradingFailure):
        part_a.check_rules(rules)
    for mode, variant, seed in traces.EDGE_RUNS:
        if (mode, variant) in (("exploding gradients", "clipped"), ("missing zero_grad", "")):
            if part_a.apply_rules(rules(), traces.training_trace(mode, seed, variant)) != mode:
                break
    else:
        pytest.fail("no pinned run catches the rule")


def test_example_traces_hold_the_visible_runs_first():
    examples = traces.example_traces()
    for label in traces.LABELS:
        visible = [traces.training_trace(mode, seed, variant) for mode, variant, seed in traces.VISIBLE_RUNS
                   if mode == label]
        assert examples[label][:len(visible)] == visible and len(examples[label]) == len(visible) + 4
