"""Part C: a bug hunt in a colleague's sentence scorer built from four hand-written autograd Functions
(:mod:`.colleague`). Every forward is right, and the training run reaches the noise floor; the pool stage's backward
divides by the batch's mean number of real tokens instead of each sentence's own count, which is right for a single
sentence, for sentences of one length and for batches without padding, so a stage test on inputs not chosen for it
passes. Graded: the stage named, the parameters predicted to be affected, the measured relative error of each
parameter's gradient, and the stage's right backward.

The oracles are the intended score written with plain autograd (:func:`intended_score`), its gradients, and central
differences in float64.
"""

from __future__ import annotations

import functools

import torch

from ...checking import (
    GradingFailure,
    NotWritten,
    as_answer,
    call_learner,
    check,
    expect_close,
    proven_failure,
    trial,
)
from ...oracles import autograd_gradient, central_difference
from ...routes import Route
from ..cases import case_stream, randint
from . import colleague
from .misconceptions import (
    AFFECTED_DOWNSTREAM,
    AFFECTED_MISSED,
    COLLEAGUE_BACKWARD,
    NOT_AVERAGED,
    NOT_RELATIVE,
    OTHER_STAGE,
    PADDING_COUNTED,
    PADDING_GRADIENT,
    RELATIVE_TO_GIVEN,
    SYMPTOM_STAGE,
)

Tensor = torch.Tensor

#: The stage whose backward is wrong, the names the notebook gives the four stages, and the parameters.
BUGGY_STAGE = "pool"
STAGE_NAMES = ("scale", "pool", "centre", "head")
PARAMETERS = ("w", "b", "scale")
#: The parameters whose gradient passes through the pool stage's backward.
AFFECTED = frozenset({"scale"})


def pool_forward(q: Tensor, mask: Tensor) -> Tensor:
    """The pool stage's forward with plain autograd: each sentence's mean over its real tokens."""
    return (q * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)


def intended_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> Tensor:
    """The text's score with plain autograd: every token scaled, each sentence's mean over its real tokens, centred on
    its own mean, then w and b."""
    p = pool_forward(x * scale, mask)                                    # (n, d)
    return (p - p.mean(dim=-1, keepdim=True)) @ w + b                    # (n,)


def _bound_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> Tensor:
    """intended_score with every number made positive and the subtraction made an addition: every term's size."""
    p = pool_forward(x.abs() * scale.abs(), mask)
    return (p + p.mean(dim=-1, keepdim=True)) @ w.abs() + b.abs()


def sentence_data(length: int = 8) -> tuple[Tensor, Tensor, Tensor]:
    """The notebook's data: (x, mask, y) for 64 sentences of 1 to 8 tokens of 8 float32 features, padded (with
    numbers of their own) to ``length`` >= 8 positions; y is the intended score of true parameters plus a noise of
    standard deviation 0.05."""
    gen = torch.Generator().manual_seed(0)
    n, d = 64, 8
    x = torch.randn(n, 8, d, generator=gen)
    lengths = torch.randint(1, 9, (n,), generator=gen)
    w, scale = torch.randn(d, generator=gen), torch.rand(d, generator=gen) + 0.5
    noise = 0.05 * torch.randn(n, generator=gen)
    x = torch.cat([x, torch.randn(n, length - 8, d, generator=gen)], dim=1)
    mask = (torch.arange(length) < lengths[:, None]).float()
    return x, mask, intended_score(x, mask, w, torch.tensor(0.5), scale) + noise


def loss_gradients(score_fn, x: Tensor, mask: Tensor, y: Tensor, w: Tensor, b: Tensor, scale: Tensor):
    """The gradients of the mean squared error of ``score_fn`` with respect to w, b and scale."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (w, b, scale)]
    loss = ((score_fn(x, mask, *leaves) - y) ** 2).mean()
    return torch.autograd.grad(loss, leaves)


def measured_errors(x: Tensor, mask: Tensor, y: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> dict[str, float]:
    """For each parameter, ||given - right|| / ||right|| of the loss gradient (2-norms)."""
    given = loss_gradients(colleague.given_score, x, mask, y, w, b, scale)
    right = loss_gradients(intended_score, x, mask, y, w, b, scale)
    return {name: ((g - r).norm() / r.norm()).item() for name, g, r in zip(PARAMETERS, given, right)}


def roundoff(x: Tensor, mask: Tensor, y: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> float:
    """The largest relative error, over the parameters, that float64 round-off alone can give a right measurement:
    a thousand times eps times the gradient of the loss with every term counted by its size, over the right
    gradient's norm (near the fitted optimum a gradient is a small difference of large terms)."""
    right = loss_gradients(intended_score, x, mask, y, w, b, scale)
    sizes = loss_gradients(_bound_score, x, mask, -y.abs(), w, b, scale)
    eps = torch.finfo(torch.float64).eps
    return max(1e3 * eps * (s.norm() / r.norm()).item() for s, r in zip(sizes, right))


def _measure_variants(x, mask, y, w, b, scale) -> list[tuple]:
    given = loss_gradients(colleague.given_score, x, mask, y, w, b, scale)
    right = loss_gradients(intended_score, x, mask, y, w, b, scale)
    to_given = {n: ((g - r).norm() / g.norm()).item() for n, g, r in zip(PARAMETERS, given, right)}
    absolute = {n: (g - r).norm().item() for n, g, r in zip(PARAMETERS, given, right)}
    return [(RELATIVE_TO_GIVEN, to_given), (NOT_RELATIVE, absolute)]


@functools.lru_cache(maxsize=1)
def fitted_parameters() -> tuple[Tensor, Tensor, Tensor]:
    """The notebook's fit: 500 steps of gradient descent (lr 0.1) through the given scorer, in float32, from w = 0,
    b = 0, scale = 1; returned in float64."""
    x, mask, y = sentence_data()
    d = x.shape[2]
    params = [torch.zeros(d), torch.zeros(()), torch.ones(d)]
    for _ in range(500):
        grads = loss_gradients(colleague.given_score, x, mask, y, *params)
        params = [p - 0.1 * g for p, g in zip(params, grads)]
    return tuple(p.double() for p in params)


def _measure_cases(grading_seed: int | None) -> list[tuple[Tensor, ...]]:
    """The notebook's data at parameters drawn from the stream and at the fitted ones (public), or drawn sentences
    (hidden); then a few short sentences of different lengths; then, the same at every seed, a batch whose sentences
    all have one length (with padding) and a batch of one sentence, where the bug vanishes."""
    cases = []
    gen = case_stream("08/bug_hunt/measure", grading_seed)
    if grading_seed is None:
        x, mask, y = (t.double() for t in sentence_data())
        cases.append((x, mask, y, *_parameters(gen, x.shape[2])))
        cases.append((x, mask, y, *fitted_parameters()))
    else:
        n, length, d = randint(gen, 5, 12), randint(gen, 2, 6), randint(gen, 2, 6)
        x, mask = _sentences(gen, n, length, d)
        y = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
        cases.append((x, mask, y, *_parameters(gen, d)))
    n, length, d = randint(gen, 3, 5), randint(gen, 2, 4), randint(gen, 2, 4)      # a few short sentences
    x, mask = _sentences(gen, n, length, d, ragged=True)
    cases.append((x, mask, torch.rand(n, generator=gen, dtype=torch.float64), *_parameters(gen, d)))
    gen = case_stream("08/bug_hunt/one", None)
    for n, lengths in ((3, [2, 2, 2]), (1, [3])):
        x, mask = _sentences(gen, n, 4, 3)
        mask = (torch.arange(4) < torch.tensor(lengths)[:, None]).double()
        cases.append((x, mask, torch.rand(n, generator=gen, dtype=torch.float64), *_parameters(gen, 3)))
    return cases


def _sentences(gen, n: int, length: int, d: int, ragged: bool = False) -> tuple[Tensor, Tensor]:
    x = torch.rand((n, length, d), generator=gen, dtype=torch.float64) * 4 - 2
    mask = torch.zeros((n, length), dtype=torch.float64)
    for row in range(n):
        mask[row, :randint(gen, 1, length)] = 1
    if ragged:                                          # two sentences of different lengths at least
        mask[0], mask[1, 1:] = 1, 0
    return x, mask


def _parameters(gen, d: int) -> tuple[Tensor, Tensor, Tensor]:
    w = torch.rand(d, generator=gen, dtype=torch.float64) * 2 - 1
    return w, torch.rand((), generator=gen, dtype=torch.float64), torch.rand(d, generator=gen, dtype=torch.float64) + .5


#: The fix's corners: (n, L, d) and each sentence's number of real tokens, tried at every seed.
CORNERS = [((3, 4, 2), [1, 4, 2]), ((3, 4, 2), [2, 2, 2]), ((2, 3, 3), [3, 3]), ((1, 4, 3), [2]),
           ((3, 1, 2), [1, 1, 1]), ((2, 3, 1), [3, 1]), ((0, 3, 2), [])]


def _fix_cases(grading_seed: int | None) -> list[tuple[Tensor, Tensor, Tensor]]:
    """(grad, q, mask) in float64: the corners (lengths apart, one length with padding, no padding, one sentence,
    one position, one feature, no sentence), then two (public: fixed, hidden: drawn) random batches."""
    gen = case_stream("08/bug_hunt/fix", grading_seed)
    shapes = list(CORNERS)
    for _ in range(2):
        n, length = randint(gen, 2, 5), randint(gen, 2, 5)
        shapes.append(((n, length, randint(gen, 1, 4)), [randint(gen, 1, length) for _ in range(n)]))
    cases = []
    for (n, length, d), lengths in shapes:
        mask = (torch.arange(length) < torch.tensor(lengths, dtype=torch.int64)[:, None]).double()
        cases.append((torch.rand((n, d), generator=gen, dtype=torch.float64) * 4 - 2,
                      torch.rand((n, length, d), generator=gen, dtype=torch.float64) * 4 - 2, mask))
    return cases


def _check_stage(stage) -> None:
    __tracebackhide__ = True
    name = stage.strip().lower() if isinstance(stage, str) else stage
    if name == "center":
        name = "centre"
    if name not in STAGE_NAMES:
        raise GradingFailure(f"BUG_STAGE is {stage!r:.60}; expected one of the stage names {list(STAGE_NAMES)}.")
    if name == "scale":
        raise proven_failure("BUG_STAGE names 'scale'. A gradcheck of that stage alone, on float64 inputs of any "
                             "shape, passes.", SYMPTOM_STAGE)
    if name != BUGGY_STAGE:
        raise proven_failure(f"BUG_STAGE names {name!r}. A gradcheck of that stage alone, on float64 inputs of any "
                             "shape, passes.", OTHER_STAGE)


def _check_affected(affected) -> None:
    __tracebackhide__ = True
    if not isinstance(affected, (set, frozenset, list, tuple)) or not all(isinstance(p, str) for p in affected):
        raise GradingFailure(f"AFFECTED is {affected!r:.80}; expected a set of parameter names among "
                             f"{list(PARAMETERS)}.")
    names = {p.strip().lower() for p in affected}
    if not names <= set(PARAMETERS):
        raise GradingFailure(f"AFFECTED holds {sorted(names - set(PARAMETERS))}; the parameters are "
                             f"{list(PARAMETERS)}.")
    extra, missed = sorted(names - AFFECTED), sorted(AFFECTED - names)
    if extra:
        raise proven_failure(f"AFFECTED holds {extra}, whose gradient a wrong backward in the stage you found cannot "
                             "change: measure it.", AFFECTED_DOWNSTREAM)
    if missed:
        raise proven_failure(f"AFFECTED leaves out {missed}.", AFFECTED_MISSED)


def _check_measure(measure_fn, x, mask, y, w, b, scale) -> None:
    __tracebackhide__ = True
    n, length, d = x.shape
    lengths = sorted({int(v) for v in mask.sum(dim=1)})
    what = (f"measure_bug(x {tuple(x.shape)}, mask {tuple(mask.shape)} with sentences of {lengths} real tokens, "
            f"y ({n},), w ({d},), b (), scale ({d},))")
    got = call_learner(measure_fn, x, mask, y, w, b, scale, what=what)
    if not isinstance(got, dict) or sorted(got) != sorted(PARAMETERS):
        raise GradingFailure(f"{what} returned {got!r:.120}; expected a dict with the keys {list(PARAMETERS)}.")
    for name in PARAMETERS:
        if type(got[name]) is not float:
            raise GradingFailure(f"{what}[{name!r}] is a {type(got[name]).__name__}; the part asks for a Python "
                                 "float.")
    want = measured_errors(x, mask, y, w, b, scale)
    received = torch.tensor([as_answer(got[name], what=f"{what}[{name!r}]").item() for name in PARAMETERS],
                            dtype=torch.float64)
    expected = torch.tensor([want[name] for name in PARAMETERS], dtype=torch.float64)
    symptoms = [m.looks_like(torch.tensor([v[name] for name in PARAMETERS], dtype=torch.float64))
                for m, v in _measure_variants(x, mask, y, w, b, scale)]
    expect_close(received, expected, what=f"{what}, the relative errors for {list(PARAMETERS)}", source="expected",
                 rtol=1e-6, atol=max(1e-9, roundoff(x, mask, y, w, b, scale)), symptoms=symptoms)


def _check_fix(fix_fn, grad: Tensor, q: Tensor, mask: Tensor) -> None:
    __tracebackhide__ = True
    lengths = [int(v) for v in mask.sum(dim=1)]
    what = f"fixed_backward(grad {tuple(grad.shape)}, q {tuple(q.shape)}, mask with real tokens {lengths})"
    got = call_learner(fix_fn, grad, q, mask, what=what, forbid=[Route.AUTOGRAD])
    if type(got) in (tuple, list):
        raise GradingFailure(f"{what} returned a {type(got).__name__} of {len(got)}; the part asks for a single "
                             "tensor, the gradient with respect to q (the mask is data: it gets none).")
    got = as_answer(got, what=what, shape=tuple(q.shape))

    def f(q_):
        return (grad * pool_forward(q_, mask)).sum()

    spread = grad.unsqueeze(1) * mask.unsqueeze(-1)
    symptoms = [COLLEAGUE_BACKWARD.looks_like(spread / (mask.sum() / max(len(mask), 1))),
                PADDING_COUNTED.looks_like(spread / mask.shape[1]),
                PADDING_GRADIENT.looks_like(grad.unsqueeze(1).expand_as(q) / mask.sum(dim=1)[:, None, None]),
                NOT_AVERAGED.looks_like(spread)]
    expect_close(got, autograd_gradient(f, q)[0], what=what, fd=central_difference(f, q)[0], symptoms=symptoms,
                 extra=f"  grad: {grad.tolist()}")


@check
def check_bug_hunt(stage, affected, measure_fn, fix_fn, grading_seed: int | None = None) -> None:
    """Part C: BUG_STAGE names the stage whose backward is wrong ('pool'); AFFECTED the parameters whose gradient it
    can change ({'scale'}); measure_bug(x, mask, y, w, b, scale) returns, for w, b and scale, the relative error
    ||given - right|| / ||right|| of the mean squared error's gradient through the given scorer, as Python floats;
    fixed_backward(grad, q, mask) returns the pool stage's right gradient with respect to q (a single tensor), each
    leaving its arguments unchanged.

    Domain: measure_bug: x (n, L, d), mask (n, L) of 0.0 / 1.0 with at least one 1 per row, y (n,), w and scale (d,),
    b 0-d, float64, n >= 1, d >= 2, every right gradient nonzero; a measurement counts as zero up to round-off
    (:func:`roundoff`). fixed_backward: grad (n, d), q (n, L, d) and mask (n, L) float64, n >= 0, L, d >= 1, no
    autograd. Cases: the stage; the prediction; the notebook's data at drawn and at the fitted parameters (public) or
    drawn sentences (hidden), then a few short sentences of different lengths (drawn), then one length for all and
    one sentence alone, the same at every seed; the fix's corners (:data:`CORNERS`), then two fixed (public) or
    drawn (hidden) batches."""
    __tracebackhide__ = True
    if stage is None:
        raise NotWritten("Not written yet: BUG_STAGE is still None. Set it, in its cell, to the name of the stage "
                         "whose backward is wrong.")
    with trial():
        _check_stage(stage)
    with trial():
        if affected is None:
            raise GradingFailure("AFFECTED is still None: set it, in the BUG_STAGE cell, to the set of parameters "
                                 "whose gradient the bug can change.")
        _check_affected(affected)
    for case in _measure_cases(grading_seed):
        with trial():
            _check_measure(measure_fn, *case)
    for grad, q, mask in _fix_cases(grading_seed):
        with trial():
            _check_fix(fix_fn, grad, q, mask)
