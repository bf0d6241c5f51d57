"""Checks for exercise 10, beyond first order: a Hessian-vector product by double backward for a function of several
tensors, Hutchinson's estimate of the Hessian's diagonal (random sign probes, one H·z per probe), the WGAN-GP gradient
penalty at interpolates, per-example gradient clipping with torch.func (the DP-SGD step), activation checkpointing in
groups of k blocks.

Each ``check_*`` function is one test cell's whole body: without ``seed`` it runs the public cases, with
``seed=grading_seed()`` fresh random ones. Every check first runs its corner cases (the edges of the domain its
docstring states), the same at every seed, then the cases it draws; every case is a :func:`~autograder.checking.trial`,
so a misconception is named on proof or when two cases agree. Oracles: the full Hessian by autograd and finite
differences of gradients (Parts A, B), a loop of per-example backward passes (Part D), central differences of the
penalty (Part C), a plain forward from the same random state (Part E).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from ..checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Routes,
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
V_AFTER = Misconception(
    "multiplied by v after the second differentiation",
    "(H·1) ⊙ v is not H·v: H mixes the entries of v (row i of H·v is Σ_j H_ij v_j), so v must enter before the "
    "second differentiation, inside the scalar ⟨∇f(x), v⟩, not be multiplied onto its result.")
RETURNED_GRADIENT = Misconception(
    "returned the first derivative", "That is ∇f(x); the part asks for H·v, the derivative of ⟨∇f(x), v⟩.")
ZERO_BLOCKS = Misconception(
    "no zeros where f is linear (None or an autograd error instead)",
    "Where f is linear in a tensor, with no cross terms, or does not use it, ⟨∇f, v⟩ does not depend on it and its "
    "part of H·v is zero; where f is linear in all of them, ∇f is a constant with no grad_fn and H·v is all zeros. "
    "autograd reports both as errors unless you ask otherwise: read what allow_unused and materialize_grads of "
    "torch.autograd.grad do, and look at requires_grad before you differentiate a second time.")
OWN_BLOCKS_ONLY = Misconception(
    "left out the cross terms between the tensors",
    "Entry i of H·v is Σ_j (∂²f/∂x_i∂x_j) v_j over ALL the tensors j, not only (∂²f/∂x_i²) v_i: differentiate the "
    "one scalar Σ_j ⟨∇_j f, v_j⟩ with respect to every tensor at once.")
GRAPH_FREED = Misconception(
    "reused the first gradient after its graph was freed (retain_graph forgotten)",
    "One gradient g with a graph serves every probe, but each backward pass through ⟨g, z⟩ frees that graph unless "
    "you pass retain_graph=True; or take a fresh gradient for every probe (two passes each).")
PROBES_NOT_SIGNS = Misconception(
    "probes whose entries are not all ±1",
    "Hutchinson's estimate relies on z_i² = 1 for every entry and E[z_i z_j] = 0: then z ⊙ Hz holds H_ii exactly and "
    "only the off-diagonal terms average out. An entry 0 drops H_ii from its own estimate (z_i² = 0), so 0/1 coins "
    "or draws from {−1, 0, 1} shrink the diagonal, and Gaussian entries add noise to every term. Every entry must be "
    "−1 or +1: a fair coin c in {0, 1} becomes a sign as 2c − 1.")
NOT_FROM_GENERATOR = Misconception(
    "probes not drawn from the generator passed in",
    "Every random call must take generator=generator (torch.randint, torch.rand, torch.bernoulli... all accept it), "
    "the generator itself, not a copy: then the same generator state gives the same probes, the global random state "
    "is left alone, and the generator advances, so that the next call gets fresh probes. A new torch.Generator "
    "seeded with generator.initial_seed() starts from the same place on every call and repeats its probes.")
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
PENALTY_AS_NUMBER = Misconception(
    "returned a number instead of a penalty tensor with its graph",
    "A penalty is added to the critic's loss and trained: return the 0-d tensor itself, not .item() or a detached "
    "copy, so that backward reaches the critic's parameters through the gradient inside it.")
PARAMS_DETACHED = Misconception(
    "the critic ran on detached copies of its parameters",
    "The penalty trains the critic, so its graph must reach the critic's own parameters: call critic(x̂) itself (or "
    "functional_call with the parameters as they are), not a copy made of p.detach() or built under torch.no_grad().")
R1_FORM = Misconception(
    "penalised the squared norm (R1) instead of (‖∇‖ − 1)²",
    "WGAN-GP pulls every gradient norm towards 1, it does not push it to 0: each example contributes "
    "(‖∇_x̂ critic(x̂)‖ − 1)², the norm itself (a square root) minus one, then squared.")
SQUARED_NORM_MINUS_ONE = Misconception(
    "(‖∇‖² − 1)² instead of (‖∇‖ − 1)²",
    "The distance to 1 is taken on the norm, the square root of the sum of squares, not on the sum of squares.")
ONE_NORM_FOR_BATCH = Misconception(
    "one norm over the whole batch instead of one per example",
    "Each interpolate x̂_i has its own gradient row ∇_x̂_i critic(x̂)_i; take the norm of every row (over the "
    "features, dim=1), then average (‖·‖ − 1)² over the rows.")
NORM_OVER_BATCH_AXIS = Misconception(
    "norms over the batch axis (dim=0) instead of per example",
    "The gradient has one row per example and one column per feature; the norm of an example's gradient runs over "
    "its own row (dim=1), not down a column across examples.")
PENALTY_SUMMED = Misconception(
    "summed the examples' penalties instead of averaging them",
    "The penalty is weight times the MEAN over the batch of (‖∇‖ − 1)², so that it does not grow with the batch.")
WEIGHT_SQUARED = Misconception(
    "put the weight inside the square",
    "weight · (‖∇‖ − 1)² multiplies the square; (weight · (‖∇‖ − 1))² squares the weight too.")
ALPHA_ON_FEATURES = Misconception(
    "mixing weights broadcast along the features instead of the examples",
    "alpha has one entry per example (shape (B,)); alpha * real lines it up with the LAST axis, the features. Give it "
    "a trailing axis, alpha[:, None] (shape (B, 1)), so that row i is alpha_i real_i + (1 − alpha_i) fake_i. With "
    "B ≠ D the shapes clash and PyTorch complains; with B = D it runs and is silently wrong.")
SWAPPED_MIX = Misconception(
    "swapped real and fake in the interpolation",
    "x̂_i = alpha_i real_i + (1 − alpha_i) fake_i: alpha weighs the REAL example (alpha_i = 1 gives the real one).")
PENALTY_AT_REAL = Misconception(
    "penalised the gradient at the real examples instead of at the interpolates",
    "That is where R1 looks; WGAN-GP evaluates the critic's gradient at points x̂ between real and fake examples.")
NAN_AT_ZERO_NORM = Misconception(
    "the norm's derivative at a zero gradient is NaN (sqrt of a sum of squares)",
    "d√s/ds = 1/(2√s) is infinite at s = 0, and autograd multiplies it by the zero derivative of s = Σ g²: 0 · ∞ is "
    "NaN (lesson 10, section 6). Where the critic's gradient is exactly 0 the norm has a kink; "
    "torch.linalg.vector_norm (or .norm()) returns the subgradient 0 there instead.")
LOOPED = Misconception(
    "looped over the examples where the part asks for vmap",
    "One backward pass per example is what torch.func.vmap replaces: write the loss of ONE example as a function "
    "of the parameters, take torch.func.grad of it, and vmap that over the batch (in_dims=(None, 0, 0)).")
NOT_CLIPPED = Misconception(
    "averaged the per-example gradients without clipping them",
    "DP-SGD bounds what any one example can contribute: scale example i's gradient by min(1, C / ‖g_i‖) before the "
    "mean, so that no example weighs more than a gradient of norm C.")
CLIPPED_THE_MEAN = Misconception(
    "clipped the mean gradient instead of each example's",
    "Clipping the batch mean bounds the batch, not the examples: one outlier still dominates the mean. Clip every "
    "example's gradient to norm C first, then average.")
CLIPPED_EACH_TENSOR = Misconception(
    "clipped each parameter tensor on its own",
    "The norm that DP-SGD clips is the global norm of an example's gradient, over all the parameter tensors at once: "
    "one factor min(1, C / ‖g_i‖) per example, applied to all its tensors alike.")
NORMALISED_EVERY_EXAMPLE = Misconception(
    "scaled every example's gradient to norm C",
    "Clipping only shrinks: a gradient already shorter than C is left as it is. The factor is min(1, C / ‖g_i‖), not "
    "C / ‖g_i‖.")
CLIP_FACTOR_SWAPPED = Misconception(
    "clip factor max(1, C / ‖g_i‖) instead of min(1, C / ‖g_i‖) (min and max swapped)",
    "Clipping caps the long gradients and leaves the short ones alone: the factor is min(1, C / ‖g_i‖), "
    "torch.clamp(C / norms, max=1.0). With min=1.0 it becomes max(1, C / ‖g_i‖): the long gradients pass unclipped "
    "and every short one is blown up to norm C.")
CLIPPED_SUM = Misconception(
    "summed the clipped gradients instead of averaging them",
    "The part asks for the mean over the N examples of the clipped per-example gradients: divide the sum by N.")
DIVIDED_BY_BATCH = Misconception(
    "per-example gradients divided by the batch size",
    "Your norms are N times too small: the loss of one example is its own cross-entropy, not 1/N of it. Compute it "
    "on a batch of one (x[None], y[None]).")
NORM_WITHOUT_ROOT = Misconception(
    "clipped by the sum of squares instead of the norm",
    "‖g‖ is the square root of Σ g² over every parameter; min(1, C / Σ g²) clips against the squared norm, which "
    "is not what C bounds.")
NORM_AS_SUM_OF_NORMS = Misconception(
    "clipped by the sum of the per-parameter norms",
    "An example's global norm is sqrt(Σ over all parameters of Σ g²): one norm over everything, not the sum of the "
    "norms of each parameter tensor (that sum is larger, so it clips too much).")
NORM_WITHOUT_BIASES = Misconception(
    "left the biases out of the clipping norm",
    "Every parameter of the model counts in an example's norm, the biases too.")
NOT_CHECKPOINTED = Misconception(
    "no checkpoint: the graph keeps every activation",
    "torch.utils.checkpoint.checkpoint(function, h, use_reentrant=False) runs a function without saving its "
    "activations; backward then runs it again to get them. Without it the graph saves everything, as a plain forward "
    "does.")
OUTSIDE_CHECKPOINT = Misconception(
    "some blocks ran outside any checkpoint",
    "Every group of blocks goes through its own checkpoint call, the last one too (torch.utils.checkpoint."
    "checkpoint_sequential runs its last segment without a checkpoint, which is why this part asks for your own "
    "loop of checkpoint calls).")
GROUPS_NOT_K = Misconception(
    "checkpoints that do not hold k consecutive blocks each",
    "Cut the blocks into consecutive groups from the first: k blocks each, and the last group holds whatever is "
    "left (fewer than k when k does not divide the number of blocks). One checkpoint per group: it saves the group's "
    "input, and its backward reruns the group's k blocks.")
LATE_BINDING = Misconception(
    "every checkpoint reran the last group (a closure read the loop variable late)",
    "checkpoint keeps the function you pass and calls it again during backward, long after your loop has finished. "
    "A lambda or inner function that reads the loop variable sees its LAST value then, so every checkpoint reruns "
    "the last group on its own input. Pass a function that holds its own group: a module built from the group, "
    "functools.partial, or a default argument (lambda h, group=group: ...).")
RNG_NOT_PRESERVED = Misconception(
    "checkpoint recomputes with a different random state (dropout)",
    "The recomputation in backward must draw the same dropout mask as the forward pass did; with "
    "preserve_rng_state=False it draws a new one, and the gradients belong to a network that never ran. Keep the "
    "default preserve_rng_state=True.")
SWITCHED_MODE = Misconception(
    "switched the blocks to eval mode",
    "The blocks are in training mode (dropout on) and must stay so: checkpointing must not change what the network "
    "computes. Leave .train()/.eval() alone.")
DETACHED_INPUT = Misconception(
    "cut the caller's x off the graph",
    "The output must depend on the x you were given, so that backward reaches it: x.detach() (or a new leaf) starts "
    "a graph of its own and x gets no gradient. Pass x itself to the first checkpoint.")


# ------------------------------------------------------------------------- Parts A and B: functions of tensors

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


class _Watched:
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


def _hessian(f: Callable, x: Tensor) -> Tensor:
    return torch.autograd.functional.hessian(f, x.detach().double())


def _gradient(f: Callable, x: Tensor) -> Tensor:
    x = x.detach().double().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x), x, allow_unused=True)
    return torch.zeros_like(x) if g is None else g


def _gradient_differences(f: Callable, x: Tensor, v: Tensor, eps: float = 1e-5) -> Tensor:
    """(∇f(x + εv) − ∇f(x − εv)) / 2ε: finite differences of gradients, the independent check of H·v."""
    return (_gradient(f, x + eps * v) - _gradient(f, x - eps * v)) / (2 * eps)


def _vector(values) -> Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _not_required(failure: GradingFailure, routes: Routes, *, constant: bool) -> GradingFailure:
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


def _tensor_like(answer, x: Tensor, what: str) -> Tensor:
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


def _hvp_cases(seed: int | None) -> list[tuple[str, list[Tensor], list[Tensor]]]:
    """The corners (every seed), in this order: one tensor of one element; a matrix and a vector (a layer); a 0-d
    scalar beside a vector; x = 0, where the gradient vanishes; v = 0; a bilinear f (zero diagonal blocks, only cross
    terms); an f linear in one tensor with no cross terms (that part of H·v is zero); an f linear in every tensor (all
    zero); an f that does not use one of its tensors (a matrix: zeros, though autograd gives no gradient at all).
    Then one case of every function at drawn shapes, values and v (public: from a fixed stream)."""
    fixed = torch.Generator().manual_seed(1010)
    W, u = uniform(fixed, (2, 3), -1.0, 1.0), uniform(fixed, (3,), -1.0, 1.0)
    corners = [
        _hvp_case("sum(x**4)/4 + sum(x[:-1] * x[1:])", [_vector([0.7])], [_vector([-1.3])]),
        _hvp_case(LAYER, [W, u], [uniform(fixed, (2, 3), -1.0, 1.0), uniform(fixed, (3,), -1.0, 1.0)]),
        _hvp_case(SCALE, [_vector([0.5, -1.2, 0.8]), _vector(0.6)], [_vector([1.0, 0.5, -0.5]), _vector(-1.5)]),
        _hvp_case("log(1 + sum(x**2))", [torch.zeros(4)], [_vector([1.0, -0.5, 0.25, 2.0])]),
        _hvp_case(LAYER, [W, u], [torch.zeros(2, 3), torch.zeros(3)]),
        _hvp_case(BILINEAR, [_vector([0.4, -1.1, 0.9]), _vector([1.3, 0.2, -0.7])],
                  [_vector([1.0, -2.0, 0.5]), _vector([-0.3, 0.8, 1.5])]),
        _hvp_case(PARTLY_LINEAR, [_vector([-1.2, 0.3, 1.4, -0.6]), _vector([0.5, -0.9])],
                  [_vector([1.0, 0.0, -1.0, 0.5]), _vector([2.0, -1.0])]),
        _hvp_case(ALL_LINEAR, [_vector([0.1, -0.2, 0.3]), uniform(fixed, (2, 2), -1.0, 1.0)],
                  [_vector([1.0, 1.0, -1.0]), uniform(fixed, (2, 2), -1.0, 1.0)]),
        _hvp_case(IGNORES_W, [_vector([0.8, -0.4, 1.1]), uniform(fixed, (2, 2), -1.0, 1.0)],
                  [_vector([1.0, -1.0, 0.5]), uniform(fixed, (2, 2), -1.0, 1.0)]),
    ]
    gen = generator("10/hvp/public", 0) if seed is None else generator("10/hvp", seed)
    drawn = []
    for name, (args, _) in MULTI.items():
        n = 4 if seed is None else randint(gen, 3, 6)
        m = 2 if seed is None else randint(gen, 1, 4)
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
    return [[mistake.looks_like(parts[mistake][i]) for mistake in values] for i in range(len(xs))]


def _run_hvp(hvp, name: str, xs: list[Tensor], vs: list[Tensor]) -> None:
    __tracebackhide__ = True
    names, f_true = MULTI[name]
    constant = CONSTANT_GRADIENT.get(name, set())
    f = _Watched(f_true, *xs)
    values = ", ".join(f"{a} = {fmt(x)}" for a, x in zip(names, xs))
    what = f"hvp(f, xs, vs) for f({', '.join(names)}) = {name} at {values}, vs = [{', '.join(fmt(v) for v in vs)}]"
    routes = Routes()
    try:
        answer = call_learner(hvp, f, xs, vs, what=what, routes=routes)
    except GradingFailure as failure:
        raise _not_required(failure, routes, constant=bool(constant)) from None
    n, runs = sum(x.numel() for x in xs), routes.backward_runs
    if f.transformed or routes.forward_ad:
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
        raise GradingFailure(passes)
    _compare_hvp(answer, f_true, xs, vs, names, constant, what)


def _compare_hvp(answer, f: Callable, xs: list[Tensor], vs: list[Tensor], names: tuple[str, ...], constant: set[int],
                 what: str) -> None:
    """Part A's result against H·v (autograd's full Hessian, finite differences of gradients), entry by entry."""
    __tracebackhide__ = True
    entries = _entries(answer, xs, names, constant, what)
    flat_f = _on_flat(f, xs)
    hessian = _hessian(flat_f, _flat(xs))
    expected = _split(hessian @ _flat(vs), xs)
    fd = _split(_gradient_differences(flat_f, _flat(xs), _flat(vs)), xs)
    symptoms = _hvp_symptoms(f, xs, vs, hessian)
    for i, (entry, arg) in enumerate(zip(entries, names)):
        expect_close(entry, expected[i], what=f"{what}: entry {i} (H·v for {arg})", fd=fd[i], rtol=1e-6, atol=1e-9,
                     extra="  (finite difference here: of gradients, (∇f(x + εv) − ∇f(x − εv)) / 2ε)",
                     symptoms=symptoms[i])


@check
def check_hvp(hvp, seed: int | None = None) -> None:
    """Part A: hvp(f, xs, vs) = H·v for a scalar function f of several tensors, by double backward, split like xs.

    Domain: ``f`` a smooth scalar function of m >= 1 float64 tensors (any shapes: vectors, matrices, a 0-d scalar;
    any signs, zero included), possibly linear in some or all of them; ``xs`` a list of those tensors (requires_grad
    False); ``vs`` a list of float64 tensors shaped like xs (zero included). Corners at every seed: one tensor of one
    element, a matrix with a vector, a 0-d scalar, x = 0, v = 0, a bilinear f (only cross terms), an f linear in one
    tensor (a zero entry), an f linear in all (all zeros), an f that ignores one tensor (a zero entry).
    Contract (the part's text): at most two reverse passes (the full Hessian is named when the count shows it); f
    evaluated at xs only; no torch.func; xs and vs unchanged; a list (or tuple) of m float64 tensors shaped like xs,
    without a graph; zeros, not None, where f's gradient does not depend on a tensor; entry i is Σ_j H_ij v_j (cross
    terms included).
    """
    __tracebackhide__ = True
    for name, xs, vs in _hvp_cases(seed):
        with trial():
            _run_hvp(hvp, name, xs, vs)


# ------------------------------------------------------------------------------- Part B: Hutchinson's diagonal

def _probe_cases(seed: int | None) -> list[tuple[int, int]]:
    """(count, n): the corners (one probe of one entry, one probe, one entry), two drawn shapes, and a large draw
    whose statistics show fair, independent signs."""
    gen = generator("10/probes/public", 0) if seed is None else generator("10/probes", seed)
    drawn = [(3, 5), (6, 4)] if seed is None else [(randint(gen, 2, 8), randint(gen, 3, 8)) for _ in range(2)]
    return [(1, 1), (1, 6), (5, 1), *drawn, (2000, 5)]


def _draw_probes(rademacher_probes, count: int, n: int, gen: torch.Generator, global_seed: int, what: str):
    __tracebackhide__ = True
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)
        return call_learner(rademacher_probes, count, n, gen, what=what)


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
        seen = sorted({float(v) for v in values.reshape(-1)[:2000].tolist()})
        listing = ", ".join(fmt(v) for v in seen[:5]) + (", ..." if len(seen) > 5 else "")
        kind = f"the values {listing}; a probe's entries are −1 and +1 only"
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
    gen = torch.Generator().manual_seed(gen_seed)
    before = gen.get_state()
    z = _signs(_draw_probes(rademacher_probes, count, n, gen, 1, what), count, n, what)
    advanced = not torch.equal(gen.get_state(), before)
    again = _signs(_draw_probes(rademacher_probes, count, n, torch.Generator().manual_seed(gen_seed), 2, what),
                   count, n, what)
    if not torch.equal(z, again):
        raise _proven(f"{what} returned different probes for two generators in the same state (the global random "
                      "state was different).", NOT_FROM_GENERATOR)
    if not advanced:
        raise _proven(f"{what} returned probes, but the generator it was given is still in the state it came in: "
                      "nothing was drawn from it, so the next call would return the same probes.",
                      NOT_FROM_GENERATOR)
    if count * n >= 24:  # two fair draws agree with probability 2**-24: only a fixed draw does
        other = _signs(_draw_probes(rademacher_probes, count, n, torch.Generator().manual_seed(gen_seed + 1), 1,
                                    what), count, n, what)
        if torch.equal(z, other):
            raise _proven(f"{what} returned the same probes for two generators seeded differently.",
                          NOT_FROM_GENERATOR)
        following = _signs(_draw_probes(rademacher_probes, count, n, gen, 1, what), count, n, what)
        if torch.equal(z, following):
            raise _proven(f"{what} returned the same probes on two calls in a row with one generator (it should "
                          "have moved on).", NOT_FROM_GENERATOR)
    if count >= 1000:
        _fairness(z, what)


@check
def check_rademacher_probes(rademacher_probes, seed: int | None = None) -> None:
    """Part B: rademacher_probes(count, n, generator) draws a (count, n) float64 tensor of independent fair signs ±1.

    Domain: integers count >= 1 and n >= 1 (count = 0 is outside the part), a torch.Generator. Corners at every
    seed: (1, 1), (1, 6), (5, 1); a draw of 2000 x 5 for the statistics. Contract: exactly the shape (count, n),
    float64, every entry -1 or +1; drawn from ``generator`` itself: it advances (its state after the call differs;
    two calls in a row give two draws), the same state gives the same probes whatever the global random state, two
    seeds give two draws; fair and independent (share of +1, column means, neighbours' agreement, within 6 to 10
    standard errors).
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
    passes show); a linear f (H = 0: zeros). Then three drawn functions, 4 to 7 elements, 2 to 5 probes (never as
    many probes as elements)."""
    fixed = torch.Generator().manual_seed(10)
    corners = [
        ("sum(tanh(x))**2", _vector([0.3, -0.8, 1.1]), _all_signs(3)),
        ("sum(x**4)/4 + sum(x[:-1] * x[1:])", _vector([0.5, -1.0, 1.2, 0.0, -0.4]), _random_signs(fixed, 1, 5)),
        (SEPARABLE, _vector([-1.3, 0.2, 0.9, -0.1]), _random_signs(fixed, 2, 4)),
        ("log(1 + sum(x**2))", _vector([0.6]), _vector([[1.0], [-1.0], [1.0]])),
        ("sum(exp(x / 2)) * sum(sin(x))", uniform(fixed, (8,), -1.5, 1.5), _random_signs(fixed, 2, 8)),
        (LINEAR_1D, _vector([0.4, -0.9, 1.3]), _random_signs(fixed, 2, 3)),
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
        raise _not_required(failure, routes, constant=name == LINEAR_1D) from None
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

    Domain: ``f`` a smooth scalar function of a 1-D float64 ``x`` of n >= 1 elements, possibly linear (H = 0);
    ``probes`` a (k, n) float64 tensor of ±1, k >= 1. Corners at every seed: all 2^n sign vectors (the estimate
    equals diag(H) exactly), k = 1, a diagonal Hessian, n = 1, k = 2 for n = 8, a linear f (zeros). Contract: H·z by
    double backward (at most two passes per probe; the full Hessian named when its n + 1 passes show); f evaluated
    at x only; no torch.func; x and probes unchanged; a float64 tensor of x's shape without a graph; zeros for a
    linear f.
    """
    __tracebackhide__ = True
    for name, x, probes in _diagonal_cases(seed):
        with trial():
            _run_diagonal(hessian_diagonal, name, x, probes)


# ------------------------------------------------------------------------ Part C: the WGAN-GP gradient penalty

def make_critic(gen: torch.Generator, features: int, hidden: int, activation: str = "tanh") -> nn.Sequential:
    """A float64 critic Linear(features, hidden) → Tanh or ReLU → Linear(hidden, 1), weights uniform in [-1, 1)."""
    critic = nn.Sequential(nn.Linear(features, hidden, dtype=torch.float64),
                           nn.Tanh() if activation == "tanh" else nn.ReLU(),
                           nn.Linear(hidden, 1, dtype=torch.float64))
    with torch.no_grad():
        for param in critic.parameters():
            param.copy_(uniform(gen, tuple(param.shape), -1.0, 1.0))
    return critic


def _wgan_penalty(critic: nn.Module, params: dict, real: Tensor, fake: Tensor, alpha: Tensor, weight: float, *,
                  mix: str = "rows", at: str = "between", norm: str = "rows", form: str = "wgan",
                  reduce: str = "mean", weight_inside: bool = False) -> Tensor:
    """The penalty with the critic's parameters ``params`` (a graph reaches them); the keywords make the mistakes.

    mix: alpha along the rows (right) or the features; at: between (right), swapped, real; norm: rows (right),
    columns, batch; form: wgan (right), r1, squares; reduce: mean (right) or sum; weight_inside: (weight·(‖g‖−1))²."""
    a = alpha[:, None] if mix == "rows" else alpha[None, :]
    points = {"between": a * real + (1 - a) * fake, "swapped": a * fake + (1 - a) * real, "real": real}[at]
    with torch.enable_grad():
        points = points.detach().requires_grad_(True)
        scores = torch.func.functional_call(critic, params, (points,))
        (g,) = torch.autograd.grad(scores.sum(), points, create_graph=True)
    norms = {"rows": lambda: torch.linalg.vector_norm(g, dim=1), "columns": lambda: torch.linalg.vector_norm(g, dim=0),
             "batch": lambda: torch.linalg.vector_norm(g).reshape(1)}[norm]()
    if weight_inside:
        return ((weight * (norms - 1)) ** 2).mean()
    terms = {"wgan": (norms - 1) ** 2, "r1": norms**2, "squares": (norms**2 - 1) ** 2}[form]
    return weight * (terms.mean() if reduce == "mean" else terms.sum())


def _relu_zero_row(gen: torch.Generator) -> tuple[nn.Sequential, Tensor, Tensor, Tensor]:
    """A ReLU critic and a batch of three whose first interpolate switches every hidden unit off (the critic's
    gradient there is exactly 0: the norm's kink), the other rows with some units on; no pre-activation within 0.05
    of 0 anywhere, so that central differences of the parameters stay on one side of every kink."""
    while True:
        critic = make_critic(gen, 3, 4, "relu")
        real, fake = uniform(gen, (3, 3), -1.5, 1.5), uniform(gen, (3, 3), -1.5, 1.5)
        fake[0] = real[0]  # the first interpolate is real[0] whatever alpha_0
        alpha = torch.tensor([0.5, 0.25, 0.8], dtype=torch.float64)
        with torch.no_grad():
            critic[0].bias.copy_(-(critic[0].weight @ real[0]) - uniform(gen, (4,), 0.3, 1.0))
            points = alpha[:, None] * real + (1 - alpha[:, None]) * fake
            pre = critic[0](points)
        if bool((pre[1:] > 0.05).any(dim=1).all()) and float(pre.abs().min()) > 0.05:
            return critic, real, fake, alpha


def _penalty_cases(seed: int | None):
    """(critic, real, fake, alpha, weight, description). The corners (every seed): weight 0; a batch of one; B = D
    (alpha broadcast along the features runs and is silently wrong); a ReLU critic whose gradient at one interpolate
    is exactly 0 (the kink of the norm); alpha with 0 and 1 (the interpolates are the fake and the real examples);
    an int weight. Then a Tanh and a ReLU critic at drawn sizes (public: fixed ones)."""
    fixed = torch.Generator().manual_seed(1012)
    cases = []

    def add(critic, real, fake, alpha, weight):
        cases.append((critic, real, fake, alpha, weight))

    add(make_critic(fixed, 3, 5), uniform(fixed, (4, 3)), uniform(fixed, (4, 3)), uniform(fixed, (4,), 0.0, 1.0), 0.0)
    add(make_critic(fixed, 4, 3), uniform(fixed, (1, 4)), uniform(fixed, (1, 4)), _vector([0.3]), 10.0)
    add(make_critic(fixed, 3, 4), uniform(fixed, (3, 3)), uniform(fixed, (3, 3)), _vector([0.1, 0.6, 0.9]), 2.5)
    critic, real, fake, alpha = _relu_zero_row(fixed)
    add(critic, real, fake, alpha, 1.0)
    add(make_critic(fixed, 2, 4), uniform(fixed, (3, 2)), uniform(fixed, (3, 2)), _vector([0.0, 1.0, 0.5]), 0.5)
    add(make_critic(fixed, 5, 3), uniform(fixed, (2, 5)), uniform(fixed, (2, 5)), _vector([0.7, 0.2]), 3)
    gen = generator("10/penalty/public", 0) if seed is None else generator("10/penalty", seed)
    for activation in ("tanh", "relu"):
        b, d, h = (5, 3, 4) if seed is None else (randint(gen, 2, 6), randint(gen, 2, 5), randint(gen, 3, 6))
        weight = 10.0 if seed is None else round(float(uniform(gen, (), 0.5, 12.0)), 2)
        add(make_critic(gen, d, h, activation), uniform(gen, (b, d)), uniform(gen, (b, d)),
            uniform(gen, (b,), 0.0, 1.0), weight)
    return cases


def _critic_name(critic: nn.Module) -> str:
    first, act, last = critic
    return f"a critic {first.in_features} → {type(act).__name__} {first.out_features} → 1"


def _run_penalty(gradient_penalty, critic, real, fake, alpha, weight) -> None:
    __tracebackhide__ = True
    b, d = real.shape
    what = (f"gradient_penalty(critic, real, fake, alpha, weight={weight!r}) for {_critic_name(critic)}, "
            f"a batch of {b} × {d}, alpha = {fmt(alpha)}")
    names = [name for name, _ in critic.named_parameters()]
    params = [p for _, p in critic.named_parameters()]
    routes = Routes()
    try:
        answer = call_learner(gradient_penalty, critic, real, fake, alpha, weight, what=what, routes=routes)
    except GradingFailure as failure:  # alpha * real with alpha of shape (B,) against (B, D), B ≠ D
        clash = any(f"tensor a ({m}) must match the size of tensor b ({n})" in failure.message
                    for m, n in ((b, d), (d, b)))
        raise GradingFailure(failure.message, suspects=(ALPHA_ON_FEATURES,) if clash and b != d else (),
                             proven=failure.proven) from None
    if routes.backward_runs > 1:
        raise GradingFailure(f"{what} ran {routes.backward_runs} backward passes; one is enough for the whole batch "
                             "(the rows do not interact, so the gradient of the summed scores holds every row's own "
                             "gradient).")
    if not isinstance(answer, Tensor):
        raise _proven(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a 0-d tensor.",
                      PENALTY_AS_NUMBER)
    if type(answer) is not Tensor:
        raise GradingFailure(f"{what} returned a {type(answer).__name__}; expected a plain torch.Tensor.")
    if answer.dim() != 0:
        raise GradingFailure(f"{what} returned a tensor of shape {tuple(answer.shape)}; expected a 0-d tensor (shape "
                             "()), the one number a penalty is.")
    if answer.grad_fn is None:
        raise _proven(f"{what} returned a tensor without a graph (requires_grad={answer.requires_grad}): training "
                      "the critic on it would not change the critic.", NO_GRAPH)
    values = {name: p.detach() for name, p in critic.named_parameters()}

    def penalty(**kwargs) -> float:
        return float(_wgan_penalty(critic, values, real, fake, alpha, weight, **kwargs).detach())

    value_symptoms = [R1_FORM.looks_like(penalty(form="r1")),
                      SQUARED_NORM_MINUS_ONE.looks_like(penalty(form="squares")),
                      ONE_NORM_FOR_BATCH.looks_like(penalty(norm="batch")),
                      NORM_OVER_BATCH_AXIS.looks_like(penalty(norm="columns")),
                      PENALTY_SUMMED.looks_like(penalty(reduce="sum")),
                      WEIGHT_SQUARED.looks_like(penalty(weight_inside=True)),
                      SWAPPED_MIX.looks_like(penalty(at="swapped")), PENALTY_AT_REAL.looks_like(penalty(at="real"))]
    if b == d:
        value_symptoms.append(ALPHA_ON_FEATURES.looks_like(penalty(mix="features")))
    expect_close(answer.detach(), penalty(), what=f"{what}: the value", source="expected", rtol=1e-5, atol=1e-9,
                 symptoms=value_symptoms)
    grads = torch.autograd.grad(answer, params, allow_unused=True)
    if all(g is None for g in grads):
        raise _proven(f"{what}: the penalty has a graph, but it reaches none of the critic's parameters.",
                      PARAMS_DETACHED)
    # The last layer's bias shifts every score alike and never enters the input gradient: None there means 0.
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]

    def of_params(*ps: Tensor) -> Tensor:
        return _wgan_penalty(critic, dict(zip(names, ps)), real, fake, alpha, weight)

    expected = autograd_gradient(of_params, *values.values())
    fd = central_difference(lambda *ps: of_params(*ps).detach(), *values.values())
    for name, got, want, diff in zip(names, grads, expected, fd):
        if not bool(torch.isfinite(got).all()):
            with torch.no_grad():
                inputs = alpha[:, None] * real + (1 - alpha[:, None]) * fake
                rows = torch.func.vmap(torch.func.grad(lambda p: critic(p[None]).sum()))(inputs)
            zero = [i for i, row in enumerate(rows) if not bool(row.any())]
            if zero:
                raise _proven(f"{what}: the gradient of your penalty with respect to the critic's {name} holds "
                              f"{fmt(got)}; at row {zero[0]} the critic's gradient is exactly 0.", NAN_AT_ZERO_NORM)
        expect_close(got, want, what=f"{what}: its gradient with respect to the critic's {name}", fd=diff,
                     rtol=1e-5, atol=1e-8)


@check
def check_gradient_penalty(gradient_penalty, seed: int | None = None) -> None:
    """Part C: gradient_penalty(critic, real, fake, alpha, weight) = weight · mean_i (‖∇_x̂ critic(x̂)_i‖ − 1)² at
    x̂_i = alpha_i real_i + (1 − alpha_i) fake_i (WGAN-GP), as a 0-d tensor that trains the critic.

    Domain: ``critic`` a float64 MLP D → Tanh or ReLU → 1 (rows independent, scores of shape (B, 1)); ``real`` and
    ``fake`` (B, D) float64 without requires_grad, B >= 1, D >= 2; ``alpha`` (B,) in [0, 1] (0 and 1 included);
    ``weight`` a number >= 0 (float or int, 0 included). Corners at every seed: weight 0, B = 1, B = D, a ReLU critic
    with an interpolate where its gradient is exactly 0, alpha 0 and 1, an int weight.
    Contract: at most one backward pass (the whole batch at once); a plain 0-d tensor with a graph; its value; its
    gradient with respect to every critic parameter (autograd and central differences of the penalty), finite where
    a row's gradient is 0 (the norm's subgradient 0 there); critic (parameters, their .grad), real, fake, alpha
    unchanged.
    """
    __tracebackhide__ = True
    for critic, real, fake, alpha, weight in _penalty_cases(seed):
        with trial():
            _run_penalty(gradient_penalty, critic, real, fake, alpha, weight)


# --------------------------------------------------------------- Part D: per-example clipping (the DP-SGD step)

def _per_example_gradients(model: nn.Module, inputs: Tensor, targets: Tensor) -> dict[str, Tensor]:
    """The oracle: one backward pass per example (the loop the part replaces); {name: (N, *shape)}."""
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    rows = []
    for x, y in zip(inputs, targets):
        out = torch.func.functional_call(model, dict(zip(names, params)), (x[None],))
        rows.append(torch.autograd.grad(F.cross_entropy(out, y[None]), params))
    return {name: torch.stack([row[k] for row in rows]) for k, name in enumerate(names)}


def _norms(grads: dict[str, Tensor], keep: Callable[[str], bool] = lambda name: True) -> Tensor:
    """(N,) global norms over the kept parameters."""
    return torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for name, g in grads.items() if keep(name)))


def _scaled_mean(grads: dict[str, Tensor], factors: Tensor, *, total: bool = False) -> dict[str, Tensor]:
    out = {name: (g * factors.reshape(-1, *[1] * (g.dim() - 1))) for name, g in grads.items()}
    return {name: g.sum(0) if total else g.mean(0) for name, g in out.items()}


def clipped_mean(grads: dict[str, Tensor], max_norm: float) -> dict[str, Tensor]:
    """The mean over the examples of g_i · min(1, C / ‖g_i‖) (‖g_i‖ over every parameter)."""
    return _scaled_mean(grads, torch.clamp(max_norm / _norms(grads), max=1.0))


def _clipping_symptoms(grads: dict[str, Tensor], max_norm: float) -> dict[str, list]:
    """{parameter name: the symptoms of that entry}."""
    n = next(iter(grads.values())).shape[0]
    norms = _norms(grads)
    mean = {name: g.mean(0) for name, g in grads.items()}
    mean_norm = _norms({name: g[None] for name, g in mean.items()})
    small = {name: g / n for name, g in grads.items()}
    values = {
        NOT_CLIPPED: mean,
        CLIPPED_THE_MEAN: {name: g * min(1.0, max_norm / float(mean_norm)) for name, g in mean.items()},
        CLIPPED_EACH_TENSOR: {name: (g * torch.clamp(max_norm / _norms({name: g}), max=1.0).reshape(
            -1, *[1] * (g.dim() - 1))).mean(0) for name, g in grads.items()},
        NORMALISED_EVERY_EXAMPLE: _scaled_mean(grads, max_norm / norms),
        CLIP_FACTOR_SWAPPED: _scaled_mean(grads, torch.clamp(max_norm / norms, min=1.0)),
        CLIPPED_SUM: _scaled_mean(grads, torch.clamp(max_norm / norms, max=1.0), total=True),
        DIVIDED_BY_BATCH: clipped_mean(small, max_norm),
        NORM_WITHOUT_ROOT: _scaled_mean(grads, torch.clamp(max_norm / norms**2, max=1.0)),
        NORM_AS_SUM_OF_NORMS: _scaled_mean(grads, torch.clamp(
            max_norm / sum(g.flatten(1).norm(dim=1) for g in grads.values()), max=1.0)),
        NORM_WITHOUT_BIASES: _scaled_mean(grads, torch.clamp(
            max_norm / _norms(grads, lambda name: not name.endswith("bias")), max=1.0)),
    }
    return {name: [mistake.looks_like(value[name]) for mistake, value in values.items()] for name in grads}


def _clipping_cases(seed: int | None):
    """(model, inputs, targets, sizes, where): ``where`` puts C above every example's norm ("none": nothing is
    clipped), below every one ("all"), between them ("some"), or between the smallest norm and the norm of the mean
    gradient ("aligned"). The corners (every seed): a batch of one (clipped); a model of one Linear layer (no hidden
    layer); a batch whose two first examples are equal; C above every norm; C below every norm; two batches of one
    example three times and a fourth with a shorter gradient, C between the two norms and below the mean gradient's
    norm (only there do no clipping, clipping the mean and a swapped min/max all give different numbers). Then drawn
    MLPs D → H → C (Tanh) and batches with C between the norms (public: fixed shapes)."""
    fixed = torch.Generator().manual_seed(1010)
    model = random_mlp(fixed, (3, 5, 2))
    yield model, uniform(fixed, (1, 3)), torch.tensor([1]), "all"
    model = random_mlp(fixed, (4, 3))
    yield model, uniform(fixed, (3, 4)), torch.tensor([0, 2, 1]), "some"
    model = random_mlp(fixed, (2, 4, 3))
    x = uniform(fixed, (1, 2))
    yield model, torch.cat([x, x, uniform(fixed, (2, 2))]), torch.tensor([2, 2, 0, 1]), "some"
    model = random_mlp(fixed, (3, 4, 2))
    yield model, uniform(fixed, (4, 3)), torch.tensor([0, 1, 1, 0]), "none"
    model = random_mlp(fixed, (2, 3, 3))
    yield model, uniform(fixed, (3, 2)), torch.tensor([2, 0, 1]), "all"
    for start, sizes in ((1016, (3, 4, 2)), (1018, (4, 3))):  # start: a stream where the fourth norm is the shorter
        aligned = torch.Generator().manual_seed(start)
        model = random_mlp(aligned, sizes)
        x, other = uniform(aligned, (1, sizes[0])), uniform(aligned, (1, sizes[0]))
        yield model, torch.cat([x, x, x, other]), torch.tensor([0, 0, 0, 1]), "aligned"
    gen = generator("10/clipping/public", 0) if seed is None else generator("10/clipping", seed)
    shapes = [(5, (3, 4, 3)), (4, (2, 5, 4))] if seed is None else \
        [(randint(gen, 3, 7), (randint(gen, 2, 5), randint(gen, 3, 6), randint(gen, 2, 4))) for _ in range(2)]
    for n, sizes in shapes:
        model = random_mlp(gen, sizes)
        yield model, uniform(gen, (n, sizes[0])), torch.randint(sizes[-1], (n,), generator=gen), "some"


def _threshold(norms: Tensor, where: str, mean_norm: float) -> float:
    """A round C (3 significant digits) above, below or between the norms (or between the smallest and the mean
    gradient's norm ``mean_norm``), at least 5 % away from every one."""
    ordered = sorted(float(v) for v in norms)
    if where == "aligned":
        if not ordered[0] * 1.25 < mean_norm < ordered[-1]:
            raise CourseBug(f"an aligned clipping case has norms {ordered} and a mean gradient of norm {mean_norm}.")
        target = (ordered[0] * mean_norm) ** 0.5
    elif where == "none":
        target = 1.5 * ordered[-1]
    elif where == "all":
        target = 0.5 * ordered[0]
    else:
        gaps = [(b / a, (a * b) ** 0.5) for a, b in zip(ordered, ordered[1:]) if b > 1.12 * a]
        target = max(gaps)[1] if gaps else 1.5 * ordered[-1]
    c = float(f"{target:.3g}")
    if any(abs(c - v) < 0.05 * v for v in ordered):  # rounding landed too close to a norm: keep the exact target
        c = target
    return c


def _model_name(model: nn.Module) -> str:
    linears = [m for m in model if isinstance(m, nn.Linear)]
    return "→".join(str(s) for s in [linears[0].in_features] + [m.out_features for m in linears])


def _run_clipping(clipped_mean_gradient, model, inputs, targets, where: str) -> None:
    __tracebackhide__ = True
    grads = _per_example_gradients(model, inputs, targets)
    norms = _norms(grads)
    max_norm = _threshold(norms, where, float(_norms({name: g.mean(0)[None] for name, g in grads.items()})))
    what = (f"clipped_mean_gradient(model, inputs, targets, max_norm={max_norm!r}) for an MLP {_model_name(model)} "
            f"and a batch of {len(inputs)} (the examples' gradient norms: {fmt(norms, 4)})")
    routes = Routes()
    answer = call_learner(clipped_mean_gradient, model, inputs, targets, max_norm, what=what, routes=routes)
    if routes.backward_runs > 1:
        raise _proven(f"{what} ran {routes.backward_runs} backward passes for {len(inputs)} examples.", LOOPED)
    names = list(grads)
    if type(answer) not in (dict, OrderedDict):
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict {{name: tensor}} with the "
                             f"names of model.named_parameters(): {', '.join(names)}.")
    if sorted(map(str, answer)) != sorted(names):
        raise GradingFailure(f"{what} returned the keys {', '.join(map(str, answer))}; expected {', '.join(names)}, "
                             "the names of model.named_parameters().")
    expected = clipped_mean(grads, max_norm)
    symptoms = _clipping_symptoms(grads, max_norm)
    # A mean of per-example terms can cancel down to tiny entries: the tolerance follows the terms' scale, so that a
    # factor computed as C / (‖g‖ + 1e-6), as DP libraries do, passes.
    scale = max(float(g.abs().max()) for g in grads.values())
    for name in names:
        got = answer[name]
        if not isinstance(got, Tensor) or type(got) not in (Tensor, nn.Parameter):
            raise GradingFailure(f"{what}: entry {name!r} is {type(got).__name__}; expected a tensor of shape "
                                 f"{tuple(expected[name].shape)}.")
        if tuple(got.shape) != tuple(expected[name].shape):
            raise GradingFailure(f"{what}: entry {name!r} has shape {tuple(got.shape)}; expected "
                                 f"{tuple(expected[name].shape)}, the shape of that parameter.")
        expect_close(got.detach(), expected[name], what=f"{what}: entry {name!r}", source="a loop", rtol=1e-5,
                     atol=1e-6 * scale, symptoms=symptoms[name])


@check
def check_clipped_mean_gradient(clipped_mean_gradient, seed: int | None = None) -> None:
    """Part D: clipped_mean_gradient(model, inputs, targets, max_norm) is the DP-SGD gradient without its noise: the
    mean over the examples of g_i · min(1, C / ‖g_i‖), g_i the gradient of example i's own loss, ‖g_i‖ its global norm
    over every parameter.

    Domain: ``model`` a float64 MLP (Linear layers, Tanh between them, one layer or more); ``inputs`` (N, D) float64,
    N >= 1; ``targets`` (N,) int64 in [0, C); ``max_norm`` a float > 0. Corners at every seed: N = 1, a single Linear
    layer, two equal examples, C above every example's norm (nothing clipped: the batch-mean gradient), C below every
    norm (all clipped), C between the norms and below the mean gradient's norm (one example three times and a
    shorter one, twice); otherwise C lies between the norms, 5 % or more away from each. Contract: a dict with exactly
    the names of model.named_parameters(), each a tensor of that parameter's shape (a graph on it is allowed, the
    test reads values); one backward pass for the whole batch (torch.func: a vmapped grad counts one engine run); the
    model (its parameters and their .grad) and the batch unchanged.
    """
    __tracebackhide__ = True
    for model, inputs, targets, where in _clipping_cases(seed):
        with trial():
            _run_clipping(clipped_mean_gradient, model, inputs, targets, where)


# ----------------------------------------------------------------------------- Part E: checkpointing in groups

def make_blocks(gen: torch.Generator, count: int, width: int, hidden: int, dropout: float = 0.2) -> nn.ModuleList:
    """``count`` residual-free blocks Linear → Tanh → Dropout → Linear (float64, training mode)."""
    blocks = nn.ModuleList()
    for _ in range(count):
        mlp = random_mlp(gen, (width, hidden, width))
        blocks.append(nn.Sequential(mlp[0], mlp[1], nn.Dropout(dropout), mlp[2]))
    return blocks.train()


def _groups(count: int, k: int) -> list[list[int]]:
    """The blocks of each checkpoint: consecutive groups of k from the first, the last one holding the rest."""
    return [list(range(start, min(start + k, count))) for start in range(0, count, k)]


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


def _tensor_names(blocks: nn.ModuleList) -> list[str]:
    """'x', then every parameter as a learner would index it: 'blocks[1][0].weight'."""
    names = ["x"]
    for name, _ in blocks.named_parameters():
        *path, attribute = name.split(".")
        names.append("blocks" + "".join(f"[{p}]" for p in path) + f".{attribute}")
    return names


def _gradients_after(blocks: nn.ModuleList, x: Tensor, out: Tensor, weights: Tensor) -> list[Tensor | None]:
    """The gradients of x and of every parameter after (out * weights).sum().backward(). backward(), not
    torch.autograd.grad, since a reentrant checkpoint (use_reentrant=True, a correct answer) supports only backward();
    the parameters' .grad are put back to None (also when backward fails)."""
    params = list(blocks.parameters())
    try:
        (out * weights).sum().backward()
        return [None if t.grad is None else t.grad.detach().clone() for t in [x, *params]]
    finally:
        for param in params:
            param.grad = None


def _reference(blocks: nn.ModuleList, x: Tensor, weights: Tensor, seed: int, *, k: int | None, rng: bool = True):
    """Plain forward (k None) or checkpoints of k blocks with preserve_rng_state=rng: (bytes, out, gradients)."""
    leaf = x.detach().clone().requires_grad_(True)

    def run():
        h = leaf
        if k is None:
            for block in blocks:
                h = block(h)
            return h
        for group in _groups(len(blocks), k):
            h = checkpoint(nn.Sequential(*[blocks[i] for i in group]), h, use_reentrant=False, preserve_rng_state=rng)
        return h

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        saved, out = _saved_storages(run)
        grads = _gradients_after(blocks, leaf, out, weights)
    return sum(saved.values()), out.detach(), grads


def _blocks(indices: list[int]) -> str:
    """Blocks by their 1-based numbers: 'block 2', 'blocks 1 and 3', 'blocks 1–3'."""
    numbers = [i + 1 for i in indices]
    if len(numbers) == 1:
        return f"block {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
        return f"blocks {numbers[0]}–{numbers[-1]}"
    return "blocks " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


def _describe(groups: list[list[int]]) -> str:
    return "; ".join(_blocks(group) for group in groups)


def _made(starts: list[int], count: int) -> list[list[int]]:
    """The checkpoints an answer made, from the blocks whose inputs the graph saved."""
    bounds = [*starts, count]
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


def _late_binding(reruns: list[int], groups: list[list[int]]) -> bool:
    """Every checkpoint reran the last group: only its blocks ran again in backward, some more than once."""
    last = set(groups[-1])
    return len(groups) > 1 and max(reruns) > 1 and all(r == 0 for i, r in enumerate(reruns) if i not in last)


def _run_checkpoint(checkpointed_forward, blocks: nn.ModuleList, x0: Tensor, k: int, weights: Tensor,
                    seed: int) -> None:
    __tracebackhide__ = True
    count, width = len(blocks), x0.shape[1]
    groups = _groups(count, k)
    what = (f"checkpointed_forward(blocks, x, k={k}) for {count} block{'s' * (count > 1)} of width {width} and x of "
            f"shape {tuple(x0.shape)}")
    asked = f"k = {k} asks for {len(groups)} checkpoint{'s' * (len(groups) > 1)}: {_describe(groups)}"
    plain_bytes, plain_out, plain_grads = _reference(blocks, x0, weights, seed, k=None)
    x = x0.clone().requires_grad_(True)
    modes = [m.training for m in blocks.modules()]
    runs = _BlockRuns(blocks)
    failed = None
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            routes = Routes()
            saved, out = _saved_storages(lambda: call_learner(checkpointed_forward, blocks, x, k, what=what,
                                                              routes=routes))
            forward_runs = list(runs.runs)
            if routes.backward_runs:
                raise GradingFailure(f"{what} ran {routes.backward_runs} backward pass(es) itself; the part asks for "
                                     "the forward pass only (the test runs backward on your output).")
            if [m.training for m in blocks.modules()] != modes:
                blocks.train()
                raise _proven(f"{what} changed the blocks' training mode.", SWITCHED_MODE)
            if not isinstance(out, Tensor) or type(out) is not Tensor or out.grad_fn is None:
                raise GradingFailure(f"{what} returned {type(out).__name__} without a graph: backward could not reach "
                                     "the parameters.")
            expect_close(out.detach(), plain_out, what=f"{what}: the output", source="a plain forward", rtol=1e-10,
                         atol=1e-12)
            try:
                grads = _gradients_after(blocks, x, out, weights)
            except RuntimeError as error:
                failed = str(error).splitlines()[0]
            reruns = [after - before for before, after in zip(forward_runs, runs.runs)]
    finally:
        runs.remove()
    if _late_binding(reruns, groups):
        ran = [f"{_blocks([i])} ran {r} times" for i, r in enumerate(reruns) if r]
        raise _proven(f"{what}: during backward {', '.join(ran)}, and the other blocks never: every checkpoint "
                      f"reran the last group ({asked}).", LATE_BINDING)
    if failed is not None:
        raise GradingFailure(f"{what}: backward through your output failed: {failed}")
    if grads[0] is None:
        raise _proven(f"{what}: after backward, x.grad is None: x got no gradient, so your output does not depend on "
                      "the x you were given.", DETACHED_INPUT)
    wrong_rng = _reference(blocks, x0, weights, seed, k=k, rng=False)[2]
    for name, got, want, other in zip(_tensor_names(blocks), grads, plain_grads, wrong_rng):
        if got is None:
            raise GradingFailure(f"{what}: after backward, {name}.grad is None: that parameter got no gradient.")
        expect_close(got, want, what=f"{what}: the gradient of {name}", source="a plain forward", rtol=1e-8,
                     atol=1e-12, symptoms=[RNG_NOT_PRESERVED.looks_like(other)])
    if forward_runs != [1] * count:
        raise GradingFailure(f"{what} ran the blocks {forward_runs} times in the forward pass; each runs once.")
    plain = [i for i, rerun in enumerate(reruns) if rerun == 0]
    inputs_bytes = len(groups) * x0.numel() * x0.element_size()
    total = sum(saved.values())
    if len(plain) == count:
        raise _proven(f"{what}: no block ran again during backward, and the graph saved {total} bytes, as a plain "
                      f"forward does ({plain_bytes}); {asked}, which save only their inputs, {inputs_bytes} bytes.",
                      NOT_CHECKPOINTED)
    if plain:
        raise _proven(f"{what}: {_blocks(plain)} did not run again during backward: "
                      f"{'it was' if len(plain) == 1 else 'they were'} not checkpointed ({asked}).",
                      OUTSIDE_CHECKPOINT)
    if max(reruns) > 1:
        raise GradingFailure(f"{what}: during backward the blocks ran {reruns} times; in one checkpoint per group "
                             "each block runs once more.")
    made = _made(runs.saved(saved), count) if runs.saved(saved)[:1] == [0] else None
    if made is not None and made != groups:
        raise _proven(f"{what}: the graph saved the inputs of {_blocks([g[0] for g in made])}, so your checkpoints "
                      f"held {_describe(made)}; {asked}.", GROUPS_NOT_K)
    if total > inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {total} bytes; one checkpoint per group of k blocks saves "
                             f"only the groups' inputs, {inputs_bytes} (a plain forward saves {plain_bytes}).")
    if total < inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {total} bytes, less than the inputs of the {len(groups)} "
                             f"groups ({inputs_bytes}) that one checkpoint per group keeps.")


@check
def check_checkpointed_forward(checkpointed_forward, seed: int | None = None) -> None:
    """Part E: checkpointed_forward(blocks, x, k) runs x through the blocks with one checkpoint per group of k
    consecutive blocks (the last group holds the rest).

    Domain: ``blocks`` an nn.ModuleList of count >= 1 float64 blocks Linear → Tanh → Dropout → Linear in training
    mode, all of one width; ``x`` a (B, width) float64 leaf that requires grad, B >= 1; ``k`` an int >= 1, possibly
    larger than count. Corners at every seed: k = 1 with a batch of one, two groups of two (a late-binding closure
    runs and is silently wrong), five blocks by two (a short last group), k = count (one group), k > count, seven
    blocks by three (3, 3, 1: groups balanced as 3, 2, 2 or the short group first show there). Contract:
    the output and, after backward, the gradients of x and every parameter of a plain forward from the same random
    state (dropout included), each named in a failure; every block runs once forward and once more in backward;
    the graph saves each group's input and nothing else (saved-tensor hooks), which shows the groups; the training
    mode, the parameters and x unchanged; no backward pass inside.
    """
    __tracebackhide__ = True
    fixed = [(3, 1, 5, 10, 1), (4, 2, 3, 6, 4), (5, 2, 4, 6, 3), (3, 3, 4, 8, 3), (2, 5, 3, 6, 2), (7, 3, 3, 6, 2)]
    gen = generator("10/checkpoint/public", 0) if seed is None else generator("10/checkpoint", seed)
    drawn = []
    for _ in range(1 if seed is None else 2):
        count = 3 if seed is None else randint(gen, 2, 6)
        k = 2 if seed is None else randint(gen, 1, count)
        drawn.append((count, k, 4 if seed is None else randint(gen, 3, 8), 8 if seed is None else randint(gen, 6, 16),
                      3 if seed is None else randint(gen, 2, 6)))
    corner_gen = torch.Generator().manual_seed(1011)
    for i, (count, k, width, hidden, batch) in enumerate(fixed + drawn):
        source = corner_gen if i < len(fixed) else gen
        blocks = make_blocks(source, count, width, hidden)
        x, weights = uniform(source, (batch, width)), uniform(source, (batch, width))
        with trial():
            _run_checkpoint(checkpointed_forward, blocks, x, k, weights, randint(source, 0, 10**6))
