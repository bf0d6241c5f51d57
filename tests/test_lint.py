"""ruff (configured in pyproject.toml) finds nothing in the package, the tests and the tooling."""

from __future__ import annotations

import subprocess
import sys

from autograder import course


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=course.ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
