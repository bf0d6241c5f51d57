"""Part C.2: ``silu_backward(x, dy)``, SiLU's backward derived by the learner (Part E's given backward calls it; its
cases are :mod:`.silu`'s), then a residual block the lesson never takes apart, y = x + silu(x·W1 + b1)·W2 + b2, split
as an engine splits a node: ``residual_forward(x, W1, b1, W2, b2)`` returns ``(y, saved)``, and
``residual_backward(saved, dy)`` returns the five gradients from ``saved`` alone. The input reaches the output by two
routes, the skip and the branch, and the part grades what the backward keeps, as autograd's saved tensors would:
``saved`` may hold the inputs (the caller keeps them anyway) and at most N·H new numbers, and the backward may not
run the forward's product x·W1 again. Lesson 11 saved tanh's output; SiLU's output does not determine its input, and
σ(u) loses u where it saturates, so the one N×H tensor that serves both SiLU's derivative and W2's gradient is the
pre-activation: the learner has to find that, and the corners (pre-activations ±40) grade it."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ...checking import GradingFailure, Route, call_learner, check, expect_close, expect_tensor, trial
from ...checking import proven_failure as _proven
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BRANCH_FORGOTTEN,
    FORWARD_RECOMPUTED,
    PRE_ACTIVATION_READ,
    PRODUCT_RULE_HALF,
    READ_OUTSIDE_SAVED,
    SAVED_TOO_MUCH,
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


aten = torch.ops.aten
#: aten's matrix-product kernels: x @ W1, torch.mm, einsum, F.linear... all end in one of them.
PRODUCTS = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.addbmm, aten.mv, aten.addmv, aten.dot, aten.vdot}


class _Products(TorchDispatchMode):
    """A copy of what every matrix product returns while the mode is on."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket in PRODUCTS and isinstance(out, Tensor):
            self.outputs.append(out.detach().clone())
        return out


def _same_numbers(a: Tensor, b: Tensor) -> bool:
    """The same multiset of numbers, whatever the layout (a transposed recomputation counts too)."""
    return a.numel() == b.numel() and a.numel() > 0 and bool(torch.allclose(
        a.reshape(-1).sort().values.to(b.dtype), b.reshape(-1).sort().values, rtol=1e-9, atol=1e-12))


def _new_numbers(saved: tuple, inputs: tuple[Tensor, ...]) -> tuple[int, list[str]]:
    """How many numbers ``saved`` holds in memory of its own (an input's storage, or a view of it, costs nothing: the
    caller keeps the inputs anyway), counted per storage, and a description of each new tensor."""
    free = {t.untyped_storage().data_ptr() for t in inputs}
    seen, count, described = set(), 0, []
    for i, tensor in enumerate(saved):
        storage = tensor.untyped_storage()
        if storage.data_ptr() in free or storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        numbers = storage.nbytes() // max(tensor.element_size(), 1)
        count += numbers
        described.append(f"saved[{i}] {tuple(tensor.shape)} ({numbers} numbers)")
    return count, described


def _run_residual(residual_forward_, residual_backward, args: tuple[Tensor, ...], note: str) -> None:
    __tracebackhide__ = True
    x, W1, b1, W2, b2, dy = args
    inputs = (x, W1, b1, W2, b2)
    shapes = f"x {tuple(x.shape)}, W1 {tuple(W1.shape)}, W2 {tuple(W2.shape)}{note}"
    what = f"residual_forward(x, W1, b1, W2, b2) with {shapes}"
    answer = call_learner(residual_forward_, *inputs, what=what, forbid=[Route.AUTOGRAD])
    if not isinstance(answer, (tuple, list)) or len(answer) != 2 or not isinstance(answer[1], (tuple, list)):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a pair (y, saved), saved a tuple of tensors.")
    y, saved = answer[0], tuple(answer[1])
    expect_close(expect_tensor(y, f"{what}: y", tuple(x.shape)), residual_forward(*inputs), what=f"{what}: y",
                 source="expected")
    strays = [f"saved[{i}] is {type(t).__name__}" for i, t in enumerate(saved) if type(t) is not torch.Tensor]
    if strays:
        raise GradingFailure(f"{what}: {'; '.join(strays)}; saved must hold plain tensors only (the numbers the "
                             "backward needs, counted against the budget).")
    new, described = _new_numbers(saved, inputs)
    budget = x.shape[0] * W1.shape[1]
    products = _Products()
    back = f"residual_backward(saved, dy) with {shapes}"
    with products:
        got_all = call_learner(residual_backward, saved, dy, what=back, forbid=[Route.AUTOGRAD])
    if not isinstance(got_all, (tuple, list)) or len(got_all) != len(NAMES):
        raise GradingFailure(f"{back} returned {got_all!r:.80}; expected a tuple (dx, dW1, db1, dW2, db2).")
    got = {name: expect_tensor(value, f"{back}: {name}", tuple(of.shape))
           for name, value, of in zip(NAMES, got_all, inputs)}
    _expect_saved_alone(residual_forward_, residual_backward, inputs, saved, dy, got, back)

    def weighted(*values):
        return (residual_forward(*values) * dy).sum()

    expected = dict(zip(NAMES, autograd_gradient(weighted, *inputs)))
    fds = dict(zip(NAMES, central_difference(weighted, *inputs)))
    variants = {name: residual_gradients(*args, mistake=name) for name in MISTAKES}
    for name in ("db2", "dW2", "db1", "dW1", "dx"):  # from the output down: the first wrong one leads
        expect_close(got[name], expected[name], fd=fds[name], what=f"{back}: {name}",
                     symptoms=[mistake.looks_like(variants[key][name]) for key, mistake in MISTAKES.items()])
    if new > budget:
        raise _proven(f"{what} saved {new} numbers of its own ({', '.join(described)}) where the budget is N·H = "
                      f"{budget}; the inputs themselves cost nothing.", SAVED_TOO_MUCH)
    product = x @ W1
    again = [out for out in products.outputs if _same_numbers(out, product) or _same_numbers(out, product + b1)]
    if again:
        raise _proven(f"{back} computed the forward's product x·W1 {tuple(product.shape)} again "
                      f"({len(products.outputs)} matrix products in all).", FORWARD_RECOMPUTED)


def _expect_saved_alone(residual_forward_, residual_backward, inputs: tuple[Tensor, ...], saved: tuple, dy: Tensor,
                        got: dict[str, Tensor], back: str) -> None:
    """The backward again on the same saved and dy, after a forward on another case of the same shapes: a backward
    that reads only saved and dy gives the same gradients."""
    __tracebackhide__ = True
    x, W1, b1, W2, b2 = inputs
    other = (0.5 - x.flip(0), -W1, b1 + 0.25, W2.flip(0), -b2)
    call_learner(residual_forward_, *other, what=f"residual_forward on another case of the same shapes, between "
                 f"the forward and {back}", forbid=[Route.AUTOGRAD])
    again = call_learner(residual_backward, saved, dy, what=f"{back}, once more, after that other forward",
                         forbid=[Route.AUTOGRAD])
    changed = [name for name, value in zip(NAMES, again if isinstance(again, (tuple, list)) else ())
               if not (isinstance(value, Tensor) and value.shape == got[name].shape
                       and torch.allclose(value, got[name], rtol=1e-12, atol=0.0))]
    if changed or not isinstance(again, (tuple, list)) or len(again) != len(NAMES):
        raise _proven(f"{back} gave other gradients ({', '.join(changed) or 'another result'}) for the same saved "
                      "and dy once residual_forward had run on another case (x flipped and shifted, the weights "
                      "negated) in between.", READ_OUTSIDE_SAVED)


@check
def check_residual_backward(residual_forward_, residual_backward, silu_backward,
                            grading_seed: int | None = None) -> None:
    """Part C.2: silu_backward(x, dy) = dy · d(x·σ(x))/dx (the cases of :mod:`.silu`), then the residual block
    y = x + silu(x·W1 + b1)·W2 + b2 split in two: residual_forward(x, W1, b1, W2, b2) returns (y, saved), and
    residual_backward(saved, dy) the gradients (dx, dW1, db1, dW2, db2) of sum(dy · y), by hand (no autograd), from
    saved alone; the inputs unchanged.

    Domain (the part's text): x and dy float64 (N, D), W1 (D, H), b1 (H,), W2 (H, D), b2 (D,), N, D, H >= 1, any
    values. Corners pinned at every seed: a batch of one; a branch that starts at zero (W2 = 0, b2 = 0: dx = dy, and
    W1 and b1 get no gradient); D = H = 1 with pre-activations 40, 0, -40 and 10 (SiLU and σ saturated: σ(40) is 1
    in float64, so u cannot be rebuilt from σ(u)) and a zero in dy. Contracts checked: y right; saved a tuple of plain
    tensors holding at most N·H numbers in memory of their own (an input, or a view of one, is free; counted per
    storage, so a float32 copy costs as many numbers as a float64 one); five plain tensors shaped like x, W1, b1,
    W2, b2, against autograd and central differences in float64; no matrix product in the backward that returns
    x·W1 (or x·W1 + b1) again; the backward reads saved and dy alone (run again, same saved and dy, after a forward
    on another case of the same shapes: the same gradients); no autograd; the inputs (and saved, in the backward)
    unchanged.
    """
    __tracebackhide__ = True
    for x, dy in _silu_cases(grading_seed):
        with trial():
            _run_silu(silu_backward, x, dy)
    for args, note in _residual_cases(grading_seed):
        with trial():
            _run_residual(residual_forward_, residual_backward, args, note)
