"""Checks for exercise 07, depth: gradient ratios through chains, global-norm clipping, per-layer norms with hooks.

Each ``check_*`` function is one test cell's whole body. Without ``seed`` it runs the public cases a learner sees;
the hidden test cells pass ``seed=grading_seed()`` and get fresh random cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ..checking import GradingFailure, Misconception, as_answer, call_learner, expect_close
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform
from .cases import randint

# ---------------------------------------------------------------------------------------------------- Part A

IDENTITY_HINT = ("A residual layer y = x + F(x) has local derivative 1 + F'(x): the identity route passes the "
                 "upstream gradient on unscaled and the branch adds F'(x) times it.")


def scalar_chain(x: torch.Tensor, c: float, depth: int, residual: bool) -> torch.Tensor:
    """``depth`` layers x <- c·x (plain) or x <- x + c·x (residual), run by autograd."""
    for _ in range(depth):
        x = x + c * x if residual else c * x
    return x


def residual_tanh_chain(x: torch.Tensor, weights: list[float]) -> torch.Tensor:
    """Residual blocks h <- h + tanh(w_k · h), one per weight, run by autograd."""
    for w in weights:
        x = x + torch.tanh(w * x)
    return x


def _signed(gen: torch.Generator, low: float, high: float) -> float:
    """A number with magnitude in [low, high) and a random sign, rounded to 3 decimals for readable messages."""
    return round(float(uniform(gen, (), low, high)) * choice(gen, [-1.0, 1.0]), 3)


def _expect_gradient(received, f: Callable, x: float, *, what: str, mistakes: list[Misconception]) -> None:
    """Compare a learner's d f / d x with autograd and central differences, by relative error only."""
    __tracebackhide__ = True
    (grad,) = autograd_gradient(f, x)
    (fd,) = central_difference(f, x)
    # Relative error only: the values run from 1e-3 to 1e16, where any absolute tolerance is meaningless.
    expect_close(as_answer(received, what=what, shape=()), grad, what=what, fd=fd, rtol=1e-6, atol=0.0,
                 misconceptions=mistakes)


def _chain_mistakes(c: float, depth: int, residual: bool) -> list[Misconception]:
    local = 1 + c if residual else c
    mistakes = [
        Misconception("added the local derivatives instead of multiplying them", "Along one route the chain "
                      "rule multiplies: through n identical layers the ratio is (local derivative)**n.",
                      value=depth * local),
        Misconception("one layer too many or too few", f"There are exactly depth = {depth} factors.",
                      legacy_when=lambda got: any(math.isclose(float(got), local ** n, rel_tol=1e-6)
                                           for n in (depth - 1, depth + 1))),
    ]
    if residual:
        mistakes[:0] = [
            Misconception("residual derivative F′ instead of 1 + F′", IDENTITY_HINT + f" Here: (1 + {c:g})**depth.",
                          value=c ** depth),
            Misconception("identity added once instead of in every layer", "Every residual layer has its own "
                          "identity route, so the 1 appears in each factor: (1 + c)**depth, not 1 + c**depth.",
                          value=1 + c ** depth)]
    else:
        mistakes.insert(0, Misconception("residual formula for a plain chain", "A plain layer x <- c·x has "
                                         "local derivative c; only a residual layer adds the 1.",
                                         value=(1 + c) ** depth))
    return mistakes


def check_chain_gradient_ratio(chain_gradient_ratio, seed: int | None = None) -> None:
    """Part A1: chain_gradient_ratio(c, depth, residual) = d(out)/d(in) of the plain or residual scalar chain."""
    __tracebackhide__ = True
    if seed is None:
        cases = [(0.9, 50, False), (1.1, 50, False), (1.1, 50, True), (0.01, 50, True)]
    else:
        gen = generator("07/chain_gradient_ratio", seed)
        cases = [(round(float(uniform(gen, (), 0.05, 1.5)), 3), randint(gen, 5, 80), residual)
                 for residual in (False, True, True, False)]
    for c, depth, residual in cases:
        what = f"chain_gradient_ratio(c={c:g}, depth={depth}, residual={residual})"
        received = call_learner(chain_gradient_ratio, c, depth, residual, what=what)
        chain = lambda x, c=c, depth=depth, residual=residual: scalar_chain(x, c, depth, residual)  # noqa: E731
        _expect_gradient(received, chain, 1.0, what=what,
                         mistakes=_chain_mistakes(c, depth, residual))


def _block_slopes(x: float, weights: list[float], *, at_input: bool = False, inner: bool = True) -> list[float]:
    """The branch derivatives F_k'(h) = w_k (1 - tanh²(w_k h)) along the chain (optionally mistaken variants)."""
    slopes, h = [], x
    for w in weights:
        at = x if at_input else h
        slopes.append((w if inner else 1.0) * (1 - math.tanh(w * at) ** 2))
        h = h + math.tanh(w * h)
    return slopes


def _residual_chain_mistakes(x: float, weights: list[float]) -> list[Misconception]:
    return [
        Misconception("residual derivative F′ instead of 1 + F′", IDENTITY_HINT + " Multiply the factors "
                      "(1 + F_k'(h)), not the F_k'(h) alone.", value=math.prod(_block_slopes(x, weights))),
        Misconception("branch derivatives taken at the chain's input", "Each block's F_k' must be evaluated at "
                      "that block's own input h_(k-1), which changes from block to block: run the forward pass "
                      "and update h as you go.",
                      value=math.prod(1 + s for s in _block_slopes(x, weights, at_input=True))),
        Misconception("missing the inner derivative w_k", "d/dh tanh(w·h) = w·(1 - tanh²(w·h)): the chain rule "
                      "also multiplies by the derivative of w·h.",
                      value=math.prod(1 + s for s in _block_slopes(x, weights, inner=False))),
    ]


def check_residual_chain_gradient(residual_chain_gradient, seed: int | None = None) -> None:
    """Part A2: residual_chain_gradient(x, weights) = d h_n / d x for blocks h <- h + tanh(w_k h)."""
    __tracebackhide__ = True
    if seed is None:
        cases = [(0.5, [0.8]), (0.5, [0.8, -0.5, 1.2, 0.3]), (-1.0, [1.5, 1.5, 1.5])]
    else:
        gen = generator("07/residual_chain_gradient", seed)
        # |x| >= 0.5 and |w| >= 0.3: h really moves from block to block, so every listed mistake shows.
        cases = [(_signed(gen, 0.5, 2.0), [_signed(gen, 0.3, 1.5) for _ in range(randint(gen, 3, 10))])
                 for _ in range(3)]
    for x, weights in cases:
        what = f"residual_chain_gradient(x={x:g}, weights={weights})"
        received = call_learner(residual_chain_gradient, x, list(weights), what=what)
        _expect_gradient(received, lambda t, weights=weights: residual_tanh_chain(t, weights), x, what=what,
                         mistakes=_residual_chain_mistakes(x, weights))


# ---------------------------------------------------------------------------------------------------- Part B

EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ divides by total_norm + 1e-6


def _parameters(grads: list[torch.Tensor | None]) -> list[nn.Parameter]:
    """Fresh float64 parameters whose .grad are copies of ``grads`` (None stays None)."""
    params = []
    for grad in grads:
        shape = (2,) if grad is None else grad.shape
        param = nn.Parameter(torch.zeros(shape, dtype=torch.float64))
        param.grad = None if grad is None else grad.clone()
        params.append(param)
    return params


def _scaled(grads: list[torch.Tensor], coefficients: list[float]) -> torch.Tensor:
    return torch.cat([(g * k).reshape(-1) for g, k in zip(grads, coefficients)])


def _clip_mistakes(grads: list[torch.Tensor], max_norm: float, generator_input: bool) -> list[Misconception]:
    """What the catalogued clipping mistakes produce for these gradients (None grads already dropped)."""
    norms = [float(g.norm()) for g in grads]
    total = math.sqrt(sum(n * n for n in norms))
    squared = total ** 2
    unchanged = (" `parameters` was a generator here (like model.parameters()): it can be iterated only once, so "
                 "a second loop over it sees nothing. Make a list first: params = list(parameters)."
                 if generator_input else " Multiply each p.grad in place (p.grad.mul_(coef)); scaling a copy "
                 "(g = p.grad * coef) leaves p.grad unchanged.")
    return [
        Misconception("per-tensor instead of global clipping", "Clip by the GLOBAL norm: one norm over all "
                      "parameters' gradients together, sqrt(sum of every squared element), and the same factor for "
                      "every tensor. Clipping each tensor by its own norm changes the direction of the step.",
                      value=_scaled(grads, [min(1.0, max_norm / (n + EPS)) for n in norms])),
        Misconception("norm without the square root", "The L2 norm is sqrt(sum of squares); you used the sum of "
                      "squares itself.", value=_scaled(grads, [min(1.0, max_norm / (squared + EPS))] * len(grads))),
        Misconception("clipping even below max_norm", "Scale only when the total norm exceeds max_norm: the "
                      "factor is min(1, max_norm / (total_norm + 1e-6)); below the threshold the gradients must "
                      "stay exactly as they were.", value=_scaled(grads, [max_norm / (total + EPS)] * len(grads))),
        Misconception("gradients not modified", "You did not change the parameters' .grad." + unchanged,
                      value=_scaled(grads, [1.0] * len(grads))),
        Misconception("clipped values instead of the norm", "clip_grad_norm_ rescales the whole gradient vector; "
                      "clamping each element to [-max_norm, max_norm] is clip_grad_value_.",
                      value=torch.cat([g.clamp(-max_norm, max_norm).reshape(-1) for g in grads])),
    ]


def _clip_cases(seed: int | None):
    """(description, list of .grad tensors or None, max_norm, pass a generator?) for each case."""
    if seed is None:
        lesson = [torch.tensor([3.0, 4.0], dtype=torch.float64), torch.tensor([12.0], dtype=torch.float64)]
        small = [torch.tensor([0.6, 0.8], dtype=torch.float64) * k for k in (1.0, 2.0, 0.5, 1.5, 3.0, 0.25)]
        yield "the lesson's example", lesson, 1.0, False
        yield "the total norm below max_norm", lesson, 20.0, False
        yield "a .grad that is None", [lesson[0], None, lesson[1]], 5.0, False
        yield "many small tensors", small, 1.5, False
        yield "many small tensors", small, 2.0, True
        return
    gen = generator("07/clip_grad_norm", seed)
    # (description, total_norm / max_norm range, a None grad?, generator?): every mistake shows in some case.
    kinds = [("the total norm above max_norm", (2.0, 10.0), False, False),
             ("the total norm below max_norm", (0.2, 0.8), False, False),
             ("a .grad that is None", (2.0, 10.0), True, False), ("many small tensors", (2.0, 5.0), False, False),
             ("many small tensors", (1.5, 4.0), True, True)]
    for description, (low, high), with_none, as_generator in kinds:
        count = randint(gen, 6, 10) if "small" in description else randint(gen, 2, 5)
        shapes = [choice(gen, [(2,), (3,)]) if "small" in description else choice(gen, [(3,), (2, 3), (4, 2), (5,)])
                  for _ in range(count)]
        grads = [torch.randn(shape, generator=gen, dtype=torch.float64) * float(uniform(gen, (), 0.2, 3.0))
                 for shape in shapes]
        max_norm = round(float(uniform(gen, (), 1.0, 5.0)), 3)
        total = math.sqrt(sum(float(g.norm()) ** 2 for g in grads))
        grads = [g * (float(uniform(gen, (), low, high)) * max_norm / total) for g in grads]
        if with_none:
            grads.insert(randint(gen, 0, len(grads)), None)
        yield description, grads, max_norm, as_generator


def _describe_clip_case(description: str, grads: list, max_norm: float, as_generator: bool) -> str:
    shapes = ", ".join("None" if g is None else str(tuple(g.shape)) for g in grads)
    container = "a generator" if as_generator else "a list"
    return (f"clip_grad_norm(parameters, max_norm={max_norm:g}) with {description}: parameters = {container} of "
            f"{len(grads)} parameters whose .grad have shapes [{shapes}]")


def _run_clip_case(clip_grad_norm, description, grads, max_norm, as_generator) -> None:
    __tracebackhide__ = True
    what = _describe_clip_case(description, grads, max_norm, as_generator)
    grads = [None if g is None else g.to(torch.float64) for g in grads]
    reference, mine = _parameters(grads), _parameters(grads)
    want_norm = torch.nn.utils.clip_grad_norm_(reference, max_norm)
    argument = (p for p in mine) if as_generator else mine
    try:
        returned = call_learner(clip_grad_norm, argument, max_norm, what=what, may_change=True)
    except GradingFailure as failure:
        if None in grads and "NoneType" in str(failure):
            raise GradingFailure(f"{failure}\nLikely misconception: a .grad of None not skipped. A parameter that "
                                 "took no part in the loss has .grad None: leave it out of the norm and leave it "
                                 "alone (`if p.grad is not None`).") from None
        raise
    for index, (param, grad) in enumerate(zip(mine, grads)):
        if grad is None and param.grad is not None:
            raise GradingFailure(f"{what}: parameter {index} had .grad None and now has a .grad. Parameters "
                                 "without a gradient are skipped: they neither count in the norm nor get one.")
        if grad is not None and (param.grad is None or param.grad.shape != grad.shape):
            raise GradingFailure(f"{what}: parameter {index}'s .grad was removed or reshaped; scale it in place.")
    present = [g for g in grads if g is not None]
    expect_close(torch.cat([p.grad.reshape(-1) for p in mine if p.grad is not None]),
                 torch.cat([p.grad.reshape(-1) for p in reference if p.grad is not None]),
                 what=f"{what}: the .grad values afterwards (all parameters, flattened in order)",
                 source="clip_grad_norm_", rtol=1e-5, atol=1e-10,
                 misconceptions=_clip_mistakes(present, max_norm, as_generator))
    if not isinstance(returned, torch.Tensor):
        raise GradingFailure(f"{what} returned {type(returned).__name__} ({returned!r:.60}); return the total norm "
                             "as a 0-d tensor, as torch.nn.utils.clip_grad_norm_ does.")
    total = float(want_norm)
    expect_close(returned, want_norm, what=f"{what}: the returned total norm", source="clip_grad_norm_",
                 rtol=1e-5, atol=1e-10, misconceptions=[
        Misconception("norm without the square root", "Return sqrt(sum of squares), not the sum of squares.",
                      value=total ** 2),
        Misconception("returned the norm after clipping", "Return the total norm measured BEFORE clipping, as "
                      "clip_grad_norm_ does (it is what you log to spot exploding gradients).",
                      value=min(total, max_norm))])


def check_clip_grad_norm(clip_grad_norm, seed: int | None = None) -> None:
    """Part B: clip_grad_norm(parameters, max_norm) does what torch.nn.utils.clip_grad_norm_ does, in place."""
    __tracebackhide__ = True
    for case in _clip_cases(seed):
        _run_clip_case(clip_grad_norm, *case)


# ---------------------------------------------------------------------------------------------------- Part C

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


def _plain_mlp(widths: list[int], activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if k < len(widths) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def _layer_cases(seed: int | None):
    """(model description, model, loss description, loss_fn, x) for each case; everything float64."""
    if seed is None:
        init_seed, gen = 0, torch.Generator().manual_seed(7)
        specs = [("plain", [3, 6, 6, 5, 2], nn.Tanh, 4, "mean(out**2)"),
                 ("residual", (3, 5, 2, 3), nn.Tanh, 4, "mean((out - 1)**2)")]
    else:
        gen = generator("07/layer_grad_norms", seed)
        init_seed, specs = int(torch.randint(2**31, (), generator=gen)), []
        for kind in ("plain", "residual"):
            width = randint(gen, 3, 6)
            sizes = ([randint(gen, 2, 4)] + [width] * randint(gen, 2, 4) + [randint(gen, 1, 3)] if kind == "plain"
                     else (randint(gen, 2, 4), width, randint(gen, 1, 3), randint(gen, 2, 3)))
            specs.append((kind, sizes, choice(gen, [nn.Tanh, nn.Sigmoid]), randint(gen, 2, 5),
                          choice(gen, ["mean(out**2)", "mean((out - 1)**2)"])))
    losses = {"mean(out**2)": lambda out: out.pow(2).mean(), "mean((out - 1)**2)": lambda out: (out - 1).pow(2).mean()}
    for kind, sizes, activation, batch, loss_name in specs:
        with torch.random.fork_rng(devices=[]):  # nn.Linear draws its initial weights from the global generator
            torch.manual_seed(init_seed)
            if kind == "plain":
                model = _plain_mlp(list(sizes), activation).double()
                name = f"Linear layers {list(sizes)} with {activation.__name__} between them"
            else:
                model = ResidualMLP(sizes[:3], sizes[3], activation).double()
                name = (f"ResidualMLP: Linear({sizes[0]}, {sizes[1]}), {sizes[3]} blocks h + "
                        f"{activation.__name__}(Linear(h)), Linear({sizes[1]}, {sizes[2]})")
        yield name, model, loss_name, losses[loss_name], uniform(gen, (batch, sizes[0]), -1.5, 1.5)


def _linears(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def _output_gradients(model: nn.Module, loss_fn: Callable, x: torch.Tensor) -> tuple[list, list]:
    """∂loss/∂(output of each Linear), by autograd and by central differences: a zero added to the output, varied."""
    by_autograd, by_fd = [], []
    for layer in _linears(model):
        shapes = []
        handle = layer.register_forward_hook(lambda m, i, out, shapes=shapes: shapes.append(out.shape))
        with torch.no_grad():
            model(x)
        handle.remove()

        def loss_of(delta, layer=layer):
            hook = layer.register_forward_hook(lambda m, i, out: out + delta)
            try:
                return loss_fn(model(x))
            finally:
                hook.remove()

        zero = torch.zeros(shapes[0], dtype=torch.float64)
        by_autograd.append(autograd_gradient(loss_of, zero)[0])
        by_fd.append(central_difference(loss_of, zero)[0])
    return by_autograd, by_fd


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


def _as_norms(value, *, what: str, count: int) -> torch.Tensor:
    __tracebackhide__ = True
    if isinstance(value, (list, tuple)) and value:
        norms = torch.cat([as_answer(v, what=what).reshape(-1) for v in value])
    elif isinstance(value, (torch.Tensor, list, tuple)):
        norms = as_answer(torch.as_tensor(value, dtype=torch.float64), what=what).reshape(-1)
    else:
        raise GradingFailure(f"{what} returned {type(value).__name__} ({value!r:.60}); expected a list of floats, "
                             "one per nn.Linear.")
    if norms.numel() != count:
        hint = ("\nLikely misconception: hooks left registered (or a list kept between calls). Every call must "
                "start from an empty list and remove its hooks (handle.remove()) before returning."
                if norms.numel() > count else "")
        raise GradingFailure(f"{what} returned {norms.numel()} values; the model has {count} nn.Linear layers, "
                             f"expected one norm per layer.{hint}")
    return norms


def _layer_mistakes(expected: torch.Tensor, weight_norms: torch.Tensor) -> list[Misconception]:
    return [
        Misconception("layers in reverse order", "Backward reaches the last layer first, so hooks fire from last to "
                      "first. Store each norm at its layer's position (first layer = index 0), or reverse the list.",
                      value=expected.flip(0)),
        Misconception("squared norms", "Return the L2 norm, grad.norm() = sqrt(sum of squares), not the sum of "
                      "squares.", value=expected ** 2),
        Misconception("weight gradients instead of output gradients", "Measure the gradient with respect to each "
                      "layer's OUTPUT (what a backward hook receives as grad_output[0], or a tensor hook on the "
                      "output), not layer.weight.grad.", value=weight_norms),
    ]


def _run_layer_case(layer_grad_norms, model_name, model, loss_name, loss_fn, x) -> None:
    __tracebackhide__ = True
    count = len(_linears(model))
    by_autograd, by_fd = _output_gradients(model, loss_fn, x)
    expected = torch.stack([g.norm() for g in by_autograd])
    fd = torch.stack([g.norm() for g in by_fd])
    mistakes = _layer_mistakes(expected, _weight_gradient_norms(model, loss_fn, x))
    module_api = torch.nn.modules.module
    globals_before = {attr: len(getattr(module_api, attr, {})) for attr in GLOBAL_HOOK_DICTS}
    for call in ("first", "second"):
        what = (f"layer_grad_norms(model, loss_fn, x) ({call} call on the same model) for model = {model_name}, "
                f"loss_fn(out) = {loss_name}, x of shape {tuple(x.shape)}")
        answer = call_learner(layer_grad_norms, model, loss_fn, x.clone(), what=what, may_change=True)
        norms = _as_norms(answer, what=what, count=count)
        left = _hooks_left(model, globals_before)
        if left:
            raise GradingFailure(f"{what}: after it returned, hooks were still registered on {'; '.join(left)}.\n"
                                 "Likely misconception: hooks left registered. Keep the handle that each "
                                 "register_*_hook returns and call handle.remove() before returning; otherwise "
                                 "every later backward pass runs your hooks again.")
        expect_close(norms, expected, what=f"{what}: ‖∂loss/∂(output of each Linear)‖, first to last", fd=fd,
                     rtol=1e-6, atol=1e-10, misconceptions=mistakes)


def check_layer_grad_norms(layer_grad_norms, seed: int | None = None) -> None:
    """Part C: layer_grad_norms(model, loss_fn, x) = ‖∂loss/∂(output of each nn.Linear)‖, first to last, via hooks."""
    __tracebackhide__ = True
    for case in _layer_cases(seed):
        _run_layer_case(layer_grad_norms, *case)
