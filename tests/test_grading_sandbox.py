"""The grader's building blocks, without nbgrader: outputs in nbclient's form, and the pristine world put back.

tests/test_grade_command.py proves the whole command; these are two properties everything there rests on
(tests/test_sandbox_isolation.py proves the sandbox, tests/test_grader_core.py the protocol and the replays).
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
import time

import nbformat
import pytest
import torch
from conftest import grader_sandbox_flags
from nbclient import NotebookClient

from autograder import course
from autograder.grading.isolation import pristine
from autograder.grading.orchestration.replay import apply_outputs, code_cells
from autograder.grading.worker.pool import Job, Pool, Settings

pytestmark = pytest.mark.xdist_group("grade-command")

CELLS = [
    "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nprint('more')",
    "from IPython.display import display, Markdown\ndisplay(Markdown('**shown**'))\n40 + 2",
    "x = 1",
    "def broken():\n    return 1 / 0\nbroken()",
    "print('after the error')\n'a string'",
]


def _notebook():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def _shape(notebook) -> list[list[tuple]]:
    """What grading looks at: per cell, each output's type, stream name, text, data keys, error name."""
    shape = []
    for cell in notebook.cells:
        shape.append([(o.output_type, o.get("name"), o.get("text"), sorted(o.get("data", {})), o.get("ename"))
                      for o in cell.outputs])
    return shape


def test_outputs_have_the_form_nbclient_gives_them(tmp_path):
    ours = _notebook()
    with Pool(Settings(timeout=30, sandboxed=not grader_sandbox_flags()), jobs=1) as pool:
        [(_, result)] = list(pool.execute([Job(("format", "notebook"), code_cells(ours), [tmp_path])]))
    assert result.stop is None
    apply_outputs(ours, result)
    theirs = _notebook()
    NotebookClient(theirs, timeout=60, kernel_name="python3", allow_errors=True).execute(
        env=course.tool_environment())
    assert _shape(ours) == _shape(theirs)
    assert [c.execution_count for c in ours.cells] == [c.execution_count for c in theirs.cells]
    error = ours.cells[3].outputs[-1]
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    assert error.evalue == "division by zero" and "return 1 / 0" in traceback and "ZeroDivisionError" in traceback


def test_restore_puts_back_what_a_submission_patched():
    from autograder import checking

    restore = pristine.take()
    original = torch.all, torch.Tensor.__le__, math.isclose, sys.modules["autograder.checking"]
    expect_close = checking.expect_close
    try:
        torch.all = lambda *args, **kwargs: True
        torch.Tensor.__le__ = lambda *args: True
        torch.Tensor.__eq__ = lambda *args: True  # added to the class: must be removed again
        math.isclose = None
        checking.expect_close = lambda *args, **kwargs: None
        sys.modules["autograder.checking"] = object()
        assert restore(False) >= 5  # the core alone already covers all of these
        assert (torch.all, torch.Tensor.__le__, math.isclose, sys.modules["autograder.checking"]) == original
        assert "__eq__" not in vars(torch.Tensor) and checking.expect_close is expect_close
        assert restore(True) == 0
    finally:
        torch.all, torch.Tensor.__le__, math.isclose, sys.modules["autograder.checking"] = original
        vars(torch.Tensor).get("__eq__") and delattr(torch.Tensor, "__eq__")
        checking.expect_close = expect_close


def test_a_worker_that_dies_is_replaced_and_its_job_says_so(tmp_path):
    """The server under a running notebook is killed from outside: that notebook ends with a worker stop, the slot
    gets a fresh worker, and the next notebook runs there."""
    import threading

    from autograder.grading.worker.protocol import Cell, CellStatus, StopKind

    cells = [Cell(0, "import time\ntime.sleep(60)", False), Cell(1, "print('never')", True)]
    after = [Cell(0, "print('fresh')", False)]
    with Pool(Settings(timeout=120, sandboxed=not grader_sandbox_flags()), jobs=1) as pool:
        def kill_when_running():
            while not (pool.workers[0].following and pool.workers[0].ready):
                time.sleep(0.2)
            time.sleep(1.0)
            os.killpg(pool.workers[0].process.pid, signal.SIGKILL)

        threading.Thread(target=kill_when_running, daemon=True).start()
        results = dict((job.key[0], done) for job, done in pool.execute(
            [Job(("dies", "nb"), cells, [tmp_path]), Job(("after", "nb"), after, [tmp_path])]))
        assert pool.restarts == 1
    dies, fresh = results["dies"], results["after"]
    assert dies.stop.kind is StopKind.WORKER
    assert [dies.cells[i].status for i in (0, 1)] == [CellStatus.STOPPED, CellStatus.NOT_RUN]
    assert fresh.stop is None and fresh.cells[0].outputs[0]["text"] == "fresh\n"
