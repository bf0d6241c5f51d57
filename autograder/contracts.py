"""Contracts an exercise's text states about a learner's function, checked on the caller's own objects.

A check that hands the learner copies cannot see an answer that changes its inputs. So checks pass the real
arguments, take a :class:`Snapshot` of every tensor in them first (values, dtype, shape, ``requires_grad``, ``.grad``,
``grad_fn`` and the version counter that in-place operations move), and compare after the call
(:func:`autograder.checking.call_learner` does both). :func:`aliases` finds returned tensors that share memory with
an input or a live ``.grad``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .misconceptions import Misconception

CHANGED_INPUT = Misconception(
    "changed its inputs",
    "The caller's tensors must be exactly as they were after your function returns: work on copies "
    "(x.detach().clone()), never assign into an argument, call an in-place method on it or change its "
    "requires_grad. An in-place change that you undo afterwards still breaks a graph that saved the tensor.",
    question="Which of the caller's tensors did your function write into, or change the requires_grad of?")
ALIASED = Misconception(
    "returned memory it does not own",
    "A returned tensor shares memory with an input or a live .grad, so the caller's next in-place update or "
    "zero_grad() changes your result behind its back. Return a new tensor (clone() it).",
    question="Whose memory does the tensor you return live in, and what happens to it at the caller's next update?")


def tensors_in(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside ``value`` (tensors, lists, tuples, dicts, modules' parameters and buffers), with a path."""
    if depth > 4:
        return
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, nn.Module):
        for name, tensor in list(value.named_parameters()) + list(value.named_buffers()):
            yield f"{path}.{name}", tensor
    elif type(value) in (list, tuple):
        for i, item in enumerate(value):
            yield from tensors_in(item, f"{path}[{i}]", depth + 1)
    elif type(value) is dict:
        for key, item in value.items():
            yield from tensors_in(item, f"{path}[{key!r}]", depth + 1)


def _grad(tensor: torch.Tensor) -> torch.Tensor | None:
    if not (tensor.is_leaf or tensor.retains_grad):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tensor.grad


@dataclass(frozen=True)
class _State:
    tensor: torch.Tensor
    values: torch.Tensor
    requires_grad: bool
    grad: torch.Tensor | None
    grad_fn: Any
    version: int

    @classmethod
    def of(cls, tensor: torch.Tensor) -> _State:
        grad = _grad(tensor)
        return cls(tensor, tensor.detach().clone(), tensor.requires_grad,
                   None if grad is None else grad.detach().clone(), tensor.grad_fn, tensor._version)

    def changes(self) -> list[str]:
        now = self.tensor
        found = []
        if now.shape != self.values.shape or now.dtype != self.values.dtype:
            found.append(f"its shape/dtype changed from {tuple(self.values.shape)} {self.values.dtype} to "
                         f"{tuple(now.shape)} {now.dtype}")
        elif not torch.equal(now.detach(), self.values) and not _both_nan(now.detach(), self.values):
            found.append("its values changed")
        elif now._version != self.version:
            found.append("it was changed in place (even if the values were put back)")
        if now.requires_grad != self.requires_grad:
            found.append(f"requires_grad went from {self.requires_grad} to {now.requires_grad}")
        if now.grad_fn is not self.grad_fn:
            found.append("it became the result of another operation (its grad_fn changed)")
        grad = _grad(now)
        if (grad is None) != (self.grad is None):
            found.append(f".grad went from {'None' if self.grad is None else 'a tensor'} to "
                         f"{'None' if grad is None else 'a tensor'}")
        elif grad is not None and (grad.shape != self.grad.shape or not torch.equal(grad.detach(), self.grad)):
            found.append("its .grad changed")
        return found


def _both_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() and bool(torch.equal(torch.isnan(a), torch.isnan(b))) and bool(
        torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


class Snapshot:
    """The state of every tensor in some named arguments; :meth:`changes` lists what differs now."""

    def __init__(self, arguments: dict[str, Any]):
        self.states = {path: _State.of(tensor) for name, value in arguments.items()
                       for path, tensor in tensors_in(value, name)}

    def changes(self) -> list[str]:
        return [f"{path}: {change}" for path, state in self.states.items() for change in state.changes()]

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor recorded, and every ``.grad`` it had, by path."""
        found = {path: state.tensor for path, state in self.states.items()}
        for path, state in self.states.items():
            grad = _grad(state.tensor)
            if grad is not None:
                found[f"{path}.grad"] = grad
        return found


def aliases(result: Any, tensors: dict[str, torch.Tensor], what: str = "the result") -> list[str]:
    """Paths in ``result`` whose tensors share memory with one of ``tensors`` (by path), as sentences."""
    found = []
    for path, returned in tensors_in(result, what):
        if returned.numel() == 0:
            continue
        pointer = returned.untyped_storage().data_ptr()
        for name, tensor in tensors.items():
            if tensor.numel() and tensor.untyped_storage().data_ptr() == pointer:
                found.append(f"{path} shares memory with {name}")
    return found


def counting_saved(fn: Callable, saved: list) -> Callable:
    """``fn``, appending to ``saved`` the shape of every tensor autograd saves for backward while it runs (the
    lessons' saved-tensor hooks): "nothing is recorded" stated as a count."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        def pack(tensor):
            saved.append(tuple(tensor.shape))
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            return fn(*args, **kwargs)

    return run
