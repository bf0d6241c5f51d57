"""What happened to a submission on its way through the grader, in the words of the summary and the grades CSV.

Three sources, all structured: the executed cells (:class:`~autograder.grading.worker.protocol.Execution`: each
cell's status and outputs, why execution stopped, whether the course's own check failed), what nbgrader's sanitizing
undid (compared with the student release), and the warnings nbgrader logged.
"""

from __future__ import annotations

from ..worker.protocol import CellStatus, Execution


def _label(notebook, index: int) -> str:
    grade_id = notebook.cells[index].metadata.get("nbgrader", {}).get("grade_id")
    return f"cell {index}" + (f" ({grade_id})" if grade_id else "")


def execution(notebook, done: Execution, timeout: float, instructor: set[int]) -> list[str]:
    """Crashes, timeouts, floods and errors in learner code, per cell; why execution stopped early. ``instructor``:
    the indices of the instructor cells."""
    notes = []
    for index, cell in sorted(done.cells.items()):
        if cell.status is CellStatus.TIMED_OUT:
            notes.append(f"{_label(notebook, index)} timed out after {timeout:g} s")
        elif cell.status is CellStatus.STOPPED and done.stop is not None:
            notes.append(f"{_label(notebook, index)}: {done.stop.detail}")
        elif cell.status is CellStatus.RAN and index not in instructor:
            for output in cell.outputs:
                if output["output_type"] == "error":
                    notes.append(f"{_label(notebook, index)} raised {output['ename']}: {output['evalue'][:120]}")
        if cell.truncated:
            notes.append(f"{_label(notebook, index)} printed too much; its output was cut")
    if done.stop is not None and not any(c.status is CellStatus.STOPPED for c in done.cells.values()):
        notes.append(done.stop.detail)
    return notes


def course_bugs(notebook, done: Execution, instructor: set[int]) -> list[str]:
    """Instructor cells that failed with the exercise's own fault (a CourseBug), not the learner's."""
    return [f"{_label(notebook, index)}: {output['evalue'][:300]}"
            for index, cell in sorted(done.cells.items()) if index in instructor and cell.course_bug
            for output in cell.outputs if output["output_type"] == "error"]


def release_cells(notebook) -> dict[str, dict]:
    """The student release's nbgrader cells, by grade id: source, locked or not, points (none without a release)."""
    cells = {}
    if notebook is None:
        return cells
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id"):
            locked = bool(meta.get("locked") or (meta.get("grade") and not meta.get("solution")))
            cells[meta["grade_id"]] = {"source": cell.source, "locked": locked, "points": meta.get("points")}
    return cells


def sanitizing(raw, sanitized, release: dict[str, dict]) -> list[str]:
    """What nbgrader's sanitizing undid in the submitted notebook ``raw``: a changed kernelspec, edited instructor
    cells (compared with the student release, since every submission's hidden-test cells differ from the source on
    purpose), changed points."""
    notes = []
    before, after = raw.metadata.get("kernelspec"), sanitized.metadata.get("kernelspec")
    if before != after:
        notes.append(f"the kernelspec was changed to {before}; graded with {after}")
    for cell in raw.cells:
        meta = cell.metadata.get("nbgrader", {}) if isinstance(cell.metadata.get("nbgrader"), dict) else {}
        original = release.get(meta.get("grade_id"))
        if original and original["locked"] and cell.source != original["source"]:
            notes.append(f"edited the instructor cell {meta['grade_id']}; nbgrader restored it")
        if original and meta.get("points") not in (None, original["points"]):
            notes.append(f"changed the points of {meta['grade_id']} to {meta.get('points')}; nbgrader restored "
                         f"{original['points']}")
    return list(dict.fromkeys(notes))


def nbgrader_warning(message: str) -> str:
    """nbgrader's warning about a submission, in the words of the summary ("" for those the summary drops)."""
    if "has changed!" in message and "'checksum'" not in message and "'points'" not in message:
        # OverwriteCells: "Attribute 'x' for cell y has changed! (should be: a, got: b)"; checksums and points are
        # reported by sanitizing() (hidden-test cells always differ from the source)
        return "nbgrader restored an instructor cell: " + message.replace(" has changed!", "")
    if message.startswith("Missing grade cell"):
        return "deleted a test cell; nbgrader put it back: " + message
    if "exists multiple times" in message:
        return "duplicated a graded cell; nbgrader kept the last copy: " + message
    if "does not exist in the database" in message:
        return "a cell claims an unknown grade id; treated as an ordinary cell: " + message
    return ""
