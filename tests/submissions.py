"""Build learner submissions from the release, and read back what nbgrader made of them.

A submission is the student release with some solution cells filled in: from the reference solution, from an entry
of the wrong-answer catalogue (``tests/wrong_answers/NN-slug.yaml``), or left blank. Building them is
:mod:`tools.synthetic`'s job (the demo and the benchmark build theirs the same way); this module gives
the tests typed catalogue entries and reads the results back.
"""

from __future__ import annotations

import html
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import course
from tools import synthetic
from tools.synthetic import grade_id


@dataclass(frozen=True)
class WrongAnswer:
    """One catalogue entry. ``scores`` lists the test cells it loses (empty: a correct answer, which must get full
    marks); ``source`` says who wrote it: "authors" (the course's authors, who saw the checks), "blind" (a reviewer
    who saw only the student notebook and the lessons) or "ported" (the lesson's nearest code pasted as the answer,
    which must lose points unless the part's text says to reuse it). ``feedback``: phrases its feedback must show;
    ``not_named``: mistakes its numbers resemble but it did not make, whose names must not appear."""

    name: str
    replace: dict[str, str]
    scores: dict[str, float] = field(default_factory=dict)
    feedback: list[str] = field(default_factory=list)
    not_named: list[str] = field(default_factory=list)
    source: str = "authors"

    def __post_init__(self) -> None:
        if self.source not in ("authors", "blind", "ported"):
            raise ValueError(f"catalogue entry {self.name!r}: source is 'authors', 'blind' or 'ported', not "
                             f"{self.source!r}")

    def lost(self, points: dict[str, float]) -> set[str]:
        """The test cells among ``points`` (grade id -> points) that this answer does not get full marks for."""
        return {cell for cell in points if float(self.scores.get(cell, points[cell])) != points[cell]}


def catalogue(assignment: str) -> list[WrongAnswer]:
    return [WrongAnswer(**entry) for entry in synthetic.catalogue(assignment)]


def solution_sources(assignment: str) -> dict[str, str]:
    """The reference code of every solution cell, by grade id."""
    return synthetic.reference_answers(course.ROOT, assignment)


#: A reference solution region.
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def without_comments(code: str) -> str:
    """``code`` (a solution region, indented as in its cell) without its comments: what a comment explains is not the
    answer's code."""
    lines = code.splitlines()
    dedented = textwrap.dedent(code)
    try:
        comments = [t.start for t in tokenize.generate_tokens(io.StringIO(dedented).readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code
    shift = len(lines[0]) - len(dedented.splitlines()[0]) if lines else 0
    for row, col in reversed(comments):
        lines[row - 1] = lines[row - 1][:col + shift]
    return "\n".join(lines)


def answer_code(source: str) -> str:
    """The reference answer in a solution cell's ``source``: its solution regions, comments left out."""
    return "\n".join(without_comments(region) for region in SOLUTION_REGION.findall(source))


def graded_cells(assignment: str) -> dict[str, float]:
    """Points of every graded test cell, by grade id."""
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    return {grade_id(c): float(c.metadata["nbgrader"]["points"]) for c in notebook.cells
            if c.metadata.get("nbgrader", {}).get("grade")}


def write_submission(course_dir: Path, student: str, assignment: str, answers: dict[str, str]) -> None:
    """Put the release, with ``answers`` (grade id -> code) in its solution cells, in submitted/STUDENT/."""
    synthetic.write_submission(course_dir, assignment, student, answers)


def scores(course_dir: Path, student: str, assignment: str) -> dict[str, float]:
    """Score of every graded cell of one autograded submission, by grade id, from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission_notebook(assignment, assignment, student)
        return {grade.name: float(grade.score) for grade in submission.grades}


def feedback_text(course_dir: Path, student: str, assignment: str) -> str:
    """The feedback page a learner gets, as plain text (tags and ANSI colours removed, entities decoded, every run of
    whitespace one space: messages are wrapped to the width of a dialog, see misconceptions.MESSAGE_WIDTH)."""
    page = (course_dir / "feedback" / student / assignment / f"{assignment}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", text).split())
