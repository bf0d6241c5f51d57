"""Part B of exercise 07: per_example_clip(model, loss_fn, x, y, max_norm), each example's gradient clipped by its
own global norm (over all parameters), then averaged over the batch: the clipping of DP-SGD, in one forward pass, at
most two backward passes and without ever holding the per-example gradients (Goodfellow's trick: example i's weight
gradient of a Linear is the outer product g_i a_iᵀ of the gradient at its output and its input, whose norm is
‖g_i‖ ‖a_i‖). The lesson's loop of a backward pass per example fails the count; lesson 10's vmap(grad) fails the
memory bound, measured by a dispatch mode that sees every tensor an operation returns. Oracles: every example's
gradient by autograd and by float64 central differences, clipped and averaged by the same formula; the symptoms are
what each catalogued mistake makes of those per-example gradients."""

from __future__ import annotations

import copy
import functools

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from ...checking import GradingFailure, Routes, as_answer, call_learner, check, expect_close, proven_failure, trial
from ...contracts import CHANGED_INPUT
from ...oracles import autograd_gradient, central_difference
from ...routes import TORCH_EXITS, CallWatch, LargestTensor
from ...seeding import choice, generator, uniform
from ..cases import randint
from .hooks import GLOBAL_HOOK_DICTS, _hooks_left
from .misconceptions import (
    BATCH_CLIPPED,
    BIAS_NOT_IN_NORM,
    CLIPPED_BELOW,
    FIRST_PASS_LEFT,
    FORWARD_PER_EXAMPLE,
    HOOKS_LEFT,
    LOOPED_BACKWARD,
    NO_EPS,
    NO_SQRT,
    NORM_AFTER,
    PER_EXAMPLE_HELD,
    PER_LAYER,
    PER_TENSOR,
    SHARE_CLIPPED,
    SUMMED,
    TENSOR_NORMS_ADDED,
)

EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ divides by total_norm + 1e-6
MAX_BACKWARD = 2  # the part's contract: at most two backward passes, whatever the batch size


def squared_error(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One loss per example: the squared error summed over the outputs."""
    return ((out - y) ** 2).sum(dim=1)


def cross_entropy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One loss per example: cross-entropy against class indices."""
    return F.cross_entropy(out, y, reduction="none")


def _per_example_gradients(model: nn.Module, loss_fn, x: torch.Tensor, y: torch.Tensor):
    """(autograd, central differences): B × P matrices whose row i is example i's gradient over all parameters,
    flattened in model.parameters() order."""
    names, values = zip(*[(name, p.detach().clone()) for name, p in model.named_parameters()])
    rows_autograd, rows_fd = [], []
    for i in range(x.shape[0]):
        def loss_i(*params, i=i):
            return loss_fn(functional_call(model, dict(zip(names, params)), (x,)), y)[i]
        rows_autograd.append(torch.cat([g.reshape(-1) for g in autograd_gradient(loss_i, *values)]))
        rows_fd.append(torch.cat([g.reshape(-1) for g in central_difference(loss_i, *values)]))
    return torch.stack(rows_autograd), torch.stack(rows_fd)


def _factors(norms: torch.Tensor, max_norm: float, eps: float = EPS) -> torch.Tensor:
    return torch.clamp(max_norm / (norms + eps), max=1.0)


def clipped_mean(grads: torch.Tensor, max_norm: float) -> torch.Tensor:
    """The answer: the mean over examples of each row scaled by min(1, max_norm / (its norm + 1e-6))."""
    return (grads * _factors(grads.norm(dim=1), max_norm)[:, None]).mean(dim=0)


def _pieces(grads: torch.Tensor, model: nn.Module):
    """(name, columns of ``grads``) for every parameter, in model.parameters() order."""
    named = list(model.named_parameters())
    return list(zip([name for name, _ in named], grads.split([p.numel() for _, p in named], dim=1)))


def _layer_norms(grads: torch.Tensor, model: nn.Module) -> dict[str, torch.Tensor]:
    """Each example's norm over one layer's parameters (its weight and bias together), by layer."""
    squares: dict[str, torch.Tensor] = {}
    for name, piece in _pieces(grads, model):
        layer = name.rpartition(".")[0]
        squares[layer] = squares.get(layer, 0) + (piece ** 2).sum(dim=1)
    return {layer: total.sqrt() for layer, total in squares.items()}


def _norm_symptoms(grads: torch.Tensor, model: nn.Module, max_norm: float) -> list:
    """What the catalogued mistakes make of the returned norms."""
    norms = grads.norm(dim=1)
    pieces = _pieces(grads, model)
    weights_only = torch.cat([p for name, p in pieces if not name.endswith("bias")], dim=1)
    return [NORM_AFTER.looks_like(norms * _factors(norms, max_norm)),
            NORM_AFTER.looks_like(norms.clamp(max=max_norm)),
            NO_SQRT.looks_like(norms ** 2),
            BIAS_NOT_IN_NORM.looks_like(weights_only.norm(dim=1)),
            TENSOR_NORMS_ADDED.looks_like(sum(p.norm(dim=1) for _, p in pieces)),
            TENSOR_NORMS_ADDED.looks_like(sum(_layer_norms(grads, model).values())),
            SHARE_CLIPPED.looks_like(norms / grads.shape[0]),
            BATCH_CLIPPED.looks_like(grads.mean(dim=0).norm().expand(grads.shape[0]))]


def _symptoms(grads: torch.Tensor, model: nn.Module, max_norm: float) -> list:
    """What the catalogued mistakes make of the .grad, once the norms are right."""
    batch = grads.shape[0]
    norms = grads.norm(dim=1)
    mean = grads.mean(dim=0)
    pieces = _pieces(grads, model)
    per_tensor = torch.cat([p * _factors(p.norm(dim=1), max_norm)[:, None] for _, p in pieces], dim=1).mean(dim=0)
    layer_norms = _layer_norms(grads, model)
    per_layer = torch.cat([p * _factors(layer_norms[name.rpartition(".")[0]], max_norm)[:, None]
                           for name, p in pieces], dim=1).mean(dim=0)
    weights_only = torch.cat([p for name, p in pieces if not name.endswith("bias")], dim=1)
    tensor_norms = sum(p.norm(dim=1) for _, p in pieces)
    right = clipped_mean(grads, max_norm)

    def scaled(by: torch.Tensor) -> torch.Tensor:
        return (grads * by[:, None]).mean(dim=0)

    return [BATCH_CLIPPED.looks_like(mean * _factors(mean.norm(), max_norm)),
            PER_TENSOR.looks_like(per_tensor),
            PER_LAYER.looks_like(per_layer),
            FIRST_PASS_LEFT.looks_like(grads.sum(dim=0) + right),
            FIRST_PASS_LEFT.looks_like(mean + right),
            SHARE_CLIPPED.looks_like(scaled(_factors(norms / batch, max_norm))),
            SUMMED.looks_like(batch * right),
            CLIPPED_BELOW.looks_like(scaled(max_norm / (norms + EPS))),
            BIAS_NOT_IN_NORM.looks_like(scaled(_factors(weights_only.norm(dim=1), max_norm))),
            TENSOR_NORMS_ADDED.looks_like(scaled(_factors(tensor_norms, max_norm))),
            NO_EPS.looks_like(scaled(_factors(norms, max_norm, eps=0.0)), rtol=1e-9, atol=1e-12)]


def _mlp(gen: torch.Generator, sizes: tuple[int, ...], activation: type[nn.Module], gain: float,
         biases: tuple[bool, ...] | None = None) -> nn.Module:
    """Linear layers of the given sizes, the activation between them; ``biases`` says which layers have one."""
    biases = biases or (True,) * (len(sizes) - 1)
    layers: list[nn.Module] = []
    for k, bias in enumerate(biases):
        layers += [nn.Linear(sizes[k], sizes[k + 1], bias=bias), activation()]
    model = nn.Sequential(*layers[:-1]).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(gain * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return model


def _corners():
    """Run at every seed: the hand example (one weight, norms 2 and 200); one example (per-example clipping is the
    batch's clipping); every example below max_norm (nothing is clipped: the plain mean gradient); an example the model
    already fits exactly (its gradient is exactly zero); two batches of small gradients (norms of 1e-4 to 1e-1, where
    the formula's + 1e-6 shows)."""
    line = nn.Linear(1, 1, bias=False).double()
    with torch.no_grad():
        line.weight.fill_(1.0)
    t = torch.tensor
    yield ("the hand example (one weight 1, x = (1, 10), targets 0, squared error)", line, squared_error,
           t([[1.0], [10.0]], dtype=torch.float64), t([[0.0], [0.0]], dtype=torch.float64), 5.0)
    gen = torch.Generator().manual_seed(7)
    model = _mlp(gen, (3, 4, 2), nn.Tanh, 0.8)
    x = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    y = torch.randn(4, 2, generator=gen, dtype=torch.float64)
    yield "one example", model, squared_error, x[:1], y[:1], 0.5
    yield "every example below max_norm", model, squared_error, x, y, 1e3
    with torch.no_grad():
        fitted = y.clone()
        fitted[2] = model(x[2:3])[0]
    yield "an example the model fits exactly (its gradient is zero)", model, squared_error, x, fitted, 0.7
    yield ("small gradients (one weight 1, x = (0.01, 0.1, 0.07), targets 0, squared error)", line, squared_error,
           t([[0.01], [0.1], [0.07]], dtype=torch.float64), t([[0.0], [0.0], [0.0]], dtype=torch.float64), 0.005)
    with torch.no_grad():
        nearly = model(x) + 1e-3 * torch.randn(4, 2, generator=gen, dtype=torch.float64)
    yield "small gradients (targets within about 0.001 of the outputs)", model, squared_error, x, nearly, 0.02


def _cases(grading_seed: int | None):
    """(description, model, loss_fn, x, y, max_norm): the corners first, then the visible or drawn cases. max_norm
    sits between the examples' norms, so that some examples are clipped and others not (every mistake shows)."""
    yield from _corners()
    gen = generator("07/per_example_clip", 0 if grading_seed is None else grading_seed)
    kinds = [("a tanh MLP, squared error", nn.Tanh, squared_error, False),
             ("a sigmoid MLP, cross-entropy", nn.Sigmoid, cross_entropy, False),
             ("a tanh MLP, cross-entropy", nn.Tanh, cross_entropy, False),
             ("a three-layer tanh MLP, its middle layer without bias, squared error", nn.Tanh, squared_error, True)]
    for description, activation, loss_fn, deep in kinds:
        sizes = (randint(gen, 2, 4), randint(gen, 3, 5), randint(gen, 2, 3))
        if deep:
            sizes = (sizes[0], sizes[1], randint(gen, 3, 5), sizes[2])
        model = _mlp(gen, sizes, activation, float(uniform(gen, (), 0.5, 1.5)),
                     (True, False, True) if deep else None)
        batch = randint(gen, 5, 7) if deep else randint(gen, 3, 6)  # enough examples that B copies of a gradient
        # outgrow the whole model (the memory bound tells the two apart)
        # Examples near one another (their gradients point roughly the same way, so the mean gradient is long), one
        # of them an outlier: the batch's clipping, each share's and each example's then all differ.
        spread = float(choice(gen, [0.3, 0.6]))
        x = torch.randn(1, sizes[0], generator=gen, dtype=torch.float64) + spread * torch.randn(
            batch, sizes[0], generator=gen, dtype=torch.float64)
        outlier = randint(gen, 0, batch - 1)
        if loss_fn is cross_entropy:  # the others classified well (confidently: a last layer 3 times larger)
            with torch.no_grad():
                model[-1].weight.mul_(3.0)
                y = model(x).argmax(dim=1)
            y[outlier] = (y[outlier] + 1) % sizes[-1]
        else:
            y = 2.0 + spread * torch.randn(batch, sizes[-1], generator=gen, dtype=torch.float64)
            y[outlier] *= float(uniform(gen, (), 10.0, 20.0))
        yield description, model, loss_fn, x, y, None


def _budget(model: nn.Module, batch: int) -> int:
    """The contract's bound: B times the widest Linear's larger side, or the number of parameters, whichever is
    more (one gradient of the whole model fits; B of them do not)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    widest = max(max(m.in_features, m.out_features) for m in linears)
    return max(batch * widest, sum(p.numel() for p in model.parameters()))


def _run_measured(per_example_clip, model: nn.Module, loss_fn, x, y, max_norm: float, what: str):
    """Call the learner's function and watch it: the backward runs (Routes), how often each Linear runs (a global
    forward hook), the largest tensor created (a dispatch mode) and any way out of torch. Returns (answer, routes,
    forward calls per Linear, largest, exits)."""
    __tracebackhide__ = True
    linears = {id(m) for m in model.modules() if isinstance(m, nn.Linear)}
    calls: dict[int, int] = {}
    largest, leaving = LargestTensor(), CallWatch(names=TORCH_EXITS)

    def count(module, inputs, output):
        if id(module) in linears:
            calls[id(module)] = calls.get(id(module), 0) + 1

    @functools.wraps(per_example_clip)
    def measured(*args, **kwargs):
        handle = torch.nn.modules.module.register_module_forward_hook(count)
        try:
            with leaving, largest:
                return per_example_clip(*args, **kwargs)
        finally:
            handle.remove()

    routes = Routes()
    answer = call_learner(measured, model, loss_fn, x, y, max_norm, what=what, routes=routes, may_change=[0])
    return answer, routes, [calls.get(i, 0) for i in linears], largest, sorted(set(leaving.seen))


def _expect_contract(model: nn.Module, batch: int, routes: Routes, calls: list[int], largest: LargestTensor,
                     exits: list[str], what: str) -> None:
    """One forward pass, at most two backward passes, no tensor beyond the budget, torch operations only."""
    __tracebackhide__ = True
    if exits:
        raise GradingFailure(f"{what} took tensors out of torch (Tensor.{', '.join(exits)}): the test measures every "
                             "tensor your function creates and cannot follow NumPy arrays or Python lists, so the "
                             "part asks for torch operations only.")
    if any(n != 1 for n in calls):
        raise proven_failure(f"{what}: the model's Linear layers ran {sorted(set(calls))} times during the call; the "
                             "part asks for one forward pass of the whole batch (each Linear once).",
                             FORWARD_PER_EXAMPLE)
    if routes.backward_runs > MAX_BACKWARD:
        raise proven_failure(f"{what} ran {routes.backward_runs} backward passes for a batch of {batch}; the part "
                             f"allows at most {MAX_BACKWARD}, whatever the batch size.", LOOPED_BACKWARD)
    budget = _budget(model, batch)
    if largest.numel > budget:
        shapes = [tuple(p.shape) for p in model.parameters() if p.dim() == 2]
        raise proven_failure(f"{what} created a tensor of shape {largest.shape} ({largest.numel} numbers); the "
                             f"part's bound here is {budget} numbers, while the per-example gradients of the weights "
                             f"{shapes} hold {[batch * r * c for r, c in shapes]}.", PER_EXAMPLE_HELD)


@check
def check_per_example_clip(per_example_clip, grading_seed: int | None = None) -> None:
    """Part B: per_example_clip(model, loss_fn, x, y, max_norm) leaves in every parameter's .grad the mean over the
    batch of each example's gradient, clipped by its own global norm, and returns those norms (before clipping).

    Domain (the part's text): a float64 model whose parameters all belong to nn.Linear layers (bias or not), each run
    once on a (batch, features) input, activations between them, no example affecting another's loss;
    ``loss_fn(model(x), y)`` one loss per example; batches of one or more examples; ``max_norm`` > 0, examples below
    and above it, an example whose gradient is zero. Corners pinned at every seed: :func:`_corners`. Contracts: each
    Linear runs once; at most two backward runs (Routes); no tensor created during the call larger than
    :func:`_budget` (a dispatch mode; NumPy and lists refused); no hook left; every .grad (None before the call)
    holds the answer; the parameters' values and x, y unchanged. The returned norms are compared before .grad: a
    mistake in the norms also makes .grad wrong, and the norms show it where it is (:func:`_norm_symptoms`); the
    mistakes of the clipping itself are then named from .grad (:func:`_symptoms`).
    """
    __tracebackhide__ = True
    module_api = torch.nn.modules.module
    for description, model, loss_fn, x, y, max_norm in _cases(grading_seed):
        with trial():
            model = copy.deepcopy(model)  # each case starts clean: .grad None, whatever an earlier call left
            model.zero_grad(set_to_none=True)
            grads, fd = _per_example_gradients(model, loss_fn, x, y)
            norms = grads.norm(dim=1)
            if max_norm is None:  # above the smallest norm, below the outlier's share of the mean
                low, high = float(norms.min()), float(norms.max()) / len(norms)
                max_norm = round(low + 0.5 * (high - low) if high > low else (low + float(norms.median())) / 2, 4)
            what = (f"per_example_clip(model, loss_fn, x, y, max_norm={max_norm:g}) with {description}: batch of "
                    f"{x.shape[0]}, norms of the examples' gradients {[round(float(n), 4) for n in norms]}")
            values = [p.detach().clone() for p in model.parameters()]
            globals_before = {attr: len(getattr(module_api, attr, {})) for attr in GLOBAL_HOOK_DICTS}
            returned, routes, calls, largest, exits = _run_measured(per_example_clip, model, loss_fn, x, y, max_norm,
                                                                    what)
            left = _hooks_left(model, globals_before)
            if left:
                raise proven_failure(f"{what}: after it returned, hooks were still registered on {'; '.join(left)}.",
                                     HOOKS_LEFT)
            params = list(model.parameters())
            for index, (param, before) in enumerate(zip(params, values)):
                if not torch.equal(param.detach(), before):
                    raise proven_failure(f"{what}: parameter {index}'s values changed.", CHANGED_INPUT)
            _expect_contract(model, x.shape[0], routes, calls, largest, exits, what)
            # The norms first: a wrong norm also makes .grad wrong, and the norms show where the mistake is.
            got = as_answer(returned, what=f"{what}: the returned norms")
            if tuple(got.shape) != tuple(norms.shape):
                raise GradingFailure(f"{what}: the returned norms have shape {tuple(got.shape)}; expected shape "
                                     f"{tuple(norms.shape)} (one norm per example, as a 1-D tensor).")
            expect_close(got, norms, fd=fd.norm(dim=1), rtol=1e-6, atol=1e-9, what=f"{what}: the returned norms",
                         symptoms=_norm_symptoms(grads, model, max_norm))
            for index, param in enumerate(params):
                if param.grad is None or param.grad.shape != param.shape:
                    raise GradingFailure(f"{what}: parameter {index}'s .grad is "
                                         f"{'None' if param.grad is None else tuple(param.grad.shape)}; the part asks "
                                         f"for the clipped mean there, of shape {tuple(param.shape)}.")
            expect_close(torch.cat([p.grad.reshape(-1) for p in params]), clipped_mean(grads, max_norm),
                         fd=clipped_mean(fd, max_norm), rtol=1e-6, atol=1e-9,
                         what=f"{what}: the .grad afterwards (all parameters, flattened in order)",
                         symptoms=_symptoms(grads, model, max_norm),
                         extra="  (your returned norms are right: the mistake is in what .grad holds.)")
