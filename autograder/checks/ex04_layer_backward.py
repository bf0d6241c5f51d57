"""Checks for exercise 04, hand-derived backward passes: linear, softmax (forward and backward), cross-entropy,
attention, custom Functions.

Every check's docstring states the domain its part allows (shapes, dtypes, values) and every corner of that domain is a
fixed case that runs first, at every seed (a batch of one, C = 1, an empty batch, d = 1, logits large enough to overflow
a naive ``exp`` in float64, 0-d inputs...); the seed varies only the rest. Every gradient is compared with autograd and
float64 central differences, on shapes where the usual mistakes cannot hide: batch > 1 (sums over the batch show),
batch, features and outputs all different (a transpose has the wrong shape), d > 1 (the 1/√d shows), square softmax
batches (a row sum without keepdim broadcasts silently), labels that leave the last class out (``F.one_hot`` without
``num_classes`` is too narrow). Each case is a :func:`~autograder.checking.trial`, and every mistake below shows in at
least two cases of the visible and of the hidden test, so that it can be named; a case never names a mistake whose value
there is the right answer (:func:`~autograder.misconceptions.armed`).

Parts A–D are derived by hand: the learner's function runs with autograd forbidden
(:class:`~autograder.routes.Route`), on the caller's own tensors, which must come back unchanged and must not be
aliased by the result; Part B's softmax is written without PyTorch's softmax family. Part E's backward must not run
autograd either, and its forward must hand tensors to backward through ``ctx.save_for_backward`` only.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.gradcheck import GradcheckError

from ..checking import (
    CourseBug,
    GradingFailure,
    Misconception,
    Route,
    Routes,
    Symptom,
    as_answer,
    call_learner,
    check,
    expect_close,
    expect_no_alias,
    fmt,
    proven_failure,
    trial,
)
from ..oracles import autograd_gradient, central_difference
from ..routes import MISCONCEPTIONS as ROUTE_MISCONCEPTIONS
from ..routes import watch_calls
from ..seeding import choice, uniform
from .cases import case_stream
from .shared import CE_NOT_DIVIDED

Tensor = torch.Tensor

# ---------------------------------------------------------------------------------------------------------------
# Misconceptions (fixed text: the numbers of a case go in the failure message)

SUM_RULE = ("b is added to every row of Y, so its gradient collects one contribution per row: a sum over the batch "
            "axis, which leaves one number per output, b's shape.")
TRANSPOSED_DX = Misconception(
    "transposed input gradient", "Your dX is the transpose of the right one. dX must have X's shape (N, D_in): ask "
    "which product of dY and W has that shape.")
TRANSPOSED_DW = Misconception(
    "transposed weight gradient", "Your dW is the transpose of the right one; it has W's shape only because W is "
    "square here. dW must have W's shape (D_in, D_out): ask which product of X and dY has that shape.")
DW_AVERAGED = Misconception(
    "weight gradient averaged over the batch", "Your dW is N times too small. W is used once per row and the rows' "
    "contributions add; any averaging belongs to the loss and already arrives inside dY.")
BIAS_NOT_SUMMED = Misconception(
    "bias gradient not summed over the batch", "You returned one row's gradient (or dY itself). " + SUM_RULE)
BIAS_AVERAGED = Misconception(
    "bias gradient averaged over the batch", "Your db is N times too small: a mean instead of a sum. Any averaging "
    "belongs to the loss and already arrives inside dY. " + SUM_RULE)
BIAS_WRONG_AXIS = Misconception(
    "bias gradient summed over the wrong axis", "You summed each row's outputs instead of the batch. " + SUM_RULE)
FLOAT32_RESULT = Misconception(
    "result in float32 where the part asks for float64", "The inputs are float64 and so must the result be: float32 "
    "keeps about 7 significant digits, float64 about 16. A tensor built from Python numbers (torch.tensor of a list, "
    "torch.zeros or torch.empty without a dtype) is float32 by default; compute from the inputs, or give their dtype.")

SOFTMAX_ONE_DOT = ("Each slice along the last dimension is its own softmax, with its own dot product ⟨ds, s⟩ "
                   "subtracted from that slice's ds.")
SOFTMAX_ELEMENTWISE = Misconception(
    "softmax gradient as s(1 − s) elementwise", "That is only the diagonal of the Jacobian diag(s) − s·sᵀ: every "
    "output depends on every logit through the shared denominator, so the off-diagonal terms −s_i·s_j count too. "
    "(The right gradient sums to zero over each softmax; yours does not.)")
SOFTMAX_WHOLE_SUM = Misconception(
    "sum over the whole tensor instead of each row", "You took one dot product over the whole tensor. "
    + SOFTMAX_ONE_DOT)
SOFTMAX_WRONG_AXIS = Misconception(
    "softmax backward summed over the wrong axis", "Your dot products ran along another axis than the softmax. "
    + SOFTMAX_ONE_DOT)
SOFTMAX_NO_KEEPDIM = Misconception(
    "row sums without keepdim", "Your row sums lost their dimension, so subtracting them lines them up with the "
    "columns instead of the rows: an error when the shapes differ, silently wrong when the last two dimensions are "
    "equal. " + SOFTMAX_ONE_DOT)
SOFTMAX_REVERSED = Misconception(
    "dot product subtracted the wrong way round", "You subtracted ds from the dot product ⟨ds, s⟩ instead of the "
    "dot product from ds: every entry has the wrong sign.")

SHIFT_RULE = ("Shift each row by a constant that makes all its exponents at most 0: the shift cancels between "
              "numerator and denominator, so it is the same softmax (torch.softmax and F.cross_entropy do this).")
NAIVE_SOFTMAX = Misconception(
    "softmax without the max shift (exp overflows)", "In float64 exp(z) is inf once z > 709.78 and 0 once "
    "z < −745.1, so exp(z) / exp(z).sum() becomes inf / inf or 0 / 0 = nan on large logits. " + SHIFT_RULE)
GLOBAL_SHIFT = Misconception(
    "shifted by the largest logit of the whole tensor instead of each row's",
    "One shift for all rows is exact on paper, but a row whose logits lie hundreds below the tensor's maximum "
    "underflows: every exp in it is 0, and 0 / 0 = nan. Each row (each slice along the last dimension) needs its "
    "own shift.")
LIBRARY_SOFTMAX = Misconception(
    "used PyTorch's softmax where the part asks for it by hand",
    "This part is the stable softmax itself: write it with torch.exp, a max and a sum, without torch.softmax, "
    "F.softmax, log_softmax, softmin or logsumexp.")

CE_BY_CLASSES = Misconception(
    "divided by the number of classes", "The loss is a mean over the N rows (the batch), not over the C classes.")
CE_REVERSED = Misconception(
    "y − p instead of p − y", "Your gradient has the wrong sign: raising the target's logit lowers the loss, so the "
    "gradient is negative at the target.")
CE_BATCH_AXIS = Misconception(
    "softmax over the batch axis", "Each row is one example, so its softmax runs over the classes (the last "
    "dimension), not down the batch.")
CE_NO_ONEHOT = Misconception(
    "one-hot target not subtracted", "The −log p of the target class contributes −1 at the target: the gradient "
    "of a row is p − y, not p.")
ONE_HOT_WIDTH = Misconception(
    "one_hot without num_classes", "F.one_hot(targets) makes max(targets) + 1 columns, fewer than C whenever the "
    "last classes do not occur in the batch: tell it how many classes there are.")

SCALE_RULE = ("The scale τ = 1/√d that multiplies S in the forward pass multiplies both dQ and dK in the backward "
              "pass (and neither dV nor dP).")
MISSING_SCALE = Misconception(
    "missing 1/√d scale", "Your dQ or dK is √d times too large (or the scale is missing from your recomputed "
    "forward pass too). " + SCALE_RULE)
SCALE_BY_D = Misconception("scaled by 1/d instead of 1/√d", SCALE_RULE)
TRANSPOSED_DV = Misconception(
    "transposed value gradient", "Your dV is the transpose of the right one: dV must have V's shape (m, e).")
NO_SOFTMAX_BACKWARD = Misconception(
    "skipped the softmax backward", "P = softmax(S) row by row, so dS is not dP: every row of dP goes through "
    "Part B's softmax backward, with that row of P.")

SAVE_HINT = ("In forward, hand backward its tensors with ctx.save_for_backward(...); in backward, read them back "
             "from ctx.saved_tensors. Only saved tensors get autograd's bookkeeping: the version check that notices "
             "an in-place change made after forward, and the release after backward (a plain attribute holding the "
             "output even makes a reference cycle). Tensors in globals or on the class are worse: two calls in "
             "flight overwrite each other's.")
SIGN_IN_EXP = Misconception("sign inside the exponential", "σ(x) = 1 / (1 + exp(−x)), with −x in the exponent.")
FORGOT_SAVE = Misconception("forgot to save tensors for backward", SAVE_HINT)
SAVED_INPUT = Misconception(
    "saved the input, used it as the output", "Your backward computed g·x·(1 − x): the tensor you saved is x, but "
    "σ'(x) = σ(x)·(1 − σ(x)) needs the output. Save the output in forward (or compute σ(x) from the saved x).")
IGNORED_GRAD_OUTPUT = Misconception(
    "backward ignored grad_output", "backward returns grad_output · σ'(x), not σ'(x) alone: the chain rule multiplies "
    "by the gradient arriving from above.")
TENSOR_ON_CTX = Misconception("a tensor kept as a plain ctx attribute", SAVE_HINT)
TENSOR_OUTSIDE_CTX = Misconception("a tensor kept in a global or a class attribute", SAVE_HINT)
NAIVE_SIGMOID = Misconception(
    "sigmoid as exp(x) / (1 + exp(x)) (exp overflows)", "For x > 709.78 exp(x) is inf in float64 and inf / inf = nan. "
    "The form with exp(−x) only overflows where σ is 0 anyway (torch.sigmoid is fine too).")
STATE_OUTSIDE_CTX = Misconception(
    "state kept outside ctx", "x1's gradient used the second call's output: the value backward needs was stored "
    "somewhere every call overwrites. " + SAVE_HINT)

FLOAT32_GRADCHECK = Misconception(
    "gradcheck in float32", "This backward is right, but in float32 the central differences gradcheck compares it "
    "with are mostly rounding noise (about 7 significant digits, a step of 1e-6). Run gradcheck on float64 copies "
    "of the inputs.")
LOOSENED = Misconception(
    "a check that cannot say no (loosened tolerances)", "With its default tolerances in float64, gradcheck rejects "
    "this backward; loosen them (or ignore its verdict) and bugs of this size slip through. Keep the defaults and "
    "use float64 instead.")
SOME_INPUTS = Misconception(
    "gradcheck on some inputs only", "gradcheck only checks the gradients of inputs that require grad. This "
    "backward is right for the first input and wrong for a later one: every input must be a float64 copy that "
    "requires grad.")
NOT_A_VERDICT = Misconception(
    "gradcheck's exception not turned into a verdict", "By default gradcheck raises GradcheckError on a mismatch; "
    "it can return False instead (see its raise_exception argument).")

AUTOGRAD = ROUTE_MISCONCEPTIONS[Route.AUTOGRAD]


# ---------------------------------------------------------------------------------------------------------------
# Shared machinery: a case is one call of a learner's backward function and what each returned gradient must be.

@dataclass(frozen=True)
class _Case:
    call: str                              # how the function is called, with the input shapes
    args: dict[str, Tensor]                # what the learner's function receives, by name
    grads: dict[str, str]                  # the gradients it returns, in order -> whose shape each one has
    expected: tuple[Tensor, ...]           # by autograd
    fd: tuple[Tensor, ...]                 # by central differences
    symptoms: tuple[list[Symptom], ...]    # per gradient: the known mistakes and what each gives here
    note: str = ""                         # the case's own numbers for the message (e.g. "N = 4")


def _distinct(gen: torch.Generator, count: int, low: int = 2, high: int = 7) -> list[int]:
    """``count`` different sizes in [low, high], so that no two dimensions can be confused."""
    return (torch.randperm(high - low + 1, generator=gen)[:count] + low).tolist()


def _shape(t: Tensor) -> str:
    return str(tuple(t.shape)).replace(",)", ")")


def _same_as(value: Tensor, rtol: float = 1e-4, atol: float = 1e-7) -> Callable[[Tensor], bool]:
    """A test for answers equal to ``value``, a mistake's result that may hold nan or inf: non-finite exactly where
    ``value`` is, and close to it everywhere else."""
    bad = ~torch.isfinite(value)

    def matches(answer: Tensor) -> bool:
        if answer.shape != value.shape or not torch.equal(~torch.isfinite(answer), bad):
            return False
        return bool(torch.all(torch.abs(answer[~bad] - value[~bad]) <= atol + rtol * torch.abs(value[~bad])))

    return matches


def _literal_symptoms(mistakes: list[tuple[Misconception, Tensor]]) -> list[Symptom]:
    """A symptom per (mistake, the value it computes here), whether or not that value is finite. A non-finite value
    that another mistake's computation also gives names neither (finite ones:
    :func:`~autograder.misconceptions.armed` sees to it)."""
    symptoms = []
    for mistake, value in mistakes:
        if bool(torch.isfinite(value).all()):
            symptoms.append(mistake.looks_like(value))
            continue
        same = _same_as(value)
        if not any(other is not mistake and same(theirs) for other, theirs in mistakes):
            symptoms.append(mistake.when(same))
    return symptoms


def _unstable_softmaxes(z: Tensor) -> list[tuple[Misconception, Tensor]]:
    """What the stability mistakes compute for softmax(z, dim=-1), in float64: no shift (as a ratio, and in log
    space), and one shift for the whole tensor (needs a non-empty z)."""
    e = torch.exp(z)
    found = [(NAIVE_SOFTMAX, e / e.sum(dim=-1, keepdim=True)),
             (NAIVE_SOFTMAX, torch.exp(z - torch.log(e.sum(dim=-1, keepdim=True))))]
    if z.numel():
        g = torch.exp(z - z.max())
        found.append((GLOBAL_SHIFT, g / g.sum(dim=-1, keepdim=True)))
    return found


def _make_case(name: str, args: dict[str, Tensor], grads: dict[str, str], loss: Callable, wrt: tuple[Tensor, ...],
               symptoms: tuple[list[Symptom], ...], note: str = "") -> _Case:
    """A case whose expected gradients are those of the scalar ``loss(*wrt)``, by autograd and central differences."""
    shapes = ", ".join(f"{key} {_shape(value)}" for key, value in args.items())
    call = f"{name}({', '.join(args)}) with {shapes}"
    return _Case(call, args, grads, autograd_gradient(loss, *wrt), central_difference(loss, *wrt), symptoms, note)


def _unpack(answer, case: _Case) -> tuple:
    names = tuple(case.grads)
    if len(names) == 1:
        return (answer,)
    # Exactly a tuple or list: a subclass could run its own code (__iter__, __len__) outside call_learner.
    if type(answer) not in (tuple, list) or len(answer) != len(names):
        raise GradingFailure(f"{case.call} returned {answer!r:.80}; expected a tuple ({', '.join(names)}).")
    return tuple(answer)


#: Parts A–D's tolerance: float64 results of a few sums and products agree with autograd to about 1e-15; a result
#: computed in float32 (about 6e-8 relative) and cast back fails.
RTOL, ATOL = 1e-10, 1e-12


def _require_float64(received, what: str) -> None:
    """The text's dtype contract: every input is float64, and so is every tensor returned."""
    __tracebackhide__ = True
    if not isinstance(received, torch.Tensor) or received.dtype == torch.float64:
        return
    message = (f"{what} has dtype {str(received.dtype).replace('torch.', '')}; the inputs are float64 and the result "
               "must be float64 too.")
    if received.is_floating_point():
        raise proven_failure(message, FLOAT32_RESULT)
    raise GradingFailure(message)


def _expect_gradient(received, expected: Tensor, *, what: str, shape_of: str, fd: Tensor, symptoms: list[Symptom],
                     extra: str) -> None:
    """expect_close, except that a gradient of the wrong shape is reported as such (and a known mistake with that
    shape, e.g. a transpose, is a suspect)."""
    __tracebackhide__ = True
    got = as_answer(received, what=what)
    _require_float64(received, what)
    if got.shape != expected.shape:
        raise GradingFailure(f"{what} has shape {_shape(got)}; expected {_shape(expected)}, the shape of {shape_of}."
                             f"\n{extra}", suspects=tuple(s.misconception for s in symptoms if s.matches(got)))
    expect_close(got, expected, what=what, fd=fd, symptoms=symptoms, extra=extra, rtol=RTOL, atol=ATOL)


def _run(fn: Callable, case: _Case) -> None:
    """Call the learner's function on one case, autograd forbidden, and compare every gradient it returns; its
    inputs must come back unchanged and the result must not alias them."""
    __tracebackhide__ = True
    answer = call_learner(fn, *case.args.values(), what=case.call, forbid=[Route.AUTOGRAD])
    extra = "  inputs:             " + ", ".join(f"{key} = {fmt(value)}" for key, value in case.args.items())
    extra += f"\n  here:               {case.note}" if case.note else ""
    for got, name, shape_of, expected, fd, symptoms in zip(_unpack(answer, case), case.grads, case.grads.values(),
                                                           case.expected, case.fd, case.symptoms):
        _expect_gradient(got, expected, what=f"{case.call}: {name}", shape_of=shape_of, fd=fd, symptoms=symptoms,
                         extra=extra)
    try:
        expect_no_alias(answer, case.args, what=case.call)  # right numbers, but in the caller's memory
    except GradingFailure as failure:
        # A suspect, not a proof: an answer whose numbers are wrong elsewhere can alias only where they happen to be
        # right (db = dY[0] with N = 1); the mistake that explains most cases should be the one named.
        raise GradingFailure(failure.message, suspects=(failure.proven,) if failure.proven else ()) from None


# ---------------------------------------------------------------------------------------------------------------
# Part A: linear layer

def _linear_case(X: Tensor, W: Tensor, b: Tensor, dY: Tensor) -> _Case:
    n = X.shape[0]
    symptoms = (
        [TRANSPOSED_DX.looks_like((dY @ W.T).T)],
        [TRANSPOSED_DW.looks_like(dY.T @ X), DW_AVERAGED.looks_like(X.T @ dY / n)],
        [BIAS_NOT_SUMMED.looks_like(dY[0]), BIAS_NOT_SUMMED.looks_like(dY), BIAS_AVERAGED.looks_like(dY.mean(dim=0)),
         BIAS_WRONG_AXIS.looks_like(dY.sum(dim=1))],
    )
    return _make_case("linear_backward", {"X": X, "W": W, "dY": dY}, {"dX": "X", "dW": "W", "db": "b"},
                      lambda X, W, b: ((X @ W + b) * dY).sum(), (X, W, b), symptoms, note=f"N = {n} rows")


#: Part A's corners, (N, D_in, D_out), tried at every seed: a batch of one, one output, a square W.
LINEAR_CORNERS = [(1, 3, 2), (3, 4, 1), (2, 3, 3)]


@check
def check_linear_backward(linear_backward, grading_seed: int | None = None) -> None:
    """Part A: for Y = X·W + b, linear_backward(X, W, dY) returns (dX, dW, db), by hand (no autograd), new tensors,
    arguments unchanged.

    Domain: X (N, D_in), W (D_in, D_out), dY (N, D_out), float64, any finite values, N, D_in, D_out >= 1. Corners at
    every seed (:data:`LINEAR_CORNERS`): N = 1, D_out = 1, a square W (a transposed dW has the right shape); then
    two cases whose three sizes all differ (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    gen = case_stream("04/linear", grading_seed)
    sizes = [(4, 3, 2), (2, 5, 3)] if grading_seed is None else [_distinct(gen, 3) for _ in range(2)]
    for n, d_in, d_out in LINEAR_CORNERS + sizes:
        X, W, b = uniform(gen, (n, d_in)), uniform(gen, (d_in, d_out)), uniform(gen, (d_out,))
        case = _linear_case(X, W, b, uniform(gen, (n, d_out), -1, 1))
        with trial():
            _run(linear_backward, case)


# ---------------------------------------------------------------------------------------------------------------
# Part B.1: a stable softmax, by hand

#: PyTorch's functions that compute a softmax or its log-sum-exp, by name as a TorchFunctionMode sees them.
LIBRARY_SOFTMAX_NAMES = frozenset({"softmax", "_softmax", "special_softmax", "log_softmax", "_log_softmax",
                                   "special_log_softmax", "logsumexp", "special_logsumexp", "softmin"})

def _softmax_corners() -> list[Tensor]:
    """Part B.1's corners, the same at every seed: large logits (a naive exp overflows or underflows: inf / inf,
    0 / 0), rows hundreds apart (one shift for the whole tensor underflows the lower rows), a batch of one, C = 1,
    an empty batch, ties, a 3-D stack."""
    rows = lambda *values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    return [
        rows(1000.0, 999.0, 997.0, 990.0),                                           # a vector near 1000
        rows([1000.0, 998.5, 1001.0, 997.0], [-1000.0, -1002.0, -999.5, -1001.0], [0.5, -1.5, 2.0, 1.0]),
        rows([800.0, 0.0, -800.0], [0.5, -1.5, 2.0]),                                 # one row spread over 1600
        rows([0.2, -0.7, 1.9, 0.0, -2.2]),                                            # a batch of one
        rows([5.0], [-1000.0], [1000.0]),                                             # C = 1
        torch.zeros((0, 4), dtype=torch.float64),                                     # an empty batch
        rows([[4.0, 4.0, 4.0], [-1000.0, -1000.0, -1000.0]], [[1000.0, 999.0, 998.0], [0.1, 0.2, 0.3]]),
    ]


def _softmax_inputs(grading_seed: int | None) -> list[Tensor]:
    """The corners, then one ordinary batch (public) or two drawn stacks whose rows sit at offsets from −1000 to
    1000 (hidden)."""
    gen = case_stream("04/softmax_forward", grading_seed)
    drawn = []
    if grading_seed is None:
        drawn.append(uniform(gen, (3, 4), -3, 3))
    else:
        n, c = _distinct(gen, 2, 2, 6)
        for shape in [(n, c), (choice(gen, [2, 3]), n, c)]:
            offsets = torch.tensor([choice(gen, [-1000.0, -400.0, 0.0, 400.0, 1000.0])
                                    for _ in range(math.prod(shape[:-1]))], dtype=torch.float64)
            drawn.append(offsets.reshape(*shape[:-1], 1) + uniform(gen, shape, -3, 3))
    return _softmax_corners() + drawn


def _run_softmax(softmax, z: Tensor) -> None:
    __tracebackhide__ = True
    what = f"softmax(z) for z of shape {_shape(z)}"
    with watch_calls(names=LIBRARY_SOFTMAX_NAMES) as watch:
        received = call_learner(softmax, z, what=what, forbid=[Route.AUTOGRAD])
    if watch.used:
        raise proven_failure(f"{what} called {', '.join(sorted(set(watch.seen)))}, which this part rules out.",
                             LIBRARY_SOFTMAX)
    if type(received) is not torch.Tensor:
        raise GradingFailure(f"{what} returned {type(received).__name__}; expected a tensor of z's shape.")
    _require_float64(received, what)
    expect_no_alias(received, {"z": z}, what=what)
    expect_close(received, torch.softmax(z, dim=-1), what=what, source="torch.softmax", rtol=1e-9, atol=1e-12,
                 symptoms=_literal_symptoms(_unstable_softmaxes(z)), extra=f"  z:                  {fmt(z)}")


@check
def check_softmax(softmax, grading_seed: int | None = None) -> None:
    """Part B.1: softmax(z) equals torch.softmax(z, dim=-1) for any finite logits, written by hand (torch.exp, a max,
    a sum: no softmax family, no autograd), a new tensor, z unchanged.

    Domain: z float64 of shape (..., C), at least one dimension, C >= 1, leading dimensions may be 0; any finite
    values (the text says: "however large"). Corners at every seed (:func:`_softmax_corners`): logits near ±1000 and a
    row spread over 1600 (a naive exp gives nan), rows 2000 apart (one shift for the whole tensor gives nan), a batch
    of one, C = 1, an empty batch, ties, a 3-D stack; then one ordinary batch (public) or two drawn stacks with rows
    at offsets from −1000 to 1000 (hidden)."""
    __tracebackhide__ = True
    for z in _softmax_inputs(grading_seed):
        with trial():
            _run_softmax(softmax, z)


# ---------------------------------------------------------------------------------------------------------------
# Part B.2: softmax backward

def _broadcasts(shape: torch.Size, other: torch.Size) -> bool:
    try:
        return torch.broadcast_shapes(shape, other) == shape
    except RuntimeError:
        return False


def _softmax_case(z: Tensor, ds: Tensor) -> _Case:
    s = torch.softmax(z, dim=-1)
    symptoms = [SOFTMAX_ELEMENTWISE.looks_like(ds * s * (1 - s)),
                SOFTMAX_REVERSED.looks_like(s * ((ds * s).sum(dim=-1, keepdim=True) - ds))]
    if s.dim() > 1:  # in one vector the whole tensor, the last axis and the first axis are all the same row
        symptoms += [SOFTMAX_WHOLE_SUM.looks_like(s * (ds - (ds * s).sum())),
                     SOFTMAX_WRONG_AXIS.looks_like(s * (ds - (ds * s).sum(dim=0, keepdim=True)))]
    if s.dim() > 1 and _broadcasts(s.shape, s.shape[:-1]):  # only then does a row sum without keepdim run at all
        symptoms.append(SOFTMAX_NO_KEEPDIM.looks_like(s * (ds - (ds * s).sum(dim=-1))))
    return _make_case("softmax_backward", {"s": s, "ds": ds}, {"dz": "z"},
                      lambda z: (torch.softmax(z, dim=-1) * ds).sum(), (z,), (symptoms,))


@check
def check_softmax_backward(softmax_backward, grading_seed: int | None = None) -> None:
    """Part B.2: for s = softmax(z, dim=-1), softmax_backward(s, ds) returns dz (a vector, batches, 3-D stacks, and
    square and cubic ones, where a row sum without keepdim broadcasts silently).

    Domain: s a softmax of float64 logits along the last dimension, shape (..., C), at least one dimension, C >= 1,
    leading dimensions may be 0; ds of s's shape, any finite values. Corners at every seed: a batch of one (1, C),
    C = 1 (dz is 0), an empty batch (0, C); then a vector, a batch, a 3-D stack, a square and a cubic one (public:
    fixed sizes; hidden: drawn)."""
    __tracebackhide__ = True
    gen = case_stream("04/softmax", grading_seed)
    corners = [(1, 5), (3, 1), (0, 4)]
    if grading_seed is None:
        shapes = [(5,), (3, 4), (2, 3, 5), (4, 4), (3, 3, 3)]
    else:
        n, c = _distinct(gen, 2, 2, 6)
        shapes = [(c,), (n, c), (choice(gen, [2, 3]), n, c), (c, c), (n, n, n)]
    for shape in corners + shapes:
        case = _softmax_case(uniform(gen, shape), uniform(gen, shape, -1, 1))
        with trial():
            _run(softmax_backward, case)


# ---------------------------------------------------------------------------------------------------------------
# Part C: softmax + cross-entropy

def _cross_entropy_case(logits: Tensor, targets: Tensor) -> _Case:
    n, c = logits.shape
    p, y = torch.softmax(logits, dim=-1), F.one_hot(targets, c).to(logits.dtype)
    symptoms = [CE_NOT_DIVIDED.looks_like(p - y), CE_BY_CLASSES.looks_like((p - y) / c),
                CE_REVERSED.looks_like((y - p) / n), CE_BATCH_AXIS.looks_like((torch.softmax(logits, dim=0) - y) / n),
                CE_NO_ONEHOT.looks_like(p / n)]
    symptoms += _literal_symptoms([(mistake, (unstable - y) / n) for mistake, unstable in _unstable_softmaxes(logits)])
    return _make_case("softmax_cross_entropy_backward", {"logits": logits, "targets": targets}, {"dlogits": "logits"},
                      lambda z: F.cross_entropy(z, targets), (logits,), (symptoms,),
                      note=f"N = {n} rows, C = {c} classes, targets {targets.tolist()}")


def _narrow_one_hot(fn: Callable, case: _Case) -> bool:
    """For a case whose labels leave the last class out: does the learner's function get it right once one label
    is the last class? Then the failure came from sizing the one-hot by the labels present."""
    logits, targets = case.args["logits"], case.args["targets"].clone()
    targets[0] = logits.shape[-1] - 1
    probe = _cross_entropy_case(logits, targets)
    try:
        _run(fn, probe)
    except GradingFailure:
        return False
    return True


def _ce_targets(gen: torch.Generator, n: int, c: int, without_last: bool) -> Tensor:
    """Labels in [0, C); ``without_last``: the last class is absent and some label is not 0 (so the one-hot of a
    learner who sized it by the labels is neither C wide nor 1 wide, which would broadcast)."""
    if not without_last:
        return torch.randint(c, (n,), generator=gen)
    targets = torch.randint(c - 1, (n,), generator=gen)
    targets[int(torch.randint(n, (), generator=gen))] = int(torch.randint(1, c - 1, (), generator=gen))
    return targets


def _cross_entropy_corners() -> list[tuple[Tensor, Tensor]]:
    """Part C's corners, (logits, targets), the same at every seed: a batch of one; every logit near 1000 (a naive
    exp gives inf / inf); rows at +1000, −1000 and one spread over 1400; a binary batch with one row near 1000 (one
    shift for the whole batch underflows the other rows)."""
    rows = lambda *values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    return [
        (rows([0.3, -1.2, 2.0, 0.7]), torch.tensor([3])),
        (1000 + rows([0.5, -1.0, 2.0], [1.5, 0.0, -2.5], [-0.5, 3.0, 1.0]), torch.tensor([2, 0, 1])),
        (rows([1000.0, 998.5, 1001.0, 997.0], [-1000.0, -1002.0, -999.5, -1001.0], [700.0, 0.0, -700.0, 2.0]),
         torch.tensor([3, 1, 2])),
        (rows([1000.0, 996.0], [-5.0, -1.0], [2.0, 1.5]), torch.tensor([1, 0, 1])),
    ]


def _run_cross_entropy(softmax_cross_entropy_backward, case: _Case) -> None:
    """One case; a failure on labels without the last class that one label changed to it repairs names the narrow
    one-hot."""
    __tracebackhide__ = True
    c = case.args["logits"].shape[-1]
    try:
        _run(softmax_cross_entropy_backward, case)
    except GradingFailure as failure:
        if failure.proven is not None or int(case.args["targets"].max()) == c - 1 \
                or not _narrow_one_hot(softmax_cross_entropy_backward, case):
            raise
        labels = case.args["targets"].tolist()
        raise GradingFailure(f"{failure.message}\n  the labels {labels} never use the last class, {c - 1}; "
                             f"with one label changed to {c - 1}, your function gets it right.",
                             suspects=(ONE_HOT_WIDTH,)) from None


@check
def check_softmax_cross_entropy_backward(softmax_cross_entropy_backward, grading_seed: int | None = None) -> None:
    """Part C: the gradient of F.cross_entropy(logits, targets) (mean over the batch) with respect to the logits,
    by hand, including batches in which the last classes never occur and logits however large.

    Domain: logits float64 (N, C), N >= 1, C >= 2, any finite values; targets int64 (N,) in [0, C), not every class
    present. Corners at every seed (:func:`_cross_entropy_corners`): N = 1, logits near 1000, rows at ±1000 and one
    spread over 1400, C = 2 with rows 1000 apart (a naive exp, or one shift for the whole batch, gives nan); then
    three batches of distinct sizes, two of them without the last class (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    gen = case_stream("04/cross_entropy", grading_seed)
    shapes = [(4, 3), (2, 5), (5, 4)] if grading_seed is None else [tuple(_distinct(gen, 2, 3, 7)) for _ in range(3)]
    cases = [_cross_entropy_case(logits, targets) for logits, targets in _cross_entropy_corners()]
    for index, (n, c) in enumerate(shapes):
        cases.append(_cross_entropy_case(uniform(gen, (n, c)), _ce_targets(gen, n, c, without_last=index > 0)))
    for case in cases:
        with trial():
            _run_cross_entropy(softmax_cross_entropy_backward, case)


# ---------------------------------------------------------------------------------------------------------------
# Part D: scaled dot-product attention

def _attention_gradients(Q, K, V, dO, *, forward_scale: float, backward_scale: float, softmax: str = "jacobian"):
    """(dQ, dK, dV) of a hand-written attention backward, with the knobs that reproduce the usual mistakes."""
    P = torch.softmax(Q @ K.T * forward_scale, dim=-1)
    dP = dO @ V.T
    dS = {"jacobian": lambda: P * (dP - (dP * P).sum(dim=-1, keepdim=True)),
          "elementwise": lambda: P * (1 - P) * dP, "none": lambda: dP}[softmax]()
    return backward_scale * dS @ K, backward_scale * dS.T @ Q, P.T @ dO


def _attention_case(Q: Tensor, K: Tensor, V: Tensor, dO: Tensor) -> _Case:
    d = Q.shape[-1]
    tau = 1 / math.sqrt(d)
    variants = [(MISSING_SCALE, dict(forward_scale=tau, backward_scale=1.0)),
                (MISSING_SCALE, dict(forward_scale=1.0, backward_scale=1.0)),
                (SCALE_BY_D, dict(forward_scale=1 / d, backward_scale=1 / d)),
                (SCALE_BY_D, dict(forward_scale=tau, backward_scale=1 / d)),
                (SOFTMAX_ELEMENTWISE, dict(forward_scale=tau, backward_scale=tau, softmax="elementwise")),
                (NO_SOFTMAX_BACKWARD, dict(forward_scale=tau, backward_scale=tau, softmax="none"))]
    wrong = [(mistake, _attention_gradients(Q, K, V, dO, **knobs)) for mistake, knobs in variants]
    symptoms = tuple([mistake.looks_like(grads[i]) for mistake, grads in wrong] for i in range(3))
    P = torch.softmax(Q @ K.T * tau, dim=-1)
    symptoms[2].append(TRANSPOSED_DV.looks_like(dO.T @ P))

    def loss(Q, K, V):
        return (torch.softmax(Q @ K.T / math.sqrt(d), dim=-1) @ V * dO).sum()

    return _make_case("attention_backward", {"Q": Q, "K": K, "V": V, "dO": dO}, {"dQ": "Q", "dK": "K", "dV": "V"},
                      loss, (Q, K, V), symptoms, note=f"d = {d}, √d = {math.sqrt(d):g}")


#: Part D's corners, (n, m, d, e), tried at every seed: one query with d = 1 (no scale to forget), one key (P = 1, so
#: dQ = dK = 0) with e = 1.
ATTENTION_CORNERS = [(1, 3, 1, 2), (3, 1, 4, 1)]


@check
def check_attention_backward(attention_backward, grading_seed: int | None = None) -> None:
    """Part D: for O = softmax(Q·Kᵀ/√d)·V, attention_backward(Q, K, V, dO) returns (dQ, dK, dV), by hand.

    Domain: Q (n, d), K (m, d), V (m, e), dO (n, e), float64, n, m, d, e >= 1, values of order 1. Corners at every
    seed (:data:`ATTENTION_CORNERS`): n = 1 with d = 1, m = 1 with e = 1; then two cases with n != m and d in
    (4, 9, 16), where √d shows (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    gen = case_stream("04/attention", grading_seed)
    if grading_seed is None:
        sizes = [(3, 5, 4, 2), (2, 3, 9, 4)]
    else:
        sizes = [(*_distinct(gen, 2), choice(gen, [4, 9, 16]), int(torch.randint(2, 5, (), generator=gen)))
                 for _ in range(2)]
    for n, m, d, e in ATTENTION_CORNERS + sizes:
        Q, K, V = uniform(gen, (n, d), -1, 1), uniform(gen, (m, d), -1, 1), uniform(gen, (m, e))
        case = _attention_case(Q, K, V, uniform(gen, (n, e), -1, 1))
        with trial():
            _run(attention_backward, case)


# ---------------------------------------------------------------------------------------------------------------
# Part E: a custom torch.autograd.Function

def _require_function_class(cls, name: str) -> None:
    __tracebackhide__ = True
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise GradingFailure(f"{name} must be a class derived from torch.autograd.Function; got {cls!r:.80}.")
    for method in ("forward", "backward"):
        if getattr(cls, method) is getattr(torch.autograd.Function, method):
            raise GradingFailure(f"{name} does not define its own {method}(ctx, ...): write it as a @staticmethod.")


def _require_own_node(out: Tensor, cls, what: str) -> None:
    """The output's grad_fn must be the Function's own node, or autograd never calls the learner's backward."""
    __tracebackhide__ = True
    node = out.grad_fn
    if getattr(type(node), "_forward_cls", None) is not cls:
        raise GradingFailure(
            f"{what} returned a tensor whose grad_fn is {type(node).__name__ if node else None}, not {cls.__name__}'s "
            f"own backward node, so autograd would never call your backward. Let {cls.__name__}.apply run your "
            "forward; do not override apply.")


def _arrays_in(value, path: str, depth: int = 0) -> list[str]:
    """Paths of the tensors and NumPy arrays inside ``value`` (lists, tuples and dicts are opened)."""
    if isinstance(value, (Tensor, np.ndarray)):
        return [path]
    if depth > 3:
        return []
    if type(value) in (list, tuple):
        return [found for i, item in enumerate(value) for found in _arrays_in(item, f"{path}[{i}]", depth + 1)]
    if type(value) is dict:
        return [found for key, item in value.items() for found in _arrays_in(item, f"{path}[{key!r}]", depth + 1)]
    return []


def _stored_outside(namespace: dict, prefix: str) -> dict[str, int]:
    """{name: id} of the tensors and arrays a namespace (a module's globals, a class) holds now."""
    return {f"{prefix}{name}": id(value) for name, value in list(namespace.items())
            if not name.startswith("__") and _arrays_in(value, name)}


def _namespaces(cls) -> list[tuple[dict, str]]:
    """Where a Function could stash a tensor besides ctx: the globals its methods see, the class itself."""
    found = [(vars(cls), f"{cls.__name__}.")]
    for method in ("forward", "backward"):
        function = inspect.getattr_static(cls, method)
        function = getattr(function, "__func__", function)
        space = getattr(function, "__globals__", None)
        if isinstance(space, dict) and all(space is not seen for seen, _ in found):
            found.append((space, "global "))
    return found


def _require_saved_tensors(out: Tensor, cls, what: str) -> None:
    """Forward handed backward its tensors through ctx.save_for_backward, and nowhere else on ctx."""
    __tracebackhide__ = True
    node = out.grad_fn
    try:
        saved = node.saved_tensors
    except RuntimeError as error:
        raise GradingFailure(f"{what}: reading the tensors forward saved failed: {error}") from None
    stashed = [found for key, value in vars(node).items() for found in _arrays_in(value, f"ctx.{key}")]
    if not saved and stashed:
        raise proven_failure(f"{what}: {cls.__name__}.forward keeps {', '.join(stashed)} as a plain attribute of ctx "
                             "and saved no tensor with ctx.save_for_backward.", TENSOR_ON_CTX)
    if not saved:
        raise proven_failure(f"{what}: {cls.__name__}.forward saved no tensor with ctx.save_for_backward.", FORGOT_SAVE)
    if stashed:
        raise proven_failure(f"{what}: {cls.__name__}.forward keeps {', '.join(stashed)} as a plain attribute of ctx, "
                             "beside what it saved with ctx.save_for_backward.", TENSOR_ON_CTX)


def _forward(sigmoid_cls, x: Tensor, what: str) -> Tensor:
    """``sigmoid_cls.apply(x)``, autograd forbidden; no tensor may land in a global or on the class meanwhile."""
    __tracebackhide__ = True
    spaces = _namespaces(sigmoid_cls)
    before = {}
    for space, prefix in spaces:
        before.update(_stored_outside(space, prefix))
    out = call_learner(sigmoid_cls.apply, x, what=what, forbid=[Route.AUTOGRAD])
    after = {}
    for space, prefix in spaces:
        after.update(_stored_outside(space, prefix))
    moved = [name for name, ident in after.items() if before.get(name) != ident]
    if moved:
        raise proven_failure(f"{what} stored a tensor in {', '.join(moved)}, outside ctx.", TENSOR_OUTSIDE_CTX)
    if type(out) is not torch.Tensor:
        raise GradingFailure(f"{what} returned {type(out).__name__}; expected a plain tensor.")
    return out


def _sigmoid_grad(sigmoid_cls, x: Tensor, grad: Tensor, what: str, *, other: Tensor | None = None) -> Tensor:
    """x.grad through the learner's Function for upstream ``grad``; ``other`` is a second call kept in flight.
    The learner's forward and backward must not run autograd themselves."""
    __tracebackhide__ = True
    x = x.clone().requires_grad_(True)
    out = _forward(sigmoid_cls, x, what)
    _expect_sigmoid_value(out, x.detach(), what)
    _require_own_node(out, sigmoid_cls, what)
    _require_saved_tensors(out, sigmoid_cls, what)
    in_flight = None if other is None else _forward(  # kept alive until y1's backward has run
        sigmoid_cls, other.clone().requires_grad_(True), f"{what}, second call")
    routes = Routes()
    (got,) = call_learner(torch.autograd.grad, out, x, grad, what=f"the backward of {what}", routes=routes)
    del in_flight
    if routes.backward_runs > 1:  # the check's own torch.autograd.grad is one run; more ran inside the backward
        raise proven_failure(f"the backward of {what} ran autograd itself ({routes.backward_runs - 1} extra "
                             "backward run(s)), which this part rules out.", AUTOGRAD)
    return got


def _expect_sigmoid_value(out: Tensor, x: Tensor, what: str) -> None:
    """σ(x) in x's shape and dtype (float32 to its own precision)."""
    __tracebackhide__ = True
    if out.dtype != x.dtype:
        raise GradingFailure(f"{what} returned dtype {out.dtype}; σ(x) must keep x's dtype, {x.dtype}.")
    x64 = x.double()
    naive = torch.exp(x64) / (1 + torch.exp(x64))
    rtol, atol = (1e-6, 1e-7) if x.dtype == torch.float32 else (1e-9, 1e-12)
    expect_close(out, torch.sigmoid(x64), what=what, source="expected", rtol=rtol, atol=atol,
                 symptoms=[SIGN_IN_EXP.looks_like(torch.sigmoid(-x64)), *_literal_symptoms([(NAIVE_SIGMOID, naive)])],
                 extra=f"  x:                  {fmt(x)}")


def _sigmoid_symptoms(x: Tensor, grad: Tensor) -> list[Symptom]:
    s = torch.sigmoid(x)
    return [SAVED_INPUT.looks_like(grad * x * (1 - x)), IGNORED_GRAD_OUTPUT.looks_like(s * (1 - s))]


#: Part E's tolerance for its float64 gradients: σ(1 − σ) times g is exact to about 1e-16; autograd silently casts a
#: backward's float32 result back to x's dtype, so a backward computed in float32 (6e-8 relative) must fail here.
SIGMOID_RTOL, SIGMOID_ATOL = 1e-9, 1e-12


def _check_sigmoid_backward(sigmoid_cls, x: Tensor, grad: Tensor) -> None:
    __tracebackhide__ = True
    what = f"Sigmoid.apply(x) for x of shape {_shape(x)}"
    got = _sigmoid_grad(sigmoid_cls, x, grad, what)
    loss = lambda t: (torch.sigmoid(t) * grad).sum()  # noqa: E731 - dL/dσ = grad
    expect_close(got, autograd_gradient(loss, x)[0], what=f"the gradient through {what} (upstream gradient g)",
                 fd=central_difference(loss, x)[0], extra=f"  inputs:             x = {fmt(x)}, g = {fmt(grad)}",
                 symptoms=_sigmoid_symptoms(x, grad), rtol=SIGMOID_RTOL, atol=SIGMOID_ATOL)


def _check_two_in_flight(sigmoid_cls, x1: Tensor, x2: Tensor, grad: Tensor) -> None:
    """Two forward calls before one backward: the first backward must still use the first call's saved tensors."""
    __tracebackhide__ = True
    what = f"y1 = Sigmoid.apply(x1), then y2 = Sigmoid.apply(x2) before y1's backward, x1 and x2 of shape {_shape(x1)}"
    got = _sigmoid_grad(sigmoid_cls, x1, grad, what, other=x2)
    loss = lambda t: (torch.sigmoid(t) * grad).sum()  # noqa: E731 - dL/dy1 = grad
    s2 = torch.sigmoid(x2)
    expect_close(got, autograd_gradient(loss, x1)[0], what=f"the gradient of y1 with respect to x1 ({what})",
                 fd=central_difference(loss, x1)[0],
                 extra=f"  inputs:             x1 = {fmt(x1)}, x2 = {fmt(x2)}, g = {fmt(grad)}",
                 rtol=SIGMOID_RTOL, atol=SIGMOID_ATOL,
                 symptoms=[STATE_OUTSIDE_CTX.looks_like(grad * s2 * (1 - s2)), *_sigmoid_symptoms(x1, grad)])


def _check_gradcheck_accepts(sigmoid_cls, x: Tensor) -> None:
    __tracebackhide__ = True
    x = x.clone().requires_grad_(True)
    accepted = call_learner(torch.autograd.gradcheck, sigmoid_cls.apply, (x,), raise_exception=False,
                            what="torch.autograd.gradcheck(Sigmoid.apply, (x,)) in float64")
    if not accepted:
        raise GradingFailure(f"torch.autograd.gradcheck(Sigmoid.apply, (x,)) in float64 rejects your Function for "
                             f"x = {fmt(x)}: its backward disagrees with central differences.")


def _sigmoid_corners() -> list[Tensor]:
    """Part E's corners, the same at every seed: zero and |x| up to 800 (exp(800) overflows float64), and a 0-d x."""
    return [torch.tensor([-800.0, -40.0, -2.0, 0.0, 3.0, 40.0, 800.0], dtype=torch.float64),
            torch.tensor([[-750.0, 0.0, 750.0], [1.0, -1.0, 710.0]], dtype=torch.float64),
            torch.tensor(0.7, dtype=torch.float64)]


@check
def check_sigmoid_function(sigmoid_cls, grading_seed: int | None = None) -> None:
    """Part E: Sigmoid is a torch.autograd.Function whose forward keeps x's shape and dtype and hands backward its
    tensors through ctx.save_for_backward only (no plain ctx attribute, global or class attribute), and whose own
    backward, from saved tensors and without autograd, returns g·σ(x)(1 − σ(x)), also with two calls in flight.

    Domain: x a float64 or float32 tensor of any shape, also 0-d, any finite values; the upstream gradient g of x's
    shape. Corners at every seed (:func:`_sigmoid_corners`): zero and |x| up to 800, a 0-d x, a float32 x (its
    forward's dtype and value); then two drawn shapes, each once alone and once with a second call in flight, and
    gradcheck in float64 (public: fixed shapes)."""
    __tracebackhide__ = True
    _require_function_class(sigmoid_cls, "Sigmoid")
    gen = case_stream("04/sigmoid", grading_seed)
    for x in _sigmoid_corners():
        with trial():
            _check_sigmoid_backward(sigmoid_cls, x, uniform(gen, tuple(x.shape), -1, 1))
    with trial():
        x32 = uniform(gen, (2, 3), -4, 4).float()
        what = f"Sigmoid.apply(x) for a float32 x of shape {_shape(x32)}"
        _expect_sigmoid_value(_forward(sigmoid_cls, x32, what), x32, what)
    drawn = [choice(gen, [(2, 3), (4, 3), (6,), (2, 2, 3)]) for _ in range(0 if grading_seed is None else 2)]
    shapes = [(3, 4), (5,)] if grading_seed is None else drawn
    for shape in shapes:
        x, grad = uniform(gen, shape), uniform(gen, shape, -1, 1)
        with trial():
            _check_sigmoid_backward(sigmoid_cls, x, grad)
    for shape in shapes:
        x1, x2, grad = uniform(gen, shape), uniform(gen, shape), uniform(gen, shape, -1, 1)
        with trial():
            _check_two_in_flight(sigmoid_cls, x1, x2, grad)
    with trial():
        _check_gradcheck_accepts(sigmoid_cls, uniform(gen, shapes[0]))


# ---------------------------------------------------------------------------------------------------------------
# Part F: a gradcheck that can say yes and no

def _sigmoid_function(factor: float = 1.0) -> type[torch.autograd.Function]:
    """A sigmoid Function whose backward is ``factor`` times the right one (1.0: correct)."""

    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s = torch.sigmoid(x)
            ctx.save_for_backward(s)
            return s

        @staticmethod
        def backward(ctx, grad):
            (s,) = ctx.saved_tensors
            return factor * grad * s * (1 - s)

    return Sigmoid


def _linear_function(bug: str = "", factor: float = 1.0) -> type[torch.autograd.Function]:
    """Y = X·W + b as a Function, every gradient times ``factor``; ``bug`` plants a wrong dW ("transposed", for a
    square W) or db ("averaged")."""

    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, W, b):
            ctx.save_for_backward(X, W)
            return X @ W + b

        @staticmethod
        def backward(ctx, dY):
            X, W = ctx.saved_tensors
            dW = dY.T @ X if bug == "transposed" else X.T @ dY
            db = dY.mean(dim=0) if bug == "averaged" else dY.sum(dim=0)
            return factor * (dY @ W.T), factor * dW, factor * db

    return Linear


@dataclass(frozen=True)
class _Verdict:
    label: str                      # what the Function is, for the message
    function: Callable              # a Function's apply
    inputs: tuple[Tensor, ...]
    correct: bool                   # does its backward agree with its forward?
    error: str = ""                 # a wrong backward: "small" (a fraction of a percent) or "later input"


def _verdict_cases(grading_seed: int | None) -> list[_Verdict]:
    """Correct Functions in float32 (twice) and float64; wrong ones by a small factor (twice), and wrong only in the
    gradient of a later input (twice): every way of answering wrongly shows in two cases."""
    gen = case_stream("04/gradcheck", grading_seed)
    n, d_in, d_out = (4, 3, 2) if grading_seed is None else _distinct(gen, 3)
    x_shape = (3, 4) if grading_seed is None else choice(gen, [(2, 3), (5,), (3, 2)])
    factor = 1.005 if grading_seed is None else choice(gen, [1.005, 0.995])
    # Magnitudes in [0.5, 2]: values whose float32 rounding is coarse, so a float32 gradcheck always shows it.
    signed = lambda shape: uniform(gen, shape, 0.5, 2.0) * torch.where(  # noqa: E731
        torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0).double()
    linear = lambda d_out=d_out: tuple(signed(s).float() for s in ((n, d_in), (d_in, d_out), (d_out,)))  # noqa: E731
    small_dtype = torch.float64 if grading_seed is None else choice(gen, [torch.float32, torch.float64])
    how = f"{abs(factor - 1):.1%} too {'large' if factor > 1 else 'small'}"
    wrong = lambda function, draw: (function, _seen_by_fast_mode(function, draw))  # noqa: E731
    return [
        _Verdict("a sigmoid Function with a correct backward", _sigmoid_function().apply,
                 (signed(x_shape).float(),), True),
        _Verdict("a linear Function (Y = X·W + b) with a correct backward", _linear_function().apply, linear(), True),
        _Verdict("a sigmoid Function with a correct backward", _sigmoid_function().apply,
                 (signed(x_shape),), True),
        _Verdict("a sigmoid Function with a correct backward, on a 0-d input", _sigmoid_function().apply,
                 (signed(()).float(),), True),
        _Verdict(f"a sigmoid Function whose backward is {how}",
                 *wrong(_sigmoid_function(factor).apply, lambda: (signed(x_shape).to(small_dtype),)), False, "small"),
        _Verdict(f"a linear Function whose every gradient is {how}",
                 *wrong(_linear_function(factor=factor).apply, linear), False, "small"),
        _Verdict("a linear Function whose bias gradient is averaged over the batch instead of summed",
                 *wrong(_linear_function("averaged").apply, linear), False, "later input"),
        _Verdict("a linear Function (square W) whose weight gradient is transposed",
                 *wrong(_linear_function("transposed").apply, lambda: linear(d_in)), False, "later input"),
    ]


def _seen_by_fast_mode(function: Callable, draw: Callable[[], tuple[Tensor, ...]]) -> tuple[Tensor, ...]:
    """Inputs from ``draw`` at which gradcheck rejects the (wrong) ``function`` in float64 also with
    ``fast_mode=True``, which the text allows: it compares one random projection of the Jacobians, and a planted error
    can happen to be nearly orthogonal to it (its vectors come from a generator of its own, so the verdict depends on
    the inputs only). Redrawn until it is seen; the default full-Jacobian gradcheck rejects every draw."""
    for _ in range(50):
        inputs = draw()
        leaves = tuple(t.detach().to(torch.float64).requires_grad_(True) for t in inputs)
        if not torch.autograd.gradcheck(function, leaves, fast_mode=True, raise_exception=False):
            return inputs
    raise CourseBug("no draw in 50 shows the planted error to a fast-mode gradcheck.")  # never at the seeds swept


def _float32_gradcheck_rejects(case: _Verdict) -> bool:
    leaves = tuple(t.detach().clone().requires_grad_(True) for t in case.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return not torch.autograd.gradcheck(case.function, leaves, raise_exception=False)


def _verdict_suspects(case: _Verdict, verdict: bool) -> tuple[Misconception, ...]:
    """The known mistakes that give ``verdict`` (the wrong one) on this case."""
    if case.correct:
        float32 = any(t.dtype == torch.float32 for t in case.inputs)
        return (FLOAT32_GRADCHECK,) if float32 and _float32_gradcheck_rejects(case) else ()
    return {"small": (LOOSENED,), "later input": (SOME_INPUTS,)}.get(case.error, ())


def _check_verdict(passes_gradcheck, case: _Verdict) -> None:
    __tracebackhide__ = True
    names = ["x"] if len(case.inputs) == 1 else ["X", "W", "b"]
    shapes = ", ".join(f"{key} {_shape(t)} {str(t.dtype).replace('torch.', '')}" for key, t in zip(names, case.inputs))
    what = f"passes_gradcheck(function, {', '.join(names)}) for {case.label}, with {shapes}"
    raised: list[BaseException] = []

    def verdict_of(function, *inputs):
        try:
            return passes_gradcheck(function, *inputs)
        except GradcheckError as error:  # noted, then handled by call_learner as any other exception
            raised.append(error)
            raise

    try:
        verdict = call_learner(verdict_of, case.function, *case.inputs, what=what)
    except GradingFailure as failure:  # gradcheck's own message goes on to print whole Jacobians: keep its first line
        if failure.proven is not None:
            raise
        first, *rest = failure.message.splitlines()
        message = f"{first}{' ...' if rest else ''}\nExpected it to return {case.correct}."
        raise GradingFailure(message, suspects=(NOT_A_VERDICT,) if raised and not case.correct else ()) from None
    if type(verdict) is not bool:
        raise GradingFailure(f"{what} returned {verdict!r:.80}; expected a bool (True or False), gradcheck's verdict.")
    if verdict != case.correct:
        raise GradingFailure(f"{what} returned {verdict}; expected {case.correct}.",
                             suspects=_verdict_suspects(case, verdict))


@check
def check_passes_gradcheck(passes_gradcheck, grading_seed: int | None = None) -> None:
    """Part F: passes_gradcheck(function, *inputs) says True for a right backward and False for a wrong one, as a
    bool, never raises, and leaves the caller's tensors as they were (values, dtype, requires_grad).

    Domain: function a torch.autograd.Function's apply; inputs one or more float32 or float64 tensors of any shape
    (also 0-d) that do not require grad. Cases, the same kinds at every seed: correct Functions on float32 inputs
    (one of them 0-d) and float64 ones, backwards 0.5 % off (float32 or float64 inputs), and backwards wrong only for
    a later input; the seed draws the sizes, values and the sign of the error."""
    __tracebackhide__ = True
    for case in _verdict_cases(grading_seed):
        with trial():
            _check_verdict(passes_gradcheck, case)
