"""``python -m autograder grade``: grade a whole class in parallel, safely, through nbgrader's own pipeline.

Three rooms, each importing only the rooms below it (``tests/test_grading_structure.py`` holds them to it), each
with its map in its docstring:

* :mod:`.orchestration` the command, the run, nbgrader driven in-process, saved state, notes, reports, late penalties;
* :mod:`.worker` the pool of worker servers, the fork server, the kernel that executes cells, their typed messages;
* :mod:`.isolation` the sandbox (bubblewrap), the confined child, the checks' pristine world.

One submission's way through a run, forward only: each file read once, the gradebook opened once per assignment for
the scores.

1. ``Assignment(...)`` (``orchestration/assignment.py``) reads the submission folder once: its hash says whether it
   changed since the last run (``state.json``), and the notebooks' bytes are kept;
2. ``Assignment.prepare``: each notebook, parsed from those bytes, is sanitized in memory by nbgrader's own sanitize
   preprocessors (``orchestration/nbgrader_app.py``); what sanitizing undid becomes a note; the code cells become a
   ``Job``;
3. ``Pool.execute`` (``worker/pool.py``): a worker server (``worker/server.py``, in the bubblewrap sandbox of
   ``isolation/sandbox.py``) forks a child that confines itself (``isolation/confine.py``) and executes the cells
   (``worker/kernel.py``), restoring the checks' world (``isolation/pristine.py``) before each instructor cell; the
   pool checks every message the child sends and yields an ``Execution``;
4. ``Assignment.executed``: notes, course bugs (known by type) and diagnoses go into the student's ``Outcome``;
5. ``Assignment.grade``: nbgrader's Autograde runs its autograde preprocessors once, on the sanitized notebook with
   the execution's outputs (``orchestration/replay.py``: no kernel, nothing read back), and records the grades and
   the late penalty in the gradebook; then nbgrader's feedback (or 0 and a page saying why);
6. ``Assignment.finish``, once per assignment: the late policy again for the students not graded in this run only,
   one gradebook session for every score, then ``state.json`` (the Outcomes: score, reasons, diagnoses),
   ``grades.csv`` and the class report, from memory.
"""
