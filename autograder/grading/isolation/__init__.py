"""Isolation: what keeps a submission from the machine, from the grade and from the other submissions.

The ground floor of the grader: it imports nothing of the other rooms, and what it holds runs in the worker's
processes (:mod:`..worker`), not in the grader's.

* :mod:`.sandbox` the bubblewrap view every worker server runs in: the Python installation and the course package
  read-only, the course, the grader's home and the other workers hidden, no network; :func:`~.sandbox.probe` refuses
  loudly where it cannot be built;
* :mod:`.confine` the forked child that runs one notebook confines itself: session, limits, folder, environment, and
  an audit hook no submission can remove;
* :mod:`.pristine` the checks' world as it was before any submission ran (modules, classes, ``sys.modules``), and
  how to put it back: fully before every instructor cell, its core every time learner code returns to a check.
"""
