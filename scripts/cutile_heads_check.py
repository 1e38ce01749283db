#!/usr/bin/env python3
"""GPU check of the untabled chunk_scan_heads_kernel (HB heads of a group per block) against the
table's chunk_scan_kernel, on the paths the sweep's bench shapes never take: seq_idx, z, D per head
and channel, a partial last chunk, seqlen 1, dstate below and above the BN tile, headdim 32 to 256,
fp16 and fp32, ngroups > 1. One device call.

    python scripts/cutile_heads_check.py --out $OUT/heads [--hb 2 4 8] [--jobs 12]
    python scripts/cutile_heads_check.py --list        # the cases (any machine)

Each (case, HB) runs the chunk_scan stage entry point on seeded inputs twice, with the dispatch table
(chunk_scan_kernel) and with launcher._OVERRIDE = a Config with HB (chunk_scan_heads_kernel), the
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

# name, dtype, b, l, h, p, n, g, chunk, options (D: per head, D2: per head and channel, z, seq)
CASES = [
    ("seq-z-D2-partial", "bfloat16", 2, 300, 8, 64, 64, 1, 64, {"D2": 1, "z": 1, "seq": 1}),
    ("n256-g2-cs128", "float16", 1, 333, 16, 64, 256, 2, 128, {"D": 1, "z": 1}),
    ("p128-n32-cs256-seq", "float32", 2, 700, 8, 128, 32, 1, 256, {"D": 1, "seq": 1}),
    ("p32-n16-cs128", "bfloat16", 1, 200, 8, 32, 16, 1, 128, {"z": 1}),
    ("seqlen1", "bfloat16", 2, 1, 8, 64, 128, 1, 64, {"D": 1}),
    ("p256-g4-cs256-all", "float16", 1, 520, 32, 256, 128, 4, 256, {"D2": 1, "z": 1, "seq": 1}),
    ("plain", "float32", 2, 256, 8, 64, 64, 1, 64, {}),   # fp32 at BN 128: a 6-min HB 8 compile
    ("h32-cs128-seq", "bfloat16", 2, 2048, 32, 64, 128, 1, 128, {"D": 1, "seq": 1}),
]


def heads_config(hb: int, dstate: int):
    """The sweep's head-block candidate for this HB (its first occupancy) and dstate."""
    from bench.sweep_cutile import HEAD_BLOCKS
    from kernels.cutile.dispatch import Config
    bn = 128 if dstate >= 128 else 64
    return Config((("BL", 64), ("BP", 64), ("BN", bn), ("LAT", 0), ("PERSIST", 0), ("HB", hb)), HEAD_BLOCKS[hb][0])


def make_inputs(case, seed: int = 7, dev: str = "cuda"):
    """chunk_scan's stage inputs on `dev`: (B, C, x, dt_out, dA_cumsum, states_in), kwargs."""
    import torch
    name, dtype, b, l, h, p, n, g, chunk, opt = case
    dt_ = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(seed)
    c = -(-l // chunk)

    def rn(*shape):
        return torch.randn(*shape, generator=gen)

    x, z = rn(b, l, h, p).to(dt_), rn(b, l, h, p).to(dt_)
    B, C = rn(b, l, g, n).to(dt_), rn(b, l, g, n).to(dt_)
    dt = torch.rand(b, l, h, generator=gen) * 0.1 + 0.002
    A = -(torch.rand(h, generator=gen) * 3.5 + 0.5)
    pad = torch.zeros(b, c * chunk, h)
    pad[:, :l] = dt
    dt_out = pad.reshape(b, c, chunk, h).permute(0, 3, 1, 2).contiguous()       # (b, h, c, L), 0 past l
    dA = (dt_out * A[None, :, None, None]).cumsum(-1)                            # repeats past l
    states = (rn(b, c, h, p, n) * 0.5).to(dt_)
    kw = {}
    if opt.get("D"):
        kw["D"] = rn(h)
    if opt.get("D2"):
        kw["D"] = rn(h, p)
    if opt.get("z"):
        kw["z"] = z
    if opt.get("seq"):
        cuts = torch.randint(1, max(2, l), (b, 3), generator=gen)
        kw["seq_idx"] = (torch.arange(l)[None, None, :] >= cuts[:, :, None]).sum(1).to(torch.int32)
    args = [t.to(dev) for t in (B, C, x, dt_out, dA, states)]
    return args, {k: v.to(dev) for k, v in kw.items()}


def check(case, hb: int) -> dict:
    """One (case, HB): the table's output vs the head-block kernel's."""
    import torch

    from bench.race import poison_allocator, rel_err
    from kernels.cutile import chunk_scan, dispatch, launcher
    name, dtype, b, l, h, p, n, g, chunk, _ = case
    cfg = heads_config(hb, n)
    row = dict(case=name, dtype=dtype, shape=f"b{b} l{l} h{h} p{p} n{n} g{g} cs{chunk}", hb=hb, config=str(cfg),
               kernel=dispatch.scan_kernel(cfg, h // g)[0])
    try:
        args, kw = make_inputs(case)
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
        ok = row["kernel"] == "chunk_scan_heads_kernel" and row["err"] <= TOL[dtype]
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
    todo = [(case, hb) for hb in args.hb for case in CASES]
    if args.list:
        for case, hb in todo:
            print(f"HB{hb} {case[0]:22s} {case[1]:9s} b{case[2]} l{case[3]} h{case[4]} p{case[5]} n{case[6]} "
                  f"g{case[7]} cs{case[8]} {sorted(case[9])} {heads_config(hb, case[6])}")
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
