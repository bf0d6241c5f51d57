"""Grades from the gradebook into the LMS: Canvas's and Moodle's grade import CSVs, or a plain CSV.

Each format is an nbgrader export plugin (``nbgrader export --exporter=autograder.lms.export.CanvasExport``) and a
command with a preview (``python -m autograder.lms export --to canvas ASSIGNMENT...``). The rows are the roster's
(:mod:`.roster`), in its order: a student's score is the gradebook's, late penalty taken off; a student with no
submission gets a blank cell (``--missing zero``, or ``c.LmsExport.missing = "zero"``, for a 0 instead); a
submission the grader could not grade is in the gradebook as 0 and exported as 0.

* **Canvas** (Grades > Import): the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
  assignment (Canvas's GradebookImporter requires "Student" and "ID" first and "Section" last). Canvas finds the
  assignment by the number in a header ``Name (1234)`` (copy it from Canvas's own gradebook export into
  ``c.LmsExport.columns``), else by an exact title, else it creates a new assignment; it finds a student by ID, else
  SIS User ID, else SIS Login ID, else name. No ``Points Possible`` row is written: Canvas would take its values as
  new maxima for the assignments.
* **Moodle** (Grades > Import > CSV file): ``First name, Last name, ID number, Email address``, then one column per
  assignment; in the import form map "Email address" to "Email address" (or "ID number" to "ID number") and each
  assignment column to its grade item. A blank cell is "no grade" in Moodle.
* **csv**: every roster column, then per assignment its score and its late penalty.

Before writing, :func:`preview` compares the new file with the one already at the destination (the last export
there): which scores changed, appeared or disappeared. What the export cannot place is reported, never dropped in
silence: students with grades who are not in the roster, roster ids nbgrader has no submission from (a typo in the
roster shows as one of each), roster rows without the identity the LMS needs. A roster with duplicate ids or shared
identities is refused (:class:`~autograder.lms.roster.RosterError`).
"""

from __future__ import annotations

import csv
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Dict, Enum, Unicode

from .roster import COLUMNS, Roster, Student, read_roster


class ExportError(RuntimeError):
    """The export cannot be made (an assignment the gradebook does not have...)."""


@dataclass(frozen=True)
class Grade:
    """One student's grade on one assignment, from the gradebook."""

    score: float  # before the late penalty
    penalty: float

    @property
    def final(self) -> float:
        return max(0.0, self.score - self.penalty)


@dataclass
class Grades:
    """What the gradebook holds for the assignments to export."""

    max_scores: dict[str, float]
    by_assignment: dict[str, dict[str, Grade]]  # assignment -> student -> grade
    with_work: set[str]  # every student with a submission of any assignment in the gradebook


def read_grades(gradebook: Gradebook, assignments: list[str]) -> Grades:
    grades = Grades({}, {}, set())
    for assignment in assignments:
        try:
            found = gradebook.find_assignment(assignment)
        except MissingEntry:
            known = ", ".join(a.name for a in gradebook.assignments) or "none"
            raise ExportError(f"the gradebook has no assignment {assignment!r} (it has: {known})") from None
        grades.max_scores[assignment] = float(found.max_score)
        grades.by_assignment[assignment] = {s.student_id: Grade(float(s.score), float(s.late_submission_penalty or 0))
                                            for s in found.submissions}
    for assignment in gradebook.assignments:
        grades.with_work |= {s.student_id for s in assignment.submissions}
    return grades


def points(value: float) -> str:
    """A score as the LMS reads it: at most two decimals, no trailing zeros."""
    return f"{round(value, 2):.2f}".rstrip("0").rstrip(".")


@dataclass
class Sheet:
    """A CSV for one LMS: its header, its rows, and which columns identify a row (for the preview)."""

    header: list[str]
    rows: list[list[str]]
    key_columns: list[int]  # a row's identity (for the preview)
    label_column: int  # the column that names a row for people
    grade_columns: list[int]


@dataclass(frozen=True)
class Format:
    """How one LMS wants its import file: its student columns (and the roster field in each), then the grades."""

    name: str
    columns: tuple[str, ...]
    fields: tuple[str, ...]  # the roster field (a :class:`Student` attribute) in each column
    key: tuple[int, ...]  # the columns that identify a row, for the preview
    identity: tuple[str, ...]  # roster fields, any one of which lets the LMS find the student
    identity_words: str
    penalties: bool = False  # a late-penalty column after each score


FORMATS = {
    "canvas": Format("Canvas", ("Student", "ID", "SIS User ID", "SIS Login ID", "Section"),
                     ("sortable_name", "lms_user_id", "sis_user_id", "sis_login_id", "section"), (1, 2, 3),
                     ("lms_user_id", "sis_user_id", "sis_login_id"), "an lms_user_id, sis_user_id or sis_login_id"),
    "moodle": Format("Moodle", ("First name", "Last name", "ID number", "Email address"),
                     ("first_name", "last_name", "sis_user_id", "email"), (2, 3), ("email", "sis_user_id"),
                     "an email or sis_user_id"),
    "csv": Format("CSV", COLUMNS, COLUMNS, (0,), ("id",), "an id", penalties=True),
}


@dataclass
class Problems:
    """What the export could not place, for the instructor to read."""

    not_in_roster: dict[str, list[str]] = field(default_factory=dict)  # student -> assignments with a grade
    no_work: list[str] = field(default_factory=list)  # roster ids with no submission of anything in the gradebook
    no_identity: list[str] = field(default_factory=list)  # roster ids the LMS could not find

    def lines(self, lms: str) -> list[str]:
        lines = []
        if self.not_in_roster:
            lines.append("not in the roster, so not exported (add them to the roster): "
                         + ", ".join(f"{s} ({', '.join(a)})" for s, a in sorted(self.not_in_roster.items())))
        if self.no_work:
            lines.append("in the roster, but the gradebook has no submission from them in any assignment (blank "
                         "cells; check the id if they did hand work in): " + ", ".join(self.no_work))
        if self.no_identity:
            lines.append(f"in the roster without {FORMATS[lms].identity_words}, so {FORMATS[lms].name} could not "
                         "find them (not exported): " + ", ".join(self.no_identity))
        return lines

    @property
    def left_out(self) -> bool:
        """Grades that could not go into the file (a roster id with no work at all is only worth a look)."""
        return bool(self.not_in_roster or self.no_identity)


def build(grades: Grades, roster: list[Student], lms: str, columns: dict[str, str] | None = None,
          missing: str = "blank") -> tuple[Sheet, Problems]:
    """The import file for ``lms`` ("canvas", "moodle" or "csv") and what it could not place."""
    assignments = list(grades.max_scores)
    headers = [(columns or {}).get(a, a) for a in assignments]
    enrolled = {s.id for s in roster}
    problems = Problems()
    for assignment, by_student in grades.by_assignment.items():
        for student in sorted(set(by_student) - enrolled):
            problems.not_in_roster.setdefault(student, []).append(assignment)
    problems.no_work = [s.id for s in roster if s.id not in grades.with_work]

    form = FORMATS[lms]
    header = list(form.columns)
    for name in headers:
        header += [name, f"{name} late penalty"] if form.penalties else [name]
    findable = [s for s in roster if any(getattr(s, field) for field in form.identity)]
    problems.no_identity = [s.id for s in roster if s not in findable]
    rows = []
    for student in findable:
        row = [getattr(student, field) for field in form.fields]
        for assignment in assignments:
            grade = grades.by_assignment[assignment].get(student.id)
            row.append(points(grade.final) if grade else ("0" if missing == "zero" else ""))
            if form.penalties:
                row.append(points(grade.penalty) if grade else "")
        rows.append(row)
    return Sheet(header, rows, list(form.key), 0, list(range(len(form.columns), len(header)))), problems


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8-sig") as file:
        table = list(csv.reader(file))
    return (table[0], table[1:]) if table else ([], [])


def preview(sheet: Sheet, previous: Path, limit: int = 30) -> list[str]:
    """What writing ``sheet`` over ``previous`` (the last export there) changes, for people."""
    def label(row):
        return row[sheet.label_column].strip() or "?"

    new_rows = {tuple(row[i] for i in sheet.key_columns): row for row in sheet.rows
                if any(row[i] for i in sheet.key_columns)}
    if not previous.exists():
        lines = [f"first export to {previous}: {len(new_rows)} students"]
        for column in sheet.grade_columns:
            filled = sum(bool(row[column]) for row in new_rows.values())
            lines.append(f"  {sheet.header[column]}: {filled} scores, {len(new_rows) - filled} blank")
        return lines
    old_header, old_table = _read_csv(previous)
    where = {name: i for i, name in enumerate(old_header)}
    old_rows = {}
    for row in old_table:
        row = row + [""] * (len(old_header) - len(row))
        key = tuple(row[where[sheet.header[i]]] if sheet.header[i] in where else "" for i in sheet.key_columns)
        if any(key):
            old_rows[key] = row
    lines = [f"changes since the last export to {previous}:"]
    for column in sheet.grade_columns:
        name = sheet.header[column]
        if name not in where:
            filled = sum(bool(row[column]) for row in new_rows.values())
            lines.append(f"  {name} (a new column): {filled} scores, {len(new_rows) - filled} blank")
            continue
        changes, unchanged = [], 0
        for key, row in new_rows.items():
            before = old_rows[key][where[name]] if key in old_rows else None
            if before == row[column]:
                unchanged += 1
            else:
                changes.append(f"    {label(row)}: {'(not exported)' if before is None else before or '(blank)'} "
                               f"-> {row[column] or '(blank)'}")
        lines.append(f"  {name}: {len(changes)} changed, {unchanged} unchanged")
        lines += changes[:limit] + ([f"    ... and {len(changes) - limit} more"] if len(changes) > limit else [])
    gone = [label(row) for key, row in old_rows.items() if key not in new_rows]
    if gone:
        lines.append("  no longer in the export: " + ", ".join(gone))
    dropped = [name for name in old_header[len(sheet.header) - len(sheet.grade_columns):]
               if name and name not in sheet.header]
    if dropped:
        lines.append("  columns no longer exported: " + ", ".join(dropped))
    return lines


def write(sheet: Sheet, destination: Path) -> None:
    """Write the CSV (UTF-8), replacing ``destination`` only once it is complete."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".export-", dir=destination.parent)
    with os.fdopen(handle, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(sheet.header)
        writer.writerows(sheet.rows)
    os.replace(temporary, destination)


class LmsExport(ExportPlugin):
    """nbgrader export plugin writing an LMS's grade import CSV (subclasses choose the LMS)."""

    lms = "csv"

    missing = Enum(("blank", "zero"), default_value="blank",
                   help="What a student with no submission gets: a blank cell, or 0.").tag(config=True)
    columns = Dict(key_trait=Unicode(), value_trait=Unicode(),
                   help="The LMS's column header for each assignment id, e.g. {'01-chain-rule': 'Exercise 1: the "
                        "chain rule (48213)'} (Canvas finds its assignment by the number in parentheses).") \
        .tag(config=True)

    def course_root(self) -> Path:
        coursedir = getattr(self.parent, "coursedir", None)
        return Path(coursedir.root if coursedir is not None else os.getcwd())

    def destination(self) -> Path:
        path = Path(self.to or f"grading/exports/{self.lms}.csv")
        return path if path.is_absolute() else self.course_root() / path

    def prepare(self, gradebook: Gradebook) -> tuple[Sheet, Problems]:
        """The file to write and what it could not place (reads the roster and the gradebook)."""
        roster = read_roster(self.course_root() / Roster(parent=self).path)
        assignments = [str(a) for a in self.assignment] or [a.name for a in gradebook.assignments]
        grades = read_grades(gradebook, assignments)
        return build(grades, roster, self.lms, dict(self.columns), self.missing)

    def export(self, gradebook: Gradebook) -> None:
        sheet, problems = self.prepare(gradebook)
        destination = self.destination()
        for line in preview(sheet, destination) + problems.lines(self.lms):
            self.log.warning(line)
        write(sheet, destination)
        self.log.warning("wrote %s", destination)


class CanvasExport(LmsExport):
    """Canvas's gradebook import CSV."""

    lms = "canvas"


class MoodleExport(LmsExport):
    """Moodle's grade import CSV."""

    lms = "moodle"


class RosterCsvExport(LmsExport):
    """A plain CSV: the roster's columns, then each assignment's score and late penalty."""

    lms = "csv"


EXPORTERS = {"canvas": CanvasExport, "moodle": MoodleExport, "csv": RosterCsvExport}
