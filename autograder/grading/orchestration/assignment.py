"""One assignment's share of a run: who is graded, each student's way through nbgrader, what the run concludes.

:class:`Assignment` is prepared before any worker starts: nbgrader's configuration is checked (it must not execute
anything itself), the gradebook knows the assignment, its source and release notebooks are read once (the context of
the saved state, the workers' warm-up, the comparison that names what sanitizing undid), and every submission
folder is read once (its hash decides who is graded; the notebooks of those graded are kept as read). Then, student
by student, as :mod:`.run` streams them: :meth:`~Assignment.prepare`, :meth:`~Assignment.executed`,
:meth:`~Assignment.grade`; and once, :meth:`~Assignment.finish`.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..worker.pool import Job
from ..worker.protocol import Execution
from . import late, notes, report
from .nbgrader_app import Nbgrader
from .replay import Replay, ReplayMissing, Replays, code_cells
from .state import FAILED, GRADED, Outcome, State, context_hash, read_submission, students

#: The memory a submission may allocate when neither the command line nor nbgrader_config.py says otherwise.
DEFAULT_MEMORY_MB = 1024


@dataclass(frozen=True)
class Options:
    """How a run grades (the command line's options): the same for every assignment of the run."""

    root: Path  # the course directory (nbgrader's course root)
    jobs: int
    force: bool = False
    timeout: float | None = None  # seconds per cell; None: Execute.timeout from nbgrader_config.py
    memory_mb: int = DEFAULT_MEMORY_MB
    feedback: bool = True
    sandbox: bool = True
    students: tuple[str, ...] | None = None  # regrade only these, changed or not (None: whoever changed)


@dataclass
class Result:
    """What a run did for one assignment, for the summary."""

    assignment: str
    outcomes: dict[str, Outcome]  # every student with a submission (this run's or the previous run's outcome)
    todo: list[str]  # the students graded this run
    folder: Path  # grading/ASSIGNMENT: saved state, grades CSV, class report
    sandboxed: bool
    seconds: float = 0.0
    execution_seconds: float = 0.0
    replayed: int = 0
    restarts: int = 0
    workers_ready: float = 0.0  # seconds until every worker had imported and warmed up
    course_bugs: dict[str, list[str]] = field(default_factory=dict)
    late: list[late.LateSubmission] = field(default_factory=list)  # after this run's penalties

    @property
    def report_path(self) -> Path:
        return self.folder / "report.md"


class NoSuchStudents(ValueError):
    """``--students`` named someone without a submission of the assignment."""


def check_modules(notebooks) -> tuple[str, ...]:
    """The check modules (``autograder.checks.<exercise>``) the notebooks' cells import."""
    found = set()
    for notebook in notebooks:
        for cell in notebook.cells:
            if cell.cell_type == "code":
                found.update(re.findall(r"from\s+autograder\.checks\s+import\s+(\w+)", cell.source))
                found.update(re.findall(r"import\s+autograder\.checks\.(\w+)", cell.source))
    return tuple(sorted(f"autograder.checks.{name}" for name in found))


def _notebook(data: bytes):
    return nbformat.reads(data.decode("utf-8"), as_version=4)


class Assignment:
    """One assignment's share of a run (see the module docstring)."""

    def __init__(self, options: Options, name: str):
        self.options, self.name = options, name
        self.started = time.perf_counter()
        self.nbgrader = nbgrader = Nbgrader(options.root, name)
        nbgrader.check_replay()
        self.timeout = options.timeout or float(nbgrader.app.config.Execute.get("timeout", 30) or 30)
        nbgrader.ensure_in_gradebook()
        self.max_scores = nbgrader.notebooks()
        self.notebook_ids = list(self.max_scores)
        self.total_points = sum(sum(cells.values()) for cells in self.max_scores.values())
        self.folder = nbgrader.root / "grading" / name
        self.state = State(self.folder / "state.json")
        self.seed = os.environ.get("AUTOGRADER_SEED", "")
        sources = [path.read_bytes() for path in nbgrader.source_notebooks()]
        paths = [nbgrader.release_folder() / f"{notebook_id}.ipynb" for notebook_id in self.notebook_ids]
        releases = {path.stem: _notebook(path.read_bytes()) for path in paths if path.exists()}
        self.release = {n: notes.release_cells(releases.get(n)) for n in self.notebook_ids}
        # the reference solutions and the blank release: the checks' paths to a pass and to a failure, tracebacks
        # included (the workers run them once before any submission)
        self.references = [_notebook(data) for data in sources] + list(releases.values())
        self.context = context_hash(self.seed, self.timeout, options.memory_mb, options.sandbox, sources)
        self.everyone = students(nbgrader.submitted_folder(), name)
        chosen = options.students
        if chosen is not None and set(chosen) - set(self.everyone):
            raise NoSuchStudents(f"{name}: no submission from {', '.join(sorted(set(chosen) - set(self.everyone)))} "
                                 f"in {nbgrader.submitted_folder()}")
        self.todo: list[str] = []
        self.submitted: dict[str, dict[str, bytes]] = {}  # the notebooks of the students to grade, as read
        hashes = {}
        for student in self.everyone:
            hashes[student], notebooks = read_submission(nbgrader.path("submitted", student),
                                                         [f"{n}.ipynb" for n in self.notebook_ids])
            if (student in chosen) if chosen is not None else \
                    options.force or not self.state.unchanged(student, hashes[student], self.context):
                self.todo.append(student)
                self.submitted[student] = notebooks
        self.skipped = len(self.everyone) - len(self.todo)
        self.outcomes = {s: Outcome(hash=hashes[s], max_score=self.total_points) for s in self.todo}
        self.result = Result(name, {}, self.todo, self.folder, options.sandbox)
        self.replays = Replays()
        self.sanitize = None  # nbgrader's sanitizer, made for the first student
        self.extra: Path | None = None  # the source folder's other files, beside every submission (see .run)

    # -- one student ----------------------------------------------------------------------------------------------

    def prepare(self, student: str) -> list[Job]:
        """nbgrader's sanitizing of one student's notebooks (as read); the ungradable are marked FAILED with the
        reason and get no job."""
        self.sanitize = self.sanitize or self.nbgrader.sanitizer()
        outcome, folder = self.outcomes[student], self.nbgrader.path("submitted", student)
        kept, folders = self.submitted.pop(student), [folder] + ([self.extra] if self.extra else [])
        jobs = []
        for notebook_id in self.notebook_ids:
            path, data = folder / f"{notebook_id}.ipynb", kept.get(f"{notebook_id}.ipynb")
            problem = None
            if data is None and not path.exists():
                found = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
                problem = f"missing notebook {notebook_id}.ipynb (the folder holds: {found})"
            else:
                try:  # (a notebook that is a link was hashed as a link: read through it, as nbgrader does)
                    raw = _notebook(path.read_bytes() if data is None else data)
                    notebook, warnings = self.sanitize(path, raw)
                except Exception as exc:  # invalid JSON, not a notebook, corrupted metadata...
                    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                    problem = f"{notebook_id}.ipynb is not a gradable notebook: {message}"
            if problem:
                outcome.status = FAILED
                outcome.reasons.append(problem)
                continue
            self.replays[student, notebook_id] = Replay(notebook)
            outcome.reasons += notes.sanitizing(raw, notebook, self.release[notebook_id])
            outcome.reasons += [w for w in map(notes.nbgrader_warning, warnings) if w]
            jobs.append(Job((student, notebook_id), code_cells(notebook), folders))
        return jobs if outcome.status == GRADED else []

    def executed(self, job: Job, execution: Execution) -> None:
        """One notebook's sandboxed execution: what happened, course bugs and diagnoses, into the student's outcome."""
        student, replay, outcome = job.key[0], self.replays[job.key], self.outcomes[job.key[0]]
        replay.execution = execution
        instructor = {cell.index for cell in job.cells if cell.instructor}
        outcome.reasons += notes.execution(replay.sanitized, execution, self.timeout, instructor)
        bugs = notes.course_bugs(replay.sanitized, execution, instructor)
        if bugs:
            self.result.course_bugs.setdefault(student, []).extend(bugs)
        for cell, names in report.misconceptions(replay.sanitized, execution).items():
            outcome.diagnoses[cell] = sorted(names | set(outcome.diagnoses.get(cell, [])))

    def grade(self, student: str) -> None:
        """nbgrader's Autograde (replayed: one pass, its gradebook records and late penalty), or 0 for the ungradable;
        then feedback."""
        outcome = self.outcomes[student]
        if outcome.status == GRADED:
            error, warnings = self.nbgrader.autograde(student, self.replays)
            outcome.reasons += [w for w in map(notes.nbgrader_warning, warnings) if w]
            if error:
                outcome.status = FAILED
                outcome.reasons.append(f"nbgrader could not grade it: {error.strip().splitlines()[-1][:300]}")
        if outcome.status == FAILED:
            self.nbgrader.record_zero(student, "; ".join(outcome.reasons))
        if not self.options.feedback:
            return
        folder = self.nbgrader.path("feedback", student)
        if outcome.status == GRADED:
            error = self.nbgrader.feedback(student)
            if error:
                outcome.reasons.append(f"feedback could not be generated: {error.strip().splitlines()[-1][:200]}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
            for notebook_id in self.notebook_ids:
                report.write_failure_feedback(folder / f"{notebook_id}.html", student, self.name, outcome)

    # -- the whole class ------------------------------------------------------------------------------------------

    def finish(self) -> Result:
        """Every graded notebook replayed; late penalties for the students not graded now; every score from one
        gradebook session; the saved state, grades CSV and class report."""
        nbgrader, state, result = self.nbgrader, self.state, self.result
        graded = {s for s in self.todo if self.outcomes[s].status == GRADED}
        missing = self.replays.unreplayed(graded)
        if missing:
            raise ReplayMissing(f"nbgrader graded {missing} without their sandboxed execution")
        result.replayed = sum(r.replayed for r in self.replays.values())
        # nbgrader's Autograde applied the late policy to those it graded now; the others get it again (a changed due
        # date, extension or policy, or a submission recorded as 0, never keeps a stale penalty), and feedback showing
        # a penalty the gradebook no longer has is generated again
        changed = late.recompute(nbgrader.db_url, self.name, nbgrader.app.config, except_for=graded)
        if self.options.feedback:
            for student in sorted(set(changed) - set(self.todo)):
                if state.outcomes.get(student, Outcome(status=FAILED)).status == GRADED:
                    nbgrader.feedback(student)
        recorded = nbgrader.recorded()
        result.late = [late.LateSubmission(s, r.seconds_late, r.score, r.penalty)
                       for s, r in sorted(recorded.items()) if r.seconds_late > 0]
        cell_scores: dict[str, dict[str, float]] = {}
        for student in self.everyone:
            outcome = self.outcomes.get(student) or state.outcomes.get(student) or Outcome(status=FAILED)
            outcome.max_score = self.total_points
            outcome.reasons = list(dict.fromkeys(outcome.reasons))
            cell_scores[student] = recorded[student].scores if student in recorded else {}
            outcome.score = sum(cell_scores[student].values())
            state.outcomes[student] = outcome
        for gone in set(state.outcomes) - set(self.everyone):
            del state.outcomes[gone]
        state.context = self.context
        state.save()
        flat_max = {cell: points for cells in self.max_scores.values() for cell, points in cells.items()}
        report.write_csv(self.folder / "grades.csv", state.outcomes, cell_scores, list(flat_max),
                         {s.student: s.penalty for s in result.late})
        report.class_report(self.folder, self.name, state.outcomes, cell_scores, flat_max,
                            {s: o.diagnoses for s, o in state.outcomes.items()}, sandboxed=self.options.sandbox,
                            course_bugs=result.course_bugs, late=late.report_lines(result.late))
        result.outcomes = state.outcomes
        result.seconds = time.perf_counter() - self.started
        return result
