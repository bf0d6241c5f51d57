"""Exercise 06's hint book: for each part a question, then a check value or a smaller case, then the approach in
words (:mod:`autograder.hints`)."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(texts=(
        "A step's first call makes each momentum buffer and its later calls update one that already exists: which "
        "hazards can only a second call show, and after which of the caller's two resets is the next `.grad` the "
        "very tensor a buffer may share memory with?",
        "Check values, from the visible suspects: the given step (number 0) has no hazard, suspect 6 has two, and the "
        "eleven together have 18. A smaller case for your probes, in a scratch cell: with `t = torch.zeros(3)`, "
        "`t.detach() is t` is False while their data_ptr() are equal, and `t.data.add_(1)` leaves `t._version` at 0. "
        "Suspect 2 shows one hazard when you reset `.grad` to None only, and two when you reset it in place.",
        "Treat each hazard as an experiment with a control: before a call, keep what the call must not disturb (a "
        "copy of the values that matter, the memory addresses, the version numbers, a view); after it, ask whether "
        "the hazard's own question comes out yes, comparing memory where the hazard is about memory and values "
        "where it is about values. Run that for several calls and under both resets. Before you trust your audit, "
        "trace by hand what suspect 2 does on its second call after the in-place reset and a backward: which tensor "
        "does its in-place buffer update write into?"),
        checks=("check_audit_step",), cells=("audit_step",)),
    "B": PartHints(texts=(
        "The given step writes into some tensors in place at every update after the first one: which ones, and what "
        "does a record that holds those very tensors (rather than values of its own) read once training has gone on? "
        "And when your function returns, which list does the caller's name point to: the one it passed in, or one "
        "your function made?",
        "A smaller case to trace by hand or run: one parameter p = 1.0, training loss p squared, lr 0.1, momentum "
        "0.9, gradients cleared before each backward. After update 1 the buffer holds 2.0 (and p 0.8), after update "
        "2 it holds 3.4 (p 0.46), after update 3 it holds 3.98. Were update 1's weights the best, the caller's list "
        "would hold 2.0 when you return, even though the step went on to 3.98. In the resume cell below your answer, "
        "a right answer prints a difference of exactly 0: both runs do the same arithmetic in the same order.",
        "If the resume cell shows the two runs parting, find the first tensor that differs rather than rereading "
        "your code. For a moment, print one entry of your record of the buffers right after you take it, and again "
        "after the next update: a record must not move when training goes on (2.0 both times in hint 2's case). Do "
        "the same with a recorded weight, then check the caller's side: after your function returns, is the "
        "caller's list the object it passed in, and do its entries match an uninterrupted run of best_step "
        "updates? Held-out loss number 0 belongs to the weights before any update, and a tie keeps the earlier "
        "weights."),
        checks=("check_train_keep_best",), cells=("train_keep_best",)),
    "C": PartHints(texts=(
        "For each snippet: which of its tensors did each backward node keep (its input, its output, both, an "
        "index), and does a later line write into that memory (directly, through an index, or through a tensor "
        "that shares it), through `.data`, or into a leaf? Or does it cut a path, move a name, or skip a reset?",
        "A smaller case, in a "
        "scratch cell: after `y = x.tanh()`, `y.grad_fn._saved_result` and `y` share a `data_ptr()`, and "
        "`y._version` counts the in-place writes into `y`. `checks.run_snippet(\"S13\", x=[0.5, -1.0, 0.0])` "
        "runs a snippet that is not held back on inputs of your choice.",
        "Trace a case outside the bank first: after `u = x * 3` and `v = u.sinh()`, the only saved attribute of "
        "`v.grad_fn` (dir() lists the `_saved_` ones) has the `untyped_storage().data_ptr()` of u, not of v: sinh "
        "keeps its input, so an in-place edit of u makes backward refuse, and one of v would not. Asking each node "
        "of a snippet the same question gives its saved names, and with its in-place line most verdicts; never "
        "assume that an op keeps what a neighbouring op keeps. detach() and .data both share memory with the "
        "original, but only detach() shares the version counter; clone() shares neither."),
        checks=("check_snippets",), cells=("classify_snippets",)),
})
