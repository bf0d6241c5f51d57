"""LMS downloads in (autograder.lms.collect through nbgrader's ZipCollect, python -m autograder.lms collect): zips
named the way Canvas and Moodle name them go into submitted/ under the roster's ids; resubmissions keep the latest;
every file that matches no student is listed; a student with nothing in the download is named."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path, PurePath

import lms_class as cls
import pytest
from lms_class import ANN, BOB, CY, ERIN, NOTEBOOK, canvas_name, moodle_folder, write_zip

from autograder.lms import cli
from autograder.lms.collect import canonical, parse

ASSIGNMENT = "01-chain-rule"


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


@pytest.fixture
def course_dir(tmp_path):
    return cls.lms_course(tmp_path / "course")


CANVAS_DOWNLOAD = {
    canvas_name(ANN, 5001, NOTEBOOK): notebook("ann"),
    canvas_name(BOB, 5002, NOTEBOOK, late=True): notebook("bob, late"),
    canvas_name(CY, 4100, NOTEBOOK): notebook("cy, first"),  # cy re-uploaded: Canvas renamed the new copy
    canvas_name(CY, 5003, "01-chain-rule-1.ipynb"): notebook("cy, resubmitted"),
    canvas_name(ERIN, 5004, "work.zip"): cls.zipped({f"work/{NOTEBOOK}": notebook("erin, zipped")}),
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
    assert "01-submissions/diazcy_103_5003_01-chain-rule-1.ipynb (kept) over " \
           "01-submissions/diazcy_103_4100_01-chain-rule.ipynb" in printed
    assert "01-submissions/smithzed_999_5006_01-chain-rule.ipynb: Canvas user 999 is not in the roster" in printed
    assert "01-submissions/readme.txt: not a Canvas download name" in printed
    assert f"not notebooks (not collected): 01-submissions/{canvas_name(ERIN, 5005, 'notes.pdf')} (erin)" in printed
    assert "marked late by the LMS" in printed and printed.split("marked late by the LMS")[1].splitlines()[0] \
        .endswith(": bob")
    assert "in the roster with nothing in the download: dan" in printed
    assert not (course_dir / "submitted" / "bob" / ASSIGNMENT / "timestamp.txt").exists()  # no time, no penalty


def test_a_later_download_replaces_the_earlier_one_and_the_newest_upload_wins(course_dir, tmp_path):
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


def test_a_moodle_download_in_folders_or_flat(course_dir, tmp_path):
    download = {
        f"{moodle_folder(ANN, 31)}/{NOTEBOOK}": notebook("ann"),
        f"{moodle_folder(BOB, 32)}{NOTEBOOK}": notebook("bob, flat"),
        f"{moodle_folder(CY, 33)}/{NOTEBOOK}": notebook("cy, first"),
        f"{moodle_folder(CY, 33)}/01-chain-rule (1).ipynb": notebook("cy, resubmitted"),
        "Nobody Known_34_assignsubmission_file_/01-chain-rule.ipynb": notebook("?"),
        f"{moodle_folder(ERIN, 35).replace('file', 'onlinetext')}/onlinetext.html": "<p>see attached</p>",
    }
    status, printed = collect(course_dir, str(write_zip(tmp_path / "moodle.zip", download)), "--from", "moodle")
    assert submitted(course_dir) == {"ann": {NOTEBOOK: notebook("ann")}, "bob": {NOTEBOOK: notebook("bob, flat")},
                                     "cy": {NOTEBOOK: notebook("cy, resubmitted")}}
    assert status == 1
    assert "nobody named 'Nobody Known' in the roster (first_name last_name)" in printed
    assert "onlinetext.html (erin)" in printed and "nothing in the download: dan, erin" in printed


def test_moodle_never_guesses_between_students_with_one_name(course_dir, tmp_path):
    twin = ANN.__class__(**{**ANN.__dict__, "id": "ann2", "email": "ann2@uni.example", "lms_user_id": "201",
                            "sis_user_id": "S201", "sis_login_id": "alee2"})
    cls.write_roster(course_dir / "grading" / "roster.csv", [ANN, twin, BOB, CY, cls.DAN])
    download = {f"{moodle_folder(ANN, 31)}/{NOTEBOOK}": notebook("an Ann Lee")}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "moodle.zip", download)), "--from", "moodle")
    assert status == 1 and submitted(course_dir) == {}
    assert "2 roster students are named 'Ann Lee' (ann, ann2)" in printed


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
    ("01-s/Ann  Lee_31_assignsubmission_file_/a.ipynb", "moodle", "Ann Lee", "a.ipynb", False),
    ("01-s/Ann Lee_31_assignsubmission_file_a.ipynb", "moodle", "Ann Lee", "a.ipynb", False),
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
    """``nbgrader zip_collect ASSIGNMENT --force`` with the zip in grading/downloaded/ASSIGNMENT/archive/."""
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


def test_an_archive_too_large_or_unreadable_is_refused_before_anything_is_unpacked(course_dir, tmp_path):
    config = course_dir / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nc.LmsExtractor.max_megabytes = 1\n")
    bomb = {canvas_name(ANN, 5001, NOTEBOOK): notebook("ann"),  # a student's zip: 3 MB of zeros in 3 kB
            canvas_name(BOB, 5002, "work.zip"): cls.zipped({"zeros.bin": b"\0" * (3 << 20)})}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "bomb.zip", bomb)))
    assert (tmp_path / "bomb.zip").stat().st_size < 10_000
    assert status == 2 and "01-bomb.zip would unpack to 3 MB, more than c.LmsExtractor.max_megabytes = 1" in printed
    assert submitted(course_dir) == {} and not (course_dir / "grading" / "downloaded" / ASSIGNMENT / "extracted"
                                                / "01-bomb").exists()
    broken = {canvas_name(BOB, 5002, "work.zip"): b"PK\x03\x04 not really a zip"}
    status, printed = collect(course_dir, str(write_zip(tmp_path / "broken.zip", broken)))
    assert status == 2 and f"01-broken.zip/{canvas_name(BOB, 5002, 'work.zip')} cannot be unpacked" in printed
