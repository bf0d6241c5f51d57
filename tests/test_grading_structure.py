"""The package's shape: the grading package's three rooms import only downwards, each small enough to read, each
with a map, one name for one thing (issue 22); the whole package has no import circle, the checks import nothing
above them, and no check module is too long to read (issue 33).

Read from the source, nothing is run: ``orchestration`` may import ``worker`` and ``isolation``, ``worker`` only
``isolation``, ``isolation`` neither; each room holds at most :data:`MAX_LINES` lines of code (blank lines, comments
and docstrings do not count); each room's docstring names every module in it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from autograder import course

GRADING = course.ROOT / "autograder" / "grading"
ROOMS = ("isolation", "worker", "orchestration")  # from the ground up: each may import those before it
MAX_LINES = 1200


def modules(room: str) -> list[Path]:
    return sorted((GRADING / room).glob("*.py"))


def imported(path: Path) -> set[str]:
    """The absolute names of the modules ``path`` imports (relative imports resolved)."""
    package = ".".join(path.relative_to(course.ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if node.module:  # `from . import course` imports the module course, not what the package itself holds
                names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def room_of(name: str) -> str | None:
    parts = name.split(".")
    if parts[:2] == ["autograder", "grading"] and len(parts) > 2 and parts[2] in ROOMS:
        return parts[2]
    return None


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room):
    below = set(ROOMS[:ROOMS.index(room)]) | {room}
    wrong = {f"{path.name} imports {name}" for path in modules(room) for name in imported(path)
             if room_of(name) not in (None, *below) or name in ("autograder.grading", "autograder.lms")
             or name.startswith("autograder.lms.")}
    assert not wrong, sorted(wrong)


def lines_of_code(path: Path) -> int:
    """Lines that hold code: not blank, not only a comment, not part of a docstring."""
    text = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    code = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in skip:
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstrings)


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_is_small_enough_to_read(room):
    counts = {path.name: lines_of_code(path) for path in modules(room)}
    assert sum(counts.values()) <= MAX_LINES, f"{room}: {sum(counts.values())} lines of code {counts}"


def test_the_line_counter_counts_code_only(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""A docstring\n\nover lines."""\n\n# a comment\nx = (1,\n     2)  # code\n\n\n'
                      'def f():\n    """Doc."""\n    return x\n')
    assert lines_of_code(sample) == 4


@pytest.mark.parametrize("room", ROOMS)
def test_every_room_has_a_map_naming_its_modules(room):
    doc = ast.get_docstring(ast.parse((GRADING / room / "__init__.py").read_text())) or ""
    missing = [path.stem for path in modules(room) if path.stem != "__init__" and f":mod:`.{path.stem}`" not in doc]
    assert not missing, f"{room}/__init__.py's docstring does not name {missing}"


def _definitions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            yield node.attr


def test_run_and_course_name_one_thing_each():
    """"run" is one run of the grader (orchestration/run.py), "course" the course directory (the --course option):
    no class, function or attribute of the grading package takes either name."""
    found = {f"{path.relative_to(GRADING)}: {name}" for room in ROOMS for path in modules(room)
             for name in _definitions(path) if name.lower().strip("_") in ("run", "course")
             or name.startswith(("Run", "Course"))}
    assert not found, sorted(found)


def _strings(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_course_bugs_are_known_by_type_and_the_learner_event_is_defined_once():
    grading = [path for room in ROOMS for path in modules(room)]
    assert not [p.name for p in grading if "CourseBug" in _strings(p)], "a course bug is recognised by its name"
    definitions = [path for path in (course.ROOT / "autograder").rglob("*.py")
                   if any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "LEARNER_RETURNED"
                                                               for t in node.targets)
                          for node in ast.walk(ast.parse(path.read_text())))]
    assert [p.name for p in definitions] == ["checking.py"]


# ------------------------------------------------------------------------------------ the whole package (issue 33)

PACKAGE = course.ROOT / "autograder"
#: The most lines of code one check module may hold: an exercise whose checks outgrow it becomes a package by part.
MAX_CHECK_LINES = 800


def _module_name(path: Path) -> str:
    parts = path.relative_to(course.ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_imports() -> dict[str, set[str]]:
    """Every module of the package -> the package's modules it imports."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imported(path) if m in paths and m != name} for name, path in paths.items()}


def test_the_package_has_no_import_circle():
    graph = _package_imports()
    state: dict[str, int] = {}
    circles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                circles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, [*path, other])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, circles


def test_checks_import_nothing_above_them():
    """The checks use the checking core, oracles, data and references; never the grader or the LMS tools."""
    above = ("autograder.grading", "autograder.lms", "autograder.course", "autograder.release", "autograder.__main__")
    wrong = {f"{name} imports {other}" for name, others in _package_imports().items()
             if name.startswith("autograder.checks") for other in others if other.startswith(above)}
    assert not wrong, sorted(wrong)


def test_no_check_module_is_too_long_to_read():
    counts = {str(p.relative_to(PACKAGE)): lines_of_code(p) for p in (PACKAGE / "checks").rglob("*.py")}
    assert max(counts.values()) <= MAX_CHECK_LINES, {k: v for k, v in counts.items() if v > MAX_CHECK_LINES}
