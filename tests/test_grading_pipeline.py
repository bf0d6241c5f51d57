"""The nbgrader pipeline, end to end, on a scratch copy of the course, for every assignment.

One `nbgrader autograde` run per assignment grades a whole class: the reference solution, the untouched release,
and every catalogued wrong answer. The reference must get full marks, the blank release 0 (without stopping the
batch), and each wrong answer exactly the scores its catalogue entry states, with its diagnosis in the feedback.
"""

from __future__ import annotations

import pytest

from autograder import course
from conftest import by_assignment
from submissions import catalogue, feedback_text, graded_cells, scores, solution_sources, write_submission

ASSIGNMENTS = course.assignments()


@pytest.fixture(scope="session")
def graded_class(released_course):
    """graded_class(assignment) -> course directory where the whole class has been autograded, with feedback."""
    done = {}

    def grade(assignment: str):
        if assignment not in done:
            root = released_course(assignment)
            reference = solution_sources(assignment)
            write_submission(root, "reference", assignment, reference)
            write_submission(root, "blank", assignment, {})
            for number, wrong in enumerate(catalogue(assignment)):
                write_submission(root, f"wrong{number:02d}", assignment, {**reference, **wrong.replace})
            course.nbgrader("autograde", assignment, "--force", "--log-level=WARN", course=root)
            course.nbgrader("generate_feedback", assignment, "--force", "--log-level=WARN", course=root)
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
