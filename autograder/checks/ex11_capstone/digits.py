"""Part F: ``train_digits`` trains the network of Part E from scratch on the handwritten digits, with global-norm
clipping and a gradcheck gate; graded by behaviour, never by the learner's own records.

The test hands ``train_digits`` gradient functions of its own (:class:`WatchedGradients`: right ones that watch every
parameter state the run reaches, subtly wrong ones the gate must stop) and clip thresholds of its own (none, tiny,
loose), and measures how far the parameters move.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...checking import (
    GradingFailure,
    NotWritten,
    Route,
    Routes,
    call_learner,
    check,
    expect_close,
    expect_tensor,
    trial,
)
from ...checking import proven_failure as _proven
from ...contracts import counting_saved
from ...datasets import digits_split
from ...seeding import generator
from ..cases import case_stream, randint
from ..shared import SQUARED_NORMS
from .misconceptions import (
    GATE_MISSED,
    GATE_OFF_SCHEDULE,
    GATE_SKIPS_PARAMETER,
    IGNORED_GRADIENTS,
    LOOSE_GATE,
    NO_GATE,
    NORMS_AFTER_CLIPPING,
    NOT_CLIPPED,
    PER_TENSOR_CLIPPING,
    RUNNING_NOT_TRACKED,
    SCALED_EVERY_STEP,
    TRAINED_WITH_AUTOGRAD,
)
from .network import DIGITS_KEYS, mlp_logits, network_gradients

Tensor = torch.Tensor

#: Held-out accuracy the trained digits network must reach, evaluated with its running statistics.
DIGITS_ACCURACY = 0.94
#: The relative error of the subtly wrong gradient functions the gradcheck gate must stop (0.1 %).
GATE_ERROR = 1e-3
#: The tiny clip threshold, as a fraction of the first step's gradient norm.
TINY_CLIP = 1e-3
#: With a tiny max_norm, the first three steps together may move the parameters at most this many times as far as
#: one clipped step (room for momentum and a warm-up; an unclipped step moves 1/TINY_CLIP = 1000 times as far).
TINY_CLIP_ROOM = 30


def split_seed(grading_seed: int | None) -> int:
    """The seed of the digits split the learner's own run trains on: 0 for the visible test (the split the notebook
    shows), else one drawn from the grading seed."""
    return 0 if grading_seed is None else randint(generator("11/digits", grading_seed), 1, 10**6)


def accuracy(params: dict[str, Tensor], running: dict[str, Tensor], X: Tensor, y: Tensor) -> float:
    """Fraction of examples whose largest logit is their label, the network evaluated with its running statistics
    (so that an example's prediction does not depend on the rest of the batch)."""
    with torch.no_grad():
        return float((mlp_logits(params, X, running).argmax(dim=1) == y).double().mean())


class _Stop(BaseException):
    """The test stops a training run here, having seen what it needed (never the learner's exception)."""


def _same(a: dict[str, Tensor], b: dict[str, Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in DIGITS_KEYS)


class WatchedGradients:
    """The gradient function a test hands to train_digits: the course's hand-derived gradients (no autograd), wrong
    by a factor (1 + ``error``) on ``wrong_key`` from parameter state ``wrong_from`` on, and watching the run:
    ``states`` are the distinct parameter states it was called on, in order (state t: the parameters of step t),
    ``calls[t]`` the gradients it returned on state t. It stops the run (:class:`_Stop`) when it first sees state
    ``stop_at``."""

    def __init__(self, wrong_key: str | None = None, error: float = 0.0, wrong_from: int = 0,
                 stop_at: int | None = None):
        self.wrong_key, self.error, self.wrong_from, self.stop_at = wrong_key, error, wrong_from, stop_at
        self.states: list[dict[str, Tensor]] = []
        self.calls: list[list[dict[str, Tensor]]] = []
        self.losses: list[list[float]] = []  # losses[t]: the training loss of each call's batch at state t
        self.first_inputs: list[tuple[Tensor, Tensor]] = []  # (X, targets) of every call on state 0
        self.problem: str | None = None

    def __repr__(self) -> str:
        return "gradients (the test's)"

    def __call__(self, params, X, targets):
        if type(params) is not dict or not set(DIGITS_KEYS) <= set(params) or not all(
                isinstance(params[k], torch.Tensor) for k in DIGITS_KEYS):
            self.problem = f"gradients was called with params = {params!r:.80}; expected the dict of the five tensors"
            raise TypeError(self.problem)
        if not isinstance(X, torch.Tensor) or not isinstance(targets, torch.Tensor) or X.dim() != 2 or len(X) < 2:
            self.problem = (f"gradients was called with X of shape {tuple(getattr(X, 'shape', ()))}; expected a "
                            "batch of at least 2 rows of the training set and their targets")
            raise TypeError(self.problem)
        state = {k: params[k].detach().to(torch.float64).clone() for k in DIGITS_KEYS}
        if not self.states or not _same(state, self.states[-1]):
            self.states.append(state)
            self.calls.append([])
            self.losses.append([])
            if self.stop_at is not None and len(self.states) - 1 >= self.stop_at:
                raise _Stop()
        if len(self.states) == 1:
            self.first_inputs.append((X.detach().clone(), targets.detach().clone()))
        X = X.detach().to(torch.float64)
        grads, loss = network_gradients(state, X, targets, with_loss=True)
        self.losses[-1].append(loss)
        if self.wrong_key is not None and len(self.states) - 1 >= self.wrong_from:
            grads[self.wrong_key] = grads[self.wrong_key] * (1 + self.error)
        self.calls[-1].append(grads)
        return {k: v.clone() for k, v in grads.items()}

    @property
    def step(self) -> int:
        """The last state seen (-1 before any call)."""
        return len(self.states) - 1


class Ending(enum.Enum):
    """How one run of the learner's train_digits ended."""

    STOPPED = "stopped by the test"  # having seen what it needed (WatchedGradients.stop_at)
    RAISED = "raised"  # train_digits raised: Run.error says what
    RETURNED = "returned"  # Run.answer is what it returned


@dataclass(frozen=True)
class Run:
    """One run of the learner's train_digits."""

    ending: Ending
    answer: Any = None
    error: str = ""


@dataclass
class Trainer:
    """The runs of the learner's train_digits that one check makes. Before each run the global random number
    generators are seeded from this trainer's own count of runs, a different seed every run, so that a loop drawing
    from them (instead of a torch.Generator of its own, as the part asks) starts or batches differently from one run
    to the next (:func:`_expect_deterministic`), while a check graded twice sees the same runs."""

    train_digits: Callable
    runs: int = 0

    def run(self, X: Tensor, y: Tensor, gradients: WatchedGradients, max_norm: float, gate_every: int,
            routes: Routes | None = None, saves: list | None = None) -> Run:
        """Run train_digits once on the test's ``gradients`` (``routes``: what it used; ``saves``: the tensors
        autograd saved for a backward pass meanwhile, :func:`~autograder.contracts.counting_saved`)."""
        __tracebackhide__ = True
        what = f"train_digits(X_train, y_train, gradients, max_norm={max_norm:g}, gate_every={gate_every})"
        self.runs += 1
        torch.manual_seed(1000 + self.runs)
        random.seed(1000 + self.runs)
        np.random.seed(1000 + self.runs)
        function = self.train_digits if saves is None else counting_saved(self.train_digits, saves)
        try:
            answer = call_learner(function, X, y, gradients, max_norm, gate_every, what=what, routes=routes,
                                  forbid=[Route.OPTIMIZER, Route.CLIPPING])
        except _Stop:
            return Run(Ending.STOPPED)
        except GradingFailure as failure:
            if gradients.problem:
                raise GradingFailure(f"{what}: {gradients.problem}.") from None
            if failure.proven is not None or isinstance(failure, NotWritten):
                raise
            return Run(Ending.RAISED, error=failure.message)
        return Run(Ending.RETURNED, answer)


def _expect_deterministic(run: WatchedGradients, base: WatchedGradients, what: str) -> None:
    """The run started from the parameters of ``base`` and called gradients on the same examples on step 0 (both with
    the same arguments, the global random number generators seeded differently)."""
    __tracebackhide__ = True
    same_start = bool(run.states) and _same(run.states[0], base.states[0])
    same_batches = len(run.first_inputs) == len(base.first_inputs) and all(
        a.shape == c.shape and torch.equal(a, c) and torch.equal(b, d)
        for (a, b), (c, d) in zip(run.first_inputs, base.first_inputs))
    if not (same_start and same_batches):
        raise GradingFailure(
            f"{what}: two runs with the same arguments "
            f"{'took different examples on step 0' if same_start else 'started from different parameters'} (the "
            "test seeds torch's and Python's global random number generators differently before each run): "
            "train_digits must be deterministic on its own. Which generator drew your starting parameters and your "
            "batches, and who seeded it?")


def _floats(value: Any, count: int) -> bool:
    return type(value) is list and len(value) == count and all(type(v) is float for v in value)


def _expect_trained(answer: Any, what: str, hidden: int | None = None) -> tuple[dict, dict, dict]:
    """(params, running, history) in the stated form."""
    __tracebackhide__ = True
    if type(answer) not in (tuple, list) or len(answer) != 3:
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected (params, running, history).")
    params, running, history = answer
    if type(params) is not dict or set(params) != set(DIGITS_KEYS):
        raise GradingFailure(f"{what}: params must be a dict with the keys {', '.join(DIGITS_KEYS)}.")
    if not isinstance(params["gamma"], torch.Tensor) or params["gamma"].dim() != 1:
        raise GradingFailure(f"{what}: params['gamma'] must be a tensor of shape (H,), one entry per hidden unit; got "
                             f"{params['gamma']!r:.60}.")
    width = tuple(params["gamma"].shape)
    shapes = {"W1": (64, *width), "gamma": width, "beta": width, "W2": (*width, 10), "b2": (10,)}
    for key in DIGITS_KEYS:
        expect_tensor(params[key], f"{what}: params[{key!r}]", shapes[key])
    if type(running) is not dict or set(running) != {"mean", "var"}:
        raise GradingFailure(f"{what}: running must be a dict with the keys 'mean' and 'var' (the BatchNorm's "
                             "running statistics).")
    for key in ("mean", "var"):
        expect_tensor(running[key], f"{what}: running[{key!r}]", width)
        if running[key].grad_fn is not None:  # updated from batch statistics that autograd recorded, every step
            raise GradingFailure(
                f"{what}: running[{key!r}] carries a graph (grad_fn {type(running[key].grad_fn).__name__}): the "
                "training steps ran with autograd recording, through every step back to the first. The part keeps "
                "autograd to the gate: train on tensors that do not require grad (or under torch.no_grad()).")
    if type(history) is not dict or set(history) != {"loss", "grad_norms"}:
        raise GradingFailure(f"{what}: history must be a dict with the keys 'loss' and 'grad_norms'; got "
                             f"{history!r:.80}.")
    steps = len(history["loss"]) if type(history["loss"]) is list else 0
    if not steps or not _floats(history["loss"], steps):
        raise GradingFailure(f"{what}: history['loss'] must be a non-empty list of Python floats (loss.item()), one "
                             "a step.")
    norms = history["grad_norms"]
    if type(norms) is not dict or set(norms) != set(DIGITS_KEYS) or not all(_floats(norms[k], steps)
                                                                           for k in DIGITS_KEYS):
        raise GradingFailure(f"{what}: history['grad_norms'] must map each of {', '.join(DIGITS_KEYS)} to a list of "
                             f"Python floats, one a step ({steps} steps).")
    return ({k: params[k].detach().to(torch.float64) for k in DIGITS_KEYS},
            {k: running[k].detach().to(torch.float64) for k in running}, history)


def _expect_truthful_norms(history: dict, gradients: WatchedGradients, max_norm: float, what: str) -> None:
    """Each recorded norm is the norm of the gradients one call returned on that step's parameters, and each recorded
    loss the loss of one such call's batch at those parameters (before the update, as the part states)."""
    __tracebackhide__ = True
    for t in range(len(history["loss"])):
        recorded, actual = history["loss"][t], gradients.losses[t]
        if actual and not any(math.isclose(recorded, a, rel_tol=1e-6, abs_tol=1e-12) for a in actual):
            raise GradingFailure(
                f"{what}: history['loss'][{t}] is {recorded:.6g}, but the loss of step {t}'s batch at the parameters "
                f"gradients saw on that step (before the update) is {', '.join(f'{a:.6g}' for a in actual)}.")
        for key in DIGITS_KEYS:
            recorded = history["grad_norms"][key][t]
            actual = [float(call[key].norm()) for call in gradients.calls[t]]
            if any(math.isclose(recorded, a, rel_tol=1e-6, abs_tol=1e-12) for a in actual):
                continue
            totals = [math.sqrt(sum(float(call[k].norm()) ** 2 for k in DIGITS_KEYS)) for call in gradients.calls[t]]
            clipped = [a * min(1.0, max_norm / total) for a, total in zip(actual, totals) if total > 0]
            message = (f"{what}: history['grad_norms'][{key!r}][{t}] is {recorded:.6g}, but gradients returned "
                       f"{key} gradients of norm {', '.join(f'{a:.6g}' for a in actual)} on step {t}'s parameters.")
            if any(math.isclose(recorded, c, rel_tol=1e-6) for c in clipped) and not any(
                    math.isclose(c, a, rel_tol=1e-6) for c, a in zip(clipped, actual)):
                raise _proven(message, NORMS_AFTER_CLIPPING)
            raise GradingFailure(message)


def _run_accuracy(trainer: Trainer, data_seed: int, max_norm: float, gate_every: int) -> bool:
    """The learner's own run (MAX_NORM, GATE_EVERY, right gradients) reaches DIGITS_ACCURACY; whether clipping acted
    on one of its steps (then its recorded norms, checked here, tell norms taken before clipping from after)."""
    __tracebackhide__ = True
    X_train, y_train, X_test, y_test = digits_split(data_seed)
    what = (f"train_digits(X_train, y_train, gradients, MAX_NORM={max_norm:g}, GATE_EVERY={gate_every}) on a split "
            f"of the digits drawn with seed {data_seed}")
    gradients = WatchedGradients()
    run = trainer.run(X_train, y_train, gradients, max_norm, gate_every)
    if run.ending is Ending.RAISED:
        raise GradingFailure(f"{what}, with right gradients, raised: {run.error}")
    params, running, history = _expect_trained(run.answer, what)
    steps = len(history["loss"])
    if gradients.step + 1 < steps:
        raise _proven(f"{what} took {steps} steps (history['loss']) but called gradients on only "
                      f"{gradients.step + 1} parameter state(s).", IGNORED_GRADIENTS)
    if gradients.step + 1 > steps + 1:
        raise GradingFailure(f"{what} called gradients on {gradients.step + 1} parameter states but history['loss'] "
                             f"has {steps} losses: one loss a step.")
    _expect_truthful_norms(history, gradients, max_norm, what)
    clipped = any(calls and min(float(_flat(call).norm()) for call in calls) > max_norm * (1 + 1e-6)
                  for calls in gradients.calls[:steps])
    held_out = accuracy(params, running, X_test, y_test)
    if held_out >= DIGITS_ACCURACY:
        return clipped
    message = (f"{what}: held-out accuracy {held_out:.1%} on {len(y_test)} digits, evaluated with your running "
               f"statistics; the part asks for at least {DIGITS_ACCURACY:.0%}. Loss went from "
               f"{history['loss'][0]:.4g} to {history['loss'][-1]:.4g} in {steps} steps.")
    untouched = bool((running["mean"] == 0).all() and (running["var"] == 1).all())
    with_batch = accuracy(params, {"mean": (X_test @ params["W1"]).mean(0),
                                   "var": (X_test @ params["W1"]).var(0, unbiased=False)}, X_test, y_test)
    message += f" With the test set's own batch statistics it would reach {with_batch:.1%}."
    if untouched and with_batch >= DIGITS_ACCURACY:
        raise _proven(message, RUNNING_NOT_TRACKED)
    raise GradingFailure(message)


def _flat(state: dict[str, Tensor]) -> Tensor:
    return torch.cat([state[k].reshape(-1) for k in DIGITS_KEYS])


def _pieces(vector: Tensor, like: dict[str, Tensor]) -> dict[str, Tensor]:
    return dict(zip(DIGITS_KEYS, vector.split([like[k].numel() for k in DIGITS_KEYS])))


def _first_update(gradients: WatchedGradients, what: str) -> tuple[Tensor, Tensor]:
    """(θ1 − θ0, g): the first update as one vector, and the gradients (one call on state 0) it was taken against."""
    __tracebackhide__ = True
    delta = _flat(gradients.states[1]) - _flat(gradients.states[0])
    if not torch.isfinite(delta).all():
        raise _proven(f"{what}: without clipping (max_norm = inf), the first update θ1 − θ0 is not finite "
                      f"({int((~torch.isfinite(delta)).sum())} of {delta.numel()} entries inf or nan): the scale was "
                      "max_norm / norm = inf; it must be capped at 1, min(1, max_norm / norm).", SCALED_EVERY_STEP)
    for call in gradients.calls[0]:
        g = _flat(call)
        cosine = float(-(delta @ g) / (delta.norm() * g.norm() + 1e-300))
        if cosine > 1 - 1e-9:
            return delta, g
    raise GradingFailure(f"{what}: without clipping (max_norm = inf), the first update θ1 − θ0 is not a step "
                         "against the gradients of any call of gradients on step 0's parameters: the part asks for "
                         "a plain gradient step, params − lr · clipped gradient, so that the clipping can be seen.")


def _clipping_cases(trainer: Trainer, X: Tensor, y: Tensor, base: WatchedGradients, norms_seen: bool) -> None:
    """Clipping by behaviour: against the first update without clipping (``base``), two tiny max_norms scale it
    exactly, and keep the next steps short too; two loose ones leave it as it was. Unless the learner's own run
    clipped (``norms_seen``: its recorded norms were checked where clipping acted), the run at the larger tiny
    threshold goes to its end: clipping acts on every step of it, so its recorded norms must be the unclipped ones."""
    __tracebackhide__ = True
    what = "train_digits(X_train, y_train, gradients, max_norm, gate_every=10**9)"
    delta, g = _first_update(base, what)
    like = base.states[0]
    norms = {k: float(v.norm()) for k, v in _pieces(g, like).items()}
    total = float(g.norm())
    for factor in (TINY_CLIP, 10 * TINY_CLIP, 2.0, 4.0):
        max_norm = factor * total
        label = "a tiny" if factor < 1 else "a loose"
        with trial():
            full = factor == 10 * TINY_CLIP and not norms_seen
            watched = WatchedGradients(stop_at=None if full else 4 if factor < 1 else 1)
            run = trainer.run(X, y, watched, max_norm, 10**9)
            if run.ending is Ending.RAISED:
                raise GradingFailure(f"{what} with max_norm = {max_norm:.4g} raised: {run.error}")
            _expect_deterministic(watched, base, what)
            if len(watched.states) < 2:
                raise GradingFailure(f"{what} with max_norm = {max_norm:.4g} returned after one step: train_digits "
                                     "must take more than one step.")
            step = _flat(watched.states[1]) - _flat(watched.states[0])
            expected = min(1.0, factor) * delta
            per_tensor = torch.cat([(piece * min(1.0, max_norm / max(norms[k], 1e-300))).reshape(-1)
                                    for k, piece in _pieces(delta, like).items()])
            norms_of = lambda v: ", ".join(f"{k} {float(piece.norm()):.4g}"  # noqa: E731
                                           for k, piece in _pieces(v, like).items())
            expect_close(step, expected, rtol=1e-6, atol=1e-12, source="expected",
                         what=f"{what} with {label} max_norm = {max_norm:.4g} (the first step's global gradient norm "
                              f"is {total:.4g}): the first update θ1 − θ0 (all parameters as one vector)",
                         extra=f"  norms of your update:      {norms_of(step)}\n"
                               f"  norms of the expected one: {norms_of(expected)}\n"
                               f"  ... and without clipping:  {norms_of(delta)}",
                         symptoms=[NOT_CLIPPED.looks_like(delta), PER_TENSOR_CLIPPING.looks_like(per_tensor),
                                   SQUARED_NORMS.looks_like(delta * min(1.0, max_norm / total**2)),
                                   SCALED_EVERY_STEP.looks_like(delta * factor)])
            if factor < 1 and len(watched.states) > 4:
                moved = float((_flat(watched.states[3]) - _flat(watched.states[0])).norm())
                bound = TINY_CLIP_ROOM * float(expected.norm())
                if moved > bound:
                    raise _proven(f"{what} with {label} max_norm = {max_norm:.4g}: the first three steps moved the "
                                  f"parameters by {moved:.4g} together, more than {TINY_CLIP_ROOM} clipped steps "
                                  f"({bound:.4g}): only the first update was clipped.", NOT_CLIPPED)
            if full:
                if run.ending is not Ending.RETURNED:
                    raise GradingFailure(f"{what} with max_norm = {max_norm:.4g} did not return.")
                _, _, history = _expect_trained(run.answer, f"{what} with max_norm = {max_norm:.4g}")
                if watched.step + 1 < len(history["loss"]):
                    raise _proven(f"{what} took {len(history['loss'])} steps (history['loss']) but called gradients "
                                  f"on only {watched.step + 1} parameter state(s).", IGNORED_GRADIENTS)
                _expect_truthful_norms(history, watched, max_norm, f"{what} with {label} max_norm = {max_norm:.4g} "
                                       "(clipping acts on every step)")


def _stops_on_step_0(trainer: Trainer, X: Tensor, y: Tensor, key: str, every: int) -> bool:
    """Whether the gate stops, on step 0, a run whose ``key`` gradient is 100 % off (every other one right)."""
    __tracebackhide__ = True
    wrong = WatchedGradients(wrong_key=key, error=1.0, stop_at=every + 1)
    return trainer.run(X, y, wrong, math.inf, every).ending is Ending.RAISED and wrong.step == 0


def _gate_cases(trainer: Trainer, X: Tensor, y: Tensor, every: int, wrong_from: int) -> None:
    """The gate by behaviour: a gradient function GATE_ERROR off on one parameter (each in turn) must stop the run on
    step 0, as must one 100 % off (which tells a loose gate from none); one that goes wrong on step ``wrong_from``
    must stop it exactly at the next gate, never before."""
    __tracebackhide__ = True
    what = f"train_digits(X_train, y_train, gradients, max_norm=inf, gate_every={every})"
    endings = {}
    for key, error in [("W2", 1.0)] + [(k, GATE_ERROR) for k in DIGITS_KEYS]:
        with trial():
            wrong = WatchedGradients(wrong_key=key, error=error, stop_at=every + 1)
            ending = trainer.run(X, y, wrong, math.inf, every).ending
            endings[key, error] = ending
            text = (f"{what}: gradients returned a {key} gradient {error:.1%} off (every other gradient right) "
                    "from step 0 on")
            if ending is Ending.RAISED and wrong.step == 0:
                continue
            if ending is Ending.RAISED:
                raise _proven(f"{text}; the gate stopped the run on step {wrong.step}, not on step 0.", GATE_MISSED)
            if ending is Ending.RETURNED:
                raise GradingFailure(f"{text}, and the run returned after {wrong.step + 1} step(s) without raising.")
            if error >= 1:
                caught = [k for k in DIGITS_KEYS if k != key and _stops_on_step_0(trainer, X, y, k, every)]
                if caught:
                    missed = [k for k in DIGITS_KEYS if k not in caught]
                    raise _proven(f"{text}, and the run went on to step {every + 1}: the gate checks only some "
                                  f"parameters: it stopped a {' or '.join(caught)} gradient 100 % off on step 0, but "
                                  f"never compares d loss / d {', '.join(missed)} with autograd.",
                                  GATE_SKIPS_PARAMETER)
                raise _proven(f"{text}, and the run went on to step {every + 1}; so did runs with the gradient of "
                              "W1, gamma, beta or b2 100 % off: no gate stopped it.", NO_GATE)
            if endings.get(("W2", 1.0)) is Ending.RAISED:
                far = WatchedGradients(wrong_key=key, error=1.0, stop_at=every + 1)
                if trainer.run(X, y, far, math.inf, every).ending is Ending.STOPPED:
                    raise _proven(f"{text}, and the run went on to step {every + 1}; so did one with a {key} gradient "
                                  f"100 % off: your gate never compares d loss / d {key} with autograd (it stopped a "
                                  "W2 gradient 100 % off on step 0).", GATE_SKIPS_PARAMETER)
                raise _proven(f"{text}, and the run went on to step {every + 1}; the gate stopped a W2 gradient "
                              f"100 % off on step 0, and a {key} gradient 100 % off too.", LOOSE_GATE)
            raise GradingFailure(f"{text}, and the run went on to step {every + 1}: the gate did not stop it.")
    gate = -(-wrong_from // every) * every  # the first gate at or after wrong_from
    with trial():
        late = WatchedGradients(wrong_key="W1", error=GATE_ERROR, wrong_from=wrong_from, stop_at=gate + 1)
        run = trainer.run(X, y, late, math.inf, every)
        text = (f"{what}: gradients went {GATE_ERROR:.1%} wrong on W1 from step {wrong_from} on, so the gate should "
                f"stop the run on step {gate}'s parameters")
        if run.ending is Ending.STOPPED:
            raise _proven(f"{text}, but it went on to step {gate + 1}.", GATE_MISSED)
        if run.ending is Ending.RETURNED:
            raise GradingFailure(f"{text}, but it returned after {late.step + 1} steps.")
        if late.step < wrong_from:
            raise GradingFailure(f"{text}, but it raised on step {late.step}, while the gradients were still right: "
                                 f"{run.error}")
        if late.step != gate:
            raise _proven(f"{text}, but it stopped on step {late.step}.", GATE_OFF_SCHEDULE)


def _autograd_cases(trainer: Trainer, X: Tensor, y: Tensor) -> None:
    """Autograd only in the gate: with gate_every = 10**9 (a gate on step 0 only), steps 2 to 4 run no backward and
    record no graph (no tensor saved for backward: parameters that require grad outside the gate record one)."""
    __tracebackhide__ = True
    what = "train_digits(X_train, y_train, gradients, max_norm=inf, gate_every=10**9)"
    runs, saved = {}, {}
    for stop in (2, 5):
        watched, routes, saves = WatchedGradients(stop_at=stop), Routes(dual_numbers=False), []
        run = trainer.run(X, y, watched, math.inf, 10**9, routes, saves)
        saved[stop] = len(saves)
        if run.ending is Ending.RAISED:
            raise GradingFailure(f"{what} with right gradients raised: {run.error}")
        if run.ending is Ending.RETURNED:
            raise _proven(f"{what} returned having called gradients on {watched.step + 1} parameter state(s): every "
                          "step must take its gradients from gradients.", IGNORED_GRADIENTS)
        runs[stop] = routes.backward_runs
    if runs[5] > runs[2]:
        message = f"{what}: steps 2 to 4 (no gate runs there) ran {runs[5] - runs[2]} autograd backward passes"
        if sum(len(watched.calls[t]) for t in (2, 3, 4)) > 3:  # a second call of gradients beside each step's
            raise _proven(f"{message}, and called gradients twice on each: the gate ran on every step.",
                          GATE_OFF_SCHEDULE)
        raise _proven(message + ".", TRAINED_WITH_AUTOGRAD)
    if saved[5] > saved[2]:
        raise GradingFailure(f"{what}: steps 2 to 4 (no gate runs there) recorded a graph: autograd saved "
                             f"{saved[5] - saved[2]} tensors for a backward pass that never comes. The part keeps "
                             "autograd to the gate: outside it, train on tensors that do not require grad (or under "
                             "torch.no_grad()); a recorded step costs memory and time for nothing.")


def _expect_choices(max_norm: Any, gate_every: Any) -> None:
    __tracebackhide__ = True
    if max_norm is None or gate_every is None:
        raise NotWritten("Not written yet: choose MAX_NORM and GATE_EVERY in the cell under train_digits, each "
                             "with a comment saying why.")
    if type(max_norm) not in (int, float) or not max_norm > 0 or not math.isfinite(max_norm):
        raise GradingFailure(f"MAX_NORM must be a finite positive number (your clip threshold; math.inf, no "
                             f"clipping at all, is for a diagnostic run); got {max_norm!r:.60}.")
    if type(gate_every) is not int or gate_every < 1:
        raise GradingFailure(f"GATE_EVERY must be a positive integer (how often the gate runs); got "
                             f"{gate_every!r:.60}.")


@check
def check_train_digits(train_digits, max_norm, gate_every, grading_seed: int | None = None) -> None:
    """Part F: train_digits(X_train, y_train, gradients, max_norm, gate_every) trains the network of Part E from
    scratch and returns (params, running, history); graded by behaviour, never by its own records.

    Domain (the part's text): X_train float64 (N, 64) pixels in [0, 1], y_train int64 labels 0-9 (a random 80 %
    of the digits, or its first 256 examples); gradients a function like mlp_gradients; max_norm > 0 (inf: no
    clipping); gate_every >= 1. Every case runs at every seed; the seed draws the split, the gate period (2-5) and
    the step at which a gradient function goes wrong.
    Behaviour checked: with the learner's MAX_NORM and GATE_EVERY and right gradients, held-out accuracy with the
    returned running statistics >= DIGITS_ACCURACY, every step calls gradients (the parameter states it sees), the
    recorded gradient norms are those gradients returned and the recorded losses those of each step's batch at the
    parameters gradients saw (before the update); the running statistics carry no graph; with max_norm = inf the
    first update is −lr·g, with a tiny max_norm (TINY_CLIP and 10·TINY_CLIP of the first norm) exactly that fraction
    of it (and three steps move at most TINY_CLIP_ROOM clipped steps), with a loose one (2 and 4 times the norm)
    unchanged; a gradient function GATE_ERROR off on any one parameter (or 100 % off) stops the run on step 0; one
    that goes wrong later stops it exactly on the next gate (a gate that lets one parameter's gradient 100 % off
    through is named as skipping it, and so is one that lets W2 100 % off through but stops another parameter's;
    "no gate" only when none of the five 100 % off is stopped); with a gate on step 0 only, steps 2-4 run no
    autograd (no backward, and no tensor saved for one). Unless the learner's own run clipped (so that its recorded
    norms were checked where clipping acted), the run at 10·TINY_CLIP goes to its end and its recorded norms must be
    the unclipped ones.
    Contracts: no torch.optim, no torch clipping (Routes); deterministic on its own generator (the global torch,
    Python and numpy generators are seeded differently before every run, and every run must start from the same
    parameters and call gradients on the same examples on step 0); X_train, y_train unchanged;
    MAX_NORM finite and positive.
    """
    __tracebackhide__ = True
    _expect_choices(max_norm, gate_every)
    trainer = Trainer(train_digits)
    data_seed = split_seed(grading_seed)
    gen = case_stream("11/digits/gate", grading_seed)
    every = 3 if grading_seed is None else randint(gen, 2, 5)
    wrong_from = every + 1 if grading_seed is None else randint(gen, every + 1, 2 * every - 1)
    clipped = False
    with trial():
        clipped = _run_accuracy(trainer, data_seed, float(max_norm), gate_every)
    X, y, _, _ = digits_split(data_seed)
    X, y = X[:256], y[:256]  # short runs from here on: the test stops each one once it has seen enough
    base = WatchedGradients(stop_at=1)
    run = trainer.run(X, y, base, math.inf, 10**9)
    if run.ending is not Ending.STOPPED:
        ended = f"raised: {run.error}" if run.ending is Ending.RAISED else "returned after one step"
        raise GradingFailure("train_digits(X_train, y_train, gradients, max_norm=inf, gate_every=10**9) with right "
                             f"gradients {ended}.")
    with trial():
        _clipping_cases(trainer, X, y, base, clipped)
    with trial():
        _autograd_cases(trainer, X, y)
    _gate_cases(trainer, X, y, every, wrong_from)
