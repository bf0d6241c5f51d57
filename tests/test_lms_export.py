"""Grades out to the LMS (autograder.lms.export, python -m autograder.lms export): the exact Canvas and Moodle files
from a gradebook filled without grading, read back by importers written after Canvas's GradebookImporter and
Moodle's CSV and grading-worksheet imports (tests/lms_class.py): every row lands on its student, no blank is written
over a grade, no assignment is created, every score is in the LMS assignment's scale; and every student the export
cannot place is reported (a roster that cannot be trusted is refused)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import os
from datetime import datetime

import pytest
from lms_class import (
    ANN,
    BOB,
    CLASS,
    CY,
    DAN,
    ERIN,
    CanvasCourse,
    MoodleAssignment,
    MoodleGradebook,
    fill_gradebook,
    lms_course,
    moodle_worksheet,
    write_roster,
)
from nbgrader.api import Gradebook

from autograder.lms import cli
from autograder.lms.export import CanvasExport, Grade, Grades, Scale, Settings, build, preview, write
from autograder.lms.roster import RosterError, Student, read_roster

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader 0.9 with SQLAlchemy 2

#: ann on time, bob late (penalty 2.4), cy failed to grade (0), dan nothing, erin only hw2; zed is not in the roster.
GRADES = {"01-chain-rule": {"ann": (12.0, 0.0), "bob": (12.0, 2.4), "cy": (0.0, 0.0), "zed": (5.0, 0.0)},
          "hw2": {"erin": (7.25, 0.0)}}
MAX = {"01-chain-rule": 12.0, "hw2": 8.0}
CANVAS = ["--canvas-id", "48213", "--points-possible", "100"]


@pytest.fixture
def graded(tmp_path):
    root = lms_course(tmp_path / "course")
    fill_gradebook(root, MAX, GRADES)
    return root


def export(root, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli.main(["export", "--course", str(root), *args])
    return status, out.getvalue()


def rows(path) -> list[list[str]]:
    with path.open(newline="") as file:
        return list(csv.reader(file))


def canvas_course(scores: dict[tuple[int, int], str] | None = None) -> CanvasCourse:
    """The Canvas course of the class: users by their Canvas id, the assignment 48213 (100 points) and 48214."""
    return CanvasCourse({int(s.lms_user_id): s for s in CLASS}, {48213: ("Exercise 1", 100.0), 48214: ("HW 2", 20.0)},
                        dict(scores or {}))


def test_canvas_file_is_matched_by_canvas_to_every_student_and_the_assignment(graded):
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", *CANVAS)
    target = graded / "grading" / "exports" / "canvas-01-chain-rule.csv"
    assert rows(target) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01-chain-rule (48213)"],
        ["Lee, Ann", "101", "S101", "alee", "A", "100"],
        ["Ng, Bob", "102", "S102", "bng", "A", "80"],  # 9.6 of 12 points: 80 of Canvas's 100
        ["Diaz, Cy", "103", "S103", "cdiaz", "B", "0"],
    ]
    assert status == 1  # zed is graded but not in the roster; the file is written all the same
    assert "scale: 01-chain-rule: out of 100 (--points-possible; nbgrader's maximum is 12)" in printed
    assert "not in the roster, so not exported (add them to the roster): zed (01-chain-rule)" in printed
    assert "left out, no submission (a blank cell would clear a grade in the LMS; --missing zero writes 0): " \
           "dan (01-chain-rule), erin (01-chain-rule)" in printed
    canvas = canvas_course({(104, 48213): "55", (105, 48213): "70"})  # grades Canvas already has for dan and erin
    imported = canvas.parse(target)
    assert imported.students == [("Lee, Ann", 101), ("Ng, Bob", 102), ("Diaz, Cy", 103)]
    assert imported.new_assignments == [] and not imported.points_possible_row
    assert imported.changes == {(101, 48213): ("", "100"), (102, 48213): ("", "80"), (103, 48213): ("", "0")}
    canvas.apply(imported)
    assert canvas.scores[104, 48213] == "55" and canvas.scores[105, 48213] == "70"  # nothing blank was written


def test_canvas_needs_the_assignment_id_and_a_scale_and_writes_nothing_without(graded):
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", "--points-possible", "12")
    assert status == 2 and "01-chain-rule: Canvas needs the assignment's id" in printed
    assert "--canvas-id ID" in printed and not (graded / "grading" / "exports").exists()
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", "--canvas-id", "48213")
    assert status == 2 and "give --points-possible N (the LMS assignment's points; nbgrader's are 12) or --percent" \
        in printed
    imported = canvas_course().parse(_written(graded, ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                                                       "01-chain-rule"]))
    assert imported.new_assignments == ["01-chain-rule"]  # why: a title alone makes Canvas create an assignment


def _written(root, header):
    path = root / "by-hand.csv"
    write(build(Grades({"01-chain-rule": 12.0}, {"01-chain-rule": {}}, set()), [], Settings(CanvasExport))[0], path)
    with path.open("w", newline="") as file:
        csv.writer(file).writerows([header, ["Lee, Ann", "101", "S101", "alee", "A", "12"]])
    return path


def test_canvas_percent_and_several_assignments_and_zero_when_asked(graded):
    config = graded / "nbgrader_config.py"
    config.write_text(config.read_text() + '\nc.LmsExport.columns = {"01-chain-rule": "Exercise 1 (48213)", '
                      '"hw2": "HW 2 (48214)"}\n')
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", "hw2", "--percent")
    table = rows(graded / "grading" / "exports" / "canvas-01-chain-rule+hw2.csv")
    assert table[0][-2:] == ["Exercise 1 (48213)", "HW 2 (48214)"] and len(table) == 1  # no one has both
    assert "ann (hw2), bob (hw2), cy (hw2), dan (01-chain-rule, hw2), erin (01-chain-rule)" in printed
    export(graded, "--to", "canvas", "01-chain-rule", "hw2", "--percent", "--missing", "zero")
    table = rows(graded / "grading" / "exports" / "canvas-01-chain-rule+hw2.csv")
    assert [row[-2:] for row in table[1:]] == [["100%", "0%"], ["80%", "0%"], ["0%", "0%"], ["0%", "0%"],
                                               ["0%", "90.62%"]]
    canvas = canvas_course()
    canvas.apply(canvas.parse(graded / "grading" / "exports" / "canvas-01-chain-rule+hw2.csv"))
    assert canvas.scores[102, 48213] == "80" and canvas.scores[105, 48214] == "18.124"  # 90.62 % of Canvas's 20


def test_moodle_worksheet_is_matched_by_participant_number(graded, tmp_path):
    numbers = {"ann": "4031", "bob": "4017", "cy": "4052", "dan": "4008"}  # erin has no number for 01
    write_roster(graded / "grading" / "roster.csv", CLASS, {"01-chain-rule": numbers})
    sheet = moodle_worksheet(tmp_path / "worksheet.csv", CLASS[:4], numbers, maximum=20)
    worksheets = graded / "grading" / "downloaded" / "01-chain-rule" / "worksheets"
    worksheets.mkdir(parents=True)
    sheet.rename(worksheets / "2026-10-10T000000Z-worksheet.csv")
    fill_gradebook(graded, {}, {"01-chain-rule": {"erin": (6.0, 0.0)}})
    status, printed = export(graded, "--to", "moodle", "01-chain-rule")
    table = rows(graded / "grading" / "exports" / "moodle-01-chain-rule.csv")
    assert table[0] == ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                        "Grade can be changed", "Last modified (submission)", "Last modified (grade)"]
    assert [row[:6] for row in table[1:]] == [
        ["Participant 4031", "Ann Lee", "ann@uni.example", "Submitted for grading", "20", "20"],
        ["Participant 4017", "Bob Ng", "bob@uni.example", "Submitted for grading", "16", "20"],
        ["Participant 4052", "Cy Diaz", "cy@uni.example", "Submitted for grading", "0", "20"]]
    assert status == 1 and "REFUSED: graded but without a Moodle participant number for 01-chain-rule (roster " \
                           "participant:01-chain-rule), so the LMS could not match their row (not written; add it " \
                           "to the roster): erin" in printed
    assert "scale: 01-chain-rule: out of 20 (Maximum Grade in Moodle's worksheet" in printed
    users = {i: s for i, s in enumerate(CLASS, start=1)}
    moodle = MoodleAssignment({n: next(i for i, s in users.items() if s.id == k) for k, n in numbers.items()}, users,
                              20.0, {4: (11.0, datetime(2026, 10, 1))})  # dan has a grade in Moodle
    updated = moodle.upload(graded / "grading" / "exports" / "moodle-01-chain-rule.csv", datetime(2026, 12, 1))
    assert {users[u].id: change for u, change in updated.items()} == {"ann": (None, 20.0), "bob": (None, 16.0),
                                                                      "cy": (None, 0.0)}
    assert moodle.grades[4][0] == 11.0


def test_moodle_worksheet_holds_one_assignment(graded):
    status, printed = export(graded, "--to", "moodle", "01-chain-rule", "hw2", "--percent")
    assert status == 2 and "Moodle's grading worksheet holds one assignment" in printed


def test_moodle_gradebook_csv_never_writes_a_row_without_the_matched_column(graded):
    no_email = dataclasses.replace(BOB, email="")
    write_roster(graded / "grading" / "roster.csv", [ANN, no_email, CY, DAN, ERIN])
    status, printed = export(graded, "--to", "moodle-csv", "01-chain-rule", "--points-possible", "12")
    target = graded / "grading" / "exports" / "moodle-csv-01-chain-rule.csv"
    assert rows(target) == [["First name", "Last name", "ID number", "Email address", "01-chain-rule"],
                            ["Ann", "Lee", "S101", "ann@uni.example", "12"],
                            ["Cy", "Diaz", "S103", "cy@uni.example", "0"]]
    assert status == 1 and "REFUSED: graded but without an email (Moodle's Email address, the column matched)" \
                           in printed and printed.rstrip().endswith(f"wrote {target}")
    users = {i: s for i, s in enumerate([ANN, no_email, CY, DAN, ERIN], start=1)}
    moodle = MoodleGradebook(users, {(4, 7): 9.0})
    assert moodle.load(target, "Email address", "email", {"01-chain-rule": 7}) == [("ann@uni.example", 1),
                                                                                   ("cy@uni.example", 3)]
    assert moodle.grades == {(1, 7): 12.0, (3, 7): 0.0, (4, 7): 9.0}
    # why the row is refused: Moodle would put a blank-email row's grade on the previous row's student
    with target.open("a", newline="") as file:
        csv.writer(file).writerow(["Bob", "Ng", "S102", "", "9.6"])
    assert moodle.load(target, "Email address", "email", {"01-chain-rule": 7})[-1] == ("", 3)
    _, by_number = export(graded, "--to", "moodle-csv", "01-chain-rule", "--points-possible", "12", "--match",
                          "idnumber")
    assert "Ng, Bob" not in by_number and "REFUSED" not in by_number


def test_csv_file_keeps_the_roster_and_shows_penalties(graded):
    export(graded, "--to", "csv", "01-chain-rule")
    table = rows(graded / "grading" / "exports" / "csv-01-chain-rule.csv")
    assert table[0][-3:] == ["section", "01-chain-rule", "01-chain-rule late penalty"]
    assert [row[0] for row in table[1:]] == [s.id for s in CLASS]
    assert table[2][-2:] == ["9.6", "2.4"] and table[4][-2:] == ["", ""]


def test_preview_names_each_change_since_the_last_export_and_dry_run_writes_nothing(graded):
    target = graded / "grading" / "exports" / "canvas-01-chain-rule.csv"
    status, first = export(graded, "--to", "canvas", "01-chain-rule", *CANVAS, "--dry-run")
    assert not target.exists() and "dry run: nothing written" in first
    assert f"first export to {target}: 3 students" in first and "01-chain-rule (48213): 3 scores" in first
    export(graded, "--to", "canvas", "01-chain-rule", *CANVAS)
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gradebook:  # bob's regrade lifts the penalty
        gradebook.find_submission_notebook("01-chain-rule", "01-chain-rule", "bob").late_submission_penalty = 0.0
        gradebook.db.commit()
    fill_gradebook(graded, {}, {"01-chain-rule": {"dan": (6.0, 0.0)}})
    before = target.read_bytes()
    _, second = export(graded, "--to", "canvas", "01-chain-rule", *CANVAS, "--dry-run")
    assert target.read_bytes() == before
    assert "01-chain-rule (48213): 2 changed, 2 unchanged" in second and "Ng, Bob: 80 -> 100" in second
    assert "Ho, Dan: (not exported) -> 50" in second


def test_preview_lists_students_no_longer_exported(tmp_path):
    grades = Grades({"a": 10.0}, {"a": {"ann": Grade(10.0, 0.0), "bob": Grade(5.0, 0.0)}}, {"ann", "bob"})
    settings = Settings(CanvasExport, {"a": "A (1)"}, {"a": Scale(10.0, 10.0, "test")})
    write(build(grades, [ANN, BOB], settings)[0], tmp_path / "last.csv")
    assert "  no longer in the export (the LMS keeps what it has for them): Ng, Bob" in \
        preview(build(grades, [ANN], settings)[0], tmp_path / "last.csv")


def test_students_the_lms_cannot_identify_are_reported_not_dropped_in_silence(graded):
    anonymous = dataclasses.replace(BOB, lms_user_id="", sis_user_id="", sis_login_id="", email="")
    write_roster(graded / "grading" / "roster.csv", [ANN, anonymous, CY, DAN, ERIN])
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", *CANVAS)
    assert status == 1
    assert "without an lms_user_id, sis_user_id or sis_login_id (Canvas's ID, SIS User ID, SIS Login ID), so the " \
           "LMS could not match their row (not written; add it to the roster): bob" in printed
    assert "Ng, Bob" not in (graded / "grading" / "exports" / "canvas-01-chain-rule.csv").read_text()


@pytest.mark.parametrize(("roster", "message"), [
    ([ANN, ANN], "id 'ann' is on rows [2, 3]"),
    ([ANN, dataclasses.replace(BOB, lms_user_id="101")], "lms_user_id '101' is on rows [2, 3]"),
    ([ANN, dataclasses.replace(BOB, email="ANN@uni.example")], "email 'ann@uni.example' is on rows [2, 3]"),
    ([ANN, Student("", "No", "Id")], "row(s) [3] have no id"),
])
def test_a_roster_with_duplicates_or_gaps_is_refused(graded, roster, message):
    write_roster(graded / "grading" / "roster.csv", roster)
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", *CANVAS)
    assert status == 2 and message in printed
    assert not (graded / "grading" / "exports").exists()


def test_roster_columns_are_checked_and_excel_bom_is_fine(tmp_path):
    good = tmp_path / "roster.csv"
    good.write_text("\ufeffid, first_name ,email,participant:01\nann,Ann,ann@uni.example,7\n\n", encoding="utf-8")
    assert read_roster(good) == [Student("ann", "Ann", email="ann@uni.example", participants=(("01", "7"),))]
    bad = tmp_path / "typo.csv"
    bad.write_text("id,lms_userid\nann,101\n")
    with pytest.raises(RosterError, match=r"unknown column\(s\) \['lms_userid'\]"):
        read_roster(bad)
    twice = tmp_path / "twice.csv"
    twice.write_text("id,participant:01\nann,7\nbob,7\n")
    with pytest.raises(RosterError, match=r"participant:01 '7' is on rows \[2, 3\]"):
        read_roster(twice)
    with pytest.raises(RosterError, match="no roster at"):
        read_roster(tmp_path / "missing.csv")


def test_an_assignment_the_gradebook_lacks_is_refused(graded):
    status, printed = export(graded, "--to", "canvas", "02-nothing", *CANVAS)
    assert status == 2 and "the gradebook has no assignment '02-nothing' (it has: 01-chain-rule, hw2)" in printed


def test_nbgrader_export_runs_the_same_plugin(graded):
    """``nbgrader export --exporter=...`` writes the same file as the command (its preview goes to the log)."""
    from nbgrader.apps import ExportApp

    config = graded / "nbgrader_config.py"
    config.write_text(config.read_text() + '\nc.LmsExport.columns = {"01-chain-rule": "Exercise 1 (48213)"}\n'
                      'c.LmsExport.points_possible = {"01-chain-rule": 100}\n')
    export(graded, "--to", "canvas", "01-chain-rule", "--output", str(graded / "by-command.csv"))
    previous = os.getcwd()
    os.chdir(graded)
    try:
        app = ExportApp()
        app.initialize(["--exporter=autograder.lms.export.CanvasExport", "--to=by-nbgrader.csv",
                        "--assignment", "01-chain-rule", "--log-level=ERROR"])
        app.start()
    finally:
        os.chdir(previous)
    assert (graded / "by-nbgrader.csv").read_text() == (graded / "by-command.csv").read_text()
