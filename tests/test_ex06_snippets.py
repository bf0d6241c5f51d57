"""Exercise 06's snippet bank on the installed PyTorch: each snippet's recorded verdict is what running it gives, on
the corner inputs and on the inputs the tests draw; a snippet that raises raises the error of its mechanism; the
domain the part states (steps >= 2, x not all zero) is the one where the verdicts hold; no snippet is one of lesson
06's; the three graded groups cover the bank, each snippet judged twice (corner first) so that a misconception can
be named; and no message a learner reads while working shows a snippet's right verdict or mechanism."""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter

import nbformat
import pytest

from autograder import course
from autograder.checks.ex06_in_place import snippets as ex06

#: The exception a raising snippet throws, by mechanism: its type and a phrase of its message.
ERRORS = {"leaf guard": ("RuntimeError", "leaf Variable that requires grad is being used in an in-place operation"),
          "version counter": ("RuntimeError", "modified by an inplace operation"),
          "rebinding": ("TypeError", "NoneType")}


@pytest.mark.parametrize("snippet", ex06.SNIPPETS, ids=lambda snippet: snippet.id)
def test_recorded_verdict_and_mechanism_hold(snippet):
    verdict, evidence = ex06.measure(snippet, ex06.CORNER_INPUTS)
    assert verdict == snippet.verdict
    if verdict == "raises":
        kind, phrase = ERRORS[snippet.mechanism]
        assert evidence.startswith(kind) and phrase in evidence, evidence
    else:
        assert snippet.mechanism in ex06.MECHANISMS and snippet.mechanism not in ("leaf guard", "version counter")
    assert (verdict == "fine") == (snippet.mechanism == "fine")


def test_verdicts_hold_on_the_inputs_the_hidden_tests_draw():
    """20 seeds of drawn inputs (x of 3 to 5 entries, steps 2 to 4): measure() raises a CourseBug on any change."""
    for seed in range(20):
        for group in (1, 2, 3):
            for snippet, inputs in ex06._snippets_to_check(group, 1_000 + seed):
                ex06.measure(snippet, inputs)


def test_the_stated_domain_is_needed_two_snippets_change_verdict_at_one_step():
    one_step = dataclasses.replace(ex06.CORNER_INPUTS, steps=1)
    changed = [s for s in ex06.SNIPPETS if ex06._measure(s, one_step)[0] != s.verdict]
    assert ex06.CORNER_INPUTS.steps == 2
    assert {s.group for s in changed} == {"no_reset"} and len(changed) == 2


def test_the_stated_domain_is_needed_an_all_zero_x_makes_the_detach_cut_of_s13_fine():
    zeros = dataclasses.replace(ex06.CORNER_INPUTS, x=ex06.CORNER_INPUTS.x * 0)
    changed = [s.id for s in ex06.SNIPPETS if s.kind == "gradient" and ex06._measure(s, zeros)[0] != s.verdict]
    assert changed == ["S13"]
    assert bool(ex06.CORNER_INPUTS.x.abs().max() > 0)


def test_run_snippet_prints_what_happens(capsys):
    ex06.run_snippet("s21", steps=1)
    ex06.run_snippet("S05")
    out = capsys.readouterr().out
    assert "S21 (update snippet" in out and "steps = 1" in out and "-> ran without an error:" in out
    assert "-> raised RuntimeError: a leaf Variable" in out
    assert "leaf guard" not in out.replace("a leaf Variable", "")  # the outcome, never the mechanism
    assert not any(f"-> {verdict}" in out for verdict in ex06.VERDICTS)  # nor the verdict's word


def test_run_snippet_holds_back_group_3s_gradient_snippets(capsys):
    """Group 3's gradient snippets are the learner's prediction: run_snippet prints their code and what to measure,
    never what running them gives."""
    assert ex06.HELD_BACK == ("S17", "S18", "S19", "S22", "S24")
    for snippet_id in ex06.HELD_BACK:
        ex06.run_snippet(snippet_id.lower())
        out = capsys.readouterr().out
        assert "held back" in out and "_saved_result" in out and "->" not in out
        assert "RuntimeError" not in out and "finite differences" not in out
    ex06.run_snippet("S20")
    assert "-> ran without an error:" in capsys.readouterr().out


def test_no_snippet_is_one_of_the_lessons():
    lesson = nbformat.read(course.ROOT / "lessons" / "06-in-place.ipynb", as_version=4)
    cell = next(c.source for c in lesson.cells if c.cell_type == "code" and "SNIPPETS = [" in c.source)
    assignment = next(node for node in ast.parse(cell).body
                      if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SNIPPETS")
    shown = {" ".join(row[0].split()) for row in ast.literal_eval(assignment.value)}
    assert len(shown) >= 8
    assert not shown & {" ".join(s.source.split()) for s in ex06.SNIPPETS}


def test_two_snippets_per_group_and_per_mechanism():
    assert min(Counter(s.group for s in ex06.SNIPPETS).values()) >= 2
    assert Counter(s.mechanism for s in ex06.SNIPPETS).keys() == set(ex06.MECHANISMS)
    assert min(Counter(s.mechanism for s in ex06.SNIPPETS).values()) >= 2


def test_the_groups_cover_the_bank_and_judge_every_snippet_twice_corner_first():
    assert [s for group in (1, 2, 3) for s in ex06.group_of(group)] == ex06.SNIPPETS
    for seed in (None, 12345):
        for group in (1, 2, 3):
            judged = ex06._snippets_to_check(group, seed)
            snippets = ex06.group_of(group)
            assert [s for s, _ in judged] == snippets + snippets
            assert all(inputs is ex06.CORNER_INPUTS for _, inputs in judged[:len(snippets)])
            assert all(inputs.steps >= 2 and inputs is not ex06.CORNER_INPUTS for _, inputs in judged[len(snippets):])


def _answer(snippet, verdict, mechanism, saved=None):
    if snippet.kind == "update":
        return verdict, mechanism
    return verdict, mechanism, snippet.saved if saved is None else frozenset(saved)


@pytest.mark.parametrize("snippet", ex06.SNIPPETS, ids=lambda snippet: snippet.id)
def test_no_message_shows_the_right_verdict_or_mechanism(snippet):
    """Every wrong answer to a snippet (verdict, mechanism or both) fails with a message that never quotes what is
    right, unless the learner's own answer said it; the misconception it may name says the situation, not the label.
    A held-back snippet's message names the snippet only: no evidence of running it, no misconception."""
    truth = (snippet.verdict, snippet.mechanism)
    ex06._judge(snippet, ex06.CORNER_INPUTS, _answer(snippet, *truth), "f()")
    for verdict in ex06.VERDICTS:
        for mechanism in ex06.MECHANISMS:
            if (verdict, mechanism) == truth:
                continue
            with pytest.raises(ex06.GradingFailure) as failure:
                ex06._judge(snippet, ex06.CORNER_INPUTS, _answer(snippet, verdict, mechanism), "f()")
            message = failure.value.message
            if snippet.id in ex06.HELD_BACK:
                assert f"{snippet.id} is wrong" in message and not failure.value.suspects
                assert "finite differences" not in message and "Error" not in message
            if verdict != truth[0]:
                assert repr(truth[0]) not in message
            if truth[1] not in (verdict, mechanism):  # "fine" is a verdict and a mechanism: theirs to read back
                assert repr(truth[1]) not in message
    named = ex06.GROUPS[snippet.group][1]
    if snippet.mechanism not in (".data", "detach"):  # those two are words of the snippet's own code
        assert snippet.mechanism not in named.line()


@pytest.mark.parametrize("snippet", [s for s in ex06.SNIPPETS if s.kind == "gradient"], ids=lambda snippet: snippet.id)
def test_wrong_saved_names_fail_without_showing_the_right_ones(snippet):
    """Saved names that are off by one name (one missing, or one too many) fail the snippet, right verdict and
    mechanism or not; the message shows the learner's names, never the right ones, and names no misconception."""
    extra = next(name for name in ("x", "y", "z", "d") if name not in snippet.saved)
    wrong = [snippet.saved | {extra}] + [snippet.saved - {name} for name in snippet.saved]
    for saved in wrong:
        with pytest.raises(ex06.GradingFailure) as failure:
            ex06._judge(snippet, ex06.CORNER_INPUTS, _answer(snippet, snippet.verdict, snippet.mechanism, saved), "f()")
        assert not failure.value.suspects
        if snippet.id not in ex06.HELD_BACK:
            assert f"({', '.join(sorted(saved)) or 'none'})" in failure.value.message


def test_saved_names_decide_the_verdicts_not_the_look_of_the_code():
    """Every gradient snippet's saved names are what saved_tensors_hooks measures, and the replacements of the
    lesson-like rows (S02, S16, S19) turn on a node keeping its output (tanh, sigmoid) or its input (cos)."""
    for snippet in ex06.SNIPPETS:
        if snippet.kind == "gradient":
            assert ex06.measure_saved(snippet, ex06.CORNER_INPUTS) == snippet.saved
    by_id = {s.id: s for s in ex06.SNIPPETS}
    assert by_id["S02"].saved == {"z"} and by_id["S16"].saved == {"z"} and by_id["S19"].saved == {"y"}
    assert ex06.measure_saved(by_id["S05"], ex06.CORNER_INPUTS) == frozenset()  # refused before a node is made


def test_answers_are_read_leniently_but_completely():
    reference = {s.id: _answer(s, s.verdict, s.mechanism) for s in ex06.SNIPPETS}
    loose = {key: [answer[0].upper().replace(" ", "_"), answer[1].strip(".").title(), *answer[2:]]
             for key, answer in reference.items()}
    loose = {key: value[:2] + [" ".join(sorted(value[2])) if len(value[2]) % 2 else sorted(value[2])]
             if len(value) == 3 else value for key, value in loose.items()}
    assert ex06._read_answers(loose, "f()") == reference
    with pytest.raises(ex06.GradingFailure, match="is not a pair"):
        ex06._read_answers({key: answer[0] for key, answer in reference.items()}, "f()")
    with pytest.raises(ex06.GradingFailure, match="is not a triple"):
        ex06._read_answers({key: answer[:2] for key, answer in reference.items()}, "f()")
    with pytest.raises(ex06.GradingFailure, match="is not a name or a set of names"):
        ex06._read_answers({**reference, "S01": ("raises", "version counter", 3)}, "f()")


# ------------------------------------------------------------------------------------------ Part A: the audit's truth


def test_every_suspects_declared_hazards_are_what_running_it_shows():
    """The check grades against each suspect's hazards declared from its parts; the oracle (both resets, three calls,
    memory compared by storage) measures the same on every combination of parts the hidden test can draw."""
    from autograder.checks.ex06_in_place import audit

    wrong = [s for s in audit.ALL if audit.measured(s.step()) != s.declared()]
    assert not wrong, wrong[:5]


def test_the_visible_suspects_cover_every_hazard_and_name_each_mistake_twice():
    from autograder.checks.ex06_in_place import audit

    assert audit.VISIBLE[0] == audit.GIVEN and not audit.GIVEN.declared()
    for hazard in audit.HAZARDS:
        assert sum(hazard in s.declared() for s in audit.VISIBLE) >= 2, hazard
    assert len(set(audit.VISIBLE)) == len(audit.VISIBLE)
