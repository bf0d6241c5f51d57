"""Checks for exercise 07, depth: gradient ratios through chains, global-norm clipping, per-layer norms with hooks.

Every case is a :func:`trial`; the cases are built so that each catalogued mistake shows in at least two of them,
visible and hidden.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..checking import (
    GradingFailure,
    Misconception,
    Route,
    Routes,
    call_learner,
    check,
    expect_close,
    expect_no_alias,
    fmt,
    proven_failure,
    trial,
)
from ..contracts import CHANGED_INPUT
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform
from .cases import randint
from .shared import SQUARED_NORMS

NOT_A_FLOAT = Misconception(
    "a tensor where the part asks for a Python float",
    "Return plain Python numbers (float(value), or value.item() for a 0-d tensor): a tensor can carry a graph and "
    "share memory with the caller's tensors, a float does neither.")

# ---------------------------------------------------------------------------------------------------- Part A

ADDED_LOCALS = Misconception(
    "added the local derivatives instead of multiplying them",
    "Along one route the chain rule multiplies the local derivatives: the ratio is their product (so its logarithm "
    "is the sum of their logarithms), not their sum.")
OFF_BY_ONE = Misconception(
    "one layer too many or too few", "There is exactly one local derivative per layer: one factor per entry of "
    "slopes, no more, no fewer.")
RESIDUAL_F_PRIME = Misconception(
    "residual derivative F′ instead of 1 + F′",
    "A residual layer y = x + F(x) has local derivative 1 + F'(x): the identity route passes the upstream gradient "
    "on unscaled and the branch adds F'(x) times it. Multiply the factors (1 + F'), not the F' alone.")
RESIDUAL_FOR_PLAIN = Misconception(
    "residual formula for a plain chain",
    "A plain layer h_k = F_k(h_(k-1)) has local derivative F_k' alone; only a residual layer adds the 1.")
NATURAL_LOG = Misconception(
    "natural logarithm instead of log10",
    "The part asks for the base-10 logarithm (orders of magnitude): math.log10 or torch.log10, or a natural log "
    "divided by ln 10.")
OUT_OF_RANGE = Misconception(
    "the product formed before its logarithm",
    "Through hundreds of layers the product of the local derivatives leaves float64's range (about 1e-308 to "
    "1.8e308): it becomes 0 or inf before its logarithm is taken. The logarithm of a product is the sum of the "
    "logarithms: add log10|local derivative| layer by layer and never multiply first.")
NO_ABS = Misconception(
    "logarithm of a negative number",
    "Local derivatives can be negative, and so can their product; the size of the ratio is its absolute value: add "
    "the log10 of the absolute values.")
FLOAT32_LOGS = Misconception(
    "logarithms in float32",
    "Your formula is right, but your number is off in the 7th or 8th significant digit: float32 rounding. The slopes "
    "arrive in float64; keep them there (no .float(), no dtype=torch.float32, no numpy.float32) so that the sum of "
    "logarithms is exact to about 1e-15.")
MEAN_TO_THE_N = Misconception(
    "the mean local derivative to the n-th power",
    "A product of scattered numbers is not the n-th power of their mean (for zero-mean branch derivatives the plain "
    "chain's mean is near 0 and the residual chain's near 1, and neither product is close to that): use every "
    "layer's own local derivative.")
AT_INPUT = Misconception(
    "branch derivatives taken at the chain's input",
    "Each block's F_k' must be evaluated at that block's own input h_(k-1), which changes from block to block: run "
    "the forward pass and update h as you go.")
AT_OUTPUT = Misconception(
    "branch derivatives taken at each block's output",
    "You moved h forward before taking the block's derivative: F_k' belongs at the block's INPUT h_(k-1). Take the "
    "derivative first, then update h.")
MISSING_INNER = Misconception(
    "missing the inner derivative w_k",
    "d/dh tanh(w·h) = w·(1 - tanh²(w·h)): the chain rule also multiplies by the derivative of w·h.")

#: log10 of float64's range, with a margin: a ratio whose log10 lies outside cannot be formed as a float64 product.
FLOAT64_LOG10_RANGE = (-300.0, 300.0)


def linear_chain(h: torch.Tensor, slopes: list[float], residual: bool) -> torch.Tensor:
    """Layers whose branch is F_k(h) = s_k·h, so that F_k' = s_k: h <- s_k·h (plain) or h <- h + s_k·h (residual)."""
    for slope in slopes:
        h = h + slope * h if residual else slope * h
    return h


def chain_log10_ratio(slopes: torch.Tensor, residual: bool) -> tuple[float, float]:
    """log10 |d h_n / d h_0| of the chain, by autograd and by central differences on the actual layers, taken in
    pieces of 50 layers that float64 holds (each piece is linear in h, so its derivative is one number)."""
    by_autograd = by_fd = 0.0
    for piece in slopes.split(50):
        layers = piece.tolist()
        f = lambda h, layers=layers: linear_chain(h, layers, residual)  # noqa: E731
        by_autograd += math.log10(abs(float(autograd_gradient(f, 1.0)[0])))
        by_fd += math.log10(abs(float(central_difference(f, 1.0)[0])))
    return by_autograd, by_fd


def residual_tanh_chain(x: torch.Tensor, weights: list[float]) -> torch.Tensor:
    """Residual blocks h <- h + tanh(w_k · h), one per weight, run by autograd."""
    for w in weights:
        x = x + torch.tanh(w * x)
    return x


def _signed(gen: torch.Generator, low: float, high: float) -> float:
    """A number with magnitude in [low, high) and a random sign, rounded to 3 decimals for readable messages."""
    return round(float(uniform(gen, (), low, high)) * choice(gen, [-1.0, 1.0]), 3)


def expect_python_float(value: Any, *, what: str) -> float:
    """``value`` as a float, or a proven failure when it is not a plain Python number (a tensor, an array...)."""
    __tracebackhide__ = True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise proven_failure(f"{what} returned {type(value).__name__} ({value!r:.60}); the part asks for a Python "
                             "float.", NOT_A_FLOAT)
    return float(value)


def _expect_gradient(received: float, f: Callable, x: float, *, what: str, symptoms: list) -> None:
    """Compare a learner's d f / d x with autograd and central differences, by relative error only."""
    __tracebackhide__ = True
    (grad,) = autograd_gradient(f, x)
    (fd,) = central_difference(f, x)
    expect_close(received, grad, what=what, fd=fd, rtol=1e-6, atol=0.0, symptoms=symptoms)


def _log10_abs(values: torch.Tensor) -> float:
    return float(values.abs().log10().sum())


def _float32_band(slopes: torch.Tensor, residual: bool) -> float:
    """How far a right formula computed in float32 can land from the float64 answer: each local derivative rounded
    to float32 (relative 2^-24, and 1 + s rounded too when the learner adds the 1 in float32), each log10 rounded,
    and a pairwise float32 sum. Measured over 100 seeds of cases and six float32 ways to write the formula (torch,
    numpy, math on float32 values, ln / ln 10, cumsum): at most 0.2 of it. Every catalogued mistake lies farther."""
    local = 1 + slopes if residual else slopes
    terms = local.abs().log10()
    per_term = (slopes.abs() / local.abs() + 1.0).sum() + terms.abs().sum() * math.ceil(math.log2(len(slopes) + 1))
    return 2.0 ** -23 * float(per_term)


def _ratio_symptoms(slopes: torch.Tensor, residual: bool, expected: float) -> list:
    local = 1 + slopes if residual else slopes
    other = slopes if residual else 1 + slopes
    n = len(slopes)
    band = _float32_band(slopes, residual)
    low, high = FLOAT64_LOG10_RANGE
    return [(RESIDUAL_F_PRIME if residual else RESIDUAL_FOR_PLAIN).looks_like(_log10_abs(other), rtol=1e-6),
            NATURAL_LOG.looks_like(_log10_abs(local) * math.log(10), rtol=1e-6),
            MEAN_TO_THE_N.looks_like(n * math.log10(abs(float(local.mean()))), rtol=1e-6),
            ADDED_LOCALS.looks_like(math.log10(abs(float(local.sum()))), rtol=1e-6),
            OFF_BY_ONE.when(lambda got: any(math.isclose(float(got), _log10_abs(part), rel_tol=1e-6, abs_tol=1e-9)
                                            for part in (local[1:], local[:-1]))),
            FLOAT32_LOGS.when(lambda got: bool(torch.isfinite(got).all())
                              and 1e-9 * (1 + abs(expected)) < abs(float(got) - expected) <= band),
            OUT_OF_RANGE.when(lambda got: bool(torch.isinf(got).any()) and not low < expected < high),
            NO_ABS.when(lambda got: bool(torch.isnan(got).any()))]


def _crash_suspects(slopes: torch.Tensor, residual: bool, expected: float) -> tuple[Misconception, ...]:
    """Who to suspect when the learner's function raised a math range or domain error on this case."""
    local = 1 + slopes if residual else slopes
    low, high = FLOAT64_LOG10_RANGE
    return tuple(m for m, seen in ((OUT_OF_RANGE, not low < expected < high), (NO_ABS, bool((local < 0).any())))
                 if seen)


def _normal(gen: torch.Generator, n: int, mean: float, spread: float) -> torch.Tensor:
    return mean + spread * torch.randn(n, generator=gen, dtype=torch.float64)


def _with_a_negative(gen: torch.Generator, values: torch.Tensor) -> torch.Tensor:
    """``values`` with at least one negative entry (one entry's sign flipped when there is none)."""
    if not bool((values < 0).any()):
        values[randint(gen, 0, len(values) - 1)] *= -1
    return values


def _ratio_corners() -> list[tuple[str, torch.Tensor, bool]]:
    """The corners of the domain, run at every seed (visible and hidden): one layer, a zero slope in a residual chain
    (local derivative exactly 1) beside a slope of -2 (local derivative -1) and signs that make the product
    negative, equal slopes (where the mean to the n-th power IS the right answer: that symptom must stay silent),
    and ratios beyond float64's range both ways with both signs of local derivative."""
    def t(values):
        return torch.tensor(values, dtype=torch.float64)
    return [("one plain layer with a negative slope", t([-0.5]), False),
            ("one residual layer with slope 0.5", t([0.5]), True),
            ("a residual chain with a zero slope (local derivative 1) and a slope of -2 (local derivative -1), "
             "5 layers", t([0.3, 0.0, -2.0, -0.4, 2.5]), True),
            ("equal branch derivatives, all 0.02, 300 plain layers (the product is about 2e-510)",
             torch.full((300,), 0.02, dtype=torch.float64), False),
            ("branch derivatives alternating 3 and -3, 701 plain layers (the product is about -2.9e+334)",
             t([3.0, -3.0] * 350 + [-3.0]), False)]


def _ratio_cases(grading_seed: int | None) -> list[tuple[str, torch.Tensor, bool]]:
    """(description, slopes, residual): the corners (:func:`_ratio_corners`) first, at every seed, then the
    visible or drawn cases. Each mistake shows in at least two cases: residual and plain chains, ratios far outside
    float64's range (underflow, overflow), and local derivatives of both signs that fit."""
    cases = _ratio_corners()
    if grading_seed is None:
        gen = torch.Generator().manual_seed(0)
        # The lesson's draw: the first 50 of 100 normal numbers from a generator seeded with 0, spread 0.1.
        zero_mean = 0.1 * torch.randn(100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)[:50]
        deep_zero_mean = _normal(gen, 400, 0.0, 0.1)
        return cases + [
            ("zero-mean branch derivatives (mean 0, spread 0.1), 50 layers", zero_mean, False),
            ("zero-mean branch derivatives (mean 0, spread 0.1), 50 layers", zero_mean, True),
            ("small branch derivatives, all 0.01, 200 layers", torch.full((200,), 0.01, dtype=torch.float64), False),
            ("small branch derivatives, all 0.01, 200 layers", torch.full((200,), 0.01, dtype=torch.float64), True),
            ("large branch derivatives, all 1.1, 1000 layers", torch.full((1000,), 1.1, dtype=torch.float64), True),
            ("zero-mean branch derivatives (mean 0, spread 0.1), 400 layers", deep_zero_mean, False),
            ("scattered branch derivatives (mean 0.5, spread 0.5), 30 layers",
             _with_a_negative(gen, _normal(gen, 30, 0.5, 0.5)), False),
            ("branch derivatives near -1 (mean -1, spread 0.5), 30 layers",
             _with_a_negative(gen, _normal(gen, 30, -1.0, 0.5) + 1) - 1, True)]
    gen = generator("07/log10_gradient_ratio", grading_seed)
    spread = float(uniform(gen, (), 0.05, 0.3))
    zero_mean = _normal(gen, randint(gen, 20, 60), 0.0, spread)
    small = uniform(gen, (randint(gen, 300, 500),), 0.005, 0.05)
    mean, scattered_spread = float(uniform(gen, (), -0.5, 0.5)), float(uniform(gen, (), 0.4, 0.8))
    return cases + [
        (f"zero-mean branch derivatives (spread {spread:.3g}), {len(zero_mean)} layers", zero_mean, False),
        (f"zero-mean branch derivatives (spread {spread:.3g}), {len(zero_mean)} layers", zero_mean, True),
        (f"small branch derivatives (0.005 to 0.05), {len(small)} layers", small, False),
        (f"small branch derivatives (0.005 to 0.05), {len(small[:200])} layers", small[:200], True),
        ("large branch derivatives (1.2 to 2), many layers", uniform(gen, (randint(gen, 1000, 1500),), 1.2, 2.0), True),
        ("zero-mean branch derivatives (spread 0.05 to 0.2), many layers",
         _normal(gen, randint(gen, 500, 700), 0.0, float(uniform(gen, (), 0.05, 0.2))), False),
        (f"scattered branch derivatives (mean {mean:.3g}, spread {scattered_spread:.3g})",
         _with_a_negative(gen, _normal(gen, randint(gen, 10, 40), mean, scattered_spread)), False),
        ("branch derivatives near -1 (mean -1)",
         _with_a_negative(gen, _normal(gen, randint(gen, 10, 40), 0.0, float(uniform(gen, (), 0.3, 0.6)))) - 1, True)]


@check
def check_log10_gradient_ratio(log10_gradient_ratio, grading_seed: int | None = None) -> None:
    """Part A1: log10_gradient_ratio(slopes, residual) = log10 |d h_n / d h_0| of a plain or residual chain whose
    branch derivatives are ``slopes``, as a Python float, by hand (no autograd), leaving ``slopes`` unchanged.

    Domain (the part's text): ``slopes`` a 1-D float64 tensor of n >= 1 finite entries (up to 1500 layers), of any
    sign, such that no local derivative is exactly 0 (plain: no slope 0; residual: no slope -1; a residual slope may
    be 0 or -2); ``residual`` a bool. The ratio may lie far outside float64's range. Corners pinned at every seed:
    :func:`_ratio_corners`. Contracts checked: a Python float (a tensor or array fails), no autograd (Route), the
    caller's ``slopes`` unchanged (call_learner's snapshot), within 1e-9 of autograd and central differences.
    """
    __tracebackhide__ = True
    for description, slopes, residual in _ratio_cases(grading_seed):
        with trial():
            what = f"log10_gradient_ratio(slopes, residual={residual}) for {description}"
            expected, fd = chain_log10_ratio(slopes, residual)
            try:  # the caller's own slopes: call_learner fails an answer that changes them
                received = call_learner(log10_gradient_ratio, slopes, residual, what=what, forbid=[Route.AUTOGRAD])
            except GradingFailure as failure:
                if failure.proven is None and any(text in failure.message for text in (
                        "math domain error", "OverflowError", "out of range")):
                    suspects = _crash_suspects(slopes, residual, expected)
                    raise GradingFailure(failure.message, suspects=suspects) from None
                raise
            received = expect_python_float(received, what=what)
            expect_close(received, expected, what=what, fd=fd, rtol=1e-9, atol=1e-9,
                         symptoms=_ratio_symptoms(slopes, residual, expected),
                         extra=f"  slopes: {fmt(slopes)} ({len(slopes)} layer{'s' if len(slopes) != 1 else ''})")


def _block_slopes(x: float, weights: list[float], *, at_input: bool = False, inner: bool = True,
                  at_output: bool = False) -> list[float]:
    """The branch derivatives F_k'(h) = w_k (1 - tanh²(w_k h)) along the chain (optionally mistaken variants)."""
    slopes, h = [], x
    for w in weights:
        after = h + math.tanh(w * h)
        at = x if at_input else after if at_output else h
        slopes.append((w if inner else 1.0) * (1 - math.tanh(w * at) ** 2))
        h = after
    return slopes


def _residual_chain_symptoms(x: float, weights: list[float]) -> list:
    return [RESIDUAL_F_PRIME.looks_like(math.prod(_block_slopes(x, weights))),
            AT_INPUT.looks_like(math.prod(1 + s for s in _block_slopes(x, weights, at_input=True))),
            AT_OUTPUT.looks_like(math.prod(1 + s for s in _block_slopes(x, weights, at_output=True))),
            MISSING_INNER.looks_like(math.prod(1 + s for s in _block_slopes(x, weights, inner=False)))]


@check
def check_residual_chain_gradient(residual_chain_gradient, grading_seed: int | None = None) -> None:
    """Part A2: residual_chain_gradient(x, weights) = d h_n / d x for blocks h <- h + tanh(w_k h), as a Python float,
    without autograd, leaving ``weights`` unchanged.

    Domain (the part's text): ``x`` a Python float in [-10, 10], 0 included; ``weights`` a list of 1 to 10 Python
    floats in [-5, 5], 0 included. So |w·h| stays below 5 · (10 + 10) = 100: math.cosh (finite up to about 710)
    and math.exp(2·w·h) (up to about 355) are safe there, and a formula written with them is right. Corners pinned
    at every seed: one block, x = 0, a zero weight between weights of both signs, saturated blocks (|w·h| large,
    branch derivative near 0), and the domain's edge (x = ±10, |w| = 5, 10 blocks). Contracts checked: a Python
    float, no autograd (Route), the caller's list unchanged, within 1e-6 relative of autograd and central
    differences.
    """
    __tracebackhide__ = True
    # Corners, at every seed: one block (the lesson's), x = 0 (h stays 0: "taken at the chain's input" is then right
    # and must not be named), a weight of 0 (an identity block) between weights of both signs, saturated blocks, and
    # the edge of the domain, where |w·h| reaches about 100.
    cases = [(0.5, [0.8]), (0.0, [0.7, -1.2, 0.4]), (-1.3, [0.9, 0.0, -0.6, 1.1]), (2.0, [4.0, -3.0, 5.0]),
             (-10.0, [5.0, -5.0] * 5), (10.0, [-0.3, 5.0])]
    if grading_seed is None:
        cases += [(0.5, [0.8, -0.5, 1.2, 0.3]), (-1.0, [1.5, 1.5, 1.5])]
    else:
        gen = generator("07/residual_chain_gradient", grading_seed)
        # |x| >= 0.5 and |w| >= 0.3: h really moves from block to block, so every listed mistake shows.
        cases += [(_signed(gen, 0.5, 2.0), [_signed(gen, 0.3, 1.5) for _ in range(randint(gen, 3, 10))])
                  for _ in range(3)]
    for x, weights in cases:
        with trial():
            what = f"residual_chain_gradient(x={x:g}, weights={weights})"
            given = list(weights)  # the caller's own list: the answer must leave it as it was
            received = call_learner(residual_chain_gradient, x, given, what=what, forbid=[Route.AUTOGRAD])
            if given != weights:
                raise proven_failure(f"{what} changed the list `weights` it was given (now {given}).", CHANGED_INPUT)
            received = expect_python_float(received, what=what)
            _expect_gradient(received, lambda t, weights=weights: residual_tanh_chain(t, weights), x, what=what,
                             symptoms=_residual_chain_symptoms(x, weights))


# ---------------------------------------------------------------------------------------------------- Part B

EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ divides by total_norm + 1e-6

PER_TENSOR = Misconception(
    "per-tensor instead of global clipping",
    "Clip by the GLOBAL norm: one norm over all parameters' gradients together, sqrt(sum of every squared element), "
    "and the same factor for every tensor. Clipping each tensor by its own norm changes the direction of the step.")
NO_SQUARE_ROOT = Misconception(
    "norm without the square root", "The L2 norm is sqrt(sum of squares); you used the sum of squares itself.")
CLIPPED_BELOW = Misconception(
    "clipping even below max_norm",
    "Scale only when the total norm exceeds max_norm: the factor is min(1, max_norm / (total_norm + 1e-6)); below "
    "the threshold the gradients must stay exactly as they were.")
NOT_MODIFIED = Misconception(
    "gradients not modified",
    "You did not change the parameters' .grad: multiply each p.grad in place (p.grad.mul_(coef)); scaling a copy "
    "(g = p.grad * coef) leaves p.grad unchanged.")
GENERATOR_TWICE = Misconception(
    "a generator of parameters iterated twice",
    "Your function left the gradients alone when `parameters` was a generator (like model.parameters()): a generator "
    "can be iterated only once, so a second loop over it sees nothing. Make a list first: params = list(parameters).",
    question="How many times can a generator such as model.parameters() be looped over?")
CLAMPED = Misconception(
    "clipped values instead of the norm",
    "clip_grad_norm_ rescales the whole gradient vector; clamping each element to [-max_norm, max_norm] is "
    "clip_grad_value_.")
NONE_NOT_SKIPPED = Misconception(
    "a .grad of None not skipped",
    "A parameter that took no part in the loss has .grad None: leave it out of the norm and leave it alone "
    "(`if p.grad is not None`).")
NONE_FILLED = Misconception(
    "a gradient given to a parameter that had none",
    "A parameter whose .grad is None took no part in the loss: clip_grad_norm_ skips it and leaves .grad None "
    "(an optimizer then skips it too, while a zero gradient would still feed momentum and weight decay).")
REPLACED_GRAD = Misconception(
    "replaced .grad instead of scaling it in place",
    "Scale the existing gradient tensors in place (p.grad.mul_(coef)), as clip_grad_norm_ does; assigning a new "
    "tensor to p.grad breaks every reference to the old one (an optimizer's or DDP's gradient buckets).")
ZERO_NORM = Misconception(
    "a division by a zero total norm",
    "When every gradient is zero the total norm is 0, and max_norm / total divides by zero. That is what the 1e-6 in "
    "max_norm / (total + 1e-6) is for (or scale only `if total > max_norm`): then nothing changes and the norm "
    "returned is 0.")
NORM_AFTER = Misconception(
    "returned the norm after clipping",
    "Return the total norm measured BEFORE clipping, as clip_grad_norm_ does (it is what you log to spot exploding "
    "gradients).")


def _parameters(grads: list[torch.Tensor | None]) -> list[nn.Parameter]:
    """Fresh float64 parameters whose .grad are copies of ``grads`` (None stays None)."""
    params = []
    for grad in grads:
        shape = (2,) if grad is None else grad.shape
        param = nn.Parameter(torch.linspace(-1.0, 1.0, math.prod(shape), dtype=torch.float64).reshape(shape))
        param.grad = None if grad is None else grad.clone()
        params.append(param)
    return params


def _scaled(grads: list[torch.Tensor], coefficients: list[float]) -> torch.Tensor:
    return torch.cat([(g * k).reshape(-1) for g, k in zip(grads, coefficients)])


def _clip_symptoms(grads: list[torch.Tensor], max_norm: float, generator_input: bool) -> list:
    """What the catalogued clipping mistakes produce for these gradients (None grads already dropped)."""
    norms = [float(g.norm()) for g in grads]
    total = math.sqrt(sum(n * n for n in norms))
    unchanged = GENERATOR_TWICE if generator_input else NOT_MODIFIED
    return [PER_TENSOR.looks_like(_scaled(grads, [min(1.0, max_norm / (n + EPS)) for n in norms])),
            NO_SQUARE_ROOT.looks_like(_scaled(grads, [min(1.0, max_norm / (total ** 2 + EPS))] * len(grads))),
            CLIPPED_BELOW.looks_like(_scaled(grads, [max_norm / (total + EPS)] * len(grads))),
            unchanged.looks_like(_scaled(grads, [1.0] * len(grads))),
            CLAMPED.looks_like(torch.cat([g.clamp(-max_norm, max_norm).reshape(-1) for g in grads]))]


def _random_grads(gen: torch.Generator, small: bool, ratio: tuple[float, float], max_norm: float) -> list:
    """Random float64 gradients whose global norm is max_norm times a factor drawn from ``ratio``."""
    count = randint(gen, 6, 10) if small else randint(gen, 2, 5)
    shapes = [choice(gen, [(2,), (3,)]) if small else choice(gen, [(3,), (2, 3), (4, 2), (5,)]) for _ in range(count)]
    grads = [torch.randn(shape, generator=gen, dtype=torch.float64) * float(uniform(gen, (), 0.2, 3.0))
             for shape in shapes]
    total = math.sqrt(sum(float(g.norm()) ** 2 for g in grads))
    return [g * (float(uniform(gen, (), *ratio)) * max_norm / total) for g in grads]


def _clip_corners():
    """The corners of the domain, run at every seed: a single parameter; 0-d gradients (shape ()) beside a matrix;
    every gradient zero (total norm 0: nothing changes, 0 is returned), also from a generator with a None among them;
    the total norm exactly equal to max_norm (PyTorch scales by 13 / (13 + 1e-6), within the tolerance of not
    scaling)."""
    def t(*values):
        return torch.tensor(values, dtype=torch.float64)
    lesson = [t(3.0, 4.0), t(12.0)]
    yield "a single parameter above max_norm", [t(-6.0, 8.0, 0.0)], 2.5, False
    yield "0-d gradients beside a matrix", [torch.tensor(-2.0, dtype=torch.float64), t(1.0, -3.0).reshape(1, 2),
                                            torch.tensor(0.5, dtype=torch.float64)], 1.0, False
    yield "every gradient zero", [torch.zeros(2, dtype=torch.float64), torch.zeros((), dtype=torch.float64)], 1.0, False
    yield "every gradient zero", [None, torch.zeros(3, dtype=torch.float64)], 0.5, True
    yield "the total norm exactly max_norm", lesson, 13.0, False


def _clip_cases(grading_seed: int | None):
    """(description, list of .grad tensors or None, max_norm, pass a generator?) for each case: the corners
    (:func:`_clip_corners`) first, at every seed, then the visible or drawn cases.

    Every mistake shows in at least two cases: two below max_norm (clipping anyway), two generators above it (a
    second loop sees nothing), two with a None gradient, the rest above max_norm.
    """
    yield from _clip_corners()
    if grading_seed is None:
        lesson = [torch.tensor([3.0, 4.0], dtype=torch.float64), torch.tensor([12.0], dtype=torch.float64)]
        small = [torch.tensor([0.6, 0.8], dtype=torch.float64) * k for k in (1.0, 2.0, 0.5, 1.5, 3.0, 0.25)]
        yield "the lesson's example", lesson, 1.0, False
        yield "the total norm below max_norm", lesson, 20.0, False
        yield "a .grad that is None", [lesson[0], None, lesson[1]], 5.0, False
        yield "many small tensors", small, 1.5, False
        yield "many small tensors", small, 2.0, True
        yield "a .grad that is None", [None, *lesson], 1.0, True
        yield "the total norm below max_norm", small, 5.0, False
        return
    gen = generator("07/clip_grad_norm", grading_seed)
    # (description, many small tensors?, total_norm / max_norm range, a None grad?, generator?)
    kinds = [("the total norm above max_norm", False, (2.0, 10.0), False, False),
             ("the total norm below max_norm", False, (0.2, 0.8), False, False),
             ("the total norm below max_norm", True, (0.2, 0.8), False, False),
             ("a .grad that is None", False, (2.0, 10.0), True, False),
             ("many small tensors", True, (2.0, 5.0), False, False),
             ("many small tensors", True, (1.5, 4.0), True, True),
             ("the total norm above max_norm", False, (1.5, 6.0), False, True)]
    for description, small, ratio, with_none, as_generator in kinds:
        max_norm = round(float(uniform(gen, (), 1.0, 5.0)), 3)
        grads = _random_grads(gen, small, ratio, max_norm)
        if with_none:
            grads.insert(randint(gen, 0, len(grads)), None)
        yield description, grads, max_norm, as_generator


def _describe_clip_case(description: str, grads: list, max_norm: float, as_generator: bool) -> str:
    shapes = ", ".join("None" if g is None else str(tuple(g.shape)) for g in grads)
    container = "a generator" if as_generator else "a list"
    return (f"clip_grad_norm(parameters, max_norm={max_norm:g}) with {description}: parameters = {container} of "
            f"{len(grads)} parameters whose .grad have shapes [{shapes}]")


def _expect_only_grads_scaled(params: list[nn.Parameter], before: list[dict], what: str) -> None:
    """The contract of Part B: the parameters are untouched; each .grad is the same tensor, scaled in place."""
    __tracebackhide__ = True
    for index, (param, state) in enumerate(zip(params, before)):
        changed = []
        if not torch.equal(param.detach(), state["values"]) or param._version != state["version"]:
            changed.append("its values (or it was changed in place)")
        if param.requires_grad != state["requires_grad"]:
            changed.append("its requires_grad")
        if changed:
            raise proven_failure(f"{what}: parameter {index} itself changed ({' and '.join(changed)}). "
                                 "clip_grad_norm changes the gradients and nothing else.", CHANGED_INPUT)
        if state["grad"] is None:
            if param.grad is not None:
                raise proven_failure(f"{what}: parameter {index} had .grad None and now has a .grad.", NONE_FILLED)
            continue
        if param.grad is None or param.grad.shape != state["grad_shape"]:
            raise proven_failure(f"{what}: parameter {index}'s .grad was removed or reshaped; scale it in place.",
                                 REPLACED_GRAD)
        if param.grad.untyped_storage().data_ptr() != state["grad"]:
            raise proven_failure(f"{what}: parameter {index}'s .grad is a new tensor, not the old one scaled in "
                                 "place.", REPLACED_GRAD)


def _run_clip_case(clip_grad_norm, description, grads, max_norm, as_generator) -> None:
    __tracebackhide__ = True
    what = _describe_clip_case(description, grads, max_norm, as_generator)
    reference, params = _parameters(grads), _parameters(grads)
    want_norm = torch.nn.utils.clip_grad_norm_(reference, max_norm)
    before = [{"values": p.detach().clone(), "version": p._version, "requires_grad": p.requires_grad,
               "grad": None if p.grad is None else p.grad.untyped_storage().data_ptr(),
               "grad_shape": None if p.grad is None else p.grad.shape} for p in params]
    argument = (p for p in params) if as_generator else params
    try:
        returned = call_learner(clip_grad_norm, argument, max_norm, what=what, forbid=[Route.CLIPPING],
                                may_change=["parameters"])
    except GradingFailure as failure:
        if failure.proven is None and None in grads and "NoneType" in failure.message:
            raise GradingFailure(failure.message, suspects=(NONE_NOT_SKIPPED,)) from None
        if failure.proven is None and float(want_norm) == 0.0 and "ZeroDivisionError" in failure.message:
            raise proven_failure(failure.message, ZERO_NORM) from None
        raise
    _expect_only_grads_scaled(params, before, what)
    present = [g for g in grads if g is not None]
    expect_close(torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None]),
                 torch.cat([p.grad.reshape(-1) for p in reference if p.grad is not None]),
                 what=f"{what}: the .grad values afterwards (all parameters, flattened in order)",
                 source="clip_grad_norm_", rtol=1e-5, atol=1e-10,
                 symptoms=_clip_symptoms(present, max_norm, as_generator))
    if not isinstance(returned, torch.Tensor):
        raise GradingFailure(f"{what} returned {type(returned).__name__} ({returned!r:.60}); return the total norm "
                             "as a 0-d tensor, as torch.nn.utils.clip_grad_norm_ does.")
    expect_no_alias(returned, {"parameters": params}, what=f"{what}: the returned norm")
    total = float(want_norm)
    expect_close(returned, want_norm, what=f"{what}: the returned total norm", source="clip_grad_norm_",
                 rtol=1e-5, atol=1e-10,
                 symptoms=[NO_SQUARE_ROOT.looks_like(total ** 2), NORM_AFTER.looks_like(min(total, max_norm))])


@check
def check_clip_grad_norm(clip_grad_norm, grading_seed: int | None = None) -> None:
    """Part B: clip_grad_norm(parameters, max_norm) does what torch.nn.utils.clip_grad_norm_ does, from scratch: it
    scales the .grad tensors in place, changes nothing else, and returns the norm before clipping as a 0-d tensor.

    Domain (the part's text): ``parameters`` a list or a generator of float64 parameters of any shape, 0-d included,
    at least one of which has a .grad (others may have None); gradients of any sign, all zero included;
    ``max_norm`` > 0, the total norm below, equal to or above it. Corners pinned at every seed: :func:`_clip_corners`.
    Contracts checked: no torch.nn.utils clipping (Route); each .grad the same tensor, scaled in place (its storage
    is compared, so `p.grad = ...` or `p.grad.data = ...` fails); a None .grad stays None; the parameters' values,
    versions and requires_grad unchanged; the norm returned is a 0-d tensor sharing no memory with any .grad.
    """
    __tracebackhide__ = True
    for case in _clip_cases(grading_seed):
        with trial():
            _run_clip_case(clip_grad_norm, *case)


# ---------------------------------------------------------------------------------------------------- Part C

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks")

REVERSED = Misconception(
    "layers in reverse order",
    "Backward reaches the last layer first, so hooks fire from last to first. Store each norm at its layer's "
    "position (first layer = index 0), or reverse the list.")
WEIGHT_GRADIENTS = Misconception(
    "weight gradients instead of output gradients",
    "Measure the gradient with respect to each layer's OUTPUT (what a backward hook receives as grad_output[0], or a "
    "tensor hook on the output), not layer.weight.grad.")
HOOKS_LEFT = Misconception(
    "hooks left registered",
    "Keep the handle that each register_*_hook returns and call handle.remove() before returning; otherwise every "
    "later forward or backward pass runs your hooks again.")
PER_EXAMPLE_MEAN = Misconception(
    "per-example norms averaged",
    "The part asks for one norm over the whole gradient tensor (all examples together): grad.norm(), not "
    "grad.norm(dim=-1).mean() or a mean over the batch of each example's norm.")
KEPT_BETWEEN_CALLS = Misconception(
    "norms kept between calls",
    "Each call must build and return a new list: a list created outside the function (or a default argument) keeps "
    "the previous call's norms, or changes under the caller's feet the list an earlier call returned.")
BACKWARD_CONTRACT = Misconception(
    "not exactly one backward pass",
    "Run loss_fn(model(x)).backward() exactly once: it adds this loss's gradient into every .grad, as the part's "
    "contract asks. torch.autograd.grad returns gradients without touching .grad, and a second backward adds them "
    "twice (or fails on a graph already freed).")
TOP_LEVEL_ONLY = Misconception(
    "only the model's top-level layers",
    "model.children() lists only the modules directly inside the model, not the Linear layers nested in its blocks "
    "(a ModuleList, a residual block). model.modules() walks the whole tree: use it to find every nn.Linear.")
GRADS_WIPED = Misconception(
    "the caller's gradients wiped",
    "The caller may be accumulating gradients (several batches before one step): backward adds into .grad, and "
    "your function must leave each .grad as what it held before plus this loss's gradient. Do not call "
    "model.zero_grad() or set .grad to None inside it.")


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


LOSSES = {"mean(out**2)": lambda out: out.pow(2).mean(), "mean((out - 1)**2)": lambda out: (out - 1).pow(2).mean()}


#: The corners of Part C's domain, run at every seed: (kind, sizes, activation, batch, loss, last layer zeroed?).
#: One Linear and a batch of one; a stack whose last Linear has zero weights, so that the gradient arriving at every
#: earlier layer is exactly 0 (the norms are 0 there, and no mistake may be named on the zeros).
LAYER_CORNERS = [("plain", [3, 2], nn.Tanh, 1, "mean(out**2)", False),
                 ("plain", [2, 4, 3, 2], nn.Sigmoid, 3, "mean((out - 1)**2)", True)]


def _layer_cases(grading_seed: int | None):
    """(model description, model, loss description, loss_fn, x) for each case; everything float64. The corners
    (:data:`LAYER_CORNERS`) first, at every seed, then the visible or drawn cases."""
    specs = list(LAYER_CORNERS)
    if grading_seed is None:
        init_seed, gen = 0, torch.Generator().manual_seed(7)
        specs += [("plain", [3, 6, 6, 5, 2], nn.Tanh, 4, "mean(out**2)", False),
                  ("residual", (3, 5, 2, 3), nn.Tanh, 4, "mean((out - 1)**2)", False)]
    else:
        gen = generator("07/layer_grad_norms", grading_seed)
        init_seed = int(torch.randint(2**31, (), generator=gen))
        for kind in ("plain", "residual"):
            width = randint(gen, 3, 6)
            sizes = ([randint(gen, 2, 4)] + [width] * randint(gen, 2, 4) + [randint(gen, 1, 3)] if kind == "plain"
                     else (randint(gen, 2, 4), width, randint(gen, 1, 3), randint(gen, 2, 3)))
            specs.append((kind, sizes, choice(gen, [nn.Tanh, nn.Sigmoid]), randint(gen, 2, 5),
                          choice(gen, list(LOSSES)), False))
    for kind, sizes, activation, batch, loss_name, zero_last in specs:
        with torch.random.fork_rng(devices=[]):  # nn.Linear draws its initial weights from the global generator
            torch.manual_seed(init_seed)
            if kind == "plain":
                model = _plain_mlp(list(sizes), activation).double()
                name = f"Linear layers {list(sizes)} with {activation.__name__} between them"
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


def _as_norms(value: Any, *, what: str, count: int, first: list | None, top_level: int | None = None) -> torch.Tensor:
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
    expected = torch.stack([g.norm() for g in by_autograd])
    fd = torch.stack([g.norm() for g in by_fd])
    gradient = _parameter_gradients(model, loss_fn, x)
    per_example = torch.stack([g.reshape(g.shape[0], -1).norm(dim=1).mean() for g in by_autograd])
    symptoms = [REVERSED.looks_like(expected.flip(0)), SQUARED_NORMS.looks_like(expected ** 2),
                PER_EXAMPLE_MEAN.looks_like(per_example),
                WEIGHT_GRADIENTS.looks_like(_weight_gradient_norms(model, loss_fn, x))]
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
            answer = call_learner(layer_grad_norms, model, loss_fn, x, what=what, routes=routes, may_change=["model"])
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
                norms = _as_norms(answer, what=what, count=count, first=None, top_level=top_level)
            else:
                norms = _as_norms(answer, what=what, count=count, first=first, top_level=top_level)
            expect_close(norms, expected, what=f"{what}: ‖∂loss/∂(output of each Linear)‖, first to last", fd=fd,
                         rtol=1e-6, atol=1e-10, symptoms=symptoms)
            _expect_one_backward(model, before, gradient, routes, what)


@check
def check_layer_grad_norms(layer_grad_norms, grading_seed: int | None = None) -> None:
    """Part C: layer_grad_norms(model, loss_fn, x) = ‖∂loss/∂(output of each nn.Linear)‖, first to last, as Python
    floats, collected with hooks that are removed, in exactly one backward pass that changes nothing but .grad.

    Domain (the part's text): ``model`` a float64 nn.Module with at least one nn.Linear, whose modules() order is the
    order the layers run in (plain stacks and residual MLPs); ``loss_fn`` a scalar loss of the output; ``x`` a
    float64 batch (of one or more) that does not require grad. Corners pinned at every seed (:data:`LAYER_CORNERS`):
    one Linear with a batch of one, and output gradients exactly 0. Contracts checked: a list of Python floats, one
    per Linear; no hook left (module and global hook dictionaries); a new list at every call (called twice); exactly
    one backward run (Routes); every .grad equals what it held plus this loss's gradient; the parameters' values and
    requires_grad, x and loss_fn unchanged (call_learner's snapshot).
    """
    __tracebackhide__ = True
    for case in _layer_cases(grading_seed):
        _run_layer_case(layer_grad_norms, *case)
