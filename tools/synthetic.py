"""Synthetic classes: submissions made from the reference solution, the release, the wrong-answer catalogues
(``tests/wrong_answers/NN-slug.yaml``) and the hostile cases (``tests/hostile/NN-slug.yaml``).

Used by ``make grade-demo``, ``make bench`` and the tests (through tests/submissions.py); it reads the repository's
tests/, so it lives beside them in ``tools/``, outside the installed package. A hostile case is a dict
(see tests/hostile/01-chain-rule.yaml): ``base`` answers (reference or blank), ``replace`` (solution cells by grade id),
and an optional ``transform`` of the whole file (:data:`TRANSFORMS`).
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
from pathlib import Path

import nbformat

from autograder import course as course_module

REPOSITORY = Path(__file__).resolve().parent.parent
CATALOGUES = REPOSITORY / "tests" / "wrong_answers"
HOSTILE = REPOSITORY / "tests" / "hostile"


def _yaml(path: Path) -> list[dict]:
    """The entries of a catalogue file, parsed once per version of the file (a fresh copy for every caller)."""
    if not path.exists():
        return []
    stat = path.stat()
    return copy.deepcopy(_parsed(path, stat.st_mtime_ns, stat.st_size))


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> list[dict]:
    import yaml  # a test dependency ('.[test]'), installed by every make target

    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []


def catalogue(assignment: str) -> list[dict]:
    return _yaml(CATALOGUES / f"{assignment}.yaml")


def hostile_cases(assignment: str) -> list[dict]:
    return _yaml(HOSTILE / f"{assignment}.yaml")


def grade_id(cell) -> str | None:
    """nbgrader's id of a cell (None for a cell nbgrader does not track)."""
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def reference_answers(course: Path, assignment: str) -> dict[str, str]:
    """The reference code of every solution cell, by grade id (from the course's source notebook)."""
    notebook = nbformat.read(course_module.source_notebook(assignment, course), as_version=4)
    return {grade_id(c): c.source for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _grade_cells(notebook) -> list[int]:
    return [i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata["nbgrader"].get("solution")]


def _duplicate_test_cell(notebook, case):
    index = _grade_cells(notebook)[0]
    notebook.cells.insert(index + 1, copy.deepcopy(notebook.cells[index]))


def _delete_test_cell(notebook, case):
    del notebook.cells[_grade_cells(notebook)[0]]


def _edit_test_cells(notebook, case):
    for index in _grade_cells(notebook):
        notebook.cells[index].source = "pass  # all good"


def _edit_points(notebook, case):
    for index in _grade_cells(notebook):
        notebook.cells[index].metadata["nbgrader"]["points"] = 100


def _kernelspec(notebook, case):
    notebook.metadata["kernelspec"] = {"name": "evil", "display_name": "Not Python", "language": "python"}


def _prepend_cell(notebook, case):
    notebook.cells.insert(0, nbformat.v4.new_code_cell(case["code"]))


#: name -> function(notebook, case) changing a notebook in place, or None when the file is written specially
TRANSFORMS = {"duplicate_test_cell": _duplicate_test_cell, "delete_test_cell": _delete_test_cell,
              "edit_test_cells": _edit_test_cells, "edit_points": _edit_points, "kernelspec": _kernelspec,
              "prepend_cell": _prepend_cell, "invalid_json": None, "not_a_notebook": None, "untouched": None,
              "missing": None}


def write_submission(course: Path, assignment: str, student: str, answers: dict[str, str],
                     case: dict | None = None, places: dict[str, str] | None = None) -> Path:
    """``submitted/STUDENT/ASSIGNMENT/ASSIGNMENT.ipynb``: the release with ``answers`` in its solution cells, then the
    hostile ``case`` (its ``replace`` and ``transform``; in its code ``{COURSE}`` becomes the course path, ``{HOME}``
    the grader's home directory, ``{PACKAGE}`` the course package's folder, and any other ``places``)."""
    case = case or {}
    release = course_module.release_notebook(assignment, course)
    folder = course / "submitted" / student / assignment
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    target = folder / f"{assignment}.ipynb"
    transform = case.get("transform")
    if transform == "invalid_json":
        target.write_text('{"cells": [ this is not JSON, the laptop crashed while saving')
        return target
    if transform == "not_a_notebook":
        target.write_text(json.dumps({"title": "my homework", "answer": 42}))
        return target
    if transform == "untouched":
        shutil.copy2(release, target)
        return target
    if transform == "missing":
        (folder / "notes.txt").write_text("I could not get the notebook to save, sorry\n")
        return folder
    notebook = nbformat.read(release, as_version=4)
    places = {"{COURSE}": str(course), "{HOME}": str(Path.home()),
              "{PACKAGE}": str(Path(course_module.__file__).parent), **(places or {})}
    replace = {}
    for key, value in (case.get("replace") or {}).items():
        for name, path in places.items():
            value = value.replace(name, path)
        replace[key] = value
    for cell in notebook.cells:
        if grade_id(cell) in answers and cell.metadata["nbgrader"].get("solution"):
            cell.source = answers[grade_id(cell)]
        if grade_id(cell) in replace:
            cell.source = replace[grade_id(cell)]
    if transform:
        TRANSFORMS[transform](notebook, case)
    nbformat.write(notebook, target)
    return target


def case_answers(course: Path, assignment: str, case: dict) -> dict[str, str]:
    return reference_answers(course, assignment) if case.get("base") == "reference" else {}


def student_name(case: dict) -> str:
    return "hostile-" + "".join(c if c.isalnum() else "-" for c in case["name"].lower()).strip("-")
