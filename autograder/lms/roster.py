"""The class roster: who the students are in nbgrader and in the learning-management system (LMS).

A roster is a CSV file (UTF-8; Excel's byte-order mark is fine) with one row per enrolled student. ``id`` is the
nbgrader student id (the folder name under ``submitted/``, the hub username); every other column is optional:

=================  =====================================================================================
``first_name``     also nbgrader's (``nbgrader db student import`` reads the same file)
``last_name``      also nbgrader's
``email``          also nbgrader's; Moodle's "Email address"
``lms_user_id``    also nbgrader's; Canvas's numeric user "ID" (in its gradebook export and download names)
``sis_user_id``    Canvas's "SIS User ID"; Moodle's "ID number"
``sis_login_id``   Canvas's "SIS Login ID"
``section``        Canvas's "Section"
``participant:A``  Moodle's participant number for assignment ``A`` (one column per assignment, e.g.
                   ``participant:01-chain-rule``): the number in Moodle's download folders
                   ``Full Name_NNN_assignsubmission_file`` and its grading worksheet's "Participant NNN"
=================  =====================================================================================

Moodle numbers participants per assignment (``mod/assign/locallib.php``, ``get_uniqueid_for_user_static``: one
``assign_user_mapping`` row per assignment and user, allocated in random order), so the number is kept per
assignment; ``collect --worksheet`` fills the column from Moodle's grading worksheet (:func:`write_participants`).
A name is never used to find a Moodle student: Moodle's ``clean_filename`` strips characters such as ``'`` from
download names, and a site may order names differently.

A column with any other name is refused rather than ignored, so that a misspelt identity column cannot silently
leave students out. Rows are never guessed at: a row without an ``id``, an ``id`` that appears twice, or an LMS
identity shared by two rows is a :class:`RosterError` that names the rows.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, fields
from pathlib import Path

from traitlets import Unicode
from traitlets.config import LoggingConfigurable


class RosterError(ValueError):
    """The roster cannot be used as it is (the message names the rows and what to fix)."""


@dataclass(frozen=True)
class Student:
    """One row of the roster."""

    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    participants: tuple[tuple[str, str], ...] = ()  # (assignment, Moodle participant number), from participant:A

    def participant(self, assignment: str) -> str:
        """Moodle's participant number of this student in ``assignment`` ("" when the roster has none)."""
        return dict(self.participants).get(assignment, "")

    @property
    def full_name(self) -> str:
        """"First Last", as Moodle writes it in download names."""
        return " ".join(part for part in (self.first_name, self.last_name) if part)

    @property
    def sortable_name(self) -> str:
        """"Last, First", as Canvas writes it in its gradebook."""
        return ", ".join(part for part in (self.last_name, self.first_name) if part) or self.id


COLUMNS = tuple(f.name for f in fields(Student) if f.name != "participants")
#: The prefix of the per-assignment Moodle participant columns.
PARTICIPANT = "participant:"
#: Columns that identify a student to an LMS: no two rows may share a non-empty value in any of them.
IDENTITY_COLUMNS = ("email", "lms_user_id", "sis_user_id", "sis_login_id")


class Roster(LoggingConfigurable):
    """Where the roster lives (``c.Roster.path`` in nbgrader_config.py), and the roster itself."""

    path = Unicode("grading/roster.csv", help="The roster CSV, relative to the course root (grading/ is "
                   "git-ignored: a roster holds personal data and never belongs in the repository).").tag(config=True)


def read_roster(path: Path) -> list[Student]:
    """The students of the roster at ``path``, in file order; :class:`RosterError` if it cannot be trusted."""
    path = Path(path)
    if not path.exists():
        raise RosterError(f"no roster at {path}: write one (columns: {', '.join(COLUMNS)}; only id is required)")
    with path.open(newline="", encoding="utf-8-sig") as file:
        reader = csv.DictReader(file)
        header = [name.strip() for name in reader.fieldnames or []]
        unknown = [name for name in header if name not in COLUMNS
                   and not (name.startswith(PARTICIPANT) and len(name) > len(PARTICIPANT))]
        if "id" not in header or unknown:
            raise RosterError(f"{path}: " + (f"unknown column(s) {unknown}; " if unknown else "")
                              + f"the columns are {', '.join(COLUMNS)} and {PARTICIPANT}ASSIGNMENT (id is required)")
        reader.fieldnames = header
        students = []
        for row in reader:
            values = {k: (v or "").strip() for k, v in row.items() if isinstance(k, str)}
            if not any(values.values()):
                continue
            participants = tuple((k[len(PARTICIPANT):], v) for k, v in values.items() if k.startswith(PARTICIPANT)
                                 and v)
            students.append(Student(**{k: v for k, v in values.items() if k in COLUMNS}, participants=participants))
    _check(path, students)
    return students


def _check(path: Path, students: list[Student]) -> None:
    problems = []
    blank = [line for line, s in enumerate(students, start=2) if not s.id]
    if blank:
        problems.append(f"row(s) {blank} have no id")
    for column in ("id", *IDENTITY_COLUMNS):
        rows = defaultdict(list)
        for line, student in enumerate(students, start=2):
            value = getattr(student, column)
            if value:
                rows[value.lower() if column == "email" else value].append(line)
        problems += [f"{column} {value!r} is on rows {lines}" for value, lines in rows.items() if len(lines) > 1]
    numbers: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line, student in enumerate(students, start=2):
        for assignment, number in student.participants:
            if not number.isdigit():
                problems.append(f"{PARTICIPANT}{assignment} on row {line} is {number!r}, not a number")
            numbers[assignment, number].append(line)
    problems += [f"{PARTICIPANT}{a} {n!r} is on rows {lines}" for (a, n), lines in numbers.items() if len(lines) > 1]
    if problems:
        raise RosterError(f"{path}: " + "; ".join(problems) + " (each student once, each identity unique)")


def write_participants(path: Path, assignment: str, numbers: dict[str, str]) -> list[str]:
    """Record Moodle's participant numbers for ``assignment`` (``{roster id: number}``) in the roster's
    ``participant:ASSIGNMENT`` column, every other cell kept as it was; return what changed, for people (a number
    that changed is named: Moodle allocates them once per assignment, so a change means another worksheet)."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8-sig") as file:
        table = list(csv.reader(file))
    header = [name.strip() for name in table[0]]
    column = PARTICIPANT + assignment
    if column not in header:
        header.append(column)
    where, at = header.index("id"), header.index(column)
    changes = []
    rows = []
    for row in table[1:]:
        row = row + [""] * (len(header) - len(row))
        student = row[where].strip()
        if student in numbers and row[at].strip() != numbers[student]:
            if row[at].strip():
                changes.append(f"{student}: participant {row[at].strip()} -> {numbers[student]}")
            row[at] = numbers[student]
        rows.append(row)
    added = sum(1 for s in numbers if s in {r[where].strip() for r in rows})
    handle, temporary = tempfile.mkstemp(prefix=".roster-", dir=path.parent)
    with os.fdopen(handle, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(rows)
    os.replace(temporary, path)
    return [f"{path}: {column} holds {added} participant numbers"] + changes
