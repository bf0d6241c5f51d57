"""The course as HTML pages anyone can read, offline or with assistive technology (``make html``), and the same
accessibility for nbgrader's feedback pages.

Every page says its language, uses the course's stylesheet (text and code at AA contrast, links underlined:
``autograder/templates/autograd_lab/accessible.css``) and shows formulas as MathML, converted when the page is written
(:class:`MathToMathML`): a browser renders MathML itself and a screen reader reads it, with no script to load and no
tab stop per formula. Figures keep their text alternatives (:mod:`autograder.figures` shows them as HTML, which the
export keeps). :func:`export_course` writes every lesson, executed, and every exercise, as released, to ``html/``.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from . import course

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Where ``make html`` writes the pages (git-ignored).
OUTPUT = course.ROOT / "html"

_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?!\s)([^$\n]+?)(?<!\s)\$(?![\w$])", re.S)


def to_mathml(tex: str, display: bool) -> str:
    """``tex`` as MathML, or the TeX source in a code span when it cannot be converted (never lost)."""
    from latex2mathml.converter import convert

    try:
        return convert(tex.strip(), display="block" if display else "inline")
    except Exception:  # latex2mathml raises many kinds on TeX it does not know
        return f"<code>{html.escape(tex)}</code>"


def markdown_math_to_mathml(text: str) -> str:
    """Every ``$...$`` and ``$$...$$`` of Markdown ``text`` as MathML, code spans and blocks left as they are."""
    pieces = _CODE.split(text)
    for index in range(0, len(pieces), 2):  # the even pieces are outside code
        pieces[index] = _MATH.sub(lambda m: to_mathml(m.group(1) or m.group(2), display=m.group(1) is not None),
                                  pieces[index])
    return "".join(pieces)


class MathToMathML(Preprocessor):
    """Markdown cells' formulas as MathML (for the HTML exports and nbgrader's feedback)."""

    enabled = Bool(True, help="nbconvert runs a registered preprocessor only when it is enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown":
            cell.source = markdown_math_to_mathml(cell.source)
        return cell, resources


def exporter():
    """nbconvert's HTML exporter with the course's template (``autograd_lab``) and formulas as MathML."""
    from nbconvert import HTMLExporter

    export = HTMLExporter(template_name="autograd_lab", extra_template_basedirs=[str(TEMPLATES)])
    export.register_preprocessor(MathToMathML, enabled=True)
    return export


def export_notebook(notebook, target: Path) -> Path:
    body, _ = exporter().from_notebook_node(notebook, resources={"metadata": {"name": target.stem}})
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body)
    return target


def export_course(output: Path = OUTPUT, execute: bool = True) -> list[Path]:
    """Every lesson (executed first, unless not ``execute``) and every exercise (as released) as a page."""
    import nbformat

    written = []
    for lesson in course.lessons():
        notebook = nbformat.read(lesson, as_version=4)
        if execute:
            course.run_notebook(notebook, lesson.parent, timeout=600,
                                MPLBACKEND="module://matplotlib_inline.backend_inline")
        written.append(export_notebook(notebook, output / "lessons" / f"{lesson.stem}.html"))
    for assignment in course.assignments():
        notebook = nbformat.read(course.release_notebook(assignment), as_version=4)
        written.append(export_notebook(notebook, output / "exercises" / f"{assignment}.html"))
    return written


def feedback_template_dirs() -> list[str]:
    """Where nbgrader's GenerateFeedback finds the course's feedback page (``autograd_feedback``, nbgrader_config.py):
    the course's templates, then nbgrader's own (which the course's page extends)."""
    import nbgrader

    return [str(TEMPLATES), str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates")]
