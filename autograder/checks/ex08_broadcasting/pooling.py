"""Part C: a bug hunt in a colleague's sentence scorer built from four hand-written autograd Functions
(:mod:`.colleague`). Every forward is right, and the training run reaches the noise floor; one backward mean is taken
over the batch axis instead of the features (it broadcasts back to the right shape at every size), so the gradient of
``scale``, whose own stage is right, is wrong. Graded: the stage named, the measured relative error of each
parameter's gradient, and the stage's right backward.

The oracles are the intended score written with plain autograd (:func:`intended_score`), its gradients, and central
differences in float64.
"""

from __future__ import annotations

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
    CENTRE_NO_KEEPDIM,
    COLLEAGUE_BACKWARD,
    MEAN_PATH_FORGOTTEN,
    NOT_RELATIVE,
    OTHER_STAGE,
    RELATIVE_TO_GIVEN,
    SYMPTOM_STAGE,
)

Tensor = torch.Tensor

#: The stage whose backward is wrong, and the names the notebook gives the four stages.
BUGGY_STAGE = "centre"
STAGE_NAMES = ("pool", "scale", "centre", "head")
PARAMETERS = ("w", "b", "scale")


def centre_forward(q: Tensor) -> Tensor:
    """The centre stage's forward with plain autograd."""
    return q - q.mean(dim=-1, keepdim=True)


def intended_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> Tensor:
    """The text's score with plain autograd: each sentence's mean over its real tokens, scaled, centred on its own
    mean, then w and b."""
    pooled = (x * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)   # (n, d)
    return centre_forward(pooled * scale) @ w + b                                  # (n,)


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


def _measure_variants(x, mask, y, w, b, scale) -> list[tuple]:
    given = loss_gradients(colleague.given_score, x, mask, y, w, b, scale)
    right = loss_gradients(intended_score, x, mask, y, w, b, scale)
    to_given = {n: ((g - r).norm() / g.norm()).item() for n, g, r in zip(PARAMETERS, given, right)}
    absolute = {n: (g - r).norm().item() for n, g, r in zip(PARAMETERS, given, right)}
    return [(RELATIVE_TO_GIVEN, to_given), (NOT_RELATIVE, absolute)]


def _measure_cases(grading_seed: int | None) -> list[tuple[Tensor, ...]]:
    """The notebook's data (public) or drawn sentences (hidden), then a few short sentences, at parameters drawn from
    the stream; then one batch of a single sentence, the same at every seed."""
    cases = []
    gen = case_stream("08/bug_hunt/measure", grading_seed)
    if grading_seed is None:
        x, mask, y = (t.double() for t in sentence_data())
    else:
        n, length, d = randint(gen, 5, 12), randint(gen, 2, 6), randint(gen, 2, 6)
        x, mask = _sentences(gen, n, length, d)
        y = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
    cases.append((x, mask, y, *_parameters(gen, x.shape[2])))
    n, length, d = randint(gen, 2, 4), randint(gen, 1, 4), randint(gen, 2, 4)      # a few short sentences
    x, mask = _sentences(gen, n, length, d)
    cases.append((x, mask, torch.rand(n, generator=gen, dtype=torch.float64), *_parameters(gen, d)))
    gen = case_stream("08/bug_hunt/one", None)
    x, mask = _sentences(gen, 1, 3, 4)
    cases.append((x, mask, torch.rand(1, generator=gen, dtype=torch.float64), *_parameters(gen, 4)))
    return cases


def _sentences(gen, n: int, length: int, d: int) -> tuple[Tensor, Tensor]:
    x = torch.rand((n, length, d), generator=gen, dtype=torch.float64) * 4 - 2
    mask = torch.zeros((n, length), dtype=torch.float64)
    for row in range(n):
        mask[row, :randint(gen, 1, length)] = 1
    return x, mask


def _parameters(gen, d: int) -> tuple[Tensor, Tensor, Tensor]:
    w = torch.rand(d, generator=gen, dtype=torch.float64) * 2 - 1
    return w, torch.rand((), generator=gen, dtype=torch.float64), torch.rand(d, generator=gen, dtype=torch.float64) + .5


#: The fix's corners (shapes of q), tried at every seed.
CORNER_SHAPES = [(3, 5), (4, 4), (1, 3), (2, 1), (0, 3)]


def _fix_cases(grading_seed: int | None) -> list[tuple[Tensor, Tensor]]:
    """(grad, q) in float64: the corners (rows and columns apart, square, one sentence, one feature, no sentence),
    then two (public: fixed, hidden: drawn) random shapes."""
    gen = case_stream("08/bug_hunt/fix", grading_seed)
    shapes = CORNER_SHAPES + [(randint(gen, 2, 6), randint(gen, 2, 6)) for _ in range(2)]
    return [(torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2,
             torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2) for shape in shapes]


def _check_stage(stage) -> None:
    __tracebackhide__ = True
    name = stage.strip().lower() if isinstance(stage, str) else stage
    if name == "center":
        name = "centre"
    if name not in STAGE_NAMES:
        raise GradingFailure(f"BUG_STAGE is {stage!r:.60}; expected one of the stage names {list(STAGE_NAMES)}.")
    if name == "scale":
        raise proven_failure("BUG_STAGE names 'scale'. A gradcheck of that stage alone, on float64 inputs of its own, "
                             "passes.", SYMPTOM_STAGE)
    if name != BUGGY_STAGE:
        raise proven_failure(f"BUG_STAGE names {name!r}. A gradcheck of that stage alone, on float64 inputs of its "
                             "own, passes.", OTHER_STAGE)


def _check_measure(measure_fn, x, mask, y, w, b, scale) -> None:
    __tracebackhide__ = True
    n, length, d = x.shape
    what = (f"measure_bug(x {tuple(x.shape)}, mask {tuple(mask.shape)} with {int(mask.sum())} real tokens, "
            f"y ({n},), w ({d},), b (), scale ({d},))")
    got = call_learner(measure_fn, x, mask, y, w, b, scale, what=what)
    if not isinstance(got, dict) or sorted(got) != sorted(PARAMETERS):
        raise GradingFailure(f"{what} returned {got!r:.120}; expected a dict with the keys {list(PARAMETERS)}.")
    want = measured_errors(x, mask, y, w, b, scale)
    received = torch.tensor([float(as_answer(got[name], what=f"{what}[{name!r}]")) for name in PARAMETERS],
                            dtype=torch.float64)
    expected = torch.tensor([want[name] for name in PARAMETERS], dtype=torch.float64)
    symptoms = [m.looks_like(torch.tensor([v[name] for name in PARAMETERS], dtype=torch.float64))
                for m, v in _measure_variants(x, mask, y, w, b, scale)]
    expect_close(received, expected, what=f"{what}, the relative errors for {list(PARAMETERS)}", source="expected",
                 rtol=1e-6, atol=1e-9, symptoms=symptoms)


def _check_fix(fix_fn, grad: Tensor, q: Tensor) -> None:
    __tracebackhide__ = True
    what = f"fixed_backward(grad {tuple(grad.shape)}, q {tuple(q.shape)})"
    try:
        got = call_learner(fix_fn, grad, q, what=what, forbid=[Route.AUTOGRAD])
    except GradingFailure as failure:
        keepdim = (failure.proven is None and q.shape[0] != q.shape[1]
                   and any(text in failure.message for text in ("must match the size", "size of tensor")))
        if not keepdim:
            raise
        raise GradingFailure(failure.message, suspects=(CENTRE_NO_KEEPDIM,)) from None
    if type(got) in (tuple, list):
        if len(got) != 1:
            raise GradingFailure(f"{what} returned {len(got)} values; the stage has one input, q.")
        got = got[0]
    got = as_answer(got, what=what, shape=tuple(q.shape))

    def f(q_):
        return (grad * centre_forward(q_)).sum()

    symptoms = [COLLEAGUE_BACKWARD.looks_like(grad - grad.mean(dim=0)), MEAN_PATH_FORGOTTEN.looks_like(grad)]
    if q.shape[0] == q.shape[1]:
        symptoms.append(CENTRE_NO_KEEPDIM.looks_like(grad - grad.mean(dim=1)))
    expect_close(got, autograd_gradient(f, q)[0], what=what, fd=central_difference(f, q)[0], symptoms=symptoms,
                 extra=f"  grad: {grad.tolist()}")


@check
def check_bug_hunt(stage, measure_fn, fix_fn, grading_seed: int | None = None) -> None:
    """Part C: BUG_STAGE names the stage whose backward is wrong ('centre'); measure_bug(x, mask, y, w, b, scale)
    returns, for w, b and scale, the relative error ||given - right|| / ||right|| of the mean squared error's gradient
    through the given scorer; fixed_backward(grad, q) returns the centre stage's right backward (a tensor or a
    1-tuple), each leaving its arguments unchanged.

    Domain: measure_bug: x (n, L, d), mask (n, L) of 0.0 / 1.0 with at least one 1 per row, y (n,), w and scale (d,),
    b 0-d, float64, n >= 1, d >= 2, every right gradient nonzero. fixed_backward: grad and q float64 of one shape
    (n, d), n >= 0, d >= 1, no autograd. Cases: the stage; the notebook's data (public) or drawn sentences (hidden),
    then a few short sentences (drawn), and one sentence alone, the same at every seed; the fix's corners
    (:data:`CORNER_SHAPES`: rows and columns apart, square, one sentence, one feature, none),
    then two fixed (public) or drawn (hidden) shapes."""
    __tracebackhide__ = True
    if stage is None:
        raise NotWritten("Not written yet: BUG_STAGE is still None. Set it, in its cell, to the name of the stage "
                         "whose backward is wrong.")
    with trial():
        _check_stage(stage)
    for case in _measure_cases(grading_seed):
        with trial():
            _check_measure(measure_fn, *case)
    for grad, q in _fix_cases(grading_seed):
        with trial():
            _check_fix(fix_fn, grad, q)
