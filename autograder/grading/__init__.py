"""``python -m autograder grade``: grade a whole class in parallel, safely, through nbgrader's own pipeline.

* :mod:`.cli` the command line and the summary; :mod:`.run` one run, from ``submitted/`` to the report;
  :mod:`.notes` what happened to a submission, in words; :mod:`.report` grades CSV and class report;
  :mod:`.batch` what changed since the last run.
* :mod:`.nbgrader_app` nbgrader driven in-process (its sanitizing, Autograde, gradebook, feedback);
  :mod:`.replay` its sanitize and Execute steps answered from the sandboxed run.
* :mod:`.executor` (in the grader) starts one :mod:`.server` per worker inside :mod:`.sandbox` (bubblewrap) and
  talks to it in :mod:`.protocol`'s typed messages; the server forks a child per notebook, which confines itself
  (:mod:`.confine`), runs the cells in :mod:`.kernel` and puts the checks' world back before every instructor cell
  (:mod:`.pristine`).
"""
