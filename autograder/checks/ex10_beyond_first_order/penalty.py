"""Part C: the WGAN-GP gradient penalty at interpolates between real and fake examples of any shape (vectors,
images), for critics whose examples are scored on their own and for critics that mix them (a BatchNorm on the batch's
statistics), checked against central differences of the penalty."""

from __future__ import annotations

import torch
from torch import nn

from ...checking import GradingFailure, Routes, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint
from .hvp import vector
from .misconceptions import (
    ALPHA_ON_FEATURES,
    ALPHA_VECTOR_SHAPED,
    NAN_AT_ZERO_NORM,
    NO_GRAPH,
    NORM_OVER_BATCH_AXIS,
    NORM_OVER_LAST_AXIS,
    NORM_OVER_ONE_AXIS,
    ONE_NORM_FOR_BATCH,
    PARAMS_DETACHED,
    PENALTY_AS_NUMBER,
    PENALTY_AT_REAL,
    PENALTY_SUMMED,
    R1_FORM,
    SCORED_ALONE,
    SQUARED_NORM_MINUS_ONE,
    SUMMED_SCORES_MIXED,
    SWAPPED_MIX,
    WEIGHT_SQUARED,
)

Tensor = torch.Tensor

def make_critic(gen: torch.Generator, features: int, hidden: int, activation: str = "tanh") -> nn.Sequential:
    """A float64 critic Linear(features, hidden) → Tanh or ReLU → Linear(hidden, 1), weights uniform in [-1, 1)."""
    critic = nn.Sequential(nn.Linear(features, hidden, dtype=torch.float64),
                           nn.Tanh() if activation == "tanh" else nn.ReLU(),
                           nn.Linear(hidden, 1, dtype=torch.float64))
    with torch.no_grad():
        for param in critic.parameters():
            param.copy_(uniform(gen, tuple(param.shape), -1.0, 1.0))
    return critic


def make_image_critic(gen: torch.Generator, channels: int, size: int, hidden: int = 4) -> nn.Sequential:
    """A float64 critic for (B, channels, size, size) images: Flatten → Linear(·, hidden) → Tanh → Linear(hidden, 1),
    weights uniform in [-0.5, 0.5). (A convolution's double backward in float64 takes seconds on a CPU: a flattening
    critic shows the same shapes at a hundredth of the cost.)"""
    critic = nn.Sequential(nn.Flatten(), nn.Linear(channels * size * size, hidden, dtype=torch.float64), nn.Tanh(),
                           nn.Linear(hidden, 1, dtype=torch.float64))
    with torch.no_grad():
        for param in critic.parameters():
            param.copy_(uniform(gen, tuple(param.shape), -0.5, 0.5))
    return critic


def make_batchnorm_critic(gen: torch.Generator, features: int, hidden: int, activation: bool = True) -> nn.Sequential:
    """A float64 critic Linear(features, hidden) → BatchNorm1d on the batch's statistics (no running ones) → Tanh (or
    nothing) → Linear(hidden, 1): example i's score depends on every example of the batch. Weights uniform in
    [-1, 1), the norm's scale in [0.5, 1.5) and shift in [-0.5, 0.5)."""
    critic = nn.Sequential(nn.Linear(features, hidden, dtype=torch.float64),
                           nn.BatchNorm1d(hidden, track_running_stats=False, dtype=torch.float64),
                           *([nn.Tanh()] if activation else []), nn.Linear(hidden, 1, dtype=torch.float64))
    with torch.no_grad():
        for param in critic.parameters():
            param.copy_(uniform(gen, tuple(param.shape), -1.0, 1.0))
        critic[1].weight.copy_(uniform(gen, (hidden,), 0.5, 1.5))
        critic[1].bias.copy_(uniform(gen, (hidden,), -0.5, 0.5))
    return critic


def mixes(critic: nn.Module) -> bool:
    """Whether the critic's examples see each other (a BatchNorm layer)."""
    return any(isinstance(m, nn.BatchNorm1d) for m in critic.modules())


def _wgan_penalty(critic: nn.Module, params: dict, real: Tensor, fake: Tensor, alpha: Tensor, weight: float, *,
                  mix: str = "rows", at: str = "between", norm: str = "rows", form: str = "wgan",
                  reduce: str = "mean", weight_inside: bool = False, route: str | None = None) -> Tensor:
    """The penalty with the critic's parameters ``params`` (a graph reaches them); the keywords make the mistakes.

    mix: alpha along the examples (right), the last axis ("features") or shaped (B, 1) ("vector": on images, along
    the rows axis); at: between (right), swapped, real; norm: rows (right:
    each example's gradient over all its axes), columns (down the batch), batch (one for all), axis1 (over the
    second axis only, per example and position), last (over the last axis only, per example, channel and row);
    form: wgan (right), r1, squares; reduce: mean (right) or sum;
    weight_inside: (weight·(‖g‖−1))²; route: "own" (each score differentiated with respect to its own example, the
    others held fixed: right for every critic), "sum" (the gradient of the summed scores: right only when the examples
    do not interact); default: "own" for a critic that mixes its examples, else the (cheaper, equal) "sum"."""
    a = {"rows": alpha.reshape(-1, *[1] * (real.dim() - 1)), "vector": alpha[:, None]}.get(mix, alpha)
    points = {"between": a * real + (1 - a) * fake, "swapped": a * fake + (1 - a) * real, "real": real}[at]
    with torch.enable_grad():
        points = points.detach().requires_grad_(True)
        scores = torch.func.functional_call(critic, params, (points,))
        if (route or ("own" if mixes(critic) else "sum")) == "sum":
            (g,) = torch.autograd.grad(scores.sum(), points, create_graph=True)
        else:
            b = len(points)
            picks = torch.eye(b, dtype=scores.dtype).reshape(b, *scores.shape)
            (rows,) = torch.autograd.grad(scores, points, picks, create_graph=True, is_grads_batched=True)
            g = rows[torch.arange(b), torch.arange(b)]
    norms = {"rows": lambda: torch.linalg.vector_norm(g.flatten(1), dim=1),
             "columns": lambda: torch.linalg.vector_norm(g.flatten(1), dim=0),
             "batch": lambda: torch.linalg.vector_norm(g).reshape(1),
             "axis1": lambda: torch.linalg.vector_norm(g, dim=1),
             "last": lambda: torch.linalg.vector_norm(g, dim=-1)}[norm]()
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


def _penalty_cases(grading_seed: int | None):
    """(critic, real, fake, alpha, weight, description). The corners (every seed): weight 0; a batch of one; B = D
    (alpha broadcast along the features runs and is silently wrong); a ReLU critic whose gradient at one interpolate
    is exactly 0 (the kink of the norm); alpha with 0 and 1 (the interpolates are the fake and the real examples);
    an int weight; two batches of images; a critic with a BatchNorm on the batch's statistics (its examples interact),
    and one without an activation, where the gradient of the summed scores is exactly 0 at every interpolate. Then a
    Tanh, a ReLU and a BatchNorm critic at drawn sizes (public: fixed ones)."""
    fixed = torch.Generator().manual_seed(1012)
    cases = []

    def add(critic, real, fake, alpha, weight):
        cases.append((critic, real, fake, alpha, weight))

    add(make_critic(fixed, 3, 5), uniform(fixed, (4, 3)), uniform(fixed, (4, 3)), uniform(fixed, (4,), 0.0, 1.0), 0.0)
    add(make_critic(fixed, 4, 3), uniform(fixed, (1, 4)), uniform(fixed, (1, 4)), vector([0.3]), 10.0)
    add(make_critic(fixed, 3, 4), uniform(fixed, (3, 3)), uniform(fixed, (3, 3)), vector([0.1, 0.6, 0.9]), 2.5)
    critic, real, fake, alpha = _relu_zero_row(fixed)
    add(critic, real, fake, alpha, 1.0)
    add(make_critic(fixed, 2, 4), uniform(fixed, (3, 2)), uniform(fixed, (3, 2)), vector([0.0, 1.0, 0.5]), 0.5)
    add(make_critic(fixed, 5, 3), uniform(fixed, (2, 5)), uniform(fixed, (2, 5)), vector([0.7, 0.2]), 3)
    add(make_image_critic(fixed, 2, 3), uniform(fixed, (3, 2, 3, 3)), uniform(fixed, (3, 2, 3, 3)),
        vector([0.2, 0.9, 0.5]), 10.0)
    add(make_image_critic(fixed, 1, 3), uniform(fixed, (2, 1, 3, 3)), uniform(fixed, (2, 1, 3, 3)), vector([0.6, 0.1]),
        2.0)
    add(make_batchnorm_critic(fixed, 3, 5), uniform(fixed, (4, 3)), uniform(fixed, (4, 3)),
        vector([0.2, 0.9, 0.5, 0.0]), 10.0)
    add(make_batchnorm_critic(fixed, 2, 3, activation=False), uniform(fixed, (3, 2)), uniform(fixed, (3, 2)),
        vector([0.4, 1.0, 0.7]), 2.0)
    gen = case_stream("10/penalty", grading_seed)
    for activation in ("tanh", "relu"):
        b, d, h = (5, 3, 4) if grading_seed is None else (randint(gen, 2, 6), randint(gen, 2, 5), randint(gen, 3, 6))
        weight = 10.0 if grading_seed is None else round(float(uniform(gen, (), 0.5, 12.0)), 2)
        add(make_critic(gen, d, h, activation), uniform(gen, (b, d)), uniform(gen, (b, d)),
            uniform(gen, (b,), 0.0, 1.0), weight)
    b, d, h = (5, 3, 4) if grading_seed is None else (randint(gen, 3, 6), randint(gen, 2, 5), randint(gen, 2, 6))
    add(make_batchnorm_critic(gen, d, h), uniform(gen, (b, d)), uniform(gen, (b, d)), uniform(gen, (b,), 0.0, 1.0),
        10.0 if grading_seed is None else round(float(uniform(gen, (), 0.5, 12.0)), 2))
    if grading_seed is not None:
        b, c, size = randint(gen, 2, 4), randint(gen, 1, 2), randint(gen, 2, 4)
        add(make_image_critic(gen, c, size), uniform(gen, (b, c, size, size)), uniform(gen, (b, c, size, size)),
            uniform(gen, (b,), 0.0, 1.0), round(float(uniform(gen, (), 0.5, 12.0)), 2))
    return cases


def _critic_name(critic: nn.Module) -> str:
    if isinstance(critic[0], nn.Flatten):
        return f"a critic Flatten → {critic[1].in_features} → {type(critic[2]).__name__} {critic[1].out_features} → 1"
    first, act = critic[0], critic[1]
    if mixes(critic):
        inside = " → ".join(["BatchNorm (batch statistics)"] + [type(m).__name__ for m in critic[2:-1]])
        return f"a critic {first.in_features} → Linear {first.out_features} → {inside} → 1"
    return f"a critic {first.in_features} → {type(act).__name__} {first.out_features} → 1"


def _run_penalty(gradient_penalty, critic, real, fake, alpha, weight) -> None:
    __tracebackhide__ = True
    b, d = real.shape[0], real.shape[-1]
    what = (f"gradient_penalty(critic, real, fake, alpha, weight={weight!r}) for {_critic_name(critic)}, "
            f"a batch of shape {tuple(real.shape)}, alpha = {fmt(alpha)}")
    names = [name for name, _ in critic.named_parameters()]
    params = [p for _, p in critic.named_parameters()]
    routes = Routes()
    try:
        answer = call_learner(gradient_penalty, critic, real, fake, alpha, weight, what=what, routes=routes)
    except GradingFailure as failure:  # alpha of shape (B,) against (B, ..., D), B ≠ D; a BatchNorm fed one example
        clash = any(f"tensor a ({m}) must match the size of tensor b ({n})" in failure.message
                    for m, n in ((b, d), (d, b)))
        alone = mixes(critic) and isinstance(failure.raised, ValueError) and "value per channel" in str(failure.raised)
        rows = real.dim() > 2 and f"at non-singleton dimension {real.dim() - 2}" in failure.message  # alpha[:, None]
        suspects = ((ALPHA_VECTOR_SHAPED,) if rows else (ALPHA_ON_FEATURES,)) if clash and b != d else ()
        raise GradingFailure(failure.message, suspects=suspects,
                             proven=SCORED_ALONE if alone else failure.proven) from None
    if routes.backward_runs > 1:
        raise GradingFailure(f"{what} ran {routes.backward_runs} backward passes for {b} examples; one is enough "
                             "for the whole batch. Can one call of torch.autograd.grad return every example's own "
                             "gradient at once?")
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
    if mixes(critic):
        value_symptoms.append(SUMMED_SCORES_MIXED.looks_like(penalty(route="sum")))
    if b == d and real.dim() == 2:
        value_symptoms.append(ALPHA_ON_FEATURES.looks_like(penalty(mix="features")))
    if real.dim() > 2 and real.shape[-2] == b:  # alpha[:, None] runs when B = H: each row of pixels its own alpha
        value_symptoms.append(ALPHA_VECTOR_SHAPED.looks_like(penalty(mix="vector")))
    if real.dim() > 2:
        value_symptoms.append(NORM_OVER_ONE_AXIS.looks_like(penalty(norm="axis1")))
        value_symptoms.append(NORM_OVER_LAST_AXIS.looks_like(penalty(norm="last")))
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
        if not bool(torch.isfinite(got).all()) and not mixes(critic):
            with torch.no_grad():
                a = alpha.reshape(-1, *[1] * (real.dim() - 1))
                inputs = a * real + (1 - a) * fake
                rows = torch.func.vmap(torch.func.grad(lambda p: critic(p[None]).sum()))(inputs)
            zero = [i for i, row in enumerate(rows) if not bool(row.any())]
            if zero:
                raise _proven(f"{what}: the gradient of your penalty with respect to the critic's {name} holds "
                              f"{fmt(got)}; at row {zero[0]} the critic's gradient is exactly 0.", NAN_AT_ZERO_NORM)
        expect_close(got, want, what=f"{what}: its gradient with respect to the critic's {name}", fd=diff,
                     rtol=1e-5, atol=1e-8)


@check
def check_gradient_penalty(gradient_penalty, grading_seed: int | None = None) -> None:
    """Part C: gradient_penalty(critic, real, fake, alpha, weight) = weight · mean_i (‖∇_x̂ critic(x̂)_i‖ − 1)² at
    x̂_i = alpha_i real_i + (1 − alpha_i) fake_i (WGAN-GP), as a 0-d tensor that trains the critic.

    Domain: ``critic`` a float64 network, scores of shape (B, 1): an MLP D → Tanh or ReLU → 1 for (B, D) batches,
    Flatten → Tanh MLP → 1 for (B, C, H, W) images (examples scored on their own), or D → Linear → BatchNorm on the
    batch's statistics → [Tanh] → 1 (B >= 3, the examples interact: example i's gradient is that of score i with
    respect to example i, the others held fixed); ``real`` and ``fake`` of
    one shape (B, ...) float64 without requires_grad, B >= 1, D >= 2; ``alpha`` (B,) in [0, 1] (0 and 1 included);
    ``weight`` a number >= 0 (float or int, 0 included). Corners at every seed: weight 0, B = 1, B = D, a ReLU critic
    with an interpolate where its gradient is exactly 0, alpha 0 and 1, an int weight, two batches of images, two
    BatchNorm critics (one without an activation: the summed scores are constant there).
    Contract: at most one backward pass (the whole batch at once); a plain 0-d tensor with a graph; its value; its
    gradient with respect to every critic parameter (autograd and central differences of the penalty), finite where
    a row's gradient is 0 (the norm's subgradient 0 there); critic (parameters, their .grad), real, fake, alpha
    unchanged.
    """
    __tracebackhide__ = True
    for critic, real, fake, alpha, weight in _penalty_cases(grading_seed):
        with trial():
            _run_penalty(gradient_penalty, critic, real, fake, alpha, weight)
