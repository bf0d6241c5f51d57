"""The learner's own code, taken from their saved exercise notebook: lesson 11 trains with the ``attention_backward``
they wrote in exercise 04 (Part C), and on the scalar ``Value`` engine of exercise 02 (:func:`load_value`).

**Where a learner's copy lives** (the decision; :func:`candidates` lists them in this order):

1. ``<course>/exercises/NN-slug/NN-slug.ipynb``: ``make lab`` and Binder, where the learner works in the release
   itself. ``<course>`` is the copy of the course the kernel runs in (a lesson runs in ``<course>/lessons``) and the
   installed package's course (``autograder.course.ROOT``).
2. ``~/<course id>/NN-slug/NN-slug.ipynb``: a hub, whose Assignment List fetches into the course id's folder of the
   learner's home (``deploy/nbgrader_config.py`` sets ``Exchange.path_includes_course``; the course id is
   ``nbgrader_config.py``'s, :data:`.course.COURSE_ID`). An nbgitpuller clone of the course lands in the same folder.
3. ``~/NN-slug/NN-slug.ipynb``: where the Assignment List fetches with nbgrader's default settings.

Of the copies that exist, one whose cell defining the function holds an answer (not the release's stub) wins over one
that does not, and among those the most recently saved: on a hub the release baked into the course folder is blank
and the fetched copy is the learner's. **Never the reference answer:** no candidate is in ``solutions/``, and a
notebook holding nbgrader's solution markers (an instructor's source) is refused.

:func:`load_function` runs the notebook's imports cell and the cell defining the function, in a fresh namespace with
their printing silenced, then calls the function once on a small case (``trial``): it returns the function, or
``None`` and the reason (not found, not written yet, raises). :func:`load_cells` does the same for an object built
by several answer cells run in order in one namespace (exercise 02's ``Value``: the class, then the cells that add
its nonlinearities and its ``backward``).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from . import course

#: What nbgrader leaves in an answer cell of the release.
STUB = "raise NotImplementedError()"


class Loaded(NamedTuple):
    """The learner's function (``None`` when there is none to use), a sentence saying where it came from or why
    there is none, and the notebook it came from (``None`` when none was found)."""

    function: Callable | None
    reason: str
    path: Path | None


def candidates(assignment: str, *, roots: list[Path] | None = None, home: Path | None = None) -> list[Path]:
    """Where a learner's copy of ``assignment`` may be, in the module docstring's order (existing or not)."""
    if roots is None:
        here = Path.cwd()
        served = [folder for folder in (here, here.parent) if (folder / "exercises").is_dir()]
        roots = [*served[:1], course.ROOT]
    home = Path.home() if home is None else home
    paths = [course.release_notebook(assignment, root) for root in roots]
    paths += [home / course.COURSE_ID / assignment / f"{assignment}.ipynb", home / assignment / f"{assignment}.ipynb"]
    unique = []
    for path in paths:
        if path.resolve() not in [p.resolve() for p in unique]:
            unique.append(path)
    return unique


def _cells(path: Path) -> list[dict]:
    import nbformat

    return nbformat.read(path, as_version=4).cells


def _defining(cells: list[dict], name: str) -> dict | None:
    """The code cell that defines ``name``: nbgrader's answer cell of that id, else the last cell with its def."""
    code = [c for c in cells if c.cell_type == "code"]
    by_id = [c for c in code if c.metadata.get("nbgrader", {}).get("grade_id") == name]
    by_def = [c for c in code if re.search(rf"^def {re.escape(name)}\(", c.source, re.MULTILINE)]
    return (by_id or by_def or [None])[-1]


def _answered(path: Path, name: str) -> bool:
    try:
        cell = _defining(_cells(path), name)
    except Exception:  # nbformat raises many kinds for a file that is not a notebook
        return False
    return cell is not None and not cell.source.rstrip().endswith(STUB)


def find_notebook(assignment: str, name: str, **where) -> Path | None:
    """The learner's copy to take ``name`` from (see the module docstring), or None."""
    found = [path for path in candidates(assignment, **where) if path.is_file()]
    if not found:
        return None
    return max(found, key=lambda path: (_answered(path, name), path.stat().st_mtime))


def _run(source: str, namespace: dict, label: str) -> None:
    """Run one cell's source in ``namespace``, IPython's syntax (a ``%magic``) turned into Python first."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except ImportError:  # pragma: no cover - IPython is a dependency
        pass
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(source, label, "exec"), namespace)  # the learner's own code, in their kernel


def _error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def load_function(assignment: str, name: str, trial: Callable[[Callable], object] | None = None,
                  **where) -> Loaded:
    """``name`` as the learner defined it in their copy of ``assignment``, after one ``trial`` call; or None and
    why. ``where`` (``roots``, ``home``) overrides the places :func:`candidates` looks."""
    path = find_notebook(assignment, name, **where)
    if path is None:
        return _not_found(assignment, **where)
    return _build(path, assignment, [name], name, trial)


def _not_found(assignment: str, **where) -> Loaded:
    places = ", ".join(str(p) for p in candidates(assignment, **where))
    return Loaded(None, f"no saved copy of exercise {assignment} was found (looked at {places})", None)


def _build(path: Path, assignment: str, defining: list[str], name: str, trial: Callable | None) -> Loaded:
    """Run the imports cell of ``path`` and the cells defining each of ``defining`` (in that order) in one fresh
    namespace; then ``name`` from it after one ``trial`` call, or None and why."""
    try:
        cells = _cells(path)
    except Exception as error:  # nbformat raises many kinds for a file that is not a notebook
        return Loaded(None, f"{path} could not be read ({_error(error)})", path)
    if any("### BEGIN SOLUTION" in c.source for c in cells):
        return Loaded(None, f"{path} is an instructor's source notebook, not a learner's copy: it is not used", path)
    parts = []
    for key in defining:
        cell = _defining(cells, key)
        if cell is None:
            return Loaded(None, f"{path} has no cell defining {key}", path)
        parts.append((f"cell defining {key}", cell.source))
    imports = next((c for c in cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade_id")
                    == "imports"), next(c for c in cells if c.cell_type == "code"))
    namespace = {"__name__": f"learner_{assignment.replace('-', '_')}"}
    for part, source in (("imports cell", imports.source), *parts):
        try:
            _run(source, namespace, f"<{path.name}: {part}>")
        except (Exception, SystemExit) as error:  # a learner's cell may raise anything, exit() included
            return Loaded(None, f"the {part} of {path} raises {_error(error)}", path)
    built = namespace.get(name)
    if not callable(built):
        return Loaded(None, f"the cells of {path} do not define {name}", path)
    if trial is not None:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                trial(built)
        except NotImplementedError:
            return Loaded(None, f"{name} in {path} is not written yet (it raises NotImplementedError)", path)
        except Exception as error:
            return Loaded(None, f"{name} in {path} raises {_error(error)} on a small case", path)
    return Loaded(built, f"{name} from {path}", path)


def _attention_trial(attention_backward: Callable) -> None:
    """One call on a small case (2 queries, 3 keys, blocks of 2): the release's stub raises NotImplementedError."""
    import torch

    queries, keys = torch.ones(2, 2, dtype=torch.float64), torch.ones(3, 2, dtype=torch.float64)
    lse = torch.full((2,), math.log(3) + math.sqrt(2), dtype=torch.float64)   # every score is 2 / sqrt(2)
    attention_backward(queries, keys, keys.clone(), queries.clone(), lse, queries.clone(), causal=False, block=2)


def load_attention_backward(**where) -> Loaded:
    """The learner's exercise-04 ``attention_backward(Q, K, V, O, lse, dO, *, causal=False, block=64)``, or None
    and why (lesson 11, section 6)."""
    return load_function("04-layer-backward", "attention_backward", _attention_trial, **where)


def load_cells(assignment: str, cell_ids: list[str], name: str, trial: Callable[[object], object] | None = None,
               **where) -> Loaded:
    """``name`` as the learner's answer cells ``cell_ids`` of ``assignment`` build it together, run in that order in
    one namespace after the imports cell, after one ``trial`` call; or None and why. Of the copies found, one with
    more of those cells answered (no stub left in them) wins, then the most recently saved."""
    found = [path for path in candidates(assignment, **where) if path.is_file()]
    if not found:
        return _not_found(assignment, **where)

    def answered(path: Path) -> int:
        try:
            cells = _cells(path)
        except Exception:  # nbformat raises many kinds for a file that is not a notebook
            return -1
        return sum(cell is not None and STUB not in cell.source for cell in (_defining(cells, i) for i in cell_ids))

    path = max(found, key=lambda path: (answered(path), path.stat().st_mtime))
    return _build(path, assignment, cell_ids, name, trial)


def _value_trial(Value) -> None:
    """One small graph through every operation lesson 11's moons use, and its backward: a stub raises
    NotImplementedError."""
    a, b = Value(0.5), Value(-1.5)
    out = (1 - (a * b + 0.25).tanh() * 2).relu() * (1 / 3)
    out.backward()


def load_value(**where) -> Loaded:
    """The learner's exercise-02 ``Value`` class (its three answer cells: the class, the nonlinearities and
    ``backward``), or None and why (lesson 11, section 1). The ``function`` field holds the class."""
    return load_cells("02-computation-graph", ["Value", "nonlinearities", "backward"], "Value", _value_trial,
                      **where)
