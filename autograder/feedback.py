"""Graded feedback explains what the tests named.

While a learner works, a failing test shows the evidence and names a likely misconception with a question
(:meth:`autograder.misconceptions.Misconception.line`); what the mistake is and what to do instead waits for the
graded feedback. :class:`ExplainMistakes`, one of nbgrader's GenerateFeedback preprocessors (``nbgrader_config.py``),
turns each diagnosis a test cell published (its structured output, :data:`autograder.misconceptions.MIME`) into that
explanation, shown under the cell's output. It runs where feedback is generated (the instructor's side), so the
explanation never reaches a notebook a learner works in.
"""

from __future__ import annotations

import html
import importlib
import pkgutil

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from .misconceptions import MIME, REGISTRY, Misconception


def known(name: object) -> Misconception | None:
    """The course's misconception called ``name`` (every exercise's checks loaded), or None: a diagnosis is read from
    a submission's outputs, so only names the course defines are trusted."""
    import autograder.checks

    for module in pkgutil.walk_packages(autograder.checks.__path__, "autograder.checks."):
        importlib.import_module(module.name)
    return REGISTRY.get(name) if isinstance(name, str) else None


def explanation_html(misconception: Misconception) -> str:
    """The explanation as it appears in the feedback: a labelled note, readable without colour."""
    return (f'<div class="autograd-explanation" role="note"><p><strong>About this mistake</strong> '
            f'({html.escape(misconception.name)}): {html.escape(misconception.hint)}</p></div>')


class ExplainMistakes(Preprocessor):
    """Gives every published diagnosis in a graded notebook its explanation (``text/html`` and ``text/plain``)."""

    enabled = Bool(True, help="nbconvert runs a registered preprocessor only when it is enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            record = data.get(MIME)
            misconception = known(record.get("misconception")) if isinstance(record, dict) else None
            if misconception is not None:
                data["text/html"] = explanation_html(misconception)
                data["text/plain"] = f"About this mistake ({misconception.explanation()})"
        return cell, resources
