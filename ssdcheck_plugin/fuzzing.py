"""Fuzzing for a time budget instead of an example count, and the live progress it reports.

`--ssd-fuzz-seconds S` (or `--ssd-fuzz-until EPOCH`, what `python -m ssdcheck_fuzz` passes) gives
the session a deadline. Each test, when it starts, gets an equal share of the time left; its
Hypothesis run (fuzz profile: max_examples 100 000) is stopped when the share is used up, unless by
then every test of the session has started (under xdist: a counter the workers share), when it may
run on to the deadline. Nor does a test start an example it should not finish by the deadline: the
longest of its last three examples predicts the next one (a job's wall-clock limit, a little past the
deadline, otherwise kills the test mid-example and it ends unfinished, as two of mamba_ssm's did in a
shipped-mode fill on an H100, 2026-12-07).

How it stops: the plugin wraps the test's `.hypothesis.inner_test` (Hypothesis's documented hook for
wrapping the test body) so that, past the deadline, the next example raises `FuzzTimeUp` before it
draws anything. `FuzzTimeUp` subclasses KeyboardInterrupt because that is the one exception
Hypothesis's engine re-raises at once without recording the example (any other exception would be
a "failure" to shrink, or a FlakyStrategyDefinition); the plugin's `pytest_runtest_call` wrapper
catches exactly `FuzzTimeUp`, so the test ends as passed with the examples it ran. A real Ctrl-C is
a plain KeyboardInterrupt and still stops pytest. Once a test has seen a failing example it is never
cut: Hypothesis finishes shrinking and reports the minimal failure (which may overrun the share).
Nor is a test cut before its first example, which is the replay of the smallest failure saved in the
example database, if there is one: a short budget still re-checks the last known bug.

Progress: `Progress` counts examples, failures and the worst share as results arrive (it is fed by
the report sink) and rewrites a small JSON file at most twice a second; under xdist each worker
writes `<path>.<gwN>`. `python -m ssdcheck_fuzz` reads those files to draw its live line.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path


class FuzzTimeUp(KeyboardInterrupt):
    """The fuzz time share of the current test is used up (never a failure)."""


class StoppedByFailure(FuzzTimeUp):
    """Another worker of this run found a failure and -x/--maxfail asks to stop (never a failure)."""


_STOP_FILE: list[Path | None] = [None]   # set under xdist with -x/--maxfail: the run's shared stop flag


def set_stop_file(path: Path | None) -> None:
    _STOP_FILE[0] = path


def stop_file() -> Path | None:
    return _STOP_FILE[0]


def request_stop() -> None:
    """Tell the other workers of this run to stop before their next example."""
    path = _STOP_FILE[0]
    if path is not None:
        try:
            path.write_text(str(os.getpid()))
        except OSError:
            pass


def stop_requested() -> bool:
    """True when another process of this run asked to stop (request_stop)."""
    path = _STOP_FILE[0]
    if path is None:
        return False
    try:
        return path.read_text().strip() not in ("", str(os.getpid()))
    except OSError:
        return False


def _count_start(counter: Path) -> int:
    """Add one to the integer in `counter` under a file lock; the value before (tests started so far by
    every worker of the session)."""
    import fcntl
    with open(counter, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)            # released when the file closes
        f.seek(0)
        before = int(f.read().strip() or 0)
        f.seek(0)
        f.truncate()
        f.write(str(before + 1))
        return before


def _count_read(counter: Path) -> int:
    """The integer in `counter` (0 while there is none): tests started so far by every worker."""
    try:
        return int(counter.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


class TimeBudget:
    RECENT = 3   # examples that predict the next: enough to forget the first one's compiles

    def __init__(self, deadline: float, items_total: int = 0, workers: int = 1, counter: Path | None = None):
        self.deadline = deadline          # time.time() epoch seconds
        self.items_total = items_total
        self.workers = max(1, workers)
        self.counter = counter            # shared by xdist workers: tests started in the whole session
        self.started = 0
        self.item_deadline = math.inf
        self.failure_seen = False
        self.calls = 0                     # examples started by the current test
        self.min_calls = 1                 # never cut before this many: the first replays the saved failure
        self.cut = 0                       # tests stopped by the budget
        self.watchdog = None               # a stall.StallWatchdog told when each example starts and ends
        self.recent: list[float] = []      # seconds of the current test's last RECENT examples

    def start_item(self, now: float | None = None) -> float:
        """Deadline of the test starting now: the time left over the waves of tests still to run.

        With the session's shared counter, the tests not yet started (this one included) run in
        ceil(left / workers) waves. Without it each worker assumes its equal part of the tests, which
        xdist's load balancing breaks: a worker that drew a third test gave it all the time left while
        two tests still queued, and they never started (the H200 peers run, 2026-11-30)."""
        now = time.time() if now is None else now
        if self.counter is not None:
            left = max(1, self.items_total - _count_start(self.counter))
            waves = math.ceil(left / self.workers)
        else:
            mine = math.ceil(self.items_total / self.workers) if self.items_total else 1
            waves = max(1, mine - self.started)
        self.started += 1
        self.failure_seen = False
        self.calls = 0
        self.recent = []
        self.item_deadline = now + max(0.0, self.deadline - now) / waves
        return self.item_deadline

    def example_took(self, seconds: float) -> None:
        self.recent = (self.recent + [seconds])[-self.RECENT:]

    def expired(self, now: float | None = None) -> bool:
        """Past this test's share, unless every test of the session has started: a share leaves time for
        the tests still queued, and with none queued a test runs on to the session's deadline (in the
        cold H200 gate, with more tests than workers, the first wave's shares were half the budget, and
        a compile-bound test was cut at 6 examples while other workers had finished)."""
        now = time.time() if now is None else now
        if self.failure_seen or self.calls < self.min_calls:
            return False
        if now + max(self.recent, default=0.0) >= self.deadline:
            return True         # the next example would run past the session's deadline
        if now < self.item_deadline:
            return False
        return now >= self.share_end()

    def share_end(self) -> float:
        """When the current test's share ends: its own deadline, or the session's once every test of the
        session has started (read from the shared counter; the stall watchdog asks the same)."""
        if self.counter is not None and self.items_total and _count_read(self.counter) >= self.items_total:
            return max(self.item_deadline, self.deadline)
        return self.item_deadline


_ACTIVE: list[TimeBudget | None] = [None]   # the budget of the session running now (None: no budget)


def activate(budget: TimeBudget | None) -> None:
    """Make `budget` the one wrapped tests obey; `activate(None)` at the end of the session, so a
    later in-process pytest session (mutation runs) never inherits an expired budget."""
    _ACTIVE[0] = budget


def _not_failures() -> tuple:
    """What an example may raise without having failed: our own stops, and Hypothesis's rejection and
    end-of-data signals (assume()/reject(), a draw past the buffer)."""
    from hypothesis.errors import StopTest, UnsatisfiedAssumption
    return (FuzzTimeUp, UnsatisfiedAssumption, StopTest)


def wrap_inner_test(test_fn) -> bool:
    """Make the Hypothesis test `test_fn` stop when the active budget's current share expires, or when
    another worker asked to stop (StoppedByFailure).
    The wrapper is installed once per function (parametrized items share it)."""
    handle = getattr(test_fn, "hypothesis", None)
    if handle is None or getattr(handle.inner_test, "_ssdcheck_budget", False):
        return handle is not None
    inner = handle.inner_test
    global _NOT_FAILURES
    _NOT_FAILURES = _not_failures()

    def budgeted(*args, **kwargs):
        if stop_requested():
            raise StoppedByFailure()
        budget = _ACTIVE[0]
        if budget is not None:
            if budget.expired():
                raise FuzzTimeUp()
            budget.calls += 1
            if budget.watchdog is not None:
                budget.watchdog.example_started()
            t0 = time.monotonic()
            try:
                return inner(*args, **kwargs)
            except BaseException as e:
                # Any failure, not only a property result the sink saw (an exception inside the
                # implementation, an assertion of the test itself), stops the budget from cutting the
                # test: cut while shrinking, the failure would be dropped and the test pass.
                if not isinstance(e, _NOT_FAILURES):
                    budget.failure_seen = True
                raise
            finally:
                budget.example_took(time.monotonic() - t0)
                if budget.watchdog is not None:
                    budget.watchdog.example_finished()
        return inner(*args, **kwargs)

    budgeted._ssdcheck_budget = True
    budgeted.__wrapped__ = inner
    handle.inner_test = budgeted
    return True


class Progress:
    """Live counters, written as JSON for the fuzz driver's progress line."""

    def __init__(self, path: str | Path | None, *, budget: TimeBudget | None = None, interval: float = 0.5):
        self.path = Path(path) if path else None
        self.budget = budget
        self.interval = interval
        self.t0 = time.time()
        self.examples = 0
        self.failures = 0
        self.failed_tests = 0
        self.tests_done = 0
        self.tests_total = 0
        self.props: set[tuple[str, str]] = set()
        self.worst_share = 0.0
        self.worst_where = ""
        self.current = ""
        self._last = 0.0

    def on_result(self, result) -> None:
        self.examples += 1
        self.failures += 0 if result.strict_passed else 1
        self.props.add((result.impl, result.prop))
        s = result.worst_share
        s = math.inf if math.isnan(s) else s
        if s > self.worst_share or not self.worst_where:
            worst = max(result.comparisons, key=lambda c: c.share, default=None)
            self.worst_share = s
            self.worst_where = f"{result.impl} {result.prop} {worst.output if worst else ''} {result.problem.dtype}"
        self.write()

    def write(self, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.time()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        state = {"t": now, "elapsed": now - self.t0, "deadline": self.budget.deadline if self.budget else None,
                 "examples": self.examples, "failures": self.failures, "failed_tests": self.failed_tests,
                 "tests_done": self.tests_done, "tests_total": self.tests_total, "props": len(self.props),
                 "worst_share": "inf" if math.isinf(self.worst_share) else self.worst_share,
                 "worst_where": self.worst_where, "current": self.current, "pid": os.getpid()}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.path)
        except OSError:
            pass


def read_progress(path: str | Path) -> dict:
    """Sum the progress files of one run (`path` and `path.gwN`)."""
    p = Path(path)
    files = [p] if p.exists() else []
    files += sorted(p.parent.glob(p.name + ".gw*")) if p.parent.exists() else []
    total = {"examples": 0, "failures": 0, "failed_tests": 0, "tests_done": 0, "tests_total": 0, "props": 0,
             "worst_share": 0.0, "worst_where": "", "current": [], "files": len(files)}
    for f in files:
        if f.name.endswith(".tmp"):
            continue
        try:
            s = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for k in ("examples", "failures", "failed_tests", "tests_done", "props"):
            total[k] += s.get(k, 0)
        total["tests_total"] = max(total["tests_total"], s.get("tests_total", 0))
        share = float(s.get("worst_share", 0.0))
        if share > total["worst_share"] or not total["worst_where"]:
            total["worst_share"], total["worst_where"] = share, s.get("worst_where", "")
        if s.get("current"):
            total["current"].append(s["current"])
    return total
