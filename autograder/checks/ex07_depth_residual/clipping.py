"""Part B of exercise 07: per_example_clip(model, loss_fn, x, y, max_norm), each example's gradient clipped by its
own global norm (over all parameters), then averaged over the batch: the clipping of DP-SGD. The lesson clipped one
batch gradient; here the unit is one example, so clipping the batch's mean gradient (the lesson's call ported) is
wrong as soon as the examples' norms straddle max_norm. Oracles: every example's gradient by autograd and by float64
central differences, clipped and averaged by the same formula; the symptoms are what each catalogued mistake makes of
those per-example gradients."""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from ...checking import GradingFailure, call_learner, check, expect_close, proven_failure, trial
from ...contracts import CHANGED_INPUT
from ...oracles import autograd_gradient, central_difference
from ...seeding import choice, generator, uniform
from ..cases import randint
from .misconceptions import BATCH_CLIPPED, CLIPPED_BELOW, NORM_AFTER, PER_TENSOR, RUNNING_SUM, SHARE_CLIPPED, SUMMED

EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ divides by total_norm + 1e-6


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


def _factors(norms: torch.Tensor, max_norm: float) -> torch.Tensor:
    return torch.clamp(max_norm / (norms + EPS), max=1.0)


def clipped_mean(grads: torch.Tensor, max_norm: float) -> torch.Tensor:
    """The answer: the mean over examples of each row scaled by min(1, max_norm / (its norm + 1e-6))."""
    return (grads * _factors(grads.norm(dim=1), max_norm)[:, None]).mean(dim=0)


def _symptoms(grads: torch.Tensor, sizes: list[int], max_norm: float) -> list:
    """What the catalogued mistakes make of these per-example gradients."""
    batch = grads.shape[0]
    norms = grads.norm(dim=1)
    mean = grads.mean(dim=0)
    pieces = grads.split(sizes, dim=1)
    per_tensor = torch.cat([p * _factors(p.norm(dim=1), max_norm)[:, None] for p in pieces], dim=1).mean(dim=0)
    running = torch.zeros_like(mean)
    for row in grads:
        running = running + row
        running = running * _factors(running.norm(), max_norm)
    return [BATCH_CLIPPED.looks_like(mean * _factors(mean.norm(), max_norm)),
            PER_TENSOR.looks_like(per_tensor),
            SHARE_CLIPPED.looks_like((grads * _factors(norms / batch, max_norm)[:, None]).mean(dim=0)),
            SUMMED.looks_like(batch * clipped_mean(grads, max_norm)),
            RUNNING_SUM.looks_like(running / batch),
            CLIPPED_BELOW.looks_like((grads * (max_norm / (norms + EPS))[:, None]).mean(dim=0))]


def _mlp(gen: torch.Generator, sizes: tuple[int, int, int], activation: type[nn.Module], gain: float) -> nn.Module:
    n_in, width, n_out = sizes
    model = nn.Sequential(nn.Linear(n_in, width), activation(), nn.Linear(width, n_out)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(gain * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return model


def _corners():
    """Run at every seed: the hand example (one weight, norms 2 and 200); one example (per-example clipping is the
    batch's clipping); every example below max_norm (nothing is clipped: the plain mean gradient); an example the model
    already fits exactly (its gradient is exactly zero)."""
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


def _cases(grading_seed: int | None):
    """(description, model, loss_fn, x, y, max_norm): the corners first, then the visible or drawn cases. max_norm
    sits between the examples' norms, so that some examples are clipped and others not (every mistake shows)."""
    yield from _corners()
    gen = generator("07/per_example_clip", 0 if grading_seed is None else grading_seed)
    kinds = [("a tanh MLP, squared error", nn.Tanh, squared_error),
             ("a sigmoid MLP, cross-entropy", nn.Sigmoid, cross_entropy),
             ("a tanh MLP, cross-entropy", nn.Tanh, cross_entropy)]
    for description, activation, loss_fn in kinds:
        sizes = (randint(gen, 2, 4), randint(gen, 3, 5), randint(gen, 2, 3))
        model = _mlp(gen, sizes, activation, float(uniform(gen, (), 0.5, 1.5)))
        batch = randint(gen, 3, 6)
        # Examples near one another (their gradients point roughly the same way, so the mean gradient is long), one
        # of them an outlier: the batch's clipping, each share's and each example's then all differ.
        spread = float(choice(gen, [0.3, 0.6]))
        x = torch.randn(1, sizes[0], generator=gen, dtype=torch.float64) + spread * torch.randn(
            batch, sizes[0], generator=gen, dtype=torch.float64)
        outlier = randint(gen, 0, batch - 1)
        if loss_fn is cross_entropy:  # the others classified well (confidently: a last layer 3 times larger)
            with torch.no_grad():
                model[2].weight.mul_(3.0)
                y = model(x).argmax(dim=1)
            y[outlier] = (y[outlier] + 1) % sizes[2]
        else:
            y = 2.0 + spread * torch.randn(batch, sizes[2], generator=gen, dtype=torch.float64)
            y[outlier] *= float(uniform(gen, (), 10.0, 20.0))
        yield description, model, loss_fn, x, y, None


@check
def check_per_example_clip(per_example_clip, grading_seed: int | None = None) -> None:
    """Part B: per_example_clip(model, loss_fn, x, y, max_norm) leaves in every parameter's .grad the mean over the
    batch of each example's gradient, clipped by its own global norm, and returns those norms (before clipping).

    Domain (the part's text): a model whose examples do not interact (Linear layers and activations), float64;
    ``loss_fn(model(x), y)`` one loss per example; batches of one or more examples; ``max_norm`` > 0, examples below
    and above it, an example whose gradient is zero. Corners pinned at every seed: :func:`_corners`. Contracts: every
    .grad (None before the call) holds the answer, the parameters' values and x, y are unchanged.
    """
    __tracebackhide__ = True
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
            returned = call_learner(per_example_clip, model, loss_fn, x, y, max_norm, what=what, may_change=[0])
            params = list(model.parameters())
            for index, (param, before) in enumerate(zip(params, values)):
                if not torch.equal(param.detach(), before):
                    raise proven_failure(f"{what}: parameter {index}'s values changed.", CHANGED_INPUT)
                if param.grad is None or param.grad.shape != param.shape:
                    raise GradingFailure(f"{what}: parameter {index}'s .grad is "
                                         f"{'None' if param.grad is None else tuple(param.grad.shape)}; the part asks "
                                         f"for the clipped mean there, of shape {tuple(param.shape)}.")
            sizes = [p.numel() for p in params]
            expect_close(torch.cat([p.grad.reshape(-1) for p in params]), clipped_mean(grads, max_norm),
                         fd=clipped_mean(fd, max_norm), rtol=1e-6, atol=1e-9,
                         what=f"{what}: the .grad afterwards (all parameters, flattened in order)",
                         symptoms=_symptoms(grads, sizes, max_norm))
            expect_close(returned, norms, fd=fd.norm(dim=1), rtol=1e-6, atol=1e-9,
                         what=f"{what}: the returned norms",
                         symptoms=[NORM_AFTER.looks_like(norms.clamp(max=max_norm))])

