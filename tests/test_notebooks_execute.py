"""Every lesson executes top to bottom in a fresh kernel without an error, where the browser tests cannot show it.

tests/test_browser.py runs every lesson in JupyterLab (Run All in Chromium, no error shown, none saved), which proves
the same and more; executing each lesson a second time with nbclient cost over a minute of the suite. So this test
runs the lessons with nbclient only where Chromium is missing (the browser tests then skip, or fail in CI). Every
reference solution is executed in a fresh kernel by plain ``nbgrader autograde`` in tests/test_grading_pipeline.py,
which also fails on any error output. ``make bench-lessons`` executes them all with nbclient and prints the times.
"""

from __future__ import annotations

import pytest
from test_browser import CHROMIUM

from autograder import course
from tools.notebooks import execute

NOTEBOOKS = course.lessons()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    if CHROMIUM.exists():
        pytest.skip("tests/test_browser.py runs this lesson in JupyterLab")
    execute(path)  # raises nbclient's CellExecutionError, naming the cell, on any error
