"""Execute a sanitized notebook's code cells in an IPython shell and record outputs the way nbclient does.

This runs inside the confined child process that the worker server forks (:mod:`.server`). Each finished cell
becomes a :class:`~.protocol.CellDone`, sent to the parent at once, so a crash loses only the cell that was running.
Outputs have nbclient's form: ``stream`` (stdout/stderr, also what C code writes to file descriptors 1 and 2),
``display_data``, ``execute_result`` and ``error`` (ename, evalue, an IPython traceback).

Cells come in two kinds. **Instructor cells** are the ones nbgrader locks (test cells, the imports cell): their source
is the instructor's, restored by nbgrader's sanitizing. Before each, the kernel restores the pristine world (modules,
classes, ``sys.modules``, builtins, the environment, torch's global modes) and the names earlier instructor cells
bound (``checks``, ``grading_seed``...), so nothing a submission patched can change their verdict. Their outputs are
assembled only after all code in them has finished, and an ``execute_result`` is accepted only from their own last
expression; their results say whether they failed with the course's own fault (a
:class:`~autograder.misconceptions.CourseBug`, known by its type) and which misconceptions their checks published
(:func:`autograder.misconceptions.publish`). Everything else is **learner code**, run as a kernel would run it.

Each cell has a time limit: SIGALRM raises :class:`CellTimeoutError` in the cell; code that swallows it is killed
by the parent shortly after. Captured output is capped per cell.
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import signal
import sys
import time

from ...misconceptions import MIME, CourseBug, GradingFailure
from ...verify import ClaimFailed
from .protocol import DEFAULT_OUTPUT_LIMIT, Cell, CellDone

#: The course's own exceptions, shown as IPython shows them in a learner's kernel: the message, wrapped, no frames.
LEARNER_FACING = (GradingFailure, CourseBug, ClaimFailed)

#: Bytes of rich display data (images, HTML) kept per cell.
DISPLAY_LIMIT = 2_000_000


def _learner_fills(value) -> bool:
    """A name an instructor cell binds only until the learner binds it (None, or a placeholder whose class says
    ``learner_fills = True``, as exercise 11's "not pasted yet" engine): not restored before instructor cells."""
    return value is None or getattr(type(value), "learner_fills", False) is True


class CellTimeoutError(BaseException):
    """A cell ran longer than the per-cell time limit (BaseException, so ``except Exception`` does not hide it)."""


def make_shell():
    """An IPython shell without history or colours that depend on a terminal (created once, in the fork server)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "Linux"  # what ipykernel sends: ANSI colours, rendered by nbgrader's feedback
    config.InteractiveShell.autocall = 0
    return InteractiveShell.instance(config=config)


class Outputs:
    """One cell's outputs, in nbclient's format, with a size cap.

    Like ipykernel, stdout and stderr are buffered and flushed (stdout first) before any other output and at the end
    of the cell, so ``print(a); print(b, file=sys.stderr); print(c)`` gives the two outputs a kernel gives.
    """

    def __init__(self, limit: int):
        self.items: list[dict] = []
        self.chunks: dict[int, list[str]] = {}  # id(stream output) -> its text chunks, joined at the end
        self.pending: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.limit = limit
        self.size = 0
        self.dropped = 0
        self.display_size = 0
        self.truncated = False  # a display output was dropped (stream text beyond the limit counts in ``dropped``)

    def stream(self, name: str, text: str) -> None:
        if not text:
            return
        room = self.limit - self.size
        if room <= 0:
            self.dropped += len(text)
            return
        if len(text) > room:
            self.dropped += len(text) - room
            text = text[:room]
        self.size += len(text)
        self.pending[name].append(text)

    def flush(self) -> None:
        for name in ("stdout", "stderr"):
            if not self.pending[name]:
                continue
            last = self.items[-1] if self.items else None
            if last is not None and last["output_type"] == "stream" and last["name"] == name:
                self.chunks[id(last)] += self.pending[name]
            else:
                output = {"output_type": "stream", "name": name, "text": ""}
                self.items.append(output)
                self.chunks[id(output)] = self.pending[name]
            self.pending[name] = []

    def display(self, data: dict, metadata: dict | None = None, kind: str = "display_data") -> None:
        self.flush()
        size = sum(len(str(v)) for v in data.values())
        if self.display_size + size > DISPLAY_LIMIT:
            self.stream("stdout", f"[display output of {size} characters dropped by the grader]\n")
            self.truncated = True
            return
        self.display_size += size
        self.items.append({"output_type": kind, "data": data, "metadata": metadata or {}})

    def clear(self) -> None:
        self.items.clear()
        self.chunks.clear()
        self.pending = {"stdout": [], "stderr": []}

    def finish(self) -> list[dict]:
        if self.dropped:
            self.pending["stdout"].append(f"\n[... {self.dropped} more characters of output dropped by the grader]\n")
        self.flush()
        for output in self.items:
            if output["output_type"] == "stream":
                output["text"] = "".join(self.chunks.get(id(output), []))
        return self.items


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr while a cell runs."""

    def __init__(self, kernel: Kernel, name: str):
        self._kernel = kernel
        self.name = name

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._kernel.outputs.stream(self.name, text)
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"


class _FileDescriptorCapture:
    """What C code, subprocess-free extensions or ``os.write(1, ...)`` write to fds 1 and 2, read after each cell."""

    def __init__(self, folder: str):
        self.files = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            path = os.path.join(folder, f".grader-fd{fd}")
            capture = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.unlink(path)
            os.dup2(capture, fd)
            self.files[name] = capture

    def drain(self, outputs: Outputs) -> None:
        for name, fd in self.files.items():
            size = os.lseek(fd, 0, os.SEEK_END)
            if size:
                os.lseek(fd, 0, os.SEEK_SET)
                data = os.read(fd, min(size, outputs.limit * 4 + 16))
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                outputs.stream(name, data.decode("utf-8", "replace"))
                if size > len(data):
                    outputs.dropped += size - len(data)

    def close(self) -> None:
        for fd in self.files.values():
            os.close(fd)


def _plain_outputs(items: list[dict], instructor: bool, own_result: dict | None) -> list[dict]:
    """Copies of ``items`` made only of exact str/dict/list values (a submission may have tampered with them)."""
    plain = []
    for output in list(items):
        if type(output) is not dict:
            continue
        kind = output.get("output_type")
        if kind == "stream" and output.get("name") in ("stdout", "stderr") and type(output.get("text")) is str:
            plain.append({"output_type": "stream", "name": output["name"], "text": output["text"]})
        elif kind == "display_data" or (kind == "execute_result" and not instructor):
            data = output.get("data")
            if type(data) is dict:
                entry = {"output_type": kind, "data": {k: v for k, v in data.items()
                                                      if type(k) is str and type(v) in (str, dict, list)},
                         "metadata": {}}
                plain.append(entry)
    if own_result is not None:
        plain.append(own_result)
    return plain


def _after_learner(restore, torch_c):
    """When learner code returns to a check: the core as it was, no torch function/dispatch modes left behind.

    A closure with everything bound at creation: it keeps working whatever the submission rebinds meanwhile.
    """
    def after_learner(*keep, _restore=restore, _len=torch_c._len_torch_function_stack,
                      _pop=torch_c._pop_torch_function_stack, _dlen=torch_c._len_torch_dispatch_stack,
                      _dpop=torch_c._pop_torch_dispatch_stack, _int=int, _max=max) -> int:
        # keep: the mode stacks' depths when the check called the learner (the check's own modes), else none kept
        function_depth, dispatch_depth = ((_max(0, _int(keep[0])), _max(0, _int(keep[1]))) if len(keep) == 2
                                          else (0, 0))
        while _len() > function_depth:
            _pop()
        while _dlen() > dispatch_depth:
            _dpop()
        return _restore(False)

    return after_learner


class Kernel:
    """Runs cells in one namespace; see the module docstring for instructor cells versus learner code."""

    def __init__(self, shell, restore, *, timeout: float, output_limit: int = DEFAULT_OUTPUT_LIMIT,
                 capture_folder: str = "."):
        self.shell = shell
        self.restore_world = restore
        self.timeout = timeout
        self.output_limit = output_limit
        self.outputs = Outputs(output_limit)
        self.count = 0
        self.namespace = shell.user_ns
        self.instructor_names: dict[str, object] = {}
        self.environment = dict(os.environ)
        self.armed = False
        self.timed_out = False  # the last cell's time limit fired
        self.stdout, self.stderr = _Stream(self, "stdout"), _Stream(self, "stderr")
        self.fds = _FileDescriptorCapture(capture_folder)
        self.threads = len(os.listdir("/proc/self/task"))
        self._install_display()
        import torch

        self.torch = torch
        self.default_dtype = torch.get_default_dtype()
        self.after_learner = _after_learner(restore, torch._C)

    # -- the shell's display machinery, pointed at the current cell's outputs --------------------------------------

    def _install_display(self) -> None:
        from IPython.core.displaypub import DisplayPublisher

        kernel = self

        class Publisher(DisplayPublisher):
            def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
                kernel.outputs.display(dict(data), dict(metadata or {}))

            def clear_output(self, wait=False):
                kernel.outputs.clear()

        self.shell.display_pub = Publisher(shell=self.shell)

        def displayhook(value):  # explicit sys.displayhook(...) calls: shown, but never an execute_result
            if value is not None:
                kernel.outputs.display(self._format(value))

        self.displayhook = displayhook

    def _format(self, value) -> dict:
        data, _ = self.shell.display_formatter.format(value)
        return data

    def _on_alarm(self, signum, frame):
        if self.armed:
            self.armed = False
            self.timed_out = True
            raise CellTimeoutError(f"the cell did not finish within {self.timeout:g} s")

    # -- the pristine world -----------------------------------------------------------------------------------------

    def reset_world(self) -> None:
        """Before an instructor cell: modules, classes, builtins, environment, torch modes, instructor names, I/O."""
        self.restore_world(True)
        self.after_learner()
        torch = self.torch
        if torch.get_default_dtype() is not self.default_dtype:
            torch.set_default_dtype(self.default_dtype)
        torch.set_grad_enabled(True)
        if os.environ != self.environment:
            os.environ.clear()
            os.environ.update(self.environment)
        namespace = self.namespace
        if set(map(type, namespace)) != {str}:
            kept = [(k, v) for k, v in list(namespace.items()) if type(k) is str]
            namespace.clear()
            namespace.update(kept)
        namespace["__builtins__"] = builtins
        namespace.update(self.instructor_names)

    # -- running one cell -------------------------------------------------------------------------------------------

    def execute(self, cell: Cell) -> CellDone:
        """Execute one code cell of the notebook; return its result."""
        index, source, instructor = cell.index, cell.source, cell.instructor
        started = time.perf_counter()
        self.count += 1
        self.outputs = outputs = Outputs(self.output_limit)
        sys.stdout, sys.stderr, sys.displayhook = self.stdout, self.stderr, self.displayhook
        signal.signal(signal.SIGALRM, self._on_alarm)
        before = {}
        error = None
        own_result = None
        timed_out = course_bug = False
        if instructor:
            self.reset_world()
            before = {k: v for k, v in list(self.namespace.items()) if type(k) is str}
            if len(os.listdir("/proc/self/task")) > self.threads:
                error = _error("RuntimeError", "a thread started by the submission is still running; "
                               "tests do not run beside it", [])
        if error is None:
            raised, value, has_value = self._execute(source)
            timed_out = self.timed_out
            if raised is not None:
                error = self._error_output(*raised)
                course_bug = instructor and issubclass(type(raised[0]), CourseBug)
            if error is None and has_value and value is not None:
                try:
                    own_result = {"output_type": "execute_result", "data": self._format(value), "metadata": {},
                                  "execution_count": self.count}
                except BaseException as exc:  # a broken __repr__ fails the cell, as in IPython
                    error = self._error_output(exc)
        sys.stdout.flush()
        self.fds.drain(outputs)
        if instructor and error is None and len(before):
            self.instructor_names.update({k: v for k, v in list(self.namespace.items())
                                          if type(k) is str and not k.startswith("_") and before.get(k) is not v
                                          and not _learner_fills(v)})
        truncated = bool(outputs.dropped) or outputs.truncated
        items = _plain_outputs(outputs.finish(), instructor, own_result)
        records = [output["data"].get(MIME) for output in items if output["output_type"] == "display_data"]
        diagnoses = [r["misconception"] for r in records if instructor and type(r) is dict
                     and type(r.get("misconception")) is str]
        if error is not None:
            items.append(error)
        return CellDone(index, self.count, items, timed_out=timed_out, truncated=truncated,
                        seconds=round(time.perf_counter() - started, 4), course_bug=course_bug, diagnoses=diagnoses)

    def _execute(self, source: str):
        """((exception, a syntax error?) or None, value of the last expression, whether there was one)."""
        shell = self.shell
        try:
            transformed = shell.transform_cell(source)
            filename = shell.compile.cache(transformed, self.count)
            tree = ast.parse(transformed, filename=filename)
        except BaseException as exc:  # SyntaxError and friends, shown like IPython does
            return (exc, True), None, False
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
        try:
            code = compile(body, filename, "exec")
            expression = compile(ast.Expression(last.value), filename, "eval") if last else None
        except BaseException as exc:
            return (exc, True), None, False
        value = None
        self.timed_out = False
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            exec(code, self.namespace)
            if expression is not None:
                value = eval(expression, self.namespace)
            self.armed = False
        except BaseException as exc:  # everything the cell raised, timeouts included
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            return (exc, False), None, False
        finally:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        if last is not None:
            self.namespace["_"] = value
        return None, value, last is not None

    def _error_output(self, exc: BaseException, syntax: bool = False) -> dict:
        """nbclient's error output for ``exc``; built defensively (the exception may be the submission's)."""
        name = type(exc).__name__ if type(type(exc).__name__) is str else "Error"
        try:
            text = str(exc)
        except BaseException:
            text = "<exception text unavailable>"
        try:
            if isinstance(exc, LEARNER_FACING):  # the course's own failures: the message, wrapped, no frames
                trace = exc._render_traceback_()
            elif syntax:
                trace = self.shell.SyntaxTB.structured_traceback(type(exc), exc, [])
            else:
                tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
                trace = self.shell.InteractiveTB.structured_traceback(type(exc), exc, tb)
            trace = [line for line in trace if type(line) is str]
        except BaseException:
            trace = [f"{name}: {text}"]
        if isinstance(exc, CellTimeoutError):
            name = "CellTimeoutError"
        return _error(name, text, trace)


def _error(name: str, value: str, traceback: list[str]) -> dict:
    return {"output_type": "error", "ename": str(name), "evalue": str(value), "traceback": list(traceback)}
