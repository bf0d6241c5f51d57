"""Check my work: a learner grades their own answers as the class grader would, hidden tests included.

Every graded test cell of the exercise (visible and hidden, read from its nbgrader source) runs at a grading seed,
fresh each time unless one is given (to reproduce a run), and the result is one table: each part's points, ✓ or the
first failure's message (what the visible tests show: the evidence and the named concept), and the misconceptions
named. The hidden tests' code and the reference answers are never shown. The points are the class grader's: a test
cell scores its points when it runs without an error, 0 otherwise (:func:`run_test_cell` is also how the course's
own in-process runner grades the wrong-answer catalogue, so the catalogue proves the two agree).

Two ways in:

* in JupyterLab, the button at the end of every exercise (:func:`button`) runs the tests on what the notebook holds
  now, without saving;
* ``python -m autograder check exercises/NN-slug/NN-slug.ipynb`` (``make check``) runs a saved notebook in a fresh
  kernel, cell by cell in its order, the test cells replaced by the exercise's own, as nbgrader does.

Each run's result is kept in the learner's progress file (:mod:`autograder.progress`).
"""

from __future__ import annotations

import contextlib
import enum
import io
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import course, progress
from .checking import GradingFailure, NotWritten
from .course import TestCell, exercise_tests
from .misconceptions import CourseBug, collecting
from .seeding import SEED_VARIABLE

#: How much of a failure message the table shows (the first lines: the named concept and the evidence).
MESSAGE_LINES = 8


class Status(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # a check said no
    NOT_WRITTEN = "not written"  # the part's function still raises NotImplementedError
    ERROR = "error"  # something else went wrong in the cell (a course bug is reported as such)


@dataclass(frozen=True)
class Verdict:
    """What one test cell gave: its points, and what a learner reads about it."""

    grade_id: str
    part: str
    points: float
    status: Status
    message: str = ""
    misconceptions: tuple[str, ...] = ()

    @property
    def earned(self) -> float:
        return self.points if self.status is Status.PASSED else 0.0


@dataclass
class Report:
    """A check of one exercise at one grading seed."""

    assignment: str
    grading_seed: int
    verdicts: list[Verdict]
    seconds: float = 0.0
    when: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    hidden_included: bool = True  # False where the course's sources are kept from learners (a hub): visible only

    @property
    def earned(self) -> float:
        return sum(v.earned for v in self.verdicts)

    @property
    def points(self) -> float:
        return sum(v.points for v in self.verdicts)

    def parts(self) -> list[tuple[str, list[Verdict]]]:
        """The verdicts grouped by part, in the notebook's order."""
        found: dict[str, list[Verdict]] = {}
        for verdict in self.verdicts:
            found.setdefault(verdict.part, []).append(verdict)
        return list(found.items())

    def to_json(self) -> dict:
        return {"assignment": self.assignment, "grading_seed": self.grading_seed, "seconds": self.seconds,
                "when": self.when, "hidden_included": self.hidden_included,
                "verdicts": [{**asdict(v), "status": v.status.value} for v in self.verdicts]}

    @classmethod
    def from_json(cls, data: dict) -> Report:
        verdicts = [Verdict(**{**v, "status": Status(v["status"]), "misconceptions": tuple(v["misconceptions"])})
                    for v in data["verdicts"]]
        return cls(data["assignment"], int(data["grading_seed"]), verdicts, float(data["seconds"]), data["when"],
                   bool(data.get("hidden_included", True)))


# ------------------------------------------------------------------------------------------ running the tests

def assignment_of(path: Path) -> str:
    """The exercise a notebook file is (``NN-slug`` from its name), or a ValueError saying what is expected."""
    name = Path(path).stem
    if name not in course.assignments():
        raise ValueError(f"{path} is not one of the course's exercises: expected a notebook named like "
                         f"{course.assignments()[0]}.ipynb (one of {', '.join(course.assignments())})")
    return name


def fresh_seed() -> int:
    """A grading seed nobody chose: every check is a new draw of the hidden tests' cases."""
    return random.SystemRandom().randrange(1, 2**31)


@contextlib.contextmanager
def _grading_seed(seed: int):
    before = os.environ.get(SEED_VARIABLE)
    os.environ[SEED_VARIABLE] = str(seed)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SEED_VARIABLE, None)
        else:
            os.environ[SEED_VARIABLE] = before


def _raised_in_learner_code(error: BaseException, cell: TestCell) -> bool:
    """Whether ``error`` came from a call the test cell made (its last frame is not the cell's own code)."""
    frame = error.__traceback__
    while frame.tb_next is not None:
        frame = frame.tb_next
    return frame.tb_frame.f_code.co_filename != f"<{cell.grade_id}>"


def run_test_cell(cell: TestCell, namespace: dict) -> Verdict:
    """Run one test cell in ``namespace`` (the learner's) and say what it gave. Its printed lines are swallowed:
    the table says what passed. A GradingFailure fails the cell with its message; any other exception too (the class
    grader gives such a cell 0), with what it was."""
    __tracebackhide__ = True
    with collecting() as records, contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(compile(cell.source, f"<{cell.grade_id}>", "exec"), namespace)  # the course's own test cell
        except NotWritten as failure:
            return Verdict(cell.grade_id, cell.part, cell.points, Status.NOT_WRITTEN, str(failure))
        except GradingFailure as failure:
            named = tuple(dict.fromkeys(record["misconception"] for record in records))
            return Verdict(cell.grade_id, cell.part, cell.points, Status.FAILED, str(failure), named)
        except CourseBug as bug:
            return Verdict(cell.grade_id, cell.part, cell.points, Status.ERROR, str(bug))
        except NameError as error:
            if _raised_in_learner_code(error, cell):
                return Verdict(cell.grade_id, cell.part, cell.points, Status.ERROR, f"NameError: {error}")
            # The test cell itself lacks a name: this kernel has not run the notebook's first cells (its imports).
            return Verdict(cell.grade_id, cell.part, cell.points, Status.ERROR,
                           f"NameError: {error}. Run the notebook's cells from the top (Run → Run All Cells: the "
                           "first ones import what the tests use), then check again.")
        except Exception as error:  # whatever the learner's code raised: the cell fails
            return Verdict(cell.grade_id, cell.part, cell.points, Status.ERROR, f"{type(error).__name__}: {error}")
    return Verdict(cell.grade_id, cell.part, cell.points, Status.PASSED)


def check_namespace(assignment: str, namespace: dict, grading_seed: int | None = None) -> Report:
    """Every test cell of ``assignment`` on the learner's ``namespace`` (what their notebook holds now)."""
    seed = fresh_seed() if grading_seed is None else int(grading_seed)
    started = time.perf_counter()
    cells, hidden = exercise_tests(assignment)
    with _grading_seed(seed):
        verdicts = [run_test_cell(cell, namespace) for cell in cells]
    return Report(assignment, seed, verdicts, round(time.perf_counter() - started, 2), hidden_included=hidden)


# -------------------------------------------------------------------------------------------------- the table

_MARKS = {Status.PASSED: "✓", Status.FAILED: "✗", Status.NOT_WRITTEN: "–", Status.ERROR: "✗"}


def first_failure(verdicts: list[Verdict]) -> Verdict | None:
    return next((v for v in verdicts if v.status is not Status.PASSED), None)


def _short(message: str) -> str:
    lines = message.strip().splitlines()
    return "\n".join(lines[:MESSAGE_LINES]) + ("\n..." if len(lines) > MESSAGE_LINES else "")


def _scope(report: Report) -> str:
    return ("hidden tests included" if report.hidden_included else
            "visible tests only: this course's hidden tests stay with your instructor, whose grade adds them")


def as_text(report: Report) -> str:
    """The table as plain text (the command line, and a screen reader's view of the notebook's table)."""
    rows = [f"Check my work: {report.assignment}, grading seed {report.grading_seed} "
            f"({report.seconds:.1f} s). Score {report.earned:g} / {report.points:g}, {_scope(report)}."]
    for part, verdicts in report.parts():
        earned, points = sum(v.earned for v in verdicts), sum(v.points for v in verdicts)
        failure = first_failure(verdicts)
        named = sorted({name for v in verdicts for name in v.misconceptions})
        line = f"Part {part}: {earned:g} / {points:g}  "
        line += "✓ every test passes" if failure is None else f"{_MARKS[failure.status]} {failure.status.value}"
        rows.append(line + (f"  (misconceptions: {'; '.join(named)})" if named else ""))
        if failure is not None:
            rows.append("    " + _short(failure.message).replace("\n", "\n    "))
    if report.hidden_included:
        rows.append(f"Run again for a fresh draw of the hidden tests, or with seed {report.grading_seed} (the Seed box "
                    "in the notebook, --seed in a terminal) to see this one again.")
    return "\n".join(rows)


def as_html(report: Report) -> str:
    """The table for the notebook: a real table (headers, one row a part), states in words and symbols."""
    import html

    body = []
    for part, verdicts in report.parts():
        earned, points = sum(v.earned for v in verdicts), sum(v.points for v in verdicts)
        failure = first_failure(verdicts)
        named = sorted({name for v in verdicts for name in v.misconceptions})
        state = ("✓ every test passes" if failure is None else
                 f"{_MARKS[failure.status]} {failure.status.value}: <pre>{html.escape(_short(failure.message))}</pre>")
        body.append(f"<tr><th scope='row'>Part {html.escape(part)}</th><td>{earned:g} / {points:g}</td>"
                    f"<td style='text-align:left'>{state}</td><td style='text-align:left'>"
                    f"{html.escape('; '.join(named)) or '—'}</td></tr>")
    return (f"<table class='autograd-check'><caption>Check my work: {html.escape(report.assignment)}, score "
            f"{report.earned:g} / {report.points:g}, {html.escape(_scope(report))}, grading seed {report.grading_seed} "
            f"({report.seconds:.1f} s)</caption><thead><tr><th scope='col'>Part</th><th scope='col'>Points</th>"
            f"<th scope='col'>Result (first failure)</th><th scope='col'>Misconceptions named</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


# ------------------------------------------------------------------------------------------ in JupyterLab

def check_my_work(assignment: str, grading_seed: int | None = None) -> Report:
    """Check the notebook this kernel runs, now: every test of ``assignment``, hidden ones included; show the table
    and keep the result in the progress file."""
    from IPython import get_ipython
    from IPython.display import HTML, display

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("check_my_work runs inside a notebook's kernel; on a saved notebook use "
                           "`python -m autograder check NOTEBOOK`")
    report = check_namespace(assignment, shell.user_ns, grading_seed)
    progress.record(report)
    display(HTML(as_html(report)), metadata={"text/plain": as_text(report)})
    return report


def button(assignment: str) -> None:
    """The "Check my work" button at the end of an exercise: clicking it runs :func:`check_my_work` and shows the
    table under it. Running the notebook (Run All, nbgrader) never clicks it, so grading never pays for it."""
    import ipywidgets as widgets
    from IPython.display import display

    run = widgets.Button(description="Check my work", tooltip="Every test of this exercise, hidden ones included, at "
                         "a fresh grading seed", button_style="", icon="check")
    seed = widgets.IntText(value=0, description="Seed (0: fresh)", style={"description_width": "initial"})
    output = widgets.Output(layout={"border": "1px solid #767676"})
    status = widgets.HTML(value="", layout={"min_height": "1.5em"})
    status.add_class("autograd-live")  # announced by screen readers (aria-live set by the course's CSS hook)

    def clicked(_):
        status.value = "<span role='status'>Checking… (the hidden tests too: a few seconds)</span>"
        run.disabled = True
        output.clear_output()
        try:
            with output:
                report = check_my_work(assignment, seed.value or None)
            status.value = (f"<span role='status'>Done: {report.earned:g} of {report.points:g} points, grading seed "
                            f"{report.grading_seed}.</span>")
        finally:
            run.disabled = False

    run.on_click(clicked)
    box = widgets.VBox([widgets.HBox([run, seed]), status, output])
    box.add_class("autograd-check-my-work")
    bundle = box._repr_mimebundle_() or {}
    # Where no widget can be drawn (nbgrader's feedback page, an HTML export), a sentence instead of VBox(...):
    # as HTML, which wraps (a long line of plain text is a <pre> that scrolls sideways, out of a keyboard's reach).
    sentence = (f"Check my work: a button that grades {assignment}, hidden tests included. It works in JupyterLab; "
                "in a terminal, run python -m autograder check on the saved notebook.")
    bundle["text/plain"] = "[Check my work: a button that works in JupyterLab]"
    bundle["text/html"] = f"<p>{sentence}</p>"
    display(bundle, raw=True)


# ------------------------------------------------------------------------------------------- on a saved notebook

def check_file(path: Path, grading_seed: int | None = None, timeout: int = 600) -> Report:
    """Check a saved exercise notebook in a fresh kernel, as nbgrader grades it: its code cells in order, each graded
    test cell replaced by the exercise's own (hidden tests included; one the learner deleted comes back at the end),
    then the report read back from the kernel."""
    import nbformat

    assignment = assignment_of(path)
    seed = fresh_seed() if grading_seed is None else int(grading_seed)
    learner = nbformat.read(path, as_version=4)
    cells, hidden = exercise_tests(assignment)
    tests = [cell.grade_id for cell in cells]
    runner = nbformat.v4.new_notebook(metadata=learner.metadata)
    runner.cells.append(nbformat.v4.new_code_cell(
        "from autograder import selfcheck as _selfcheck\n"
        f"_selfcheck_cells = {{c.grade_id: c for c in _selfcheck.exercise_tests({assignment!r})[0]}}\n"
        "_selfcheck_verdicts = []"))
    seen = []
    for cell in learner.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code":
            continue
        if grade_id in tests:
            seen.append(grade_id)
            runner.cells.append(nbformat.v4.new_code_cell(_run_test_source(grade_id)))
        else:
            runner.cells.append(nbformat.v4.new_code_cell(cell.source))
    runner.cells += [nbformat.v4.new_code_cell(_run_test_source(g)) for g in tests if g not in seen]
    runner.cells.append(nbformat.v4.new_code_cell(
        "print('SELFCHECK ' + __import__('json').dumps([_selfcheck.verdict_json(v) for v in _selfcheck_verdicts]))"))
    started = time.perf_counter()
    course.run_notebook(runner, Path(path).resolve().parent, timeout=timeout, allow_errors=True,
                        **{SEED_VARIABLE: str(seed), "MPLBACKEND": "agg"})
    verdicts = sorted(_read_verdicts(runner), key=lambda v: tests.index(v.grade_id))
    return Report(assignment, seed, verdicts, round(time.perf_counter() - started, 2), hidden_included=hidden)


def _run_test_source(grade_id: str) -> str:
    return f"_selfcheck_verdicts.append(_selfcheck.run_test_cell(_selfcheck_cells[{grade_id!r}], globals()))"


def verdict_json(verdict: Verdict) -> dict:
    return {**asdict(verdict), "status": verdict.status.value}


def _read_verdicts(runner) -> list[Verdict]:
    for cell in reversed(runner.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            if output.get("output_type") == "stream" and text.startswith("SELFCHECK "):
                return [Verdict(**{**v, "status": Status(v["status"]), "misconceptions": tuple(v["misconceptions"])})
                        for v in json.loads(text.removeprefix("SELFCHECK "))]
    raise RuntimeError("the notebook's kernel stopped before the check could report")
