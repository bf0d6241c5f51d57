"""Late penalties through nbgrader's own plugin API, recomputed on every (re)grade.

nbgrader's Autograde ends with its ``AssignLatePenalties`` preprocessor: it resets the notebook's penalty to none,
and when the submission's time (``timestamp.txt`` in the submitted folder; the exchange writes it) is past the due
date in the gradebook (plus the student's extension, if any), it asks the configured plugin for a penalty.
``nbgrader_config.py`` names :class:`LatePenalty` as that plugin, so ``nbgrader autograde`` and the class grader
(``python -m autograder grade``, which runs nbgrader's Autograde) apply the same policy, and a regrade after a
timestamp, due date, extension or policy change gives the new penalty, never a stale one: the grader applies it again
(:func:`recompute`) to the students it did not grade in the run.

The policy (``c.LatePenalty.*``): a submission up to ``grace_minutes`` past the due date is on time; past that, it
loses ``percent`` of the points it earned for every started ``per`` (day or hour) counted from the due date, at most
``max_percent``. Example: 10 % per day, cap 50 %, grace 15 min: 20 minutes late loses 10 %, 25 hours late 20 %,
two weeks late 50 %.

**Extensions** (:func:`extend`, ``python -m autograder.lms extend ASSIGNMENT STUDENT --until/--days``) are kept in
``c.LatePenalty.extensions`` (``grading/extensions.csv``), so one can be granted at any time: nbgrader keeps an
extension on the student's submission (``Gradebook.grant_extension``), which does not exist before the first
grade. An extension is written to the gradebook as soon as the submission exists: at once by ``extend``, else by
this plugin the first time nbgrader asks it about the submission (both graders), and by :func:`recompute`. The
last extension granted is the one that counts (nbgrader's do not add up either). When a penalty changes after
grading (an extension, ``late --recompute``, a regrade of others), the student's feedback is generated again
(:func:`regenerate_feedback`), so the feedback never shows a penalty the gradebook no longer has.
"""

from __future__ import annotations

import csv
import math
import os
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Enum, Float, Unicode

UNIT_SECONDS = {"day": 86400.0, "hour": 3600.0}


class LatePenalty(LateSubmissionPlugin):
    """nbgrader late-submission plugin: a percentage of the earned score per started day or hour late, capped."""

    grace_minutes = Float(0.0, min=0.0, help="Minutes past the due date that still count as on time.").tag(config=True)
    percent = Float(10.0, min=0.0, max=100.0, help="Percent of the earned score lost per started unit late.") \
        .tag(config=True)
    per = Enum(("day", "hour"), default_value="day", help="The unit: 'day' (24 h) or 'hour'.").tag(config=True)
    max_percent = Float(100.0, min=0.0, max=100.0, help="The most a late submission can lose, in percent.") \
        .tag(config=True)
    extensions = Unicode("grading/extensions.csv", help="Where extensions are kept (relative to the course root): "
                         "written by `python -m autograder.lms extend`.").tag(config=True)

    def extensions_path(self) -> Path:
        from nbgrader.coursedir import CourseDirectory

        path = Path(self.extensions)
        return path if path.is_absolute() else Path(CourseDirectory(parent=self).root or os.getcwd()) / path

    def seconds_late(self, student_id: str, reported: float) -> float:
        """How late the submission is once the student's kept extension is on it (written to the gradebook through
        the session of nbgrader's AssignLatePenalties, which commits it with the penalty)."""
        parent = self.parent
        assignment, gradebook = getattr(parent, "assignment_id", None), getattr(parent, "gradebook", None)
        granted = read_extensions(self.extensions_path()).get((assignment, student_id)) if assignment else None
        if granted is None or gradebook is None:
            return reported
        submission = gradebook.find_submission(assignment, student_id)
        if submission.assignment.duedate is None:
            return reported
        extension = granted.extension(submission.assignment.duedate)
        if submission.extension != extension:
            submission.extension = extension
        return float(submission.total_seconds_late)

    def percent_lost(self, seconds_late: float) -> float:
        """Percent of the earned score lost by a submission ``seconds_late`` after the due date."""
        if seconds_late <= self.grace_minutes * 60:
            return 0.0
        units = math.ceil(seconds_late / UNIT_SECONDS[self.per])
        return min(self.max_percent, units * self.percent)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        """nbgrader's hook (called only when the submission is late): the points to take off ``score``."""
        total_seconds_late = self.seconds_late(student_id, total_seconds_late)
        lost = self.percent_lost(total_seconds_late)
        penalty = round((score or 0.0) * lost / 100.0, 2)
        self.log.info("%s: %.0f s late, loses %g %% of %g points: penalty %g", student_id, total_seconds_late,
                         lost, score or 0.0, penalty)
        return penalty


@dataclass(frozen=True)
class LateSubmission:
    """A submission past its due date, as the gradebook records it after grading."""

    student: str
    seconds_late: float
    score: float  # before the penalty
    penalty: float  # points taken off (0 within the grace period)


def late_submissions(db_url: str, assignment: str) -> list[LateSubmission]:
    """Every submission of ``assignment`` past its due date (extensions included), from the gradebook, by student.

    For the class report: ``len(...)`` submissions were late, ``sum(s.penalty ...)`` points were taken off.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gradebook:
        try:
            submissions = gradebook.find_assignment(assignment).submissions
        except MissingEntry:
            return []
        late = [LateSubmission(s.student_id, float(s.total_seconds_late), float(s.score),
                               float(s.late_submission_penalty or 0.0))
                for s in submissions if s.total_seconds_late > 0]
    return sorted(late, key=lambda s: s.student)


@dataclass(frozen=True)
class Extension:
    """An extension as granted: until a moment (UTC), or a number of days past the due date."""

    assignment: str
    student: str
    until: datetime | None = None
    days: float | None = None
    granted: str = ""

    def extension(self, duedate: datetime) -> timedelta:
        """The extension nbgrader keeps (a duration past ``duedate``)."""
        if self.until is not None:
            return max(timedelta(0), self.until - duedate)
        return timedelta(days=self.days or 0)


EXTENSION_COLUMNS = ("assignment", "student", "until", "days", "granted")


def _naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def read_extensions(path: Path) -> dict[tuple[str, str], Extension]:
    """The extensions kept at ``path`` (none when there is no file)."""
    from nbgrader.utils import parse_utc

    if not Path(path).exists():
        return {}
    found = {}
    with Path(path).open(newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            until = _naive_utc(parse_utc(row["until"])) if row.get("until") else None
            days = float(row["days"]) if row.get("days") else None
            found[row["assignment"], row["student"]] = Extension(row["assignment"], row["student"], until, days,
                                                                 row.get("granted", ""))
    return found


def keep_extension(path: Path, extension: Extension) -> None:
    """Add ``extension`` to the file at ``path``, replacing an earlier one for the same assignment and student."""
    kept = read_extensions(path)
    kept[extension.assignment, extension.student] = extension
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".extensions-", dir=path.parent)
    with os.fdopen(handle, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(EXTENSION_COLUMNS)
        for e in kept.values():
            writer.writerow([e.assignment, e.student, f"{e.until:%Y-%m-%d %H:%M:%S} UTC" if e.until else "",
                             f"{e.days:g}" if e.days is not None else "", e.granted])
    os.replace(temporary, path)


def penalties(db_url: str, assignment: str) -> dict[str, float]:
    """Every submission's late penalty (points), by student."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gradebook:
        return {s.student_id: float(s.late_submission_penalty or 0.0)
                for s in gradebook.find_assignment(assignment).submissions}


def apply_extensions(db_url: str, assignment: str, config) -> None:
    """Write the kept extensions of ``assignment`` onto the submissions that exist."""
    from nbgrader.api import Gradebook, MissingEntry

    kept = {s: e for (a, s), e in read_extensions(LatePenalty(config=config).extensions_path()).items()
            if a == assignment}
    if not kept:
        return
    with Gradebook(db_url) as gradebook:
        for student, extension in kept.items():
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                continue
            if submission.assignment.duedate is not None:
                submission.extension = extension.extension(submission.assignment.duedate)
        gradebook.db.commit()


def recompute(db_url: str, assignment: str, config, students: list[str] | None = None,
              except_for: Collection[str] = ()) -> dict[str, tuple]:
    """Apply the late policy in ``config`` again to every graded submission of ``assignment`` (or of ``students``),
    but those of ``except_for``, as nbgrader's Autograde does last (same preprocessor, same plugin), without executing
    anything: after a due date, an extension or the policy changed, when the submissions themselves did not. Return
    ``{student: (penalty before, penalty after)}`` for the students whose penalty changed."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties

    apply_extensions(db_url, assignment, config)
    with Gradebook(db_url) as gradebook:
        found = gradebook.find_assignment(assignment)
        chosen = [s for s in found.submissions
                  if (students is None or s.student_id in students) and s.student_id not in except_for]
        before = {s.student_id: float(s.late_submission_penalty or 0.0) for s in chosen}
        pairs = [(s.student_id, n.name) for s in chosen for n in found.notebooks]
    if not pairs:
        return {}
    step = AssignLatePenalties(config=config)
    for student, notebook in pairs:
        resources = {"nbgrader": {"notebook": notebook, "assignment": assignment, "student": student,
                                  "db_url": db_url}}
        step.preprocess(nbformat.v4.new_notebook(), resources)
    after = penalties(db_url, assignment)
    return {s: (p, after.get(s, 0.0)) for s, p in before.items() if abs(after.get(s, 0.0) - p) > 1e-9}


def regenerate_feedback(app, assignment: str, students) -> tuple[list[str], list[str]]:
    """nbgrader's GenerateFeedback again for ``students`` who have feedback and a graded notebook (``app``: an
    initialized nbgrader app of the course). Return (students done, problems)."""
    from nbgrader.converters import GenerateFeedback

    coursedir = app.coursedir
    done, problems = [], []
    for student in sorted(students):
        feedback = Path(coursedir.format_path(coursedir.feedback_directory, student, assignment))
        graded = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
        if not feedback.is_dir() or not graded.is_dir():
            continue
        previous = coursedir.assignment_id, coursedir.student_id
        coursedir.assignment_id, coursedir.student_id = assignment, student
        try:
            converter = GenerateFeedback(coursedir=coursedir, parent=app)
            converter.force = True
            converter.start()
            done.append(student)
        except Exception as error:  # reported; the others go on
            problems.append(f"{student}: feedback not regenerated ({type(error).__name__}: {error})")
        finally:
            coursedir.assignment_id, coursedir.student_id = previous
    return done, problems


class ExtendError(ValueError):
    """An extension that cannot be granted (the message says why)."""


def extend(db_url: str, config, assignment: str, student: str, until: datetime | None = None,
           days: float | None = None) -> tuple[Extension, datetime, dict[str, tuple]]:
    """Grant ``student`` an extension on ``assignment`` (until a UTC moment, or ``days`` past the due date), at any
    time: kept in ``c.LatePenalty.extensions`` and put on the submission when there is one, the penalty computed
    again. Return (the extension, the new due date, the changed penalties as :func:`recompute` does)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gradebook:
        try:
            duedate = gradebook.find_assignment(assignment).duedate
        except MissingEntry:
            raise ExtendError(f"the gradebook has no assignment {assignment!r} (nbgrader db assignment add "
                              f"{assignment} --duedate=...)") from None
        exists = any(s.student_id == student for s in gradebook.find_assignment(assignment).submissions)
    if duedate is None:
        raise ExtendError(f"{assignment} has no due date in the gradebook, so there is nothing to extend "
                          f"(nbgrader db assignment add {assignment} --duedate=...)")
    if until is not None:
        until = _naive_utc(until)
        if until < duedate:
            raise ExtendError(f"{until:%Y-%m-%d %H:%M} UTC is before the due date {duedate:%Y-%m-%d %H:%M} UTC")
    granted = Extension(assignment, student, until, days,
                        datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    keep_extension(LatePenalty(config=config).extensions_path(), granted)
    changed = recompute(db_url, assignment, config, [student]) if exists else {}
    return granted, duedate + granted.extension(duedate), changed


def describe_lateness(seconds: float) -> str:
    """``2 d 3 h``, ``5 h 20 min``, ``40 s``: how late, for people."""
    seconds = round(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{secs} s"


def report_lines(late: list[LateSubmission]) -> list[str]:
    """A Markdown section for the class report: how many were late, and each student's lateness and penalty."""
    lines = ["## Late submissions", ""]
    if not late:
        return lines + ["None."]
    total = sum(s.penalty for s in late)
    lines += [f"{len(late)} late, {sum(s.penalty > 0 for s in late)} penalized, {total:g} points taken off in "
              "all (policy: `c.LatePenalty` in nbgrader_config.py).", "",
              "| student | late by | score | penalty |", "|---|---:|---:|---:|"]
    lines += [f"| {s.student} | {describe_lateness(s.seconds_late)} | {s.score:g} | {s.penalty:g} |" for s in late]
    return lines
