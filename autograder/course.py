"""The course on disk: where lessons and assignments are, and how nbgrader is run on a course directory.

The repository root is an nbgrader course (see ``nbgrader_config.py``): ``solutions/NN-slug/NN-slug.ipynb`` are the
sources, ``exercises/NN-slug/NN-slug.ipynb`` the student release generated from them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: nbgrader's course id (``nbgrader_config.py``): the folder a hub's Assignment List fetches into, and the name of the
#: learner's own data folder (progress, check my work).
COURSE_ID = "autograd-course"
LESSONS = ROOT / "lessons"
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"

def lessons(root: Path = ROOT) -> list[Path]:
    """Every lesson notebook, in course order."""
    return sorted((root / "lessons").glob("[0-9][0-9]-*.ipynb"))


#: Reading speeds behind :func:`reading_minutes`: prose in words per minute, code in lines per minute.
PROSE_WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 10
#: The longest a lesson may take to read.
READING_BUDGET_MINUTES = 35


def reading_minutes(path: Path) -> float:
    """Minutes to read a notebook: its prose words at 200 a minute plus its visible, non-blank code lines at 10 a
    minute (read, run and look at the output). Code cells whose input is collapsed (``jupyter.source_hidden``, the
    verification cells) are not read."""
    import json
    import re

    words = lines = 0
    for cell in json.loads(Path(path).read_text())["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            words += len(re.findall(r"\S+", source))
        elif cell["cell_type"] == "code" and not cell["metadata"].get("jupyter", {}).get("source_hidden"):
            lines += sum(1 for line in source.splitlines() if line.strip())
    return words / PROSE_WORDS_PER_MINUTE + lines / CODE_LINES_PER_MINUTE


def assignments(root: Path = ROOT) -> list[str]:
    """Every assignment id (``NN-slug``) that has a source notebook (or, where the sources are kept from the reader,
    a release), in course order."""
    found = sorted(p.parent.name for p in (root / "solutions").glob("[0-9][0-9]-*/[0-9][0-9]-*.ipynb"))
    # A hub's learners have the release only (docs/instructors.md, "What learners see"): its exercises are the same.
    return found or sorted(p.parent.name for p in (root / "exercises").glob("[0-9][0-9]-*/[0-9][0-9]-*.ipynb"))


def source_notebook(assignment: str, root: Path = ROOT) -> Path:
    return root / "solutions" / assignment / f"{assignment}.ipynb"


def release_notebook(assignment: str, root: Path = ROOT) -> Path:
    return root / "exercises" / assignment / f"{assignment}.ipynb"


@dataclass(frozen=True)
class TestCell:
    """One graded test cell of an exercise's source: its part, its points and its code (hidden tests included)."""

    grade_id: str
    part: str
    points: float
    source: str

    @property
    def hidden(self) -> bool:
        return "### BEGIN HIDDEN TESTS" in self.source


def test_cells(assignment: str, root: Path = ROOT, *, release: bool = False) -> list[TestCell]:
    """The graded test cells of ``assignment``'s nbgrader source (or, with ``release``, of the student release,
    which has no hidden tests), in order, each with the part it grades (the ``part_*`` cell above it: ``part_b2`` is
    Part B2)."""
    import nbformat

    path = release_notebook(assignment, root) if release else source_notebook(assignment, root)
    notebook = nbformat.read(path, as_version=4)
    cells, part = [], "?"
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        if cell.cell_type == "markdown" and re.fullmatch(r"part_\w+", grade_id):
            part = grade_id.removeprefix("part_").upper()
        elif meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            cells.append(TestCell(grade_id, part, float(meta.get("points", 0)), cell.source))
    return cells


def exercise_tests(assignment: str, root: Path = ROOT) -> tuple[list[TestCell], bool]:
    """The test cells a learner's own check runs, and whether the hidden tests are among them: the nbgrader source's
    where the learner can read it (self-study, Binder), else the release's visible tests (a hub keeps the sources,
    with the reference answers, from learners: docs/instructors.md)."""
    try:
        return test_cells(assignment, root), True
    except (FileNotFoundError, PermissionError):
        visible = [cell for cell in test_cells(assignment, root, release=True)
                   if any(line.strip() and not line.lstrip().startswith("#") for line in cell.source.splitlines())]
        return visible, False  # a hidden-tests cell of the release is comments only: nothing to run, no points


def tool_environment(**extra: str) -> dict[str, str]:
    """The environment for nbgrader and kernels: this interpreter's bin first (nbgrader runs `alembic` from PATH)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("MPLBACKEND", "agg")
    # One math thread per kernel: graders and tests run several kernels at once on few cores, and
    # oversubscribed threads make small torch ops tens of times slower.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def run_notebook(notebook, folder: Path, *, timeout: int = 120, allow_errors: bool = False, **env: str):
    """Run every cell of ``notebook`` (an nbformat notebook, changed in place: outputs added) in a new python3 kernel
    started in ``folder``; raise on an error unless ``allow_errors`` (then errors are outputs, as in nbgrader).
    ``timeout`` bounds each cell. The kernel talks over IPC sockets in a private folder, not TCP ports: kernels
    started at the same moment cannot pick the same port, and nothing listens on the network."""
    import tempfile

    from jupyter_client import KernelManager
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="kernel-") as sockets:
        manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "ipc"))
        client = NotebookClient(notebook, km=manager, timeout=timeout, allow_errors=allow_errors,
                                resources={"metadata": {"path": str(folder)}})
        try:
            client.execute(env=tool_environment(**env))  # passed on to jupyter_client's start_kernel
        finally:  # nbclient shuts down only kernel managers it made itself
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)
    return notebook


def nbgrader(*args: str, course: Path = ROOT, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in a course directory and return the finished process (output captured)."""
    command = [sys.executable, "-m", "nbgrader", *args]
    done = subprocess.run(command, cwd=course, env=tool_environment(**env), capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[2:])} failed in {course} (exit {done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done


def copy_course(destination: Path, root: Path = ROOT, assignment_ids: list[str] | None = None) -> Path:
    """A fresh course directory at ``destination`` holding only the nbgrader configuration and the sources (of every
    assignment, or of ``assignment_ids``)."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "nbgrader_config.py", destination / "nbgrader_config.py")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "kernel-ipc-*", "*.pyc")
    if assignment_ids is None:
        shutil.copytree(root / "solutions", destination / "solutions", ignore=ignore)
    for assignment in assignment_ids or []:
        shutil.copytree(root / "solutions" / assignment, destination / "solutions" / assignment, ignore=ignore)
    return destination


def generate_release(course: Path = ROOT, assignment_ids: list[str] | None = None) -> None:
    """``nbgrader generate_assignment`` for each assignment of ``course`` (or of ``assignment_ids``), writing its
    ``exercises/``. Every assignment is one run with the assignment id ``*`` (nbgrader globs the source folders and
    names each assignment after its folder): 6 s instead of 35 s for eleven runs, and the same release."""
    for assignment in assignment_ids or ["--assignment=*"]:
        nbgrader("generate_assignment", assignment, "--force", "--log-level=WARN", course=course)
