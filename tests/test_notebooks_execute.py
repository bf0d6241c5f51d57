"""Every lesson executes top to bottom in a fresh kernel without an error.

(Every reference solution is executed in a fresh kernel by plain ``nbgrader autograde`` in
tests/test_grading_pipeline.py, which also fails on any error output.)"""

from __future__ import annotations

import pytest

from autograder import course
from autograder.notebooks import execute

NOTEBOOKS = course.lessons()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    execute(path)  # raises nbclient's CellExecutionError, naming the cell, on any error
