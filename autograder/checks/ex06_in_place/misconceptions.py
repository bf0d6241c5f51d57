"""Exercise 06's named mistakes of Parts A and B, one place for both (what each check recognises them by is in its
part's module; Part C's, one per group of snippets, live with the snippets in :mod:`.snippets`). A learner reads a
mistake's question while working; its explanation comes with graded feedback."""

from __future__ import annotations

from ...checking import Misconception

# ------------------------------------------------------------------------------------------ Part A: the step

OUTSIDE_NO_GRAD = Misconception(
    "in-place update outside torch.no_grad()",
    "While autograd records, PyTorch refuses an in-place write into a leaf that requires grad. Do the update inside "
    "`with torch.no_grad():`, where nothing is recorded.",
    "Where does PyTorch allow an in-place write into a leaf that requires grad?")
NO_GRADIENT = Misconception(
    "a parameter without a gradient",
    "A parameter that took no part in the loss has .grad None. Skip it (`if p.grad is None: continue`), as "
    "torch.optim.SGD does: no step, no decay, no momentum buffer.",
    "What does .grad hold for a parameter that took no part in the loss?")
NOT_A_LEAF = Misconception(
    "w stops being a leaf",
    "`params[i] = p - lr * d` replaces the parameter by the output of a subtraction, and the model still uses the old "
    "one; update the same tensor in place instead.",
    "Which tensor does the model use in its next forward pass: the one in params before your step, or after?")
NEW_STORAGE = Misconception(
    "p.data = ... is not an in-place update",
    "Assigning to p.data gives the parameter new memory: p shows the new numbers, but every view of the old memory "
    "(a tied weight, a slice another module holds) keeps the old ones. Write into the existing memory: `p.sub_(...)` "
    "or `p.copy_(...)` under torch.no_grad().",
    "Does your update write into the memory the parameter already has, or give it new memory?")
NEVER_MOVED = Misconception(
    "the parameters never moved",
    "Your updates never reached the caller's tensors: `p = p - lr * d` builds a new tensor and binds a local name. "
    "Update in place under torch.no_grad().",
    "After your function returns, which tensors hold the new values: the caller's, or new ones of yours?")
UPHILL = Misconception("moved uphill", "Gradient descent subtracts lr times the direction.",
                       "Does your step go with the gradient or against it?")
NO_LR = Misconception("learning rate ignored", "Scale the direction by lr.", "Where does lr enter your step?")
GRAD_CHANGED = Misconception(
    "the step changed .grad",
    "torch.optim.SGD.step() leaves every .grad as backward left it: clearing gradients is the caller's zero_grad(), "
    "and code that reads .grad after the step (a gradient-norm log, clipping statistics) relies on that. Build the "
    "decayed gradient as a new tensor (`g = p.grad + wd * p`), never with an in-place add into p.grad.",
    "What does p.grad hold after your step, and who else reads it?")
BUFFER_SHARED = Misconception(
    "a momentum buffer that shares memory",
    "The buffer is state of its own: the caller's zero_grad(set_to_none=False) zeroes .grad in place and the next "
    "backward adds into it, so a buffer that is .grad under another name is wiped and rewritten behind your back. "
    "Make the first buffer a copy: `g.detach().clone()`.",
    "Which other tensor does your buffer share memory with, and what will zero_grad() and the next backward do to it?")
STATE_LOST = Misconception(
    "momentum buffers not kept in momentum_buffers",
    "The caller keeps the optimizer's state between steps in the list it hands you: put each new buffer into "
    "momentum_buffers[i] (a local variable, or a new list, is gone when the function returns).",
    "Where does your buffer live once the function returns?")
BUFFER_FOR_NONE = Misconception(
    "a momentum buffer where torch.optim.SGD keeps none",
    "torch.optim.SGD creates a parameter's buffer on its first step with momentum and a gradient; with momentum 0, or "
    "for a parameter that has had no gradient yet, there is no buffer (None).",
    "When does a parameter get its first buffer: at the optimizer's first step, or at its own first gradient?")
FIRST_STEP_DAMPED = Misconception(
    "the first buffer dampened (a buffer started at zeros)",
    "On a parameter's first step torch.optim.SGD sets the buffer to the gradient itself, undamped; dampening scales "
    "the gradient only from the second step on. A buffer started at zeros and updated gives (1 − dampening)·g.",
    "What does torch.optim.SGD put in a buffer that does not exist yet, and does dampening touch it?")
DAMPENING_SWAPPED = Misconception(
    "dampening where 1 − dampening belongs",
    "From the second step the buffer is b ← μ·b + (1 − dampening)·g: dampening is how much of the new gradient is "
    "left out.", "How much of the new gradient enters the buffer when dampening is 0?")
NESTEROV_IGNORED = Misconception(
    "Nesterov ignored",
    "With nesterov=True the direction is g + μ·b (the gradient plus the momentum term), not the buffer b.",
    "What direction does torch.optim.SGD step along when nesterov is True?")
NESTEROV_UNDECAYED = Misconception(
    "Nesterov's gradient term without the decay",
    "The Nesterov direction is g + μ·b with g the decayed gradient p.grad + λ·p: the decay is in both terms.",
    "Which gradient does the Nesterov direction add to μ·b: p.grad, or the decayed one?")
DECAY_OUTSIDE = Misconception(
    "weight decay kept out of the momentum buffer",
    "torch.optim.SGD adds λ·p to the gradient before the buffer is updated, so the decay is carried by momentum too "
    "(that is what distinguishes it from decoupled decay, AdamW's).",
    "Does the decay term enter the buffer, or only the step?")
DECAY_IGNORED = Misconception(
    "weight decay ignored", "With weight_decay = λ the gradient is p.grad + λ·p before anything else happens.",
    "Where does weight_decay enter your step?")
DECAY_SIGN = Misconception(
    "weight decay with the wrong sign", "Weight decay pulls every weight towards 0: the gradient is p.grad + λ·p.",
    "Which way does weight decay pull a weight?")
ZERO_SKIPPED = Misconception(
    "a zero gradient taken for no gradient",
    "A gradient that is exactly zero is still a gradient: the parameter took part in the loss, so torch.optim.SGD "
    "decays it, creates its buffer and moves it by its momentum. Skip only `p.grad is None`.",
    "Is a gradient of exact zeros the same as no gradient?")
FROZEN_STEPPED = Misconception(
    "a parameter without a gradient stepped",
    "A parameter whose .grad is None took no part in this loss; torch.optim.SGD skips it entirely: no decay, no "
    "momentum, no buffer.", "What does torch.optim.SGD do to a parameter whose .grad is None?")
BUFFER_WITH_LR = Misconception(
    "a buffer holding lr times torch's (a velocity)",
    "torch.optim.SGD's buffer accumulates gradients and lr multiplies the direction when the step is taken. A "
    "velocity v ← μ·v + lr·g gives the same steps only while lr never changes (a schedule breaks it), and it is not "
    "the state the optimizer saves; also check that no in-place multiplication of the direction by lr wrote into "
    "the buffer.", "Is the learning rate inside your buffer?")
BUFFER_SIGN = Misconception(
    "a buffer with the opposite sign",
    "torch.optim.SGD's buffer accumulates gradients (uphill) and the step subtracts lr times the direction.",
    "Does your buffer point uphill, as torch's does, or downhill?")

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
