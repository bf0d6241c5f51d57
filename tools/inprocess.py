"""Run a source notebook in this process with some answers in its solution cells: a quick stand-in for nbgrader (no
kernel, no gradebook), used by the seed sweep (``make sweep``), ``tools.sweep --quick`` while an exercise is being
written, tests/test_catalogue.py and tests/test_hidden_tests_over_seeds.py.

A test cell runs as check my work runs it (:func:`autograder.selfcheck.run_test_cell`), so the catalogue proves the
learner's own check gives the class grader's verdicts. It fails only when a check raised its GradingFailure; any
other exception out of a test cell (a CourseBug, a TypeError inside a check...) raises :class:`CheckCrashed`, since
a crashing check is a bug, not a verdict.
"""

from __future__ import annotations

import ast
import contextlib
import io
import symtable
from dataclasses import dataclass

import nbformat

from autograder import course
from tools.synthetic import grade_id


class CheckCrashed(AssertionError):
    """A test cell raised something other than the checks' GradingFailure: a bug in a check, not a rejection."""


@dataclass(frozen=True)
class CellResult:
    passed: bool
    message: str = ""  # the GradingFailure's text when it failed
    written: bool = True  # False: the part still raises NotImplementedError (the table says "not written")


def is_hidden_test(cell) -> bool:
    """A graded test cell whose checks draw their cases from the grading seed (nbgrader's hidden tests)."""
    return bool(cell.metadata.get("nbgrader", {}).get("grade")) and "### BEGIN HIDDEN TESTS" in cell.source


def run_cells(assignment: str, answers: dict[str, str], *, only_hidden: bool = False,
              tests: set[str] | None = None, scratch: bool = True) -> dict[str, CellResult]:
    """Every graded test cell's result, by grade id, with ``answers`` (grade id -> code) in the solution cells.

    ``only_hidden``: run what the hidden tests depend on and nothing else, the part of a notebook that changes with
    the seed: the nbgrader cells (imports, given code, solutions) and the hidden test cells; the visible tests and
    the learner's scratch and demo cells (no nbgrader metadata) draw nothing from the seed. ``tests``: of the graded
    test cells, run these only (the others are left out of the result). ``scratch=False``: leave out the learner's
    scratch and demo cells (no nbgrader metadata; nothing graded depends on them) and the given cells that only show
    something (they bind no name any other cell reads, such as exercise 09's plot of example traces).
    """
    import torch

    from autograder.course import TestCell
    from autograder.selfcheck import Status, run_test_cell

    namespace: dict = {"__name__": "__main__"}
    results: dict[str, CellResult] = {}
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    shows_only = set() if scratch else _display_cells(notebook, answers)
    # Each notebook starts as a fresh kernel does, recording on, whatever an earlier answer in this process left
    # behind (an answer may switch autograd off for good: the checks name that, it must not reach the next answer).
    with contextlib.redirect_stdout(io.StringIO()), torch.enable_grad():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code" or index in shows_only:
                continue
            meta = cell.metadata.get("nbgrader", {})
            if only_hidden and (not meta or (meta.get("grade") and not is_hidden_test(cell))):
                continue
            if tests is not None and meta.get("grade") and grade_id(cell) not in tests:
                continue
            if not scratch and not meta:
                continue
            if meta.get("grade") and not meta.get("solution"):  # a test cell, graded as check my work grades it
                verdict = run_test_cell(TestCell(grade_id(cell), "", 0.0, cell.source), namespace)
                if verdict.status is Status.ERROR:
                    raise CheckCrashed(f"{assignment}: test cell {grade_id(cell)} crashed with {verdict.message}")
                results[grade_id(cell)] = CellResult(verdict.status is Status.PASSED, verdict.message,
                                                     written=verdict.status is not Status.NOT_WRITTEN)
                continue
            source = answers.get(grade_id(cell), cell.source) if meta.get("solution") else cell.source
            try:
                exec(compile(source, f"<{grade_id(cell) or 'cell'}>", "exec"), namespace)
            except Exception:  # a wrong answer may break its own cell, exactly as in a kernel
                pass
    return results


def _display_cells(notebook, answers: dict[str, str]) -> set[int]:
    """Indices of the given cells (nbgrader cells, neither solution nor test) that bind no name another nbgrader
    cell reads, with ``answers`` in the solution cells, and import nothing: they show something and nothing graded
    depends on them."""
    cells = _named_cells(notebook, answers)
    if cells is None:
        return set()
    return {cell.index for cell in cells if cell.given and not cell.imports
            and not any(cell.binds & other.reads_when_run for other in cells if other is not cell)}


def run_in_process(assignment: str, answers: dict[str, str], *, only_hidden: bool = False,
                   tests: set[str] | None = None) -> dict[str, bool]:
    """Pass (True) or fail per graded test cell (see :func:`run_cells`)."""
    results = run_cells(assignment, answers, only_hidden=only_hidden, tests=tests)
    return {cell: result.passed for cell, result in results.items()}


def cells_below_first_answer(assignment: str, answers: dict[str, str]) -> set[str]:
    """The graded test cells below the first solution cell ``answers`` changes: every cell above it runs exactly the
    reference's code in the reference's order from the same seeds, so it gives the reference's result."""
    return _below_first_answer(nbformat.read(course.source_notebook(assignment), as_version=4), answers)


def _below_first_answer(notebook, answers: dict[str, str]) -> set[str]:
    changed, after = False, set()
    for cell in notebook.cells:  # the source notebook: each solution cell holds the reference's code
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and answers.get(grade_id(cell), cell.source) != cell.source:
            changed = True
        elif changed and meta.get("grade"):
            after.add(grade_id(cell))
    return after


#: Calls that reach the notebook's namespace by name: a cell using one may read any name, so nothing is skipped.
_DYNAMIC = {"globals", "locals", "vars", "eval", "exec", "__import__", "getattr", "setattr"}


def _definitions_only(tree: ast.Module) -> bool:
    """Running this cell binds names and does nothing else: imports, functions and classes, and assignments of names,
    with no call outside a function body (no decorator, default or class attribute that runs code)."""
    allowed = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign, ast.Pass, ast.Expr)

    def calls_outside_bodies(node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            return True
        if isinstance(node, ast.Lambda):  # its body runs when called
            return False
        if isinstance(node, ast.FunctionDef):  # the body runs when called; decorators and defaults run now
            parts = [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            return any(calls_outside_bodies(part) for part in parts)
        return any(calls_outside_bodies(child) for child in ast.iter_child_nodes(node))

    for statement in tree.body:
        if not isinstance(statement, allowed):
            return False
        if isinstance(statement, ast.Expr) and not isinstance(statement.value, ast.Constant):
            return False
        if isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                return False  # `x.attr = ...` or `d[k] = ...` changes an object other cells may hold
        if calls_outside_bodies(statement):
            return False
    return True


@dataclass(frozen=True)
class _NamedCell:
    """An nbgrader code cell as names: what it binds and reads, over every version of it (the reference's and, for a
    solution cell an answer changes, the answer's)."""

    index: int  # in the notebook
    grade_id: str | None
    test: bool  # a graded test cell
    given: bool  # neither a solution nor a test cell
    changed: bool  # a solution cell the answers change
    binds: frozenset[str]
    reads: frozenset[str]
    reads_when_run: frozenset[str]  # of the version that runs: the answer's, where it changes the cell
    imports: bool
    only_defines: bool  # the version that runs only binds names (:func:`_definitions_only`)


def _named_cells(notebook, answers: dict[str, str]) -> list[_NamedCell] | None:
    """Every nbgrader code cell as names, or None when a version does not parse or some cell reads names
    dynamically (``globals()``, ``eval``...): then no cell can be left out."""
    cells = []
    for index, cell in enumerate(notebook.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta:
            continue
        versions = [cell.source]
        changed = bool(meta.get("solution")) and answers.get(grade_id(cell), cell.source) != cell.source
        if changed:
            versions.append(answers[grade_id(cell)])
        try:
            trees = [ast.parse(source) for source in versions]
        except SyntaxError:
            return None
        each_reads = [frozenset(_used(source)) for source in versions]
        reads = frozenset().union(*each_reads)
        if reads & _DYNAMIC:
            return None
        cells.append(_NamedCell(
            index, grade_id(cell), test=bool(meta.get("grade")),
            given=not (meta.get("solution") or meta.get("grade")), changed=changed,
            binds=frozenset().union(*(_bound(tree) for tree in trees)), reads=reads, reads_when_run=each_reads[-1],
            imports=any(isinstance(n, ast.Import | ast.ImportFrom) for tree in trees for n in tree.body),
            only_defines=_definitions_only(trees[-1])))
    return cells


def _bound(tree: ast.Module) -> set[str]:
    """The names a cell binds at its top level."""
    names = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        else:
            names |= {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _used(source: str) -> set[str]:
    """Every notebook-level name a cell reads, also inside its functions' bodies (they read the notebook's names when
    called); a function's own locals are not the notebook's (Python's symbol tables tell them apart)."""
    names = set()
    tables = [symtable.symtable(source, "<cell>", "exec")]
    while tables:
        table = tables.pop()
        top = table.get_type() == symtable.SymbolTableType.MODULE if hasattr(symtable, "SymbolTableType") \
            else table.get_type() == "module"
        names |= {symbol.get_name() for symbol in table.get_symbols()
                  if symbol.is_referenced() and (top or symbol.is_global())}
        tables.extend(table.get_children())
    return names


def cells_reaching_answers(assignment: str, answers: dict[str, str]) -> set[str]:
    """The graded test cells whose result can depend on the solution cells ``answers`` changes: those below the
    first changed cell (:func:`cells_below_first_answer`) that reach a changed cell through the names they read.

    A test cell reads names; a name is bound by cells; those cells read names in turn. Where every changed cell only
    binds names (imports, functions, classes, plain assignments without calls: :func:`_definitions_only`), the answer
    reaches the rest of the notebook through those names only, so a test cell whose names never lead to a changed
    cell runs exactly the reference's code from its own seeds and gives the reference's result. Otherwise (a changed
    cell runs code when executed, or some cell reads names dynamically with ``globals()``, ``eval``...) every cell
    below is returned. What this still assumes, as :func:`cells_below_first_answer` does: a check draws its cases
    from its own seeds, not from state an earlier test cell left behind. ``make test-all`` runs every cell below the
    first changed one instead, so the nightly run proves this shortcut changed no verdict.
    """
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    below = _below_first_answer(notebook, answers)
    cells = _named_cells(notebook, answers)
    if cells is None or not all(cell.only_defines for cell in cells if cell.changed):
        return below
    reached = [cell for cell in cells if cell.changed]  # cells whose names lead to a changed cell, until none joins
    names = frozenset().union(*(cell.binds for cell in reached))
    grown = True
    while grown:
        joining = [cell for cell in cells if cell not in reached and cell.reads & names]
        reached += joining
        names = names.union(*(cell.binds for cell in joining))
        grown = bool(joining)
    if not all(cell.test or cell.only_defines for cell in reached):
        return below  # a given cell that runs code on what the answer defines: its effects are anyone's
    return below & {cell.grade_id for cell in reached if cell.test}
