"""Part D: ``Linear``, a torch.autograd.Function for Y = X·Wᵀ + b (nn.Linear's layout, X of shape (..., D_in), b
possibly None) whose forward saves only what its backward will use, decided from ``ctx.needs_input_grad``: W when X
needs a gradient, X when W does. Memory is measured with saved-tensor hooks
(:func:`~autograder.contracts.counting_saved`), gradients against autograd and central differences, and backward is
called on the node directly to see that it returns None for every input that needs no gradient."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...checking import (
    GradingFailure,
    Route,
    Routes,
    as_answer,
    call_learner,
    check,
    expect_close,
    fmt,
    proven_failure,
    trial,
)
from ...contracts import counting_saved
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream
from .common import ATOL, RTOL, distinct, shape_of
from .misconceptions import (
    AUTOGRAD,
    BIAS_AVERAGED,
    FORGOT_SAVE,
    GRADIENT_NOBODY_NEEDS,
    LEADING_DIMS_IGNORED,
    SAVED_UNNEEDED,
    TENSOR_ON_CTX,
    TENSOR_OUTSIDE_CTX,
    WEIGHT_GRADIENT_TRANSPOSED,
)

Tensor = torch.Tensor
NAMES = ("X", "W", "b")


def _require_function_class(cls, name: str) -> None:
    __tracebackhide__ = True
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise GradingFailure(f"{name} must be a class derived from torch.autograd.Function; got {cls!r:.80}.")
    for method in ("forward", "backward"):
        if getattr(cls, method) is getattr(torch.autograd.Function, method):
            raise GradingFailure(f"{name} does not define its own {method}(ctx, ...): write it as a @staticmethod.")


def _arrays_in(value, path: str, depth: int = 0) -> list[str]:
    """Paths of the tensors and NumPy arrays inside ``value`` (lists, tuples and dicts are opened)."""
    if isinstance(value, (Tensor, np.ndarray)):
        return [path]
    if depth > 3:
        return []
    if type(value) in (list, tuple):
        return [found for i, item in enumerate(value) for found in _arrays_in(item, f"{path}[{i}]", depth + 1)]
    if type(value) is dict:
        return [found for key, item in value.items() for found in _arrays_in(item, f"{path}[{key!r}]", depth + 1)]
    return []


def _stored_outside(cls) -> dict[str, int]:
    """{name: id} of the tensors and arrays held now where a Function could stash one besides ctx: the globals its
    methods see, the class itself."""
    spaces = [(vars(cls), f"{cls.__name__}.")]
    for method in ("forward", "backward"):
        function = inspect.getattr_static(cls, method)
        space = getattr(getattr(function, "__func__", function), "__globals__", None)
        if isinstance(space, dict) and all(space is not seen for seen, _ in spaces):
            spaces.append((space, "global "))
    return {f"{prefix}{name}": id(value) for space, prefix in spaces for name, value in list(space.items())
            if not name.startswith("__") and _arrays_in(value, name)}


@dataclass(frozen=True)
class _Layer:
    """One case: the inputs (leaves, requires_grad as the case says; b may be None) and the upstream gradient."""

    X: Tensor
    W: Tensor
    b: Tensor | None
    dY: Tensor

    @property
    def inputs(self) -> tuple:
        return self.X, self.W, self.b

    def needs(self) -> tuple[bool, bool, bool]:
        return tuple(t is not None and t.requires_grad for t in self.inputs)

    def describe(self) -> str:
        grads = ", ".join(f"{name} {'requires grad' if need else 'needs no gradient'}"
                          for name, need, t in zip(NAMES, self.needs(), self.inputs) if t is not None)
        bias = "" if self.b is not None else ", b = None"
        return f"Linear.apply(X, W, b) with X {shape_of(self.X)}, W {shape_of(self.W)}{bias}; {grads}"


def _layer(gen: torch.Generator, x_shape: tuple[int, ...], d_out: int, needs: str, bias: bool = True) -> _Layer:
    """``needs``: the letters of the inputs that require grad ("XWb", "Wb", "X", "b"...)."""
    X = uniform(gen, x_shape).requires_grad_("X" in needs)
    W = uniform(gen, (d_out, x_shape[-1])).requires_grad_("W" in needs)
    b = uniform(gen, (d_out,)).requires_grad_("b" in needs) if bias else None
    return _Layer(X, W, b, uniform(gen, (*x_shape[:-1], d_out), -1, 1))


def _forward(linear_cls, layer: _Layer, what: str, saved: list) -> Tensor:
    """``Linear.apply(X, W, b)``, autograd forbidden, every tensor autograd saves meanwhile recorded in ``saved``;
    no tensor may land in a global or on the class."""
    __tracebackhide__ = True
    def forward(*inputs):  # Linear.apply, named as the learner knows it
        return linear_cls.apply(*inputs)

    forward.__qualname__ = f"{linear_cls.__name__}.forward"
    before = _stored_outside(linear_cls)
    out = call_learner(counting_saved(forward, saved), *layer.inputs, what=what, forbid=[Route.AUTOGRAD])
    moved = [name for name, ident in _stored_outside(linear_cls).items() if before.get(name) != ident]
    if moved:
        raise proven_failure(f"{what} stored a tensor in {', '.join(moved)}, outside ctx.", TENSOR_OUTSIDE_CTX)
    if type(out) is not torch.Tensor:
        raise GradingFailure(f"{what} returned {type(out).__name__}; expected a plain tensor.")
    node = out.grad_fn
    if getattr(type(node), "_forward_cls", None) is not linear_cls:
        raise GradingFailure(
            f"{what} returned a tensor whose grad_fn is {type(node).__name__ if node else None}, not Linear's own "
            "backward node, so autograd would never call your backward. Let Linear.apply run your forward; do not "
            "override apply.")
    X, W, b = (t.detach() if t is not None else None for t in layer.inputs)
    expect_close(out, F.linear(X, W, b), what=what, source="F.linear", rtol=RTOL, atol=ATOL)
    return out


def _expect_saved(node, layer: _Layer, saved: list, what: str) -> None:
    """Forward saved, through ctx.save_for_backward, at most the bytes backward needs (W if X needs a gradient, X if
    W does), and kept no tensor as a plain attribute of ctx."""
    __tracebackhide__ = True
    stashed = [found for key, value in vars(node).items() for found in _arrays_in(value, f"ctx.{key}")]
    if stashed:
        raise proven_failure(f"{what}: forward keeps {', '.join(stashed)} as a plain attribute of ctx.", TENSOR_ON_CTX)
    need_X, need_W, _ = layer.needs()
    budget = 8 * ((layer.W.numel() if need_X else 0) + (layer.X.numel() if need_W else 0))
    used = 8 * sum(math.prod(shape) for shape in saved)
    shapes = ", ".join(str(shape).replace(",)", ")") for shape in saved) or "nothing"
    if used > budget:
        raise proven_failure(f"{what}: forward saved {shapes}, {used} bytes; the gradients asked for here can be "
                             f"computed from {budget} bytes of what forward received.", SAVED_UNNEEDED)
    if budget and not saved:
        raise proven_failure(f"{what}: forward saved no tensor with ctx.save_for_backward.", FORGOT_SAVE)


def _symptoms(layer: _Layer, index: int) -> list:
    """The known mistakes in gradient ``index`` (0: dX, 1: dW, 2: db) and what each gives here."""
    X, W, dY = layer.X.detach(), layer.W.detach(), layer.dY
    rows_x, rows_dy = X.reshape(-1, X.shape[-1]), dY.reshape(-1, dY.shape[-1])
    found = []
    if index == 1 and W.shape[0] == W.shape[1]:
        found.append(WEIGHT_GRADIENT_TRANSPOSED.looks_like(rows_x.T @ rows_dy))
    if index == 1 and dY.dim() > 2:
        found.append(LEADING_DIMS_IGNORED.looks_like(dY.transpose(-2, -1) @ X))  # one dW per leading index
    if index == 2:
        found.append(BIAS_AVERAGED.looks_like(rows_dy.mean(dim=0)))
    if index == 2 and dY.dim() > 2:
        found.append(LEADING_DIMS_IGNORED.looks_like(dY.sum(dim=0)))
    return found


def _expect_gradients(grads, layer: _Layer, what: str) -> None:
    """The backward's own return values: None where no gradient is needed, else the right gradient."""
    __tracebackhide__ = True
    if type(grads) not in (tuple, list) or len(grads) != 3:
        raise GradingFailure(f"{what} returned {grads!r:.80}; expected one gradient per input of forward: "
                             "(dX, dW, db).")
    present = [t for t in layer.inputs if t is not None]
    loss = (lambda X, W, b: (F.linear(X, W, b) * layer.dY).sum()) if layer.b is not None else \
        (lambda X, W: (F.linear(X, W) * layer.dY).sum())
    expected, fd = autograd_gradient(loss, *present), central_difference(loss, *present)
    for index, (name, need, got) in enumerate(zip(NAMES, layer.needs(), grads)):
        if not need:
            if got is not None:
                raise proven_failure(f"{what} returned a gradient for {name}, which needs none here.",
                                     GRADIENT_NOBODY_NEEDS)
            continue
        label = f"{what}: d{name}"
        answer = as_answer(got, what=label)
        if answer.shape != expected[index].shape:
            raise GradingFailure(f"{label} has shape {shape_of(answer)}; expected {shape_of(expected[index])}, the "
                                 f"shape of {name}.", suspects=tuple(s.misconception for s in _symptoms(layer, index)
                                                                     if s.matches(answer)))
        expect_close(answer, expected[index], what=label, fd=fd[index], rtol=RTOL, atol=ATOL,
                     symptoms=_symptoms(layer, index), extra=f"  inputs:             X = {fmt(layer.X)}, "
                                                             f"W = {fmt(layer.W)}, dY = {fmt(layer.dY)}")


def _check_layer(linear_cls, layer: _Layer, other: _Layer | None = None) -> None:
    """Forward (value, node, what it saved), backward called on the node (Nones and values), then the gradients
    through autograd itself; ``other``: a second call made before this one's backward."""
    __tracebackhide__ = True
    what = layer.describe()
    saved: list = []
    out = _forward(linear_cls, layer, what, saved)
    _expect_saved(out.grad_fn, layer, saved, what)
    in_flight = None if other is None else _forward(linear_cls, other, f"{other.describe()} (a second call)", [])
    grads = call_learner(linear_cls.backward, out.grad_fn, layer.dY, what=f"Linear.backward for {what}",
                         forbid=[Route.AUTOGRAD])
    _expect_gradients(grads, layer, f"Linear.backward for {what}")
    wanted = [t for t, need in zip(layer.inputs, layer.needs()) if need]
    routes = Routes()
    through = call_learner(torch.autograd.grad, out, wanted, layer.dY, what=f"torch.autograd.grad through {what}",
                           routes=routes)
    del in_flight
    if routes.backward_runs > 1:  # the check's own torch.autograd.grad is one run; more ran inside the backward
        raise proven_failure(f"the backward of {what} ran autograd itself.", AUTOGRAD)
    for got, own in zip(through, [g for g, need in zip(grads, layer.needs()) if need]):
        expect_close(got, own, what=f"the gradient autograd got through {what}", source="your backward called "
                     "directly", rtol=RTOL, atol=ATOL)


def _layers(gen: torch.Generator, grading_seed: int | None) -> list[_Layer]:
    """Part D's cases, the same kinds at every seed (which inputs need a gradient; X 1-D, 2-D or 3-D; b or None; a
    square W), with sizes drawn from the seed (public: fixed); X and W never hold the same number of elements."""
    n, d_in, d_out = (4, 3, 2) if grading_seed is None else distinct(gen, 3, 2, 6)
    batch, steps = (2, 5) if grading_seed is None else distinct(gen, 2, 2, 5)
    return [_layer(gen, (n, d_in), d_out, "XWb"), _layer(gen, (n, d_in), d_out, "Wb"),
            _layer(gen, (batch, steps, d_in), d_out, "X"), _layer(gen, (batch, steps, d_in), d_out, "b"),
            _layer(gen, (d_in,), d_out, "XW", bias=False), _layer(gen, (batch, steps, d_in), d_in, "XWb"),
            _layer(gen, (n + 1, d_in), d_in, "Wb")]


@check
def check_linear_function(linear_cls, grading_seed: int | None = None) -> None:
    """Part D: Linear is a torch.autograd.Function for Y = X·Wᵀ + b whose forward saves (ctx.save_for_backward,
    nothing on ctx, in globals or on the class) at most what its backward uses, decided by ctx.needs_input_grad, and
    whose backward, without autograd, returns the right gradients and None for every input that needs none.

    Domain: X float64 (..., D_in) (1-D, 2-D, 3-D), W (D_out, D_in), b (D_out,) or None, any finite values; any of
    them may or may not require grad (at least one does). Cases, the same kinds at every seed: all three train; X is
    data (W and b train); W and b frozen with a 3-D X; only b trains (nothing to save); a 1-D X without bias; a
    square W with a 3-D X and with a 2-D X (a transposed dW has W's shape); then two calls in flight. Sizes: public
    fixed, hidden drawn."""
    __tracebackhide__ = True
    _require_function_class(linear_cls, "Linear")
    gen = case_stream("04/linear_function", grading_seed)
    for layer in _layers(gen, grading_seed):
        with trial():
            _check_layer(linear_cls, layer)
    first, second = _layers(gen, grading_seed)[:2]
    with trial():
        _check_layer(linear_cls, first, other=_Layer(second.X, second.W.detach().requires_grad_(True), second.b,
                                                     second.dY))
