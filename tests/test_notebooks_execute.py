"""Every lesson and every reference solution executes top to bottom in a fresh kernel without an error."""

from __future__ import annotations

import pytest

from autograder import course
from autograder.notebooks import execute

NOTEBOOKS = [*course.lessons(), *(course.source_notebook(a) for a in course.assignments())]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    execute(path)  # raises nbclient's CellExecutionError, naming the cell, on any error
