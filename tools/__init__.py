"""Grading tooling that needs a checkout of the repository (it reads tests/): synthetic classes for the tests,
``make grade-demo`` and ``make bench``. Not part of the installed package; run from the repository root
(``python -m tools.bench``)."""
