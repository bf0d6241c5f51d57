"""Part E, a bug hunt: the notebook gives ``given_gradients``, a complete hand-written backward of the digits network
Linear -> BatchNorm -> SiLU -> Linear that trains (its loss falls as a right one's does) and has one planted bug,
hidden among plausible lines: its BatchNorm backward takes the route through the variance at
(centred.var(0) + eps)^(-3/2), torch's default, unbiased variance (divided by N − 1), where the forward normalised with
the biased one (divided by N). Nothing in the code says N − 1, so reading for it is not enough: one gradient,
d loss / d W1, is off by a term that shrinks as the batch grows. The learner finds it with the course's tools (a
gradcheck gate against autograd, intermediate tensors made leaves, batches of several sizes), names the parameter
(``WRONG_GRADIENT``), writes ``w1_errors(params, X, targets, sizes)``, the measurement of how far off that gradient
is on the first n examples for each batch size n (checked against the check's own measurement on the notebook's case
in the visible test and on fresh starts, digits and sizes in the hidden one, so numbers typed in from a run cannot
pass: the size of the error, not a verdict, is what says which gate would have caught it), predicts with
``dvar_factor(n)`` by what factor the culprit line's gradient of the batch variance is off for a batch of n (a
formula derived from the line and checked against a measurement, called at batch sizes up to 5000) and
writes ``mlp_gradients``, the backward with the bug fixed, graded against autograd and central differences on batches
from 2 to 64 examples.

:func:`given_gradients` is the notebook's given code with the course's exercise-04 references; :func:`staged_gradients`
computes it and the variants a catalogued mistake computes instead (the bug left in, N − 1 in both routes, the
cross-entropy without its 1/N).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ...checking import (
    GradingFailure,
    NotWritten,
    Route,
    call_learner,
    check,
    expect_close,
    expect_tensor,
    trial,
)
from ...checking import proven_failure as _proven
from ...datasets import digits_split
from ...oracles import autograd_gradient, central_difference
from ...routes import watch_calls
from ..cases import case_stream, randint
from ..ex04_layer_backward import NAIVE_SOFTMAX
from ..shared import CE_NOT_DIVIDED
from .batchnorm import BN_EPS, LIBRARY_NORMALISATIONS
from .misconceptions import (
    BUG_FACTOR_UNDONE,
    BUG_LEFT_IN,
    DVAR_FACTOR_INVERTED,
    DVAR_FACTOR_ONE,
    DVAR_FACTOR_ONE_SIZE,
    DVAR_FACTOR_POWER,
    FIX_AT_ONE_BATCH_SIZE,
    LESSON_NETWORK_PORTED,
    LIBRARY_BATCHNORM,
    N_MINUS_1_IN_BACKWARD,
    RIGHT_STAGE_CHANGED,
    SILU_FROM_C2_WRONG,
    W1_ERRORS_AS_VERDICTS,
    W1_ERRORS_FROM_NORMS,
    W1_ERRORS_OF_A_RIGHT_BACKWARD,
    W1_ERRORS_TYPED_IN,
    WRONG_GRADIENT_NAMED,
)
from .network import DIGITS_KEYS, mlp_case, mlp_logits, mlp_loss, with_large_logits
from .silu import silu

Tensor = torch.Tensor

#: The parameter whose gradient the given backward gets wrong.
BUGGY_KEY = "W1"
#: The batch size of the notebook's try-it cell, pinned at every seed: a fix tuned on it must fail elsewhere.
TRY_IT_BATCH = 64
#: The batch sizes of the notebook's case of ``w1_errors`` (the visible test), and the relative tolerance on each
#: measurement.
ERROR_SIZES = (2, 4, 8, 16, 32, 64)
ERROR_RTOL = 0.02
#: The batch sizes at which the visible test calls ``dvar_factor`` (the hidden test: 2, then four drawn up to
#: DVAR_LARGEST), and the relative tolerance (eps, neglected by the formula, moves the measured ratio by ~1e-5).
DVAR_SIZES = (2, 3, 4, 16, 64, 1000)
DVAR_LARGEST = 5000
DVAR_RTOL = 1e-4


def start_params(gen: torch.Generator, hidden: int = 32) -> dict[str, Tensor]:
    """The notebook's try-it start (its ``start_params``): the draw ``train_with`` starts from."""
    return {"W1": torch.randn(64, hidden, generator=gen, dtype=torch.float64) / 8,
            "gamma": torch.ones(hidden, dtype=torch.float64), "beta": torch.zeros(hidden, dtype=torch.float64),
            "W2": torch.randn(hidden, 10, generator=gen, dtype=torch.float64) / math.sqrt(hidden),
            "b2": torch.zeros(10, dtype=torch.float64)}


def measure_w1_errors(params: dict[str, Tensor], X: Tensor, targets: Tensor, sizes, *, norms: bool = False
                      ) -> dict[int, float]:
    """The check's own measurement: ||G − A|| / ||A|| for W1, G the given backward's gradient and A autograd's, on
    the first n examples of X for each n of ``sizes``; ``norms``: what comparing the norms gives instead,
    | ||G|| − ||A|| | / ||A||."""
    names = list(params)
    errors = {}
    for n in sizes:
        Xn, tn = X[:n], targets[:n]
        right = autograd_gradient(lambda *v, X=Xn, t=tn: mlp_loss(dict(zip(names, v)), X, t), *params.values())[0]
        given = given_gradients(params, Xn, tn)["W1"]
        gap = abs(given.norm() - right.norm()) if norms else (given - right).norm()
        errors[n] = float(gap / right.norm())
    return errors


def _notebook_case() -> tuple[dict[str, Tensor], Tensor, Tensor, tuple[int, ...]]:
    """The notebook's case: the try-it start, the first 96 training digits of digits_split(seed=0) (more rows than
    the largest size: a measurement must take the first n), ERROR_SIZES."""
    X_train, y_train, _, _ = digits_split(seed=0)
    return start_params(torch.Generator().manual_seed(0)), X_train[:96], y_train[:96], ERROR_SIZES


def _w1_cases(grading_seed: int | None) -> list[tuple[dict[str, Tensor], Tensor, Tensor, tuple[int, ...], str]]:
    """The notebook's case (visible test), or two fresh draws (hidden): another start seed and hidden width, other
    training digits in a random order, first at the notebook's batch sizes, then at five drawn ones from 2 to 96."""
    if grading_seed is None:
        params, X, targets, sizes = _notebook_case()
        return [(params, X, targets, sizes, "start_params(torch.Generator().manual_seed(0)), the first 96 training "
                 "digits of digits_split(seed=0)")]
    gen = case_stream("11/bug_hunt/w1", grading_seed)
    X_train, y_train, _, _ = digits_split(seed=0)
    cases = []
    for sizes in (ERROR_SIZES, None):
        if sizes is None:
            sizes = tuple(sorted(2 + int(i) for i in torch.randperm(95, generator=gen)[:5]))
        seed, hidden = randint(gen, 1, 10 ** 6), randint(gen, 8, 48)
        chosen = torch.randperm(len(y_train), generator=gen)[:max(sizes)]
        cases.append((start_params(torch.Generator().manual_seed(seed), hidden), X_train[chosen], y_train[chosen],
                      sizes, f"start_params(torch.Generator().manual_seed({seed}), {hidden}), {max(sizes)} training "
                      "digits of digits_split(seed=0) drawn at random"))
    return cases


def _check_w1_case(w1_errors, params: dict[str, Tensor], X: Tensor, targets: Tensor, sizes: tuple[int, ...],
                   note: str) -> None:
    """w1_errors(params, X, targets, sizes): one number per batch size asked, each within ERROR_RTOL of the
    check's own measurement on the same case."""
    __tracebackhide__ = True
    what = f"w1_errors(params, X, targets, sizes={sizes}) at {note}"
    measured = call_learner(w1_errors, {k: v.clone() for k, v in params.items()}, X.clone(), targets.clone(),
                            sizes, what=what)
    if not isinstance(measured, dict) or set(measured) != set(sizes):
        keys = sorted(measured, key=str) if isinstance(measured, dict) else type(measured).__name__
        if isinstance(measured, dict) and set(measured) == set(ERROR_SIZES):
            raise _proven(f"{what} returned the keys {keys}, the notebook's batch sizes, where the sizes asked were "
                          f"{', '.join(map(str, sizes))}.", W1_ERRORS_TYPED_IN)
        raise GradingFailure(f"{what} returned {keys!r:.80}; expected a dict whose keys are the batch sizes asked, "
                             f"{', '.join(map(str, sizes))}.")
    values = [measured[n] for n in sizes]
    if any(isinstance(v, bool) for v in values):
        raise _proven(f"{what} holds True/False: a verdict, where the part asks for the size of the error.",
                      W1_ERRORS_AS_VERDICTS)
    if not all(isinstance(v, numbers.Real) or (isinstance(v, torch.Tensor) and v.numel() == 1) for v in values) \
            or not all(math.isfinite(float(v)) for v in values):
        raise GradingFailure(f"{what} must map each batch size to a finite number (a Python float).")
    got = {n: float(measured[n]) for n in sizes}
    own = measure_w1_errors(params, X, targets, sizes)

    def agree(theirs: dict[int, float], mine: dict[int, float]) -> bool:
        return all(abs(theirs[n] - mine[n]) <= ERROR_RTOL * mine[n] for n in sizes)

    if agree(got, own):
        return
    if all(abs(v) < 1e-8 for v in got.values()):
        raise _proven(f"{what} holds round-off (largest {max(abs(v) for v in got.values()):.1e}), not the error of "
                      "given_gradients.", W1_ERRORS_OF_A_RIGHT_BACKWARD)
    if agree(got, measure_w1_errors(params, X, targets, sizes, norms=True)):
        raise _proven(f"{what}: the errors are far smaller than the check's measurement of ||given − autograd|| / "
                      "||autograd|| at every batch size.", W1_ERRORS_FROM_NORMS)
    if agree({n: v / 100 for n, v in got.items()}, own):
        raise GradingFailure(f"{what}: the errors are 100 times the check's measurement at every batch size: is each "
                             "one a fraction (0.05 for 5 %), as asked, or a percentage?")
    notebook_params, notebook_X, notebook_targets, _ = _notebook_case()
    if max(sizes) <= len(notebook_X) and not torch.equal(X, notebook_X[:len(X)]) \
            and agree(got, measure_w1_errors(notebook_params, notebook_X, notebook_targets, sizes)):
        raise _proven(f"{what} returned the errors of the notebook's case (the try-it start on the first training "
                      "digits), not of the params, X and targets it was given.", W1_ERRORS_TYPED_IN)
    off = [f"{n} ({got[n]:.4g}, the check measures {own[n]:.4g})" for n in sizes
           if abs(got[n] - own[n]) > ERROR_RTOL * own[n]]
    raise GradingFailure(f"{what} differs from the check's own measurement by more than {ERROR_RTOL:.0%} at the "
                         f"batch sizes {', '.join(off)}. Measured as the part says: ||G − A|| / ||A|| for W1 on the "
                         "first n examples of X, at the params given?")


def dvar_ratio(n: int, variance: float = 1.0) -> float:
    """What the given backward's dvar is, divided by the right one, on a batch of n whose feature has the (biased)
    batch variance ``variance``: its line reads (unbiased variance + eps)^(-3/2) where the right one reads
    (biased variance + eps)^(-3/2), and everything else in dvar is the same."""
    return ((variance + BN_EPS) / (variance * n / (n - 1) + BN_EPS)) ** 1.5


def _dvar_sizes(grading_seed: int | None) -> tuple[int, ...]:
    if grading_seed is None:
        return DVAR_SIZES
    gen = case_stream("11/bug_hunt/dvar", grading_seed)
    return (2, *sorted({randint(gen, 3, 12), randint(gen, 13, 200), randint(gen, 201, DVAR_LARGEST),
                        randint(gen, 5, 99)}))


def _check_dvar_factor(dvar_factor, sizes: tuple[int, ...]) -> None:
    """dvar_factor(n), the given backward's dvar over the right one as a formula in n (eps neglected), at each size:
    within DVAR_RTOL of what the two lines give on a feature of variance 1."""
    __tracebackhide__ = True
    got = {}
    for n in sizes:
        value = call_learner(dvar_factor, n, what=f"dvar_factor({n})")
        if isinstance(value, bool) or not (isinstance(value, numbers.Real)
                                           or (isinstance(value, torch.Tensor) and value.numel() == 1)) \
                or not math.isfinite(float(value)):
            raise GradingFailure(f"dvar_factor({n}) returned {value!r:.60}; expected a finite number (a Python "
                                 "float), the given backward's dvar divided by the right one.")
        got[n] = float(value)
    own = {n: dvar_ratio(n) for n in sizes}
    if all(abs(got[n] - own[n]) <= DVAR_RTOL * own[n] for n in sizes):
        return
    shown = ", ".join(f"{got[n]:.6g} at n = {n}" for n in sizes)
    what = f"dvar_factor returned {shown}"

    def like(power: float) -> bool:
        return all(abs(got[n] - ((n - 1) / n) ** power) <= 1e-3 * ((n - 1) / n) ** power for n in sizes)

    if like(-1.5):
        raise _proven(f"{what}: each is above 1, and the given line's dvar is smaller than the right one at every "
                      "batch size.", DVAR_FACTOR_INVERTED)
    if any(like(p) for p in (1, 0.5, 3, 2, -1, -0.5, -3)):
        raise _proven(f"{what}: these follow the batch size, but not as the two dvars compare when the test "
                      "measures both on a batch whose feature has a variance of 1.", DVAR_FACTOR_POWER)
    if all(abs(v - 1) < 1e-6 for v in got.values()):
        raise _proven(f"{what}, where the given backward's W1 gradient is off at every batch size.",
                      DVAR_FACTOR_ONE)
    if len(set(got.values())) == 1:
        raise _proven(f"{what}: one number whatever the batch size.", DVAR_FACTOR_ONE_SIZE)
    off = [f"{n} ({got[n]:.6g}, {'above' if got[n] > own[n] else 'below'} what the test measures)" for n in sizes
           if abs(got[n] - own[n]) > DVAR_RTOL * own[n]]
    raise GradingFailure(f"{what}. It differs by more than {DVAR_RTOL:.0e} relative from the ratio of the given "
                         f"backward's dvar to autograd's, measured on a batch of each size, at n = {'; '.join(off)}. "
                         "Which variance does the given line read, and how does dvar depend on it?")


def _expect_silu(silu_backward) -> None:
    """Part C.2's silu_backward, which the given backward and mlp_gradients call, gives SiLU's derivative on inputs
    of the network's range (values only: C.2's own test checks its contracts and overflow corners)."""
    __tracebackhide__ = True
    x = torch.linspace(-6.0, 6.0, 13, dtype=torch.float64).reshape(13, 1) * torch.tensor([[1.0, 0.37]],
                                                                                        dtype=torch.float64)
    dy = torch.linspace(-1.0, 1.5, 26, dtype=torch.float64).reshape(13, 2)
    what = "silu_backward(x, dy), your Part C.2 function, which Part E's given backward calls"
    try:
        got = call_learner(silu_backward, x.clone(), dy.clone(), what=what, may_change=True)
    except NotWritten:
        raise NotWritten("Not written yet: silu_backward (Part C.2) still raises NotImplementedError, and Part E's "
                         "given backward calls it. Write Part C.2 first.") from None
    (expected,) = autograd_gradient(lambda t: (silu(t) * dy).sum(), x)
    if not isinstance(got, torch.Tensor) or got.shape != x.shape or not torch.allclose(got, expected, rtol=1e-6,
                                                                                       atol=1e-8):
        gap = (f"largest difference from autograd {float((got - expected).abs().max()):.3g}"
               if isinstance(got, torch.Tensor) and got.shape == x.shape else f"it returned {got!r:.60}")
        raise _proven(f"{what}, on x from -6 to 6 ({gap}).", SILU_FROM_C2_WRONG)


def staged_gradients(params: dict[str, Tensor], X: Tensor, targets: Tensor, *, var_divisor: str = "n",
                     mean_divisor: str = "n", ce_divided: bool = True, unbiased_dvar: bool = False,
                     factor_undone: bool = False) -> dict[str, Tensor]:
    """The given backward's stages with the reference exercise-04 pieces. ``var_divisor`` and ``mean_divisor`` ("n" or
    "n - 1") divide BatchNorm's routes back through the variance and the mean; ``unbiased_dvar``: the route through
    the variance taken at (unbiased variance + eps)^(-3/2), the given code's bug; ``ce_divided`` False: the
    cross-entropy's gradient without its 1/N (a pasted exercise-04 mistake); ``factor_undone``: the buggy route
    multiplied by (n/(n−1))^(3/2), which scales eps by (n−1)/n (a fix by the factor of Part E's dvar_factor)."""
    n = X.shape[0]
    divisors = {"n": n, "n - 1": n - 1}
    z = X @ params["W1"]
    mean = z.mean(0)
    centred = z - mean
    var = (centred ** 2).mean(0)
    std = torch.sqrt(var + BN_EPS)
    xhat = centred / std
    a = params["gamma"] * xhat + params["beta"]
    s = torch.sigmoid(a)
    h = a * s
    logits = h @ params["W2"] + params["b2"]
    dlogits = torch.softmax(logits, dim=1) - F.one_hot(targets, logits.shape[1]).to(logits.dtype)
    dlogits = dlogits / n if ce_divided else dlogits
    dW2, db2, dh = h.T @ dlogits, dlogits.sum(0), dlogits @ params["W2"].T
    da = dh * s * (1 + a * (1 - s))
    dgamma, dbeta = (da * xhat).sum(0), da.sum(0)
    dxhat = da * params["gamma"]
    dvar = -0.5 * (dxhat * centred).sum(0) * ((centred.var(0) + BN_EPS) ** -1.5 if unbiased_dvar or factor_undone
                                              else std ** -3)
    if factor_undone:
        dvar = dvar * (n / (n - 1)) ** 1.5
    dmean = -(dxhat / std).sum(0)
    dz = dxhat / std + dvar * 2 * centred / divisors[var_divisor] + dmean / divisors[mean_divisor]
    return {"W1": X.T @ dz, "gamma": dgamma, "beta": dbeta, "W2": dW2, "b2": db2}


def given_gradients(params: dict[str, Tensor], X: Tensor, targets: Tensor) -> dict[str, Tensor]:
    """What the notebook's given backward computes (tests/test_ex11_parts.py runs the notebook's cell against it)."""
    return staged_gradients(params, X, targets, unbiased_dvar=True)


def _bug_hunt_cases(grading_seed: int | None) -> list[tuple[dict[str, Tensor], Tensor, Tensor, str]]:
    """Corners at every seed (a batch of 2, one hidden unit, logits up to LARGE_LOGIT, the try-it cell's batch size),
    then the visible case or two drawn ones. The batch size never equals the number of inputs."""
    gen = case_stream("11/bug_hunt", grading_seed)
    cases = [(*mlp_case(gen, 2, 3, 2, 2), ", a batch of 2"),
             (*mlp_case(gen, 5, 4, 1, 3), ", one hidden unit"),
             (*mlp_case(gen, 4, 3, 3, 4), ", logits up to 1500"),
             (*mlp_case(gen, TRY_IT_BATCH, 5, 4, 3), f", a batch of {TRY_IT_BATCH} (the try-it cell's size)")]
    cases[2] = (with_large_logits(cases[2][0], cases[2][1]), *cases[2][1:])
    sizes = [(6, 4, 5, 3)] if grading_seed is None else \
        [(randint(gen, 5, 12), randint(gen, 2, 4), randint(gen, 2, 6), randint(gen, 2, 5)) for _ in range(2)]
    return cases + [(*mlp_case(gen, *size), "") for size in sizes]


@dataclass
class CaseOutcome:
    """What one case of Part E found, for the verdict across cases: ``compared`` once the answer's gradients were
    compared with autograd (a case that failed before stays uncompared), ``wrong`` the keys it got wrong, and
    ``factor_undone`` when its d loss / d W1 is the given line patched by the planted factor's inverse (eps scaled
    with it: not a fix tuned to one batch size, since eps matters on the small batches)."""

    compared: bool = False
    wrong: set[str] = field(default_factory=set)
    factor_undone: bool = False

    @property
    def passed(self) -> bool:
        return self.compared and not self.wrong

    @property
    def only_the_bug(self) -> bool:
        """Compared, and wrong in the buggy key alone, not by the factor undone."""
        return self.compared and self.wrong == {BUGGY_KEY} and not self.factor_undone


def _run_case(mlp_gradients, params: dict[str, Tensor], X: Tensor, targets: Tensor, note: str,
              outcome: CaseOutcome) -> None:
    """Check one case; ``outcome`` records what it found (the failure raised names the first wrong key)."""
    __tracebackhide__ = True
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in params.items())
    what = f"mlp_gradients(params, X, targets) with {shapes}, X {tuple(X.shape)}{note}"
    try:
        with watch_calls(LIBRARY_NORMALISATIONS) as library:
            answer = call_learner(mlp_gradients, params, X, targets, what=what, forbid=[Route.AUTOGRAD])
    except NotWritten:
        raise
    except GradingFailure as failure:
        if isinstance(failure.raised, KeyError) and failure.raised.args == ("b1",):
            raise _proven(f"{failure} The network of this part has no parameter b1.", LESSON_NETWORK_PORTED) from None
        raise
    if library.used:
        raise _proven(f"{what} called torch's batch normalisation.", LIBRARY_BATCHNORM)
    if type(answer) is not dict or set(answer) != set(params):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a dict with the keys {sorted(params)}.")
    names = list(params)

    def loss(*values):
        return mlp_loss(dict(zip(names, values)), X, targets)

    expected = dict(zip(names, autograd_gradient(loss, *params.values())))
    fds = dict(zip(names, central_difference(loss, *params.values())))
    largest = float(mlp_logits(params, X).max())
    broken = [k for k in params if isinstance(answer.get(k), torch.Tensor) and not torch.isfinite(answer[k]).all()]
    if broken and largest > 709.78:
        raise _proven(f"{what}: d loss / d {broken[0]} has inf or nan entries; the largest logit is {largest:.5g}, "
                      "where exp overflows in float64 (your softmax, in the exercise-04 cell, must subtract each "
                      "row's largest logit first).", NAIVE_SOFTMAX)
    got = {key: expect_tensor(answer[key], f"{what}: {key}", tuple(params[key].shape)) for key in DIGITS_KEYS}
    wrong = {key for key in DIGITS_KEYS if not torch.allclose(got[key], expected[key], rtol=1e-6, atol=1e-8)}
    outcome.compared, outcome.wrong = True, wrong
    given = given_gradients(params, X, targets)
    variants = {"both": staged_gradients(params, X, targets, var_divisor="n - 1", mean_divisor="n - 1"),
                "undivided": staged_gradients(params, X, targets, ce_divided=False),
                "undone": staged_gradients(params, X, targets, factor_undone=True)}
    outcome.factor_undone = BUGGY_KEY in wrong and torch.allclose(got[BUGGY_KEY], variants["undone"][BUGGY_KEY],
                                                                   rtol=1e-9, atol=1e-12)
    for key in ("b2", "W2", "beta", "gamma", BUGGY_KEY):  # from the loss down: the first wrong one leads
        if key not in wrong:
            continue
        symptoms = [CE_NOT_DIVIDED.looks_like(variants["undivided"][key])]
        if key == BUGGY_KEY:
            symptoms += [BUG_LEFT_IN.looks_like(given[key]), N_MINUS_1_IN_BACKWARD.looks_like(variants["both"][key]),
                         BUG_FACTOR_UNDONE.looks_like(variants["undone"][key])]
        else:  # the given backward has this one right: the answer changed a stage that needed no change
            symptoms.append(RIGHT_STAGE_CHANGED.when(lambda received, right=expected[key]: not torch.allclose(
                received, right, rtol=1e-6, atol=1e-8)))
        expect_close(got[key], expected[key], fd=fds[key], what=f"{what}: d loss / d {key}", symptoms=symptoms)


def _expect_named(wrong_gradient) -> None:
    """WRONG_GRADIENT is written and names one of the five keys (which one is checked after the cases)."""
    __tracebackhide__ = True
    if wrong_gradient is None:
        raise NotWritten("Not written yet: WRONG_GRADIENT is still None. Set it, in the cell above mlp_gradients, to "
                         "the key of the parameter whose gradient the given backward gets wrong.")
    if not isinstance(wrong_gradient, str) or wrong_gradient not in DIGITS_KEYS:
        raise GradingFailure(f"WRONG_GRADIENT is {wrong_gradient!r:.60}; expected one of the keys "
                             f"{', '.join(repr(k) for k in DIGITS_KEYS)}.")


@check
def check_bug_hunt(mlp_gradients, wrong_gradient, w1_errors, dvar_factor, silu_backward,
                   grading_seed: int | None = None) -> None:
    """Part E: WRONG_GRADIENT names the parameter whose gradient the given backward gets wrong, and
    mlp_gradients(params, X, targets), the given backward with its bug fixed, returns every parameter's gradient of
    the mean cross-entropy of silu(batchnorm(X·W1; gamma, beta))·W2 + b2 (training mode, eps = BN_EPS), by hand (no
    autograd, no torch batch_norm), the inputs unchanged.

    Domain (the part's text): X float64 (N, D) with N >= 2, targets int64 (N,) in [0, C); params W1 (D, H),
    gamma (H,), beta (H,), W2 (H, C), b2 (C,) float64, H >= 1, C >= 2, any values. Corners pinned at every seed: a
    batch of 2 (where N − 1 and N differ most); one hidden unit; a largest logit of LARGE_LOGIT (a naive softmax
    overflows); a batch of TRY_IT_BATCH, the try-it cell's size (a fix tuned on it passes there and fails elsewhere,
    which names the mistake). Contracts checked: a dict with exactly the five keys, each a plain tensor of its
    parameter's shape; checked against autograd and central differences in float64; no autograd (Route); no torch
    batch normalisation; params, X and targets unchanged; WRONG_GRADIENT one of the five keys, the wrong one;
    ``w1_errors(params, X, targets, sizes)`` returns, for each n of sizes, the given backward's relative W1 error on
    the first n examples, within ERROR_RTOL of :func:`measure_w1_errors`: on the notebook's case in the visible test,
    on two fresh draws in the hidden one (another start seed and hidden width, training digits in a random order, the
    notebook's sizes, then five drawn from 2 to 96), so numbers typed in pass the first and fail the second;
    ``dvar_factor(n)``, the given backward's dvar over the right one as a formula in n (eps neglected), within
    DVAR_RTOL of :func:`dvar_ratio` at DVAR_SIZES (visible) or at 2 and four sizes drawn up to DVAR_LARGEST (hidden).
    Before any of it, Part C.2's ``silu_backward``, which the given backward calls, must give SiLU's derivative on
    the network's range (values only), so that a C.2 mistake is named as such and not as a wrong fix.
    """
    __tracebackhide__ = True
    _expect_named(wrong_gradient)
    if w1_errors is None:
        raise NotWritten("Not written yet: w1_errors is still None. Write it, in its cell below WRONG_GRADIENT: "
                         "your measurement of the given backward's W1 error at each batch size.")
    if dvar_factor is None:
        raise NotWritten("Not written yet: dvar_factor is still None. Write it, in its cell below WRONG_GRADIENT: "
                         "the given backward's dvar divided by the right one, as a formula in n.")
    _expect_silu(silu_backward)
    outcomes = []
    for params, X, targets, note in _bug_hunt_cases(grading_seed):
        outcome = CaseOutcome()
        with trial():
            _run_case(mlp_gradients, params, X, targets, note, outcome)
        outcomes.append((len(X), outcome))
    tuned = [n for n, outcome in outcomes if n == TRY_IT_BATCH and outcome.passed]
    others = [n for n, outcome in outcomes if not outcome.passed]
    if tuned and others and all(outcome.only_the_bug for _, outcome in outcomes if not outcome.passed):
        raise _proven(f"mlp_gradients agrees with autograd on the batch of {TRY_IT_BATCH} and not on the batches of "
                      f"{', '.join(map(str, sorted(set(others))))}: d loss / d {BUGGY_KEY} is off there.",
                      FIX_AT_ONE_BATCH_SIZE)
    if wrong_gradient != BUGGY_KEY:
        params, X, targets, _ = _bug_hunt_cases(None)[0]
        leaves = list(params.values())
        right = dict(zip(params, autograd_gradient(lambda *v: mlp_loss(dict(zip(params, v)), X, targets), *leaves)))
        gap = float((given_gradients(params, X, targets)[wrong_gradient] - right[wrong_gradient]).abs().max())
        raise _proven(f"WRONG_GRADIENT is {wrong_gradient!r}, but the given backward's d loss / d {wrong_gradient} "
                      f"agrees with autograd (largest difference {gap:.1g} on a batch of {len(X)}).",
                      WRONG_GRADIENT_NAMED)
    with trial():
        _check_dvar_factor(dvar_factor, _dvar_sizes(grading_seed))
    for params, X, targets, sizes, note in _w1_cases(grading_seed):
        with trial():
            _check_w1_case(w1_errors, params, X, targets, sizes, note)
