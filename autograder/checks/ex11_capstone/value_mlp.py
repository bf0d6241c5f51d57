"""The helpers Parts A and B share on the learner's exercise-02 ``Value`` engine: the engine's class checked as pasted,
Values recognised and made, and the moons MLP in torch (Part B's test builds the same MLP on the learner's Value and
compares)."""

from __future__ import annotations

import torch

from ...checking import GradingFailure, call_learner, expect_pasted, fmt

Tensor = torch.Tensor

ENGINE_CELL = ("Paste your Value class from exercise 02 into the cell under 'Your engine' and run it (or write the "
               "reference line its text shows).")


def expect_value_class(Value) -> None:
    __tracebackhide__ = True
    expect_pasted(Value, "your Value engine", ENGINE_CELL)
    if not isinstance(Value, type):
        raise GradingFailure(f"Value must be a class (your engine from exercise 02); got {Value!r:.80}. "
                             + ENGINE_CELL)


def is_value(thing) -> bool:
    return hasattr(thing, "data") and hasattr(thing, "backward")


def leaf_values(Value, point: list[float], what: str) -> list:
    __tracebackhide__ = True
    return call_learner(lambda: [Value(c) for c in point], what=f"{what}: Value(x) for x in {fmt(point)}")


def torch_mlp(sizes: list[int], flat: Tensor, points: Tensor, activation=torch.tanh, out_activation=None):
    """The part's MLP in torch, from parameters listed layer by layer, neuron by neuron, weights then bias."""
    position, h = 0, points
    for layer, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        block = flat[position:position + (fan_in + 1) * fan_out].reshape(fan_out, fan_in + 1)
        position += (fan_in + 1) * fan_out
        h = h @ block[:, :fan_in].T + block[:, fan_in]
        last = layer == len(sizes) - 2
        h = (out_activation(h) if out_activation else h) if last else activation(h)
    return h
