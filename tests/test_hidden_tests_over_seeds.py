"""Hidden tests draw random cases from the grading seed; prove they are right for any seed, not just the default.

For many seeds (hypothesis), in this process: the reference solution passes every hidden test cell, and every
catalogued wrong answer fails exactly the hidden cells its catalogue entry says it loses. Only what changes with the
seed runs (:func:`tools.inprocess.run_in_process` with ``only_hidden``): the visible tests and the demo cells draw
nothing from it, and tests/test_grading_pipeline.py proves them for every answer at the default seed.
"""

from __future__ import annotations

import os

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submissions import catalogue, graded_cells, solution_sources

from autograder import course
from autograder.seeding import SEED_VARIABLE
from tools.inprocess import is_hidden_test, run_in_process

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
# One seed per wrong answer beside the pipeline's default seed: there are over 600 wrong answers, the capstone's runs
# train two models each, and the suite must stay under 10 minutes on two cores. The reference gets eight.
SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WRONG_SETTINGS = settings(SETTINGS, max_examples=1)
#: `make test-all` (COURSE_TEST_ALL=1): every hidden cell for every wrong answer. `make test`: the hidden cells a wrong
#: answer loses (all of them for a correct one), the part that can pass at one seed and fail at another; the cells it
#: keeps are the reference's own at that seed, proven by test_reference_passes_for_any_seed (and `make sweep`).
EVERY_CELL = os.environ.get("COURSE_TEST_ALL") == "1"


def hidden_cells(assignment: str) -> dict[str, float]:
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
            for c in notebook.cells if is_hidden_test(c)}


@pytest.mark.parametrize("assignment", course.assignments())
def test_every_visible_test_has_its_hidden_twin(assignment):
    """test_X (fixed cases, the learner sees it) and test_X_hidden (cases from the grading seed) for every part."""
    hidden = hidden_cells(assignment)
    visible = [cell for cell in graded_cells(assignment) if cell not in hidden]
    assert sorted(f"{cell}_hidden" for cell in visible) == sorted(hidden), assignment


@pytest.mark.parametrize("assignment", course.assignments())
@SETTINGS
@given(seed=SEEDS)
def test_reference_passes_for_any_seed(monkeypatch, assignment, seed):
    monkeypatch.setenv(SEED_VARIABLE, str(seed))
    results = run_in_process(assignment, solution_sources(assignment), only_hidden=True)
    assert set(results) == set(hidden_cells(assignment))
    assert all(results.values()), f"seed {seed}: reference fails {[c for c, ok in results.items() if not ok]}"


@pytest.mark.parametrize("assignment, wrong", [
    pytest.param(a, w, id=f"{a}:{w.name}") for a in course.assignments() for w in catalogue(a)])
@WRONG_SETTINGS
@given(seed=SEEDS)
def test_wrong_answer_fails_its_cells_for_any_seed(monkeypatch, assignment, wrong, seed):
    monkeypatch.setenv(SEED_VARIABLE, str(seed))
    points = hidden_cells(assignment)
    lost = wrong.lost(points)
    expected = {cell: cell not in lost for cell in points}
    if lost and not EVERY_CELL:
        expected = {cell: False for cell in lost}
    results = run_in_process(assignment, {**solution_sources(assignment), **wrong.replace}, only_hidden=True,
                             tests=set(expected))
    assert results == expected, f"seed {seed}: {wrong.name}"
