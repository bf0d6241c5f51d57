"""Learners kept apart on Kubernetes (issue 36): deploy/z2jh/learner_isolation.py gives every user's pod a uid and a
private group of its own, and nbgrader's exchange, run as such uids, keeps one learner out of another's submission.

What can be tested without a cluster: the fragment as JupyterHub loads it (KubeSpawner's uid, gid and fsGroup are
callables of the spawner, distinct for every user and stable), the same text in deploy/z2jh/config.yaml, and the
exchange itself with the uids the pods would have: numbers with no account on the machine, as in a pod, each with a
home of its own (a pod mounts only its own volume). The grader releases and collects as one uid, learner A fetches and
submits as another, learner B tries to read and overwrite A's work as a third, and fails. Needs root (setpriv to the
uids); skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml
from hub import _open_path_to
from submissions import grade_id, solution_sources
from traitlets.config import Config

from autograder import course

#: On the hub tests' worker: both open the folders above the course to every uid for their run and put the modes back
#: after it, so run side by side one would close the path while the other's accounts still walk it (a clean CI run
#: with four workers had the pods' nbgrader unable to import its own modules).
pytestmark = pytest.mark.xdist_group("hub")

FRAGMENT = course.ROOT / "deploy" / "z2jh" / "learner_isolation.py"
ASSIGNMENT = "01-chain-rule"
COURSE_ID = course.COURSE_ID


def loaded() -> tuple[Config, dict]:
    """The fragment run as JupyterHub runs a config file: its ``c`` and its names."""
    config = Config()
    names = {"get_config": lambda: config}
    exec(compile(FRAGMENT.read_text(), str(FRAGMENT), "exec"), names)
    return config, names


def spawner(user_id: int):
    return SimpleNamespace(user=SimpleNamespace(id=user_id, name=f"user{user_id}"))


def test_every_users_pod_runs_as_a_uid_and_group_of_its_own():
    config, names = loaded()
    rule = config.KubeSpawner.uid
    assert config.KubeSpawner.gid is rule and config.KubeSpawner.fs_gid is rule
    uids = [rule(spawner(i)) for i in range(1, 501)]
    assert len(set(uids)) == len(uids), "two users share a uid"
    assert min(uids) > 65_535 and 1000 not in uids, "no user gets the image's jovyan or a system uid"
    assert rule(spawner(7)) == rule(spawner(7)), "a user's uid is the same at every start"


def test_the_chart_carries_the_fragment_unchanged():
    z2jh = yaml.safe_load((course.ROOT / "deploy" / "z2jh" / "config.yaml").read_text())
    assert z2jh["hub"]["extraConfig"]["learner-isolation"] == FRAGMENT.read_text()


# ------------------------------------------------------------------------ the exchange, as the pods' uids

def why_not() -> str | None:
    if os.geteuid() != 0:
        return "runs nbgrader as other uids (setpriv): it needs root"
    if not shutil.which("setpriv"):
        return "no setpriv (util-linux) on this machine"
    return None


class Pods:
    """nbgrader run as the uids of three pods, on one exchange folder as the shared volume would be."""

    def __init__(self, base: Path):
        _, names = loaded()
        self.base = base
        self.exchange = base / "exchange"
        self.exchange.mkdir()
        self.exchange.chmod(0o1777)  # as deploy/z2jh/exchange.yaml's Job leaves it
        self.uid = {who: names["own_uid"](spawner(i)) for i, who in enumerate(("grader", "learnerA", "learnerB"), 1)}
        for who, uid in self.uid.items():
            home = self.home(who)
            home.mkdir(mode=0o700)
            os.chown(home, uid, uid)
        self.course = course.copy_course(self.home("grader") / "course", assignment_ids=[ASSIGNMENT])
        subprocess.run(["chown", "-R", f"{self.uid['grader']}:{self.uid['grader']}", str(self.course)], check=True)

    def home(self, who: str) -> Path:
        return self.base / f"home-{who}"

    def run(self, who: str, command: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
        home, uid = self.home(who), self.uid[who]
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home), "USER": who,
               "JUPYTERHUB_USER": who, "JUPYTER_PLATFORM_DIRS": "0", "MPLBACKEND": "agg", "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=300)
        assert not check or done.returncode == 0, f"{who}: {' '.join(command)}\n{done.stdout}\n{done.stderr}"
        return done

    def nbgrader(self, who: str, *args: str, cwd: Path) -> None:
        self.run(who, [sys.executable, "-m", "nbgrader", *args, f"--Exchange.root={self.exchange}"], cwd)


@pytest.fixture(scope="module")
def pods():
    reason = why_not()
    if reason:
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="k8s-pods-", dir="/tmp"))
    base.chmod(0o755)
    opened = SimpleNamespace(made=[])
    try:
        _open_path_to(Path(sys.executable).resolve().parent, opened)  # the image's software: readable by every uid
        _open_path_to(course.ROOT, opened)
        pods = Pods(base)
        pods.nbgrader("grader", "generate_assignment", ASSIGNMENT, "--force", cwd=pods.course)
        pods.nbgrader("grader", "release_assignment", ASSIGNMENT, cwd=pods.course)
        learner = pods.home("learnerA")
        pods.nbgrader("learnerA", "fetch_assignment", ASSIGNMENT, f"--course={COURSE_ID}", cwd=learner)
        notebook = learner / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        work = nbformat.read(notebook, as_version=4)
        for cell in work.cells:
            cell.source = solution_sources(ASSIGNMENT).get(grade_id(cell), cell.source)
        nbformat.write(work, notebook)
        os.chown(notebook, pods.uid["learnerA"], pods.uid["learnerA"])
        pods.nbgrader("learnerA", "submit", ASSIGNMENT, f"--course={COURSE_ID}",
                      "--CourseDirectory.student_id=learnerA", cwd=learner)
        yield pods
    finally:
        for _, folder, mode in reversed(opened.made):
            folder.chmod(mode)
        shutil.rmtree(base, ignore_errors=True)


def test_another_learners_pod_cannot_read_or_overwrite_a_submission(pods):
    """As on one machine (tests/test_hub.py): what keeps a submission from others is that nobody but the grader can
    list the inbound folder and its name ends in 12 random characters; its files are its owner's to write. (nbgrader
    leaves the submission's folder itself writable by all, "hidden from other users by the timestamp", so a learner
    who knew the full name could replace files in it: the name is the secret, as nbgrader designs it.)"""
    inbound = pods.exchange / COURSE_ID / "inbound"
    hers = sorted(inbound.glob("learnerA+*"))
    assert hers, "learner A's submission is in the exchange"
    submitted = hers[0] / f"{ASSIGNMENT}.ipynb"
    stamp = hers[0].name.rsplit("+", 1)[0]
    attempts = {
        "list the submissions": f"ls {inbound}",
        "find hers by pattern": f"cat {inbound}/learnerA+*/{ASSIGNMENT}.ipynb",
        "open a guessed name": f"cat '{inbound}/{stamp}+000000000000/{ASSIGNMENT}.ipynb'",
        "overwrite her submission": f"echo '{{}}' > '{submitted}'",
        "remove hers by pattern": f"rm -r {inbound}/learnerA+*",
        "read her working copy": f"cat {pods.home('learnerA')}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
    }
    for what, command in attempts.items():
        done = pods.run("learnerB", ["sh", "-c", command], cwd=pods.home("learnerB"), check=False)
        assert done.returncode != 0, f"learner B could {what}: {done.stdout[:300]}"
    assert nbformat.read(submitted, as_version=4).cells, "her submission is intact"


def test_the_graders_pod_still_collects_it(pods):
    pods.nbgrader("grader", "collect", ASSIGNMENT, cwd=pods.course)
    collected = pods.course / "submitted" / "learnerA" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert collected.exists() and collected.stat().st_uid == pods.uid["grader"]
