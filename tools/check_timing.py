"""What Check my work costs beside the exercise itself: for each exercise, its reference answers in the student
release run once in a fresh kernel (Run All, as a learner runs it), then the button's check in that same kernel (every
test cell, hidden ones included, at one grading seed). Prints both times and their ratio. A report, not a test:

    python -m tools.check_timing [NN-slug ...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import nbformat

from autograder import course
from tools import synthetic

SEED = 20261207

TIMED = """import json as _json, time as _time
from autograder import selfcheck as _selfcheck
_started = _time.perf_counter()
_report = _selfcheck.check_namespace({assignment!r}, globals(), {seed})
print('TIMING ' + _json.dumps({{"run_all": _time.perf_counter() - _course_started - (_time.perf_counter() - _started),
                                "check": _time.perf_counter() - _started,
                                "earned": _report.earned, "points": _report.points}}))"""


def measure(assignment: str) -> dict:
    notebook = nbformat.read(course.release_notebook(assignment), as_version=4)
    answers = synthetic.reference_answers(course.ROOT, assignment)
    for cell in notebook.cells:
        if synthetic.grade_id(cell) in answers:
            cell.source = answers[synthetic.grade_id(cell)]
    notebook.cells.insert(0, nbformat.v4.new_code_cell("import time as _t\n_course_started = _t.perf_counter()"))
    notebook.cells.append(nbformat.v4.new_code_cell(TIMED.format(assignment=assignment, seed=SEED)))
    with tempfile.TemporaryDirectory() as folder:
        course.run_notebook(notebook, Path(folder), timeout=600)
    text = "".join(o.get("text", "") for o in notebook.cells[-1].outputs if o.get("output_type") == "stream")
    return json.loads(text.split("TIMING ", 1)[1])


def main(argv: list[str]) -> int:
    print(f"{'exercise':24} {'Run All (s)':>11} {'check (s)':>9} {'ratio':>6}  score at seed {SEED}")
    for assignment in argv or course.assignments():
        row = measure(assignment)
        print(f"{assignment:24} {row['run_all']:11.1f} {row['check']:9.1f} {row['check'] / row['run_all']:6.2f}  "
              f"{row['earned']:g} / {row['points']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
