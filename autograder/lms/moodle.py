"""Moodle's offline grading worksheet: read (participant numbers for the roster) and written (grades back).

An assignment's "Download grading worksheet" (``mod/assign/gradingtable.php`` in download mode) is a CSV with the
columns Identifier ("Participant NNN", the number Moodle also puts in its download folder names), Full name, the
site's identity fields (usually Email address), Status, Grade, Maximum Grade, Grade can be changed, Last modified
(submission), [online text], Last modified (grade), Feedback comments. Its "Upload grading worksheet"
(``mod/assign/feedback/offline/importgradeslib.php``) finds the columns Identifier, Grade and Last modified (grade)
by their header (all three are required), strips the word "Participant" and looks the number up in the
assignment's own participant table, so a row lands on the one student whose number it carries, or on no one.
Through ``process_import_grades`` (``mod/assign/feedback/offline/locallib.php``) it skips a row whose grade is blank,
negative or above the maximum, unchanged, or older than Moodle's (Moodle's grade modified more than 60 s after the
row's "Last modified (grade)", unless the teacher ticks "Allow updating records that have been modified more recently
in Moodle"). A feedback column that is present replaces the comments in Moodle, blank included: the worksheet this
course writes has no Feedback comments column, so comments written in Moodle stay.

Column names are Moodle's English strings (a site in another language names them in its language; the
participant word too, which is why only the number at the end of an identifier is read).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from .roster import Student

IDENTIFIER = "Identifier"
GRADE = "Grade"
MODIFIED = "Last modified (grade)"
#: The worksheet this course writes (Moodle's own, without Feedback comments: see the module docstring).
HEADER = ("Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Grade can be changed",
          "Last modified (submission)", "Last modified (grade)")
NUMBER = re.compile(r"(\d+)\s*$")


class WorksheetError(ValueError):
    """A file that is not a Moodle grading worksheet (the message names the file and what is missing)."""


def read_worksheet(path: Path) -> list[dict[str, str]]:
    """The rows of a grading worksheet, each with ``participant`` (the number) added."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as file:
            rows = list(csv.DictReader(file))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise WorksheetError(f"{path}: cannot be read ({error})") from None
    if not rows or IDENTIFIER not in rows[0]:
        raise WorksheetError(f"{path}: not a Moodle grading worksheet (no {IDENTIFIER!r} column; download it from "
                             "the assignment: View all submissions, Grading action, Download grading worksheet)")
    for row in rows:
        match = NUMBER.search(row.get(IDENTIFIER) or "")
        row["participant"] = match.group(1) if match else ""
    return rows


@dataclass
class Participants:
    """Participant numbers found for roster students, and what could not be matched."""

    numbers: dict[str, str]  # roster id -> participant number
    unmatched: list[str]  # worksheet rows matching no roster student
    missing: list[str]  # roster students not in the worksheet


def participants(rows: list[dict[str, str]], roster: list[Student], path: Path) -> Participants:
    """Match worksheet rows to roster students by email address (else ID number = roster ``sis_user_id``): never by
    name, which Moodle may show in another order."""
    by_email = {s.email.casefold(): s for s in roster if s.email}
    by_number = {s.sis_user_id: s for s in roster if s.sis_user_id}
    if not any("Email address" in row or "ID number" in row for row in rows[:1]):
        raise WorksheetError(f"{path}: no 'Email address' or 'ID number' column to find the roster's students by "
                             "(the site's identity fields, showuseridentity, decide which columns it has)")
    found: dict[str, str] = {}
    unmatched = []
    for row in rows:
        student = by_email.get((row.get("Email address") or "").strip().casefold()) \
            or by_number.get((row.get("ID number") or "").strip())
        if student is None or not row["participant"]:
            unmatched.append(f"{row.get(IDENTIFIER, '?')} ({row.get('Full name', '?')}, "
                             f"{row.get('Email address') or row.get('ID number') or 'no email'})")
            continue
        found[student.id] = row["participant"]
    return Participants(found, unmatched, [s.id for s in roster if s.id not in found])
