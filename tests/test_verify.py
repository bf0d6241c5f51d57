"""The lessons' claims (autograder.verify): a false claim stops the lesson, and a timing claim survives a busy moment
but not a false ratio."""

from __future__ import annotations

import time

import pytest

from autograder.verify import ClaimFailed, claim, claim_close, claim_faster


def test_a_false_claim_raises_and_says_what_it_claimed():
    claim("two is even", 2 % 2 == 0)
    with pytest.raises(ClaimFailed, match="three is even"):
        claim("three is even", 3 % 2 == 0)
    with pytest.raises(ClaimFailed, match=r"Computed here: 1\.1 \(expected 1\)"):
        claim_close("1.1 is 1", 1.1, 1.0, rtol=1e-3)


def test_a_timing_claim_that_a_busy_moment_hid_is_timed_again():
    claim_faster("sleeping 20 ms is slower than not sleeping", lambda: time.sleep(0.02), lambda: None, 2,
                 measured=(1.0, 1.0))  # the cell's own (disagreeing) times: measured again, and it holds


def test_a_false_timing_claim_fails_after_every_round_and_shows_the_ratios():
    with pytest.raises(ClaimFailed, match=r"in 3 rounds, the ratio was 1\.00x, .*claimed: more than 2x"):
        claim_faster("not sleeping is slower than sleeping", lambda: None, lambda: time.sleep(0.005), 2,
                     measured=(1.0, 1.0), repeats=2)
