"""The late-penalty policy lives in :mod:`autograder.grading.orchestration.late` (the grader applies it).

This name stays only for course configurations written before the policy moved, which name
``autograder.lms.late.LatePenalty`` as nbgrader's late-submission plugin (``c.AssignLatePenalties.plugin_class``):
the same class, not a copy (``tests/test_lms_late.py``). The course's own ``nbgrader_config.py`` names the new place.
"""

from ..grading.orchestration.late import LatePenalty

__all__ = ["LatePenalty"]
