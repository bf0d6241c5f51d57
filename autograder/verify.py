"""Claims a lesson makes, proven when its cells run.

Lessons keep the checks that *are* the lesson in view, and put the rest in verification cells whose input is
collapsed (cell metadata ``{"jupyter": {"source_hidden": true}}``)::

    claim("three backward calls leave x.grad = 18", x.grad.item() == 18)
    claim_close("1.1**96 is about 9412", 1.1**96, 9412, rtol=1e-3)

A false claim raises :class:`ClaimFailed`, which stops the notebook (and so fails the test that executes every
lesson). True claims fold into one line per cell: in a notebook, "✓ 5 claims in this cell hold", which opens on a
click to list them (one output, updated as each claim is proven); as plain text (a terminal, nbconvert's text
export) every claim is listed under that line. Outside IPython each claim prints its own ``✓`` line.
"""

from __future__ import annotations

import html
import math

from .misconceptions import LearnerFacing


class ClaimFailed(LearnerFacing, AssertionError):
    """A number the lesson's prose relies on is not what the prose says."""


def claim(statement: str, holds: bool) -> None:
    """Record ``✓ statement`` if ``holds``; otherwise raise ClaimFailed."""
    if not holds:
        raise ClaimFailed(f"The lesson claims: {statement}. Running it here says otherwise.")
    _proven(statement)


def claim_close(statement: str, value: float, expected: float, *, rtol: float = 1e-6, atol: float = 0.0) -> None:
    """``claim`` for a number: ``value`` is within ``rtol``·|expected| + ``atol`` of ``expected``."""
    value, expected = float(value), float(expected)
    if not math.isclose(value, expected, rel_tol=rtol, abs_tol=atol):
        raise ClaimFailed(f"The lesson claims: {statement}. Computed here: {value:.8g} (expected {expected:.8g}).")
    _proven(statement)


def bundle(statements: list[str]) -> dict[str, str]:
    """The one output of a cell's proven claims: a line that opens to the list (HTML), and the whole list as text."""
    count = f"{len(statements)} claims in this cell hold" if len(statements) != 1 else "1 claim in this cell holds"
    items = "".join(f"<li>{html.escape(s)}</li>" for s in statements)
    return {"text/plain": "\n".join([f"✓ {count}:", *(f"  ✓ {s}" for s in statements)]),
            "text/html": f'<details class="course-claims"><summary>✓ {count} (click for the list)</summary>'
                         f'<ul style="margin: 0.2em 0">{items}</ul></details>'}


class _CellClaims:
    """The claims proven so far in the cell being executed, and the display that shows them."""

    def __init__(self, cell: object):
        from IPython.display import DisplayHandle

        self.cell, self.statements, self.handle = cell, [], DisplayHandle()

    def add(self, statement: str) -> None:
        self.statements.append(statement)
        data = bundle(self.statements)
        if len(self.statements) == 1:
            self.handle.display(data, raw=True)
        else:
            self.handle.update(data, raw=True)


_current: _CellClaims | None = None


def _proven(statement: str) -> None:
    global _current
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        shell = None
    else:
        shell = get_ipython()
    if shell is None:
        print(f"✓ {statement}")
        return
    cell = (id(shell), shell.execution_count)  # one execution of one cell
    if _current is None or _current.cell != cell:
        _current = _CellClaims(cell)
    _current.add(statement)


def best_times(*runs, repeats: int = 5) -> list[float]:
    """For each function of ``runs``, the fastest of ``repeats`` calls in milliseconds. The functions take turns, so
    load on a shared machine slows them alike; a claim about the result should still be an order or a wide range."""
    import time

    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for run, bucket in zip(runs, times):
            start = time.perf_counter()
            run()
            bucket.append(time.perf_counter() - start)
    return [1000 * min(bucket) for bucket in times]


def claim_faster(statement: str, slow, fast, factor: float, *, measured: tuple[float, float] | None = None,
                 rounds: int = 3, repeats: int = 5) -> None:
    """Claim that ``slow()`` takes more than ``factor`` times as long as ``fast()``, timed by :func:`best_times`.

    A busy machine can hide a true ratio for a moment (another process takes the core during the fast runs), so a
    round that disagrees is timed again, up to ``rounds`` rounds in all (``measured``, the cell's own times in ms,
    counts as the first); the claim fails only when every round disagrees, and then says what each measured."""
    ratios = []
    for number in range(rounds):
        slow_ms, fast_ms = measured if number == 0 and measured else best_times(slow, fast, repeats=repeats)
        ratios.append(slow_ms / fast_ms)
        if slow_ms > factor * fast_ms:
            _proven(statement)
            return
    raise ClaimFailed(f"The lesson claims: {statement}. Timed here in {rounds} rounds, the ratio was "
                      + ", ".join(f"{ratio:.2f}x" for ratio in ratios) + f" (claimed: more than {factor:g}x).")
