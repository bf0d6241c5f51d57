"""Part D: batch normalisation by hand. D.1 ``batchnorm_forward``: training mode normalises with the batch's statistics,
counts the batch and updates the running ones in place (an exponential average, or with momentum=None the cumulative
one driven by the counter), refuses a batch of one before changing anything, evaluation uses the running ones and
changes nothing, all against PyTorch's nn.BatchNorm1d on sequences of calls (:func:`bn_oracle`), then ``eval_scale``,
a prediction in closed form of what evaluation does to a batch the layer trained on (:func:`scale_after`); D.2
``batchnorm_backward``: (dx, dgamma, dbeta) of training mode, whose dx flows back through the batch mean and variance.

:func:`batchnorm_gradients` is the course's hand-derived backward, written once: Part E's network uses it, and each
catalogued mistake of D.2 is a row of :data:`BACKWARD_MISTAKES` (what it gets wrong), not a second implementation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from ...checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    NotWritten,
    Route,
    as_answer,
    call_learner,
    check,
    expect_close,
    expect_tensor,
    fmt,
    trial,
)
from ...checking import proven_failure as _proven
from ...contracts import CHANGED_INPUT, Snapshot
from ...misconceptions import armed
from ...oracles import autograd_gradient, central_difference
from ...routes import watch_calls
from ...seeding import uniform
from ...time_limit import OutOfTime, time_limit
from ..cases import case_stream, randint
from .misconceptions import (
    BATCH_AT_EVAL,
    BATCH_OF_ONE_TRAINED,
    BIASED_RUNNING_VAR,
    COUNTER_NOT_ADVANCED,
    CUMULATIVE_OFF_BY_ONE,
    DBETA_MEAN,
    DGAMMA_FROM_X,
    DGAMMA_WRONG_AXIS,
    EPS_OUTSIDE,
    LIBRARY_BATCHNORM,
    MEAN_AS_CONSTANT,
    MISSING_1_OVER_N,
    MOMENTUM_SWAPPED,
    MOMENTUM_ZERO_AS_NONE,
    REFUSED_BATCH_COUNTED,
    RUNNING_IN_GRAPH,
    RUNNING_IN_TRAINING,
    RUNNING_NOT_IN_PLACE,
    RUNNING_TAKEN_AS_SETTLED,
    RUNNING_UPDATED_AT_EVAL,
    SCALE_INVERTED,
    SCALE_STEPPED,
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


@dataclass(frozen=True)
class ForwardCall:
    """One call of a sequence: the batch, the mode and what the call is, for the message. A batch in a graph is
    x = ``inputs`` @ ``weight`` (a leaf requiring grad); in training mode the test backpropagates
    sum(``weighting`` · out) to ``weight`` (:func:`_expect_gradient`)."""

    x: Tensor
    training: bool
    note: str = ""
    inputs: Tensor | None = None
    weight: Tensor | None = None
    weighting: Tensor | None = None


@dataclass(frozen=True)
class ForwardCase:
    """A sequence of calls of batchnorm_forward on one layer's state: gamma, beta, the running statistics and, unless
    ``counter`` is None (Part F's call: no num_batches_tracked passed), the batch counter starting at ``counter``."""

    gamma: Tensor
    beta: Tensor
    running_mean: Tensor
    running_var: Tensor
    momentum: float | None
    eps: float
    calls: tuple[ForwardCall, ...]
    counter: int | None = 0
    note: str = ""


def bn_oracle(x: Tensor, gamma: Tensor, beta: Tensor, running_mean: Tensor, running_var: Tensor, count: int,
              training: bool, momentum: float | None, eps: float) -> tuple[Tensor, Tensor, Tensor, int]:
    """(out, running_mean, running_var, num_batches_tracked) after one call of PyTorch's nn.BatchNorm1d, the oracle,
    set to the given state and mode (``momentum`` None: the cumulative average)."""
    layer = torch.nn.BatchNorm1d(x.shape[1], eps=eps, momentum=momentum, dtype=torch.float64)
    with torch.no_grad():
        for buffer, value in ((layer.weight, gamma), (layer.bias, beta), (layer.running_mean, running_mean),
                              (layer.running_var, running_var)):
            buffer.copy_(value)
        layer.num_batches_tracked.fill_(count)
        out = layer.train(training)(x)
    return out, layer.running_mean.clone(), layer.running_var.clone(), int(layer.num_batches_tracked)


def _call_text(case: ForwardCase, k: int) -> str:
    call = case.calls[k]
    n, d = call.x.shape
    momentum = "None" if case.momentum is None else f"{case.momentum:g}"
    counter = "" if case.counter is None else ", num_batches_tracked=counter"
    what = (f"batchnorm_forward(x, gamma, beta, running_mean, running_var, training={call.training}, "
            f"momentum={momentum}, eps={case.eps:g}{counter}) for x of shape ({n}, {d})")
    if len(case.calls) > 1:
        earlier = ", ".join(f"{'training' if c.training else 'evaluation'} on {c.x.shape[0]}" for c in case.calls[:k])
        what += f", call {k + 1} of {len(case.calls)} on one layer's state" + (f" (before it: {earlier})" if k else "")
    return what + case.note + call.note


def _state(tensors: dict[str, Tensor]) -> dict[str, tuple]:
    """Each tensor's value, storage and version: what a call may or may not change."""
    return {name: (t.clone(), t.untyped_storage().data_ptr(), t._version) for name, t in tensors.items()}


def _moved(tensors: dict[str, Tensor], before: dict[str, tuple]) -> list[str]:
    return [name for name, t in tensors.items() if t.shape != before[name][0].shape
            or not torch.equal(t, before[name][0]) or t.untyped_storage().data_ptr() != before[name][1]
            or t._version != before[name][2]]


def _eval_writes(tensors: dict[str, Tensor], before: dict[str, tuple], moved: list[str]) -> str:
    """What an evaluation call did to the layer's tensors: changed their values, or wrote the same ones."""
    return "; ".join(
        f"{name} changed in evaluation mode ({fmt(before[name][0])} -> {fmt(t)})"
        if t.shape != before[name][0].shape or not torch.equal(t, before[name][0]) else
        f"{name} was written in evaluation mode, with the same values: " + ("it got new memory" if t.untyped_storage(
        ).data_ptr() != before[name][1] else f"in place, its _version went from {before[name][2]} to {t._version}")
        for name, t in tensors.items() if name in moved)


def _expect_refusal(batchnorm_forward, args: tuple, kwargs: dict, tensors: dict[str, Tensor], what: str,
                    extra: str) -> None:
    """A batch of one in training mode: ValueError, raised before anything changed."""
    __tracebackhide__ = True
    before = _state(tensors)
    try:
        with watch_calls(LIBRARY_NORMALISATIONS) as library:
            out = call_learner(batchnorm_forward, *args, what=what, may_change=True, forbid=[Route.AUTOGRAD],
                               **kwargs)
    except NotWritten:
        raise
    except GradingFailure as failure:
        if library.used:
            raise _proven(f"{what} called torch's batch normalisation.", LIBRARY_BATCHNORM) from None
        if not isinstance(failure.raised, ValueError):
            raise GradingFailure(f"{failure.message}\n  A batch of one in training mode: which exception does "
                                 "nn.BatchNorm1d raise for it?") from None
        moved = _moved(tensors, before)
        if moved:
            raise _proven(f"{what} raised ValueError, but {' and '.join(moved)} changed before it did: "
                          + ", ".join(f"{name} {fmt(before[name][0])} -> {fmt(tensors[name])}" for name in moved)
                          + ".\n" + extra, REFUSED_BATCH_COUNTED) from None
        return
    raise _proven(f"{what} returned {fmt(out)} instead of refusing the batch; running_var is now "
                  f"{fmt(tensors['running_var'])}.\n{extra}", BATCH_OF_ONE_TRAINED)


def _weighted_gradient(inputs: Tensor, weight: Tensor, weighting: Tensor, gamma: Tensor, beta: Tensor, eps: float,
                       through: tuple[bool, bool] = (True, True)) -> Tensor:
    """d sum(weighting · out)/dW of training-mode BatchNorm of x = inputs @ W by autograd, the gradient reaching W
    ``through`` the batch's mean and variance or not (held constant, as a catalogued mistake does)."""
    with torch.enable_grad():
        leaf = weight.detach().clone().requires_grad_(True)
        x = inputs @ leaf
        mean = x.mean(0) if through[0] else x.detach().mean(0)
        var = ((x - x.mean(0)) ** 2).mean(0) if through[1] else x.detach().var(0, unbiased=False)
        out = gamma * (x - mean) / torch.sqrt(var + eps) + beta
        return torch.autograd.grad((weighting * out).sum(), leaf)[0]


def _expect_gradient(out: Tensor, case: ForwardCase, call: ForwardCall, state: tuple[Tensor, Tensor, int], what: str,
                     extra: str) -> None:
    """A training call on x = X @ W: sum(weighting · out) backpropagated through the learner's output to W against
    nn.BatchNorm1d's from the same starting state (``state``: running mean, variance, counter) and central
    differences, in float64; the routes through the batch's mean and variance are where a detached statistic shows."""
    __tracebackhide__ = True
    inputs, weight, weighting = call.inputs, call.weight, call.weighting
    gamma, beta, eps = case.gamma, case.beta, case.eps
    loss = "sum(weighting * out)"
    try:
        got = torch.autograd.grad((weighting * out).sum(), weight, allow_unused=True)[0]
    except Exception as error:  # the learner's graph may fail in any way: the message shows how
        raise GradingFailure(f"{what}: backpropagating {loss} from your output to W raised "
                             f"{type(error).__name__}: {str(error)[:300]}") from None
    got = torch.zeros_like(weight) if got is None else got

    def oracle(w: Tensor) -> Tensor:
        layer = torch.nn.BatchNorm1d(weight.shape[1], eps=eps, momentum=case.momentum, dtype=torch.float64)
        with torch.no_grad():
            for buffer, value in ((layer.weight, gamma), (layer.bias, beta), (layer.running_mean, state[0]),
                                  (layer.running_var, state[1])):
                buffer.copy_(value)
            layer.num_batches_tracked.fill_(state[2])
        return (weighting * layer.train(True)(inputs @ w)).sum()

    expected = autograd_gradient(oracle, weight)[0]
    if torch.allclose(got.detach().to(torch.float64), expected, rtol=1e-7, atol=1e-9):
        return
    fd = central_difference(oracle, weight)[0]
    seen = [f"  yours equals:       the gradient with {text} held constant (autograd, float64)"
            for through, text in (((False, False), "the batch's mean and variance"),
                                  ((True, False), "the batch's variance"), ((False, True), "the batch's mean"))
            if torch.allclose(got.detach().to(torch.float64), rtol=1e-7, atol=1e-9,
                              other=_weighted_gradient(inputs, weight, weighting, gamma, beta, eps, through))][:1]
    question = ("  Your output's values match nn.BatchNorm1d's, its gradient does not. When one entry of W moves, x "
                "moves, and so do the batch's mean and variance that normalise every example. Which of these routes "
                "from W to your output did autograd record, and which did it never see?")
    expect_close(got, expected, what=f"{what}: d {loss}/dW through your output (x = X @ W, W requiring grad; "
                                     "weighting a fixed random (N, D) tensor)",
                 fd=fd, rtol=1e-7, atol=1e-9, source="nn.BatchNorm1d",
                 extra="\n".join([f"  X = {fmt(inputs)}, W = {fmt(weight.detach())}, weighting = {fmt(weighting)}",
                                   extra, *seen, question]))


def _expect_out_of_graph(tensors: dict[str, Tensor], what: str, x: Tensor) -> None:
    """The layer's state is bookkeeping: after a call, no running statistic (nor the counter) is a node of a graph."""
    __tracebackhide__ = True
    leaked = {name: t for name, t in tensors.items() if t.requires_grad or t.grad_fn is not None}
    if leaked:
        nodes = ", ".join(f"{name}.grad_fn = {type(t.grad_fn).__name__ if t.grad_fn is not None else None} "
                          f"(requires_grad={t.requires_grad})" for name, t in leaked.items())
        cause = "x requires grad (x = X @ W, W being trained), and " if x.requires_grad else ""
        raise _proven(f"{what}: {cause}after the call {nodes}; "
                      "nn.BatchNorm1d's running_mean and running_var never require grad.", RUNNING_IN_GRAPH)


def _run_bn_call(batchnorm_forward, case: ForwardCase, k: int, tensors: dict[str, Tensor]) -> None:
    """Call k of the case on the learner's tensors, against the oracle from the state they hold before it."""
    __tracebackhide__ = True
    call, gamma, beta, momentum, eps = case.calls[k], case.gamma, case.beta, case.momentum, case.eps
    x, training = call.x, call.training
    plain = x.detach()  # the oracle's and the symptoms' batch; the learner gets x itself (it may require grad)
    rm, rv, counter = tensors["running_mean"], tensors["running_var"], tensors.get("num_batches_tracked")
    n, d = x.shape
    what = _call_text(case, k)
    before = _state(tensors)
    rm0, rv0 = before["running_mean"][0], before["running_var"][0]
    c0 = int(counter) if counter is not None else 0
    extra = (f"  inputs:             x = {fmt(plain)}, gamma = {fmt(gamma)}, beta = {fmt(beta)},\n"
             f"                      running_mean = {fmt(rm0)}, running_var = {fmt(rv0)}"
             + ("" if counter is None else f", num_batches_tracked = {c0}") + " before the call")
    args = (x, gamma, beta, rm, rv, training, momentum, eps)
    kwargs = {} if counter is None else {"num_batches_tracked": counter}
    if training and n == 1:
        _expect_refusal(batchnorm_forward, args, kwargs, tensors, what, extra)
        return
    inputs = Snapshot({"x": x, "gamma": gamma, "beta": beta})
    with watch_calls(LIBRARY_NORMALISATIONS) as library:
        out = call_learner(batchnorm_forward, *args, what=what, may_change=True, forbid=[Route.AUTOGRAD], **kwargs)
    if library.used:
        raise _proven(f"{what} called torch's batch normalisation.", LIBRARY_BATCHNORM)
    changes = inputs.changes()
    if changes:
        raise _proven(f"{what} changed its arguments: {'; '.join(changes)}.", CHANGED_INPUT)
    in_graph, returned = isinstance(out, Tensor) and out.requires_grad, out
    out = expect_tensor(out, what, (n, d))
    expected, new_rm, new_rv, count = bn_oracle(plain, gamma, beta, rm0, rv0, c0, training, momentum, eps)
    mode = "training" if training else "evaluation"
    if training:
        symptoms = [RUNNING_IN_TRAINING.looks_like(batchnorm(plain, gamma, beta, {"mean": rm0, "var": rv0}, eps)),
                    RUNNING_IN_TRAINING.looks_like(batchnorm(plain, gamma, beta, {"mean": new_rm, "var": new_rv},
                                                             eps)),
                    UNBIASED_NORMALISATION.looks_like(batchnorm(plain, gamma, beta, eps=eps, unbiased=True)),
                    EPS_OUTSIDE.looks_like(batchnorm(plain, gamma, beta, eps=eps, eps_outside=True))]
    else:
        symptoms = [BATCH_AT_EVAL.looks_like(batchnorm(plain, gamma, beta, eps=eps)),
                    EPS_OUTSIDE.looks_like(batchnorm(plain, gamma, beta, {"mean": rm0, "var": rv0}, eps,
                                                     eps_outside=True))]
    expect_close(out, expected, what=f"{what}: the output ({mode} mode)", source="expected", extra=extra,
                 symptoms=symptoms)
    if x.requires_grad and not in_graph:
        raise GradingFailure(f"{what}: x requires grad (x = X @ W, W being trained), but your output does not "
                             "(nn.BatchNorm1d's output does, in both modes). Which of your computations did "
                             "autograd not record, and how would a loss's gradient reach W through it?")
    _expect_out_of_graph(tensors, what, x)
    moved = _moved(tensors, before)
    if not training:
        if moved:
            raise _proven(f"{what}: {_eval_writes(tensors, before, moved)}.", RUNNING_UPDATED_AT_EVAL)
        return
    replaced = [name for name, t in tensors.items() if t.untyped_storage().data_ptr() != before[name][1]]
    if replaced:
        raise _proven(f"{what}: {' and '.join(replaced)} got new memory (.data = ...) instead of being updated in "
                      "place.", RUNNING_NOT_IN_PLACE if replaced != ["num_batches_tracked"] else COUNTER_NOT_ADVANCED)
    if counter is not None and (counter.shape != () or int(counter) != count):
        if counter.shape == () and int(counter) == c0:
            raise _proven(f"{what}: num_batches_tracked is still {c0} after a training batch.\n{extra}",
                          COUNTER_NOT_ADVANCED)
        raise GradingFailure(f"{what}: num_batches_tracked went from {c0} to {fmt(counter)}; it counts the "
                             f"training batches the layer has seen.\n{extra}")
    weight = momentum if momentum is not None else 1 / count
    mean, unbiased, biased = plain.mean(0), plain.var(0, unbiased=True), plain.var(0, unbiased=False)
    misweighted = [1 / (count + 1)] + ([1 / (count - 1)] if count > 1 else [])
    mean_symptoms = [RUNNING_NOT_IN_PLACE.looks_like(rm0)]
    var_symptoms = [RUNNING_NOT_IN_PLACE.looks_like(rv0),
                    BIASED_RUNNING_VAR.looks_like((1 - weight) * rv0 + weight * biased)]
    if momentum is None:
        mean_symptoms += [CUMULATIVE_OFF_BY_ONE.looks_like((1 - w) * rm0 + w * mean) for w in misweighted]
        var_symptoms += [CUMULATIVE_OFF_BY_ONE.looks_like((1 - w) * rv0 + w * unbiased) for w in misweighted]
    else:
        mean_symptoms.append(MOMENTUM_SWAPPED.looks_like(momentum * rm0 + (1 - momentum) * mean))
        var_symptoms.append(MOMENTUM_SWAPPED.looks_like(momentum * rv0 + (1 - momentum) * unbiased))
        if momentum == 0 and counter is not None:  # the cumulative average run instead of the frozen one
            mean_symptoms.append(MOMENTUM_ZERO_AS_NONE.looks_like((1 - 1 / count) * rm0 + mean / count))
            var_symptoms.append(MOMENTUM_ZERO_AS_NONE.looks_like((1 - 1 / count) * rv0 + unbiased / count))
    expect_close(rm, new_rm, what=f"{what}: running_mean after the call", source="expected", extra=extra,
                 symptoms=mean_symptoms)
    expect_close(rv, new_rv, what=f"{what}: running_var after the call", source="expected", extra=extra,
                 symptoms=var_symptoms)
    if call.weight is not None:
        _expect_gradient(returned, case, call, (rm0, rv0, c0), what, extra)


def _run_bn_forward(batchnorm_forward, case: ForwardCase) -> None:
    """The case's calls in order on one set of the layer's tensors (the learner's state carries over)."""
    __tracebackhide__ = True
    tensors = {"running_mean": case.running_mean.clone(), "running_var": case.running_var.clone()}
    if case.counter is not None:
        tensors["num_batches_tracked"] = torch.tensor(case.counter)
    for k in range(len(case.calls)):
        _run_bn_call(batchnorm_forward, case, k, tensors)


def _bn_forward_cases(grading_seed: int | None) -> list[ForwardCase]:
    """Corners at every seed (values from the seed, structure fixed), then the visible case or two drawn ones."""
    gen = case_stream("11/bn_forward", grading_seed)

    def batch(n, d, offset=2.0):
        return uniform(gen, (n, d), -2, 2) + offset

    def case(d, momentum, eps, calls, counter=0, note=""):
        gamma = uniform(gen, (d,), 0.5, 2.0) * torch.where(torch.arange(d) % 2 == 1, -1.0, 1.0).double()
        beta, running_mean = uniform(gen, (d,), -1, 1), uniform(gen, (d,), -1, 1)
        running_var = uniform(gen, (d,), 0.3, 3.0)
        return ForwardCase(gamma, beta, running_mean, running_var, momentum, eps,
                           tuple(c if isinstance(c, ForwardCall) else ForwardCall(*c) for c in calls), counter, note)

    weighing = case_stream("11/bn_forward/weighting", grading_seed)  # its own stream: the batches stay as they were

    def in_graph(n, d, training):  # a hidden layer's output: x = X @ W, W a leaf being trained
        weight = (torch.eye(d, dtype=torch.float64) + uniform(gen, (d, d), -0.3, 0.3)).requires_grad_(True)
        inputs = batch(n, d)
        return ForwardCall(inputs @ weight, training, "", inputs, weight, uniform(weighing, (n, d), -1, 1))

    constant = batch(2, 3)
    constant[:, 2] = -0.4
    cases = [case(3, 0.1, 1e-5, [(batch(5, 3), True, ", running statistics far from the batch's"),
                                 (batch(4, 3), False), (batch(1, 3), False, ", a batch of one")],
                  counter=None, note=", no counter passed (Part F's call)"),
             case(3, 0.3, 0.5, [(constant, True, ", a constant feature"), (batch(4, 3), True), (batch(1, 3), False)],
                  note=", a large eps"),
             case(3, None, 1e-5, [(batch(2, 3), True), (batch(7, 3), True), (batch(3, 3), True),
                                  (batch(1, 3), False, ", a batch of one"),
                                  (batch(1, 3), True, ", a batch of one in training mode"), (batch(4, 3), True),
                                  (batch(3, 3), False)], note=", batches of different sizes from a counter at 0"),
             case(2, None, 0.1, [(batch(3, 2), True), (batch(2, 2), False)], counter=5,
                  note=", resumed from a counter at 5, eps 0.1"),
             case(3, 0.0, 1e-5, [in_graph(4, 3, True), in_graph(3, 3, True), in_graph(2, 3, False)],
                  counter=3, note=", momentum 0, x = X @ W with W requiring grad, from a counter at 3"),
             case(2, 0.0, 1e-5, [(batch(3, 2), True), (batch(2, 2), False)], counter=1,
                  note=", momentum 0, from a counter at 1")]
    if grading_seed is None:
        return cases + [case(2, 0.05, 1e-5, [(batch(6, 2, offset=-1.0), True), (batch(3, 2), False)], counter=2)]
    d = randint(gen, 2, 5)
    sizes = [randint(gen, 2, 8) for _ in range(4)]
    offset = float(uniform(gen, (), -3, 3))
    drawn = [case(d, None, 1e-5, [(batch(sizes[0], d, offset), True), (batch(sizes[1], d, offset), True),
                                  (batch(1, d, offset), True), (batch(sizes[2], d, offset), True),
                                  (batch(sizes[3], d, offset), False)], counter=randint(gen, 0, 4)),
             case(d, float(uniform(gen, (), 0.05, 0.3)), 1e-5,
                  [(batch(sizes[3], d, offset), True), (batch(sizes[0], d, offset), False)],
                  counter=randint(gen, 0, 4))]
    return cases + drawn


@dataclass(frozen=True)
class ScaleCase:
    """One call of eval_scale(n, batch_var, running_var, steps, momentum, eps, counter): a layer of one feature
    trains ``steps`` times on one batch of ``n`` examples whose biased variance is ``batch_var`` (its mean already in
    running_mean), from ``running_var`` and a counter at ``counter``, then evaluates that batch."""

    n: int
    batch_var: float
    running_var: float
    steps: int
    momentum: float | None
    eps: float = 1e-5
    counter: int = 0
    note: str = ""

    def args(self) -> tuple:
        return self.n, self.batch_var, self.running_var, self.steps, self.momentum, self.eps, self.counter


#: The catalogued mistakes of the prediction, by the name :func:`scale_after` takes.
SCALE_MISTAKES = {"biased": BIASED_RUNNING_VAR, "settled": RUNNING_TAKEN_AS_SETTLED, "inverted": SCALE_INVERTED}


def scale_after(case: ScaleCase, mistake: str | None = None) -> float:
    """The evaluation output over the training output (β = 0) after the case's training calls, in closed form: the
    running variance keeps (1 − m)^k of its start with momentum m (c/(c + k) with None from a counter at c), the rest
    is the batch's unbiased variance; or what a catalogued ``mistake`` (a key of :data:`SCALE_MISTAKES`) predicts."""
    n, steps, momentum, counter = case.n, case.steps, case.momentum, case.counter
    unbiased = case.batch_var * (1 if mistake == "biased" else n / (n - 1))
    if mistake == "settled":
        kept = 0.0
    elif momentum is None:
        kept = counter / (counter + steps) if counter + steps else 1.0
    else:
        kept = (1 - momentum) ** steps
    running_var = kept * case.running_var + (1 - kept) * unbiased
    ratio = math.sqrt((case.batch_var + case.eps) / (running_var + case.eps))
    return 1 / ratio if mistake == "inverted" else ratio


def measured_scale(case: ScaleCase) -> tuple[float, float]:
    """(the ratio, running_var) measured on nn.BatchNorm1d, float64: the case's training calls on one batch, then
    evaluation of it; the ratio is read on the example farthest from the mean."""
    z = torch.linspace(-1.0, 2.0, case.n, dtype=torch.float64) ** 3
    z = ((z - z.mean()) / z.var(unbiased=False).sqrt()).reshape(-1, 1)
    x = 1.5 + math.sqrt(case.batch_var) * z
    layer = torch.nn.BatchNorm1d(1, eps=case.eps, momentum=case.momentum, dtype=torch.float64)
    with torch.no_grad():
        layer.running_mean.fill_(1.5)
        layer.running_var.fill_(case.running_var)
        layer.num_batches_tracked.fill_(case.counter)
        trained = F.batch_norm(x, None, None, training=True, eps=case.eps)  # what every training call returns
        layer.train()
        for _ in range(case.steps):
            layer(x)
        evaluated = layer.eval()(x)
    far = int(z.abs().argmax())
    return float(evaluated[far] / trained[far]), float(layer.running_var)


#: Beyond this many training calls the test does not run the oracle (a case that needs the closed form).
MEASURED_STEPS = 500
#: Seconds one call of eval_scale may take: a closed form needs microseconds; a loop over 10^12 calls never ends.
SCALE_BUDGET = 0.5


def _scale_text(case: ScaleCase) -> str:
    momentum = "None" if case.momentum is None else repr(case.momentum)
    return (f"eval_scale(n={case.n}, batch_var={case.batch_var!r}, running_var={case.running_var!r}, "
            f"steps={case.steps!r}, momentum={momentum}, eps={case.eps!r}, counter={case.counter}){case.note}")


def _run_eval_scale(eval_scale, case: ScaleCase) -> None:
    __tracebackhide__ = True
    what = _scale_text(case)
    try:
        with time_limit(SCALE_BUDGET), watch_calls(LIBRARY_NORMALISATIONS) as library:
            answer = call_learner(eval_scale, *case.args(), what=what)
    except OutOfTime as out:
        out.failure = _proven(f"{what} was still running after {SCALE_BUDGET:g} s, so the test stopped it (and this "
                              f"test's other cases). A loop over {case.steps:,} training calls cannot finish.",
                              SCALE_STEPPED)
        raise out from None
    if library.used:
        raise GradingFailure(f"{what} ran torch's batch normalisation. The part asks for a prediction: the number "
                             "from the case's arguments, without running a layer (the test's cases include "
                             "10^12 calls).")
    got = as_answer(answer, what=what, shape=())
    expected = scale_after(case)
    if bool(torch.isfinite(got)) and abs(float(got) - expected) <= 1e-6 * abs(expected) + 1e-9:
        return
    symptoms = [mistake.looks_like(scale_after(case, name), rtol=1e-6, atol=1e-9)
                for name, mistake in SCALE_MISTAKES.items()]
    matched = tuple(dict.fromkeys(s.misconception for s in armed(symptoms, torch.tensor(expected, dtype=torch.float64),
                                                                    rtol=1e-6, atol=1e-9) if s.matches(got)))
    counter = f" and num_batches_tracked {case.counter}" if case.momentum is None else ""
    lines = [f"{what} returned {float(got)!r}, which does not match nn.BatchNorm1d.",
             f"  the case:           one feature; running_var {case.running_var!r}{counter}, running_mean already "
             f"the batch's mean; {case.steps} training calls on one batch of {case.n} whose variance (divided by N) "
             f"is {case.batch_var!r}; then evaluation of that batch"]
    if bool(torch.isfinite(got)):
        lines.append(f"  relative gap:       |yours − nn.BatchNorm1d's| / nn.BatchNorm1d's = "
                     f"{abs(float(got) - expected) / abs(expected):.2e} (the test allows 1e-06)")
    if case.steps <= MEASURED_STEPS:
        lines.append(f"  measured:           nn.BatchNorm1d run so (float64) holds running_var "
                     f"{measured_scale(case)[1]!r} when it evaluates")
    else:
        lines.append(f"  measured:           not here: {case.steps} calls are too many to run. Set your formula "
                     "beside nn.BatchNorm1d at a few hundred calls with the same momentum")
    without_eps = scale_after(replace(case, eps=0.0))
    if (not matched and bool(torch.isfinite(got)) and abs(float(got) - without_eps) <= 1e-9 * without_eps
            and abs(without_eps - expected) > 1e-6 * abs(expected)):
        lines.append(f"  Your r equals, to 1e-9, what the same calls give with eps = 0 (this case's eps is "
                     f"{case.eps!r}). Was eps left out?")
    elif not matched:  # a named mistake brings its own question
        lines.append("  What share of the starting running_var is left after these calls, what replaces the rest, "
                     "and which variance divides the output in each mode?")
    raise GradingFailure("\n".join(lines), suspects=matched)


def _eval_scale_cases(grading_seed: int | None) -> list[ScaleCase]:
    """Corners at every seed (values from the seed, structure fixed), then the visible case or two drawn ones."""
    gen = case_stream("11/bn_eval_scale", grading_seed)

    def case(n, steps, momentum, counter=0, eps=1e-5, note="", low=0.3, high=3.0):
        batch_var = round(float(uniform(gen, (), low, high)), 4)
        factor = float(uniform(gen, (), 1.6, 3.0)) if float(uniform(gen, (), 0, 1)) < 0.5 else float(
            uniform(gen, (), 0.2, 0.6))
        return ScaleCase(n, batch_var, round(batch_var * factor, 4), steps, momentum, eps, counter, note)

    # first: 10^12 calls, which only a closed form answers in time (a loop is stopped, and the check with it)
    cases = [case(3, 10 ** 12, 0.01, note=", 10^12 calls at momentum 0.01"),
             case(4, 10 ** 12, None, counter=7, note=", 10^12 calls with momentum=None from a counter at 7"),
             case(4, 0, None, note=", no training call yet (momentum=None, a counter at 0)"),
             case(2, 30, 0.1, note=", a batch of 2"),
             case(2, 80, 0.5, note=", settled: what the layer keeps for good"),
             case(5, 3, None, note=", momentum=None from a counter at 0"),
             case(3, 4, None, counter=4, note=", momentum=None resumed from a counter at 4, 4 calls more"),
             case(6, 10, 0.0, counter=2, note=", momentum 0"),
             case(6, 5, 0.2, eps=0.5, low=0.02, high=0.1, note=", a large eps"),
             case(8, 10 ** 6, 1e-6, note=", a million calls with a tiny momentum")]
    if grading_seed is None:
        return cases + [case(3, 12, 0.05)]
    momentum = None if randint(gen, 0, 2) == 0 else round(float(uniform(gen, (), 0.02, 0.3)), 3)
    tiny = round(float(uniform(gen, (), 1e-4, 1e-3)), 6)
    return cases + [case(randint(gen, 2, 9), randint(gen, 1, 60), momentum, counter=randint(gen, 0, 5)),
                    case(randint(gen, 2, 9), randint(gen, 2000, 10 ** 5), tiny)]


@check
def check_batchnorm_forward(batchnorm_forward, eval_scale, grading_seed: int | None = None) -> None:
    """Part D.1: batchnorm_forward(x, gamma, beta, running_mean, running_var, training, momentum, eps,
    num_batches_tracked=None) against nn.BatchNorm1d (:func:`bn_oracle`) on sequences of calls sharing one layer's
    state: training normalises with the batch's mean and biased variance, adds 1 to the counter (whatever the
    momentum) and updates the running statistics in place with the unbiased variance, exponentially or (None) as the
    cumulative average (the t-th batch weighs 1/t); a batch of one in training raises ValueError before changing
    anything (nn.BatchNorm1d counts it first: the one place the oracle is not followed); evaluation uses the running
    statistics and changes nothing. Domain: x float64 (N, D), N >= 1, any offset, requiring grad or not; gamma of
    both signs; running_var > 0; momentum in [0, 1) or None (then a counter is passed); eps > 0; the counter a 0-d
    integer tensor >= 0 or not passed. Corners at every seed: Part F's call (no counter) with running statistics far
    from the batch's, evaluation on 4 and on one; a constant feature and a large eps; momentum=None on batches of 2,
    7, 3 from 0, evaluation on one, a refused batch of one, then 4; None resumed from 5 (eps 0.1); momentum 0 twice
    (frozen statistics, the counter counting), once on x = X @ W with W requiring grad. Contracts: a plain (N, D)
    tensor, in x's graph when x requires grad, its weighted gradient to W equal to the oracle's (rtol 1e-7, the
    routes through the batch's mean and variance, :func:`_expect_gradient`); the running statistics and the counter
    never in a graph (proven RUNNING_IN_GRAPH), updated in place in training (storage), untouched at evaluation and
    on a refusal (values, storage, version); x, gamma, beta unchanged; no torch batch normalisation.

    Then eval_scale(n, batch_var, running_var, steps, momentum, eps, counter) (:class:`ScaleCase`) to rtol 1e-6 of
    the closed form :func:`scale_after`, itself held to nn.BatchNorm1d (:func:`measured_scale`) where the steps are
    few enough to run. Domain: n >= 2, variances > 0, steps >= 0 (up to 10^12), momentum in [0, 1) or None, eps > 0,
    counter >= 0. Corners at every seed, first 10^12 calls at momentum 0.01 and with None from a counter at 7 (each
    call has :data:`SCALE_BUDGET` s: a loop is stopped, and the check with it, a proven SCALE_STEPPED); no call yet
    (None from 0); a batch of 2 after 30 calls and after 80 at 0.5 (settled: r = sqrt((N − 1)/N) up to eps); None
    from 0 and resumed at 4; momentum 0; a large eps; a million calls at 1e-6. The message gives the inputs in full
    precision and the relative gap, never the expected r, and asks whether eps was left out when the numbers say so.
    """
    __tracebackhide__ = True
    for case in _bn_forward_cases(grading_seed):
        with trial():
            _run_bn_forward(batchnorm_forward, case)
    for scale_case in _eval_scale_cases(grading_seed):  # a loop over 10^12 calls stops the check (OutOfTime)
        with trial():
            if scale_case.steps <= MEASURED_STEPS:
                measured = measured_scale(scale_case)[0]
                if abs(measured - scale_after(scale_case)) > 1e-9 * abs(measured):
                    raise CourseBug(f"the closed form and nn.BatchNorm1d disagree on {scale_case}.")
            _run_eval_scale(eval_scale, scale_case)
