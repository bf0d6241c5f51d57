"""Checks for exercise 09, one module per part: name the failure mode behind a training trace (:mod:`.diagnose`, on
the traces of :mod:`.traces`), evaluate and measure without a graph (:mod:`.without_graph`), and multiple-choice review
questions whose answer cannot be found from the form of the options (:mod:`.choices`); :mod:`.misconceptions` holds
every mistake they name.

The traces are real: :func:`.traces.training_trace` trains a tiny seeded regression network with the named bug (or
none) and records what a careful training loop logs. Every trace keeps stated margins (:data:`.traces.MARGINS`): a
run whose draw did not (a missing ``zero_grad`` whose loss never bounced, a healthy run whose mini-batch noise looked
like a bounce) is drawn again from the same generator. The visible test holds the runs nearest to each margin, and the
hidden runs stay within them, so a rule that separates the visible runs separates the hidden ones at every grading
seed (tests/test_ex09_traces.py proves it on 500 drawn runs of every kind).
"""

from .choices import QUESTIONS, check_multiple_choice
from .diagnose import check_diagnose
from .traces import LABELS, MARGINS, example_traces, training_trace
from .without_graph import check_graph_bytes, check_held_out_loss

__all__ = ["LABELS", "MARGINS", "QUESTIONS", "check_diagnose", "check_graph_bytes", "check_held_out_loss",
           "check_multiple_choice", "example_traces", "training_trace"]
