"""Execute a notebook top to bottom in a fresh kernel (nbclient), the way the tests and the lesson benchmark do."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from .course import tool_environment


def execute(path: Path, timeout: int = 300) -> nbformat.NotebookNode:
    """Run every cell of ``path`` in a new python3 kernel started in the notebook's folder; raise on any error.

    Returns the executed notebook; the file on disk is not modified.
    """
    notebook = nbformat.read(path, as_version=4)
    env = tool_environment(MPLBACKEND="module://matplotlib_inline.backend_inline")
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(Path(path).parent)}})
    client.execute(env=env)  # passed on to jupyter_client's start_kernel
    return notebook
