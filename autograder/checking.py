"""Compare a learner's answer with the oracles and explain a mismatch in plain words.

A failed check raises :class:`GradingFailure` (an ``AssertionError``, so nbgrader counts the cell as failed) whose
message names the case, the learner's value, the autograd value, the finite-difference value, the errors, the worst
element and, when the answer matches a known mistake, that mistake::

    central_difference(f, x, h) is wrong for f(x) = sum(x**3), x = [1.0, 2.0, 3.0], h = 0.001.
      worst element:      index (2,)
      your value:         27.009001
      autograd:           27
      finite difference:  27.000001 (central, float64)
      error there:        abs 0.009, rel 0.00033 (allowed: rel 1e-05 + abs 1e-07)
    Likely misconception: forward difference. ...
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

Tensor = torch.Tensor


class GradingFailure(AssertionError):
    """A learner's answer is wrong; the message says how, for the learner."""


@dataclass(frozen=True)
class Misconception:
    """A known mistake: its name, what to do instead, and how to recognise it.

    ``value`` is what the mistaken method produces for this case (recognised when the answer is close to it);
    ``when`` is a test on the answer itself for mistakes that have no single value (e.g. round-off noise).
    """

    name: str
    hint: str
    value: Any = None
    when: Callable[[Tensor], bool] | None = None

    def matches(self, received: Tensor) -> bool:
        if self.when is not None and self.when(received):
            return True
        if self.value is None:
            return False
        value = torch.as_tensor(self.value, dtype=torch.float64)
        return value.shape == received.shape and _allclose(received, value, rtol=1e-4, atol=1e-7)


def _allclose(a: Tensor, b: Tensor, rtol: float, atol: float) -> bool:
    return bool(torch.all(torch.abs(a - b) <= atol + rtol * torch.abs(b)).item()) and bool(torch.isfinite(a).all())


def fmt(value: Any, limit: int = 8) -> str:
    """A short, readable rendering of a number or tensor (at most ``limit`` elements)."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.dim() == 0:
            return fmt(value.item())
        flat = [fmt(v) for v in value.reshape(-1)[:limit].tolist()]
        more = ", ..." if value.numel() > limit else ""
        body = "[" + ", ".join(flat) + more + "]"
        return body if value.dim() == 1 else f"{body} (shape {tuple(value.shape)})"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.8g}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(fmt(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


#: Raised (as an audit event) whenever learner code returns to a check. Outside grading nothing listens; the class
#: grader (``python -m autograder grade``, see autograder/grading/pristine.py) answers it by putting back whatever the
#: learner's code monkeypatched (torch, numpy, math, this package...) before the check goes on.
LEARNER_RETURNED = "autograder.learner_returned"


def _learner_returned(_audit=sys.audit, _event=LEARNER_RETURNED) -> None:
    # Bound as defaults when this module is imported: learner code cannot swap sys.audit for this call.
    _audit(_event)


def call_learner(fn: Callable, *args, what: str, **kwargs) -> Any:
    """Call learner code, turning its exceptions into a GradingFailure that says what was called.

    Warnings are silenced: a correct answer that happens to warn must not lose points. When the call is over, the
    :data:`LEARNER_RETURNED` event lets a grader undo anything the learner's code monkeypatched meanwhile.
    """
    __tracebackhide__ = True
    returned = _learner_returned  # taken before learner code runs: the call may rebind this module's globals
    try:
        return _call_learner(fn, args, kwargs, what)
    finally:
        returned()


def _call_learner(fn: Callable, args: tuple, kwargs: dict, what: str) -> Any:
    __tracebackhide__ = True
    if not callable(fn):
        raise GradingFailure(f"{what}: expected a function, got {type(fn).__name__}.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except NotImplementedError:
        raise GradingFailure(f"{what} raised NotImplementedError: replace the `raise NotImplementedError()` "
                             "line with your code.") from None
    except GradingFailure:
        raise
    except Exception as error:  # the learner's bug, reported as such
        raise GradingFailure(f"{what} raised {type(error).__name__}: {error}") from None


def as_answer(value: Any, *, what: str, shape: Sequence[int] | None = None) -> Tensor:
    """The learner's answer as a float64 tensor, or a GradingFailure saying why it is not one.

    Only plain numbers and plain tensors count: a Tensor subclass could answer every later comparison itself
    (``__torch_function__``).
    """
    __tracebackhide__ = True
    if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter):
        raise GradingFailure(f"{what} returned a {type(value).__name__} (a subclass of torch.Tensor); "
                             "expected a plain tensor.")
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
    elif isinstance(value, (bool, int, float)):
        tensor = torch.tensor(float(value), dtype=torch.float64)  # never via float32
    else:  # never trust an unknown object's __eq__ or __float__: only real numbers and tensors count
        raise GradingFailure(f"{what} returned {type(value).__name__} ({value!r:.80}); expected a number or a tensor.")
    if not (tensor.is_floating_point() or tensor.dtype in (torch.int64, torch.int32, torch.bool)):
        raise GradingFailure(f"{what} returned a tensor of dtype {tensor.dtype}; expected real numbers.")
    tensor = tensor.to(torch.float64)
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise GradingFailure(f"{what} returned shape {tuple(tensor.shape)}; expected shape {tuple(shape)} "
                             "(one value per element of the input).")
    return tensor


def expect_close(received: Any, expected: Any, _returned=_learner_returned, *, what: str, fd: Any = None,
                 rtol: float = 1e-6, atol: float = 1e-8, misconceptions: Sequence[Misconception] = (),
                 extra: str = "", source: str = "autograd") -> None:
    """Pass if ``received`` is close to ``expected`` elementwise; otherwise explain the mismatch and raise.

    ``expected`` is the value from ``source`` (autograd, or "expected" for a non-gradient answer); ``fd``, when given, is the central finite difference, shown
    beside it. The two oracles must agree with each other, otherwise the exercise is at fault and says so.

    Learner code that ran since it last returned (e.g. the ``__iter__`` of a returned tuple) is undone first, see
    :data:`LEARNER_RETURNED`; ``_returned`` is a positional default so that no learner code can swap it.
    """
    __tracebackhide__ = True
    _returned()
    expected = torch.as_tensor(expected, dtype=torch.float64)
    got = as_answer(received, what=what, shape=expected.shape)
    if fd is not None:
        fd = torch.as_tensor(fd, dtype=torch.float64)
        if not _allclose(fd, expected, rtol=1e-4, atol=1e-6):
            raise RuntimeError(f"Course bug, not yours: the oracles disagree for {what} "
                               f"(autograd {fmt(expected)}, finite difference {fmt(fd)}). Please report it.")
    if _allclose(got, expected, rtol, atol):
        return
    raise GradingFailure(describe_mismatch(got, expected, what=what, fd=fd, rtol=rtol, atol=atol,
                                           misconceptions=misconceptions, extra=extra, source=source))


def describe_mismatch(got: Tensor, expected: Tensor, *, what: str, fd: Tensor | None, rtol: float, atol: float,
                      misconceptions: Sequence[Misconception] = (), extra: str = "", source: str = "autograd") -> str:
    """The failure message: the case, the worst element, both oracles, the errors, and a named mistake if any."""
    error = torch.abs(got - expected)
    excess = error - (atol + rtol * torch.abs(expected))
    excess = torch.where(torch.isfinite(got), excess, torch.full_like(excess, math.inf))
    worst = int(torch.argmax(excess.reshape(-1))) if excess.numel() else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), expected.shape)) if expected.dim() else ()
    lines = [f"{what} is wrong."]
    if expected.dim():
        lines.append(f"  worst element:      index {index}")
    lines.append(f"  your value:         {fmt(got[index])}")
    lines.append(f"  {source + ':':19s} {fmt(expected[index])}")
    if fd is not None:
        lines.append(f"  finite difference:  {fmt(fd[index])} (central, float64)")
    abs_err = float(error[index])
    rel_err = abs_err / max(abs(float(expected[index])), 1e-300)
    lines.append(f"  error there:        abs {abs_err:.3g}, rel {rel_err:.3g} (allowed: rel {rtol:g} + abs {atol:g})")
    if expected.dim():
        lines.append(f"  all of yours:       {fmt(got)}")
        lines.append(f"  all expected:       {fmt(expected)}")
    if extra:
        lines.append(extra)
    for mistake in misconceptions:
        if mistake.matches(got):
            lines.append(f"Likely misconception: {mistake.name}. {mistake.hint}")
            break
    return "\n".join(lines)
