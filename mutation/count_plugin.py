"""pytest plugin for mutation runs: how many Hypothesis examples each test ran, and which one failed.

Loaded with `-p mutation.count_plugin`; writes JSON to the path in $SSDCHECK_MUTATION_REPORT after
every test (so a run killed on timeout still leaves what it finished). Per test nodeid:

    examples        calls of the test body (Hypothesis examples, including a final replay)
    first_failure   1-based index of the first example that raised, or null
    error           "ExcType: first line of the message" of that example
    problem         the SSDProblem(...) line of a property failure, when there is one
    outcome         passed | failed | skipped | error (setup/teardown failed)
    seconds         the call phase's duration

It counts through `test.hypothesis.inner_test`, Hypothesis' documented hook for wrapping the inner test
(pytest-trio uses it), so it needs nothing from ssdcheck's own test code.
"""
from __future__ import annotations

import functools
import json
import os

import pytest

ENV = "SSDCHECK_MUTATION_REPORT"
_tests: dict[str, dict] = {}


def _entry(nodeid: str) -> dict:
    return _tests.setdefault(nodeid, {"examples": 0, "first_failure": None, "error": None, "problem": None,
                                      "outcome": None, "seconds": 0.0})


def _flush() -> None:
    path = os.environ.get(ENV)
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"tests": _tests}, f, indent=1)
        os.replace(tmp, path)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def _problem_line(e: BaseException) -> str | None:
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip().startswith("SSDProblem(")), None)


SEED_ENV = "SSDCHECK_MUTATION_SEED"


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """With $SSDCHECK_MUTATION_SEED (and --hypothesis-seed): the `mutant` profile, not derandomized.
    A measurement of how robust a kill is (mutation.run --seeds), never the verdict itself."""
    if os.environ.get(SEED_ENV) is None:
        return
    from hypothesis import settings
    settings.register_profile("mutant-seeded", parent=settings.get_profile("mutant"), derandomize=False)
    settings.load_profile("mutant-seeded")


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
        try:
            return inner(*args, **kwargs)
        except BaseException as e:
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
