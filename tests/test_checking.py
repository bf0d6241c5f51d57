"""Failure messages state the case, the learner's value, both oracles, the worst element and a named mistake."""

from __future__ import annotations

import warnings

import pytest
import torch

from autograder.checking import CourseBug, GradingFailure, Misconception, as_answer, call_learner, expect_close
from autograder.seeding import DEFAULT_SEED, SEED_VARIABLE, generator, grading_seed


def test_pass_is_silent():
    expect_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-12]), what="f")


UNRELATED = Misconception("unrelated (test_checking)", "never shown")
PLANTED = Misconception("planted (test_checking)", "the hint")


def test_failure_message_names_everything():
    expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    got = expected.clone()
    got[1, 0] = 3.5
    with pytest.raises(GradingFailure) as failure:
        expect_close(got, expected, what="grad(f) at x = [...]", fd=expected + 1e-9, symptoms=[
            UNRELATED.looks_like(expected * 7), PLANTED.looks_like(got)])
    message = str(failure.value)
    for phrase in ("grad(f) at x = [...] is wrong", "index (1, 0)", "your value:         3.5", "autograd:           3",
                   "finite difference:  3", "abs 0.5"):
        assert phrase in message, phrase
    # one case only suspects; a check names the misconception when two cases agree (tests/test_check_protocol.py)
    assert failure.value.suspects == (PLANTED,) and "Likely misconception" not in message


def test_no_suspect_when_nothing_matches():
    with pytest.raises(GradingFailure) as failure:
        expect_close(2.0, 1.0, what="g", symptoms=[UNRELATED.looks_like(3.0)])
    assert failure.value.suspects == ()


def test_nan_is_never_close():
    with pytest.raises(GradingFailure):
        expect_close(float("nan"), 1.0, what="g")


def test_oracles_that_disagree_blame_the_course():
    with pytest.raises(CourseBug, match="Course bug") as raised:
        expect_close(1.0, 1.0, what="g", fd=2.0)
    assert not isinstance(raised.value, AssertionError)  # nbgrader must not read it as the learner's failed test


def test_shape_mismatch_is_explained():
    with pytest.raises(GradingFailure, match=r"shape \(3,\); expected shape \(2,\)"):
        expect_close(torch.zeros(3), torch.zeros(2), what="g")


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __float__(self):
        return 1.0


def test_objects_that_claim_equality_are_not_answers():
    with pytest.raises(GradingFailure, match="expected a number or a tensor"):
        as_answer(AlwaysEqual(), what="g")


def test_learner_exceptions_become_readable_failures():
    def unfinished():
        raise NotImplementedError()

    with pytest.raises(GradingFailure, match="Not written yet: f\\(\\) raised NotImplementedError. Replace the "
                                             "`raise NotImplementedError\\(\\)`"):
        call_learner(unfinished, what="f()")
    with pytest.raises(GradingFailure, match="f\\(\\) raised ZeroDivisionError"):
        call_learner(lambda: 1 / 0, what="f()")


def test_learner_warnings_are_silenced():
    def noisy():
        warnings.warn("loud", UserWarning, stacklevel=2)
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert call_learner(noisy, what="f()") == 1


def test_grading_seed_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(SEED_VARIABLE, raising=False)
    assert grading_seed() == DEFAULT_SEED
    monkeypatch.setenv(SEED_VARIABLE, "914")
    assert grading_seed() == 914
    first = torch.rand(3, generator=generator("stream", grading_seed()))
    assert torch.equal(first, torch.rand(3, generator=generator("stream", 914)))
    assert not torch.equal(first, torch.rand(3, generator=generator("other stream", 914)))
    assert not torch.equal(first, torch.rand(3, generator=generator("stream", 915)))
    monkeypatch.setenv(SEED_VARIABLE, "not a number")
    with pytest.raises(ValueError, match=SEED_VARIABLE):
        grading_seed()


def test_plain_numbers_are_compared_in_float64():
    assert as_answer(0.327, what="g").item() == 0.327
    expect_close(0.1 + 0.2, 0.3, what="g", rtol=1e-15, atol=1e-15)


def test_a_test_cell_from_another_release_is_told_so():
    """A learner's notebook from an older release calls a check whose arguments changed since: not a TypeError from
    inside the course, and not a verdict, but a message saying where the current release is."""
    from autograder.checking import StaleNotebook, check

    @check
    def check_thing(answer, factor, grading_seed=None):
        """Part Z: a check that gained an argument."""

    with pytest.raises(StaleNotebook, match="check_thing .*missing a required argument: 'factor'.*current release"):
        check_thing(lambda: None)
    check_thing(lambda: None, 2.0)  # the current release's call passes


def test_a_relative_error_against_zero_is_not_a_number_in_the_hundreds_of_digits():
    with pytest.raises(GradingFailure) as failure:
        expect_close(torch.tensor([1.0, 0.5], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64),
                     what="g(x)")
    assert "rel undefined (the expected value is 0)" in str(failure.value) and "e+" not in str(failure.value)


def test_a_time_limit_stops_a_loop_and_keeps_the_cells_own_timer():
    import signal
    import time

    from autograder.time_limit import OutOfTime, time_limit

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append("cell timeout"))
    try:
        signal.setitimer(signal.ITIMER_REAL, 2.0)  # the grader's cell timeout, running
        started = time.monotonic()
        with pytest.raises(OutOfTime), time_limit(0.2):
            while True:
                pass
        assert time.monotonic() - started < 1.0
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 1.0 < remaining < 1.9 and signal.getsignal(signal.SIGALRM) is not None and not fired
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # a cell timeout due before the limit fires as it would have
        with time_limit(5.0):
            time.sleep(0.3)
        assert fired == ["cell timeout"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
