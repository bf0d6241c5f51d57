"""Execute a notebook top to bottom in a fresh kernel (nbclient), the way the tests and the lesson benchmark do."""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.course import run_notebook


def execute(path: Path, timeout: int = 120, allow_errors: bool = False) -> nbformat.NotebookNode:
    """Run every cell of ``path`` in a new python3 kernel started in the notebook's folder; raise on any error
    (unless ``allow_errors``: then errors are outputs, as in nbgrader). ``timeout`` bounds each cell, so a hung
    kernel fails the run instead of stalling it. Returns the executed notebook; the file on disk is not modified."""
    notebook = nbformat.read(path, as_version=4)
    return run_notebook(notebook, Path(path).parent, timeout=timeout, allow_errors=allow_errors,
                        MPLBACKEND="module://matplotlib_inline.backend_inline")
