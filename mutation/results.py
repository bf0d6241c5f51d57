"""Read what mutmut decided about each mutant, in terms that survive the run: function and changed source lines.

mutmut names a mutant ``reference.ex01_chain_rule.x_central_difference__mutmut_7``; the number is local to one run.
A mutant here is identified instead by its exercise, its function (``Value.__add__`` for a method) and the code of
the lines it changes (comments and indentation dropped), which is also how mutation/equivalent.toml and
mutation/sample.toml name mutants.
"""

from __future__ import annotations

import io
import json
import os
import tokenize
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from . import extract, workspace


@dataclass(frozen=True)
class Mutant:
    function: str        # "central_difference", or "Value.__add__" for a method
    status: str          # mutmut's verdict (killed, survived, timeout...) or "crashed" (see mutation/cells.py)
    original: str        # the code of the changed lines, "\n"-joined, before...
    mutated: str         # ...and after the mutation
    cell: str            # the solution cell (grade id) and
    line: int            # the 1-based line in that cell where the change starts (0: not found)
    crash: str = ""      # what a check raised, when one crashed under this mutant

    @property
    def key(self) -> tuple[str, str, str]:
        return self.function, self.original, self.mutated

    def to_dict(self) -> dict:
        return asdict(self)


def code_of(line: str) -> str:
    """The code on a source line: indentation, the trailing comment and mutmut's pragma dropped."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line.split(extract.NO_MUTATE)[0].strip()
    comments = [t for t in tokens if t.type == tokenize.COMMENT]
    text = line.strip()
    return (text[:comments[0].start[1]] if comments else text).rstrip()


def changed_lines(diff: str) -> tuple[str, str]:
    """(original, mutated) code of the lines a unified diff changes."""
    body = [line for line in diff.splitlines()[2:] if line[:1] in "-+"]
    original = "\n".join(code_of(line[1:]) for line in body if line.startswith("-"))
    mutated = "\n".join(code_of(line[1:]) for line in body if line.startswith("+"))
    return original, mutated


def locate(exercise: extract.Exercise, function: str, original: str) -> tuple[str, int]:
    """(solution cell, 1-based line) where ``function``'s changed code starts in the notebook."""
    name = function.rpartition(".")[2]
    first = original.split("\n")[0]
    for cell, source in exercise.cells.items():
        lines = source.splitlines()
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {name}(")]
        for start in starts:
            for number in range(start, len(lines)):
                if code_of(lines[number]) == first:
                    return cell, number + 1
    return "", 0


def function_name(mutant_key: str) -> str:
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    name, class_name = orig_function_and_class_names_from_key(mutant_key)
    return f"{class_name}.{name}" if class_name else name


@contextmanager
def _inside(directory: Path):
    from mutmut.configuration import reset_config

    before = Path.cwd()
    os.chdir(directory)
    reset_config()
    try:
        yield
    finally:
        os.chdir(before)
        reset_config()


def crashes(log: Path) -> dict[str, str]:
    """mutmut's mutant name -> the first check crash recorded under it."""
    found: dict[str, str] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            record = json.loads(line)
            found.setdefault(record["mutant"], f"{record['cell']}@{record['seed']}: {record['error']}")
    return found


def collect(project: Path, exercise: extract.Exercise, crash_log: Path) -> list[Mutant]:
    """Every mutant of ``exercise`` in the finished mutmut run in ``project``."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    crashed = crashes(crash_log)
    path = Path("src") / workspace.PACKAGE / f"{exercise.module}.py"
    mutants = []
    with _inside(project):
        data = SourceFileMutationData(path=path)
        data.load()
        for key, exit_code in data.exit_code_by_key.items():
            status = status_by_exit_code[exit_code]
            if key in crashed and status == "survived":
                status = "crashed"
            original, mutated = changed_lines(get_diff_for_mutant(key, path=path))
            function = function_name(key)
            cell, line = locate(exercise, function, original)
            mutants.append(Mutant(function, status, original, mutated, cell, line, crashed.get(key, "")))
    return mutants
