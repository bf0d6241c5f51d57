"""A small synthetic class for the LMS and term tests: its roster, download names made the way Canvas and Moodle
make them, and gradebooks filled without executing anything.

Canvas names a download ``sanitize("<sortable name>_[LATE_]<user id>")_<attachment id>_<uploaded name>``, where
sanitize drops every non-word character and lower-cases (Canvas's ContentZipper: ``get_filename`` and
``add_upload_submission``); Moodle puts a student's files in ``<First Last>_<participant>_assignsubmission_file_/``.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from autograder import course
from autograder.lms.roster import COLUMNS, Student

ASSIGNMENT = "01-chain-rule"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
DUE = datetime(2026, 10, 9, 23, 59)  # UTC, as the README's walk-through sets it

ANN = Student("ann", "Ann", "Lee", "ann@uni.example", "101", "S101", "alee", "A")
BOB = Student("bob", "Bob", "Ng", "bob@uni.example", "102", "S102", "bng", "A")
CY = Student("cy", "Cy", "Diaz", "cy@uni.example", "103", "S103", "cdiaz", "B")
DAN = Student("dan", "Dan", "Ho", "dan@uni.example", "104", "S104", "dho", "B")
ERIN = Student("erin", "Erin", "O'Neil", "erin@uni.example", "105", "S105", "eoneil", "B")
CLASS = [ANN, BOB, CY, DAN, ERIN]


def write_roster(path: Path, students: list[Student] = CLASS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(s) for s in students)
    return path


def canvas_name(student: Student, attachment: int, uploaded: str, late: bool = False) -> str:
    prefix = "_".join([student.sortable_name] + (["LATE"] if late else []) + [student.lms_user_id])
    sanitized = re.sub(r"[^\w]", "", prefix).lower()
    return f"{sanitized}_{attachment}_{uploaded}"


def moodle_folder(student: Student, participant: int) -> str:
    return f"{student.full_name}_{participant}_assignsubmission_file_"


def write_zip(path: Path, files: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def zipped(files: dict[str, bytes | str]) -> bytes:
    """An archive in memory (a student who uploads a zip of their work)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def lms_course(root: Path) -> Path:
    """A course folder with the configuration, the release of exercise 01 and the roster: enough to collect into and
    export from (nothing is executed)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(course.ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    (root / "exercises" / ASSIGNMENT).mkdir(parents=True, exist_ok=True)
    shutil.copy2(course.release_notebook(ASSIGNMENT), root / "exercises" / ASSIGNMENT / NOTEBOOK)
    write_roster(root / "grading" / "roster.csv")
    return root


def use_venv_tools() -> None:
    """nbgrader runs ``alembic`` from PATH when it creates a gradebook."""
    bin_dir = str(Path(sys.executable).parent)
    if not os.environ.get("PATH", "").startswith(bin_dir):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])


@functools.cache
def _empty_gradebook() -> bytes:
    """A new gradebook's bytes (creating one runs alembic in a subprocess: seconds, so once per session)."""
    from nbgrader.api import Gradebook

    use_venv_tools()
    with tempfile.TemporaryDirectory() as scratch:
        with Gradebook(f"sqlite:///{scratch}/gradebook.db"):
            pass
        return (Path(scratch) / "gradebook.db").read_bytes()


def fill_gradebook(root: Path, max_scores: dict[str, float], grades: dict[str, dict[str, tuple[float, float]]],
                   duedate: datetime | None = None) -> None:
    """A gradebook where each assignment has one notebook with one graded cell worth its maximum, and
    ``grades[assignment][student] = (score, penalty)``."""
    from nbgrader.api import Gradebook

    path = root / "gradebook.db"
    if not path.exists():
        path.write_bytes(_empty_gradebook())
    with Gradebook(f"sqlite:///{path}") as gradebook:
        for assignment, maximum in max_scores.items():
            gradebook.add_assignment(assignment, duedate=duedate)
            gradebook.add_notebook(assignment, assignment)
            gradebook.add_grade_cell("answer", assignment, assignment, max_score=maximum, cell_type="code")
            for student, (score, penalty) in grades.get(assignment, {}).items():
                gradebook.update_or_create_student(student)
                gradebook.add_submission(assignment, student)
                gradebook.find_grade("answer", assignment, assignment, student).auto_score = score
                gradebook.find_submission_notebook(assignment, assignment, student).late_submission_penalty = penalty
                gradebook.db.commit()
