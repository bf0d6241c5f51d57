"""Every catalogued wrong answer loses exactly its points, with its diagnosis, at the default grading seed: in this
process (:mod:`tools.inprocess`), the whole catalogue of every assignment.

The same verdicts through nbgrader's pipeline (sandbox, gradebook, feedback HTML) are proven by
tests/test_grading_pipeline.py on a sample of each catalogue, and on all of it by ``make test-all``: the test cells are
the same code, so a sample shows the pipeline changes no verdict. Cells above an answer's first changed solution cell
run the reference's code in the reference's order from the same seeds, so they are the reference's (full marks, proven
there) and are not run again; the learner's scratch cells carry no grade and are left out.
"""

from __future__ import annotations

import pytest
from submissions import catalogue, graded_cells, solution_sources

from autograder import course
from tools.inprocess import cells_below_first_answer, run_cells


@pytest.mark.parametrize("assignment, wrong", [
    pytest.param(a, w, id=f"{a}:{w.name}") for a in course.assignments() for w in catalogue(a)])
def test_wrong_answer_loses_exactly_its_points(assignment, wrong):
    points = graded_cells(assignment)
    unknown = set(wrong.scores) - set(points)
    assert not unknown, f"catalogue entry {wrong.name!r} names unknown test cells {unknown}"
    answers = {**solution_sources(assignment), **wrong.replace}
    lost = wrong.lost(points)
    run = cells_below_first_answer(assignment, answers) | lost
    results = run_cells(assignment, answers, tests=run, scratch=False)
    assert {cell: r.passed for cell, r in results.items()} == {cell: cell not in lost for cell in run}, wrong.name
    text = " ".join(" ".join(r.message.split()) for r in results.values() if not r.passed)
    for phrase in wrong.feedback:
        assert " ".join(phrase.split()) in text, f"feedback for {wrong.name!r} lacks the diagnosis {phrase!r}"
