"""What Parts A–C share: a case is one call of a learner's hand-derived backward function and what each gradient it
returns must be (by autograd and by central differences, in float64), with the known mistakes that case can
recognise; :func:`run_case` calls the function with autograd forbidden, on the caller's own tensors, and compares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ...checking import (
    GradingFailure,
    Misconception,
    Route,
    Symptom,
    as_answer,
    call_learner,
    expect_close,
    expect_no_alias,
    fmt,
    proven_failure,
)
from ...oracles import autograd_gradient, central_difference
from .misconceptions import FLOAT32_RESULT, GLOBAL_SHIFT, NAIVE_SOFTMAX

Tensor = torch.Tensor

#: The default tolerance of Parts A–C: float64 results of a few sums and products agree with autograd to about 1e-15;
#: a result computed in float32 (about 6e-8 relative) and cast back fails.
RTOL, ATOL = 1e-10, 1e-12


@dataclass(frozen=True)
class Case:
    """One call: ``args`` (tensors, by name) and ``options`` (keyword arguments) as the learner's function receives
    them; per returned gradient, whose shape it has, its value by autograd and by central differences, and the
    known mistakes with what each gives here."""

    call: str
    args: dict[str, Tensor]
    grads: dict[str, str]
    expected: tuple[Tensor, ...]
    fd: tuple[Tensor, ...]
    symptoms: tuple[list[Symptom], ...]
    options: dict = field(default_factory=dict)
    note: str = ""
    rtol: float = RTOL
    atol: float = ATOL


def shape_of(t: Tensor) -> str:
    return str(tuple(t.shape)).replace(",)", ")")


def distinct(gen: torch.Generator, count: int, low: int = 2, high: int = 7) -> list[int]:
    """``count`` different sizes in [low, high], so that no two dimensions can be confused."""
    return (torch.randperm(high - low + 1, generator=gen)[:count] + low).tolist()


def make_case(name: str, args: dict[str, Tensor], grads: dict[str, str], loss: Callable, wrt: tuple[Tensor, ...],
              symptoms: tuple[list[Symptom], ...], *, options: dict | None = None, note: str = "",
              rtol: float = RTOL, atol: float = ATOL) -> Case:
    """A case whose expected gradients are those of the scalar ``loss(*wrt)``, by autograd and central differences."""
    options = dict(options or {})
    shapes = ", ".join(f"{key} {shape_of(value)}" for key, value in args.items())
    written = ", ".join([*args, *(f"{key}={value!r}" for key, value in options.items())])
    return Case(f"{name}({written}) with {shapes}", args, grads, autograd_gradient(loss, *wrt),
                central_difference(loss, *wrt), symptoms, options, note, rtol, atol)


def same_as(value: Tensor, rtol: float = 1e-4, atol: float = 1e-7) -> Callable[[Tensor], bool]:
    """A test for answers equal to ``value``, a mistake's result that may hold nan or inf: the same nan, +inf and −inf
    exactly where ``value`` has them, and close to it everywhere else."""
    bad = ~torch.isfinite(value)

    def kinds(t: Tensor) -> Tensor:
        return torch.nan_to_num(t, nan=2.0, posinf=1.0, neginf=-1.0) * ~torch.isfinite(t)

    def matches(answer: Tensor) -> bool:
        if answer.shape != value.shape or not torch.equal(~torch.isfinite(answer), bad) \
                or not torch.equal(kinds(answer), kinds(value)):
            return False
        return bool(torch.all(torch.abs(answer[~bad] - value[~bad]) <= atol + rtol * torch.abs(value[~bad])))

    return matches


def literal_symptoms(mistakes: list[tuple[Misconception, Tensor]], rtol: float = 1e-4,
                     atol: float = 1e-7) -> list[Symptom]:
    """A symptom per (mistake, the value it computes here), whether or not that value is finite. A non-finite value
    that another mistake's computation also gives names neither (finite ones:
    :func:`~autograder.misconceptions.armed` sees to it)."""
    symptoms = []
    for mistake, value in mistakes:
        if bool(torch.isfinite(value).all()):
            symptoms.append(mistake.looks_like(value, rtol=rtol, atol=atol))
            continue
        same = same_as(value, rtol, atol)
        if not any(other is not mistake and same(theirs) for other, theirs in mistakes):
            symptoms.append(mistake.when(same))
    return symptoms


def unstable_softmaxes(z: Tensor) -> list[tuple[Misconception, Tensor]]:
    """What the stability mistakes compute for softmax(z, dim=-1), in float64: no shift (as a ratio, and in log
    space), and one shift for the whole tensor."""
    e = torch.exp(z)
    g = torch.exp(z - z.max())
    return [(NAIVE_SOFTMAX, e / e.sum(dim=-1, keepdim=True)),
            (NAIVE_SOFTMAX, torch.exp(z - torch.log(e.sum(dim=-1, keepdim=True)))),
            (GLOBAL_SHIFT, g / g.sum(dim=-1, keepdim=True))]


def _unpack(answer, case: Case) -> tuple:
    names = tuple(case.grads)
    # Exactly a tuple or list: a subclass could run its own code (__iter__, __len__) outside call_learner.
    if type(answer) not in (tuple, list) or len(answer) != len(names):
        raise GradingFailure(f"{case.call} returned {answer!r:.80}; expected a tuple ({', '.join(names)}).")
    return tuple(answer)


def require_float64(received, what: str) -> None:
    """The text's dtype contract: every input is float64, and so is every tensor returned."""
    __tracebackhide__ = True
    if not isinstance(received, torch.Tensor) or received.dtype == torch.float64:
        return
    message = (f"{what} has dtype {str(received.dtype).replace('torch.', '')}; the inputs are float64 and the result "
               "must be float64 too.")
    if received.is_floating_point():
        raise proven_failure(message, FLOAT32_RESULT)
    raise GradingFailure(message)


def _expect_gradient(received, expected: Tensor, case: Case, *, what: str, shape_of_input: str, fd: Tensor,
                     symptoms: list[Symptom], extra: str) -> None:
    """expect_close, except that a gradient of the wrong shape is reported as such (and a known mistake with that
    shape is a suspect)."""
    __tracebackhide__ = True
    got = as_answer(received, what=what)
    require_float64(received, what)
    if got.shape != expected.shape:
        raise GradingFailure(f"{what} has shape {shape_of(got)}; expected {shape_of(expected)}, the shape of "
                             f"{shape_of_input}.\n{extra}",
                             suspects=tuple(s.misconception for s in symptoms if s.matches(got)))
    expect_close(got, expected, what=what, fd=fd, symptoms=symptoms, extra=extra, rtol=case.rtol, atol=case.atol)


def run_case(fn: Callable, case: Case) -> None:
    """Call the learner's function on one case, autograd forbidden, and compare every gradient it returns; its
    inputs must come back unchanged and the result must not alias them."""
    __tracebackhide__ = True
    answer = call_learner(fn, *case.args.values(), what=case.call, forbid=[Route.AUTOGRAD], **case.options)
    answers = (answer,) if len(case.grads) == 1 else _unpack(answer, case)
    extra = "  inputs:             " + ", ".join(f"{key} = {fmt(value)}" for key, value in case.args.items())
    extra += f"\n  here:               {case.note}" if case.note else ""
    for got, name, shape_of_input, expected, fd, symptoms in zip(answers, case.grads, case.grads.values(),
                                                                 case.expected, case.fd, case.symptoms):
        _expect_gradient(got, expected, case, what=f"{case.call}: {name}", shape_of_input=shape_of_input, fd=fd,
                         symptoms=symptoms, extra=extra)
    try:
        expect_no_alias(answer, case.args, what=case.call)  # right numbers, but in the caller's memory
    except GradingFailure as failure:
        # A suspect, not a proof: an answer whose numbers are wrong elsewhere can alias only where they happen to be
        # right; the mistake that explains most cases should be the one named.
        raise GradingFailure(failure.message, suspects=(failure.proven,) if failure.proven else ()) from None
