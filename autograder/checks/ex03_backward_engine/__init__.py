"""Checks for exercise 03, the backward engine, one module per part: PyTorch's backward order (:mod:`.order`), the
gradients accumulated as the engine runs (:mod:`.gradients`), a bucketed all-reduce made of hooks
(:mod:`.allreduce`); :mod:`.graphs` holds the dict graphs of Parts A and B and the walks a wrong order may come
from, :mod:`.misconceptions` the named mistakes, :mod:`.hints` the hint book.

Every case is a :func:`~autograder.checking.trial`, and each misconception shows in at least two cases of the
visible and of the hidden test, so that it can be named (one coincidence never is). Parts A and B are plain Python:
autograd is forbidden inside them and the learner's dicts must come back unchanged. Part B is graded with the
course's own ``backward_order`` in the learner's namespace, so that a mistake in Part A costs Part A only. Part C's
hooks run inside backward passes the check drives itself, and talk to each other only through the check's own
``all_reduce``, which records every call.
"""

from .allreduce import check_attach_allreduce_hooks
from .gradients import check_accumulate_gradients
from .graphs import traversal_kind
from .hints import hint
from .misconceptions import BREADTH_FIRST, INPUT_BEFORE_CONSUMER, PREORDER
from .order import check_backward_order

__all__ = ["BREADTH_FIRST", "INPUT_BEFORE_CONSUMER", "PREORDER", "check_accumulate_gradients",
           "check_attach_allreduce_hooks", "check_backward_order", "hint", "traversal_kind"]
