#!/usr/bin/env python3
"""GPU check of the untabled chunk_scan_heads_kernel (HB heads of a group per block) against the
table's chunk_scan_kernel, on the paths the sweep's bench shapes never take: seq_idx, z, D per head
and channel, a partial last chunk, seqlen 1, dstate below and above the BN tile, headdim 32 to 256,
fp16 and fp32, ngroups > 1. One device call.

    python scripts/cutile_heads_check.py --out $OUT/heads [--hb 2 4 8] [--jobs 12]
    python scripts/cutile_heads_check.py --list        # the cases (any machine)

Each (case, HB) runs the chunk_scan stage entry point twice on an SSDProblem's inputs (the suite's
generator and chunk_cumsum oracle), with the dispatch table (chunk_scan_kernel) and with launcher._OVERRIDE = a Config with HB (chunk_scan_heads_kernel), the
allocator poisoned with NaN before each, and compares them normwise. The two compute the same
products in the same dtypes, so they differ by accumulation order at most: a difference above
TOL[dtype] (or a non-finite value) is a FAIL. Every case's heads_per_group is a multiple of 8, so the
launcher really runs the head-block kernel for every HB (checked per row). Compiles run in --jobs
processes (one per (case, HB); HB 8 units take about a minute each). Exit status 1 on any FAIL.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def cases():
    """(name, SSDProblem): every heads_per_group a multiple of 8, so each HB runs the head-block kernel."""
    from properties.problem import SSDProblem

    def P(**kw):
        return SSDProblem(**{"decay": 1.0, "seed": 7, **kw})
    return [
        ("seq-z-D2-partial", P(batch=2, seqlen=300, nheads=8, headdim=64, dstate=64, chunk_size=64,
                               dtype="bfloat16", D="hp", z=True, seq_starts=(97, 200))),
        ("n256-g2-cs128", P(batch=1, seqlen=333, nheads=16, headdim=64, dstate=256, ngroups=2, chunk_size=128,
                            dtype="float16", D="h", z=True)),
        ("p128-n32-cs256-seq", P(batch=2, seqlen=700, nheads=8, headdim=128, dstate=32, chunk_size=256,
                                 dtype="float32", D="h", seq_starts=(255, 256, 600))),
        ("p32-n16-cs128", P(batch=1, seqlen=200, nheads=8, headdim=32, dstate=16, chunk_size=128,
                            dtype="bfloat16", z=True)),
        ("seqlen1", P(batch=2, seqlen=1, nheads=8, headdim=64, dstate=128, chunk_size=64, dtype="bfloat16", D="h")),
        ("p256-g4-cs256-all", P(batch=1, seqlen=520, nheads=32, headdim=256, dstate=128, ngroups=4, chunk_size=256,
                                dtype="float16", D="hp", z=True, seq_starts=(64, 300))),
        ("plain", P(batch=2, seqlen=256, nheads=8, headdim=64, dstate=64, chunk_size=64,
                    dtype="float32")),                     # fp32 at BN 128: a 6-min HB 8 compile
        ("h32-cs128-seq", P(batch=2, seqlen=2048, nheads=32, headdim=64, dstate=128, chunk_size=128,
                            dtype="bfloat16", D="h", seq_starts=(127, 128, 1500))),
    ]


def heads_config(hb: int, problem):
    """The sweep's first head-block candidate for this HB at the problem's dstate tile."""
    from bench.sweep_cutile import scan_candidates
    bn = 128 if problem.dstate >= 128 else 64
    return next(cfg for _, cfg in scan_candidates(problem.chunk_size, problem.dstate,
                                                  problem.nheads // problem.ngroups)
                if dict(cfg.constants).get("HB") == hb and cfg.get("BN") == bn)


def make_inputs(problem, dev: str = "cuda"):
    """chunk_scan's stage inputs on `dev` as prop_stages_match_oracle builds them: the suite's problem
    generator and float64 chunk_cumsum, plus random incoming states -> (B, C, x, dt_out, dA_cumsum,
    states_in), kwargs."""
    import torch

    from oracles import chunk_cumsum_f64
    kw = problem.inputs(dev)
    dt_kw = {k: kw[k] for k in ("dt_bias", "dt_softplus", "dt_limit") if k in kw}
    cs, dt_out = chunk_cumsum_f64(kw["dt"], kw["A"], problem.chunk_size, **dt_kw)
    gen = torch.Generator().manual_seed(problem.seed + 1)
    shape = (problem.batch, cs.shape[2], problem.nheads, problem.headdim, problem.dstate)
    states = (0.5 * torch.randn(*shape, generator=gen)).to(kw["x"].dtype).to(dev)
    args = [kw["B"], kw["C"], kw["x"], dt_out.float(), cs.float(), states]
    return args, {k: kw[k] for k in ("D", "z", "seq_idx") if k in kw}


def check(case, hb: int) -> dict:
    """One (case, HB): the table's output vs the head-block kernel's."""
    import torch

    from bench.race import poison_allocator, rel_err
    from kernels.cutile import chunk_scan, dispatch, launcher
    name, problem = case
    cfg = heads_config(hb, problem)
    row = dict(case=name, problem=repr(problem), hb=hb, config=str(cfg),
               kernel=dispatch.scan_kernel(cfg, problem.nheads // problem.ngroups)[0])
    try:
        args, kw = make_inputs(problem)
        launcher._OVERRIDE.clear()
        poison_allocator(1 << 28)
        ref = chunk_scan(*args, **kw)
        torch.cuda.synchronize()
        launcher._OVERRIDE["chunk_scan"] = cfg
        poison_allocator(1 << 28)
        t0 = time.time()
        got = chunk_scan(*args, **kw)
        torch.cuda.synchronize()
        row["first_call_s"] = round(time.time() - t0, 1)
        row["err"] = rel_err(got, ref)
        row["bitwise"] = bool(torch.equal(got, ref))
        ok = row["kernel"] == "chunk_scan_heads_kernel" and row["err"] <= TOL[problem.dtype]
        row["status"] = "ok" if ok else "FAIL"
    except Exception as e:  # noqa: BLE001 - reported per row
        row.update(status="FAIL", error=f"{type(e).__name__}: {str(e)[:500]}")
    finally:
        launcher._OVERRIDE.clear()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "out"), "heads"))
    ap.add_argument("--hb", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--jobs", type=int, default=min(12, os.cpu_count() or 1))
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    todo = [(case, hb) for hb in args.hb for case in cases()]
    if args.list:
        for (name, problem), hb in todo:
            print(f"HB{hb} {name:22s} {heads_config(hb, problem)} {problem!r}")
        print(f"{len(todo)} checks")
        return 0
    import torch
    if not torch.cuda.is_available():
        print("cutile_heads_check: needs a CUDA GPU (use --list for the cases)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows, t0 = [], time.time()
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        # HB 8 compiles longest: submit it first
        futs = [pool.submit(check, case, hb) for case, hb in sorted(todo, key=lambda t: -t[1])]
        for f in as_completed(futs):
            rows.append(f.result())
            print(json.dumps(rows[-1]), flush=True)
    bad = [r for r in rows if r["status"] != "ok"]
    summary = dict(checks=len(rows), failed=len(bad), seconds=round(time.time() - t0, 1),
                   gpu=torch.cuda.get_device_name())
    with open(os.path.join(args.out, "heads_check.json"), "w") as f:
        json.dump(dict(summary=summary, rows=rows), f, indent=1)
    print(json.dumps(summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
