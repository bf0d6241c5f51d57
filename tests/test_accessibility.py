"""Accessible to every learner (issue 37): the pages the course writes pass axe-core's WCAG 2.1 A and AA rules with no
critical and no serious violation, in Debian's Chromium: every exercise's HTML export (``make html``), a feedback
page nbgrader writes with the course's template, the class grader's "could not be graded" page and its class report.
The lessons are checked live in JupyterLab and as exports by tests/test_browser.py, where they run anyway.

Every page's violations, counted or not, go to ``$COURSE_SCREENSHOTS/../accessibility/`` for the record.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from accessibility import counted, record, undescribed_images, violations
from submissions import catalogue, solution_sources
from test_browser import launched_chromium

from autograder import course, export
from tools import synthetic

REPORTS = Path(os.environ.get("COURSE_SCREENSHOTS") or course.ROOT / "artifacts" / "browser").parent / "accessibility"
ASSIGNMENT = "01-chain-rule"

pytestmark = pytest.mark.xdist_group("accessibility")


@pytest.fixture(scope="module")
def chromium():
    with launched_chromium() as browser:
        yield browser.new_page(viewport={"width": 1200, "height": 900})


def check_page(page, path: Path, name: str) -> None:
    page.goto(path.resolve().as_uri())
    found = violations(page)
    record(name, found, REPORTS)
    assert not counted(found), f"{name}: {counted(found)}"
    assert not undescribed_images(page), f"{name}: images without a text alternative"
    assert page.get_attribute("html", "lang") == "en"


@pytest.mark.parametrize("assignment", course.assignments())
def test_every_exercise_exports_to_a_page_for_everyone(chromium, tmp_path, assignment):
    notebook = nbformat.read(course.release_notebook(assignment), as_version=4)
    page = export.export_notebook(notebook, tmp_path / f"{assignment}.html")
    text = page.read_text()
    assert "mathjax" not in text.lower() and ("<math" in text or "$" not in "".join(
        c.source for c in notebook.cells if c.cell_type == "markdown")), "formulas become MathML"
    check_page(chromium, page, f"exercise-{assignment}")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One assignment graded by the class grader: the reference, a catalogued wrong answer and a notebook that cannot
    be graded (its feedback pages and the class report are what a class gets)."""
    root = tmp_path_factory.mktemp("graded") / "course"
    course.copy_course(root, assignment_ids=[ASSIGNMENT])
    course.generate_release(root, [ASSIGNMENT])
    reference = solution_sources(ASSIGNMENT)
    wrong = next(w for w in catalogue(ASSIGNMENT) if w.name == "forward difference")
    synthetic.write_submission(root, ASSIGNMENT, "ada", reference)
    synthetic.write_submission(root, ASSIGNMENT, "bo", {**reference, **wrong.replace})
    synthetic.write_submission(root, ASSIGNMENT, "cy", reference, case={"transform": "invalid_json"})
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--jobs", "1", "--course",
                           str(root), "--quiet", "--no-sandbox"], capture_output=True, text=True,
                          env=course.tool_environment())
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return root


def test_a_feedback_page_explains_for_everyone(chromium, graded):
    page = graded / "feedback" / "bo" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    text = page.read_text()
    assert "About this mistake" in text and "<math" in text and "mathjax" not in text.lower()
    check_page(chromium, page, "feedback")


def test_the_could_not_be_graded_page_and_the_class_report(chromium, graded):
    check_page(chromium, graded / "feedback" / "cy" / ASSIGNMENT / f"{ASSIGNMENT}.html", "could-not-be-graded")
    report = graded / "grading" / ASSIGNMENT / "report.html"
    assert "forward difference" in report.read_text()
    check_page(chromium, report, "class-report")


def test_the_feedback_template_is_nbgraders_with_the_accessibility_changes_only():
    """The course's feedback page is nbgrader's own with the changes its header comment lists: an nbgrader upgrade
    that changes its page fails here, so that the copy is brought in step."""
    import nbgrader

    theirs = (Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates" / "feedback"
              / "index.html.j2").read_text()
    ours = (export.TEMPLATES / "autograd_feedback" / "index.html.j2").read_text()
    ours = ours[ours.index("-#}\n") + 4:]
    changes = [("<html>", '<html lang="en">'), ("<!-- Loading mathjax macro -->\n{{ mathjax() }}\n", ""),
               ("div.nbgrader_cell .panel-heading a {\n    color: #BBBBBB;\n}",
                "div.nbgrader_cell .panel-heading a {\n    color: #4d4d4d;\n}\n\ndiv.panel-heading .pull-right a, "
                "div.panel-primary > .panel-heading a {\n    color: #ffffff;\n}"),
               ("li.late-penalty {\n    color: #d2413a;\n}", "li.late-penalty {\n    color: #a4161a;\n}"),
               ("</style>\n\n</head>", "{% include 'accessible.css' %}\n</style>\n\n</head>")]
    for old, new in changes:
        assert theirs.count(old) >= 1, f"nbgrader's page changed: {old!r} is gone"
        theirs = theirs.replace(old, new, 1)
    assert ours == theirs
