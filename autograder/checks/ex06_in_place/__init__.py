"""Checks for exercise 06, in-place operations and leaf tensors, one module per part: torch.optim.SGD's step with
momentum, dampening, Nesterov and weight decay written by hand, its momentum buffers kept as the learner's own state
(:mod:`.momentum`); training that keeps the best weights by held-out loss and puts them back in place
(:mod:`.best_weights`); 24 snippets the lesson did not show, each sorted into "raises" / "silently wrong" / "fine"
with the mechanism that decides it, graded snippet by snippet in three groups of eight (:mod:`.snippets`);
:mod:`.misconceptions` holds the mistakes of Parts A and B, :mod:`.hints` the hint book.

Decisions the exercise states to learners:

* the step leaves ``.grad`` as backward left it, as ``torch.optim.SGD.step()`` does (clearing it is the caller's
  ``zero_grad``), and every momentum buffer owns its memory: one that shares memory with a ``.grad`` is rewritten by
  the caller's ``zero_grad(set_to_none=False)`` and by the next backward;
* an update written into ``p.data`` (``p.data.sub_(...)``) writes the parameter's own memory and passes; assigning
  ``p.data = ...`` gives the parameter new memory and fails (a view taken before the step keeps the old values);
* no failure message shows a snippet's right verdict or mechanism: a message shows what running the snippet gives
  (the evidence) and, when two cases agree, the situation its group misjudged, as a question.
"""

from .best_weights import check_train_keep_best
from .hints import hint
from .momentum import check_sgd_momentum_step
from .snippets import check_snippets, run_snippet, show_snippets

__all__ = ["check_sgd_momentum_step", "check_snippets", "check_train_keep_best", "hint", "run_snippet",
           "show_snippets"]
