"""The README's table and links are true: every lesson and exercise is listed, every local link resolves."""

from __future__ import annotations

import re

from autograder import course

README = (course.ROOT / "README.md").read_text()
LINKS = re.findall(r"\]\(([^)#\s]+)\)", README)


def test_local_links_resolve():
    local = [link for link in LINKS if "://" not in link]
    missing = [link for link in local if not (course.ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_every_lesson_and_exercise_is_in_the_table():
    listed = set(LINKS)
    for lesson in course.lessons():
        assert f"lessons/{lesson.name}" in listed, f"{lesson.name} is missing from the README table"
    for assignment in course.assignments():
        assert f"exercises/{assignment}/{assignment}.ipynb" in listed, f"{assignment} is missing from the README"


def test_readme_states_the_two_commands_and_ci_runs_one_of_them():
    assert "make lab" in README and "make test" in README
    assert "make test" in (course.ROOT / ".ci" / "run").read_text()
