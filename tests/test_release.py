"""exercises/ is exactly what `nbgrader generate_assignment` makes of solutions/ (run `make release` to refresh)."""

from __future__ import annotations

import json

import pytest

from autograder import course


def test_every_assignment_is_released():
    released = sorted(p.parent.name for p in course.EXERCISES.glob("*/*.ipynb"))
    assert released == course.assignments(), "exercises/ and solutions/ hold different assignments: run `make release`"


@pytest.mark.xdist_group("pipeline")  # the release tests/test_grading_pipeline.py grades
@pytest.mark.parametrize("assignment", course.assignments())
def test_release_matches_solutions(released_course, assignment):
    generated = json.loads(course.release_notebook(assignment, released_course).read_text())
    committed = json.loads(course.release_notebook(assignment).read_text())
    assert committed == generated, f"exercises/{assignment} is stale or edited by hand: run `make release`"


@pytest.mark.parametrize("assignment", course.assignments())
def test_release_hides_solutions_and_hidden_tests(assignment):
    text = course.release_notebook(assignment).read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "grading_seed=grading_seed()"):
        assert marker not in text, f"{marker!r} leaked into the student release of {assignment}"
    assert "raise NotImplementedError()" in text


@pytest.mark.parametrize("assignment", course.assignments())
def test_run_all_goes_through_an_untouched_release(assignment):
    """Every code cell a learner writes, tries or is tested in carries `raises-exception` (JupyterLab's Run All and
    nbclient go on past it); the course's locked set-up cells do not, since they must never fail."""
    from autograder.release import TAG, runs_through

    notebook = json.loads(course.release_notebook(assignment).read_text())
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    untagged = [c["source"][:1] for c in cells if runs_through(_node(c)) and TAG not in c["metadata"].get("tags", [])]
    assert not untagged, f"{assignment}: learner cells without {TAG!r} (run `make release`): {untagged}"
    setup = [c for c in cells if not runs_through(_node(c))]
    assert setup and all(TAG not in c["metadata"].get("tags", []) for c in setup)


@pytest.mark.parametrize("assignment", course.assignments())
def test_every_part_of_an_untouched_release_reads_not_written(assignment):
    """Check my work on the untouched release says "not written" for every part, never "failed": a check that adds
    a diagnosis to a learner's error keeps an unwritten part unwritten."""
    import nbformat

    from tools.inprocess import run_cells

    release = nbformat.read(course.release_notebook(assignment), as_version=4)
    blank = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in release.cells
             if cell.metadata.get("nbgrader", {}).get("solution")}
    results = run_cells(assignment, blank, scratch=False)
    assert results and not any(r.passed for r in results.values())
    read_as_failed = {cell: r.message.splitlines()[0] for cell, r in results.items() if r.written}
    assert not read_as_failed, f"{assignment}: parts of the untouched release read as wrong answers: {read_as_failed}"


def _node(cell: dict):
    import nbformat

    return nbformat.from_dict(cell)
