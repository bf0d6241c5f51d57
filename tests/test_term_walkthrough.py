"""The README's term walk-through ("For instructors", "A term, command by command"), run as written on a small class.

In a private scratch copy of the course with exercise 01 released: the roster of tests/lms_class.py (ann, bob, cy,
dan, erin) and a Canvas download ``submissions.zip`` built the way Canvas names files (ann on time, bob marked late,
cy who uploaded a blank notebook and then a solved one that Canvas renamed). The three README blocks run line by
line, each in bash in the course folder (the grade lines get ``--no-sandbox`` only where the sandbox cannot run):

1. before the term: the roster and the due date (2026-10-09 23:59 UTC) into the gradebook;
2. the hub's route: after ``release_assignment``, erin submits through the exchange, today, so weeks late; collect,
   grade (her penalty is the 50 % cap), release feedback, export to Canvas (the preview, then the file);
3. erin's time is moved to two hours after the due date, then the LMS's route: the Canvas download is collected,
   graded (erin is regraded because her folder changed: 10 %, recomputed), exported (a dry run shows each change).

Then plain ``nbgrader autograde`` regrades erin and records the same penalty as the class grader: both run nbgrader's
AssignLatePenalties with the course's plugin. dan, who handed in nothing, stays blank throughout.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import grader_sandbox_flags, private_folder
from lms_class import ANN, ASSIGNMENT, BOB, CY, NOTEBOOK, canvas_name, write_roster, write_zip
from nbgrader.api import Gradebook
from submissions import graded_cells, solution_sources

from autograder import course

pytestmark = [pytest.mark.xdist_group("term-walkthrough"),
              pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]

TOTAL = sum(graded_cells(ASSIGNMENT).values())
MOVED = "2026-10-10 01:59:00.000000 UTC"  # two hours after the README's due date: one started day, 10 %


def readme_blocks() -> list[list[str]]:
    """The bash blocks of the walk-through, as lists of commands (comments and ``source`` lines dropped)."""
    text = (course.ROOT / "README.md").read_text()
    section = text.split("### A term, command by command", 1)[1].split("**The roster**", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    commands = [[re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()] for block in blocks]
    return [[line for line in block if line and not line.startswith(("#", "source "))] for block in commands]


def answered(release: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(release, as_version=4)
    answers = solution_sources(ASSIGNMENT)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers and cell.metadata["nbgrader"].get("solution"):
            cell.source = answers[grade_id]
    return notebook


class Term:
    """The scratch course, what each README command printed, and the class's own actions between commands."""

    def __init__(self, root: Path):
        self.root = root
        self.printed: dict[str, list[str]] = {}

    def env(self, home: Path | None = None) -> dict[str, str]:
        extra = {}
        if home is not None:  # a student's own session: their home, their Jupyter data (nbgrader's submit cache)
            extra = {"HOME": str(home), "JUPYTER_DATA_DIR": str(home / ".jupyter-data"), "USER": home.parent.name}
        return course.tool_environment(**extra)

    def run(self, command: str) -> str:
        if re.search(r"python -m autograder grade\b", command):
            command = " ".join([command, "--quiet", *grader_sandbox_flags()])
        done = subprocess.run(["bash", "-c", command], cwd=self.root, env=self.env(), capture_output=True,
                              text=True, timeout=900)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"README command failed ({done.returncode}): {command}\n{output[-4000:]}"
        self.printed.setdefault(command.split(" --quiet")[0], []).append(output)
        return output

    def submit_through_exchange(self, student: str) -> None:
        """What erin does on the hub: her answers in the assignment folder, then nbgrader's Submit."""
        work = private_folder(self.root.parent / student / "work")
        (work / ASSIGNMENT).mkdir(parents=True)
        nbformat.write(answered(self.root / "exercises" / ASSIGNMENT / NOTEBOOK), work / ASSIGNMENT / NOTEBOOK)
        done = subprocess.run([sys.executable, "-m", "nbgrader", "submit", ASSIGNMENT, "--course=autograd-course",
                               f"--Exchange.root={self.root / '.exchange'}",
                               f"--CourseDirectory.student_id={student}"],
                              cwd=work, env=self.env(work.parent / "home"), capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr

    def penalties(self) -> dict[str, tuple[float, float]]:
        """(score before the penalty, penalty) of every submission in the gradebook."""
        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}") as gradebook:
            return {s.student_id: (float(s.score), float(s.late_submission_penalty or 0))
                    for s in gradebook.find_assignment(ASSIGNMENT).submissions}

    def canvas_rows(self) -> list[list[str]]:
        with (self.root / "grading" / "exports" / "canvas.csv").open(newline="") as file:
            return list(csv.reader(file))


def canvas_download() -> dict[str, str]:
    release = course.release_notebook(ASSIGNMENT)
    solved = nbformat.writes(answered(release))
    return {canvas_name(ANN, 5101, NOTEBOOK): solved,
            canvas_name(BOB, 5102, NOTEBOOK, late=True): solved,
            canvas_name(CY, 4001, NOTEBOOK): release.read_text(),  # cy's first upload: the blank release
            canvas_name(CY, 5103, "01-chain-rule-1.ipynb"): solved}  # ... then the solved one, renamed by Canvas


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> Term:
    root = course.copy_course(private_folder(tmp_path_factory.mktemp("term")) / "course", assignment_ids=[ASSIGNMENT])
    (root / "exercises" / ASSIGNMENT).mkdir(parents=True)  # the committed release (tests/test_release.py: current)
    shutil.copy2(course.release_notebook(ASSIGNMENT), root / "exercises" / ASSIGNMENT / NOTEBOOK)
    write_roster(root / "grading" / "roster.csv")
    write_zip(root / "submissions.zip", canvas_download())
    term = Term(root)
    before, hub, lms = readme_blocks()
    for command in before:
        term.run(command)
    for command in hub:
        term.run(command)
        if "release_assignment" in command:
            term.submit_through_exchange("erin")
    term.after_hub = {"penalties": term.penalties(), "canvas": term.canvas_rows()}
    (root / "submitted" / "erin" / ASSIGNMENT / "timestamp.txt").write_text(MOVED)
    for command in lms:
        term.run(command)
    return term


def test_the_walkthrough_has_its_three_blocks():
    before, hub, lms = readme_blocks()
    assert any("db student import" in c for c in before) and any("--duedate" in c for c in before)
    assert [c.split()[1] for c in hub if c.startswith("nbgrader")] == ["release_assignment", "collect",
                                                                       "release_feedback"]
    assert any("autograder.lms collect" in c for c in lms) and any("autograder.lms export" in c for c in lms)


def test_a_late_exchange_submission_is_penalized_by_the_policy(term):
    score, penalty = term.after_hub["penalties"]["erin"]
    assert (score, penalty) == (TOTAL, TOTAL * 0.5)  # weeks after 2026-10-09: the 50 % cap
    assert list(term.after_hub["penalties"]) == ["erin"]


def test_the_first_export_is_previewed_then_written_with_blanks(term):
    first = term.printed["python -m autograder.lms export --to canvas 01-chain-rule"][0]
    assert "first export to" in first and "01-chain-rule: 1 scores, 4 blank" in first and "wrote " in first
    assert [row[0] for row in term.after_hub["canvas"]] == ["Student", "Lee, Ann", "Ng, Bob", "Diaz, Cy", "Ho, Dan",
                                                            "O'Neil, Erin"]
    assert [row[-1] for row in term.after_hub["canvas"][1:]] == ["", "", "", "", f"{TOTAL * 0.5:g}"]


def test_exchange_feedback_is_released(term):
    assert len(list((term.root / ".exchange" / "autograd-course" / "feedback").glob("*.html"))) == 1


def test_the_canvas_download_is_collected_latest_upload_kept(term):
    collected = term.printed["python -m autograder.lms collect 01-chain-rule submissions.zip --from canvas"][0]
    assert "collected 3 students into submitted/" in collected
    assert "diazcy_103_5103_01-chain-rule-1.ipynb (kept) over 01-submissions/diazcy_103_4001_01-chain-rule.ipynb" \
        in collected
    assert "marked late by the LMS" in collected and "nothing in the download: dan, erin" in collected
    assert sorted(p.name for p in (term.root / "submitted").iterdir()) == ["ann", "bob", "cy", "erin"]


def test_the_regrade_recomputes_the_moved_penalty_and_download_has_none(term):
    assert term.penalties() == {"ann": (TOTAL, 0.0), "bob": (TOTAL, 0.0), "cy": (TOTAL, 0.0),
                                "erin": (TOTAL, round(TOTAL * 0.1, 2))}
    graded_again = term.printed["AUTOGRADER_SEED=914 python -m autograder grade 01-chain-rule"][1]
    assert "4 submissions, 4 to grade" in graded_again  # three new, and erin because her time changed
    assert f"late: 1 submissions, 1 penalized, {round(TOTAL * 0.1, 2):g} points taken off" in graded_again
    report = (term.root / "grading" / ASSIGNMENT / "report.md").read_text()
    assert "## Late submissions" in report and f"| erin | 2 h 0 min | {TOTAL:g} | {TOTAL * 0.1:g} |" in report


def test_the_second_export_previews_each_change(term):
    dry_run = term.printed["python -m autograder.lms export --to canvas 01-chain-rule --dry-run"][0]
    assert "dry run: nothing written" in dry_run and "01-chain-rule: 4 changed, 1 unchanged" in dry_run
    assert f"O'Neil, Erin: {TOTAL * 0.5:g} -> {TOTAL * 0.9:g}" in dry_run
    assert f"Lee, Ann: (blank) -> {TOTAL:g}" in dry_run
    assert [row[-1] for row in term.canvas_rows()] == ["01-chain-rule", f"{TOTAL:g}", f"{TOTAL:g}", f"{TOTAL:g}", "",
                                                       f"{TOTAL * 0.9:g}"]


def test_late_lists_who_was_late_and_what_it_cost(term):
    listed = term.printed["python -m autograder.lms late 01-chain-rule"][0]
    assert f"| erin | 2 h 0 min | {TOTAL:g} | {TOTAL * 0.1:g} |" in listed and "| bob |" not in listed


def test_every_graded_student_has_feedback(term):
    for student in ("ann", "bob", "cy", "erin"):
        assert (term.root / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").exists()


def test_plain_nbgrader_autograde_gives_the_same_penalty(term):
    class_grader = term.penalties()["erin"]
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student", "erin",
                           "--force"], cwd=term.root, env={**term.env(), "AUTOGRADER_SEED": "914"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert term.penalties()["erin"] == class_grader == (TOTAL, round(TOTAL * 0.1, 2))
    assert os.path.exists(term.root / "autograded" / "erin" / ASSIGNMENT / "timestamp.txt")
