"""vLLM's fast_exp against exp on this GPU: the figure the yardstick's exp="fast" model uses.

fast_exp (vllm/model_executor/layers/mamba/ops/triton_helpers.py l.36-45) is exp2(LOG2E * x), the
product in fp32, then ex2.approx.f32. The yardstick (oracles/yardstick.py `_fast_exp`) computes the
same fp32 product and an exact exp2, then takes ex2.approx's own error as FAST_EXP_ULPS units of 2^-24
(fp32's unit roundoff) toward zero. This measures that figure, on every fp32 x the kernels pass it:

1. **ex2.approx's own error, exhaustively**: vLLM's own @triton.jit fast_exp (loaded from the published
   fragment) on every fp32 x in [-87.33, 0] (every decay exponent whose exp is a normal fp32; the
   kernels exponentiate only cumulative log-decays dA_cumsum, <= 0 with A <= 0, two call sites
   clamping with tl.minimum(..., 0): ssd_chunk_scan.py l.299, l.384, ssd_chunk_state.py l.284,
   ssd_state_passing.py l.104), against float64 exp2 of the same
   fp32 product; the largest relative error in units of 2^-24, the x where it occurs, the share of x
   where it is negative. FAST_EXP_ULPS should be its ceiling.
2. **Against exp**, per range of |x| on 2^22 samples: the relative error against float64 exp of
   fast_exp, of Triton's tl.exp (mamba_ssm's decays) and of the model. The fp32 product's rounding,
   up to |x| * 2^-24, is in fast_exp and the model and dominates at large |x|; the model computes that
   product exactly as the GPU does, so the two differ by ex2.approx's own error and the model's bias.

Prints both, then the line to put in oracles/yardstick.py, and with --out DIR writes them to
DIR/fast-exp.json. Exit 0 when FAST_EXP_ULPS is the measured ceiling, 1 otherwise.

    python lab/scripts/gpu_fast_exp_check.py [--out DIR]   # a CUDA GPU, Triton and the vLLM fragment; ~1 min
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch
import triton
import triton.language as tl

from kernels.peers import vllm
from oracles.yardstick import _LOG2E, FAST_EXP_ULPS, _fast_exp

UNIT = 2.0 ** -24
X_MIN = -87.33      # just above -126 ln 2: below it exp(x) is subnormal in fp32, the decay lost anyway
BATCH = 1 << 26
N = 1 << 22
RANGES = ((0.0, 1e-3), (1e-3, 1.0), (1.0, 10.0), (10.0, 40.0), (40.0, -X_MIN))
fast_exp = None   # vLLM's, set in main() before the first launch (Triton resolves globals then)


@triton.jit
def _both(x_ptr, fast_ptr, exp_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(fast_ptr + offs, fast_exp(x), mask=mask)
    tl.store(exp_ptr + offs, tl.exp(x), mask=mask)   # mamba_ssm's decays: does Triton lower it to ex2.approx too?


def _launch(xd):
    fast, exp = torch.empty_like(xd), torch.empty_like(xd)
    _both[(triton.cdiv(xd.numel(), 1024),)](xd, fast, exp, xd.numel(), BLOCK=1024)
    return fast, exp


def own_error() -> list[dict]:
    """Per range of |x| (RANGES), over every fp32 x in [X_MIN, 0]: ex2.approx's own error, fast_exp
    against float64 exp2 of the same fp32 product, in units of 2^-24: its largest magnitude, the x
    where it is, and the share of x where it is negative."""
    lo = torch.tensor(-0.0).view(torch.int32).item() & 0xFFFFFFFF          # bits of -0.0: 0x80000000
    hi = torch.tensor(X_MIN, dtype=torch.float32).view(torch.int32).item() & 0xFFFFFFFF
    edges = torch.tensor([r[1] for r in RANGES[:-1]], dtype=torch.float64, device="cuda")
    stats = [{"abs_x": [a, b], "max": -1.0, "at": 0.0, "negative": 0, "n": 0} for a, b in RANGES]
    log2e = _LOG2E.cuda()
    for start in range(lo, hi + 1, BATCH):
        bits = torch.arange(start, min(start + BATCH, hi + 1), dtype=torch.int64, device="cuda")
        x = (bits - (1 << 32)).to(torch.int32).view(torch.float32)          # negative floats, |x| rising
        fast, _ = _launch(x)
        rel = (fast.double() / torch.exp2((x * log2e).double()) - 1.0) / UNIT
        where = torch.bucketize(x.double().abs(), edges, right=True)
        for k, st in enumerate(stats):
            r, xs = rel[where == k], x[where == k]
            if not r.numel():
                continue
            i = int(r.abs().argmax())
            if float(r[i].abs()) > st["max"]:
                st["max"], st["at"] = float(r[i].abs()), float(xs[i])
            st["negative"] += int((r < 0).sum())
            st["n"] += r.numel()
    return [st for st in stats if st["n"]]


def main(argv=None) -> int:
    global fast_exp
    ap = argparse.ArgumentParser(description="vLLM's fast_exp against exp on this GPU")
    ap.add_argument("--out", metavar="DIR", help="also write DIR/fast-exp.json")
    args = ap.parse_args(argv)
    vllm._load()
    fast_exp = sys.modules["vllm.model_executor.layers.mamba.ops.triton_helpers"].fast_exp
    print(f"triton {triton.__version__}, {torch.cuda.get_device_name()}; units of 2^-24 (fp32's unit roundoff)")

    own = own_error()
    print(f"\n1. ex2.approx's own error (fast_exp / exp2 of the same fp32 product - 1), every fp32 x in "
          f"[{X_MIN}, 0]:")
    print(f"{'|x| range':>16}  {'max':>7}  {'at x':>14}  {'negative':>8}  {'x values':>10}")
    for st in own:
        print(f"{st['abs_x'][0]:7.0e}-{st['abs_x'][1]:<8.3g}  {st['max']:7.3f}  {st['at']:14.7g}  "
              f"{100 * st['negative'] / st['n']:7.1f}%  {st['n']:10d}")
    worst = max(own, key=lambda st: st["max"])
    figure = math.ceil(worst["max"])
    print(f"largest: {worst['max']:.3f} at x = {worst['at']!r} (exp2 argument {worst['at'] * float(_LOG2E):.6g})")

    g = torch.Generator().manual_seed(0)
    print(f"\n2. relative error against float64 exp, {N} samples per range (the product's rounding, "
          f"|x| * 2^-24, is in fast_exp and the model; the model adds FAST_EXP_ULPS = {FAST_EXP_ULPS} toward zero):")
    print(f"{'|x| range':>16}  {'fast_exp max':>12} {'mean':>7}  {'tl.exp max':>10} {'mean':>7}  "
          f"{'model max':>9} {'mean':>7}")
    ranges = []
    for lo, hi in RANGES:
        x = -(lo + (hi - lo) * torch.rand(N, generator=g))
        fast, exp = _launch(x.cuda())
        ref = torch.exp(x.double())
        rows = []
        for got in (fast.cpu(), exp.cpu(), _fast_exp(x)):
            rel = (got.double() / ref - 1.0) / UNIT
            rows.append((float(rel.abs().max()), float(rel.mean())))
        ranges.append({"abs_x": [lo, hi], **{f"{w}_{m}": v for w, r in zip(("fast_exp", "tl_exp", "model"), rows)
                                             for m, v in zip(("max", "mean"), r)}})
        print(f"{lo:7.0e}-{hi:<8.3g}  {rows[0][0]:12.2f} {rows[0][1]:7.2f}  {rows[1][0]:10.2f} {rows[1][1]:7.2f}  "
              f"{rows[2][0]:9.2f} {rows[2][1]:7.2f}")

    ok = figure == FAST_EXP_ULPS
    print(f"\nthe yardstick should use: FAST_EXP_ULPS = {figure}   # oracles/yardstick.py, now {FAST_EXP_ULPS}")
    print("FAST_EXP_ULPS is the measured figure" if ok else "FAST_EXP_ULPS is not the measured figure: set it")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "fast-exp.json"), "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "unit": "2^-24",
                       "x_range": [X_MIN, 0.0], "own_error": own, "figure": figure, "declared": FAST_EXP_ULPS,
                       "vs_exp_sampled": ranges, "ok": ok}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
