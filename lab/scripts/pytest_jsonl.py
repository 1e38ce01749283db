"""pytest plugin: one JSON line per test event, flushed at once, so a run stopped by a time limit still
says which tests finished, how, and which one was running.

    PYTHONPATH=lab/scripts python -m pytest -p pytest_jsonl --jsonl=out/results.jsonl ...
    python lab/scripts/summarize_pytest.py out/results.jsonl
"""
from __future__ import annotations

import json
import time

_MAX_TEXT = 20000
_out = None


def pytest_addoption(parser):
    parser.addoption("--jsonl", default=None, help="append one JSON line per test event to this file")


def pytest_configure(config):
    global _out
    path = config.getoption("jsonl")
    if path and not hasattr(config, "workerinput"):   # under xdist the controller sees every report
        _out = open(path, "a", buffering=1)


def pytest_unconfigure(config):
    global _out
    if _out:
        _out.close()
        _out = None


def _write(record: dict) -> None:
    if _out:
        _out.write(json.dumps(record) + "\n")
        _out.flush()


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "start", "nodeid": nodeid, "t": time.time()})


def pytest_runtest_logreport(report):
    text = ""
    if (report.failed or report.skipped) and report.longrepr is not None:
        text = str(report.longrepr)[:_MAX_TEXT]
    props = {}
    for k, v in getattr(report, "user_properties", ()) or ():   # e.g. ssd_examples, ssd_worst_share
        props[str(k)] = v if isinstance(v, (int, float, str, bool)) or v is None else str(v)
    _write({"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
            "duration": round(report.duration, 3), "t": time.time(), "text": text,
            "xfail": bool(getattr(report, "wasxfail", "")), "props": props})
