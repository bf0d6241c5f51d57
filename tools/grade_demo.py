"""``make grade-demo``: build a demo class and grade it with ``python -m autograder grade``.

The class is synthetic (:mod:`tools.synthetic`): for each assignment that has a wrong-answer catalogue
(up to two), the reference solution, a blank submission, the catalogued mistakes and the hostile cases of
``tests/hostile/``. It lives in ``artifacts/grade-demo/course`` (git-ignored) and is rebuilt on every run.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from autograder import course
from tools import synthetic

DEMO_HOSTILE = ["raises", "infinite loop", "os._exit", "prints megabytes", "allocates beyond the memory limit",
                "edits the test cells", "invalid JSON", "missing notebook",
                "monkeypatches the checks and torch at top level", "returns objects that equal everything"]


def build(folder: Path, assignments: list[str]) -> tuple[Path, list[str]]:
    """A released scratch course in ``folder`` with the demo class; returns (course root, assignments released)."""
    shutil.rmtree(folder, ignore_errors=True)
    root = course.copy_course(folder / "course", assignment_ids=assignments)
    released = []
    for assignment in assignments:
        try:
            course.generate_release(root, [assignment])
        except RuntimeError as error:  # a source notebook being edited right now: leave that assignment out
            print(f"skipping {assignment}: {str(error).splitlines()[0]}")
            continue
        released.append(assignment)
        reference = synthetic.reference_answers(root, assignment)
        synthetic.write_submission(root, assignment, "alice", reference)
        synthetic.write_submission(root, assignment, "bob", {})
        for number, wrong in enumerate(synthetic.catalogue(assignment)[:6]):
            synthetic.write_submission(root, assignment, f"student{number + 1:02d}", {**reference, **wrong["replace"]})
        for case in synthetic.hostile_cases(assignment):
            if case["name"] in DEMO_HOSTILE:
                synthetic.write_submission(root, assignment, synthetic.student_name(case),
                                           synthetic.case_answers(root, assignment, case), case)
    return root, released


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=course.ROOT / "artifacts" / "grade-demo")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    candidates = [a for a in course.assignments() if synthetic.catalogue(a)][:2]
    root, released = build(args.folder, candidates)
    submissions = sum(len(list((root / "submitted").glob(f"*/{a}"))) for a in released)
    print(f"demo class: {submissions} submissions of {', '.join(released)} in {root}\n")
    worst = 0
    for assignment in released:
        command = [sys.executable, "-m", "autograder", "grade", assignment, "--course", str(root), "--timeout", "20"]
        if args.jobs:
            command += ["--jobs", str(args.jobs)]
        done = subprocess.run(command, cwd=root, env=course.tool_environment())
        worst = max(worst, done.returncode)
        print()
    if worst == 1:
        print("(exit status 1 above is expected: the demo class includes submissions that cannot be graded)")
    return 0 if worst <= 1 else worst


if __name__ == "__main__":
    sys.exit(main())
