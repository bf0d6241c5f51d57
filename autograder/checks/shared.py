"""Misconceptions and answer readers that several exercises' checks share, defined once (a name is one mistake with
one hint across the whole course, see :data:`autograder.misconceptions.REGISTRY`)."""

from __future__ import annotations

import torch

from ..checking import GradingFailure, Misconception, proven_failure

CE_NOT_DIVIDED = Misconception(
    "cross-entropy gradient missing the 1/batch", "F.cross_entropy averages the loss over the N rows, so each row's "
    "share of the gradient, p − y, is divided by N as well.",
    question="Is each row's share divided by the number of rows the mean runs over?")
SQUARED_NORMS = Misconception(
    "squared norms", "A norm is the square root of the sum of squares (grad.norm()), not the sum of squares itself.",
    question="Is your number a length, or the square of one?")
LOSSES_AS_TENSORS = Misconception(
    "losses kept as tensors instead of Python floats",
    "Keep each loss as a number, loss.item(): a stored loss tensor keeps its whole computation graph alive for as "
    "long as the list lives, and the part asks for floats.",
    question="What does a stored loss tensor keep alive, and what type does the part ask for?")


def read_losses(answer, count: int, what: str, *, per: str = "update") -> torch.Tensor:
    """The learner's losses: a list (or tuple) of ``count`` Python floats, one ``per`` step, as a float64 vector."""
    __tracebackhide__ = True
    if type(answer) not in (list, tuple) or len(answer) != count:
        size = f" of length {len(answer)}" if type(answer) in (list, tuple) else ""
        raise GradingFailure(f"{what} returned {type(answer).__name__}{size}; expected a list of {count} losses, "
                             f"one per {per}.")
    tensors = [value for value in answer if isinstance(value, torch.Tensor)]
    if tensors:
        graph = " attached to a graph" if any(t.requires_grad for t in tensors) else ""
        raise proven_failure(f"{what} returned losses that are tensors{graph}; expected Python floats.",
                             LOSSES_AS_TENSORS)
    if not all(isinstance(value, float) for value in answer):
        kinds = sorted({type(value).__name__ for value in answer})
        raise GradingFailure(f"{what} returned losses of type {', '.join(kinds)}; expected Python floats "
                             "(loss.item()).")
    return torch.tensor([float(value) for value in answer], dtype=torch.float64)
