"""The class to grade: who submitted, what changed since the last run, and what each run concluded.

State lives in ``grading/ASSIGNMENT/state.json`` in the course root: per student, a hash of the submission folder and
the outcome (status, score, reasons). A re-run grades only students whose hash changed, plus everyone when the
*context* changed (grading seed, limits, the assignment's source), unless ``--force``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

GRADED, FAILED = "graded", "failed"


@dataclass
class Outcome:
    """What grading concluded for one student."""

    status: str = GRADED  # GRADED, or FAILED: could not be graded (recorded as 0 with the reason)
    score: float = 0.0
    max_score: float = 0.0
    reasons: list[str] = field(default_factory=list)  # why it failed, or what happened on the way (timeouts...)
    hash: str = ""


def folder_hash(folder: Path) -> str:
    """sha256 over every file's relative path and bytes (symlinks by their target, never followed)."""
    digest = hashlib.sha256()
    if not folder.exists():
        return "missing"
    for path in sorted(folder.rglob("*")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest.update(f"link {relative} -> {os.readlink(path)}\n".encode())
        elif path.is_file():
            digest.update(f"file {relative} {path.stat().st_size}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def students(submitted: Path, assignment: str) -> list[str]:
    """Every student with a folder ``submitted/STUDENT/ASSIGNMENT/``, sorted."""
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())


class State:
    """``grading/ASSIGNMENT/state.json``: the previous run's context and outcomes."""

    def __init__(self, path: Path):
        self.path = path
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        self.context = data.get("context", "")
        self.outcomes = {name: Outcome(**value) for name, value in data.get("students", {}).items()}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"context": self.context, "students": {k: asdict(v) for k, v in sorted(self.outcomes.items())}}
        self.path.write_text(json.dumps(data, indent=1) + "\n")

    def unchanged(self, student: str, digest: str, context: str) -> bool:
        previous = self.outcomes.get(student)
        return previous is not None and previous.hash == digest and self.context == context


def context_hash(*parts) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]
