"""Where hidden tests get their randomness.

Hidden tests draw fresh cases from a seed that the instructor chooses at grading time, so that reading the public
test code is not enough to hard-code answers::

    AUTOGRADER_SEED=914 nbgrader autograde 01-chain-rule

A hidden test cell passes :func:`grading_seed` to its check (``check_x(fn, grading_seed=grading_seed())``); a visible
one passes nothing, and the check runs its public cases. Without the variable the grading seed is
:data:`DEFAULT_SEED`, so CI and a learner's own runs are deterministic. Each check draws from its own named stream
(:func:`autograder.checks.cases.case_stream`, built on :func:`generator`), so adding a test never changes the cases
another test sees.
"""

from __future__ import annotations

import os
import zlib

import torch

SEED_VARIABLE = "AUTOGRADER_SEED"
DEFAULT_SEED = 20261202


def grading_seed() -> int:
    """The seed for hidden tests: ``$AUTOGRADER_SEED`` if set (an integer), else :data:`DEFAULT_SEED`."""
    raw = os.environ.get(SEED_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_SEED
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE} must be an integer, got {raw!r}") from None


def generator(stream: str, seed: int) -> torch.Generator:
    """A torch.Generator for one named stream of cases, derived from ``seed`` (a grading seed, or a fixed number)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(stream.encode())) % 2**63)


def uniform(gen: torch.Generator, shape: tuple[int, ...] = (), low: float = -2.0, high: float = 2.0) -> torch.Tensor:
    """Float64 numbers uniform in [low, high), drawn from ``gen``."""
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=torch.float64)


def choice(gen: torch.Generator, options: list):
    """One element of ``options``, drawn from ``gen``."""
    return options[int(torch.randint(len(options), (), generator=gen))]
