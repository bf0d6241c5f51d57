"""Part C.2: ``silu_backward(x, dy)``, SiLU's backward derived by the learner (Part E's given backward calls it; its
cases are :mod:`.silu`'s), then ``residual_backward(x, W1, b1, W2, b2, dy)``, the backward of a residual block the
lesson never takes apart, y = x + silu(x·W1 + b1)·W2 + b2, by hand: the input reaches the output by two routes, the
skip and the branch, and the branch is built of the exercise's pieces (two linear layers and SiLU)."""

from __future__ import annotations

import torch

from ...checking import GradingFailure, Route, call_learner, check, expect_close, expect_tensor, trial
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BRANCH_FORGOTTEN,
    PRE_ACTIVATION_READ,
    PRODUCT_RULE_HALF,
    SIGMOID_DERIVATIVE,
    SILU_AT_OUTPUT,
    SKIP_FORGOTTEN,
    TANH_RULE_PORTED,
)
from .silu import _run_silu, _silu_cases, silu

Tensor = torch.Tensor

#: The names of the five gradients, in the order residual_backward returns them.
NAMES = ("dx", "dW1", "db1", "dW2", "db2")


def residual_forward(x: Tensor, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor) -> Tensor:
    return x + silu(x @ W1 + b1) @ W2 + b2


def _silu_derivatives(u: Tensor) -> dict[str, Tensor]:
    """SiLU's derivative at u, and what each catalogued slip computes instead."""
    s, h = torch.sigmoid(u), silu(u)
    at_h = torch.sigmoid(h)
    return {"right": s * (1 + u * (1 - s)), "sigmoid derivative": s * (1 - s), "sigma only": s,
            "at output": at_h * (1 + h * (1 - at_h)), "tanh rule": 1 - h ** 2}


#: Each catalogued mistake: the misconception it shows, and how its gradients differ from the right ones.
MISTAKES = {"skip forgotten": SKIP_FORGOTTEN, "branch forgotten": BRANCH_FORGOTTEN,
            "sigmoid derivative": SIGMOID_DERIVATIVE, "sigma only": PRODUCT_RULE_HALF, "at output": SILU_AT_OUTPUT,
            "tanh rule": TANH_RULE_PORTED, "pre-activation read": PRE_ACTIVATION_READ}


def residual_gradients(x: Tensor, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor, dy: Tensor,
                       mistake: str | None = None) -> dict[str, Tensor]:
    """The five gradients by hand, or what the catalogued ``mistake`` (a key of :data:`MISTAKES`) computes."""
    u = x @ W1 + b1
    h = silu(u)
    derivative = _silu_derivatives(u).get(mistake, _silu_derivatives(u)["right"])
    dh = dy @ W2.T
    du = dh * derivative
    branch = du @ W1.T
    dx = {"skip forgotten": branch, "branch forgotten": dy}.get(mistake, dy + branch)
    read = u if mistake == "pre-activation read" else h
    return {"dx": dx, "dW1": x.T @ du, "db1": du.sum(0), "dW2": read.T @ dy, "db2": dy.sum(0)}


def _case(gen: torch.Generator, n: int, d: int, hidden: int, *, scale: float = 1.0):
    return (uniform(gen, (n, d), -2, 2), scale * uniform(gen, (d, hidden), -1, 1), uniform(gen, (hidden,), -0.5, 0.5),
            uniform(gen, (hidden, d), -1, 1), uniform(gen, (d,), -0.5, 0.5), uniform(gen, (n, d), -1, 1))


def _residual_cases(grading_seed: int | None) -> list[tuple[tuple[Tensor, ...], str]]:
    """Corners at every seed, then the visible case or two drawn ones."""
    gen = case_stream("11/residual", grading_seed)
    f64 = dict(dtype=torch.float64)
    one = _case(gen, 1, 3, 4)
    zero = _case(gen, 4, 3, 2)
    zero = (*zero[:3], torch.zeros_like(zero[3]), torch.zeros_like(zero[4]), zero[5])
    x = torch.tensor([[2.0], [0.0], [-2.0], [0.5]], **f64)                       # u = 20x: 40, 0, -40, 10
    saturated = (x, torch.tensor([[20.0]], **f64), torch.zeros(1, **f64), torch.tensor([[-0.75]], **f64),
                 torch.tensor([0.25], **f64), torch.tensor([[1.0], [-0.5], [2.0], [0.0]], **f64))
    cases = [(one, ", a batch of one"), (zero, ", a branch that starts at zero (W2 = 0, b2 = 0)"),
             (saturated, ", D = H = 1, pre-activations 40, 0, -40 and 10")]
    if grading_seed is None:
        return cases + [(_case(gen, 5, 3, 4), "")]
    return cases + [(_case(gen, randint(gen, 2, 7), randint(gen, 1, 4), randint(gen, 1, 5)), "") for _ in range(2)]


def _run_residual(residual_backward, args: tuple[Tensor, ...], note: str) -> None:
    __tracebackhide__ = True
    x, W1, b1, W2, b2, dy = args
    what = (f"residual_backward(x, W1, b1, W2, b2, dy) with x {tuple(x.shape)}, W1 {tuple(W1.shape)}, "
            f"W2 {tuple(W2.shape)}{note}")
    answer = call_learner(residual_backward, *args, what=what, forbid=[Route.AUTOGRAD])
    if not isinstance(answer, (tuple, list)) or len(answer) != len(NAMES):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a tuple (dx, dW1, db1, dW2, db2).")
    inputs = (x, W1, b1, W2, b2)
    got = {name: expect_tensor(value, f"{what}: {name}", tuple(of.shape))
           for name, value, of in zip(NAMES, answer, inputs)}

    def weighted(*values):
        return (residual_forward(*values) * dy).sum()

    expected = dict(zip(NAMES, autograd_gradient(weighted, *inputs)))
    fds = dict(zip(NAMES, central_difference(weighted, *inputs)))
    variants = {name: residual_gradients(*args, mistake=name) for name in MISTAKES}
    for name in ("db2", "dW2", "db1", "dW1", "dx"):  # from the output down: the first wrong one leads
        expect_close(got[name], expected[name], fd=fds[name], what=f"{what}: {name}",
                     symptoms=[mistake.looks_like(variants[key][name]) for key, mistake in MISTAKES.items()])


@check
def check_residual_backward(residual_backward, silu_backward, grading_seed: int | None = None) -> None:
    """Part C.2: silu_backward(x, dy) = dy · d(x·σ(x))/dx (the cases of :mod:`.silu`), then
    residual_backward(x, W1, b1, W2, b2, dy) = the gradients (dx, dW1, db1, dW2, db2) of
    sum(dy · y) for y = x + silu(x·W1 + b1)·W2 + b2, by hand (no autograd), the inputs unchanged.

    Domain (the part's text): x and dy float64 (N, D), W1 (D, H), b1 (H,), W2 (H, D), b2 (D,), N, D, H >= 1, any
    values. Corners pinned at every seed: a batch of one; a branch that starts at zero (W2 = 0, b2 = 0: dx = dy, and
    W1 and b1 get no gradient); D = H = 1 with pre-activations 40, 0, -40 and 10 (SiLU saturated and at 0) and a
    zero in dy. Contracts checked: a tuple of five plain tensors shaped like x, W1, b1, W2, b2; against autograd and
    central differences in float64; no autograd; the inputs unchanged.
    """
    __tracebackhide__ = True
    for x, dy in _silu_cases(grading_seed):
        with trial():
            _run_silu(silu_backward, x, dy)
    for args, note in _residual_cases(grading_seed):
        with trial():
            _run_residual(residual_backward, args, note)
