"""The late-penalty policy moved to :mod:`autograder.grading.orchestration.late` (the grader applies it).

This name stays for course configurations that name ``autograder.lms.late.LatePenalty`` as nbgrader's
late-submission plugin (``c.AssignLatePenalties.plugin_class``): the same class, not a copy.
"""

from ..grading.orchestration.late import (  # noqa: F401 - names kept for configurations and callers
    EXTENSION_COLUMNS,
    ExtendError,
    Extension,
    LatePenalty,
    LateSubmission,
    apply_extensions,
    describe_lateness,
    extend,
    keep_extension,
    late_submissions,
    read_extensions,
    recompute,
    regenerate_feedback,
    report_lines,
)
