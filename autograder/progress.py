"""A learner's progress across the course, kept where it outlives a notebook: each exercise's last check (its parts'
points, the misconceptions named) and which lessons were run to the end, in one small file in the learner's home
(:func:`store`), never in the course folder.

:func:`show` draws it in ``progress.ipynb`` (a grid of parts by state and a table with links, states in words and
symbols, not only colour); ``python -m autograder progress`` prints it. On Binder, where a session's files are gone
when it ends, every notebook's first output says so (:func:`announce_binder`), and the map offers the learner's work
as one zip to download and to restore into a fresh session (:func:`archive`, :func:`plan_restore`): only the course's
own exercise notebooks and progress file are taken back, and nothing is overwritten without asking.
"""

from __future__ import annotations

import enum
import io
import json
import os
import re
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import course

#: The progress file's name, in the course's folder of the learner's data home.
FILE_NAME = "progress.json"
#: What a restore takes: at most this many bytes a file, and in all.
MAX_FILE_BYTES = 20 * 2**20
MAX_ARCHIVE_BYTES = 100 * 2**20
#: Where a download's zip is written, inside the course folder (git-ignored), for the server to hand out.
DOWNLOADS = "downloads"


def store() -> Path:
    """The progress file: ``$XDG_DATA_HOME/autograd-course/progress.json`` (``~/.local/share/...`` by default)."""
    home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(home) / course.COURSE_ID / FILE_NAME


def load() -> dict:
    """The progress so far: ``{"exercises": {assignment: report}, "lessons": {lesson: when}}`` (empty when none)."""
    try:
        data = json.loads(store().read_text())
    except (OSError, ValueError):
        return {"exercises": {}, "lessons": {}}
    return {"exercises": dict(data.get("exercises", {})), "lessons": dict(data.get("lessons", {}))}


def _save(data: dict) -> None:
    path = store()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True))
    partial.replace(path)


def record(report) -> None:
    """Keep a check's result (:class:`autograder.selfcheck.Report`) as the exercise's last one."""
    data = load()
    data["exercises"][report.assignment] = report.to_json()
    _save(data)


def finished_lesson(lesson: str) -> None:
    """Note that ``lesson`` (``NN-slug``) was run to its end (its last cell calls this)."""
    data = load()
    data["lessons"][lesson] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    _save(data)
    print(f"Lesson {lesson} is marked as read to the end on your progress map (progress.ipynb).")


# ------------------------------------------------------------------------------------------------------ the map

class PartState(enum.Enum):
    """A part's state at the exercise's last check; the value is what the map says."""

    PASSED = "passes"
    FAILING = "fails"
    NOT_WRITTEN = "not written"
    NOT_CHECKED = "not checked"


#: How the map draws each state: a symbol, and colours whose contrast passes WCAG AA (the symbol and the word carry
#: the meaning; the colour repeats it).
STYLE = {PartState.PASSED: ("✓", "#ffffff", "#1a6334"), PartState.FAILING: ("✗", "#ffffff", "#a4161a"),
         PartState.NOT_WRITTEN: ("–", "#1b1b1b", "#d9d9d9"), PartState.NOT_CHECKED: ("·", "#1b1b1b", "#ffffff")}


@dataclass(frozen=True)
class PartRow:
    assignment: str
    part: str
    state: PartState
    earned: float
    points: float


def part_states(assignment: str, data: dict | None = None) -> list[PartRow]:
    """Every part of ``assignment`` with its state at the last check (:data:`PartState.NOT_CHECKED` if none)."""
    data = load() if data is None else data
    verdicts = data["exercises"].get(assignment, {}).get("verdicts", [])
    points: dict[str, float] = {}
    for cell in course.exercise_tests(assignment)[0]:
        points[cell.part] = points.get(cell.part, 0.0) + cell.points
    rows = []
    for part, total in points.items():
        mine = [v for v in verdicts if v["part"] == part]
        statuses = {v["status"] for v in mine}
        if not mine:
            state = PartState.NOT_CHECKED
        elif statuses == {"passed"}:
            state = PartState.PASSED
        elif statuses == {"not written"}:
            state = PartState.NOT_WRITTEN
        else:
            state = PartState.FAILING
        earned = sum(float(v["points"]) for v in mine if v["status"] == "passed")
        rows.append(PartRow(assignment, part, state, earned, total))
    return rows


def as_text(data: dict | None = None) -> str:
    """The map in words (the command line)."""
    data = load() if data is None else data
    lines = [f"Progress ({store()}):"]
    for assignment in course.assignments():
        rows = part_states(assignment, data)
        checked = data["exercises"].get(assignment)
        score = (f"{sum(r.earned for r in rows):g} / {sum(r.points for r in rows):g} at the last check"
                 if checked else "not checked yet")
        lesson = "lesson run to the end" if assignment in data["lessons"] else "lesson not finished"
        lines.append(f"{assignment}: {score}; {lesson}")
        lines.append("    " + "  ".join(f"{r.part} {STYLE[r.state][0]} {r.state.value}" for r in rows))
        named = sorted({m for v in (checked or {}).get("verdicts", []) for m in v["misconceptions"]})
        if named:
            lines.append(f"    misconceptions named: {'; '.join(named)}")
    return "\n".join(lines)


def as_html(data: dict | None = None) -> str:
    """The grid (exercises by parts, coloured by state, with symbols and words) and the table with links."""
    import html

    data = load() if data is None else data
    widest = max(len(part_states(a, data)) for a in course.assignments())
    grid, table = [], []
    for assignment in course.assignments():
        rows = part_states(assignment, data)
        cells = []
        for row in rows:
            symbol, ink, paper = STYLE[row.state]
            cells.append(f"<td style='background:{paper};color:{ink};text-align:center;border:1px solid #767676' "
                         f"title='Part {row.part}: {row.state.value}'>{html.escape(row.part)} {symbol}"
                         f"<span class='autograd-sr'> {row.state.value}</span></td>")
        cells += ["<td></td>"] * (widest - len(rows))
        link = f"<a href='exercises/{assignment}/{assignment}.ipynb'>{assignment}</a>"
        grid.append(f"<tr><th scope='row'>{link}</th>{''.join(cells)}</tr>")
        checked = data["exercises"].get(assignment)
        score = f"{sum(r.earned for r in rows):g} / {sum(r.points for r in rows):g}" if checked else "—"
        when = html.escape(checked["when"][:16].replace("T", " ")) if checked else "not checked yet"
        named = sorted({m for v in (checked or {}).get("verdicts", []) for m in v["misconceptions"]})
        lesson = (f"<a href='lessons/{assignment}.ipynb'>run to the end ✓</a>" if assignment in data["lessons"]
                  else f"<a href='lessons/{assignment}.ipynb'>not finished</a>")
        table.append(f"<tr><th scope='row'>{link}</th><td>{score}</td><td>{when}</td>"
                     f"<td>{html.escape('; '.join(named)) or '—'}</td><td>{lesson}</td></tr>")
    legend = " · ".join(f"{symbol} {state.value}" for state, (symbol, _, _) in STYLE.items())
    return (f"<style>.autograd-sr{{position:absolute;left:-9999px}}</style>"
            f"<table class='autograd-grid'><caption>Parts of every exercise at its last check ({legend})</caption>"
            f"<tbody>{''.join(grid)}</tbody></table>"
            f"<table class='autograd-progress'><caption>Exercises and lessons</caption><thead><tr>"
            f"<th scope='col'>Exercise</th><th scope='col'>Score (hidden tests included)</th>"
            f"<th scope='col'>Last checked</th><th scope='col'>Misconceptions named</th><th scope='col'>Lesson</th>"
            f"</tr></thead><tbody>{''.join(table)}</tbody></table>")


# ------------------------------------------------------------------------------------------------------- Binder

def on_binder() -> bool:
    """Whether this server is a Binder session (mybinder.org and BinderHub set these)."""
    return any(os.environ.get(name) for name in ("BINDER_LAUNCH_HOST", "BINDER_REQUEST", "BINDER_SERVICE_HOST"))


BINDER_NOTICE = ("On Binder, everything you write here is lost when the session ends (after about 10 idle minutes, "
                 "a few hours at most). Keep it: open progress.ipynb and press Download my work; Restore my work "
                 "brings it back into a new session.")
_announced = False


def announce_binder() -> None:
    """On Binder, once per kernel, the one-line notice above (importing the course package calls this)."""
    global _announced
    if _announced or not on_binder():
        return
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    if get_ipython() is None:
        return
    _announced = True
    display(HTML(f"<p role='alert' style='border:2px solid #8a5a00;padding:4px'><strong>⚠ Binder:</strong> "
                 f"{BINDER_NOTICE}</p>"), metadata={"text/plain": BINDER_NOTICE})


def _work(root: Path) -> dict[str, Path]:
    """The files that are the learner's work: exercise notebooks by their name in the archive."""
    return {f"exercises/{a}/{a}.ipynb": course.release_notebook(a, root) for a in course.assignments(root)
            if course.release_notebook(a, root).exists()}


def archive(root: Path = course.ROOT) -> bytes:
    """The learner's work as one zip: every exercise notebook and the progress file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, path in _work(root).items():
            zipped.write(path, name)
        zipped.writestr(FILE_NAME, json.dumps(load(), indent=1, sort_keys=True))
    return buffer.getvalue()


class RestoreRefused(ValueError):
    """The upload is not a zip of this course's work: nothing was written."""


@dataclass(frozen=True)
class Restore:
    """What restoring an archive writes: ``files`` (archive name -> bytes), the progress it holds, and the notebooks
    holding answers it would overwrite with other content (the learner confirms those first; an untouched release
    is replaced without asking)."""

    files: dict[str, bytes]
    progress: dict | None
    overwrites: list[str]


_WORK_NAME = re.compile(r"exercises/(\d\d-[a-z0-9-]+)/\1\.ipynb")


def plan_restore(data: bytes, root: Path = course.ROOT) -> Restore:
    """Read an uploaded zip: only this course's exercise notebooks (``exercises/NN-slug/NN-slug.ipynb``) and the
    progress file are taken; anything else (another path, a file that is not a notebook, a zip too large) refuses
    the whole upload with a reason."""
    import nbformat

    if len(data) > MAX_ARCHIVE_BYTES:
        raise RestoreRefused(f"the upload is {len(data) / 2**20:.0f} MB; a course archive is far smaller")
    try:
        zipped = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise RestoreRefused("the upload is not a zip file (Download my work makes one)") from None
    known = set(course.assignments(root))
    files, progress, total = {}, None, 0
    for info in zipped.infolist():
        name = info.filename
        if info.is_dir():
            continue
        match = _WORK_NAME.fullmatch(name)
        if name != FILE_NAME and not (match and match.group(1) in known):
            raise RestoreRefused(f"{name!r} is not part of this course's work (only exercises/NN-slug/NN-slug.ipynb "
                                 f"and {FILE_NAME} are restored): nothing was written")
        total += info.file_size
        if info.file_size > MAX_FILE_BYTES or total > MAX_ARCHIVE_BYTES:
            raise RestoreRefused(f"{name!r} is too large to be a course notebook: nothing was written")
        content = zipped.read(info)
        if name == FILE_NAME:
            try:
                progress = json.loads(content)
                assert isinstance(progress.get("exercises", {}), dict) and isinstance(progress.get("lessons", {}), dict)
            except (ValueError, AssertionError, AttributeError):
                raise RestoreRefused(f"{FILE_NAME} in the upload is not a progress file: nothing was written") from None
            continue
        try:
            nbformat.reads(content.decode("utf-8"), as_version=4)
        except Exception:  # nbformat raises many kinds for a file that is not a notebook
            raise RestoreRefused(f"{name!r} is not a readable notebook: nothing was written") from None
        files[name] = content
    if not files and progress is None:
        raise RestoreRefused("the zip holds none of this course's work: nothing was written")
    overwrites = [name for name, content in files.items()
                  if (root / name).exists() and (root / name).read_bytes() != content and _holds_work(root / name)]
    return Restore(files, progress, overwrites)


#: What nbgrader leaves in an answer cell of the release (nbgrader_config.py keeps its default stubs).
_STUBS = ("# YOUR CODE HERE\nraise NotImplementedError()", "YOUR ANSWER HERE")


def _holds_work(path: Path) -> bool:
    """False for a notebook whose answer cells all still hold the release's stubs (a fresh session's copy: replacing
    it loses no answer); True otherwise, and for anything unreadable."""
    import nbformat

    try:
        cells = nbformat.read(path, as_version=4).cells
    except Exception:  # nbformat raises many kinds for a file that is not a notebook
        return True
    answers = [" ".join(c.source.split()) for c in cells if c.metadata.get("nbgrader", {}).get("solution")]
    return not answers or not all(any(a.endswith(" ".join(stub.split())) for stub in _STUBS) for a in answers)


def apply_restore(plan: Restore, root: Path = course.ROOT, *, overwrite: bool = False) -> list[str]:
    """Write what ``plan`` holds; notebooks that would change refuse unless ``overwrite`` (the learner's yes).
    Returns the names written."""
    if plan.overwrites and not overwrite:
        raise RestoreRefused(f"restoring would overwrite {len(plan.overwrites)} notebook(s) that differ "
                             f"({', '.join(plan.overwrites)}): confirm first")
    written = []
    for name, content in plan.files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        written.append(name)
    if plan.progress is not None:
        progress = plan.progress
        _save({"exercises": dict(progress.get("exercises", {})), "lessons": dict(progress.get("lessons", {}))})
        written.append(FILE_NAME)
    return written


# ------------------------------------------------------------------------------------------------ in a notebook

def served_course() -> Path:
    """The course folder this kernel serves: its working directory when that holds the exercises (progress.ipynb
    runs in the folder it sits in, whichever copy of the course that is), else the package's own course."""
    here = Path.cwd()
    return here if (here / "exercises").is_dir() and (here / "progress.ipynb").is_file() else course.ROOT


def show(root: Path | None = None) -> None:
    """The progress map, and the download and restore of the learner's work (progress.ipynb), for the course at
    ``root`` (default: :func:`served_course`)."""
    import ipywidgets as widgets
    from IPython.display import HTML, display

    root = served_course() if root is None else root

    if on_binder():
        display(HTML(f"<p role='alert'><strong>⚠ Binder:</strong> {BINDER_NOTICE}</p>"),
                metadata={"text/plain": BINDER_NOTICE})
    display(HTML(as_html()), metadata={"text/plain": as_text()})
    download = widgets.Button(description="Download my work", tooltip="One zip of your exercise notebooks and "
                              "progress file")
    upload = widgets.FileUpload(accept=".zip", multiple=False, description="Restore my work")
    message = widgets.HTML(value="")
    # The download link goes through JupyterLab's own output renderer, which turns a path relative to this notebook
    # into the server's download address (an HTML widget's link would be relative to the page instead).
    link = widgets.Output()
    confirm = widgets.Button(description="Overwrite them", button_style="warning", layout={"display": "none"})
    pending: list[Restore] = []

    def save(_):
        folder = root / DOWNLOADS
        folder.mkdir(exist_ok=True)
        name = f"my-work-{time.strftime('%Y%m%d-%H%M%S')}.zip"
        (folder / name).write_bytes(archive(root))
        message.value = f"<span role='status'>Saved your work as {name}: the link below downloads it.</span>"
        link.clear_output()
        with link:
            display(HTML(f"<a href='{DOWNLOADS}/{name}' download='{name}'>Download {name} to your computer</a>"))

    def uploaded(change):
        import html

        confirm.layout.display = "none"
        pending.clear()
        value = change["new"]
        if not value:
            return
        content = bytes(value[0]["content"]) if isinstance(value, (tuple, list)) else bytes(
            next(iter(value.values()))["content"])
        try:
            plan = plan_restore(content, root)
            if plan.overwrites:
                pending.append(plan)
                confirm.layout.display = None
                message.value = ("<span role='status'>These notebooks differ from the ones in the zip and would be "
                                 f"overwritten: {html.escape(', '.join(plan.overwrites))}. Press Overwrite them to "
                                 "restore anyway; otherwise nothing changes.</span>")
                return
            written = apply_restore(plan, root)
            message.value = f"<span role='status'>Restored {len(written)} file(s). Run this cell again.</span>"
        except RestoreRefused as refused:
            message.value = f"<span role='alert'>Not restored: {html.escape(str(refused))}.</span>"

    def overwrite(_):
        if pending:
            written = apply_restore(pending.pop(), root, overwrite=True)
            confirm.layout.display = "none"
            message.value = f"<span role='status'>Restored {len(written)} file(s). Run this cell again.</span>"

    download.on_click(save)
    upload.observe(uploaded, names="value")
    confirm.on_click(overwrite)
    display(widgets.VBox([widgets.HBox([download, upload, confirm]), message, link]))
