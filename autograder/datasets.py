"""The course's data sets, for lessons and exercises alike: two moons generated in code, and the handwritten digits
shipped in ``autograder/data`` (its README gives the source and the licence).

Every function draws from a generator seeded by its caller, so that a lesson, an exercise and its tests see the same
points for the same seed.
"""

from __future__ import annotations

import functools
import gzip
import math
from pathlib import Path

import numpy as np
import torch

Tensor = torch.Tensor
DATA = Path(__file__).resolve().parent / "data"


def make_moons(count: int, seed: int, noise: float = 0.1) -> tuple[list[list[float]], list[int]]:
    """Two interleaving half circles in the plane, ``count`` points, labels 0 and 1 (as plain Python lists)."""
    gen = torch.Generator().manual_seed(seed)
    labels = (torch.arange(count) % 2)[torch.randperm(count, generator=gen)]
    angle = math.pi * torch.rand(count, generator=gen, dtype=torch.float64)
    upper = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1)
    lower = torch.stack([1 - torch.cos(angle), 0.5 - torch.sin(angle)], dim=1)
    points = torch.where(labels[:, None] == 0, upper, lower)
    points = points + noise * torch.randn(count, 2, generator=gen, dtype=torch.float64)
    return points.tolist(), labels.tolist()


def load_digits() -> tuple[Tensor, Tensor]:
    """The 1797 handwritten digits: pixels scaled to [0, 1] as a (1797, 64) float64 tensor, labels (1797,) int64."""
    with gzip.open(DATA / "digits.csv.gz", "rt") as file:
        table = np.loadtxt(file, delimiter=",")
    return torch.from_numpy(table[:, :64] / 16.0), torch.from_numpy(table[:, 64]).long()


@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    """The digits, read once a process (:func:`digits_split` hands out fresh tensors indexed from them)."""
    return load_digits()


def digits_split(seed: int, test_fraction: float = 0.2) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(X_train, y_train, X_test, y_test): a random split of the digits drawn from ``seed`` (fresh tensors)."""
    X, y = _digits()
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    cut = int(len(y) * (1 - test_fraction))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]
