"""A small synthetic class for the LMS and term tests: its roster, download names made the way Canvas and Moodle
make them, gradebooks filled without executing anything, and the LMSs' importers as their sources state them.

Canvas names a download ``sanitize("<sortable name>_[LATE_]<user id>")_<attachment id>_<uploaded name>``, where
sanitize drops every non-word character and lower-cases (Canvas's ContentZipper: ``get_filename`` and
``add_upload_submission``). Moodle 4.1 and later put a student's files in ``clean_filename("<Full Name>_<participant>")
+ "_assignsubmission_file"`` (``mod/assign/classes/downloader.php``; before 4.1 the folder ended in ``_``), where
``clean_filename`` drops characters such as ``'`` (:func:`moodle_clean`), and number participants per assignment.

The importers (:class:`CanvasCourse`, :class:`MoodleGradebook`, :class:`MoodleAssignment`) read an exported file
with the matching rules of Canvas's ``app/models/gradebook_importer.rb`` (``GradebookImporter``), Moodle's
``grade/import/csv/classes/load_data.php`` and Moodle's ``mod/assign/feedback/offline/importgradeslib.php`` with
``locallib.php`` (``process_import_grades``), each rule cited where it is written.
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
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from autograder import course
from autograder.lms.roster import COLUMNS, PARTICIPANT, Student

ASSIGNMENT = "01-chain-rule"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
DUE = datetime(2026, 10, 9, 23, 59)  # UTC, as the walk-through in docs/instructors.md sets it

ANN = Student("ann", "Ann", "Lee", "ann@uni.example", "101", "S101", "alee", "A")
BOB = Student("bob", "Bob", "Ng", "bob@uni.example", "102", "S102", "bng", "A")
CY = Student("cy", "Cy", "Diaz", "cy@uni.example", "103", "S103", "cdiaz", "B")
DAN = Student("dan", "Dan", "Ho", "dan@uni.example", "104", "S104", "dho", "B")
ERIN = Student("erin", "Erin", "O'Neil", "erin@uni.example", "105", "S105", "eoneil", "B")
CLASS = [ANN, BOB, CY, DAN, ERIN]
FAY = Student("fay", "Fay", "Ruiz", "fay@uni.example", "106", "S106", "fruiz", "A")
GUS = Student("gus", "Gus", "Park", "gus@uni.example", "107", "S107", "gpark", "B")
HAL = Student("hal", "Hal", "D'Arcy", "hal@uni.example", "108", "S108", "hdarcy", "A")
TERM = [ANN, BOB, CY, DAN, ERIN, FAY, GUS, HAL]  # eight, as the walk
#: Moodle's participant numbers for 01-chain-rule (allocated in random order, one per assignment and user).
PARTICIPANTS = {"ann": "4031", "bob": "4017", "cy": "4052", "dan": "4008", "erin": "4044", "fay": "4023",
                "gus": "4060", "hal": "4012"}


def write_roster(path: Path, students: list[Student] = CLASS, participants: dict[str, dict[str, str]] | None = None
                 ) -> Path:
    """The roster CSV; ``participants[assignment][id]``: Moodle's participant numbers (participant:ASSIGNMENT)."""
    participants = participants or {}
    columns = list(COLUMNS) + [PARTICIPANT + a for a in participants]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        for s in students:
            row = {k: v for k, v in asdict(s).items() if k in COLUMNS}
            writer.writerow({**row, **{PARTICIPANT + a: n.get(s.id, "") for a, n in participants.items()}})
    return path


def canvas_name(student: Student, attachment: int, uploaded: str, late: bool = False) -> str:
    prefix = "_".join([student.sortable_name] + (["LATE"] if late else []) + [student.lms_user_id])
    sanitized = re.sub(r"[^\w]", "", prefix).lower()
    return f"{sanitized}_{attachment}_{uploaded}"


def moodle_clean(name: str) -> str:
    """What Moodle's ``clean_filename`` (PARAM_FILE) leaves of a name: no ``' & " : | < > * ? / \\`` (and no
    control characters)."""
    return re.sub(r"[\x00-\x1f'&\":|<>*?/\\]", "", name)


def moodle_folder(student: Student, participant: int | str, modern: bool = False) -> str:
    """A student's folder in Moodle's download: Moodle 4.1+ (``modern``) has no trailing ``_``."""
    prefix = moodle_clean(f"{student.full_name.replace('_', ' ')}_{participant}")
    return f"{prefix}_assignsubmission_file" + ("" if modern else "_")


def moodle_worksheet(path: Path, students: list[Student], participants: dict[str, str], maximum: float = 100,
                     graded: dict[str, tuple[str, str]] | None = None) -> Path:
    """An assignment's "Download grading worksheet" as Moodle writes it (``assign_grading_table`` in download mode,
    identity field Email address): ``graded[id] = (grade, last modified)`` for grades already in Moodle."""
    graded = graded or {}
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                         "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                         "Feedback comments"])
        for s in students:
            grade, modified = graded.get(s.id, ("", "-"))
            writer.writerow([f"Participant {participants[s.id]}", s.full_name, s.email, "Submitted for grading",
                             grade, f"{maximum:.2f}", "Yes", "Friday, 9 October 2026, 11:12 PM", modified, ""])
    return path


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
    ``grades[assignment][student] = (score, penalty)`` (an assignment already there takes more grades)."""
    from nbgrader.api import Gradebook

    path = root / "gradebook.db"
    if not path.exists():
        path.write_bytes(_empty_gradebook())
    with Gradebook(f"sqlite:///{path}") as gradebook:
        for assignment, maximum in max_scores.items():
            gradebook.add_assignment(assignment, duedate=duedate)
            gradebook.add_notebook(assignment, assignment)
            gradebook.add_grade_cell("answer", assignment, assignment, max_score=maximum, cell_type="code")
        for assignment, by_student in grades.items():
            for student, (score, penalty) in by_student.items():
                gradebook.update_or_create_student(student)
                gradebook.add_submission(assignment, student)
                gradebook.find_grade("answer", assignment, assignment, student).auto_score = score
                gradebook.find_submission_notebook(assignment, assignment, student).late_submission_penalty = penalty
                gradebook.db.commit()


# --- The LMSs' importers, as their sources state their matching rules -----------------------------------------------


def _rows(path: Path) -> list[list[str]]:
    with Path(path).open(newline="", encoding="utf-8-sig") as file:
        return list(csv.reader(file))


@dataclass
class CanvasImport:
    """What Canvas's GradebookImporter made of a file: each row's student, what it would change, what it would
    create."""

    students: list[tuple[str, int | None]]  # (the row's Student cell, the Canvas user it matched; None: a new user)
    new_assignments: list[str]
    changes: dict[tuple[int, int], tuple[str, str]]  # (user, assignment) -> (current score, imported grade)
    points_possible_row: bool


@dataclass
class CanvasCourse:
    """A Canvas course as ``app/models/gradebook_importer.rb`` sees it: users (id, name, sortable name, SIS user
    id, login id), assignments (id -> title, points possible) and the scores already in the gradebook."""

    users: dict[int, Student]
    assignments: dict[int, tuple[str, float]]
    scores: dict[tuple[int, int], str]

    NON_ASSIGNMENT = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points", "Final Grade",
                      "Override Score", "Override Grade", "Override Status")

    def parse(self, path: Path) -> CanvasImport:
        rows = _rows(path)
        header = rows[0]
        # header?/row_has_student_headers?: "Student" in the first cell, "ID" in the second, more than 3 cells
        assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], "Canvas: Invalid header row"
        # update_column_count: SIS Login ID right after ID, or SIS User ID then SIS Login ID; then "Section" last
        columns, sis_user, sis_login = 3, None, None
        if re.search(r"SIS\s+Login\s+ID", header[2]):
            sis_login, columns = 2, 4
        elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
            sis_user, sis_login, columns = 2, 3, 5
        assert "Section" in header[columns - 1], "Canvas: Invalid header row (no Section before the assignments)"
        # strip_non_assignment_columns, then parse_assignments: the id in "Title (id)" (Assignment.title_and_id),
        # else an assignment with that exact title, else a new assignment
        assignment_at: dict[int, int] = {}
        new = []
        for index, name in enumerate(header[columns:], start=columns):
            if re.search("|".join(self.NON_ASSIGNMENT), name):
                continue
            match = re.match(r"\A(.*)\s\((\d+)\)\Z", name, re.S)
            found = int(match[2]) if match and int(match[2]) in self.assignments else None
            found = found or next((i for i, (title, _) in self.assignments.items() if title == name), None)
            if found is None:
                new.append(name)
                found = -len(new)
            assignment_at[index] = found
        students, changes, points_row = [], {}, False
        for row in rows[1:]:
            if row and "Points Possible" in row[0]:  # process_pp: new points possible for the columns
                points_row = True
                continue
            if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", cell or "", re.I) for cell in row):
                continue
            # process_student: the ID column, else SIS User ID, else SIS Login ID, else name or sortable name
            user = int(row[1]) if row[1].strip().isdigit() and int(row[1]) in self.users else None
            if user is None and sis_user is not None and row[sis_user].strip():
                user = next((i for i, s in self.users.items() if s.sis_user_id == row[sis_user].strip()), None)
            if user is None and sis_login is not None and row[sis_login].strip():
                user = next((i for i, s in self.users.items() if s.sis_login_id == row[sis_login].strip()), None)
            if user is None:
                user = next((i for i, s in self.users.items() if row[0] in (s.full_name, s.sortable_name)), None)
            students.append((row[0], user))
            for index, assignment in assignment_at.items():
                grade = (row[index] if index < len(row) else "").strip()
                current = self.scores.get((user, assignment), "")
                if not self.no_change(grade, current):
                    changes[user, assignment] = (current, grade)
        return CanvasImport(students, new, changes, points_row)

    @staticmethod
    def no_change(new: str, current: str) -> bool:
        """``no_change_to_value?``: equal, or no score on both sides (blank or "-"), or equal at two decimals; a
        blank over a score is a change (the score is cleared)."""
        if new == current or (new in ("", "-") and current in ("", "-")):
            return True
        if not new or not current:
            return False
        try:
            return f"{float(new.rstrip('%')):.2f}" == f"{float(current):.2f}" and not new.endswith("%")
        except ValueError:
            return False

    def apply(self, imported: CanvasImport) -> None:
        """The import applied: a percent grade becomes points of the assignment (Assignment#grade_to_score)."""
        for (user, assignment), (_, grade) in imported.changes.items():
            if grade.endswith("%"):
                grade = f"{float(grade[:-1]) / 100 * self.assignments[assignment][1]:g}"
            self.scores[user, assignment] = grade


@dataclass
class MoodleGradebook:
    """Moodle's gradebook CSV import (``grade/import/csv/classes/load_data.php``) with the mapping the teacher
    chooses: ``map_from`` (a file column) to a user field, and file columns to grade items."""

    users: dict[int, Student]
    grades: dict[tuple[int, int], float | None]  # (user, grade item) -> grade

    def load(self, path: Path, map_from: str, field_name: str, items: dict[str, int]) -> list[tuple[str, int]]:
        """Import; return (the row's Email address cell, the user its grades went to) per row. Rules:
        ``prepare_import_grade_data`` sets ``$this->studentid`` once, before the rows; ``map_user_data_with_value``
        changes it only for a non-empty cell ("Skip invalid row with blank user field"), so a row whose cell is
        empty goes to the previous row's student; a value matching no user aborts the import; ``update_grade_item``
        turns ``''`` and ``-`` into null (the grade is cleared)."""
        rows = _rows(path)
        header = [h.strip() for h in rows[0]]
        studentid = None
        landed = []
        staged: dict[tuple[int, int], float | None] = {}
        for line in rows[1:]:
            if len(line) <= 1:
                continue
            newgrades = []
            for key, value in enumerate(line):
                value = value.strip()
                if header[key] == map_from:
                    if value:
                        user = next((i for i, s in self.users.items() if getattr(s, field_name) == value), None)
                        if user is None:
                            raise AssertionError(f"Moodle: usermappingerror ({map_from} {value!r})")
                        studentid = user
                elif header[key] in items:
                    newgrades.append((items[header[key]], None if value in ("", "-") else float(value)))
            if studentid is None:
                raise AssertionError("Moodle: usermappingerrorusernotfound (the import is aborted)")
            for item, grade in newgrades:
                staged[studentid, item] = grade
            landed.append((line[header.index("Email address")] if "Email address" in header else "", studentid))
        self.grades.update(staged)
        return landed


@dataclass
class MoodleAssignment:
    """An assignment's "Upload grading worksheet" (``importgradeslib.php`` and ``process_import_grades``)."""

    participants: dict[str, int]  # participant number -> user (assign_user_mapping)
    users: dict[int, Student]
    maximum: float
    grades: dict[int, tuple[float, datetime]]  # user -> (grade, time modified)

    def upload(self, path: Path, now: datetime, ignore_modified: bool = False) -> dict[int, tuple]:
        """Import; return ``{user: (grade before, grade after)}`` for the grades updated. ``init`` requires the
        columns Identifier, Grade and Last modified (grade); ``next`` strips the word "Participant" and looks the
        rest up in the assignment's participant table (no match: the row is skipped); a grade that is blank,
        negative, above the maximum, unchanged, or older than Moodle's (Moodle's modified more than 60 s after the
        row's, unless ignore_modified) is skipped."""
        from nbgrader.utils import parse_utc

        rows = _rows(path)
        header = rows[0]
        for column in ("Identifier", "Grade", "Last modified (grade)"):
            assert column in header, f"Moodle: invalidgradeimport (no {column!r} column)"
        at = {name: header.index(name) for name in ("Identifier", "Grade", "Last modified (grade)")}
        updated = {}
        for row in rows[1:]:
            user = self.participants.get(row[at["Identifier"]][len("Participant"):].strip())
            if user is None:
                continue
            raw = row[at["Grade"]].strip()
            try:
                modified = parse_utc(row[at["Last modified (grade)"]])
            except ValueError:
                modified = datetime(1970, 1, 1)
            before = self.grades.get(user)
            stale = before is not None and before[1] > modified + timedelta(seconds=60)
            if raw == "" or float(raw) < 0 or (before and before[0] == float(raw)) or float(raw) > self.maximum:
                continue
            if stale and not ignore_modified:
                continue
            self.grades[user] = (float(raw), now)
            updated[user] = (before[0] if before else None, float(raw))
        return updated
