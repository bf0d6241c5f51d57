"""The suite's timeline: which pytest-xdist worker ran which test module when, in the last lines of every run.

The suite's wall time on two cores depends on how its long groups (the grading pipeline, the browser, the grade
command, the term walk-through, the catalogue) share the workers, which ``--durations`` cannot show: a worker that
waits with nothing left to run, or two groups of several busy processes each side by side, look the same there.
Registered by tests/conftest.py on the controller only (the workers' reports reach it with their worker's id).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

#: Segments shorter than this (seconds) are summed into one line per worker.
SHORT = 10.0


@dataclass
class Segment:
    """One module's tests run one after another on one worker."""

    module: str
    start: float
    stop: float
    busy: float


class Timeline:
    """A pytest plugin: collects every test phase's report (setup, call, teardown) and prints the timeline."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, str, float, float]] = []  # (worker, module, start, stop)
        self.begun = time.time()  # replaced at the session's start: collection and the workers' start count

    def pytest_sessionstart(self, session) -> None:
        self.begun = time.time()

    def pytest_runtest_logreport(self, report) -> None:
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
        module = report.nodeid.split("::")[0].removeprefix("tests/")
        self.phases.append((worker, module, report.start, report.stop))

    def segments(self) -> dict[str, list[Segment]]:
        """Per worker, its runs of one module, in the order it ran them."""
        result: dict[str, list[Segment]] = {}
        for worker, module, start, stop in sorted(self.phases, key=lambda phase: phase[2]):
            runs = result.setdefault(worker, [])
            if runs and runs[-1].module == module:
                runs[-1].stop, runs[-1].busy = stop, runs[-1].busy + stop - start
            else:
                runs.append(Segment(module, start, stop, stop - start))
        return result

    def lines(self) -> list[str]:
        if not self.phases:
            return []
        origin = self.begun
        end = max(phase[3] for phase in self.phases)
        lines = [f"{len(self.phases)} test phases, the last done {end - origin:.0f} s after the session began; per "
                 "worker, its modules in the order run (seconds since the session began; busy: in tests and fixtures)"]
        for worker, runs in sorted(self.segments().items()):
            busy = sum(run.busy for run in runs)
            lines.append(f"{worker}: busy {busy:.0f} s, first test at {runs[0].start - origin:.0f} s, last done at "
                         f"{runs[-1].stop - origin:.0f} s")
            short = [run for run in runs if run.stop - run.start < SHORT]
            lines += [f"  {run.start - origin:6.0f} – {run.stop - origin:4.0f} s  {run.module} (busy {run.busy:.0f} s)"
                      for run in runs if run.stop - run.start >= SHORT]
            if short:
                busy_short = sum(run.busy for run in short)
                lines.append(f"  {len(short)} shorter runs (< {SHORT:.0f} s each), busy {busy_short:.0f} s")
        return lines

    @pytest.hookimpl(trylast=True)  # after --durations: the run's last lines before the short summary
    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = self.lines()
        if lines:
            terminalreporter.section("timeline")
            for line in lines:
                terminalreporter.write_line(line)
