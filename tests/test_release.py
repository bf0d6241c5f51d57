"""exercises/ is exactly what `nbgrader generate_assignment` makes of solutions/ (run `make release` to refresh)."""

from __future__ import annotations

import json

import pytest
from conftest import by_assignment

from autograder import course


def test_every_assignment_is_released():
    released = sorted(p.parent.name for p in course.EXERCISES.glob("*/*.ipynb"))
    assert released == course.assignments(), "exercises/ and solutions/ hold different assignments: run `make release`"


@pytest.mark.parametrize("assignment", [by_assignment(a) for a in course.assignments()])
def test_release_matches_solutions(released_course, assignment):
    generated = json.loads(course.release_notebook(assignment, released_course(assignment)).read_text())
    committed = json.loads(course.release_notebook(assignment).read_text())
    assert committed == generated, f"exercises/{assignment} is stale or edited by hand: run `make release`"


@pytest.mark.parametrize("assignment", course.assignments())
def test_release_hides_solutions_and_hidden_tests(assignment):
    text = course.release_notebook(assignment).read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "seed=grading_seed()"):
        assert marker not in text, f"{marker!r} leaked into the student release of {assignment}"
    assert "raise NotImplementedError()" in text
