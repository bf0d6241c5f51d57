"""Part A: an MLP of the learner's exercise-02 ``Value``s (tanh hidden layers, a linear output layer), compared with
the same MLP in torch; and the helpers Part B shares (the engine's Values, the torch MLP)."""

from __future__ import annotations

import torch

from ...checking import GradingFailure, Route, call_learner, check, expect_close, expect_pasted, fmt, trial
from ...checking import proven_failure as _proven
from ...oracles import autograd_gradient
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BIAS_LISTED_FIRST,
    LIST_OF_ONE,
    NO_BIAS,
    TANH_ON_OUTPUT,
    WRONG_ACTIVATION,
    ZERO_GRAD_INCOMPLETE,
)

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


def _set_parameters(model, values: list[float], what: str) -> list:
    __tracebackhide__ = True
    params = call_learner(model.parameters, what=f"{what}: model.parameters()")
    if type(params) is not list:
        raise GradingFailure(f"{what}: model.parameters() returned {type(params).__name__}; expected a list.")
    if len(params) != len(values):
        raise GradingFailure(f"{what}: model.parameters() lists {len(params)} Values; expected {len(values)}.",
                             suspects=(NO_BIAS,) if len(params) < len(values) else ())
    if not all(hasattr(param, "data") and hasattr(param, "grad") for param in params):
        kinds = sorted({type(param).__name__ for param in params if not hasattr(param, "data")})
        raise GradingFailure(f"{what}: model.parameters() lists {', '.join(kinds)} among its parameters; expected "
                             "Values only (each weight and each bias a Value).")
    for param, value in zip(params, values):
        param.data = value
        param.grad = 0.0
    return params


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


def _outputs(out, count: int, what: str) -> list:
    """The Values a call of the MLP returned: one Value for one output neuron, a list of ``count`` Values else."""
    __tracebackhide__ = True
    if count == 1:
        if type(out) is list and len(out) == 1 and is_value(out[0]):
            raise _proven(f"{what} returned a list of one Value; the part asks for the Value itself when the last "
                          "layer has one neuron.", LIST_OF_ONE)
        if not is_value(out):
            raise GradingFailure(f"{what} returned {out!r:.80}; expected one Value.")
        return [out]
    if type(out) is not list or len(out) != count or not all(is_value(v) for v in out):
        raise GradingFailure(f"{what} returned {out!r:.80}; expected a list of {count} Values.")
    return out


def _bias_first(sizes: list[int], flat: Tensor) -> Tensor:
    """The parameters, in the part's order, of a model whose parameters() listed each neuron's bias first and was set
    from ``flat`` by position."""
    pieces, position = [], 0
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        block = flat[position:position + (fan_in + 1) * fan_out].reshape(fan_out, fan_in + 1)
        position += (fan_in + 1) * fan_out
        pieces.append(torch.cat([block[:, 1:], block[:, :1]], dim=1).reshape(-1))
    return torch.cat(pieces)


def _run_value_mlp(Value, MLP, sizes: list[int], flat: Tensor, points: Tensor) -> None:
    __tracebackhide__ = True
    what = f"MLP({sizes[0]}, {sizes[1:]})"
    model = call_learner(MLP, sizes[0], sizes[1:], what=what, forbid=[Route.AUTOGRAD])
    params = _set_parameters(model, flat.tolist(), what)
    total = None
    outputs = []
    for point in points.tolist():
        call = f"{what} called on {fmt(point)}"
        out = call_learner(model, leaf_values(Value, point, call), what=call, forbid=[Route.AUTOGRAD])
        for value in _outputs(out, sizes[-1], call):
            outputs.append(float(value.data))
            total = value if total is None else total + value
    expected = torch_mlp(sizes, flat, points).reshape(-1)
    expect_close(torch.tensor(outputs, dtype=torch.float64), expected, what=f"{what}: outputs on {len(points)} points",
                 source="a torch MLP with the same parameters", symptoms=[
                     TANH_ON_OUTPUT.looks_like(torch_mlp(sizes, flat, points, out_activation=torch.tanh).reshape(-1)),
                     BIAS_LISTED_FIRST.looks_like(torch_mlp(sizes, _bias_first(sizes, flat), points).reshape(-1)),
                     WRONG_ACTIVATION.looks_like(torch_mlp(sizes, flat, points, activation=torch.relu).reshape(-1))])
    call_learner(total.backward, what=f"backward() of the sum of {what}'s outputs", forbid=[Route.AUTOGRAD])
    (grad,) = autograd_gradient(lambda p: torch_mlp(sizes, p, points).sum(), flat)
    expect_close(torch.tensor([float(p.grad) for p in params], dtype=torch.float64), grad,
                 what=f"{what}: every parameter's .grad after backward()")
    call_learner(model.zero_grad, what=f"{what}.zero_grad()", forbid=[Route.AUTOGRAD])
    left = [i for i, p in enumerate(params) if p.grad != 0.0]
    if left:
        raise _proven(f"{what}.zero_grad() left .grad non-zero on {len(left)} of {len(params)} parameters "
                      f"(e.g. index {left[0]}).", ZERO_GRAD_INCOMPLETE)


def _value_mlp_cases(grading_seed: int | None) -> list[tuple[list[int], Tensor, Tensor]]:
    """Corners at every seed, then the visible case or two drawn ones."""
    gen = case_stream("11/value_mlp", grading_seed)

    def case(sizes, points=None):
        count = sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))
        flat = uniform(gen, (count,), -1.0, 1.0)
        return sizes, flat, uniform(gen, (3, sizes[0])) if points is None else torch.tensor(points, dtype=torch.float64)

    cases = [case([1, 1], [[0.0], [-1.5], [2.0]]),                        # no hidden layer: one linear neuron
             case([2, 3, 3, 2], [[0.0, 0.0], [1.5, -2.0], [-0.5, 0.25]])]  # two hidden layers, two outputs
    if grading_seed is None:
        return cases + [case([2, 3, 1]), case([3, 4, 2])]
    return cases + [case([randint(gen, 2, 4), randint(gen, 2, 5), randint(gen, 1, 3)]) for _ in range(2)]


@check
def check_value_mlp(Value, MLP, grading_seed: int | None = None) -> None:
    """Part A: MLP(n_inputs, sizes) of Values: tanh hidden layers, a linear output layer, parameters() listed layer by
    layer and neuron by neuron (weights then bias), gradients equal to PyTorch's, zero_grad() resets them all.

    Domain (the part's text): n_inputs >= 1, sizes a list of layer widths >= 1 (the last one the outputs, possibly
    the only layer), points of any sign, 0 included. Corners pinned at every seed: MLP(1, [1]) (one linear neuron, no
    hidden layer) and MLP(2, [3, 3, 2]) (two hidden layers, two outputs) on points with zeros and both signs.
    Contracts checked: parameters() returns a list of Values of the stated length and order; a call returns the Value
    itself for one output neuron (a list of one fails) and a list for several; no autograd; zero_grad() zeroes every
    listed parameter.
    """
    __tracebackhide__ = True
    expect_value_class(Value)
    for sizes, flat, points in _value_mlp_cases(grading_seed):
        with trial():
            _run_value_mlp(Value, MLP, sizes, flat, points)
