"""Shared fixtures: scratch copies of the course, one per assignment, so assignments can be graded in parallel."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder import course


@pytest.fixture(scope="session")
def released_course(tmp_path_factory: pytest.TempPathFactory):
    """released_course(assignment) -> a scratch course directory where that assignment has been released.

    Each assignment gets its own directory (and gradebook), made once per test session on first use.
    """
    made: dict[str, Path] = {}

    def release(assignment: str) -> Path:
        if assignment not in made:
            root = course.copy_course(tmp_path_factory.mktemp(assignment) / "course")
            course.generate_release(root, [assignment])
            made[assignment] = root
        return made[assignment]

    return release


def by_assignment(assignment: str, *values, id: str | None = None):
    """A pytest param grouped with the other tests of its assignment on one xdist worker (shares its fixtures)."""
    return pytest.param(assignment, *values, id=id or assignment, marks=pytest.mark.xdist_group(assignment))
