"""Confine the process that runs one submission: its own session, limits, folder, user, environment and audit hook.

Called in the child forked from the fork server, after the imports and before any submission code:

* a new session (the parent kills the whole process group on a hard timeout);
* resource limits: address space (the memory already mapped by torch & co. plus ``memory_mb``), file size, no core
  files, few processes;
* the working directory is a private temporary copy of the submission folder;
* when started as root: no supplementary groups, then an unprivileged uid/gid of its own (one per worker slot, so two
  submissions graded at once cannot signal each other), which makes the process non-dumpable (no ptrace, no
  /proc/PID/mem for anyone else). The gradebook, the sources and the other students' folders are private to the
  course owner (:func:`autograder.grading.command.protect_course`), so the student's code cannot open them;
* an environment with nothing but what a kernel needs (PATH, HOME, the grading seed...);
* an audit hook, which cannot be removed, that refuses new processes, signals, sockets, ctypes, the garbage
  collector's object walks, trace/profile functions and changes to the code or defaults of the protected modules'
  functions, and that answers the checks' "learner returned" event by restoring the core of the pristine world
  (:mod:`autograder.grading.pristine`).
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from collections.abc import Callable

#: Audit events a submission may not raise (prefixes).
FORBIDDEN_EVENTS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
                    "os.killpg", "subprocess.", "pty.", "ctypes.", "gc.get_objects", "gc.get_referrers",
                    "gc.get_referents", "sys.settrace", "sys.setprofile", "sys._current_frames",
                    "socket.", "webbrowser.", "winreg.", "cpython.run_")
FROZEN_FUNCTION_ATTRIBUTES = ("__code__", "__defaults__", "__kwdefaults__")


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def set_limits(memory_mb: int, max_file_mb: int = 64, max_processes: int = 64) -> None:
    """Address space = what is mapped now + ``memory_mb``; bounded files; no core dumps; few processes/threads."""
    limit = _vm_size() + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_mb << 20, max_file_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with an error instead of killing us


def drop_privileges(uid: int, gid: int) -> None:
    """From root to ``uid``/``gid`` for good (real, effective and saved ids); a no-op when not root."""
    if os.geteuid() != 0:
        return
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        raise RuntimeError("could not drop root privileges")


def install_audit_hook(restore: Callable[[], int], learner_returned: str, functions: frozenset[int]) -> None:
    """Refuse :data:`FORBIDDEN_EVENTS` and code swaps in ``functions`` (ids); call ``restore`` on
    ``learner_returned``."""

    def hook(event: str, args: tuple, _forbidden=FORBIDDEN_EVENTS, _frozen=FROZEN_FUNCTION_ATTRIBUTES,
             _restore=restore, _returned=learner_returned, _functions=functions, _len=len, _id=id) -> None:
        if event == _returned:
            _restore()
        elif event.startswith(_forbidden):
            raise PermissionError(f"not allowed while grading: {event}")
        elif (event == "object.__setattr__" and _len(args) > 1 and args[1] in _frozen
              and _id(args[0]) in _functions):
            raise PermissionError(f"not allowed while grading: changing {args[1]} of a function the checks use")

    sys.addaudithook(hook)


def confine(workdir: str, *, uid: int, gid: int, memory_mb: int, environment: dict[str, str]) -> None:
    """Everything above except the audit hook, in the order that works: limits, folder, user, environment."""
    os.setsid()
    set_limits(memory_mb)
    os.chdir(workdir)
    drop_privileges(uid, gid)
    os.environ.clear()
    os.environ.update(environment)
