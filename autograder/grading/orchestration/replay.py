"""nbgrader's Autograde with its sanitize and Execute steps answered from this run's sandboxed execution.

nbgrader's Autograde converter sanitizes a submission and writes it out, reads it back, then runs its autograde
preprocessors; the first of them, Execute, starts a Jupyter kernel. Here:

* :class:`ReplayAutograde` takes the notebook that the run already sanitized with nbgrader's own sanitize
  preprocessors (from the same file, read once) and runs the autograde preprocessors on it in memory: one pass, one
  write, the file it would have read back never read;
* :class:`ReplayExecute` (in place of nbgrader's Execute, through ``Autograde.autograde_preprocessors``) writes the
  outputs the sandboxed worker produced into the cells, exactly where nbclient would. It never executes anything:
  without an execution of the notebook it raises :class:`ReplayMissing`.

The run's state is a :class:`Replays` (one :class:`Replay` per (student, notebook)), which :class:`ReplayAutograde`
hands to the preprocessors in nbgrader's ``resources``. :func:`check_replaced` refuses a converter whose
configuration would still execute code (an ``Execute`` of its own, a kernel preprocessor), and
:meth:`Replays.unreplayed` names any notebook graded without its replay, so that a run that executes student code
outside the sandbox is impossible and visible in tests. Everything after Execute (IgnorePattern, LimitOutput,
SaveAutoGrades, AssignLatePenalties...) is nbgrader's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import nbformat
from nbconvert.preprocessors import ExecutePreprocessor
from nbgrader import utils
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute
from traitlets import Instance

from ..worker.protocol import Cell, Execution

#: The key of the run's :class:`Replays` in nbgrader's ``resources``.
RESOURCE = "autograder_replays"


class ReplayMissing(RuntimeError):
    """nbgrader asked for a notebook this run did not execute in the sandbox (a bug: nothing is run instead)."""


class ReplayNotInstalled(RuntimeError):
    """nbgrader's configuration would execute notebooks itself (a custom Execute or kernel preprocessor)."""


def is_instructor_cell(cell) -> bool:
    """A locked cell that nbgrader knows (after sanitizing): its source is the instructor's."""
    return bool(cell.cell_type == "code" and utils.is_locked(cell)
                and cell.metadata.get("nbgrader", {}).get("grade_id"))


def code_cells(notebook) -> list[Cell]:
    """What the kernel executes: every code cell, in order."""
    return [Cell(i, cell.source, is_instructor_cell(cell))
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]


def apply_outputs(notebook, execution: Execution) -> None:
    """Put executed outputs (by cell index) into ``notebook``'s code cells, as nbclient would."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        result = execution.cells.get(index)
        cell.execution_count = result.execution_count if result else None
        outputs = []
        for output in result.outputs if result else []:
            output = dict(output)
            if output["output_type"] == "execute_result":
                output.setdefault("execution_count", cell.execution_count)
            outputs.append(nbformat.from_dict(output))
        cell.outputs = outputs


@dataclass
class Replay:
    """One notebook of one student in this run."""

    sanitized: object  # the notebook as nbgrader's sanitize preprocessors left it
    execution: Execution | None = None  # what the sandboxed worker gave
    replayed: bool = False  # nbgrader's Execute was answered with it


class Replays(dict):
    """``{(student, notebook): Replay}`` for one run of the grader.

    One object for the whole run, shared, never copied: nbconvert deep-copies ``resources`` before preprocessing.
    """

    def __deepcopy__(self, memo) -> Replays:
        return self

    def take(self, resources, step: str) -> Replay:
        key = (resources["nbgrader"]["student"], resources["nbgrader"]["notebook"])
        replay = self.get(key)
        if replay is None or (step == "execute" and replay.execution is None):
            raise ReplayMissing(f"no sandboxed {step} of {key[0]}/{key[1]} in this run; nothing was executed")
        return replay

    def unreplayed(self, students) -> list[tuple[str, str]]:
        """The notebooks of ``students`` that nbgrader graded without their sandboxed execution."""
        return sorted(key for key, replay in self.items()
                      if key[0] in students and replay.execution is not None and not replay.replayed)


def _replays(resources) -> Replays:
    replays = resources.get(RESOURCE)
    if not isinstance(replays, Replays):
        raise ReplayMissing("nbgrader's resources carry no replays: the converter is not ReplayAutograde")
    return replays


class ReplayExecute(Execute):
    """nbgrader's Execute, answered with the outputs of the sandboxed execution; it never starts a kernel."""

    def preprocess(self, nb, resources, km=None):
        replay = _replays(resources).take(resources, "execute")
        apply_outputs(nb, replay.execution)
        replay.replayed = True
        return nb, resources


class ReplayAutograde(Autograde):
    """nbgrader's Autograde, carrying the run's :class:`Replays` in every notebook's ``resources`` and starting from
    the notebook the run sanitized."""

    replays = Instance(Replays, allow_none=True)

    def init_single_notebook_resources(self, notebook_filename: str) -> dict:
        resources = super().init_single_notebook_resources(notebook_filename)
        resources[RESOURCE] = self.replays
        return resources

    def convert_single_notebook(self, notebook_filename: str) -> None:
        """nbgrader's two passes over a submitted notebook (sanitize the file and write it; read that back, autograde
        it and write it) as one: the autograde preprocessors on the notebook this run sanitized with nbgrader's own
        sanitize preprocessors, written once, where nbgrader writes it."""
        resources = self.init_single_notebook_resources(notebook_filename)
        replay = _replays(resources).take(resources, "sanitize")
        resources["metadata"] = {"name": resources["unique_key"], "path": self._format_dest(
            resources["nbgrader"]["assignment"], resources["nbgrader"]["student"])}
        self._sanitizing = False
        self._init_preprocessors()
        # the notebook is validated once, after the last preprocessor (it entered valid: sanitized, with outputs in
        # nbformat's form), not after each of them
        self.exporter.optimistic_validation = True
        try:
            with utils.setenv(NBGRADER_EXECUTION="autograde"):
                output, resources = self.exporter.from_notebook_node(replay.sanitized, resources=resources)
        finally:
            self._sanitizing = True
        self.write_single_notebook(output, resources)


def _executes(preprocessor) -> bool:
    return isinstance(preprocessor, type) and issubclass(preprocessor, ExecutePreprocessor) \
        and preprocessor is not ReplayExecute


def install(converter: ReplayAutograde, replays: Replays) -> None:
    """Answer the converter's Execute step from the replays; :func:`check_replaced` then holds."""
    converter.replays = replays
    converter.autograde_preprocessors = [ReplayExecute if p is Execute else p
                                         for p in converter.autograde_preprocessors]
    check_replaced(converter)


def check_replaced(converter) -> None:
    """:class:`ReplayNotInstalled` unless the converter replays and cannot execute anything itself."""
    steps = list(converter.autograde_preprocessors)
    executing = [p for p in steps if _executes(p) or not isinstance(p, type)]
    if not isinstance(converter, ReplayAutograde) or converter.replays is None or executing \
            or steps.count(ReplayExecute) != 1:
        raise ReplayNotInstalled(
            "nbgrader would execute the submissions itself (outside the sandbox): its Autograde preprocessors are "
            f"{[getattr(p, '__name__', p) for p in converter.autograde_preprocessors]}; the grader needs nbgrader's "
            "Execute there (configure Autograde.autograde_preprocessors without another executor)")
