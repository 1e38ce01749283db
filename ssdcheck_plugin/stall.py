"""Say where an example hangs, while it hangs.

The time budget (fuzzing.TimeBudget) stops a test only between examples, so an example that never
returns (a wedged compile, a kernel that does not finish, a lock) runs until the job's own time limit
kills pytest, and a killed xdist worker leaves no report: the H200 peers run of 2026-12-01 lost one
test that way with no trace of where it waited. The watchdog is a daemon thread of each budgeted
process. When the running example is still running `grace_s` after its test's share of the time ran
out, it writes once per example: the test, how long the example has run, the drawn SSDProblem (found
among the stuck thread's locals) and every thread's stack, to stderr and to `path` when given.
It only reports; it never stops the example (stopping it could hide a real failure).

That thread needs the GIL, and an example can hang inside a C call that holds it (a synchronous
device-to-host copy behind a kernel that never finishes): the DTP kernel (lab/reports/2026-12-01-dtp-hang.md) hung the H200 that
way, twice, and left neither a report nor a stall file. So the watchdog also arms faulthandler's C-level
timer at every example start (`hang_s`): an example running `hang_s` seconds dumps every thread's
Python stack to `hang_path` without the GIL, under a header naming the test; the timer is cancelled when
the example returns.
"""
from __future__ import annotations

import faulthandler
import sys
import threading
import time
import traceback
from pathlib import Path


def _problem_in(frame) -> object | None:
    """The innermost SSDProblem among the locals of `frame` and its callers (None if none)."""
    from properties.problem import SSDProblem
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, SSDProblem):
                return value
        frame = frame.f_back
    return None


def describe(thread_id: int, header: str, nodeid: str = "") -> str:
    """`header`, the drawn problem of thread `thread_id` (and the command that re-runs it alone) and
    every thread's stack, as text."""
    frames = sys._current_frames()
    lines = [header]
    stuck = frames.get(thread_id)
    problem = _problem_in(stuck) if stuck is not None else None
    if problem is None:
        lines.append("problem: (no SSDProblem among the locals)")
    else:
        lines.append(f"problem: {problem!r}")
        lines.append(f"re-run it alone (with the run's --impl): pytest '{nodeid}' -p no:cacheprovider "
                     f"--ssd-problem \"{problem!r}\"")
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in frames.items():
        if ident == threading.get_ident():
            continue   # the watchdog itself
        lines.append(f"--- thread {names.get(ident, ident)}{' (the stuck one)' if ident == thread_id else ''}")
        lines.extend(s.rstrip("\n") for s in traceback.format_stack(frame))
    return "\n".join(lines) + "\n"


class StallWatchdog:
    """Watches one process's examples against its TimeBudget (fuzzing.py)."""

    def __init__(self, budget, *, grace_s: float = 20.0, path: Path | None = None, worker: str = "main",
                 poll_s: float = 1.0, clock=time.time, hang_s: float = 0.0, hang_path: Path | None = None):
        self.budget = budget
        self.grace_s = grace_s
        self.path = path
        self.hang_s = hang_s
        self.hang_path = hang_path
        self._hang_file = None
        self._hang_header = ""     # the test the last header in the hang file named
        self.worker = worker
        self.poll_s = poll_s
        self.clock = clock
        self.nodeid = ""
        self.reports = 0
        self._example: tuple[int, float, int] | None = None   # (thread id, start time, example number)
        self._reported: tuple[int, float, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # called by the budgeted example wrapper (fuzzing.wrap_inner_test)
    def example_started(self) -> None:
        self._example = (threading.get_ident(), self.clock(), self.budget.calls)
        if self._hang_file is not None:
            if self.nodeid != self._hang_header:    # one header per test, not per example
                self._hang_header = self.nodeid
                self._hang_file.write(f"ssdcheck hang watch: {self.nodeid} on {self.worker}: an example running "
                                      f"{self.hang_s:g} s dumps every thread's stack below\n")
                self._hang_file.flush()             # faulthandler writes to the descriptor, after this
            faulthandler.dump_traceback_later(self.hang_s, repeat=False, file=self._hang_file)

    def example_finished(self) -> None:
        self._example = None
        if self._hang_file is not None:
            faulthandler.cancel_dump_traceback_later()

    def check(self) -> str | None:
        """Write a stall report if the running example is overdue; the report's text, else None."""
        ex = self._example
        if ex is None or ex == self._reported or self.budget.failure_seen:
            return None          # a failing test may shrink past its share: that is not a stall
        now = self.clock()
        end = self.budget.item_deadline
        if now - max(end, ex[1]) >= self.grace_s:   # past its own share: has the share stretched (fuzzing)?
            end = self.budget.share_end()
        overdue = now - max(end, ex[1])
        if overdue < self.grace_s:
            return None
        self._reported = ex
        self.reports += 1
        text = describe(ex[0], (f"ssdcheck stall: {self.nodeid} on {self.worker}: example {ex[2]} has run "
                                f"{now - ex[1]:.0f} s, {overdue:.0f} s past the test's time share "
                                f"(written {time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(now))}Z)"), self.nodeid)
        sys.stderr.write(text)
        sys.stderr.flush()
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a") as f:
                    f.write(text + "\n")
            except OSError:
                pass
        return text

    def start(self) -> None:
        if self.hang_s > 0 and self.hang_path is not None:
            self.hang_path.parent.mkdir(parents=True, exist_ok=True)
            self._hang_file = open(self.hang_path, "a")    # noqa: SIM115 - kept open: faulthandler needs its fd

        def loop():
            while not self._stop.wait(self.poll_s):
                self.check()
        self._thread = threading.Thread(target=loop, name="ssdcheck-stall-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._hang_file is not None:
            faulthandler.cancel_dump_traceback_later()
            self._hang_file.close()
            self._hang_file = None


def hang_dumps(text: str) -> int:
    """How many stack dumps a hang file holds (faulthandler starts each with 'Timeout (H:MM:SS)!')."""
    return text.count("Timeout (")
