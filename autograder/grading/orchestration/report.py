"""What an instructor reads after grading: the summary, a grades CSV, feedback for the ungradable, the class report.

The class report (Markdown + a PNG chart) shows, over the graded submissions, the pass rate of every test cell and
how many students each named misconception was diagnosed for, so an instructor sees what to re-teach. A failing
check publishes its diagnosis as structured data (:func:`autograder.misconceptions.publish`), which the worker's kernel
hands over with the cell's result (:func:`misconceptions`): no sentence is parsed, so a name may hold any punctuation
(``.grad``, ``torch.no_grad()``, ``1.0``).
"""

from __future__ import annotations

import csv
import html
import os
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import nbformat

from ..worker.protocol import Execution
from .state import FAILED, GRADED, Outcome


def misconceptions(notebook, execution: Execution | None = None) -> dict[str, set[str]]:
    """``{grade cell: {misconception names}}``: the diagnoses published by the failing test cells of ``notebook``, as
    ``execution`` (this run's) received them, else from the notebook's own outputs (a graded notebook, or its path).
    A record in a cell that did not fail is ignored."""
    if isinstance(notebook, (str, os.PathLike)):
        notebook = nbformat.read(notebook, as_version=4)
    if execution is None:
        from ...misconceptions import MIME  # (imports torch: not on the run's way)
    found: dict[str, set[str]] = defaultdict(set)
    for index, cell in enumerate(notebook.cells):
        meta = cell.metadata.get("nbgrader", {})
        result = execution.cells.get(index) if execution is not None else None
        outputs = cell.get("outputs", []) if execution is None else result.outputs if result else []
        if cell.cell_type != "code" or not meta.get("grade") \
                or not any(output.get("output_type") == "error" for output in outputs):
            continue
        if execution is not None:
            found[meta["grade_id"]].update(result.diagnoses)
            continue
        for output in outputs:
            record = output.get("data", {}).get(MIME) if output.get("output_type") == "display_data" else None
            if isinstance(record, dict) and isinstance(record.get("misconception"), str):
                found[meta["grade_id"]].add(record["misconception"])
    return {cell: names for cell, names in found.items() if names}


def summary_numbers(outcomes: dict[str, Outcome]) -> dict:
    graded = [o.score for o in outcomes.values() if o.status == GRADED]
    return {"graded": len(graded), "failed": sum(o.status == FAILED for o in outcomes.values()),
            "mean": statistics.fmean(graded) if graded else float("nan"),
            "median": statistics.median(graded) if graded else float("nan")}


def summary(assignment: str, result) -> str:
    """What the instructor reads at the end of a run (``result``: a :class:`~.run.Result`)."""
    numbers = summary_numbers(result.outcomes)
    total = next(iter(result.outcomes.values())).max_score if result.outcomes else 0
    lines = [f"\n{assignment}: {numbers['graded']} graded, {numbers['failed']} could not be graded "
             f"({len(result.todo)} processed this run in {result.seconds:.1f} s; workers ready after "
             f"{result.workers_ready:.1f} s; execution {result.execution_seconds:.1f} s; replayed {result.replayed} "
             "notebooks from their sandboxed execution"
             + (f"; {result.restarts} worker restarts" if result.restarts else "") + ")"]
    if not result.sandboxed:
        lines.append("  WITHOUT THE SANDBOX (--no-sandbox): submissions ran with your own permissions, with no "
                     "isolation from this machine, the course or each other")
    if numbers["graded"]:
        lines.append(f"  score: mean {numbers['mean']:.2f}, median {numbers['median']:.2f} (out of {total:g}; "
                     "before late penalties)")
    if result.late:
        penalized = [s for s in result.late if s.penalty > 0]
        lines.append(f"  late: {len(result.late)} submissions, {len(penalized)} penalized, "
                     f"{sum(s.penalty for s in penalized):g} points taken off (c.LatePenalty in nbgrader_config.py)")
    if result.course_bugs:
        lines.append("  course bugs (the exercise's fault, not the students'; fix the checks and regrade --force):")
        lines += [f"    {s}: {'; '.join(bugs)[:300]}" for s, bugs in sorted(result.course_bugs.items())]
    noted = {s: o for s, o in result.outcomes.items() if o.status == GRADED and o.reasons and s in result.todo}
    if noted:
        lines.append("  graded, with notes:")
        lines += [f"    {s} ({o.score:g}): {'; '.join(o.reasons)[:300]}" for s, o in sorted(noted.items())]
    failed = {s: o for s, o in result.outcomes.items() if o.status == FAILED}
    if failed:
        lines.append("  could not be graded (recorded as 0):")
        lines += [f"    {s}: {'; '.join(o.reasons)[:300]}" for s, o in sorted(failed.items())]
    lines.append(f"  class report: {result.report_path}")
    lines.append(f"  grades: {result.folder / 'grades.csv'}; feedback: feedback/<student>/{assignment}/")
    return "\n".join(lines)


def write_csv(path: Path, outcomes: dict[str, Outcome], cell_scores: dict[str, dict[str, float]],
              cells: list[str], penalties: dict[str, float] | None = None) -> None:
    """``grades.csv``: per student the score before the late penalty, the penalty (``penalties``: the gradebook's,
    after this run's policy), the final score, the maximum, each test cell's points and the reasons."""
    path.parent.mkdir(parents=True, exist_ok=True)
    penalties = penalties or {}
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["student", "status", "score", "late_penalty", "final_score", "max_score", *cells,
                         "reasons"])
        for student, outcome in sorted(outcomes.items()):
            scores = cell_scores.get(student, {})
            penalty = penalties.get(student, 0.0)
            writer.writerow([student, outcome.status, f"{outcome.score:g}", f"{penalty:g}",
                             f"{max(0.0, outcome.score - penalty):g}", f"{outcome.max_score:g}",
                             *(f"{scores[c]:g}" if c in scores else "" for c in cells), "; ".join(outcome.reasons)])


def write_failure_feedback(path: Path, student: str, assignment: str, outcome: Outcome) -> None:
    """A feedback page for a submission nbgrader could not grade (nbgrader writes none for it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in outcome.reasons)
    name = html.escape(assignment)
    path.write_text(f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{name}: feedback</title>"
                    f"</head><body><main><h1>{name}: your submission could not be graded</h1>"
                    f"<p>Student: {html.escape(student)}. Score: 0 / {outcome.max_score:g}.</p><ul>{reasons}</ul>"
                    "<p>Submit the assignment notebook again (File &rarr; Save, then submit it unchanged in name).</p>"
                    "</main></body></html>\n")


def cell_text(text: str) -> str:
    """``text`` as the content of one Markdown table cell: its pipes escaped, its lines joined."""
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def class_report(folder: Path, assignment: str, outcomes: dict[str, Outcome],
                 cell_scores: dict[str, dict[str, float]], max_scores: dict[str, float],
                 diagnosed: dict[str, dict[str, list[str]]], *, sandboxed: bool = True,
                 course_bugs: dict[str, list[str]] | None = None, late: list[str] = ()) -> Path:
    """Write ``report.md``, the same as a page (``report.html``, for reading in a browser or with a screen reader) and
    ``report.png`` in ``folder``; return the Markdown path. ``diagnosed``: per student, the
    misconceptions each test cell's failure named; ``late``: the late submissions' section
    (:func:`.late.report_lines`)."""
    graded = [s for s, o in outcomes.items() if o.status == GRADED]
    cells = list(max_scores)
    pass_rate = {c: (sum(cell_scores.get(s, {}).get(c, 0) >= max_scores[c] for s in graded) / len(graded)
                     if graded else 0.0) for c in cells}
    counts: Counter = Counter()
    where: dict[str, Counter] = defaultdict(Counter)
    for student in graded:
        names = set()
        for cell, found in diagnosed.get(student, {}).items():
            for name in found:
                where[name][cell] += 1
                names.add(name)
        counts.update(names)
    numbers = summary_numbers(outcomes)
    total = sum(max_scores.values())
    lines = [f"# Class report: {assignment}", "",
             f"{len(outcomes)} submissions: {numbers['graded']} graded, {numbers['failed']} could not be graded. "
             f"Score over the graded ones (before late penalties): mean {numbers['mean']:.2f}, "
             f"median {numbers['median']:.2f} (out of {total:g}).", ""]
    if not sandboxed:
        lines += ["**Graded without the sandbox** (`--no-sandbox`): the submissions ran with the grader's own "
                  "permissions, with no isolation from the machine, the course or each other.", ""]
    lines += [f"![{CHART_ALT}](report.png)", "",
             "## Pass rate per test", "", "| test cell | points | passed | pass rate |", "|---|---:|---:|---:|"]
    for cell in cells:
        passed = round(pass_rate[cell] * len(graded))
        lines.append(f"| `{cell}` | {max_scores[cell]:g} | {passed}/{len(graded)} | {pass_rate[cell]:.0%} |")
    lines += ["", "## Misconceptions diagnosed (students)", ""]
    if counts:
        lines += ["| misconception | students | in tests |", "|---|---:|---|"]
        for name, count in counts.most_common():
            tests = ", ".join(f"`{c}`" for c, _ in where[name].most_common())
            lines.append(f"| {cell_text(name)} | {count} | {tests} |")
    else:
        lines.append("None.")
    if course_bugs:
        lines += ["", "## Course bugs (the exercise's fault, not the students': fix the checks and regrade)", ""]
        lines += [f"- **{s}**: {'; '.join(bugs)}" for s, bugs in sorted(course_bugs.items())]
    if late:
        lines += ["", *late]
    failed = {s: o for s, o in outcomes.items() if o.status == FAILED}
    if failed:
        lines += ["", "## Could not be graded (recorded as 0)", ""]
        lines += [f"- **{s}**: {'; '.join(o.reasons)}" for s, o in sorted(failed.items())]
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "report.md"
    report.write_text("\n".join(lines) + "\n")
    (folder / "report.html").write_text(_page(f"Class report: {assignment}", "\n".join(lines)))
    _chart(folder / "report.png", assignment, cells, pass_rate, counts)
    return report


#: The chart's text alternative: the tables under it hold its numbers.
CHART_ALT = ("Two bar charts: the pass rate of every test cell (0 to 100 %) and the misconceptions diagnosed in most "
             "students; the tables below give the same numbers")


def _page(title: str, markdown: str) -> str:
    """A Markdown report as a page anyone can read: its language, a main landmark, AA contrast, underlined links."""
    import mistune

    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;color:#1b1b1b;max-width:60em;margin:1em auto;padding:0 1em}"
            "a{color:#0b4f8a;text-decoration:underline}table{border-collapse:collapse}"
            "th,td{border:1px solid #767676;padding:0.2em 0.5em}img{max-width:100%}</style></head>"
            f"<body><main>{mistune.html(markdown)}</main></body></html>\n")


def _chart(path: Path, assignment: str, cells: list[str], pass_rate: dict[str, float], counts: Counter) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, _ in counts.most_common(10)]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, max(3.0, 0.4 * max(len(cells), len(names), 1) + 1.2)))
    left.barh(cells[::-1], [100 * pass_rate[c] for c in cells[::-1]], color="#4c72b0")
    left.set_xlim(0, 100)
    left.set_xlabel("pass rate (%)")
    left.set_title("Tests")
    right.barh(names[::-1] or ["(none)"], [counts[n] for n in names[::-1]] or [0], color="#dd8452")
    right.set_xlabel("students")
    right.set_title("Misconceptions diagnosed")
    figure.suptitle(f"{assignment}: class report")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
