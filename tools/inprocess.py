"""Run a source notebook in this process with some answers in its solution cells: a quick stand-in for nbgrader (no
kernel, no gradebook), used by the seed sweep (``make sweep``), ``tools.sweep --quick`` while an exercise is being
written, tests/test_catalogue.py and tests/test_hidden_tests_over_seeds.py.

A test cell fails only when a check raised its GradingFailure; any other exception out of a test cell (a CourseBug,
a TypeError inside a check...) raises :class:`CheckCrashed`, since a crashing check is a bug, not a verdict.
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

    from autograder.checking import GradingFailure

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
            source = answers.get(grade_id(cell), cell.source) if meta.get("solution") else cell.source
            result = CellResult(True)
            try:
                exec(compile(source, f"<{grade_id(cell) or 'cell'}>", "exec"), namespace)
            except GradingFailure as failure:
                result = CellResult(False, str(failure))
            except Exception as error:  # a wrong answer may break its own cell, exactly as in a kernel
                if meta.get("grade"):
                    raise CheckCrashed(f"{assignment}: test cell {grade_id(cell)} crashed with "
                                       f"{type(error).__name__}: {error}") from error
                result = CellResult(False, f"{type(error).__name__}: {error}")
            if meta.get("grade"):
                results[grade_id(cell)] = result
    return results


def _display_cells(notebook, answers: dict[str, str]) -> set[int]:
    """Indices of the given cells (nbgrader cells, neither solution nor test) that bind no name another nbgrader
    cell reads, with ``answers`` in the solution cells, and import nothing: they show something and nothing graded
    depends on them."""
    trees = {}
    for index, cell in enumerate(notebook.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta:
            source = answers.get(grade_id(cell), cell.source) if meta.get("solution") else cell.source
            try:
                trees[index] = ast.parse(source)
            except SyntaxError:
                return set()
    if any(_used(tree) & _DYNAMIC for tree in trees.values()):
        return set()
    given = {i for i in trees if not (notebook.cells[i].metadata["nbgrader"].get("solution")
                                      or notebook.cells[i].metadata["nbgrader"].get("grade"))}
    return {i for i in given
            if not any(_bound(trees[i]) & _used(tree) for j, tree in trees.items() if j != i)
            and not any(isinstance(n, ast.Import | ast.ImportFrom) for n in trees[i].body)}


def run_in_process(assignment: str, answers: dict[str, str], *, only_hidden: bool = False,
                   tests: set[str] | None = None) -> dict[str, bool]:
    """Pass (True) or fail per graded test cell (see :func:`run_cells`)."""
    results = run_cells(assignment, answers, only_hidden=only_hidden, tests=tests)
    return {cell: result.passed for cell, result in results.items()}


def cells_below_first_answer(assignment: str, answers: dict[str, str]) -> set[str]:
    """The graded test cells below the first solution cell ``answers`` changes: every cell above it runs exactly the
    reference's code in the reference's order from the same seeds, so it gives the reference's result."""
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
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


def _used(tree: ast.Module) -> set[str]:
    """Every notebook-level name a cell reads, also inside its functions' bodies (they read the notebook's names when
    called); a function's own locals are not the notebook's (Python's symbol tables tell them apart)."""
    names = set()
    tables = [symtable.symtable(ast.unparse(tree), "<cell>", "exec")]
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
    below = cells_below_first_answer(assignment, answers)
    notebook = nbformat.read(course.source_notebook(assignment), as_version=4)
    cells = []  # (grade id or None, is a test cell, trees of every version: the reference's and the answer's)
    changed: set[int] = set()
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta:
            continue  # the learner's scratch and demo cells: not run by the catalogue (scratch=False)
        versions = [cell.source]
        if meta.get("solution") and answers.get(grade_id(cell), cell.source) != cell.source:
            versions.append(answers[grade_id(cell)])
            changed.add(len(cells))
        try:
            trees = [ast.parse(source) for source in versions]
        except SyntaxError:
            return below
        cells.append((grade_id(cell), bool(meta.get("grade")), trees))
    if not all(_definitions_only(cells[i][2][-1]) for i in changed):
        return below
    if any(_used(tree) & _DYNAMIC for _, _, trees in cells for tree in trees):
        return below
    reached = set(changed)  # cells whose names lead to a changed cell, found until nothing new joins
    names = set().union(*(_bound(tree) for i in changed for tree in cells[i][2]))
    grown = True
    while grown:
        grown = False
        for i, (_, _, trees) in enumerate(cells):
            if i not in reached and any(_used(tree) & names for tree in trees):
                reached.add(i)
                names |= set().union(*(_bound(tree) for tree in trees))
                grown = True
    if not all(cells[i][1] or _definitions_only(cells[i][2][-1]) for i in reached):
        return below  # a given cell that runs code on what the answer defines: its effects are anyone's
    return below & {cells[i][0] for i in reached if cells[i][1]}
