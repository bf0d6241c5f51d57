"""Exercise 06's snippet bank on the installed PyTorch: each snippet's recorded verdict is what running it gives, on
the corner inputs and on the inputs the hidden tests draw; a snippet that raises raises the error of its mechanism;
the domain the part states (steps >= 2, x not all zero) is the one where the verdicts hold; no snippet is one of
lesson 06's; and the tests see every snippet (hidden, corner first; the visible verdict test too) and every group
(the visible mechanism test) with at least two snippets per group and per mechanism, so that a misconception can be
named."""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter

import nbformat
import pytest

from autograder import course
from autograder.checks import ex06_in_place as ex06

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
        for snippet, inputs in ex06._snippets_to_check(1_000 + seed):
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
    assert "S21 (update snippet" in out and "steps = 1" in out and "-> fine:" in out
    assert "-> raises: RuntimeError: a leaf Variable" in out
    assert "leaf guard" not in out.replace("a leaf Variable", "")  # the outcome, never the mechanism


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


def test_visible_tests_show_every_group_and_hidden_tests_every_snippet_corner_first():
    visible_verdicts = ex06._snippets_to_check(None, every=True)
    assert [s for s, _ in visible_verdicts] == ex06.SNIPPETS
    assert all(inputs is ex06.CORNER_INPUTS for _, inputs in visible_verdicts)
    visible = [snippet for snippet, _ in ex06._snippets_to_check(None)]
    hidden = ex06._snippets_to_check(12345)
    assert {s.group for s in visible} == set(ex06.GROUPS) and len(visible) == len(ex06.GROUPS)
    assert [s for s, _ in hidden[:len(ex06.SNIPPETS)]] == ex06.SNIPPETS
    assert all(inputs is ex06.CORNER_INPUTS for _, inputs in hidden[:len(ex06.SNIPPETS)])
    assert [s for s, _ in hidden[len(ex06.SNIPPETS):]] == ex06.SNIPPETS
    assert all(inputs.steps >= 2 for _, inputs in hidden)


def test_answers_are_read_leniently_but_completely():
    reference = {s.id: (s.verdict, s.mechanism) for s in ex06.SNIPPETS}
    loose = {key: [verdict.upper().replace(" ", "_"), mechanism.strip(".").title()]
             for key, (verdict, mechanism) in reference.items()}
    assert ex06._read_answers(loose, "f()") == reference
    with pytest.raises(ex06.GradingFailure, match="is not a pair"):
        ex06._read_answers({key: verdict for key, (verdict, _) in reference.items()}, "f()")
