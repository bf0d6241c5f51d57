"""Execute many notebooks at once: a pool of worker servers, each alone in its sandbox, one forked child per notebook.

A :class:`Worker` is a server process (:mod:`.server`) started in bubblewrap
(:mod:`autograder.grading.isolation.sandbox`), or directly (``Settings(sandboxed=False)``: ``--no-sandbox``), with a
workspace folder of its own. It imports torch once and forks a child per notebook in milliseconds, where a new
Jupyter kernel costs seconds, and every submission still gets a process of its own.

:class:`Pool` hands out jobs and never trusts a child: it reads the child's messages (:mod:`.protocol`) from a pipe
without blocking, checks that each is the next cell's, and enforces
a hard deadline per cell (the child's own SIGALRM timeout plus a grace period) by asking the server to kill it. When
a child dies, the cells it finished keep their outputs; the cell that was running gets an error output saying why;
the ones after it are marked as not run.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..isolation import sandbox
from . import protocol
from .protocol import Cell, CellResult, CellStatus, Ending, Execution, Stop, StopKind, receive, send

#: Extra seconds after the per-cell timeout before a child that ignores it is killed.
GRACE_SECONDS = 5.0
#: Seconds a worker may take to import torch and warm up before the run gives up on it.
BOOT_SECONDS = 300.0
#: Extra seconds on a job's first deadline: the child is forked and set up before its first cell starts.
START_SLACK_SECONDS = 10.0
#: Seconds after a kill was sent before the run gives up on the process and replaces its worker.
KILL_WAIT_SECONDS = 10.0
#: What every child's environment holds (plus the run's own variables): nothing of the grader's.
CHILD_ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "student", "LOGNAME": "student",
                     "LANG": "C.UTF-8", "MPLBACKEND": "agg", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                     "NBGRADER_EXECUTION": "autograde"}


@dataclass
class Job:
    """One notebook to execute: its code cells, and the folders its process starts in."""

    key: tuple[str, str]  # (student, notebook)
    cells: list[Cell]
    folders: list[Path] = field(default_factory=list)  # copied, in order, into the job's private folder


@dataclass(frozen=True)
class Settings:
    """How every notebook runs."""

    timeout: float = 60.0  # seconds per cell
    memory_mb: int = 1024
    output_limit: int = protocol.DEFAULT_OUTPUT_LIMIT
    grace: float = GRACE_SECONDS
    environment: dict[str, str] = field(default_factory=dict)  # extra variables (the grading seed)
    sandboxed: bool = True
    private: tuple[Path, ...] = ()  # folders a sandbox must hide (the course, the grader's home)
    checks: tuple[str, ...] = ()  # the check modules the notebooks import (``autograder.checks.ex01_chain_rule``)


def server_environment(home: str, tmp: str = "/tmp") -> dict[str, str]:
    """The whole environment of a worker server (sandboxed or not): nothing of the grader's."""
    library = {"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"]} if os.environ.get("LD_LIBRARY_PATH") else {}
    return {"PATH": CHILD_ENVIRONMENT["PATH"], "HOME": home, "LANG": "C.UTF-8", "TMPDIR": tmp,
            "PYTHONPATH": str(sandbox.package_path().parent), "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "agg", **library}


_END = object()


class WorkerFailed(RuntimeError):
    """A worker server could not start (the message says why, with the end of its log)."""


def error_output(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": [f"\x1b[0;31m{ename}\x1b[0m: {evalue}"]}


class Following:
    """One job as the parent follows it: the child's messages in, checked, and the Execution out."""

    def __init__(self, job: Job, name: str, reader: int, folder: Path, deadline: float):
        self.job = job
        self.name = name  # the job's name in the server's messages
        self.reader = reader  # the pipe the child writes to
        self.folder = folder  # the job's private folder in the worker's workspace
        self.deadline = deadline
        self.buffer = b""
        self.expected = [cell.index for cell in job.cells]
        self.cells: dict[int, CellResult] = {}
        self.all_done = False
        self.setup_failed: str | None = None
        self.killed_for: Stop | None = None
        self.kill_sent_at: float | None = None
        self.pipe_open = True
        self.exited: protocol.Exited | None = None
        self.started = time.perf_counter()

    def feed(self, chunk: bytes, cell_seconds: float) -> Stop | None:
        """Take what the child wrote; a Stop when it broke the protocol (the child is then to be killed)."""
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            problem = self._take(line, cell_seconds)
            if problem is not None:
                return problem
        if len(self.buffer) > protocol.MAX_LINE:
            return Stop(StopKind.PROTOCOL, "it sent an oversized message to the grader")
        return None

    def _take(self, line: bytes, cell_seconds: float) -> Stop | None:
        try:
            message = protocol.child_message(line)
        except protocol.ProtocolError as error:
            return Stop(StopKind.PROTOCOL, f"it wrote something that is not a grader message to the grader's "
                                           f"channel ({error})")
        if isinstance(message, protocol.CellDone) and self.expected and message.index == self.expected[0]:
            self.expected.pop(0)
            self.cells[message.index] = CellResult(message.execution_count, message.outputs,
                                                   CellStatus.TIMED_OUT if message.timed_out else CellStatus.RAN,
                                                   message.truncated, message.course_bug, message.diagnoses)
            self.deadline = time.monotonic() + cell_seconds
        elif isinstance(message, protocol.AllDone) and not self.expected:
            self.all_done = True
        elif isinstance(message, protocol.SetupFailed) and not self.cells:
            self.setup_failed = message.reason
        else:
            return Stop(StopKind.PROTOCOL, "it sent a message out of order")
        return None

    def result(self) -> Execution:
        """The cells it finished keep their outputs; the one running when it stopped, and those after, say why."""
        stop = self.killed_for
        if stop is None and self.setup_failed is not None:
            stop = Stop(StopKind.SETUP, f"the grader could not prepare the submission's process: {self.setup_failed}")
        if stop is None and self.expected:
            stop = self._ending()
        cells = dict(self.cells)
        if self.expected:
            first, *rest = self.expected
            cells[first] = CellResult(None, [error_output("DeadKernelError", "The kernel died while running this "
                                                                             f"cell: {stop.detail}.")],
                                      CellStatus.STOPPED)
            for index in rest:
                cells[index] = CellResult(None, [error_output("DeadKernelError", "Not run: the kernel died in an "
                                                                                 "earlier cell.")], CellStatus.NOT_RUN)
        elif stop is not None and stop.kind is not StopKind.PROTOCOL:
            stop = None  # every cell had finished: nothing was lost
        return Execution(cells, stop, round(time.perf_counter() - self.started, 3))

    def _ending(self) -> Stop:
        exited = self.exited
        if exited is None:
            return Stop(StopKind.WORKER, "the grader's worker failed")
        if exited.ending is Ending.SIGNALLED:
            name = signal.Signals(exited.code).name if exited.code in signal.Signals._value2member_map_ \
                else str(exited.code)
            return Stop(StopKind.SIGNAL, f"the process was killed by {name}"
                        + (" (most likely out of memory)" if exited.code == signal.SIGKILL else ""))
        return Stop(StopKind.EXIT, f"the process exited with status {exited.code} in the middle of the cell "
                                   "(os._exit or similar)")


class Worker:
    """One server process (sandboxed or not) with a workspace of its own, running one job at a time."""

    def __init__(self, slot: int, scratch: Path, settings: Settings, warmup: list[list[Cell]], uid: int | None):
        self.slot = slot
        self.settings = settings
        self.uid = uid  # the unprivileged user of a sandbox started as root
        self.workspace = scratch / f"worker-{slot}"
        self.workspace.mkdir(mode=0o700)
        self.log = scratch / f"worker-{slot}.log"
        self.jobs_done = 0
        self.ready = False
        self.following: Following | None = None
        self.view: sandbox.View | None = None
        if settings.sandboxed:
            if uid is not None:
                os.chmod(self.workspace, 0o755)
            self.view = sandbox.build_view(self.workspace, [*settings.private, scratch], scratch,
                                           uid if uid is not None else os.getuid(),
                                           uid if uid is not None else os.getgid())
        self._start(warmup)

    def _start(self, warmup: list[list[Cell]]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        python = sys.executable if self.view is None else sandbox.python_executable()
        argv = [python, "-m", "autograder.grading.worker.server", "--control-fd", str(theirs.fileno())]
        if self.view is not None:
            if self.uid is not None:
                argv += ["--user", str(self.uid)]
            command = sandbox.command(self.view, argv, environment=server_environment(sandbox.WORKSPACE))
            environment = None
        else:
            command, environment = argv, server_environment(str(self.workspace), str(self.workspace))
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=log, env=environment, cwd=self.workspace,
                                            start_new_session=True)
        theirs.close()
        self.channel = ours
        self.boot_deadline = time.monotonic() + BOOT_SECONDS
        send(ours, protocol.Configure(warmup=warmup, memory_mb=self.settings.memory_mb,
                                      output_limit=self.settings.output_limit,
                                      sandboxed=self.view is not None, checks=list(self.settings.checks)))

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def inside(self, folder: Path) -> str:
        """A workspace folder as the server sees it."""
        relative = folder.relative_to(self.workspace)
        return str(Path(sandbox.WORKSPACE) / relative) if self.view is not None else str(folder)

    def prepare(self, job: Job) -> Path:
        """The job's private folder in the workspace: copies of its folders (symlinks copied as links)."""
        self.jobs_done += 1
        folder = self.workspace / f"job-{self.jobs_done}"
        folder.mkdir(mode=0o700)
        for source in job.folders:
            if source.is_dir():
                shutil.copytree(source, folder, symlinks=True, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        if self.uid is not None:
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, self.uid, self.uid, follow_symlinks=False)
        return folder

    def clean(self) -> None:
        """Empty the workspace (the job's child is gone, and the server swept what it left)."""
        for entry in self.workspace.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    def restart(self, warmup: list[list[Cell]]) -> None:
        self.stop()
        self.clean()
        self.following, self.ready = None, False
        self._start(warmup)

    def stop(self) -> None:
        try:
            self.channel.close()
        except OSError:
            pass
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait(10)


class Pool:
    """``Pool(settings, jobs=2, warmup=[cells...])``: start the workers now (they boot while the caller prepares
    jobs); ``execute(jobs)`` yields ``(job, Execution)`` as each notebook finishes; ``close()`` stops the workers."""

    def __init__(self, settings: Settings, *, jobs: int | None = None, warmup: list[list[Cell]] = ()):
        self.settings = settings
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.warmup = list(warmup)
        self.scratch = Path(tempfile.mkdtemp(prefix="autograder-workers-"))
        as_root = os.geteuid() == 0 and settings.sandboxed
        self.uids = sandbox.free_ids(self.jobs) if as_root else [None] * self.jobs
        self.workers: list[Worker] = []
        self.ended: list[tuple[Job, Execution]] = []  # jobs of workers that failed, not yet yielded
        self.restarts = 0
        self.created = time.perf_counter()
        self.ready_after = 0.0  # seconds from creation until the last worker was ready
        try:
            if settings.sandboxed:
                first = sandbox.build_view(self.scratch, [*settings.private, self.scratch], self.scratch,
                                           self.uids[0] if as_root else os.getuid(),
                                           self.uids[0] if as_root else os.getgid())
                sandbox.probe(first, server_environment(sandbox.WORKSPACE), self.uids[0])
            self.workers = [Worker(slot, self.scratch, settings, self.warmup, self.uids[slot])
                            for slot in range(self.jobs)]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the loop ---------------------------------------------------------------------------------------------------

    def execute(self, jobs: Iterable[Job | None]) -> Iterator[tuple[Job, Execution]]:
        """Yield ``(job, Execution)`` as each job finishes. ``jobs`` is consumed lazily, when a worker is free; an
        item ``None`` means that no job is ready yet (it is asked for again shortly)."""
        jobs = iter(jobs)
        selector = selectors.DefaultSelector()
        for worker in self.workers:
            selector.register(worker.channel, selectors.EVENT_READ, ("control", worker))
        exhausted = starved = False
        try:
            while True:
                starved = False
                for worker in self.workers:
                    if not exhausted and not starved and worker.ready and worker.following is None:
                        job = next(jobs, _END)
                        if job is _END:
                            exhausted = True
                        elif job is None:
                            starved = True
                        else:
                            self._begin(worker, job, selector)
                if exhausted and not any(w.following for w in self.workers):
                    return
                wait = min(self._wait(), 0.02) if starved else self._wait()
                for key, _ in selector.select(timeout=wait):
                    kind, worker = key.data
                    if kind == "control":
                        self._control(worker, selector)
                    else:
                        self._read(worker, selector)
                for worker in self.workers:
                    done = self._check(worker, selector)
                    if done is not None:
                        yield done
                while self.ended:
                    yield self.ended.pop(0)
        finally:
            selector.close()

    def _wait(self) -> float:
        deadlines = [w.boot_deadline for w in self.workers if not w.ready]
        deadlines += [w.following.deadline for w in self.workers if w.following and w.following.killed_for is None]
        deadlines += [w.following.kill_sent_at + KILL_WAIT_SECONDS for w in self.workers
                      if w.following and w.following.kill_sent_at]
        return max(0.0, min([time.monotonic() + 1.0, *deadlines]) - time.monotonic())

    def _begin(self, worker: Worker, job: Job, selector) -> None:
        folder = worker.prepare(job)
        reader, writer = os.pipe()
        os.set_blocking(reader, False)
        environment = {**CHILD_ENVIRONMENT, **self.settings.environment}
        workdir = worker.inside(folder)
        environment.update({"HOME": workdir, "TMPDIR": workdir, "MPLCONFIGDIR": workdir,
                            "IPYTHONDIR": os.path.join(workdir, ".ipython")})
        start = protocol.Start(job=f"{job.key[0]}/{job.key[1]}#{worker.jobs_done}", cells=job.cells,
                               workdir=workdir, timeout=self.settings.timeout, environment=environment)
        try:
            send(worker.channel, start, [writer])
        finally:
            os.close(writer)
        first_deadline = time.monotonic() + self.settings.timeout + self.settings.grace + START_SLACK_SECONDS
        worker.following = Following(job, start.job, reader, folder, first_deadline)
        selector.register(reader, selectors.EVENT_READ, ("pipe", worker))

    def _control(self, worker: Worker, selector) -> None:
        try:
            message, _ = receive(worker.channel, protocol.SERVER_TO_PARENT)
        except (OSError, protocol.ProtocolError):
            message = None
        if message is None or isinstance(message, protocol.Failed):
            reason = message.reason if message else f"the worker exited ({worker.process.poll()})"
            if not worker.ready:
                raise WorkerFailed(f"worker {worker.slot} could not start: {reason}\n{worker.log_tail()}")
            self._replace(worker, selector, Stop(StopKind.WORKER, f"the grader's worker failed: {reason}"))
        elif isinstance(message, protocol.Ready):
            worker.ready = True
            self.ready_after = max(self.ready_after, time.perf_counter() - self.created)
        elif isinstance(message, protocol.Exited) and worker.following and message.job == worker.following.name:
            worker.following.exited = message

    def _read(self, worker: Worker, selector) -> None:
        state = worker.following
        try:
            chunk = os.read(state.reader, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            state.pipe_open = False
            selector.unregister(state.reader)
            os.close(state.reader)
        elif state.killed_for is None:
            problem = state.feed(chunk, self.settings.timeout + self.settings.grace)
            if problem is not None:
                self._kill(worker, problem)

    def _kill(self, worker: Worker, why: Stop) -> None:
        state = worker.following
        if state.killed_for is None:
            state.killed_for = why
            state.kill_sent_at = time.monotonic()
            try:
                send(worker.channel, protocol.Kill(state.name))
            except OSError:
                pass

    def _check(self, worker: Worker, selector) -> tuple[Job, Execution] | None:
        """Deadlines, and the finished job of ``worker`` if there is one."""
        now = time.monotonic()
        if not worker.ready:
            if now > worker.boot_deadline:
                raise WorkerFailed(f"worker {worker.slot} did not start within {BOOT_SECONDS:g} s\n"
                                   f"{worker.log_tail()}")
            return None
        state = worker.following
        if state is None:
            return None
        if state.killed_for is None and now > state.deadline:
            index = state.expected[0] if state.expected else None
            self._kill(worker, Stop(StopKind.UNRESPONSIVE, f"the cell (index {index}) was still running "
                                    f"{self.settings.timeout + self.settings.grace:g} s after it started and did "
                                    "not stop when interrupted"))
        elif state.kill_sent_at is not None and now > state.kill_sent_at + KILL_WAIT_SECONDS and state.exited is None:
            self._replace(worker, selector, Stop(StopKind.WORKER, "the grader's worker did not stop the "
                                                                         "process"))
        if state.exited is None or state.pipe_open:
            return None
        worker.following = None
        worker.clean()
        return state.job, state.result()

    def _replace(self, worker: Worker, selector, why: Stop) -> None:
        """Stop a failed worker and start another in its slot; the job it was running ends with ``why`` (it is
        yielded with the next finished jobs)."""
        state = worker.following
        try:
            selector.unregister(worker.channel)
        except (KeyError, ValueError):
            pass
        if state is not None and state.pipe_open:
            selector.unregister(state.reader)
            os.close(state.reader)
        worker.restart(self.warmup)
        self.restarts += 1
        selector.register(worker.channel, selectors.EVENT_READ, ("control", worker))
        if state is not None:
            state.killed_for = state.killed_for or why
            self.ended.append((state.job, state.result()))
