"""Part E, the hunt: ``wrong_inputs(function, *inputs)`` names the inputs whose gradient a Function's backward gets
wrong, with gradcheck configured so that it can say no. The check hands it transformer layers as Functions (layer
norm, masked attention, label-smoothed cross-entropy, GELU, token embedding), correct or with a planted bug, some
small enough to pass gradcheck's default tolerances, on float32 and float64 inputs mixed with integer labels, token
indices and boolean masks."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...checking import CourseBug, GradingFailure, call_learner, check, proven_failure, trial
from ...seeding import uniform
from ..cases import case_stream, randint
from .common import distinct, shape_of
from .misconceptions import (
    FIRST_WRONG_ONLY,
    FLOAT32_GRADCHECK,
    TOLERANCE_BELOW_NOISE,
    TOLERANCE_TOO_LOOSE,
    WHOLE_FUNCTION_BLAMED,
)

Tensor = torch.Tensor

#: The text's promise: a planted error exceeds PLANTED_ATOL + PLANTED_RTOL·|right value| in at least one entry of the
#: wrong input's Jacobian (float64 central differences with h = 1e-6 are good to about 1e-9 here).
PLANTED_ATOL, PLANTED_RTOL = 1e-7, 1e-5
#: A bound on the rounding noise of gradcheck's float64 central differences here (measured: about 1e-10 to 1e-9).
NOISE = 1e-8
LN_EPS = 1e-5
#: The planted cross-entropy's smoothing: so small that its error stays below 1e-5 in every entry (the default atol
#: cannot see it) and above the promise in some.
SMALL_SMOOTHING = 0.0004
#: gradcheck's default atol: the planted cross-entropy error stays below it in every entry.
DEFAULT_ATOL = 1e-5
#: Where the exact GELU's slope Φ(x) + x·φ(x) is 0 (to 1e-16): central differences there are pure rounding noise,
#: which a purely relative tolerance (atol = 0) takes for an error.
GELU_SLOPE_ZERO = -0.7517915246935644


def _layer_norm(bug: str = "") -> type[torch.autograd.Function]:
    """F.layer_norm over the last dimension (eps 1e-5) as a Function; ``bug``: "eps missing" (σ = √var in backward,
    wrong for x and γ) or "dbeta mean" (dβ averaged over the rows)."""

    class LayerNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, gamma, beta):
            ctx.save_for_backward(x, gamma)
            return F.layer_norm(x, x.shape[-1:], gamma, beta, LN_EPS)

        @staticmethod
        def backward(ctx, dy):
            x, gamma = ctx.saved_tensors
            centred = x - x.mean(dim=-1, keepdim=True)
            var = (centred * centred).mean(dim=-1, keepdim=True)
            sigma = torch.sqrt(var if bug == "eps missing" else var + LN_EPS)
            xhat, dxhat = centred / sigma, dy * gamma
            dx = (dxhat - dxhat.mean(dim=-1, keepdim=True) - xhat * (dxhat * xhat).mean(dim=-1, keepdim=True)) / sigma
            rows = dy.reshape(-1, dy.shape[-1])
            return dx, (dy * xhat).reshape(rows.shape).sum(dim=0), rows.mean(dim=0) if bug == "dbeta mean" \
                else rows.sum(dim=0)

    return LayerNorm


def _attention(bug: str = "") -> type[torch.autograd.Function]:
    """softmax(Q·Kᵀ/√d, masked where ``keep`` is False)·V as a Function of (Q, K, V, keep); ``bug``: "dK unscaled"
    (dK without 1/√d) or "no scale" (dQ and dK without it)."""

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, K, V, keep):
            ctx.save_for_backward(Q, K, V, keep)
            return F.scaled_dot_product_attention(Q, K, V, attn_mask=keep)

        @staticmethod
        def backward(ctx, dO):
            Q, K, V, keep = ctx.saved_tensors
            tau = 1 / math.sqrt(Q.shape[-1])
            P = torch.softmax((Q @ K.T * tau).masked_fill(~keep, -math.inf), dim=-1)
            dP = dO @ V.T
            dS = P * (dP - (dP * P).sum(dim=-1, keepdim=True))
            dQ = dS @ K * (1.0 if bug == "no scale" else tau)
            dK = dS.T @ Q * (1.0 if bug in ("no scale", "dK unscaled") else tau)
            return dQ, dK, P.T @ dO, None

    return Attention


def _cross_entropy(smoothing: float, bug: str = "") -> type[torch.autograd.Function]:
    """F.cross_entropy(logits, targets, label_smoothing=smoothing) as a Function of (logits, targets); ``bug``:
    "others" (the smoothing spread over the C − 1 other classes)."""

    class CrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, targets):
            ctx.save_for_backward(logits, targets)
            return F.cross_entropy(logits, targets, label_smoothing=smoothing)

        @staticmethod
        def backward(ctx, grad):
            logits, targets = ctx.saved_tensors
            n, c = logits.shape
            onehot = F.one_hot(targets, c).to(logits.dtype)
            spread = smoothing / (c - 1) * (1 - onehot) if bug == "others" else smoothing / c
            return grad * (torch.softmax(logits, dim=-1) - (1 - smoothing) * onehot - spread) / n, None

    return CrossEntropy


def _gelu(bug: str = "") -> type[torch.autograd.Function]:
    """The exact (erf) GELU as a Function; ``bug``: "tanh" (backward of the tanh approximation)."""

    class GELU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return F.gelu(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            if bug == "tanh":
                k = math.sqrt(2 / math.pi)
                t = torch.tanh(k * (x + 0.044715 * x ** 3))
                slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
            else:
                slope = 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)
            return grad * slope

    return GELU


def _embedding(bug: str = "") -> type[torch.autograd.Function]:
    """F.embedding(indices, weight) as a Function (the integer indices first, as F.embedding takes them); ``bug``:
    "duplicates lost" (dW[indices] += dY, which keeps one row of dY per repeated token instead of their sum)."""

    class Embedding(torch.autograd.Function):
        @staticmethod
        def forward(ctx, indices, weight):
            ctx.save_for_backward(indices)
            ctx.rows = weight.shape[0]
            return F.embedding(indices, weight)

        @staticmethod
        def backward(ctx, dY):
            (indices,) = ctx.saved_tensors
            dW = torch.zeros(ctx.rows, dY.shape[-1], dtype=dY.dtype)
            if bug == "duplicates lost":
                dW[indices] += dY
            else:
                dW.index_add_(0, indices.reshape(-1), dY.reshape(-1, dY.shape[-1]))
            return None, dW

    return Embedding


@dataclass(frozen=True)
class _Planted:
    label: str                      # what the Function is, for the message
    names: tuple[str, ...]          # its inputs' names
    function: Callable              # the Function's apply
    inputs: tuple[Tensor, ...]
    wrong: tuple[int, ...]          # the positions whose gradient its backward gets wrong
    small: bool = False             # gradcheck's default tolerances miss every one of them
    below: float = math.inf         # every entry's error is below this (an atol this large misses it)


def _float64(inputs: tuple[Tensor, ...], requiring: int | None = None) -> tuple[Tensor, ...]:
    copies = [t.detach().to(torch.float64).clone() if t.is_floating_point() else t for t in inputs]
    if requiring is not None:
        copies[requiring].requires_grad_(True)
    return tuple(copies)


def _gradcheck_flags(function: Callable, inputs: tuple[Tensor, ...], **tolerances) -> list[int]:
    """What a per-input float64 gradcheck says: the floating inputs it rejects (the reference's own method)."""
    flagged = []
    for position, tensor in enumerate(inputs):
        if tensor.is_floating_point():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if not torch.autograd.gradcheck(function, _float64(inputs, position), raise_exception=False,
                                                **tolerances):
                    flagged.append(position)
    return flagged


def _jacobian(function: Callable, inputs: tuple[Tensor, ...], position: int) -> Tensor:
    fixed = _float64(inputs)

    def of(value):
        return function(*fixed[:position], value, *fixed[position + 1:])

    return torch.autograd.functional.jacobian(of, fixed[position])


def _keeps_promise(planted: _Planted, right: Callable) -> bool:
    """Every wrong input's Jacobian is off by more than the promise somewhere (and by less than ``below``
    everywhere); a "small" bug also passes gradcheck's defaults."""
    for position in planted.wrong:
        mine, true = _jacobian(planted.function, planted.inputs, position), _jacobian(right, planted.inputs, position)
        error = torch.abs(mine - true)
        # beyond the promise by more than the differences' noise: a tolerance at the promise itself still sees it
        if not bool((error > NOISE + PLANTED_ATOL + PLANTED_RTOL * torch.abs(true)).any()) \
                or not float(error.max()) < planted.below - NOISE:
            return False
    return not planted.small or not _gradcheck_flags(planted.function, planted.inputs)


def _drawn(make: Callable[[], _Planted], right: Callable) -> _Planted:
    """The first case from ``make`` that keeps the promise (drawn again otherwise; the inputs decide it)."""
    for _ in range(40):
        planted = make()
        if _keeps_promise(planted, right):
            return planted
    raise CourseBug("no draw in 40 gave a planted error of the promised size.")  # never at the seeds swept


def _signed(gen: torch.Generator, shape: tuple[int, ...], low: float = 0.5, high: float = 1.5) -> Tensor:
    return uniform(gen, shape, low, high) * torch.where(uniform(gen, shape) < 0, -1.0, 1.0)


def _cases(grading_seed: int | None) -> list[_Planted]:
    """The hunt's twelve cases, the same kinds at every seed (the seed draws sizes and values): five correct
    Functions (three on float32 inputs; both GELUs have a Jacobian entry of about 0, where only noise is left), two
    small bugs (default tolerances miss them; the cross-entropy's stays below 1e-5 everywhere), five ordinary ones in
    one or two inputs, among them a later input only and one after an integer input."""
    gen = case_stream("04/hunt", grading_seed)
    rows, features = (3, 6) if grading_seed is None else (randint(gen, 2, 4), randint(gen, 6, 8))
    n, m = (3, 4) if grading_seed is None else distinct(gen, 2, 3, 5)
    classes = 10 if grading_seed is None else randint(gen, 9, 11)

    def layer_norm(bug: str, dtype: torch.dtype, scale: float = 1.0) -> _Planted:
        inputs = (uniform(gen, (rows, features), -scale, scale), _signed(gen, (features,)), uniform(gen, (features,)))
        wrong = {"": (), "eps missing": (0, 1), "dbeta mean": (2,)}[bug]
        how = {"": "", "eps missing": " whose backward leaves ε out of σ",
               "dbeta mean": " whose dβ is averaged over the rows"}[bug]
        return _Planted(f"a layer norm Function{how}", ("x", "gamma", "beta"), _layer_norm(bug).apply,
                        tuple(t.to(dtype) for t in inputs), wrong, bug == "eps missing")

    def attention(bug: str, dtype: torch.dtype) -> _Planted:
        keep = torch.ones(n, m, dtype=torch.bool).tril()
        keep[-1, -1] = False  # a padded key too
        inputs = tuple(uniform(gen, shape, -1, 1).to(dtype) for shape in ((n, 4), (m, 4), (m, 2)))
        wrong = {"": (), "dK unscaled": (1,), "no scale": (0, 1)}[bug]
        how = {"": "", "dK unscaled": " whose dK lacks the 1/√d", "no scale": " whose dQ and dK lack the 1/√d"}[bug]
        return _Planted(f"a masked attention Function{how}", ("Q", "K", "V", "keep"), _attention(bug).apply,
                        (*inputs, keep), wrong)

    def cross_entropy(bug: str, smoothing: float) -> _Planted:
        count = rows + 3
        logits, targets = uniform(gen, (count, classes), -1, 1).float(), torch.randint(classes, (count,), generator=gen)
        how = " whose smoothing goes to the other C − 1 classes" if bug else ""
        return _Planted(f"a cross-entropy Function with label_smoothing = {smoothing:g}{how}", ("logits", "targets"),
                        _cross_entropy(smoothing, bug).apply, (logits, targets), (0,) if bug else (), bool(bug),
                        DEFAULT_ATOL if bug else math.inf)

    def embedding(bug: str) -> _Planted:
        indices = torch.randint(4, (2, 4), generator=gen)  # eight tokens of four: some repeat
        how = " whose dW keeps one row per repeated token" if bug else ""
        return _Planted(f"a token embedding Function{how}", ("indices", "weight"), _embedding(bug).apply,
                        (indices, uniform(gen, (4, 3), -1, 1)), (1,) if bug else ())

    def gelu(bug: str, dtype: torch.dtype) -> _Planted:
        x = uniform(gen, (rows, 4), -3, 3)
        x[0, 0] = x[-1, -1] = GELU_SLOPE_ZERO  # a Jacobian entry of about 0: only noise to compare with there
        return _Planted(f"a GELU Function{' whose backward is the tanh approximation' * bool(bug)}", ("x",),
                        _gelu(bug).apply, (x.to(dtype),), (0,) if bug else ())

    return [
        layer_norm("", torch.float32), cross_entropy("", 0.1), attention("", torch.float64), gelu("", torch.float64),
        gelu("", torch.float32),
        _drawn(lambda: layer_norm("eps missing", torch.float64, 1.2), _layer_norm().apply),
        _drawn(lambda: cross_entropy("others", SMALL_SMOOTHING), _cross_entropy(SMALL_SMOOTHING).apply),
        attention("dK unscaled", torch.float64), layer_norm("dbeta mean", torch.float32),
        attention("no scale", torch.float32), gelu("tanh", torch.float32), embedding("duplicates lost"),
    ]


def _predicted(planted: _Planted, answer: list[int]) -> list:
    """The known mistakes whose method gives ``answer`` (the wrong one) on this case, each with what it gives; a value
    two mistakes share names neither."""
    floating = [i for i, t in enumerate(planted.inputs) if t.is_floating_point()]
    guesses = []
    if planted.small:
        guesses.append((TOLERANCE_TOO_LOOSE, _gradcheck_flags(planted.function, planted.inputs)))
    if len(planted.wrong) > 1:
        guesses.append((FIRST_WRONG_ONLY, [planted.wrong[0]]))
    if planted.wrong:
        guesses.append((WHOLE_FUNCTION_BLAMED, floating))
    else:
        guesses.append((TOLERANCE_BELOW_NOISE, answer if answer else None))  # any input blamed on a right backward
    guesses = [(mistake, value) for mistake, value in guesses if value is not None and value != list(planted.wrong)]
    return [mistake for mistake, value in guesses if value == answer
            and not any(other is not mistake and theirs == value for other, theirs in guesses)]


def _check_hunt(wrong_inputs, planted: _Planted) -> None:
    __tracebackhide__ = True
    shapes = ", ".join(f"{name} {shape_of(t)} {str(t.dtype).replace('torch.', '')}"
                       for name, t in zip(planted.names, planted.inputs))
    what = f"wrong_inputs(function, {', '.join(planted.names)}) for {planted.label}, with {shapes}"
    dtypes: set[torch.dtype] = set()

    def function(*inputs):  # the Function, noting the dtypes gradcheck runs it in
        dtypes.update(t.dtype for t in inputs if isinstance(t, Tensor) and t.is_floating_point())
        return planted.function(*inputs)

    answer = call_learner(wrong_inputs, function, *planted.inputs, what=what)
    if type(answer) is not list or any(type(i) is not int for i in answer) or answer != sorted(set(answer)):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a list of input positions (ints) in "
                             "increasing order.")
    if answer == list(planted.wrong):
        return
    message = f"{what} returned {answer}; expected {list(planted.wrong)}."
    if torch.float32 in dtypes:
        raise proven_failure(f"{message}\n  gradcheck ran the Function on float32 inputs.", FLOAT32_GRADCHECK)
    raise GradingFailure(message, suspects=tuple(_predicted(planted, answer)))


@check
def check_wrong_inputs(wrong_inputs, grading_seed: int | None = None) -> None:
    """Part E: wrong_inputs(function, *inputs) returns, as a sorted list of ints, the positions of the inputs whose
    gradient the Function's backward gets wrong: [] for a right backward; never raising; the caller's tensors
    unchanged (values, dtype, requires_grad).

    Domain: function a torch.autograd.Function's apply with one output; inputs tensors, float32 or float64 (values
    of order 1) or not differentiable (int64 labels, a bool mask), none requiring grad; a planted error exceeds
    PLANTED_ATOL + PLANTED_RTOL·|right value| in some entry of each wrong input's Jacobian. Cases (:func:`_cases`),
    the same kinds at every seed: correct layer norm (float32), cross-entropy (float32 logits, int64 labels),
    masked attention (float64) and GELU (float64 and float32, with an input where its slope is 0); small bugs that
    gradcheck's defaults miss (ε left out of a layer norm's σ, wrong for x and γ; smoothing spread over C − 1
    classes, below 1e-5 in every entry); dK without 1/√d; dβ averaged (float32); dQ and dK without 1/√d (float32);
    GELU's backward from the tanh approximation (float32); a token embedding (indices first) whose dW loses repeated
    tokens."""
    __tracebackhide__ = True
    for planted in _cases(grading_seed):
        with trial():
            _check_hunt(wrong_inputs, planted)
