"""The sandbox every worker server runs in: bubblewrap (``bwrap``), the tool Flatpak builds on.

Why bubblewrap: it is packaged everywhere (Debian's ``bubblewrap``), needs no daemon and no root, and gives in one
command the two things grading needs: a **mount namespace** built from an allow-list (so what is not listed does
not exist for a submission, whatever its permissions on disk, and whoever runs the grader) and a **network
namespace** with nothing in it. Landlock would confine files without a namespace, but it needs a recent kernel and
does nothing for the network. One sandbox per worker server, not per submission: a server imports torch once (a
second or more) and forks a child per notebook in milliseconds; starting a sandboxed Python with torch for every
submission would cost that second each time.

What a worker sees (:func:`command`), everything read-only but its workspace:

* the system's programs and libraries (``/usr`` and the merged ``/bin``, ``/lib``...), a few files of ``/etc`` the
  dynamic loader and Python read, a ``/etc/passwd`` naming only the sandbox user;
* the Python installation (``sys.prefix``, ``sys.base_prefix`` and every folder on ``sys.path``, e.g. a pyenv under
  /root, a conda environment or the system's Python) and the course package;
* its workspace at ``/grading`` (read-write): the copy of the one submission it is grading, nothing else;
* its own ``/proc`` (only its own processes), a minimal ``/dev``, a small private ``/tmp``;
* no network at all (a loopback interface of its own: a port open on the machine's 127.0.0.1 is out of reach).

Course protection: the course folder, the grader's home directory and the grading scratch folder never appear,
even when one of them lies inside a folder that must be visible (an empty folder is mounted over them); the course
package is then mounted again on its own. So the gradebook (hidden tests), the sources (solutions), the other
students' submissions and the instructor's files are not there to be read.

Users: run by a normal user, the sandbox gets a user namespace of its own (unprivileged user namespaces must be
allowed); run by root, bubblewrap builds the namespaces with root's rights and the server then switches to an
unprivileged uid of its own (one per worker), so the process limit and file permissions hold as for any user.

:func:`probe` refuses loudly when any of this is unavailable (not Linux, no ``bwrap``, user namespaces disabled, a
Python installation that the sandbox user cannot read), naming what is missing and how to proceed.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Where the worker's workspace appears inside the sandbox.
WORKSPACE = "/grading"
#: First uid/gid tried for the unprivileged users of a sandbox started as root (one per worker).
FIRST_SANDBOX_ID = 61000
#: Folders of the system shown read-only (as symlinks where the system has them as symlinks: merged /usr).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Files of /etc shown read-only when present: the dynamic loader's cache and configuration, time zone, MIME types.
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
       "/etc/mime.types")
#: Size of the private /tmp (bytes).
TMP_SIZE = 256 << 20

HOW_TO_PROCEED = ("grade in a Linux container or VM where bubblewrap works, or pass --no-sandbox to grade without "
                  "isolation (only for submissions you trust: they can then read and write whatever you can)")


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be built here; the message names what is missing and how to proceed."""


def _existing_folder(path: str | os.PathLike) -> Path | None:
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return None
    return resolved if resolved.is_dir() else None


def python_paths() -> tuple[list[Path], list[Path]]:
    """The folders the Python running this grader needs: (its prefixes, the other folders on ``sys.path`` and
    ``LD_LIBRARY_PATH``). Left out: the working directory and the folder holding the course package (a checkout,
    with solutions beside the package), which ``sys.path`` may hold without the installation needing them."""
    prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, Path(sys.executable).parent,
                Path(os.path.realpath(sys.executable)).parent.parent]
    others = [p for p in sys.path if p] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    left_out = {_existing_folder(os.getcwd()), package_path().parent}
    return ([f for f in map(_existing_folder, prefixes) if f is not None],
            [f for f in map(_existing_folder, others) if f is not None and f not in left_out])


def python_executable() -> str:
    """This Python as the sandbox can start it: its folder resolved (``sys.executable`` may pass through a folder the
    view hides, as ``../.venv/bin/python`` run from a subfolder does), its name kept (a virtual environment's
    ``python`` is a link that must stay one, or the environment is lost)."""
    path = Path(sys.executable)
    return str(path.parent.resolve() / path.name)


def package_path() -> Path:
    """The course package's folder (``autograder/``), wherever it is installed."""
    import autograder

    return Path(autograder.__file__).resolve().parent


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outermost(paths, hidden=()) -> list[Path]:
    """``paths`` without those already shown through another of them (unless a hidden folder lies between), sorted."""
    ordered = sorted(set(paths), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in ordered:
        covered = any(_inside(path, k) and not any(_inside(path, h) and k in h.parents for h in hidden)
                      for k in kept)
        if not covered:
            kept.append(path)
    return sorted(kept)


@dataclass
class View:
    """What a worker's sandbox shows, as host paths."""

    read_only: list[Path]  # shown at the same path, read-only
    hidden: list[Path]  # an empty folder is mounted over each (they lie inside a read-only one)
    workspace: Path  # shown read-write at WORKSPACE
    files: dict[str, Path] = field(default_factory=dict)  # path in the sandbox -> host file shown read-only there


def build_view(workspace: Path, private: list[Path], etc: Path, uid: int, gid: int) -> View:
    """The sandbox's view: the Python installation and the course package read-only, the ``private`` folders (the
    course, the grader's home, the scratch folder) hidden wherever they would show, ``workspace`` read-write, and
    passwd/group files (written in ``etc``) naming the sandbox user ``uid``/``gid``."""
    private = [p.resolve() for p in private if p.exists()]
    prefixes, others = python_paths()
    for path in prefixes:
        if path in private:
            raise SandboxUnavailable(
                f"the Python installation {path} is also a folder that must stay hidden from submissions (the "
                f"course, your home or the scratch folder); keep them apart, or {HOW_TO_PROCEED}")
    # a folder on sys.path that is itself private (the course root when run from there) is left out, not shown
    wanted = prefixes + [p for p in others if p not in private] + [package_path()]
    hidden = sorted({secret for secret in private for path in wanted if path in secret.parents})
    passwd, group = etc / f"passwd-{uid}", etc / f"group-{gid}"
    passwd.write_text(f"student:x:{uid}:{gid}::{WORKSPACE}:/bin/sh\n")
    group.write_text(f"student:x:{gid}:\n")
    for file in (passwd, group):
        os.chmod(file, 0o644)
    return View(_outermost(wanted, hidden), hidden, workspace, {"/etc/passwd": passwd, "/etc/group": group})


def _ancestors(paths: list[Path], shown: list[Path]) -> list[Path]:
    """Folders to create so that every path can be mounted: their ancestors not inside another mounted path."""
    needed = set()
    for path in paths:
        for parent in path.parents:
            if parent != Path("/") and not any(_inside(parent, s) for s in shown):
                needed.add(parent)
    return sorted(needed, key=lambda p: (len(p.parts), str(p)))


def command(view: View, argv: list[str], *, environment: dict[str, str], as_root: bool | None = None) -> list[str]:
    """The bwrap command line that runs ``argv`` in ``view`` with exactly ``environment`` (for root, or for a normal
    user: by default, whoever runs this)."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "grading"]
    if not as_root:  # root builds the namespaces itself; the server then leaves root (argv's --user)
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    system = []
    for name in SYSTEM:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
            system.append(Path(name))
    # private /dev/shm and /tmp first: folders of the installation may lie under /tmp (a CI checkout) and go on top
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm",
             "--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
    mounts = [p for p in view.read_only if not any(_inside(p, s) for s in system)]
    etc = [Path(name) for name in ETC if os.path.exists(name)]
    for folder in _ancestors(mounts + etc + [Path(p) for p in view.files], system + mounts):
        args += ["--perms", "0755", "--dir", str(folder)]  # bwrap would make them 0700 when run as root
    for name in etc:
        args += ["--ro-bind", str(name), str(name)]
    # outermost first: a hidden folder's empty mount goes over its read-only parent, what lies inside it goes on top
    entries = [(p, "--ro-bind") for p in mounts] + [(p, "--tmpfs") for p in view.hidden]
    for path, kind in sorted(entries, key=lambda e: (len(e[0].parts), e[1] == "--ro-bind", str(e[0]))):
        args += [kind, str(path)] if kind == "--tmpfs" else [kind, str(path), str(path)]
    for inside, host in view.files.items():
        args += ["--ro-bind", str(host), inside]
    args += ["--bind", str(view.workspace), WORKSPACE, "--remount-ro", "/", "--chdir", WORKSPACE, "--clearenv"]
    for name, value in sorted(environment.items()):
        args += ["--setenv", name, value]
    return args + ["--", *argv]


def free_ids(count: int, first: int = FIRST_SANDBOX_ID) -> list[int]:
    """``count`` numbers unused as uid and gid on this machine (one sandbox user per worker, as root)."""
    found, number = [], first
    while len(found) < count:
        try:
            pwd.getpwuid(number)
        except KeyError:
            try:
                grp.getgrgid(number)
            except KeyError:
                found.append(number)
        number += 1
    return found


def probe(view: View, environment: dict[str, str], user: int | None) -> None:
    """Start Python in the sandbox once; :class:`SandboxUnavailable` saying what is missing if that fails."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"the grading sandbox needs Linux (bubblewrap); this is {sys.platform}: "
                                 + HOW_TO_PROCEED)
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable("bubblewrap is not installed (no `bwrap` command on PATH): install it "
                                 "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or "
                                 + HOW_TO_PROCEED)
    check = "import os, sys; import autograder; os.listdir(os.path.dirname(autograder.__file__))"
    argv = [python_executable(), "-c", check]
    if user is not None:
        argv = [python_executable(), "-c", f"import os; os.setgroups([]); os.setresgid({user}, {user}, {user}); "
                f"os.setresuid({user}, {user}, {user}); exec({check!r})"]
    done = subprocess.run(command(view, argv, environment=environment), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    if done.returncode == 0:
        return
    error = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
    if "namespace" in error.lower() or "operation not permitted" in error.lower():
        raise SandboxUnavailable(
            f"bubblewrap cannot create the sandbox's namespaces here ({error}). Allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0; in a container, a seccomp "
            "profile that allows them), or run the grader as root, or " + HOW_TO_PROCEED)
    if "permission denied" in error.lower() or "ModuleNotFoundError" in done.stderr:
        raise SandboxUnavailable(
            f"inside the sandbox, Python or the course package cannot be read ({error}): every folder of the "
            f"installation ({', '.join(map(str, view.read_only))}) must be readable by "
            f"{'an unprivileged user (the sandbox runs as one when the grader runs as root)' if user else 'you'}; "
            "or " + HOW_TO_PROCEED)
    raise SandboxUnavailable(f"the sandbox could not start Python ({error}); " + HOW_TO_PROCEED)
