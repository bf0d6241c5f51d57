"""The sandbox itself (autograder/grading/isolation/sandbox.py), without the grader's own defences: plain Python
scripts run in a worker's view, as root and as an unprivileged user, in private folders. What the view shows and
hides, no network, no writes outside the workspace, its own processes only; how it refuses when it cannot be built.

tests/test_grade_command.py runs the hostile catalogue through the whole grader, audit hook and all.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import unprivileged
from conftest import require_sandbox

from autograder import course
from autograder.grading.isolation import sandbox
from autograder.grading.worker.pool import server_environment

IDENTITIES = ["root", "unprivileged"] if os.geteuid() == 0 else ["unprivileged"]
SECRET = "GRADEBOOK-SECRET-4c2a"

pytestmark = pytest.mark.xdist_group("grade-command")


@pytest.fixture
def place(tmp_path):
    """A private scratch folder with a course (gradebook, another student), a home with a secret, a workspace."""
    os.chmod(tmp_path, 0o700)
    for path in ("course/gradebook.db", "course/submitted/bo/01/01.ipynb", "home/secret.txt"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(SECRET)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "etc").mkdir()
    return tmp_path


def run_inside(place: Path, identity: str, code: str) -> subprocess.CompletedProcess:
    """``code`` in Python, in a worker's sandbox built for ``identity``, with no defence but the sandbox."""
    require_sandbox()
    if identity == "unprivileged" and unprivileged.available():
        pytest.skip(unprivileged.available())
    as_root = identity == "root"
    uid = sandbox.free_ids(1)[0] if as_root else (unprivileged.USER if os.geteuid() == 0 else os.getuid())
    view = sandbox.build_view(place / "workspace", [place / "course", place / "home", place], place / "etc", uid, uid)
    if as_root:  # as the executor hands the workspace over, and the worker server leaves root first thing
        os.chown(place / "workspace", uid, uid)
        code = f"import os; os.setgroups([]); os.setresgid({uid}, {uid}, {uid}); os.setresuid({uid}, {uid}, {uid})\n" \
            + code
    argv = sandbox.command(view, [sys.executable, "-c", code], environment=server_environment(sandbox.WORKSPACE),
                           as_root=as_root)
    if not as_root:
        argv = unprivileged.command(argv, place)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("identity", IDENTITIES)
def test_the_course_the_home_and_the_machine_are_not_there(place, identity):
    code = f"""
import os
for path in {[str(place / p) for p in ("course/gradebook.db", "course/submitted", "home/secret.txt", "home")]}:
    print(path, os.path.exists(path))
print("root sees", sorted(os.listdir("/")))
print("processes", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("ids", os.getuid(), os.geteuid(), os.getgid())
print("etc", sorted(os.listdir("/etc")))
"""
    done = run_inside(place, identity, code)
    assert done.returncode == 0, done.stderr
    assert " True" not in done.stdout and SECRET not in done.stdout, done.stdout
    assert "'home'" not in done.stdout.split("root sees")[1].splitlines()[0]
    processes = eval(done.stdout.split("processes ")[1].splitlines()[0])
    assert len(processes) <= 3, processes  # bubblewrap's init, this process (and a shell at most)
    uid = int(done.stdout.split("ids ")[1].split()[0])
    assert uid != 0 and int(done.stdout.split("ids ")[1].split()[1]) != 0
    assert "shadow" not in done.stdout


@pytest.mark.parametrize("identity", IDENTITIES)
def test_no_network_not_even_this_machines_loopback(place, identity):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"STOLEN")
    print("CONNECTED")
except OSError as error:
    print("REFUSED", type(error).__name__)
try:
    socket.getaddrinfo("pypi.org", 443)
    print("RESOLVED")
except OSError as error:
    print("NO DNS", type(error).__name__)
"""
        done = run_inside(place, identity, code)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert "REFUSED" in done.stdout and "NO DNS" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("identity", IDENTITIES)
def test_writes_stay_in_the_workspace(place, identity):
    package = Path(course.__file__).parent
    targets = [place / "course" / "PWNED", package / "PWNED.py", Path(sys.prefix) / "PWNED.pth",
               place / "home" / "PWNED", Path("/PWNED"), Path("/etc/PWNED")]
    code = f"""
import os
for target in {[str(t) for t in targets]}:
    try:
        open(target, "w").write("x")
        print("WROTE", target)
    except OSError as error:
        print("REFUSED", type(error).__name__)
open("/grading/mine.txt", "w").write("ok")
open("/tmp/mine.txt", "w").write("ok")
print("workspace ok")
"""
    done = run_inside(place, identity, code)
    assert "WROTE" not in done.stdout and "workspace ok" in done.stdout, done.stdout + done.stderr
    assert not [t for t in targets if t.exists()]
    assert (place / "workspace" / "mine.txt").read_text() == "ok"


@pytest.mark.parametrize("identity", IDENTITIES)
def test_the_installation_is_whole_for_lazy_imports(place, identity):
    code = "import torch.optim, torch.func, autograder.checks, json.tool, xml.dom.minidom\nprint('imported')"
    done = run_inside(place, identity, code)
    assert "imported" in done.stdout, done.stderr


# ---------------------------------------------------------------------------------------------- what it shows where

def test_a_private_folder_inside_a_shown_one_is_hidden_and_the_package_shown_again(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    course_root = shared / "course"
    (course_root / "autograder").mkdir(parents=True)
    (shared / "lib").mkdir()
    monkeypatch.setattr(sandbox, "python_paths", lambda: ([shared / "lib"], [shared]))
    monkeypatch.setattr(sandbox, "package_path", lambda: course_root / "autograder")
    view = sandbox.build_view(tmp_path / "ws", [course_root], tmp_path, 1000, 1000)
    assert view.read_only == [shared, course_root / "autograder"] and view.hidden == [course_root]
    args = sandbox.command(view, ["true"], environment={}, as_root=False)
    shown, masked, again = (args.index(str(shared)), args.index(str(course_root)),
                            args.index(str(course_root / "autograder")))
    assert args[shown - 1] == "--ro-bind" and args[masked - 1] == "--tmpfs" and args[again - 1] == "--ro-bind"
    assert shown < masked < again  # shown, then hidden over it, then the package shown again on top


def test_a_private_folder_that_is_the_installation_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "python_paths", lambda: ([tmp_path], []))
    with pytest.raises(sandbox.SandboxUnavailable, match="keep them apart"):
        sandbox.build_view(tmp_path / "ws", [tmp_path], tmp_path, 1000, 1000)


def test_a_missing_sandbox_is_refused_with_what_to_do(tmp_path, monkeypatch):
    view = sandbox.View([], [], tmp_path)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap.*--no-sandbox"):
        sandbox.probe(view, {}, None)
    monkeypatch.setattr(sandbox.sys, "platform", "darwin")
    with pytest.raises(sandbox.SandboxUnavailable, match="needs Linux.*--no-sandbox"):
        sandbox.probe(view, {}, None)


def test_the_grade_command_refuses_without_bubblewrap_and_grades_with_no_sandbox(tmp_path):
    from tools import synthetic

    require_sandbox()
    os.chmod(tmp_path, 0o700)
    root = course.copy_course(tmp_path / "course", assignment_ids=["01-chain-rule"])
    course.generate_release(root, ["01-chain-rule"])
    synthetic.write_submission(root, "01-chain-rule", "ada", synthetic.reference_answers(root, "01-chain-rule"))
    environment = course.tool_environment(PATH=str(Path(sys.executable).parent))  # no bwrap on PATH
    command = [sys.executable, "-m", "autograder", "grade", "01-chain-rule", "--course", str(root), "--quiet",
               "--jobs", "1"]
    refused = subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "bubblewrap is not installed" in refused.stderr, refused.stderr
    assert "--no-sandbox" in refused.stderr and not (root / "autograded").exists()
    graded = subprocess.run(command + ["--no-sandbox"], cwd=root, env=environment, capture_output=True, text=True,
                            timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "WITHOUT THE SANDBOX" in graded.stdout and "1 graded" in graded.stdout
    assert "Graded without the sandbox" in (root / "grading" / "01-chain-rule" / "report.md").read_text()


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system Python at /usr/bin/python3")
def test_the_systems_own_python_works_in_the_sandbox_too(place):
    """The view follows whichever Python runs the grader: here Debian's, whose prefix is /usr (this suite's own runs
    from a pyenv under /root, a private folder)."""
    require_sandbox()
    script = f"""
import os, sys
from pathlib import Path
from autograder.grading.isolation import sandbox
from autograder.grading.worker import pool as executor
uid = sandbox.free_ids(1)[0] if os.geteuid() == 0 else os.getuid()
view = sandbox.build_view(Path({str(place / 'workspace')!r}), [Path({str(place / 'course')!r})],
                          Path({str(place / 'etc')!r}), uid, uid)
assert Path("/usr") in view.read_only, view.read_only
sandbox.probe(view, executor.server_environment(sandbox.WORKSPACE), uid if os.geteuid() == 0 else None)
print("system python ok", sys.prefix)
"""
    done = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(course.ROOT)})
    assert "system python ok /usr" in done.stdout, done.stdout + done.stderr


def test_a_python_started_through_a_hidden_folder_still_starts(tmp_path):
    """``../.venv/bin/python -m autograder grade`` from a subfolder: ``sys.executable`` then passes through a folder
    the sandbox does not show, and the sandbox must start the same Python by a path it does show."""
    require_sandbox()
    detour = os.path.relpath(sys.executable, tmp_path)  # ../../…/bin/python: Python keeps it as tmp_path/../../…
    assert detour.startswith("..") and os.path.samefile(tmp_path / detour, sys.executable)
    probe = "import conftest, sys; assert '..' in sys.executable; print('sandbox:', conftest.sandbox_missing())"
    done = subprocess.run([detour, "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})
    assert "sandbox: None" in done.stdout, done.stdout + done.stderr
