"""Checks for exercise 09, one module per part: diagnosis rules stated as data, graded on training traces
(:mod:`.rules`, on the traces of :mod:`.traces`), an evaluation that leaves no trace (:mod:`.evaluation`), the bytes a
graph keeps predicted before they are measured (:mod:`.memory`), the cuts in a loss (:mod:`.cuts`) and a compiled
server that compiles once (:mod:`.breaks`); :mod:`.misconceptions` holds every mistake they name, and :data:`hint`
the parts' hints.

The traces are real: :func:`.traces.training_trace` trains a tiny seeded regression network with the named bug (or
none) and records what a careful training loop logs. Every trace keeps margins (:data:`.traces.MARGINS`): a run whose
draw did not (a missing ``zero_grad`` whose loss never bounced, a healthy run whose mini-batch noise looked like a
bounce) is drawn again from the same generator. The visible test holds the runs nearest to each margin, and the hidden
runs stay within them, so rules that separate the visible runs separate the hidden ones at every grading seed
(tests/test_ex09_traces.py proves it on 500 drawn runs of every kind).
"""

from ...hints import HintBook, PartHints
from .breaks import check_compiled_server
from .cuts import check_distillation_loss
from .evaluation import check_held_out_loss
from .memory import Residual, check_predicted_bytes, measured_bytes, saved_by
from .rules import WOBBLE, Rule, apply_rules, check_rules
from .traces import LABELS, example_traces, training_trace

__all__ = ["LABELS", "WOBBLE", "Residual", "Rule", "apply_rules", "check_compiled_server",
           "check_distillation_loss", "check_held_out_loss", "check_predicted_bytes", "check_rules", "example_traces",
           "hint", "measured_bytes", "saved_by", "training_trace"]

hint = HintBook({
    "A": PartHints(
        texts=(
            "For each kind, which of the four panels looks different from every healthy run, and does it still look "
            "different for a healthy run that sums its loss over the mini-batch instead of averaging it?",
            "Two runs to test your order against, both among the labelled runs: "
            "`checks.training_trace(\"exploding gradients\", 1109, \"clipped\")` climbs to about 389 times its best "
            "loss without a single inf, and `checks.training_trace(\"missing zero_grad\", 1039)` ends at a held-out "
            "ratio of about 0.19, below some healthy runs. Which of your rules meets each of them first, and what "
            "does it say?",
            "Order the rules from the measurement no other kind imitates to the one several kinds share: a rule may "
            "read a measurement only when every kind still unnamed at that point keeps to its own side of the "
            "threshold. Then, for each threshold, take the nearest values on either side over all the labelled runs "
            "and put the threshold at their geometric mean, so that moving it by a quarter keeps every run where it "
            "was."),
        checks=("check_rules",), cells=("diagnosis_rules",)),
    "B1": PartHints(
        texts=(
            "Which switches does a forward pass of this model read (autograd's recording, each module's own training "
            "flag), which state does it write even with recording off, and which of your lines put each back when "
            "`model(inputs)` raises?",
            "Smaller cases. In the notebook's probe, one pass in training mode under no_grad moves all three of the "
            "batch norm's buffers (num_batches_tracked from 0 to 1). And a model in training mode whose batch norm "
            "was switched to evaluation mode on its own lists its modules' flags as [True, True, False, True, True, "
            "True]: after your call, with a batch it can take and with one a feature too wide, the list must be the "
            "same.",
            "Note every module's own flag, not only the top module's; switch the whole model to evaluation mode; run "
            "the forward pass with recording off, inside a block whose cleanup puts each module's flag back whatever "
            "happens in it; then bring the predictions and the targets to one shape and return the mean squared "
            "error as a number."),
        checks=("check_held_out_loss",), cells=("held_out_loss",)),
    "B2": PartHints(
        texts=(
            "What does each kind of layer need from the forward pass to compute its backward (its input, its output, "
            "or something of its own), and when do two layers keep the very same block of memory?",
            "Smaller cases to test against: `checks.saved_by` on `torch.nn.LeakyReLU()` and on "
            "`torch.nn.LeakyReLU(inplace=True)` (the same (4, 3) float64 batch) lists what each saves; and for "
            "`torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.GELU(), torch.nn.Linear(5, 1))` in float32 on a "
            "batch of 2, `checks.measured_bytes` gives 104 bytes.",
            "Walk the layers in order, carrying two facts about the tensor flowing through them: its width, and "
            "whether some layer has already saved its block of memory. Each layer adds the bytes of what it saves "
            "that is not saved yet, and says whether its output is a new block and whether it saved it. A residual "
            "block is a walk of its own inside the walk."),
        checks=("check_predicted_bytes",), cells=("predicted_bytes",)),
    "C1": PartHints(
        texts=(
            "Which lines of `buggy_distillation_loss` hand autograd a plain number, or a tensor it may not save, "
            "and which one of them is meant to stop the gradient?",
            "A smaller case: compare autograd with central differences for the temperature alone (a function of "
            "one number, the student left as it is), as lesson 09 did for f(w) = w·c; then for one weight of the "
            "student. Where they disagree, the graph was cut.",
            "Keep the teacher's forward pass under the switch that records nothing and gives ordinary constants; "
            "standardise the student's predictions with recording on; keep every number that depends on the student "
            "a tensor until the loss is returned."),
        checks=("check_distillation_loss",), cells=("distillation_loss",)),
    "C2": PartHints(
        texts=(
            "At each request where your server compiled again, what had changed from the requests before it (the "
            "limit, the batch size, or a batch of a single row), and which of Dynamo's guards did that change fail?",
            "Check values on the notebook's stream (batch sizes 5, 5, 9, 1, 16): the lesson's way compiles 4 graphs, "
            "at requests 0, 1, 2 and 3; the same function compiled as dynamic compiles 2, at requests 0 and 3 (the "
            "single row). A smaller case to measure on its own: a stream of two requests, 4 rows and then 1.",
            "Give the limit to the graph in a form Dynamo does not guard by its value, let the batch size be a symbol "
            "from the first compilation on, and hand the graph a single request in a shape that symbol covers (it "
            "stands for 2 or more rows, with ordinary strides); then return only what belongs to the request, with "
            "a fraction that the extra rows do not change. Measure the notebook's stream again: one graph, at "
            "request 0."),
        checks=("check_compiled_server",), cells=("compiled_server",)),
})
