"""``python -m mutation [run] [--exercise NN-slug ...] [--jobs N] [--keep]``: mutation-test the graders (mutmut),
write mutation/results/NN-slug.json and mutation/REPORT.md. ``python -m mutation report`` only re-renders the report
(after editing mutation/equivalent.toml); ``python -m mutation sample`` picks mutation/sample.toml afresh from the
results (tests/test_mutants_sample.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from autograder import course

from . import cells, extract, report, results, sample, workspace

MUTMUT = Path(sys.executable).parent / "mutmut"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=course.ROOT, capture_output=True, text=True, check=False).stdout.strip()


def source_state(assignment: str) -> str:
    """The last commit of the exercise's solution notebook and check module, "+ edits" if either differs from it."""
    paths = [f"solutions/{assignment}", f"autograder/checks/{extract.module_name(assignment)}.py"]
    commit = _git("log", "-1", "--format=%h", "--", *paths) or "uncommitted"
    return commit + (" + edits" if _git("status", "--porcelain", "--", *paths) else "")


def _last_status(log: Path) -> str:
    """mutmut's latest progress line ("123/710  🎉 120 ... 🙁 3 ...")."""
    if not log.exists():
        return ""
    tail = log.read_bytes()[-400:].decode(errors="replace").replace("\r", "\n").splitlines()
    return next((line.strip() for line in reversed(tail) if "/" in line and "🎉" in line), "")


def run_mutmut(project: Path, jobs: int, crash_log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(course.ROOT), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", cells.CRASH_LOG: str(crash_log)}
    env.pop("AUTOGRADER_SEED", None)
    env.pop("MUTANT_UNDER_TEST", None)
    log = project / "mutmut.log"
    with log.open("w") as out:
        process = subprocess.Popen([str(MUTMUT), "run", "--max-children", str(jobs)], cwd=project, env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
        shown = ""
        while process.poll() is None:
            time.sleep(10)
            status = _last_status(log)
            if status and status != shown:
                print("  mutmut:", status, flush=True)
                shown = status
    if process.returncode != 0:
        text = log.read_text(errors="replace").replace("\r", "\n").splitlines()
        print("\n".join(line for line in text[-60:] if "🎉" not in line), file=sys.stderr)
        raise SystemExit(f"mutmut failed (exit {process.returncode}); its log: {log}")


def measurable(exercises: list[extract.Exercise]) -> list[extract.Exercise]:
    """The exercises whose reference solution passes its own test cells; the others are named and left out (their
    last results stay in the report), so that one chapter in the middle of an edit does not stop the run."""
    kept = []
    for exercise in exercises:
        problem = sample.reference_problem(exercise)
        if problem:
            print(f"Skipping {exercise.assignment}: its reference solution fails its own test cell {problem}",
                  file=sys.stderr)
        else:
            kept.append(exercise)
    return kept


def run(assignments: list[str], jobs: int, keep: bool) -> bool:
    """Measure ``assignments``; False when one had to be left out."""
    seeds = workspace.settings()["seeds"]
    exercises = measurable([extract.exercise(a) for a in assignments])
    if not exercises:
        return False
    complete, assignments = len(exercises) == len(assignments), [e.assignment for e in exercises]
    scratch = Path(tempfile.mkdtemp(prefix="mutants-"))
    project = workspace.build(scratch / "project", exercises, seeds)
    crash_log = scratch / "crashes.jsonl"
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    print(f"Mutating {', '.join(assignments)} in {project} on {jobs} workers "
          f"(load average {load_before:.1f}) ...", flush=True)
    failed = True
    try:
        run_mutmut(project, jobs, crash_log)
        seconds = time.monotonic() - started
        run_info = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"), "seeds": seeds,
                    "jobs": jobs, "seconds": round(seconds, 1), "exercises_in_run": len(assignments),
                    "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
        for exercise in exercises:
            report.save(exercise.assignment, results.collect(project, exercise, crash_log),
                        {"source": source_state(exercise.assignment), **run_info})
        failed = False
    finally:
        if keep or failed:
            print(f"Workspace kept: {project} (cd there; mutmut show NAME, mutmut results)")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    summaries = report.write()
    print(f"\n{len(assignments)} exercise(s) in {seconds:.0f} s; report: {report.REPORT.relative_to(course.ROOT)}\n")
    print("\n".join(report.table([s for s in summaries if s.assignment in assignments])))
    return complete


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__)
    parser.add_argument("command", nargs="?", choices=["run", "report", "sample"], default="run")
    parser.add_argument("--exercise", action="append", default=[], metavar="NN-slug",
                        help="only this exercise (repeatable; default: all)")
    parser.add_argument("--jobs", type=int, default=None, help="parallel mutant workers (default: config.toml)")
    parser.add_argument("--keep", action="store_true", help="keep the mutmut workspace for `mutmut show`")
    args = parser.parse_args(argv)
    if args.command == "report":
        report.write()
        print(f"Rendered {report.REPORT}")
        return
    if args.command == "sample":
        chosen = args.exercise or [p.stem for p in sorted(report.RESULTS.glob("*.json"))]
        kept = [m for m in sample.load() if m.exercise not in chosen] if sample.SAMPLE.exists() else []
        picked = sample.pick(chosen)
        sample.write(sorted(kept + picked, key=lambda m: m.exercise))
        print(f"{len(picked)} mutants of {', '.join(chosen)} written to {sample.SAMPLE} ({len(kept)} kept)")
        return
    known = course.assignments()
    unknown = [a for a in args.exercise if a not in known]
    if unknown:
        parser.error(f"unknown exercise(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if not run(args.exercise or known, args.jobs or workspace.settings()["jobs"], args.keep):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
