"""Exercise 06's named mistakes of Part B (what its check recognises them by is in its module; Part A's live with
its check in :mod:`.audit`, Part C's, one per group of snippets, with the snippets in :mod:`.snippets`). A learner
reads a mistake's question while working; its explanation comes with graded feedback."""

from __future__ import annotations

from ...checking import Misconception

# ------------------------------------------------------------------------------------------ Part B: the update

OUTSIDE_NO_GRAD = Misconception(
    "in-place update outside torch.no_grad()",
    "While autograd records, PyTorch refuses an in-place write into a leaf that requires grad. Do the update inside "
    "`with torch.no_grad():`, where nothing is recorded.",
    "Where does PyTorch allow an in-place write into a leaf that requires grad?")
NEW_STORAGE = Misconception(
    "p.data = ... is not an in-place update",
    "Assigning to p.data gives the parameter new memory: p shows the new numbers, but every view of the old memory "
    "(a tied weight, a slice another module holds) keeps the old ones. Write into the existing memory: `p.sub_(...)` "
    "or `p.copy_(...)` under torch.no_grad().",
    "Does your update write into the memory the parameter already has, or give it new memory?")

# ------------------------------------------------------------------------------------------ Part B: the best weights

LOSS_ONCE = Misconception(
    "the loss computed once, outside the loop",
    "backward() frees the graph it walks, and the weights change every step: call train_loss() anew in every step.",
    "How many graphs does your loop build, and how many times does it walk one?")
STALE_GRADIENT = Misconception(
    "a gradient left from before training used in the first step",
    "The model arrived with a .grad from an earlier backward pass (an evaluation, a previous run). backward() adds "
    "into it, so the first update used the sum of the old and the new gradient. Clear the gradients before every "
    "backward, the first one included (model.zero_grad()).",
    "What did .grad hold when your first backward ran?")
ACCUMULATED = Misconception(
    "gradients accumulated across steps",
    "backward() adds into .grad; clear it before every backward, or each step uses the sum of all gradients so far.",
    "What does .grad hold when the second step's backward has run?")
MOMENTUM_IGNORED = Misconception(
    "momentum left out",
    "The part trains with SGD with momentum: every update goes through your sgd_momentum_step with the momentum "
    "given, and its buffers live for the whole run (one list, made once, before the first step).",
    "Where does momentum enter your loop, and how long do its buffers live?")
TRAINED_ON_HELD_OUT = Misconception(
    "trained on the held-out loss",
    "held_out_loss() only measures: the gradients come from train_loss(). A model trained on the data that picks "
    "its best weights has no honest held-out loss left.", "Which loss do your gradients come from?")
HELD_OUT_RECORDED = Misconception(
    "the held-out loss recorded a graph",
    "A loss you only read needs no graph: evaluate held_out_loss() under torch.no_grad(), or autograd keeps every "
    "activation of the held-out pass alive until the loss tensor dies.",
    "Does autograd record while your held-out loss is computed, and will anything ever walk that graph?")
START_SKIPPED = Misconception(
    "the starting weights not a candidate",
    "Training can make the held-out loss worse from the first update on: the weights before any update (held-out loss "
    "number 0) are a candidate like the others, and then the best step is 0.",
    "Which weights does held-out loss number 0 belong to, and can they be the best?")
BEST_AMONG_UPDATES = Misconception(
    "best_step counted among the updates (one too low)",
    "held_out_losses[0] belongs to the weights before any update and held_out_losses[k] to those after update k: "
    "best_step is the index into that list.", "Which index of held_out_losses does your best_step point at?")
LATER_ON_TIES = Misconception(
    "a later step preferred on a tie",
    "Where several weights share the lowest held-out loss, the earliest wins: a later one is no improvement. "
    "Replace the best only on a strictly lower loss.",
    "When a later held-out loss equals the best so far, is it an improvement?")
NOT_RESTORED = Misconception(
    "the best weights never came back",
    "The model ends with the last weights. Either the record of the best weights shared memory with the parameters "
    "(p.detach(), p.data, the parameter itself or model.state_dict(), whose tensors ARE the parameters' memory: the "
    "next in-place update rewrote it), or the restore bound names instead of writing into the parameters. Keep a copy "
    "that owns its memory (p.detach().clone(), copy.deepcopy(model.state_dict())) and write it back in place "
    "(p.copy_(best) under torch.no_grad(), or model.load_state_dict(best)).",
    "Did your record of the best weights own its memory while training went on, and did the restore write into the "
    "model's own parameters?")
NEIGHBOUR_RESTORED = Misconception(
    "the weights of a neighbouring step restored",
    "The record must be taken of the weights whose held-out loss was just measured: measure, compare, copy; and only "
    "then update.", "Which update had the weights you copied been through when you measured their held-out loss?")
PARAMETERS_REPLACED = Misconception(
    "the model's parameters replaced",
    "Restoring must write into the parameters the model already has: an optimizer, a tied weight or a hook holding "
    "the old tensors would otherwise go on with the old ones. Copy in place (p.copy_ under torch.no_grad(), "
    "load_state_dict without assign=True).",
    "Are the model's parameters after your function the same tensors as before?")
BUFFERS_NOT_RESTORED = Misconception(
    "the momentum buffers recorded by reference",
    "The given step updates each existing buffer in place (mul_, add_), so a record that holds the same tensors (a "
    "copy of the list, detach(), the buffers themselves) follows every later update: at the end it reads the last "
    "step's buffers. Record each buffer with clone() when you record the weights, and put those copies into the "
    "caller's list.",
    "Which tensors does your record of the buffers hold, and what does each later step do to them?")
BUFFERS_LIST_REBOUND = Misconception(
    "the caller's list of buffers never written (rebinding)",
    "After the training loop the caller's list was never written into: either nothing put the record back, or "
    "`momentum_buffers = ...` rebound your function's own name to another list, which the caller never sees. Its "
    "list still holds the last step's buffers. Write into the list itself (momentum_buffers[:] = record).",
    "After your function returns, which list does the caller hold, and did your function ever write into it?")
BUFFERS_NOT_RESET = Misconception(
    "the buffers not back to None for best_step 0",
    "Before the first update the caller's list holds None for every parameter: the given step makes a buffer at its "
    "first update. When the best weights are the start's (best_step 0), the momentum state that goes with them is no "
    "buffer at all: not a buffer of zeros, not the last step's. The restore put the recorded buffers back where the "
    "record had tensors, but left tensors in the caller's list where the record holds None. Put the whole record "
    "into the caller's list, its None entries included.",
    "What did the caller's list hold before the first update, and what must it hold again when the best weights are "
    "the start's?")
