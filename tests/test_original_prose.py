"""The course's prose and code are its own: no run of 12 words from the source texts appears in a notebook.

The source texts live beside the repository in ../shared/seeds (the course team's material, not part of the
course); without them this test is skipped.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from autograder import course

SEEDS = course.ROOT.parent / "shared" / "seeds"
RUN = 12
#: PyTorch's own messages, which the sources quote too; a lesson shows the real one.
PYTORCH_MESSAGES = ["a leaf Variable that requires grad is being used in an in-place operation"]


def shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {tuple(words[i:i + RUN]) for i in range(len(words) - RUN + 1)}


def seed_shingles() -> set[tuple[str, ...]]:
    texts = [p.read_text() for p in SEEDS.glob("*.txt")]
    quoted = set().union(*(shingles(m) for m in PYTORCH_MESSAGES))
    return set().union(*(shingles(t) for t in texts)) - quoted


NOTEBOOKS = [*course.lessons(), *(course.source_notebook(a) for a in course.assignments())]


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"source texts not found at {SEEDS}")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_sentence_is_copied_from_the_sources(path):
    notebook = nbformat.read(path, as_version=4)
    copied = shingles("\n".join(c.source for c in notebook.cells)) & seed_shingles()
    assert not copied, f"{path.name} repeats the source texts: {sorted(' '.join(s) for s in copied)[:5]}"
