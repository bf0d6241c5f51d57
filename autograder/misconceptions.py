"""Named mistakes, how a check recognises them, and how a diagnosis reaches the learner and the class report.

A :class:`Misconception` is a definition: a name, the question a learner reads while working, and the explanation
(what the mistake is and what to do instead) that only graded feedback adds. Every one is created once, at import, in
the module of the checks that diagnose it (or in :mod:`autograder.checks.shared`, when several exercises diagnose it),
and is registered here (:data:`REGISTRY`; a name defined twice with different hints is an error), so that the whole
catalogue of names can be listed and tested. A check recognises one through a :class:`Symptom`: the value the
mistaken method would produce for this case (``FORWARD_DIFFERENCE.looks_like(value)``), a test on the answer
(``OFF_BY_ONE.when(predicate)``) or what the check observed of the learner's objects
(``ROUND_OFF.given(x.dtype == torch.float32)``). A case arms only the symptoms that the right answer does not show
(:func:`armed`): a mistake whose value equals the right answer's is never named.

One formatter, :meth:`Misconception.line`, writes the sentence a learner reads in a failing test: the mistake named,
and a question that points at the concept, never the code of a fix (the numbers of the case follow it)::

    Likely misconception: forward difference. Which points does your difference compare x with?

and :func:`publish` sends the same diagnosis as structured data (a display output of MIME type :data:`MIME`, with an
empty ``text/plain`` so that nobody sees it twice), which the class report reads
(:func:`autograder.grading.orchestration.report.misconceptions`) instead of parsing sentences, and which the graded
feedback turns into the explanation (:class:`autograder.feedback.ExplainMistakes`).
"""

from __future__ import annotations

import contextlib
import contextvars
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

#: The MIME type of a diagnosis in a test cell's outputs.
MIME = "application/vnd.autograd-course.diagnosis+json"

#: Every misconception the package defines, by name.
REGISTRY: dict[str, Misconception] = {}

#: The width a learner-facing message is wrapped to: nbgrader's Validate dialog (about 920 px of monospace text)
#: and a notebook's output area show it whole, without scrolling sideways.
MESSAGE_WIDTH = 80


def learner_lines(kind: str, message: str, width: int = MESSAGE_WIDTH) -> list[str]:
    """``kind: message`` as IPython shows it to a learner (:meth:`GradingFailure._render_traceback_`): wrapped to
    ``width`` (continuation lines indented under their line), with none of the course's own traceback frames."""
    lines: list[str] = []
    for line in f"{kind}: {message}".splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        lines += textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                               break_on_hyphens=False) or [""]
    return lines


class LearnerFacing:
    """An exception whose message is the whole story for a learner: IPython (a kernel, nbgrader's Validate, the class
    grader) shows the message wrapped, without traceback frames, which would point into the course's code."""

    def _render_traceback_(self) -> list[str]:
        return learner_lines(type(self).__name__, str(self))


class CourseBug(LearnerFacing, Exception):
    """The exercise itself is wrong (the oracles disagree, a case cannot be built): never the learner's fault.

    Not an ``AssertionError``: the class grader reports it as a course bug, and the suite fails on it.
    """

    def __init__(self, message: str):
        super().__init__(f"Course bug, not yours: {message} Please report it.")


class GradingFailure(LearnerFacing, AssertionError):
    """A learner's answer is wrong; the message says how, in the learner's words.

    ``suspects`` are misconceptions the numbers of this one case match (named only when two cases agree, see
    :func:`autograder.checking.check`); ``proven`` is a mistake the check observed directly (autograd ran where the
    part forbids it, an input changed), named whatever the numbers; ``raised`` is the exception the learner's code
    raised, when that is what failed (:func:`autograder.checking.call_learner`), for checks that diagnose by its type.
    """

    def __init__(self, message: str, *, suspects: tuple[Misconception, ...] = (),
                 proven: Misconception | None = None, raised: BaseException | None = None):
        super().__init__(message)
        self.message = message
        self.suspects = tuple(suspects)
        self.proven = proven
        self.raised = raised


@dataclass(frozen=True)
class Misconception:
    """A known mistake: its name (a short noun phrase, any punctuation); ``hint``, the explanation, what the mistake
    is and what to do instead (graded feedback and the class report: it may show the fix); ``question``, what a
    learner reads while working (a question that points at the concept, never the code of a fix; none: the name
    alone). Defined once, at module level; each case says how it recognises it with a symptom, ``looks_like(value)``
    or ``when(predicate)``.
    """

    name: str
    hint: str
    question: str = ""

    def __post_init__(self) -> None:
        known = REGISTRY.setdefault(self.name, self)
        if known.hint != self.hint:  # one name is one mistake course-wide: the report counts it by name
            raise ValueError(f"the misconception {self.name!r} is defined twice with different hints")

    def line(self) -> str:
        """The sentence a learner reads while working: the mistake named, and its question (never the fix)."""
        return f"Likely misconception: {self.name}." + (f" {self.question}" if self.question else "")

    def explanation(self) -> str:
        """What graded feedback adds under a failed test: the mistake and what to do instead."""
        return f"{self.name}: {self.hint}"

    def looks_like(self, value: Any, *, rtol: float = 1e-4, atol: float = 1e-7) -> Symptom:
        """Recognised when the answer is close to ``value``, what this mistake produces for the case."""
        return Symptom(self, value=value, rtol=rtol, atol=atol)

    def when(self, predicate: Callable[[torch.Tensor], bool]) -> Symptom:
        """Recognised when ``predicate(answer)`` holds (for mistakes that have no single value). Disarmed on a case
        where the right answer satisfies it too (:func:`armed`)."""
        return Symptom(self, predicate=predicate)

    def given(self, observed: bool) -> Symptom:
        """Recognised when the check ``observed`` this mistake in the learner's objects (which replica kept its own
        gradient, which dtype came in...), whatever the answer's value."""
        return Symptom(self, predicate=lambda _answer: observed, observed=True)


@dataclass(frozen=True)
class Symptom:
    """How one case recognises a misconception in an answer (a float64 tensor)."""

    misconception: Misconception
    value: Any = None
    predicate: Callable[[torch.Tensor], bool] | None = None
    rtol: float = 1e-4
    atol: float = 1e-7
    observed: bool = False

    def matches(self, received: torch.Tensor) -> bool:
        if self.predicate is not None:
            return bool(self.predicate(received))
        if self.value is None:
            return False
        value = torch.as_tensor(self.value, dtype=torch.float64)
        if value.shape != received.shape or not bool(torch.isfinite(received).all()):
            return False
        return bool(torch.all(torch.abs(received - value) <= self.atol + self.rtol * torch.abs(value)))

    def fits_right_answer(self, expected: torch.Tensor, rtol: float, atol: float) -> bool:
        """True when the right answer itself would show this symptom, or when the mistake's value lies within twice
        the check's own tolerance (``rtol``, ``atol``) of the right answer: a case where the mistake cannot be told
        from a correct answer computed a little differently. An observed symptom (:meth:`Misconception.given`)
        says nothing about values and always stays armed."""
        if self.observed:
            return False
        if self.matches(expected):
            return True
        if self.value is None:
            return False
        value = torch.as_tensor(self.value, dtype=torch.float64)
        return value.shape == expected.shape and bool(torch.all(torch.abs(value - expected)
                                                                <= 2 * (atol + rtol * torch.abs(expected))))


def armed(symptoms, expected: torch.Tensor, *, rtol: float, atol: float) -> list[Symptom]:
    """The symptoms a case may name: those whose mistake differs from the right answer by more than the check's
    tolerance, and whose value no symptom of another misconception shares. A value the right answer (or a second
    mistake) also produces would name a mistake by coincidence, whoever wrote it."""
    candidates = [s for s in symptoms if not s.fits_right_answer(expected, rtol, atol)]
    valued = {id(s): torch.as_tensor(s.value, dtype=torch.float64) for s in candidates if s.value is not None}

    def shared(symptom: Symptom) -> bool:
        value = valued.get(id(symptom))
        return value is not None and any(other.misconception != symptom.misconception and other.matches(value)
                                         for other in candidates if id(other) in valued)

    return [s for s in candidates if not shared(s)]


#: Where :func:`publish` sends diagnoses while :func:`collecting` (None: to the notebook).
_COLLECTED: contextvars.ContextVar[list[dict] | None] = contextvars.ContextVar("autograder_diagnoses", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[list[dict]]:
    """Diagnoses published inside the block, as records (check my work reads them instead of the notebook)."""
    records: list[dict] = []
    token = _COLLECTED.set(records)
    try:
        yield records
    finally:
        _COLLECTED.reset(token)


def publish(misconception: Misconception, *, check: str, cases: int, proven: bool) -> None:
    """Send a diagnosis to the notebook as structured data (nothing happens outside IPython), or to the records of
    :func:`collecting`."""
    record = {"misconception": misconception.name, "check": check, "cases": cases, "proven": proven}
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append(record)
        return
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    if get_ipython() is None:
        return
    display({MIME: record, "text/plain": ""}, raw=True)
