"""The student release's one step beyond nbgrader's: Run All goes through an untouched exercise.

On an untouched release every learner function still raises ``NotImplementedError``, so the first "Try it" cell that
calls one stops Run All in JupyterLab, and none of the test cells below it runs: the learner never sees the messages
that say which part is not written yet. JupyterLab (and nbclient) keep going past a cell tagged
``raises-exception`` (the kernel is asked not to stop on its error), so the release tags every code cell a learner
writes, tries or is tested in: all code cells but the course's own locked set-up (imports, given code), which must
never fail. The error is still shown, and nbgrader still grades a failing test cell as failed.

:class:`RunAllThrough` is appended to ``GenerateAssignment.preprocessors`` in ``nbgrader_config.py``, so
``nbgrader generate_assignment`` and ``python -m autograder release`` both apply it; cell checksums do not cover tags.
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

TAG = "raises-exception"


def runs_through(cell) -> bool:
    """True for the code cells Run All must not stop at: everything but the course's locked set-up cells."""
    if cell.cell_type != "code":
        return False
    meta = cell.metadata.get("nbgrader", {})
    return not meta or meta.get("solution") or meta.get("grade") or not meta.get("locked")


class RunAllThrough(Preprocessor):
    """Tag each learner-facing code cell ``raises-exception`` (see the module docstring)."""

    enabled = Bool(True).tag(config=True)  # nbconvert registers preprocessors switched off unless they say otherwise

    def preprocess_cell(self, cell, resources, index):
        if runs_through(cell):
            tags = list(cell.metadata.get("tags", []))
            if TAG not in tags:
                cell.metadata["tags"] = [*tags, TAG]
        return cell, resources
