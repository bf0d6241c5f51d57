"""Exercise 06's hint book: for each part a question, then a check value or a smaller case, then the approach in
words (:mod:`autograder.hints`)."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(texts=(
        "torch.optim.SGD has no buffer for a parameter before that parameter's first step with momentum. What does it "
        "put there then, does dampening touch that first buffer, and could the buffer you store turn out to be "
        "`p.grad` under another name?",
        "Check values, one 0-d parameter $p = 1$ whose gradient is $0.5$ at both steps, `lr` $= 0.1$, momentum "
        "$0.9$: after step 1 the buffer is $0.5$ and $p = 0.95$. With dampening $0.5$, step 2 makes the buffer "
        "$0.7$ and $p = 0.88$. With Nesterov instead (dampening 0), step 1 moves $p$ to $0.905$. In a scratch cell a "
        "real `torch.optim.SGD` shows its buffer as `optimizer.state[p][\"momentum_buffer\"]`: compare yours with "
        "it, step after step, with `.grad` reset both ways.",
        "For each parameter that has a gradient: form the decayed gradient as a new tensor (never written into "
        "`.grad`); on the parameter's first step with momentum store a copy of it as its buffer, later scale the "
        "stored buffer by the momentum and add the dampened gradient; step along the buffer, or for Nesterov along "
        "the gradient plus momentum times the buffer; write the step into the parameter's own memory, where autograd "
        "does not record."),
        checks=("check_sgd_momentum_step", "check_train_keep_best"), cells=("sgd_momentum_step",)),
    "B": PartHints(texts=(
        "Your record of the best weights has to survive every in-place update that comes after it. Which ways of "
        "taking a record share memory with the parameters, how would you find out (`data_ptr()`, or the record "
        "after one more update), and which weights does held-out loss number 0 belong to?",
        "A smaller case: with steps = 3 and held-out losses $[0.9, 0.5, 0.4, 0.6]$, `best_step` is 2 and the model "
        "ends holding the weights after 2 updates, not 3; were all four losses equal, `best_step` would be 0. A "
        "view of a parameter taken with detach() before training must show the final values afterwards: that is "
        "how the test sees an in-place restore.",
        "Make the buffer list once, before the loop. For each of the steps + 1 sets of weights: measure the held-out "
        "loss without recording, as a float; when it is strictly lower than the best so far, copy every parameter "
        "into memory of its own; after the last measurement stop, otherwise clear the gradients, backpropagate the "
        "training loss and take your step. At the end write the copies back into the parameters, in place."),
        checks=("check_train_keep_best",), cells=("train_keep_best",)),
    "C": PartHints(texts=(
        "For each snippet: does it write into a leaf, into a tensor a backward node saved (directly, through an "
        "index, or through a tensor that shares its bookkeeping), or through `.data`? Or does it cut a path, move "
        "a name, or skip a reset?",
        "Measure what a node kept, in a scratch cell: after `y = x.tanh()`, `y.grad_fn._saved_result` and `y` "
        "share a `data_ptr()`, and `y._version` counts the in-place writes into `y`. A tensor whose version moved "
        "after a node saved it is what backward refuses. `checks.run_snippet(\"S13\", x=[0.5, -1.0, 0.0])` runs a "
        "snippet on inputs of your choice.",
        "Which tensors are saved decides most of them, and you can measure it instead of guessing by analogy: right "
        "after the line that makes a node, compare the data_ptr() of its grad_fn._saved_result or "
        "grad_fn._saved_self with the tensors you hold and note their _version; after the in-place line, read the "
        "_version again. A saved tensor whose version moved is what backward refuses, whatever the values did. "
        "detach() and .data both share memory with the original, but only detach() shares the version counter; "
        "clone() shares neither."),
        checks=("check_snippets",), cells=("classify_snippets",)),
})
