"""`python -m autograder grade`: the class-scale grader, on small scratch classes of exercise 01.

One batch holds normal submissions (reference, blank, catalogued wrong answers) and the hostile cases of
tests/hostile/01-chain-rule.yaml; it is graded by one run of the command, as root and as an unprivileged user (when
the suite runs as root; otherwise as you). The first identity grades every case; the second only the cases that test
the sandbox itself (``every_identity: true``: limits, kills, what a submission can read, write or reach), since the
rest (grading rules, broken files, tampering with the checks) goes the same way whoever grades. The course lives in a
private folder, the grader has a home directory with a secret in it, and the test listens on a port of 127.0.0.1.
Each hostile case gets its grade and its reason, the normal ones the scores the catalogue states, no integrity attack
gains a point, and nothing leaves the sandbox.
A second, tiny class proves re-runs: unchanged submissions are skipped, --force regrades to identical scores.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import unprivileged
from conftest import require_sandbox
from submissions import catalogue, graded_cells, scores

from autograder import course
from autograder.checks.ex01_chain_rule import FORWARD_DIFFERENCE
from tools import synthetic

ASSIGNMENT = "01-chain-rule"
CASES = synthetic.hostile_cases(ASSIGNMENT)
WRONG = catalogue(ASSIGNMENT)[:3]
TIMEOUT = 20  # seconds per cell here (the course's is 60): a first import of torch._dynamo takes 5 to 10 s
SECRET = "INSTRUCTOR-SECRET-7d1f"
IDENTITIES = ["root", "unprivileged"] if os.geteuid() == 0 else ["unprivileged"]

pytestmark = pytest.mark.xdist_group("grade-command")


def make_course(root: Path) -> Path:
    """A released scratch course with exercise 01 only."""
    course.copy_course(root, assignment_ids=[ASSIGNMENT])
    course.generate_release(root, [ASSIGNMENT])
    return root


def grade_command(root: Path, *extra: str, jobs: int = 2) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--jobs", str(jobs), "--timeout", str(TIMEOUT),
            "--memory-mb", "512", "--course", str(root), "--quiet", *extra]


def outcomes(root: Path) -> dict[str, dict]:
    return json.loads((root / "grading" / ASSIGNMENT / "state.json").read_text())["students"]


def printed(root: Path, student: str) -> str:
    """Everything a graded submission printed, from its autograded notebook."""
    notebook = nbformat.read(root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)


def student(name_start: str) -> str:
    return synthetic.student_name(next(c for c in CASES if c["name"].startswith(name_start)))


@pytest.fixture(scope="module")
def scratch():
    folder = Path(tempfile.mkdtemp(prefix="autograder-grade-test-"))  # 0700: private, as a CI checkout's folder
    assert os.stat(folder).st_mode & 0o777 == 0o700
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def cases_for(identity: str) -> list[dict]:
    """The hostile cases graded by ``identity``: all of them by the first, the sandbox's own by the others."""
    return CASES if identity == IDENTITIES[0] else [c for c in CASES if c.get("every_identity")]


@dataclass
class Batch:
    identity: str
    cases: list[dict]  # the hostile cases in this batch
    root: Path
    home: Path
    done: subprocess.CompletedProcess
    connections: int  # connections the listener on 127.0.0.1 received while grading
    token: str  # unique to this run, in the names of the files submissions try to plant


#: The hostile class as root and as an ordinary user; CI grades it once, as the first identity.
BATCHES = [IDENTITIES[0], *(pytest.param(identity, marks=pytest.mark.nightly(
    "the hostile class again, by another identity: the sandbox's own cases as an ordinary user are also proven "
    "in tests/test_sandbox_isolation.py")) for identity in IDENTITIES[1:])]


@pytest.fixture(scope="module", params=BATCHES)
def batch(request, scratch) -> Batch:
    """The mixed class, graded once by the identity of the parameter."""
    require_sandbox()
    folder = scratch / f"batch-{request.param}"
    folder.mkdir(mode=0o700)
    root = make_course(folder / "course")
    home = folder / "home"
    home.mkdir()
    (home / "secret.txt").write_text(SECRET)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    token = folder.parent.name  # the scratch folder's random name
    places = {"{PORT}": str(listener.getsockname()[1]), "{HOME}": str(home), "{TOKEN}": token}
    reference = synthetic.reference_answers(root, ASSIGNMENT)
    synthetic.write_submission(root, ASSIGNMENT, "reference", reference)
    synthetic.write_submission(root, ASSIGNMENT, "blank", {})
    for number, wrong in enumerate(WRONG):
        synthetic.write_submission(root, ASSIGNMENT, f"wrong{number:02d}", {**reference, **wrong.replace})
    cases = cases_for(request.param)
    for case in cases:
        synthetic.write_submission(root, ASSIGNMENT, synthetic.student_name(case),
                                   synthetic.case_answers(root, ASSIGNMENT, case), case, places)
    argv = grade_command(root)
    if request.param == "unprivileged":
        if unprivileged.available():
            pytest.skip(unprivileged.available())
        argv = unprivileged.command(argv, folder)
    done = subprocess.run(argv, cwd=root, env=course.tool_environment(HOME=str(home)), capture_output=True,
                          text=True, timeout=900)
    connections = 0
    while True:
        try:
            listener.accept()[0].close()
            connections += 1
        except BlockingIOError:
            break
    listener.close()
    return Batch(request.param, cases, root, home, done, connections, token)


def test_the_command_names_what_it_could_not_grade(batch):
    failed = [synthetic.student_name(c) for c in batch.cases if c.get("status") == "failed"]
    assert batch.done.returncode == (1 if failed else 0), batch.done.stdout + batch.done.stderr
    if failed:
        section = batch.done.stdout.split("could not be graded (recorded as 0):")[1]
        assert all(name in section for name in failed), section
    assert re.search(rf"\d+ graded, {len(failed)} could not be graded", batch.done.stdout)
    assert "mean" in batch.done.stdout and "median" in batch.done.stdout
    graded = 2 + len(WRONG) + sum(c.get("status") != "failed" for c in batch.cases)
    assert f"replayed {graded} notebooks from their sandboxed execution" in batch.done.stdout
    assert "WITHOUT THE SANDBOX" not in batch.done.stdout


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_case_gets_a_grade_and_a_reason(batch, case):
    if case not in batch.cases:
        pytest.skip(f"graded by {IDENTITIES[0]} only: it does not test the sandbox")
    name = synthetic.student_name(case)
    outcome = outcomes(batch.root)[name]
    assert outcome["status"] == case.get("status", "graded"), outcome
    expected = {cell: 0.0 for cell in graded_cells(ASSIGNMENT)} if case.get("status") == "failed" else \
        {**graded_cells(ASSIGNMENT), **{cell: float(s) for cell, s in case["scores"].items()}}
    assert scores(batch.root, name, ASSIGNMENT) == expected, outcome["reasons"]
    assert outcome["score"] == sum(expected.values())
    assert case["reason"] in "; ".join(outcome["reasons"]), outcome["reasons"]
    assert (batch.root / "feedback" / name / ASSIGNMENT / f"{ASSIGNMENT}.html").exists()


def test_normal_submissions_are_still_graded_right(batch):
    points = graded_cells(ASSIGNMENT)
    assert scores(batch.root, "reference", ASSIGNMENT) == points
    assert scores(batch.root, "blank", ASSIGNMENT) == {cell: 0.0 for cell in points}
    for number, wrong in enumerate(WRONG):
        expected = {**points, **{cell: float(s) for cell, s in wrong.scores.items()}}
        assert scores(batch.root, f"wrong{number:02d}", ASSIGNMENT) == expected, wrong.name


def test_submissions_cannot_read_the_gradebook_or_other_students(batch):
    text = printed(batch.root, student("reads the gradebook"))
    assert "STOLEN" not in text and "SQLite" not in text
    assert text.count("DENIED") == 6, text
    assert "LISTED []" in text


def test_submissions_cannot_reach_the_network(batch):
    text = printed(batch.root, student("connects to a port"))
    assert "NO NETWORK" in text and "CONNECTED" not in text, text
    assert batch.connections == 0


def test_submissions_cannot_read_the_instructors_home(batch):
    text = printed(batch.root, student("reads the instructor's home"))
    assert text.count("HOME DENIED") == 2 and SECRET not in text, text


def test_submissions_cannot_write_outside_their_copy(batch):
    text = printed(batch.root, student("writes outside its copy"))
    for refused in ("/PWNED", "/PWNED.py", "PWNED.pth"):
        assert re.search(rf"REFUSED \S*{re.escape(refused)} ", text), text
    planted = [batch.root / "PWNED", batch.root / "solutions" / ASSIGNMENT / "PWNED",
               Path(course.__file__).parent / "PWNED.py", batch.home / "PWNED", Path(sys.prefix) / "PWNED.pth",
               Path("/PWNED")]
    assert not [p for p in planted if p.exists()]
    assert f"WROTE /tmp/PWNED-{batch.token}" in text  # the sandbox's own /tmp, gone with it
    assert not Path(f"/tmp/PWNED-{batch.token}").exists()


def test_a_fork_bomb_is_held_by_the_limits(batch):
    text = printed(batch.root, student("fork bomb"))
    assert "FORK REFUSED PermissionError" in text, text
    held = re.search(r"THREADS HELD AT (\d+)", text)
    assert held and int(held.group(1)) < 64, text


def test_feedback_csv_and_class_report(batch):
    folder = batch.root / "grading" / ASSIGNMENT
    rows = (folder / "grades.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 + len(WRONG) + len(batch.cases)
    report = (folder / "report.md").read_text()
    assert "| `test_central_difference` | 2 |" in report
    assert "| forward difference | 1 |" in report  # wrong00 is the forward-difference entry of the catalogue
    assert (folder / "report.png").read_bytes()[:4] == b"\x89PNG"
    feedback = (batch.root / "feedback" / "wrong00" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    text = html.unescape(" ".join(re.sub(r"<[^>]+>", "", feedback).split()))
    assert "Likely misconception: forward difference" in text
    # graded feedback adds what the notebook never showed while the learner worked: the explanation
    assert f"About this mistake ({FORWARD_DIFFERENCE.name}): {' '.join(FORWARD_DIFFERENCE.hint.split())}" in text


def test_answers_that_import_what_no_reference_imports_are_graded_as_nbgrader_grades_them(batch, scratch):
    if batch.identity != IDENTITIES[0]:
        pytest.skip("compared once, for the first identity")
    name = student("imports modules no reference imports")
    plain = make_course(scratch / "plain" / "course")
    shutil.copytree(batch.root / "submitted" / name, plain / "submitted" / name)
    course.nbgrader("autograde", ASSIGNMENT, "--force", "--log-level=WARN", course=plain)
    assert scores(plain, name, ASSIGNMENT) == scores(batch.root, name, ASSIGNMENT) == graded_cells(ASSIGNMENT)


@pytest.mark.nightly("grades three assignments three times (incremental, reproducible, a few regraded): the class "
                     "grader's bookkeeping, which changes with the grader only")
def test_several_assignments_one_pool_incremental_reproducible_and_a_few_regraded(scratch):
    """Two assignments graded by one pool of workers; a re-run grades only what changed; --force gives the same
    grades; --students regrades the students named, changed or not, and no one else."""
    require_sandbox()
    other = "08-broadcasting"  # the cheapest to run after exercise 01
    root = scratch / "several"
    course.copy_course(root, assignment_ids=[ASSIGNMENT, other])
    course.generate_release(root, [ASSIGNMENT, other])
    reference = {a: synthetic.reference_answers(root, a) for a in (ASSIGNMENT, other)}
    synthetic.write_submission(root, ASSIGNMENT, "ada", {**reference[ASSIGNMENT], **WRONG[0].replace})
    synthetic.write_submission(root, ASSIGNMENT, "bo", {})
    synthetic.write_submission(root, other, "ada", reference[other])
    synthetic.write_submission(root, other, "bo", {})

    def grade(*extra: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "autograder", "grade", ASSIGNMENT, other, "--jobs", "1", "--timeout",
                str(TIMEOUT), "--course", str(root), "--quiet", "--no-feedback", *extra]
        return subprocess.run(argv, cwd=root, env=course.tool_environment(), capture_output=True, text=True,
                              timeout=900)

    both = grade()
    assert both.returncode == 0, both.stdout + both.stderr
    for assignment in (ASSIGNMENT, other):
        assert f"{assignment}: 2 submissions, 2 to grade" in both.stdout
        assert scores(root, "bo", assignment) == {cell: 0.0 for cell in graded_cells(assignment)}
    assert scores(root, "ada", other) == graded_cells(other)
    ready = re.findall(r"workers ready after ([\d.]+) s", both.stdout)
    assert len(ready) == 2 and ready[0] == ready[1], f"one pool of workers for both assignments:\n{both.stdout}"

    synthetic.write_submission(root, ASSIGNMENT, "bo", reference[ASSIGNMENT])  # bo submits again, now correct
    changed = grade()
    assert f"{ASSIGNMENT}: 2 submissions, 1 to grade (1 unchanged" in changed.stdout, changed.stdout
    assert f"{other}: 2 submissions, 0 to grade (2 unchanged" in changed.stdout, changed.stdout
    graded = {s: scores(root, s, ASSIGNMENT) for s in ("ada", "bo")}
    assert graded["bo"] == graded_cells(ASSIGNMENT)

    synthetic.write_submission(root, other, "ada", {})  # changed, but not named: keeps its grade
    few = grade("--students", "bo")
    assert few.returncode == 0, few.stdout + few.stderr
    for assignment in (ASSIGNMENT, other):
        assert f"{assignment}: 2 submissions, 1 to grade\n" in few.stdout, few.stdout
    assert scores(root, "ada", other) == graded_cells(other)

    forced = grade("--force")
    assert f"{ASSIGNMENT}: 2 submissions, 2 to grade" in forced.stdout
    assert {s: scores(root, s, ASSIGNMENT) for s in ("ada", "bo")} == graded
    assert scores(root, "ada", other) == {cell: 0.0 for cell in graded_cells(other)}

    unknown = grade("--students", "bo,zed")
    assert unknown.returncode == 2 and "no submission from zed" in unknown.stderr, unknown.stdout + unknown.stderr
