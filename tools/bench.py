"""``make bench``: ``python -m autograder grade`` against serial ``nbgrader autograde`` on the same 40 submissions.

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


def _make_class(root: Path, assignment: str, size: int) -> list[str]:
    course.copy_course(root, assignment_ids=[assignment])
    course.generate_release(root, [assignment])
    reference = synthetic.reference_answers(root, assignment)
    variants = [reference, {}] + [{**reference, **w["replace"]} for w in synthetic.catalogue(assignment)]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="01-chain-rule")
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--ours-only", action="store_true", help="time the class grader only (no nbgrader, no floor)")
    parser.add_argument("--no-floor", action="store_true", help="skip the fresh-kernel floor (about 150 s)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    scratch = Path(tempfile.mkdtemp(prefix="autograder-bench-"))
    try:
        ours, theirs = scratch / "ours" / "course", scratch / "nbgrader" / "course"
        load_at_start = os.getloadavg()[0]
        students = _make_class(ours, args.assignment, args.size)
        shutil.copytree(ours, theirs)
        print(f"{args.size} submissions of {args.assignment} (reference, blank and catalogued mistakes), "
              f"{cores} cores, {_load()} at start")

        env = course.tool_environment()
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "autograder", "grade", args.assignment, "--course", str(ours),
                               "--no-feedback", "--quiet"], cwd=ours, env=env, capture_output=True, text=True)
        ours_seconds = time.perf_counter() - start
        print(f"python -m autograder grade (--jobs {cores}, sandboxed): {ours_seconds:7.1f} s ({_load()})", flush=True)
        if done.returncode != 0 or "WITHOUT THE SANDBOX" in done.stdout:
            print(done.stdout, done.stderr)
            return 1
        print("  " + next(line for line in done.stdout.splitlines() if " graded, " in line).strip())
        if args.ours_only:
            return 0
        start = time.perf_counter()
        plain = course.nbgrader("autograde", args.assignment, "--force", "--log-level=ERROR", course=theirs,
                                check=False)
        theirs_seconds = time.perf_counter() - start
        print(f"nbgrader autograde (serial):                     {theirs_seconds:7.1f} s ({_load()})", flush=True)
        graded = [s for s in students if (theirs / "autograded" / s / args.assignment).exists()]
        if plain.returncode != 0:
            print(f"  (nbgrader could not grade {len(students) - len(graded)} of them: "
                  f"{', '.join(sorted(set(students) - set(graded)))})")
        same = _scores(ours, args.assignment, graded) == _scores(theirs, args.assignment, graded)
        loaded = os.getloadavg()[0] > 1 or load_at_start > 1
        print(f"ratio:                                           {theirs_seconds / ours_seconds:7.1f}x faster "
              f"({_load()}, {load_at_start:.1f} at start"
              + ("; measured under load: not the product's figure, run it again on a quiet machine)" if loaded
                 else ")"))
        if not args.no_floor:
            floor = _floor(theirs, args.assignment, graded, cores) * len(students) / max(1, len(graded))
            print(f"fresh-kernel floor (sum / {cores} cores):     {floor:7.1f} s "
                  f"(kernel-per-submission designs cannot beat this: {theirs_seconds / floor:.1f}x at best)")
        print(f"scores identical to nbgrader's for all {len(graded)} submissions it graded: {'yes' if same else 'NO'}")
        return 0 if same else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
