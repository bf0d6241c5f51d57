"""How far the capstone's pass marks sit from what the reference training reaches (a report, not a test).

``python -m tools.capstone_margins [DRAWS]`` trains exercise 11's reference ``train_moons`` and ``train_digits`` on
the cases the hidden tests draw for grading seeds 0 .. DRAWS-1 (moons: data and a poor start; digits: the split),
and the catalogue's "far too few steps" answer on the same moons, and prints the held-out accuracies against
``MOONS_ACCURACY`` and ``DIGITS_ACCURACY`` (autograder/checks/ex11_capstone.py). The pass marks must sit below the
reference's worst draw and above the barely-trained answer's best.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys

import nbformat

from autograder import course
from autograder.checks import ex11_capstone as capstone
from autograder.checks.cases import randint
from autograder.seeding import generator

ASSIGNMENT = "11-capstone"


def solution_namespace(replace: dict[str, str] | None = None) -> dict:
    """The reference notebook's definitions (no test cells, no demos), with some solution cells replaced."""
    namespace: dict = {"__name__": "__main__"}
    notebook = nbformat.read(course.source_notebook(ASSIGNMENT), as_version=4)
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in notebook.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or meta.get("grade") or not (meta.get("solution") or meta.get("locked")):
                continue
            exec((replace or {}).get(meta.get("grade_id"), cell.source), namespace)
    return namespace


def accuracies(run, function, draws, hinges: list[float] | None = None) -> list[float]:
    """Held-out accuracy of ``function`` on each draw, caught where the check computes it (and for the moons, the
    held-out hinge loss into ``hinges``)."""
    seen: list[float] = []

    def value_accuracy(model, *args):
        if hinges is not None:
            hinges.append(original_hinge(model, *args[1:]))
        seen.append(original_value_accuracy(model, *args))
        return seen[-1]

    capstone.value_accuracy = value_accuracy
    capstone.accuracy = lambda *args: seen.append(original_accuracy(*args)) or seen[-1]
    try:
        for draw in draws:
            before = len(seen)
            with contextlib.suppress(capstone.GradingFailure):
                run(function, draw)
            if len(seen) == before:
                seen.append(float("nan"))
    finally:
        capstone.value_accuracy, capstone.accuracy = original_value_accuracy, original_accuracy
    return seen


original_value_accuracy, original_accuracy = capstone.value_accuracy, capstone.accuracy
original_hinge = capstone._held_out_hinge


def line(what: str, values: list[float], mark: float, percent: bool = True) -> str:
    form = "6.1%" if percent else "6.3f"
    return (f"{what:42s} median {statistics.median(values):{form}}  low {min(values):{form}}  "
            f"high {max(values):{form}}  (pass mark {mark:{form}})")


def main(draws: int) -> int:
    from tests.submissions import catalogue  # noqa: PLC0415 - tests/ sits beside tools/ in the repository

    reference = solution_namespace()
    few = next(w for w in catalogue(ASSIGNMENT) if w.name == "far too few steps")
    barely = solution_namespace(few.replace)
    moons = [randint(generator("11/moons", seed), 100, 10**6) for seed in range(draws)]
    splits = [randint(generator("11/digits", seed), 1, 10**6) for seed in range(draws)]
    run_moons = lambda f, s: capstone._run_train_moons(f, reference["Value"], s)  # noqa: E731
    run_barely = lambda f, s: capstone._run_train_moons(f, barely["Value"], s)  # noqa: E731
    for what, run, function in (("reference", run_moons, reference["train_moons"]),
                                ("'far too few steps'", run_barely, barely["train_moons"])):
        hinges: list[float] = []
        print(line(f"moons, {what}: accuracy", accuracies(run, function, moons, hinges), capstone.MOONS_ACCURACY))
        print(line(f"moons, {what}: hinge loss", hinges, capstone.MOONS_HINGE, percent=False))
    print(line("digits, reference", accuracies(capstone._run_train_digits, reference["train_digits"], splits),
               capstone.DIGITS_ACCURACY))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
