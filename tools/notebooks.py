"""Execute a notebook top to bottom in a fresh kernel (nbclient), the way the tests and the lesson benchmark do."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient

from autograder.course import tool_environment


def execute(path: Path, timeout: int = 120, allow_errors: bool = False) -> nbformat.NotebookNode:
    """Run every cell of ``path`` in a new python3 kernel started in the notebook's folder; raise on any error
    (unless ``allow_errors``: then errors are outputs, as in nbgrader).

    ``timeout`` bounds each cell, so a hung kernel fails the run instead of stalling it.

    Returns the executed notebook; the file on disk is not modified.
    """
    notebook = nbformat.read(path, as_version=4)
    env = tool_environment(MPLBACKEND="module://matplotlib_inline.backend_inline")
    # IPC sockets in a private folder, not TCP ports: kernels started at the same moment by parallel workers
    # cannot pick the same port. The path is absolute because the kernel runs in the notebook's folder.
    with tempfile.TemporaryDirectory(prefix="kernel-") as sockets:
        manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "ipc"))
        client = NotebookClient(notebook, km=manager, timeout=timeout, allow_errors=allow_errors,
                                resources={"metadata": {"path": str(Path(path).parent)}})
        try:
            client.execute(env=env)  # passed on to jupyter_client's start_kernel
        finally:  # nbclient shuts down only kernel managers it made itself
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)
    return notebook
