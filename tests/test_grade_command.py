"""`python -m autograder grade`: the class-scale grader, on small scratch classes of exercise 01.

One batch holds normal submissions (reference, blank, catalogued wrong answers) and every hostile case of
tests/hostile/01-chain-rule.yaml; it is graded by one run of the command. Each hostile case gets its grade and its
reason, the normal ones the scores plain `nbgrader autograde` gives them, and no integrity attack gains a point.
A second, tiny class proves re-runs: unchanged submissions are skipped, --force regrades to identical scores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from submissions import catalogue, graded_cells, scores

from autograder import course
from autograder.grading import synthetic

ASSIGNMENT = "01-chain-rule"
CASES = synthetic.hostile_cases(ASSIGNMENT)
WRONG = catalogue(ASSIGNMENT)[:3]
TIMEOUT = 8  # seconds per cell in these tests (the course's own limit is 60)

pytestmark = pytest.mark.xdist_group("grade-command")


def make_course(root: Path) -> Path:
    """A released scratch course with exercise 01 only, in a folder every user may traverse (so the isolation
    tests mean something: only file permissions and the sandbox stand between a submission and the gradebook)."""
    course.copy_course(root, assignment_ids=[ASSIGNMENT])
    course.generate_release(root, [ASSIGNMENT])
    return root


def run_grade(root: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--jobs", "2", "--timeout", str(TIMEOUT),
               "--memory-mb", "512", "--course", str(root), "--quiet", *extra]
    return subprocess.run(command, cwd=root, env=course.tool_environment(), capture_output=True, text=True,
                          timeout=900)


def outcomes(root: Path) -> dict[str, dict]:
    return json.loads((root / "grading" / ASSIGNMENT / "state.json").read_text())["students"]


@pytest.fixture(scope="module")
def scratch():
    folder = Path(tempfile.mkdtemp(prefix="autograder-grade-test-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def batch(scratch):
    """The mixed class, graded once: (course root, the command's finished process)."""
    root = make_course(scratch / "batch")
    reference = synthetic.reference_answers(root, ASSIGNMENT)
    synthetic.write_submission(root, ASSIGNMENT, "reference", reference)
    synthetic.write_submission(root, ASSIGNMENT, "blank", {})
    for number, wrong in enumerate(WRONG):
        synthetic.write_submission(root, ASSIGNMENT, f"wrong{number:02d}", {**reference, **wrong.replace})
    for case in CASES:
        synthetic.write_submission(root, ASSIGNMENT, synthetic.student_name(case),
                                   synthetic.case_answers(root, ASSIGNMENT, case), case)
    return root, run_grade(root)


def test_the_command_names_what_it_could_not_grade(batch):
    root, done = batch
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [synthetic.student_name(c) for c in CASES if c.get("status") == "failed"]
    section = done.stdout.split("could not be graded (recorded as 0):")[1]
    for student in failed:
        assert student in section
    assert re.search(rf"\d+ graded, {len(failed)} could not be graded", done.stdout)
    assert "mean" in done.stdout and "median" in done.stdout
    assert "re-executed 0" in done.stdout, "phase 2 must find every notebook's phase-1 outputs"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_case_gets_a_grade_and_a_reason(batch, case):
    root, _ = batch
    student = synthetic.student_name(case)
    outcome = outcomes(root)[student]
    assert outcome["status"] == case.get("status", "graded"), outcome
    expected = {cell: 0.0 for cell in graded_cells(ASSIGNMENT)} if case.get("status") == "failed" else \
        {**graded_cells(ASSIGNMENT), **{cell: float(s) for cell, s in case["scores"].items()}}
    assert scores(root, student, ASSIGNMENT) == expected, outcome["reasons"]
    assert outcome["score"] == sum(expected.values())
    assert case["reason"] in "; ".join(outcome["reasons"]), outcome["reasons"]
    assert (root / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").exists()


def test_normal_submissions_are_still_graded_right(batch):
    root, _ = batch
    points = graded_cells(ASSIGNMENT)
    assert scores(root, "reference", ASSIGNMENT) == points
    assert scores(root, "blank", ASSIGNMENT) == {cell: 0.0 for cell in points}
    for number, wrong in enumerate(WRONG):
        expected = {**points, **{cell: float(s) for cell, s in wrong.scores.items()}}
        assert scores(root, f"wrong{number:02d}", ASSIGNMENT) == expected, wrong.name


def test_scores_are_identical_to_plain_nbgrader(batch, scratch):
    root, _ = batch
    plain = make_course(scratch / "plain")
    # (the reference solution of every assignment is graded by plain nbgrader in tests/test_grading_pipeline.py)
    students = ["blank"] + [f"wrong{n:02d}" for n in range(len(WRONG))]
    for student in students:
        shutil.copytree(root / "submitted" / student, plain / "submitted" / student)
    course.nbgrader("autograde", ASSIGNMENT, "--force", "--log-level=WARN", course=plain)
    for student in students:
        assert scores(plain, student, ASSIGNMENT) == scores(root, student, ASSIGNMENT), student


def test_submissions_cannot_read_the_gradebook_or_other_students(batch):
    if os.geteuid() != 0:
        pytest.skip("isolation by user needs a grader running as root (see the README)")
    root, _ = batch
    student = synthetic.student_name(next(c for c in CASES if c["name"].startswith("reads the gradebook")))
    notebook = nbformat.read(root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert "STOLEN" not in text and "SQLite" not in text
    assert text.count("DENIED") == 6, text
    assert "LISTED []" in text


def test_feedback_csv_and_class_report(batch):
    root, _ = batch
    folder = root / "grading" / ASSIGNMENT
    rows = (folder / "grades.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 + len(WRONG) + len(CASES)
    report = (folder / "report.md").read_text()
    assert "| `test_central_difference` | 2 |" in report
    assert "| forward difference | 1 |" in report  # wrong00 is the forward-difference entry of the catalogue
    assert (folder / "report.png").read_bytes()[:4] == b"\x89PNG"
    feedback = (root / "feedback" / "wrong00" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "Likely misconception: forward difference" in re.sub(r"<[^>]+>", "", feedback)


def test_regrading_is_incremental_and_reproducible(scratch):
    root = make_course(scratch / "regrade")
    reference = synthetic.reference_answers(root, ASSIGNMENT)
    synthetic.write_submission(root, ASSIGNMENT, "ada", {**reference, **WRONG[0].replace})
    synthetic.write_submission(root, ASSIGNMENT, "bo", {})
    first = run_grade(root)
    assert "2 to grade" in first.stdout and first.returncode == 0, first.stdout + first.stderr
    assert scores(root, "bo", ASSIGNMENT) == {cell: 0.0 for cell in graded_cells(ASSIGNMENT)}
    synthetic.write_submission(root, ASSIGNMENT, "bo", reference)  # bo submits again, now correct
    changed = run_grade(root)
    assert "2 submissions, 1 to grade (1 unchanged" in changed.stdout, changed.stdout
    graded = {s: scores(root, s, ASSIGNMENT) for s in ("ada", "bo")}
    assert graded["bo"] == graded_cells(ASSIGNMENT)
    forced = run_grade(root, "--force")
    assert "2 to grade" in forced.stdout
    assert {s: scores(root, s, ASSIGNMENT) for s in ("ada", "bo")} == graded
