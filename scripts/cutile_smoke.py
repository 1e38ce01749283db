#!/usr/bin/env python3
"""GPU smoke test of the cuTile SSD forward: correctness over a grid, then timings. One device call.

    PYTHONUNBUFFERED=1 python scripts/cutile_smoke.py --out $OUT [--workers 6] [--no-bench]
    python scripts/cutile_smoke.py --impl torch-ref --device cpu --quick   # harness self-test, CPU

Correctness: every case runs ssd_forward (and the stage entry points) on fresh seeded inputs and
compares with the float64 chunked oracle (oracles.ssd_chunked_f64 and its stages) by the normwise
relative error |y - ref| / |ref|. A case passes if err <= 2 * err_yardstick + floor, where the
yardstick is oracles.ssd_yardstick in the kernel's declared precision (state_dtype, matmul); fp32
cases also print the TF32 yardstick, which tells whether fp32 matmuls ran as TF32. Outputs are
poisoned (freed NaN-filled memory is handed back by the caching allocator) and checked finite.
Extra checks: determinism, bitwise batch invariance, NaN passthrough, non-contiguous inputs.

Cases are sharded over worker processes so the first-launch compiles run in parallel; the workers
also warm the cuTile disk cache for the benchmark variants. The benchmark (triton do_bench, median)
runs last in the parent. Logs and a JSON of all rows go to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch  # noqa: E402

DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FLOOR = {"fp32": 2e-6, "fp16": 2e-4, "bf16": 2e-3}
STAGE_TOL = {"fp32": 2e-5, "fp16": 4e-3, "bf16": 3e-2}

# name, dtype, b, l, h, p, n, g, chunk, options
CASES = [
    ("basic", "bf16", 2, 256, 4, 64, 64, 1, 64, {}),
    ("basic", "fp16", 2, 256, 4, 64, 64, 1, 64, {}),
    ("basic", "fp32", 2, 256, 4, 64, 64, 1, 64, {}),
    ("all-opts-partial", "bf16", 2, 300, 6, 64, 128, 2, 64,
     {"D": 1, "z": 1, "dt_bias": 1, "dt_softplus": 1, "dt_limit": 1, "init": 1, "final": 1}),
    ("all-opts-partial", "fp16", 2, 300, 6, 64, 128, 2, 64,
     {"D": 1, "z": 1, "dt_bias": 1, "dt_softplus": 1, "dt_limit": 1, "init": 1, "final": 1}),
    ("all-opts-partial", "fp32", 2, 300, 6, 64, 128, 2, 64,
     {"D": 1, "z": 1, "dt_bias": 1, "dt_softplus": 1, "dt_limit": 1, "init": 1, "final": 1}),
    ("p32-n16-cs128", "bf16", 1, 1000, 4, 32, 16, 1, 128, {"D": 1, "final": 1}),
    ("p128-n256-cs256-Dhp", "bf16", 2, 777, 4, 128, 256, 4, 256, {"D2": 1, "init": 1, "final": 1}),
    ("p256-n32-cs128", "fp16", 1, 513, 2, 256, 32, 2, 128, {"z": 1, "final": 1}),
    ("p16-n256-cs64", "fp32", 2, 200, 3, 16, 256, 1, 64, {"init": 1, "final": 1, "D": 1}),
    ("seq_idx", "bf16", 2, 500, 4, 64, 64, 1, 64, {"seq": 1, "init": 1, "z": 1, "final": 1, "D": 1}),
    ("seq_idx-cs256", "fp32", 2, 700, 4, 64, 128, 2, 256, {"seq": 1, "init": 1, "final": 1}),
    ("varlen+seq", "bf16", 1, 700, 4, 64, 64, 1, 64, {"varlen": 1, "seq": 1, "init": 1, "final": 1}),
    ("varlen-cs128", "fp16", 1, 700, 4, 64, 128, 2, 128, {"varlen": 1, "seq": 1, "init": 1, "z": 1}),
    ("seqlen1", "bf16", 3, 1, 4, 64, 64, 1, 64, {"final": 1, "init": 1}),
    ("seqlen65", "fp32", 1, 65, 2, 64, 64, 1, 64, {"final": 1}),
    ("dt-in-xdtype", "bf16", 2, 333, 4, 64, 64, 1, 128, {"dt_x": 1, "dt_softplus": 1, "final": 1}),
    ("h5-g5", "fp16", 1, 130, 5, 64, 64, 5, 64, {"final": 1, "dt_limit": 1}),
    ("big-grid", "bf16", 4, 4096, 32, 64, 128, 1, 64, {"D": 1, "final": 1, "init": 1}),
]

# benchmark shapes: (label, b, l, h, p, n, g, chunk, tilegym_ms)
BENCH = [
    ("b8-l2048-h32-n128-g1", 8, 2048, 32, 64, 128, 1, 64, 0.168),
    ("b8-l8192-h32-n128-g1", 8, 8192, 32, 64, 128, 1, 64, 0.647),
    ("b8-l2048-h32-n128-g1-cs128", 8, 2048, 32, 64, 128, 1, 128, None),
    ("b2-l16384-h64-n256-g8", 2, 16384, 64, 64, 256, 8, 64, None),
    ("b1-l65536-h32-n64-g1", 1, 65536, 32, 64, 64, 1, 64, None),
]


def bench_variants():
    """(label, {kernel: Config}) alternatives timed on the first bench shape."""
    from kernels.cutile.dispatch import scan_config, state_config

    def st(bp=64, bn=64, pf=1, lat=0, occ=2):   # the constants in the kernel's order, as the launcher passes them
        return {"chunk_state": state_config(BL=64, BP=bp, BN=bn, PF=pf, LAT=lat, occupancy=occ)}

    def sc(bn=128, lat=0, occ=2, persist=0):
        return {"chunk_scan": scan_config(BL=64, BN=bn, LAT=lat, PERSIST=persist, occupancy=occ)}

    return [
        ("table", {}),
        ("state-PF0-BN32-occ4", st(pf=0, bn=32, occ=4)),
        ("state-PF1-BN64-occ2", st(bn=64, occ=2)),
        ("state-PF0-BN64-occ2", st(pf=0, bn=64, occ=2)),
        ("state-PF1-BN128-occ2", st(bn=128, occ=2)),
        ("state-PF1-BN16-occ4", st(bn=16, occ=4)),
        ("state-PF1-BN32-occ3", st(bn=32, occ=3)),
        ("scan-BN128-occ2", sc(occ=2)),
        ("scan-BN128-LAT3-occ3", sc(lat=3, occ=3)),
    ]


def make_inputs(case, device, seed):
    name, dt_name, b, l, h, p, n, g, chunk, opt = case
    dtype = DT[dt_name]
    gen = torch.Generator().manual_seed(seed)

    def rn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale)

    x = rn(b, l, h, p).to(dtype)
    if opt.get("dt_softplus"):
        dt = rn(b, l, h) - 3.0
    else:
        dt = torch.rand(b, l, h, generator=gen) * 0.1 + 0.002
    dt = dt.to(dtype if opt.get("dt_x") else torch.float32)
    A = -(torch.rand(h, generator=gen) * 3.5 + 0.5)
    B = rn(b, l, g, n).to(dtype)
    C = rn(b, l, g, n).to(dtype)
    kw = {}
    if opt.get("D"):
        kw["D"] = rn(h)
    if opt.get("D2"):
        kw["D"] = rn(h, p)
    if opt.get("z"):
        kw["z"] = rn(b, l, h, p).to(dtype)
    if opt.get("dt_bias"):
        kw["dt_bias"] = rn(h, scale=0.5)
    if opt.get("dt_softplus"):
        kw["dt_softplus"] = True
    if opt.get("dt_limit"):
        kw["dt_limit"] = (0.003, 0.08)
    if opt.get("init"):
        kw["initial_states"] = rn(b, h, p, n)
    if opt.get("seq"):
        rows = []
        for _ in range(b):
            cuts = sorted(torch.randint(1, max(2, l), (3,), generator=gen).tolist())
            s = torch.zeros(l, dtype=torch.int32)
            for c in cuts:
                s[c:] += 1
            rows.append(s)
        kw["seq_idx"] = torch.stack(rows)
    if opt.get("varlen"):
        cu = torch.tensor([0, 10, 150, 150, 333, 640, l], dtype=torch.int32)
        kw["cu_seqlens"] = cu
        kw["return_varlen_states"] = True
        if opt.get("seq"):
            pos = torch.arange(l, dtype=torch.int32)
            kw["seq_idx"] = torch.bucketize(pos, cu[1:], right=True).to(torch.int32)[None]
    if opt.get("final"):
        kw["return_final_states"] = True
    args = [x, dt, A, B, C]
    args = [t.to(device) for t in args]
    kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    return args, chunk, kw


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def out_names(kw):
    names = ["out"]
    if kw.get("return_final_states"):
        names.append("final_states")
    if kw.get("return_varlen_states"):
        names.append("varlen_states")
    return names


def rel(a, ref):
    a, ref = a.double(), ref.double()
    den = ref.norm().item()
    num = (a - ref).norm().item()
    return num / den if den > 0 else num


def poison(device):
    if device == "cuda":
        t = torch.full((64 * 1024 * 1024,), float("nan"), device=device)
        del t


def impl_info(impl):
    from kernels.registry import lookup
    return lookup(impl)


def check_case(case, impl, device, seed=1234):
    from oracles import ssd_chunked_f64, ssd_yardstick
    info = impl_info(impl)
    name, dt_name = case[0], case[1]
    label = f"{name}[{dt_name},b{case[2]},l{case[3]},h{case[4]},p{case[5]},n{case[6]},g{case[7]},cs{case[8]}]"
    args, chunk, kw = make_inputs(case, device, seed)
    rows = []
    poison(device)
    t0 = time.time()
    got = as_tuple(info.fn(*args, chunk, **kw))
    if device == "cuda":
        torch.cuda.synchronize()
    t_first = time.time() - t0
    ref = as_tuple(ssd_chunked_f64(*args, chunk, **kw))
    yard = as_tuple(ssd_yardstick(*args, chunk, **kw, state_dtype=info.state_dtype, matmul=info.matmul))
    yard_tf32 = None
    if dt_name == "fp32" and info.matmul == "ieee":
        yard_tf32 = as_tuple(ssd_yardstick(*args, chunk, **kw, state_dtype=info.state_dtype, matmul="tf32"))
    for i, oname in enumerate(out_names(kw)):
        g_, r_, y_ = got[i], ref[i], yard[i]
        finite = bool(torch.isfinite(g_).all())
        e, ey = rel(g_, r_), rel(y_, r_)
        budget = 2 * ey + FLOOR[dt_name]
        extra = f"tf32-yard {rel(yard_tf32[i], r_):.2e}" if yard_tf32 is not None else ""
        if oname == "out" and g_.dtype != args[0].dtype:
            extra += f" DTYPE {g_.dtype}"
        ok = finite and e <= budget and tuple(g_.shape) == tuple(r_.shape)
        rows.append(dict(case=label, output=oname, err=e, yard=ey, budget=budget, finite=finite,
                         status="PASS" if ok else "FAIL", note=f"{extra} first-call {t_first:.1f}s".strip()))
    if device == "cuda":
        # determinism
        again = as_tuple(info.fn(*args, chunk, **kw))
        same = all(torch.equal(a, b_) for a, b_ in zip(got, again))
        rows.append(dict(case=label, output="deterministic", err=0.0 if same else 1.0, yard=0.0, budget=0.0,
                         finite=True, status="PASS" if same else "FAIL", note=""))
    return rows


def check_stages(case, impl, device, seed=99):
    """Each stage alone, fed the oracle's inputs for that stage, against the oracle's stage output."""
    from oracles import chunk_cumsum_f64, chunk_scan_f64, chunk_state_f64, state_passing_f64
    info = impl_info(impl)
    st = info.stages
    name, dt_name, b, l, h, p, n, g, chunk = case[:9]
    label = f"stages:{name}[{dt_name},l{l},cs{chunk}]"
    args, chunk, kw = make_inputs(case, device, seed)
    x, dt, A, B, C = args
    seq = kw.get("seq_idx")
    rows = []
    cum_kw = {k: kw[k] for k in ("dt_bias", "dt_softplus", "dt_limit") if k in kw}
    dA, dto = st["chunk_cumsum"](dt, A, chunk, **cum_kw)
    dA64, dto64 = chunk_cumsum_f64(dt, A, chunk, **cum_kw)
    valid = (torch.arange(dA64.shape[2] * chunk, device=x.device) < l).reshape(dA64.shape[2], chunk)
    for oname, a_, r_ in (("dA_cumsum", dA, dA64), ("dt_out", dto, dto64)):
        e = rel(a_[..., valid], r_[..., valid])
        ok = e <= 2e-6 and a_.dtype == torch.float32
        rows.append(dict(case=label, output=oname, err=e, yard=0.0, budget=2e-6, finite=True,
                         status="PASS" if ok else "FAIL", note=""))
    states64 = chunk_state_f64(B, x, dto64, dA64, seq)
    sin64, fin64 = state_passing_f64(states64, dA64, kw.get("initial_states"), seq)
    if "chunk_state_and_passing" in st:
        sin, fin = st["chunk_state_and_passing"](B, x, dto64.float(), dA64.float(), kw.get("initial_states"), seq)
    else:
        s_ = st["chunk_state"](B, x, dto64.float(), dA64.float(), seq)
        sin, fin = st["state_passing"](s_, dA64.float(), kw.get("initial_states"), seq)
    for oname, a_, r_ in (("states_in", sin, sin64), ("final_states", fin, fin64)):
        e = rel(a_, r_)
        tol = STAGE_TOL[dt_name]
        rows.append(dict(case=label, output=oname, err=e, yard=0.0, budget=tol, finite=bool(torch.isfinite(a_).all()),
                         status="PASS" if e <= tol else "FAIL", note=str(a_.dtype).removeprefix("torch.")))
    scan_kw = {k: kw[k] for k in ("D", "z") if k in kw}
    y = st["chunk_scan"](B, C, x, dto64.float(), dA64.float(), sin64.float(), seq_idx=seq, **scan_kw)
    y64 = chunk_scan_f64(B, C, x, dto64, dA64, sin64.to(x.dtype), seq_idx=seq, **scan_kw)
    e = rel(y, y64)
    tol = STAGE_TOL[dt_name]
    rows.append(dict(case=label, output="chunk_scan", err=e, yard=0.0, budget=tol, finite=bool(torch.isfinite(y).all()),
                     status="PASS" if e <= tol else "FAIL", note=""))
    return rows


def check_special(impl, device):
    """Bitwise batch invariance, NaN passthrough, non-contiguous inputs."""
    info = impl_info(impl)
    rows = []
    case = ("special", "bf16", 3, 300, 4, 64, 64, 1, 64, {"D": 1, "final": 1, "init": 1})
    args, chunk, kw = make_inputs(case, device, 7)
    full = as_tuple(info.fn(*args, chunk, **kw))
    inv = True
    for i in range(3):
        a1 = [t[i:i + 1].clone() if t.dim() >= 3 else t for t in args]
        kw1 = dict(kw, initial_states=kw["initial_states"][i:i + 1].clone())
        one = as_tuple(info.fn(*a1, chunk, **kw1))
        inv &= torch.equal(one[0], full[0][i:i + 1]) and torch.equal(one[1], full[1][i:i + 1])
    rows.append(dict(case="special", output="bitwise_batch_invariant", err=0.0 if inv else 1.0, yard=0, budget=0,
                     finite=True, status="PASS" if inv == info.bitwise_batch_invariant else "FAIL",
                     note=f"observed {inv}, declared {info.bitwise_batch_invariant}"))
    # NaN at (b=1, t=170, h=2, p=5): y[1, t', 2, 5] NaN from its chunk start on; other heads finite
    x = args[0].clone()
    x[1, 170, 2, 5] = float("nan")
    y = as_tuple(info.fn(x, *args[1:], chunk, **kw))[0]
    nan = torch.isnan(y)
    c0 = (170 // chunk) * chunk
    later_nan = bool(nan[1, 170:, 2, 5].all())
    before_ok = not bool(nan[1, :c0, 2, 5].any())
    others_ok = not bool(nan[0].any()) and not bool(nan[2].any()) and not bool(nan[1, :, [0, 1, 3]].any())
    only_col = not bool(nan[1, :, 2, [0, 1, 2, 3, 4, 6]].any())
    ok = later_nan and before_ok and others_ok and only_col
    rows.append(dict(case="special", output="nan_passthrough", err=0.0 if ok else 1.0, yard=0, budget=0, finite=True,
                     status="PASS" if ok else "FAIL",
                     note=f"later_nan={later_nan} before_chunk_clean={before_ok} other_heads_clean={others_ok} "
                          f"other_cols_clean={only_col} within_chunk_earlier_nan={bool(nan[1, c0:170, 2, 5].any())}"))
    # non-contiguous inputs give the same answer
    xt = args[0].transpose(1, 2).contiguous().transpose(1, 2)
    Bt = args[3].transpose(2, 3).contiguous().transpose(2, 3)
    y2 = as_tuple(info.fn(xt, args[1], args[2], Bt, args[4], chunk, **kw))[0]
    same = torch.equal(y2, full[0])
    rows.append(dict(case="special", output="non_contiguous", err=0.0 if same else 1.0, yard=0, budget=0,
                     finite=True, status="PASS" if same else "FAIL", note=""))
    return rows


def warm_bench(impl, device, which):
    """Run bench variant `which` once on the first bench shape (its compile lands in the disk cache)."""
    from kernels.cutile import launcher
    label, b, l, h, p, n, g, chunk, _ = BENCH[0]
    args, kw = bench_inputs(b, l, h, p, n, g, device)
    vname, ov = bench_variants()[which]
    launcher._OVERRIDE.clear()
    launcher._OVERRIDE.update(ov)
    t0 = time.time()
    try:
        impl_info(impl).fn(*args, chunk, **kw)
        torch.cuda.synchronize()
        return [dict(case="warm", output=vname, err=0, yard=0, budget=0, finite=True, status="PASS",
                     note=f"{time.time() - t0:.1f}s")]
    except Exception as e:  # noqa: BLE001
        return [dict(case="warm", output=vname, err=1, yard=0, budget=0, finite=True, status="FAIL",
                     note=f"{type(e).__name__}: {str(e)[:300]}")]
    finally:
        launcher._OVERRIDE.clear()


def bench_inputs(b, l, h, p, n, g, device, dtype=torch.bfloat16):
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(b, l, h, p, device=device, dtype=dtype, generator=gen)
    dt = torch.rand(b, l, h, device=device, generator=gen) * 0.1 + 0.002
    A = -(torch.rand(h, device=device, generator=gen) * 3.5 + 0.5)
    B = torch.randn(b, l, g, n, device=device, dtype=dtype, generator=gen)
    C = torch.randn(b, l, g, n, device=device, dtype=dtype, generator=gen)
    D = torch.randn(h, device=device, generator=gen)
    init = torch.randn(b, h, p, n, device=device, generator=gen)
    return [x, dt, A, B, C], dict(D=D, initial_states=init, return_final_states=True)


def run_bench(impl, device, log):
    import triton.testing as tt
    from kernels.cutile import launcher
    info = impl_info(impl)
    rows = []
    for label, b, l, h, p, n, g, chunk, ref_ms in BENCH:
        args, kw = bench_inputs(b, l, h, p, n, g, device)
        fn = lambda: info.fn(*args, chunk, **kw)  # noqa: E731
        fn()
        torch.cuda.synchronize()
        ms = tt.do_bench(fn, warmup=50, rep=300, return_mode="median")
        ms2 = tt.do_bench(fn, warmup=50, rep=300, return_mode="median")
        x = args[0]
        nbytes = (x.numel() * 2 * 2 + x.numel() // p * 4 * 2 + args[3].numel() * 2 * 2
                  + b * -(-l // chunk) * h * p * n * 2 * 2)
        rows.append(dict(shape=label, variant="table", ms=ms, ms_repeat=ms2, tilegym_ms=ref_ms,
                         gbps=nbytes / ms / 1e6))
        log(f"bench {label:32s} table  {ms:.4f} ms (repeat {ms2:.4f})  tilegym {ref_ms}  ~{nbytes / ms / 1e6:.0f} GB/s")
        if label == BENCH[0][0]:
            # per-kernel times with the table config
            xs, dts, As, Bs, Cs = args
            A32 = As.float()
            cs, dtc = launcher._run_cumsum(dts, A32, None, chunk, False, (0.0, math.inf))
            states, fin = launcher._run_state(xs, Bs, dtc, cs, kw["initial_states"], None, chunk, xs.dtype)
            D32 = kw["D"].float().reshape(h, 1)
            parts = {
                "k1-cumsum": lambda: launcher._run_cumsum(dts, A32, None, chunk, False, (0.0, math.inf)),
                "k2-state": lambda: launcher._run_state(xs, Bs, dtc, cs, kw["initial_states"], None, chunk, xs.dtype),
                "k3-scan": lambda: launcher._run_scan(xs, None, Bs, Cs, dtc, cs, states, D32, None, chunk),
            }
            for pname, pf in parts.items():
                pms = tt.do_bench(pf, warmup=30, rep=200, return_mode="median")
                rows.append(dict(shape=label, variant=pname, ms=pms))
                log(f"bench {label:32s} {pname:12s} {pms:.4f} ms")
            y_table = fn()
            for vname, ov in bench_variants()[1:]:
                launcher._OVERRIDE.clear()
                launcher._OVERRIDE.update(ov)
                try:
                    y_v = fn()
                    dv = max(rel(y_v[0], y_table[0]), rel(y_v[1], y_table[1]))
                    vms = tt.do_bench(fn, warmup=30, rep=200, return_mode="median")
                    if "chunk_scan" in ov:
                        kms = tt.do_bench(parts["k3-scan"], warmup=30, rep=200, return_mode="median")
                    else:
                        kms = tt.do_bench(parts["k2-state"], warmup=30, rep=200, return_mode="median")
                    rows.append(dict(shape=label, variant=vname, ms=vms, kernel_ms=kms, rel_vs_table=dv))
                    log(f"bench {label:32s} {vname:24s} total {vms:.4f} ms  kernel {kms:.4f} ms  "
                        f"rel vs table {dv:.1e}")
                except Exception as e:  # noqa: BLE001
                    log(f"bench {label:32s} {vname:24s} FAILED {type(e).__name__}: {str(e)[:200]}")
                finally:
                    launcher._OVERRIDE.clear()
    return rows


def worker(args):
    jobs = json.loads(args.jobs)
    rows = []
    for job in jobs:
        kind, idx = job
        try:
            if kind == "case":
                rows += check_case(CASES[idx], args.impl, args.device)
            elif kind == "stages":
                rows += check_stages(CASES[idx], args.impl, args.device)
            elif kind == "special":
                rows += check_special(args.impl, args.device)
            elif kind == "warm":
                rows += warm_bench(args.impl, args.device, idx)
        except Exception as e:  # noqa: BLE001
            rows.append(dict(case=f"{kind}:{idx}", output="EXCEPTION", err=1.0, yard=0, budget=0, finite=False,
                             status="FAIL", note=f"{type(e).__name__}: {str(e)[:1500]}"))
            traceback.print_exc()
        print(f"[worker] done {job}", flush=True)
        with open(args.result, "w") as f:  # after every job: a worker killed at the deadline keeps its rows
            json.dump(rows, f)
    with open(args.result, "w") as f:
        json.dump(rows, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default="cutile")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/cutile_smoke"))
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--quick", action="store_true", help="small cases only (CPU harness self-test)")
    ap.add_argument("--deadline", type=float, default=200.0, help="seconds for the checks")
    ap.add_argument("--work", default="/tmp/cutile_smoke_work")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--jobs")
    ap.add_argument("--result")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    logf = open(os.path.join(args.out, "smoke.log"), "a")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    if args.device == "cuda":
        import cuda.tile as ct
        log(f"gpu {torch.cuda.get_device_name()} cc {torch.cuda.get_device_capability()} torch {torch.__version__} "
            f"cuda-tile {ct.__version__}")
    cases = [i for i, c in enumerate(CASES) if not (args.quick and c[3] * c[2] * c[4] > 5000)]
    jobs = [("case", i) for i in cases] + [("stages", i) for i in cases if CASES[i][0] != "big-grid"]
    if args.device == "cuda":
        jobs += [("special", 0)]
        if not args.no_bench:
            jobs = [("warm", i) for i in range(len(bench_variants()))] + jobs
    nw = max(1, min(args.workers, len(jobs)))
    shards = [jobs[i::nw] for i in range(nw)]
    t0 = time.time()
    procs = []
    for i, sh in enumerate(shards):
        res = os.path.join(args.work, f"rows{i}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--impl", args.impl, "--device", args.device,
               "--jobs", json.dumps(sh), "--result", res]
        lf = open(os.path.join(args.work, f"worker{i}.log"), "w")
        procs.append((subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT), res, lf))
    rows = []
    for p_, res, lf in procs:
        try:
            p_.wait(timeout=max(1.0, args.deadline - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p_.kill()
            p_.wait()
            log(f"worker {res} killed at the deadline")
        lf.close()
        try:
            with open(res) as f:
                rows += json.load(f)
        except (OSError, ValueError):
            rows.append(dict(case=res, output="WORKER-DIED", err=1, yard=0, budget=0, finite=False, status="FAIL",
                             note=f"rc={p_.returncode}"))
    log(f"checks took {time.time() - t0:.1f}s with {nw} workers")
    with open(os.path.join(args.out, "workers.log"), "w") as out_f:
        for i in range(nw):
            out_f.write(f"===== worker {i}\n")
            try:
                with open(os.path.join(args.work, f"worker{i}.log")) as in_f:
                    out_f.write(in_f.read()[-200000:])
            except OSError:
                pass
    bench_rows = []
    if args.device == "cuda" and not args.no_bench:
        try:
            bench_rows = run_bench(args.impl, args.device, log)
        except Exception as e:  # noqa: BLE001
            log(f"bench FAILED {type(e).__name__}: {e}")
            traceback.print_exc()
    with open(os.path.join(args.out, "smoke.json"), "w") as f:
        json.dump({"checks": rows, "bench": bench_rows}, f, indent=1)
    log("")
    log(f"{'status':6s} {'case':58s} {'output':24s} {'err':>9s} {'yard':>9s} {'budget':>9s}  note")
    for r in rows:
        log(f"{r['status']:6s} {r['case'][:58]:58s} {r['output'][:24]:24s} {r['err']:9.2e} {r['yard']:9.2e} "
            f"{r['budget']:9.2e}  {r.get('note', '')[:160]}")
    nfail = sum(r["status"] != "PASS" for r in rows)
    log(f"{len(rows) - nfail} PASS, {nfail} FAIL")
    for r in bench_rows:
        log(f"BENCH {r['shape']:32s} {r['variant']:26s} {r['ms']:.4f} ms"
            + (f"  kernel {r['kernel_ms']:.4f}" if "kernel_ms" in r else "")
            + (f"  rel-vs-table {r['rel_vs_table']:.1e}" if "rel_vs_table" in r else "")
            + (f"  (tilegym {r['tilegym_ms']})" if r.get("tilegym_ms") else ""))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
