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
=================  =====================================================================================

A column with any other name is refused rather than ignored, so that a misspelt identity column cannot silently
leave students out. Rows are never guessed at: a row without an ``id``, an ``id`` that appears twice, or an LMS
identity shared by two rows is a :class:`RosterError` that names the rows.
"""

from __future__ import annotations

import csv
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

    @property
    def full_name(self) -> str:
        """"First Last", as Moodle writes it in download names."""
        return " ".join(part for part in (self.first_name, self.last_name) if part)

    @property
    def sortable_name(self) -> str:
        """"Last, First", as Canvas writes it in its gradebook."""
        return ", ".join(part for part in (self.last_name, self.first_name) if part) or self.id


COLUMNS = tuple(f.name for f in fields(Student))
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
        unknown = [name for name in header if name not in COLUMNS]
        if "id" not in header or unknown:
            raise RosterError(f"{path}: " + (f"unknown column(s) {unknown}; " if unknown else "")
                              + f"the columns are {', '.join(COLUMNS)} (id is required)")
        reader.fieldnames = header
        students = [Student(**{k: (v or "").strip() for k, v in row.items() if k in COLUMNS})
                    for row in reader if any((v or "").strip() for v in row.values() if isinstance(v, str))]
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
    if problems:
        raise RosterError(f"{path}: " + "; ".join(problems) + " (each student once, each identity unique)")
