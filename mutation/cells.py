"""Run one graded test cell of a notebook against a (possibly mutated) reference solution, as nbgrader would.

The cell's code runs in a copy of the solution module's namespace (the notebook's imports, ``checks`` and the
learner's functions are all there), with ``AUTOGRADER_SEED`` set to the grading seed. A check's GradingFailure is the
verdict and propagates: the mutant is killed. Any other exception is a crash of the check: under a mutant it is
written to the crash log (``$MUTATION_CRASH_LOG``, one JSON line each) and the cell counts as passed, so that a
crash is reported as a bug and never counted as a kill; without a mutant (mutmut's clean and stats runs, the
sample test) it propagates, since the reference solution must never make a check crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import traceback
from types import ModuleType

from autograder.checking import GradingFailure
from autograder.seeding import SEED_VARIABLE

CRASH_LOG = "MUTATION_CRASH_LOG"


def active_mutant() -> str | None:
    """The mutant mutmut is testing in this process (None in its clean, stats and forced-fail runs)."""
    name = os.environ.get("MUTANT_UNDER_TEST", "")
    return name if "__mutmut_" in name else None


@contextlib.contextmanager
def grading_seed(seed: int):
    before = os.environ.get(SEED_VARIABLE)
    os.environ[SEED_VARIABLE] = str(seed)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SEED_VARIABLE, None)
        else:
            os.environ[SEED_VARIABLE] = before


def run_test_cell(solution: ModuleType, grade_id: str, source: str, seed: int) -> None:
    """Execute the test cell ``source`` against ``solution`` at ``seed``; raise GradingFailure if it fails."""
    namespace = dict(vars(solution), __name__="__main__")
    with grading_seed(seed):
        try:
            exec(compile(source, f"<{grade_id}>", "exec"), namespace)
        except GradingFailure:
            raise
        except Exception as error:
            mutant = active_mutant()
            if mutant is None or CRASH_LOG not in os.environ:
                raise
            record = {"mutant": mutant, "cell": grade_id, "seed": seed,
                      "error": f"{type(error).__name__}: {error}"[:500],
                      "where": traceback.format_exc(limit=-3)[-1500:]}
            with open(os.environ[CRASH_LOG], "a") as log:
                log.write(json.dumps(record) + "\n")
