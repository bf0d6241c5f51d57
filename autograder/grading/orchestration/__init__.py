"""Orchestration: the command, the run, and nbgrader driven in-process, from ``submitted/`` to the reports.

It imports :mod:`..worker` (to execute) and :mod:`..isolation` (to say why a sandbox is missing), nothing above.

* :mod:`.cli` ``python -m autograder grade``: the command line and the progress bar;
* :mod:`.run` one run: every assignment prepared, one pool of workers, each assignment's submissions streamed
  through (sanitize ahead of the workers, grade as each student's notebooks finish);
* :mod:`.assignment` one assignment's share of a run: who is graded, each student's way through nbgrader, and the
  end of the assignment (one gradebook session for the scores, the saved state, the reports);
* :mod:`.nbgrader_app` nbgrader in-process for one assignment: configuration, sanitizing, Autograde, gradebook,
  feedback;
* :mod:`.replay` nbgrader's Autograde answered from the run: the notebook already sanitized, the outputs of the
  sandboxed execution; never a kernel;
* :mod:`.late` the late-penalty policy (nbgrader's late-submission plugin) and extensions;
* :mod:`.state` what a run keeps for the next one (``grading/ASSIGNMENT/state.json``): hashes and outcomes;
* :mod:`.notes` what happened to a submission, in words;
* :mod:`.report` the summary, grades CSV, failure feedback, class report, and the diagnoses read from a run's outputs.
"""
