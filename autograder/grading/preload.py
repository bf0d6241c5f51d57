"""Imported once by the fork server: everything a submission needs, loaded before any submission runs.

Every grading process is forked from the server that imported this, so none of them pays for ``import torch`` again.
It also holds :data:`RESTORE`, the pristine-world snapshot (:mod:`autograder.grading.pristine`), taken after the
imports and before any notebook code, and a ready IPython shell.

A process that dropped its privileges may be unable to read the Python installation (here it lives under /root), so
the modules that submissions commonly import are loaded here too.
"""

from __future__ import annotations

import os

# One math thread per process (several run at once on few cores) and a non-interactive plotting backend.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["MPLBACKEND"] = "agg"

import gc  # noqa: E402
import importlib  # noqa: E402
import pkgutil  # noqa: E402

COMMON_MODULES = [
    "abc", "argparse", "array", "ast", "base64", "bisect", "calendar", "cmath", "collections", "collections.abc",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions", "functools",
    "gc", "glob", "hashlib", "heapq", "inspect", "io", "itertools", "json", "logging", "math", "numbers", "operator",
    "os", "pathlib", "pickle", "pprint", "random", "re", "statistics", "string", "struct", "tempfile", "textwrap",
    "time", "timeit", "traceback", "types", "typing", "unittest", "unittest.mock", "uuid", "warnings", "weakref",
    "zlib",
    "numpy", "numpy.linalg", "numpy.random", "numpy.testing",
    "torch", "torch.nn", "torch.nn.functional", "torch.autograd", "torch.autograd.functional", "torch.testing",
    "torch.optim", "torch.utils.data", "torch.utils.hooks", "torch.func",
    "matplotlib", "matplotlib.pyplot", "matplotlib.backends.backend_agg",
    "IPython", "IPython.display", "IPython.core.interactiveshell", "ipywidgets",
]


#: Standard-library modules never imported here (side effects, GUI, tests, other platforms).
SKIPPED_STDLIB = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3", "ensurepip",
                  "venv", "pydoc_data", "msilib", "winsound", "winreg", "msvcrt", "_winapi", "nt", "ntpath",
                  "__phello__", "_pydev_bundle", "xxsubtype", "xxlimited", "xxlimited_35", "_xxsubinterpreters",
                  "_xxtestfuzz", "_testcapi", "_testinternalcapi", "_testbuffer", "_testimportmultiple",
                  "_testmultiphase", "_ctypes_test", "_testclinic", "sre_compile", "sre_constants", "sre_parse",
                  "asyncio", "curses", "readline", "_curses", "_curses_panel", "dbm", "sqlite3", "_sqlite3",
                  "ossaudiodev", "spwd", "crypt", "nis", "imp", "distutils", "pdb", "pydoc", "cgi", "cgitb",
                  "smtpd", "asynchat", "asyncore", "telnetlib", "nntplib", "mailcap", "audioop", "chunk", "sndhdr",
                  "imghdr", "uu", "xdrlib", "pipes", "aifc", "sunau"}


def _import_stdlib() -> None:
    """The standard library, so that a process that cannot read the Python installation still finds it."""
    import sys
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(getattr(sys, "stdlib_module_names", ())):
            if name not in SKIPPED_STDLIB and not name.startswith("_") and name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - not on this platform
                    pass


def _import_all() -> None:
    _import_stdlib()
    for name in COMMON_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # an optional module missing here must not stop the server
            pass
    import autograder

    for info in pkgutil.walk_packages(autograder.__path__, "autograder."):
        # not the tooling (nbformat/nbclient/nbgrader are slow to import and no submission needs them)
        if not info.name.startswith(("autograder.grading", "autograder.__main__", "autograder.course",
                                     "autograder.notebooks")):
            importlib.import_module(info.name)


_import_all()

import torch  # noqa: E402

torch.set_num_threads(1)

from .executor import WARMUP_VARIABLE  # noqa: E402 - reference notebooks to run once here (see _warm_up)


def _warm_up() -> None:
    """Run the reference solutions once, so whatever torch or the checks import lazily is loaded before the snapshot."""
    import contextlib
    import io
    import json
    import random
    import warnings

    import numpy

    states = torch.random.get_rng_state(), numpy.random.get_state(), random.getstate()
    for path in filter(None, os.environ.get(WARMUP_VARIABLE, "").split(os.pathsep)):
        try:
            with open(path, encoding="utf-8") as file:
                cells = [c for c in json.load(file)["cells"] if c.get("cell_type") == "code"]
        except (OSError, ValueError, KeyError):
            continue
        namespace: dict = {"__name__": "__warmup__"}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for cell in cells:
                source = cell.get("source", "")
                try:
                    exec(compile("".join(source) if isinstance(source, list) else source, path, "exec"), namespace)
                except BaseException:  # noqa: BLE001 - a warm-up only loads modules; its results do not matter
                    pass
    torch.random.set_rng_state(states[0])
    numpy.random.set_state(states[1])
    random.setstate(states[2])


_warm_up()

from . import kernel, pristine  # noqa: E402

SHELL = kernel.make_shell()
RESTORE = pristine.take()

# Everything loaded so far is permanent: the collector of a forked child need not walk it (and so copy its pages).
gc.collect()
gc.freeze()
