"""Diff two ssdcheck reports: per-test verdicts, worst errors, timing.

    python -m ssdcheck_plugin.compare A.json B.json [--names one-gpu,two-gpu] [--out DIR]

Exit 0 when every test has the same outcome in both runs, 1 when a verdict differs or a test ran in
only one of them (lab/scripts/gpu_ci_compare.sh uses this to check that `-n 2` changes nothing but the
wall time). Differences in worst errors are listed but do not fail: with a derandomized profile they
should be identical, and any that are not point at nondeterminism worth a look.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ssdcheck_plugin.aggregate import ROW_KEY


def _load(path: str) -> dict:
    data = json.loads(Path(path).read_text())
    if not str(data.get("schema", "")).startswith("ssdcheck-report/"):
        raise SystemExit(f"{path}: not an ssdcheck report")
    return data


def compare(a: dict, b: dict) -> dict:
    ta = {t["nodeid"]: t for t in a["tests"]}
    tb = {t["nodeid"]: t for t in b["tests"]}
    verdicts = []
    for nodeid in sorted(set(ta) | set(tb)):
        oa = ta.get(nodeid, {}).get("outcome", "absent")
        ob = tb.get(nodeid, {}).get("outcome", "absent")
        if oa != ob:
            verdicts.append({"nodeid": nodeid, "a": oa, "b": ob})
    ra = {tuple(r[k] for k in ROW_KEY): r for r in a["results"]}
    rb = {tuple(r[k] for k in ROW_KEY): r for r in b["results"]}
    errors = []
    for key in sorted(set(ra) & set(rb)):
        for m in ("max_abs", "normwise", "share", "examples", "failures"):
            va, vb = ra[key][m], rb[key][m]
            if va != vb:
                errors.append({"key": list(key), "metric": m, "a": va, "b": vb})
    only = {"a": [list(k) for k in sorted(set(ra) - set(rb))], "b": [list(k) for k in sorted(set(rb) - set(ra))]}
    timing = {side: {"session_s": d["meta"]["timing"]["session_s"], "test_call_s": d["meta"]["timing"]["test_call_s"],
                     "cutile_compile": d["meta"]["timing"].get("cutile_compile"),
                     "examples": d["summary"]["examples"], "workers": (d["meta"].get("xdist") or {}).get("workers", 0),
                     "devices": (d["meta"].get("xdist") or {}).get("devices")}
              for side, d in (("a", a), ("b", b))}
    return {"same_verdicts": not verdicts, "verdict_diffs": verdicts, "error_diffs": errors,
            "rows_only_in": only, "tests": {"a": len(ta), "b": len(tb)}, "timing": timing}


def render(c: dict, names: tuple[str, str]) -> str:
    na, nb = names
    lines = [f"# ssdcheck: {na} vs {nb}", ""]
    ta, tb = c["timing"]["a"], c["timing"]["b"]
    lines += [f"| | {na} | {nb} |", "|---|---|---|",
              f"| tests | {c['tests']['a']} | {c['tests']['b']} |",
              f"| examples | {ta['examples']} | {tb['examples']} |",
              f"| xdist workers | {ta['workers']} | {tb['workers']} |",
              f"| session wall (s) | {ta['session_s']} | {tb['session_s']} |",
              f"| sum of test calls (s) | {ta['test_call_s']} | {tb['test_call_s']} |"]
    for side, t in (("a", ta), ("b", tb)):
        cc = t.get("cutile_compile") or {}
        if cc.get("measured"):
            lines.append(f"| cuTile compile (s), {names[0 if side == 'a' else 1]} | "
                         f"{cc['compile_s']} ({cc['compile_calls']} compiles, {cc['tileiras_calls']} tileiras) | |")
    lines.append("")
    if c["same_verdicts"]:
        lines.append(f"Verdicts: identical for all {c['tests']['a']} tests.")
    else:
        lines.append(f"Verdicts differ for {len(c['verdict_diffs'])} tests:")
        lines += [f"- {v['nodeid']}: {na} {v['a']}, {nb} {v['b']}" for v in c["verdict_diffs"]]
    lines.append("")
    if c["error_diffs"]:
        lines.append(f"Worst errors differ in {len(c['error_diffs'])} places (nondeterminism?):")
        lines += [f"- {' '.join(e['key'])} {e['metric']}: {e['a']} vs {e['b']}" for e in c["error_diffs"][:50]]
    else:
        lines.append("Worst errors: identical in every (impl, prop, output, dtype) row present in both.")
    for side, n in (("a", na), ("b", nb)):
        if c["rows_only_in"][side]:
            lines.append(f"Rows only in {n}: " + "; ".join(" ".join(k) for k in c["rows_only_in"][side][:20]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ssdcheck_plugin.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--names", default="a,b", help="labels of the two runs, comma-separated")
    ap.add_argument("--out", default=None, help="also write compare.md and compare.json here")
    args = ap.parse_args(argv)
    names = tuple((args.names.split(",") + ["a", "b"])[:2])
    c = compare(_load(args.a), _load(args.b))
    text = render(c, names)
    sys.stdout.write(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        (out / "compare.json").write_text(json.dumps(c, indent=1) + "\n")
    return 0 if c["same_verdicts"] else 1


if __name__ == "__main__":
    sys.exit(main())
