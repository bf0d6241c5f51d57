"""Run a source notebook in this process with some answers in its solution cells: a quick stand-in for nbgrader (no
kernel, no gradebook), used by the seed sweep (``make sweep``), ``tools.sweep --quick`` while an exercise is being
written, tests/test_catalogue.py and tests/test_hidden_tests_over_seeds.py.

A test cell fails only when a check raised its GradingFailure; any other exception out of a test cell (a CourseBug,
a TypeError inside a check...) raises :class:`CheckCrashed`, since a crashing check is a bug, not a verdict.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import nbformat

from autograder import course
from tools.synthetic import grade_id


class CheckCrashed(AssertionError):
    """A test cell raised something other than the checks' GradingFailure: a bug in a check, not a rejection."""


@dataclass(frozen=True)
class CellResult:
    passed: bool
    message: str = ""  # the GradingFailure's text when it failed


def is_hidden_test(cell) -> bool:
    """A graded test cell whose checks draw their cases from the grading seed (nbgrader's hidden tests)."""
    return bool(cell.metadata.get("nbgrader", {}).get("grade")) and "### BEGIN HIDDEN TESTS" in cell.source


def run_cells(assignment: str, answers: dict[str, str], *, only_hidden: bool = False,
              tests: set[str] | None = None, scratch: bool = True) -> dict[str, CellResult]:
    """Every graded test cell's result, by grade id, with ``answers`` (grade id -> code) in the solution cells.

    ``only_hidden``: run what the hidden tests depend on and nothing else, the part of a notebook that changes with
    the seed: the nbgrader cells (imports, given code, solutions) and the hidden test cells; the visible tests and
    the learner's scratch and demo cells (no nbgrader metadata) draw nothing from the seed. ``tests``: of the graded
    test cells, run these only (the others are left out of the result). ``scratch=False``: leave out the learner's
    scratch and demo cells (no nbgrader metadata; nothing graded depends on them).
    """
    from autograder.checking import GradingFailure

    namespace: dict = {"__name__": "__main__"}
    results: dict[str, CellResult] = {}
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            if only_hidden and (not meta or (meta.get("grade") and not is_hidden_test(cell))):
                continue
            if tests is not None and meta.get("grade") and grade_id(cell) not in tests:
                continue
            if not scratch and not meta:
                continue
            source = answers.get(grade_id(cell), cell.source) if meta.get("solution") else cell.source
            result = CellResult(True)
            try:
                exec(compile(source, f"<{grade_id(cell) or 'cell'}>", "exec"), namespace)
            except GradingFailure as failure:
                result = CellResult(False, str(failure))
            except Exception as error:  # a wrong answer may break its own cell, exactly as in a kernel
                if meta.get("grade"):
                    raise CheckCrashed(f"{assignment}: test cell {grade_id(cell)} crashed with "
                                       f"{type(error).__name__}: {error}") from error
                result = CellResult(False, f"{type(error).__name__}: {error}")
            if meta.get("grade"):
                results[grade_id(cell)] = result
    return results


def run_in_process(assignment: str, answers: dict[str, str], *, only_hidden: bool = False,
                   tests: set[str] | None = None) -> dict[str, bool]:
    """Pass (True) or fail per graded test cell (see :func:`run_cells`)."""
    results = run_cells(assignment, answers, only_hidden=only_hidden, tests=tests)
    return {cell: result.passed for cell, result in results.items()}


def cells_below_first_answer(assignment: str, answers: dict[str, str]) -> set[str]:
    """The graded test cells below the first solution cell ``answers`` changes: every cell above it runs exactly the
    reference's code in the reference's order from the same seeds, so it gives the reference's result."""
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    changed, after = False, set()
    for cell in notebook.cells:  # the source notebook: each solution cell holds the reference's code
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and answers.get(grade_id(cell), cell.source) != cell.source:
            changed = True
        elif changed and meta.get("grade"):
            after.add(grade_id(cell))
    return after
