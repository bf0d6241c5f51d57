"""Hidden tests draw random cases from the grading seed; prove they are right for any seed, not just the default.

For many seeds (hypothesis), in this process: the reference solution passes every test cell, and every catalogued
wrong answer fails exactly the cells its catalogue entry says it loses.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submissions import catalogue, graded_cells, run_in_process, solution_sources

from autograder import course
from autograder.seeding import SEED_VARIABLE

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
# Fewer seeds per wrong answer than for the reference: there are over a hundred wrong answers, each run executes the
# whole notebook, tests/test_grading_pipeline.py already grades each one on the default seed, and the suite must stay
# well under 15 minutes on two cores.
SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WRONG_SETTINGS = settings(SETTINGS, max_examples=2)


@pytest.mark.parametrize("assignment", course.assignments())
@SETTINGS
@given(seed=SEEDS)
def test_reference_passes_for_any_seed(monkeypatch, assignment, seed):
    monkeypatch.setenv(SEED_VARIABLE, str(seed))
    results = run_in_process(assignment, solution_sources(assignment))
    assert all(results.values()), f"seed {seed}: reference fails {[c for c, ok in results.items() if not ok]}"


@pytest.mark.parametrize("assignment, wrong", [
    pytest.param(a, w, id=f"{a}:{w.name}") for a in course.assignments() for w in catalogue(a)])
@WRONG_SETTINGS
@given(seed=SEEDS)
def test_wrong_answer_fails_its_cells_for_any_seed(monkeypatch, assignment, wrong, seed):
    monkeypatch.setenv(SEED_VARIABLE, str(seed))
    results = run_in_process(assignment, {**solution_sources(assignment), **wrong.replace})
    points = graded_cells(assignment)
    expected = {cell: wrong.scores.get(cell, points[cell]) == points[cell] for cell in points}
    assert results == expected, f"seed {seed}: {wrong.name}"
