"""Command line for course maintainers: ``python -m autograder COMMAND``.

* ``release``        regenerate ``exercises/`` from ``solutions/`` with ``nbgrader generate_assignment``;
* ``grade``          grade every submission of one or more assignments in parallel, safely, with feedback and a
                     class report (see autograder/grading/);
* ``collect``, ``export``, ``late``, ``extend``: LMS downloads in, grades out to an LMS, late penalties,
                     extensions (autograder/lms/; also
                     ``python -m autograder.lms``);
* ``check``          a learner's own grade: every test of a saved exercise notebook, hidden ones included
                     (autograder/selfcheck.py);
* ``progress``       a learner's progress across the course (autograder/progress.py);
* ``html``           the lessons and exercises as accessible HTML pages (autograder/export.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from . import course


def release(args: argparse.Namespace) -> int:
    """Generate the release in a scratch copy of the course, then put it in exercises/ (all, or the ones named)."""
    chosen = args.assignments or course.assignments()
    with tempfile.TemporaryDirectory() as scratch:
        copy = course.copy_course(Path(scratch) / "course")
        course.generate_release(copy, args.assignments or None)
        for assignment in chosen:
            shutil.rmtree(course.EXERCISES / assignment, ignore_errors=True)
            shutil.copytree(copy / "exercises" / assignment, course.EXERCISES / assignment)
            print(f"released {course.release_notebook(assignment).relative_to(course.ROOT)}")
    return 0


def grade(args: argparse.Namespace) -> int:
    from .grading.orchestration.cli import main as grade_main

    return grade_main(args)


def check(args: argparse.Namespace) -> int:
    """Check saved exercise notebooks as the class grader would (the named ones, or every exercise's)."""
    from . import progress, selfcheck

    paths = [Path(p) for p in args.notebooks] or [course.release_notebook(a) for a in course.assignments()]
    for path in paths:
        try:
            report = selfcheck.check_file(path, args.seed)
        except (ValueError, OSError) as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 2
        progress.record(report)
        print(selfcheck.as_text(report) + "\n")
    return 0


def html(args: argparse.Namespace) -> int:
    from .export import OUTPUT, export_course

    written = export_course(Path(args.output) if args.output else OUTPUT, execute=not args.no_execute)
    print(f"{len(written)} pages in {(Path(args.output) if args.output else OUTPUT)}")
    return 0


def show_progress(args: argparse.Namespace) -> int:
    from . import progress

    print(progress.as_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser("release", help="regenerate exercises/ from solutions/")
    release_parser.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    release_parser.set_defaults(run=release)
    grade_parser = commands.add_parser("grade", help="grade every submission of one or more assignments (parallel, "
                                                     "sandboxed)")
    grade_parser.set_defaults(run=grade)
    from .grading.orchestration.cli import add_arguments

    add_arguments(grade_parser)
    from .lms.cli import add_commands

    add_commands(commands)
    check_parser = commands.add_parser("check", help="check my work: every test of saved exercise notebooks, hidden "
                                                     "ones included, at a fresh grading seed")
    check_parser.add_argument("notebooks", nargs="*", help="exercise notebooks (default: every one in exercises/)")
    check_parser.add_argument("--seed", type=int, default=None, help="this grading seed instead of a fresh one")
    check_parser.set_defaults(run=check)
    html_parser = commands.add_parser("html", help="the lessons (executed) and exercises as accessible HTML pages")
    html_parser.add_argument("--output", help="folder for the pages (default: html/)")
    html_parser.add_argument("--no-execute", action="store_true", help="export the lessons without running them")
    html_parser.set_defaults(run=html)
    progress_parser = commands.add_parser("progress", help="my progress across the course")
    progress_parser.set_defaults(run=show_progress)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
