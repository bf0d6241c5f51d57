"""The grading pipeline, end to end, on a scratch copy of the course, for every assignment.

One run of ``python -m autograder grade`` per assignment grades a whole class: the reference solution, the untouched
release, and every catalogued wrong answer. It is nbgrader's own pipeline (sanitizing, Autograde's grading rules, the
gradebook, feedback), with each notebook executed in a process forked from a server that has imported torch: five
times cheaper than a kernel per notebook, which is what keeps this suite short. The reference must get full marks,
the blank release 0 (without stopping the batch), and each wrong answer exactly the scores its catalogue entry states,
with its diagnosis in the feedback. Plain ``nbgrader autograde``, with a Jupyter kernel per notebook, must give every
reference solution full marks, and no cell of it may raise in that kernel (tests/test_grade_command.py compares the
two graders on wrong answers and a blank release; tests/test_exchange_flow.py grades a class with plain nbgrader).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import by_assignment
from submissions import catalogue, feedback_text, graded_cells, scores, solution_sources, write_submission

from autograder import course

ASSIGNMENTS = course.assignments()


def write_class(root, assignment: str) -> None:
    reference = solution_sources(assignment)
    write_submission(root, "reference", assignment, reference)
    write_submission(root, "blank", assignment, {})
    for number, wrong in enumerate(catalogue(assignment)):
        write_submission(root, f"wrong{number:02d}", assignment, {**reference, **wrong.replace})


@pytest.fixture(scope="session")
def graded_class(released_course):
    """graded_class(assignment) -> course directory where the whole class has been graded, with feedback."""
    done = {}

    def grade(assignment: str):
        if assignment not in done:
            root = released_course(assignment)
            write_class(root, assignment)
            command = [sys.executable, "-m", "autograder", "grade", assignment, "--jobs", "2", "--quiet",
                       "--course", str(root)]
            run = subprocess.run(command, cwd=root, env=course.tool_environment(), capture_output=True, text=True)
            assert run.returncode == 0, f"grading {assignment} failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
            done[assignment] = root
        return done[assignment]

    return grade


@pytest.fixture(scope="session")
def plain_nbgrader_class(released_course, tmp_path_factory):
    """plain_nbgrader_class(assignment) -> a copy of the released course where `nbgrader autograde` graded the
    reference solution in a fresh Jupyter kernel. (Plain nbgrader grading a blank release and wrong answers is
    tested by tests/test_exchange_flow.py and tests/test_grade_command.py.)"""
    done = {}

    def grade(assignment: str):
        if assignment not in done:
            root = tmp_path_factory.mktemp(f"plain-{assignment}") / "course"
            shutil.copytree(released_course(assignment), root, ignore=shutil.ignore_patterns(
                "submitted", "autograded", "feedback", "grading"))
            write_submission(root, "reference", assignment, solution_sources(assignment))
            course.nbgrader("autograde", assignment, "--force", "--log-level=WARN", course=root)
            done[assignment] = root
        return done[assignment]

    return grade


@pytest.mark.parametrize("assignment", [by_assignment(a) for a in ASSIGNMENTS])
def test_reference_solution_gets_full_marks(graded_class, assignment):
    assert scores(graded_class(assignment), "reference", assignment) == graded_cells(assignment)


@pytest.mark.parametrize("assignment", [by_assignment(a) for a in ASSIGNMENTS])
def test_blank_release_gets_zero_and_the_batch_goes_on(graded_class, assignment):
    root = graded_class(assignment)
    assert scores(root, "blank", assignment) == {cell: 0.0 for cell in graded_cells(assignment)}
    assert "NotImplementedError" in feedback_text(root, "blank", assignment)


@pytest.mark.parametrize("assignment", [by_assignment(a) for a in ASSIGNMENTS])
def test_plain_nbgrader_gives_the_reference_full_marks(plain_nbgrader_class, assignment):
    root = plain_nbgrader_class(assignment)
    graded = nbformat.read(root / "autograded" / "reference" / assignment / f"{assignment}.ipynb", as_version=4)
    errors = [(number, output.ename, output.evalue) for number, cell in enumerate(graded.cells)
              if cell.cell_type == "code" for output in cell.outputs if output.output_type == "error"]
    assert not errors, f"the reference solution raises in a kernel (cell, error, message): {errors}"
    assert scores(root, "reference", assignment) == graded_cells(assignment)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_catalogue_is_large_enough(assignment):
    assert len(catalogue(assignment)) >= 5, f"{assignment} needs at least 5 catalogued wrong answers"


@pytest.mark.parametrize("assignment, number, wrong", [
    by_assignment(a, n, w, id=f"{a}:{w.name}") for a in ASSIGNMENTS for n, w in enumerate(catalogue(a))])
def test_wrong_answer_loses_exactly_its_points(graded_class, assignment, number, wrong):
    root, student = graded_class(assignment), f"wrong{number:02d}"
    unknown = set(wrong.scores) - set(graded_cells(assignment))
    assert not unknown, f"catalogue entry {wrong.name!r} names unknown test cells {unknown}"
    expected = {**graded_cells(assignment), **{cell: float(score) for cell, score in wrong.scores.items()}}
    assert scores(root, student, assignment) == expected, wrong.name
    text = feedback_text(root, student, assignment)
    for phrase in wrong.feedback:
        assert phrase in text, f"feedback for {wrong.name!r} lacks the diagnosis {phrase!r}"
