"""One source of truth for versions: environment.yml pins exactly what pyproject.toml pins."""

from __future__ import annotations

import re
import tomllib

import yaml

from autograder import course

#: conda-forge names of packages whose PyPI name differs (CPU-only PyTorch on conda-forge is `pytorch-cpu`).
CONDA_NAMES = {"torch": "pytorch-cpu"}


def pip_pins() -> dict[str, str]:
    project = tomllib.loads((course.ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", d).groups() for d in project["dependencies"])
    return {CONDA_NAMES.get(name, name): version for name, version in pins.items()}


def conda_pins() -> dict[str, str]:
    spec = yaml.safe_load((course.ROOT / "environment.yml").read_text())
    pins = {}
    for entry in spec["dependencies"]:
        if isinstance(entry, str) and "=" in entry:
            name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)=+(\S+)", entry).groups()
            pins[name] = version
    return pins


def test_every_dependency_is_pinned_exactly():
    project = tomllib.loads((course.ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==\S+", requirement), f"{requirement!r} is not pinned with =="


def test_environment_yml_agrees_with_pyproject():
    conda = conda_pins()
    conda.pop("python")
    assert conda == pip_pins()


def test_supported_python_is_stated_once():
    project = tomllib.loads((course.ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert "python=3.11" in (course.ROOT / "environment.yml").read_text()


def test_xdist_keeps_a_group_on_one_worker(tmp_path):
    """The suite relies on `--dist loadgroup` (one graded class, one JupyterLab per group); pytest 9.2 broke it
    silently."""
    import subprocess
    import sys

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
