"""nbgrader configuration: the repository root is the course directory.

Sources (with solutions and hidden tests) live in ``solutions/``; ``nbgrader generate_assignment`` writes the
student release to ``exercises/``, which is committed. Everything an instructor's grading creates (``submitted/``,
``autograded/``, ``feedback/``, ``gradebook.db``, the exchange in ``.exchange/``) stays inside the repository and
is git-ignored, so nothing depends on ``~/.jupyter`` or system paths.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = "autograd-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.Exchange.root = os.path.join(ROOT, ".exchange")

# A learner's cell gets 60 s; an infinite loop is interrupted and graded as a failure, the batch goes on.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True

# A learner who deleted a test cell gets it back (and is graded on it) instead of silently skipping it.
c.OverwriteCells.add_missing_cells = True

# nbgrader scores a test cell 0 if it wrote anything to stderr. A library warning is not a wrong answer:
# drop stderr output that is a Python warning before grading. (The checks also silence warnings themselves,
# so Validate and the visible tests agree with the grade.)
c.IgnorePattern.pattern = r"\w*Warning\b"
c.IgnorePattern.enabled = True

# Keep feedback readable when a submission prints a lot or fails deep in a stack.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 60
