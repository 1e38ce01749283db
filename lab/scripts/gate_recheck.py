"""Tell a revision from a draw: replay the problems behind each of the gate's regressions under the
toolchain (or kernel revision) of this process, then put two such replays side by side.

    python lab/scripts/gate_recheck.py run CANDIDATE.json BASELINE.json --out DIR [--impl cutile] [-j 4]
    python lab/scripts/gate_recheck.py compare A/recheck.json B/recheck.json [--max-growth 2]

Two gate runs need not draw the same problems (docs/report-schema.md), so a worst error that grew may
have grown because a worse problem was drawn. `run` takes the rows `ssdcheck gate` flags, and for each
replays both worst problems, the candidate's and the baseline's, one pytest process each
(`--ssd-problem`, the test of the row's property), recording the row's metric: DIR/recheck.json.
Run it once under each revision (on a GPU host: once per toolchain bundle). `compare` pairs the two
files problem by problem: B/A on the same input is the revision's own effect; exit 1 when one grew
beyond --max-growth and uses at least --growth-floor of its tolerance, the gate's policy.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from ssdcheck_plugin import gate  # noqa: E402
from properties.problem import property_test  # noqa: E402
from ssdcheck_plugin.aggregate import unnum  # noqa: E402


def plan(candidate: str, baseline: str) -> list[dict]:
    """One replay per (row, metric, side): the problem where that side's worst was."""
    regs, _ = gate.compare_rows(gate.load_baseline(candidate, "CANDIDATE"), gate.load_baseline(baseline, "BASELINE"))
    jobs = []
    for r in regs:
        for side, problem in (("candidate", r.problem), ("baseline", r.baseline_problem)):
            if problem:
                jobs.append({"impl": r.impl, "prop": r.prop, "output": r.output, "dtype": r.dtype,
                             "metric": r.metric, "side": side, "problem": problem})
    return jobs


def replay(prop: str, problem: str, impl: str, report: str) -> tuple[dict | None, str]:
    """One pytest process on one problem: the report's rows (None if it wrote none) and what it said."""
    cmd = [sys.executable, "-m", "pytest", property_test(prop), "--impl", impl, "-p", "no:cacheprovider", "-q",
           "--ssd-problem", problem, "--ssd-report", report]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    try:
        return gate.load_baseline(report, "replay"), f"exit {proc.returncode}"
    except ValueError as e:
        return None, f"exit {proc.returncode}: {e}; {proc.stdout[-400:]}"


def run_all(jobs: list[dict], impl: str, workdir: str, workers: int) -> list[dict]:
    """Each (property, problem) replayed once, however many flagged rows and metrics it serves."""
    unique = sorted({(j["prop"], j["problem"]) for j in jobs})
    paths = {u: os.path.join(workdir, f"replay-{i}.json") for i, u in enumerate(unique)}
    with ThreadPoolExecutor(max(1, workers)) as pool:
        results = dict(zip(unique, pool.map(lambda u: replay(*u, impl, paths[u]), unique)))
    done = []
    for j in jobs:
        rows, said = results[(j["prop"], j["problem"])]
        out = {**j, "replayed_impl": impl, "said": said, "value": None, "share": None}
        row = next((r for k, r in (rows or {}).items() if k[1:] == (j["prop"], j["output"], j["dtype"])), None)
        if row is None:
            out["error"] = f"no {j['prop']} {j['output']} {j['dtype']} row in the replay ({said})"
        else:
            out["value"], out["share"] = unnum(row[j["metric"]]), unnum(row["share"])
        done.append(out)
    return done


def _share(r: dict | None) -> str:
    return "" if not r or r.get("share") is None else f"{r['share']:.3g}"


def compare(a: list[dict], b: list[dict], max_growth: float, growth_floor: float) -> tuple[list[str], int]:
    key = lambda r: (r["prop"], r["output"], r["dtype"], r["metric"], r["problem"])
    bmap = {key(r): r for r in b}
    lines = ["| property | output | dtype | metric | problem from | A | B | B/A | B share | verdict |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    grown = 0
    for ra in a:
        rb = bmap.get(key(ra))
        va, vb = ra.get("value"), rb.get("value") if rb else None
        if va is None or vb is None:
            verdict, ratio = "not replayed in both", ""
        else:
            ratio = f"{vb / va:.3g}" if va else ("inf" if vb else "1")
            bad = vb > max_growth * va and (rb.get("share") or 0) >= growth_floor
            grown += bad
            verdict = "GREW on the same input" if bad else "within the policy"
        lines.append(f"| {ra['prop']} | {ra['output']} | {ra['dtype']} | {ra['metric']} | {ra['side']}'s worst | "
                     f"{'' if va is None else f'{va:.4g}'} | {'' if vb is None else f'{vb:.4g}'} | {ratio} | "
                     f"{_share(rb)} | {verdict} |")
    return lines, grown


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("candidate")
    r.add_argument("baseline")
    r.add_argument("--out", required=True, metavar="DIR")
    r.add_argument("--impl", default="cutile")
    r.add_argument("-j", "--jobs", type=int, default=4)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--max-growth", type=float, default=2.0)
    c.add_argument("--growth-floor", type=float, default=0.01)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        try:
            jobs = plan(args.candidate, args.baseline)
        except ValueError as e:
            print(f"gate_recheck: {e}", file=sys.stderr)
            return 2
        os.makedirs(args.out, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            done = run_all(jobs, args.impl, tmp, args.jobs)
        with open(os.path.join(args.out, "recheck.json"), "w") as f:
            json.dump(done, f, indent=1)
        for d in done:
            print(f"{d['prop']} {d['output']} {d['dtype']} {d['metric']} ({d['side']}'s worst): "
                  f"{d['value'] if d['value'] is not None else d.get('error')}")
        print(f"{len(done)} replays of {len({(j['prop'], j['output'], j['dtype']) for j in jobs})} flagged rows: "
              f"{os.path.join(args.out, 'recheck.json')}")
        return 1 if any(d["value"] is None for d in done) else 0
    loaded = []
    for p in (args.a, args.b):
        try:
            with open(p) as f:
                loaded.append(json.load(f))
        except (OSError, json.JSONDecodeError) as e:
            print(f"gate_recheck: {p}: expected a recheck.json from `run` ({e})", file=sys.stderr)
            return 2
    lines, grown = compare(*loaded, args.max_growth, args.growth_floor)
    print("\n".join(lines))
    print(f"{grown} of {len(loaded[0])} replays grew beyond {args.max_growth:g}x on the same input")
    return 1 if grown else 0


if __name__ == "__main__":
    sys.exit(main())
