"""Hidden tests draw random cases from the grading seed; prove the reference right for any seed, not just the default.

For many seeds (hypothesis), in this process: the reference solution passes every hidden test cell. Only what changes
with the seed runs (:func:`tools.inprocess.run_in_process` with ``only_hidden``): the visible tests and the demo cells
draw nothing from it. Every catalogued wrong answer is graded at a drawn seed by tests/test_catalogue.py (one run an
answer proves its visible and its hidden cells), and at 20 seeds by ``make sweep``.
"""

from __future__ import annotations

import nbformat
import pytest
from conftest import NIGHTLY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submissions import graded_cells, solution_sources

from autograder import course
from autograder.seeding import SEED_VARIABLE
from tools.inprocess import is_hidden_test, run_in_process

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
#: The reference at four seeds an assignment in ``make test``, sixteen with ``make test-all`` (``make sweep``: 20).
SEED_COUNT = 16 if NIGHTLY else 4
SETTINGS = settings(max_examples=SEED_COUNT, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


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
