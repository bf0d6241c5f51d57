"""Part C of exercise 07: layer_grad_norms(model, loss_fn, x), the norm of the gradient arriving at every nn.Linear's
outputs, collected with hooks that are removed, in one backward pass; the models include one whose Linear runs twice
on paths that join later. Oracles: autograd and central differences of the loss with respect to a zero added to each
of a layer's outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ...checking import GradingFailure, Routes, call_learner, check, expect_close, fmt, proven_failure, trial
from ...contracts import CHANGED_INPUT
from ...oracles import autograd_gradient, central_difference
from ...seeding import choice, generator, uniform
from ..cases import randint
from ..shared import SQUARED_NORMS
from .misconceptions import (
    BACKWARD_CONTRACT,
    GRADS_WIPED,
    HOOKS_LEFT,
    KEPT_BETWEEN_CALLS,
    NORMS_ADDED,
    NOT_A_FLOAT,
    ONE_CALL_KEPT,
    ONE_ENTRY_PER_CALL,
    PER_EXAMPLE_MEAN,
    REVERSED,
    TOP_LEVEL_ONLY,
    WEIGHT_GRADIENTS,
)


def expect_python_float(value: Any, *, what: str) -> float:
    """``value`` as a float, or a proven failure when it is not a plain Python number (a tensor, an array...)."""
    __tracebackhide__ = True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise proven_failure(f"{what} returned {type(value).__name__} ({value!r:.60}); the part asks for a Python "
                             "float.", NOT_A_FLOAT)
    return float(value)

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks")


class ResidualMLP(nn.Module):
    """in -> Linear -> [h + act(Linear(h))] * blocks -> Linear -> out, the lesson's residual network in miniature."""

    def __init__(self, sizes: tuple[int, int, int], blocks: int, activation: type[nn.Module]):
        super().__init__()
        n_in, width, n_out = sizes
        self.embed = nn.Linear(n_in, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(blocks))
        self.act = activation()
        self.head = nn.Linear(width, n_out)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + self.act(block(h))
        return self.head(h)


class SharedBranches(nn.Module):
    """in -> embed -> h; a = act(shared(h)); b = act(shared(a)); out = head(h + a + b): one Linear, ``shared``, runs
    twice (backward delivers a gradient to each of its two outputs), and h feeds three paths that join at the head."""

    def __init__(self, sizes: tuple[int, int, int], activation: type[nn.Module]):
        super().__init__()
        n_in, width, n_out = sizes
        self.embed = nn.Linear(n_in, width)
        self.shared = nn.Linear(width, width)
        self.act = activation()
        self.head = nn.Linear(width, n_out)

    def forward(self, x):
        h = self.embed(x)
        a = self.act(self.shared(h))
        b = self.act(self.shared(a))
        return self.head(h + a + b)


def _plain_mlp(widths: list[int], activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if k < len(widths) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


LOSSES = {"mean(out**2)": lambda out: out.pow(2).mean(), "mean((out - 1)**2)": lambda out: (out - 1).pow(2).mean()}


#: The corners of Part C's domain, run at every seed: (kind, sizes, activation, batch, loss, last layer zeroed?).
#: One Linear and a batch of one; a stack whose last Linear has zero weights, so that the gradient arriving at every
#: earlier layer is exactly 0 (the norms are 0 there, and no mistake may be named on the zeros); a model with one
#: Linear that runs twice, on two paths that join later.
LAYER_CORNERS = [("plain", [3, 2], nn.Tanh, 1, "mean(out**2)", False),
                 ("plain", [2, 4, 3, 2], nn.Sigmoid, 3, "mean((out - 1)**2)", True),
                 ("shared", (2, 3, 1), nn.Tanh, 2, "mean((out - 1)**2)", False)]


def _layer_cases(grading_seed: int | None):
    """(model description, model, loss description, loss_fn, x) for each case; everything float64. The corners
    (:data:`LAYER_CORNERS`) first, at every seed, then the visible or drawn cases."""
    specs = list(LAYER_CORNERS)
    if grading_seed is None:
        init_seed, gen = 0, torch.Generator().manual_seed(7)
        specs += [("plain", [3, 6, 6, 5, 2], nn.Tanh, 4, "mean(out**2)", False),
                  ("residual", (3, 5, 2, 3), nn.Tanh, 4, "mean((out - 1)**2)", False),
                  ("shared", (3, 4, 2), nn.Sigmoid, 3, "mean(out**2)", False)]
    else:
        gen = generator("07/layer_grad_norms", grading_seed)
        init_seed = int(torch.randint(2**31, (), generator=gen))
        for kind in ("plain", "residual", "shared"):
            width = randint(gen, 3, 6)
            if kind == "plain":
                sizes = [randint(gen, 2, 4)] + [width] * randint(gen, 2, 4) + [randint(gen, 1, 3)]
            else:
                sizes = (randint(gen, 2, 4), width, randint(gen, 1, 3))
                sizes += (randint(gen, 2, 3),) if kind == "residual" else ()
            specs.append((kind, sizes, choice(gen, [nn.Tanh, nn.Sigmoid]), randint(gen, 2, 5),
                          choice(gen, list(LOSSES)), False))
    for kind, sizes, activation, batch, loss_name, zero_last in specs:
        with torch.random.fork_rng(devices=[]):  # nn.Linear draws its initial weights from the global generator
            torch.manual_seed(init_seed)
            if kind == "plain":
                model = _plain_mlp(list(sizes), activation).double()
                name = f"Linear layers {list(sizes)} with {activation.__name__} between them"
            elif kind == "shared":
                model = SharedBranches(sizes, activation).double()
                name = (f"SharedBranches: h = Linear({sizes[0]}, {sizes[1]})(x); a = {activation.__name__}(shared(h)), "
                        f"b = {activation.__name__}(shared(a)) with ONE shared Linear({sizes[1]}, {sizes[1]}) run "
                        f"twice; Linear({sizes[1]}, {sizes[2]})(h + a + b)")
            else:
                model = ResidualMLP(sizes[:3], sizes[3], activation).double()
                name = (f"ResidualMLP: Linear({sizes[0]}, {sizes[1]}), {sizes[3]} blocks h + "
                        f"{activation.__name__}(Linear(h)), Linear({sizes[1]}, {sizes[2]})")
        if zero_last:
            with torch.no_grad():
                _linears(model)[-1].weight.zero_()
            name += ", the last Linear's weights all zero"
        yield name, model, loss_name, LOSSES[loss_name], uniform(gen, (batch, sizes[0]), -1.5, 1.5)


def _linears(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def _output_gradients(model: nn.Module, loss_fn: Callable, x: torch.Tensor) -> tuple[list, list]:
    """For each Linear, ∂loss/∂(each of its outputs), one per time it runs, by autograd and by central differences:
    a zero added to each output (a forward hook that counts the calls), varied."""
    by_autograd, by_fd = [], []
    for layer in _linears(model):
        shapes = []
        handle = layer.register_forward_hook(lambda m, i, out, shapes=shapes: shapes.append(out.shape))
        with torch.no_grad():
            model(x)
        handle.remove()

        def loss_of(*deltas, layer=layer):
            calls = iter(deltas)
            hook = layer.register_forward_hook(lambda m, i, out: out + next(calls))
            try:
                return loss_fn(model(x))
            finally:
                hook.remove()

        zeros = [torch.zeros(shape, dtype=torch.float64) for shape in shapes]
        by_autograd.append(autograd_gradient(loss_of, *zeros))
        by_fd.append(central_difference(loss_of, *zeros))
    return by_autograd, by_fd


def _norm(grads) -> torch.Tensor:
    """The norm of all of a layer's output gradients together, as one vector."""
    return torch.cat([g.reshape(-1) for g in grads]).norm()


def _parameter_gradients(model: nn.Module, loss_fn: Callable, x: torch.Tensor) -> list[torch.Tensor]:
    """∂loss/∂param for every parameter of ``model``, in model.parameters() order (the .grad contract)."""
    return list(torch.autograd.grad(loss_fn(model(x)), list(model.parameters())))


def _weight_gradient_norms(model: nn.Module, loss_fn: Callable, x: torch.Tensor) -> torch.Tensor:
    weights = [layer.weight for layer in _linears(model)]
    grads = torch.autograd.grad(loss_fn(model(x)), weights)
    return torch.stack([g.norm() for g in grads])


def _hooks_left(model: nn.Module, globals_before: dict[str, int]) -> list[str]:
    left = [f"{repr(name) if name else 'the model'} ({type(module).__name__}): {len(getattr(module, attr))} in {attr}"
            for name, module in model.named_modules() for attr in HOOK_DICTS if getattr(module, attr, None)]
    module_api = torch.nn.modules.module
    left += [f"a global module hook ({attr})" for attr in GLOBAL_HOOK_DICTS
             if len(getattr(module_api, attr, {})) > globals_before.get(attr, 0)]
    return left


def _as_norms(value: Any, *, what: str, count: int, first: list | None, top_level: int | None = None,
              calls: int | None = None) -> torch.Tensor:
    """The learner's list of Python floats as a tensor, or a failure saying why it is not one. ``first`` is what the
    first call on the same model returned (a copy, and the object itself), None on the first call."""
    __tracebackhide__ = True
    if not isinstance(value, (list, tuple)):
        raise GradingFailure(f"{what} returned {type(value).__name__} ({value!r:.60}); expected a list of Python "
                             "floats, one per nn.Linear.")
    if first is not None and (value is first[1] or len(value) > len(first[0])):
        same = " (the very same list object)" if value is first[1] else ""
        raise proven_failure(f"{what} returned {len(value)} values on the second call on the same model, "
                             f"{len(first[0])} on the first{same}.", KEPT_BETWEEN_CALLS)
    for item in value:
        expect_python_float(item, what=f"{what}: an entry of the list")
    if len(value) != count:
        message = (f"{what} returned {len(value)} values; the model has {count} nn.Linear layers, expected one norm "
                   "per layer.")
        if calls is not None and calls != count and len(value) == calls:  # observed: one entry per call
            raise proven_failure(f"{message} Its layers run {calls} times in all.", ONE_ENTRY_PER_CALL)
        if top_level is not None and len(value) == top_level < count:  # observed: the nested layers are missing
            raise proven_failure(f"{message} {top_level} of them are direct children of the model; the others sit "
                                 "inside its sub-modules.", TOP_LEVEL_ONLY)
        raise GradingFailure(message)
    return torch.tensor([float(v) for v in value], dtype=torch.float64)


def _expect_one_backward(model: nn.Module, grads_before: list, gradient: list, routes: Routes, what: str) -> None:
    """The contract of Part C: one backward pass, whose gradient the parameters' .grad accumulate, and nothing else."""
    __tracebackhide__ = True
    if routes.backward_runs != 1:
        raise proven_failure(f"{what} ran {routes.backward_runs} backward passes; the part asks for exactly one.",
                             BACKWARD_CONTRACT)
    for (name, param), before, grad in zip(model.named_parameters(), grads_before, gradient):
        expected = grad if before is None else before + grad
        if param.grad is None or param.grad.shape != expected.shape or not torch.allclose(
                param.grad, expected, rtol=1e-9, atol=1e-12):
            state = "None" if param.grad is None else f"off by up to {fmt(float((param.grad - expected).abs().max()))}"
            message = f"{what}: afterwards {name}.grad is not what it held before plus this loss's gradient ({state})."
            # Observed (one backward ran): the old gradient is gone, and .grad holds this loss's gradient alone.
            wiped = before is not None and bool(before.abs().max() > 0) and (param.grad is None or (
                param.grad.shape == grad.shape and torch.allclose(param.grad, grad, rtol=1e-9, atol=1e-12)))
            if wiped:
                now = "is None" if param.grad is None else "holds this loss's gradient alone"
                raise proven_failure(f"{message} It {now}: what it held before was cleared.", GRADS_WIPED)
            untouched = (param.grad is None) if before is None else (
                param.grad is not None and torch.equal(param.grad, before))
            if untouched and bool(grad.abs().max() > 0):  # observed: no backward pass added into .grad
                raise proven_failure(f"{message} It is exactly what it was before the call: no backward pass added "
                                     "this loss's gradient.", BACKWARD_CONTRACT)
            raise GradingFailure(message)


def _run_layer_case(layer_grad_norms, model_name, model, loss_name, loss_fn, x) -> None:
    __tracebackhide__ = True
    count = len(_linears(model))
    top_level = sum(isinstance(m, nn.Linear) for m in model.children())
    by_autograd, by_fd = _output_gradients(model, loss_fn, x)
    calls = sum(len(grads) for grads in by_autograd)
    expected = torch.stack([_norm(grads) for grads in by_autograd])
    fd = torch.stack([_norm(grads) for grads in by_fd])
    gradient = _parameter_gradients(model, loss_fn, x)
    per_example = torch.stack([torch.cat([g.reshape(g.shape[0], -1) for g in grads], dim=1).norm(dim=1).mean()
                               for grads in by_autograd])
    symptoms = [REVERSED.looks_like(expected.flip(0)), SQUARED_NORMS.looks_like(expected ** 2),
                PER_EXAMPLE_MEAN.looks_like(per_example),
                WEIGHT_GRADIENTS.looks_like(_weight_gradient_norms(model, loss_fn, x)),
                NORMS_ADDED.looks_like(torch.stack([sum(g.norm() for g in grads) for grads in by_autograd]))]
    symptoms += [ONE_CALL_KEPT.looks_like(torch.stack([grads[which].norm() for grads in by_autograd]))
                 for which in (0, -1)]
    module_api = torch.nn.modules.module
    globals_before = {attr: len(getattr(module_api, attr, {})) for attr in GLOBAL_HOOK_DICTS}
    first = None
    for call in ("first", "second"):
        with trial():
            what = (f"layer_grad_norms(model, loss_fn, x) ({call} call on the same model) for model = {model_name}, "
                    f"loss_fn(out) = {loss_name}, x of shape {tuple(x.shape)}")
            before = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
            values = [(p.detach().clone(), p.requires_grad) for p in model.parameters()]
            routes = Routes()
            # x is the caller's own tensor (its requires_grad too); the model's .grad may change, checked below.
            answer = call_learner(layer_grad_norms, model, loss_fn, x, what=what, routes=routes, may_change=[0])
            left = _hooks_left(model, globals_before)
            if left:
                raise proven_failure(f"{what}: after it returned, hooks were still registered on {'; '.join(left)}.",
                                     HOOKS_LEFT)
            for (name, param), (value, requires_grad) in zip(model.named_parameters(), values):
                if not torch.equal(param.detach(), value) or param.requires_grad != requires_grad:
                    raise proven_failure(f"{what} changed the model's parameter {name} (its values or "
                                         "requires_grad).", CHANGED_INPUT)
            if first is None and isinstance(answer, (list, tuple)):
                first = (list(answer), answer)
                norms = _as_norms(answer, what=what, count=count, first=None, top_level=top_level, calls=calls)
            else:
                norms = _as_norms(answer, what=what, count=count, first=first, top_level=top_level, calls=calls)
            expect_close(norms, expected, what=f"{what}: ‖∂loss/∂(outputs of each Linear)‖, first to last", fd=fd,
                         rtol=1e-6, atol=1e-10, symptoms=symptoms)
            _expect_one_backward(model, before, gradient, routes, what)


@check
def check_layer_grad_norms(layer_grad_norms, grading_seed: int | None = None) -> None:
    """Part C: layer_grad_norms(model, loss_fn, x) = ‖∂loss/∂(outputs of each nn.Linear)‖, first to last, as Python
    floats (a Linear that runs twice: the norm of both outputs' gradients together), collected with hooks that are
    removed, in exactly one backward pass that changes nothing but .grad.

    Domain (the part's text): ``model`` a float64 nn.Module with at least one nn.Linear, whose modules() order is the
    order the layers first run in (plain stacks, residual MLPs, a model whose shared Linear runs twice on paths that
    join later); ``loss_fn`` a scalar loss of the output; ``x`` a float64 batch (of one or more) that does not
    require grad. Corners pinned at every seed (:data:`LAYER_CORNERS`): one Linear with a batch of one, output
    gradients exactly 0, a Linear that runs twice. Contracts checked: a list of Python floats, one per Linear; no
    hook left (module and global hook dictionaries); a new list at every call (called twice); exactly one backward
    run (Routes); every .grad equals what it held plus this loss's gradient; the parameters' values and
    requires_grad, x and loss_fn unchanged (call_learner's snapshot).
    """
    __tracebackhide__ = True
    for case in _layer_cases(grading_seed):
        _run_layer_case(layer_grad_norms, *case)
