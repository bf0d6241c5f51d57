"""Part D: batch normalisation by hand. D.1 ``batchnorm_forward``: training mode normalises with the batch's statistics
and updates the running ones in place, evaluation uses the running ones and changes nothing; D.2
``batchnorm_backward``: (dx, dgamma, dbeta) of training mode, whose dx flows back through the batch mean and variance.

:func:`batchnorm_gradients` is the course's hand-derived backward, written once: Part E's network uses it, and each
catalogued mistake of D.2 is a row of :data:`BACKWARD_MISTAKES` (what it gets wrong), not a second implementation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    fmt,
    trial,
)
from ...checking import proven_failure as _proven
from ...contracts import CHANGED_INPUT, Snapshot
from ...oracles import autograd_gradient, central_difference
from ...routes import watch_calls
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    BATCH_AT_EVAL,
    BIASED_RUNNING_VAR,
    DBETA_MEAN,
    DGAMMA_FROM_X,
    DGAMMA_WRONG_AXIS,
    EPS_OUTSIDE,
    LIBRARY_BATCHNORM,
    MEAN_AS_CONSTANT,
    MISSING_1_OVER_N,
    MOMENTUM_SWAPPED,
    RUNNING_IN_TRAINING,
    RUNNING_NOT_IN_PLACE,
    RUNNING_UPDATED_AT_EVAL,
    STATS_AS_CONSTANTS,
    UNBIASED_NORMALISATION,
    VARIANCE_AS_CONSTANT,
)

Tensor = torch.Tensor

#: BatchNorm's epsilon in the digits network (Parts D-F; Part D's functions take it as an argument).
BN_EPS = 1e-5
#: torch's own normalisations, which Part D asks the learner to write (seen by :func:`~autograder.routes.watch_calls`).
LIBRARY_NORMALISATIONS = (F.batch_norm, torch.batch_norm, torch.native_batch_norm, F.instance_norm, F.layer_norm)


def batchnorm(x: Tensor, gamma: Tensor, beta: Tensor, running: dict[str, Tensor] | None = None,
              eps: float = BN_EPS, *, unbiased: bool = False, eps_outside: bool = False) -> Tensor:
    """The course's batch normalisation of x (N, D): with the batch's mean and biased variance (training mode, no
    ``running``), or with ``running`` = {"mean", "var"} (evaluation). ``unbiased`` and ``eps_outside`` give two
    catalogued mistakes' forwards."""
    if running is None:
        mean, var = x.mean(0), x.var(0, unbiased=unbiased)
    else:
        mean, var = running["mean"], running["var"]
    std = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    return gamma * (x - mean) / std + beta


@dataclass(frozen=True)
class BackwardMistake:
    """What a catalogued mistake of the batch-norm backward gets wrong, as data.

    ``through_mean`` and ``through_variance`` weigh the two terms of dx that flow back through the batch mean and the
    batch variance: 1 as they should be, 0 left out (the statistic treated as a constant), ``"N"`` with the 1/N of
    the mean forgotten. ``dgamma`` and ``dbeta``: None as they should be, or how they go wrong. ``forward``: the
    mistaken forward (:func:`batchnorm`'s options) whose exact backward the mistake computes."""

    misconception: Misconception
    through_mean: float | str = 1
    through_variance: float | str = 1
    dgamma: str | None = None  # "from x" (x instead of x̂), "wrong axis" (summed over the features)
    dbeta: str | None = None  # "mean" (averaged over the batch), "wrong axis"
    forward: dict = field(default_factory=dict)

    def changes(self, index: int) -> bool:
        """Whether it changes dx (index 0), dgamma (1) or dbeta (2)."""
        dx = self.through_mean != 1 or self.through_variance != 1
        return (dx or bool(self.forward), self.dgamma is not None or bool(self.forward), self.dbeta is not None)[index]


#: D.2's catalogued mistakes, by name; the order is the order their symptoms are offered in.
BACKWARD_MISTAKES = {
    "constants": BackwardMistake(STATS_AS_CONSTANTS, through_mean=0, through_variance=0),
    "variance constant": BackwardMistake(VARIANCE_AS_CONSTANT, through_variance=0),
    "mean constant": BackwardMistake(MEAN_AS_CONSTANT, through_mean=0),
    "no 1/N": BackwardMistake(MISSING_1_OVER_N, through_mean="N", through_variance="N"),
    "no 1/N in the mean": BackwardMistake(MISSING_1_OVER_N, through_mean="N"),
    "no 1/N in the variance": BackwardMistake(MISSING_1_OVER_N, through_variance="N"),
    "dgamma from x": BackwardMistake(DGAMMA_FROM_X, dgamma="from x"),
    "dbeta mean": BackwardMistake(DBETA_MEAN, dbeta="mean"),
    "wrong axis": BackwardMistake(DGAMMA_WRONG_AXIS, dgamma="wrong axis", dbeta="wrong axis"),
    "unbiased": BackwardMistake(UNBIASED_NORMALISATION, forward={"unbiased": True}),
    "eps outside": BackwardMistake(EPS_OUTSIDE, forward={"eps_outside": True}),
}


def batchnorm_gradients(x: Tensor, gamma: Tensor, dout: Tensor, eps: float = BN_EPS,
                        mistake: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dgamma, dbeta) of training-mode batch normalisation by hand, or what the catalogued ``mistake`` (a key of
    :data:`BACKWARD_MISTAKES`) computes instead. No autograd, except to differentiate a mistaken forward."""
    wrong = BACKWARD_MISTAKES[mistake] if mistake else None
    if wrong is not None and wrong.forward:
        with torch.enable_grad():
            leaves = [t.detach().clone().requires_grad_(True) for t in (x, gamma)]
            beta = torch.zeros_like(gamma, requires_grad=True)
            out = batchnorm(leaves[0], leaves[1], beta, eps=eps, **wrong.forward)
            return tuple(g.detach() for g in torch.autograd.grad((out * dout).sum(), [*leaves, beta]))
    n = x.shape[0]
    mean = x.mean(0)
    std = torch.sqrt(((x - mean) ** 2).mean(0) + eps)
    xhat = (x - mean) / std
    dxhat = dout * gamma
    through_mean = dxhat.mean(0)  # what reaches each x_i through the batch mean (times σ)
    through_variance = xhat * (dxhat * xhat).mean(0)  # ... and through the batch variance
    if wrong is None:
        dx = (dxhat - through_mean - through_variance) / std
        return dx, (dout * xhat).sum(0), dout.sum(0)
    weight = {0: 0, 1: 1, "N": n}
    dx = (dxhat - weight[wrong.through_mean] * through_mean - weight[wrong.through_variance] * through_variance) / std
    dgamma = (dout * (x if wrong.dgamma == "from x" else xhat)).sum(1 if wrong.dgamma == "wrong axis" else 0)
    dbeta = dout.mean(0) if wrong.dbeta == "mean" else dout.sum(1 if wrong.dbeta == "wrong axis" else 0)
    return dx, dgamma, dbeta


def _bn_backward_symptoms(variants: dict[str, tuple], index: int) -> list:
    """The symptoms for dx (index 0), dgamma (1) or dbeta (2): every mistake that changes it, where its value has
    the right shape."""
    right = variants["right"][index]
    return [wrong.misconception.looks_like(variants[name][index]) for name, wrong in BACKWARD_MISTAKES.items()
            if wrong.changes(index) and variants[name][index].shape == right.shape]


def _bn_inputs_text(x: Tensor, gamma: Tensor, eps: float) -> str:
    return f"  inputs:             x {tuple(x.shape)} = {fmt(x)}, gamma = {fmt(gamma)}, eps = {eps:g}"


@dataclass(frozen=True)
class BackwardCase:
    """One call of batchnorm_backward(x, gamma, dout, eps); ``note`` says what the case is, for the message."""

    x: Tensor
    gamma: Tensor
    dout: Tensor
    eps: float
    note: str = ""


def _run_bn_backward(batchnorm_backward, case: BackwardCase) -> None:
    __tracebackhide__ = True
    x, gamma, dout, eps, note = case.x, case.gamma, case.dout, case.eps, case.note
    n, d = x.shape
    what = f"batchnorm_backward(x, gamma, dout, eps) for x of shape ({n}, {d}), eps = {eps:g}{note}"
    with watch_calls(LIBRARY_NORMALISATIONS) as library:
        answer = call_learner(batchnorm_backward, x, gamma, dout, eps, what=what, forbid=[Route.AUTOGRAD])
    if library.used:
        raise _proven(f"{what} called torch's batch normalisation.", LIBRARY_BATCHNORM)
    if type(answer) not in (tuple, list) or len(answer) != 3:
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected the tuple (dx, dgamma, dbeta).")
    beta = torch.zeros(d, dtype=torch.float64)

    def loss(x_, gamma_, beta_):
        return (batchnorm(x_, gamma_, beta_, eps=eps) * dout).sum()

    expected = autograd_gradient(loss, x, gamma, beta)
    fds = central_difference(loss, x, gamma, beta)
    variants = {name: batchnorm_gradients(x, gamma, dout, eps, name) for name in (None, *BACKWARD_MISTAKES)}
    variants["right"] = variants.pop(None)
    for index, name in ((2, "dbeta"), (1, "dgamma"), (0, "dx")):  # from the simplest: the first wrong one teaches
        got = answer[index]
        shape = tuple(expected[index].shape)
        if isinstance(got, torch.Tensor) and index and tuple(got.shape) == (n,) and n != d:
            wrong = variants["wrong axis"][index]
            matches = bool(torch.allclose(got.detach().to(torch.float64), wrong, rtol=1e-4, atol=1e-7))
            raise GradingFailure(f"{what}: {name} has shape {(n,)}, one number per example; expected {shape}, one "
                                 "per feature.", suspects=(DGAMMA_WRONG_AXIS,) if matches else ())
        expect_close(expect_tensor(got, f"{what}: {name}", shape), expected[index], fd=fds[index],
                     what=f"{what}: {name}", extra=_bn_inputs_text(x, gamma, eps),
                     symptoms=_bn_backward_symptoms(variants, index))


def _bn_backward_cases(grading_seed: int | None) -> list[BackwardCase]:
    """Corners at every seed (values from the seed, structure fixed), then the visible case or two drawn ones."""
    gen = case_stream("11/bn_backward", grading_seed)

    def draw(n, d, offset=0.0):
        return uniform(gen, (n, d), -2, 2) + offset, uniform(gen, (d,), 0.5, 2.0), uniform(gen, (n, d), -1, 1)

    x, gamma, dout = draw(4, 3, offset=3.0)
    gamma[1], gamma[2] = -gamma[1], 0.0
    cases = [BackwardCase(x, gamma, dout, 1e-5, ", features far from 0 and gammas of both signs and 0")]
    cases.append(BackwardCase(*draw(3, 3), 1e-5, ", a square batch (N = D)"))
    x, gamma, dout = draw(5, 2)
    x[:, 1] = 0.7
    cases.append(BackwardCase(x, gamma, dout, 1e-5, ", a feature whose values are all equal (variance 0)"))
    x, gamma, dout = draw(6, 2)
    x[:, 0] *= 0.2
    cases.append(BackwardCase(x, gamma, dout, 0.5, ", a large eps"))
    x, gamma, dout = draw(2, 3)
    dout[1] = 0.0
    cases.append(BackwardCase(x, gamma, dout, 1e-5, ", a batch of 2 whose second dout is 0"))
    if grading_seed is None:
        return cases + [BackwardCase(*draw(8, 5, offset=-1.0), 1e-5)]
    return cases + [BackwardCase(*draw(randint(gen, 3, 9), randint(gen, 2, 6), offset=float(uniform(gen, (), -3, 3))),
                                 1e-5) for _ in range(2)]


@check
def check_batchnorm_backward(batchnorm_backward, grading_seed: int | None = None) -> None:
    """Part D.2: batchnorm_backward(x, gamma, dout, eps) = (dx, dgamma, dbeta) of training-mode BatchNorm,
    out = gamma·(x − mean)/sqrt(var + eps) + beta with the batch's mean and biased variance, by hand (no autograd,
    no torch batch_norm), checked against autograd and central differences in float64.

    Domain (the part's text): x float64 (N, D) with N >= 2, D >= 1, values of any sign and offset, a feature may be
    constant (variance 0); gamma (D,) of any sign, 0 included; dout (N, D) of any sign, zeros included; eps > 0.
    Corners pinned at every seed: features far from 0 and gammas of both signs and 0; a square batch (N = D, where
    a sum over the wrong axis has the right shape); a constant feature; a large eps (0.5); a batch of 2 with a zero
    dout row (the other example's gradient still moves).
    Contracts checked: a tuple of three plain tensors of the shapes of x, gamma and gamma; no autograd (Route); no
    torch batch normalisation (:data:`LIBRARY_NORMALISATIONS`); x, gamma and dout unchanged.
    """
    __tracebackhide__ = True
    for case in _bn_backward_cases(grading_seed):
        with trial():
            _run_bn_backward(batchnorm_backward, case)


def _bn_forward_expected(x, gamma, beta, rm, rv, training, momentum, eps):
    """(out, running_mean, running_var) after a correct call."""
    if not training:
        return batchnorm(x, gamma, beta, {"mean": rm, "var": rv}, eps), rm, rv
    out = batchnorm(x, gamma, beta, eps=eps)
    return out, (1 - momentum) * rm + momentum * x.mean(0), (1 - momentum) * rv + momentum * x.var(0, unbiased=True)


@dataclass(frozen=True)
class ForwardCase:
    """One call of batchnorm_forward(x, gamma, beta, running_mean, running_var, training, momentum, eps); ``note``
    says what the case is, for the message."""

    x: Tensor
    gamma: Tensor
    beta: Tensor
    running_mean: Tensor
    running_var: Tensor
    training: bool
    momentum: float
    eps: float
    note: str = ""


def _run_bn_forward(batchnorm_forward, case: ForwardCase) -> None:
    __tracebackhide__ = True
    x, gamma, beta, rm, rv = case.x, case.gamma, case.beta, case.running_mean, case.running_var
    training, momentum, eps, note = case.training, case.momentum, case.eps, case.note
    n, d = x.shape
    mode = "training" if training else "evaluation"
    what = (f"batchnorm_forward(x, gamma, beta, running_mean, running_var, training={training}, "
            f"momentum={momentum:g}, eps={eps:g}) for x of shape ({n}, {d}){note}")
    rm0, rv0 = rm.clone(), rv.clone()
    pointers, versions = [t.untyped_storage().data_ptr() for t in (rm, rv)], [rm._version, rv._version]
    inputs = Snapshot({"x": x, "gamma": gamma, "beta": beta})
    with watch_calls(LIBRARY_NORMALISATIONS) as library:
        out = call_learner(batchnorm_forward, x, gamma, beta, rm, rv, training, momentum, eps, what=what,
                           may_change=True, forbid=[Route.AUTOGRAD])
    if library.used:
        raise _proven(f"{what} called torch's batch normalisation.", LIBRARY_BATCHNORM)
    changes = inputs.changes()
    if changes:
        raise _proven(f"{what} changed its arguments: {'; '.join(changes)}.", CHANGED_INPUT)
    out = expect_tensor(out, what, (n, d))
    expected, new_rm, new_rv = _bn_forward_expected(x, gamma, beta, rm0, rv0, training, momentum, eps)
    extra = (f"  inputs:             x = {fmt(x)}, gamma = {fmt(gamma)}, beta = {fmt(beta)},\n"
             f"                      running_mean = {fmt(rm0)}, running_var = {fmt(rv0)}")
    if training:
        symptoms = [RUNNING_IN_TRAINING.looks_like(batchnorm(x, gamma, beta, {"mean": rm0, "var": rv0}, eps)),
                    RUNNING_IN_TRAINING.looks_like(batchnorm(x, gamma, beta, {"mean": new_rm, "var": new_rv}, eps)),
                    UNBIASED_NORMALISATION.looks_like(batchnorm(x, gamma, beta, eps=eps, unbiased=True)),
                    EPS_OUTSIDE.looks_like(batchnorm(x, gamma, beta, eps=eps, eps_outside=True))]
    else:
        symptoms = [BATCH_AT_EVAL.looks_like(batchnorm(x, gamma, beta, eps=eps)),
                    EPS_OUTSIDE.looks_like(batchnorm(x, gamma, beta, {"mean": rm0, "var": rv0}, eps,
                                                     eps_outside=True))]
    expect_close(out, expected, what=f"{what}: the output ({mode} mode)", source="expected", extra=extra,
                 symptoms=symptoms)
    moved = [name for name, t, t0, p, v in (("running_mean", rm, rm0, pointers[0], versions[0]),
                                             ("running_var", rv, rv0, pointers[1], versions[1]))
             if not torch.equal(t, t0) or t.untyped_storage().data_ptr() != p or t._version != v]
    if not training:
        if moved:
            raise _proven(f"{what}: {' and '.join(moved)} changed in evaluation mode.", RUNNING_UPDATED_AT_EVAL)
        return
    replaced = [name for name, t, p in (("running_mean", rm, pointers[0]), ("running_var", rv, pointers[1]))
                if t.untyped_storage().data_ptr() != p]
    if replaced:
        raise _proven(f"{what}: {' and '.join(replaced)} got new memory (.data = ...) instead of being updated in "
                      "place.", RUNNING_NOT_IN_PLACE)
    mean, unbiased, biased = x.mean(0), x.var(0, unbiased=True), x.var(0, unbiased=False)
    expect_close(rm, new_rm, what=f"{what}: running_mean after the call", source="expected", extra=extra,
                 symptoms=[RUNNING_NOT_IN_PLACE.looks_like(rm0),
                           MOMENTUM_SWAPPED.looks_like(momentum * rm0 + (1 - momentum) * mean)])
    expect_close(rv, new_rv, what=f"{what}: running_var after the call", source="expected", extra=extra,
                 symptoms=[RUNNING_NOT_IN_PLACE.looks_like(rv0),
                           MOMENTUM_SWAPPED.looks_like(momentum * rv0 + (1 - momentum) * unbiased),
                           BIASED_RUNNING_VAR.looks_like((1 - momentum) * rv0 + momentum * biased)])


def _bn_forward_cases(grading_seed: int | None) -> list[ForwardCase]:
    """Corners at every seed, then the visible case or two drawn ones."""
    gen = case_stream("11/bn_forward", grading_seed)

    def draw(n, d, offset=2.0):
        x = uniform(gen, (n, d), -2, 2) + offset
        gamma = uniform(gen, (d,), 0.5, 2.0) * torch.where(torch.arange(d) % 2 == 1, -1.0, 1.0).double()
        running_var = uniform(gen, (d,), 0.3, 3.0)
        return x, gamma, uniform(gen, (d,), -1, 1), uniform(gen, (d,), -1, 1), running_var

    cases = [ForwardCase(*draw(5, 3), True, 0.1, 1e-5, ", running statistics far from the batch's")]
    x, gamma, beta, rm, rv = draw(2, 3)
    x[:, 2] = -0.4
    cases.append(ForwardCase(x, gamma, beta, rm, rv, True, 0.3, 0.5, ", a batch of 2, a constant feature, a large eps"))
    cases.append(ForwardCase(*draw(4, 3), False, 0.1, 1e-5))
    cases.append(ForwardCase(*draw(1, 4), False, 0.2, 1e-5, ", a batch of one"))
    if grading_seed is None:
        return cases + [ForwardCase(*draw(6, 2, offset=-1.0), True, 0.05, 1e-5),
                        ForwardCase(*draw(3, 2), False, 0.1, 1e-5)]
    return cases + [ForwardCase(*draw(randint(gen, 3, 8), randint(gen, 2, 5), float(uniform(gen, (), -3, 3))), training,
                                float(uniform(gen, (), 0.05, 0.3)), 1e-5) for training in (True, False)]


@check
def check_batchnorm_forward(batchnorm_forward, grading_seed: int | None = None) -> None:
    """Part D.1: batchnorm_forward(x, gamma, beta, running_mean, running_var, training, momentum, eps): training
    mode normalises with the batch's mean and biased variance and updates the running statistics in place (PyTorch's
    convention: (1 − momentum)·running + momentum·batch, unbiased variance for running_var); evaluation normalises
    with the running statistics and changes nothing. By hand: no torch batch_norm.

    Domain (the part's text): x float64 (N, D), N >= 2 in training, N >= 1 at evaluation, any offset; gamma (D,) of
    both signs, beta (D,), running_mean (D,), running_var (D,) > 0; momentum in (0, 1); eps > 0.
    Corners pinned at every seed: running statistics far from the batch's (training, so that using them shows); a
    batch of 2 with a constant feature and a large eps (training); evaluation on a batch of 4 and on a batch of one.
    Contracts checked: a plain tensor (N, D); running_mean and running_var updated in place in training (their
    storage compared: rebinding or .data = fails) and untouched at evaluation (values, storage and version); x,
    gamma, beta unchanged; no torch batch normalisation (:data:`LIBRARY_NORMALISATIONS`).
    """
    __tracebackhide__ = True
    for case in _bn_forward_cases(grading_seed):
        with trial():
            _run_bn_forward(batchnorm_forward, case)
