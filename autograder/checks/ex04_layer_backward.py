"""Checks for exercise 04, hand-derived backward passes: linear, softmax, cross-entropy, attention, custom Functions.

Each ``check_*`` function is one test cell's whole body. Without ``seed`` it runs the public cases a learner sees;
the hidden test cells pass ``seed=grading_seed()`` and get fresh random cases. Every gradient is compared with
autograd and float64 central differences, on shapes where the usual mistakes cannot hide: batch > 1 (sums over the
batch show), batch, features and outputs all different (a transpose has the wrong shape), d > 1 (the 1/√d shows).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checking import GradingFailure, Misconception, as_answer, call_learner, expect_close, fmt
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform

Tensor = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# Shared machinery: a case is one call of a learner's backward function and what each returned gradient must be.

@dataclass(frozen=True)
class _Case:
    call: str                              # how the function is called, with the input shapes
    args: dict[str, Tensor]                # what the learner's function receives, by name
    grads: dict[str, str]                  # the gradients it returns, in order -> whose shape each one has
    expected: tuple[Tensor, ...]           # by autograd
    fd: tuple[Tensor, ...]                 # by central differences
    mistakes: tuple[list[Misconception], ...]


def _stream(part: str, seed: int | None) -> torch.Generator:
    """Public cases come from a fixed stream of their own; hidden ones from the grading seed."""
    return generator(f"04/{part}/public", 0) if seed is None else generator(f"04/{part}", seed)


def _distinct(gen: torch.Generator, count: int, low: int = 2, high: int = 7) -> list[int]:
    """``count`` different sizes in [low, high], so that no two dimensions can be confused."""
    return (torch.randperm(high - low + 1, generator=gen)[:count] + low).tolist()


def _shape(t: Tensor) -> str:
    return str(tuple(t.shape)).replace(",)", ")")


def _make_case(name: str, args: dict[str, Tensor], grads: dict[str, str], loss: Callable, wrt: tuple[Tensor, ...],
               mistakes: tuple[list[Misconception], ...]) -> _Case:
    """A case whose expected gradients are those of the scalar ``loss(*wrt)``, by autograd and central differences."""
    shapes = ", ".join(f"{key} {_shape(value)}" for key, value in args.items())
    call = f"{name}({', '.join(args)}) with {shapes}"
    return _Case(call, args, grads, autograd_gradient(loss, *wrt), central_difference(loss, *wrt), mistakes)


#: Errors a learner's backward function raises, and what usually causes them.
KNOWN_ERRORS = {
    "cannot be multiplied": "a transpose in the wrong place. Write the shape under every factor of each product: "
                            "each gradient has the shape of the tensor it belongs to (dX like X, dW like W).",
    "must match the size": "a dimension dropped by a sum. A sum that is subtracted from or multiplied with the "
                           "full tensor needs keepdim=True so that it broadcasts along the right axis.",
    "does not require grad": "autograd instead of the hand-derived formula. The checks run your function with "
                             "autograd switched off (torch.no_grad()): compute the gradient with tensor operations.",
}


def _call(fn: Callable, *args, what: str):
    """call_learner, plus the likely cause when the learner's code raised a well-known error."""
    __tracebackhide__ = True
    try:
        return call_learner(fn, *args, what=what)
    except GradingFailure as failure:
        causes = [cause for symptom, cause in KNOWN_ERRORS.items() if symptom in str(failure)]
        if causes:
            raise GradingFailure(f"{failure}\nLikely misconception: {causes[0]}") from None
        raise


def _unpack(answer, case: _Case) -> tuple:
    names = tuple(case.grads)
    if len(names) == 1:
        return (answer,)
    # Exactly a tuple or list: a subclass could run its own code (__iter__, __len__) outside call_learner.
    if type(answer) not in (tuple, list) or len(answer) != len(names):
        raise GradingFailure(f"{case.call} returned {answer!r:.80}; expected a tuple ({', '.join(names)}).")
    return tuple(answer)


def _expect_gradient(received, expected: Tensor, *, what: str, shape_of: str, fd: Tensor,
                     mistakes: list[Misconception], extra: str) -> None:
    """expect_close, except that a gradient of the wrong shape is named too (a transposed one usually is)."""
    __tracebackhide__ = True
    got = as_answer(received, what=what)
    if got.shape != expected.shape:
        lines = [f"{what} has shape {_shape(got)}; expected {_shape(expected)}, the shape of {shape_of}.", extra]
        lines += [f"Likely misconception: {m.name}. {m.hint}" for m in mistakes if m.matches(got)][:1]
        raise GradingFailure("\n".join(lines))
    expect_close(got, expected, what=what, fd=fd, misconceptions=mistakes, extra=extra)


def _run(fn: Callable, case: _Case) -> None:
    """Call the learner's function on one case (autograd off: the gradients are derived by hand) and compare every
    gradient it returns; its inputs must not change."""
    __tracebackhide__ = True
    before = {key: value.clone() for key, value in case.args.items()}
    with torch.no_grad():
        answer = _call(fn, *case.args.values(), what=case.call)
    extra = "  inputs:             " + ", ".join(f"{key} = {fmt(value)}" for key, value in case.args.items())
    for got, name, shape_of, expected, fd, mistakes in zip(_unpack(answer, case), case.grads, case.grads.values(),
                                                           case.expected, case.fd, case.mistakes):
        _expect_gradient(got, expected, what=f"{case.call}: {name}", shape_of=shape_of, fd=fd, mistakes=mistakes,
                         extra=extra)
    for key, value in case.args.items():
        if not torch.equal(value, before[key]):
            raise GradingFailure(f"{case.call} changed its input {key} in place; compute new tensors instead.")


# ---------------------------------------------------------------------------------------------------------------
# Part A: linear layer

def _linear_case(X: Tensor, W: Tensor, b: Tensor, dY: Tensor) -> _Case:
    sum_hint = ("b is added to every one of the N rows of Y, so its gradient collects N contributions: "
                "db = dY.sum(dim=0), shape (D_out,).")
    mistakes = (
        [Misconception("transposed input gradient", "dX must have X's shape (N, D_in): dX = dY·Wᵀ.",
                       value=(dY @ W.T).T)],
        [Misconception("transposed weight gradient", "You returned dYᵀ·X, the transpose of the answer. dW must have "
                       "W's shape (D_in, D_out), and the one product of X and dY with that shape is Xᵀ·dY.",
                       value=dY.T @ X)],
        [Misconception("bias gradient not summed over the batch", "You returned one example's gradient. " + sum_hint,
                       value=dY[0]),
         Misconception("bias gradient not summed over the batch", "You returned dY itself. " + sum_hint, value=dY),
         Misconception("bias gradient averaged over the batch", "Your db is N times too small: mean instead of "
                       "sum. Any averaging belongs to the loss and already arrives inside dY. " + sum_hint,
                       value=dY.mean(dim=0)),
         Misconception("bias gradient summed over the wrong axis", "dY.sum(dim=1) sums over the outputs. " + sum_hint,
                       value=dY.sum(dim=1))],
    )
    return _make_case("linear_backward", {"X": X, "W": W, "dY": dY}, {"dX": "X", "dW": "W", "db": "b"},
                      lambda X, W, b: ((X @ W + b) * dY).sum(), (X, W, b), mistakes)


def check_linear_backward(linear_backward, seed: int | None = None) -> None:
    """Part A: for Y = X·W + b, linear_backward(X, W, dY) returns (dX, dW, db)."""
    __tracebackhide__ = True
    gen = _stream("linear", seed)
    sizes = [(4, 3, 2), (2, 5, 3)] if seed is None else [_distinct(gen, 3) for _ in range(2)]
    for n, d_in, d_out in sizes:
        X, W, b = uniform(gen, (n, d_in)), uniform(gen, (d_in, d_out)), uniform(gen, (d_out,))
        _run(linear_backward, _linear_case(X, W, b, uniform(gen, (n, d_out), -1, 1)))


# ---------------------------------------------------------------------------------------------------------------
# Part B: softmax

def _softmax_case(z: Tensor, ds: Tensor) -> _Case:
    s = torch.softmax(z, dim=-1)
    rule = "dz = s * (ds - (ds * s).sum(dim=-1, keepdim=True))"
    mistakes = [
        Misconception("softmax gradient as s(1 − s) elementwise", "That is only the diagonal of the Jacobian "
                      "diag(s) − s·sᵀ: every output depends on every logit through the shared denominator, so the "
                      f"off-diagonal terms −s_i·s_j count too. Use {rule}.", value=ds * s * (1 - s)),
        Misconception("sum over the whole tensor instead of each row", "The dot product ⟨ds, s⟩ belongs to one "
                      f"softmax, i.e. one row: sum along the last dimension with keepdim=True. {rule}.",
                      value=s * (ds - (ds * s).sum())),
        Misconception("sum over the wrong axis", f"The softmax runs along the last dimension; so does its sum. {rule}.",
                      value=s * (ds - (ds * s).sum(dim=0, keepdim=True))),
        Misconception("sign error", f"Subtract the dot product from ds, not ds from it: {rule}.",
                      value=s * ((ds * s).sum(dim=-1, keepdim=True) - ds)),
    ]
    return _make_case("softmax_backward", {"s": s, "ds": ds}, {"dz": "z"},
                      lambda z: (torch.softmax(z, dim=-1) * ds).sum(), (z,), (mistakes,))


def check_softmax_backward(softmax_backward, seed: int | None = None) -> None:
    """Part B: for s = softmax(z, dim=-1), softmax_backward(s, ds) returns dz (vector, batch, and 3-D inputs)."""
    __tracebackhide__ = True
    gen = _stream("softmax", seed)
    if seed is None:
        shapes = [(5,), (3, 4), (2, 3, 5)]
    else:
        n, c = _distinct(gen, 2, 2, 6)
        shapes = [(c,), (n, c), (choice(gen, [2, 3]), n, c)]
    for shape in shapes:
        _run(softmax_backward, _softmax_case(uniform(gen, shape), uniform(gen, shape, -1, 1)))


# ---------------------------------------------------------------------------------------------------------------
# Part C: softmax + cross-entropy

def _cross_entropy_case(logits: Tensor, targets: Tensor) -> _Case:
    n, c = logits.shape
    p, y = torch.softmax(logits, dim=-1), F.one_hot(targets, c).to(logits.dtype)
    rule = "dlogits = (softmax(logits) - onehot(targets)) / N"
    mistakes = [
        Misconception("cross-entropy gradient missing the 1/batch", f"F.cross_entropy averages over the N = {n} "
                      f"rows, so each row's p − y is divided by N: {rule}.", value=p - y),
        Misconception("divided by the number of classes", f"The mean is over the N = {n} rows (the batch), not the "
                      f"C = {c} classes: {rule}.", value=(p - y) / c),
        Misconception("sign error", f"The gradient is p − y, not y − p: {rule}.", value=(y - p) / n),
        Misconception("softmax over the batch axis", f"Each row is one example: softmax(logits, dim=-1). {rule}.",
                      value=(torch.softmax(logits, dim=0) - y) / n),
        Misconception("one-hot target not subtracted", f"The −log p of the target class contributes −1 there: {rule}.",
                      value=p / n),
    ]
    return _make_case("softmax_cross_entropy_backward", {"logits": logits, "targets": targets}, {"dlogits": "logits"},
                      lambda z: F.cross_entropy(z, targets), (logits,), (mistakes,))


def check_softmax_cross_entropy_backward(softmax_cross_entropy_backward, seed: int | None = None) -> None:
    """Part C: the gradient of F.cross_entropy(logits, targets) (mean over the batch) with respect to the logits."""
    __tracebackhide__ = True
    gen = _stream("cross_entropy", seed)
    shapes = [(4, 3), (2, 5)] if seed is None else [tuple(_distinct(gen, 2)) for _ in range(2)]
    for n, c in shapes:
        targets = torch.randint(c, (n,), generator=gen)
        _run(softmax_cross_entropy_backward, _cross_entropy_case(uniform(gen, (n, c)), targets))


# ---------------------------------------------------------------------------------------------------------------
# Part D: scaled dot-product attention

def _attention_gradients(Q, K, V, dO, *, forward_scale: float, backward_scale: float, elementwise: bool = False):
    """(dQ, dK, dV) of a hand-written attention backward, with the knobs that reproduce the usual mistakes."""
    P = torch.softmax(Q @ K.T * forward_scale, dim=-1)
    dP = dO @ V.T
    dS = P * (1 - P) * dP if elementwise else P * (dP - (dP * P).sum(dim=-1, keepdim=True))
    return backward_scale * dS @ K, backward_scale * dS.T @ Q, P.T @ dO


def _attention_case(Q: Tensor, K: Tensor, V: Tensor, dO: Tensor) -> _Case:
    d = Q.shape[-1]
    tau = 1 / math.sqrt(d)
    scale = "The scale in S = Q·Kᵀ/√d reappears in both dQ = dS·K/√d and dK = dSᵀ·Q/√d."
    variants = [
        ("missing 1/√d scale", f"Your dQ or dK is √d = {math.sqrt(d):g} times too large. " + scale,
         dict(forward_scale=tau, backward_scale=1.0)),
        ("missing 1/√d scale", "You left the scale out of the forward pass too, so P itself is wrong. " + scale,
         dict(forward_scale=1.0, backward_scale=1.0)),
        ("scaled by 1/d instead of 1/√d", f"Here d = {d} and √d = {math.sqrt(d):g}. " + scale,
         dict(forward_scale=1 / d, backward_scale=1 / d)),
        ("softmax gradient as s(1 − s) elementwise", "Each row of P is a softmax, so dS = P * (dP − rowsum(dP * P)); "
         "P * (1 − P) * dP drops the off-diagonal terms of its Jacobian.",
         dict(forward_scale=tau, backward_scale=tau, elementwise=True)),
    ]
    wrong = [(name, hint, _attention_gradients(Q, K, V, dO, **knobs)) for name, hint, knobs in variants]
    mistakes = tuple([Misconception(name, hint, value=grads[i]) for name, hint, grads in wrong] for i in range(3))
    P = torch.softmax(Q @ K.T * tau, dim=-1)
    mistakes[2].append(Misconception("transposed value gradient", "dV must have V's shape (m, e): dV = Pᵀ·dO.",
                                     value=dO.T @ P))

    def loss(Q, K, V):
        return (torch.softmax(Q @ K.T / math.sqrt(d), dim=-1) @ V * dO).sum()

    return _make_case("attention_backward", {"Q": Q, "K": K, "V": V, "dO": dO}, {"dQ": "Q", "dK": "K", "dV": "V"},
                      loss, (Q, K, V), mistakes)


def check_attention_backward(attention_backward, seed: int | None = None) -> None:
    """Part D: for O = softmax(Q·Kᵀ/√d)·V, attention_backward(Q, K, V, dO) returns (dQ, dK, dV)."""
    __tracebackhide__ = True
    gen = _stream("attention", seed)
    if seed is None:
        sizes = [(3, 5, 4, 2), (2, 3, 9, 4)]
    else:
        sizes = [(*_distinct(gen, 2), choice(gen, [4, 9, 16]), int(torch.randint(2, 5, (), generator=gen)))
                 for _ in range(2)]
    for n, m, d, e in sizes:
        Q, K, V = uniform(gen, (n, d), -1, 1), uniform(gen, (m, d), -1, 1), uniform(gen, (m, e))
        _run(attention_backward, _attention_case(Q, K, V, uniform(gen, (n, e), -1, 1)))


# ---------------------------------------------------------------------------------------------------------------
# Part E: a custom torch.autograd.Function

SAVE_HINT = ("In forward, call ctx.save_for_backward(...) with the tensors backward needs; in backward, read them "
             "back with ctx.saved_tensors. Tensors kept as plain ctx attributes, in globals or on the class escape "
             "autograd's bookkeeping (and two calls in flight overwrite each other's).")


def _require_function_class(cls, name: str) -> None:
    __tracebackhide__ = True
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise GradingFailure(f"{name} must be a class derived from torch.autograd.Function; got {cls!r:.80}.")
    for method in ("forward", "backward"):
        if getattr(cls, method) is getattr(torch.autograd.Function, method):
            raise GradingFailure(f"{name} does not define its own {method}(ctx, ...): write it as a @staticmethod.")


def _require_own_node(out: Tensor, cls, what: str) -> None:
    """The output's grad_fn must be the Function's own node, or autograd never calls the learner's backward."""
    __tracebackhide__ = True
    node = out.grad_fn
    if getattr(type(node), "_forward_cls", None) is not cls:
        raise GradingFailure(
            f"{what} returned a tensor whose grad_fn is {type(node).__name__ if node else None}, not {cls.__name__}'s "
            f"own backward node, so autograd would never call your backward. Let {cls.__name__}.apply run your "
            "forward; do not override apply.")


def _require_saved_tensors(out: Tensor, cls, what: str) -> None:
    __tracebackhide__ = True
    node = out.grad_fn
    try:
        saved = node.saved_tensors
    except RuntimeError as error:
        raise GradingFailure(f"{what}: reading the tensors forward saved failed: {error}") from None
    if not saved:
        stashed = [key for key, value in vars(node).items() if isinstance(value, Tensor)]
        where = f" (ctx.{stashed[0]} is a plain attribute, which save_for_backward does not see)" if stashed else ""
        raise GradingFailure(f"{what}: {cls.__name__}.forward saved no tensor with ctx.save_for_backward{where}.\n"
                             f"Likely misconception: forgot to save tensors for backward. {SAVE_HINT}")


def _sigmoid_grad(sigmoid_cls, x: Tensor, grad: Tensor, what: str, *, other: Tensor | None = None) -> Tensor:
    """x.grad through the learner's Function for upstream ``grad``; ``other`` is a second call kept in flight."""
    __tracebackhide__ = True
    x = x.clone().requires_grad_(True)
    out = call_learner(sigmoid_cls.apply, x, what=what)
    expect_close(out, torch.sigmoid(x.detach()), what=what, source="expected", misconceptions=[
        Misconception("sign inside the exponential", "σ(x) = 1 / (1 + exp(−x)).", value=torch.sigmoid(-x.detach()))])
    _require_own_node(out, sigmoid_cls, what)
    _require_saved_tensors(out, sigmoid_cls, what)
    in_flight = None if other is None else call_learner(  # kept alive until y1's backward has run
        sigmoid_cls.apply, other.clone().requires_grad_(True), what=f"{what}, second call")
    (got,) = call_learner(torch.autograd.grad, out, x, grad, what=f"the backward of {what}")
    del in_flight
    return got


def _check_sigmoid_backward(sigmoid_cls, x: Tensor, grad: Tensor) -> None:
    __tracebackhide__ = True
    what = f"Sigmoid.apply(x) for x of shape {_shape(x)}"
    got = _sigmoid_grad(sigmoid_cls, x, grad, what)
    loss = lambda t: (torch.sigmoid(t) * grad).sum()  # noqa: E731 - dL/dσ = grad
    s = torch.sigmoid(x)
    expect_close(got, autograd_gradient(loss, x)[0], what=f"the gradient through {what} (upstream gradient g)",
                 fd=central_difference(loss, x)[0], extra=f"  inputs:             x = {fmt(x)}, g = {fmt(grad)}",
                 misconceptions=[
        Misconception("saved the input, used it as the output", "Your backward computed g·x·(1 − x): the tensor "
                      "you saved is x, but σ'(x) = σ(x)·(1 − σ(x)) needs the output. Save the output s in forward "
                      "(or compute σ(x) from the saved x in backward).", value=grad * x * (1 - x)),
        Misconception("missing the upstream gradient", "backward returns grad_output · σ'(x), not σ'(x) alone.",
                      value=s * (1 - s))])


def _check_two_in_flight(sigmoid_cls, x1: Tensor, x2: Tensor, grad: Tensor) -> None:
    """Two forward calls before one backward: the first backward must still use the first call's saved tensors."""
    __tracebackhide__ = True
    what = f"y1 = Sigmoid.apply(x1), then y2 = Sigmoid.apply(x2) before y1's backward, x1 and x2 of shape {_shape(x1)}"
    got = _sigmoid_grad(sigmoid_cls, x1, grad, what, other=x2)
    loss = lambda t: (torch.sigmoid(t) * grad).sum()  # noqa: E731 - dL/dy1 = grad
    s2 = torch.sigmoid(x2)
    expect_close(got, autograd_gradient(loss, x1)[0], what=f"the gradient of y1 with respect to x1 ({what})",
                 fd=central_difference(loss, x1)[0],
                 extra=f"  inputs:             x1 = {fmt(x1)}, x2 = {fmt(x2)}, g = {fmt(grad)}", misconceptions=[
        Misconception("state kept outside ctx", "x1's gradient used the second call's output: the value backward "
                      "needs was stored somewhere every call overwrites. " + SAVE_HINT, value=grad * s2 * (1 - s2))])


def check_sigmoid_function(sigmoid_cls, seed: int | None = None) -> None:
    """Part E: Sigmoid is a torch.autograd.Function whose own backward, from saved tensors, returns g·σ(x)(1 − σ(x))."""
    __tracebackhide__ = True
    _require_function_class(sigmoid_cls, "Sigmoid")
    gen = _stream("sigmoid", seed)
    shapes = [(3, 4), (5,)] if seed is None else [choice(gen, [(2, 3), (4, 3), (6,), (2, 2, 3)]) for _ in range(2)]
    for shape in shapes:
        _check_sigmoid_backward(sigmoid_cls, uniform(gen, shape), uniform(gen, shape, -1, 1))
    _check_two_in_flight(sigmoid_cls, *(uniform(gen, shapes[0]) for _ in range(2)), uniform(gen, shapes[0], -1, 1))
    x = uniform(gen, shapes[0]).requires_grad_(True)
    accepted = call_learner(torch.autograd.gradcheck, sigmoid_cls.apply, (x,), raise_exception=False,
                            what="torch.autograd.gradcheck(Sigmoid.apply, (x,)) in float64")
    if not accepted:
        raise GradingFailure(f"torch.autograd.gradcheck(Sigmoid.apply, (x,)) in float64 rejects your Function for "
                             f"x = {fmt(x)}: its backward disagrees with central differences.")


# ---------------------------------------------------------------------------------------------------------------
# Part F: a gradcheck that can say yes and no

def _sigmoid_function(factor: float = 1.0) -> type[torch.autograd.Function]:
    """A sigmoid Function whose backward is ``factor`` times the right one (1.0: correct)."""

    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s = torch.sigmoid(x)
            ctx.save_for_backward(s)
            return s

        @staticmethod
        def backward(ctx, grad):
            (s,) = ctx.saved_tensors
            return factor * grad * s * (1 - s)

    return Sigmoid


def _linear_function(bias_reduction: str = "sum") -> type[torch.autograd.Function]:
    """Y = X·W + b as a Function; bias_reduction="mean" plants the averaged bias gradient."""

    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, W, b):
            ctx.save_for_backward(X, W)
            return X @ W + b

        @staticmethod
        def backward(ctx, dY):
            X, W = ctx.saved_tensors
            return dY @ W.T, X.T @ dY, getattr(dY, bias_reduction)(dim=0)

    return Linear


@dataclass(frozen=True)
class _Verdict:
    label: str                      # what the Function is, for the message
    function: Callable              # a Function's apply
    inputs: tuple[Tensor, ...]
    correct: bool                   # does its backward agree with its forward?


def _verdict_cases(seed: int | None) -> list[_Verdict]:
    gen = _stream("gradcheck", seed)
    n, d_in, d_out = (4, 3, 2) if seed is None else _distinct(gen, 3)
    x_shape = (3, 4) if seed is None else choice(gen, [(2, 3), (5,), (3, 2)])
    factor = 1.005 if seed is None else choice(gen, [1.005, 0.995])
    # Magnitudes in [0.5, 2]: values whose float32 rounding is coarse, so a float32 gradcheck always shows it.
    signed = lambda shape: uniform(gen, shape, 0.5, 2.0) * torch.where(  # noqa: E731
        torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).double()
    linear = lambda: tuple(signed(s).float() for s in ((n, d_in), (d_in, d_out), (d_out,)))  # noqa: E731
    sigmoid_dtype = torch.float64 if seed is None else choice(gen, [torch.float32, torch.float64])
    return [
        _Verdict("a sigmoid Function with a correct backward", _sigmoid_function().apply,
                 (signed(x_shape).to(sigmoid_dtype),), True),
        _Verdict("a linear Function (Y = X·W + b) with a correct backward", _linear_function().apply, linear(), True),
        _Verdict(f"a sigmoid Function whose backward is {abs(factor - 1):.1%} too {'large' if factor > 1 else 'small'}",
                 _sigmoid_function(factor).apply, (signed(x_shape),), False),
        _Verdict("a linear Function whose bias gradient is averaged over the batch instead of summed",
                 _linear_function("mean").apply, linear(), False),
    ]


def _float32_gradcheck_rejects(case: _Verdict) -> bool:
    leaves = tuple(t.clone().requires_grad_(True) for t in case.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return not torch.autograd.gradcheck(case.function, leaves, raise_exception=False)


def _verdict_hint(case: _Verdict, verdict, error: str = "") -> str:
    """The named mistake behind a wrong verdict (``verdict`` is None when the learner's code raised ``error``)."""
    float32 = any(t.dtype == torch.float32 for t in case.inputs)
    if "requires_grad" in error:
        return ("Likely misconception: inputs that do not require grad. gradcheck differentiates with respect to the "
                "inputs that require grad, so make the float64 copies with .requires_grad_(True).")
    if case.correct and float32 and _float32_gradcheck_rejects(case):
        return ("Likely misconception: gradcheck in float32. This backward is right, but in float32 the central "
                "differences gradcheck compares it with are mostly rounding noise (about 7 significant digits, "
                "a step of 1e-6). Make float64 copies of the inputs that require grad: "
                "x.detach().to(torch.float64).requires_grad_(True).")
    if not case.correct and verdict is True:
        return ("Likely misconception: a check that cannot say no (loosened tolerances). With its default "
                "tolerances in float64, gradcheck rejects this backward; loosen them (or ignore its verdict) and "
                "bugs of this size slip through. Keep the defaults and use float64 instead.")
    if verdict is None and not case.correct:
        return ("Likely misconception: gradcheck's exception not turned into a verdict. By default gradcheck raises "
                "GradcheckError on a mismatch; pass raise_exception=False so that it returns False.")
    return ""


def _check_verdict(passes_gradcheck, case: _Verdict) -> None:
    __tracebackhide__ = True
    names = ["x"] if len(case.inputs) == 1 else ["X", "W", "b"]
    shapes = ", ".join(f"{key} {_shape(t)} {str(t.dtype).replace('torch.', '')}" for key, t in zip(names, case.inputs))
    what = f"passes_gradcheck(function, {', '.join(names)}) for {case.label}, with {shapes}"
    try:
        verdict = call_learner(passes_gradcheck, case.function, *(t.clone() for t in case.inputs), what=what)
    except GradingFailure as failure:  # gradcheck's own message goes on to print whole Jacobians: keep its first line
        first, *rest = str(failure).splitlines()
        lines = [first + (" ..." if rest else ""), f"Expected it to return {case.correct}.",
                 _verdict_hint(case, None, str(failure))]
        raise GradingFailure("\n".join(filter(None, lines))) from None
    if not isinstance(verdict, bool):
        raise GradingFailure(f"{what} returned {verdict!r:.80}; expected a bool (True or False), gradcheck's verdict.")
    if verdict != case.correct:
        raise GradingFailure("\n".join(filter(None, [f"{what} returned {verdict}; expected {case.correct}.",
                                                     _verdict_hint(case, verdict)])))


def check_passes_gradcheck(passes_gradcheck, seed: int | None = None) -> None:
    """Part F: passes_gradcheck(function, *inputs) says True for a right backward and False for a wrong one."""
    __tracebackhide__ = True
    for case in _verdict_cases(seed):
        _check_verdict(passes_gradcheck, case)
