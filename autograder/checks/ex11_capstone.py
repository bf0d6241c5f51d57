"""Checks for exercise 11, the capstone: train real models with the learner's own code.

Parts A and B run on the learner's exercise-02 ``Value`` engine (an MLP class, then training on two moons generated
in code); Parts C–E on hand-derived tensor backward passes (a SiLU backward derived here, the whole backward of a
two-layer MLP built from exercise 04's functions, then training on the handwritten digits shipped in
``autograder/data``). Autograd is forbidden wherever a part computes gradients itself; the checks count backward
passes to tell.

Learners whose earlier work is broken may use the references at the end of this module (:class:`ReferenceValue`,
:func:`reference_linear_backward`, :func:`reference_softmax_cross_entropy_backward`), clearly marked as such in the
notebook: the capstone never blocks on an earlier exercise.
"""

from __future__ import annotations

import gzip
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Route,
    Routes,
    as_answer,
    call_learner,
    check,
    expect_close,
    fmt,
    trial,
)
from ..checking import proven_failure as _proven
from ..oracles import autograd_gradient, central_difference
from ..seeding import generator, uniform
from .cases import randint
from .shared import CE_NOT_DIVIDED

Tensor = torch.Tensor
DATA = Path(__file__).resolve().parent.parent / "data"

#: Stated thresholds (the parts' text quotes them).
# Pass marks sit below the worst the reference training reaches, so that training noise never costs a correct answer
# points, and the moons' hinge mark above the best a barely trained model reaches (measured over the hidden tests'
# draws with `python -m tools.capstone_margins 120`): on two moons, from the poor start below, the reference reaches
# 89 % accuracy and a held-out hinge loss of 0.25 (median; worst 80.5 % and 0.49 over 120 draws), the catalogue's
# three steps of training a hinge loss of 0.69 at best over 200 draws, with up to 88.5 % accuracy: accuracy counts
# signs only and cannot tell them apart; on the digits the reference reaches 97 % (median; worst 93.9 % over 40
# splits) where the part aims at 95 %.
MOONS_ACCURACY = 0.7
MOONS_HINGE = 0.6
DIGITS_ACCURACY = 0.92
#: A moons case starts from weights that classify at most this fraction of the held-out points right, so that a loop
#: that barely trains cannot pass by a lucky start.
MOONS_START_AT_MOST = 0.6
#: ... and whose held-out hinge loss is at least this (a start already near the hinge mark would pass untrained).
MOONS_START_HINGE = 1.0
GATE_EVERY = 50

# ------------------------------------------------------------------------------------------------------- data


def make_moons(count: int, seed: int, noise: float = 0.1) -> tuple[list[list[float]], list[int]]:
    """Two interleaving half circles in the plane, ``count`` points, labels 0 and 1 (as plain Python lists)."""
    gen = torch.Generator().manual_seed(seed)
    labels = (torch.arange(count) % 2)[torch.randperm(count, generator=gen)]
    angle = math.pi * torch.rand(count, generator=gen, dtype=torch.float64)
    upper = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1)
    lower = torch.stack([1 - torch.cos(angle), 0.5 - torch.sin(angle)], dim=1)
    points = torch.where(labels[:, None] == 0, upper, lower)
    points = points + noise * torch.randn(count, 2, generator=gen, dtype=torch.float64)
    return points.tolist(), labels.tolist()


def load_digits() -> tuple[Tensor, Tensor]:
    """The 1797 handwritten digits: pixels scaled to [0, 1] as a (1797, 64) float64 tensor, labels (1797,) int64."""
    with gzip.open(DATA / "digits.csv.gz", "rt") as file:
        table = np.loadtxt(file, delimiter=",")
    return torch.from_numpy(table[:, :64] / 16.0), torch.from_numpy(table[:, 64]).long()


def digits_split(seed: int, test_fraction: float = 0.2) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(X_train, y_train, X_test, y_test): a random split of the digits drawn from ``seed``."""
    X, y = load_digits()
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    cut = int(len(y) * (1 - test_fraction))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


# --------------------------------------------------------------------------------------------- misconceptions

TANH_ON_OUTPUT = Misconception(
    "nonlinearity on the output layer",
    "The last layer is linear: its neurons return w·x + b without tanh, so the output can be any real number "
    "(the loss, not the network, decides what to do with it). Only hidden layers apply tanh.")
NO_BIAS = Misconception(
    "neurons without a bias", "Each neuron computes tanh(w·x + b) (hidden) or w·x + b (output): b is a parameter too, "
    "listed after the neuron's weights.")
WRONG_ACTIVATION = Misconception(
    "relu where the part asks for tanh", "Hidden layers apply tanh, as the part says; relu makes a different network.")
ZERO_GRAD_INCOMPLETE = Misconception(
    "zero_grad() that misses parameters",
    "zero_grad() must set .grad = 0.0 on every parameter that parameters() lists, or the next backward() adds to "
    "stale gradients.")
LOSSES_AS_VALUES = Misconception(
    "losses kept as Values instead of Python floats",
    "Keep each loss as a number (loss.data): a stored Value keeps the whole graph of its step alive.")
SIGMOID_DERIVATIVE = Misconception(
    "used the sigmoid's derivative for SiLU",
    "SiLU(x) = x·σ(x) is a product: its derivative is σ(x) + x·σ(x)(1 − σ(x)), not σ(x)(1 − σ(x)) alone.")
PRODUCT_RULE_HALF = Misconception(
    "product rule with one term",
    "d(x·σ(x))/dx has two terms, σ(x)·1 and x·σ'(x); you kept one.")
MISSING_UPSTREAM = Misconception(
    "local derivative not multiplied by dy", "Multiply the local derivative by dy, the gradient arriving from above.")
SILU_SKIPPED = Misconception(
    "the nonlinearity's backward skipped",
    "The gradient reaching the hidden pre-activation is silu_backward(pre-activation, dh): you passed dh through "
    "as if the nonlinearity were the identity.")
SILU_AT_OUTPUT = Misconception(
    "SiLU derivative taken at its output",
    "silu_backward needs the pre-activation z = X·W1 + b1 (the SiLU's input), not h = silu(z).")
TRAINED_WITH_AUTOGRAD = Misconception(
    "trained with autograd where the part asks for your own backward",
    "The training loop must take its gradients from mlp_gradients (your hand-derived backward); autograd may run "
    f"only in the gradcheck gate, once every {GATE_EVERY} steps.")
NOT_CLIPPED = Misconception(
    "gradients not clipped", "When the global norm exceeds max_norm, scale every gradient by max_norm / global norm "
    "before the update; the part asks you to record the norm you actually stepped with.")
PER_TENSOR_CLIPPING = Misconception(
    "clipped each tensor on its own instead of by the global norm",
    "Global-norm clipping computes ONE norm over all the gradients, sqrt(Σ over layers of ‖g‖²), and scales them all "
    "by the same factor, so the update keeps its direction; clipping each tensor to max_norm changes it.")
CLIPPING_NEVER_ACTED = Misconception(
    "a clip threshold that never acts",
    "A max_norm above every gradient norm of the run clips nothing, so nothing shows the clipping works. Choose one "
    "that the run exceeds (0.5 does with the settings the part suggests).")
NO_GATE = Misconception(
    "no gradcheck gate", f"Every {GATE_EVERY} steps (step 0 included) compare mlp_gradients with autograd on a few "
    "examples and stop if they disagree: a training run that trusts an unchecked backward can train on wrong "
    "gradients for hours.")


# ------------------------------------------------------------------------------------ Parts A and B: the engine

def _value_parts(Value, MLP) -> None:
    __tracebackhide__ = True
    if not isinstance(Value, type) or not isinstance(MLP, type):
        raise GradingFailure("Value and MLP must be classes (paste your engine from exercise 02 into the engine "
                             "cell, or use the reference offered there).")


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


def _torch_mlp(sizes: list[int], flat: Tensor, points: Tensor, activation=torch.tanh, out_activation=None):
    """The part's MLP in torch, from parameters listed layer by layer, neuron by neuron, weights then bias."""
    position, h = 0, points
    for layer, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        block = flat[position:position + (fan_in + 1) * fan_out].reshape(fan_out, fan_in + 1)
        position += (fan_in + 1) * fan_out
        h = h @ block[:, :fan_in].T + block[:, fan_in]
        last = layer == len(sizes) - 2
        h = (out_activation(h) if out_activation else h) if last else activation(h)
    return h


def _run_value_mlp(Value, MLP, sizes: list[int], flat: Tensor, points: Tensor) -> None:
    __tracebackhide__ = True
    what = f"MLP({sizes[0]}, {sizes[1:]})"
    model = call_learner(MLP, sizes[0], sizes[1:], what=what, forbid=[Route.AUTOGRAD])
    params = _set_parameters(model, flat.tolist(), what)
    total = None
    outputs = []
    for point in points.tolist():
        out = call_learner(model, [Value(c) for c in point], what=f"{what} called on {fmt(point)}",
                           forbid=[Route.AUTOGRAD])
        expected_count = sizes[-1]
        values = out if type(out) is list else [out]
        if len(values) != expected_count or not all(hasattr(v, "data") and hasattr(v, "backward") for v in values):
            raise GradingFailure(f"{what} called on a point returned {out!r:.80}; expected "
                                 f"{'one Value' if expected_count == 1 else f'a list of {expected_count} Values'}.")
        for value in values:
            outputs.append(float(value.data))
            total = value if total is None else total + value
    expected = _torch_mlp(sizes, flat, points).reshape(-1)
    expect_close(torch.tensor(outputs, dtype=torch.float64), expected, what=f"{what}: outputs on {len(points)} points",
                 source="a torch MLP with the same parameters", symptoms=[
                     TANH_ON_OUTPUT.looks_like(_torch_mlp(sizes, flat, points, out_activation=torch.tanh).reshape(-1)),
                     WRONG_ACTIVATION.looks_like(_torch_mlp(sizes, flat, points, activation=torch.relu).reshape(-1))])
    call_learner(total.backward, what=f"backward() of the sum of {what}'s outputs", forbid=[Route.AUTOGRAD])
    (grad,) = autograd_gradient(lambda p: _torch_mlp(sizes, p, points).sum(), flat)
    expect_close(torch.tensor([float(p.grad) for p in params], dtype=torch.float64), grad,
                 what=f"{what}: every parameter's .grad after backward()")
    call_learner(model.zero_grad, what=f"{what}.zero_grad()", forbid=[Route.AUTOGRAD])
    left = [i for i, p in enumerate(params) if p.grad != 0.0]
    if left:
        raise GradingFailure(f"{what}.zero_grad() left .grad non-zero on {len(left)} of {len(params)} parameters "
                             f"(e.g. index {left[0]}).", suspects=(ZERO_GRAD_INCOMPLETE,))


@check
def check_value_mlp(Value, MLP, seed: int | None = None) -> None:
    """Part A: MLP(n_inputs, sizes) of Values: tanh hidden layers, a linear output layer, parameters() listed layer by
    layer and neuron by neuron (weights then bias), gradients equal to PyTorch's, zero_grad() resets them all."""
    __tracebackhide__ = True
    _value_parts(Value, MLP)
    gen = generator("11/value_mlp/public", 0) if seed is None else generator("11/value_mlp", seed)
    shapes = [[2, 3, 1], [3, 4, 2]] if seed is None else \
        [[randint(gen, 2, 4), randint(gen, 2, 5), randint(gen, 1, 3)] for _ in range(2)]
    for sizes in shapes:
        count = sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))
        with trial():
            _run_value_mlp(Value, MLP, sizes, uniform(gen, (count,), -1.0, 1.0), uniform(gen, (3, sizes[0])))


def value_accuracy(model, Value, points: list[list[float]], labels: list[int]) -> float:
    """The fraction of points whose output has the sign of its label (positive for 1, negative for 0)."""
    right = 0
    for point, label in zip(points, labels):
        out = model([Value(c) for c in point])
        out = out[0] if isinstance(out, list) else out
        right += (float(out.data) > 0) == (label == 1)
    return right / len(labels)


class PartAModel:
    """Part A's MLP, written by the course on the learner's own ``Value`` class: Part B trains this one, so that a
    slip in the learner's MLP class costs Part A's points only. Its interface is the part's: ``model(x)`` (one Value
    for one output), ``parameters()`` layer by layer, neuron by neuron, weights then bias, and ``zero_grad()``."""

    def __init__(self, Value, sizes: list[int], flat: list[float]):
        self.layers, position = [], 0
        for fan_in, fan_out in zip(sizes, sizes[1:]):
            layer = []
            for _ in range(fan_out):
                layer.append([Value(v) for v in flat[position:position + fan_in + 1]])
                position += fan_in + 1
            self.layers.append(layer)

    def __call__(self, x):
        for number, layer in enumerate(self.layers):
            out = []
            for neuron in layer:
                total = neuron[-1]
                for w, xi in zip(neuron[:-1], x):
                    total = total + w * xi
                out.append(total)
            x = out if number == len(self.layers) - 1 else [o.tanh() for o in out]
        return x[0] if len(x) == 1 else x

    def parameters(self) -> list:
        return [p for layer in self.layers for neuron in layer for p in neuron]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = 0.0

    def __repr__(self) -> str:
        return f"MLP(2, [8, 1]) (the course's, on your Value: {len(self.parameters())} parameters)"


def _moons_fit(flat: Tensor, points: list[list[float]], labels: list[int]) -> tuple[float, float]:
    """(accuracy, mean hinge loss max(0, 1 - s·score)) of MLP(2, [8, 1]) with parameters ``flat`` on ``points``."""
    scores = _torch_mlp([2, 8, 1], flat, torch.tensor(points, dtype=torch.float64)).reshape(-1)
    signs = torch.tensor([1.0 if label == 1 else -1.0 for label in labels], dtype=torch.float64)
    return float((signs * scores > 0).double().mean()), float(torch.relu(1 - signs * scores).mean())


def _poor_start(seed: int, points: list[list[float]], labels: list[int]) -> list[float]:
    """MLP(2, [8, 1]) weights drawn from ``seed`` that classify at most MOONS_START_AT_MOST of ``points`` right, with
    a hinge loss of at least MOONS_START_HINGE on them."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(200):
        flat = uniform(gen, (33,), -1.0, 1.0)
        accuracy, hinge = _moons_fit(flat, points, labels)
        if accuracy <= MOONS_START_AT_MOST and hinge >= MOONS_START_HINGE:
            return flat.tolist()
    raise CourseBug(f"no starting point for the moons at seed {seed} is as poor as asked in 200 draws")


def _run_train_moons(train_moons, Value, seed: int) -> None:
    __tracebackhide__ = True
    points, labels = make_moons(60, seed)
    test_points, test_labels = make_moons(200, seed + 1)
    random.seed(seed)
    flat = _poor_start(seed, test_points, test_labels)
    model = call_learner(PartAModel, Value, [2, 8, 1], flat, what="MLP(2, [8, 1]) built on your Value",
                         forbid=[Route.AUTOGRAD])
    what = f"train_moons(model, points, labels) for an MLP(2, [8, 1]) on 60 moons (seed {seed})"
    losses = call_learner(train_moons, model, points, labels, what=what, forbid=[Route.AUTOGRAD],
                          may_change=["model"])
    if type(losses) is not list or not losses:
        raise GradingFailure(f"{what} returned {type(losses).__name__}; expected the list of the losses, one a step.")
    if any(type(loss) is not float for loss in losses):
        kind = type(next(loss for loss in losses if type(loss) is not float)).__name__
        raise _proven(f"{what} returned losses of type {kind}; expected Python floats.", LOSSES_AS_VALUES)
    accuracy = call_learner(value_accuracy, model, Value, test_points, test_labels, what="the trained model on "
                            "200 fresh moons", forbid=[Route.AUTOGRAD], may_change=True)
    hinge = _held_out_hinge(model, test_points, test_labels)
    if accuracy < MOONS_ACCURACY or hinge > MOONS_HINGE:
        raise GradingFailure(f"{what}: on 200 fresh moons, accuracy {accuracy:.1%} and mean hinge loss {hinge:.3g}; "
                             f"the part asks for at least {MOONS_ACCURACY:.0%} and at most {MOONS_HINGE:g}. Training "
                             f"loss went from {losses[0]:.4g} to {losses[-1]:.4g} in {len(losses)} steps.")


def _held_out_hinge(model: PartAModel, points: list[list[float]], labels: list[int]) -> float:
    """Mean hinge loss of the trained model on ``points``, computed in torch."""
    flat = torch.tensor([float(p.data) for p in model.parameters()], dtype=torch.float64)
    return _moons_fit(flat, points, labels)[1]


@check
def check_train_moons(train_moons, Value, MLP, seed: int | None = None) -> None:
    """Part B: train_moons(model, points, labels) trains a Value MLP in place (no autograd) and returns the losses
    as floats; the model then classifies fresh moons with at least MOONS_ACCURACY accuracy. The model trained is
    :class:`PartAModel` on the learner's ``Value``, not their ``MLP`` class (Part A grades that one)."""
    __tracebackhide__ = True
    _value_parts(Value, MLP)
    # One training run per test: training is the slow part (the other checks of this part are proven or
    # non-numeric, so they need no second case to be named).
    seeds = [11] if seed is None else [randint(generator("11/moons", seed), 100, 10**6)]
    for data_seed in seeds:
        with trial():
            _run_train_moons(train_moons, Value, data_seed)


# ------------------------------------------------------------------------------- Parts C-E: tensor backward passes

def silu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def _run_silu(silu_backward, x: Tensor, dy: Tensor) -> None:
    __tracebackhide__ = True
    what = f"silu_backward(x, dy) for x of shape {tuple(x.shape)}"
    got = call_learner(silu_backward, x, dy, what=what, forbid=[Route.AUTOGRAD])
    s = torch.sigmoid(x)
    (expected,) = autograd_gradient(lambda t: (silu(t) * dy).sum(), x)
    (fd,) = central_difference(lambda t: (silu(t) * dy).sum(), x)
    expect_close(got, expected, what=what, fd=fd, extra=f"  inputs:             x = {fmt(x)}, dy = {fmt(dy)}",
                 symptoms=[SIGMOID_DERIVATIVE.looks_like(dy * s * (1 - s)), PRODUCT_RULE_HALF.looks_like(dy * s),
                           PRODUCT_RULE_HALF.looks_like(dy * x * s * (1 - s)),
                           MISSING_UPSTREAM.looks_like(s * (1 + x * (1 - s)))])


@check
def check_silu_backward(silu_backward, seed: int | None = None) -> None:
    """Part C: silu_backward(x, dy) = dy · d(x·σ(x))/dx, by hand (no autograd), x and dy unchanged."""
    __tracebackhide__ = True
    gen = generator("11/silu/public", 0) if seed is None else generator("11/silu", seed)
    for shape in [(5,), (3, 4)] if seed is None else [(randint(gen, 3, 8),), (randint(gen, 2, 4), randint(gen, 2, 5))]:
        with trial():
            _run_silu(silu_backward, uniform(gen, shape, -3, 3), uniform(gen, shape, -1, 1))


def mlp_loss(params: dict[str, Tensor], X: Tensor, targets: Tensor) -> Tensor:
    """The part's model: logits = silu(X·W1 + b1)·W2 + b2, loss = mean cross-entropy."""
    hidden = silu(X @ params["W1"] + params["b1"])
    return F.cross_entropy(hidden @ params["W2"] + params["b2"], targets)


def _mlp_symptoms(params: dict[str, Tensor], X: Tensor, targets: Tensor) -> dict[str, list]:
    """What each mistake gives for every gradient (by name)."""
    n = len(X)
    z = X @ params["W1"] + params["b1"]
    h = silu(z)
    p = torch.softmax(h @ params["W2"] + params["b2"], dim=-1)
    dlogits = (p - F.one_hot(targets, p.shape[1]).to(p.dtype)) / n

    def backward(dlogits, local):
        dh = dlogits @ params["W2"].T
        dz = dh * local
        return {"W1": X.T @ dz, "b1": dz.sum(0), "W2": h.T @ dlogits, "b2": dlogits.sum(0)}

    s, sh = torch.sigmoid(z), torch.sigmoid(h)
    right_local = s * (1 + z * (1 - s))
    variants = [(SILU_SKIPPED, backward(dlogits, torch.ones_like(z))),
                (SILU_AT_OUTPUT, backward(dlogits, sh * (1 + h * (1 - sh)))),
                (CE_NOT_DIVIDED, backward(dlogits * n, right_local))]
    return {key: [m.looks_like(grads[key]) for m, grads in variants
                  if not torch.allclose(grads[key], backward(dlogits, right_local)[key])]
            for key in ("W1", "b1", "W2", "b2")}


def _mlp_case(gen: torch.Generator, n: int, d: int, hidden: int, classes: int):
    params = {"W1": uniform(gen, (d, hidden), -1, 1), "b1": uniform(gen, (hidden,), -0.5, 0.5),
              "W2": uniform(gen, (hidden, classes), -1, 1), "b2": uniform(gen, (classes,), -0.5, 0.5)}
    return params, uniform(gen, (n, d), -1.5, 1.5), torch.randint(classes, (n,), generator=gen)


def _run_mlp_gradients(mlp_gradients, params: dict[str, Tensor], X: Tensor, targets: Tensor) -> None:
    __tracebackhide__ = True
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in params.items())
    what = f"mlp_gradients(params, X, targets) with {shapes}, X {tuple(X.shape)}"
    answer = call_learner(mlp_gradients, params, X, targets, what=what, forbid=[Route.AUTOGRAD])
    if type(answer) is not dict or set(answer) != set(params):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a dict with the keys {sorted(params)}.")
    names = list(params)
    expected = dict(zip(names, autograd_gradient(lambda *ps: mlp_loss(dict(zip(names, ps)), X, targets),
                                                 *params.values())))
    symptoms = _mlp_symptoms(params, X, targets)
    for key in ("b2", "W2", "b1", "W1"):  # from the loss down: the first wrong one is where the mistake is
        expect_close(as_answer(answer[key], what=f"{what}: {key}"), expected[key], what=f"{what}: d loss / d {key}",
                     symptoms=symptoms[key])


@check
def check_mlp_gradients(mlp_gradients, seed: int | None = None) -> None:
    """Part D: mlp_gradients(params, X, targets) = every parameter's gradient of the mean cross-entropy of
    silu(X·W1 + b1)·W2 + b2, by hand (no autograd), the inputs unchanged."""
    __tracebackhide__ = True
    gen = generator("11/mlp/public", 0) if seed is None else generator("11/mlp", seed)
    sizes = [(6, 4, 5, 3), (4, 3, 6, 4)] if seed is None else \
        [(randint(gen, 3, 9), randint(gen, 2, 6), randint(gen, 3, 8), randint(gen, 2, 5)) for _ in range(3)]
    for n, d, hidden, classes in sizes:
        with trial():
            _run_mlp_gradients(mlp_gradients, *_mlp_case(gen, n, d, hidden, classes))


def accuracy(params: dict[str, Tensor], X: Tensor, y: Tensor) -> float:
    """Fraction of examples whose largest logit is their label."""
    with torch.no_grad():
        logits = silu(X @ params["W1"] + params["b1"]) @ params["W2"] + params["b2"]
    return float((logits.argmax(dim=1) == y).double().mean())


def _floats(value: Any, count: int | None = None) -> bool:
    return type(value) is list and bool(value) and all(type(v) is float for v in value) and (
        count is None or len(value) == count)


def _expect_history(history: Any, what: str) -> list[float]:
    """The losses, once the history has the stated form: 'loss', 'grad_norms' per layer, 'max_norm', 'clipped_norm'."""
    __tracebackhide__ = True
    if type(history) is not dict or not {"loss", "grad_norms", "max_norm", "clipped_norm"} <= set(history):
        raise GradingFailure(f"{what}: history must be a dict with the keys 'loss', 'grad_norms', 'max_norm' and "
                             f"'clipped_norm'; got {history!r:.80}.")
    losses = history["loss"]
    if not _floats(losses):
        raise GradingFailure(f"{what}: history['loss'] must be a non-empty list of Python floats (loss.item()), "
                             "one a step.")
    norms = history["grad_norms"]
    if type(norms) is not dict or set(norms) != {"W1", "b1", "W2", "b2"} or not all(
            _floats(v, len(losses)) for v in norms.values()):
        raise GradingFailure(f"{what}: history['grad_norms'] must map each of W1, b1, W2, b2 to a list of floats, "
                             f"one per step ({len(losses)} steps).")
    if type(history["max_norm"]) is not float or not _floats(history["clipped_norm"], len(losses)):
        raise GradingFailure(f"{what}: history['max_norm'] must be a float and history['clipped_norm'] a list of "
                             f"floats, one per step ({len(losses)} steps).")
    return losses


def _expect_global_clipping(history: dict, what: str) -> None:
    """The recorded clipped norms are min(global norm, max_norm) at every step, and clipping acted at least once."""
    __tracebackhide__ = True
    max_norm, clipped = history["max_norm"], history["clipped_norm"]
    layers = list(history["grad_norms"].values())
    steps = range(len(clipped))
    total = [math.sqrt(sum(layer[t] ** 2 for layer in layers)) for t in steps]
    acted = [t for t in steps if total[t] > max_norm * (1 + 1e-9)]
    if not acted:
        raise _proven(f"{what}: the global gradient norm never exceeded max_norm = {max_norm:g} (largest "
                      f"{max(total):.4g}), so clipping never acted.", CLIPPING_NEVER_ACTED)
    wrong = [t for t in steps if not math.isclose(clipped[t], min(total[t], max_norm), rel_tol=1e-6, abs_tol=1e-12)]
    if not wrong:
        return
    per_tensor = [math.sqrt(sum(min(layer[t], max_norm) ** 2 for layer in layers)) for t in steps]
    t = wrong[0]
    message = (f"{what}: at step {t} the global norm was {total[t]:.6g} and max_norm {max_norm:g}, so the gradients "
               f"you step with should have norm {min(total[t], max_norm):.6g}; history['clipped_norm'] says "
               f"{clipped[t]:.6g} ({len(wrong)} of {len(clipped)} steps disagree).")
    # Named on the learner's own records, when every disagreeing step fits one mistake and at least two steps
    # tell it apart from the other (per-tensor clipping of tensors that are all below max_norm clips nothing).
    def fits(values):
        return [u for u in wrong if math.isclose(clipped[u], values[u], rel_tol=1e-6)]

    telling = [u for u in wrong if not math.isclose(per_tensor[u], total[u], rel_tol=1e-6)]
    if len(fits(per_tensor)) == len(wrong) and len(set(telling) & set(fits(per_tensor))) >= 2:
        raise _proven(message, PER_TENSOR_CLIPPING)
    if len(fits(total)) == len(wrong) and len(wrong) >= 2:
        raise _proven(message, NOT_CLIPPED)
    raise GradingFailure(message)


def _run_train_digits(train_digits, split_seed: int) -> None:
    __tracebackhide__ = True
    X_train, y_train, X_test, y_test = digits_split(split_seed)
    what = f"train_digits(X_train, y_train) on a split of the digits drawn with seed {split_seed}"
    routes = Routes()
    answer = call_learner(train_digits, X_train, y_train, what=what, routes=routes,
                          forbid=[Route.OPTIMIZER, Route.CLIPPING])
    if type(answer) not in (tuple, list) or len(answer) != 2:
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected (params, history).")
    params, history = answer
    if type(params) is not dict or set(params) != {"W1", "b1", "W2", "b2"}:
        raise GradingFailure(f"{what}: params must be a dict with the keys W1, b1, W2, b2.")
    steps = len(history["loss"]) if type(history) is dict and type(history.get("loss")) is list else 0
    if steps and routes.backward_runs >= steps:
        raise _proven(f"{what} ran {routes.backward_runs} backward passes in {steps} steps.", TRAINED_WITH_AUTOGRAD)
    gates = math.ceil(steps / GATE_EVERY)
    if steps and routes.backward_runs < gates:
        raise _proven(f"{what} ran {routes.backward_runs} backward passes in {steps} steps: the gradcheck gate "
                      f"should have run {gates} times.", NO_GATE)
    if steps and routes.backward_runs > gates:
        raise GradingFailure(f"{what} ran {routes.backward_runs} backward passes in {steps} steps; the gradcheck "
                             f"gate runs once every {GATE_EVERY} steps, {gates} times, and is the only place autograd "
                             "may run.")
    losses = _expect_history(history, what)
    _expect_global_clipping(history, what)
    held_out = accuracy({k: torch.as_tensor(v, dtype=torch.float64) for k, v in params.items()}, X_test, y_test)
    if held_out < DIGITS_ACCURACY:
        raise GradingFailure(f"{what}: held-out accuracy {held_out:.1%} on {len(y_test)} digits; the part asks for at "
                             f"least {DIGITS_ACCURACY:.0%}. Loss went from {losses[0]:.4g} to {losses[-1]:.4g} in "
                             f"{len(losses)} steps.")


@check
def check_train_digits(train_digits, seed: int | None = None) -> None:
    """Part E: train_digits(X_train, y_train) trains the MLP of Part D with mlp_gradients, clipping and a gradcheck
    gate every GATE_EVERY steps, and reaches DIGITS_ACCURACY on the held-out digits."""
    __tracebackhide__ = True
    split_seeds = [0] if seed is None else [randint(generator("11/digits", seed), 1, 10**6)]
    for split_seed in split_seeds:
        with trial():
            _run_train_digits(train_digits, split_seed)


# ------------------------------------------------------------------------------------------------------------------
# References offered to learners whose earlier work is broken (the notebook marks their use clearly). They are the
# course's reference answers to exercises 02 and 04, kept short.

class ReferenceValue:
    """The reference scalar engine of exercise 02: +, -, *, /, **, neg, relu, tanh, exp, log, backward()."""

    def __init__(self, data, children=(), op=""):
        self.data, self.grad, self._prev, self._op = float(data), 0.0, set(children), op
        self._backward = lambda: None

    def __repr__(self):
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    def _node(self, data, children, op, rule):
        out = ReferenceValue(data, children, op)

        def _backward():
            for child, local in rule(out):
                child.grad += local * out.grad

        out._backward = _backward
        return out

    def __add__(self, other):
        other = _as_value(other)
        return self._node(self.data + other.data, (self, other), "+", lambda out: ((self, 1.0), (other, 1.0)))

    def __mul__(self, other):
        other = _as_value(other)
        return self._node(self.data * other.data, (self, other), "*",
                          lambda out: ((self, other.data), (other, self.data)))

    def __pow__(self, k):
        return self._node(self.data**k, (self,), f"**{k}", lambda out: ((self, k * self.data ** (k - 1)),))

    def relu(self):
        return self._node(max(self.data, 0.0), (self,), "relu", lambda out: ((self, float(self.data > 0)),))

    def tanh(self):
        t = math.tanh(self.data)
        return self._node(t, (self,), "tanh", lambda out: ((self, 1 - t * t),))

    def exp(self):
        return self._node(math.exp(self.data), (self,), "exp", lambda out: ((self, out.data),))

    def log(self):
        return self._node(math.log(self.data), (self,), "log", lambda out: ((self, 1 / self.data),))

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-other)

    def __truediv__(self, other):
        return self * _as_value(other) ** -1

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __rsub__(self, other):
        return _as_value(other) - self

    def __rtruediv__(self, other):
        return _as_value(other) / self

    def backward(self):
        order, seen = [], set()

        def visit(node):  # iterative depth-first post-order: deep graphs are fine
            stack = [(node, iter(node._prev))]
            seen.add(node)
            while stack:
                current, children = stack[-1]
                child = next(children, None)
                if child is None:
                    order.append(stack.pop()[0])
                elif child not in seen:
                    seen.add(child)
                    stack.append((child, iter(child._prev)))

        visit(self)
        self.grad = 1.0
        for node in reversed(order):
            node._backward()


def _as_value(x):
    return x if isinstance(x, ReferenceValue) else ReferenceValue(x)


def reference_linear_backward(X: Tensor, W: Tensor, dY: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Exercise 04's reference: (dX, dW, db) for Y = X·W + b."""
    return dY @ W.T, X.T @ dY, dY.sum(dim=0)


def reference_softmax_cross_entropy_backward(logits: Tensor, targets: Tensor) -> Tensor:
    """Exercise 04's reference: d mean cross-entropy / d logits = (softmax − onehot) / N."""
    return (torch.softmax(logits, dim=-1) - F.one_hot(targets, logits.shape[1]).to(logits.dtype)) / len(logits)
