"""deploy/tljh/install.sh, run as a course team runs it, into a staging root (``DESTDIR``) whose ``opt/tljh`` holds
stand-ins for The Littlest JupyterHub's tools: ``conda`` and ``pip`` of the user environment, the hub environment's
``python3`` and ``tljh-config`` record how they were called (TLJH itself is not installed here), and the course
copy's ``binder/postBuild`` records where and with which PATH it ran (tests/test_binder.py runs the real one in a
scratch environment). Checked: where every file lands with which mode (the learners read the course but not
``solutions/``, the exchange is world-writable and sticky, the hub's settings are private), the order of the calls
(the environment before postBuild, the reload last), and that a second run keeps the values a course team filled in.

tests/hub.py sets up its hub's files by hand, the way this script does (it cannot reload a TLJH hub): the hub test
and this one together cover the installed layout.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from autograder import course

SCRIPT = Path("deploy/tljh/install.sh")
COURSE_HOME = "srv/autograd-course"
TLJH_CONFIG = "opt/tljh/config"

#: A stand-in: appends its name, working folder, first PATH entry and arguments to $CALLS, one line a call.
RECORDER = """#!/usr/bin/env bash
printf '%s\\t%s\\t%s\\t%s\\n' "{name}" "$PWD" "${{PATH%%:*}}" "$*" >> "$CALLS"
"""


def copy_tracked_files(destination: Path) -> Path:
    """The repository's tracked files as the working tree has them (uncommitted changes included): a clone's tree."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=course.ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = course.ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name, follow_symlinks=False)
    return destination


def stand_in(path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RECORDER.format(name=name))
    path.chmod(0o755)


def calls(root: Path) -> list[tuple[str, str, str, str]]:
    return [tuple(line.split("\t")) for line in (root / "calls.txt").read_text().splitlines()]


def run_install(tmp: Path, repo: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DESTDIR": str(tmp / "root"), "CALLS": str(tmp / "calls.txt"),
           "PATH": f"{tmp / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    return subprocess.run(["bash", str(repo / SCRIPT)], cwd=repo, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(scratch folder, the repository copy, the first run, the second run after the team filled in its values)."""
    tmp = tmp_path_factory.mktemp("tljh")
    repo = copy_tracked_files(tmp / "clone")
    stand_in(repo / "binder" / "postBuild", "postBuild")
    root = tmp / "root"
    stand_in(root / "opt/tljh/user/bin/conda", "conda")
    stand_in(root / "opt/tljh/user/bin/pip", "pip")
    stand_in(root / "opt/tljh/hub/bin/python3", "hub-python3")
    stand_in(tmp / "bin" / "tljh-config", "tljh-config")
    first = run_install(tmp, repo)
    assert first.returncode == 0, first.stdout + first.stderr
    filled = {name: root / TLJH_CONFIG / name for name in ("jupyterhub_config.d/lti13.py", "config.yaml")}
    for path in filled.values():
        path.write_text(path.read_text() + "\n# the course team's own values\n")
    (repo / "lessons" / "NEW.md").write_text("pulled later\n")  # `git pull`, then the script again
    second = run_install(tmp, repo)
    assert second.returncode == 0, second.stdout + second.stderr
    return tmp, repo, first, second


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_learners_read_the_course_but_not_the_reference_answers(installed):
    tmp, repo, _, _ = installed
    home = tmp / "root" / COURSE_HOME
    lesson = "lessons/01-chain-rule.ipynb"
    assert (home / lesson).read_bytes() == (repo / lesson).read_bytes()
    shared = [p for p in home.rglob("*") if not p.is_relative_to(home / "solutions") and not p.is_symlink()]
    unreadable = [p for p in shared if mode(p) & stat.S_IROTH == 0 or (p.is_dir() and mode(p) & stat.S_IXOTH == 0)]
    assert shared and not unreadable, f"learners cannot read {unreadable[:5]}"
    answers = [home / "solutions", *(home / "solutions").rglob("*")]
    open_to_others = [p for p in answers if mode(p) & 0o077]
    assert len(answers) > 11 and not open_to_others, f"learners could read {open_to_others[:5]}"


def test_the_exchange_and_the_settings_land_where_nbgrader_and_the_hub_read_them(installed):
    tmp, repo, _, _ = installed
    root = tmp / "root"
    assert mode(root / "srv/nbgrader/exchange") == 0o1777  # everyone submits; nobody removes another's files
    for source, target, bits in (("deploy/nbgrader_config.py", "etc/jupyter/nbgrader_config.py", 0o644),
                                 ("deploy/jupyterhub_config.d/autograd-course.py",
                                  f"{TLJH_CONFIG}/jupyterhub_config.d/autograd-course.py", 0o644),
                                 ("deploy/tljh/config.yaml", f"{TLJH_CONFIG}/config.yaml", 0o600)):
        assert mode(root / target) == bits, target
        assert (root / target).read_text().startswith((repo / source).read_text()), target


def test_the_environment_is_built_before_post_build_and_the_hub_reloads_last(installed):
    tmp, _, _, _ = installed
    root = tmp / "root"
    user_bin, home = str(root / "opt/tljh/user/bin"), str(root / COURSE_HOME)
    run = calls(tmp)
    first = run[:len(run) // 2]
    assert run[len(run) // 2:] == first, "a second run makes the same calls"
    assert [name for name, *_ in first] == ["conda", "postBuild", "pip", "hub-python3", "tljh-config"]
    conda, post_build, pip, hub, reload = first
    assert conda[3] == f"env update --prefix {root}/opt/tljh/user --file {home}/binder/environment.yml"
    assert post_build[1:3] == (home, user_bin), "postBuild runs in the course copy with the user environment first"
    assert pip[3] == "install --no-cache-dir nbgitpuller==1.3.0"
    assert hub[3] == "-m pip install --no-cache-dir jupyterhub-ltiauthenticator==1.6.3"
    assert reload[3] == "reload hub"


def test_a_second_run_updates_the_course_and_keeps_the_teams_values(installed):
    tmp, _, first, second = installed
    root = tmp / "root"
    assert (root / COURSE_HOME / "lessons" / "NEW.md").read_text() == "pulled later\n"
    for name in ("jupyterhub_config.d/lti13.py", "config.yaml"):
        assert (root / TLJH_CONFIG / name).read_text().endswith("# the course team's own values\n"), name
        assert f"kept the existing /{TLJH_CONFIG}/{name}" in second.stdout
        assert "kept the existing" not in first.stdout
