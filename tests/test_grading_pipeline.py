"""The grading pipeline, end to end, on a scratch copy of the course, for every assignment.

One run of ``python -m autograder grade`` grades a class for every assignment, with one pool of workers: the
reference solution, the untouched release, and :data:`PIPELINE_SAMPLE` catalogued wrong answer (the one that reaches
out the most, :data:`REACHES_OUT`; every one with ``make test-all``; tests/test_catalogue.py proves every answer's
verdict in-process in ``make test``). It is
nbgrader's own pipeline (sanitizing, Autograde's grading rules, the gradebook, feedback), with each notebook executed
in a sandboxed process forked from a server that has imported torch.
The reference must get full marks, the blank release 0 (without stopping the batch), and each wrong answer exactly the
scores its catalogue entry states, with its diagnosis in the feedback.

The reference of every assignment is graded again by plain ``nbgrader autograde`` (a fresh Jupyter kernel per notebook,
nothing of this package's grader) on a course copy and gradebook of its own (with COURSE_AGREEMENT=all one per
assignment, as many at once as cores): no cell of it may raise in a kernel, and both graders must give it full marks. A
kernel per notebook costs 10 to 25 seconds here, so the wrong answers are compared only with ``COURSE_AGREEMENT=all``
(``make test-all``: the blank release and every catalogue answer, each with identical scores from both graders: some 770
notebooks at about 5 s each in the class grader and 9 s in plain nbgrader, about 1 hour 40 minutes on two cores: 34
minutes for the class grader, then about an hour for plain nbgrader; worth it after any change to the grader's executor,
sandbox or replay). In ``make test``, tests/test_grade_command.py compares the two graders on an answer that imports
modules no reference imports, and the term walk-through on a late submission's penalty.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import CORES, NIGHTLY, grader_sandbox_flags, private_folder
from submissions import catalogue, feedback_text, graded_cells, scores, solution_sources, write_submission

from autograder import course

ASSIGNMENTS = course.assignments()
#: ``make test-all``: plain nbgrader grades the whole catalogue too, not only the references.
AGREEMENT = os.environ.get("COURSE_AGREEMENT") == "all"
#: The class grader grades the whole catalogue: in ``make test-all`` (COURSE_TEST_ALL=1), and whenever plain nbgrader
#: does (COURSE_AGREEMENT=all alone), since the two are compared on the very same submissions.
WHOLE_CATALOGUE = NIGHTLY or AGREEMENT
pytestmark = pytest.mark.xdist_group("pipeline")  # one course, one grade run, one worker
#: Catalogued wrong answers per assignment the class grader grades in `make test`; `make test-all`
#: (COURSE_TEST_ALL=1) grades the whole catalogue. tests/test_catalogue.py proves every answer's verdict and diagnosis
#: in-process: the test cells are the same code, and this sample shows the pipeline (sandbox, replay, nbgrader's
#: rules, feedback) changes no verdict.
PIPELINE_SAMPLE = 1
#: Code that reaches what a sandboxed, forked worker could treat differently from a fresh kernel, rarest first:
#: modules torch imports lazily, imports, torch's optimizers and utilities, output and the process.
REACHES_OUT = [re.compile(pattern, re.MULTILINE) for pattern in (
    r"torch\.(func|autograd\.functional|_dynamo|compile)", r"^\s*(import|from)\s", r"torch\.(optim|nn\.utils)",
    r"warnings\.|print\(|\bsys\.|\bos\.")]


@functools.cache
def agreement_sample(assignment: str) -> tuple[str, ...]:
    """The students plain nbgrader grades: the reference; with COURSE_AGREEMENT=all everyone the class grader
    graded (the whole catalogue and the blank release)."""
    return pipeline_sample(assignment) if AGREEMENT else ("reference",)


@functools.cache
def pipeline_sample(assignment: str) -> tuple[str, ...]:
    """The students the class grader grades: reference, blank and PIPELINE_SAMPLE wrong answers, those that reach
    out the most (:data:`REACHES_OUT`, rarest first; then spread over the catalogue), everyone with
    :data:`WHOLE_CATALOGUE`."""
    entries = catalogue(assignment)
    everyone = [f"wrong{n:02d}" for n in range(len(entries))]
    if WHOLE_CATALOGUE or len(everyone) <= PIPELINE_SAMPLE:
        return ("reference", "blank", *everyone)

    def rank(entry) -> int:
        code = "\n".join(entry.replace.values())
        return next((k for k, pattern in enumerate(REACHES_OUT) if pattern.search(code)), len(REACHES_OUT))

    reaching = sorted((rank(entry), name) for name, entry in zip(everyone, entries) if rank(entry) < len(REACHES_OUT))
    chosen = [name for _, name in reaching[:PIPELINE_SAMPLE]]
    rest = [name for name in everyone if name not in chosen]
    count = PIPELINE_SAMPLE - len(chosen)
    chosen += [rest[round(k * (len(rest) - 1) / max(1, count - 1))] for k in range(count)]
    return ("reference", "blank", *sorted(set(chosen)))


def write_class(root, assignment: str) -> None:
    reference = solution_sources(assignment)
    sample = pipeline_sample(assignment)
    write_submission(root, "reference", assignment, reference)
    write_submission(root, "blank", assignment, {})
    for number, wrong in enumerate(catalogue(assignment)):
        if f"wrong{number:02d}" in sample:
            write_submission(root, f"wrong{number:02d}", assignment, {**reference, **wrong.replace})


@pytest.fixture(scope="session")
def graded_class(released_course) -> Path:
    """The course where every assignment's class has been graded, with feedback, by one run of the grade command
    (one pool of workers for all of them). The released gradebook (the assignments, no submissions) is kept as
    ``gradebook-released.db`` for plain nbgrader."""
    root = released_course
    shutil.copy2(root / "gradebook.db", root / "gradebook-released.db")
    for assignment in ASSIGNMENTS:
        write_class(root, assignment)
    # one worker: the other pytest-xdist workers have the other cores (every core for the whole catalogue, make
    # test-all, where this worker's group outlasts all the rest)
    jobs = str(CORES) if WHOLE_CATALOGUE else "1"
    command = [sys.executable, "-m", "autograder", "grade", *ASSIGNMENTS, "--jobs", jobs, "--quiet",
               "--course", str(root), *grader_sandbox_flags()]
    run = subprocess.run(command, cwd=root, env=course.tool_environment(), capture_output=True, text=True)
    assert run.returncode == 0, f"grading the classes failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    ready = set(re.findall(r"workers ready after ([\d.]+) s", run.stdout))
    assert len(ready) == 1, f"one pool of workers for every assignment:\n{run.stdout[-4000:]}"
    return root


def plain_runs() -> list[list[str]]:
    """The assignments of each plain nbgrader run: all in one run in ``make test`` (a reference each); with
    ``COURSE_AGREEMENT=all`` a run per assignment, largest class first, for :func:`plain_nbgrader_class` to start as
    cores free up (a capstone notebook takes three times an early one's time: two fixed groups of equal counts ended
    45 and 77 minutes in, by the per-notebook times of the 2026-12-05 run)."""
    if not AGREEMENT:
        return [list(ASSIGNMENTS)]
    return [[assignment] for assignment in sorted(ASSIGNMENTS, key=lambda a: -len(agreement_sample(a)))]


def _plain_nbgrader(root: Path, timeout: float) -> str:
    """``nbgrader autograde`` on every submission in ``root``: what it printed. It runs in a session of its own, so
    that a run that times out or is interrupted leaves no nbgrader nor kernel behind."""
    command = [sys.executable, "-m", "nbgrader", "autograde", "*", "--force", "--log-level=ERROR"]
    process = subprocess.Popen(command, cwd=root, env=course.tool_environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        return process.communicate(timeout=timeout)[0]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="session")
def plain_nbgrader_class(graded_class, tmp_path_factory) -> tuple[dict[str, Path], str]:
    """({assignment: course copy where plain `nbgrader autograde` graded its :func:`agreement_sample`}, what nbgrader
    printed), of the very submissions graded_class graded: each of :func:`plain_runs` on its own copy and gradebook
    (assignment id ``*``: nbgrader globs the submitted folders), as many at once as cores with COURSE_AGREEMENT=all
    (one in make test: the other pytest-xdist workers have the other cores), a fresh kernel per notebook as always."""
    roots: dict[str, Path] = {}
    for number, group in enumerate(plain_runs()):
        root = private_folder(tmp_path_factory.mktemp(f"plain{number}")) / "course"
        shutil.copytree(graded_class, root, ignore=shutil.ignore_patterns(
            "submitted", "autograded", "feedback", "grading", "gradebook.db", "gradebook-released.db"))
        shutil.copy2(graded_class / "gradebook-released.db", root / "gradebook.db")
        for assignment in group:
            roots[assignment] = root
            for student in agreement_sample(assignment):
                shutil.copytree(graded_class / "submitted" / student / assignment,
                                root / "submitted" / student / assignment)
    folders = list(dict.fromkeys(roots.values()))  # in plain_runs' order: the largest class starts first
    with concurrent.futures.ThreadPoolExecutor(CORES if AGREEMENT else 1) as pool:
        printed = list(pool.map(functools.partial(_plain_nbgrader, timeout=3 * 3600 if AGREEMENT else 3600), folders))
    return roots, "\n".join(printed)


def class_members(assignment: str) -> list[tuple[str, str]]:
    """(student, what they submitted) for the whole class of an assignment."""
    return [("reference", "the reference solution"), ("blank", "the untouched release")] + [
        (f"wrong{n:02d}", w.name) for n, w in enumerate(catalogue(assignment))]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solution_gets_full_marks(graded_class, assignment):
    assert scores(graded_class, "reference", assignment) == graded_cells(assignment)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_blank_release_gets_zero_and_the_batch_goes_on(graded_class, assignment):
    root = graded_class
    assert scores(root, "blank", assignment) == {cell: 0.0 for cell in graded_cells(assignment)}
    assert "NotImplementedError" in feedback_text(root, "blank", assignment)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_plain_nbgrader_gives_the_reference_full_marks(plain_nbgrader_class, assignment):
    root = plain_nbgrader_class[0][assignment]
    graded = nbformat.read(root / "autograded" / "reference" / assignment / f"{assignment}.ipynb", as_version=4)
    errors = [(number, output.ename, output.evalue) for number, cell in enumerate(graded.cells)
              if cell.cell_type == "code" for output in cell.outputs if output.output_type == "error"]
    assert not errors, f"the reference solution raises in a kernel (cell, error, message): {errors}"
    assert scores(root, "reference", assignment) == graded_cells(assignment)


@pytest.mark.parametrize("assignment, student", [
    pytest.param(a, s, id=f"{a}:{what}") for a in ASSIGNMENTS for s, what in class_members(a)
    if s in agreement_sample(a)])
def test_class_grader_and_plain_nbgrader_agree(graded_class, plain_nbgrader_class, assignment, student):
    roots, printed = plain_nbgrader_class
    plain = roots[assignment]
    assert (plain / "autograded" / student / assignment).is_dir(), \
        f"nbgrader could not grade it:\n{nbgrader_error(printed, assignment, student)}"
    assert scores(graded_class, student, assignment) == scores(plain, student, assignment)


def nbgrader_error(printed: str, assignment: str, student: str) -> str:
    """What nbgrader printed before it gave up on this student's assignment (its traceback), without the warning
    every kernel prints as it starts, which otherwise fills the message."""
    lines = [line for line in printed.splitlines() if "Kernel is running over TCP without encryption" not in line]
    end = next((k for k, line in enumerate(lines)
                if f"error processing assignment '{assignment}' for student '{student}'" in line), len(lines) - 1)
    return "\n".join(lines[max(0, end - 60):end + 1])


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_catalogue_is_large_enough(assignment):
    assert len(catalogue(assignment)) >= 5, f"{assignment} needs at least 5 catalogued wrong answers"


@pytest.mark.parametrize("assignment, number, wrong", [
    pytest.param(a, n, w, id=f"{a}:{w.name}") for a in ASSIGNMENTS for n, w in enumerate(catalogue(a))
    if f"wrong{n:02d}" in pipeline_sample(a)])
def test_wrong_answer_loses_exactly_its_points(graded_class, assignment, number, wrong):
    root, student = graded_class, f"wrong{number:02d}"
    unknown = set(wrong.scores) - set(graded_cells(assignment))
    assert not unknown, f"catalogue entry {wrong.name!r} names unknown test cells {unknown}"
    expected = {**graded_cells(assignment), **{cell: float(score) for cell, score in wrong.scores.items()}}
    assert scores(root, student, assignment) == expected, wrong.name
    text = feedback_text(root, student, assignment)
    for phrase in wrong.feedback:
        assert " ".join(phrase.split()) in text, f"feedback for {wrong.name!r} lacks the diagnosis {phrase!r}"
