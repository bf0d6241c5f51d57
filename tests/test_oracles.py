"""The gradient oracles agree with each other and with calculus; property-based over random inputs."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.oracles import as_float64, autograd_gradient, central_difference, forward_difference

finite = st.floats(min_value=-3, max_value=3, allow_nan=False, allow_infinity=False)
vectors = st.lists(finite, min_size=1, max_size=6).map(lambda v: torch.tensor(v, dtype=torch.float64))

SMOOTH = {
    "polynomial": lambda x: (x**3 - 2 * x**2 + x).sum(),
    "sin times x": lambda x: (torch.sin(x) * x).sum(),
    "log-sum-exp": lambda x: torch.logsumexp(x, dim=0),
    "tanh squared": lambda x: torch.tanh(x).sum() ** 2,
}


@settings(max_examples=60, deadline=None)
@given(x=vectors, name=st.sampled_from(sorted(SMOOTH)))
def test_central_difference_agrees_with_autograd(x, name):
    f = SMOOTH[name]
    (numerical,) = central_difference(f, x)
    (exact,) = autograd_gradient(f, x)
    torch.testing.assert_close(numerical, exact, rtol=1e-6, atol=1e-7)


@settings(max_examples=30, deadline=None)
@given(x=vectors)
def test_oracles_leave_inputs_untouched_and_return_float64(x):
    before = x.clone()
    grads = central_difference(lambda t: (t**2).sum(), x) + autograd_gradient(lambda t: (t**2).sum(), x)
    assert torch.equal(x, before)
    assert all(g.dtype == torch.float64 and g.shape == x.shape for g in grads)


@settings(max_examples=30, deadline=None)
@given(a=finite, b=finite)
def test_several_inputs_and_plain_numbers(a, b):
    f = lambda x, y: x * y + x  # noqa: E731
    assert [float(g) for g in central_difference(f, a, b)] == [float(g) for g in autograd_gradient(f, a, b)] or \
        all(math.isclose(float(n), float(e), rel_tol=1e-6, abs_tol=1e-7)
            for n, e in zip(central_difference(f, a, b), autograd_gradient(f, a, b)))


def test_numbers_become_float64_without_a_float32_detour():
    (x,) = as_float64(0.327)
    assert x.dtype == torch.float64 and x.item() == 0.327


def test_central_error_falls_like_h_squared_forward_like_h():
    f, x = (lambda t: torch.exp(t).sum()), torch.tensor([1.0], dtype=torch.float64)
    exact = math.e
    central = [abs(central_difference(f, x, h=h)[0].item() - exact) for h in (1e-2, 1e-3)]
    forward = [abs(forward_difference(f, x, h=h)[0].item() - exact) for h in (1e-2, 1e-3)]
    assert 80 < central[0] / central[1] < 120   # h ten times smaller: error 100 times smaller
    assert 8 < forward[0] / forward[1] < 12     # h ten times smaller: error 10 times smaller


def test_unused_input_gets_zero_gradient():
    grads = autograd_gradient(lambda x, y: (x**2).sum(), torch.ones(2), torch.ones(3))
    assert torch.equal(grads[1], torch.zeros(3, dtype=torch.float64))


def test_non_scalar_function_is_rejected():
    import pytest

    with pytest.raises(ValueError, match="scalar"):
        central_difference(lambda t: t * 2, torch.ones(2))
