"""Part A: ``hvp(f, xs, vs)``, a Hessian-vector product by double backward for a function of several tensors, which
stays differentiable with respect to the tensors of xs that arrive requiring grad (a curvature penalty trains it:
third derivatives of f) and carries no graph when none does; and the functions of tensors Parts A and B are tried on,
with their oracles (the full Hessian by autograd, finite differences of gradients; for the third derivatives,
autograd three times over and central differences of H·v)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

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
    LEAKED_GRAPH,
    NO_GRAPH,
    NO_LEAF,
    OUTER_COPIES,
    OUTER_NO_GRAPH,
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


def _entries(answer, xs: list[Tensor], names: tuple[str, ...], constant: set[int], what: str, *,
             graph: bool = False, kept=KEPT_GRAPH) -> list[Tensor]:
    """Part A's result: a list (or tuple) of len(xs) plain float64 tensors shaped like xs, without a graph unless
    ``graph`` (a tensor of xs requires grad); ``kept`` names a graph where none may be."""
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
        if entry.requires_grad and not graph:
            raise _proven(f"{what}: {label} has requires_grad=True (grad_fn {type(entry.grad_fn).__name__})"
                          + (", although no tensor of xs or vs requires grad." if kept is LEAKED_GRAPH else "."),
                          kept)
        if entry.dtype != x.dtype:
            raise GradingFailure(f"{what}: {label} has dtype {entry.dtype}; expected {x.dtype}, the dtype of {name}.")
        if tuple(entry.shape) != tuple(x.shape):
            raise GradingFailure(f"{what}: {label} has shape {tuple(entry.shape)}; expected {tuple(x.shape)}, the "
                                 f"shape of {name}.")
    return list(answer)


#: How a tensor of xs arrives requiring grad: "leaf", a trainable parameter (an nn.Parameter); "inner", the result of
#: an earlier computation with a graph behind it (an inner optimisation step, say). Absent: frozen, requires_grad False.
#: The same for the directions vs (a direction along the gradient depends on the parameters).
Trained = dict[int, str]
HvpCase = tuple[str, list[Tensor], list[Tensor], Trained, Trained]


def _hvp_case(name: str, xs: list[Tensor], vs: list[Tensor], trained: Trained | None = None,
              directions: Trained | None = None) -> HvpCase:
    return name, [x.double() for x in xs], [v.double() for v in vs], dict(trained or {}), dict(directions or {})


def _hvp_cases(grading_seed: int | None) -> list[HvpCase]:
    """The corners (every seed), in this order: one tensor of one element; a matrix and a vector (a layer); a 0-d
    scalar beside a vector; x = 0, where the gradient vanishes; v = 0; a bilinear f (zero diagonal blocks, only cross
    terms); an f linear in one tensor with no cross terms (that part of H·v is zero); an f linear in every tensor (all
    zero); an f that does not use one of its tensors (a matrix: zeros, though autograd gives no gradient at all).
    Then the same kinds with tensors that arrive requiring grad (the result must stay differentiable with respect to
    them, third derivatives checked): a layer's weight as an nn.Parameter beside a frozen input; a vector and a 0-d
    scalar both from an earlier computation (not leaves); a tensor f is linear in (its third derivatives are zero); a
    tensor beside a frozen matrix f ignores; f linear in both (zeros); one tensor alone; and directions that require
    grad: beside a parameter, with every tensor of xs frozen (twice: the result still needs its graph), and for an f
    linear in frozen tensors (zeros, though ⟨∇f, v⟩ requires grad through v). Then one case of every function at drawn
    shapes, values and v (public: from a fixed stream), and three drawn with a drawn choice of the tensors of xs and
    vs that require grad, and how."""
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
        _hvp_case(LAYER, [uniform(fixed, (3, 4), -1.0, 1.0), uniform(fixed, (4,), -1.0, 1.0)],
                  [uniform(fixed, (3, 4), -1.0, 1.0), uniform(fixed, (4,), -1.0, 1.0)], {0: "leaf"}),
        _hvp_case(SCALE, [vector([0.9, -0.4, 1.3]), vector(-0.7)], [vector([0.5, 1.0, -1.0]), vector(2.0)],
                  {0: "inner", 1: "inner"}),
        _hvp_case(PARTLY_LINEAR, [vector([0.6, -1.0, 0.2]), vector([1.5, -0.5])],
                  [vector([-1.0, 0.5, 1.0]), vector([1.0, 2.0])], {1: "leaf"}),
        _hvp_case(IGNORES_W, [vector([-0.9, 0.7, 0.4, 1.2]), uniform(fixed, (3, 2), -1.0, 1.0)],
                  [vector([1.0, 0.5, -0.5, -1.0]), uniform(fixed, (3, 2), -1.0, 1.0)], {0: "inner"}),
        _hvp_case(ALL_LINEAR, [vector([0.3, 0.5]), uniform(fixed, (2, 3), -1.0, 1.0)],
                  [vector([1.0, -1.0]), uniform(fixed, (2, 3), -1.0, 1.0)], {0: "leaf", 1: "leaf"}),
        _hvp_case("sum(tanh(x))**2", [vector([0.4, -0.8, 1.1, 0.2, -1.3])],
                  [vector([1.0, -0.5, 0.5, 2.0, -1.0])], {0: "leaf"}),
        _hvp_case(LAYER, [uniform(fixed, (2, 3), -1.0, 1.0), uniform(fixed, (3,), -1.0, 1.0)],
                  [uniform(fixed, (2, 3), -1.0, 1.0), uniform(fixed, (3,), -1.0, 1.0)], {0: "leaf"}, {0: "inner"}),
        _hvp_case(SCALE, [vector([-0.6, 1.1, 0.3]), vector(1.4)], [vector([1.0, -1.0, 0.5]), vector(-0.5)],
                  {}, {0: "leaf", 1: "inner"}),
        _hvp_case("log(1 + sum(x**2))", [vector([0.5, -1.5, 1.0])], [vector([2.0, 0.5, -1.0])], {}, {0: "inner"}),
        _hvp_case(ALL_LINEAR, [vector([0.7, -0.1]), uniform(fixed, (2, 2), -1.0, 1.0)],
                  [vector([1.0, 2.0]), uniform(fixed, (2, 2), -1.0, 1.0)], {}, {0: "inner", 1: "leaf"}),
    ]
    gen = case_stream("10/hvp", grading_seed)
    drawn = []
    for name, (args, _) in MULTI.items():
        n = 4 if grading_seed is None else randint(gen, 3, 6)
        m = 2 if grading_seed is None else randint(gen, 1, 4)
        shapes = {"x": (n,), "u": (n,), "w": (n,) if name == BILINEAR else (m,), "a": (n,), "s": (), "W": (m, n)}
        xs = [uniform(gen, shapes[a], -1.5, 1.5) for a in args]
        drawn.append(_hvp_case(name, xs, [uniform(gen, shapes[a], -1.0, 1.0) for a in args]))
    for name in (LAYER, SCALE, "log(1 + sum(x**2))"):
        args = MULTI[name][0]
        n, m = randint(gen, 2, 5), randint(gen, 1, 3)
        shapes = {"x": (n,), "a": (n,), "s": (), "W": (m, n), "u": (n,)}
        xs = [uniform(gen, shapes[a], -1.5, 1.5) for a in args]
        subset = randint(gen, 1, 4 ** len(args) - 1)  # a nonempty choice among xs and vs of those requiring grad
        trained = {i: ("leaf", "inner")[randint(gen, 0, 1)] for i in range(len(args)) if subset >> i & 1}
        directions = {i: ("leaf", "inner")[randint(gen, 0, 1)] for i in range(len(args))
                      if subset >> (len(args) + i) & 1}
        drawn.append(_hvp_case(name, xs, [uniform(gen, shapes[a], -1.0, 1.0) for a in args], trained, directions))
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


def _arrive(xs: list[Tensor], trained: Trained) -> tuple[list[Tensor], dict[int, Tensor]]:
    """The tensors as the learner receives them, and for each one that requires grad the leaf the test
    differentiates with respect to (the parameter itself, or the start of the computation that made the tensor)."""
    given, outer = [], {}
    for i, x in enumerate(xs):
        if trained.get(i) == "leaf":
            outer[i] = nn.Parameter(x.clone())
            given.append(outer[i])
        elif trained.get(i) == "inner":
            outer[i] = x.clone().requires_grad_(True)
            given.append(outer[i] * 1.0)  # from the middle of a graph: grad_fn MulBackward0, not a leaf
        else:
            given.append(x)
    return given, outer


def _describe(name: str, x: Tensor, trained: Trained, i: int) -> str:
    how = {"leaf": " (requires grad: an nn.Parameter)",
           "inner": " (requires grad: the result of an earlier computation, grad_fn MulBackward0)"}
    return f"{name} = {fmt(x)}{how.get(trained.get(i), '')}"


def _run_hvp(hvp, name: str, xs: list[Tensor], vs: list[Tensor], trained: Trained | None = None,
             directions: Trained | None = None) -> None:
    __tracebackhide__ = True
    trained, directions = trained or {}, directions or {}
    names, f_true = MULTI[name]
    constant = CONSTANT_GRADIENT.get(name, set())
    f = Watched(f_true, *xs)
    given, outer = _arrive(xs, trained)
    given_vs, outer_vs = _arrive(vs, directions)
    values = ", ".join(_describe(a, x, trained, i) for i, (a, x) in enumerate(zip(names, xs)))
    along = ", ".join(_describe(f"v_{a}", v, directions, i) for i, (a, v) in enumerate(zip(names, vs)))
    what = f"hvp(f, xs, vs) for f({', '.join(names)}) = {name} at {values}, vs = [{along}]"
    graph = bool(trained or directions)
    routes = Routes()
    try:
        answer = call_learner(hvp, f, given, given_vs, what=what, routes=routes)
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
            _compare_hvp(answer, f_true, xs, vs, names, constant, what, graph)
        except GradingFailure as failure:
            if OWN_BLOCKS_ONLY in failure.suspects:
                raise GradingFailure(f"{passes}\n{failure.message}", suspects=(OWN_BLOCKS_ONLY,)) from None
            raise GradingFailure(passes) from None
        raise GradingFailure(passes + (" The values are right. Of your three passes, which one does H·v not need?"
                                       if runs == 3 else " The values are right."))
    entries = _compare_hvp(answer, f_true, xs, vs, names, constant, what, graph)
    if graph:
        _compare_third(entries, f_true, xs, vs, names, outer, outer_vs, what)


def _compare_hvp(answer, f: Callable, xs: list[Tensor], vs: list[Tensor], names: tuple[str, ...], constant: set[int],
                 what: str, graph: bool = False) -> list[Tensor]:
    """Part A's result against H·v (autograd's full Hessian, finite differences of gradients), entry by entry."""
    __tracebackhide__ = True
    entries = _entries(answer, xs, names, constant, what, graph=graph, kept=LEAKED_GRAPH)
    flat_f = _on_flat(f, xs)
    hessian = full_hessian(flat_f, _flat(xs))
    expected = _split(hessian @ _flat(vs), xs)
    fd = _split(_gradient_differences(flat_f, _flat(xs), _flat(vs)), xs)
    symptoms = _hvp_symptoms(f, xs, vs, hessian)
    for i, (entry, arg) in enumerate(zip(entries, names)):
        expect_close(entry.detach(), expected[i], what=f"{what}: entry {i} (H·v for {arg})", fd=fd[i], rtol=1e-6,
                     atol=1e-9, extra="  (finite difference here: of gradients, (∇f(x + εv) − ∇f(x − εv)) / 2ε)",
                     symptoms=symptoms[i])
    return entries


def _product(flat_f: Callable, x: Tensor, v: Tensor, *, graph: bool = False) -> Tensor:
    """H·v at x by double backward (the oracle's own), with a graph of its own when ``graph``."""
    leaf = x.detach().clone().requires_grad_(True) if not graph else x
    (g,) = torch.autograd.grad(flat_f(leaf), leaf, create_graph=True, allow_unused=True)
    if g is None or not g.requires_grad:
        return torch.zeros_like(x)
    (hv,) = torch.autograd.grad((g * v).sum(), leaf, create_graph=graph, allow_unused=True)
    return torch.zeros_like(x) if hv is None else hv


def _compare_third(entries: list[Tensor], f: Callable, xs: list[Tensor], vs: list[Tensor], names: tuple[str, ...],
                   outer: dict[int, Tensor], outer_vs: dict[int, Tensor], what: str, eps: float = 1e-5) -> None:
    """The derivative of S = Σ_i ⟨c_i, (Hv)_i⟩ (a curvature penalty) with respect to every tensor of xs and vs that
    arrived requiring grad, through the learner's result. Oracles: for xs, f's third derivatives by autograd three
    times over, and central differences of S(x) = ⟨c, H(x) v⟩ (H·v by double backward at x ± ε e_k); for vs, H c
    (S is linear in v and H symmetric), and central differences of S in v."""
    __tracebackhide__ = True
    flat_f, x, v = _on_flat(f, xs), _flat(xs), _flat(vs)
    cs = [torch.linspace(1.0, -0.5, t.numel(), dtype=torch.float64).reshape(t.shape) for t in xs]
    c = _flat(cs)
    leaf = x.clone().requires_grad_(True)
    hv = _product(flat_f, leaf, v, graph=True)
    third = (torch.autograd.grad((hv * c).sum(), leaf, allow_unused=True)[0] if hv.requires_grad else None)
    expected = {("x", i): part for i, part in enumerate(_split(torch.zeros_like(x) if third is None else third, xs))}
    expected.update({("v", i): part for i, part in enumerate(_split(full_hessian(flat_f, x) @ c, xs))})
    starts = [0]
    for t in xs:
        starts.append(starts[-1] + t.numel())
    fd_x, fd_v = torch.zeros_like(x), torch.zeros_like(x)
    for i in set(outer) | set(outer_vs):
        for k in range(starts[i], starts[i + 1]):
            step = torch.zeros_like(x)
            step[k] = eps
            if i in outer:
                fd_x[k] = (c @ _product(flat_f, x + step, v) - c @ _product(flat_f, x - step, v)) / (2 * eps)
            if i in outer_vs:
                fd_v[k] = (c @ _product(flat_f, x, v + step) - c @ _product(flat_f, x, v - step)) / (2 * eps)
    fd = {**{("x", i): part for i, part in enumerate(_split(fd_x, xs))},
          **{("v", i): part for i, part in enumerate(_split(fd_v, xs))}}
    total = sum((e * ci).sum() for e, ci in zip(entries, cs) if e.requires_grad)
    keys = [("x", i) for i in sorted(outer)] + [("v", i) for i in sorted(outer_vs)]
    wrt = [outer[i] if kind == "x" else outer_vs[i] for kind, i in keys]
    got = (torch.autograd.grad(total, wrt, allow_unused=True)
           if isinstance(total, Tensor) and total.requires_grad else [None] * len(keys))
    graphs = [type(e.grad_fn).__name__ for e in entries if e.requires_grad]
    penalty = (f"the test's curvature penalty S = Σ_i ⟨c_i, (Hv)_i⟩ with c = [{', '.join(fmt(t) for t in cs)}], "
               "differentiated with respect to")
    for key, derivative in zip(keys, got):
        kind, i = key
        arg = names[i] if kind == "x" else f"v_{names[i]}"
        derivative = torch.zeros_like(xs[i]) if derivative is None else derivative
        label = f"{what}: {penalty} {arg} (which requires grad)"
        oracle = ("the third derivatives of f say" if kind == "x" else "H c, S being linear in v, says")
        if not bool((expected[key] == 0).all()) and bool((derivative == 0).all()):
            evidence = (f"{label}, gives zeros; {oracle} {fmt(expected[key])} (autograd), {fmt(fd[key])} (central "
                        "differences of H·v).")
            # seen in the learner's objects, but named only when two cases agree: a second mistake (cross terms, a
            # pass too many) keeps its own diagnosis, shown first
            if not graphs:
                raise GradingFailure(f"{evidence} No entry of your H·v has a graph.", suspects=(OUTER_NO_GRAPH,))
            raise GradingFailure(f"{evidence} Your H·v has a graph (grad_fn {graphs[0]}), and it does not reach "
                                 f"{arg}.", suspects=(OUTER_COPIES,))
        expect_close(derivative, expected[key], what=label, fd=fd[key], rtol=1e-6, atol=1e-9,
                     source="autograd, three times over" if kind == "x" else "autograd's full Hessian times c",
                     extra="  (finite difference here: of ⟨c, H v⟩ in the tensor, H·v by double backward at ± ε e_k)")
