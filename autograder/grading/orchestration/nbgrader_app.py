"""nbgrader, driven in-process for one assignment: its configuration, sanitizing, Autograde, gradebook and feedback.

Everything here is nbgrader's own code, reached through its public API and configuration, so scores, gradebook
records, formgrader, ``nbgrader export`` and ``nbgrader generate_feedback`` are exactly nbgrader's. What differs:

* its sanitize and Execute steps are answered from the sandboxed run (:mod:`.replay`);
* one nbgrader bug is fixed (:class:`DropDuplicateIds`); ``tests/test_grader_core.py`` pins it so that an nbgrader
  upgrade that fixes or changes it fails loudly;
* some costs are paid once per run instead of once per use (:func:`_once_per_run`, pinned by the same tests): every
  gradebook session of the run shares one database engine (nbgrader opens a dozen sessions per submission, and each
  new engine compiles every SQL statement again), nbgrader's metadata schema is checked against JSON Schema's
  metaschema once, not for every cell of every notebook (the cells are validated against it as before), and one
  feedback converter serves every student of the run (:class:`_Feedback`), as one serves the whole class in
  ``nbgrader generate_feedback``, so its HTML template is compiled once.

Used from one thread only.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader import api
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import AutogradeApp
from nbgrader.converters import GenerateFeedback, NbGraderException
from nbgrader.preprocessors import DeduplicateIds

from . import replay

try:  # nbgrader 0.9 + SQLAlchemy 2 warn about their own session handling on every autograde
    import warnings

    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)
except ImportError:  # pragma: no cover
    pass


class DropDuplicateIds(DeduplicateIds):
    """nbgrader's DeduplicateIds, fixed: it empties the extra copies' metadata (``nbgrader: {}``), which nbgrader's own
    metadata validator then rejects as schema version 0, and SchemaTooOldError stops the whole ``nbgrader autograde``
    batch. This removes the key instead, so the copy becomes an ordinary cell, as DeduplicateIds intends."""

    def preprocess_cell(self, cell, resources, cell_index):
        from nbgrader import utils

        if not (utils.is_grade(cell) or utils.is_solution(cell) or utils.is_locked(cell)):
            return cell, resources
        grade_id = cell.metadata.nbgrader["grade_id"]
        if grade_id in self.grade_ids:
            self.log.warning("Cell with id '%s' exists multiple times!", grade_id)
            del cell.metadata["nbgrader"]
        else:
            self.grade_ids.add(grade_id)
        return cell, resources


def _fixed(preprocessors: list) -> list:
    return [DropDuplicateIds if p is DeduplicateIds else p for p in preprocessors]


class _SchemaCheckedOnce:
    """What nbgrader's metadata validator calls as ``jsonschema.validate``: jsonschema's own validation, with each
    schema checked against its metaschema once (``jsonschema.validate`` checks it on every call)."""

    def __init__(self, jsonschema):
        self.jsonschema = jsonschema
        self.validators: dict[str, object] = {}

    def validate(self, instance, schema) -> None:
        key = json.dumps(schema, sort_keys=True)
        validator = self.validators.get(key)
        if validator is None:
            cls = self.jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self.validators[key] = cls(schema)
        error = self.jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error

    def __getattr__(self, name: str):
        return getattr(self.jsonschema, name)


def _once_per_run() -> None:
    """One database engine per gradebook, one metaschema check per schema (see the module docstring)."""
    from nbgrader.nbgraderformat import common

    if not isinstance(api.create_engine, functools._lru_cache_wrapper):
        api.create_engine = functools.lru_cache(maxsize=None)(api.create_engine)
    if not isinstance(common.jsonschema, _SchemaCheckedOnce):
        common.jsonschema = _SchemaCheckedOnce(common.jsonschema)


class _Collect(logging.Handler):
    """Keeps the warnings and errors nbgrader logs while one submission is processed."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        # Formatted now: nbgrader logs gradebook rows as arguments ("%s is %s seconds late" for a late submission),
        # which cannot be printed once their database session has closed.
        self.records.append((record.levelno, record.getMessage()))

    def clear(self) -> None:
        self.records = []

    def take(self, level: int) -> list[str]:
        return [message for levelno, message in self.records if levelno == level]


class _Feedback(GenerateFeedback):
    """nbgrader's GenerateFeedback, started once per student: its first start makes the exporter, which every later
    start reuses (``BaseConverter.start`` without making a new one)."""

    kept = None

    def start(self) -> None:
        if self.kept is None:
            super().start()
            self.kept = self.exporter
            return
        self.init_notebooks()
        here = os.getcwd()
        os.chdir(self.coursedir.root)
        try:
            self.convert_notebooks()
        finally:
            os.chdir(here)


@dataclass(frozen=True)
class Recorded:
    """One submission as the gradebook records it after grading."""

    scores: dict[str, float]  # grade cell (all notebooks) -> points
    score: float  # their sum (nbgrader's), before the late penalty
    seconds_late: float  # extensions included
    penalty: float  # points the late policy takes off


class Nbgrader:
    """One assignment of an nbgrader course directory, opened the way ``nbgrader autograde`` opens it (config from the
    course root)."""

    def __init__(self, root: Path, assignment: str):
        _once_per_run()
        self.root = Path(root).resolve()
        self.assignment = assignment
        os.chdir(self.root)  # nbgrader reads nbgrader_config.py from the working directory
        # nbgrader runs `alembic` from PATH when it creates a gradebook: this interpreter's bin first.
        os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        self.app = AutogradeApp()
        self.app.initialize(["--log-level=WARN"])
        self.app.log.propagate = False
        self.coursedir = self.app.coursedir
        self.coursedir.assignment_id = assignment
        self.collector = _Collect()
        self.app.log.addHandler(self.collector)
        # Keep nbgrader's own console logging quiet: its warnings are collected and reported per submission.
        for handler in self.app.log.handlers:
            if handler is not self.collector:
                handler.setLevel(logging.CRITICAL)
        self.feedback_converter: _Feedback | None = None

    # -- places ---------------------------------------------------------------------------------------------------

    @property
    def db_url(self) -> str:
        return self.coursedir.db_url

    def path(self, kind: str, student: str) -> Path:
        directory = {"submitted": self.coursedir.submitted_directory, "autograded": self.coursedir.autograded_directory,
                     "feedback": self.coursedir.feedback_directory}[kind]
        return Path(self.coursedir.format_path(directory, student, self.assignment))

    def submitted_folder(self) -> Path:
        return Path(self.coursedir.format_path(self.coursedir.submitted_directory, ".", ".")).resolve()

    def release_folder(self) -> Path:
        return Path(self.coursedir.format_path(self.coursedir.release_directory, ".", self.assignment))

    def source_folder(self) -> Path:
        return Path(self.coursedir.format_path(self.coursedir.source_directory, ".", self.assignment))

    def source_notebooks(self) -> list[Path]:
        return sorted(self.source_folder().glob("*.ipynb"))

    def extra_files_folder(self) -> Path | None:
        """A copy of the source folder without notebooks (nbgrader copies those files next to each submission)."""
        extra = [p for p in self.source_folder().rglob("*") if p.is_file() and p.suffix != ".ipynb"
                 and ".ipynb_checkpoints" not in p.parts]
        if not extra:
            return None
        folder = Path(tempfile.mkdtemp(prefix="autograder-extra-"))
        for path in extra:
            target = folder / path.relative_to(self.source_folder())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        return folder

    # -- the gradebook --------------------------------------------------------------------------------------------

    def ensure_in_gradebook(self) -> bool:
        """Make sure the gradebook knows the assignment (its source cells, hidden tests included).

        ``make release`` generates the release in a scratch copy, so a fresh clone has no gradebook: generate the
        assignment into a temporary release folder (``exercises/`` is left alone). Returns True if it did.
        """
        try:
            with Gradebook(self.db_url, self.coursedir.course_id) as gradebook:
                assignment = gradebook.find_assignment(self.assignment)
                if assignment.notebooks and all(n.source_cells for n in assignment.notebooks):
                    return False
        except MissingEntry:
            pass
        with tempfile.TemporaryDirectory() as release:
            command = [sys.executable, "-m", "nbgrader", "generate_assignment", self.assignment, "--force",
                       "--log-level=WARN", f"--CourseDirectory.release_directory={release}"]
            done = subprocess.run(command, cwd=self.root, capture_output=True, text=True, env=dict(os.environ))
            if done.returncode != 0:
                raise RuntimeError(f"nbgrader generate_assignment {self.assignment} failed:\n{done.stderr[-3000:]}")
        return True

    def notebooks(self) -> dict[str, dict[str, float]]:
        """``{notebook: {grade cell: points}}``, the assignment's notebooks in nbgrader's order."""
        with Gradebook(self.db_url, self.coursedir.course_id) as gradebook:
            return {notebook.name: {cell.name: float(cell.max_score) for cell in notebook.grade_cells}
                    for notebook in gradebook.find_assignment(self.assignment).notebooks}

    def record_zero(self, student: str, reason: str) -> None:
        """What nbgrader does for a missing notebook: the submission exists and every grade is 0 (no manual review)."""
        with Gradebook(self.db_url, self.coursedir.course_id) as gradebook:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission(self.assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    grade.auto_score = 0
                    grade.manual_score = None
                    grade.needs_manual_grade = False
                for comment in notebook.comments:
                    comment.auto_comment = f"Not graded: {reason}"
            gradebook.db.commit()
        shutil.rmtree(self.path("autograded", student), ignore_errors=True)

    def recorded(self) -> dict[str, Recorded]:
        """Every submission of the assignment as the gradebook records it, by student: one session, two queries."""
        with Gradebook(self.db_url, self.coursedir.course_id) as gradebook:
            try:
                submissions = gradebook.find_assignment(self.assignment).submissions
            except MissingEntry:
                return {}
            rows = (gradebook.db.query(api.SubmittedAssignment.student_id, api.BaseCell.name, api.Grade.score)
                    .select_from(api.Grade).join(api.Grade.notebook).join(api.SubmittedNotebook.assignment)
                    .join(api.SubmittedAssignment.assignment).join(api.Grade.cell)
                    .filter(api.Assignment.name == self.assignment).all())
            scores: dict[str, dict[str, float]] = {}
            for student, cell, score in rows:
                scores.setdefault(student, {})[cell] = float(score)
            return {s.student_id: Recorded(scores.get(s.student_id, {}), float(s.score),
                                           float(s.total_seconds_late), float(s.late_submission_penalty or 0.0))
                    for s in submissions}

    # -- nbgrader's converters ------------------------------------------------------------------------------------

    def _converter(self, kind, student: str):
        self.coursedir.student_id = student
        converter = kind(coursedir=self.coursedir, parent=self.app)
        converter.force = True
        return converter

    def sanitizer(self):
        """``sanitize(path, notebook) -> (notebook, warnings)``: nbgrader's own sanitize preprocessors (as configured
        for Autograde), run in memory on one submitted notebook (``path`` names it; it is not read again)."""
        converter = self._converter(replay.ReplayAutograde, "*")
        exporter = NotebookExporter(parent=converter, config=converter.config)
        for preprocessor in _fixed(converter.sanitize_preprocessors):
            exporter.register_preprocessor(preprocessor)  # as nbgrader registers them
        self.coursedir.student_id = "*"

        def sanitize(path: Path, notebook):
            """(sanitized notebook, what nbgrader warned about while sanitizing it)"""
            self.collector.clear()
            resources = converter.init_single_notebook_resources(str(path))
            resources["metadata"] = {"name": path.stem, "path": str(path.parent)}
            output, _ = exporter.from_notebook_node(notebook, resources=resources)
            # as nbgrader's Autograde reads it back from the file its sanitize step wrote
            return nbformat.reads(output, as_version=4), self.collector.take(logging.WARNING)

        return sanitize

    def check_replay(self) -> None:
        """:class:`~.replay.ReplayNotInstalled` if this course's nbgrader configuration would execute notebooks itself
        (checked before anything runs)."""
        replay.install(self._converter(replay.ReplayAutograde, "*"), replay.Replays())
        self.coursedir.student_id = "*"

    def autograde(self, student: str, replays: replay.Replays) -> tuple[str | None, list[str]]:
        """nbgrader's Autograde for one student, answered from ``replays``: (error or None, warnings)."""
        converter = self._converter(replay.ReplayAutograde, student)
        replay.install(converter, replays)
        self.collector.clear()
        try:
            converter.start()
            error = None
        except NbGraderException as exc:
            error = "\n".join(self.collector.take(logging.ERROR)) or str(exc)
        except Exception as exc:  # reported as this submission's failure; the others go on
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self.coursedir.student_id = "*"
        return error, self.collector.take(logging.WARNING)

    def feedback(self, student: str) -> str | None:
        """nbgrader's GenerateFeedback for one student: None, or what went wrong."""
        if self.feedback_converter is None:
            self.feedback_converter = self._converter(_Feedback, student)
        converter, self.coursedir.student_id = self.feedback_converter, student
        self.collector.clear()
        try:
            converter.start()
            return None
        except Exception as exc:
            return "\n".join(self.collector.take(logging.ERROR)) or f"{type(exc).__name__}: {exc}"
        finally:
            self.coursedir.student_id = "*"
