"""nbgrader's Execute preprocessor, replaced by one that returns the outputs phase 1 already computed.

(And its sanitize step, replaced by one that returns the notebook phase 1 sanitized with nbgrader's own sanitize
preprocessors, from the same file: :class:`ReplaySanitize`.)

nbgrader's Autograde converter sanitizes a submission, then runs its autograde preprocessors; the first of them,
Execute, starts a kernel. :class:`ReplayExecute` takes its place: it finds the phase-1 outputs of this very notebook
by :func:`cell_key` (a hash of the sanitized code cells and of which of them are the instructor's) and writes them into
the cells, exactly where nbclient would. On a miss (the notebook changed in between) it executes the notebook itself
through :attr:`ReplayExecute.fallback`. Everything after it (IgnorePattern, LimitOutput, SaveAutoGrades...) is
nbgrader's own.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import ClassVar

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor


def is_instructor_cell(cell) -> bool:
    """A locked cell that nbgrader knows (after sanitizing): its source is the instructor's."""
    return bool(cell.cell_type == "code" and utils.is_locked(cell)
                and cell.metadata.get("nbgrader", {}).get("grade_id"))


def code_cells(notebook) -> list[dict]:
    """What the kernel runs: ``{"index", "source", "instructor"}`` for every code cell, in order."""
    return [{"index": i, "source": cell.source, "instructor": is_instructor_cell(cell)}
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]


def cell_key(notebook) -> str:
    """Identifies a sanitized notebook's code for execution purposes."""
    digest = hashlib.sha256()
    for cell in code_cells(notebook):
        digest.update(json.dumps([cell["index"], cell["source"], cell["instructor"]]).encode())
    return digest.hexdigest()


def apply_outputs(notebook, cells: dict[int, dict]) -> None:
    """Put executed outputs (by cell index) into ``notebook``'s code cells, as nbclient would."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        result = cells.get(index, {"execution_count": None, "outputs": []})
        cell.execution_count = result.get("execution_count")
        outputs = []
        for output in result.get("outputs", []):
            output = dict(output)
            if output["output_type"] == "execute_result":
                output.setdefault("execution_count", cell.execution_count)
            outputs.append(nbformat.from_dict(output))
        cell.outputs = outputs


class ReplaySanitize(NbGraderPreprocessor):
    """nbgrader's sanitize step for a notebook phase 1 already sanitized (``sanitized[(student, notebook)]``);
    any other notebook goes through nbgrader's sanitize preprocessors (``fallback``) as usual."""

    sanitized: ClassVar[dict[tuple[str, str], object]] = {}
    fallback: ClassVar[list] = []

    def preprocess(self, nb, resources):
        key = (resources["nbgrader"]["student"], resources["nbgrader"]["notebook"])
        done = type(self).sanitized.get(key)
        if done is not None:
            return copy.deepcopy(done), resources
        for preprocessor in type(self).fallback:
            nb, resources = preprocessor(parent=self.parent, config=self.config)(nb, resources)
        return nb, resources


class ReplayExecute(Execute):
    """Execute, answered from phase 1: ``outputs`` maps :func:`cell_key` to per-cell results."""

    outputs: ClassVar[dict[str, dict[int, dict]]] = {}
    #: fallback(notebook, resources) -> per-cell results, used when phase 1 has nothing for this notebook
    fallback: ClassVar[Callable | None] = None
    hits: ClassVar[int] = 0
    misses: ClassVar[int] = 0

    def preprocess(self, nb, resources, km=None):
        key = cell_key(nb)
        cells = type(self).outputs.get(key)
        if cells is None:
            if type(self).fallback is None:
                raise RuntimeError("no phase-1 outputs for this notebook and no fallback executor")
            type(self).misses += 1
            cells = type(self).fallback(nb, resources)
        else:
            type(self).hits += 1
        apply_outputs(nb, cells)
        return nb, resources
