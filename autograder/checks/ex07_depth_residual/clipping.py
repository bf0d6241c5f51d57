"""Part B of exercise 07: clip_grad_norm(parameters, max_norm) from scratch, equal to
torch.nn.utils.clip_grad_norm_ on copies of the same parameters. Oracle: PyTorch's own function; the symptoms of the
catalogued mistakes are the gradients each mistake leaves."""

from __future__ import annotations

import math

import torch
from torch import nn

from ...checking import GradingFailure, Route, call_learner, check, expect_close, expect_no_alias, proven_failure, trial
from ...contracts import CHANGED_INPUT
from ...seeding import choice, generator, uniform
from ..cases import randint
from .misconceptions import (
    CLAMPED,
    CLIPPED_BELOW,
    GENERATOR_TWICE,
    NO_SQUARE_ROOT,
    NONE_FILLED,
    NONE_NOT_SKIPPED,
    NORM_AFTER,
    NOT_MODIFIED,
    PER_TENSOR,
    REPLACED_GRAD,
    ZERO_NORM,
)

EPS = 1e-6  # torch.nn.utils.clip_grad_norm_ divides by total_norm + 1e-6


def _parameters(grads: list[torch.Tensor | None]) -> list[nn.Parameter]:
    """Fresh float64 parameters whose .grad are copies of ``grads`` (None stays None)."""
    params = []
    for grad in grads:
        shape = (2,) if grad is None else grad.shape
        param = nn.Parameter(torch.linspace(-1.0, 1.0, math.prod(shape), dtype=torch.float64).reshape(shape))
        param.grad = None if grad is None else grad.clone()
        params.append(param)
    return params


def _scaled(grads: list[torch.Tensor], coefficients: list[float]) -> torch.Tensor:
    return torch.cat([(g * k).reshape(-1) for g, k in zip(grads, coefficients)])


def _clip_symptoms(grads: list[torch.Tensor], max_norm: float, generator_input: bool) -> list:
    """What the catalogued clipping mistakes produce for these gradients (None grads already dropped)."""
    norms = [float(g.norm()) for g in grads]
    total = math.sqrt(sum(n * n for n in norms))
    unchanged = GENERATOR_TWICE if generator_input else NOT_MODIFIED
    return [PER_TENSOR.looks_like(_scaled(grads, [min(1.0, max_norm / (n + EPS)) for n in norms])),
            NO_SQUARE_ROOT.looks_like(_scaled(grads, [min(1.0, max_norm / (total ** 2 + EPS))] * len(grads))),
            CLIPPED_BELOW.looks_like(_scaled(grads, [max_norm / (total + EPS)] * len(grads))),
            unchanged.looks_like(_scaled(grads, [1.0] * len(grads))),
            CLAMPED.looks_like(torch.cat([g.clamp(-max_norm, max_norm).reshape(-1) for g in grads]))]


def _random_grads(gen: torch.Generator, small: bool, ratio: tuple[float, float], max_norm: float) -> list:
    """Random float64 gradients whose global norm is max_norm times a factor drawn from ``ratio``."""
    count = randint(gen, 6, 10) if small else randint(gen, 2, 5)
    shapes = [choice(gen, [(2,), (3,)]) if small else choice(gen, [(3,), (2, 3), (4, 2), (5,)]) for _ in range(count)]
    grads = [torch.randn(shape, generator=gen, dtype=torch.float64) * float(uniform(gen, (), 0.2, 3.0))
             for shape in shapes]
    total = math.sqrt(sum(float(g.norm()) ** 2 for g in grads))
    return [g * (float(uniform(gen, (), *ratio)) * max_norm / total) for g in grads]


def _clip_corners():
    """The corners of the domain, run at every seed: a single parameter; 0-d gradients (shape ()) beside a matrix;
    every gradient zero (total norm 0: nothing changes, 0 is returned), also from a generator with a None among them;
    the total norm exactly equal to max_norm (PyTorch scales by 13 / (13 + 1e-6), within the tolerance of not
    scaling)."""
    def t(*values):
        return torch.tensor(values, dtype=torch.float64)
    lesson = [t(3.0, 4.0), t(12.0)]
    yield "a single parameter above max_norm", [t(-6.0, 8.0, 0.0)], 2.5, False
    yield "0-d gradients beside a matrix", [torch.tensor(-2.0, dtype=torch.float64), t(1.0, -3.0).reshape(1, 2),
                                            torch.tensor(0.5, dtype=torch.float64)], 1.0, False
    yield "every gradient zero", [torch.zeros(2, dtype=torch.float64), torch.zeros((), dtype=torch.float64)], 1.0, False
    yield "every gradient zero", [None, torch.zeros(3, dtype=torch.float64)], 0.5, True
    yield "the total norm exactly max_norm", lesson, 13.0, False


def _clip_cases(grading_seed: int | None):
    """(description, list of .grad tensors or None, max_norm, pass a generator?) for each case: the corners
    (:func:`_clip_corners`) first, at every seed, then the visible or drawn cases.

    Every mistake shows in at least two cases: two below max_norm (clipping anyway), two generators above it (a
    second loop sees nothing), two with a None gradient, the rest above max_norm.
    """
    yield from _clip_corners()
    if grading_seed is None:
        lesson = [torch.tensor([3.0, 4.0], dtype=torch.float64), torch.tensor([12.0], dtype=torch.float64)]
        small = [torch.tensor([0.6, 0.8], dtype=torch.float64) * k for k in (1.0, 2.0, 0.5, 1.5, 3.0, 0.25)]
        yield "the lesson's example", lesson, 1.0, False
        yield "the total norm below max_norm", lesson, 20.0, False
        yield "a .grad that is None", [lesson[0], None, lesson[1]], 5.0, False
        yield "many small tensors", small, 1.5, False
        yield "many small tensors", small, 2.0, True
        yield "a .grad that is None", [None, *lesson], 1.0, True
        yield "the total norm below max_norm", small, 5.0, False
        return
    gen = generator("07/clip_grad_norm", grading_seed)
    # (description, many small tensors?, total_norm / max_norm range, a None grad?, generator?)
    kinds = [("the total norm above max_norm", False, (2.0, 10.0), False, False),
             ("the total norm below max_norm", False, (0.2, 0.8), False, False),
             ("the total norm below max_norm", True, (0.2, 0.8), False, False),
             ("a .grad that is None", False, (2.0, 10.0), True, False),
             ("many small tensors", True, (2.0, 5.0), False, False),
             ("many small tensors", True, (1.5, 4.0), True, True),
             ("the total norm above max_norm", False, (1.5, 6.0), False, True)]
    for description, small, ratio, with_none, as_generator in kinds:
        max_norm = round(float(uniform(gen, (), 1.0, 5.0)), 3)
        grads = _random_grads(gen, small, ratio, max_norm)
        if with_none:
            grads.insert(randint(gen, 0, len(grads)), None)
        yield description, grads, max_norm, as_generator


def _describe_clip_case(description: str, grads: list, max_norm: float, as_generator: bool) -> str:
    shapes = ", ".join("None" if g is None else str(tuple(g.shape)) for g in grads)
    container = "a generator" if as_generator else "a list"
    return (f"clip_grad_norm(parameters, max_norm={max_norm:g}) with {description}: parameters = {container} of "
            f"{len(grads)} parameters whose .grad have shapes [{shapes}]")


def _expect_only_grads_scaled(params: list[nn.Parameter], before: list[dict], what: str) -> None:
    """The contract of Part B: the parameters are untouched; each .grad is the same tensor, scaled in place."""
    __tracebackhide__ = True
    for index, (param, state) in enumerate(zip(params, before)):
        changed = []
        if not torch.equal(param.detach(), state["values"]) or param._version != state["version"]:
            changed.append("its values (or it was changed in place)")
        if param.requires_grad != state["requires_grad"]:
            changed.append("its requires_grad")
        if changed:
            raise proven_failure(f"{what}: parameter {index} itself changed ({' and '.join(changed)}).",
                                 CHANGED_INPUT)
        if state["grad"] is None:
            if param.grad is not None:
                raise proven_failure(f"{what}: parameter {index} had .grad None and now has a .grad.", NONE_FILLED)
            continue
        if param.grad is None or param.grad.shape != state["grad_shape"]:
            raise proven_failure(f"{what}: parameter {index}'s .grad was removed or reshaped.", REPLACED_GRAD)
        if param.grad.untyped_storage().data_ptr() != state["grad"]:
            raise proven_failure(f"{what}: parameter {index}'s .grad is a new tensor, not the old one scaled in "
                                 "place.", REPLACED_GRAD)


def _run_clip_case(clip_grad_norm, description, grads, max_norm, as_generator) -> None:
    __tracebackhide__ = True
    what = _describe_clip_case(description, grads, max_norm, as_generator)
    reference, params = _parameters(grads), _parameters(grads)
    want_norm = torch.nn.utils.clip_grad_norm_(reference, max_norm)
    before = [{"values": p.detach().clone(), "version": p._version, "requires_grad": p.requires_grad,
               "grad": None if p.grad is None else p.grad.untyped_storage().data_ptr(),
               "grad_shape": None if p.grad is None else p.grad.shape} for p in params]
    argument = (p for p in params) if as_generator else params
    try:
        returned = call_learner(clip_grad_norm, argument, max_norm, what=what, forbid=[Route.CLIPPING],
                                may_change=["parameters"])
    except GradingFailure as failure:
        if failure.proven is None and None in grads and "NoneType" in failure.message:
            raise GradingFailure(failure.message, suspects=(NONE_NOT_SKIPPED,)) from None
        if failure.proven is None and float(want_norm) == 0.0 and "ZeroDivisionError" in failure.message:
            raise proven_failure(failure.message, ZERO_NORM) from None
        raise
    _expect_only_grads_scaled(params, before, what)
    present = [g for g in grads if g is not None]
    expect_close(torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None]),
                 torch.cat([p.grad.reshape(-1) for p in reference if p.grad is not None]),
                 what=f"{what}: the .grad values afterwards (all parameters, flattened in order)",
                 source="clip_grad_norm_", rtol=1e-5, atol=1e-10,
                 symptoms=_clip_symptoms(present, max_norm, as_generator))
    if not isinstance(returned, torch.Tensor):
        raise GradingFailure(f"{what} returned {type(returned).__name__} ({returned!r:.60}); the part asks for the "
                             "total norm as a 0-d tensor.")
    expect_no_alias(returned, {"parameters": params}, what=f"{what}: the returned norm")
    total = float(want_norm)
    expect_close(returned, want_norm, what=f"{what}: the returned total norm", source="clip_grad_norm_",
                 rtol=1e-5, atol=1e-10,
                 symptoms=[NO_SQUARE_ROOT.looks_like(total ** 2), NORM_AFTER.looks_like(min(total, max_norm))])


@check
def check_clip_grad_norm(clip_grad_norm, grading_seed: int | None = None) -> None:
    """Part B: clip_grad_norm(parameters, max_norm) does what torch.nn.utils.clip_grad_norm_ does, from scratch: it
    scales the .grad tensors in place, changes nothing else, and returns the norm before clipping as a 0-d tensor.

    Domain (the part's text): ``parameters`` a list or a generator of float64 parameters of any shape, 0-d included,
    at least one of which has a .grad (others may have None); gradients of any sign, all zero included;
    ``max_norm`` > 0, the total norm below, equal to or above it. Corners pinned at every seed: :func:`_clip_corners`.
    Contracts checked: no torch.nn.utils clipping (Route); each .grad the same tensor, scaled in place (its storage
    is compared, so `p.grad = ...` or `p.grad.data = ...` fails); a None .grad stays None; the parameters' values,
    versions and requires_grad unchanged; the norm returned is a 0-d tensor sharing no memory with any .grad.
    """
    __tracebackhide__ = True
    for case in _clip_cases(grading_seed):
        with trial():
            _run_clip_case(clip_grad_norm, *case)
