"""Hints that nudge, one at a time: a question first, then a check value or a smaller case, then the approach in
words; never a line of the answer.

Each exercise's checks hold a :class:`HintBook` of its parts, and its notebook asks for them::

    checks.hint("A")      # the first hint of Part A: always open
    checks.hint("A", 2)   # the next ones open once Part A's test has failed in this notebook

A hint beyond the first opens only after one of the part's checks has failed in this kernel
(:func:`autograder.checking.has_failed`): a learner tries first, reads the evidence the test shows, and only then
gets a smaller step. Until then the book says to run the test first. The texts are Markdown (a formula in ``$...$``);
a test reads every one against the reference answer of its part (tests/test_hints.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .checking import has_failed


@dataclass(frozen=True)
class PartHints:
    """The hints of one part: ``texts`` in the order they open, ``checks`` the names of the part's check functions
    (a failure of one opens the hints after the first), ``cells`` the grade ids of the part's solution cells (what
    the hints must never give away)."""

    texts: tuple[str, ...]
    checks: tuple[str, ...]
    cells: tuple[str, ...]


class HintBook:
    """An exercise's hints by part letter; calling it shows one."""

    def __init__(self, parts: dict[str, PartHints]):
        self.parts = dict(parts)

    def text(self, part: str, number: int = 1) -> str:
        """Hint ``number`` of ``part`` if it is open, else what to do first (a ValueError names a wrong part or
        number)."""
        if part not in self.parts:
            raise ValueError(f"no part {part!r}: the parts with hints are {', '.join(sorted(self.parts))}")
        hints = self.parts[part]
        if not 1 <= number <= len(hints.texts):
            raise ValueError(f"Part {part} has hints 1 to {len(hints.texts)}")
        if number > 1 and not any(has_failed(name) for name in hints.checks):
            return (f"Hint {number} of Part {part} opens once Part {part}'s test has failed in this notebook: run the "
                    "test cell under your answer first, and read what it shows. Hint 1 is open now.")
        more = f" (hint {number + 1}: `checks.hint(\"{part}\", {number + 1})`)" if number < len(hints.texts) else ""
        return f"**Hint {number} of {len(hints.texts)}, Part {part}**{more}\n\n{hints.texts[number - 1]}"

    def __call__(self, part: str, number: int = 1) -> None:
        """Show hint ``number`` of ``part`` (as Markdown in a notebook, as text elsewhere)."""
        text = self.text(part, number)
        try:
            from IPython import get_ipython
            from IPython.display import Markdown, display
        except ImportError:  # pragma: no cover - IPython is a dependency
            print(text)
            return
        if get_ipython() is None:
            print(text)
        else:
            display(Markdown(text))
