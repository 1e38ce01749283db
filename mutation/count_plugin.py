"""pytest plugin for mutation runs: how many Hypothesis examples each test ran, and which one failed.

Loaded with `-p mutation.count_plugin`; writes JSON to the path in $SSDCHECK_MUTATION_REPORT after
every test (so a run killed on timeout still leaves what it finished). Per test nodeid:

    examples        calls of the test body (Hypothesis examples, including a final replay)
    first_failure   1-based index of the first example that raised, or null
    error           "ExcType: first line of the message" of that example
    problem         the SSDProblem(...) (or GradProblem(...)) line of a property failure, when there is one
    outcome         passed | failed | skipped | error (setup/teardown failed)
    seconds         the call phase's duration

and, for time-to-failure runs (mutation/ttf.py), `first_failure`: the first example of the run that
raised, with `time` (time.time() when it raised: what a fail-fast run can print at once),
`nodeid`, `examples_run` (examples of every test so far, that one included) and `compiles` (compiles
so far: `cutile` tileiras runs and `cutile_calls` compiles from the ssdcheck plugin's compile timer
when it is installed, `triton` kernels compiled into $TRITON_CACHE_DIR since the run started); and
`peer_files`, where the peer modules the adapters load came from (a peer mutant's copy, or not);
and `phases`: time.time() when pytest was configured, when collection finished and when the first
example started, so a run's seconds split into start-up, collection and examples.

It counts through `test.hypothesis.inner_test`, Hypothesis' documented hook for wrapping the inner test
(pytest-trio uses it), so it needs nothing from ssdcheck's own test code.
"""
from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import pytest

ENV = "SSDCHECK_MUTATION_REPORT"
_tests: dict[str, dict] = {}
_run = {"examples": 0, "first_failure": None, "config": None, "triton_at_start": 0, "phases": {}}


def _entry(nodeid: str) -> dict:
    return _tests.setdefault(nodeid, {"examples": 0, "first_failure": None, "error": None, "problem": None,
                                      "outcome": None, "seconds": 0.0})


def _flush() -> None:
    path = os.environ.get(ENV)
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"tests": _tests, "first_failure": _run["first_failure"], "peer_files": _peer_files(),
                       "phases": _run["phases"]}, f, indent=1)
        os.replace(tmp, path)


# The peers' modules the adapters load: a peer mutant run must have loaded them from its copy.
PEER_MODULES = ("tilegym.ops.cutile.mamba2", "mamba_ssm.ops.triton.ssd_combined")


def _peer_files() -> dict:
    import sys
    return {name: getattr(sys.modules[name], "__file__", None) for name in PEER_MODULES if name in sys.modules}


def _triton_kernels() -> int:
    """Compiled kernels in Triton's cache directory (one .cubin each), 0 without one."""
    d = os.environ.get("TRITON_CACHE_DIR")
    return sum(1 for _ in Path(d).rglob("*.cubin")) if d and os.path.isdir(d) else 0


def compile_counts(config) -> dict:
    """Compiles so far: the ssdcheck plugin's cuTile compile timer (if installed), Triton's cache."""
    out = {}
    state = config.pluginmanager.get_plugin("ssdcheck-state") if config is not None else None
    timer = getattr(state, "timer", None)
    if timer is not None and getattr(timer, "installed", False):
        out["cutile"] = timer.tileiras_calls
        out["cutile_calls"] = timer.compile_calls
    if os.environ.get("TRITON_CACHE_DIR"):
        out["triton"] = _triton_kernels() - _run["triton_at_start"]
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def _problem_line(e: BaseException) -> str | None:
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip().startswith(("SSDProblem(", "GradProblem("))),
                None)


SEED_ENV = "SSDCHECK_MUTATION_SEED"


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """With $SSDCHECK_MUTATION_SEED (and --hypothesis-seed): the `mutant` profile, not derandomized.
    A measurement of how robust a kill is (mutation.run --seeds), never the verdict itself."""
    _run["config"] = config
    _run["phases"]["configured"] = time.time()
    _run["triton_at_start"] = _triton_kernels()
    if os.environ.get(SEED_ENV) is None:
        return
    from hypothesis import settings
    settings.register_profile("mutant-seeded", parent=settings.get_profile("mutant"), derandomize=False)
    settings.load_profile("mutant-seeded")


def pytest_collection_finish(session):
    _run["phases"]["collected"] = time.time()


def _is_failure(e: BaseException) -> bool:
    """An example that failed, not one rejected (assume/reject), skipped, or cut by a time budget
    (those raise BaseExceptions that are not Exceptions, or UnsatisfiedAssumption)."""
    from hypothesis.errors import UnsatisfiedAssumption
    return isinstance(e, Exception) and not isinstance(e, UnsatisfiedAssumption)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    hyp = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(hyp, "inner_test", None)
    if inner is None:
        yield
        return
    entry = _entry(item.nodeid)

    @functools.wraps(inner)
    def counted(*args, **kwargs):
        entry["examples"] += 1
        _run["examples"] += 1
        _run["phases"].setdefault("first_example", time.time())
        try:
            return inner(*args, **kwargs)
        except BaseException as e:
            if _run["first_failure"] is None and _is_failure(e):
                _run["first_failure"] = {"time": time.time(), "nodeid": item.nodeid, "examples_run": _run["examples"],
                                         "compiles": compile_counts(_run["config"])}
                _flush()
            if entry["first_failure"] is None:
                entry["first_failure"] = entry["examples"]
                entry["error"] = _first_line(e)
                entry["problem"] = _problem_line(e)
            raise

    hyp.inner_test = counted
    try:
        yield
    finally:
        hyp.inner_test = inner


def pytest_runtest_logreport(report):
    entry = _entry(report.nodeid)
    if report.when == "call":
        entry["outcome"] = report.outcome
        entry["seconds"] = round(report.duration, 3)
    elif report.failed:
        entry["outcome"] = "error"
        if entry["error"] is None:
            entry["error"] = f"{report.when} failed: {str(report.longrepr).strip().splitlines()[-1][:300]}"
    elif report.skipped and entry["outcome"] is None:
        entry["outcome"] = "skipped"
    _flush()


def pytest_sessionfinish(session, exitstatus):
    _flush()
