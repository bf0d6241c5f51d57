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
        "Your record of the best weights has to survive every in-place update that comes after it. Which ways of "
        "taking a record share memory with the parameters, how would you find out (`data_ptr()`, or the record "
        "after one more update), which weights does held-out loss number 0 belong to, and what does the given step "
        "do to a momentum buffer that already exists?",
        "A smaller case: with steps = 3 and held-out losses $[0.9, 0.5, 0.4, 0.6]$, `best_step` is 2 and the model "
        "ends holding the weights after 2 updates, not 3; were all four losses equal, `best_step` would be 0. A "
        "view of a parameter taken with detach() before training must show the final values afterwards: that is "
        "how the test sees an in-place restore.",
        "For each of the steps + 1 sets of weights: measure the held-out loss without recording, as a float; when it "
        "is strictly lower than the best so far, record the parameters and the buffers the caller's list holds at "
        "that moment, each in memory of its own (a buffer may still be None); after the last measurement stop, "
        "otherwise clear the gradients, backpropagate the training loss and take the given step with the caller's "
        "list. At the end write the recorded weights back into the parameters, in place, and the recorded buffers "
        "into the caller's list itself."),
        checks=("check_train_keep_best",), cells=("train_keep_best",)),
    "C": PartHints(texts=(
        "For each snippet: which of its tensors did each backward node keep, its input or its output, and does a "
        "later line write into that memory (directly, through an index, or through a tensor that shares it), "
        "through `.data`, or into a leaf? Or does it cut a path, move a name, or skip a reset?",
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
