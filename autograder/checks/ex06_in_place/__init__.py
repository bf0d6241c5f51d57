"""Checks for exercise 06, in-place operations and leaf tensors, one module per part: an audit that finds, by running
it, which in-place hazards an optimizer step with momentum has (:mod:`.audit`); training that keeps the best weights
by held-out loss and puts them back in place (:mod:`.best_weights`); 24 snippets the lesson did not show, each
sorted into "raises" / "silently wrong" / "fine" with the mechanism that decides it and, for a gradient snippet, the
tensors its backward nodes saved, graded snippet by snippet in three groups of eight (:mod:`.snippets`);
:mod:`.misconceptions` holds the mistakes of Part B (Part A's live in :mod:`.audit`), :mod:`.hints` the hint book.

Decisions the exercise states to learners:

* Part A's hazards are defined by what happens at some call of a run (the oracle runs three), with .grad reset
  between calls as training loops do (None, or zero_() in place): a buffer that is a .grad's memory, a .grad whose
  values change, a parameter given new memory (``p.data = ...``, ``p.set_(...)``), and a write the version counter
  does not see (``p.data.sub_(...)``);
* no failure message shows a snippet's right verdict, mechanism or saved tensors: a message shows what running the
  snippet gives (the evidence) and, when two cases agree, the situation its group misjudged, as a question; for the
  snippets held back from the notebook it says only which one is wrong (what running it gives would be the answer).
"""

from .audit import check_audit_step, suspect_steps
from .best_weights import check_train_keep_best
from .hints import hint
from .snippets import check_snippets, run_snippet, show_snippets

__all__ = ["check_audit_step", "check_snippets", "check_train_keep_best", "hint", "run_snippet", "show_snippets",
           "suspect_steps"]
