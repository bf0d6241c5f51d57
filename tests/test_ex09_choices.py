"""Exercise 09, Part C: the right option cannot be found from the form of the options.

Naive strategies (the longest option, the shortest, the first, the last, the one sharing the most words with the
question) score no better than chance over many grading seeds, and none of them ever passes a test; the options of
every question are alike in length and form; the notebook shows exactly the questions the checks grade; at least two
questions ask what a snippet prints, and the right option is what the snippet really prints.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from autograder import course
from autograder.checking import GradingFailure
from autograder.checks.ex09_wider_system import choices

SEEDS = range(300)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w′.']+", text.lower()))


STRATEGIES = {
    "longest": lambda options, prompt: max(options, key=lambda letter: len(options[letter])),
    "shortest": lambda options, prompt: min(options, key=lambda letter: len(options[letter])),
    "first": lambda options, prompt: "a",
    "last": lambda options, prompt: "d",
    "most words shared with the question": lambda options, prompt: max(
        options, key=lambda letter: len(_words(options[letter]) & _words(prompt))),
}


def _hit_rate(strategy) -> float:
    hits = total = 0
    for seed in SEEDS:
        for question in choices.QUESTIONS:
            for texts in choices.presentations(question, seed):
                options = dict(zip(choices.LETTERS, texts))
                hits += options[strategy(options, question.prompt)] == question.correct
                total += 1
    return hits / total


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_naive_strategy_scores_no_better_than_chance(name):
    chance = 1 / len(choices.LETTERS)
    assert _hit_rate(STRATEGIES[name]) <= chance + 0.02, name


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_naive_strategy_never_passes(name):
    strategy = STRATEGIES[name]
    answers = [lambda options, prompt=q.prompt: strategy(options, prompt) for q in choices.QUESTIONS]
    for seed in [None, *SEEDS[:50]]:
        with pytest.raises(GradingFailure):
            choices.check_multiple_choice(*answers, grading_seed=seed)


def test_the_options_are_alike_in_length_and_form():
    for question in choices.QUESTIONS:
        lengths = [len(text) for text in question.options()]
        assert max(lengths) / min(lengths) <= 1.15, question.name
        for text in question.options():
            assert text[0].isupper() and text.endswith("."), (question.name, text)
    # the right option is the longest or the shortest in at most one question of five
    ranks = [sorted(q.options(), key=len).index(q.correct) for q in choices.QUESTIONS]
    assert sum(rank == 3 for rank in ranks) <= 1 and sum(rank == 0 for rank in ranks) <= 1


def test_no_option_keeps_its_letter_between_the_two_orders():
    for seed in [None, *SEEDS[:50]]:
        for question in choices.QUESTIONS:
            first, second = choices.presentations(question, seed)
            assert sorted(first) == sorted(second) == sorted(question.options())
            assert all(a != b for a, b in zip(first, second))


def test_the_notebook_shows_the_questions_the_checks_grade():
    notebook = nbformat.read(course.source_notebook("09-wider-system"), as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    for question in choices.QUESTIONS:
        assert choices.question_markdown(question) in text, question.name


def _printed(snippet: str) -> str:
    """What a question's snippet prints, run for real."""
    import contextlib
    import io
    import warnings

    import torch

    output = io.StringIO()
    with contextlib.redirect_stdout(output), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading h.grad of a non-leaf warns
        exec(snippet, {"torch": torch})
    return output.getvalue()


def test_the_prediction_questions_show_what_their_snippet_prints():
    """At least two questions ask what a snippet prints (issue 21: predict, not recall); the right option names
    exactly the values it prints, in order, and no wrong option does."""
    values = re.compile(r"None|tensor\([^)]*\)")
    predictions = [q for q in choices.QUESTIONS if "```python\n" in q.prompt]
    assert len(predictions) >= 2
    for question in predictions:
        snippet = question.prompt.split("```python\n")[1].split("```")[0]
        printed = values.findall(_printed(snippet))
        assert printed and values.findall(question.correct) == printed, (question.name, printed)
        for text, _ in question.distractors:
            assert values.findall(text) != printed, (question.name, text)
