"""The README is the front door, one screen long, and true: every lesson and exercise is listed, every local link
resolves (in docs/ too), and the two commands are the ones CI runs."""

from __future__ import annotations

import re

import pytest

from autograder import course

README = (course.ROOT / "README.md").read_text()
LINKS = re.findall(r"\]\(([^)#\s]+)\)", README)
PAGES = [course.ROOT / "README.md", *sorted((course.ROOT / "docs").glob("*.md"))]
#: A newcomer reads the front door in about five minutes; the rest is in docs/.
README_WORDS = 1200


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_local_links_resolve(page):
    local = [link for link in re.findall(r"\]\(([^)#\s]+)\)", page.read_text()) if "://" not in link]
    missing = [link for link in local if not (page.parent / link).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


def test_the_readme_is_one_screen_and_links_every_docs_page():
    assert len(README.split()) <= README_WORDS, f"README.md has {len(README.split())} words"
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in LINKS, f"README.md does not link docs/{page.name}"


def test_every_lesson_and_exercise_is_in_the_table():
    listed = set(LINKS)
    for lesson in course.lessons():
        assert f"lessons/{lesson.name}" in listed, f"{lesson.name} is missing from the README table"
    for assignment in course.assignments():
        assert f"exercises/{assignment}/{assignment}.ipynb" in listed, f"{assignment} is missing from the README"


def test_readme_states_the_two_commands_and_ci_runs_one_of_them():
    assert "make lab" in README and "make test" in README
    assert "make test" in (course.ROOT / ".ci" / "run").read_text()
