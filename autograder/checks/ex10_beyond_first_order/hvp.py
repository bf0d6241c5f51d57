"""Part A: ``hvp(f, xs, vs)``, a Hessian-vector product by double backward for a function of several tensors; and
the functions of tensors Parts A and B are tried on, with their oracles (the full Hessian by autograd, finite
differences of gradients)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...checking import GradingFailure, Routes, call_learner, expect_close, fmt
from ...checking import proven_failure as _proven
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    FINITE_DIFFERENCES,
    FORGOT_V,
    FULL_HESSIAN,
    GRAPH_FREED,
    KEPT_GRAPH,
    NO_GRAPH,
    NO_LEAF,
    OWN_BLOCKS_ONLY,
    RETURNED_GRADIENT,
    TORCH_FUNC_HVP,
    V_AFTER,
    ZERO_BLOCKS,
)

Tensor = torch.Tensor

def _quartic(x: Tensor) -> Tensor:
    return (x**4).sum() / 4 + (x[:-1] * x[1:]).sum()


#: Smooth scalar functions of one 1-D tensor with a full (non-diagonal) Hessian, named as a learner reads them.
FUNCTIONS: dict[str, Callable[..., Tensor]] = {
    "sum(x**4)/4 + sum(x[:-1] * x[1:])": _quartic,
    "log(1 + sum(x**2))": lambda x: torch.log1p((x**2).sum()),
    "sum(tanh(x))**2": lambda x: torch.tanh(x).sum() ** 2,
    "sum(exp(x / 2)) * sum(sin(x))": lambda x: torch.exp(x / 2).sum() * torch.sin(x).sum(),
}
#: A separable function: its Hessian is diagonal (every ±1 probe gives the diagonal exactly).
SEPARABLE = "sum(cosh(x)) + sum(x**3)"
FUNCTIONS[SEPARABLE] = lambda x: torch.cosh(x).sum() + (x**3).sum()
#: A linear function: its gradient is a constant and its Hessian zero.
LINEAR_1D = "2 * sum(x) - x[0]"
FUNCTIONS[LINEAR_1D] = lambda x: 2 * x.sum() - x[0]
DRAWN = [name for name in FUNCTIONS if name not in (SEPARABLE, LINEAR_1D)]

#: Part A's functions of several tensors: name -> (the argument names, f). Their shapes come with each case.
LAYER = "sum(tanh(W @ u)**2) + sum(u**2)/2"
SCALE = "s**3 + s * sum(a**2) + sum(cos(a))"
BILINEAR = "sum(u * w)"
PARTLY_LINEAR = "sum(u**4)/4 + sum(u[:-1] * u[1:]) + 2 * sum(w)"
ALL_LINEAR = "3 * sum(u) - sum(W)"
IGNORES_W = "sum(u**4)/4 + sum(u[:-1] * u[1:])"  # of (u, w): w unused, its gradient None unless materialized
MULTI: dict[str, tuple[tuple[str, ...], Callable[..., Tensor]]] = {
    **{name: (("x",), f) for name, f in FUNCTIONS.items() if name in DRAWN},
    LAYER: (("W", "u"), lambda W, u: (torch.tanh(W @ u) ** 2).sum() + (u**2).sum() / 2),
    SCALE: (("a", "s"), lambda a, s: s**3 + s * (a**2).sum() + torch.cos(a).sum()),
    BILINEAR: (("u", "w"), lambda u, w: (u * w).sum()),
    PARTLY_LINEAR: (("u", "w"), lambda u, w: _quartic(u) + 2 * w.sum()),
    ALL_LINEAR: (("u", "W"), lambda u, W: 3 * u.sum() - W.sum()),
    IGNORES_W: (("u", "w"), lambda u, w: _quartic(u)),
}
#: For each function, the arguments its gradient does not depend on (their part of H·v is zero).
CONSTANT_GRADIENT = {PARTLY_LINEAR: {1}, ALL_LINEAR: {0, 1}, IGNORES_W: {1}}


def _is_transformed(t) -> bool:
    return isinstance(t, Tensor) and bool(torch._C._functorch.is_functorch_wrapped_tensor(t))


class Watched:
    """``f`` as the learner receives it: notes where it is evaluated and whether torch.func transformed it."""

    def __init__(self, f: Callable, *xs: Tensor):
        self.f, self.xs = f, [x.detach().clone() for x in xs]
        self.elsewhere = self.transformed = 0

    def __call__(self, *ts):
        if any(_is_transformed(t) for t in ts):
            self.transformed += 1
        elif len(ts) != len(self.xs) or not all(isinstance(t, Tensor) and t.shape == x.shape
                                                and torch.equal(t.detach(), x) for t, x in zip(ts, self.xs)):
            self.elsewhere += 1
        return self.f(*ts)


def _flat(xs: list[Tensor]) -> Tensor:
    return torch.cat([x.detach().double().reshape(-1) for x in xs]) if xs else torch.zeros(0, dtype=torch.float64)


def _split(flat: Tensor, like: list[Tensor]) -> list[Tensor]:
    sizes = [x.numel() for x in like]
    return [part.reshape(x.shape) for part, x in zip(flat.split(sizes), like)]


def _on_flat(f: Callable, like: list[Tensor]) -> Callable[[Tensor], Tensor]:
    """f as a function of one flat vector holding all its tensors (the oracles' view)."""
    return lambda flat: f(*_split(flat, like))


def full_hessian(f: Callable, x: Tensor) -> Tensor:
    return torch.autograd.functional.hessian(f, x.detach().double())


def _gradient(f: Callable, x: Tensor) -> Tensor:
    x = x.detach().double().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x), x, allow_unused=True)
    return torch.zeros_like(x) if g is None else g


def _gradient_differences(f: Callable, x: Tensor, v: Tensor, eps: float = 1e-5) -> Tensor:
    """(∇f(x + εv) − ∇f(x − εv)) / 2ε: finite differences of gradients, the independent check of H·v."""
    return (_gradient(f, x + eps * v) - _gradient(f, x - eps * v)) / (2 * eps)


def vector(values) -> Tensor:
    return torch.tensor(values, dtype=torch.float64)


def not_required(failure: GradingFailure, routes: Routes, *, constant: bool) -> GradingFailure:
    """A learner's autograd error, marked as the mistake that causes it. Where f's gradient is constant in some
    tensor (``constant``), "does not require grad" and "not used in the graph" are a zero part of H·v that the answer
    did not handle; elsewhere "does not require grad" after a backward run is a gradient taken without a graph, before
    any run a leaf that does not require grad; "backward through the graph a second time" is a graph freed by an
    earlier pass (retain_graph)."""
    text = failure.message
    if constant and ("does not require grad" in text or "not have been used in the graph" in text):
        return GradingFailure(text, proven=ZERO_BLOCKS)
    if "does not require grad" in text or "does not have a grad_fn" in text:
        return GradingFailure(text, proven=NO_GRAPH if routes.backward_runs else NO_LEAF)
    if "backward through the graph a second time" in text:
        return GradingFailure(text, proven=GRAPH_FREED)
    return failure


def tensor_like(answer, x: Tensor, what: str) -> Tensor:
    """Part B's result: a plain float64 tensor of x's shape, without a graph."""
    __tracebackhide__ = True
    if not isinstance(answer, Tensor) or type(answer) is not Tensor:
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a tensor of shape "
                             f"{tuple(x.shape)}.")
    if answer.requires_grad:
        raise _proven(f"{what} returned a tensor with requires_grad=True (grad_fn "
                      f"{type(answer.grad_fn).__name__}).", KEPT_GRAPH)
    if answer.dtype != x.dtype:
        raise GradingFailure(f"{what} returned a tensor of dtype {answer.dtype}; expected {x.dtype}, the dtype of x.")
    if tuple(answer.shape) != tuple(x.shape):
        raise GradingFailure(f"{what} returned shape {tuple(answer.shape)}; expected {tuple(x.shape)}, one value per "
                             "entry of x.")
    return answer


def _entries(answer, xs: list[Tensor], names: tuple[str, ...], constant: set[int], what: str) -> list[Tensor]:
    """Part A's result: a list (or tuple) of len(xs) plain float64 tensors shaped like xs, without a graph."""
    __tracebackhide__ = True
    m = len(xs)
    if type(answer) not in (list, tuple):
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a list of {m} tensor"
                             f"{'s' * (m > 1)}, H·v split like xs (one entry per tensor of xs, even when there is "
                             "only one).")
    if len(answer) != m:
        raise GradingFailure(f"{what} returned {len(answer)} entries; expected {m}, one per tensor of xs.")
    for i, (entry, x, name) in enumerate(zip(answer, xs, names)):
        label = f"entry {i} (for xs[{i}] = {name})"
        if entry is None and i in constant:
            raise _proven(f"{what}: {label} is None; f's gradient does not depend on {name}, so its part of H·v is "
                          f"zeros of shape {tuple(x.shape)}.", ZERO_BLOCKS)
        if not isinstance(entry, Tensor) or type(entry) is not Tensor:
            raise GradingFailure(f"{what}: {label} is {type(entry).__name__}; expected a tensor of shape "
                                 f"{tuple(x.shape)}.")
        if entry.requires_grad:
            raise _proven(f"{what}: {label} has requires_grad=True (grad_fn {type(entry.grad_fn).__name__}).",
                          KEPT_GRAPH)
        if entry.dtype != x.dtype:
            raise GradingFailure(f"{what}: {label} has dtype {entry.dtype}; expected {x.dtype}, the dtype of {name}.")
        if tuple(entry.shape) != tuple(x.shape):
            raise GradingFailure(f"{what}: {label} has shape {tuple(entry.shape)}; expected {tuple(x.shape)}, the "
                                 f"shape of {name}.")
    return list(answer)


def _hvp_case(name: str, xs: list[Tensor], vs: list[Tensor]) -> tuple[str, list[Tensor], list[Tensor]]:
    return name, [x.double() for x in xs], [v.double() for v in vs]


def _hvp_cases(grading_seed: int | None) -> list[tuple[str, list[Tensor], list[Tensor]]]:
    """The corners (every seed), in this order: one tensor of one element; a matrix and a vector (a layer); a 0-d
    scalar beside a vector; x = 0, where the gradient vanishes; v = 0; a bilinear f (zero diagonal blocks, only cross
    terms); an f linear in one tensor with no cross terms (that part of H·v is zero); an f linear in every tensor (all
    zero); an f that does not use one of its tensors (a matrix: zeros, though autograd gives no gradient at all).
    Then one case of every function at drawn shapes, values and v (public: from a fixed stream)."""
    fixed = torch.Generator().manual_seed(1010)
    W, u = uniform(fixed, (2, 3), -1.0, 1.0), uniform(fixed, (3,), -1.0, 1.0)
    corners = [
        _hvp_case("sum(x**4)/4 + sum(x[:-1] * x[1:])", [vector([0.7])], [vector([-1.3])]),
        _hvp_case(LAYER, [W, u], [uniform(fixed, (2, 3), -1.0, 1.0), uniform(fixed, (3,), -1.0, 1.0)]),
        _hvp_case(SCALE, [vector([0.5, -1.2, 0.8]), vector(0.6)], [vector([1.0, 0.5, -0.5]), vector(-1.5)]),
        _hvp_case("log(1 + sum(x**2))", [torch.zeros(4)], [vector([1.0, -0.5, 0.25, 2.0])]),
        _hvp_case(LAYER, [W, u], [torch.zeros(2, 3), torch.zeros(3)]),
        _hvp_case(BILINEAR, [vector([0.4, -1.1, 0.9]), vector([1.3, 0.2, -0.7])],
                  [vector([1.0, -2.0, 0.5]), vector([-0.3, 0.8, 1.5])]),
        _hvp_case(PARTLY_LINEAR, [vector([-1.2, 0.3, 1.4, -0.6]), vector([0.5, -0.9])],
                  [vector([1.0, 0.0, -1.0, 0.5]), vector([2.0, -1.0])]),
        _hvp_case(ALL_LINEAR, [vector([0.1, -0.2, 0.3]), uniform(fixed, (2, 2), -1.0, 1.0)],
                  [vector([1.0, 1.0, -1.0]), uniform(fixed, (2, 2), -1.0, 1.0)]),
        _hvp_case(IGNORES_W, [vector([0.8, -0.4, 1.1]), uniform(fixed, (2, 2), -1.0, 1.0)],
                  [vector([1.0, -1.0, 0.5]), uniform(fixed, (2, 2), -1.0, 1.0)]),
    ]
    gen = case_stream("10/hvp", grading_seed)
    drawn = []
    for name, (args, _) in MULTI.items():
        n = 4 if grading_seed is None else randint(gen, 3, 6)
        m = 2 if grading_seed is None else randint(gen, 1, 4)
        shapes = {"x": (n,), "u": (n,), "w": (n,) if name == BILINEAR else (m,), "a": (n,), "s": (), "W": (m, n)}
        xs = [uniform(gen, shapes[a], -1.5, 1.5) for a in args]
        drawn.append(_hvp_case(name, xs, [uniform(gen, shapes[a], -1.0, 1.0) for a in args]))
    return corners + drawn


def _hvp_symptoms(f: Callable, xs: list[Tensor], vs: list[Tensor], hessian: Tensor) -> list[list]:
    """For each entry i of the answer, the values the known mistakes give there."""
    flat_f, x, v = _on_flat(f, xs), _flat(xs), _flat(vs)
    ones = hessian.sum(dim=1)
    blocks = torch.zeros_like(hessian)
    start = 0
    for t in xs:  # the block diagonal: each tensor's own second derivatives, no cross terms
        blocks[start:start + t.numel(), start:start + t.numel()] = hessian[start:start + t.numel(),
                                                                           start:start + t.numel()]
        start += t.numel()
    values = {NO_GRAPH: torch.zeros_like(x), FORGOT_V: ones, V_AFTER: ones * v,
              RETURNED_GRADIENT: _gradient(flat_f, x), OWN_BLOCKS_ONLY: blocks @ v}
    parts = {mistake: _split(value, xs) for mistake, value in values.items()}
    # vs paired with the wrong tensors (reversed, where the shapes allow) gives (H·1) ⊙ v too for a bilinear f:
    # there the numbers cannot tell the two mistakes apart, and V_AFTER is not named from that entry
    flipped = (_split(hessian @ _flat(vs[::-1]), xs)
               if len(vs) > 1 and all(a.shape == b.shape for a, b in zip(vs, vs[::-1])) else None)

    def ambiguous(mistake, i: int) -> bool:
        return (mistake is V_AFTER and flipped is not None
                and torch.allclose(parts[mistake][i], flipped[i], rtol=1e-4, atol=1e-7))

    return [[mistake.looks_like(parts[mistake][i]) for mistake in values if not ambiguous(mistake, i)]
            for i in range(len(xs))]


def _run_hvp(hvp, name: str, xs: list[Tensor], vs: list[Tensor]) -> None:
    __tracebackhide__ = True
    names, f_true = MULTI[name]
    constant = CONSTANT_GRADIENT.get(name, set())
    f = Watched(f_true, *xs)
    values = ", ".join(f"{a} = {fmt(x)}" for a, x in zip(names, xs))
    what = f"hvp(f, xs, vs) for f({', '.join(names)}) = {name} at {values}, vs = [{', '.join(fmt(v) for v in vs)}]"
    routes = Routes()
    try:
        answer = call_learner(hvp, f, xs, vs, what=what, routes=routes)
    except GradingFailure as failure:
        raise not_required(failure, routes, constant=bool(constant)) from None
    n, runs = sum(x.numel() for x in xs), routes.backward_runs
    if f.transformed:  # dual numbers of torch.autograd.forward_ad (forward-over-reverse) are allowed, torch.func not
        raise _proven(f"{what} ran f under a torch.func transform.", TORCH_FUNC_HVP)
    if f.elsewhere:
        raise _proven(f"{what} evaluated f at {f.elsewhere} point(s) other than xs.", FINITE_DIFFERENCES)
    if runs >= n + 1 and runs > 3:  # one pass per element and one more: the full Hessian (3 passes: functional.hvp)
        raise _proven(f"{what} ran {runs} backward passes for {n} elements in all; two are enough.", FULL_HESSIAN)
    if runs > 2:
        passes = (f"{what} ran {runs} backward passes; the part asks for at most two (torch.autograd.grad with "
                  "create_graph=True, then once more through its result).")
        try:  # the extra passes are the failure; the numbers may also show why (one pass per tensor: no cross terms)
            _compare_hvp(answer, f_true, xs, vs, names, constant, what)
        except GradingFailure as failure:
            if OWN_BLOCKS_ONLY in failure.suspects:
                raise GradingFailure(f"{passes}\n{failure.message}", suspects=(OWN_BLOCKS_ONLY,)) from None
            raise GradingFailure(passes) from None
        raise GradingFailure(passes + (" The values are right. Three is what torch.autograd.functional.hvp runs: "
                                       "what does its documentation say about its cost next to vhp's, and why?"
                                       if runs == 3 else " The values are right."))
    _compare_hvp(answer, f_true, xs, vs, names, constant, what)


def _compare_hvp(answer, f: Callable, xs: list[Tensor], vs: list[Tensor], names: tuple[str, ...], constant: set[int],
                 what: str) -> None:
    """Part A's result against H·v (autograd's full Hessian, finite differences of gradients), entry by entry."""
    __tracebackhide__ = True
    entries = _entries(answer, xs, names, constant, what)
    flat_f = _on_flat(f, xs)
    hessian = full_hessian(flat_f, _flat(xs))
    expected = _split(hessian @ _flat(vs), xs)
    fd = _split(_gradient_differences(flat_f, _flat(xs), _flat(vs)), xs)
    symptoms = _hvp_symptoms(f, xs, vs, hessian)
    for i, (entry, arg) in enumerate(zip(entries, names)):
        expect_close(entry, expected[i], what=f"{what}: entry {i} (H·v for {arg})", fd=fd[i], rtol=1e-6, atol=1e-9,
                     extra="  (finite difference here: of gradients, (∇f(x + εv) − ∇f(x − εv)) / 2ε)",
                     symptoms=symptoms[i])
