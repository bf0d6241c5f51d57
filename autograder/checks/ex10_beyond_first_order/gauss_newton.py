"""Part A.1, second half: ``gnvp(net, loss, xs, vs)``, the Gauss-Newton matrix times a vector, G·v = Jᵀ H_ℓ J v, for
a network ``net`` of several tensors and a loss ``loss`` of its outputs; and :func:`check_hvp`, Part A.1's check, which
runs ``hvp`` first (:mod:`.hvp`) and ``gnvp`` then. Oracles: Jᵀ H_ℓ J v from autograd's full Jacobian and the loss's
full Hessian, and central finite differences in float64 (of the network along v, then of the loss's gradient along
that), taken back through the network by autograd."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...checking import GradingFailure, Routes, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...routes import LargestTensor
from ...seeding import uniform
from ..cases import case_stream, randint
from .hvp import Watched, _entries, _flat, _hvp_cases, _on_flat, _run_hvp, _split
from .misconceptions import (
    GN_IS_HESSIAN,
    GN_JACOBIAN,
    GN_LINEAR_LOSS,
    GN_NET_DIFFERENCES,
    GN_NO_LOSS_CURVATURE,
    TORCH_FUNC_HVP,
)

Tensor = torch.Tensor

#: The backward passes gnvp may run (the Jacobian row by row needs one per output, and every case has more).
GN_BUDGET = 5

LINEAR_NET = "X @ W.T + b"
TANH_NET = "tanh(X @ W.T + b)"
SCALED_NET = "s * tanh(X @ a)"
IGNORES_B = "tanh(X @ W.T)"  # of (W, b): b unused
NETS: dict[str, tuple[str, ...]] = {LINEAR_NET: ("W", "b"), TANH_NET: ("W", "b"), SCALED_NET: ("a", "s"),
                                    IGNORES_B: ("W", "b")}
MSE = "mean((z - Y)**2)"
CROSS_ENTROPY = "cross_entropy(z, targets)"
LINEAR_LOSS = "sum(C * z)"


def _net(name: str, X: Tensor) -> Callable[..., Tensor]:
    if name == LINEAR_NET:
        return lambda W, b: X @ W.T + b
    if name == TANH_NET:
        return lambda W, b: torch.tanh(X @ W.T + b)
    if name == SCALED_NET:
        return lambda a, s: s * torch.tanh(X @ a)
    return lambda W, b: torch.tanh(X @ W.T)


def _loss(name: str, target: Tensor) -> Callable[[Tensor], Tensor]:
    if name == MSE:
        return lambda z: ((z - target) ** 2).mean()
    if name == CROSS_ENTROPY:
        return lambda z: F.cross_entropy(z, target)
    return lambda z: (target * z).sum()


@dataclass
class GNCase:
    """One network of the tensors ``xs`` on data ``X``, one loss of its outputs (``target``: Y, the class indices or
    C), and the direction ``vs``."""

    net: str
    loss: str
    X: Tensor
    target: Tensor
    xs: list[Tensor]
    vs: list[Tensor]


def _case(gen: torch.Generator, net: str, loss: str, batch: int, inputs: int, outputs: int, *,
          zero_v: bool = False) -> GNCase:
    X = uniform(gen, (batch, inputs), -1.5, 1.5)
    args = NETS[net]
    shapes = {"W": (outputs, inputs), "b": (outputs,), "a": (inputs,), "s": ()}
    xs = [uniform(gen, shapes[a], -1.0, 1.0) for a in args]
    if net == SCALED_NET:
        xs[1] = xs[1].sign() * (0.5 + xs[1].abs())  # s away from 0: the outputs move with a
    vs = [torch.zeros(shapes[a], dtype=torch.float64) if zero_v else uniform(gen, shapes[a], -1.0, 1.0)
          for a in args]
    out_shape = (batch,) if net == SCALED_NET else (batch, outputs)
    if loss == CROSS_ENTROPY:
        target = torch.randint(outputs, (batch,), generator=gen)
    else:
        target = uniform(gen, out_shape, -1.0, 1.0)
    return GNCase(net, loss, X, target, xs, vs)


def gn_cases(grading_seed: int | None) -> list[GNCase]:
    """The corners (every seed), in this order: an affine network X @ W.T + b with a squared error (G = H there); a
    tanh layer with a squared error and with cross-entropy (G ≠ H); a loss linear in the outputs (G = 0, H ≠ 0);
    v = 0; a 0-d scalar tensor beside a vector; a network that ignores one of its tensors (zeros); a larger layer
    (104 numbers, 192 outputs), where the size of every tensor made is watched. Then one drawn case per network and
    loss."""
    fixed = torch.Generator().manual_seed(1011)
    corners = [
        _case(fixed, LINEAR_NET, MSE, 4, 3, 2),
        _case(fixed, TANH_NET, MSE, 4, 3, 2),
        _case(fixed, TANH_NET, CROSS_ENTROPY, 5, 3, 3),
        _case(fixed, TANH_NET, LINEAR_LOSS, 4, 3, 2),
        _case(fixed, TANH_NET, CROSS_ENTROPY, 4, 2, 3, zero_v=True),
        _case(fixed, SCALED_NET, MSE, 7, 4, 1),
        _case(fixed, IGNORES_B, CROSS_ENTROPY, 4, 3, 3),
        _case(fixed, TANH_NET, CROSS_ENTROPY, 24, 12, 8),
    ]
    gen = case_stream("10/gnvp", grading_seed)
    drawn = []
    for net in NETS:
        for loss in (MSE, CROSS_ENTROPY) if net != SCALED_NET else (MSE, LINEAR_LOSS):
            batch, inputs = randint(gen, 4, 7), randint(gen, 2, 4)
            outputs = 1 if net == SCALED_NET else randint(gen, 2, 4)
            drawn.append(_case(gen, net, loss, batch, inputs, outputs))
    return corners + drawn


def _jacobian(net: Callable, xs: list[Tensor]) -> Tensor:
    """The network's full Jacobian, outputs (flattened) by the numbers of xs (flattened): the oracle's, never the
    learner's."""
    flat_net = _on_flat(net, xs)
    jac = torch.autograd.functional.jacobian(lambda flat: flat_net(flat).reshape(-1), _flat(xs), vectorize=True)
    return jac.reshape(-1, sum(x.numel() for x in xs))


def _net_vjp(net: Callable, xs: list[Tensor], w: Tensor) -> Tensor:
    flat = _flat(xs).requires_grad_(True)
    out = _on_flat(net, xs)(flat)
    (back,) = torch.autograd.grad(out, flat, grad_outputs=w.reshape(out.shape), allow_unused=True)
    return torch.zeros_like(flat) if back is None else back


def _loss_gradient(loss: Callable, z: Tensor) -> Tensor:
    z = z.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(z), z, allow_unused=True)
    return torch.zeros_like(z) if g is None else g


def _oracles(net: Callable, loss: Callable, xs: list[Tensor], vs: list[Tensor], eps: float = 1e-5):
    """G·v from the full Jacobian and the loss's full Hessian; the same by central differences (of the network
    along v, then of the loss's gradient along that) taken back through the network; H·v of loss∘net; Jᵀ J v."""
    x, v = _flat(xs), _flat(vs)
    flat_net = _on_flat(net, xs)
    z = flat_net(x).detach()
    jac = _jacobian(net, xs)
    h_loss = torch.autograd.functional.hessian(lambda flat: loss(flat.reshape(z.shape)), z.reshape(-1),
                                               vectorize=True)
    jv = jac @ v
    expected = jac.T @ (h_loss @ jv)
    jv_fd = ((flat_net(x + eps * v) - flat_net(x - eps * v)) / (2 * eps)).detach()
    hjv_fd = (_loss_gradient(loss, z + eps * jv_fd) - _loss_gradient(loss, z - eps * jv_fd)) / (2 * eps)
    fd = _net_vjp(net, xs, hjv_fd)
    leaf = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(flat_net(leaf)), leaf, create_graph=True)
    whole = torch.autograd.grad((g * v).sum(), leaf)[0]  # H·v of loss(net(xs)): the lesson's product, a symptom
    return _split(expected, xs), _split(fd, xs), _split(whole, xs), _split(jac.T @ jv, xs)


def _run_gnvp(gnvp, case: GNCase) -> None:
    __tracebackhide__ = True
    args = NETS[case.net]
    net_true, loss_true = _net(case.net, case.X), _loss(case.loss, case.target)
    net = Watched(net_true, *case.xs)
    z_at = net_true(*case.xs).detach()
    loss = Watched(loss_true, z_at)
    n, outputs = sum(x.numel() for x in case.xs), z_at.numel()
    values = ", ".join(f"{a} = {fmt(x)}" for a, x in zip(args, case.xs))
    data = f"X of shape {tuple(case.X.shape)}"
    what = (f"gnvp(net, loss, xs, vs) for net({', '.join(args)}) = {case.net} ({data}, outputs z of shape "
            f"{tuple(z_at.shape)}), loss(z) = {case.loss}, at {values}, vs = [{', '.join(fmt(v) for v in case.vs)}]")
    routes = Routes()
    largest = LargestTensor() if n > 100 else None
    try:
        if largest is None:
            answer = call_learner(gnvp, net, loss, case.xs, case.vs, what=what, routes=routes)
        else:
            with largest:
                answer = call_learner(gnvp, net, loss, case.xs, case.vs, what=what, routes=routes)
    except GradingFailure as failure:
        text = failure.message
        if case.loss == LINEAR_LOSS and ("does not require grad" in text or "not have been used in the graph" in text):
            raise GradingFailure(text, proven=GN_LINEAR_LOSS) from None
        raise
    runs = routes.backward_runs
    if net.transformed or loss.transformed:
        raise _proven(f"{what} ran net or loss under a torch.func transform.", TORCH_FUNC_HVP)
    if net.elsewhere:
        raise _proven(f"{what} evaluated net at {net.elsewhere} point(s) other than xs.", GN_NET_DIFFERENCES)
    if loss.elsewhere:
        raise _proven(f"{what} evaluated loss at {loss.elsewhere} point(s) other than z = net(*xs).",
                      GN_NET_DIFFERENCES)
    if largest is not None and largest.numel >= n * min(n, outputs):
        raise _proven(f"{what} made a tensor of shape {largest.shape} ({largest.numel:,} entries) for {n} numbers "
                      f"and {outputs} outputs: a Jacobian or a Hessian, which products never need.", GN_JACOBIAN)
    if runs > GN_BUDGET:  # a Jacobian row by row costs a pass per output (column by column one per number): only
        # the large case tells that apart from a few passes too many (per tensor, say), which its count names
        counted = (f"{what} ran {runs} backward passes for {n} numbers in {len(args)} tensors and {outputs} outputs; "
                   f"the part allows {GN_BUDGET}, whatever the sizes.")
        if largest is not None and runs >= min(n, outputs):
            raise _proven(counted, GN_JACOBIAN)
        raise GradingFailure(counted)
    entries = _entries(answer, case.xs, args, set(), what)
    expected, fd, whole, no_curvature = _oracles(net_true, loss_true, case.xs, case.vs)
    for i, (entry, arg) in enumerate(zip(entries, args)):
        symptoms = [GN_IS_HESSIAN.looks_like(whole[i]), GN_NO_LOSS_CURVATURE.looks_like(no_curvature[i])]
        expect_close(entry, expected[i], what=f"{what}: entry {i} (G·v for {arg})", fd=fd[i], rtol=1e-6, atol=1e-9,
                     source="autograd's full Jacobian J and the loss's Hessian H_ℓ, Jᵀ H_ℓ J v",
                     extra=f"  (finite difference here: of net along v, then of the loss's gradient along that, "
                     f"taken back through net; H·v of loss(net(xs)) here: {fmt(whole[i])}; {runs} backward passes "
                     "ran)", symptoms=symptoms)


@check
def check_hvp(hvp, gnvp, grading_seed: int | None = None) -> None:
    """Part A.1: hvp(f, xs, vs) = H·v for a scalar function f of several tensors, split like xs, differentiable with
    respect to the tensors of xs that require grad; then gnvp(net, loss, xs, vs) = Jᵀ H_ℓ J v, the Gauss-Newton
    matrix of loss(net(xs)) times v, split like xs.

    hvp's domain: ``f`` a smooth scalar function of m >= 1 float64 tensors (any shapes: vectors, matrices, a 0-d scalar;
    any signs, zero included), possibly linear in some or all of them; ``xs`` a list of those tensors, each frozen
    (requires_grad False) or requiring grad (an nn.Parameter, or a non-leaf with a graph behind it); ``vs`` a list of
    float64 tensors shaped like xs (zero included), frozen or requiring grad in the same two ways. Corners at every
    seed: one tensor of one element, a matrix with a vector, a 0-d scalar, x = 0, v = 0, a bilinear f (only cross
    terms), an f linear in one tensor (a zero entry), an f linear in all (all zeros), an f that ignores one tensor (a
    zero entry); then, with tensors requiring grad: a parameter beside a frozen input, two non-leaves, a tensor f is
    linear in, a non-leaf beside a frozen matrix f ignores, f linear in two parameters, one tensor alone; directions
    requiring grad beside a parameter, with every tensor of xs frozen (twice), and for an f linear in frozen tensors.
    Contract (the part's text): at most two reverse passes (the full Hessian is named when the count shows it); f
    evaluated at xs only; no torch.func (forward-over-reverse with torch.autograd.forward_ad allowed when its result
    meets the contract); xs and vs unchanged (values, requires_grad, .grad, grad_fn); a list (or tuple) of m float64
    tensors shaped like xs; zeros, not None, where f's gradient does not depend on a tensor; entry i is Σ_j H_ij v_j
    (cross terms included); no graph when no tensor of xs or vs requires grad, and otherwise the derivative of Σ_i ⟨c_i,
    (Hv)_i⟩ with respect to each tensor of xs that requires grad is f's third derivative D³f[v, c, ·] (autograd three
    times over, and central differences of H·v), and with respect to each tensor of vs that requires grad H c.

    gnvp's domain: ``net`` a smooth function of m >= 1 float64 tensors (vectors, matrices, a 0-d scalar) returning a
    tensor z of any shape (a batch of outputs), possibly linear in its tensors or ignoring one; ``loss`` a smooth
    scalar function of z (a squared error, cross-entropy, or linear in z: then G = 0); ``vs`` shaped like xs (zero
    included). Corners at every seed: an affine net (G = H), a tanh layer with squared error and with cross-entropy,
    a linear loss (all zeros), v = 0, a 0-d tensor, a net that ignores a tensor (zeros), 104 numbers with 192 outputs
    (sizes watched). Contract: at most 5 backward passes; never a Jacobian or Hessian (no tensor of n·min(n, outputs)
    entries, and no pass count of min(n, outputs), watched on the large case: only there is a Jacobian named); net
    evaluated at xs only and loss at net(xs) only; no torch.func (dual numbers of torch.autograd.forward_ad
    allowed); xs and vs unchanged; a list (or tuple) of m float64 tensors shaped like xs without a graph.
    """
    __tracebackhide__ = True
    for name, xs, vs, trained, directions in _hvp_cases(grading_seed):
        with trial():
            _run_hvp(hvp, name, xs, vs, trained, directions)
    for case in gn_cases(grading_seed):
        with trial():
            _run_gnvp(gnvp, case)
