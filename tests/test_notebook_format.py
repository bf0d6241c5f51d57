"""Notebooks are stored clean (no outputs) and the nbgrader sources carry valid, complete grading metadata."""

from __future__ import annotations

import nbformat
import pytest

from autograder import course

ALL = [*course.lessons(), *(course.source_notebook(a) for a in course.assignments()),
       *(course.release_notebook(a) for a in course.assignments()), course.ROOT / "progress.ipynb"]
SOURCES = [course.source_notebook(a) for a in course.assignments()]


def _ids(paths):
    return [str(p.relative_to(course.ROOT)) for p in paths]


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_stored_without_outputs_and_valid(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    dirty = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"cells {dirty} have outputs: clear them before committing"


@pytest.mark.parametrize("path", SOURCES, ids=_ids(SOURCES))
def test_nbgrader_metadata(path):
    notebook = nbformat.read(path, as_version=4)
    graded = [c.metadata["nbgrader"] for c in notebook.cells if "nbgrader" in c.metadata]
    ids = [m["grade_id"] for m in graded]
    assert len(ids) == len(set(ids)), f"duplicate grade ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    tests = [m for m in graded if m.get("grade")]
    assert len({m["grade_id"].removesuffix("_hidden") for m in tests}) >= 3, "an exercise has at least 3 graded parts"
    for meta in tests:
        assert meta.get("points", 0) > 0 and meta["locked"], \
            f"{meta['grade_id']}: test cells are locked and score points"
    solutions = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
    for cell in solutions:
        assert "### BEGIN SOLUTION" in cell.source, f"{cell.metadata['nbgrader']['grade_id']} has no solution region"
    hidden = [c for c in notebook.cells if "### BEGIN HIDDEN TESTS" in c.source]
    assert hidden, "hidden tests on fresh random cases are required"
    for cell in hidden:
        assert "grading_seed()" in cell.source, "hidden tests draw their cases from the grading seed"


@pytest.mark.parametrize("path", course.lessons(), ids=_ids(course.lessons()))
def test_lesson_reads_within_the_budget(path):
    """A lesson is a chapter, not a book: prose at 200 words and visible code at 10 lines a minute."""
    minutes = course.reading_minutes(path)
    assert minutes <= course.READING_BUDGET_MINUTES, f"{path.name} reads in {minutes:.1f} min"


#: The longest visible code line a lesson's cell editor shows without scrolling sideways in the browser test's
#: JupyterLab (1400 px wide): a longer one makes the editor a scrollable region axe reports (scrollable-region-
#: focusable, serious), found 20 minutes into `make test`; this finds it at once.
LONGEST_VISIBLE_LINE = 122


@pytest.mark.parametrize("path", course.lessons(), ids=_ids(course.lessons()))
def test_lesson_code_lines_fit_the_editor(path):
    notebook = nbformat.read(path, as_version=4)
    long = [(i, len(line)) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            and not cell.metadata.get("jupyter", {}).get("source_hidden")
            for line in cell.source.splitlines() if len(line) > LONGEST_VISIBLE_LINE]
    assert long == [], f"{path.name}: visible code lines longer than {LONGEST_VISIBLE_LINE} (cell, length): {long}"
