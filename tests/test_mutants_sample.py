"""The checks keep killing a fixed sample of mutants of the reference solutions (mutation/sample.toml).

The full measurement of grader strength is `make mutants` (mutation/REPORT.md), a report outside `make test`; this is
its tripwire: each sample mutant is applied to the extracted reference solution and graded in this process by the
notebook's own test cells, visible and hidden, at the grading seeds of mutation/config.toml. The cell that fails it
must fail with the checks' GradingFailure (a crash is an error here) and must pass on the reference solution. A
sample whose line is gone from the rewritten solution is skipped, with the command that picks a new one.
"""

from __future__ import annotations

import functools

import pytest

from mutation import cells, extract, sample, workspace

MUTANTS = sample.load()


@functools.cache
def _exercise(assignment: str) -> extract.Exercise:
    return extract.exercise(assignment)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[f"{m.exercise}:{m.function}:{i}" for i, m in enumerate(MUTANTS)])
def test_a_check_kills_the_sample_mutant(mutant: sample.SampleMutant):
    exercise = _exercise(mutant.exercise)
    try:
        mutated = sample.mutated_source(exercise, mutant)
    except sample.StaleSample as stale:  # the solution was rewritten: nothing to say about the checks (-ra shows it)
        pytest.skip(str(stale))
    failing = sample.first_failure(exercise, sample.mutant_module(exercise, mutated), mutant.function)
    assert failing, f"no test cell of {mutant.exercise} fails any more on the mutant {mutant}"
    grade_id, _, seed = failing.partition("@")
    source = next(cell.source for cell in exercise.tests if cell.grade_id == grade_id)
    cells.run_test_cell(sample.mutant_module(exercise, exercise.source), grade_id, source, int(seed))


def _mutmut_mutations(source: str, directory) -> int:
    """How many mutants mutmut makes of ``source`` (its config is read from the working directory)."""
    from mutmut.configuration import reset_config
    from mutmut.mutation.file_mutation import create_mutations

    (directory / "pyproject.toml").write_text(workspace.pyproject({}))
    reset_config()
    try:
        return len(create_mutations("solution.py", source)[1])
    finally:
        reset_config()


@pytest.mark.parametrize("assignment", sorted({m.exercise for m in MUTANTS}))
def test_only_the_solution_regions_are_mutated(assignment, tmp_path, monkeypatch):
    """With every line protected mutmut makes no mutant: the pragma reaches every kind of scaffold line, so in a
    run (where only the lines between BEGIN and END SOLUTION are left unprotected) all mutants are learner code."""
    monkeypatch.chdir(tmp_path)
    exercise = _exercise(assignment)
    assert _mutmut_mutations(extract.protect_scaffold(exercise.plain, set()), tmp_path) == 0
    assert _mutmut_mutations(exercise.source, tmp_path) > 0
