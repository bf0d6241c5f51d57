"""Run a command as an unprivileged user, even from a root test run in a private folder.

Not root: the command runs as is (you are the unprivileged user). Root: the command runs as uid/gid 65534 through
``setpriv``, inside a mount namespace that bubblewrap (run as root) builds so that the folders the command needs
(the Python installation, the repository, a scratch folder) can be reached: every parent folder that others may not
traverse (``/root``, a ``mktemp -d`` folder) is replaced by an empty one holding only the way to those folders.
Nothing else changes: the files keep their owners and modes, so what 65534 may not read stays unreadable.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from autograder import course

USER = 65534


def available() -> str | None:
    """None if commands can run unprivileged here, else why not."""
    if os.geteuid() != 0:
        return None
    missing = [tool for tool in ("bwrap", "setpriv") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} missing: cannot drop from root in the tests" if missing else None


def _reachable(needed: list[Path]) -> list[str]:
    """bwrap arguments that make ``needed`` reachable by others through untraversable parents."""
    needed = sorted({p.resolve() for p in needed})
    blocked = sorted({parent for path in needed for parent in path.parents
                      if parent != Path("/") and not os.stat(parent).st_mode & 0o001},
                     key=lambda p: (len(p.parts), str(p)))
    args = []
    for folder in blocked:
        args += ["--tmpfs", str(folder)]
        for child in sorted({folder / path.relative_to(folder).parts[0] for path in needed
                             if folder in path.parents}):
            args += ["--bind", str(child), str(child)]
    return args


def command(argv: list[str], scratch: Path) -> list[str]:
    """``argv`` as the unprivileged user; ``scratch`` (handed over to that user) is where it may write."""
    if os.geteuid() != 0:
        return argv
    for path in [scratch, *scratch.rglob("*")]:
        os.chown(path, USER, USER, follow_symlinks=False)
    needed = [Path(sys.prefix), Path(os.path.realpath(sys.base_prefix)), course.ROOT, scratch]
    return ["bwrap", "--dev-bind", "/", "/", *_reachable(needed), "--",
            "setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--", *argv]
