"""Part A: layer normalisation's backward pass, by hand: (dx, dγ, dβ) for y = F.layer_norm(x, (D,), γ, β, eps)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...checking import check, trial
from ...seeding import uniform
from ..cases import case_stream
from .common import Case, distinct, literal_symptoms, make_case, run_case
from .misconceptions import (
    CANCELLING_VARIANCE,
    DGAMMA_WITHOUT_XHAT,
    EPS_IGNORED,
    EPS_MISSING,
    EPS_OUTSIDE,
    GAMMA_FORGOTTEN,
    MEAN_PATH_MISSING,
    NORMALISATION_AS_CONSTANT,
    PARAMETER_GRADIENT_AVERAGED,
    UNBIASED_VARIANCE,
    VARIANCE_PATH_MISSING,
)

Tensor = torch.Tensor

#: Part A's tolerance: the reference agrees with autograd to about 1e-10 relative on rows near 1000 with a spread of
#: 0.01 (x̂ loses the digits the offset takes); the variance as mean(x²) − mean(x)² is off by about 1e-5 there.
LN_RTOL, LN_ATOL = 1e-8, 1e-10


def _layernorm_gradients(x: Tensor, gamma: Tensor, dy: Tensor, eps: float, *, variance: str = "biased",
                         sigma: str = "inside", paths: str = "both", use_gamma: bool = True,
                         dgamma_by_xhat: bool = True, parameters: str = "sum") -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dγ, dβ) of a hand-written layer-norm backward, with the knobs that reproduce the usual mistakes."""
    features = x.shape[-1]
    mu = x.mean(dim=-1, keepdim=True)
    if variance == "cancelling":
        var = (x * x).mean(dim=-1, keepdim=True) - mu * mu
    else:
        var = ((x - mu) ** 2).sum(dim=-1, keepdim=True) / (features - 1 if variance == "unbiased" else features)
    sd = {"inside": lambda: torch.sqrt(var + eps), "missing": lambda: torch.sqrt(var),
          "outside": lambda: torch.sqrt(var) + eps}[sigma]()
    xhat = (x - mu) / sd
    dxhat = dy * gamma if use_gamma else dy
    dx = dxhat
    if paths in ("both", "mean"):
        dx = dx - dxhat.mean(dim=-1, keepdim=True)
    if paths in ("both", "variance"):
        dx = dx - xhat * (dxhat * xhat).mean(dim=-1, keepdim=True)
    rows = lambda t: t.reshape(-1, features)  # noqa: E731
    reduce = (lambda t: rows(t).mean(dim=0)) if parameters == "mean" else (lambda t: rows(t).sum(dim=0))
    return dx / sd, reduce(dy * xhat if dgamma_by_xhat else dy), reduce(dy)


def _layernorm_case(x: Tensor, gamma: Tensor, beta: Tensor, dy: Tensor, eps: float | None) -> Case:
    """One call (eps None: the default, not passed) and the mistakes it can recognise."""
    value = 1e-5 if eps is None else eps
    knobs = [(NORMALISATION_AS_CONSTANT, dict(paths="none")), (MEAN_PATH_MISSING, dict(paths="variance")),
             (VARIANCE_PATH_MISSING, dict(paths="mean")), (EPS_MISSING, dict(sigma="missing")),
             (EPS_OUTSIDE, dict(sigma="outside")), (CANCELLING_VARIANCE, dict(variance="cancelling")),
             (GAMMA_FORGOTTEN, dict(use_gamma=False)), (DGAMMA_WITHOUT_XHAT, dict(dgamma_by_xhat=False)),
             (PARAMETER_GRADIENT_AVERAGED, dict(parameters="mean"))]
    if x.shape[-1] > 1:
        knobs.append((UNBIASED_VARIANCE, dict(variance="unbiased")))
    wrong = [(mistake, _layernorm_gradients(x, gamma, dy, value, **settings)) for mistake, settings in knobs]
    if eps is not None and eps != 1e-5:
        wrong.append((EPS_IGNORED, _layernorm_gradients(x, gamma, dy, 1e-5)))
    # Mistakes such as ε outside the root change the answer by about 1e-5 relative: matched closely, so that two
    # of them are never taken for each other.
    symptoms = tuple(literal_symptoms([(mistake, grads[i]) for mistake, grads in wrong], rtol=1e-9, atol=1e-11)
                     for i in range(3))
    features = x.shape[-1]

    def loss(x, gamma, beta):
        return (F.layer_norm(x, (features,), gamma, beta, value) * dy).sum()

    options = {} if eps is None else {"eps": eps}
    return make_case("layernorm_backward", {"x": x, "gamma": gamma, "dy": dy},
                     {"dx": "x", "dgamma": "gamma", "dbeta": "beta"}, loss, (x, gamma, beta), symptoms,
                     options=options, note=f"D = {features}, eps = {value:g}", rtol=LN_RTOL, atol=LN_ATOL)


def _far_rows(gen: torch.Generator, shape: tuple[int, ...]) -> Tensor:
    """Rows near ±1000 with a spread of 0.01: their variance (about 1e-4) is what mean(x²) − mean(x)² cancels."""
    offsets = torch.tensor([1000.0, -700.0, 400.0], dtype=torch.float64)
    count = math.prod(shape[:-1])
    rows = offsets.repeat(count // 3 + 1)[:count].reshape(*shape[:-1], 1)
    return rows + uniform(gen, shape, -0.02, 0.02)


def _corners(gen: torch.Generator) -> list[tuple[Tensor, float | None]]:
    """Part A's corners, (x, eps), the same kinds at every seed: a constant row (var = 0) with eps = 0.1, D = 1, a
    vector with eps = 0.1, an empty batch, rows far from 0 (2-D, and 3-D with an ordinary row among them)."""
    constant = uniform(gen, (3, 5))
    constant[1] = 0.7
    far_3d = _far_rows(gen, (2, 3, 4))
    far_3d[0, 1] = uniform(gen, (4,))
    return [(constant, 0.1), (uniform(gen, (2, 1)), None), (uniform(gen, (6,)), 0.1),
            (torch.zeros((0, 4), dtype=torch.float64), None), (_far_rows(gen, (3, 5)), None), (far_3d, None)]


@check
def check_layernorm_backward(layernorm_backward, grading_seed: int | None = None) -> None:
    """Part A: for y = F.layer_norm(x, (D,), γ, β, eps), layernorm_backward(x, gamma, dy, eps=1e-5) returns
    (dx, dγ, dβ), by hand (no autograd), new float64 tensors, arguments unchanged.

    Domain: x float64 of shape (..., D), any number of leading dimensions (none: one row), each of any size (0: an
    empty batch), D >= 1, any finite values; gamma (D,), dy of x's shape; eps > 0, passed by keyword or left at its
    default. Corners at every seed (:func:`_corners`): a constant row (var = 0) and a vector, both with eps = 0.1,
    D = 1 (dx = 0), an empty batch, rows near ±1000 with a spread of 0.01 (2-D and 3-D); then a batch and
    a 3-D stack (public: fixed sizes; hidden: drawn, with eps 1e-5 or 1e-3)."""
    __tracebackhide__ = True
    gen = case_stream("04/layernorm", grading_seed)
    if grading_seed is None:
        drawn = [((4, 6), None), ((2, 3, 5), None)]
    else:
        n, d = distinct(gen, 2, 2, 7)
        drawn = [((n, d), None), ((*distinct(gen, 2, 2, 4), d), 1e-3)]
    inputs = _corners(gen) + [(uniform(gen, shape), eps) for shape, eps in drawn]
    for x, eps in inputs:
        features = x.shape[-1]
        case = _layernorm_case(x, uniform(gen, (features,), 0.5, 2.0) * torch.where(
            uniform(gen, (features,)) < 0, -1.0, 1.0), uniform(gen, (features,)), uniform(gen, tuple(x.shape), -1, 1),
            eps)
        with trial():
            run_case(layernorm_backward, case)
