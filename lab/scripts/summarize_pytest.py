"""Per-test summary of a pytest run from the JSON lines of lab/scripts/pytest_jsonl.py.

    python lab/scripts/summarize_pytest.py results.jsonl [more.jsonl ...]

One line per test: PASS / FAIL / ERROR / SKIP / XFAIL / INTERRUPTED (started, never finished: the
run hit its time limit there; its time runs from its start to the log's last event), its time, the
examples it evaluated and its worst share of the tolerance (the ssdcheck plugin's `ssd_examples` /
`ssd_worst_share`, 1.0 = at the limit), and for failures the first error line and the one-line
repro command the property suite notes (`--ssd-problem "SSDProblem(...)"`).
"""
from __future__ import annotations

import ast
import json
import sys


def _first_error(text: str) -> str:
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("E ") and s[1:].strip():
            return s[1:].strip()[:300]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "")[:300]


def _repro(text: str) -> str | None:
    for line in text.splitlines():
        if "--ssd-problem" in line:
            return line.strip().lstrip("E").strip()[:600]
    return None


def _skip_reason(text: str) -> str:
    """A skip's longrepr is the repr of (path, line, 'Skipped: reason')."""
    try:
        parts = ast.literal_eval(text.strip())
        text = parts[-1] if isinstance(parts, tuple) else text
    except (ValueError, SyntaxError):
        pass
    return str(text).removeprefix("Skipped: ")[:200]


def summarize(records: list[dict]) -> tuple[list[dict], dict]:
    tests: dict[str, dict] = {}
    last_t = max((r.get("t", 0.0) for r in records), default=0.0)
    for r in records:
        t = tests.setdefault(r["nodeid"], {"nodeid": r["nodeid"], "phases": {}, "duration": 0.0})
        if r["event"] == "start":
            t["start"] = r.get("t")
        if r["event"] == "report":
            t["phases"][r["when"]] = r
            t["duration"] += r.get("duration", 0.0)
    rows, counts = [], {}
    for t in tests.values():
        ph = t["phases"]
        setup, call = ph.get("setup"), ph.get("call")
        detail = ""
        if setup and setup["outcome"] == "skipped":
            outcome, detail = "SKIP", _skip_reason(setup["text"])
        elif setup and setup["outcome"] == "failed":
            outcome, detail = "ERROR", _first_error(setup["text"])
        elif call is None:
            outcome = "INTERRUPTED"
            if t.get("start") is not None:   # how long it had run: a hang looks like a test that never ends
                t["duration"] = last_t - t["start"]
                detail = f"still running at the log's last event, {t['duration']:.0f} s after it started"
        elif call["outcome"] == "passed":
            outcome = "PASS"
        elif call["outcome"] == "skipped":
            outcome = "XFAIL" if call.get("xfail") else "SKIP"
            detail = _skip_reason(call["text"])
        else:
            outcome, detail = "FAIL", _first_error(call["text"])
        teardown = ph.get("teardown")
        if outcome == "PASS" and teardown and teardown["outcome"] == "failed":
            outcome, detail = "ERROR", "teardown: " + _first_error(teardown["text"])
        repro = _repro(call["text"]) if call and call["outcome"] == "failed" else None
        props = (call or {}).get("props") or {}
        counts[outcome] = counts.get(outcome, 0) + 1
        rows.append({"nodeid": t["nodeid"], "outcome": outcome, "duration": t["duration"], "detail": detail,
                     "repro": repro, "examples": props.get("ssd_examples"), "worst": props.get("ssd_worst_share")})
    return rows, counts


def render(rows: list[dict], counts: dict) -> str:
    head = ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items()))
    out = [f"per-test summary: {len(rows)} tests: {head or 'none recorded'}",
           f"{'outcome':11} {'s':>7} {'examples':>8} {'worst':>6}  test"]
    for r in rows:
        name = r["nodeid"].split("::")[-1]
        ex = "" if r.get("examples") is None else str(r["examples"])
        worst = "" if r.get("worst") is None else f"{float(r['worst']):.2f}"
        out.append(f"{r['outcome']:11} {r['duration']:7.1f} {ex:>8} {worst:>6}  {name}")
        if r["detail"]:
            out.append(f"{'':21}{r['detail']}")
        if r["repro"]:
            out.append(f"{'':21}repro: {r['repro']}")
    return "\n".join(out)


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:])
    records = []
    for p in paths:
        try:
            with open(p) as f:
                records += [json.loads(line) for line in f if line.strip()]
        except OSError as e:
            print(f"summarize_pytest: {p}: {e}", file=sys.stderr)
    rows, counts = summarize(records)
    print(render(rows, counts))
    return 1 if any(k in counts for k in ("FAIL", "ERROR", "INTERRUPTED")) else 0


if __name__ == "__main__":
    sys.exit(main())
