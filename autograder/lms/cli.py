"""``python -m autograder.lms collect|export|late|extend``: LMS downloads in, grades out, late penalties and
extensions, each with a report of what needs a look.

* ``collect ASSIGNMENT ZIP... [--from canvas|moodle] [--worksheet CSV] [--replace]`` puts an LMS's submissions
  download into ``submitted/``, keeping every file given (see :mod:`.collect`);
* ``export --to canvas|moodle|moodle-csv|csv ASSIGNMENT... [--canvas-id ID] [--points-possible N | --percent]
  [--missing omit|zero] [--output PATH] [--dry-run]`` writes the LMS's grade import file, after a preview of what
  changed since the last export to the same file (see :mod:`.export`);
* ``late ASSIGNMENT [--recompute]`` lists the late submissions and their penalties; ``--recompute`` first applies
  the late policy again (after a due date or the policy changed; nothing is executed) and regenerates the feedback
  of every student whose penalty changed;
* ``extend ASSIGNMENT STUDENT --until DATE | --days N`` grants an extension, before or after the first grade (see
  :mod:`.late`).

Exit status: 0 when all went through, 1 when something was left out (files that match no student or were set
aside, grades the export could not place; the rest is done), 2 when nothing was done (no roster, a roster with
duplicates, a download that cannot be unpacked, an assignment the gradebook lacks, an export without the LMS's
assignment id or scale). What is only worth a look (roster students with no work yet) is printed, status 0.
:func:`add_commands` mounts them on another command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from datetime import UTC
from pathlib import Path

from ..grading.orchestration.late import LatePenalty
from .export import EXPORTERS, ExportError, preview, write
from .moodle import WorksheetError
from .roster import Roster, RosterError, read_roster


@contextlib.contextmanager
def in_course(root: Path):
    """Work in the course directory (nbgrader reads nbgrader_config.py there), with this Python's tools on PATH
    (nbgrader runs ``alembic`` when it creates a gradebook)."""
    previous, path = os.getcwd(), os.environ.get("PATH", "")
    os.chdir(root)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), path])
    try:
        yield
    finally:
        os.chdir(previous)
        os.environ["PATH"] = path


def nbgrader_app():
    """An nbgrader app initialized in the current directory: nbgrader_config.py read, the gradebook known."""
    from nbgrader.apps import ExportApp

    app = ExportApp()
    app.initialize(["--log-level=ERROR"])
    return app


def take_worksheet(assignment: str, path: Path) -> list[str]:
    """Moodle's grading worksheet for ``assignment``: its participant numbers into the roster (matched by email),
    the file kept in ``grading/downloaded/ASSIGNMENT/worksheets/`` for the export. Return what it did."""
    import shutil
    from datetime import datetime

    from .moodle import participants, read_worksheet
    from .roster import PARTICIPANT, write_participants

    roster_path = Path(Roster(config=nbgrader_app().config).path)
    found = participants(read_worksheet(path), read_roster(roster_path), path)
    lines = [f"worksheet {path}: " + "; ".join(write_participants(roster_path, assignment, found.numbers))]
    if found.unmatched:
        lines.append(f"  worksheet rows that match no roster student (by email): {', '.join(found.unmatched)}")
    if found.missing:
        lines.append(f"  roster students not in the worksheet (no {PARTICIPANT}{assignment}): "
                     + ", ".join(found.missing))
    kept = Path("grading") / "downloaded" / assignment / "worksheets"
    kept.mkdir(parents=True, exist_ok=True)
    moment = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H%M%SZ")
    shutil.copy2(path, kept / f"{moment}-{path.name}")
    return lines


def collect(args: argparse.Namespace) -> int:
    from .collect import DownloadRefused
    from .collect import collect as run

    archives = [Path(a).resolve() for a in args.archives]
    worksheet = args.worksheet.resolve() if args.worksheet else None
    missing = [str(a) for a in archives + ([worksheet] if worksheet else []) if not a.is_file()]
    if missing:
        print(f"autograder.lms collect: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    with in_course(args.course):
        try:
            lines = take_worksheet(args.assignment, worksheet) if worksheet else []
            report = run(args.assignment, archives, args.lms, args.replace, lines)
        except (RosterError, DownloadRefused, WorksheetError) as error:
            print(f"autograder.lms collect: {error}", file=sys.stderr)
            return 2
        except SystemExit as stop:  # nbgrader's ZipCollect logged why and exits
            return 2 if stop.code else 0
    print("\n".join(report.lines()))
    return 1 if report.needs_a_look else 0


def _per_assignment(values: list[str], assignments: list[str], what: str) -> dict[str, str]:
    """``--canvas-id 48213`` (one assignment) or ``--canvas-id 01-chain-rule=48213`` (each)."""
    found = {}
    for value in values or []:
        if "=" in value:
            assignment, _, value = value.partition("=")
            found[assignment.strip()] = value.strip()
        elif len(assignments) == 1:
            found[assignments[0]] = value.strip()
        else:
            raise ExportError(f"{what} {value}: with several assignments give ASSIGNMENT={value}")
    return found


def export(args: argparse.Namespace) -> int:
    from nbgrader.api import Gradebook

    output = str(args.output.resolve()) if args.output else ""  # relative to where the command was given
    with in_course(args.course):
        app = nbgrader_app()
        plugin = EXPORTERS[args.lms](parent=app)
        plugin.assignment = list(args.assignments)
        plugin.to = output
        if args.missing:
            plugin.missing = args.missing
        if args.match:
            plugin.match = args.match
        if args.percent:
            plugin.percent = True
        try:
            with Gradebook(app.coursedir.db_url, app.coursedir.course_id) as gradebook:
                assignments = list(args.assignments) or [a.name for a in gradebook.assignments]
                ids = _per_assignment(args.canvas_id, assignments, "--canvas-id")
                plugin.columns = {**plugin.columns, **{a: f"{a} ({i})" for a, i in ids.items()}}
                given = _per_assignment(args.points_possible, assignments, "--points-possible")
                plugin.points_possible = {**plugin.points_possible, **{a: float(p) for a, p in given.items()}}
                sheet, problems = plugin.prepare(gradebook)
        except (RosterError, ExportError, WorksheetError, ValueError) as error:
            print(f"autograder.lms export: {error}", file=sys.stderr)
            return 2
        destination = plugin.destination()
        print("\n".join(preview(sheet, destination)))
        if problems.lines():
            print("needs a look:")
            print("\n".join(f"  {line}" for line in problems.lines()))
        if args.dry_run:
            print("dry run: nothing written")
        else:
            write(sheet, destination)
            print(f"wrote {destination}")
    return 1 if problems.refused else 0


def _feedback_lines(app, assignment: str, changed: dict[str, tuple]) -> list[str]:
    from ..grading.orchestration.late import regenerate_feedback

    lines = [f"  penalty changed: {s} {before:g} -> {after:g}" for s, (before, after) in sorted(changed.items())]
    done, problems = regenerate_feedback(app, assignment, changed)
    if done:
        lines.append(f"  feedback regenerated (release it again: nbgrader release_feedback {assignment} --student "
                     f"ID; LMS students: attach it again): {', '.join(done)}")
    return lines + [f"  {p}" for p in problems]


def late(args: argparse.Namespace) -> int:
    from nbgrader.api import MissingEntry

    from ..grading.orchestration.late import late_submissions, recompute, report_lines

    lines = []
    with in_course(args.course):
        app = nbgrader_app()
        try:
            if args.recompute:
                lines = _feedback_lines(app, args.assignment, recompute(app.coursedir.db_url, args.assignment,
                                                                        app.config))
            found = late_submissions(app.coursedir.db_url, args.assignment)
        except MissingEntry:
            print(f"autograder.lms late: the gradebook has no {args.assignment!r}", file=sys.stderr)
            return 2
    print("\n".join(report_lines(found)[2:] + lines))
    return 0


def extend(args: argparse.Namespace) -> int:
    from nbgrader.utils import parse_utc

    from ..grading.orchestration.late import ExtendError
    from ..grading.orchestration.late import extend as grant

    with in_course(args.course):
        app = nbgrader_app()
        try:
            roster = Path(Roster(config=app.config).path)
            if roster.exists() and args.student not in {s.id for s in read_roster(roster)}:
                raise ExtendError(f"no student {args.student!r} in the roster {roster}")
            until = parse_utc(args.until) if args.until else None
            granted, due, changed = grant(app.coursedir.db_url, app.config, args.assignment, args.student, until,
                                          args.days)
        except (ExtendError, RosterError, ValueError) as error:
            print(f"autograder.lms extend: {error}", file=sys.stderr)
            return 2
        lines = [f"{args.student}: {args.assignment} now due {due:%Y-%m-%d %H:%M} UTC (kept in "
                 f"{os.path.relpath(LatePenalty(config=app.config).extensions_path())})"]
        graded = any(s for s in changed) or _has_submission(app, args.assignment, args.student)
        if not graded:
            lines.append("  no submission in the gradebook yet: the extension applies when it is graded")
        lines += _feedback_lines(app, args.assignment, changed)
    print("\n".join(lines))
    return 0


def _has_submission(app, assignment: str, student: str) -> bool:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(app.coursedir.db_url) as gradebook:
        try:
            gradebook.find_submission(assignment, student)
            return True
        except MissingEntry:
            return False


def add_commands(commands) -> None:
    """Add ``collect``, ``export``, ``late`` and ``extend`` to an argparse ``add_subparsers()`` object (each sets
    ``run``)."""
    parser = commands.add_parser("collect", help="an LMS's submissions download (zip) into submitted/")
    parser.add_argument("assignment", help="assignment id, e.g. 01-chain-rule")
    parser.add_argument("archives", nargs="+", help="the LMS's download(s); a later one wins ties")
    parser.add_argument("--from", dest="lms", choices=("canvas", "moodle"), default=None,
                        help="the LMS (default: c.LmsDownload.lms in nbgrader_config.py)")
    parser.add_argument("--worksheet", type=Path, default=None,
                        help="Moodle: the assignment's grading worksheet (CSV), whose participant numbers go into the "
                             "roster (matched by email)")
    parser.add_argument("--replace", action="store_true",
                        help="let files that are not a usable notebook replace a student's usable submission")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=collect)
    parser = commands.add_parser("export", help="grades into an LMS's grade import CSV")
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one in the gradebook)")
    parser.add_argument("--to", dest="lms", choices=tuple(EXPORTERS), required=True, help="the file's format")
    parser.add_argument("--output", type=Path, default=None,
                        help="where to write (default: grading/exports/LMS-ASSIGNMENT.csv)")
    parser.add_argument("--missing", choices=("omit", "zero"), default=None,
                        help="a student with no submission is left out of the file, or gets 0 (default: "
                             "c.LmsExport.missing, omit; a blank cell would clear a grade in the LMS)")
    parser.add_argument("--canvas-id", action="append", default=[], metavar="[ASSIGNMENT=]ID",
                        help="Canvas's id of the assignment (required for Canvas unless c.LmsExport.columns has it)")
    parser.add_argument("--points-possible", action="append", default=[], metavar="[ASSIGNMENT=]N",
                        help="the LMS assignment's points: scores are rescaled to them")
    parser.add_argument("--percent", action="store_true",
                        help="write percent (Canvas: 85%%; Moodle: out of 100) where no points possible are given")
    parser.add_argument("--match", choices=("email", "idnumber"), default=None,
                        help="moodle-csv: the column Moodle matches students on (default email)")
    parser.add_argument("--dry-run", action="store_true", help="show the preview and the problems, write nothing")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=export)
    parser = commands.add_parser("late", help="late submissions and their penalties (--recompute: apply the policy "
                                              "again after a due date, extension or policy change)")
    parser.add_argument("assignment", help="assignment id, e.g. 01-chain-rule")
    parser.add_argument("--recompute", action="store_true", help="apply the late policy again, executing nothing")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=late)
    parser = commands.add_parser("extend", help="an extension for one student, at any time (before or after grading)")
    parser.add_argument("assignment", help="assignment id, e.g. 01-chain-rule")
    parser.add_argument("student", help="the student's roster id")
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--until", help="the new due date, e.g. '2026-10-12 23:59:00 UTC'")
    when.add_argument("--days", type=float, help="days past the assignment's due date")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=extend)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.lms", description=__doc__.split("\n\n")[0])
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.run(args)
