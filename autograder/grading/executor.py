"""Run many notebooks at once, each in a fresh confined process forked from a server that has imported torch.

The server is the standard library's multiprocessing *forkserver*, preloaded with :mod:`autograder.grading.preload`
(torch, numpy, matplotlib, IPython, the course package, the pristine snapshot). Forking it costs milliseconds, where a
new Jupyter kernel costs seconds, and every submission still gets a process of its own.

The parent never trusts the child: it reads newline-delimited JSON from a pipe, without blocking, checks that each
message is the next cell's, and enforces a hard deadline per cell (the child's own SIGALRM timeout plus a grace
period) by killing the child's whole process group. When the child dies, the cells it finished keep their outputs;
the cell that was running gets an error output saying why; the ones after it are marked as not run.
"""

from __future__ import annotations

import grp
import json
import multiprocessing
import os
import pwd
import selectors
import shutil
import signal
import sys
import tempfile
import time
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .kernel import DEFAULT_OUTPUT_LIMIT

#: Extra seconds after the per-cell timeout before a child that ignores it is killed.
GRACE_SECONDS = 5.0
#: A message longer than this is a protocol violation (the kernel caps outputs far below it).
MAX_MESSAGE = 64 << 20
#: Notebooks (os.pathsep-separated) the fork server runs once before its snapshot (see preload._warm_up).
WARMUP_VARIABLE = "AUTOGRADER_GRADING_WARMUP"
#: First uid/gid tried for the unprivileged users that run submissions when the grader runs as root.
FIRST_SANDBOX_ID = 61000


@dataclass
class Job:
    """One notebook to execute: its code cells (index in the notebook, source, instructor cell or not)."""

    name: str
    cells: list[dict]
    folders: list[Path] = field(default_factory=list)  # copied, in order, into the private working folder


@dataclass
class Result:
    """Per executed cell index: ``{"execution_count", "outputs"}``; ``problem`` says why execution stopped early."""

    cells: dict[int, dict]
    problem: str | None
    seconds: float
    notes: list[str] = field(default_factory=list)


_STARTED = False


def _context():
    global _STARTED
    context = multiprocessing.get_context("forkserver")
    if not _STARTED:
        context.set_forkserver_preload(["autograder.grading.preload"])
        _STARTED = True
    return context


def _free_ids(count: int, number: int = FIRST_SANDBOX_ID) -> list[int]:
    """``count`` numbers unused as uid and gid (one sandbox user per worker slot)."""
    found = []
    while len(found) < count:
        try:
            pwd.getpwuid(number)
        except KeyError:
            try:
                grp.getgrgid(number)
            except KeyError:
                found.append(number)
        number += 1
    return found


def _chown_tree(root: str, uid: int) -> None:
    os.chown(root, uid, uid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def _valid_output(output) -> bool:
    if not isinstance(output, dict):
        return False
    kind = output.get("output_type")
    if kind == "stream":
        return output.get("name") in ("stdout", "stderr") and isinstance(output.get("text"), str)
    if kind in ("display_data", "execute_result"):
        return isinstance(output.get("data"), dict) and isinstance(output.get("metadata", {}), dict)
    if kind == "error":
        return (isinstance(output.get("ename"), str) and isinstance(output.get("evalue"), str)
                and isinstance(output.get("traceback"), list) and all(isinstance(x, str) for x in output["traceback"]))
    return False


def error_output(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": [f"\x1b[0;31m{ename}\x1b[0m: {evalue}"]}


class _Running:
    def __init__(self, job: Job, process, reader, workdir: str, deadline: float):
        self.job = job
        self.process = process
        self.reader = reader
        self.workdir = workdir
        self.deadline = deadline
        self.buffer = b""
        self.cells: dict[int, dict] = {}
        self.expected = [cell["index"] for cell in job.cells]
        self.done = False
        self.problem: str | None = None
        self.killed_for: str | None = None
        self.started = time.perf_counter()


class Executor:
    """``Executor(jobs=2).run(jobs)`` yields ``(job, result)`` as each notebook finishes."""

    def __init__(self, *, jobs: int | None = None, timeout: float = 60, memory_mb: int = 1024,
                 output_limit: int = DEFAULT_OUTPUT_LIMIT, environment: dict[str, str] | None = None,
                 grace: float = GRACE_SECONDS, warmup: Iterable[Path] = (), first_id: int = FIRST_SANDBOX_ID):
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.output_limit = output_limit
        self.environment = environment or {}
        self.grace = grace
        self.as_root = os.geteuid() == 0
        self.ids = _free_ids(self.jobs, first_id) if self.as_root else [os.getuid()] * self.jobs
        # Read by the fork server when it starts (the first run of this process): the reference solutions to warm up.
        # Always set, never inherited: a value left by another Executor in a parent process (even an empty one) would
        # skip the warm-up, and then a child that cannot read the Python installation fails on a lazy import.
        os.environ[WARMUP_VARIABLE] = os.pathsep.join(str(p) for p in warmup)

    # -- one child --------------------------------------------------------------------------------------------------

    def _workdir(self, job: Job, uid: int) -> str:
        workdir = tempfile.mkdtemp(prefix="autograder-run-")
        for folder in job.folders:
            if folder.is_dir():  # symlinks are copied as links, never followed as root
                shutil.copytree(folder, workdir, symlinks=True, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        if self.as_root:
            _chown_tree(workdir, uid)
        return workdir

    def _environment(self, workdir: str) -> dict[str, str]:
        environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
                       "USER": "student", "LOGNAME": "student", "LANG": "C.UTF-8", "MPLBACKEND": "agg",
                       "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NBGRADER_EXECUTION": "autograde",
                       "MPLCONFIGDIR": workdir, "IPYTHONDIR": os.path.join(workdir, ".ipython")}
        environment.update(self.environment)
        return environment

    def _start(self, job: Job, slot: int) -> _Running:
        uid = self.ids[slot]
        workdir = self._workdir(job, uid)
        payload = {"cells": job.cells, "workdir": workdir, "uid": uid, "gid": uid, "memory_mb": self.memory_mb,
                   "environment": self._environment(workdir), "timeout": self.timeout,
                   "output_limit": self.output_limit}
        from .kernel import child_main

        context = _context()
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=child_main, args=(writer, payload), daemon=True,
                                  name=f"autograder-{job.name}")
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")  # children must not re-import the caller's script
        try:
            process.start()
        finally:
            sys.modules["__main__"] = main
        writer.close()
        os.set_blocking(reader.fileno(), False)
        return _Running(job, process, reader, workdir, time.monotonic() + self.timeout + self.grace + 10)

    def _messages(self, state: _Running) -> bool:
        """Read what is available; handle complete messages. False at end of file."""
        try:
            chunk = os.read(state.reader.fileno(), 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        state.buffer += chunk
        while b"\n" in state.buffer:
            line, state.buffer = state.buffer.split(b"\n", 1)
            self._handle(state, line)
        if len(state.buffer) > MAX_MESSAGE:
            self._kill(state, "it sent an oversized message to the grader")
        return True

    def _handle(self, state: _Running, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return self._kill(state, "it wrote something that is not a grader message to the grader's channel")
        if not isinstance(message, dict):
            return self._kill(state, "it sent a malformed message")
        if message.get("done") is True and not state.expected:
            state.done = True
        elif "fatal" in message:
            state.problem = f"the grader could not prepare the submission's process: {message['fatal']}"
        elif state.expected and message.get("cell") == state.expected[0]:
            outputs = message.get("outputs")
            if not isinstance(outputs, list) or not all(_valid_output(o) for o in outputs):
                return self._kill(state, "it sent malformed outputs")
            count = message.get("execution_count")
            state.cells[state.expected.pop(0)] = {
                "execution_count": count if isinstance(count, int) else None, "outputs": outputs}
            state.deadline = time.monotonic() + self.timeout + self.grace
        else:
            self._kill(state, "it sent a message out of order")

    def _kill(self, state: _Running, why: str) -> None:
        if state.killed_for is None:
            state.killed_for = why
        try:
            os.killpg(state.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            state.process.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _finish(self, state: _Running) -> Result:
        state.process.join(10)
        if state.process.exitcode is None:
            self._kill(state, "it did not exit")
            state.process.join(5)
        state.reader.close()
        shutil.rmtree(state.workdir, ignore_errors=True)
        problem = state.problem
        if state.killed_for:
            problem = f"the grader stopped the process: {state.killed_for}"
        elif not state.done and problem is None:
            code = state.process.exitcode
            if code is not None and code < 0:
                name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
                problem = f"the process was killed by {name}" + (
                    " (most likely out of memory)" if -code == signal.SIGKILL else "")
            else:
                problem = f"the process exited with status {code} in the middle of the cell (os._exit or similar)"
        cells = dict(state.cells)
        if state.expected:
            first, *rest = state.expected
            cells[first] = {"execution_count": None,
                            "outputs": [error_output("DeadKernelError", f"The kernel died while running this cell: "
                                                                        f"{problem}.")]}
            for index in rest:
                cells[index] = {"execution_count": None, "outputs": [error_output(
                    "DeadKernelError", "Not run: the kernel died in an earlier cell.")]}
        return Result(cells, problem if state.expected or not state.done else None,
                      time.perf_counter() - state.started)

    # -- many children ----------------------------------------------------------------------------------------------

    def run(self, jobs: Iterable[Job]) -> Iterator[tuple[Job, Result]]:
        jobs = iter(jobs)  # consumed lazily: the caller may prepare the next job while children run
        pending: list[Job] = []
        free_slots = list(range(self.jobs))
        running: dict[int, tuple[_Running, int]] = {}
        selector = selectors.DefaultSelector()
        try:
            exhausted = False
            while not exhausted or pending or running:
                while free_slots and not (exhausted and not pending):
                    if not pending:
                        job = next(jobs, None)
                        if job is None:
                            exhausted = True
                            break
                        pending.append(job)
                    slot = free_slots.pop(0)
                    state = self._start(pending.pop(0), slot)
                    running[state.reader.fileno()] = (state, slot)
                    selector.register(state.reader.fileno(), selectors.EVENT_READ)
                if not running:
                    continue
                now = time.monotonic()
                wait = max(0.0, min(s.deadline for s, _ in running.values()) - now)
                for key, _ in selector.select(timeout=min(wait, 1.0)):
                    state, slot = running[key.fd]
                    if not self._messages(state):
                        selector.unregister(key.fd)
                        del running[key.fd]
                        free_slots.append(slot)
                        yield state.job, self._finish(state)
                now = time.monotonic()
                for state, _slot in list(running.values()):
                    if now > state.deadline and state.killed_for is None:
                        index = state.expected[0] if state.expected else None
                        self._kill(state, f"the cell (index {index}) was still running "
                                          f"{self.timeout + self.grace:g} s after it started and did not stop "
                                          "when interrupted")
        finally:
            for fd, (state, _) in running.items():
                self._kill(state, "the grader stopped")
                selector.unregister(fd)
                state.process.join(5)
                shutil.rmtree(state.workdir, ignore_errors=True)
            selector.close()

    def run_one(self, job: Job) -> Result:
        return next(iter(self.run([job])))[1]
