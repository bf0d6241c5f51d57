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
    HIDING_SHOWS,
    NOT_AVERAGED,
    NOT_RELATIVE,
    OTHER_STAGE,
    PADDING_COUNTED,
    PADDING_GRADIENT,
    RELATIVE_TO_GIVEN,
    SHOWING_HIDES,
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


def _check_affected(affected, measure_fn) -> None:
    """The prediction; a wrong one is answered with the learner's own measurement on the notebook's data, never with
    the names it misses or holds in excess."""
    __tracebackhide__ = True
    if not isinstance(affected, (set, frozenset, list, tuple)) or not all(isinstance(p, str) for p in affected):
        raise GradingFailure(f"AFFECTED is {affected!r:.80}; expected a set of parameter names among "
                             f"{list(PARAMETERS)}.")
    names = {p.strip().lower() for p in affected}
    if not names <= set(PARAMETERS):
        raise GradingFailure(f"AFFECTED holds {sorted(names - set(PARAMETERS))}; the parameters are "
                             f"{list(PARAMETERS)}.")
    if names == AFFECTED:
        return
    message = (f"AFFECTED = {sorted(names)} is not the set of parameters whose gradient a wrong backward in the "
               f"stage you found can change. {_own_measurement(measure_fn)} Does your prediction agree with it? One "
               "batch can prove a gradient wrong, not that it is safe on every batch: for that, follow each "
               "parameter's gradient from the loss back to the stage where the parameter enters.")
    raise proven_failure(message, AFFECTED_DOWNSTREAM if names - AFFECTED else AFFECTED_MISSED)


def _own_measurement(measure_fn) -> str:
    """What the learner's measure_bug says on the notebook's data in float64 at the fitted parameters."""
    x, mask, y = (t.double() for t in sentence_data())
    w, b, scale = fitted_parameters()
    what = "measure_bug on the notebook's data (float64, at the fitted parameters)"
    try:
        got = call_learner(measure_fn, x, mask, y, w, b, scale, what=what)
        shown = ", ".join(f"{name} {float(got[name]):.3g}" for name in PARAMETERS)
    except Exception:                                   # not written, raised, or not a dict of numbers
        return f"Your {what} gives no relative error per parameter yet: measure, then compare."
    return (f"Your {what} gives the relative errors {shown}, where round-off alone stays below "
            f"{roundoff(x, mask, y, w, b, scale):.1g}.")


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
    atol = max(1e-9, roundoff(x, mask, y, w, b, scale))
    off = (received - expected).abs()
    wrong = off > atol + 1e-6 * expected.abs()
    single = bool(wrong.any()) and bool((off[wrong] <= 1e-3 * expected[wrong].abs().clamp(min=1e-3)).all())
    extra = ("  your values are off by about float32's round-off (some 1e-7 relative per operation), far above "
             "float64's (1e-16): in which precision did your measurement compute?") if single else ""
    expect_close(received, expected, what=f"{what}: the list of its relative errors for {list(PARAMETERS)}",
                 source="expected", rtol=1e-6, atol=atol, symptoms=symptoms, extra=extra)


def _fix_answer(fix_fn, grad: Tensor, q: Tensor, mask: Tensor) -> Tensor | GradingFailure:
    """What fixed_backward returns for one case, as a float64 tensor of q's shape, or the failure saying why it is
    none (a "not written yet" stops the check at once)."""
    __tracebackhide__ = True
    what = _fix_what(grad, q, mask)
    try:
        got = call_learner(fix_fn, grad, q, mask, what=what, forbid=[Route.AUTOGRAD])
        if type(got) in (tuple, list):
            raise GradingFailure(f"{what} returned a {type(got).__name__} of {len(got)}; the part asks for a single "
                                 "tensor, the gradient with respect to q (the mask is data: it gets none).")
        return as_answer(got, what=what, shape=tuple(q.shape))
    except NotWritten:
        raise
    except GradingFailure as failure:
        return failure


def _fix_what(grad: Tensor, q: Tensor, mask: Tensor) -> str:
    return (f"fixed_backward(grad {tuple(grad.shape)}, q {tuple(q.shape)}, mask with real tokens "
            f"{[int(v) for v in mask.sum(dim=1)]})")


def _given_pool_gradient(grad: Tensor, q: Tensor, mask: Tensor) -> Tensor:
    """What the colleague's pool stage passes back to q for the upstream gradient ``grad``."""
    leaf = q.clone().requires_grad_(True)
    given, = torch.autograd.grad(colleague.pool(leaf, mask), leaf, grad, allow_unused=True)
    return torch.zeros_like(q) if given is None else given.detach()


def _pooled(grad: Tensor, mask: Tensor, q: Tensor) -> Tensor:
    return (grad * pool_forward(q, mask)).sum()


def _given_unchanged(cases, answers) -> str:
    """When every tensor fixed_backward returned is the colleague's pool gradient (to round-off) and at least two of
    them differ from the right one: the evidence, case by case, of where that backward is right and where it is
    not; otherwise ''."""
    right, wrong = [], []
    for (grad, q, mask), got in zip(cases, answers):
        if not isinstance(got, Tensor):
            continue
        given = _given_pool_gradient(grad, q, mask)
        if not bool(torch.allclose(got, given, rtol=1e-6, atol=1e-9)):
            return ""
        correct = autograd_gradient(functools.partial(_pooled, grad, mask), q)[0]
        lengths = [int(v) for v in mask.sum(dim=1)]
        (right if bool(torch.allclose(given, correct, rtol=1e-6, atol=1e-8)) else wrong).append(str(lengths))
    if len(wrong) < 2:
        return ""
    returned = len(right) + len(wrong)
    where = ("On every batch this test tried" if returned == len(cases) else
             f"On the {returned} of the {len(cases)} batches this test tried where it returned a tensor")
    return (f"\n  {where}, your fixed_backward returns what the colleague's pool stage passes "
            f"back (to round-off). Compared with autograd and central differences (float64), that is right for the "
            f"batches of sentences with {', '.join(right) or 'none'} real tokens, and wrong for those with "
            f"{', '.join(wrong)}.")


def _check_fix(got: Tensor | GradingFailure, grad: Tensor, q: Tensor, mask: Tensor, unchanged: str) -> None:
    __tracebackhide__ = True
    if isinstance(got, GradingFailure):
        raise got
    what = _fix_what(grad, q, mask)
    padded = (mask == 0).unsqueeze(-1).expand_as(q) & ~(got.abs() <= 1e-8)      # nan too
    if padded.any():
        index = tuple(int(i) for i in padded.nonzero()[0])
        raise proven_failure(f"{what} gives a padding position a gradient: at index {index} (sentence {index[0]}, "
                             f"position {index[1]}, where the mask holds 0) yours is {float(got[index]):.6g}; "
                             "autograd and central differences (float64) give 0 (absolute error "
                             f"{abs(float(got[index])):.3g}).", PADDING_GRADIENT)

    def f(q_):
        return (grad * pool_forward(q_, mask)).sum()

    spread = grad.unsqueeze(1) * mask.unsqueeze(-1)
    symptoms = [COLLEAGUE_BACKWARD.given(bool(unchanged)),
                PADDING_COUNTED.looks_like(spread / mask.shape[1]),
                NOT_AVERAGED.looks_like(spread)]
    expect_close(got, autograd_gradient(f, q)[0], what=what, fd=central_difference(f, q)[0], symptoms=symptoms,
                 extra=f"  grad: {grad.tolist()}{unchanged}")


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
        _check_affected(affected, measure_fn)
    for case in _measure_cases(grading_seed):
        with trial():
            _check_measure(measure_fn, *case)
    cases = _fix_cases(grading_seed)
    answers = [_fix_answer(fix_fn, *case) for case in cases]
    unchanged = _given_unchanged(cases, answers)
    for case, got in zip(cases, answers):
        with trial():
            _check_fix(got, *case, unchanged)


def _as_mask(mask, name: str) -> Tensor:
    __tracebackhide__ = True
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or not mask.is_floating_point():
        raise GradingFailure(f"{name} is {mask!r:.80}; expected a float tensor of shape (n, L), the way the scorer "
                             "takes a mask.")
    mask = mask.detach().to(torch.float64).clone()
    if not bool(((mask == 0) | (mask == 1)).all()) or mask.numel() == 0 or not bool((mask.sum(dim=1) >= 1).all()):
        raise GradingFailure(f"{name} of shape {tuple(mask.shape)} is not a mask the scorer takes: it holds 0.0 and "
                             "1.0 only, at least one sentence, and every sentence at least one real token (a 1).")
    return mask


def _pool_gradients(mask: Tensor, gen) -> tuple[Tensor, Tensor, Tensor]:
    """For a drawn q (n, L, d) and upstream gradient: q's gradient through the given pool, through the formula with
    autograd, and by central differences."""
    n, length = mask.shape
    d = randint(gen, 2, 4)
    q = torch.rand((n, length, d), generator=gen, dtype=torch.float64) * 4 - 2
    grad = torch.rand((n, d), generator=gen, dtype=torch.float64) * 4 - 2
    leaf = q.clone().requires_grad_(True)
    given, = torch.autograd.grad(colleague.pool(leaf, mask), leaf, grad)

    def f(q_):
        return (grad * pool_forward(q_, mask)).sum()

    return given.detach(), autograd_gradient(f, q)[0], central_difference(f, q)[0]


def _check_batch(mask: Tensor, name: str, hides: bool, gen) -> None:
    __tracebackhide__ = True
    lengths = [int(v) for v in mask.sum(dim=1)]
    what = f"{name} (shape {tuple(mask.shape)}, sentences of {lengths} real tokens)"
    if hides and (len(mask) < 2 or bool((mask == 1).all())):
        raise GradingFailure(f"{what} has {'one sentence' if len(mask) < 2 else 'no padding'}; the part asks for a "
                             "batch like the scorer's, of at least two sentences and some padding, on which the bug "
                             "hides.")
    given, right, fd = _pool_gradients(mask, gen)
    error = (given - right).abs()
    worst = tuple(int(i) for i in torch.unravel_index(torch.argmax(error), error.shape))
    evidence = (f"For a random input of shape {tuple(given.shape)} and upstream gradient, the colleague's wrong "
                f"backward gives "
                f"{float(given[worst]):.6g} at index {worst}, where autograd on the formula gives "
                f"{float(right[worst]):.6g} and central differences (float64) {float(fd[worst]):.6g}; the largest "
                f"difference is {float(error.max()):.3g}, round-off is below 1e-12.")
    if hides and float(error.max()) > 1e-12 * (1 + float(right.abs().max())):
        raise proven_failure(f"{what} should hide the bug, but it shows it. {evidence}", HIDING_SHOWS)
    if not hides and float(error.max()) <= 1e-6 * (1 + float(right.abs().max())):
        raise proven_failure(f"{what} should show the bug, but it hides it. {evidence}", SHOWING_HIDES)


@check
def check_bug_batches(hiding, showing, grading_seed: int | None = None) -> None:
    """Part C: HIDING_MASK is a batch of at least two sentences with some padding on which the given pool's backward
    is exact (up to round-off, for drawn q and upstream gradients); SHOWING_MASK a batch on which it is wrong by more
    than round-off. Domain: masks (n, L) of 0.0 / 1.0, float, with at least one 1 per row. Cases: each mask with two
    drawn (q, upstream gradient) pairs of 2 to 4 features, fixed (public) or from the grading seed (hidden)."""
    __tracebackhide__ = True
    for mask, name in ((hiding, "HIDING_MASK"), (showing, "SHOWING_MASK")):
        if mask is None:
            raise NotWritten(f"Not written yet: {name} is still None. Set it, in its cell, to a mask of shape (n, L).")
    gen = case_stream("08/bug_hunt/batches", grading_seed)
    for mask, name, hides in ((hiding, "HIDING_MASK", True), (showing, "SHOWING_MASK", False)):
        with trial():
            mask = _as_mask(mask, name)
            for _ in range(2):
                _check_batch(mask, name, hides, gen)
