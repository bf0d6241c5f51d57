"""The digits network of Parts E and F, Linear -> BatchNorm -> SiLU -> Linear with a mean cross-entropy: the network
itself (:func:`mlp_logits`, :func:`mlp_loss`), its right backward by hand (:func:`network_gradients`, which Part F's
test trains with), and the random cases Part E draws (:func:`mlp_case`, :func:`with_large_logits`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...seeding import uniform
from .batchnorm import BN_EPS, batchnorm, batchnorm_gradients
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


def network_gradients(params: dict[str, Tensor], X: Tensor, targets: Tensor, eps: float = BN_EPS, *,
                      with_loss: bool = False):
    """Every parameter's gradient of :func:`mlp_loss`, by hand (no autograd: the gradient function the tests hand to
    train_digits runs inside a run whose autograd they count). ``with_loss``: (gradients, :func:`mlp_loss` as a
    float) from the same forward pass."""
    n = len(X)
    z = X @ params["W1"]
    mean = z.mean(0)
    std = torch.sqrt(((z - mean) ** 2).mean(0) + eps)
    a = params["gamma"] * ((z - mean) / std) + params["beta"]
    s = torch.sigmoid(a)
    h = a * s
    logits = h @ params["W2"] + params["b2"]
    dlogits = (torch.softmax(logits, dim=-1) - F.one_hot(targets, logits.shape[1]).to(logits.dtype)) / n
    dh = dlogits @ params["W2"].T
    da = dh * s * (1 + a * (1 - s))
    dz, dgamma, dbeta = batchnorm_gradients(z, params["gamma"], da, eps)
    grads = {"W1": X.T @ dz, "gamma": dgamma, "beta": dbeta, "W2": h.T @ dlogits, "b2": dlogits.sum(0)}
    return (grads, float(F.cross_entropy(logits, targets))) if with_loss else grads


def mlp_case(gen: torch.Generator, n: int, d: int, hidden: int, classes: int):
    """Parameters of a D -> H -> C network, a batch X of N examples and its targets, drawn from ``gen``."""
    params = {"W1": uniform(gen, (d, hidden), -1, 1), "gamma": uniform(gen, (hidden,), 0.5, 1.5),
              "beta": uniform(gen, (hidden,), -0.5, 0.5), "W2": uniform(gen, (hidden, classes), -1, 1),
              "b2": uniform(gen, (classes,), -0.5, 0.5)}
    return params, uniform(gen, (n, d), -1.5, 1.5), torch.randint(classes, (n,), generator=gen)


#: Part E's large-logit corner: W2 rescaled so that the largest logit is this (a naive exp overflows above 709.78).
LARGE_LOGIT = 1500.0


def with_large_logits(params: dict[str, Tensor], X: Tensor) -> dict[str, Tensor]:
    """``params`` with W2 rescaled so that the largest logit of X is LARGE_LOGIT (b2 left as it is)."""
    scores = mlp_logits(params, X) - params["b2"]
    top = float(scores.abs().max())
    sign = 1.0 if float(scores.max()) >= -float(scores.min()) else -1.0
    factor = sign * (LARGE_LOGIT - float(params["b2"].abs().max())) / top
    return {**params, "W2": params["W2"] * factor}
