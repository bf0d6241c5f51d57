"""``python -m autograder.lms COMMAND``: see :mod:`autograder.lms.cli`."""

import sys

from .cli import main

sys.exit(main())
