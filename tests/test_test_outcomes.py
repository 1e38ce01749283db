"""The report's per-test outcome (SSDState.pytest_runtest_logreport): a test passes only when its call passes."""
from __future__ import annotations

from types import SimpleNamespace

from ssdcheck_plugin.plugin import SSDState


def _state():
    st = object.__new__(SSDState)   # only what the hook reads: the controller's verdict table
    st.is_controller, st.tests, st.reproducers = True, {}, []
    return st


def _report(when, outcome, nodeid="t.py::test_a"):
    return SimpleNamespace(nodeid=nodeid, when=when, duration=0.1, user_properties=[], failed=outcome == "failed",
                           passed=outcome == "passed", skipped=outcome == "skipped")


def _outcome(*reports):
    st = _state()
    for r in reports:
        st.pytest_runtest_logreport(r)
    return st.tests["t.py::test_a"]["outcome"]


def test_a_test_cut_off_after_its_setup_is_unfinished_not_passed():
    """A time limit that stops the run while a test runs leaves only its setup report (a vLLM run on the
    H200 had one such test counted as passed): it must not count as a pass."""
    assert _outcome(_report("setup", "passed")) == "unfinished"


def test_outcomes_of_finished_tests():
    assert _outcome(_report("setup", "passed"), _report("call", "passed"), _report("teardown", "passed")) == "passed"
    assert _outcome(_report("setup", "passed"), _report("call", "failed"), _report("teardown", "passed")) == "failed"
    assert _outcome(_report("setup", "skipped"), _report("teardown", "passed")) == "skipped"
    assert _outcome(_report("setup", "passed"), _report("call", "skipped")) == "skipped"
    assert _outcome(_report("setup", "failed")) == "error"
    assert _outcome(_report("setup", "passed"), _report("call", "passed"), _report("teardown", "failed")) == "error"
