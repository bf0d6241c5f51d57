"""Part A of exercise 07: log10_gradient_profile, the size of the gradient at every layer of a deep linear-tanh
chain (plain or residual), by hand and without leaving float64's range. Oracles: the gradient carried back one layer at
a time, each layer's vector-Jacobian product by autograd and by central differences in float64, renormalised between
layers (so that 700 layers of it stay in range); the symptoms of the catalogued mistakes are the same walk with one
mistake made."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Route,
    call_learner,
    check,
    expect_close,
    proven_failure,
    trial,
)
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    DIAGONAL_SIDE,
    FLOAT32_PROFILE,
    IDENTITY_FOR_PLAIN,
    NATURAL_LOG,
    NO_IDENTITY,
    NOT_A_FLOAT,
    NOT_TRANSPOSED,
    OUT_OF_RANGE,
    PRODUCT_OF_SIZES,
    PROFILE_REVERSED,
    TANH_AT_OUTPUT,
)

Tensor = torch.Tensor
#: log10 of float64's range, with a margin: a gradient whose log10 lies outside cannot be held as a float64 vector.
FLOAT64_LOG10_RANGE = (-300.0, 300.0)
#: The largest pre-activation the part allows: every tanh' = 1 - tanh(z)^2 is then at least 1e-10 in float64.
MAX_PRE_ACTIVATION = 12.0


@dataclass
class Chain:
    """h_0 = x; z_k = W_k h_(k-1) + b_k; h_k = tanh(z_k) (plain) or h_(k-1) + tanh(z_k) (residual); the gradient
    arriving at the output is ``upstream``."""

    description: str
    weights: list[Tensor]
    biases: list[Tensor]
    x: Tensor
    upstream: Tensor
    residual: bool

    def layer(self, k: int, h: Tensor) -> Tensor:
        branch = torch.tanh(self.weights[k] @ h + self.biases[k])
        return h + branch if self.residual else branch

    def forward(self) -> tuple[list[Tensor], list[Tensor]]:
        """(the pre-activations z_1..z_n, the activations h_0..h_n), computed once."""
        if not hasattr(self, "_forward"):
            zs, hs = [], [self.x]
            for w, b in zip(self.weights, self.biases):
                zs.append(w @ hs[-1] + b)
                hs.append(hs[-1] + torch.tanh(zs[-1]) if self.residual else torch.tanh(zs[-1]))
            self._forward = zs, hs
        return self._forward


def _carried_back(chain: Chain, step: Callable[[int, Tensor, Tensor], Tensor]) -> list[float]:
    """log10 ‖∂L/∂h_k‖ for k = 0..n: the gradient carried back from the output one layer at a time, ``step(k, h,
    v)`` giving vᵀJ_k at the layer's input h, the vector renormalised after every layer and its logs added up."""
    _, hs = chain.forward()
    v = chain.upstream.clone()
    total = math.log10(float(v.norm()))
    profile = [total]
    v = v / v.norm()
    for k in reversed(range(len(chain.weights))):
        v = step(k, hs[k], v)
        size = float(v.norm())
        total += math.log10(size) if size > 0 else -math.inf  # only a mistaken walk can lose the whole vector
        profile.append(total)
        v = v / size if size > 0 else v
    return profile[::-1]


def _oracle(chain: Chain, gradient: Callable) -> list[float]:
    """The profile by an oracle (autograd or central differences) applied to each layer's vᵀ·layer(h)."""
    def step(k: int, h: Tensor, v: Tensor) -> Tensor:
        return gradient(lambda h_in: (v * chain.layer(k, h_in)).sum(), h)[0]
    return _carried_back(chain, step)


def _by_hand(chain: Chain, mistake: Misconception | None = None) -> list[float]:
    """The profile by the hand formula vᵀJ_k = Wᵀ(tanh'(z) ⊙ v) (+ v for a residual layer), or with ``mistake``."""
    zs, hs = chain.forward()

    def step(k: int, h: Tensor, v: Tensor) -> Tensor:
        w = chain.weights[k]
        slope = 1 - (hs[k + 1] if mistake is TANH_AT_OUTPUT else torch.tanh(zs[k])) ** 2
        if mistake is NOT_TRANSPOSED:
            back = slope * (w @ v)
        elif mistake is DIAGONAL_SIDE:
            back = slope * (w.T @ v)
        else:
            back = w.T @ (slope * v)
        identity = (chain.residual and mistake is not NO_IDENTITY) or (not chain.residual and mistake is
                                                                       IDENTITY_FOR_PLAIN)
        return back + v if identity else back

    return _carried_back(chain, step)


def _product_of_sizes(chain: Chain, matrix_norm: Callable[[Tensor], Tensor]) -> list[float]:
    """The scalar chain's trick applied to matrices: log10 of each layer's Jacobian size, added up from the output."""
    zs, _ = chain.forward()
    eye = torch.eye(len(chain.x), dtype=torch.float64)
    total = math.log10(float(chain.upstream.norm()))
    profile = [total]
    for k in reversed(range(len(chain.weights))):
        jacobian = torch.diag(1 - torch.tanh(zs[k]) ** 2) @ chain.weights[k] + (eye if chain.residual else 0)
        total += math.log10(float(matrix_norm(jacobian)))
        profile.append(total)
    return profile[::-1]


def _reflection(gen: torch.Generator, d: int) -> Tensor:
    """A random orthogonal matrix (a Householder reflection), cheap to draw."""
    u = torch.randn(d, 1, generator=gen, dtype=torch.float64)
    return torch.eye(d, dtype=torch.float64) - 2 * (u @ u.T) / float(u.T @ u)


def _linear_regime(description: str, gen: torch.Generator, d: int, n: int, gain: float) -> Chain:
    """A plain chain from x = 0 with zero biases: every z is 0 and every tanh' exactly 1, so the chain is linear and
    each layer, gain times a reflection, scales the gradient by exactly ``gain``."""
    zeros = torch.zeros(d, dtype=torch.float64)
    return Chain(description, [gain * _reflection(gen, d) for _ in range(n)], [zeros] * n, zeros.clone(),
                 uniform(gen, (d,), -2.0, 2.0), residual=False)


def _drawn(gen: torch.Generator, residual: bool, depth: tuple[int, int]) -> Chain:
    """A chain with Gaussian weights of a drawn gain (divided by √n on a residual branch, as deep residual networks
    scale theirs), redrawn until no pre-activation exceeds :data:`MAX_PRE_ACTIVATION`."""
    for _ in range(20):
        d, n = randint(gen, 2, 5), randint(gen, *depth)
        gain = round(float(uniform(gen, (), 0.6, 1.8)), 2)
        scale = gain / math.sqrt(d) / (math.sqrt(n) if residual else 1.0)
        weights = [scale * torch.randn(d, d, generator=gen, dtype=torch.float64) for _ in range(n)]
        biases = [uniform(gen, (d,), -0.2, 0.2) for _ in range(n)]
        chain = Chain(f"{n} {'residual' if residual else 'plain'} layers of width {d}, Gaussian weights of gain "
                      f"{gain:g}{' / √n' if residual else ''}", weights, biases, uniform(gen, (d,), -1.0, 1.0),
                      uniform(gen, (d,), -2.0, 2.0), residual)
        if max(float(z.abs().max()) for z in chain.forward()[0]) < MAX_PRE_ACTIVATION:
            return chain
    raise CourseBug("no chain within the part's domain in 20 draws.")


def _profile_corners() -> list[Chain]:
    """The corners of Part A's domain, at every seed: width 1 (the lesson's scalar chain); one residual layer whose
    branch is zero (its Jacobian is the identity); a short residual chain whose matrices are not symmetric; and two
    linear chains of 150 layers whose gradient leaves float64's range, downwards (gain 0.005, about 1e-345) and
    upwards (gain 200, about 1e+345)."""
    gen = torch.Generator().manual_seed(707)

    def t(*values):
        return torch.tensor(values, dtype=torch.float64)
    scalar = Chain("3 plain layers of width 1 (a scalar chain)", [t(0.5).reshape(1, 1), t(-2.0).reshape(1, 1),
                                                                  t(1.5).reshape(1, 1)], [t(0.1), t(-0.3), t(0.2)],
                   t(0.7), t(-1.0), residual=False)
    zero_branch = Chain("1 residual layer of width 3 whose weights are all 0", [torch.zeros(3, 3, dtype=torch.float64)],
                        [t(0.5, -0.5, 0.0)], t(1.0, -2.0, 0.5), t(0.3, 0.4, -1.2), residual=True)
    square = [t(0.9, -1.2, 0.4, 0.3), t(-0.5, 0.8, 1.1, 0.2), t(1.3, 0.1, -0.7, -0.6), t(0.2, 1.5, -0.4, 0.9)]
    short = Chain("4 residual layers of width 2", [w.reshape(2, 2) for w in square],
                  [t(0.1, -0.2), t(0.0, 0.3), t(-0.1, 0.1), t(0.2, 0.0)], t(0.8, -0.4), t(1.0, 0.5), residual=True)
    return [scalar, zero_branch, short,
            _linear_regime("150 plain layers of width 3 from x = 0 with zero biases, each 0.005 times a reflection",
                           gen, 3, 150, 0.005),
            _linear_regime("150 plain layers of width 2 from x = 0 with zero biases, each 200 times a reflection",
                           gen, 2, 150, 200.0)]


def _profile_cases(grading_seed: int | None) -> list[Chain]:
    """The corners, then a drawn plain and a drawn residual chain (deep, and so wide enough that every matrix
    mistake shows), from the public stream for the visible test or the grading seed's."""
    gen = case_stream("07/log10_gradient_profile", grading_seed)
    return _profile_corners() + [_drawn(gen, False, (20, 80)), _drawn(gen, True, (40, 150))]


def _read_profile(answer, count: int, what: str) -> Tensor:
    __tracebackhide__ = True
    if type(answer) not in (list, tuple) or len(answer) != count:
        size = f" of length {len(answer)}" if type(answer) in (list, tuple) else ""
        raise GradingFailure(f"{what} returned {type(answer).__name__}{size}; expected a list of {count} Python "
                             "floats, one per activation h_0 .. h_n.")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in answer):
        kinds = sorted({type(v).__name__ for v in answer})
        raise proven_failure(f"{what} returned a list of {', '.join(kinds)}; the part asks for Python floats.",
                             NOT_A_FLOAT)
    return torch.tensor([float(v) for v in answer], dtype=torch.float64)


def _run_profile_case(log10_gradient_profile, chain: Chain) -> None:
    __tracebackhide__ = True
    n, d = len(chain.weights), len(chain.x)
    what = (f"log10_gradient_profile(weights, biases, x, upstream, residual={chain.residual}) for {chain.description}"
            f" (x = {chain.x.tolist() if d <= 3 else f'a vector of {d}'})")
    expected = torch.tensor(_oracle(chain, autograd_gradient), dtype=torch.float64)
    low, high = FLOAT64_LOG10_RANGE
    beyond = bool(((expected < low) | (expected > high)).any())
    try:
        answer = call_learner(log10_gradient_profile, chain.weights, chain.biases, chain.x, chain.upstream,
                              chain.residual, what=what, forbid=[Route.AUTOGRAD])
    except GradingFailure as failure:
        if failure.proven is None and beyond and any(word in failure.message for word in ("math domain", "overflow")):
            raise GradingFailure(failure.message, suspects=(OUT_OF_RANGE,)) from None
        raise
    got = _read_profile(answer, n + 1, what)
    fd = torch.tensor(_oracle(chain, central_difference), dtype=torch.float64)
    right = bool(torch.isfinite(got).all()) and bool(((got - expected).abs() <= 1e-9 + 1e-12 * expected.abs()).all())
    symptoms = [] if right else _profile_symptoms(chain, expected, beyond)  # only a wrong answer needs them
    expect_close(got, expected, what=f"{what}: log10 ‖∂L/∂h_k‖ for k = 0 .. {n}", fd=fd, rtol=1e-12, atol=1e-9,
                 symptoms=symptoms)


def _profile_symptoms(chain: Chain, expected: Tensor, beyond: bool) -> list:
    """What the catalogued mistakes give on this chain."""
    symptoms = [mistake.looks_like(_by_hand(chain, mistake), rtol=1e-9, atol=1e-7)
                for mistake in (NOT_TRANSPOSED, DIAGONAL_SIDE, TANH_AT_OUTPUT, NO_IDENTITY, IDENTITY_FOR_PLAIN)]
    symptoms += [PRODUCT_OF_SIZES.looks_like(_product_of_sizes(chain, norm), rtol=1e-9, atol=1e-7)
                 for norm in (lambda j: torch.linalg.matrix_norm(j, 2), torch.linalg.matrix_norm)]
    symptoms += [NATURAL_LOG.looks_like(expected * math.log(10), rtol=1e-9, atol=1e-7),
                 PROFILE_REVERSED.looks_like(expected.flip(0), rtol=1e-9, atol=1e-7),
                 OUT_OF_RANGE.when(lambda answer: beyond and not bool(torch.isfinite(answer).all())),
                 FLOAT32_PROFILE.when(lambda answer: bool(torch.isfinite(answer).all()) and
                                      1e-9 < float((answer - expected).abs().max()) < 1e-3)]
    return symptoms


@check
def check_log10_gradient_profile(log10_gradient_profile, grading_seed: int | None = None) -> None:
    """Part A: log10_gradient_profile(weights, biases, x, upstream, residual) = [log10 ‖∂L/∂h_k‖ for k = 0..n] of a
    linear-tanh chain, by hand (no autograd), to 1e-9, where the gradient itself may lie outside float64's range.

    Domain (the part's text): ``weights`` n >= 1 float64 (d, d) matrices, ``biases`` n vectors of d, ``x`` and
    ``upstream`` float64 vectors of d >= 1 entries, ``upstream`` not zero; every pre-activation at most
    :data:`MAX_PRE_ACTIVATION` in size; up to 300 layers. Corners pinned at every seed: :func:`_profile_corners`.
    Contracts checked: a list of n + 1 Python floats, entry k for h_k (the input first); no autograd (Routes); the
    arguments unchanged (call_learner's snapshot).
    """
    __tracebackhide__ = True
    for chain in _profile_cases(grading_seed):
        with trial():
            _run_profile_case(log10_gradient_profile, chain)
