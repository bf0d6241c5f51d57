"""Hints nudge, they never hand over the answer (issue 34): every hint of every exercise is read against the reference
answer of its part, and a hint book opens its later hints only after the part's test has failed.

A part is the stretch of a source notebook from its ``part_*`` cell to the next one: its reference answer is the code
between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of its solution cells, and what a learner is given is the
rest (the part's text, signatures, docstrings, given code). A hint gives the answer away when it holds

* a code span (```...```) that is in the reference answer and not in what the learner is given (names the part's text
  already uses are fine), or
* a line of the reference answer (12 characters or more, spaces aside).

Comments in the reference answer are not its code (``submissions.answer_code``), and a span of fewer than 4
characters is too short to give anything away.

Hints are read where they are: a hint book's texts (:class:`autograder.hints.HintBook`, ``checks.hint``), and the
``<details><summary>Hint N</summary>`` blocks of a notebook's markdown.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

import nbformat
import pytest
from submissions import SOLUTION_REGION, answer_code

from autograder import checking, course
from autograder.hints import HintBook, PartHints

SPAN = re.compile(r"``?([^`]+?)``?")
DETAILS = re.compile(r"<summary>\s*Hint (\d+)\s*</summary>(.*?)(?=<details>|</details>)", re.S)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@dataclass
class Part:
    assignment: str
    letter: str
    answer: str  # the reference code of its solution cells
    given: str  # what the learner reads and is given: text, signatures, docstrings
    hints: list[str]
    solution_cells: list[str]


def parts(assignment: str) -> list[Part]:
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    found: list[Part] = []
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        if cell.cell_type == "markdown" and re.fullmatch(r"part_[a-z]\w*", grade_id):
            found.append(Part(assignment, grade_id.split("_")[1].upper(), "", cell.source, [], []))
        elif not found:
            continue
        elif meta.get("solution") and cell.cell_type == "code":
            found[-1].answer += answer_code(cell.source) + "\n"
            found[-1].given += SOLUTION_REGION.sub("", cell.source) + "\n"
            found[-1].solution_cells.append(grade_id)
        elif cell.cell_type == "markdown" and "<summary>" in cell.source and "Hint" in cell.source:
            found[-1].hints += [text for _, text in DETAILS.findall(cell.source)]
        elif cell.cell_type == "markdown":
            found[-1].given += cell.source + "\n"
    book = _book(assignment)
    for part in found:
        if book is not None and part.letter in book.parts:
            part.hints += list(book.parts[part.letter].texts)
    return found


def _book(assignment: str) -> HintBook | None:
    module = importlib.import_module("autograder.checks.ex" + assignment.replace("-", "_"))
    return getattr(module, "hint", None) if isinstance(getattr(module, "hint", None), HintBook) else None


def giveaways(part: Part, hint: str) -> list[str]:
    """What ``hint`` holds of ``part``'s reference answer that the learner is not given."""
    answer, given = _squash(part.answer), _squash(part.given)
    found = [span for span in SPAN.findall(hint)
             if len(_squash(span)) >= 4 and _squash(span) in answer and _squash(span) not in given]
    lines = {line.strip() for line in part.answer.splitlines() if len(_squash(line)) >= 12}
    found += [line for line in lines if _squash(line) in _squash(hint)]
    return found


HINTED = [(a, p.letter) for a in course.assignments() for p in parts(a) if p.hints]
#: Parts whose hints still give the answer away, measured when this test was written (issue 34): each is rewritten
#: with its exercise, and leaves this list then (a listed part whose hints pass fails the test: strict).
GIVE_AWAY: set[tuple[str, str]] = set()


@pytest.mark.parametrize("assignment, letter", [
    pytest.param(a, p, marks=[pytest.mark.xfail(strict=True, reason="hints not rewritten yet")] if (a, p) in GIVE_AWAY
                 else []) for a, p in HINTED], ids=[f"{a}:{p}" for a, p in HINTED])
def test_no_hint_gives_the_answer_away(assignment, letter):
    part = next(p for p in parts(assignment) if p.letter == letter)
    leaks = {number + 1: found for number, hint in enumerate(part.hints) if (found := giveaways(part, hint))}
    assert not leaks, f"{assignment} Part {letter}: hints hold the reference answer: {leaks}"


def test_the_reader_sees_a_hint_that_gives_the_answer_away():
    part = Part("x", "A", "    p -= lr * (p.grad + weight_decay * p)\n    p.grad = None\n",
                "def sgd_step(params, lr, weight_decay=0.0): update every p that has a p.grad", [], [])
    assert giveaways(part, "Write `p -= lr * (p.grad + weight_decay*p)` in place.") == [
        "p -= lr * (p.grad + weight_decay*p)", "p -= lr * (p.grad + weight_decay * p)"]  # as a span, and as a line
    assert giveaways(part, "What does `p.grad` hold after the step? Which value of `p` does the decay use?") == []


def test_a_hint_book_opens_its_later_hints_after_a_failed_test(monkeypatch):
    monkeypatch.setattr(checking, "_FAILED", set())
    book = HintBook({"A": PartHints(("What is asked?", "Check: f(2) = 4.", "In words: square it."),
                                    ("check_square",), ("square",))})
    assert "What is asked?" in book.text("A", 1)
    assert "opens once Part A's test has failed" in book.text("A", 2)

    @checking.check
    def check_square(fn, grading_seed=None):
        with checking.trial():
            checking.expect_close(fn(2.0), 4.0, what="square(2)", source="expected")

    check_square(lambda x: x * x)
    assert "opens once" in book.text("A", 3)
    with pytest.raises(checking.GradingFailure):
        check_square(lambda x: 3 * x)
    assert "Check: f(2) = 4." in book.text("A", 2) and "In words" in book.text("A", 3)
    with pytest.raises(ValueError, match="hints 1 to 3"):
        book.text("A", 4)
    with pytest.raises(ValueError, match="no part 'B'"):
        book.text("B")


@pytest.mark.parametrize("assignment", [a for a in course.assignments() if _book(a) is not None])
def test_a_hint_book_names_real_checks_and_cells_and_asks_first(assignment):
    module = importlib.import_module("autograder.checks.ex" + assignment.replace("-", "_"))
    book = _book(assignment)
    solution = {cell for part in parts(assignment) for cell in part.solution_cells}
    for letter, hints in book.parts.items():
        assert all(callable(getattr(module, name, None)) for name in hints.checks), (letter, hints.checks)
        assert set(hints.cells) <= solution, (letter, set(hints.cells) - solution)
        assert hints.texts[0].rstrip().endswith("?"), f"Part {letter}'s first hint asks a question"
        assert 2 <= len(hints.texts) <= 4, f"Part {letter}: a question, a check value or smaller case, the approach"
