"""Gradient oracles: what a correct gradient is, computed two independent ways.

Both oracles take a scalar-valued function ``f`` and its inputs (tensors or plain numbers) and return one
gradient per input, always as float64 tensors of the input's shape:

* :func:`autograd_gradient` asks PyTorch's autograd (exact up to round-off);
* :func:`central_difference` perturbs every element by ±h and never looks at the graph, so it also checks
  code that autograd cannot see (a hand-written backward, a NumPy function, a learner's engine).

Checks compare a learner's answer with both; when the two oracles disagree the exercise itself is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Tensor = torch.Tensor

#: Step for central differences in float64: the error is O(h²) truncation + O(eps/h) round-off, smallest near 1e-6.
DEFAULT_STEP = 1e-6


def as_float64(*inputs) -> tuple[Tensor, ...]:
    """Detached float64 copies of ``inputs`` (numbers become 0-d tensors); the originals are never touched."""
    # Numbers go straight to float64: torch.as_tensor(0.327) would round them through float32 first.
    return tuple(x.detach().to(torch.float64).clone() if isinstance(x, Tensor)
                 else torch.tensor(x, dtype=torch.float64) for x in inputs)


def _scalar(value) -> float:
    value = torch.as_tensor(value)
    if value.numel() != 1:
        raise ValueError(f"f must return a scalar, got a tensor of shape {tuple(value.shape)}")
    return float(value.detach().reshape(()))


def _difference(f: Callable, inputs: Sequence, h: float, offsets: tuple[float, float]) -> tuple[Tensor, ...]:
    xs = as_float64(*inputs)
    grads = []
    for x in xs:
        grad = torch.zeros_like(x)
        flat_x, flat_grad = x.view(-1), grad.view(-1)
        for j in range(flat_x.numel()):
            original = flat_x[j].item()
            values = []
            for offset in offsets:
                flat_x[j] = original + offset * h
                values.append(_scalar(f(*xs)))
            flat_x[j] = original
            flat_grad[j] = (values[0] - values[1]) / ((offsets[0] - offsets[1]) * h)
        grads.append(grad)
    return tuple(grads)


def central_difference(f: Callable, *inputs, h: float = DEFAULT_STEP) -> tuple[Tensor, ...]:
    """(f(x + h·e_j) − f(x − h·e_j)) / 2h for every element j of every input, in float64. Error O(h²)."""
    return _difference(f, inputs, h, (1.0, -1.0))


def forward_difference(f: Callable, *inputs, h: float = DEFAULT_STEP) -> tuple[Tensor, ...]:
    """(f(x + h·e_j) − f(x)) / h: the cheaper, less accurate O(h) estimate, kept to recognise it in answers."""
    return _difference(f, inputs, h, (1.0, 0.0))


def autograd_gradient(f: Callable, *inputs) -> tuple[Tensor, ...]:
    """∂f/∂input for every input by reverse-mode autograd in float64 (zeros for inputs f does not use)."""
    xs = tuple(x.requires_grad_(True) for x in as_float64(*inputs))
    out = f(*xs)
    if out.numel() != 1:
        raise ValueError(f"f must return a scalar, got a tensor of shape {tuple(out.shape)}")
    grads = torch.autograd.grad(out.reshape(()), xs, allow_unused=True)
    return tuple(torch.zeros_like(x) if g is None else g.detach() for x, g in zip(xs, grads))
