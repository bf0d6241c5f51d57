"""What a run keeps for the next one: who submitted, what each submission was, what grading concluded.

State lives in ``grading/ASSIGNMENT/state.json`` in the course root: per student, a hash of the submission folder and
the :class:`Outcome` (status, score, reasons, diagnoses). A re-run grades only students whose hash changed, plus
everyone when the *context* changed (grading seed, limits, the assignment's source, this file's format), unless
``--force``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

GRADED, FAILED = "graded", "failed"
#: Part of every context: a state written in an older format is graded again once (it lacks the diagnoses).
FORMAT = 2


@dataclass
class Outcome:
    """What grading concluded for one student."""

    status: str = GRADED  # GRADED, or FAILED: could not be graded (recorded as 0 with the reason)
    score: float = 0.0  # the gradebook's, before the late penalty
    max_score: float = 0.0
    reasons: list[str] = field(default_factory=list)  # why it failed, or what happened on the way (timeouts...)
    hash: str = ""
    diagnoses: dict[str, list[str]] = field(default_factory=dict)  # test cell -> misconceptions its failure named


def read_submission(folder: Path, notebooks: list[str]) -> tuple[str, dict[str, bytes]]:
    """(sha256 over every file's relative path and bytes, symlinks by their target and never followed; the bytes of
    ``notebooks`` (``NAME.ipynb``) as read for it): each file of the submission is read once."""
    digest = hashlib.sha256()
    kept: dict[str, bytes] = {}
    if not folder.exists():
        return "missing", kept
    for path in sorted(folder.rglob("*")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest.update(f"link {relative} -> {os.readlink(path)}\n".encode())
        elif path.is_file():
            data = path.read_bytes()
            digest.update(f"file {relative} {len(data)}\n".encode())
            digest.update(data)
            if relative in notebooks:
                kept[relative] = data
    return digest.hexdigest(), kept


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
        known = {item.name for item in fields(Outcome)}
        self.outcomes = {name: Outcome(**{k: v for k, v in value.items() if k in known})
                         for name, value in data.get("students", {}).items()}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"context": self.context, "students": {k: asdict(v) for k, v in sorted(self.outcomes.items())}}
        self.path.write_text(json.dumps(data, indent=1) + "\n")

    def unchanged(self, student: str, digest: str, context: str) -> bool:
        previous = self.outcomes.get(student)
        return previous is not None and previous.hash == digest and self.context == context


def context_hash(*parts) -> str:
    return hashlib.sha256(json.dumps([FORMAT, *map(str, parts)]).encode()).hexdigest()[:16]
