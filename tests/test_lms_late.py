"""The late policy (``autograder.grading.orchestration.late.LatePenalty``) and nbgrader's AssignLatePenalties using
it, without executing anything: penalties follow the policy's numbers, and every run of the preprocessor recomputes
them from the submission's current time, due date and extension (tests/test_term_walkthrough.py does it with both
real graders)."""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lms_class import DUE, fill_gradebook, lms_course, use_venv_tools
from nbgrader.api import Gradebook
from nbgrader.preprocessors import AssignLatePenalties
from traitlets.config import Config, PyFileConfigLoader

from autograder import course
from autograder.grading.orchestration.late import LatePenalty, late_submissions, read_extensions, report_lines
from autograder.lms import cli

DAY, HOUR, MINUTE = 86400, 3600, 60
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader 0.9 with SQLAlchemy 2


def policy(**traits) -> LatePenalty:
    defaults = {"grace_minutes": 15, "percent": 10, "per": "day", "max_percent": 50}
    return LatePenalty(config=Config({"LatePenalty": {**defaults, **traits}}))


@pytest.mark.parametrize(("seconds_late", "percent"), [
    (1, 0), (15 * MINUTE, 0),  # within the grace period: on time
    (15 * MINUTE + 1, 10), (DAY, 10),  # a started day costs a day, counted from the due date
    (DAY + 1, 20), (2 * DAY + HOUR, 30), (5 * DAY, 50), (40 * DAY, 50),  # capped
])
def test_percent_per_started_day_after_the_grace_period_capped(seconds_late, percent):
    assert policy().percent_lost(seconds_late) == percent


def test_per_hour_and_no_grace():
    hourly = policy(per="hour", percent=5, grace_minutes=0, max_percent=100)
    assert [hourly.percent_lost(s) for s in (1, HOUR, HOUR + 1, 19 * HOUR, 30 * HOUR)] == [5, 5, 10, 95, 100]


def test_the_penalty_is_a_share_of_the_points_earned():
    assert policy().late_submission_penalty("bob", 12.0, 25 * HOUR) == 2.4
    assert policy().late_submission_penalty("bob", 0.0, 25 * HOUR) == 0.0
    assert policy().late_submission_penalty("bob", 7.0, 10 * DAY) == 3.5


@given(st.floats(0, 60 * DAY), st.floats(0, 60 * DAY))
def test_later_never_costs_less_and_never_more_than_the_cap(a, b):
    rule = policy()
    early, late = sorted((a, b))
    assert 0 <= rule.percent_lost(early) <= rule.percent_lost(late) <= rule.max_percent


def test_the_course_configures_this_plugin():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.ROOT)).load_config()
    assert config.AssignLatePenalties.plugin_class == "autograder.grading.orchestration.late.LatePenalty"
    assert {k: config.LatePenalty[k] for k in ("grace_minutes", "percent", "per", "max_percent")} == \
        {"grace_minutes": 15, "percent": 10, "per": "day", "max_percent": 50}
    assert config.LatePenalty.extensions == "grading/extensions.csv"


def test_configurations_written_before_the_move_still_name_the_same_plugin():
    from autograder.lms import late

    assert late.LatePenalty is LatePenalty


@pytest.fixture
def gradebook_url(tmp_path):
    fill_gradebook(tmp_path, {"hw": 12.0}, {"hw": {"bob": (12.0, 0.0)}}, duedate=DUE)
    return f"sqlite:///{tmp_path / 'gradebook.db'}"


def assign_penalty(db_url: str, submitted_at, extension_hours: float | None = None,
                   extensions: str = "/nonexistent/extensions.csv") -> float | None:
    """What one autograde's AssignLatePenalties step records for bob's notebook, submitted at ``submitted_at``."""
    use_venv_tools()
    with Gradebook(db_url) as gradebook:
        gradebook.update_or_create_submission("hw", "bob", timestamp=submitted_at)
        if extension_hours is not None:
            gradebook.grant_extension("hw", "bob", hours=extension_hours)
    step = AssignLatePenalties(config=Config({"AssignLatePenalties": {"plugin_class": LatePenalty},
                                              "LatePenalty": {"grace_minutes": 15, "max_percent": 50,
                                                              "extensions": extensions}}))
    resources = {"nbgrader": {"notebook": "hw", "assignment": "hw", "student": "bob", "db_url": db_url}}
    step.preprocess(nbformat.v4.new_notebook(), resources)
    with Gradebook(db_url) as gradebook:
        return gradebook.find_submission_notebook("hw", "hw", "bob").late_submission_penalty


def test_every_run_recomputes_the_penalty_from_the_current_timestamp(gradebook_url):
    assert assign_penalty(gradebook_url, DUE + timedelta(days=2, hours=1)) == 3.6  # 3 started days: 30 % of 12
    assert assign_penalty(gradebook_url, DUE + timedelta(hours=2)) == 1.2  # resubmitted earlier: 10 %
    assert assign_penalty(gradebook_url, DUE + timedelta(minutes=10)) == 0.0  # within the grace period
    assert assign_penalty(gradebook_url, DUE - timedelta(hours=1)) is None  # on time: nbgrader resets it
    assert assign_penalty(gradebook_url, DUE + timedelta(days=9)) == 6.0  # capped at 50 %


def test_an_extension_moves_the_due_date(gradebook_url):
    assert assign_penalty(gradebook_url, DUE + timedelta(hours=30), extension_hours=48) is None
    assert assign_penalty(gradebook_url, DUE + timedelta(hours=30), extension_hours=24) == 1.2


def test_the_class_report_section_counts_late_submissions_and_penalties(gradebook_url):
    assign_penalty(gradebook_url, DUE + timedelta(days=2, hours=1))
    late = late_submissions(gradebook_url, "hw")
    assert [(s.student, s.seconds_late, s.score, s.penalty) for s in late] == [("bob", (2 * DAY + HOUR), 12.0, 3.6)]
    text = "\n".join(report_lines(late))
    assert "1 late, 1 penalized, 3.6 points taken off" in text and "| bob | 2 d 1 h | 12 | 3.6 |" in text
    assert late_submissions(gradebook_url, "no-such-assignment") == []
    assert report_lines([])[-1] == "None."


def test_late_recompute_applies_a_new_due_date_without_regrading(tmp_path):
    root = lms_course(tmp_path / "course")
    fill_gradebook(root, {"hw": 12.0}, {"hw": {"bob": (12.0, 0.0)}}, duedate=DUE)
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(db_url) as gradebook:
        gradebook.update_or_create_submission("hw", "bob", timestamp=DUE + timedelta(days=2, hours=1))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["late", "hw", "--recompute", "--course", str(root)]) == 0
    assert "| bob | 2 d 1 h | 12 | 3.6 |" in out.getvalue()  # the course's policy: 10 % a started day
    with Gradebook(db_url) as gradebook:
        gradebook.update_or_create_assignment("hw", duedate=DUE + timedelta(days=2))  # the due date moved
    with contextlib.redirect_stdout(out):
        cli.main(["late", "hw", "--recompute", "--course", str(root)])
    assert "| bob | 1 h 0 min | 12 | 1.2 |" in out.getvalue()
    with Gradebook(db_url) as gradebook:
        assert gradebook.find_submission("hw", "bob").late_submission_penalty == 1.2


def command(root, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli.main([*args, "--course", str(root)])
    return status, out.getvalue()


@pytest.fixture
def course_with_due_date(tmp_path):
    root = lms_course(tmp_path / "course")
    fill_gradebook(root, {"hw": 12.0}, {}, duedate=DUE)
    return root


def test_an_extension_granted_before_the_first_grade_applies_when_graded(course_with_due_date):
    """Before bob's submission is in the gradebook nbgrader cannot keep an extension (MissingEntry); the command
    keeps it and the plugin puts it on the submission when nbgrader asks for the penalty."""
    root = course_with_due_date
    status, printed = command(root, "extend", "hw", "bob", "--days", "3")
    assert status == 0, printed
    assert "bob: hw now due 2026-10-12 23:59 UTC" in printed and "no submission in the gradebook yet" in printed
    kept = read_extensions(root / "grading" / "extensions.csv")
    assert kept["hw", "bob"].days == 3
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    fill_gradebook(root, {}, {"hw": {"bob": (12.0, 0.0)}})
    extensions = str(root / "grading" / "extensions.csv")
    assert assign_penalty(db_url, DUE + timedelta(days=2), extensions=extensions) == 0  # within the extension
    with Gradebook(db_url) as gradebook:
        assert gradebook.find_submission("hw", "bob").extension == timedelta(days=3)
    assert assign_penalty(db_url, DUE + timedelta(days=3, hours=2), extensions=extensions) == 1.2  # 2 h past it


def test_an_extension_after_grading_recomputes_the_penalty_at_once(course_with_due_date):
    root = course_with_due_date
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    fill_gradebook(root, {}, {"hw": {"bob": (12.0, 0.0)}})
    with Gradebook(db_url) as gradebook:
        gradebook.update_or_create_submission("hw", "bob", timestamp=DUE + timedelta(days=2, hours=1))
    command(root, "late", "hw", "--recompute")
    with Gradebook(db_url) as gradebook:
        assert gradebook.find_submission("hw", "bob").late_submission_penalty == 3.6
    status, printed = command(root, "extend", "hw", "bob", "--until", "2026-10-12 12:00:00 UTC")
    assert status == 0 and "penalty changed: bob 3.6 -> 0" in printed
    with Gradebook(db_url) as gradebook:
        assert gradebook.find_submission("hw", "bob").late_submission_penalty == 0
    status, printed = command(root, "extend", "hw", "bob", "--days", "1")  # the last one granted counts
    assert "penalty changed: bob 0 -> 2.4" in printed  # 1 d 1 h past the new due date: two started days


@pytest.mark.parametrize(("args", "message"), [
    (["extend", "nope", "bob", "--days", "1"], "the gradebook has no assignment 'nope'"),
    (["extend", "hw", "zed", "--days", "1"], "no student 'zed' in the roster"),
    (["extend", "hw", "bob", "--until", "2026-10-01 00:00:00 UTC"], "is before the due date 2026-10-09 23:59 UTC"),
    (["extend", "hw", "bob", "--until", "next week"], "autograder.lms extend:"),
])
def test_an_extension_that_cannot_be_granted_is_refused(course_with_due_date, args, message):
    status, printed = command(course_with_due_date, *args)
    assert status == 2 and message in printed and "Traceback" not in printed
    assert not (course_with_due_date / "grading" / "extensions.csv").exists()


def test_no_due_date_no_extension(tmp_path):
    root = lms_course(tmp_path / "course")
    fill_gradebook(root, {"hw": 12.0}, {})
    status, printed = command(root, "extend", "hw", "bob", "--days", "1")
    assert status == 2 and "hw has no due date in the gradebook" in printed
