"""Checks for exercise 09, one module per part: diagnosis rules stated as data, graded on training traces
(:mod:`.rules`, on the traces of :mod:`.traces`), an evaluation in the middle of a training step that leaves no
trace (:mod:`.evaluation`), the bytes a graph keeps predicted before they are measured (:mod:`.memory`), the cuts in
a loss (:mod:`.cuts`) and a compiled server that compiles once (:mod:`.breaks`); :mod:`.misconceptions` holds every
mistake they name, and :data:`hint` the parts' hints.

The traces are real: :func:`.traces.training_trace` trains a tiny seeded regression network with the named bug (or
none) and records what a careful training loop logs. Every trace keeps margins (:data:`.traces.MARGINS`): a run whose
draw did not (a missing ``zero_grad`` whose loss never bounced, a healthy run whose mini-batch noise looked like a
bounce) is drawn again from the same generator. The visible test holds the runs nearest to each margin, and the hidden
runs stay within them, so rules that separate the visible runs separate the hidden ones at every grading seed
(tests/test_ex09_traces.py proves it on 500 drawn runs of every kind).
"""

from ...hints import HintBook, PartHints
from .breaks import check_compiled_server
from .cuts import check_find_cuts, team_pipeline
from .evaluation import SelfCalibrating, check_evaluating
from .memory import Residual, check_predicted_bytes, measured_bytes, saved_by
from .rules import WOBBLE, Rule, apply_rules, check_rules
from .traces import LABELS, example_traces, training_trace

__all__ = ["LABELS", "WOBBLE", "Residual", "Rule", "SelfCalibrating", "apply_rules", "check_compiled_server",
           "check_evaluating", "check_find_cuts", "check_predicted_bytes", "check_rules", "example_traces", "hint",
           "measured_bytes", "saved_by", "team_pipeline", "training_trace"]

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
            "A traced case: `checks.training_trace(\"healthy\", 1149, \"summed\")` is healthy, and the colleague's "
            "rules call it a missing zero_grad: its loss bounces 51.2 above its best, and its first gradient norm is "
            "3871, because every loss and gradient of that run is 256 times larger. The same run's loss climbs to "
            "only 1.58 times its best, and its first layer's gradient is 1.055 times its last one's. Which of your "
            "measurements would move if you multiplied the whole run by 256? Then, for each threshold, look at the "
            "nearest labelled runs on either side of it among the runs that reach its rule, and ask how far a fresh "
            "run may move before it crosses."),
        checks=("check_rules",), cells=("diagnosis_rules",)),
    "B1": PartHints(
        texts=(
            "Between the step's forward pass and its backward, which state does the step still need exactly as it "
            "left it (each module's flag, the grad mode, the buffers, the gradients waiting in .grad, and what its "
            "graph saved), and which of your lines touch any of it, also on the way out of an exception?",
            "Numbers from the notebook's probe: the evaluation under no_grad changes running_mean and running_var "
            "while their version counters stay at 0, and moves num_batches_tracked from 1 to 2 (version 2 to 3). "
            "Copying the saved buffers back afterwards brings every value back, moves running_mean's version to 1, "
            "and the pending backward then raises: a tensor it needs \"is at version 1; expected version 0\". For "
            "the modes: a training model whose batch norm alone is in evaluation mode lists [True, True, False, "
            "True, True, True]; after your block, also one that raises or holds a second block, the list must be "
            "the same.",
            "Trace the probe step by hand with your block: which tensors did the step's graph save, and does your "
            "manager write to any of them, or only flip flags it noted and switch recording off for as long as the "
            "block lasts? A layer that writes its buffer whatever its mode can be stopped by no flag: which tensor "
            "does it write to, is it the one the step saved, and does it have to be? Then follow the same block "
            "when its body raises: which of your lines still run before the exception reaches the caller?"),
        checks=("check_evaluating",), cells=("evaluating",)),
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
            "When autograd and central differences disagree on the pipeline from its input up to some stage, which "
            "stages could be at fault, and what would you have to hold fixed to put one stage alone on trial?",
            "Check values on `checks.team_pipeline(0)`: four of its nine stages are broken, and the eighth stage "
            "receives an inference tensor. On `checks.team_pipeline(6)` three stages are broken, and one of them "
            "agrees with central differences when it is given the pipeline's inputs. A smaller case for the noise: "
            "`torch.tanh` at the inputs of `checks.team_pipeline(0)`, weighted at random, agrees with central "
            "differences to within about 1e-9 of its gradient's largest entry. Central differences are far less "
            "accurate at a tie or a kink: the last stage of `checks.team_pipeline(3)` is a sound rescale that "
            "receives a row whose largest magnitude two entries share, and there they part from its gradient by about "
            "4e-7 of its largest entry (up to about 1e-6, depending on the weighting). And one for the weighting: the "
            "sum of a sorted row is the sum of the row, so which weighting of a sort's output can tell a right "
            "gradient from one that ignores the order?",
            "Trace `checks.team_pipeline(0)` by hand, one stage at a time: what does the stage receive when the "
            "pipeline runs, what single number built from its output lets autograd and central differences speak "
            "about every entry, and what do you call autograd's answer when that number does not require grad at "
            "all? Write down every stage's disagreement beside that of functions you trust, and look for the empty "
            "stretch between the two groups before you say where 'agrees' ends. Then ask whether a stage you named "
            "would still be named if every stage before it were sound."),
        checks=("check_find_cuts",), cells=("find_cuts",)),
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
