"""``python -m autograder grade ASSIGNMENT``: the whole run, from submitted/ to the summary and the class report."""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat

from . import report
from .batch import FAILED, GRADED, Outcome, State, context_hash, folder_hash, students
from .executor import Executor, Job

#: Limits that apply when neither the command line nor nbgrader_config.py says otherwise.
DEFAULT_MEMORY_MB = 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assignment", help="assignment id, e.g. 01-chain-rule")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                        help="submissions executed at once (default: all cores)")
    parser.add_argument("--force", action="store_true", help="grade every submission, changed or not")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per cell (default: Execute.timeout from nbgrader_config.py)")
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB,
                        help=f"memory a submission may allocate, in MB (default {DEFAULT_MEMORY_MB})")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.add_argument("--no-feedback", action="store_true", help="skip feedback HTML (faster)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


class Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, label: str, total: int, quiet: bool):
        self.label, self.total, self.done, self.quiet = label, total, 0, quiet or total == 0
        self.tty = sys.stderr.isatty()
        self.started = time.perf_counter()
        self._draw()

    def step(self, note: str = "") -> None:
        self.done += 1
        self._draw(note)

    def _draw(self, note: str = "") -> None:
        if self.quiet:
            return
        width = 30
        filled = int(width * self.done / self.total)
        line = (f"{self.label:9s} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.started:5.1f} s {note[:40]}")
        if self.tty:
            sys.stderr.write("\r" + line.ljust(100) + ("\n" if self.done == self.total else ""))
        elif self.done in (0, self.total) or self.done % max(1, self.total // 10) == 0:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def protect_course(course) -> None:
    """When grading as root: nothing a student's process could reach stays readable by other users.

    The gradebook (hidden tests), the sources, every student's submission, the graded copies and the feedback
    become private to their owner; the student release and the course package stay readable.
    """
    if os.geteuid() != 0:
        return
    root = course.root
    for name in ("gradebook.db", "gradebook.db-journal"):
        if (root / name).exists():
            os.chmod(root / name, 0o600)
    for folder in (course.coursedir.submitted_directory, course.coursedir.autograded_directory,
                   course.coursedir.feedback_directory, course.coursedir.source_directory, "grading"):
        path = root / folder
        path.mkdir(exist_ok=True)
        os.chmod(path, stat.S_IMODE(path.stat().st_mode) & ~0o077)


def _label(notebook, index: int) -> str:
    grade_id = notebook.cells[index].metadata.get("nbgrader", {}).get("grade_id")
    return f"cell {index}" + (f" ({grade_id})" if grade_id else "")


def execution_notes(notebook, cells: dict[int, dict], problem: str | None, timeout: float) -> list[str]:
    """What happened while running a submission, in words: crashes, timeouts, floods, errors in learner code."""
    from .replay import code_cells

    notes = []
    instructor = {c["index"]: c["instructor"] for c in code_cells(notebook)}
    for index, result in sorted(cells.items()):
        for output in result["outputs"]:
            if output["output_type"] == "error":
                if output["ename"] == "CellTimeoutError":
                    notes.append(f"{_label(notebook, index)} timed out after {timeout:g} s")
                elif output["ename"] == "DeadKernelError":
                    if not output["evalue"].startswith("Not run"):
                        notes.append(f"{_label(notebook, index)}: {output['evalue']}")
                elif not instructor.get(index):
                    notes.append(f"{_label(notebook, index)} raised {output['ename']}: {output['evalue'][:120]}")
            elif output["output_type"] == "stream" and "dropped by the grader]" in output["text"][-120:]:
                notes.append(f"{_label(notebook, index)} printed too much; its output was cut")
    if problem and not any("kernel died" in n for n in notes):
        notes.append(problem)
    return notes


def _sanitizing_notes(path: Path, sanitized, release: dict[str, dict]) -> list[str]:
    """What nbgrader's sanitizing undid, in words: a changed kernelspec, edited instructor cells (compared with the
    student release, since every submission's hidden-test cells differ from the source on purpose)."""
    try:
        raw = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - it was readable a moment ago; nothing to add
        return []
    notes = []
    before, after = raw.metadata.get("kernelspec"), sanitized.metadata.get("kernelspec")
    if before != after:
        notes.append(f"the kernelspec was changed to {before}; graded with {after}")
    for cell in raw.cells:
        meta = cell.metadata.get("nbgrader", {}) if isinstance(cell.metadata.get("nbgrader"), dict) else {}
        original = release.get(meta.get("grade_id"))
        if original and original["locked"] and cell.source != original["source"]:
            notes.append(f"edited the instructor cell {meta['grade_id']}; nbgrader restored it")
        if original and meta.get("points") not in (None, original["points"]):
            notes.append(f"changed the points of {meta['grade_id']} to {meta.get('points')}; nbgrader restored "
                         f"{original['points']}")
    return list(dict.fromkeys(notes))


def _release_cells(course, notebook_id: str) -> dict[str, dict]:
    path = Path(course.coursedir.format_path(course.coursedir.release_directory, ".", course.assignment)) \
        / f"{notebook_id}.ipynb"
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - no release here: no comparison
        return {}
    cells = {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id"):
            locked = bool(meta.get("locked") or (meta.get("grade") and not meta.get("solution")))
            cells[meta["grade_id"]] = {"source": cell.source, "locked": locked, "points": meta.get("points")}
    return cells


def grade(args: argparse.Namespace) -> int:
    from .nbgrader_app import Course
    from .replay import ReplayExecute, ReplaySanitize, cell_key, code_cells

    started = time.perf_counter()
    course = Course(args.course, args.assignment)
    timeout = args.timeout or float(course.app.config.Execute.get("timeout", 30) or 30)
    if course.ensure_in_gradebook():
        print(f"added {args.assignment} to the gradebook (nbgrader generate_assignment, release in a temp folder)")
    protect_course(course)
    notebook_ids = course.notebook_ids()
    max_scores = course.max_scores()
    total_points = sum(sum(cells.values()) for cells in max_scores.values())
    state_dir = course.root / "grading" / args.assignment
    state = State(state_dir / "state.json")
    seed = os.environ.get("AUTOGRADER_SEED", "")
    context = context_hash(seed, timeout, args.memory_mb, [p.read_bytes() for p in course.source_notebooks()])
    submitted = Path(course.coursedir.format_path(course.coursedir.submitted_directory, ".", ".")).resolve()
    everyone = students(submitted, args.assignment)
    hashes = {s: folder_hash(course.path("submitted", s)) for s in everyone}
    todo = [s for s in everyone if args.force or not state.unchanged(s, hashes[s], context)]
    skipped = len(everyone) - len(todo)
    print(f"{args.assignment}: {len(everyone)} submissions, {len(todo)} to grade"
          + (f" ({skipped} unchanged since the last run; --force regrades them)" if skipped else ""))

    # Phase 1 (parallel): sanitize each submission with nbgrader's preprocessors, execute it in a confined process
    # forked from the preloaded server. Phase 2 (a worker thread, in this process, as results arrive): nbgrader's
    # Autograde with the phase-1 outputs, then feedback. The thread keeps this process's core busy while the
    # children run; the gradebook is written by that one thread only.
    outcomes: dict[str, Outcome] = {s: Outcome(hash=hashes[s], max_score=total_points) for s in todo}
    sanitized: dict[tuple[str, str], object] = {}
    extra = course.extra_files_folder()
    release = {notebook_id: _release_cells(course, notebook_id) for notebook_id in notebook_ids}
    sanitize = course.sanitizer()
    remaining = {s: len(notebook_ids) for s in todo}  # notebooks of each student still to execute
    phase2: queue.Queue = queue.Queue()

    def jobs() -> Iterator[Job]:
        for student in todo:
            folder = course.path("submitted", student)
            for notebook_id in notebook_ids:
                path = folder / f"{notebook_id}.ipynb"
                problem = None
                if not path.exists():
                    found = ", ".join(sorted(p.name for p in folder.iterdir())) or "nothing"
                    problem = f"missing notebook {notebook_id}.ipynb (the folder holds: {found})"
                else:
                    try:
                        notebook, warnings = sanitize(path)
                    except Exception as exc:  # noqa: BLE001 - invalid JSON, not a notebook, corrupted metadata...
                        message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                        problem = f"{notebook_id}.ipynb is not a gradable notebook: {message}"
                if problem:
                    outcomes[student].status = FAILED
                    outcomes[student].reasons.append(problem)
                    _executed(student)
                    continue
                sanitized[student, notebook_id] = notebook
                ReplaySanitize.sanitized[student, notebook_id] = notebook
                outcomes[student].reasons += _sanitizing_notes(path, notebook, release[notebook_id])
                outcomes[student].reasons += [w for w in map(_plain_warning, warnings) if w]
                yield Job(f"{student}/{notebook_id}", code_cells(notebook), [folder] + ([extra] if extra else []))

    def _executed(student: str) -> None:
        remaining[student] -= 1
        if remaining[student] == 0:
            phase2.put(student)

    environment = {"AUTOGRADER_SEED": seed} if seed else {}
    executor = Executor(jobs=args.jobs, timeout=timeout, memory_mb=args.memory_mb, environment=environment,
                        warmup=course.source_notebooks())
    ReplayExecute.outputs.clear()
    ReplaySanitize.sanitized.clear()
    ReplayExecute.hits = ReplayExecute.misses = 0

    def fallback(notebook, resources):  # phase 2 found no phase-1 outputs (cannot happen unless files changed)
        student = resources["nbgrader"]["student"]
        job = Job(f"{student}/fallback", code_cells(notebook), [course.path("submitted", student)])
        return Executor(jobs=1, timeout=timeout, memory_mb=args.memory_mb, environment=environment,
                        first_id=executor.ids[-1] + 1).run_one(job).cells

    ReplayExecute.fallback = staticmethod(fallback)
    progress = Progress("grade", len(todo), args.quiet)
    errors: list[BaseException] = []
    worker = threading.Thread(target=_phase2, args=(course, todo, outcomes, phase2, progress, args, errors),
                              name="nbgrader", daemon=True)
    worker.start()
    phase1 = time.perf_counter()
    try:
        for job, result in executor.run(jobs()):
            student, notebook_id = job.name.split("/", 1)
            notebook = sanitized[student, notebook_id]
            ReplayExecute.outputs[cell_key(notebook)] = result.cells
            outcomes[student].reasons += execution_notes(notebook, result.cells, result.problem, timeout)
            _executed(student)
    finally:
        phase1 = time.perf_counter() - phase1
        phase2.put(None)
        worker.join()
        if extra:
            shutil.rmtree(extra, ignore_errors=True)
    if errors:
        raise errors[0]

    # Scores from the gradebook, state, CSV, class report, summary.
    cell_scores: dict[str, dict[str, float]] = {}
    diagnosed: dict[str, dict[str, set[str]]] = {}
    for student in everyone:
        outcome = outcomes.get(student) or state.outcomes.get(student) or Outcome(status=FAILED)
        outcome.max_score = total_points
        outcome.reasons = list(dict.fromkeys(outcome.reasons))
        try:
            per_notebook = course.scores(student)
        except Exception:  # noqa: BLE001 - not in the gradebook (cannot happen after a run, but stay robust)
            per_notebook = {}
        cell_scores[student] = {cell: score for cells in per_notebook.values() for cell, score in cells.items()}
        outcome.score = sum(cell_scores[student].values())
        diagnosed[student] = {}
        for notebook_id in notebook_ids:
            autograded = course.path("autograded", student) / f"{notebook_id}.ipynb"
            diagnosed[student].update(report.misconceptions(autograded))
        state.outcomes[student] = outcome
    for gone in set(state.outcomes) - set(everyone):
        del state.outcomes[gone]
    state.context = context
    state.save()
    flat_max = {cell: points for cells in max_scores.values() for cell, points in cells.items()}
    report.write_csv(state_dir / "grades.csv", state.outcomes, cell_scores, list(flat_max))
    report_path = report.class_report(state_dir, args.assignment, state.outcomes, cell_scores, flat_max, diagnosed)
    replay = f"replayed {ReplayExecute.hits} notebooks from phase 1, re-executed {ReplayExecute.misses}"
    return _summary(args, state.outcomes, todo, report_path, state_dir, phase1, time.perf_counter() - started,
                    replay)


def _phase2(course, todo, outcomes, students: queue.Queue, progress: Progress, args, errors: list) -> None:
    """The worker thread: nbgrader's Autograde (Execute replayed), zeros for the ungradable, then feedback."""
    try:
        while (student := students.get()) is not None:
            outcome = outcomes[student]
            if outcome.status == GRADED:
                error, warnings = course.autograde(student)
                outcome.reasons += [w for w in map(_plain_warning, warnings) if w]
                if error:
                    outcome.status = FAILED
                    outcome.reasons.append(f"nbgrader could not grade it: {error.strip().splitlines()[-1][:300]}")
            if outcome.status == FAILED:
                course.record_zero(student, "; ".join(outcome.reasons))
            if not args.no_feedback:
                _feedback(course, student, outcome, args.assignment)
            progress.step(student)
    except BaseException as exc:  # noqa: BLE001 - handed to the main thread
        errors.append(exc)


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


def _plain_warning(message: str) -> str:
    """nbgrader's warnings about a submission, in the words of the summary (others are dropped)."""
    if "has changed!" in message and "'checksum'" not in message and "'points'" not in message:
        # OverwriteCells: "Attribute 'x' for cell y has changed! (should be: a, got: b)"; checksums and points are
        # reported by _sanitizing_notes (hidden-test cells always differ from the source)
        return "nbgrader restored an instructor cell: " + message.replace(" has changed!", "")
    if message.startswith("Missing grade cell"):
        return "deleted a test cell; nbgrader put it back: " + message
    if "exists multiple times" in message:
        return "duplicated a graded cell; nbgrader kept the last copy: " + message
    if "does not exist in the database" in message:
        return "a cell claims an unknown grade id; treated as an ordinary cell: " + message
    return ""


def _summary(args, outcomes: dict[str, Outcome], todo: list[str], report_path: Path, state_dir: Path,
             phase1: float, seconds: float, replay: str) -> int:
    numbers = report.summary_numbers(outcomes)
    total = next(iter(outcomes.values())).max_score if outcomes else 0
    print(f"\n{args.assignment}: {numbers['graded']} graded, {numbers['failed']} could not be graded "
          f"({len(todo)} processed this run in {seconds:.1f} s; execution {phase1:.1f} s; {replay})")
    if numbers["graded"]:
        print(f"  score: mean {numbers['mean']:.2f}, median {numbers['median']:.2f} (out of {total:g})")
    noted = {s: o for s, o in outcomes.items() if o.status == GRADED and o.reasons and s in todo}
    if noted:
        print("  graded, with notes:")
        for student, outcome in sorted(noted.items()):
            print(f"    {student} ({outcome.score:g}): {'; '.join(outcome.reasons)[:300]}")
    failed = {s: o for s, o in outcomes.items() if o.status == FAILED}
    if failed:
        print("  could not be graded (recorded as 0):")
        for student, outcome in sorted(failed.items()):
            print(f"    {student}: {'; '.join(outcome.reasons)[:300]}")
    print(f"  class report: {report_path}")
    print(f"  grades: {state_dir / 'grades.csv'}; feedback: feedback/<student>/{args.assignment}/")
    if os.geteuid() != 0:
        print("  note: not running as root, so submissions ran with your own user's permissions "
              "(see the README, Instructors: grading safely)")
    return 1 if failed else 0


def main(args: argparse.Namespace) -> int:
    return grade(args)
