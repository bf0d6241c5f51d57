"""Shared fixtures: a scratch copy of the course with every assignment released, the sandbox probe, private folders.

Every scratch course lives in a private folder (mode 0700, as a course in root's home or a `mktemp -d` CI checkout
would): a grader that only works when the course is world-readable fails here too.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

# One torch thread per test process, as the grader's workers and the lab's kernels run: pytest-xdist already runs a
# process a core and one more, and torch's default of a thread per core makes each in-process check (the catalogue, the
# reference at many seeds) spin for the other's core, which made them 2.5 times slower. Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest
import timeline
from hypothesis import settings

from autograder import course

# tools/ (synthetic classes, the bench, the demo) sits beside tests/ in the repository, outside the installed package.
if str(course.ROOT) not in sys.path:
    sys.path.insert(0, str(course.ROOT))


#: `make test-all` (COURSE_TEST_ALL=1) runs everything; `make test` (CI) skips what is marked ``nightly(reason)``.
NIGHTLY = os.environ.get("COURSE_TEST_ALL") == "1"
#: The cores this process may use (a container's CPU set, not the host's count).
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def pytest_configure(config):
    # Lessons end by marking themselves read and check-my-work keeps its results (autograder.progress): in the
    # learner's data home, never the tester's. Every process the suite starts inherits this one.
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="course-data-home-")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist): print the suite's timeline
        config.pluginmanager.register(timeline.Timeline(), "course-timeline")
    config.addinivalue_line("markers", "nightly(reason): run by make test-all only (COURSE_TEST_ALL=1), not by make "
                            "test; the reason says why CI can leave it to the nightly run (docs/maintainers.md)")


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject's addopts): two pytest-xdist workers more than the cores this process may use. The long
    groups (grading pipeline, browser, the hub's, grade command) spend much of their time waiting on the processes
    they start (kernels, Chromium, JupyterLab, a JupyterHub, the grader's workers): with a worker a core the machine
    idled a quarter of the run, and with one more (2026-12-07, two cores) still a third (user + system time 16 min
    in 11 min of wall time); the extra workers run the catalogue's in-process checks in those gaps."""
    return CORES + 2


def pytest_collection_modifyitems(config, items):
    if NIGHTLY:
        return
    for item in items:
        mark = item.get_closest_marker("nightly")
        if mark is not None:
            item.add_marker(pytest.mark.skip(reason=f"nightly (make test-all): {mark.args[0]}"))


@functools.cache
def sandbox_missing() -> str | None:
    """None when the grader's sandbox (bubblewrap) works here, else why not (probed once, as the grader probes)."""
    import tempfile

    from autograder.grading.isolation import sandbox
    from autograder.grading.worker import pool

    with tempfile.TemporaryDirectory() as scratch:
        uid = sandbox.free_ids(1)[0] if os.geteuid() == 0 else os.getuid()
        try:
            view = sandbox.build_view(Path(scratch), [], Path(scratch), uid, uid)
            sandbox.probe(view, pool.server_environment(sandbox.WORKSPACE), uid if os.geteuid() == 0 else None)
        except sandbox.SandboxUnavailable as error:
            return str(error)
    return None


def require_sandbox() -> None:
    """Skip or fail a test that needs the sandbox, by the browser tests' rules: with COURSE_NO_SANDBOX (.ci/run
    could not install bubblewrap and says why) it skips with that reason; in CI otherwise it fails; elsewhere it
    skips with the reason."""
    reason = sandbox_missing()
    if reason is None:
        return
    if os.environ.get("COURSE_NO_SANDBOX"):
        pytest.skip(f"{reason}; {os.environ['COURSE_NO_SANDBOX']}")
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the grader's sandbox must work")
    pytest.skip(reason)


def grader_sandbox_flags() -> list[str]:
    """Flags for the grade command in tests that judge grades, not isolation: none where the sandbox works; where it
    cannot (and that is allowed, see :func:`require_sandbox`) ``--no-sandbox``, so the catalogue is still graded."""
    if sandbox_missing() is None:
        return []
    if os.environ.get("CI") == "true" and not os.environ.get("COURSE_NO_SANDBOX"):
        pytest.fail(f"{sandbox_missing()}; in CI the grader's sandbox must work")
    return ["--no-sandbox"]


def private_folder(folder: Path) -> Path:
    """``folder``, made private to its owner (0700)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder

# In CI the random cases are the same on every run (a red build is reproducible); elsewhere hypothesis explores.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def released_course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch course directory where every assignment has been released (one gradebook), made once per session.

    Its users (tests/test_grading_pipeline.py, tests/test_release.py) share the xdist group ``pipeline``, so one
    worker makes it and grades every assignment's class in it with one pool of workers."""
    root = course.copy_course(private_folder(tmp_path_factory.mktemp("class")) / "course")
    course.generate_release(root)
    return root
