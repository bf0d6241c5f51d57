"""Shared fixtures: scratch copies of the course, one per assignment, so assignments can be graded in parallel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from autograder import course

# In CI the random cases are the same on every run (a red build is reproducible); elsewhere hypothesis explores.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


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
