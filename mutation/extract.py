"""An exercise's reference solution as an importable module, and its graded test cells.

The module is the notebook's solution cells (by grade id, in notebook order) after the locked set-up they need: every
locked cell made only of imports, and every locked cell that defines a name the solution or test cells use (exercise
09's ``letter_of``). Only the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is the learner's to
write, so every other line gets mutmut's ``# pragma: no mutate``: the scaffold (signatures, docstrings, a given
``__init__``) is the same for every learner and is not what the checks judge.
"""

from __future__ import annotations

import ast
import builtins
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import course

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
NO_MUTATE = "# pragma: no mutate"
#: The word test cells use for the grading seed; a cell that never mentions it runs once, the others at every seed.
SEED_CALL = "grading_seed()"


@dataclass(frozen=True)
class TestCell:
    grade_id: str
    source: str
    points: float

    @property
    def uses_seed(self) -> bool:
        return SEED_CALL in self.source


@dataclass(frozen=True)
class Exercise:
    assignment: str          # "01-chain-rule"
    module: str              # "ex01_chain_rule"
    source: str              # the module, with pragmas outside the solution regions
    plain: str               # the same module without them
    editable: frozenset[int]  # its lines (1-based) inside a solution region
    cells: dict[str, str]    # solution grade id -> the cell's code (as in the notebook)
    tests: list[TestCell]


def module_name(assignment: str) -> str:
    """``01-chain-rule`` -> ``ex01_chain_rule`` (the name of its check module too)."""
    return "ex" + assignment.replace("-", "_")


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _defined_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _used_names(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _only_imports(source: str) -> bool:
    body = ast.parse(source).body
    return bool(body) and all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body)


def _set_up_cells(code_cells: list, needed: set[str]) -> set[int]:
    """Indices of the locked, ungraded cells the module needs (imports, and definitions of names in ``needed``)."""
    locked = {i: c.source for i, c in enumerate(code_cells)
              if _nbgrader(c).get("locked") and not _nbgrader(c).get("grade") and not _nbgrader(c).get("solution")}
    chosen = {i for i, source in locked.items() if _only_imports(source)}
    provided = set().union(*(_defined_names(locked[i]) for i in chosen)) if chosen else set()
    missing = needed - provided - set(dir(builtins))
    while missing:
        found = {i for i, source in locked.items() if i not in chosen and _defined_names(source) & missing}
        if not found:
            break
        chosen |= found
        for i in found:
            provided |= _defined_names(locked[i])
            needed |= _used_names(locked[i])
        missing = needed - provided - set(dir(builtins))
    return chosen


def protect_scaffold(source: str, editable: set[int] | frozenset[int]) -> str:
    """Append the no-mutate pragma to every code line (1-based) not in ``editable`` that can carry a comment."""
    lines = source.splitlines(keepends=True)
    ends: dict[int, int] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.NEWLINE, tokenize.NL) and token.start[0] not in editable:
            ends[token.start[0]] = token.start[1]
    for row, col in ends.items():
        line = lines[row - 1]
        if line.strip() and not line.lstrip().startswith("#"):
            lines[row - 1] = line[:col] + ("  " if line[:col].strip() else "") + NO_MUTATE + line[col:]
    return "".join(lines)


def exercise(assignment: str, root: Path = course.ROOT) -> Exercise:
    """Read solutions/NN-slug/NN-slug.ipynb into an :class:`Exercise`."""
    notebook = nbformat.read(course.source_notebook(assignment, root), as_version=4)
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    solution = {_nbgrader(c)["grade_id"]: c.source for c in code_cells if _nbgrader(c).get("solution")}
    tests = [TestCell(_nbgrader(c)["grade_id"], c.source, float(_nbgrader(c).get("points", 0)))
             for c in code_cells if _nbgrader(c).get("grade") and not _nbgrader(c).get("solution")]
    needed = set().union(*(_used_names(s) for s in [*solution.values(), *(t.source for t in tests)]))
    set_up = _set_up_cells(code_cells, needed)
    chunks = [c.source for i, c in enumerate(code_cells) if i in set_up or _nbgrader(c).get("solution")]
    source = "\n\n\n".join(chunk.strip("\n") for chunk in chunks) + "\n"
    editable, inside = set(), False
    for number, line in enumerate(source.splitlines(), start=1):
        if line.strip() == END:
            inside = False
        if inside:
            editable.add(number)
        if line.strip() == BEGIN:
            inside = True
    return Exercise(assignment, module_name(assignment), protect_scaffold(source, editable), source,
                    frozenset(editable), solution, tests)
