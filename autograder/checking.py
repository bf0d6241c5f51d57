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

A check (:func:`check`) runs its cases as :func:`trial` cases, so every case is tried and a misconception is named only
when two cases agree on it (or the check observed it directly, e.g. autograd running where the part forbids it).
:func:`call_learner` calls learner code on the caller's own objects and checks how it worked: the routes it used
(:mod:`autograder.routes`) and the contracts it must keep (:mod:`autograder.contracts`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import math
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import contracts
from .misconceptions import CourseBug, GradingFailure, LearnerFacing, Misconception, Symptom, armed, publish
from .routes import MISCONCEPTIONS as ROUTE_MISCONCEPTIONS
from .routes import Route, Routes
from .time_limit import OutOfTime

__all__ = ["CourseBug", "GradingFailure", "Misconception", "NotPasted", "NotWritten", "Route", "Routes", "Symptom",
           "as_answer", "call_learner", "check", "describe_mismatch", "expect_close", "expect_pasted", "expect_tensor",
           "fmt", "has_failed", "not_pasted", "trial"]

Tensor = torch.Tensor


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
#: grader (``python -m autograder grade``, :mod:`autograder.grading.isolation.pristine`) answers it by putting back
#: whatever the learner's code monkeypatched (torch, numpy, math, this package...) and popping the torch modes it
#: left behind, before the check goes on.
LEARNER_RETURNED = "autograder.learner_returned"


def _learner_returned(*keep: int, _audit=sys.audit, _event=LEARNER_RETURNED) -> None:
    # Bound as defaults when this module is imported: learner code cannot swap sys.audit for this call. ``keep``: the
    # depths of torch's function and dispatch mode stacks when the check called the learner (its own modes stay).
    _audit(_event, *keep)


def _mode_depths(_function=torch._C._len_torch_function_stack, _dispatch=torch._C._len_torch_dispatch_stack):
    return _function(), _dispatch()


def call_learner(fn: Callable, *args, what: str, forbid: Iterable[Route] = (), routes: Routes | None = None,
                 may_change: Iterable[str | int] | bool = (), **kwargs) -> Any:
    """Call learner code on the caller's own arguments; turn its exceptions into a GradingFailure saying what was
    called, and check how it worked.

    * ``forbid``: routes the part's text rules out (:class:`~autograder.routes.Route`); using one fails with the
      route's misconception. ``routes``, when given, is filled with what the call used (e.g. how many backward runs).
    * ``may_change``: the arguments the function is meant to change (``True``: any), by name or by position (an
      ``int``: the learner's own signature may call it anything, ``*args`` included). Every other tensor in
      the arguments (and in modules among them) must be unchanged afterwards: values, ``requires_grad``, ``.grad``,
      ``grad_fn``, and no in-place change at all.

    Warnings are silenced: a correct answer that happens to warn must not lose points. When the call is over, the
    :data:`LEARNER_RETURNED` event lets a grader undo anything the learner's code monkeypatched meanwhile, before
    this function looks at the results.
    """
    __tracebackhide__ = True
    returned = _learner_returned  # taken before learner code runs: the call may rebind this module's globals
    named = _named_arguments(fn, args, kwargs)
    order = list(named)
    allowed = {order[item] if isinstance(item, int) and item < len(order) else item
               for item in (() if may_change is True else may_change or ())}
    watched = {n: v for n, v in named.items() if may_change is not True and n not in allowed}
    snapshot = contracts.Snapshot(watched)
    forbid = tuple(forbid)
    if routes is None and forbid:
        routes = Routes(dual_numbers=Route.AUTOGRAD in forbid)
    depths = _mode_depths()  # a check may call learner code inside a mode of its own (exercise 11 watches batch norm)
    if routes is not None:
        routes.start()
    try:
        answer = _call_learner(fn, args, kwargs, what)
    finally:
        returned(*depths)
        if routes is not None:
            routes.stop()
    for route in forbid:
        if routes.used(route):
            raise proven_failure(f"{what} used {route.value}, which this part rules out.", ROUTE_MISCONCEPTIONS[route])
    changes = snapshot.changes()
    if changes:
        raise proven_failure(f"{what} changed its arguments: {'; '.join(changes)}.", contracts.CHANGED_INPUT)
    return answer


def proven_failure(message: str, misconception: Misconception) -> GradingFailure:
    """The failure for a mistake the check observed directly (named whatever the numbers say)."""
    if _TRIALS.get() is None:  # outside a check() nobody else will name it
        message = misconception.line() + "\n" + message
    return GradingFailure(message, proven=misconception)


def _named_arguments(fn: Callable, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by parameter name (``argument 1``... when the signature cannot be read)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {**{f"argument {i + 1}": a for i, a in enumerate(args)}, **kwargs}
    named = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named.update({f"{name}[{i}]": v for i, v in enumerate(value)})
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[name] = value
    return named


def expect_no_alias(answer: Any, arguments: dict[str, Any], *, what: str) -> None:
    """Fail when a tensor in ``answer`` shares memory with a tensor in ``arguments`` or with its ``.grad``."""
    __tracebackhide__ = True
    found = contracts.aliases(answer, contracts.Snapshot(arguments).tensors(), "the result")
    if found:
        raise proven_failure(f"{what}: {'; '.join(found)}.", contracts.ALIASED)


def _call_learner(fn: Callable, args: tuple, kwargs: dict, what: str) -> Any:
    __tracebackhide__ = True
    if not callable(fn):
        raise GradingFailure(f"{what}: expected a function, got {type(fn).__name__}.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except NotImplementedError:
        name = getattr(fn, "__qualname__", None)
        called = f"`{name}`" if type(name) is str and "<" not in name else what
        raise NotWritten(f"Not written yet: {called} raised NotImplementedError. Replace the "
                         "`raise NotImplementedError()` line with your code.") from None
    except GradingFailure:
        raise
    except Exception as error:  # the learner's bug, reported as such
        raise GradingFailure(f"{what} raised {type(error).__name__}: {error}", raised=error) from None


# ---------------------------------------------------------------------------------------------- checks and trials

class NotWritten(GradingFailure):
    """The learner's function still raises NotImplementedError: the part is not written yet."""


class NotPasted:
    """What a name of a notebook holds until the learner pastes their code from an earlier exercise (or the course's
    reference): calling it says so, and a check that receives it fails with "Not written yet" (:func:`expect_pasted`).
    The grader's kernel lets the learner's cells rebind such a name (``learner_fills``: it restores the imports
    cell's other names before each test)."""

    learner_fills = True

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"{self.name} is not pasted yet")

    def __repr__(self) -> str:
        return f"<{self.name}: not pasted yet>"


def not_pasted(name: str) -> NotPasted:
    """The placeholder for ``name`` until the learner pastes it (see :class:`NotPasted`)."""
    return NotPasted(name)


def expect_pasted(value: Any, name: str, where: str) -> None:
    """Fail with "Not written yet" while ``value`` is still a :class:`NotPasted` placeholder (or None); ``where``
    says where to paste it."""
    __tracebackhide__ = True
    if isinstance(value, NotPasted) or value is None:
        raise NotWritten(f"Not written yet: {name} is not there yet. {where}")


@dataclass
class _Trials:
    """The cases one check ran and the failures among them (state of one call of a check)."""

    check: str
    count: int = 0
    failures: list[GradingFailure] = field(default_factory=list)

    def verdict(self) -> GradingFailure | None:
        """None if every case passed; else the failure to show, naming a misconception only when it is proven or
        when at least two failing cases match it."""
        if not self.failures:
            return None
        proven = [f for f in self.failures if f.proven is not None]
        if proven:
            return self._named(proven[0], proven[0].proven, proven=True)
        votes: dict[str, list[GradingFailure]] = {}
        names: dict[str, Misconception] = {}
        for failure in self.failures:
            for suspect in dict.fromkeys(failure.suspects):
                votes.setdefault(suspect.name, []).append(failure)
                names[suspect.name] = suspect
        agreed = [name for name, cases in votes.items() if len(cases) >= 2]
        if not agreed:
            return self._named(self.failures[0], None)
        first = [name for name in agreed if self.failures[0] in votes[name]]
        name = first[0] if first else max(agreed, key=lambda n: len(votes[n]))
        return self._named(votes[name][0], names[name], cases=len(votes[name]))

    def _named(self, failure: GradingFailure, misconception: Misconception | None, *, proven: bool = False,
               cases: int = 1) -> GradingFailure:
        text = failure.message
        if self.count > 1 and len(self.failures) > 1:
            text += f"\n  ({len(self.failures)} of the {self.count} cases this test tried failed.)"
        if misconception is not None:  # the named mistake first: it is what a learner reads before the numbers
            text = misconception.line() + "\n" + text
            publish(misconception, check=self.check, cases=cases, proven=proven)
        kind = NotWritten if isinstance(failure, NotWritten) else GradingFailure  # typed: "not written" stays so
        return kind(text, proven=misconception if proven else None,
                    suspects=() if misconception is None or proven else (misconception,))


_TRIALS: contextvars.ContextVar[_Trials | None] = contextvars.ContextVar("autograder_trials", default=None)

#: The checks that have failed in this process (a notebook's kernel), by name: what opens a part's later hints.
_FAILED: set[str] = set()


def has_failed(check_name: str) -> bool:
    """Whether the check called ``check_name`` has failed in this kernel (see :mod:`autograder.hints`)."""
    return check_name in _FAILED


class StaleNotebook(LearnerFacing, Exception):
    """A test cell calls a check with arguments this version of the checks does not take: the notebook comes from
    another release of the exercise than the installed course (a learner's old copy after the course was updated).
    Not a verdict on the answer; nbgrader's grading restores the test cells, so it never reaches a grade."""

    def __init__(self, name: str, error: TypeError):
        super().__init__(
            f"This test cell calls {name} in a way this version of the course's checks does not ({error}): your "
            "notebook comes from an older or newer release of the exercise than the checks installed. Your answers "
            "are not judged by this; copy them into the current release of the exercise (the same file under "
            "exercises/ in a fresh copy of the course, or fetch it again from the Assignments list).")


def check(function: Callable) -> Callable:
    """Make ``function`` a check: the body of one test cell, run as a set of :func:`trial` cases.

    Every case runs, even after one fails; the check then fails with the first failure (or the first that proves a
    mistake) and names a misconception only when it is proven or at least two failing cases match it, so that one
    coincidence never misleads a learner. The diagnosis is also published as structured data for the class report.

    A check takes ``grading_seed``: None (the visible test cell) runs the public cases, a number (a hidden test cell
    passes :func:`autograder.seeding.grading_seed`) fresh cases drawn from it.
    """

    signature = inspect.signature(function)

    @functools.wraps(function)
    def run(*args, **kwargs) -> None:
        __tracebackhide__ = True
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise StaleNotebook(function.__name__, error) from None
        hidden = bound.arguments.get("grading_seed") is not None
        trials = _Trials(function.__name__)
        token = _TRIALS.set(trials)
        try:
            function(*args, **kwargs)
        except OutOfTime as out:  # a case ran past its time limit: no later case could finish either
            if out.failure is None:
                raise
            trials.failures.append(out.failure)
            trials.count += 1
        except GradingFailure as failure:  # raised outside a trial: the check stops here
            unwritten = _unwritten(failure)
            if unwritten is None or not trials.failures:
                trials.failures.append(_with_cases_passed(unwritten, trials) if unwritten else failure)
                trials.count += 1
            # else: a function of the part is not written, but an earlier case already failed on one that is
            # (a wrong answer says more than "not written", and the score is the same)
        finally:
            _TRIALS.reset(token)
        verdict = trials.verdict()
        if verdict is not None:
            _FAILED.add(function.__name__)
            raise verdict
        _passed(function, trials.count, hidden=hidden)

    run.is_check = True
    return run


def _passed(function: Callable, cases: int, *, hidden: bool) -> None:
    """One line saying what passed: a learner should not have to read a silent cell as success."""
    label = (function.__doc__ or "").strip().split(":")[0]
    part = label if label.startswith("Part") else function.__name__.removeprefix("check_")
    count = f"{cases} case{'s' if cases != 1 else ''}" if cases else "its cases"
    if hidden:
        print(f"✓ {part}: the hidden tests pass ({count} drawn from the grading seed).")
    else:
        print(f"✓ {part}: the visible tests pass ({count}). When graded, hidden tests try fresh inputs too.")


@contextlib.contextmanager
def trial():
    """One case of a :func:`check`: a GradingFailure inside is recorded and the check goes on with its next case.

    Outside a check (a helper called directly) the failure propagates at once.
    """
    trials = _TRIALS.get()
    if trials is None:
        yield
        return
    trials.count += 1
    try:
        yield
    except (NotWritten, OutOfTime):  # no other case can say more: the check stops with this one (counted there)
        trials.count -= 1
        raise
    except GradingFailure as failure:
        unwritten = _unwritten(failure)
        if unwritten is not None:
            trials.count -= 1
            raise unwritten from None
        trials.failures.append(failure)


def _with_cases_passed(unwritten: NotWritten, trials: _Trials) -> NotWritten:
    """"Not written yet", saying how many of the check's cases passed before it (a part of several functions: the
    ones written are confirmed before the next is started)."""
    passed = trials.count - len(trials.failures)  # the cases tried before it (trial() does not count it)
    if passed <= 0:
        return unwritten
    return NotWritten(f"{unwritten.message}\n  (The {passed} case{'s' if passed != 1 else ''} this test tried before "
                      f"it passed.)")


def _unwritten(failure: BaseException) -> NotWritten | None:
    """The "not written yet" a check turned into another failure while handling it (a check that re-raises a
    learner's error with a diagnosis), so that an unwritten part always reads as unwritten, never as a wrong answer."""
    seen = failure
    while seen is not None:
        if isinstance(seen, NotWritten):
            return seen
        seen = seen.__context__
    return None


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
        kind = "a single number" if tuple(shape) == () else "one value per element of the input"
        raise GradingFailure(f"{what} returned shape {tuple(tensor.shape)}; expected shape {tuple(shape)} ({kind}).")
    return tensor


def expect_tensor(answer: Any, what: str, shape: Sequence[int]) -> Tensor:
    """:func:`as_answer` for a part that asks for a tensor: a Python number fails too, also for shape ()."""
    __tracebackhide__ = True
    if not isinstance(answer, torch.Tensor):
        raise GradingFailure(f"{what} returned {type(answer).__name__} ({answer!r:.60}); expected a tensor of shape "
                             f"{tuple(shape)}.")
    return as_answer(answer, what=what, shape=shape)


def expect_close(received: Any, expected: Any, _returned=_learner_returned, *, what: str, fd: Any = None,
                 rtol: float = 1e-6, atol: float = 1e-8, symptoms: Sequence[Symptom] = (), extra: str = "",
                 source: str = "autograd") -> None:
    """Pass if ``received`` is close to ``expected`` elementwise; otherwise explain the mismatch and raise.

    ``expected`` is the value from ``source`` (autograd, or "expected" for a non-gradient answer); ``fd``, when given,
    is the central finite difference, shown beside it. The two oracles must agree with each other, otherwise the
    exercise is at fault and says so (:class:`CourseBug`). ``symptoms`` are the known mistakes this case can
    recognise; the failure carries those that match (a :func:`check` names one when two cases agree), among the
    symptoms this case arms (:func:`~autograder.misconceptions.armed`: never one the right answer shows).

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
            raise CourseBug(f"the oracles disagree for {what} (autograd {fmt(expected)}, finite difference "
                            f"{fmt(fd)}).")
    if _allclose(got, expected, rtol, atol):
        return
    matched = tuple(dict.fromkeys(s.misconception for s in armed(symptoms, expected, rtol=rtol, atol=atol)
                                  if s.matches(got)))
    message = describe_mismatch(got, expected, what=what, fd=fd, rtol=rtol, atol=atol, extra=extra, source=source)
    raise GradingFailure(message, suspects=matched)


def describe_mismatch(got: Tensor, expected: Tensor, *, what: str, fd: Tensor | None, rtol: float, atol: float,
                      extra: str = "", source: str = "autograd") -> str:
    """The failure message: the case, the worst element, both oracles and the errors (the numbers alone)."""
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
    scale = abs(float(expected[index]))
    relative = f"rel {abs_err / scale:.3g}" if scale > 0 else "rel undefined (the expected value is 0)"
    lines.append(f"  error there:        abs {abs_err:.3g}, {relative} (allowed: rel {rtol:g} + abs {atol:g})")
    if expected.dim():
        lines.append(f"  all of yours:       {fmt(got)}")
        lines.append(f"  all expected:       {fmt(expected)}")
    if extra:
        lines.append(extra)
    return "\n".join(lines)
