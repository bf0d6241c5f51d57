"""Check my work and the progress map (issue 35): a learner's own grade, hidden tests included, equal to the class
grader's; never a line of a hidden test or of the reference answer in what it shows; progress kept in the learner's
home; on Binder, the work taken along as a zip and brought back, refusing anything that is not the course's.

The in-process runner of the wrong-answer catalogue (tools/inprocess.py) grades every test cell with the same
:func:`autograder.selfcheck.run_test_cell`, so tests/test_catalogue.py proves check my work's verdict for every
catalogued answer at a drawn seed, and tests/test_grading_pipeline.py that the class grader gives the same.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from submissions import catalogue, graded_cells, solution_sources
from test_catalogue import reference_lines

from autograder import course, progress, selfcheck
from autograder.seeding import DEFAULT_SEED

ASSIGNMENT = "01-chain-rule"
#: A wrong answer of the catalogue that loses some cells and passes others (the forward difference: Part A only).
WRONG = next(w for w in catalogue(ASSIGNMENT) if w.name == "forward difference")


@pytest.fixture
def learner_home(tmp_path, monkeypatch):
    """A learner's own data home (the progress file lives there, never in the course folder)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def saved_notebook(folder: Path, answers: dict[str, str]) -> Path:
    """The student release of exercise 01 with ``answers`` in its solution cells, saved under ``folder``."""
    notebook = nbformat.read(course.release_notebook(ASSIGNMENT), as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    path = folder / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("assignment", course.assignments())
def test_every_exercise_ends_with_its_check_my_work_button(assignment):
    """After the last test cell, a plain (ungraded) cell shows the button for this very assignment, in the source and
    in the release; running the notebook (Run All, nbgrader) only shows it."""
    for path in (course.source_notebook(assignment), course.release_notebook(assignment)):
        cells = nbformat.read(path, as_version=4).cells
        calls = [i for i, c in enumerate(cells) if c.cell_type == "code" and "selfcheck import button" in c.source]
        assert len(calls) == 1, f"{path}: {len(calls)} check-my-work cells"
        cell = cells[calls[0]]
        assert f'button("{assignment}")' in cell.source and "nbgrader" not in cell.metadata, path
        graded = [i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade")]
        assert calls[0] > max(graded), f"{path}: the button comes before a test cell"


@pytest.mark.parametrize("lesson", [p.stem for p in course.lessons()])
def test_every_lesson_ends_by_marking_itself_read(lesson):
    cells = [c for c in nbformat.read(course.ROOT / "lessons" / f"{lesson}.ipynb", as_version=4).cells
             if c.cell_type == "code"]
    assert f'finished_lesson("{lesson}")' in cells[-1].source


def test_the_test_cells_are_the_graded_ones_with_their_parts():
    cells = course.test_cells(ASSIGNMENT)
    assert {c.grade_id: c.points for c in cells} == graded_cells(ASSIGNMENT)
    assert [c.part for c in cells] == ["A", "A", "B", "B", "C", "C"]
    assert sum(c.hidden for c in cells) == 3


def test_a_saved_notebook_is_graded_as_the_catalogue_says(tmp_path, learner_home):
    reference = solution_sources(ASSIGNMENT)
    points = graded_cells(ASSIGNMENT)
    full = selfcheck.check_file(saved_notebook(tmp_path / "reference", reference), DEFAULT_SEED)
    assert full.earned == full.points == sum(points.values())
    blank = selfcheck.check_file(course.release_notebook(ASSIGNMENT), DEFAULT_SEED)
    assert blank.earned == 0 and {v.status for v in blank.verdicts} == {selfcheck.Status.NOT_WRITTEN}
    wrong = selfcheck.check_file(saved_notebook(tmp_path / "wrong", {**reference, **WRONG.replace}), 914)
    assert {v.grade_id for v in wrong.verdicts if v.status is not selfcheck.Status.PASSED} == WRONG.lost(points)
    assert "forward difference" in {m for v in wrong.verdicts for m in v.misconceptions}
    text = selfcheck.as_text(wrong)
    assert "Part A: 0 / 4" in text and "grading seed 914" in text and "Likely misconception: forward difference" in text


def test_what_check_my_work_shows_holds_no_hidden_test_and_no_reference_line():
    hidden = {"".join(line.split()) for cell in course.test_cells(ASSIGNMENT) if cell.hidden
              for line in cell.source.split("### BEGIN HIDDEN TESTS")[1].splitlines()
              if line.strip() and "END HIDDEN" not in line}
    namespace: dict = {"__name__": "__main__"}
    notebook = nbformat.read(course.source_notebook(ASSIGNMENT), as_version=4)
    answers = {**solution_sources(ASSIGNMENT), **WRONG.replace}
    for cell in notebook.cells:  # the learner's notebook as it stands: imports, given code, their answers
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta and not meta.get("grade"):
            exec(compile(answers.get(meta.get("grade_id"), cell.source), "<cell>", "exec"), namespace)
    report = selfcheck.check_namespace(ASSIGNMENT, namespace, 914)
    shown = "".join((selfcheck.as_text(report) + selfcheck.as_html(report)).split())
    assert report.earned == 8 and not [line for line in hidden if line in shown]
    assert not [line for line in reference_lines(ASSIGNMENT) if line in shown]


def test_every_check_is_a_fresh_draw_unless_a_seed_is_given():
    assert len({selfcheck.fresh_seed() for _ in range(20)}) > 15


def test_progress_lives_in_the_learners_home_and_draws_the_map(tmp_path, learner_home):
    assert progress.store().is_relative_to(learner_home) and not progress.store().is_relative_to(course.ROOT)
    wrong = selfcheck.check_file(saved_notebook(tmp_path, {**solution_sources(ASSIGNMENT), **WRONG.replace}), 914)
    progress.record(wrong)
    progress.finished_lesson(ASSIGNMENT)
    states = {row.part: row.state for row in progress.part_states(ASSIGNMENT)}
    assert states == {"A": progress.PartState.FAILING, "B": progress.PartState.PASSED,
                      "C": progress.PartState.PASSED}
    assert {row.state for row in progress.part_states("02-computation-graph")} == {progress.PartState.NOT_CHECKED}
    text, page = progress.as_text(), progress.as_html()
    assert "01-chain-rule: 8 / 12 at the last check; lesson run to the end" in text
    assert "forward difference" in text and "02-computation-graph: not checked yet" in text
    assert "A ✗<span class='autograd-sr'> fails</span>" in page and "href='exercises/01-chain-rule/" in page


def test_the_work_goes_into_a_zip_and_comes_back(tmp_path, learner_home):
    root = tmp_path / "course"
    mine = root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    mine.parent.mkdir(parents=True)
    (root / "solutions" / ASSIGNMENT).mkdir(parents=True)  # what makes 01-chain-rule one of this course's exercises
    (root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text("{}")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1  # mine")]), mine)
    progress.finished_lesson(ASSIGNMENT)
    data = progress.archive(root)
    assert sorted(zipfile.ZipFile(io.BytesIO(data)).namelist()) == [f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
                                                                     progress.FILE_NAME]
    progress.store().unlink()  # a fresh session: no progress, and a learner who changed the notebook since
    mine.write_text(mine.read_text().replace("x = 1", "x = 2"))
    plan = progress.plan_restore(data, root)
    assert plan.overwrites == [f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"]
    with pytest.raises(progress.RestoreRefused, match="confirm first"):
        progress.apply_restore(plan, root)
    assert "x = 2" in mine.read_text()  # nothing was written without asking
    progress.apply_restore(plan, root, overwrite=True)
    assert "x = 1" in mine.read_text() and ASSIGNMENT in progress.load()["lessons"]


def test_a_kernel_that_skipped_the_imports_is_told_to_run_the_notebook_from_the_top():
    report = selfcheck.check_namespace(ASSIGNMENT, {}, grading_seed=1)
    assert report.earned == 0 and all(v.status is selfcheck.Status.ERROR for v in report.verdicts)
    assert all("Run the notebook's cells from the top" in v.message for v in report.verdicts)
    namespace = {}
    exec("from autograder.checks import ex01_chain_rule as checks\nfrom autograder.seeding import grading_seed\n"
         "def central_difference(f, x, h=1e-6):\n    return undefined_name", namespace)
    verdict = selfcheck.check_namespace(ASSIGNMENT, namespace, grading_seed=1).verdicts[0]
    assert "undefined_name" in verdict.message and "from the top" not in verdict.message, verdict


def test_a_fresh_sessions_untouched_release_is_replaced_without_asking(tmp_path, learner_home):
    """On a new Binder session every exercise is the release again: restoring over it loses no answer, so it is not
    among the overwrites; the same notebook with one answer written is."""
    root = tmp_path / "course"
    mine = root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    mine.parent.mkdir(parents=True)
    shutil.copytree(course.ROOT / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    shutil.copy2(course.release_notebook(ASSIGNMENT), mine)
    first = next(grade_id for grade_id in solution_sources(ASSIGNMENT))
    data = _zip({f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.ipynb":
                 saved_notebook(tmp_path, {first: "def f(): return 2"}).read_bytes()})
    assert progress.plan_restore(data, root).overwrites == []
    shutil.copy2(saved_notebook(tmp_path / "other", {first: "def f(): return 1"}), mine)
    assert progress.plan_restore(data, root).overwrites == [f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"]


def test_where_the_sources_are_kept_from_learners_the_check_says_it_ran_the_visible_tests(tmp_path, monkeypatch,
                                                                                         learner_home):
    """On a hub the learners' copy of the course has no solutions/ (deploy/): the check runs the release's visible
    tests, for the same points, and says that the instructor's grade adds the hidden ones."""
    root = tmp_path / "course"
    shutil.copytree(course.ROOT / "exercises" / ASSIGNMENT, root / "exercises" / ASSIGNMENT)
    assert course.assignments(root) == [ASSIGNMENT]
    cells, hidden = course.exercise_tests(ASSIGNMENT, root)
    assert not hidden and not any(cell.hidden for cell in cells)
    visible = {c.grade_id: c.points for c in course.test_cells(ASSIGNMENT) if not c.hidden}
    assert {c.grade_id: c.points for c in cells} == visible and len(visible) == 3
    monkeypatch.setattr(selfcheck, "exercise_tests", lambda assignment: course.exercise_tests(assignment, root))
    report = selfcheck.check_namespace(ASSIGNMENT, {}, grading_seed=1)
    assert not report.hidden_included and report.earned == 0
    assert "visible tests only" in selfcheck.as_text(report)
    assert "hidden tests included" not in selfcheck.as_html(report)
    assert selfcheck.Report.from_json(json.loads(json.dumps(report.to_json()))).hidden_included is False


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, content in files.items():
            # A fixed date: the bytes, and so the test ids below, are the same in every pytest-xdist worker.
            zipped.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), content)
    return buffer.getvalue()


NOTEBOOK = nbformat.writes(nbformat.v4.new_notebook()).encode()


@pytest.mark.parametrize("upload, reason", [
    (b"not a zip at all", "not a zip file"),
    (_zip({"../../.bashrc": b"echo owned"}), "not part of this course's work"),
    (_zip({"/etc/passwd": b"root"}), "not part of this course's work"),
    (_zip({"exercises/01-chain-rule/../../x.ipynb": NOTEBOOK}), "not part of this course's work"),
    (_zip({"exercises/99-unknown/99-unknown.ipynb": NOTEBOOK}), "not part of this course's work"),
    (_zip({"lessons/01-chain-rule.ipynb": NOTEBOOK}), "not part of this course's work"),
    (_zip({"exercises/01-chain-rule/01-chain-rule.ipynb": b"<html>"}), "not a readable notebook"),
    (_zip({progress.FILE_NAME: b"[1, 2]"}), "not a progress file"),
    (_zip({}), "none of this course's work"),
], ids=["not-a-zip", "dotdot-path", "absolute-path", "dotdot-inside", "unknown-exercise", "a-lesson", "html",
        "bad-progress", "empty-zip"])
def test_an_upload_that_is_not_the_courses_work_is_refused_whole(upload, reason, learner_home):
    with pytest.raises(progress.RestoreRefused, match=reason):
        progress.plan_restore(upload)


def test_on_binder_every_notebook_says_the_work_is_lost_with_the_session(monkeypatch):
    monkeypatch.delenv("BINDER_LAUNCH_HOST", raising=False)
    monkeypatch.delenv("BINDER_REQUEST", raising=False)
    monkeypatch.delenv("BINDER_SERVICE_HOST", raising=False)
    assert not progress.on_binder()
    monkeypatch.setenv("BINDER_LAUNCH_HOST", "https://mybinder.org/")
    assert progress.on_binder() and "Download my work" in progress.BINDER_NOTICE


def test_the_commands_check_a_saved_notebook_and_print_the_progress(tmp_path, learner_home):
    env = {**course.tool_environment(), "XDG_DATA_HOME": str(learner_home)}
    path = saved_notebook(tmp_path, solution_sources(ASSIGNMENT))
    done = subprocess.run([sys.executable, "-m", "autograder", "check", str(path), "--seed", "3"], env=env,
                          capture_output=True, text=True, cwd=course.ROOT)
    assert done.returncode == 0, done.stderr
    assert "Score 12 / 12, hidden tests included" in done.stdout and "Part C: 4 / 4  ✓" in done.stdout
    shown = subprocess.run([sys.executable, "-m", "autograder", "progress"], env=env, capture_output=True, text=True,
                           cwd=course.ROOT)
    assert "01-chain-rule: 12 / 12 at the last check" in shown.stdout
    stray = subprocess.run([sys.executable, "-m", "autograder", "check", str(tmp_path / "notes.ipynb")], env=env,
                           capture_output=True, text=True, cwd=course.ROOT)
    assert stray.returncode == 2 and "not one of the course's exercises" in stray.stderr
    assert json.loads(progress.store().read_text())["exercises"][ASSIGNMENT]["grading_seed"] == 3


def test_the_progress_map_notebook_runs(learner_home):
    from tools.notebooks import execute

    executed = execute(course.ROOT / "progress.ipynb")
    html = "".join(o.get("data", {}).get("text/html", "") for c in executed.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert "Parts of every exercise at its last check" in html and "01-chain-rule" in html
