"""Every catalogued wrong answer loses exactly its points, with its diagnosis, at any grading seed: in this process
(:mod:`tools.inprocess`), the whole catalogue of every assignment.

Each answer runs once, with ``AUTOGRADER_SEED`` drawn by hypothesis (one seed an answer in ``make test``; in CI, where
hypothesis is derandomized, the same seed for every answer, so a check's own seeded work, such as exercise 09's drawn
training runs, is done once a worker; three seeds an answer with ``make test-all``, 20 with ``make sweep``): the
visible tests draw nothing from the seed, the hidden ones draw their cases from it, so one run proves the visible cells
and the hidden cells at a seed the catalogue was not written at. An answer whose grade or diagnosis holds only at some
seeds fails there. tests/test_hidden_tests_over_seeds.py proves the reference at many seeds.

The same verdicts through nbgrader's pipeline (sandbox, gradebook, feedback HTML) are proven by
tests/test_grading_pipeline.py on a sample of each catalogue, and on all of it by ``make test-all``: the test cells are
the same code, so a sample shows the pipeline changes no verdict. Cells above an answer's first changed solution cell
run the reference's code in the reference's order from the same seeds, so they are the reference's (full marks, proven
there) and are not run again; nor are the cells below it whose names never lead to a changed cell
(:func:`tools.inprocess.cells_reaching_answers` states the rule; ``make test-all`` runs every cell below, proving the
shortcut changes no verdict). The learner's scratch cells carry no grade and are left out.
"""

from __future__ import annotations

import functools

import nbformat
import pytest
from conftest import NIGHTLY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submissions import answer_code, catalogue, graded_cells, solution_sources, without_comments

from autograder import course
from autograder.seeding import SEED_VARIABLE
from tools.inprocess import cells_below_first_answer, cells_reaching_answers, run_cells

#: A line of a reference answer is long enough to give something away at this many characters (spaces aside).
TELLING = 12


@functools.cache
def reference_lines(assignment: str) -> tuple[str, ...]:
    """The lines of the reference answers' code that give something away, spaces removed: comments, block headers
    (``for ... :``, ``with torch.no_grad():``) and lines the student notebook itself shows are left out. The feedback a
    learner reads while working shows the evidence and names the concept, never the code of the fix."""
    release = nbformat.read(course.release_notebook(assignment), as_version=4)
    shown = "".join("".join(cell.source.split()) for cell in release.cells)
    lines = {"".join(line.split()) for source in solution_sources(assignment).values()
             for line in answer_code(source).splitlines()}
    return tuple(sorted(line for line in lines if len(line) >= TELLING and not line.endswith(":")
                        and line not in shown))


SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
#: One grading seed an answer (over 600 answers; the capstone's train two models each); three with `make test-all`.
SETTINGS = settings(max_examples=3 if NIGHTLY else 1, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("assignment, wrong", [
    pytest.param(a, w, id=f"{a}:{w.name}") for a in course.assignments() for w in catalogue(a)])
@SETTINGS
@given(seed=SEEDS)
def test_wrong_answer_loses_exactly_its_points(monkeypatch, assignment, wrong, seed):
    monkeypatch.setenv(SEED_VARIABLE, str(seed))
    points = graded_cells(assignment)
    unknown = set(wrong.scores) - set(points)
    assert not unknown, f"catalogue entry {wrong.name!r} names unknown test cells {unknown}"
    answers = {**solution_sources(assignment), **wrong.replace}
    lost = wrong.lost(points)
    below = cells_below_first_answer if NIGHTLY else cells_reaching_answers
    run = below(assignment, answers) | lost
    results = run_cells(assignment, answers, tests=run, scratch=False)
    verdicts = {cell: r.passed for cell, r in results.items()}
    assert verdicts == {cell: cell not in lost for cell in run}, f"seed {seed}: {wrong.name}"
    text = " ".join(" ".join(r.message.split()) for r in results.values() if not r.passed)
    for phrase in wrong.feedback:
        assert " ".join(phrase.split()) in text, f"seed {seed}: feedback for {wrong.name!r} lacks {phrase!r}"
    for phrase in wrong.not_named:
        assert " ".join(phrase.split()) not in text, f"seed {seed}: feedback for {wrong.name!r} names {phrase!r}"
    # what the learner wrote is theirs to read back: a reference line counts only where their submission lacks it
    own = {"".join(line.split()) for source in answers.values() for line in without_comments(source).splitlines()}
    told = [line for line in reference_lines(assignment) if line in "".join(text.split()) and line not in own]
    assert not told, f"{wrong.name!r}: what a learner reads while working holds the reference answer's {told}"


def test_only_cells_whose_names_reach_a_changed_answer_are_skipped():
    """The shortcut of :func:`cells_reaching_answers`, on exercise 11: a changed layer rule reaches the tests of what
    calls it and no others; an answer that runs code when its cell runs, or reads names through ``globals()``,
    reaches every cell below it."""
    assignment = "11-capstone"
    reference = solution_sources(assignment)
    assert cells_reaching_answers(assignment, reference) == set()
    silu = {**reference, "silu_backward": reference["silu_backward"].replace("return dy", "return 2 * dy")}
    assert cells_reaching_answers(assignment, silu) == {
        "test_residual_backward", "test_residual_backward_hidden", "test_mlp_gradients", "test_mlp_gradients_hidden"}
    below = cells_below_first_answer(assignment, silu)
    assert {"test_train_digits", "test_batchnorm_forward"} <= below
    for runs_code in ("torch.set_default_dtype(torch.float32)\n", "g = globals()\n"):
        changed = {**silu, "silu_backward": runs_code + silu["silu_backward"]}
        assert cells_reaching_answers(assignment, changed) == below
