"""Claims a lesson makes, proven when its cells run, in one friendly line each.

Lessons keep the checks that *are* the lesson in view, and put the rest in verification cells whose input is
collapsed (cell metadata ``{"jupyter": {"source_hidden": true}}``)::

    claim("three backward calls leave x.grad = 18", x.grad.item() == 18)
    claim_close("1.1**96 is about 9412", 1.1**96, 9412, rtol=1e-3)

A true claim prints ``✓ three backward calls leave x.grad = 18``; a false one raises :class:`ClaimFailed`, which
stops the notebook (and so fails the test that executes every lesson).
"""

from __future__ import annotations

import math


class ClaimFailed(AssertionError):
    """A number the lesson's prose relies on is not what the prose says."""


def claim(statement: str, holds: bool) -> None:
    """Print ``✓ statement`` if ``holds``; otherwise raise ClaimFailed."""
    if not holds:
        raise ClaimFailed(f"The lesson claims: {statement}. Running it here says otherwise.")
    print(f"✓ {statement}")


def claim_close(statement: str, value: float, expected: float, *, rtol: float = 1e-6, atol: float = 0.0) -> None:
    """``claim`` for a number: ``value`` is within ``rtol``·|expected| + ``atol`` of ``expected``."""
    value, expected = float(value), float(expected)
    if not math.isclose(value, expected, rel_tol=rtol, abs_tol=atol):
        raise ClaimFailed(f"The lesson claims: {statement}. Computed here: {value:.8g} (expected {expected:.8g}).")
    print(f"✓ {statement}")
