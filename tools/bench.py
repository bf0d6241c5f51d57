"""``make bench``: ``python -m autograder grade`` against serial ``nbgrader autograde`` on the same 40 submissions.

Two classes of 40, both against nbgrader in the same run: the *mixed* class (the reference, the blank release and
the catalogued mistakes in turn: most stop at their first failing case, the cheap class) and the *correct* class
(40 copies of the reference: every check does all its work, the class that costs most and the product's figure).
``--per-assignment`` instead grades four correct copies of every assignment, each side once, and prints the seconds
per correct notebook per worker, ours and nbgrader's (which has one worker).

Prints both wall-clock times, their ratio with the load average beside it, and the fresh-kernel floor: the time to
execute each (sanitized) notebook once in a fresh Jupyter kernel, summed and divided by the cores, which is the best
any design that starts a kernel per submission could do. Also checks that every score is identical. A report, not a
test.

The machine's load changes both sides unequally (a loaded machine slows nbgrader's kernel starts far more than warm
workers), so a ratio measured at a load average above 1 is not the product's figure: the report says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder import course
from tools import synthetic


def _scores(root: Path, assignment: str, students: list[str]) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {s: {g.name: float(g.score)
                    for g in gradebook.find_submission_notebook(assignment, assignment, s).grades}
                for s in students}


#: The classes a run can grade: what each student hands in, in turn.
CLASSES = ("mixed", "correct")


def _make_class(root: Path, assignment: str, size: int, kind: str = "mixed") -> list[str]:
    course.copy_course(root, assignment_ids=[assignment])
    course.generate_release(root, [assignment])
    reference = synthetic.reference_answers(root, assignment)
    variants = [reference] if kind == "correct" else (
        [reference, {}] + [{**reference, **w["replace"]} for w in synthetic.catalogue(assignment)])
    students = [f"s{i:03d}" for i in range(size)]
    for i, student in enumerate(students):
        synthetic.write_submission(root, assignment, student, variants[i % len(variants)])
    return students


def _floor(root: Path, assignment: str, students: list[str], cores: int) -> float:
    """Execute every autograded (sanitized) notebook once in a fresh kernel; total seconds / cores."""
    from tools.notebooks import execute

    total = 0.0
    for student in students:
        start = time.perf_counter()
        execute(root / "autograded" / student / assignment / f"{assignment}.ipynb", allow_errors=True)
        total += time.perf_counter() - start
    return total / cores


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def _grade_ours(root: Path, assignment: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", assignment, "--course", str(root),
                           "--no-feedback", "--quiet"], cwd=root, env=course.tool_environment(), capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or "WITHOUT THE SANDBOX" in done.stdout:
        raise SystemExit(f"python -m autograder grade failed:\n{done.stdout}\n{done.stderr}")
    return seconds, next(line for line in done.stdout.splitlines() if " graded, " in line).strip()


def _grade_theirs(root: Path, assignment: str) -> tuple[float, bool]:
    start = time.perf_counter()
    plain = course.nbgrader("autograde", assignment, "--force", "--log-level=ERROR", course=root, check=False)
    return time.perf_counter() - start, plain.returncode == 0


def bench_class(scratch: Path, assignment: str, size: int, kind: str, floor: bool) -> bool:
    """One class graded by both; prints the figures; True when every score is nbgrader's."""
    cores = os.cpu_count() or 1
    ours, theirs = scratch / kind / "ours" / "course", scratch / kind / "nbgrader" / "course"
    load_at_start = os.getloadavg()[0]
    students = _make_class(ours, assignment, size, kind)
    shutil.copytree(ours, theirs)
    what = ("the reference, blank and catalogued mistakes" if kind == "mixed" else "every one the reference")
    print(f"\n{kind} class: {size} submissions of {assignment} ({what}), {cores} cores, {_load()} at start")
    ours_seconds, summary = _grade_ours(ours, assignment)
    print(f"python -m autograder grade (--jobs {cores}, sandboxed): {ours_seconds:7.1f} s ({_load()})", flush=True)
    print("  " + summary)
    theirs_seconds, complete = _grade_theirs(theirs, assignment)
    print(f"nbgrader autograde (serial):                     {theirs_seconds:7.1f} s ({_load()})", flush=True)
    graded = [s for s in students if (theirs / "autograded" / s / assignment).exists()]
    if not complete:
        print(f"  (nbgrader could not grade {len(students) - len(graded)} of them: "
              f"{', '.join(sorted(set(students) - set(graded)))})")
    same = _scores(ours, assignment, graded) == _scores(theirs, assignment, graded)
    loaded = os.getloadavg()[0] > 1 or load_at_start > 1
    print(f"ratio:                                           {theirs_seconds / ours_seconds:7.1f}x faster "
          f"({_load()}, {load_at_start:.1f} at start"
          + ("; measured under load: not the product's figure, run it again on a quiet machine)" if loaded else ")"))
    if floor:
        seconds = _floor(theirs, assignment, graded, cores) * len(students) / max(1, len(graded))
        print(f"fresh-kernel floor (sum / {cores} cores):     {seconds:7.1f} s "
              f"(kernel-per-submission designs cannot beat this: {theirs_seconds / seconds:.1f}x at best)")
    print(f"scores identical to nbgrader's for all {len(graded)} submissions it graded: {'yes' if same else 'NO'}")
    return same


def per_assignment(scratch: Path, copies: int) -> bool:
    """Seconds per correct notebook per worker, ours and nbgrader's, for every assignment."""
    cores = os.cpu_count() or 1
    print(f"{copies} correct copies of each assignment; seconds per notebook per worker ({cores} workers for ours, "
          f"1 for nbgrader), {_load()} at start")
    print(f"{'assignment':24} {'ours':>7} {'nbgrader':>9} {'ratio':>6}  scores")
    all_same = True
    for assignment in course.assignments():
        ours, theirs = scratch / assignment / "ours" / "course", scratch / assignment / "nbgrader" / "course"
        students = _make_class(ours, assignment, copies, "correct")
        shutil.copytree(ours, theirs)
        ours_seconds, _ = _grade_ours(ours, assignment)
        theirs_seconds, _ = _grade_theirs(theirs, assignment)
        same = _scores(ours, assignment, students) == _scores(theirs, assignment, students)
        all_same &= same
        mine, plain = ours_seconds * cores / copies, theirs_seconds / copies
        print(f"{assignment:24} {mine:7.1f} {plain:9.1f} {plain / mine:6.2f}  {'identical' if same else 'DIFFER'}",
              flush=True)
    print(f"{_load()} at the end")
    return all_same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="01-chain-rule")
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--class", dest="kinds", choices=CLASSES, action="append",
                        help="grade only this class (repeatable; default: both)")
    parser.add_argument("--ours-only", action="store_true", help="time the class grader only (no nbgrader, no floor)")
    parser.add_argument("--no-floor", action="store_true", help="skip the fresh-kernel floor (about 150 s)")
    parser.add_argument("--per-assignment", type=int, metavar="COPIES", nargs="?", const=4,
                        help="grade COPIES (default 4) correct copies of every assignment instead")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="autograder-bench-"))
    try:
        if args.per_assignment:
            return 0 if per_assignment(scratch, args.per_assignment) else 1
        if args.ours_only:
            students = _make_class(scratch / "ours", args.assignment, args.size, (args.kinds or ["mixed"])[0])
            seconds, summary = _grade_ours(scratch / "ours", args.assignment)
            print(f"{len(students)} submissions: python -m autograder grade {seconds:.1f} s ({_load()})\n  {summary}")
            return 0
        same = [bench_class(scratch, args.assignment, args.size, kind, not args.no_floor)
                for kind in (args.kinds or CLASSES)]
        return 0 if all(same) else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
