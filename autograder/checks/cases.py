"""Case helpers shared by several exercises' checks: the stream a check draws its cases from, seeded integers, random
float64 MLPs, a model's loss gradient.

Draw every random case from a named stream (:func:`case_stream`), so that a check's hidden cases change with the
grading seed and nothing else, and adding a check never changes the cases another one sees.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..oracles import autograd_gradient, central_difference
from ..seeding import generator, uniform


def case_stream(name: str, grading_seed: int | None) -> torch.Generator:
    """The generator of one check's cases: without a grading seed (the visible test) the fixed stream ``name/public``,
    else the hidden stream ``name`` drawn from ``grading_seed``."""
    return generator(f"{name}/public", 0) if grading_seed is None else generator(name, grading_seed)


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], drawn from ``gen``."""
    return int(torch.randint(low, high + 1, (), generator=gen))


def random_mlp(gen: torch.Generator, sizes: tuple[int, ...]) -> nn.Sequential:
    """A float64 MLP (Linear, Tanh, ..., Linear) with weights uniform in [-1, 1) from ``gen``."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Tanh()] if i else []
        layers.append(nn.Linear(fan_in, fan_out, dtype=torch.float64))
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(uniform(gen, tuple(param.shape), -1.0, 1.0))
    return model


def mean_loss_gradients(model: nn.Module, loss_fn: Callable, inputs: torch.Tensor, targets: torch.Tensor,
                        fd: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
    """{name: d loss_fn(model(inputs), targets) / d param} by autograd and (if ``fd``) by central differences."""
    names = [name for name, _ in model.named_parameters()]
    values = [param.detach() for _, param in model.named_parameters()]

    def loss(*params):
        return loss_fn(torch.func.functional_call(model, dict(zip(names, params)), (inputs,)), targets)

    auto = dict(zip(names, autograd_gradient(loss, *values)))
    return auto, dict(zip(names, central_difference(loss, *values))) if fd else None


