"""Checks for exercise 02, a scalar autograd engine: the learner's ``Value`` class, one module per part: Parts A and B
(:mod:`.operations`), Part C (:mod:`.backward`), Part D (:mod:`.engine`); :mod:`.programs` holds the programs every
case is made of, how learner code runs on them and the random graphs, :mod:`.misconceptions` the named mistakes,
:mod:`.hints` the hint book.

Every case is a small *program* of steps (``u1 = x * y; out = 2 - u1``) that runs three ways: on the learner's
``Value`` objects, on float64 torch scalars (the autograd oracle) and through central differences. The parts are
graded independently:

* Parts A (arithmetic) and B (nonlinearities, power) run one operation with the learner's operators, give the
  inputs a non-zero ``.grad`` already and the output a random upstream ``.grad``, then run the learner's ``_backward``
  closures with the course's own traversal (never the learner's ``backward()``), so ``=`` for ``+=`` and a missing
  upstream factor both show.
* Part C runs the learner's ``backward()`` on graphs of the learner's ``Value`` nodes that carry the course's own
  local rules; the rules record when they run, which names the traversal mistake (double visits, wrong order, ...).
* Part D runs the whole engine on expressions and random graphs that reuse nodes, with numbers on either side, then
  grades a bug hunt: three helpers that each wrap a float read from .data in a new Value, of which only one
  (third_moment) loses a route; the learner names it, reports the gap measured with engine vs central differences,
  and fixes it.

Part A also asks for ``maximum``, whose ties (the next case after lesson 02's "max routes") are decided by measuring:
central differences and torch.maximum split a tie in halves.

The engine is built from scratch, so learner code runs with autograd forbidden (``Route.AUTOGRAD``). Every case is a
trial; each catalogued mistake shows in at least two cases of the public and of the hidden test (a mistake the check
observes directly, such as a node run twice or an operand changed in place, is named at once).
"""

from .backward import check_backward
from .engine import check_bug_hunt, check_engine
from .hints import hint
from .operations import check_arithmetic, check_functions

__all__ = ["check_arithmetic", "check_backward", "check_bug_hunt", "check_engine", "check_functions", "hint"]
