"""What exercise 01 accepts as a Python number or a tuple of them (Parts B and C)."""

from __future__ import annotations

import torch

from ...checking import (
    GradingFailure,
    Misconception,
    fmt,
    proven_failure,
)

# ---------------------------------------------------------------------------------------------- types

TENSOR_FOR_NUMBER = Misconception(
    "returned a tensor where the part asks for a Python number",
    "This part's text asks for plain Python numbers, and a tensor is not one, even with a single element: the "
    "tests compare your result with the exact derivative, value and type.",
    question="What type is each value you return: a Python float, or a tensor holding one?")


def _python_number(value, *, what: str, name: str) -> float:
    """``value`` as a float if it is a plain Python number (int or float, bool excluded); a tensor is the mistake
    the text warns about, anything else a plain failure."""
    __tracebackhide__ = True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, torch.Tensor):
        raise proven_failure(f"{what} returned a tensor for {name} ({fmt(value)}); the part asks for a Python "
                             "number.", TENSOR_FOR_NUMBER)
    raise GradingFailure(f"{what} returned {type(value).__name__} ({value!r:.60}) for {name}; expected a Python "
                         "number.")


def _tuple_of(answer, names: tuple[str, ...], *, what: str) -> tuple:
    __tracebackhide__ = True
    if not isinstance(answer, (tuple, list)) or len(answer) != len(names):
        raise GradingFailure(f"{what} returned {answer!r:.80}; expected a tuple ({', '.join(names)}).")
    return tuple(answer)
