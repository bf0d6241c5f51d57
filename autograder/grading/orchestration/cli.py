"""``python -m autograder grade ASSIGNMENT...``: the command line and the progress bar.

The run itself is :func:`.run.grade`: several assignments share one pool of workers (started and warmed up once),
graded one after the other, each with its own summary (:func:`.report.summary`) and class report. ``--students a,b``
regrades those students only (changed or not); the others keep their last grades.

Without a working sandbox the command stops with an error that names what is missing and how to proceed (exit
status 2); ``--no-sandbox`` grades anyway and says so in the summary and the class report. A ``--students`` name
without a submission also stops the run before anything runs (status 2). Exit status 1 when a submission could not be
graded, 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..isolation.sandbox import SandboxUnavailable
from ..worker.pool import WorkerFailed
from . import report
from .assignment import DEFAULT_MEMORY_MB, NoSuchStudents, Options
from .replay import ReplayNotInstalled
from .run import grade
from .state import FAILED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assignments", nargs="+", metavar="assignment",
                        help="assignment ids, e.g. 01-chain-rule (several share one pool of workers)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                        help="submissions executed at once (default: all cores)")
    parser.add_argument("--force", action="store_true", help="grade every submission, changed or not")
    parser.add_argument("--students", type=lambda text: tuple(s.strip() for s in text.split(",") if s.strip()),
                        default=None, metavar="A,B", help="regrade only these students (changed or not)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per cell (default: Execute.timeout from nbgrader_config.py)")
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB,
                        help=f"memory a submission may allocate, in MB (default {DEFAULT_MEMORY_MB})")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.add_argument("--no-feedback", action="store_true", help="skip feedback HTML (faster)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade without the sandbox (bubblewrap): only for submissions you trust")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


class Progress:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, label: str, quiet: bool):
        self.label, self.total, self.done, self.quiet = label, 0, 0, quiet
        self.tty = sys.stderr.isatty()
        self.started = time.perf_counter()

    def start(self, total: int) -> None:
        self.total = total
        self.quiet = self.quiet or total == 0
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


def main(args: argparse.Namespace) -> int:
    options = Options(root=args.course, jobs=args.jobs, force=args.force, timeout=args.timeout,
                      memory_mb=args.memory_mb, feedback=not args.no_feedback, sandbox=not args.no_sandbox,
                      students=args.students)
    progress: dict[str, Progress] = {}

    def started(assignment: str, total: int, skipped: int) -> None:
        print(f"{assignment}: {total + skipped} submissions, {total} to grade"
              + (f" ({skipped} unchanged since the last run; --force regrades them)"
                 if skipped and args.students is None else ""), flush=True)
        progress[assignment] = Progress("grade", args.quiet)
        progress[assignment].start(total)

    failed = False
    try:
        for result in grade(options, args.assignments, on_start=started,
                            on_graded=lambda assignment, student: progress[assignment].step(student)):
            print(report.summary(result.assignment, result), flush=True)
            failed = failed or any(o.status == FAILED for o in result.outcomes.values())
    except SandboxUnavailable as error:
        print(f"autograder grade: cannot grade safely here: {error}", file=sys.stderr)
        return 2
    except (WorkerFailed, ReplayNotInstalled, NoSuchStudents) as error:
        print(f"autograder grade: {error}", file=sys.stderr)
        return 2
    return 1 if failed else 0
