"""Checks for exercise 10, beyond first order: a Hessian-vector product by double backward, a gradient penalty,
per-example gradient norms with torch.func, activation checkpointing.

Each ``check_*`` function is one test cell's whole body: without ``seed`` it runs the public cases, with
``seed=grading_seed()`` fresh random ones. Every case is a :func:`~autograder.checking.trial`; the functions of
Parts A and B are all enumerated in every run (visible and hidden), so each misconception shows in at least two
cases. Oracles: the full Hessian by autograd, finite differences of gradients (float64) beside it.
"""

from __future__ import annotations

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
from ..seeding import generator, uniform
from .cases import randint, random_mlp
from .shared import SQUARED_NORMS

Tensor = torch.Tensor

# ------------------------------------------------------------------------------------------------ misconceptions

NO_GRAPH = Misconception(
    "first gradient without a graph (create_graph forgotten, or detached)",
    "The second derivative differentiates the first one, so the first torch.autograd.grad call must record its own "
    "graph: pass create_graph=True, and never .detach() (or .item()) the gradient you differentiate again. "
    "Without it the gradient is a constant: the second call fails, or the penalty's own gradient is silently lost.")
FULL_HESSIAN = Misconception(
    "built the full Hessian instead of a Hessian-vector product",
    "H·v needs two reverse passes whatever the size of x: differentiate ⟨∇f(x), v⟩ once more. The full Hessian "
    "costs one backward pass per element of x (and n² memory), which is what the product avoids.")
FINITE_DIFFERENCES = Misconception(
    "finite differences of gradients where the part asks for double backward",
    "(∇f(x + εv) − ∇f(x − εv)) / 2ε is the check, not the method: it carries an O(ε²) error and evaluates f away "
    "from x. Differentiate the first gradient with autograd instead (create_graph=True).")
TORCH_FUNC_HVP = Misconception(
    "used torch.func where the part asks for double backward",
    "Part A is about torch.autograd.grad with create_graph=True (Part C is where torch.func belongs): compute the "
    "gradient with a graph, then differentiate ⟨gradient, v⟩.")
KEPT_GRAPH = Misconception(
    "returned a result that still carries a graph",
    "The product is a number to use, not to differentiate again: the second torch.autograd.grad call needs no "
    "create_graph, or detach() the result, so that the two graphs are freed.")
FORGOT_V = Misconception(
    "differentiated the sum of the gradient instead of its product with v",
    "grad(∇f(x).sum(), x) is H·1, the Hessian times a vector of ones. Differentiate (∇f(x) * v).sum() "
    "(or pass grad_outputs=v).")
RETURNED_GRADIENT = Misconception(
    "returned the first derivative", "That is ∇f(x); the part asks for H·v, the derivative of ⟨∇f(x), v⟩.")
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
ONE_CHECKPOINT = Misconception(
    "one checkpoint around all the blocks",
    "A single checkpoint saves even less in the forward pass, but its backward recomputes every block at once and "
    "holds all their activations together: the peak memory is that of no checkpoint at all. Checkpoint each block "
    "on its own.")
RNG_NOT_PRESERVED = Misconception(
    "checkpoint recomputes with a different random state (dropout)",
    "The recomputation in backward must draw the same dropout mask as the forward pass did; with "
    "preserve_rng_state=False it draws a new one, and the gradients belong to a network that never ran. Keep the "
    "default preserve_rng_state=True.")
SWITCHED_MODE = Misconception(
    "switched the blocks to eval mode",
    "The blocks are in training mode (dropout on) and must stay so: checkpointing must not change what the network "
    "computes. Leave .train()/.eval() alone.")


# ----------------------------------------------------------------------------------------- Parts A and B: f(x)

def _quartic(x: Tensor) -> Tensor:
    return (x**4).sum() / 4 + (x[:-1] * x[1:]).sum()


#: Smooth scalar functions with a full (non-diagonal) Hessian, named as a learner reads them in a failure message.
FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "sum(x**4)/4 + sum(x[:-1] * x[1:])": _quartic,
    "log(1 + sum(x**2))": lambda x: torch.log1p((x**2).sum()),
    "sum(tanh(x))**2": lambda x: torch.tanh(x).sum() ** 2,
    "sum(exp(x / 2)) * sum(sin(x))": lambda x: torch.exp(x / 2).sum() * torch.sin(x).sum(),
}


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


def _cases(part: str, seed: int | None) -> list[tuple[str, Tensor, Tensor]]:
    """Every function of FUNCTIONS, each at its own x and v (public cases from a fixed stream)."""
    gen = generator(f"10/{part}/public", 0) if seed is None else generator(f"10/{part}", seed)
    cases = []
    for name in FUNCTIONS:
        n = 4 if seed is None else randint(gen, 4, 7)  # n >= 4: three passes (autograd.functional.hvp) < n
        cases.append((name, uniform(gen, (n,), -1.5, 1.5), uniform(gen, (n,), -1.0, 1.0)))
    return cases


def _no_graph_suspected(failure: GradingFailure) -> GradingFailure:
    """A learner's error that a missing graph causes, marked as that suspect (named when two cases agree)."""
    if "does not require grad" in failure.message or "does not have a grad_fn" in failure.message:
        return GradingFailure(failure.message, suspects=(NO_GRAPH,))
    return failure


def _run_hvp(hvp, name: str, x: Tensor, v: Tensor) -> None:
    __tracebackhide__ = True
    f = _Watched(FUNCTIONS[name], x)
    what = f"hvp(f, x, v) for f(x) = {name}, x = {fmt(x)}, v = {fmt(v)}"
    routes = Routes()
    try:
        answer = call_learner(hvp, f, x, v, what=what, routes=routes)
    except GradingFailure as failure:
        raise _no_graph_suspected(failure) from None
    if f.transformed or routes.forward_ad:
        raise _proven(f"{what} ran f under a torch.func transform.", TORCH_FUNC_HVP)
    if f.elsewhere:
        raise _proven(f"{what} evaluated f at {f.elsewhere} point(s) other than x.", FINITE_DIFFERENCES)
    if routes.backward_runs >= x.numel():  # one pass per element: the full Hessian (every case has n >= 4)
        raise _proven(f"{what} ran {routes.backward_runs} backward passes for x of {x.numel()} elements; "
                      "two are enough.", FULL_HESSIAN)
    if routes.backward_runs > 2:
        raise GradingFailure(f"{what} ran {routes.backward_runs} backward passes; the part asks for two "
                             "(torch.autograd.grad with create_graph=True, then once more through its result).")
    if isinstance(answer, Tensor) and answer.requires_grad:
        raise _proven(f"{what} returned a tensor with requires_grad=True (grad_fn {type(answer.grad_fn).__name__}).",
                      KEPT_GRAPH)
    hessian = _hessian(FUNCTIONS[name], x)
    expected = hessian @ v
    gradient = _gradient(FUNCTIONS[name], x)
    expect_close(answer, expected, what=what, fd=_gradient_differences(FUNCTIONS[name], x, v), rtol=1e-6,
                 atol=1e-9, extra="  (finite difference here: of gradients, (∇f(x + εv) − ∇f(x − εv)) / 2ε)",
                 symptoms=[NO_GRAPH.looks_like(torch.zeros_like(x)), FORGOT_V.looks_like(hessian.sum(dim=1)),
                           RETURNED_GRADIENT.looks_like(gradient)])


@check
def check_hvp(hvp, seed: int | None = None) -> None:
    """Part A: hvp(f, x, v) = H(x)·v by double backward: two reverse passes, f evaluated at x only, x and v unchanged,
    a tensor shaped like x without a graph."""
    __tracebackhide__ = True
    for name, x, v in _cases("hvp", seed):
        with trial():
            _run_hvp(hvp, name, x, v)


def _penalty_symptoms(f: Callable, x: Tensor, weight: float) -> tuple[list, list]:
    """(symptoms of the value, symptoms of its gradient with respect to x)."""
    g = _gradient(f, x)
    value = float(f(x.detach()))
    value_symptoms = [PENALTY_NOT_SQUARED.looks_like(value + weight * float(g.norm())),
                      PENALTY_MEAN.looks_like(value + weight * float((g**2).mean()))]
    return value_symptoms, [NO_GRAPH.looks_like(g)]


def _run_penalty(penalized_loss, name: str, x0: Tensor, weight: float) -> None:
    __tracebackhide__ = True
    f = FUNCTIONS[name]
    x = x0.clone().requires_grad_(True)  # the caller's leaf: its .grad must stay None
    what = f"penalized_loss(f, x, weight={weight:g}) for f(x) = {name}, x = {fmt(x0)}"
    answer = call_learner(penalized_loss, f, x, weight, what=what)
    if not isinstance(answer, Tensor):
        raise _proven(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a 0-d tensor.", LOSS_AS_NUMBER)
    if answer.grad_fn is None:
        raise _proven(f"{what} returned a tensor without a graph (requires_grad={answer.requires_grad}).",
                      LOSS_AS_NUMBER)
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
    """Part B: penalized_loss(f, x, weight) = f(x) + weight·‖∇f(x)‖² as a tensor whose graph reaches x through both
    terms; x (a leaf) unchanged, its .grad untouched."""
    __tracebackhide__ = True
    gen = generator("10/penalty/public", 0) if seed is None else generator("10/penalty", seed)
    for name, x, _ in _cases("penalty", seed):
        weight = 0.5 if seed is None else round(float(uniform(gen, (), 0.2, 2.0)), 3)
        with trial():
            _run_penalty(penalized_loss, name, x, weight)


# ------------------------------------------------------------------------------ Part C: per-example gradient norms

def _example_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    return F.cross_entropy(model(x[None]), y[None])


def _per_example_gradients(model: nn.Module, inputs: Tensor, targets: Tensor) -> list[dict[str, Tensor]]:
    """The oracle: one backward pass per example (the loop the part replaces)."""
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    grads = []
    for x, y in zip(inputs, targets):
        out = torch.func.functional_call(model, dict(zip(names, params)), (x[None],))
        grads.append(dict(zip(names, torch.autograd.grad(F.cross_entropy(out, y[None]), params))))
    return grads


def _norm_symptoms(model: nn.Module, inputs: Tensor, targets: Tensor, norms: Tensor) -> list:
    grads = _per_example_gradients(model, inputs, targets)
    n = len(inputs)
    mean = {k: sum(g[k] for g in grads) / n for k in grads[0]}
    mean_norm = torch.sqrt(sum((t**2).sum() for t in mean.values()))
    return [MEAN_GRADIENT_NORM.looks_like(mean_norm.expand(n)), DIVIDED_BY_BATCH.looks_like(norms / n),
            SQUARED_NORMS.looks_like(norms**2),
            PER_TENSOR_SUM.looks_like(torch.stack([sum(t.norm() for t in g.values()) for g in grads])),
            WEIGHTS_ONLY.looks_like(torch.stack([torch.sqrt(sum((t**2).sum() for k, t in g.items()
                                                                 if k.endswith("weight"))) for g in grads]))]


def _norm_cases(seed: int | None):
    gen = generator("10/norms/public", 0) if seed is None else generator("10/norms", seed)
    shapes = [(5, (3, 4, 3)), (4, (2, 5, 4))] if seed is None else \
        [(randint(gen, 3, 7), (randint(gen, 2, 5), randint(gen, 3, 6), randint(gen, 2, 4))) for _ in range(3)]
    for n, sizes in shapes:
        model = random_mlp(gen, sizes)
        yield model, uniform(gen, (n, sizes[0])), torch.randint(sizes[-1], (n,), generator=gen), sizes


def _run_norms(per_example_grad_norms, model, inputs, targets, sizes) -> None:
    __tracebackhide__ = True
    what = (f"per_example_grad_norms(model, inputs, targets) for an MLP {sizes[0]}→{sizes[1]}→{sizes[2]} "
            f"(Tanh) and a batch of {len(inputs)}")
    routes = Routes()
    answer = call_learner(per_example_grad_norms, model, inputs, targets, what=what, routes=routes)
    if routes.backward_runs > 1:
        raise _proven(f"{what} ran {routes.backward_runs} backward passes for {len(inputs)} examples.", LOOPED)
    grads = _per_example_gradients(model, inputs, targets)
    expected = torch.stack([torch.sqrt(sum((t**2).sum() for t in g.values())) for g in grads])
    got = as_answer(answer, what=what)
    expect_close(got, expected, what=what, source="a loop", rtol=1e-6, atol=1e-10,
                 symptoms=_norm_symptoms(model, inputs, targets, expected))


@check
def check_per_example_grad_norms(per_example_grad_norms, seed: int | None = None) -> None:
    """Part C: per_example_grad_norms(model, inputs, targets) is the (N,) tensor of ‖∇θ loss_i‖ over all parameters,
    by torch.func (one backward pass for the batch), the model and the batch unchanged."""
    __tracebackhide__ = True
    for model, inputs, targets, sizes in _norm_cases(seed):
        with trial():
            _run_norms(per_example_grad_norms, model, inputs, targets, sizes)


# ----------------------------------------------------------------------------------------- Part D: checkpointing

def make_blocks(gen: torch.Generator, count: int, width: int, hidden: int, dropout: float = 0.2) -> nn.ModuleList:
    """``count`` residual-free blocks Linear → Tanh → Dropout → Linear (float64, training mode)."""
    blocks = nn.ModuleList()
    for _ in range(count):
        mlp = random_mlp(gen, (width, hidden, width))
        blocks.append(nn.Sequential(mlp[0], mlp[1], nn.Dropout(dropout), mlp[2]))
    return blocks.train()


def _saved_bytes(run: Callable):
    """(bytes the forward graph saved, the result of run()), counted with saved-tensor hooks."""
    saved = [0]

    def pack(t):
        saved[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()
    return saved[0], result


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
        saved, out = _saved_bytes(run)
        grads = _gradients_after(blocks, leaf, out, weights)
    return saved, out.detach(), grads


def _flat(grads: list) -> Tensor:
    return torch.cat([torch.zeros(0, dtype=torch.float64) if g is None else g.reshape(-1) for g in grads])


def _run_checkpoint(checkpointed_forward, blocks: nn.ModuleList, x0: Tensor, weights: Tensor, seed: int) -> None:
    __tracebackhide__ = True
    width = x0.shape[1]
    what = f"checkpointed_forward(blocks, x) for {len(blocks)} blocks of width {width} and x of shape {tuple(x0.shape)}"
    plain_bytes, plain_out, plain_grads = _reference(blocks, x0, weights, seed, rng=None)
    x = x0.clone().requires_grad_(True)
    modes = [m.training for m in blocks.modules()]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        saved, out = _saved_bytes(lambda: call_learner(checkpointed_forward, blocks, x, what=what))
        if [m.training for m in blocks.modules()] != modes:
            blocks.train()
            raise _proven(f"{what} changed the blocks' training mode.", SWITCHED_MODE)
        if not isinstance(out, Tensor) or out.grad_fn is None:
            raise GradingFailure(f"{what} returned {type(out).__name__} without a graph: backward could not reach "
                                 "the parameters.")
        expect_close(out.detach(), plain_out, what=f"{what}: the output", source="a plain forward", rtol=1e-10,
                     atol=1e-12)
        grads = _gradients_after(blocks, x, out, weights)
    expect_close(_flat(grads), _flat(plain_grads), what=f"{what}: the gradients of x and of every parameter",
                 source="a plain forward", rtol=1e-8, atol=1e-12,
                 symptoms=[RNG_NOT_PRESERVED.looks_like(_flat(_reference(blocks, x0, weights, seed, rng=False)[2]))])
    inputs_bytes = len(blocks) * x0.numel() * x0.element_size()
    if saved >= plain_bytes:
        raise _proven(f"{what}: the graph saved {saved} bytes, as much as a plain forward ({plain_bytes}); "
                      f"checkpointing each block saves only the block inputs, {inputs_bytes}.", NOT_CHECKPOINTED)
    if saved < inputs_bytes:
        raise _proven(f"{what}: the graph saved {saved} bytes, less than the {len(blocks)} block inputs "
                      f"({inputs_bytes}).", ONE_CHECKPOINT)
    if saved > inputs_bytes:
        raise GradingFailure(f"{what}: the graph saved {saved} bytes; checkpointing each block saves only the block "
                             f"inputs, {inputs_bytes} (a plain forward saves {plain_bytes}).")


@check
def check_checkpointed_forward(checkpointed_forward, seed: int | None = None) -> None:
    """Part D: checkpointed_forward(blocks, x) runs x through the blocks with one checkpoint per block: the same output
    and gradients as a plain forward (dropout included), and a graph that saves only each block's input."""
    __tracebackhide__ = True
    gen = generator("10/checkpoint/public", 0) if seed is None else generator("10/checkpoint", seed)
    sizes = [(3, 6, 12, 5), (2, 4, 8, 3)] if seed is None else \
        [(randint(gen, 2, 4), randint(gen, 3, 8), randint(gen, 6, 16), randint(gen, 2, 6)) for _ in range(3)]
    for count, width, hidden, batch in sizes:
        blocks = make_blocks(gen, count, width, hidden)
        x, weights = uniform(gen, (batch, width)), uniform(gen, (batch, width))
        with trial():
            _run_checkpoint(checkpointed_forward, blocks, x, weights, randint(gen, 0, 10**6))
