"""``python -m autograder.lms collect|export``: LMS downloads in, grades out, with a report of what needs a look.

* ``collect ASSIGNMENT ZIP... [--from canvas|moodle]`` puts an LMS's submissions download into ``submitted/``;
* ``export --to canvas|moodle|csv ASSIGNMENT... [--output PATH] [--missing blank|zero] [--dry-run]`` writes the
  LMS's grade import file, after a preview of what changed since the last export to the same file;
* ``late ASSIGNMENT [--recompute]`` lists the late submissions and their penalties; ``--recompute`` first applies
  the late policy again (after a due date, an extension or the policy changed; nothing is executed).

Exit status: 0 when all went through, 1 when something was left out (files that match no student, grades the
export could not place; the rest is done), 2 when nothing was done (no roster, a roster with duplicates, an
assignment the gradebook lacks). What is only worth a look (roster students with no work yet) is printed, status 0.
:func:`add_commands` mounts them on another command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from .export import EXPORTERS, ExportError, preview, write
from .roster import RosterError


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


def collect(args: argparse.Namespace) -> int:
    from .collect import ArchiveRefused
    from .collect import collect as run

    archives = [Path(a).resolve() for a in args.archives]
    missing = [str(a) for a in archives if not a.is_file()]
    if missing:
        print(f"autograder.lms collect: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    with in_course(args.course):
        try:
            report = run(args.assignment, archives, args.lms)
        except (RosterError, ArchiveRefused) as error:
            print(f"autograder.lms collect: {error}", file=sys.stderr)
            return 2
        except SystemExit as stop:  # nbgrader's ZipCollect logged why and exits
            return 2 if stop.code else 0
    print("\n".join(report.lines()))
    return 1 if report.collected.unmatched else 0


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
        try:
            with Gradebook(app.coursedir.db_url, app.coursedir.course_id) as gradebook:
                sheet, problems = plugin.prepare(gradebook)
        except (RosterError, ExportError) as error:
            print(f"autograder.lms export: {error}", file=sys.stderr)
            return 2
        destination = plugin.destination()
        print("\n".join(preview(sheet, destination)))
        if problems.lines(args.lms):
            print("needs a look:")
            print("\n".join(f"  {line}" for line in problems.lines(args.lms)))
        if args.dry_run:
            print("dry run: nothing written")
        else:
            write(sheet, destination)
            print(f"wrote {destination}")
    return 1 if problems.left_out else 0


def late(args: argparse.Namespace) -> int:
    from nbgrader.api import MissingEntry

    from .late import late_submissions, recompute, report_lines

    with in_course(args.course):
        app = nbgrader_app()
        try:
            if args.recompute:
                recompute(app.coursedir.db_url, args.assignment, app.config)
            found = late_submissions(app.coursedir.db_url, args.assignment)
        except MissingEntry:
            print(f"autograder.lms late: the gradebook has no {args.assignment!r}", file=sys.stderr)
            return 2
    print("\n".join(report_lines(found)[2:]))
    return 0


def add_commands(commands) -> None:
    """Add ``collect``, ``export`` and ``late`` to an argparse ``add_subparsers()`` object (each sets ``run``)."""
    parser = commands.add_parser("collect", help="an LMS's submissions download (zip) into submitted/")
    parser.add_argument("assignment", help="assignment id, e.g. 01-chain-rule")
    parser.add_argument("archives", nargs="+", help="the LMS's download(s); a later one wins ties")
    parser.add_argument("--from", dest="lms", choices=("canvas", "moodle"), default=None,
                        help="the LMS (default: c.LmsDownload.lms in nbgrader_config.py)")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=collect)
    parser = commands.add_parser("export", help="grades into an LMS's grade import CSV")
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: every one in the gradebook)")
    parser.add_argument("--to", dest="lms", choices=tuple(EXPORTERS), required=True, help="the file's format")
    parser.add_argument("--output", type=Path, default=None, help="where to write (default: grading/exports/LMS.csv)")
    parser.add_argument("--missing", choices=("blank", "zero"), default=None,
                        help="a student with no submission gets a blank cell or 0 (default: c.LmsExport.missing, "
                             "blank)")
    parser.add_argument("--dry-run", action="store_true", help="show the preview and the problems, write nothing")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=export)
    parser = commands.add_parser("late", help="late submissions and their penalties (--recompute: apply the policy "
                                              "again after a due date, extension or policy change)")
    parser.add_argument("assignment", help="assignment id, e.g. 01-chain-rule")
    parser.add_argument("--recompute", action="store_true", help="apply the late policy again, executing nothing")
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course root (default: here)")
    parser.set_defaults(run=late)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.lms", description=__doc__.split("\n\n")[0])
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.run(args)
