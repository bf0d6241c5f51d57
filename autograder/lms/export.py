"""Grades from the gradebook into the LMS: Canvas's gradebook import, Moodle's grading worksheet or gradebook CSV,
or a plain CSV.

Each format is an nbgrader export plugin (``nbgrader export --exporter=autograder.lms.export.CanvasExport``) whose
class holds the file's columns and how the LMS finds a student's row, and a command with a preview (``python -m
autograder.lms export --to canvas ASSIGNMENT...``, the names in :data:`EXPORTERS`). Rows follow the roster
(:mod:`.roster`); a student's score is the gradebook's, late penalty taken off, in the LMS assignment's scale.

What the LMSs' importers do with the file decides what is written (their sources, read for this):

* A blank cell clears a grade already in the LMS: Canvas (``app/models/gradebook_importer.rb``,
  ``no_change_to_value?``: a blank is only "no change" where the LMS has no score either) and Moodle's gradebook CSV
  import (``grade/import/csv/classes/load_data.php``, ``update_grade_item``: ``''`` or ``-`` become "no grade").
  So a student with no submission is left out of the file (the preview names them), or gets 0 with ``--missing
  zero``; with several assignments in one file a student is written only when every cell has a grade.
* **Canvas** (Grades > Import): ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment
  (``header?`` and ``update_column_count``: "Student" and "ID" first, "SIS User ID" and "SIS Login ID" next, then
  "Section"). Canvas finds the student by ID, else SIS User ID, else SIS Login ID, else by name (a row with none of
  the three is not written). It finds the assignment by the id in a header ``Title (1234)`` (``title_and_id``),
  else by an exact title, else it creates a new assignment: the id is required for every assignment exported
  (``--canvas-id`` or ``c.LmsExport.columns``). No ``Points Possible`` row is written: Canvas would take its values
  as the assignments' new points possible (``process_pp``).
* **Moodle**, by default its own offline grading worksheet (:mod:`.moodle`), one assignment per file: the row is
  found by the participant number in "Participant NNN" (roster ``participant:ASSIGNMENT``), never by a name, and the
  grade is the assignment's own (not an override in the gradebook). A student without a participant number is not
  written (exit status 1, named).
* **moodle-csv**, the documented alternative (Grades > Import > CSV file): ``First name, Last name, ID number, Email
  address``, then one column per assignment; in the import form map "Email address" to "Email address" (``--match
  email``, the default) or "ID number" to "ID number" (``--match idnumber``). Moodle's CSV import does not reset the
  matched student between rows (``map_user_data_with_value`` keeps ``$this->studentid`` when the cell is empty), so
  a row without the matched column would land on the previous row's student: no such row is ever written (exit
  status 1, the student named). Grades imported this way are overrides in Moodle's gradebook.
* **csv**: every roster column, then per assignment its score (after the penalty) and its late penalty, blank where
  there is no submission (a record, not an import file).

Scores are exported in the LMS assignment's scale: ``--points-possible 100`` (or ``c.LmsExport.points_possible``)
rescales nbgrader's points to the LMS's; ``--percent`` writes Canvas's percent form (``85%``, which Canvas turns into
points of its assignment) or, for Moodle, a grade out of 100. Moodle's worksheet knows its maximum grade: the last
worksheet given to ``collect --worksheet`` supplies it. The preview states the scale of every column.

Before writing, :func:`preview` compares the new file with the one already at the destination (the last export
there): which scores changed, appeared or disappeared. What the export cannot place is reported, never dropped in
silence. A roster with duplicate ids or shared identities is refused (:class:`~autograder.lms.roster.RosterError`).
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Bool, Dict, Enum, Float, Unicode

from . import moodle
from .roster import COLUMNS, PARTICIPANT, Roster, Student, read_roster

CANVAS_ID = re.compile(r"\A(.*)\s\((\d+)\)\Z")  # Canvas's Assignment.title_and_id


class ExportError(RuntimeError):
    """The export cannot be made (the message says why; nothing is written)."""


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


@dataclass(frozen=True)
class Scale:
    """How an assignment's score is written: out of ``out_of`` points, or as Canvas's percent (``85%``)."""

    out_of: float | None  # None: Canvas's percent form
    maximum: float  # nbgrader's points
    source: str  # where the scale comes from, for the preview

    def write(self, score: float) -> str:
        fraction = score / self.maximum if self.maximum else 0.0
        if self.out_of is None:
            return f"{points(100 * fraction)}%"
        return points(fraction * self.out_of)

    def describe(self) -> str:
        what = "percent (Canvas turns 85% into points of its assignment)" if self.out_of is None \
            else f"out of {points(self.out_of)}"
        return f"{what} ({self.source}; nbgrader's maximum is {points(self.maximum)})"


@dataclass
class Sheet:
    """A CSV for one LMS: its header, its rows, and which columns identify a row (for the preview)."""

    header: list[str]
    rows: list[list[str]]
    key_columns: list[int]  # a row's identity (for the preview)
    label_column: int  # the column that names a row for people
    grade_columns: list[int]
    notes: list[str] = field(default_factory=list)  # the scale of each column, for the preview


@dataclass
class Problems:
    """What the export could not place, for the instructor to read."""

    not_in_roster: dict[str, list[str]] = field(default_factory=dict)  # student -> assignments with a grade
    no_work: list[str] = field(default_factory=list)  # roster ids with no submission of anything in the gradebook
    no_identity: list[str] = field(default_factory=list)  # roster ids the LMS could not find (not written)
    identity_words: str = ""
    left_out: dict[str, list[str]] = field(default_factory=dict)  # student -> assignments without a submission

    def lines(self) -> list[str]:
        lines = []
        if self.not_in_roster:
            lines.append("not in the roster, so not exported (add them to the roster): "
                         + ", ".join(f"{s} ({', '.join(a)})" for s, a in sorted(self.not_in_roster.items())))
        if self.no_identity:
            lines.append(f"REFUSED: graded but without {self.identity_words}, so the LMS could not match their row "
                         "(not written; add it to the roster): " + ", ".join(self.no_identity))
        if self.left_out:
            lines.append("left out, no submission (a blank cell would clear a grade in the LMS; --missing zero writes "
                         "0): " + ", ".join(f"{s} ({', '.join(a)})" for s, a in sorted(self.left_out.items())))
        if self.no_work:
            lines.append("in the roster, but the gradebook has no submission from them in any assignment (check the "
                         "id if they did hand work in): " + ", ".join(self.no_work))
        return lines

    @property
    def refused(self) -> bool:
        """Grades that could not go into the file (exit status 1; a student with no work is only worth a look)."""
        return bool(self.not_in_roster or self.no_identity)


@dataclass
class Settings:
    """Everything an export needs besides the grades and the roster."""

    exporter: type[LmsExport]  # the file's format
    headers: dict[str, str] = field(default_factory=dict)  # assignment -> column header
    scales: dict[str, Scale] = field(default_factory=dict)
    missing: str = "omit"
    match: str = "email"  # moodle-csv: the column Moodle matches on
    worksheet: list[dict[str, str]] = field(default_factory=list)  # the last Moodle worksheet given to collect
    now: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class Identity:
    """How the LMS finds a student's row: the roster values it matches on (a row needs one), the file's columns
    that hold them, and what they are called in the report."""

    values: Callable[[Student], tuple[str, ...]]
    key_columns: list[int]
    words: str


def _placed(grades: Grades, roster: list[Student], problems: Problems) -> None:
    enrolled = {s.id for s in roster}
    for assignment, by_student in grades.by_assignment.items():
        for student in sorted(set(by_student) - enrolled):
            problems.not_in_roster.setdefault(student, []).append(assignment)
    problems.no_work = [s.id for s in roster if s.id not in grades.with_work]


def _cells(grades: Grades, settings: Settings, student: Student) -> list[str] | None:
    """The student's cells, one per assignment, or None when one has no grade (left out unless --missing zero)."""
    cells = []
    for assignment in grades.max_scores:
        grade = grades.by_assignment[assignment].get(student.id)
        if grade is None and settings.missing != "zero":
            return None
        cells.append(settings.scales[assignment].write(grade.final if grade else 0.0))
    return cells


def _left_out(grades: Grades, student: Student) -> list[str]:
    return [a for a in grades.max_scores if student.id not in grades.by_assignment[a]]


def build(grades: Grades, roster: list[Student], settings: Settings) -> tuple[Sheet, Problems]:
    """The import file in ``settings.exporter``'s format and what it could not place."""
    exporter = settings.exporter
    problems = Problems()
    _placed(grades, roster, problems)
    assignments = list(grades.max_scores)
    notes = [f"{a}: {settings.scales[a].describe()}" for a in assignments if a in settings.scales]
    identity = exporter.identity(settings, assignments)
    problems.identity_words = identity.words
    rows = []
    for student in roster:
        cells = exporter.cells(grades, settings, student)
        if cells is None:
            problems.left_out[student.id] = _left_out(grades, student)
        elif not any(identity.values(student)):
            problems.no_identity.append(student.id)
        else:
            rows.append(exporter.row(student, cells, settings, assignments))
    header = exporter.header(settings, assignments)
    return Sheet(header, rows, identity.key_columns, exporter.label_column, exporter.grade_columns(header),
                 notes), problems


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
    scale = [f"  scale: {note}" for note in sheet.notes]
    if not previous.exists():
        lines = [f"first export to {previous}: {len(new_rows)} students", *scale]
        for column in sheet.grade_columns:
            filled = sum(bool(row[column]) for row in new_rows.values())
            lines.append(f"  {sheet.header[column]}: {filled} scores" + (f", {len(new_rows) - filled} blank"
                                                                         if filled < len(new_rows) else ""))
        return lines
    old_header, old_table = _read_csv(previous)
    where = {name: i for i, name in enumerate(old_header)}
    old_rows = {}
    for row in old_table:
        row = row + [""] * (len(old_header) - len(row))
        key = tuple(row[where[sheet.header[i]]] if sheet.header[i] in where else "" for i in sheet.key_columns)
        if any(key):
            old_rows[key] = row
    lines = [f"changes since the last export to {previous}:", *scale]
    for column in sheet.grade_columns:
        name = sheet.header[column]
        if name not in where:
            filled = sum(bool(row[column]) for row in new_rows.values())
            lines.append(f"  {name} (a new column): {filled} scores")
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
        lines.append("  no longer in the export (the LMS keeps what it has for them): " + ", ".join(gone))
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


def latest_worksheet(root: Path, assignment: str) -> list[dict[str, str]]:
    """The rows of the last Moodle grading worksheet given to ``collect --worksheet`` for ``assignment``."""
    folder = root / "grading" / "downloaded" / assignment / "worksheets"
    found = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    return moodle.read_worksheet(found[-1]) if found else []


class LmsExport(ExportPlugin):
    """nbgrader export plugin writing an LMS's grade import CSV. Each subclass is one format: its name, its
    columns, how the LMS identifies a student's row, and how a row is written."""

    lms = ""  # the format's name: ``export --to NAME``, and the default file name
    student_columns: tuple[str, ...] = ()  # the columns before the grades
    label_column = 0  # the column that names a row for people (the preview)
    scaled = True  # scores in the LMS assignment's scale (--points-possible or --percent); False: nbgrader's points
    percent_out_of: float | None = 100.0  # what --percent writes: out of 100, or None for Canvas's "85%"

    missing = Enum(("omit", "zero"), default_value="omit",
                   help="A student with no submission: 'omit' leaves them out of the file (a blank cell would clear "
                        "a grade in the LMS), 'zero' writes 0.").tag(config=True)
    columns = Dict(key_trait=Unicode(), value_trait=Unicode(),
                   help="The LMS's column header for each assignment id, e.g. {'01-chain-rule': 'Exercise 1: the "
                        "chain rule (48213)'}. Canvas finds its assignment by the number in parentheses (required).") \
        .tag(config=True)
    points_possible = Dict(key_trait=Unicode(), value_trait=Float(),
                           help="The LMS assignment's points possible per assignment id, e.g. {'01-chain-rule': "
                                "100}: scores are rescaled to it.").tag(config=True)
    percent = Bool(False, help="Write percent (Canvas: '85%'; Moodle: out of 100) where points_possible has no "
                               "entry.").tag(config=True)
    match = Enum(("email", "idnumber"), default_value="email",
                 help="moodle-csv: the column Moodle's CSV import matches students on.").tag(config=True)

    # -- the format (class methods: :func:`build` needs no plugin instance) --------------------------------------

    @classmethod
    def identity(cls, settings: Settings, assignments: list[str]) -> Identity:
        """How the LMS finds a student's row in this file."""
        raise NotImplementedError

    @classmethod
    def header(cls, settings: Settings, assignments: list[str]) -> list[str]:
        """The file's header: the student columns, then one column per assignment."""
        return [*cls.student_columns, *(settings.headers.get(a, a) for a in assignments)]

    @classmethod
    def grade_columns(cls, header: list[str]) -> list[int]:
        """The columns that hold grades (the preview compares them)."""
        return list(range(len(cls.student_columns), len(header)))

    @classmethod
    def cells(cls, grades: Grades, settings: Settings, student: Student) -> list[str] | None:
        """The student's grade cells, or None to leave them out (a grade is missing)."""
        return _cells(grades, settings, student)

    @classmethod
    def row(cls, student: Student, cells: list[str], settings: Settings, assignments: list[str]) -> list[str]:
        """A student's row: who they are to the LMS, and their grade ``cells``."""
        raise NotImplementedError

    # -- what the LMS needs to know, from the configuration ------------------------------------------------------

    def header_problem(self, assignment: str, header: str) -> str:
        """Why the LMS could not use ``header`` as the assignment's column ("" when it can)."""
        return ""

    def new_settings(self, assignments: list[str]) -> Settings:
        """The settings before each assignment's header and scale are added."""
        return Settings(type(self), missing=self.missing, match=self.match)

    def lms_scale(self, settings: Settings, maximum: float) -> Scale | None:
        """The scale the LMS itself states, when it does (Moodle's worksheet)."""
        return None

    def course_root(self) -> Path:
        coursedir = getattr(self.parent, "coursedir", None)
        return Path(coursedir.root if coursedir is not None else os.getcwd())

    def destination(self) -> Path:
        names = "+".join(str(a) for a in self.assignment) or "all"
        path = Path(self.to or f"grading/exports/{self.lms}-{names}.csv")
        return path if path.is_absolute() else self.course_root() / path

    def settings(self, grades: Grades) -> Settings:
        """The headers and scales of the assignments to export; :class:`ExportError` for what is missing."""
        assignments = list(grades.max_scores)
        settings = self.new_settings(assignments)
        problems = []
        for assignment in assignments:
            header = self.columns.get(assignment, assignment)
            settings.headers[assignment] = header
            if problem := self.header_problem(assignment, header):
                problems.append(problem)
            if not self.scaled:
                continue
            maximum = grades.max_scores[assignment]
            given = self.points_possible.get(assignment)
            if given is not None:
                settings.scales[assignment] = Scale(given, maximum, "--points-possible")
            elif (own := self.lms_scale(settings, maximum)) is not None:
                settings.scales[assignment] = own
            elif self.percent:
                settings.scales[assignment] = Scale(self.percent_out_of, maximum, "--percent")
            else:
                problems.append(f"{assignment}: in what scale is it graded in the LMS? give --points-possible N (the "
                                f"LMS assignment's points; nbgrader's are {points(maximum)}) or --percent")
        if problems:
            raise ExportError("nothing written:\n  " + "\n  ".join(problems))
        return settings

    def prepare(self, gradebook: Gradebook) -> tuple[Sheet, Problems]:
        """The file to write and what it could not place (reads the roster and the gradebook)."""
        roster = read_roster(self.course_root() / Roster(parent=self).path)
        assignments = [str(a) for a in self.assignment] or [a.name for a in gradebook.assignments]
        grades = read_grades(gradebook, assignments)
        return build(grades, roster, self.settings(grades))

    def export(self, gradebook: Gradebook) -> None:
        sheet, problems = self.prepare(gradebook)
        destination = self.destination()
        for line in preview(sheet, destination) + problems.lines():
            self.log.warning(line)
        write(sheet, destination)
        self.log.warning("wrote %s", destination)


class CanvasExport(LmsExport):
    """Canvas's gradebook import CSV: a row is found by Canvas's ID, SIS User ID or SIS Login ID."""

    lms = "canvas"
    student_columns = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
    percent_out_of = None  # --percent writes Canvas's "85%"

    @classmethod
    def identity(cls, settings: Settings, assignments: list[str]) -> Identity:
        return Identity(lambda s: (s.lms_user_id, s.sis_user_id, s.sis_login_id), [1, 2, 3],
                        "an lms_user_id, sis_user_id or sis_login_id (Canvas's ID, SIS User ID, SIS Login ID)")

    @classmethod
    def row(cls, student: Student, cells: list[str], settings: Settings, assignments: list[str]) -> list[str]:
        return [student.sortable_name, student.lms_user_id, student.sis_user_id, student.sis_login_id,
                student.section, *cells]

    def header_problem(self, assignment: str, header: str) -> str:
        if CANVAS_ID.match(header):
            return ""
        return (f"{assignment}: Canvas needs the assignment's id, or it matches the column by exact title and else "
                "creates a new assignment: give --canvas-id ID (the number in the assignment's address in Canvas, or "
                "in its column header 'Title (ID)' in Canvas's gradebook export) or c.LmsExport.columns")


class MoodleExport(LmsExport):
    """Moodle's offline grading worksheet (one assignment): a row is found by its participant number."""

    lms = "moodle"
    label_column = 1  # Full name

    @classmethod
    def identity(cls, settings: Settings, assignments: list[str]) -> Identity:
        (assignment,) = assignments
        return Identity(lambda s: (s.participant(assignment),), [0],
                        f"a Moodle participant number for {assignment} (roster {PARTICIPANT}{assignment})")

    @classmethod
    def header(cls, settings: Settings, assignments: list[str]) -> list[str]:
        return list(moodle.HEADER)

    @classmethod
    def grade_columns(cls, header: list[str]) -> list[int]:
        return [header.index("Grade")]

    @classmethod
    def row(cls, student: Student, cells: list[str], settings: Settings, assignments: list[str]) -> list[str]:
        (assignment,) = assignments
        number = student.participant(assignment)
        before = {row["participant"]: row for row in settings.worksheet}.get(number, {})
        return [f"Participant {number}", before.get("Full name") or student.full_name,
                before.get("Email address") or student.email, before.get("Status", ""), cells[0],
                points(settings.scales[assignment].out_of or 100), before.get("Grade can be changed") or "Yes",
                before.get("Last modified (submission)", ""), settings.now.strftime("%Y-%m-%d %H:%M:%S UTC")]

    def new_settings(self, assignments: list[str]) -> Settings:
        if len(assignments) != 1:
            raise ExportError("Moodle's grading worksheet holds one assignment: export one at a time (or --to "
                              "moodle-csv for several)")
        settings = super().new_settings(assignments)
        settings.worksheet = latest_worksheet(self.course_root(), assignments[0])
        return settings

    def lms_scale(self, settings: Settings, maximum: float) -> Scale | None:
        stated = [value for row in settings.worksheet if (value := row.get("Maximum Grade", ""))]
        if not stated:
            return None
        return Scale(float(stated[0].replace(",", ".")), maximum, "Maximum Grade in Moodle's worksheet")


class MoodleCsvExport(LmsExport):
    """Moodle's gradebook CSV import: a row is found by its Email address or ID number (``match``)."""

    lms = "moodle-csv"
    student_columns = ("First name", "Last name", "ID number", "Email address")

    @classmethod
    def identity(cls, settings: Settings, assignments: list[str]) -> Identity:
        if settings.match == "email":
            return Identity(lambda s: (s.email,), [3], "an email (Moodle's Email address, the column matched)")
        return Identity(lambda s: (s.sis_user_id,), [2], "a sis_user_id (Moodle's ID number, the column matched)")

    @classmethod
    def row(cls, student: Student, cells: list[str], settings: Settings, assignments: list[str]) -> list[str]:
        return [student.first_name, student.last_name, student.sis_user_id, student.email, *cells]


class RosterCsvExport(LmsExport):
    """A plain CSV: the roster's columns, then each assignment's score and late penalty (blank without a
    submission), in nbgrader's points."""

    lms = "csv"
    student_columns = COLUMNS
    scaled = False

    @classmethod
    def identity(cls, settings: Settings, assignments: list[str]) -> Identity:
        return Identity(lambda s: (s.id,), [0], "an id")

    @classmethod
    def header(cls, settings: Settings, assignments: list[str]) -> list[str]:
        return [*COLUMNS, *(column for a in assignments for column in (a, f"{a} late penalty"))]

    @classmethod
    def cells(cls, grades: Grades, settings: Settings, student: Student) -> list[str]:
        cells = []
        for assignment in grades.max_scores:
            grade = grades.by_assignment[assignment].get(student.id)
            cells += [points(grade.final), points(grade.penalty)] if grade else ["", ""]
        return cells

    @classmethod
    def row(cls, student: Student, cells: list[str], settings: Settings, assignments: list[str]) -> list[str]:
        return [getattr(student, column) for column in COLUMNS] + cells


#: The formats by name (``python -m autograder.lms export --to NAME``).
EXPORTERS = {e.lms: e for e in (CanvasExport, MoodleExport, MoodleCsvExport, RosterCsvExport)}
