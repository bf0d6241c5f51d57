"""Confine the child that runs one notebook, inside the worker's sandbox: session, limits, folder, environment, and
an audit hook that no submission can remove.

Called in the child forked from the worker server, after the imports and before any submission code:

* a new session (the server kills the child's whole process group on a hard timeout);
* resource limits: address space (the memory already mapped by torch & co. plus ``memory_mb``), file size, no core
  files, few processes (a worker started as root runs as an unprivileged user of its own, so the process limit holds);
* the working directory is the job's private copy of the submission folder;
* an environment with nothing but what a kernel needs (PATH, HOME, the grading seed...);
* an audit hook, which cannot be removed, that refuses new processes, signals, sockets, ctypes, the garbage
  collector's object walks, trace/profile functions and changes to the code or defaults of the protected modules'
  functions, and that answers the checks' "learner returned" event by restoring the core of the pristine world
  (:mod:`.pristine`).

What the child can see of the machine at all is the sandbox's business (:mod:`.sandbox`).
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
#: Files and processes a submission's process may create.
MAX_FILE_MB = 64
MAX_PROCESSES = 64


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def set_limits(memory_mb: int) -> None:
    """Address space = what is mapped now + ``memory_mb``; bounded files; no core dumps; few processes/threads."""
    limit = _vm_size() + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_MB << 20, MAX_FILE_MB << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with an error instead of killing us


def install_audit_hook(restore: Callable[[], int], learner_returned: str, functions: frozenset[int]) -> None:
    """Refuse :data:`FORBIDDEN_EVENTS` and code swaps in ``functions`` (ids); call ``restore`` on
    ``learner_returned``."""

    def hook(event: str, args: tuple, _forbidden=FORBIDDEN_EVENTS, _frozen=FROZEN_FUNCTION_ATTRIBUTES,
             _restore=restore, _returned=learner_returned, _functions=functions, _len=len, _id=id) -> None:
        if event == _returned:
            _restore(*args)
        elif event.startswith(_forbidden):
            raise PermissionError(f"not allowed while grading: {event}")
        elif (event == "object.__setattr__" and _len(args) > 1 and args[1] in _frozen
              and _id(args[0]) in _functions):
            raise PermissionError(f"not allowed while grading: changing {args[1]} of a function the checks use")

    sys.addaudithook(hook)


def confine(workdir: str, *, memory_mb: int, environment: dict[str, str]) -> None:
    """Everything above except the audit hook, in the order that works: session, limits, folder, environment."""
    os.setsid()
    set_limits(memory_mb)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(environment)
