"""Why did a mutant survive? Measure each property's share of its tolerance on many drawn problems.

    python -m mutation.probe --catalog torch_ref --only ID [--prop prop_matches_oracle ...] [-n 200]

Applies the mutant to a fresh copy of the tree (as mutation.run does), draws `n` problems with the
suite's own strategy (derandomized, no shrinking) and prints, per property: how many problems it
applied to, how many failed, the largest share of the tolerance used (1.0 = at the limit) and the
first failing problem. A property that never reaches 1.0 cannot kill the mutant on any problem the
strategy draws; one that fails rarely needs more examples or a strategy that reaches its regime.
Without --only it probes the unmutated tree (the suite's own headroom).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mutation.catalog import load_catalog
from mutation.engine import ROOT, apply_patch, snapshot

SCRIPT = r'''
import json, sys, math, collections
from hypothesis import given, settings, HealthCheck, Phase, strategies as st
from kernels.registry import lookup
from properties import invariants
from properties.strategies import ssd_problems

impl, n, props, pins = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), json.loads(sys.argv[4])
info = lookup(impl)
stats = {p: dict(applied=0, failed=0, max_share=0.0, first=None, worst=None, errors=0, by_dtype={}) for p in props}

@settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(st.data())
def probe(data):
    problem = data.draw(ssd_problems(info))
    if pins:
        choice = {k: data.draw(st.sampled_from(v)) if isinstance(v, list) else v for k, v in pins.items()}
        try:
            problem = problem.replace(**choice)
        except ValueError:
            return
    for p in props:
        s = stats[p]
        try:
            r = invariants.PROPERTIES[p](info, problem)
        except Exception as e:
            s["errors"] += 1
            s["failed"] += 1
            s["first"] = s["first"] or f"{type(e).__name__}: {e} on {problem!r}"
            continue
        if r.skipped:
            continue
        s["applied"] += 1
        share = r.worst_share
        s["by_dtype"][problem.dtype] = max(s["by_dtype"].get(problem.dtype, 0.0), share)
        if share > s["max_share"]:
            s["max_share"], s["worst"] = share, repr(problem)
        if not r.passed:
            s["failed"] += 1
            s["first"] = s["first"] or repr(r.problem)

probe()
print(json.dumps(stats))
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mutation.probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--catalog", default="torch_ref")
    ap.add_argument("--only", help="mutant id (default: the unmutated tree)")
    ap.add_argument("--prop", action="append", help="property name (repeatable; default: all)")
    ap.add_argument("-n", type=int, default=100, help="problems to draw (default 100)")
    ap.add_argument("--patch", action="append", type=Path, default=[], metavar="DIFF",
                    help="apply this unified diff to the copied tree first (a proposed suite change)")
    ap.add_argument("--json", type=Path, help="also write the per-property statistics here")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a drawn SSDProblem field (a Python literal; a list draws one of its items)")
    args = ap.parse_args(argv)
    catalog = load_catalog(args.catalog)
    tmp = Path(tempfile.mkdtemp(prefix="ssdcheck-probe-"))
    try:
        tree = snapshot(ROOT, tmp / "repo")
        for patch in args.patch:
            apply_patch(tree, patch)
        if args.only:
            catalog.by_id(args.only).apply_to_tree(tree)
        script = tmp / "probe_script.py"
        script.write_text(SCRIPT)
        from properties.invariants import PROPERTIES
        props = args.prop or list(PROPERTIES)
        import ast
        pins = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in args.set)}
        proc = subprocess.run([sys.executable, str(script), catalog.impl, str(args.n), ",".join(props), json.dumps(pins)], cwd=tree,
                              env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            return 2
        stats = json.loads(proc.stdout.strip().splitlines()[-1])
        if args.json:
            args.json.write_text(json.dumps({"mutant": args.only, "n": args.n, "pins": pins, "props": stats}, indent=1))
        print(f"{args.only or '(unmutated)'}: {args.n} drawn problems")
        for p, s in stats.items():
            print(f"  {p:<36} applied {s['applied']:>4}  failed {s['failed']:>4}  max share {s['max_share']:.3g}")
            print("      max share by dtype: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(s["by_dtype"].items())))
            if s["first"]:
                print(f"      first failure: {s['first']}")
            elif s["worst"]:
                print(f"      closest: {s['worst']}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
