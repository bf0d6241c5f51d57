"""The grader's core without a class to grade: the typed protocol, the replays that stand in for nbgrader's Execute,
the one nbgrader bug it fixes (pinned), the notes and the class report.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from nbconvert.preprocessors import ExecutePreprocessor
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import DeduplicateIds, Execute

from autograder.grading.orchestration import notes, replay, report
from autograder.grading.orchestration.nbgrader_app import DropDuplicateIds
from autograder.grading.orchestration.state import Outcome
from autograder.grading.worker import protocol
from autograder.grading.worker.protocol import Cell, CellResult, CellStatus, Execution, Stop, StopKind

# -------------------------------------------------------------------------------------------------------- protocol

MESSAGES = [
    protocol.Configure(warmup=[[Cell(0, "1", False)], [Cell(2, "x = 1", True), Cell(3, "y", False)]], memory_mb=512,
                       output_limit=1000, sandboxed=True),
    protocol.Start(job="ada/01#1", cells=[Cell(1, "print(1)", True)], workdir="/grading/job-1", timeout=60.0,
                   environment={"A": "1"}),
    protocol.Kill(job="ada/01#1"),
    protocol.Ready(seconds=1.5),
    protocol.Exited(job="ada/01#1", ending=protocol.Ending.SIGNALLED, code=9),
    protocol.Failed(reason="no torch"),
    protocol.CellDone(index=3, execution_count=2, outputs=[{"output_type": "stream", "name": "stdout",
                                                            "text": "hi\n"}], timed_out=True, truncated=False,
                      seconds=0.5, course_bug=True, diagnoses=["a | b .grad"]),
    protocol.AllDone(),
    protocol.SetupFailed(reason="OSError: no"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_survives_the_wire(message):
    allowed = protocol.PARENT_TO_SERVER + protocol.SERVER_TO_PARENT + protocol.CHILD_TO_PARENT
    assert protocol.decode(protocol.encode(message), allowed) == message


def _line(**fields) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize("line", [
    b"not json",
    b"[1, 2]",
    _line(type="Exited", job="x", ending="exited", code=0),  # a server's message, forged by a child
    _line(type="CellDone", index=0, execution_count=1, outputs=[], extra=1),
    _line(type="CellDone", index="0", execution_count=1, outputs=[]),
    _line(type="CellDone", index=0, execution_count=1, outputs=[{"output_type": "stream", "name": "stdout",
                                                                "text": 42}]),
    _line(type="CellDone", index=0, execution_count=1, outputs=[{"output_type": "error", "ename": "E",
                                                                "evalue": "v", "traceback": [1]}]),
    _line(type="CellDone", index=0, execution_count=1, outputs=[{"output_type": "execute_result", "data": {},
                                                                "metadata": {}, "execution_count": "1"}]),
    _line(type="CellDone", index=0, execution_count=1, outputs=[], timed_out="yes"),
    _line(type="SetupFailed", reason=["x"]),
    _line(type="CellDone", index=0, execution_count=1, outputs=[], course_bug="yes"),
    _line(type="CellDone", index=0, execution_count=1, outputs=[], diagnoses=[1]),
], ids=range(12))
def test_a_childs_malformed_messages_are_refused(line):
    with pytest.raises(protocol.ProtocolError):
        protocol.child_message(line)


# --------------------------------------------------------------------------------------------------------- replays

def _converter() -> replay.ReplayAutograde:
    return replay.ReplayAutograde(coursedir=CourseDirectory())


def test_a_parent_message_with_malformed_cells_is_refused():
    line = _line(type="Start", job="j", cells=[{"index": "0", "source": "x", "instructor": False}], workdir="/",
                 timeout=1.0, environment={})
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(line, protocol.PARENT_TO_SERVER)


def test_installed_replays_leave_nbgrader_nothing_to_execute():
    converter = _converter()
    assert Execute in converter.autograde_preprocessors  # nbgrader's own default, before install
    with pytest.raises(replay.ReplayNotInstalled):
        replay.check_replaced(converter)
    replay.install(converter, replay.Replays())
    steps = converter.autograde_preprocessors
    assert replay.ReplayExecute in steps and Execute not in steps


@pytest.mark.parametrize("executor", [Execute, ExecutePreprocessor, type("MyExecute", (Execute,), {})])
def test_a_configuration_that_would_execute_is_refused(executor):
    converter = _converter()
    converter.autograde_preprocessors = [executor, *converter.autograde_preprocessors[1:]]
    converter.replays = replay.Replays()
    if executor is Execute:
        replay.install(converter, converter.replays)  # nbgrader's own Execute is the one replaced
        return
    with pytest.raises(replay.ReplayNotInstalled):
        replay.install(converter, converter.replays)


def _resources(replays, student="ada", notebook="01"):
    return {"nbgrader": {"student": student, "notebook": notebook}, replay.RESOURCE: replays}


def test_execute_never_runs_a_notebook_it_has_no_replay_for():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    replays = replay.Replays({("ada", "01"): replay.Replay(notebook)})
    step = replay.ReplayExecute()
    with pytest.raises(replay.ReplayMissing):
        step.preprocess(notebook, _resources(replays))  # sanitized, never executed
    with pytest.raises(replay.ReplayMissing):
        step.preprocess(notebook, _resources(replays, student="bo"))
    with pytest.raises(replay.ReplayMissing):
        step.preprocess(notebook, {"nbgrader": {"student": "ada", "notebook": "01"}})  # not ReplayAutograde
    assert replays.unreplayed({"ada"}) == []


def test_replays_record_what_nbgrader_replayed_and_survive_nbconvert_copies():
    import copy

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    done = Execution({0: CellResult(1, [{"output_type": "stream", "name": "stdout", "text": "1\n"}])})
    replays = replay.Replays({("ada", "01"): replay.Replay(notebook, done)})
    assert replays.unreplayed({"ada"}) == [("ada", "01")]
    resources = copy.deepcopy(_resources(replays))  # nbconvert copies resources before preprocessing
    executed, _ = replay.ReplayExecute().preprocess(copy.deepcopy(notebook), resources)
    assert executed.cells[0].outputs[0].text == "1\n" and executed.cells[0].execution_count == 1
    assert replays.unreplayed({"ada"}) == []


# ---------------------------------------------------------------------------------------- nbgrader behaviour pinned

def _duplicated() -> nbformat.NotebookNode:
    meta = {"grade": True, "grade_id": "test_a", "locked": True, "points": 1, "schema_version": 3,
            "solution": False, "task": False, "cell_type": "code"}
    cells = [nbformat.v4.new_code_cell("pass", metadata={"nbgrader": dict(meta)}) for _ in range(2)]
    return nbformat.v4.new_notebook(cells=cells)


def test_nbgraders_deduplicate_ids_still_leaves_metadata_its_validator_rejects():
    """If this fails, nbgrader changed DeduplicateIds: check whether DropDuplicateIds is still needed."""
    notebook, _ = DeduplicateIds().preprocess(_duplicated(), {})  # it keeps the last copy
    assert notebook.cells[0].metadata["nbgrader"] == {}
    fixed, _ = DropDuplicateIds().preprocess(_duplicated(), {})
    assert "nbgrader" not in fixed.cells[0].metadata and fixed.cells[1].metadata["nbgrader"]["grade_id"] == "test_a"


def test_one_engine_per_gradebook_and_one_metaschema_check_per_schema(tmp_path, monkeypatch):
    """If this fails, nbgrader changed how it opens its database or validates its metadata: check _once_per_run."""
    import os
    import sys

    import jsonschema
    from nbgrader.api import Gradebook
    from nbgrader.nbgraderformat import MetadataValidator, ValidationError

    from autograder.grading.orchestration import nbgrader_app

    nbgrader_app._once_per_run()
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as first, Gradebook(url) as second:
        assert first.engine is second.engine
    with Gradebook(url) as third:
        third.add_student("ada")
        assert [s.id for s in third.students] == ["ada"]
    meta = {"grade": True, "grade_id": "t", "locked": True, "points": "two", "schema_version": 3, "solution": False,
            "task": False}
    cell = nbformat.v4.new_code_cell("", metadata={"nbgrader": meta})
    with pytest.raises(ValidationError) as ours:
        MetadataValidator().validate_cell(cell)
    with pytest.raises(jsonschema.ValidationError) as theirs:
        jsonschema.validate(meta, MetadataValidator().schema)
    assert str(ours.value) == str(theirs.value)
    from nbgrader.nbgraderformat import common

    assert isinstance(common.jsonschema, nbgrader_app._SchemaCheckedOnce) and common.jsonschema.validators


# ------------------------------------------------------------------------------------------------ notes and report

def _notebook(count: int):
    cells = [nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": f"c{i}"}}) for i in range(count)]
    return nbformat.v4.new_notebook(cells=cells)


def _error(name: str, value: str) -> dict:
    return {"output_type": "error", "ename": name, "evalue": value, "traceback": []}


def test_notes_come_from_statuses_not_from_words():
    done = Execution({0: CellResult(1, [_error("ValueError", "mine")]),
                      1: CellResult(2, [_error("CellTimeoutError", "x")], CellStatus.TIMED_OUT),
                      2: CellResult(3, [], truncated=True),
                      3: CellResult(None, [_error("DeadKernelError", "x")], CellStatus.STOPPED),
                      4: CellResult(None, [_error("DeadKernelError", "Not run")], CellStatus.NOT_RUN)},
                     Stop(StopKind.SIGNAL, "the process was killed by SIGABRT"))
    found = notes.execution(_notebook(5), done, 8, {1, 2, 3, 4})
    assert found == ["cell 0 (c0) raised ValueError: mine", "cell 1 (c1) timed out after 8 s",
                     "cell 2 (c2) printed too much; its output was cut",
                     "cell 3 (c3): the process was killed by SIGABRT"]
    # an error a learner raised under the name of a grader error is only an error
    forged = Execution({0: CellResult(1, [_error("CellTimeoutError", "fake")])})
    assert notes.execution(_notebook(1), forged, 8, set()) == ["cell 0 (c0) raised CellTimeoutError: fake"]


def test_course_bugs_are_known_by_type_in_instructor_cells_only():
    bug = _error("CourseBug", "Course bug, not yours: the oracles disagree.")
    done = Execution({0: CellResult(1, [bug], course_bug=True),
                      1: CellResult(2, [_error("CourseBug", "a class of the learner's, by that name")]),
                      2: CellResult(3, [_error("ValueError", "a learner cell")], course_bug=True)})
    assert notes.course_bugs(_notebook(3), done, {0, 1}) == [
        "cell 0 (c0): Course bug, not yours: the oracles disagree."]


def test_diagnoses_come_from_the_failing_test_cells_of_the_run():
    notebook = _notebook(4)
    for cell in notebook.cells[:3]:
        cell.metadata["nbgrader"]["grade"] = True
    done = Execution({0: CellResult(1, [_error("GradingFailure", "x")], diagnoses=["sign error"]),
                      1: CellResult(2, [], diagnoses=["published, but the test passed"]),
                      2: CellResult(3, [_error("GradingFailure", "y")]),
                      3: CellResult(4, [_error("GradingFailure", "z")], diagnoses=["not a test cell"])})
    assert report.misconceptions(notebook, done) == {"c0": {"sign error"}}


def test_the_class_report_escapes_names_and_says_what_matters(tmp_path):
    outcomes = {"ada": Outcome(score=0, max_score=2), "bo": Outcome(score=2, max_score=2)}
    name = "a | b .grad (torch.no_grad())"
    path = report.class_report(tmp_path, "01", outcomes, {"ada": {"t": 0.0}, "bo": {"t": 2.0}}, {"t": 2.0},
                               {"ada": {"t": {name}}}, sandboxed=False,
                               course_bugs={"ada": ["cell 5 (t): Course bug, not yours: x."]})
    text = path.read_text()
    assert "| a \\| b .grad (torch.no_grad()) | 1 | `t` |" in text
    assert "Graded without the sandbox" in text
    assert "**ada**: cell 5 (t): Course bug, not yours: x." in text


def test_the_grade_command_refuses_a_configuration_that_would_execute_outside_the_sandbox(tmp_path):
    import subprocess
    import sys

    from autograder import course

    root = course.copy_course(tmp_path / "course", assignment_ids=["01-chain-rule"])
    course.generate_release(root, ["01-chain-rule"])
    with (root / "nbgrader_config.py").open("a") as config:
        config.write("\nfrom nbgrader.preprocessors import Execute\n"
                     "class MyExecute(Execute):\n    pass\n"
                     "c.Autograde.autograde_preprocessors = [MyExecute]\n")
    (root / "submitted" / "ada" / "01-chain-rule").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", "01-chain-rule", "--course", str(root),
                           "--quiet", "--no-sandbox"], cwd=root, env=course.tool_environment(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 2 and "would execute the submissions itself" in done.stderr, done.stderr
    assert not (root / "autograded").exists()


def test_a_check_package_is_restored_whole_while_its_checks_run():
    """The checks of the graded exercise are restored every time learner code returns, also when they are a package
    (exercise 11's parts): only other exercises' check modules wait for the next instructor cell."""
    from autograder.grading.worker.server import other_exercises

    loaded = ["autograder.checks.ex01_chain_rule", "autograder.checks.ex11_capstone",
              "autograder.checks.ex11_capstone.digits", "autograder.checks.ex11_capstone.misconceptions",
              "autograder.checks.cases", "autograder.checking", "torch"]
    assert other_exercises(loaded, ("autograder.checks.ex11_capstone",)) == {"autograder.checks.ex01_chain_rule"}
    assert other_exercises(loaded, ("autograder.checks.ex01_chain_rule",)) == {
        "autograder.checks.ex11_capstone", "autograder.checks.ex11_capstone.digits",
        "autograder.checks.ex11_capstone.misconceptions"}
