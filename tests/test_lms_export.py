"""Grades out to the LMS (autograder.lms.export, python -m autograder.lms export): the exact Canvas and Moodle import
files from a gradebook filled without grading, blanks for students with no submission, the preview of changes, and
every student the export cannot place reported (a roster that cannot be trusted is refused)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import os

import pytest
from lms_class import ANN, BOB, CLASS, CY, DAN, ERIN, fill_gradebook, lms_course, write_roster
from nbgrader.api import Gradebook

from autograder.lms import cli
from autograder.lms.export import Grade, Grades, build, preview, write
from autograder.lms.roster import RosterError, Student, read_roster

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader 0.9 with SQLAlchemy 2

#: ann on time, bob late (penalty 2.4), cy failed to grade (0), dan nothing, erin only hw2; zed is not in the roster.
GRADES = {"01-chain-rule": {"ann": (12.0, 0.0), "bob": (12.0, 2.4), "cy": (0.0, 0.0), "zed": (5.0, 0.0)},
          "hw2": {"erin": (7.25, 0.0)}}
MAX = {"01-chain-rule": 12.0, "hw2": 8.0}


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


def test_canvas_file_has_canvas_columns_and_blanks(graded):
    status, printed = export(graded, "--to", "canvas", "01-chain-rule", "hw2")
    assert rows(graded / "grading" / "exports" / "canvas.csv") == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01-chain-rule", "hw2"],
        ["Lee, Ann", "101", "S101", "alee", "A", "12", ""],
        ["Ng, Bob", "102", "S102", "bng", "A", "9.6", ""],
        ["Diaz, Cy", "103", "S103", "cdiaz", "B", "0", ""],
        ["Ho, Dan", "104", "S104", "dho", "B", "", ""],
        ["O'Neil, Erin", "105", "S105", "eoneil", "B", "", "7.25"],
    ]
    assert status == 1  # zed and dan need a look; the file is written all the same
    assert "not in the roster, so not exported (add them to the roster): zed (01-chain-rule)" in printed
    assert "no submission from them in any assignment (blank cells; check the id if they did hand work in): dan" \
        in printed


def test_canvas_headers_come_from_the_configuration_and_zero_replaces_blank_when_asked(graded):
    config = graded / "nbgrader_config.py"
    config.write_text(config.read_text() + '\nc.LmsExport.columns = {"01-chain-rule": "Exercise 1 (48213)"}\n')
    export(graded, "--to", "canvas", "01-chain-rule", "--missing", "zero")
    table = rows(graded / "grading" / "exports" / "canvas.csv")
    assert table[0][-1] == "Exercise 1 (48213)"
    assert [row[-1] for row in table[1:]] == ["12", "9.6", "0", "0", "0"]


def test_moodle_file(graded):
    export(graded, "--to", "moodle", "--output", str(graded / "moodle-grades.csv"))
    assert rows(graded / "moodle-grades.csv") == [
        ["First name", "Last name", "ID number", "Email address", "01-chain-rule", "hw2"],
        ["Ann", "Lee", "S101", "ann@uni.example", "12", ""],
        ["Bob", "Ng", "S102", "bob@uni.example", "9.6", ""],
        ["Cy", "Diaz", "S103", "cy@uni.example", "0", ""],
        ["Dan", "Ho", "S104", "dan@uni.example", "", ""],
        ["Erin", "O'Neil", "S105", "erin@uni.example", "", "7.25"],
    ]


def test_csv_file_keeps_the_roster_and_shows_penalties(graded):
    export(graded, "--to", "csv", "01-chain-rule")
    table = rows(graded / "grading" / "exports" / "csv.csv")
    assert table[0][-3:] == ["section", "01-chain-rule", "01-chain-rule late penalty"]
    assert [row[0] for row in table[1:]] == [s.id for s in CLASS]
    assert table[2][-2:] == ["9.6", "2.4"] and table[4][-2:] == ["", ""]


def test_preview_names_each_change_since_the_last_export_and_dry_run_writes_nothing(graded):
    target = graded / "grading" / "exports" / "canvas.csv"
    status, first = export(graded, "--to", "canvas", "01-chain-rule", "--dry-run")
    assert not target.exists() and "dry run: nothing written" in first
    assert f"first export to {target}: 5 students" in first and "01-chain-rule: 3 scores, 2 blank" in first
    export(graded, "--to", "canvas", "01-chain-rule")
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gradebook:  # bob's regrade lifts the penalty
        gradebook.find_submission_notebook("01-chain-rule", "01-chain-rule", "bob").late_submission_penalty = 0.0
        gradebook.db.commit()
    fill_gradebook(graded, {}, {})
    before = target.read_bytes()
    _, second = export(graded, "--to", "canvas", "01-chain-rule", "hw2", "--dry-run")
    assert target.read_bytes() == before
    assert "01-chain-rule: 1 changed, 4 unchanged" in second and "Ng, Bob: 9.6 -> 12" in second
    assert "hw2 (a new column): 1 scores, 4 blank" in second


def test_preview_lists_students_no_longer_exported(tmp_path):
    grades = Grades({"a": 10.0}, {"a": {"ann": Grade(10.0, 0.0)}}, {"ann"})
    write(build(grades, [ANN, BOB], "canvas")[0], tmp_path / "last.csv")
    assert "  no longer in the export: Ng, Bob" in preview(build(grades, [ANN], "canvas")[0], tmp_path / "last.csv")


def test_students_the_lms_cannot_identify_are_reported_not_dropped_in_silence(graded):
    anonymous = dataclasses.replace(DAN, lms_user_id="", sis_user_id="", sis_login_id="", email="")
    write_roster(graded / "grading" / "roster.csv", [ANN, BOB, CY, anonymous, ERIN])
    status, printed = export(graded, "--to", "canvas", "01-chain-rule")
    assert status == 1
    assert "in the roster without an lms_user_id, sis_user_id or sis_login_id, so Canvas could not find them " \
           "(not exported): dan" in printed
    assert "Ho, Dan" not in (graded / "grading" / "exports" / "canvas.csv").read_text()
    _, printed = export(graded, "--to", "moodle", "01-chain-rule")
    assert "without an email or sis_user_id, so Moodle could not find them (not exported): dan" in printed


@pytest.mark.parametrize(("roster", "message"), [
    ([ANN, ANN], "id 'ann' is on rows [2, 3]"),
    ([ANN, dataclasses.replace(BOB, lms_user_id="101")], "lms_user_id '101' is on rows [2, 3]"),
    ([ANN, dataclasses.replace(BOB, email="ANN@uni.example")], "email 'ann@uni.example' is on rows [2, 3]"),
    ([ANN, Student("", "No", "Id")], "row(s) [3] have no id"),
])
def test_a_roster_with_duplicates_or_gaps_is_refused(graded, roster, message):
    write_roster(graded / "grading" / "roster.csv", roster)
    status, printed = export(graded, "--to", "canvas", "01-chain-rule")
    assert status == 2 and message in printed
    assert not (graded / "grading" / "exports" / "canvas.csv").exists()


def test_roster_columns_are_checked_and_excel_bom_is_fine(tmp_path):
    good = tmp_path / "roster.csv"
    good.write_text("\ufeffid, first_name ,email\nann,Ann,ann@uni.example\n\n", encoding="utf-8")
    assert read_roster(good) == [Student("ann", "Ann", email="ann@uni.example")]
    bad = tmp_path / "typo.csv"
    bad.write_text("id,lms_userid\nann,101\n")
    with pytest.raises(RosterError, match=r"unknown column\(s\) \['lms_userid'\]"):
        read_roster(bad)
    with pytest.raises(RosterError, match="no roster at"):
        read_roster(tmp_path / "missing.csv")


def test_an_assignment_the_gradebook_lacks_is_refused(graded):
    status, printed = export(graded, "--to", "canvas", "02-nothing")
    assert status == 2 and "the gradebook has no assignment '02-nothing' (it has: 01-chain-rule, hw2)" in printed


def test_nbgrader_export_runs_the_same_plugin(graded):
    """``nbgrader export --exporter=...`` writes the same file as the command (its preview goes to the log)."""
    from nbgrader.apps import ExportApp

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
