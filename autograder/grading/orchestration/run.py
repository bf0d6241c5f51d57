"""One run of the class grader: from ``submitted/`` to the gradebook, feedback, grades CSV and class report.

1. **Sanitize** (this thread): each submission with nbgrader's own sanitize preprocessors (:mod:`.nbgrader_app`),
   while the worker servers start in their sandboxes (:mod:`.executor`).
2. **Execute** (a thread that only moves bytes): every sanitized notebook in a child of a worker server.
3. **Grade** (this thread, as each student's notebooks finish): nbgrader's Autograde with its sanitize and Execute
   steps answered from 1 and 2 (:mod:`.replay`), then nbgrader's feedback.

nbgrader is driven from this one thread only. A run refuses to start without the sandbox unless ``sandbox=False``
(``--no-sandbox``), and it fails loudly if nbgrader graded any notebook without replaying its sandboxed execution.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..worker.pool import Executor, Job, Settings
from . import notes, report
from .replay import Replay, ReplayMissing, Replays, code_cells
from .state import FAILED, GRADED, Outcome, State, context_hash, folder_hash, students

#: Limits that apply when neither the command line nor nbgrader_config.py says otherwise.
DEFAULT_MEMORY_MB = 1024


@dataclass(frozen=True)
class Options:
    assignment: str
    course: Path
    jobs: int
    force: bool = False
    timeout: float | None = None  # seconds per cell; None: Execute.timeout from nbgrader_config.py
    memory_mb: int = DEFAULT_MEMORY_MB
    feedback: bool = True
    sandbox: bool = True
    students: tuple[str, ...] | None = None  # regrade only these, changed or not (None: whoever changed)


@dataclass
class Result:
    """What a run did, for the summary."""

    outcomes: dict[str, Outcome]  # every student with a submission (this run's or the previous run's outcome)
    todo: list[str]  # the students graded this run
    state_dir: Path
    report_path: Path
    sandboxed: bool
    seconds: float = 0.0
    execution_seconds: float = 0.0
    replayed: int = 0
    restarts: int = 0
    workers_ready: float = 0.0  # seconds until every worker had imported and warmed up
    course_bugs: dict[str, list[str]] = field(default_factory=dict)
    late: list = field(default_factory=list)  # lms.late.LateSubmission, after this run's penalties


def check_modules(notebooks) -> tuple[str, ...]:
    """The check modules (``autograder.checks.NAME``) the notebooks' cells import."""
    found = set()
    for notebook in notebooks:
        for cell in notebook.cells:
            if cell.cell_type == "code":
                found.update(re.findall(r"from\s+autograder\.checks\s+import\s+(\w+)", cell.source))
                found.update(re.findall(r"import\s+autograder\.checks\.(\w+)", cell.source))
    return tuple(sorted(f"autograder.checks.{name}" for name in found))


def _worker_settings(options: Options, course, timeout: float, seed: str, sources) -> Settings:
    private = (course.root, Path.home()) + ((Path(os.environ["HOME"]),) if os.environ.get("HOME") else ())
    return Settings(timeout=timeout, memory_mb=options.memory_mb, sandboxed=options.sandbox,
                    environment={"AUTOGRADER_SEED": seed} if seed else {}, private=private,
                    checks=check_modules(sources))


class _Assignment:
    """One assignment's share of a run: what to grade (prepared before the workers start), then the gradebook,
    grades CSV and class report once its submissions ran."""

    def __init__(self, options: Options):
        from .nbgrader_app import Course

        self.options = options
        self.started = time.perf_counter()
        self.course = course = Course(options.course, options.assignment)
        course.check_replay()
        self.timeout = options.timeout or float(course.app.config.Execute.get("timeout", 30) or 30)
        course.ensure_in_gradebook()
        self.notebook_ids = course.notebook_ids()
        self.max_scores = course.max_scores()
        self.total_points = sum(sum(cells.values()) for cells in self.max_scores.values())
        state_dir = course.root / "grading" / options.assignment
        self.state = State(state_dir / "state.json")
        self.seed = os.environ.get("AUTOGRADER_SEED", "")
        sources = course.source_notebooks()
        self.context = context_hash(self.seed, self.timeout, options.memory_mb, options.sandbox,
                                    [p.read_bytes() for p in sources])
        self.everyone = students(course.submitted_folder(), options.assignment)
        if options.students is not None:
            unknown = sorted(set(options.students) - set(self.everyone))
            if unknown:
                raise NoSuchStudents(f"{options.assignment}: no submission from {', '.join(unknown)} in "
                                     f"{course.submitted_folder()}")
        hashes = {s: folder_hash(course.path("submitted", s)) for s in self.everyone}
        if options.students is not None:  # the ones named, changed or not
            self.todo = [s for s in self.everyone if s in options.students]
        else:
            self.todo = [s for s in self.everyone
                         if options.force or not self.state.unchanged(s, hashes[s], self.context)]
        self.skipped = len(self.everyone) - len(self.todo)
        self.outcomes = {s: Outcome(hash=hashes[s], max_score=self.total_points) for s in self.todo}
        self.result = Result({}, self.todo, state_dir, state_dir / "report.md", options.sandbox)
        self.replays = Replays()

        import nbformat

        # the reference solutions and the blank release: the checks' paths to a pass and to a failure, tracebacks
        # included
        releases = [course.release_folder() / f"{notebook_id}.ipynb" for notebook_id in self.notebook_ids]
        self.notebooks = [nbformat.read(path, as_version=4) for path in sources + releases if path.exists()]

    def execute(self, executor: Executor, on_graded) -> None:
        extra = self.course.extra_files_folder()
        try:
            restarts = executor.restarts
            self.result.execution_seconds, _ = _pipeline(
                self.course, executor, self.todo, self.notebook_ids, self.replays, self.outcomes, self.options,
                self.timeout, extra, self.result, on_graded)
            self.result.restarts = executor.restarts - restarts
        finally:
            if extra:
                shutil.rmtree(extra, ignore_errors=True)

    def finish(self) -> Result:
        """Check that every graded notebook was replayed; late penalties; gradebook scores; CSV and class report."""
        from . import late

        course, state, result = self.course, self.state, self.result
        graded = [s for s in self.todo if self.outcomes[s].status == GRADED]
        missing = self.replays.unreplayed(set(graded))
        if missing:
            raise ReplayMissing(f"nbgrader graded {missing} without their sandboxed execution")
        result.replayed = sum(r.execute_replayed for r in self.replays.values())
        # the late policy again for everyone (also those not executed this run): a changed due date, extension or
        # policy, or a submission recorded as 0, never keeps a stale penalty
        changed = late.recompute(course.db_url, self.options.assignment, course.app.config)
        result.late = late.late_submissions(course.db_url, self.options.assignment)
        if self.options.feedback:  # feedback showing a penalty the gradebook no longer has is generated again
            for student in sorted(set(changed) - set(self.todo)):
                if state.outcomes.get(student, Outcome(status=FAILED)).status == GRADED:
                    course.generate_feedback(student)

        cell_scores: dict[str, dict[str, float]] = {}
        diagnosed: dict[str, dict[str, set[str]]] = {}
        for student in self.everyone:
            outcome = self.outcomes.get(student) or state.outcomes.get(student) or Outcome(status=FAILED)
            outcome.max_score = self.total_points
            outcome.reasons = list(dict.fromkeys(outcome.reasons))
            try:
                per_notebook = course.scores(student)
            except Exception:  # noqa: BLE001 - not in the gradebook (cannot happen after a run, but stay robust)
                per_notebook = {}
            cell_scores[student] = {cell: score for cells in per_notebook.values() for cell, score in cells.items()}
            outcome.score = sum(cell_scores[student].values())
            diagnosed[student] = {}
            for notebook_id in self.notebook_ids:
                diagnosed[student].update(report.misconceptions(course.path("autograded", student)
                                                                / f"{notebook_id}.ipynb"))
            state.outcomes[student] = outcome
        for gone in set(state.outcomes) - set(self.everyone):
            del state.outcomes[gone]
        state.context = self.context
        state.save()
        flat_max = {cell: points for cells in self.max_scores.values() for cell, points in cells.items()}
        report.write_csv(result.state_dir / "grades.csv", state.outcomes, cell_scores, list(flat_max),
                         {s.student: s.penalty for s in result.late})
        report.class_report(result.state_dir, self.options.assignment, state.outcomes, cell_scores, flat_max,
                            diagnosed, sandboxed=self.options.sandbox, course_bugs=result.course_bugs,
                            late=late.report_lines(result.late))
        result.outcomes = state.outcomes
        result.seconds = time.perf_counter() - self.started
        return result


class NoSuchStudents(ValueError):
    """``--students`` named someone without a submission of the assignment."""


def grade_all(runs: list[Options], on_graded: Callable[[str, str], None] = lambda assignment, student: None,
              on_start: Callable[[str, int, int], None] = lambda assignment, total, skipped: None
              ) -> Iterator[Result]:
    """Grade several assignments of one course with one pool of workers (started once, warmed up on every
    assignment's notebooks); yield each assignment's Result as it is done, in the order given."""
    if len({(o.course.resolve(), o.jobs, o.memory_mb, o.sandbox, o.timeout) for o in runs}) > 1:
        raise ValueError("grade_all: the assignments of one run share the course, workers, limits and sandbox")
    parts = [_Assignment(options) for options in runs]  # everything is checked before a worker starts
    busy = [part for part in parts if part.todo]
    executor = None
    if busy:
        notebooks = [notebook for part in busy for notebook in part.notebooks]
        executor = Executor(_worker_settings(runs[0], busy[0].course, max(p.timeout for p in busy), busy[0].seed,
                                             notebooks),
                            jobs=runs[0].jobs, warmup=[code_cells(notebook) for notebook in notebooks])
    try:
        for part in parts:
            assignment = part.options.assignment
            on_start(assignment, len(part.todo), part.skipped)
            if part.todo:
                part.execute(executor, lambda student, a=assignment: on_graded(a, student))
            yield part.finish()
    finally:
        if executor is not None:
            executor.close()


def grade(options: Options, on_graded: Callable[[str], None] = lambda student: None,
          on_start: Callable[[int, int], None] = lambda total, skipped: None) -> Result:
    """Grade one assignment (see :func:`grade_all`)."""
    return next(grade_all([options], lambda _, student: on_graded(student),
                          lambda _, total, skipped: on_start(total, skipped)))


class _Sanitizer:
    """nbgrader's sanitizing of one student's notebooks at a time; the ungradable are marked FAILED with the
    reason."""

    def __init__(self, course, notebook_ids: list[str], replays: Replays, extra: Path | None):
        self.course, self.notebook_ids, self.replays, self.extra = course, notebook_ids, replays, extra
        self.sanitize = course.sanitizer()
        self.release = {notebook_id: notes.release_cells(course.release_folder() / f"{notebook_id}.ipynb")
                        for notebook_id in notebook_ids}

    def jobs(self, student: str, outcome: Outcome) -> list[Job]:
        folder = self.course.path("submitted", student)
        jobs = []
        for notebook_id in self.notebook_ids:
            path = folder / f"{notebook_id}.ipynb"
            problem = None
            if not path.exists():
                found = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
                problem = f"missing notebook {notebook_id}.ipynb (the folder holds: {found})"
            else:
                try:
                    notebook, warnings = self.sanitize(path)
                except Exception as exc:  # noqa: BLE001 - invalid JSON, not a notebook, corrupted metadata...
                    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                    problem = f"{notebook_id}.ipynb is not a gradable notebook: {message}"
            if problem:
                outcome.status = FAILED
                outcome.reasons.append(problem)
                continue
            self.replays[student, notebook_id] = Replay(notebook)
            outcome.reasons += notes.sanitizing(path, notebook, self.release[notebook_id])
            outcome.reasons += [w for w in map(notes.nbgrader_warning, warnings) if w]
            jobs.append(Job((student, notebook_id), code_cells(notebook),
                            [folder] + ([self.extra] if self.extra else [])))
        return jobs if outcome.status == GRADED else []


#: What the job queue says when every job has been queued.
_NO_MORE = object()


def _pipeline(course, executor: Executor, todo: list[str], notebook_ids: list[str], replays: Replays,
              outcomes: dict[str, Outcome], options: Options, timeout: float, extra: Path | None, result: Result,
              on_graded) -> tuple[float, int]:
    """Sanitize, execute, grade, as a stream: this thread sanitizes (keeping a few jobs queued ahead of the workers)
    and grades each student as soon as all their notebooks ran; a second thread only moves jobs and bytes."""
    sanitizer = _Sanitizer(course, notebook_ids, replays, extra)
    queued: queue.Queue = queue.Queue()
    results: queue.Queue = queue.Queue()
    started = time.perf_counter()

    def queued_jobs():
        while True:
            try:
                job = queued.get_nowait()
            except queue.Empty:
                yield None  # nothing ready yet: the executor asks again shortly
                continue
            if job is _NO_MORE:
                return
            yield job

    def execute() -> None:
        try:
            for job, run in executor.run(queued_jobs()):
                results.put((job, run))
            results.put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to this thread
            results.put(exc)

    thread = threading.Thread(target=execute, name="executor", daemon=True)
    thread.start()
    waiting = list(todo)  # students still to sanitize
    remaining: dict[str, int] = {}  # notebooks of each sanitized student still executing
    finished = None
    try:
        while waiting or remaining:
            if waiting and (queued.qsize() < 2 * executor.jobs or results.empty()):
                student = waiting.pop(0)
                jobs = sanitizer.jobs(student, outcomes[student])
                for job in jobs:
                    queued.put(job)
                if not waiting:
                    queued.put(_NO_MORE)
                if jobs:
                    remaining[student] = len(jobs)
                else:
                    _finish(course, student, outcomes[student], replays, options, on_graded)
                continue
            item = results.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            job, run = item
            student = job.key[0]
            replay = replays[job.key]
            replay.run = run
            instructor = {c["index"]: c["instructor"] for c in job.cells}
            outcomes[student].reasons += notes.execution(replay.sanitized, run, timeout, instructor)
            bugs = notes.course_bugs(replay.sanitized, run, instructor)
            if bugs:
                result.course_bugs.setdefault(student, []).extend(bugs)
            remaining[student] -= 1
            if remaining[student] == 0:
                del remaining[student]
                finished = time.perf_counter()
                _finish(course, student, outcomes[student], replays, options, on_graded)
    except BaseException:
        while not queued.empty():  # stop: the notebooks already running finish, no other starts
            queued.get_nowait()
        raise
    finally:
        queued.put(_NO_MORE)  # (once more is harmless) so that the executor thread ends
        thread.join()
    result.workers_ready = executor.ready_after
    return (finished or time.perf_counter()) - started, executor.restarts


def _finish(course, student: str, outcome: Outcome, replays: Replays, options: Options, on_graded) -> None:
    """nbgrader's Autograde (replayed), zeros for the ungradable, then feedback."""
    if outcome.status == GRADED:
        error, warnings = course.autograde(student, replays)
        outcome.reasons += [w for w in map(notes.nbgrader_warning, warnings) if w]
        if error:
            outcome.status = FAILED
            outcome.reasons.append(f"nbgrader could not grade it: {error.strip().splitlines()[-1][:300]}")
    if outcome.status == FAILED:
        course.record_zero(student, "; ".join(outcome.reasons))
    if options.feedback:
        _feedback(course, student, outcome, options.assignment)
    on_graded(student)


def _feedback(course, student: str, outcome: Outcome, assignment: str) -> None:
    folder = course.path("feedback", student)
    if outcome.status == GRADED:
        error = course.generate_feedback(student)
        if error:
            outcome.reasons.append(f"feedback could not be generated: {error.strip().splitlines()[-1][:200]}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
        for notebook_id in course.notebook_ids():
            report.write_failure_feedback(folder / f"{notebook_id}.html", student, assignment, outcome)
