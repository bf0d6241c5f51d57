"""The messages between the grader (parent), a worker server in its sandbox, and the child that runs one notebook.

Three channels, each one-directional in meaning:

* **parent -> server** (the server's control socket): :class:`Configure` once, then :class:`Start` (with the write
  end of a fresh pipe attached) and :class:`Kill`;
* **server -> parent** (the same socket): :class:`Ready`, :class:`Exited`, :class:`Failed`. The server never runs
  submission code, so these are trusted;
* **child -> parent** (the job's pipe): :class:`CellDone`, :class:`AllDone`, :class:`SetupFailed`. The child runs
  submission code, so the parent checks every message: :func:`child_message` raises :class:`ProtocolError` for
  anything malformed.

Every message is a frozen dataclass, sent as one line of JSON with a ``type`` field (:func:`encode`); the code cells
to execute travel as :class:`Cell` objects. What happened to a notebook reaches the orchestration as an
:class:`Execution`, whose cells carry a :class:`CellStatus` (and, for instructor cells, whether the course's own check
failed and the misconceptions it published) and whose :class:`Stop` says, typed, why execution ended early.
"""

from __future__ import annotations

import enum
import json
import socket
import struct
from dataclasses import dataclass, field, fields, replace
from typing import Any

#: The longest message line accepted from a child (its outputs are capped far below this).
MAX_LINE = 64 << 20
#: Characters of stream output a child keeps per cell; the rest is counted and dropped.
DEFAULT_OUTPUT_LIMIT = 100_000


class ProtocolError(ValueError):
    """A message that is not one of this module's, or has fields of the wrong type."""


@dataclass(frozen=True)
class Cell:
    """One code cell to execute: its index in the notebook, its source, and whether it is an instructor cell (locked
    and known to nbgrader: its source is the instructor's, see :mod:`.kernel`)."""

    index: int
    source: str
    instructor: bool


# -- parent -> server ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Configure:
    """Sent once, first: what the server loads before it says :class:`Ready`."""

    warmup: list[list[Cell]]  # notebooks to run once (their code cells) so lazy imports happen here
    memory_mb: int
    output_limit: int
    sandboxed: bool  # the server is alone in a sandbox of its own (it may then clean /tmp and sweep processes)
    checks: list[str] = field(default_factory=list)  # the check modules the notebooks import (the core); [] all


@dataclass(frozen=True)
class Start:
    """Execute one notebook; the pipe for the child's messages comes attached to this message."""

    job: str
    cells: list[Cell]  # every code cell, in order
    workdir: str  # as the server sees it
    timeout: float
    environment: dict[str, str]


@dataclass(frozen=True)
class Kill:
    job: str


# -- server -> parent ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ready:
    seconds: float  # how long the server took to import and warm up


class Ending(enum.Enum):
    """How the child that ran a notebook ended (from ``waitpid`` in the server)."""

    EXITED = "exited"  # with a status (0 after the last cell)
    SIGNALLED = "signalled"  # by a signal it did not ask for (out of memory, abort...)
    KILLED = "killed"  # by the server, on the parent's Kill


@dataclass(frozen=True)
class Exited:
    job: str
    ending: Ending
    code: int  # exit status, or signal number


@dataclass(frozen=True)
class Failed:
    """The server cannot go on (it could not configure itself, or the job could not start)."""

    reason: str


# -- child -> parent (untrusted) -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellDone:
    index: int
    execution_count: int | None
    outputs: list[dict]
    timed_out: bool = False  # the time limit interrupted it (it then failed with CellTimeoutError)
    truncated: bool = False  # its output went over the limit and was cut
    seconds: float = 0.0
    course_bug: bool = False  # an instructor cell that failed with the course's own fault (a CourseBug)
    diagnoses: list[str] = field(default_factory=list)  # misconceptions an instructor cell's check published


@dataclass(frozen=True)
class AllDone:
    pass


@dataclass(frozen=True)
class SetupFailed:
    reason: str


PARENT_TO_SERVER = (Configure, Start, Kill)
SERVER_TO_PARENT = (Ready, Exited, Failed)
CHILD_TO_PARENT = (CellDone, AllDone, SetupFailed)
_BY_NAME = {cls.__name__: cls for cls in (*PARENT_TO_SERVER, *SERVER_TO_PARENT, *CHILD_TO_PARENT)}


def _plain(value):
    """A field's value as JSON: enums by value, cells as objects, lists of them."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Cell):
        return {"index": value.index, "source": value.source, "instructor": value.instructor}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def encode(message) -> bytes:
    """One line of JSON: the message's fields and its ``type``."""
    data = {"type": type(message).__name__}
    data.update((item.name, _plain(getattr(message, item.name))) for item in fields(message))
    return (json.dumps(data, ensure_ascii=True, allow_nan=True) + "\n").encode()


def _cells(value) -> list[Cell]:
    if type(value) is not list or not all(type(c) is dict and set(c) == {"index", "source", "instructor"}
                                          and type(c["index"]) is int and type(c["source"]) is str
                                          and type(c["instructor"]) is bool for c in value):
        raise ProtocolError("malformed cells")
    return [Cell(**c) for c in value]


def decode(line: bytes | str, allowed: tuple[type, ...]):
    """The message of one line, if its type is among ``allowed``; :class:`ProtocolError` otherwise."""
    try:
        data = json.loads(line)
    except ValueError as error:
        raise ProtocolError("not JSON") from error
    if not isinstance(data, dict) or _BY_NAME.get(data.get("type")) not in allowed:
        raise ProtocolError("not a message expected here")
    cls = _BY_NAME[data.pop("type")]
    names = {item.name for item in fields(cls)}
    if not set(data) <= names:
        raise ProtocolError(f"unknown fields in {cls.__name__}")
    try:
        message = cls(**data)
    except TypeError as error:
        raise ProtocolError(f"missing fields in {cls.__name__}") from error
    if cls is Exited:
        try:
            message = Exited(message.job, Ending(message.ending), message.code)
        except ValueError as error:
            raise ProtocolError("unknown ending") from error
    elif cls is Start:
        message = replace(message, cells=_cells(message.cells))
    elif cls is Configure:
        if type(message.warmup) is not list:
            raise ProtocolError("malformed warm-up")
        message = replace(message, warmup=[_cells(cells) for cells in message.warmup])
    return message


# -- the control socket between grader and server (trusted on both ends): length-prefixed, with file descriptors ---

_HEADER = struct.Struct("!I")


def send(channel: socket.socket, message, fds: list[int] = ()) -> None:
    """A length-prefixed message, with file descriptors attached to its header."""
    body = encode(message)
    header = _HEADER.pack(len(body))
    if fds:
        socket.send_fds(channel, [header], list(fds))
    else:
        channel.sendall(header)
    channel.sendall(body)


def receive(channel: socket.socket, allowed: tuple[type, ...]):
    """(message, file descriptors) or (None, []) at end of file."""
    header, fds, _, _ = socket.recv_fds(channel, _HEADER.size, 4)
    if not header:
        return None, []
    while len(header) < _HEADER.size:
        more = channel.recv(_HEADER.size - len(header))
        if not more:
            return None, []
        header += more
    (size,) = _HEADER.unpack(header)
    body = bytearray()
    while len(body) < size:
        chunk = channel.recv(min(1 << 20, size - len(body)))
        if not chunk:
            return None, []
        body += chunk
    return decode(bytes(body), allowed), fds


def _is_int(value) -> bool:
    return type(value) is int


def valid_output(output: Any) -> bool:
    """An output in nbformat's form (what nbclient writes), made of plain JSON values."""
    if type(output) is not dict:
        return False
    kind = output.get("output_type")
    if kind == "stream":
        return set(output) == {"output_type", "name", "text"} and output["name"] in ("stdout", "stderr") \
            and type(output["text"]) is str
    if kind in ("display_data", "execute_result"):
        data, metadata = output.get("data"), output.get("metadata", {})
        return type(data) is dict and all(type(k) is str for k in data) and type(metadata) is dict \
            and (output.get("execution_count") is None or _is_int(output["execution_count"]))
    if kind == "error":
        return type(output.get("ename")) is str and type(output.get("evalue")) is str \
            and type(output.get("traceback")) is list and all(type(x) is str for x in output["traceback"])
    return False


def child_message(line: bytes) -> CellDone | AllDone | SetupFailed:
    """A message from a child, checked field by field (the child runs submission code)."""
    message = decode(line, CHILD_TO_PARENT)
    if isinstance(message, CellDone):
        if not (_is_int(message.index) and (message.execution_count is None or _is_int(message.execution_count))
                and type(message.outputs) is list and all(valid_output(o) for o in message.outputs)
                and type(message.timed_out) is bool and type(message.truncated) is bool
                and type(message.seconds) in (int, float) and type(message.course_bug) is bool
                and type(message.diagnoses) is list and all(type(name) is str for name in message.diagnoses)):
            raise ProtocolError("malformed cell result")
    elif isinstance(message, SetupFailed) and type(message.reason) is not str:
        raise ProtocolError("malformed setup failure")
    return message


# -- what the orchestration receives ---------------------------------------------------------------------------------

class CellStatus(enum.Enum):
    RAN = "ran"  # finished (its outputs may hold an error it raised)
    TIMED_OUT = "timed out"  # interrupted by the time limit; its outputs end with CellTimeoutError
    STOPPED = "stopped"  # the process ended while it ran (see the notebook's Stop)
    NOT_RUN = "not run"  # after a stop


class StopKind(enum.Enum):
    """Why a notebook's execution ended before its last cell."""

    UNRESPONSIVE = "unresponsive"  # a cell ignored the interruption; the grader killed the process
    SIGNAL = "signal"  # killed by a signal (SIGKILL: most likely out of memory)
    EXIT = "exit"  # the process exited in the middle of a cell (os._exit or similar)
    PROTOCOL = "protocol"  # the process wrote something that is not a grader message to the grader's channel
    SETUP = "setup"  # the grader could not prepare the process
    WORKER = "worker"  # the worker server itself failed


@dataclass(frozen=True)
class Stop:
    kind: StopKind
    detail: str  # in words, for the summary ("killed by SIGABRT", "exited with status 3"...)


@dataclass
class CellResult:
    execution_count: int | None
    outputs: list[dict]  # in nbformat's form
    status: CellStatus = CellStatus.RAN
    truncated: bool = False
    course_bug: bool = False  # an instructor cell that failed with the course's own fault
    diagnoses: list[str] = field(default_factory=list)  # misconceptions an instructor cell's check published


@dataclass
class Execution:
    """What executing one notebook gave: per code cell index, its result; why it stopped early, if it did."""

    cells: dict[int, CellResult] = field(default_factory=dict)
    stop: Stop | None = None
    seconds: float = 0.0
