"""Exercise 09: the traces show their defining events at every seed, and graph_bytes' measurement is right.

The hidden test of Part A trains every kind of run in ``KINDS`` from the grading seed; each must show its failure's
fingerprint (:data:`FINGERPRINTS`, with margins around the reference solution's thresholds), whatever the seed. The
byte count that Part B2 grades against is a measurement; here it is compared with what the architecture implies.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autograder.checks import ex09_wider_system as checks
from autograder.seeding import generator


@pytest.mark.parametrize("seed", [0, 1, 2, 914, 20261202])
def test_every_hidden_trace_shows_its_fingerprint(seed):
    gen = generator("09/diagnose", seed)
    for mode, variant in checks.KINDS:
        trace = checks.training_trace(mode, gen, variant)
        assert checks.FINGERPRINTS[mode, variant](trace), (seed, mode, variant)


def test_the_mid_run_bounce_is_a_fall_then_a_climb():
    for seed in range(6):
        trace = checks.training_trace("missing zero_grad", generator("09/bounce", seed))
        climb, fell_to = checks.bounce(trace)
        assert climb >= 4.0 and fell_to <= 0.5


def test_the_examples_and_visible_runs_are_fixed():
    assert checks.example_traces() == checks.example_traces()
    assert checks.training_trace("healthy", 3) == checks.training_trace("healthy", 3)


@pytest.mark.parametrize("activation", list(checks.ACTIVATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_graph_bytes_matches_the_architecture(activation, dtype):
    """The first Linear saves the inputs (their whole storage); each activation's output is saved once (by the
    activation and the next Linear: one storage); GELU also saves its input. Weights are parameters."""
    n, widths = 5, [3, 6, 4, 2]
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        layers += [checks.ACTIVATIONS[activation]()] if k else []
        layers.append(nn.Linear(n_in, n_out, dtype=dtype))
    model = nn.Sequential(*layers)
    batch = torch.randn(2 * n, widths[0], dtype=dtype)
    size = batch.element_size()
    hidden = sum(n * width * size for width in widths[1:-1]) * (2 if activation == "GELU" else 1)
    assert checks.graph_bytes_reference(model, batch[:n]) == batch.untyped_storage().nbytes() + hidden
    with torch.no_grad():
        assert checks.graph_bytes_reference(model, batch) == batch.untyped_storage().nbytes() + 2 * hidden
