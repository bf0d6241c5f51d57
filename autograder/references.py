"""The course's reference answers that later material builds on, for lessons and learners alike: exercise 02's scalar
engine (:class:`ReferenceValue`), with :func:`few_collections`, the cycle-collector setting it trains fast under, and
exercise 04's linear and softmax-cross-entropy backward passes.

Lesson 11 trains with them, and exercise 11 offers them to a learner whose own earlier answer is broken (the
notebook marks their use), so that the capstone never blocks on an earlier exercise.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from .graph import topological

Tensor = torch.Tensor

#: Allocations between two runs of Python's cycle collector while a scalar engine trains (Python's own: 700).
SCALAR_ENGINE_GC_THRESHOLD = 50_000


@contextlib.contextmanager
def few_collections() -> Iterator[None]:
    """Python's cycle collector run rarely, and never over what existed before, for the length of a scalar-engine
    training run; as it was afterwards. Each Value node and its backward closure form a reference cycle, so a step's
    graph is freed only by the collector, and by default its passes re-scan the objects torch made at import many
    times a step: most of a run's time (lesson 11, section 1, measures it). Same arithmetic, several times faster."""
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(SCALAR_ENGINE_GC_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.collect()  # the run's garbage, before unfreezing: a pass over what existed before took ~0.9 s a run
        if not frozen:  # what the caller froze (lesson 11's first cell does) stays frozen
            gc.unfreeze()


class ReferenceValue:
    """The reference scalar engine of exercise 02: +, -, *, /, **, neg, relu, tanh, exp, log, backward().

    micrograd's design (each node keeps its inputs in ``_prev``, its operation in ``_op`` and a ``_backward`` closure
    that adds its share into its inputs' ``.grad``), written one closure per node: a scalar engine spends its time
    creating nodes, and exercise 11's training creates a few hundred thousand."""

    def __init__(self, data, children=(), op=""):
        self.data = float(data)
        self.grad = 0.0
        self._prev = set(children)
        self._op = op
        self._backward = _leaf_backward

    def __repr__(self):
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g})"

    def __add__(self, other):
        other = other if isinstance(other, ReferenceValue) else ReferenceValue(other)
        out = ReferenceValue(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, ReferenceValue) else ReferenceValue(other)
        out = ReferenceValue(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, k):
        out = ReferenceValue(self.data**k, (self,), f"**{k}")

        def _backward():
            self.grad += k * self.data ** (k - 1) * out.grad

        out._backward = _backward
        return out

    def _unary(self, data, op, local):
        out = ReferenceValue(data, (self,), op)

        def _backward():
            self.grad += local * out.grad

        out._backward = _backward
        return out

    def relu(self):
        return self._unary(max(self.data, 0.0), "relu", float(self.data > 0))

    def tanh(self):
        t = math.tanh(self.data)
        return self._unary(t, "tanh", 1 - t * t)

    def exp(self):
        e = math.exp(self.data)
        return self._unary(e, "exp", e)

    def log(self):
        return self._unary(math.log(self.data), "log", 1 / self.data)

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
        self.grad = 1.0
        for node in topological(self, _inputs_of):  # every consumer before its inputs
            node._backward()


def _inputs_of(node: ReferenceValue):
    return node._prev


def _leaf_backward():
    """A leaf's backward: nothing to send further."""


def _as_value(x):
    return x if isinstance(x, ReferenceValue) else ReferenceValue(x)


def reference_linear_backward(X: Tensor, W: Tensor, dY: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Exercise 04's reference: (dX, dW, db) for Y = X·W + b."""
    return dY @ W.T, X.T @ dY, dY.sum(dim=0)


def reference_softmax_cross_entropy_backward(logits: Tensor, targets: Tensor) -> Tensor:
    """Exercise 04's reference: d mean cross-entropy / d logits = (softmax − onehot) / N."""
    return (torch.softmax(logits, dim=-1) - F.one_hot(targets, logits.shape[1]).to(logits.dtype)) / len(logits)
