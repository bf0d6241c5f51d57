"""Reports on the lessons for course maintainers (not tests): ``python -m tools.lessons bench`` executes every lesson
in a fresh kernel and prints the time each takes (``make bench-lessons``); ``python -m tools.lessons reading-time``
prints the minutes each takes to read (prose words / 200 + visible code lines / 10; tests/test_notebook_format.py
holds every lesson to ``course.READING_BUDGET_MINUTES``)."""

from __future__ import annotations

import argparse
import sys
import time

from autograder import course
from tools.notebooks import execute


def bench() -> int:
    total = 0.0
    for path in course.lessons():
        start = time.perf_counter()
        execute(path)
        seconds = time.perf_counter() - start
        total += seconds
        print(f"{path.name:32s} {seconds:6.1f} s")
    print(f"{'all lessons':32s} {total:6.1f} s")
    return 0


def reading_time() -> int:
    for path in course.lessons():
        print(f"{path.name:32s} {course.reading_minutes(path):5.1f} min")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lessons", description=__doc__.split("\n\n")[0])
    parser.add_argument("report", choices=["bench", "reading-time"])
    args = parser.parse_args(argv)
    return bench() if args.report == "bench" else reading_time()


if __name__ == "__main__":
    sys.exit(main())
