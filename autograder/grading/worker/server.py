"""The worker server: a long-lived process, alone in a sandbox, that forks one child per notebook.

Started by :class:`.pool.Worker` as ``python -m autograder.grading.worker.server --control-fd N`` (inside bubblewrap,
see :mod:`autograder.grading.isolation.sandbox`; directly with ``--no-sandbox``). It

1. switches to its unprivileged user (``--user UID``: a sandbox started as root), before importing anything;
2. reads :class:`~.protocol.Configure` from its control socket;
3. imports what every submission needs (torch, numpy, matplotlib, IPython, the course package) and runs the
   configured notebooks once (the reference solutions: whatever the checks load lazily is loaded here), so no child
   pays for it; these are only for speed: a child imports anything else it needs from the read-only installation;
4. takes the pristine-world snapshot (:mod:`autograder.grading.isolation.pristine`), freezes the collector's view of
   the heap, makes itself non-dumpable (no child can ptrace it or read its memory), and says :class:`~.protocol.Ready`;
5. for each :class:`~.protocol.Start`: forks a child that confines itself (:mod:`autograder.grading.isolation.confine`)
   and executes the cells (:mod:`.kernel`), writing each result to the pipe that came with the message; waits for it
   (killing it on :class:`~.protocol.Kill`); sweeps what it left (other processes, /tmp, /dev/shm: only when alone in
   a sandbox); reports :class:`~.protocol.Exited`.

The server itself never runs submission code.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import signal
import socket
import sys
import time

from . import protocol
from .protocol import receive, send

# -- what every child inherits ---------------------------------------------------------------------------------------

#: Imported before the snapshot, for speed only (a child may import anything else from the installation).
PRELOAD = ("numpy", "torch", "torch.nn", "torch.nn.functional", "torch.autograd", "torch.testing", "matplotlib",
           "matplotlib.pyplot", "IPython", "IPython.display", "IPython.core.interactiveshell")



def other_exercises(modules, checks) -> frozenset[str]:
    """The loaded check modules of exercises other than ``checks`` (``autograder.checks.exNN_slug`` and, for an
    exercise whose checks are a package, every module in it): they need no restoring while a check runs."""
    return frozenset(name for name in modules if name.startswith("autograder.checks.ex")
                     and not any(name == own or name.startswith(own + ".") for own in checks))

class World:
    """What the server prepares once: the IPython shell, the pristine snapshot and its configuration."""

    def __init__(self, config: protocol.Configure):
        import importlib
        import pkgutil

        os.environ.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "agg"})
        for name in PRELOAD:
            importlib.import_module(name)
        # the checks the notebooks use (all of them when not told); whatever else they import comes with the warm-up
        import autograder.checks

        checks = config.checks or [info.name for info in pkgutil.iter_modules(autograder.checks.__path__,
                                                                               "autograder.checks.")]
        for name in checks:
            importlib.import_module(name)
        import torch

        torch.set_num_threads(1)
        from .kernel import make_shell

        self.config = config
        self.shell = make_shell()
        self._warm_up(config.warmup)
        from ..isolation import pristine

        self.restore = pristine.take(other_exercises(sys.modules, config.checks) if config.checks else frozenset())

    def _warm_up(self, notebooks: list[list[protocol.Cell]]) -> None:
        """Run each notebook once in a throwaway kernel, then leave no trace of it but the modules it loaded."""
        import linecache
        import random

        import numpy
        import torch

        from .kernel import Kernel

        states = torch.random.get_rng_state(), numpy.random.get_state(), random.getstate()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        streams = sys.stdout, sys.stderr, sys.displayhook
        alarm = signal.getsignal(signal.SIGALRM)
        folder = os.environ.get("TMPDIR", "/tmp")
        try:
            for cells in notebooks:
                kernel = Kernel(self.shell, lambda full=True: 0, timeout=60, capture_folder=folder)
                for cell in cells:
                    kernel.execute(cell)
                kernel.fds.close()
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sys.stdout, sys.stderr, sys.displayhook = streams
            signal.signal(signal.SIGALRM, alarm)
            torch.random.set_rng_state(states[0])
            numpy.random.set_state(states[1])
            random.setstate(states[2])
        names = self.shell.compile._filename_map
        for name in list(names):
            linecache.cache.pop(name, None)
        names.clear()
        self.shell.user_ns.clear()
        self.shell.init_user_ns()
        self.shell.execution_count = 1


def _non_dumpable() -> None:
    """PR_SET_DUMPABLE 0: no process of the same user may ptrace this one or open its /proc/PID/mem; children
    inherit it (a fork keeps the flag)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _switch_user(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise RuntimeError("could not leave root")


# -- one child -------------------------------------------------------------------------------------------------------

def _child(world: World, start: protocol.Start, fd: int, control: int) -> None:
    """In the forked child: confine, run every cell, send each result, exit without cleanup. Never returns."""
    write, exit_now, encode = os.write, os._exit, protocol.encode

    def tell(message) -> None:
        data = encode(message)
        while data:
            data = data[write(fd, data):]

    try:
        os.close(control)
        from autograder.checking import LEARNER_RETURNED

        from ..isolation import confine
        from .kernel import Kernel

        confine.confine(start.workdir, memory_mb=world.config.memory_mb, environment=start.environment)
        kernel = Kernel(world.shell, world.restore, timeout=start.timeout, output_limit=world.config.output_limit,
                        capture_folder=start.workdir)
        confine.install_audit_hook(kernel.after_learner, LEARNER_RETURNED, world.restore.functions)
    except BaseException as exc:  # say why the process could not be prepared
        tell(protocol.SetupFailed(f"{type(exc).__name__}: {exc}"))
        exit_now(3)
    for cell in start.cells:
        tell(kernel.execute(cell))
    tell(protocol.AllDone())
    exit_now(0)


def _mount_points() -> frozenset[str]:
    try:
        with open("/proc/self/mountinfo") as table:
            return frozenset(line.split()[4] for line in table)
    except OSError:
        return frozenset()


def _empty(folder: str, keep: frozenset[str]) -> None:
    """Remove everything in ``folder`` but the mount points in ``keep`` (and the folders on the way to them)."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for name in entries:
        path = os.path.join(folder, name)
        if path in keep:
            continue
        if any(point.startswith(path + "/") for point in keep):
            _empty(path, keep)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _sweep(sandboxed: bool, keep: frozenset[str]) -> None:
    """After a child: no process of it may outlive it, no file of it may reach the next one. Only when this server
    is alone in its sandbox (its own pid namespace: pid 2 under bubblewrap's init), never outside one."""
    if not sandboxed or os.getpid() != 2:
        return
    try:
        os.kill(-1, signal.SIGKILL)  # every process this one may signal, except itself and the namespace's init
    except ProcessLookupError:
        pass
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break
    for folder in ("/tmp", "/dev/shm"):
        _empty(folder, keep)


def _wait(channel: socket.socket, pid: int, job: str) -> protocol.Exited:
    """Wait for the child, killing its process group on Kill; its ending as the server saw it."""
    killed = False
    selector = selectors.DefaultSelector()
    pidfd = os.pidfd_open(pid)
    selector.register(pidfd, selectors.EVENT_READ, "child")
    selector.register(channel, selectors.EVENT_READ, "control")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "child":
                    _, status = os.waitpid(pid, 0)
                    if killed:
                        return protocol.Exited(job, protocol.Ending.KILLED, signal.SIGKILL)
                    if os.WIFSIGNALED(status):
                        return protocol.Exited(job, protocol.Ending.SIGNALLED, os.WTERMSIG(status))
                    return protocol.Exited(job, protocol.Ending.EXITED, os.waitstatus_to_exitcode(status))
                message, _ = receive(channel, (protocol.Kill,))
                if message is None:
                    os.kill(pid, signal.SIGKILL)
                    raise SystemExit(0)  # the parent is gone
                if message.job == job:
                    killed = True
                    for kill in (os.killpg, os.kill):
                        try:
                            kill(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
    finally:
        selector.close()
        os.close(pidfd)


def serve(channel: socket.socket, world: World) -> None:
    keep = _mount_points()  # the installation's folders that lie under /tmp stay
    while True:
        message, fds = receive(channel, (protocol.Start, protocol.Kill))
        if message is None:
            return
        if isinstance(message, protocol.Kill):  # for a job that already ended
            continue
        if len(fds) != 1:
            send(channel, protocol.Failed(f"job {message.job} came without its pipe"))
            return
        pid = os.fork()
        if pid == 0:
            _child(world, message, fds[0], channel.fileno())
        os.close(fds[0])
        exited = _wait(channel, pid, message.job)
        _sweep(world.config.sandboxed, keep)
        send(channel, exited)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the grader's worker server (started by the grader)")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--user", type=int, default=None, help="uid and gid to switch to first")
    args = parser.parse_args(argv)
    if args.user is not None:
        _switch_user(args.user)
    if sys.path and sys.path[0] == os.getcwd():
        sys.path[0] = ""  # as in a kernel: a child finds modules in its own folder (the submission's), not here
    channel = socket.socket(fileno=args.control_fd)
    started = time.perf_counter()
    try:
        config, _ = receive(channel, (protocol.Configure,))
        if config is None:
            return 0
        world = World(config)
        import gc

        gc.collect()
        gc.freeze()  # everything loaded so far is permanent: a child's collector need not walk it (or copy its pages)
        _non_dumpable()
    except BaseException as exc:  # the parent reports it and stops
        send(channel, protocol.Failed(f"{type(exc).__name__}: {exc}"))
        return 1
    send(channel, protocol.Ready(round(time.perf_counter() - started, 3)))
    serve(channel, world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
