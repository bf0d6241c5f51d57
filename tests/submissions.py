"""Build learner submissions from the release, and read back what nbgrader made of them.

A submission is the student release with some solution cells filled in: from the reference solution, from an entry
of the wrong-answer catalogue (``tests/wrong_answers/NN-slug.yaml``), or left blank. Building them is
:mod:`tools.synthetic`'s job (the demo and the benchmark build theirs the same way); this module gives
the tests typed catalogue entries and reads the results back.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import course
from tools import synthetic
from tools.synthetic import grade_id


@dataclass(frozen=True)
class WrongAnswer:
    name: str
    replace: dict[str, str]
    scores: dict[str, float]
    feedback: list[str] = field(default_factory=list)


def catalogue(assignment: str) -> list[WrongAnswer]:
    return [WrongAnswer(**entry) for entry in synthetic.catalogue(assignment)]


def solution_sources(assignment: str) -> dict[str, str]:
    """The reference code of every solution cell, by grade id."""
    return synthetic.reference_answers(course.ROOT, assignment)


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
    """The feedback page a learner gets, as plain text (tags and ANSI colours removed, entities decoded)."""
    page = (course_dir / "feedback" / student / assignment / f"{assignment}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class CheckCrashed(AssertionError):
    """A test cell raised something other than the checks' GradingFailure: a bug in a check, not a rejection."""


def is_hidden_test(cell) -> bool:
    """A graded test cell whose checks draw their cases from the grading seed (nbgrader's hidden tests)."""
    return bool(cell.metadata.get("nbgrader", {}).get("grade")) and "### BEGIN HIDDEN TESTS" in cell.source


def run_in_process(assignment: str, answers: dict[str, str], *, only_hidden: bool = False) -> dict[str, bool]:
    """Run the source notebook in this process with ``answers`` in its solution cells; pass/fail per test cell.

    A quick stand-in for nbgrader (no kernel, no gradebook) so the hidden tests can be tried on many seeds. A test
    cell fails only when a check raised its GradingFailure; any other exception out of a test cell (a CourseBug, a
    TypeError inside a check...) raises :class:`CheckCrashed`, since a crashing check is a bug, not a verdict.

    ``only_hidden``: run what the hidden tests depend on and nothing else, the part of a notebook that changes with
    the seed: the nbgrader cells (imports, given code, solutions) and the hidden test cells; the visible tests and
    the learner's scratch and demo cells (no nbgrader metadata) draw nothing from the seed and are proven once, by
    the graded pipeline at the default seed. Results are then for the hidden test cells only.
    """
    import contextlib
    import io

    from autograder.checking import GradingFailure

    namespace: dict = {"__name__": "__main__"}
    results: dict[str, bool] = {}
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            if only_hidden and (not meta or (meta.get("grade") and not is_hidden_test(cell))):
                continue
            source = answers.get(grade_id(cell), cell.source) if meta.get("solution") else cell.source
            try:
                exec(compile(source, f"<{grade_id(cell) or 'cell'}>", "exec"), namespace)
                passed = True
            except GradingFailure:
                passed = False
            except Exception as error:  # a wrong answer may break its own cell, exactly as in a kernel
                if meta.get("grade"):
                    raise CheckCrashed(f"{assignment}: test cell {grade_id(cell)} crashed with "
                                       f"{type(error).__name__}: {error}") from error
                passed = False
            if meta.get("grade"):
                results[grade_id(cell)] = passed
    return results
