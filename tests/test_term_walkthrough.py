"""The instructors' term walk-through (docs/instructors.md, "A term, command by command"), run as written on a class of
eight, and every exported file read back by importers written after Canvas's and Moodle's own (tests/lms_class.py).

In a private scratch copy of the course with exercise 01 released, the roster of tests/lms_class.py (TERM), the
walk-through's four blocks run line by line, each in bash in the course folder (the grade lines get ``--quiet --jobs
1``, and ``--no-sandbox`` only where the sandbox cannot run); between them the class does what classes do:

1. before the term: the roster, the due date (2026-10-09 23:59 UTC) and an extension of two days for fay, granted
   before anything is graded;
2. the hub's route: after ``release_assignment`` erin, fay and gus submit through the exchange (today: weeks late);
   after ``collect`` fay's time is set to one day late, within her extension; grade (erin and gus lose the 50 % cap,
   fay nothing), release feedback, export to Canvas (assignment 48213, 100 points);
3. erin's time is moved to two hours after the due date, then Canvas: ``submissions.zip`` (ann on time, bob marked
   late, cy a blank notebook then a solved one that Canvas renamed, gus again: the mixed student, whose exchange time
   no longer applies), then ``submissions-2.zip`` a week later where cy's newer upload is a misnamed notebook (kept
   aside, cy keeps the solved one; status 1); grade, export (a dry run shows each change), late;
4. Moodle 4.1: ``moodle.zip`` with the grading worksheet: dan's blank then resubmitted notebook, hal D'Arcy (Moodle
   writes "Hal DArcy"), a folder of someone not in the class, ann's archive that cannot be unpacked (set aside, ann
   keeps her Canvas submission; status 1); grade, export to Moodle's worksheet and to its gradebook CSV.

Then plain ``nbgrader autograde`` regrades erin and records the same penalty as the class grader (both run nbgrader's
AssignLatePenalties with the course's plugin), and an extension for erin after grading lifts her penalty and
regenerates her feedback.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from conftest import grader_sandbox_flags, private_folder
from lms_class import (
    ANN,
    ASSIGNMENT,
    BOB,
    CY,
    DAN,
    GUS,
    HAL,
    NOTEBOOK,
    PARTICIPANTS,
    TERM,
    CanvasCourse,
    MoodleAssignment,
    MoodleGradebook,
    canvas_name,
    moodle_folder,
    moodle_worksheet,
    write_roster,
    write_zip,
)
from nbgrader.api import Gradebook
from submissions import graded_cells, solution_sources

from autograder import course

# The hub tests (tests/hub.py) install /etc/jupyter/nbgrader_config.py while their hub runs, as TLJH does; with it,
# `nbgrader db student import` asks a JupyterHub for the course's groups. One worker runs both, one after the other.
pytestmark = [pytest.mark.xdist_group("hub"),
              pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")]

TOTAL = sum(graded_cells(ASSIGNMENT).values())
MOVED = "2026-10-10 01:59:00.000000 UTC"  # two hours after the walk-through's due date: one started day, 10 %
WITHIN_EXTENSION = "2026-10-10 23:00:00.000000 UTC"  # a day late, inside fay's two days
CANVAS_ID, POINTS = 48213, 100.0
EXPORTS = Path("grading") / "exports"
#: Exit status of the walk-through's commands that leave something for the instructor to look at.
NEEDS_A_LOOK = {"submissions-2.zip": 1, "moodle.zip": 1}


def readme_blocks() -> list[list[str]]:
    """The bash blocks of the walk-through, as lists of commands (comments and ``source`` lines dropped)."""
    text = (course.ROOT / "docs" / "instructors.md").read_text()
    section = text.split("## A term, command by command", 1)[1].split("**The roster**", 1)[0]
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
    """The scratch course, what each walk-through command printed, and the class's own actions between commands."""

    def __init__(self, root: Path):
        self.root = root
        self.printed: dict[str, list[str]] = {}
        self.after: dict[str, dict] = {}

    def env(self, home: Path | None = None) -> dict[str, str]:
        extra = {}
        if home is not None:  # a student's own session: their home, their Jupyter data (nbgrader's submit cache)
            extra = {"HOME": str(home), "JUPYTER_DATA_DIR": str(home / ".jupyter-data"), "USER": home.parent.name}
        return course.tool_environment(**extra)

    def run(self, command: str) -> str:
        if re.search(r"python -m autograder grade\b", command):
            command = " ".join([command, "--quiet", "--jobs", "1", *grader_sandbox_flags()])  # one worker: 2 cores
        done = subprocess.run(["bash", "-c", command], cwd=self.root, env=self.env(), capture_output=True,
                              text=True, timeout=900)
        output = done.stdout + done.stderr
        expected = next((status for name, status in NEEDS_A_LOOK.items() if f" {name} " in command), 0)
        assert done.returncode == expected, \
            f"walk-through command exited {done.returncode}, not {expected}: {command}\n{output[-4000:]}"
        assert "Traceback" not in output, output[-4000:]
        self.printed.setdefault(command.split(" --quiet")[0], []).append(output)
        return output

    def submit_through_exchange(self, student: str) -> None:
        """What a student does on the hub: their answers in the assignment folder, then nbgrader's Submit."""
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

    def table(self, name: str) -> list[list[str]]:
        with (self.root / EXPORTS / name).open(newline="") as file:
            return list(csv.reader(file))

    def snapshot(self, block: str) -> None:
        exports = {p.name: p.read_bytes() for p in (self.root / EXPORTS).glob("*.csv")} \
            if (self.root / EXPORTS).exists() else {}
        self.after[block] = {"penalties": self.penalties(), "exports": exports}


def downloads(root: Path) -> None:
    """The LMSs' downloads and Moodle's worksheet, named and laid out as Canvas and Moodle 4.1 make them."""
    release = course.release_notebook(ASSIGNMENT)
    solved, blank = nbformat.writes(answered(release)), release.read_text()
    write_zip(root / "submissions.zip", {
        canvas_name(ANN, 5101, NOTEBOOK): solved,
        canvas_name(BOB, 5102, NOTEBOOK, late=True): solved,
        canvas_name(CY, 4001, NOTEBOOK): blank,  # cy's first upload: the blank release
        canvas_name(CY, 5103, "01-chain-rule-1.ipynb"): solved,  # ... then the solved one, renamed by Canvas
        canvas_name(GUS, 5104, NOTEBOOK): solved})  # gus also submitted through the exchange
    write_zip(root / "submissions-2.zip", {canvas_name(CY, 5201, "Untitled.ipynb"): solved})  # worse: misnamed
    write_zip(root / "moodle.zip", {
        f"{moodle_folder(DAN, PARTICIPANTS['dan'], modern=True)}/{NOTEBOOK}": blank,
        f"{moodle_folder(DAN, PARTICIPANTS['dan'], modern=True)}/01-chain-rule (1).ipynb": solved,
        f"{moodle_folder(HAL, PARTICIPANTS['hal'], modern=True)}/{NOTEBOOK}": solved,
        f"Zed Quinn_4999_assignsubmission_file/{NOTEBOOK}": solved,  # enrolled in Moodle, not in this class
        f"{moodle_folder(ANN, PARTICIPANTS['ann'], modern=True)}/work.zip": b"PK\x03\x04 cut short"})
    moodle_worksheet(root / "worksheet.csv", TERM, PARTICIPANTS, maximum=POINTS)


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> Term:
    root = course.copy_course(private_folder(tmp_path_factory.mktemp("term")) / "course", assignment_ids=[ASSIGNMENT])
    (root / "exercises" / ASSIGNMENT).mkdir(parents=True)  # the committed release (tests/test_release.py: current)
    shutil.copy2(course.release_notebook(ASSIGNMENT), root / "exercises" / ASSIGNMENT / NOTEBOOK)
    write_roster(root / "grading" / "roster.csv", TERM)
    downloads(root)
    term = Term(root)
    before, hub, canvas, moodle = readme_blocks()
    for command in before:
        term.run(command)
    for command in hub:
        term.run(command)
        if "release_assignment" in command:
            for student in ("erin", "fay", "gus"):
                term.submit_through_exchange(student)
        if command.startswith("nbgrader collect"):
            (root / "submitted" / "fay" / ASSIGNMENT / "timestamp.txt").write_text(WITHIN_EXTENSION)
    term.snapshot("hub")
    (root / "submitted" / "erin" / ASSIGNMENT / "timestamp.txt").write_text(MOVED)
    for command in canvas:
        term.run(command)
    term.snapshot("canvas")
    for command in moodle:
        term.run(command)
    term.snapshot("moodle")
    term.plain = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student", "erin",
                                 "--force"], cwd=root, env={**term.env(), "AUTOGRADER_SEED": "914"},
                                capture_output=True, text=True, timeout=900)
    term.snapshot("plain")
    feedback = root / "feedback" / "erin" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    term.feedback_before = feedback.read_text()
    term.extended = term.run(f"python -m autograder.lms extend {ASSIGNMENT} erin --days 1")
    term.feedback_after = feedback.read_text()
    return term


def canvas_course() -> CanvasCourse:
    """The Canvas course: the class by Canvas user id, assignment 48213 (100 points), and a grade dan got in Canvas
    by hand (a paper hand-in) that no export may clear."""
    return CanvasCourse({int(s.lms_user_id): s for s in TERM}, {CANVAS_ID: ("Exercise 1", POINTS)},
                        {(int(DAN.lms_user_id), CANVAS_ID): "35"})


def percent(fraction: float) -> str:
    return f"{round(POINTS * fraction, 2):g}"


def test_the_walkthrough_has_its_four_blocks():
    before, hub, canvas, moodle = readme_blocks()
    assert any("db student import" in c for c in before) and any("--duedate" in c for c in before)
    assert any("autograder.lms extend" in c for c in before)
    assert [c.split()[1] for c in hub if c.startswith("nbgrader")] == ["release_assignment", "collect",
                                                                       "release_feedback"]
    assert sum("autograder.lms collect" in c for c in canvas) == 2 and any("--to canvas" in c for c in canvas)
    assert any("--from moodle --worksheet" in c for c in moodle) and any("--to moodle " in c for c in moodle)


def test_hub_penalties_follow_the_policy_and_the_extension_granted_before_grading(term):
    assert term.after["hub"]["penalties"] == {"erin": (TOTAL, TOTAL * 0.5), "fay": (TOTAL, 0.0),
                                              "gus": (TOTAL, TOTAL * 0.5)}  # fay: a day late, within two days
    assert "fay: 01-chain-rule now due 2026-10-11 23:59 UTC" in \
        term.printed["python -m autograder.lms extend 01-chain-rule fay --days 2"][0]
    assert len(list((term.root / ".exchange" / "autograd-course" / "feedback").glob("*.html"))) == 3


def test_the_hub_export_is_in_canvas_s_scale_and_leaves_out_who_has_no_submission(term):
    printed = term.printed[f"python -m autograder.lms export --to canvas {ASSIGNMENT} --canvas-id 48213 "
                           "--points-possible 100"][0]
    assert "first export to" in printed and "scale: 01-chain-rule: out of 100 (--points-possible" in printed
    assert "left out, no submission" in printed and "ann (01-chain-rule)" in printed
    first = list(csv.reader(term.after["hub"]["exports"]["canvas-01-chain-rule.csv"].decode().splitlines()))
    assert first == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01-chain-rule (48213)"],
                     ["O'Neil, Erin", "105", "S105", "eoneil", "B", "50"],
                     ["Ruiz, Fay", "106", "S106", "fruiz", "A", "100"],
                     ["Park, Gus", "107", "S107", "gpark", "B", "50"]]


def test_canvas_downloads_are_collected_and_a_worse_later_one_replaces_nothing(term):
    first = term.printed[f"python -m autograder.lms collect {ASSIGNMENT} submissions.zip --from canvas"][0]
    assert "collected 4 students into submitted/" in first
    assert "diazcy_103_5103_01-chain-rule-1.ipynb (kept) over submissions.zip/diazcy_103_4001_01-chain-rule.ipynb" \
        in first
    assert "marked late by the LMS" in first and re.search(r"submission times no longer used .*: gus \(", first)
    assert re.search(r"earlier submissions replaced by the download \(copied first\): gus -> grading/downloaded/"
                     r"01-chain-rule/replaced/", first)
    second = term.printed[f"python -m autograder.lms collect {ASSIGNMENT} submissions-2.zip --from canvas"][0]
    assert "cy: the new download has no usable 01-chain-rule.ipynb (Untitled.ipynb: a " \
           "name the assignment does not have)" in second
    kept = term.root / "grading" / "downloaded" / ASSIGNMENT
    assert len(list((kept / "downloads").glob("*/*.zip"))) == 3  # every download given is kept
    assert list((kept / "set-aside").rglob(canvas_name(CY, 5201, "Untitled.ipynb")))


def test_the_canvas_regrade_uses_the_graded_submission_s_time(term):
    assert term.after["canvas"]["penalties"] == {
        "ann": (TOTAL, 0.0), "bob": (TOTAL, 0.0), "cy": (TOTAL, 0.0), "erin": (TOTAL, round(TOTAL * 0.1, 2)),
        "fay": (TOTAL, 0.0), "gus": (TOTAL, 0.0)}  # gus: his Canvas notebook is graded, not the late exchange one
    graded = term.printed[f"AUTOGRADER_SEED=914 python -m autograder grade {ASSIGNMENT}"][1]
    assert "5 submissions, 5 to grade" not in graded and "6 submissions, 5 to grade" in graded  # fay unchanged
    assert f"late: 1 submissions, 1 penalized, {round(TOTAL * 0.1, 2):g} points taken off" in graded
    report = (term.root / "grading" / ASSIGNMENT / "report.md").read_text()
    assert "## Late submissions" in report and f"| erin | 2 h 0 min | {TOTAL:g} | {TOTAL * 0.1:g} |" in report


def test_grades_csv_has_the_penalty_and_the_final_score(term):
    with (term.root / "grading" / ASSIGNMENT / "grades.csv").open(newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert (rows["erin"]["score"], rows["erin"]["late_penalty"], rows["erin"]["final_score"]) == \
        (f"{TOTAL:g}", f"{round(TOTAL * 0.1, 2):g}", f"{TOTAL - round(TOTAL * 0.1, 2):g}")
    assert rows["ann"]["late_penalty"] == "0" and rows["ann"]["final_score"] == f"{TOTAL:g}"


def test_canvas_imports_both_exports_onto_the_right_students_and_the_right_assignment(term):
    canvas = canvas_course()
    hub = canvas.parse(_file(term, "hub", "canvas-01-chain-rule.csv"))
    canvas.apply(hub)
    imported = canvas.parse(_file(term, "canvas", "canvas-01-chain-rule.csv"))
    by_name = {s.sortable_name: int(s.lms_user_id) for s in TERM}
    assert [user for _, user in imported.students] == [by_name[name] for name, _ in imported.students]
    assert sorted(name for name, _ in imported.students) == sorted(
        s.sortable_name for s in TERM if s.id not in ("dan", "hal"))
    assert imported.new_assignments == [] and not imported.points_possible_row
    assert imported.changes == {(101, CANVAS_ID): ("", "100"), (102, CANVAS_ID): ("", "100"),
                                (103, CANVAS_ID): ("", "100"), (105, CANVAS_ID): ("50", percent(0.9)),
                                (107, CANVAS_ID): ("50", "100")}
    canvas.apply(imported)
    assert canvas.scores[104, CANVAS_ID] == "35"  # dan's grade in Canvas: never blanked
    dry_run = term.printed[f"python -m autograder.lms export --to canvas {ASSIGNMENT} --canvas-id 48213 "
                           "--points-possible 100 --dry-run"][0]
    assert "dry run: nothing written" in dry_run and "01-chain-rule (48213): 5 changed, 1 unchanged" in dry_run
    assert f"O'Neil, Erin: 50 -> {percent(0.9)}" in dry_run and "Lee, Ann: (not exported) -> 100" in dry_run


def _file(term: Term, block: str, name: str) -> Path:
    path = term.root.parent / f"{block}-{name}"
    path.write_bytes(term.after[block]["exports"][name])
    return path


def test_the_moodle_download_is_matched_by_participant_number(term):
    printed = term.printed[f"python -m autograder.lms collect {ASSIGNMENT} moodle.zip --from moodle --worksheet "
                           "worksheet.csv"][0]
    assert "participant:01-chain-rule holds 8 participant numbers" in printed
    assert "collected 2 students into submitted/" in printed
    assert "01-chain-rule (1).ipynb (kept) over" in printed
    assert "participant 4999 (Zed Quinn) is not in the roster's participant:01-chain-rule column" in printed
    assert f"moodle.zip/{moodle_folder(ANN, PARTICIPANTS['ann'], modern=True)}/work.zip (ann): it cannot be unpacked" \
        in printed
    assert term.after["moodle"]["penalties"]["dan"] == term.after["moodle"]["penalties"]["hal"] == (TOTAL, 0.0)
    assert term.after["moodle"]["penalties"]["ann"] == (TOTAL, 0.0)  # her Canvas submission stays


def test_moodle_imports_the_worksheet_and_the_gradebook_csv_onto_the_right_students(term):
    users = {int(s.lms_user_id): s for s in TERM}
    by_id = {s.id: int(s.lms_user_id) for s in TERM}
    moodle = MoodleAssignment({number: by_id[student] for student, number in PARTICIPANTS.items()}, users, POINTS,
                              {by_id["bob"]: (40.0, datetime(2026, 10, 20))})  # bob's grade entered in Moodle
    worksheet = _file(term, "moodle", "moodle-01-chain-rule.csv")
    updated = moodle.upload(worksheet, datetime(2026, 12, 4))
    expected = {s: 100.0 for s in ("ann", "bob", "cy", "dan", "fay", "gus", "hal")} | {"erin": float(percent(0.9))}
    assert {users[u].id: after for u, (_, after) in updated.items()} == expected
    assert {users[u].id: grade for u, (grade, _) in moodle.grades.items()} == expected
    rows = list(csv.reader(worksheet.open()))
    assert all(row[0] == f"Participant {PARTICIPANTS[next(s.id for s in TERM if s.email == row[2])]}"
               for row in rows[1:])
    gradebook = MoodleGradebook(users, {})
    landed = gradebook.load(_file(term, "moodle", "moodle-csv-01-chain-rule.csv"), "Email address", "email",
                            {"01-chain-rule": 7})
    assert [users[user].email for _, user in landed] == [email for email, _ in landed] and len(landed) == 8


def test_late_lists_who_was_late_and_what_it_cost(term):
    listed = term.printed[f"python -m autograder.lms late {ASSIGNMENT}"][0]
    assert f"| erin | 2 h 0 min | {TOTAL:g} | {TOTAL * 0.1:g} |" in listed and "| bob |" not in listed


def test_every_graded_student_has_feedback(term):
    for student in TERM:
        assert (term.root / "feedback" / student.id / ASSIGNMENT / f"{ASSIGNMENT}.html").exists()


def test_plain_nbgrader_autograde_gives_the_same_penalty(term):
    assert term.plain.returncode == 0, term.plain.stdout[-3000:] + term.plain.stderr[-3000:]
    assert term.after["plain"]["penalties"]["erin"] == term.after["moodle"]["penalties"]["erin"] == \
        (TOTAL, round(TOTAL * 0.1, 2))
    assert os.path.exists(term.root / "autograded" / "erin" / ASSIGNMENT / "timestamp.txt")


def test_an_extension_after_grading_lifts_the_penalty_and_regenerates_the_feedback(term):
    assert f"penalty changed: erin {round(TOTAL * 0.1, 2):g} -> 0" in term.extended
    assert "feedback regenerated" in term.extended and "erin" in term.extended.split("feedback regenerated")[1]
    assert "Late submission penalty" in term.feedback_before and "Late submission penalty" not in term.feedback_after
    assert term.penalties()["erin"] == (TOTAL, 0.0)
