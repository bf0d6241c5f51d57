"""``python -m autograder grade``: grade a whole class in parallel, safely, through nbgrader's own pipeline.

Two phases per run (see :mod:`autograder.grading.command`):

1. **Execute** (parallel): each submission is sanitized exactly as nbgrader would (:mod:`.nbgrader_app`) and run in
   a fresh process forked from a server that has already imported torch (:mod:`.executor`, :mod:`.preload`). The
   process is confined (:mod:`.sandbox`), runs the cells in an IPython shell (:mod:`.kernel`) and puts the checks'
   world back before every instructor cell (:mod:`.pristine`).
2. **Grade** (serial, in this process): nbgrader's Autograde converter with its Execute preprocessor replaced by one
   that returns the phase-1 outputs (:mod:`.replay`), so nbgrader's grading rules and gradebook records are its own;
   then feedback, a grades CSV and a class report (:mod:`.report`).
"""
