"""Late penalties through nbgrader's own plugin API, recomputed on every (re)grade.

nbgrader's Autograde ends with its ``AssignLatePenalties`` preprocessor: it resets the notebook's penalty to none,
and when the submission's time (``timestamp.txt`` in the submitted folder; the exchange writes it) is past the due
date in the gradebook (plus the student's extension, if any), it asks the configured plugin for a penalty.
``nbgrader_config.py`` names :class:`LatePenalty` as that plugin, so ``nbgrader autograde`` and the class grader
(``python -m autograder grade``, which runs nbgrader's Autograde) apply the same policy, and a regrade after a
timestamp, due date, extension or policy change gives the new penalty, never a stale one.

The policy (``c.LatePenalty.*``): a submission up to ``grace_minutes`` past the due date is on time; past that, it
loses ``percent`` of the points it earned for every started ``per`` (day or hour) counted from the due date, at most
``max_percent``. Example: 10 % per day, cap 50 %, grace 15 min: 20 minutes late loses 10 %, 25 hours late 20 %,
two weeks late 50 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Enum, Float

UNIT_SECONDS = {"day": 86400.0, "hour": 3600.0}


class LatePenalty(LateSubmissionPlugin):
    """nbgrader late-submission plugin: a percentage of the earned score per started day or hour late, capped."""

    grace_minutes = Float(0.0, min=0.0, help="Minutes past the due date that still count as on time.").tag(config=True)
    percent = Float(10.0, min=0.0, max=100.0, help="Percent of the earned score lost per started unit late.") \
        .tag(config=True)
    per = Enum(("day", "hour"), default_value="day", help="The unit: 'day' (24 h) or 'hour'.").tag(config=True)
    max_percent = Float(100.0, min=0.0, max=100.0, help="The most a late submission can lose, in percent.") \
        .tag(config=True)

    def percent_lost(self, seconds_late: float) -> float:
        """Percent of the earned score lost by a submission ``seconds_late`` after the due date."""
        if seconds_late <= self.grace_minutes * 60:
            return 0.0
        units = math.ceil(seconds_late / UNIT_SECONDS[self.per])
        return min(self.max_percent, units * self.percent)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        """nbgrader's hook (called only when the submission is late): the points to take off ``score``."""
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


def recompute(db_url: str, assignment: str, config) -> None:
    """Apply the late policy in ``config`` again to every graded submission of ``assignment``, as nbgrader's Autograde
    does last (same preprocessor, same plugin), without executing anything: after a due date, an extension or the
    policy changed, when the submissions themselves did not."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties

    with Gradebook(db_url) as gradebook:
        found = gradebook.find_assignment(assignment)
        pairs = [(s.student_id, n.name) for s in found.submissions for n in found.notebooks]
    step = AssignLatePenalties(config=config)
    for student, notebook in pairs:
        resources = {"nbgrader": {"notebook": notebook, "assignment": assignment, "student": student,
                                  "db_url": db_url}}
        step.preprocess(nbformat.v4.new_notebook(), resources)


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
