"""One source of truth for versions: pyproject.toml; the conda files are written from it."""

from __future__ import annotations

import re
import sys
import tomllib

from autograder import course

sys.path.insert(0, str(course.ROOT / "binder"))
import environments


def test_every_dependency_is_pinned_exactly():
    project = tomllib.loads((course.ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==\S+", requirement), f"{requirement!r} is not pinned with =="


def test_conda_environment_files_are_written_from_pyproject():
    assert environments.main(["--check"]) == 0, "run: python binder/environments.py"
    assert "    - -e ." in (course.ROOT / "environment.yml").read_text()  # conda learners get the course package too


def test_supported_python_is_stated_once():
    project = tomllib.loads((course.ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert "python=3.11" in (course.ROOT / "environment.yml").read_text()


def test_the_timeline_shows_each_workers_modules_in_order():
    """The suite's last lines (tests/timeline.py): a worker's consecutive tests of one module are one run, short runs
    are summed, and times count from the session's start."""
    from types import SimpleNamespace

    import timeline

    plugin = timeline.Timeline()
    plugin.begun = 100.0
    phases = [("gw0", "tests/test_a.py::x", 105, 130), ("gw1", "tests/test_b.py::z", 106, 108),
              ("gw0", "tests/test_a.py::y", 130, 160), ("gw0", "tests/test_b.py::w", 161, 162)]
    for worker, nodeid, start, stop in phases:
        gateway = SimpleNamespace(gateway=SimpleNamespace(id=worker))
        plugin.pytest_runtest_logreport(SimpleNamespace(node=gateway, nodeid=nodeid, start=start, stop=stop))
    assert plugin.lines()[1:] == [
        "gw0: busy 56 s, first test at 5 s, last done at 62 s",
        "       5 –   60 s  test_a.py (busy 55 s)",
        "  1 shorter runs (< 10 s each), busy 1 s",
        "gw1: busy 2 s, first test at 6 s, last done at 8 s",
        "  1 shorter runs (< 10 s each), busy 2 s"]


def test_xdist_keeps_a_group_on_one_worker(tmp_path):
    """The suite relies on `--dist loadgroup` (one graded class, one JupyterLab per group); pytest 9.2 broke it
    silently."""
    import subprocess

    (tmp_path / "test_probe.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.parametrize('i', [pytest.param(i, marks=pytest.mark.xdist_group('g')) for i in range(6)])\n"
        "def test_probe(i):\n"
        "    print('WORKER', os.environ['PYTEST_XDIST_WORKER'])\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                             "-rA", "-s", "-o", "addopts=", str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "@g" in result.stdout, "xdist_group marks did not reach the scheduler:\n" + result.stdout
