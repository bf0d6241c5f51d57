"""A few fixed mutants per exercise that the checks must keep killing (tests/test_mutants_sample.py).

They are stored as data in mutation/sample.toml: exercise, function and the one source line before and after the
mutation, as mutmut made it. :func:`mutant_module` applies one to the extracted reference solution and
:func:`first_failure` grades it in this process with the notebook's test cells (mutation/cells.py), so the sample
needs neither mutmut nor a kernel. ``python -m mutation sample [--exercise NN-slug]`` picks afresh from
mutation/results/ (for the named exercises only, keeping the others' entries).
"""

from __future__ import annotations

import tomllib
import types
from dataclasses import dataclass
from pathlib import Path

from . import cells, extract, report, workspace
from .results import code_of

SAMPLE = Path(__file__).resolve().parent / "sample.toml"
PER_EXERCISE = 3


@dataclass(frozen=True)
class SampleMutant:
    exercise: str
    function: str
    original: str
    mutated: str

    def __str__(self) -> str:
        return f"{self.exercise}:{self.function}: {self.original!r} -> {self.mutated!r}"


class StaleSample(Exception):
    """The sample's original line is no longer in the reference solution: pick a new sample."""


def load(path: Path = SAMPLE) -> list[SampleMutant]:
    return [SampleMutant(**entry) for entry in tomllib.loads(path.read_text()).get("mutant", [])]


def mutated_source(exercise: extract.Exercise, mutant: SampleMutant) -> str:
    """The solution module with ``mutant`` applied: its original line, first found inside its function, replaced."""
    name = mutant.function.rpartition(".")[2]
    lines = exercise.source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {name}(")]
    for start in starts:
        for number in range(start + 1, len(lines)):
            line = lines[number]
            if code_of(line) == mutant.original:
                indent = line[:len(line) - len(line.lstrip())]
                rest = line.strip()[len(mutant.original):]
                lines[number] = indent + mutant.mutated + rest + "\n"
                return "".join(lines)
    raise StaleSample(f"{mutant}: the line is not in {name} any more; pick a new sample with `make mutants "
                      f"EXERCISE={mutant.exercise}` and `.venv/bin/python -m mutation sample --exercise "
                      f"{mutant.exercise}`")


def mutant_module(exercise: extract.Exercise, source: str) -> types.ModuleType:
    module = types.ModuleType(f"mutant_{exercise.module}")
    exec(compile(source, f"<mutant of {exercise.assignment}>", "exec"), module.__dict__)
    return module


def first_failure(exercise: extract.Exercise, solution: types.ModuleType, function: str) -> str | None:
    """The first test cell (and seed) that fails on ``solution``, trying the cells that name ``function``'s
    top-level name first; None when every cell passes."""
    top = function.partition(".")[0]
    cases = workspace.test_cases(exercise, workspace.settings()["seeds"])
    sources = {cell.grade_id: cell.source for cell in exercise.tests}
    cases.sort(key=lambda case: top not in sources[case[0]])
    for grade_id, seed in cases:
        try:
            cells.run_test_cell(solution, grade_id, sources[grade_id], seed)
        except cells.GradingFailure:
            return f"{grade_id}@{seed}"
    return None


def reference_problem(exercise: extract.Exercise) -> str | None:
    """Why the unmutated reference solution does not pass every test cell at every seed (None when it does)."""
    solution = mutant_module(exercise, exercise.source)
    for grade_id, seed in workspace.test_cases(exercise, workspace.settings()["seeds"]):
        source = next(cell.source for cell in exercise.tests if cell.grade_id == grade_id)
        try:
            cells.run_test_cell(solution, grade_id, source, seed)
        except Exception as error:  # a failure or a crash: either way nothing can be measured
            return f"{grade_id}@{seed}: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return None


def pick(assignments: list[str], per_exercise: int = PER_EXERCISE) -> list[SampleMutant]:
    """Killed one-line mutants of ``assignments`` from mutation/results/, spread over each exercise's functions."""
    chosen = []
    for assignment in assignments:
        summary = report.load(assignment)
        by_function: dict[str, list] = {}
        for m in summary.mutants:
            if m.status == "killed" and m.original and "\n" not in m.original + m.mutated:
                by_function.setdefault(m.function, []).append(m)
        for function, candidates in by_function.items():  # subtle mistakes first: no None, no "XX...XX" strings
            subtle = [m for m in candidates if "None" not in m.mutated and "XX" not in m.mutated]
            by_function[function] = subtle or candidates
        picked: list = []
        while len(picked) < per_exercise and any(by_function.values()):
            for candidates in by_function.values():
                if candidates and len(picked) < per_exercise:
                    picked.append(candidates.pop(len(candidates) // 2))
        chosen += [SampleMutant(summary.assignment, m.function, m.original, m.mutated) for m in picked]
    return chosen


def _toml_string(text: str) -> str:
    return "'" + text + "'" if "'" not in text else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write(mutants: list[SampleMutant], path: Path = SAMPLE) -> None:
    lines = ["# Fixed mutants the checks must keep killing: tests/test_mutants_sample.py grades each in-process.",
             "# Picked by `python -m mutation sample` from mutation/results/ (killed one-line mutants, spread over",
             "# functions). A stale entry (its line gone from the solution) is skipped by the test: pick again with",
             "# `make mutants EXERCISE=NN-slug && .venv/bin/python -m mutation sample --exercise NN-slug`.", ""]
    for m in mutants:
        lines += ["[[mutant]]", f"exercise = {_toml_string(m.exercise)}", f"function = {_toml_string(m.function)}",
                  f"original = {_toml_string(m.original)}", f"mutated = {_toml_string(m.mutated)}", ""]
    path.write_text("\n".join(lines))
