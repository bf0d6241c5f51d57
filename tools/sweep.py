"""The catalogue in this process, fast: ``make sweep`` (every answer at many grading seeds) and ``--quick`` (every
answer at the default seed, with its feedback), a report, not a test.

``python -m tools.sweep`` (``make sweep``) runs the hidden tests of the reference and of every catalogued wrong answer
at ``--seeds`` grading seeds (20 by default, the same 20 every time) and reports every answer whose score changes
with the seed, and every answer whose score differs from what its catalogue entry states. A grade that depends on the
seed is a grader defect: a learner's mark must not depend on which draw the instructor's seed made. Exit status 1
when it finds any. An answer's hidden cells that no changed solution cell reaches through the names they read
(:func:`tools.inprocess.cells_reaching_answers`) are not run: they give the reference's result at that seed, which
the sweep proves.

``python -m tools.sweep --answers FILE.yaml 05-zero-grad`` grades answers that are not in the catalogue (entries in
its format; ``scores`` and ``feedback`` optional) at the default seed and two sweep seeds, and prints what each loses
and why: the first look at a batch of answers written by someone else (a blind review).

``python -m tools.sweep --quick 05-zero-grad`` runs every cell of the notebook (visible and hidden tests) once at the
default seed for the reference, the blank release and every catalogued answer, and checks each answer's failing cells
and the phrases its entry expects in the feedback: the loop to run while writing an exercise or its catalogue (the
graded pipeline in tests/test_grading_pipeline.py is the proof).

The answers run in worker processes forked after torch is imported (``--jobs``, default: the number of cores).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import traceback
import warnings
from collections import defaultdict
from dataclasses import dataclass

from autograder import course
from autograder.seeding import SEED_VARIABLE
from tools import synthetic
from tools.inprocess import cells_reaching_answers, run_cells

#: The sweep's seeds: fixed, so two runs report the same thing; far from the default seed and from each other.
SEEDS = [1_000_003 * k + 7919 for k in range(1, 101)]


@dataclass(frozen=True)
class Answer:
    assignment: str
    name: str  # "reference", "blank" or the catalogue entry's name
    replace: dict[str, str]
    failing: frozenset[str]  # the test cells it must fail (all others it must pass)
    feedback: tuple[str, ...] = ()
    not_named: tuple[str, ...] = ()  # mistakes whose names its feedback must not show


def answers(assignment: str, *, blank: bool) -> list[Answer]:
    reference = synthetic.reference_answers(course.ROOT, assignment)
    points = graded_cells(assignment)
    found = [Answer(assignment, "reference", reference, frozenset())]
    if blank:
        import nbformat

        release = nbformat.read(course.release_notebook(assignment), as_version=4)
        stubs = {synthetic.grade_id(c): c.source for c in release.cells if synthetic.grade_id(c) in reference}
        found.append(Answer(assignment, "blank", stubs, frozenset(points)))
    for entry in synthetic.catalogue(assignment):
        failing = frozenset(cell for cell, score in entry.get("scores", {}).items() if score < points.get(cell, 0))
        found.append(Answer(assignment, entry["name"], {**reference, **entry["replace"]}, failing,
                            tuple(entry.get("feedback", ())), tuple(entry.get("not_named", ()))))
    return found


def graded_cells(assignment: str) -> dict[str, float]:
    import nbformat

    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"]) for c in notebook.cells
            if c.metadata.get("nbgrader", {}).get("grade")}


def _run(job: tuple[Answer, int | None, bool]) -> tuple[Answer, int | None, dict | str]:
    answer, seed, only_hidden = job
    warnings.simplefilter("ignore")  # answers warn as they like; the verdict is what counts
    if seed is None:
        os.environ.pop(SEED_VARIABLE, None)
    else:
        os.environ[SEED_VARIABLE] = str(seed)
    # Hidden cells the answer cannot reach give the reference's result at this seed, which the sweep proves too.
    tests = None if answer.name == "reference" or not only_hidden else (
        cells_reaching_answers(answer.assignment, answer.replace) | answer.failing)
    try:
        results = run_cells(answer.assignment, answer.replace, only_hidden=only_hidden, tests=tests,
                            scratch=not only_hidden)
    except Exception:  # a crashing check: reported, never counted as a verdict
        return answer, seed, traceback.format_exc(limit=3)
    return answer, seed, {cell: (r.passed, r.message) for cell, r in results.items()}


def _pool(jobs: int):
    import torch  # imported once, before the workers fork

    # One math thread per worker, as in a grading worker: on 2 cores, threads fighting over them made a 0.2 s hidden
    # test take 10 s.
    torch.set_num_threads(1)
    return multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=50)


def quick(assignments: list[str], jobs: int) -> int:
    """Every answer at the default seed, all cells: failing cells and feedback as the catalogue states."""
    work = [(answer, None, False) for a in assignments for answer in answers(a, blank=True)]
    problems = 0
    with _pool(jobs) as pool:
        for answer, _, results in pool.imap_unordered(_run, work):
            if isinstance(results, str):
                problems += 1
                print(f"CRASH {answer.assignment} / {answer.name}\n{results}")
                continue
            failed = {cell for cell, (passed, _) in results.items() if not passed}
            text = "\n".join(message for _, message in results.values())
            missing = [phrase for phrase in answer.feedback if phrase not in text]
            named = [phrase for phrase in answer.not_named if phrase in text]
            if failed != answer.failing or missing or named:
                problems += 1
                print(f"WRONG {answer.assignment} / {answer.name}")
                if failed != answer.failing:
                    print(f"   fails {sorted(failed)}; the catalogue says {sorted(answer.failing)}")
                for phrase in missing:
                    print(f"   feedback lacks: {phrase!r}")
                for phrase in named:
                    print(f"   feedback names: {phrase!r}")
                for cell in sorted(failed):
                    print("   " + f"[{cell}] " + results[cell][1].replace("\n", "\n      ")[:1500])
    print(f"{len(work)} answers of {', '.join(assignments)}: {problems} not as catalogued")
    return 1 if problems else 0


def grade_answers(path: str, assignment: str, jobs: int) -> int:
    """Each answer of ``path`` at the default seed (all cells) and two sweep seeds (hidden cells): what it loses."""
    import yaml

    reference = synthetic.reference_answers(course.ROOT, assignment)
    entries = yaml.safe_load(open(path)) or []
    batch = [Answer(assignment, e["name"], {**reference, **e["replace"]}, frozenset()) for e in entries]
    work = [(answer, seed, seed is not None) for answer in batch for seed in (None, *SEEDS[:2])]
    found: dict[str, dict] = defaultdict(dict)
    with _pool(jobs) as pool:
        for answer, seed, results in pool.imap_unordered(_run, work):
            found[answer.name][seed] = results
    for entry in entries:
        runs = found[entry["name"]]
        print(f"\n## {entry['name']}" + (f"  (intent: {entry['intent']})" if entry.get("intent") else ""))
        for seed in (None, *SEEDS[:2]):
            results = runs[seed]
            if isinstance(results, str):
                print(f"   seed {seed or 'default'}: CRASH\n{results}")
                continue
            failed = sorted(cell for cell, (passed, _) in results.items() if not passed)
            print(f"   seed {seed or 'default'}: fails {failed or 'nothing'}")
            if seed is None:
                for cell in failed:
                    print(f"      [{cell}] " + results[cell][1].replace("\n", "\n         ")[:1200])
    return 0


def sweep(assignments: list[str], seeds: list[int], jobs: int) -> int:
    """Hidden cells of every answer at every seed: report scores that change with the seed or differ from the
    catalogue."""
    work = [(answer, seed, True) for a in assignments for answer in answers(a, blank=False) for seed in seeds]
    points = {a: graded_cells(a) for a in assignments}
    outcomes: dict[tuple[str, str], dict[int, frozenset[str] | str]] = defaultdict(dict)
    by_key = {}
    started = time.monotonic()
    with _pool(jobs) as pool:
        for done, (answer, seed, results) in enumerate(pool.imap_unordered(_run, work), 1):
            key = (answer.assignment, answer.name)
            by_key[key] = answer
            outcomes[key][seed] = results if isinstance(results, str) else frozenset(
                cell for cell, (passed, _) in results.items() if not passed)
            if done % 200 == 0:
                print(f"  {done}/{len(work)} runs, {time.monotonic() - started:.0f} s", file=sys.stderr)
    unstable, wrong, crashed = [], [], []
    for key, per_seed in sorted(outcomes.items()):
        answer = by_key[key]
        hidden = {c for c in points[key[0]] if c.endswith("_hidden")}
        expected = answer.failing & hidden
        if any(isinstance(v, str) for v in per_seed.values()):
            crashed.append((key, next(v for v in per_seed.values() if isinstance(v, str))))
            continue
        scores = {seed: sum(points[key[0]][c] for c in hidden - failed) for seed, failed in per_seed.items()}
        if len(set(per_seed.values())) > 1:
            unstable.append((key, per_seed, scores))
        elif next(iter(per_seed.values())) != expected:
            wrong.append((key, next(iter(per_seed.values())), expected))
    print(f"\n# Seed sweep: {len(outcomes)} answers x {len(seeds)} seeds, hidden tests, "
          f"{time.monotonic() - started:.0f} s on {jobs} workers\n")
    for (assignment, name), per_seed, scores in unstable:
        print(f"SEED-DEPENDENT {assignment} / {name}: scores {sorted(set(scores.values()))}")
        for seed, failed in sorted(per_seed.items()):
            print(f"   seed {seed}: fails {sorted(failed)}")
    for (assignment, name), failed, expected in wrong:
        print(f"NOT AS CATALOGUED {assignment} / {name}: fails {sorted(failed)} at every seed; "
              f"the catalogue says {sorted(expected)}")
    for (assignment, name), text in crashed:
        print(f"CRASH {assignment} / {name}\n{text}")
    print(f"\n{len(unstable)} seed-dependent, {len(wrong)} not as catalogued, {len(crashed)} crashed")
    return 1 if unstable or wrong or crashed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment")
    parser.add_argument("--seeds", type=int, default=20, help=f"how many seeds (at most {len(SEEDS)})")
    parser.add_argument("--quick", action="store_true", help="all cells once at the default seed, with feedback")
    parser.add_argument("--answers", metavar="FILE", help="grade the answers of this YAML file (one assignment)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    assignments = args.assignments or course.assignments()
    unknown = sorted(set(assignments) - set(course.assignments()))
    if unknown:
        parser.error(f"no such assignment: {', '.join(unknown)}")
    if args.answers:
        if len(args.assignments) != 1:
            parser.error("--answers grades answers to one assignment: name it")
        return grade_answers(args.answers, assignments[0], args.jobs)
    if args.quick:
        return quick(assignments, args.jobs)
    return sweep(assignments, SEEDS[:args.seeds], args.jobs)


if __name__ == "__main__":
    sys.exit(main())
