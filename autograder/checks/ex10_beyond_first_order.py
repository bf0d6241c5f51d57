"""Checks for exercise 10, beyond first order: a Hessian-vector product by double backward, Hutchinson's estimate of
the Hessian's diagonal (random sign probes, one H·z per probe), an input-gradient penalty, per-example gradient norms
with torch.func, activation checkpointing.

Each ``check_*`` function is one test cell's whole body: without ``seed`` it runs the public cases, with
``seed=grading_seed()`` fresh random ones. Every check first runs its corner cases (the edges of the domain its
docstring states), the same at every seed, then the cases it draws; every case is a :func:`~autograder.checking.trial`,
so a misconception is named on proof or when two cases agree. Oracles: the full Hessian by autograd, finite
differences of gradients (float64) beside it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from ..checking import (
    GradingFailure,
    Misconception,
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
from ..seeding import choice, generator, uniform
from .cases import randint, random_mlp
from .shared import SQUARED_NORMS

Tensor = torch.Tensor

# ------------------------------------------------------------------------------------------------ misconceptions

NO_GRAPH = Misconception(
    "first gradient without a graph (create_graph forgotten, or detached)",
    "The second derivative differentiates the first one, so the first torch.autograd.grad call must record its own "
    "graph: pass create_graph=True, and never .detach() (or .item()) the gradient you differentiate again. "
    "Without it the gradient is a constant: the second call fails, or the penalty's own gradient is silently lost.")
NO_LEAF = Misconception(
    "differentiated with respect to a tensor that does not require grad",
    "autograd only records operations on tensors that require grad, and x arrives without it. Make your own leaf, "
    "leaf = x.detach().requires_grad_(True), evaluate f at it and differentiate with respect to it (the caller's x "
    "stays as it was).")
FULL_HESSIAN = Misconception(
    "built the full Hessian instead of Hessian-vector products",
    "H·v needs two reverse passes whatever the size of x: differentiate ⟨∇f(x), v⟩ once more. The full Hessian "
    "costs one backward pass per element of x (and n² memory), which is what the product avoids.")
FINITE_DIFFERENCES = Misconception(
    "finite differences of gradients where the part asks for double backward",
    "(∇f(x + εv) − ∇f(x − εv)) / 2ε is the check, not the method: it carries an O(ε²) error and evaluates f away "
    "from x. Differentiate the first gradient with autograd instead (create_graph=True).")
TORCH_FUNC_HVP = Misconception(
    "used torch.func where the part asks for double backward",
    "Parts A and B are about torch.autograd.grad with create_graph=True (Part D is where torch.func belongs): "
    "compute the gradient with a graph, then differentiate its product with a vector.")
KEPT_GRAPH = Misconception(
    "returned a result that still carries a graph",
    "The result is a number to use, not to differentiate again: the last torch.autograd.grad call needs no "
    "create_graph, or detach() the result, so that the graphs are freed.")
FORGOT_V = Misconception(
    "differentiated the sum of the gradient instead of its product with v",
    "grad(∇f(x).sum(), x) is H·1, the Hessian times a vector of ones. Differentiate (∇f(x) * v).sum() "
    "(or pass grad_outputs=v).")
RETURNED_GRADIENT = Misconception(
    "returned the first derivative", "That is ∇f(x); the part asks for H·v, the derivative of ⟨∇f(x), v⟩.")
GRAPH_FREED = Misconception(
    "reused the first gradient after its graph was freed (retain_graph forgotten)",
    "One gradient g with a graph serves every probe, but each backward pass through ⟨g, z⟩ frees that graph unless "
    "you pass retain_graph=True; or take a fresh gradient for every probe (two passes each).")
PROBES_NOT_SIGNS = Misconception(
    "probes that are not random signs ±1",
    "Hutchinson's estimate relies on z_i² = 1 and E[z_i z_j] = 0: then z ⊙ Hz has H_ii exactly as its diagonal term "
    "and only the off-diagonal terms average out. Coin flips 0/1 give E[z_i²] = 1/2 and E[z_i z_j] = 1/4 (a biased "
    "estimate), Gaussian entries add noise to every term: turn a coin c into a sign with 2c − 1.")
NOT_FROM_GENERATOR = Misconception(
    "probes not drawn from the generator passed in",
    "Every random call must take generator=generator (torch.randint, torch.rand, torch.bernoulli... all accept it): "
    "then the same generator state gives the same probes, and the global random state is left alone.")
NOT_AVERAGED = Misconception(
    "added the probes' estimates instead of averaging them",
    "Each probe gives an unbiased estimate z ⊙ Hz of the diagonal; their mean is the estimate, so divide the sum by "
    "the number of probes (the rows of probes).")
DIVIDED_BY_DIMENSION = Misconception(
    "divided by the number of entries of x instead of the number of probes",
    "The average runs over the probes: divide the sum of z ⊙ Hz by probes.shape[0], the number of rows, not by "
    "the length of x.")
FORGOT_PROBE = Misconception(
    "averaged H·z without multiplying by z",
    "The estimate of H_ii is z_i (Hz)_i: without the factor z_i the terms H_ij z_j of every column keep their signs "
    "at random and the diagonal term is not singled out. Multiply each H·z elementwise by its own z.")
TRACE_ESTIMATE = Misconception(
    "estimated the trace (one number) instead of the diagonal",
    "zᵀHz averages to the trace, the sum of the diagonal; the part asks for the diagonal itself, one number per "
    "entry of x: the elementwise product z ⊙ Hz, averaged over the probes.")
PENALTY_NOT_SQUARED = Misconception(
    "penalty on the norm instead of the squared norm",
    "The penalty is weight · ‖∇f(x)‖², the sum of the squared entries of the gradient, without a square root.")
PENALTY_MEAN = Misconception(
    "mean of the squared gradient instead of the sum",
    "‖g‖² is (g ** 2).sum(); the mean divides it by the number of entries.")
LOSS_AS_NUMBER = Misconception(
    "returned a number instead of a loss tensor with its graph",
    "A penalized loss is meant to be trained: return the tensor f(x) + weight · ‖∇f(x)‖², not .item() or a "
    "detached copy, so that backward() reaches x through both terms.")
LOOPED = Misconception(
    "looped over the examples where the part asks for vmap",
    "One backward pass per example is what torch.func.vmap replaces: write the loss of ONE example as a function "
    "of the parameters, take torch.func.grad of it, and vmap that over the batch (in_dims=(None, 0, 0)).")
MEAN_GRADIENT_NORM = Misconception(
    "per-example norms of the batch-mean gradient",
    "Every example got the same number, the norm of the gradient of the mean loss. Each example's gradient is the "
    "gradient of its own loss: vmap a per-example gradient, then take one norm per example.")
DIVIDED_BY_BATCH = Misconception(
    "per-example gradients divided by the batch size",
    "Your norms are N times too small: the loss of one example is its own cross-entropy, not 1/N of it. Compute it "
    "on a batch of one (x[None], y[None]).")
PER_TENSOR_SUM = Misconception(
    "added the per-parameter norms",
    "The global norm of an example's gradient is sqrt(Σ over all parameters of Σ g²): one norm over everything, "
    "not the sum of the norms of each parameter tensor.")
WEIGHTS_ONLY = Misconception(
    "left the biases out of the norm", "Every parameter of the model counts, the biases too.")
NOT_CHECKPOINTED = Misconception(
    "no checkpoint: the graph keeps every activation",
    "torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False) runs a block without saving its activations; "
    "backward then runs the block again to get them. Without it the graph saves everything, as a plain forward does.")
OUTSIDE_CHECKPOINT = Misconception(
    "some blocks ran outside any checkpoint",
    "Every block goes through its own checkpoint call, the last one too (torch.utils.checkpoint.checkpoint_sequential "
    "runs its last segment without a checkpoint, which is why this part asks for a loop of checkpoint calls).")
GROUPED = Misconception(
    "several blocks in one checkpoint",
    "A checkpoint around several blocks saves only its first input, but its backward reruns all of them and holds "
    "their activations together, so the peak memory grows with the size of the group (with one checkpoint around "
    "everything it is back to that of no checkpoint at all). Checkpoint each block on its own.")
RNG_NOT_PRESERVED = Misconception(
    "checkpoint recomputes with a different random state (dropout)",
    "The recomputation in backward must draw the same dropout mask as the forward pass did; with "
    "preserve_rng_state=False it draws a new one, and the gradients belong to a network that never ran. Keep the "
    "default preserve_rng_state=True.")
SWITCHED_MODE = Misconception(
    "switched the blocks to eval mode",
    "The blocks are in training mode (dropout on) and must stay so: checkpointing must not change what the network "
    "computes. Leave .train()/.eval() alone.")


# ------------------------------------------------------------------------------ Parts A, B and C: a function f(x)

def _quartic(x: Tensor) -> Tensor:
    return (x**4).sum() / 4 + (x[:-1] * x[1:]).sum()


#: Smooth scalar functions with a full (non-diagonal) Hessian, named as a learner reads them in a failure message.
FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "sum(x**4)/4 + sum(x[:-1] * x[1:])": _quartic,
    "log(1 + sum(x**2))": lambda x: torch.log1p((x**2).sum()),
    "sum(tanh(x))**2": lambda x: torch.tanh(x).sum() ** 2,
    "sum(exp(x / 2)) * sum(sin(x))": lambda x: torch.exp(x / 2).sum() * torch.sin(x).sum(),
}
#: A separable function: its Hessian is diagonal (every ±1 probe gives the diagonal exactly).
SEPARABLE = "sum(cosh(x)) + sum(x**3)"
FUNCTIONS[SEPARABLE] = lambda x: torch.cosh(x).sum() + (x**3).sum()
DRAWN = [name for name in FUNCTIONS if name != SEPARABLE]


def _is_transformed(t) -> bool:
    return isinstance(t, Tensor) and bool(torch._C._functorch.is_functorch_wrapped_tensor(t))


class _Watched:
    """``f`` as the learner receives it: notes where it is evaluated and whether torch.func transformed it."""

    def __init__(self, f: Callable, x: Tensor):
        self.f, self.x = f, x.detach().clone()
        self.elsewhere = self.transformed = 0

    def __call__(self, t):
        if _is_transformed(t):
            self.transformed += 1
        elif not isinstance(t, Tensor) or t.shape != self.x.shape or not torch.equal(t.detach(), self.x):
            self.elsewhere += 1
        return self.f(t)


def _hessian(f: Callable, x: Tensor) -> Tensor:
    return torch.autograd.functional.hessian(f, x.detach().double())


def _gradient(f: Callable, x: Tensor) -> Tensor:
    x = x.detach().double().requires_grad_(True)
    return torch.autograd.grad(f(x), x)[0]


def _gradient_differences(f: Callable, x: Tensor, v: Tensor, eps: float = 1e-5) -> Tensor:
    """(∇f(x + εv) − ∇f(x − εv)) / 2ε: finite differences of gradients, the independent check of H·v."""
    return (_gradient(f, x + eps * v) - _gradient(f, x - eps * v)) / (2 * eps)


def _vector(values) -> Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _not_required(failure: GradingFailure, routes: Routes) -> GradingFailure:
    """A learner's autograd error, marked as the mistake that causes it: "does not require grad" after a backward run
    is a gradient taken without a graph, before any run a leaf that does not require grad; "backward through the
    graph a second time" is a graph freed by an earlier pass (retain_graph)."""
    if "does not require grad" in failure.message or "does not have a grad_fn" in failure.message:
        return GradingFailure(failure.message, suspects=(NO_GRAPH if routes.backward_runs else NO_LEAF,))
    if "backward through the graph a second time" in failure.message:
        return GradingFailure(failure.message, suspects=(GRAPH_FREED,))
    return failure


def _tensor_like(answer, x: Tensor, what: str) -> Tensor:
    """The contract of Parts A and B: a plain float64 tensor of x's shape, without a graph."""
    __tracebackhide__ = True
    if not isinstance(answer, Tensor):
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a tensor of shape "
                             f"{tuple(x.shape)}.")
    if answer.requires_grad:
        raise _proven(f"{what} returned a tensor with requires_grad=True (grad_fn "
                      f"{type(answer.grad_fn).__name__}).", KEPT_GRAPH)
    if answer.dtype != x.dtype:
        raise GradingFailure(f"{what} returned a tensor of dtype {answer.dtype}; expected {x.dtype}, the dtype of x.")
    return answer


def _hvp_cases(seed: int | None) -> list[tuple[str, Tensor, Tensor]]:
    """The corners (every seed): one element; x = 0 (the gradient vanishes); v = 0; v a basis vector e_1 with x of
    both signs. Then every drawn function at its own x and v of 4 to 7 elements (public: 4, from a fixed stream)."""
    corners = [
        ("sum(x**4)/4 + sum(x[:-1] * x[1:])", _vector([0.7]), _vector([-1.3])),
        ("log(1 + sum(x**2))", torch.zeros(4, dtype=torch.float64), _vector([1.0, -0.5, 0.25, 2.0])),
        ("sum(tanh(x))**2", _vector([0.4, -1.1, 0.9]), torch.zeros(3, dtype=torch.float64)),
        ("sum(exp(x / 2)) * sum(sin(x))", _vector([-1.2, 0.3, 1.4, -0.6, 0.8]), _vector([1.0, 0, 0, 0, 0])),
    ]
    gen = generator("10/hvp/public", 0) if seed is None else generator("10/hvp", seed)
    drawn = []
    for name in DRAWN:
        n = 4 if seed is None else randint(gen, 4, 7)
        drawn.append((name, uniform(gen, (n,), -1.5, 1.5), uniform(gen, (n,), -1.0, 1.0)))
    return corners + drawn


def _run_hvp(hvp, name: str, x: Tensor, v: Tensor) -> None:
    __tracebackhide__ = True
    f = _Watched(FUNCTIONS[name], x)
    what = f"hvp(f, x, v) for f(x) = {name}, x = {fmt(x)}, v = {fmt(v)}"
    routes = Routes()
    try:
        answer = call_learner(hvp, f, x, v, what=what, routes=routes)
    except GradingFailure as failure:
        raise _not_required(failure, routes) from None
    n, runs = x.numel(), routes.backward_runs
    if f.transformed or routes.forward_ad:
        raise _proven(f"{what} ran f under a torch.func transform.", TORCH_FUNC_HVP)
    if f.elsewhere:
        raise _proven(f"{what} evaluated f at {f.elsewhere} point(s) other than x.", FINITE_DIFFERENCES)
    if runs >= n + 1 and runs > 3:  # one pass per element and one more: the full Hessian (3 passes: functional.hvp)
        raise _proven(f"{what} ran {runs} backward passes for x of {n} elements; two are enough.", FULL_HESSIAN)
    if runs > 2:
        raise GradingFailure(f"{what} ran {runs} backward passes; the part asks for two "
                             "(torch.autograd.grad with create_graph=True, then once more through its result).")
    answer = _tensor_like(answer, x, what)
    hessian = _hessian(FUNCTIONS[name], x)
    expect_close(answer, hessian @ v, what=what, fd=_gradient_differences(FUNCTIONS[name], x, v), rtol=1e-6,
                 atol=1e-9, extra="  (finite difference here: of gradients, (∇f(x + εv) − ∇f(x − εv)) / 2ε)",
                 symptoms=[NO_GRAPH.looks_like(torch.zeros_like(x)), FORGOT_V.looks_like(hessian.sum(dim=1)),
                           RETURNED_GRADIENT.looks_like(_gradient(FUNCTIONS[name], x))])


@check
def check_hvp(hvp, seed: int | None = None) -> None:
    """Part A: hvp(f, x, v) = H(x)·v by double backward.

    Domain: ``f`` a smooth scalar function of a 1-D float64 ``x`` of n >= 1 elements (any signs, zero included);
    ``v`` float64 of x's shape (zero included). Corners at every seed: n = 1, x = 0, v = 0, v = e_1.
    Contract (the part's text): at most two reverse passes (the full Hessian is named when the count shows it,
    n >= 3); f evaluated at x only; no torch.func; x and v unchanged; a float64 tensor of x's shape without a graph.
    """
    __tracebackhide__ = True
    for name, x, v in _hvp_cases(seed):
        with trial():
            _run_hvp(hvp, name, x, v)


# ------------------------------------------------------------------------------- Part B: Hutchinson's diagonal

def _probe_cases(seed: int | None) -> list[tuple[int, int]]:
    """(count, n): the corners (one probe of one entry, one probe, one entry), two drawn shapes, and a large draw
    whose statistics show fair, independent signs."""
    gen = generator("10/probes/public", 0) if seed is None else generator("10/probes", seed)
    drawn = [(3, 5), (6, 4)] if seed is None else [(randint(gen, 2, 8), randint(gen, 3, 8)) for _ in range(2)]
    return [(1, 1), (1, 6), (5, 1), *drawn, (2000, 5)]


def _draw_probes(rademacher_probes, count: int, n: int, gen_seed: int, global_seed: int, what: str):
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)
        return call_learner(rademacher_probes, count, n, torch.Generator().manual_seed(gen_seed), what=what)


def _signs(answer, count: int, n: int, what: str) -> Tensor:
    __tracebackhide__ = True
    if not isinstance(answer, Tensor) or type(answer) is not Tensor:
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a float64 tensor "
                             f"of shape {(count, n)}.")
    if tuple(answer.shape) != (count, n):
        raise GradingFailure(f"{what} returned shape {tuple(answer.shape)}; expected {(count, n)}: one row per probe, "
                             "one column per entry of x.")
    values = answer.detach().double()
    if not bool(torch.isfinite(values).all()) or not bool((values.abs() == 1).all()):
        odd = values[values.abs() != 1]
        seen = sorted({float(v) for v in odd[:200].tolist()})
        if seen and set(seen) <= {0.0} and bool((values == 1).any()):
            kind = "0 and 1: coin flips, not signs"
        elif seen and set(seen) <= {0.0}:
            kind = "zeros among the signs"
        else:
            kind = f"entries such as {fmt(odd[:3])}: not signs"
        raise _proven(f"{what} returned {kind}.", PROBES_NOT_SIGNS)
    if answer.dtype != torch.float64:
        raise GradingFailure(f"{what} returned signs of dtype {answer.dtype}; expected float64, like every tensor in "
                             "this exercise.")
    if answer.requires_grad:
        raise GradingFailure(f"{what} returned probes that require grad; probes are data, not parameters.")
    return values


def _fairness(z: Tensor, what: str) -> None:
    """A large draw: signs fair overall and per column, neighbours uncorrelated (bounds of 6 to 10 standard errors,
    so a correct answer passes at every seed)."""
    __tracebackhide__ = True
    count = z.shape[0]
    share = float((z > 0).double().mean())
    columns = z.mean(dim=0)
    across = (z[:, :-1] * z[:, 1:]).mean(dim=0)
    down = (z[:-1] * z[1:]).mean(dim=0)
    problems = []
    if abs(share - 0.5) > 0.05:
        problems.append(f"{share:.1%} of the entries are +1 (fair signs: 50% ± 5%)")
    if float(columns.abs().max()) > 0.2:
        problems.append(f"a column averages {fmt(columns[columns.abs().argmax()])} (fair: 0 ± 0.2)")
    if float(across.abs().max()) > 0.15 or float(down.abs().max()) > 0.15:
        problems.append(f"neighbouring entries agree on average by {fmt(max(across.abs().max(), down.abs().max()))} "
                        "(independent signs: 0 ± 0.15)")
    if problems:
        raise GradingFailure(f"{what}: {count} probes are not independent fair signs: {'; '.join(problems)}.")


def _run_probes(rademacher_probes, count: int, n: int, gen_seed: int) -> None:
    __tracebackhide__ = True
    what = f"rademacher_probes({count}, {n}, generator)"
    z = _signs(_draw_probes(rademacher_probes, count, n, gen_seed, 1, what), count, n, what)
    again = _signs(_draw_probes(rademacher_probes, count, n, gen_seed, 2, what), count, n, what)
    if not torch.equal(z, again):
        raise _proven(f"{what} returned different probes for two generators in the same state (the global random "
                      "state was different).", NOT_FROM_GENERATOR)
    if count * n >= 24:  # two fair draws agree with probability 2**-24: only a fixed draw does
        other = _signs(_draw_probes(rademacher_probes, count, n, gen_seed + 1, 1, what), count, n, what)
        if torch.equal(z, other):
            raise _proven(f"{what} returned the same probes for two generators seeded differently.",
                          NOT_FROM_GENERATOR)
    if count >= 1000:
        _fairness(z, what)


@check
def check_rademacher_probes(rademacher_probes, seed: int | None = None) -> None:
    """Part B: rademacher_probes(count, n, generator) draws a (count, n) float64 tensor of independent fair signs ±1.

    Domain: integers count >= 1 and n >= 1, a torch.Generator. Corners at every seed: (1, 1), (1, 6), (5, 1); a
    draw of 2000 x 5 for the statistics. Contract: exactly the shape (count, n), float64, every entry -1 or +1; drawn
    from ``generator`` (the same state gives the same probes whatever the global random state; two seeds give two
    draws); fair and independent (share of +1, column means, neighbours' agreement, within 6 to 10 standard errors).
    """
    __tracebackhide__ = True
    gen = generator("10/probe-seeds/public", 0) if seed is None else generator("10/probe-seeds", seed)
    for count, n in _probe_cases(seed):
        with trial():
            _run_probes(rademacher_probes, count, n, randint(gen, 0, 10**9))


def _all_signs(n: int) -> Tensor:
    return torch.tensor(list(itertools.product([-1.0, 1.0], repeat=n)), dtype=torch.float64)


def _random_signs(gen: torch.Generator, count: int, n: int) -> Tensor:
    return torch.randint(0, 2, (count, n), generator=gen).double() * 2 - 1


def _diagonal_cases(seed: int | None) -> list[tuple[str, Tensor, Tensor]]:
    """The corners (every seed): all 2^3 sign vectors (the estimate IS the diagonal); one probe; a separable f (a
    diagonal Hessian: exact with any probes); one element; two probes for eight elements (the full Hessian's nine
    passes show). Then three drawn functions, 4 to 7 elements, 2 to 5 probes (never as many probes as elements)."""
    fixed = torch.Generator().manual_seed(10)
    corners = [
        ("sum(tanh(x))**2", _vector([0.3, -0.8, 1.1]), _all_signs(3)),
        ("sum(x**4)/4 + sum(x[:-1] * x[1:])", _vector([0.5, -1.0, 1.2, 0.0, -0.4]), _random_signs(fixed, 1, 5)),
        (SEPARABLE, _vector([-1.3, 0.2, 0.9, -0.1]), _random_signs(fixed, 2, 4)),
        ("log(1 + sum(x**2))", _vector([0.6]), _vector([[1.0], [-1.0], [1.0]])),
        ("sum(exp(x / 2)) * sum(sin(x))", uniform(fixed, (8,), -1.5, 1.5), _random_signs(fixed, 2, 8)),
    ]
    gen = generator("10/diagonal/public", 0) if seed is None else generator("10/diagonal", seed)
    drawn = []
    for _ in range(3):
        name = choice(gen, DRAWN)
        n = 4 if seed is None else randint(gen, 4, 7)
        count = 3 if seed is None else randint(gen, 2, 5)
        count = count if count != n else count - 1
        drawn.append((name, uniform(gen, (n,), -1.5, 1.5), _random_signs(gen, count, n)))
    return corners + drawn


def _run_diagonal(hessian_diagonal, name: str, x: Tensor, probes: Tensor) -> None:
    __tracebackhide__ = True
    f = _Watched(FUNCTIONS[name], x)
    count, n = probes.shape
    probes_text = f"{count} probe{'s' * (count > 1)}"
    what = f"hessian_diagonal(f, x, probes) for f(x) = {name}, x = {fmt(x)} and {probes_text}"
    routes = Routes()
    try:
        answer = call_learner(hessian_diagonal, f, x, probes, what=what, routes=routes)
    except GradingFailure as failure:
        raise _not_required(failure, routes) from None
    runs = routes.backward_runs
    if f.transformed or routes.forward_ad:
        raise _proven(f"{what} ran f under a torch.func transform.", TORCH_FUNC_HVP)
    if f.elsewhere:
        raise _proven(f"{what} evaluated f at {f.elsewhere} point(s) other than x.", FINITE_DIFFERENCES)
    if runs >= n + 1 and n + 1 > 2 * count:  # more than two per probe: only the full Hessian's n + 1 reach it
        raise _proven(f"{what} ran {runs} backward passes for x of {n} elements and {probes_text}; two per probe "
                      "are enough.", FULL_HESSIAN)
    if runs > 2 * count:
        raise GradingFailure(f"{what} ran {runs} backward passes for {probes_text}; one H·z per probe needs at "
                             "most two.")
    hessian = _hessian(FUNCTIONS[name], x)
    products = probes @ hessian  # row k: (H z_k)ᵀ, H symmetric
    estimates = probes * products
    expected = estimates.mean(dim=0)
    if n > 1 and isinstance(answer, Tensor) and answer.dim() == 0 and not answer.requires_grad:  # n = 1: trace = diag
        trace = float((probes * products).sum(dim=1).mean())
        if abs(float(answer) - trace) <= 1e-6 * (1 + abs(trace)):
            raise GradingFailure(f"{what} returned one number, {fmt(answer)}, the mean of zᵀHz; expected the "
                                 f"{n} entries {fmt(expected)}.", suspects=(TRACE_ESTIMATE,))
    answer = _tensor_like(answer, x, what)
    expect_close(answer, expected, what=what, source="mean of z ⊙ Hz", rtol=1e-6, atol=1e-9,
                 extra=f"  (the exact diagonal of H here: {fmt(hessian.diagonal())})",
                 symptoms=[NO_GRAPH.looks_like(torch.zeros_like(x)), NOT_AVERAGED.looks_like(estimates.sum(dim=0)),
                           DIVIDED_BY_DIMENSION.looks_like(estimates.sum(dim=0) / n),
                           FULL_HESSIAN.looks_like(hessian.diagonal()),
                           FORGOT_PROBE.looks_like(products.mean(dim=0))])


@check
def check_hessian_diagonal(hessian_diagonal, seed: int | None = None) -> None:
    """Part B: hessian_diagonal(f, x, probes) is Hutchinson's estimate: the mean over the rows z of probes of
    z ⊙ (H(x)·z).

    Domain: ``f`` a smooth scalar function of a 1-D float64 ``x`` of n >= 1 elements; ``probes`` a (k, n) float64
    tensor of ±1, k >= 1. Corners at every seed: all 2^n sign vectors (the estimate equals diag(H) exactly), k = 1,
    a diagonal Hessian, n = 1, k = 2 for n = 8. Contract: H·z by double backward (at most two passes per probe; the
    full Hessian named when its n + 1 passes show); f evaluated at x only; no torch.func; x and probes unchanged; a
    float64 tensor of x's shape without a graph.
    """
    __tracebackhide__ = True
    for name, x, probes in _diagonal_cases(seed):
        with trial():
            _run_diagonal(hessian_diagonal, name, x, probes)


# ----------------------------------------------------------------------------------- Part C: the penalized loss

def _penalty_symptoms(f: Callable, x: Tensor, weight: float) -> tuple[list, list]:
    """(symptoms of the value, symptoms of its gradient with respect to x)."""
    g = _gradient(f, x)
    value = float(f(x.detach()))
    value_symptoms = [PENALTY_NOT_SQUARED.looks_like(value + weight * float(g.norm())),
                      PENALTY_MEAN.looks_like(value + weight * float((g**2).mean()))]
    return value_symptoms, [NO_GRAPH.looks_like(g)]


def _penalty_cases(seed: int | None) -> list[tuple[str, Tensor, float]]:
    """The corners (every seed): weight 0 (the loss is f itself); one element; x = 0, where ∇f = 0 (the penalty and
    its gradient vanish); an integer weight. Then every drawn function at its own x and weight."""
    corners = [
        ("sum(tanh(x))**2", _vector([0.8, -0.3, 1.2]), 0.0),
        ("sum(x**4)/4 + sum(x[:-1] * x[1:])", _vector([-1.1]), 0.5),
        ("log(1 + sum(x**2))", torch.zeros(3, dtype=torch.float64), 1.5),
        ("sum(exp(x / 2)) * sum(sin(x))", _vector([0.9, -0.7, 0.0, 1.3]), 2),
    ]
    gen = generator("10/penalty/public", 0) if seed is None else generator("10/penalty", seed)
    drawn = []
    for name in DRAWN:
        n = 4 if seed is None else randint(gen, 4, 7)
        x = uniform(gen, (n,), -1.5, 1.5)
        drawn.append((name, x, 0.5 if seed is None else round(float(uniform(gen, (), 0.2, 2.0)), 3)))
    return corners + drawn


def _run_penalty(penalized_loss, name: str, x0: Tensor, weight: float) -> None:
    __tracebackhide__ = True
    f = FUNCTIONS[name]
    x = x0.clone().requires_grad_(True)  # the caller's leaf: its .grad must stay None
    what = f"penalized_loss(f, x, weight={weight!r}) for f(x) = {name}, x = {fmt(x0)}"
    answer = call_learner(penalized_loss, f, x, weight, what=what)
    if not isinstance(answer, Tensor):
        raise _proven(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a 0-d tensor.", LOSS_AS_NUMBER)
    if answer.grad_fn is None:
        raise _proven(f"{what} returned a tensor without a graph (requires_grad={answer.requires_grad}).",
                      LOSS_AS_NUMBER)
    if answer.dim() != 0:
        raise GradingFailure(f"{what} returned a tensor of shape {tuple(answer.shape)}; expected a 0-d tensor (shape "
                             "()), the one number a loss is.")
    g = _gradient(f, x0)
    value_symptoms, gradient_symptoms = _penalty_symptoms(f, x0, weight)
    expect_close(answer.detach(), float(f(x0)) + weight * float((g**2).sum()), what=f"{what}: the value",
                 source="expected", symptoms=value_symptoms)
    try:
        (got,) = torch.autograd.grad(answer, x, allow_unused=True)
    except RuntimeError as error:
        raise GradingFailure(f"{what}: backward through your loss failed: {error}") from None
    if got is None:
        raise _proven(f"{what}: the returned loss is not connected to x.", LOSS_AS_NUMBER)

    def penalized(t: Tensor) -> Tensor:
        t = t if t.requires_grad else t.detach().requires_grad_(True)
        (gt,) = torch.autograd.grad(f(t), t, create_graph=True)
        return f(t) + weight * (gt**2).sum()

    (expected,) = autograd_gradient(penalized, x0)
    (fd,) = central_difference(lambda t: penalized(t).detach(), x0)
    expect_close(got, expected, what=f"{what}: the gradient of your loss with respect to x", fd=fd,
                 symptoms=gradient_symptoms)


@check
def check_penalized_loss(penalized_loss, seed: int | None = None) -> None:
    """Part C: penalized_loss(f, x, weight) = f(x) + weight·‖∇f(x)‖² (an input-gradient penalty) as a tensor whose
    graph reaches x through both terms.

    Domain: ``f`` a smooth scalar function of a 1-D float64 leaf ``x`` (requires grad) of n >= 1 elements; ``weight``
    a number >= 0 (float or int). Corners at every seed: weight 0, n = 1, x = 0 (∇f = 0), an int weight.
    Contract: a 0-d tensor with a graph; its value f(x) + weight·Σ(∇f)²; its gradient with respect to x
    ∇f + 2·weight·H∇f (so the penalty trains); x unchanged and its .grad still None (no backward()).
    """
    __tracebackhide__ = True
    for name, x, weight in _penalty_cases(seed):
        with trial():
            _run_penalty(penalized_loss, name, x, weight)


# ------------------------------------------------------------------------------ Part D: per-example gradient norms

def _per_example_gradients(model: nn.Module, inputs: Tensor, targets: Tensor) -> list[dict[str, Tensor]]:
    """The oracle: one backward pass per example (the loop the part replaces)."""
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    grads = []
    for x, y in zip(inputs, targets):
        out = torch.func.functional_call(model, dict(zip(names, params)), (x[None],))
        grads.append(dict(zip(names, torch.autograd.grad(F.cross_entropy(out, y[None]), params))))
    return grads


def _norm_symptoms(grads: list[dict[str, Tensor]], norms: Tensor) -> list:
    n = len(grads)
    mean = {k: sum(g[k] for g in grads) / n for k in grads[0]}
    mean_norm = torch.sqrt(sum((t**2).sum() for t in mean.values()))
    return [MEAN_GRADIENT_NORM.looks_like(mean_norm.expand(n)), DIVIDED_BY_BATCH.looks_like(norms / n),
            SQUARED_NORMS.looks_like(norms**2),
            PER_TENSOR_SUM.looks_like(torch.stack([sum(t.norm() for t in g.values()) for g in grads])),
            WEIGHTS_ONLY.looks_like(torch.stack([torch.sqrt(sum((t**2).sum() for k, t in g.items()
                                                                 if k.endswith("weight"))) for g in grads]))]


def _norm_cases(seed: int | None):
    """The corners (every seed): a batch of one; a model of one Linear layer (no hidden layer); a batch whose two
    examples are equal. Then drawn MLPs D → H → C (Tanh) and batches (public: two fixed shapes)."""
    fixed = torch.Generator().manual_seed(1010)
    model = random_mlp(fixed, (3, 5, 2))
    x = uniform(fixed, (1, 3))
    yield model, x, torch.tensor([1]), (3, 5, 2)
    model = random_mlp(fixed, (4, 3))
    yield model, uniform(fixed, (3, 4)), torch.tensor([0, 2, 1]), (4, 3)
    model = random_mlp(fixed, (2, 4, 3))
    x = uniform(fixed, (1, 2))
    yield model, torch.cat([x, x, uniform(fixed, (1, 2))]), torch.tensor([2, 2, 0]), (2, 4, 3)
    gen = generator("10/norms/public", 0) if seed is None else generator("10/norms", seed)
    shapes = [(5, (3, 4, 3)), (4, (2, 5, 4))] if seed is None else \
        [(randint(gen, 3, 7), (randint(gen, 2, 5), randint(gen, 3, 6), randint(gen, 2, 4))) for _ in range(3)]
    for n, sizes in shapes:
        model = random_mlp(gen, sizes)
        yield model, uniform(gen, (n, sizes[0])), torch.randint(sizes[-1], (n,), generator=gen), sizes


def _run_norms(per_example_grad_norms, model, inputs, targets, sizes) -> None:
    __tracebackhide__ = True
    what = (f"per_example_grad_norms(model, inputs, targets) for an MLP {'→'.join(map(str, sizes))} "
            f"and a batch of {len(inputs)}")
    routes = Routes()
    answer = call_learner(per_example_grad_norms, model, inputs, targets, what=what, routes=routes)
    if routes.backward_runs > 1:
        raise _proven(f"{what} ran {routes.backward_runs} backward passes for {len(inputs)} examples.", LOOPED)
    if not isinstance(answer, Tensor):
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a tensor of shape "
                             f"({len(inputs)},).")
    grads = _per_example_gradients(model, inputs, targets)
    expected = torch.stack([torch.sqrt(sum((t**2).sum() for t in g.values())) for g in grads])
    got = as_answer(answer, what=what)
    expect_close(got, expected, what=what, source="a loop", rtol=1e-6, atol=1e-10,
                 symptoms=_norm_symptoms(grads, expected))


@check
def check_per_example_grad_norms(per_example_grad_norms, seed: int | None = None) -> None:
    """Part D: per_example_grad_norms(model, inputs, targets) is the (N,) tensor of ‖∇θ loss_i‖ over all parameters.

    Domain: ``model`` a float64 MLP (Linear layers, Tanh between them, one layer or more); ``inputs`` (N, D) float64,
    N >= 1; ``targets`` (N,) int64 in [0, C). Corners at every seed: N = 1, a single Linear layer, two equal
    examples. Contract: a tensor of shape (N,); one backward pass for the whole batch (torch.func); the model (its
    parameters and their .grad) and the batch unchanged.
    """
    __tracebackhide__ = True
    for model, inputs, targets, sizes in _norm_cases(seed):
        with trial():
            _run_norms(per_example_grad_norms, model, inputs, targets, sizes)


# ----------------------------------------------------------------------------------------- Part E: checkpointing

def make_blocks(gen: torch.Generator, count: int, width: int, hidden: int, dropout: float = 0.2) -> nn.ModuleList:
    """``count`` residual-free blocks Linear → Tanh → Dropout → Linear (float64, training mode)."""
    blocks = nn.ModuleList()
    for _ in range(count):
        mlp = random_mlp(gen, (width, hidden, width))
        blocks.append(nn.Sequential(mlp[0], mlp[1], nn.Dropout(dropout), mlp[2]))
    return blocks.train()


def _saved_storages(run: Callable):
    """({storage pointer: bytes} the forward graph saved, the result of run()), seen by saved-tensor hooks."""
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()
    return saved, result


class _BlockRuns:
    """How often each block ran, seen through its first layer (every way of running a block calls it), and each
    block's input in its first run (kept alive, so that no later tensor can take its address)."""

    def __init__(self, blocks: nn.ModuleList):
        self.runs = [0] * len(blocks)
        self.inputs: list[Tensor | None] = [None] * len(blocks)
        self.handles = [block[0].register_forward_pre_hook(self._hook(i)) for i, block in enumerate(blocks)]

    def _hook(self, i: int):
        def hook(module, args):
            self.runs[i] += 1
            if self.inputs[i] is None and args and isinstance(args[0], Tensor):
                self.inputs[i] = args[0]
        return hook

    def saved(self, storages: dict[int, int]) -> list[int]:
        """The blocks whose input is among the saved storages."""
        return [i for i, t in enumerate(self.inputs) if t is not None and t.untyped_storage().data_ptr() in storages]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _gradients_after(blocks: nn.ModuleList, x: Tensor, out: Tensor, weights: Tensor) -> list[Tensor | None]:
    """The gradients of x and of every parameter after (out * weights).sum().backward(). backward(), not
    torch.autograd.grad, since a reentrant checkpoint (use_reentrant=True, a correct answer) supports only backward();
    the parameters' .grad are put back to None."""
    params = list(blocks.parameters())
    (out * weights).sum().backward()
    grads = [None if t.grad is None else t.grad.detach().clone() for t in [x, *params]]
    for param in params:
        param.grad = None
    return grads


def _reference(blocks: nn.ModuleList, x: Tensor, weights: Tensor, seed: int, *, rng: bool | None):
    """Plain forward (rng None) or per-block checkpoints with preserve_rng_state=rng: (bytes, out, gradients)."""
    leaf = x.detach().clone().requires_grad_(True)

    def run():
        h = leaf
        for block in blocks:
            h = block(h) if rng is None else checkpoint(block, h, use_reentrant=False, preserve_rng_state=rng)
        return h

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        saved, out = _saved_storages(run)
        grads = _gradients_after(blocks, leaf, out, weights)
    return sum(saved.values()), out.detach(), grads


def _flat(grads: list) -> Tensor:
    return torch.cat([torch.zeros(0, dtype=torch.float64) if g is None else g.reshape(-1) for g in grads])


def _blocks(indices: list[int]) -> str:
    """Blocks by their 1-based numbers: 'block 2', 'blocks 1 and 3', 'blocks 1–3'."""
    numbers = [i + 1 for i in indices]
    if len(numbers) == 1:
        return f"block {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
        return f"blocks {numbers[0]}–{numbers[-1]}"
    return "blocks " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


def _segments(starts: list[int], count: int) -> str:
    """The checkpoints an answer made, from the blocks whose inputs the graph saved: 'one checkpoint held blocks 1
    and 2, another held block 3'."""
    bounds = [*starts, count]
    groups = [_blocks(list(range(a, b))) for a, b in zip(bounds, bounds[1:])]
    return ", ".join(f"{'one checkpoint' if i == 0 else 'another'} held {group}" for i, group in enumerate(groups))


def _run_checkpoint(checkpointed_forward, blocks: nn.ModuleList, x0: Tensor, weights: Tensor, seed: int) -> None:
    __tracebackhide__ = True
    count, width = len(blocks), x0.shape[1]
    what = f"checkpointed_forward(blocks, x) for {count} block{'s' * (count > 1)} of width {width} and x of shape " \
           f"{tuple(x0.shape)}"
    plain_bytes, plain_out, plain_grads = _reference(blocks, x0, weights, seed, rng=None)
    x = x0.clone().requires_grad_(True)
    modes = [m.training for m in blocks.modules()]
    runs = _BlockRuns(blocks)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            routes = Routes()
            saved, out = _saved_storages(lambda: call_learner(checkpointed_forward, blocks, x, what=what,
                                                              routes=routes))
            forward_runs = list(runs.runs)
            if routes.backward_runs:
                raise GradingFailure(f"{what} ran {routes.backward_runs} backward pass(es) itself; the part asks for "
                                     "the forward pass only (the test runs backward on your output).")
            if [m.training for m in blocks.modules()] != modes:
                blocks.train()
                raise _proven(f"{what} changed the blocks' training mode.", SWITCHED_MODE)
            if not isinstance(out, Tensor) or out.grad_fn is None:
                raise GradingFailure(f"{what} returned {type(out).__name__} without a graph: backward could not reach "
                                     "the parameters.")
            expect_close(out.detach(), plain_out, what=f"{what}: the output", source="a plain forward", rtol=1e-10,
                         atol=1e-12)
            grads = _gradients_after(blocks, x, out, weights)
            reruns = [after - before for before, after in zip(forward_runs, runs.runs)]
    finally:
        runs.remove()
    expect_close(_flat(grads), _flat(plain_grads), what=f"{what}: the gradients of x and of every parameter",
                 source="a plain forward", rtol=1e-8, atol=1e-12,
                 symptoms=[RNG_NOT_PRESERVED.looks_like(_flat(_reference(blocks, x0, weights, seed, rng=False)[2]))])
    if forward_runs != [1] * count:
        raise GradingFailure(f"{what} ran the blocks {forward_runs} times in the forward pass; each runs once.")
    plain = [i for i, rerun in enumerate(reruns) if rerun == 0]
    inputs_bytes = count * x0.numel() * x0.element_size()
    total = sum(saved.values())
    if len(plain) == count:
        raise _proven(f"{what}: no block ran again during backward, and the graph saved {total} bytes, as a plain "
                      f"forward does ({plain_bytes}); one checkpoint per block saves only the block inputs, "
                      f"{inputs_bytes}.", NOT_CHECKPOINTED)
    if plain:
        raise _proven(f"{what}: {_blocks(plain)} did not run again during backward: "
                      f"{'it was' if len(plain) == 1 else 'they were'} not checkpointed.", OUTSIDE_CHECKPOINT)
    starts = runs.saved(saved)
    if len(starts) < count and starts[:1] == [0]:
        raise _proven(f"{what}: every block ran again during backward, but the graph saved the inputs of "
                      f"{_blocks(starts)} only: {_segments(starts, count)}.", GROUPED)
    if total > inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {total} bytes; checkpointing each block saves only the block "
                             f"inputs, {inputs_bytes} (a plain forward saves {plain_bytes}).")
    if total < inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {total} bytes, less than the inputs of the {count} blocks "
                             f"({inputs_bytes}) that one checkpoint per block keeps.")


@check
def check_checkpointed_forward(checkpointed_forward, seed: int | None = None) -> None:
    """Part E: checkpointed_forward(blocks, x) runs x through the blocks with one checkpoint per block.

    Domain: ``blocks`` an nn.ModuleList of count >= 1 float64 blocks Linear → Tanh → Dropout → Linear in training
    mode, all of one width; ``x`` a (B, width) float64 leaf that requires grad, B >= 1. Corners at every seed: three
    blocks with a batch of one (first, so that a diagnosis names what the answer did to three blocks), three
    blocks, one block. Contract: the output and, after backward, the gradients of x and every parameter of a plain
    forward from the same random state (dropout included); every block runs once forward and once more in backward
    (checkpointed); the graph saves each block's input and nothing else (saved-tensor hooks); the training mode, the
    parameters and x unchanged.
    """
    __tracebackhide__ = True
    fixed = [(3, 5, 10, 1), (3, 3, 6, 4), (1, 4, 8, 3)]
    gen = generator("10/checkpoint/public", 0) if seed is None else generator("10/checkpoint", seed)
    drawn = [(2, 4, 8, 3)] if seed is None else \
        [(randint(gen, 2, 4), randint(gen, 3, 8), randint(gen, 6, 16), randint(gen, 2, 6)) for _ in range(2)]
    corner_gen = torch.Generator().manual_seed(1011)
    for i, (count, width, hidden, batch) in enumerate(fixed + drawn):
        source = corner_gen if i < len(fixed) else gen
        blocks = make_blocks(source, count, width, hidden)
        x, weights = uniform(source, (batch, width)), uniform(source, (batch, width))
        with trial():
            _run_checkpoint(checkpointed_forward, blocks, x, weights, randint(source, 0, 10**6))
