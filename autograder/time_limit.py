"""A time limit for one call of learner code inside a check: :func:`time_limit` interrupts it with :class:`OutOfTime`
after a few seconds of wall time (SIGALRM), without disturbing the grader's own cell timeout (the same signal)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time


class OutOfTime(BaseException):
    """Raised into the code under :func:`time_limit` when it outlives its seconds (a BaseException: no ``except
    Exception`` in learner code swallows it). A check attaches the failure to report as ``.failure``; the check
    (:func:`autograder.checking.check`) then stops with it, since no later case could finish either."""

    failure = None


@contextlib.contextmanager
def time_limit(seconds: float):
    """Interrupt the code inside after ``seconds`` of wall time. Where no timer can be set (outside the main thread)
    the code runs unbounded and the cell's timeout is the bound. A timer already running (the grader's cell timeout)
    is kept: if it is due first it fires as it would have, and otherwise it is set again afterwards, less the time
    spent inside."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer and outer <= seconds:  # the cell's own timeout comes first: nothing to add
        yield
        return

    def expire(signum, frame):
        raise OutOfTime()

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))
