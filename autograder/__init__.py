"""The autograd course's package: checks, oracles, the class grader, the course's tools (docs/maintainers.md maps it).

Imported in a notebook on Binder, it says once that the session's work is lost when the session ends
(:func:`autograder.progress.announce_binder`).
"""

from .progress import announce_binder as _announce_binder

_announce_binder()
