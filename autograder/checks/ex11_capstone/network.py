"""Part E: ``mlp_gradients``, the whole backward of the digits network Linear -> BatchNorm -> SiLU -> Linear with a
mean cross-entropy, by hand; and the network itself (:func:`mlp_logits`, :func:`mlp_loss`, :func:`network_gradients`),
which the exercise's text and Part F use."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...checking import (
    GradingFailure,
    Misconception,
    Route,
    call_learner,
    check,
    expect_close,
    expect_tensor,
    trial,
)
from ...checking import proven_failure as _proven
from ...oracles import autograd_gradient, central_difference
from ...routes import watch_calls
from ...seeding import uniform
from ..cases import case_stream, randint
from ..ex04_layer_backward import NAIVE_SOFTMAX
from ..shared import CE_NOT_DIVIDED
from .batchnorm import BN_EPS, LIBRARY_NORMALISATIONS, batchnorm, batchnorm_gradients
from .misconceptions import BN_SKIPPED, LIBRARY_BATCHNORM, SILU_AT_OUTPUT, SILU_SKIPPED, STATS_AS_CONSTANTS
from .silu import silu

Tensor = torch.Tensor

#: The digits network's parameters, in the order Parts E and F name them.
DIGITS_KEYS = ("W1", "gamma", "beta", "W2", "b2")


def mlp_logits(params: dict[str, Tensor], X: Tensor, running: dict[str, Tensor] | None = None) -> Tensor:
    """The digits network: silu(batchnorm(X·W1; gamma, beta))·W2 + b2, with the batch's statistics (training mode,
    no ``running``) or with ``running`` = {"mean", "var"} (evaluation)."""
    a = batchnorm(X @ params["W1"], params["gamma"], params["beta"], running)
    return silu(a) @ params["W2"] + params["b2"]


def mlp_loss(params: dict[str, Tensor], X: Tensor, targets: Tensor) -> Tensor:
    """The training loss: mean cross-entropy of the network in training mode (batch statistics)."""
    return F.cross_entropy(mlp_logits(params, X), targets)


@dataclass(frozen=True)
class NetworkMistake:
    """What a catalogued mistake of the whole backward gets wrong, layer by layer, as data."""

    misconception: Misconception
    loss_divided: bool = True  # d loss / d logits keeps the 1/N of the mean over the batch
    silu_at: str = "input"  # where SiLU's derivative is taken: "input" (a, right), "output" (h) or "skipped"
    batchnorm: str | None = None  # None: the right backward; "skipped"; or a key of BACKWARD_MISTAKES


#: Part E's catalogued mistakes, by name.
NETWORK_MISTAKES = {
    "silu skipped": NetworkMistake(SILU_SKIPPED, silu_at="skipped"),
    "silu at output": NetworkMistake(SILU_AT_OUTPUT, silu_at="output"),
    "not divided": NetworkMistake(CE_NOT_DIVIDED, loss_divided=False),
    "bn skipped": NetworkMistake(BN_SKIPPED, batchnorm="skipped"),
    "bn constants": NetworkMistake(STATS_AS_CONSTANTS, batchnorm="constants"),
}


def network_gradients(params: dict[str, Tensor], X: Tensor, targets: Tensor, mistake: str | None = None,
                      eps: float = BN_EPS, *, with_loss: bool = False):
    """Every parameter's gradient of :func:`mlp_loss`, by hand (no autograd: the gradient function the tests hand to
    train_digits runs inside a run whose autograd they count); ``mistake`` (a key of :data:`NETWORK_MISTAKES`) gives
    a catalogued mistake's gradients. ``with_loss``: (gradients, :func:`mlp_loss` as a float) from the same forward
    pass."""
    wrong = NETWORK_MISTAKES[mistake] if mistake else None
    n = len(X)
    z = X @ params["W1"]
    mean = z.mean(0)
    std = torch.sqrt(((z - mean) ** 2).mean(0) + eps)
    a = params["gamma"] * ((z - mean) / std) + params["beta"]
    s = torch.sigmoid(a)
    h = a * s
    logits = h @ params["W2"] + params["b2"]
    dlogits = (torch.softmax(logits, dim=-1) - F.one_hot(targets, logits.shape[1]).to(logits.dtype)) / n
    if wrong is not None and not wrong.loss_divided:
        dlogits = dlogits * n
    dh = dlogits @ params["W2"].T
    silu_at = wrong.silu_at if wrong else "input"
    if silu_at == "skipped":
        da = dh
    else:
        at, sigma = (a, s) if silu_at == "input" else (h, torch.sigmoid(h))
        da = dh * sigma * (1 + at * (1 - sigma))
    batchnorm_mistake = wrong.batchnorm if wrong else None
    dz, dgamma, dbeta = batchnorm_gradients(z, params["gamma"], da, eps,
                                            None if batchnorm_mistake == "skipped" else batchnorm_mistake)
    if batchnorm_mistake == "skipped":
        dz = da
    grads = {"W1": X.T @ dz, "gamma": dgamma, "beta": dbeta, "W2": h.T @ dlogits, "b2": dlogits.sum(0)}
    return (grads, float(F.cross_entropy(logits, targets))) if with_loss else grads


def _mlp_case(gen: torch.Generator, n: int, d: int, hidden: int, classes: int):
    params = {"W1": uniform(gen, (d, hidden), -1, 1), "gamma": uniform(gen, (hidden,), 0.5, 1.5),
              "beta": uniform(gen, (hidden,), -0.5, 0.5), "W2": uniform(gen, (hidden, classes), -1, 1),
              "b2": uniform(gen, (classes,), -0.5, 0.5)}
    return params, uniform(gen, (n, d), -1.5, 1.5), torch.randint(classes, (n,), generator=gen)


#: Part E's large-logit corner: W2 rescaled so that the largest logit is this (a naive exp overflows above 709.78).
LARGE_LOGIT = 1500.0


def _large_logits(params: dict[str, Tensor], X: Tensor) -> dict[str, Tensor]:
    """``params`` with W2 rescaled so that the largest logit of X is LARGE_LOGIT (b2 left as it is)."""
    scores = mlp_logits(params, X) - params["b2"]
    top = float(scores.abs().max())
    sign = 1.0 if float(scores.max()) >= -float(scores.min()) else -1.0
    factor = sign * (LARGE_LOGIT - float(params["b2"].abs().max())) / top
    return {**params, "W2": params["W2"] * factor}


def _run_mlp_gradients(mlp_gradients, params: dict[str, Tensor], X: Tensor, targets: Tensor, note: str) -> None:
    __tracebackhide__ = True
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in params.items())
    what = f"mlp_gradients(params, X, targets) with {shapes}, X {tuple(X.shape)}{note}"
    with watch_calls(LIBRARY_NORMALISATIONS) as library:
        answer = call_learner(mlp_gradients, params, X, targets, what=what, forbid=[Route.AUTOGRAD])
    if library.used:
        raise _proven(f"{what} called torch's batch normalisation.", LIBRARY_BATCHNORM)
    if type(answer) is not dict or set(answer) != set(params):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a dict with the keys {sorted(params)}.")
    names = list(params)

    def loss(*values):
        return mlp_loss(dict(zip(names, values)), X, targets)

    expected = dict(zip(names, autograd_gradient(loss, *params.values())))
    fds = dict(zip(names, central_difference(loss, *params.values())))
    variants = {name: network_gradients(params, X, targets, name) for name in NETWORK_MISTAKES}
    largest = float(mlp_logits(params, X).max())
    broken = [k for k in params if isinstance(answer.get(k), torch.Tensor) and not torch.isfinite(answer[k]).all()]
    if broken and largest > 709.78:
        raise _proven(f"{what}: d loss / d {broken[0]} has inf or nan entries; the largest logit is {largest:.5g}, "
                      "where exp overflows in float64 (your softmax, in the exercise-04 cell, must subtract each "
                      "row's largest logit first).", NAIVE_SOFTMAX)
    order = ("b2", "W2", "beta", "gamma", "W1")  # from the loss down: the first wrong one is where the mistake is
    got = {key: expect_tensor(answer[key], f"{what}: {key}", tuple(params[key].shape)) for key in order}
    off = {key: float((got[key] - expected[key]).abs().max() / expected[key].abs().max().clamp_min(1e-300))
           for key in order if not torch.allclose(got[key], expected[key], rtol=1e-6, atol=1e-8)}
    extra = ""
    if len(off) > 1:  # lead with the gradient most off, so that the size of the mistake shows; say where it starts
        first = next(iter(off))
        extra = (f"  wrong gradients, largest error first (relative to each one's largest entry): "
                 f"{', '.join(f'{k} {e:.3g}' for k, e in sorted(off.items(), key=lambda item: -item[1]))}; "
                 f"the first wrong one from the loss down, d loss / d {first}, shows where the mistake starts.")
        order = (max(off, key=off.get), *order)
    for key in order:
        expect_close(got[key], expected[key], fd=fds[key], what=f"{what}: d loss / d {key}", extra=extra,
                     symptoms=[wrong.misconception.looks_like(variants[name][key])
                               for name, wrong in NETWORK_MISTAKES.items()])


@check
def check_mlp_gradients(mlp_gradients, grading_seed: int | None = None) -> None:
    """Part E: mlp_gradients(params, X, targets) = every parameter's gradient of the mean cross-entropy of
    silu(batchnorm(X·W1; gamma, beta))·W2 + b2 (training mode, eps = BN_EPS), by hand (no autograd, no torch
    batch_norm), the inputs unchanged.

    Domain (the part's text): X float64 (N, D) with N >= 2, targets int64 (N,) in [0, C); params W1 (D, H),
    gamma (H,), beta (H,), W2 (H, C), b2 (C,) float64, H >= 1, C >= 2, any values. Corners pinned at every seed: a
    batch of 2; one hidden unit (H = 1); a largest logit of LARGE_LOGIT (W2 rescaled: a naive softmax overflows).
    Contracts checked: a dict with exactly the five keys, each a plain tensor of its parameter's shape; checked
    against autograd and central differences in float64; no autograd (Route); no torch batch normalisation; params,
    X and targets unchanged.
    """
    __tracebackhide__ = True
    gen = case_stream("11/mlp", grading_seed)
    cases = [(*_mlp_case(gen, 2, 3, 2, 2), ", a batch of 2"),
             (*_mlp_case(gen, 5, 4, 1, 3), ", one hidden unit"),
             (*_mlp_case(gen, 4, 3, 3, 4), ", logits up to 1500")]
    cases[2] = (_large_logits(cases[2][0], cases[2][1]), *cases[2][1:])
    sizes = [(6, 4, 5, 3)] if grading_seed is None else \
        [(randint(gen, 3, 9), randint(gen, 2, 6), randint(gen, 2, 6), randint(gen, 2, 5)) for _ in range(2)]
    cases += [(*_mlp_case(gen, *size), "") for size in sizes]
    for params, X, targets, note in cases:
        with trial():
            _run_mlp_gradients(mlp_gradients, params, X, targets, note)
