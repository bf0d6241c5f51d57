"""Exercise 06's snippet bank on the installed PyTorch: each snippet's recorded verdict is what running it gives, a
snippet that raises raises the error of its mechanism, and the tests see every snippet (hidden) and every group
(visible) with at least two snippets per group and per mechanism, so that a misconception can be named."""

from __future__ import annotations

from collections import Counter

import pytest

from autograder.checks import ex06_in_place as ex06

#: The exception a raising snippet throws, by mechanism: its type and a phrase of its message.
ERRORS = {"leaf guard": ("RuntimeError", "leaf Variable that requires grad is being used in an in-place operation"),
          "version counter": ("RuntimeError", "modified by an inplace operation"),
          "rebinding": ("TypeError", "NoneType")}


@pytest.mark.parametrize("snippet", ex06.SNIPPETS, ids=lambda snippet: snippet.id)
def test_recorded_verdict_and_mechanism_hold(snippet):
    verdict, evidence = ex06.measure(snippet, ex06._snippet_inputs(None))
    assert verdict == snippet.verdict
    if verdict == "raises":
        kind, phrase = ERRORS[snippet.mechanism]
        assert evidence.startswith(kind) and phrase in evidence, evidence
    else:
        assert snippet.mechanism in ex06.MECHANISMS and snippet.mechanism not in ("leaf guard", "version counter")
    assert (verdict == "fine") == (snippet.mechanism == "fine")


def test_two_snippets_per_group_and_per_mechanism():
    assert min(Counter(s.group for s in ex06.SNIPPETS).values()) >= 2
    assert Counter(s.mechanism for s in ex06.SNIPPETS).keys() == set(ex06.MECHANISMS)
    assert min(Counter(s.mechanism for s in ex06.SNIPPETS).values()) >= 2


def test_visible_tests_show_every_group_and_hidden_tests_every_snippet():
    visible = [snippet for snippet, _ in ex06._snippets_to_check(None)]
    hidden = [snippet for snippet, _ in ex06._snippets_to_check(12345)]
    assert {s.group for s in visible} == set(ex06.GROUPS) and len(visible) == len(ex06.GROUPS)
    assert hidden == ex06.SNIPPETS


def test_answers_are_read_leniently_but_completely():
    reference = {s.id: (s.verdict, s.mechanism) for s in ex06.SNIPPETS}
    loose = {key: [verdict.upper().replace(" ", "_"), mechanism.strip(".").title()]
             for key, (verdict, mechanism) in reference.items()}
    assert ex06._read_answers(loose, "f()") == reference
    with pytest.raises(ex06.GradingFailure, match="is not a pair"):
        ex06._read_answers({key: verdict for key, (verdict, _) in reference.items()}, "f()")
