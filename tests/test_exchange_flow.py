"""The whole nbgrader exchange cycle of a class, with a temporary exchange, exactly as a hub runs it (deploy/).

The instructor generates and releases 01-chain-rule; three students fetch it into their own working folders, work
(one pastes the reference solution, one solves Part A only, one hands in the release untouched) and submit; the
instructor collects, autogrades, generates and releases feedback; each student fetches their own feedback.

Every step is a real ``nbgrader`` command in its own process, with HOME, the Jupyter/IPython/matplotlib/XDG
directories, TMPDIR, ``--Exchange.root``, the course directory and each student's working folder under tmp, and the
student's identity given by ``--CourseDirectory.student_id``. A ``sitecustomize`` audit hook in every Python process
(nbgrader and the kernels it starts) records each file it writes, creates, moves or removes: all must be under tmp.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from submissions import grade_id, graded_cells, solution_sources

from autograder import course

ASSIGNMENT = "01-chain-rule"
COURSE_ID = course.COURSE_ID
STUDENTS = ("correct", "partial", "blank")
PART_A = {"central_difference"}  # what the partial student solves: Part A, worth its two test cells

#: Installed in every Python process of the flow through PYTHONPATH: log every write outside /dev, per process.
AUDIT_HOOK = textwrap.dedent('''
    import os, sys
    _LOG = os.environ["FLOW_AUDIT_DIR"] + "/writes-%d.log" % os.getpid()
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    _PATH_EVENTS = {"os.mkdir": 0, "os.rename": 0, "os.replace": 0, "os.remove": 0, "os.rmdir": 0,
                    "os.symlink": 1, "os.link": 1, "os.truncate": 0, "os.chmod": 0, "os.chown": 0,
                    "os.utime": 0, "shutil.copyfile": 1, "shutil.copytree": 1, "shutil.move": 1,
                    "shutil.rmtree": 0, "sqlite3.connect": 0}
    _busy = []

    def _record(event, path):
        if isinstance(path, int) or path is None:
            return
        path = os.path.abspath(os.fsdecode(path))
        if path.startswith("/dev/") or path == ":memory:":
            return
        _busy.append(1)
        try:
            with open(_LOG, "a") as log:
                log.write("%s\\t%s\\n" % (event, path))
        finally:
            _busy.pop()

    def _hook(event, args):
        if _busy:
            return
        if event == "open":
            path, mode, flags = args
            if (mode and any(c in mode for c in "wax+")) or (mode is None and flags & _WRITE_FLAGS):
                _record(event, path)
        elif event in _PATH_EVENTS:
            _record(event, args[_PATH_EVENTS[event]])

    sys.addaudithook(_hook)
''')


# One worker runs the whole module under pytest-xdist, so the class goes through the cycle once.
pytestmark = [pytest.mark.xdist_group("exchange-flow"), pytest.mark.nightly(
    "nbgrader's exchange cycle with the course's configuration, which changes rarely; the term walk-through "
    "releases, submits and collects through the exchange in make test")]


class Flow:
    """Runs nbgrader as the instructor or as a student, with everything under one tmp root."""

    def __init__(self, root: Path):
        self.root = root
        self.exchange = root / "exchange"
        self.audit = root / "audit"
        self.course = course.copy_course(root / "instructor" / "course")
        for folder in (self.exchange, self.audit):
            folder.mkdir(parents=True)
        (self.audit / "sitecustomize.py").write_text(AUDIT_HOOK)
        self.log: list[str] = []

    def home(self, who: str) -> Path:
        return self.root / who / "home"

    def env(self, who: str) -> dict[str, str]:
        home = self.home(who)
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JUPYTER", "IPYTHON", "XDG_", "MPLCONFIG", "PYTHON", "NBGRADER", "TMP"))}
        env.update({
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            "HOME": str(home),
            "USER": who, "LOGNAME": who,
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
            "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),  # nbgrader's submit/list cache
            "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),  # kernel files
            "JUPYTER_PLATFORM_DIRS": "0",
            "IPYTHONDIR": str(home / ".ipython"),
            "MPLCONFIGDIR": str(home / ".config" / "matplotlib"),
            "MPLBACKEND": "agg",
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "TMPDIR": str(home / "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ next to the installed packages
            "PYTHONPATH": str(self.audit),
            "FLOW_AUDIT_DIR": str(self.audit),
            "OMP_NUM_THREADS": "1",
            "AUTOGRADER_SEED": "914",
        })
        return env

    def workdir(self, student: str) -> Path:
        folder = self.root / student / "work"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def nbgrader(self, who: str, *args: str, cwd: Path) -> subprocess.Popen:
        command = [sys.executable, "-m", "nbgrader", *args, f"--Exchange.root={self.exchange}"]
        self.log.append(f"[{who}] nbgrader {' '.join(args)}")
        return subprocess.Popen(command, cwd=cwd, env=self.env(who), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def instructor(self, *args: str) -> str:
        return self.wait([self.nbgrader("instructor", *args, cwd=self.course)])[0]

    def students(self, *args: str, identify: bool = True) -> dict[str, str]:
        """The same command for every student at once, each in their own working folder, as themselves."""
        extra = (f"--course={COURSE_ID}",)
        running = [self.nbgrader(s, *args, *extra, *((f"--CourseDirectory.student_id={s}",) if identify else ()),
                                 cwd=self.workdir(s)) for s in STUDENTS]
        return dict(zip(STUDENTS, self.wait(running)))

    @staticmethod
    def wait(running: list[subprocess.Popen]) -> list[str]:
        outputs = []
        for process in running:
            output, _ = process.communicate(timeout=600)
            assert process.returncode == 0, f"{' '.join(process.args[2:])} failed:\n{output[-4000:]}"
            outputs.append(output)
        return outputs

    def writes(self) -> list[tuple[str, str]]:
        return [tuple(line.split("\t", 1)) for log in sorted(self.audit.glob("writes-*.log"))
                for line in log.read_text().splitlines()]


def work(notebook: Path, student: str) -> None:
    """What each student does to the fetched notebook before submitting."""
    answers = solution_sources(ASSIGNMENT)
    if student == "partial":
        answers = {cell: code for cell, code in answers.items() if cell in PART_A}
    elif student == "blank":
        return
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    nbformat.write(nb, notebook)


@pytest.fixture(scope="module")
def flow(tmp_path_factory) -> Flow:
    """The whole cycle, run once; the tests below look at what it left behind."""
    flow = Flow(tmp_path_factory.mktemp("exchange-flow"))
    repository_state = {name: (course.ROOT / name).exists()
                        for name in ("gradebook.db", "submitted", "autograded", "feedback", ".exchange")}
    flow.repository_state = repository_state

    flow.instructor("generate_assignment", ASSIGNMENT, "--force")
    flow.instructor("release_assignment", ASSIGNMENT)
    flow.fetched = flow.students("fetch_assignment", ASSIGNMENT, identify=False)
    for student in STUDENTS:
        work(flow.workdir(student) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", student)
    flow.submitted = flow.students("submit", ASSIGNMENT)
    flow.collected = flow.instructor("collect", ASSIGNMENT)
    flow.instructor("autograde", ASSIGNMENT)
    flow.instructor("generate_feedback", ASSIGNMENT)
    flow.instructor("release_feedback", ASSIGNMENT)
    flow.feedback = flow.students("fetch_feedback", ASSIGNMENT)
    return flow


def scores(flow: Flow, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{flow.course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {grade.name: float(grade.score) for grade in submission.grades}


def test_every_student_fetches_the_release(flow):
    release = nbformat.read(course.release_notebook(ASSIGNMENT, flow.course), as_version=4)
    for student in STUDENTS:
        fetched = flow.workdir(student) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        assert fetched.exists(), f"{student} has no fetched notebook:\n{flow.fetched[student]}"
        original = nbformat.read(fetched, as_version=4) if student == "blank" else None
        if original is not None:
            assert [c.source for c in original.cells] == [c.source for c in release.cells]


def test_every_submission_reaches_the_exchange_and_is_collected(flow):
    inbound = sorted(p.name.split("+")[0] for p in (flow.exchange / COURSE_ID / "inbound").iterdir())
    assert inbound == sorted(STUDENTS)
    for student in STUDENTS:
        assert (flow.course / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists(), flow.collected


def test_correct_submission_gets_full_marks(flow):
    assert scores(flow, "correct") == graded_cells(ASSIGNMENT)


def test_partial_submission_gets_exactly_part_a(flow):
    expected = {cell: (points if cell.startswith("test_central_difference") else 0.0)
                for cell, points in graded_cells(ASSIGNMENT).items()}
    assert scores(flow, "partial") == expected
    assert 0 < sum(expected.values()) < sum(graded_cells(ASSIGNMENT).values())


def test_blank_submission_gets_zero(flow):
    assert scores(flow, "blank") == {cell: 0.0 for cell in graded_cells(ASSIGNMENT)}


def test_every_student_fetches_their_own_feedback(flow):
    total = sum(graded_cells(ASSIGNMENT).values())
    for student in STUDENTS:
        pages = list((flow.workdir(student) / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
        assert len(pages) == 1, f"{student} fetched {pages}:\n{flow.feedback[student]}"
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", pages[0].read_text()))
        score = sum(scores(flow, student).values())
        assert re.search(rf"Score: {score:g}(\.0)? / {total:g}(\.0)?", text), \
            f"{student}'s feedback shows another score"
    blank = next((flow.workdir("blank") / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")).read_text()
    assert "NotImplementedError" in blank


def test_nothing_is_written_outside_the_temporary_directories(flow):
    writes = flow.writes()
    assert writes, "the audit hook recorded nothing: it was not installed"
    root = str(flow.root.resolve()) + os.sep
    outside = sorted({(event, path) for event, path in writes
                      if not os.path.realpath(path).startswith(root) and not path.startswith(root)})
    assert not outside, "written outside tmp:\n" + "\n".join(f"{e} {p}" for e, p in outside[:40])
    # ... and the repository's own nbgrader state was neither created nor removed.
    assert {name: (course.ROOT / name).exists() for name in flow.repository_state} == flow.repository_state


def test_every_step_ran_as_the_right_person(flow):
    steps = "\n".join(flow.log)
    for student in STUDENTS:
        assert f"[{student}] nbgrader submit {ASSIGNMENT} --course={COURSE_ID} " \
               f"--CourseDirectory.student_id={student}" in steps
    assert json.dumps(flow.log)  # the log is what a failure message shows


def test_the_audit_hook_would_see_a_write_outside(tmp_path):
    """The guard above is only as good as the hook: a process of the flow writing elsewhere is recorded."""
    probe = Flow(tmp_path / "flow")
    outside_file, outside_dir = tmp_path / "outside.txt", tmp_path / "outside-dir"
    code = (f"open({str(outside_file)!r}, 'w').write('x'); import os, sqlite3; os.mkdir({str(outside_dir)!r}); "
            f"sqlite3.connect({str(tmp_path / 'outside.db')!r}).close()")
    subprocess.run([sys.executable, "-c", code], env=probe.env("probe"), check=True)
    recorded = {path for _, path in probe.writes()}
    assert {str(outside_file), str(outside_dir), str(tmp_path / "outside.db")} <= recorded
