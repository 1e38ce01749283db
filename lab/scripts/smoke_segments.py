"""The segmented walk's first GPU run: small forwards with it forced on, against the float64 oracle,
each segment count in its own process under a timeout.

    python lab/scripts/smoke_segments.py --segments 2 --segments 4 [--timeout 120]

Like lab/scripts/smoke_config.py (a hung kernel costs one timeout and says where it stuck), but the
reference is oracles.ssd_chunked_f64 rather than another config: each problem (fp32, fp16, bf16;
dstate 64 and 128; D per head and per channel, z, dt_bias with softplus, initial and final states,
1 to 3 heads per group, 2 to 16 chunks, and a race shape) runs with SSDCHECK_CUTILE_SEGMENTS=N, and
the line per problem gives the kernels launched (the segmented path must be among them) and the
normwise error of y and of the final states against float64, beside the yardstick's
(oracles/yardstick.py, the same precision) for scale. Exit status: 0 if every problem took the path
and each error is within 2 x the yardstick's + 1e-6, 1 if one is not, 2 if a run hung or crashed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # the repository

FAILED = 10   # the child's exit status for an error above the bound (a crash exits 1)

# (batch, seqlen, nheads, ngroups, headdim, dstate, dtype, D per channel, z, init): each one the passes
# serve at 2 and 4 segments (its chunks of 64 a multiple of 4; tests/test_segments.py checks it)
PROBLEMS = (
    (2, 512, 8, 2, 64, 64, "bfloat16", False, True, True),
    (1, 256, 6, 2, 32, 128, "float16", True, False, False),
    (2, 256, 6, 3, 64, 64, "float32", False, True, True),
    (3, 1024, 4, 4, 64, 128, "bfloat16", True, True, True),
    (2, 16384, 32, 1, 64, 64, "bfloat16", False, False, False),
)


def child(tol_k: float) -> int:
    import torch

    from kernels.cutile import launcher, ssd_forward
    from oracles import ssd_chunked_f64
    from oracles.yardstick import ssd_yardstick
    worst_ok = True
    for b, l, h, g, p, n, dtype, d_per_channel, use_z, use_init in PROBLEMS:
        gen = torch.Generator(device="cuda").manual_seed(l + h + n)
        dt_ = getattr(torch, dtype)

        def rnd(*shape, dtype=dt_):
            return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)

        kw = dict(x=rnd(b, l, h, p), dt=rnd(b, l, h, dtype=torch.float32) - 1.0, A=-torch.rand(h, device="cuda"),
                  B=rnd(b, l, g, n), C=rnd(b, l, g, n),
                  D=rnd(h, p, dtype=torch.float32) if d_per_channel else rnd(h, dtype=torch.float32),
                  z=rnd(b, l, h, p) if use_z else None, dt_bias=rnd(h, dtype=torch.float32) * 0.5,
                  initial_states=rnd(b, h, p, n, dtype=torch.float32) if use_init else None,
                  dt_softplus=True, return_final_states=True)
        label = f"b{b} l{l} h{h} g{g} p{p} n{n} {dtype}"
        names = []
        real = launcher._launch
        launcher._launch = lambda grid, kfn, cfg, args, device, stream=None: (
            names.append(kfn._pyfunc.__name__.removesuffix("_kernel")), real(grid, kfn, cfg, args, device, stream))[1]
        print(f"{label}: launching", flush=True)
        try:
            y, final = ssd_forward(**kw, chunk_size=64)
            torch.cuda.synchronize()
        finally:
            launcher._launch = real
        print(f"{label}: synchronized ({', '.join(names)})", flush=True)
        ref = {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        y64, f64 = ssd_chunked_f64(**ref, chunk_size=64)
        ys, fs = ssd_yardstick(**kw, chunk_size=64, state_dtype="input", matmul="ieee")

        def err(a, r):
            return float(torch.linalg.vector_norm(a.double() - r) / torch.linalg.vector_norm(r))

        ey, ef, ry, rf = err(y, y64), err(final, f64), err(ys, y64), err(fs, f64)
        took = "segment_state" in names and "segment_pass" in names
        ok = took and ey <= tol_k * ry + 1e-6 and ef <= tol_k * rf + 1e-6
        worst_ok &= ok
        print(f"{label}: y {ey:.2e} (yardstick {ry:.2e})  final {ef:.2e} ({rf:.2e})  "
              f"{'segmented' if took else 'NOT SEGMENTED'}  {'ok' if ok else 'FAIL'}", flush=True)
    return 0 if worst_ok else FAILED


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", action="append", type=int, help="SSDCHECK_CUTILE_SEGMENTS values (repeatable)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per segment count (compiles included)")
    ap.add_argument("--tol-k", type=float, default=2.0, help="bound: K x the yardstick's error + 1e-6")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.tol_k)
    status = 0
    for s in args.segments or [2, 4]:
        env = dict(os.environ, SSDCHECK_CUTILE_SEGMENTS=str(s), PYTHONUNBUFFERED="1")
        t = time.time()
        print(f"== SSDCHECK_CUTILE_SEGMENTS={s}", flush=True)
        try:
            rc = subprocess.run([sys.executable, __file__, "--child", "--tol-k", str(args.tol_k)], env=env,
                                timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            print(f"== segments {s}: HUNG (killed after {args.timeout:.0f} s; the last line above says where)")
            status = 2
            continue
        print(f"== segments {s}: exit {rc} in {time.time() - t:.0f} s", flush=True)
        status = max(status, 1 if rc == FAILED else 2 if rc else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
