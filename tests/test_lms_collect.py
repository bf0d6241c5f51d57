"""LMS downloads in (autograder.lms.collect through nbgrader's ZipCollect, python -m autograder.lms collect): zips
named the way Canvas and Moodle (4.1+ and before) name them go into submitted/ under the roster's ids; Moodle
students are found by their participant number, never their name; resubmissions keep the latest; every file that
matches no student is listed; and nothing an instructor hands in is lost: every download is kept, a replaced folder
is copied first, an unusable later file never replaces a usable earlier one, one student's bad archive is set aside
while the class is collected, and a download that cannot be read is refused by the name it was given."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from datetime import datetime
from pathlib import Path, PurePath

import lms_class as cls
import pytest
from lms_class import ANN, BOB, CY, DAN, ERIN, NOTEBOOK, canvas_name, moodle_folder, moodle_worksheet, write_zip, zipped
from nbgrader.api import Gradebook

from autograder.lms import cli
from autograder.lms.collect import canonical, parse
from autograder.lms.roster import read_roster

ASSIGNMENT = "01-chain-rule"
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader 0.9 with SQLAlchemy 2


def notebook(tag: str) -> str:
    """A notebook whose content says which upload it was."""
    return json.dumps({"cells": [], "metadata": {"upload": tag}, "nbformat": 4, "nbformat_minor": 5})


def collect(root: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli.main(["collect", "--course", str(root), ASSIGNMENT, *args])
    return status, out.getvalue()


def submitted(root: Path) -> dict[str, dict[str, str]]:
    """{student: {file: content}} of everything collected."""
    folder = root / "submitted"
    return {s.name: {f.name: f.read_text() for f in (s / ASSIGNMENT).iterdir()}
            for s in sorted(folder.iterdir())} if folder.exists() else {}


def kept(root: Path, what: str) -> list[str]:
    """Every file kept under grading/downloaded/ASSIGNMENT/<what>/, relative to it."""
    folder = root / "grading" / "downloaded" / ASSIGNMENT / what
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) if folder.exists() \
        else []


@pytest.fixture
def course_dir(tmp_path):
    return cls.lms_course(tmp_path / "course")


CANVAS_DOWNLOAD = {
    canvas_name(ANN, 5001, NOTEBOOK): notebook("ann"),
    canvas_name(BOB, 5002, NOTEBOOK, late=True): notebook("bob, late"),
    canvas_name(CY, 4100, NOTEBOOK): notebook("cy, first"),  # cy re-uploaded: Canvas renamed the new copy
    canvas_name(CY, 5003, "01-chain-rule-1.ipynb"): notebook("cy, resubmitted"),
    canvas_name(ERIN, 5004, "work.zip"): zipped({f"work/{NOTEBOOK}": notebook("erin, zipped")}),
    canvas_name(ERIN, 5005, "notes.pdf"): "%PDF",
    "smithzed_999_5006_01-chain-rule.ipynb": notebook("zed"),
    "readme.txt": "Downloaded from Canvas",
}


def test_a_canvas_download_goes_into_submitted_under_roster_ids(course_dir, tmp_path):
    status, printed = collect(course_dir, str(write_zip(tmp_path / "submissions.zip", CANVAS_DOWNLOAD)))
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}, "bob": {NOTEBOOK: notebook("bob, late")},
                                     "cy": {NOTEBOOK: notebook("cy, resubmitted")},
                                     "erin": {NOTEBOOK: notebook("erin, zipped")}}
    assert status == 1, printed  # files that match no student: a look is needed
    assert "collected 4 students into submitted/" in printed
    assert "submissions.zip/diazcy_103_5003_01-chain-rule-1.ipynb (kept) over " \
           "submissions.zip/diazcy_103_4100_01-chain-rule.ipynb" in printed
    assert "submissions.zip/smithzed_999_5006_01-chain-rule.ipynb: Canvas user 999 is not in the roster" in printed
    assert "submissions.zip/readme.txt: not a Canvas download name" in printed
    assert f"not notebooks (not collected): submissions.zip/{canvas_name(ERIN, 5005, 'notes.pdf')} (erin)" in printed
    assert "marked late by the LMS" in printed and printed.split("marked late by the LMS")[1].splitlines()[0] \
        .endswith(": bob")
    assert "in the roster with nothing collected from the download: dan" in printed
    assert not (course_dir / "submitted" / "bob" / ASSIGNMENT / "timestamp.txt").exists()  # no time, no penalty
    run = kept(course_dir, "downloads")[0].split("/")[0]
    assert kept(course_dir, "downloads") == [f"{run}/01-submissions.zip", f"{run}/given.json"]
    assert f"the download is kept in grading/downloaded/{ASSIGNMENT}/downloads/{run}" in printed


def test_every_download_is_kept_and_a_replaced_folder_is_copied_first(course_dir, tmp_path):
    old = write_zip(tmp_path / "at-deadline.zip", {canvas_name(CY, 4100, NOTEBOOK): notebook("cy, first"),
                                                   canvas_name(ANN, 4200, NOTEBOOK): notebook("ann")})
    collect(course_dir, str(old))
    (course_dir / "submitted" / "ann" / ASSIGNMENT / "timestamp.txt").write_text("2026-10-09 12:00:00 UTC")
    new = write_zip(tmp_path / "a-week-later.zip",
                    {canvas_name(CY, 5003, "01-chain-rule-1.ipynb"): notebook("cy, resubmitted")})
    status, printed = collect(course_dir, str(new), str(old))  # given in any order: Canvas's upload order decides
    assert status == 0, printed
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")},
                                     "cy": {NOTEBOOK: notebook("cy, resubmitted")}}
    assert "resubmissions (kept the latest)" in printed
    downloads = kept(course_dir, "downloads")
    assert sorted(p.split("/")[1] for p in downloads if not p.endswith("given.json")) == \
        ["01-a-week-later.zip", "01-at-deadline.zip", "02-at-deadline.zip"]
    replaced = kept(course_dir, "replaced")
    assert any(p.endswith(f"ann/{NOTEBOOK}") for p in replaced) and any(p.endswith("ann/timestamp.txt")
                                                                         for p in replaced)
    assert any(p.endswith(f"cy/{NOTEBOOK}") for p in replaced)
    status, again = collect(course_dir, str(new), str(old))  # the same downloads again: kept once
    assert kept(course_dir, "downloads") == downloads


MOODLE_CLASS = {"ann": "31", "bob": "32", "cy": "33", "erin": "35"}


def moodle_course(course_dir: Path) -> Path:
    cls.write_roster(course_dir / "grading" / "roster.csv", cls.CLASS, {ASSIGNMENT: MOODLE_CLASS})
    return course_dir


def test_a_moodle_download_as_moodle_4_1_and_earlier_name_it_found_by_participant_number(course_dir, tmp_path):
    moodle_course(course_dir)
    download = {
        f"{moodle_folder(ANN, 31, modern=True)}/{NOTEBOOK}": notebook("ann"),  # Moodle 4.1+: no trailing _
        f"{moodle_folder(BOB, 32)}{NOTEBOOK}": notebook("bob, flat"),  # "download as folders" off
        f"{moodle_folder(CY, 33, modern=True)}/{NOTEBOOK}": notebook("cy, first"),
        f"{moodle_folder(CY, 33, modern=True)}/01-chain-rule (1).ipynb": notebook("cy, resubmitted"),
        f"{moodle_folder(ERIN, 35, modern=True)}/{NOTEBOOK}": notebook("erin"),  # "Erin ONeil": Moodle drops the '
        "Nobody Known_34_assignsubmission_file/01-chain-rule.ipynb": notebook("?"),
        f"{moodle_folder(DAN, 36, modern=True).replace('file', 'onlinetext')}/onlinetext.html": "<p>see attached</p>",
    }
    status, printed = collect(course_dir, str(write_zip(tmp_path / "moodle.zip", download)), "--from", "moodle")
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}, "bob": {NOTEBOOK: notebook("bob, flat")},
                                     "cy": {NOTEBOOK: notebook("cy, resubmitted")},
                                     "erin": {NOTEBOOK: notebook("erin")}}
    assert status == 1, printed
    assert "participant 34 (Nobody Known) is not in the roster's participant:01-chain-rule column" in printed
    assert "participant 36 (Dan Ho) is not in the roster's participant:01-chain-rule column" in printed
    assert "nothing collected from the download: dan" in printed


def test_the_grading_worksheet_puts_participant_numbers_in_the_roster(course_dir, tmp_path):
    numbers = {"ann": "4031", "bob": "4017", "cy": "4052", "dan": "4008", "erin": "4044"}
    sheet = moodle_worksheet(tmp_path / "Grades-AUTOGRAD-Exercise 1-77.csv", cls.CLASS[:4], numbers)
    download = {f"{moodle_folder(ANN, 4031, modern=True)}/{NOTEBOOK}": notebook("ann"),
                f"{moodle_folder(ERIN, 4044, modern=True)}/{NOTEBOOK}": notebook("erin")}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "m.zip", download)), "--from", "moodle",
                              "--worksheet", str(sheet))
    assert "participant:01-chain-rule holds 4 participant numbers" in printed
    assert "roster students not in the worksheet (no participant:01-chain-rule): erin" in printed
    assert {s.id: s.participant(ASSIGNMENT) for s in read_roster(course_dir / "grading" / "roster.csv")} == \
        {**{k: v for k, v in numbers.items() if k != "erin"}, "erin": ""}
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}}
    assert status == 1 and "participant 4044 (Erin ONeil) is not in the roster's" in printed
    assert len(list((course_dir / "grading" / "downloaded" / ASSIGNMENT / "worksheets").glob("*.csv"))) == 1


def test_moodle_without_participant_numbers_says_to_give_the_worksheet(course_dir, tmp_path):
    download = {f"{moodle_folder(ANN, 31, modern=True)}/{NOTEBOOK}": notebook("an Ann Lee")}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "moodle.zip", download)), "--from", "moodle")
    assert status == 1 and submitted(course_dir) == {}
    assert "the roster has no participant:01-chain-rule column yet (give Moodle's grading worksheet: collect " \
           "--worksheet FILE)" in printed


def test_a_worse_later_download_never_replaces_a_usable_submission(course_dir, tmp_path):
    collect(course_dir, str(write_zip(tmp_path / "first.zip", {canvas_name(CY, 4100, NOTEBOOK): notebook("cy"),
                                                               canvas_name(ANN, 4101, NOTEBOOK): notebook("ann")})))
    worse = write_zip(tmp_path / "second.zip", {canvas_name(CY, 5100, "Untitled.ipynb"): notebook("cy, misnamed"),
                                                canvas_name(ANN, 5101, NOTEBOOK): "{not json",
                                                canvas_name(BOB, 5102, NOTEBOOK): notebook("bob")})
    status, printed = collect(course_dir, str(worse))
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}, "bob": {NOTEBOOK: notebook("bob")},
                                     "cy": {NOTEBOOK: notebook("cy")}}
    assert status == 1, printed
    assert "cy: the new download has no usable 01-chain-rule.ipynb (Untitled.ipynb: a " \
           "name the assignment does not have); collect --replace takes it" in printed
    assert "ann: the new download has no usable" in printed and "01-chain-rule.ipynb: not a notebook" in printed
    aside = kept(course_dir, "set-aside")
    assert any(p.endswith(canvas_name(CY, 5100, "Untitled.ipynb")) for p in aside)
    assert any(p.endswith(canvas_name(ANN, 5101, NOTEBOOK)) for p in aside)
    status, printed = collect(course_dir, str(worse), "--replace")
    assert submitted(course_dir)["cy"] == {"Untitled.ipynb": notebook("cy, misnamed")}
    assert any(p.endswith(f"cy/{NOTEBOOK}") for p in kept(course_dir, "replaced"))  # the good one is still kept


def test_one_students_corrupt_or_hostile_archive_is_set_aside_and_the_class_collected(course_dir, tmp_path):
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr(f"../../{NOTEBOOK}", notebook("escaped"))
    download = {canvas_name(ANN, 5001, NOTEBOOK): notebook("ann"),
                canvas_name(BOB, 5002, "work.zip"): b"PK\x03\x04 not really a zip",
                canvas_name(CY, 5003, "work.zip"): evil.getvalue(),
                canvas_name(ERIN, 5004, "work.zip"): zipped({NOTEBOOK: notebook("erin")})}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "submissions.zip", download)))
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}, "erin": {NOTEBOOK: notebook("erin")}}
    assert status == 1, printed
    assert f"submissions.zip/{canvas_name(BOB, 5002, 'work.zip')} (bob): it cannot be unpacked" in printed
    assert f"submissions.zip/{canvas_name(CY, 5003, 'work.zip')} (cy): member '../../{NOTEBOOK}' would be written " \
           "outside its folder; refused" in printed
    assert not list(course_dir.parent.rglob(f"*/{NOTEBOOK}")) or all("escaped" not in p.read_text() for p in
                                                                      course_dir.parent.rglob(NOTEBOOK))
    assert len([p for p in kept(course_dir, "set-aside") if p.endswith("work.zip")]) == 2


def test_a_download_that_cannot_be_read_is_refused_by_the_name_it_was_given(course_dir, tmp_path):
    broken = tmp_path / "Downloads" / "submissions (3).zip"
    broken.parent.mkdir()
    broken.write_bytes(b"PK\x03\x04 truncated")
    status, printed = collect(course_dir, str(broken))
    assert status == 2 and f"{broken}: it cannot be unpacked" in printed and "01-submissions" not in printed
    assert submitted(course_dir) == {} and "Traceback" not in printed


def test_a_member_of_the_download_outside_its_folder_is_refused_the_rest_collected(course_dir, tmp_path):
    escaping = write_zip(tmp_path / "escaping.zip", {f"../{canvas_name(BOB, 5002, NOTEBOOK)}": notebook("bob"),
                                                    f"/tmp/{NOTEBOOK}": notebook("x"),
                                                    canvas_name(ANN, 5001, NOTEBOOK): notebook("ann")})
    status, printed = collect(course_dir, str(escaping))
    assert status == 1 and "Traceback" not in printed
    assert f"escaping.zip: member '../{canvas_name(BOB, 5002, NOTEBOOK)}' (bob): would be written outside its " \
           "folder; refused -> the download kept (01-escaping.zip)" in printed
    assert f"escaping.zip: member '/tmp/{NOTEBOOK}': would be written outside its folder; refused" in printed
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}}
    downloaded = course_dir / "grading" / "downloaded" / ASSIGNMENT
    assert not (downloaded / NOTEBOOK).exists() and not (downloaded / canvas_name(BOB, 5002, NOTEBOOK)).exists()


def test_a_student_archive_too_large_is_set_aside_a_download_too_large_refused(course_dir, tmp_path):
    config = course_dir / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nc.LmsExtractor.max_megabytes = 1\n")
    bomb = {canvas_name(ANN, 5001, NOTEBOOK): notebook("ann"),  # a student's zip: 3 MB of zeros in 3 kB
            canvas_name(BOB, 5002, "work.zip"): zipped({"zeros.bin": b"\0" * (3 << 20)})}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "bomb.zip", bomb)))
    assert (tmp_path / "bomb.zip").stat().st_size < 10_000
    assert status == 1 and "(bob): it would unpack to 3 MB, more than the 0 MB left under " \
                           "c.LmsExtractor.max_megabytes" in printed
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "huge.zip", {"zeros.bin": b"\0" * (3 << 20)})))
    assert status == 2 and "huge.zip: it would unpack to 3 MB" in printed


def test_an_lms_download_replacing_an_exchange_submission_drops_its_time(course_dir, tmp_path):
    """erin submitted through the exchange (late), then on Canvas: the download is graded, so its time (none) is
    the one used, not the exchange's."""
    folder = course_dir / "submitted" / "erin" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text(notebook("erin, exchange"))
    (folder / "timestamp.txt").write_text("2026-10-11 09:00:00.000000 UTC")
    cls.fill_gradebook(course_dir, {ASSIGNMENT: 12.0}, {ASSIGNMENT: {"erin": (12.0, 2.4)}}, duedate=cls.DUE)
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        gradebook.update_or_create_submission(ASSIGNMENT, "erin", timestamp=datetime(2026, 10, 11, 9))
    status, printed = collect(course_dir, str(write_zip(tmp_path / "s.zip", {canvas_name(ERIN, 5004, NOTEBOOK):
                                                                             notebook("erin, canvas")})))
    assert status == 0, printed
    assert submitted(course_dir) == {"erin": {NOTEBOOK: notebook("erin, canvas")}}
    assert "submission times no longer used (the download has none; the LMS's late policy applies): erin " \
           "(2026-10-11 09:00 UTC)" in printed
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        assert gradebook.find_submission(ASSIGNMENT, "erin").timestamp is None
    assert any(p.endswith("erin/timestamp.txt") for p in kept(course_dir, "replaced"))


def test_no_roster_or_no_archive_stops_with_nothing_collected(course_dir, tmp_path):
    status, printed = collect(course_dir, str(tmp_path / "missing.zip"))
    assert status == 2 and "no such file" in printed
    (course_dir / "grading" / "roster.csv").unlink()
    status, printed = collect(course_dir, str(write_zip(tmp_path / "s.zip", CANVAS_DOWNLOAD)))
    assert status == 2 and "no roster at" in printed and submitted(course_dir) == {}


@pytest.mark.parametrize(("path", "lms", "who", "uploaded", "late"), [
    ("01-s/leeann_101_5001_01-chain-rule.ipynb", "canvas", "101", "01-chain-rule.ipynb", False),
    ("01-s/ngbob_late_102_5002_my_work_2.ipynb", "canvas", "102", "my_work_2.ipynb", True),
    ("01-s/ngbob_LATE_102_5002_x.ipynb", "canvas", "102", "x.ipynb", True),
    ("01-s/oneilerin_105_5004_work/work/01-chain-rule.ipynb", "canvas", "105", "01-chain-rule.ipynb", False),
    ("01-s/Ann  Lee_31_assignsubmission_file_/a.ipynb", "moodle", "31", "a.ipynb", False),
    ("01-s/Ann Lee_31_assignsubmission_file/a.ipynb", "moodle", "31", "a.ipynb", False),  # Moodle 4.1+
    ("01-s/Erin ONeil_4044_assignsubmission_file/sub/a.ipynb", "moodle", "4044", "a.ipynb", False),
    ("01-s/Participant_77_assignsubmission_file/a.ipynb", "moodle", "77", "a.ipynb", False),  # blind marking
    ("01-s/Ann Lee_31_assignsubmission_file_a.ipynb", "moodle", "31", "a.ipynb", False),
])
def test_download_names(path, lms, who, uploaded, late):
    download = parse(PurePath(path), lms)
    assert (download.who, download.uploaded, download.late) == (who, uploaded, late)


def test_files_that_are_no_download_names():
    assert parse(PurePath("01-s/readme.txt"), "canvas") is None
    assert parse(PurePath("01-s/leeann_101_5001_x.ipynb"), "moodle") is None
    assert parse(PurePath("01-submissions_1_2_zip/readme.txt"), "canvas") is None  # the archive's own folder


def test_renamed_uploads_are_the_notebook_they_renamed():
    notebooks = {"01-chain-rule.ipynb", "hw-2.ipynb"}
    assert canonical("01-chain-rule-3.ipynb", notebooks) == ("01-chain-rule.ipynb", 3)
    assert canonical("01-chain-rule (12).ipynb", notebooks) == ("01-chain-rule.ipynb", 12)
    assert canonical("hw-2.ipynb", notebooks) == ("hw-2.ipynb", 0)  # a name that is itself a notebook stays
    assert canonical("hw-2-1.ipynb", notebooks) == ("hw-2.ipynb", 1)
    assert canonical("Untitled-1.ipynb", notebooks) == ("Untitled-1.ipynb", 0)


def test_nbgrader_zip_collect_uses_the_same_plugins_from_the_configuration(course_dir, tmp_path):
    """``nbgrader zip_collect ASSIGNMENT --force`` with the zip in grading/downloaded/ASSIGNMENT/archive/, which it
    leaves in place."""
    from nbgrader.apps import ZipCollectApp

    archive = course_dir / "grading" / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    write_zip(archive / "submissions.zip", CANVAS_DOWNLOAD)
    with cli.in_course(course_dir):
        app = ZipCollectApp()
        app.initialize([ASSIGNMENT, "--force", "--log-level=ERROR"])
        app.start()
    assert submitted(course_dir)["cy"] == {NOTEBOOK: notebook("cy, resubmitted")}
    assert sorted(submitted(course_dir)) == ["ann", "bob", "cy", "erin"]
    assert (archive / "submissions.zip").exists()
