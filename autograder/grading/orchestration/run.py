"""One run of the class grader: the assignments named, one pool of workers, each submission streamed through.

:func:`grade` prepares every assignment first (:class:`~.assignment.Assignment`: everything is checked before a
worker starts), then starts one :class:`~autograder.grading.worker.pool.Pool` for all of them, warmed up on their
reference solutions and releases, and grades them one after the other, yielding each one's
:class:`~.assignment.Result`. Within an assignment (:func:`_stream`), this thread sanitizes a few students ahead of
the workers and grades each student as soon as all their notebooks ran; a second thread only moves jobs and bytes.
nbgrader is driven from this one thread only. A run refuses to start without the sandbox unless ``sandbox=False``
(``--no-sandbox``), and it fails loudly if nbgrader graded any notebook without replaying its sandboxed execution.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..worker.pool import Pool, Settings
from .assignment import Assignment, Options, Result, check_modules
from .replay import code_cells

#: What the job queue says when every job has been queued.
_NO_MORE = object()


def grade(options: Options, assignments: list[str],
          on_start: Callable[[str, int, int], None] = lambda assignment, total, skipped: None,
          on_graded: Callable[[str, str], None] = lambda assignment, student: None) -> Iterator[Result]:
    """Grade several assignments of one course with one pool of workers (started once, warmed up on every
    assignment's notebooks); yield each assignment's Result as it is done, in the order given."""
    parts = [Assignment(options, name) for name in dict.fromkeys(assignments)]
    busy = [part for part in parts if part.todo]
    pool = None
    if busy:
        references = [notebook for part in busy for notebook in part.references]
        private = (busy[0].nbgrader.root, Path.home()) + ((Path(os.environ["HOME"]),) if os.environ.get("HOME") else ())
        settings = Settings(timeout=max(part.timeout for part in busy), memory_mb=options.memory_mb,
                            sandboxed=options.sandbox, private=private, checks=check_modules(references),
                            environment={"AUTOGRADER_SEED": busy[0].seed} if busy[0].seed else {})
        pool = Pool(settings, jobs=options.jobs, warmup=[code_cells(notebook) for notebook in references])
    try:
        for part in parts:
            on_start(part.name, len(part.todo), part.skipped)
            if part.todo:
                _stream(part, pool, lambda student, name=part.name: on_graded(name, student))
            yield part.finish()
    finally:
        if pool is not None:
            pool.close()


def _stream(part: Assignment, pool: Pool, on_graded: Callable[[str], None]) -> None:
    """Sanitize, execute, grade, as a stream: this thread sanitizes (keeping a few jobs queued ahead of the workers)
    and grades each student as soon as all their notebooks ran; a second thread only moves jobs and bytes."""
    queued: queue.Queue = queue.Queue()
    results: queue.Queue = queue.Queue()
    started, restarts = time.perf_counter(), pool.restarts

    def queued_jobs():
        while True:
            try:
                job = queued.get_nowait()
            except queue.Empty:
                yield None  # nothing ready yet: the pool asks again shortly
                continue
            if job is _NO_MORE:
                return
            yield job

    def execute() -> None:
        try:
            for done in pool.execute(queued_jobs()):
                results.put(done)
            results.put(None)
        except BaseException as exc:  # handed to this thread
            results.put(exc)

    part.extra = part.nbgrader.extra_files_folder()
    thread = threading.Thread(target=execute, name="pool", daemon=True)
    thread.start()
    waiting = list(part.todo)  # students still to sanitize
    remaining: dict[str, int] = {}  # notebooks of each sanitized student still executing
    finished = None
    try:
        while waiting or remaining:
            if waiting and (queued.qsize() < 2 * pool.jobs or results.empty()):
                student = waiting.pop(0)
                jobs = part.prepare(student)
                for job in jobs:
                    queued.put(job)
                if not waiting:
                    queued.put(_NO_MORE)
                if jobs:
                    remaining[student] = len(jobs)
                else:
                    part.grade(student)
                    on_graded(student)
                continue
            item = results.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            job, execution = item
            part.executed(job, execution)
            student = job.key[0]
            remaining[student] -= 1
            if remaining[student] == 0:
                del remaining[student]
                finished = time.perf_counter()
                part.grade(student)
                on_graded(student)
    except BaseException:
        while not queued.empty():  # stop: the notebooks already running finish, no other starts
            queued.get_nowait()
        raise
    finally:
        queued.put(_NO_MORE)  # (once more is harmless) so that the pool's thread ends
        thread.join()
        if part.extra:
            shutil.rmtree(part.extra, ignore_errors=True)
    part.result.workers_ready = pool.ready_after
    part.result.execution_seconds = (finished or time.perf_counter()) - started
    part.result.restarts = pool.restarts - restarts
