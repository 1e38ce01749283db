"""A new kernel path's first GPU run: small forwards under a timeout, one child process per config.

    python lab/scripts/smoke_config.py --config chunk_walk:BN=64 --config chunk_walk:BN=128,FACT=1

A kernel that hung every forward once cost 593 s of GPU time inside one long run
(lab/reports/2026-12-01-dtp-hang.md). This runs each config (an SSDCHECK_CUTILE_CONFIG override,
dispatch.parse_configs) in its own process under --timeout seconds, printing after each launch and after each synchronize, so a hang costs one
timeout and says where it stuck. Each problem (fp32, fp16 and bf16; D per head and per channel, z,
dt_bias with softplus, initial and final states, 1 to 3 heads per group, and a benchmark shape) is
run twice on the same inputs: with the config, and with `--ref` (default: the walk off, so the
state and scan kernels run). The line per problem gives the normwise difference of y and of the
final states, and whether they are bitwise equal. Exit status: 0 if every config finished and every
difference is below --tol, 1 if one differs, 2 if one hung or crashed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # the repository

DIFFERS = 10   # the child's exit status for a difference above --tol (a crash exits 1)

# (batch, seqlen, nheads, ngroups, headdim, dtype, D per channel, z, init): 1-3 heads per group;
# dstate is the config's
PROBLEMS = (
    (2, 512, 8, 2, 64, "bfloat16", False, True, True),
    (1, 256, 6, 2, 32, "float16", True, False, False),
    (2, 320, 6, 2, 64, "float32", False, True, True),
    (8, 2048, 32, 1, 64, "bfloat16", False, False, False),
)


def child(config: str, ref: str, dstate: int, tol: float) -> int:
    import torch

    from kernels.cutile import dispatch, launcher, ssd_forward
    worst = 0.0
    for b, l, h, g, p, dtype, d_per_channel, use_z, use_init in PROBLEMS:
        gen = torch.Generator(device="cuda").manual_seed(l + h)
        dt_ = getattr(torch, dtype)

        def rnd(*shape, dtype=dt_):
            return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)

        kw = dict(x=rnd(b, l, h, p), dt=rnd(b, l, h, dtype=torch.float32) - 1.0, A=-torch.rand(h, device="cuda"),
                  B=rnd(b, l, g, dstate), C=rnd(b, l, g, dstate), chunk_size=64,
                  D=rnd(h, p, dtype=torch.float32) if d_per_channel else rnd(h, dtype=torch.float32),
                  z=rnd(b, l, h, p) if use_z else None, dt_bias=rnd(h, dtype=torch.float32) * 0.5,
                  initial_states=rnd(b, h, p, dstate, dtype=torch.float32) if use_init else None,
                  dt_softplus=True, return_final_states=True)
        label = f"b{b} l{l} h{h} g{g} p{p} n{dstate} {dtype}"
        outs = {}
        for side, spec in (("ref", ref), ("new", config)):
            launcher._OVERRIDE.clear()
            launcher._OVERRIDE.update(dispatch.parse_configs(spec, "--config"))
            x, B = kw["x"], kw["B"]
            walk = launcher._walk_config(launcher._problem(x, B, 64, None))
            print(f"  {label} {side}: launching (walk {'on: ' + str(walk) if walk else 'off'})", flush=True)
            t0 = time.time()
            outs[side] = ssd_forward(**kw)
            print(f"  {label} {side}: launched in {time.time() - t0:.1f} s", flush=True)
            torch.cuda.synchronize()
            print(f"  {label} {side}: synchronized", flush=True)
        line = []
        for name, new, old in zip(("y", "final"), outs["new"], outs["ref"]):
            diff = (new.double() - old.double()).norm() / old.double().norm().clamp_min(1e-30)
            line.append(f"{name} {float(diff):.2e}{' bitwise' if torch.equal(new, old) else ''}")
            worst = max(worst, float(diff) if torch.isfinite(diff) else float("inf"))
        print(f"{label}: {', '.join(line)}", flush=True)
    return 0 if worst <= tol else DIFFERS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", required=True, help="an SSDCHECK_CUTILE_CONFIG override (repeatable)")
    ap.add_argument("--ref", default="chunk_walk:BN=0", help="the override each config is compared with")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per config (its compiles included)")
    ap.add_argument("--tol", type=float, default=1e-2, help="largest normwise difference accepted")
    ap.add_argument("--child", nargs=3, metavar=("CONFIG", "REF", "DSTATE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child[0], args.child[1], int(args.child[2]), args.tol)
    from kernels.cutile import dispatch
    status = 0
    for spec in args.config:
        cfgs = dispatch.parse_configs(spec, "--config")     # a typo fails here, before any GPU work
        dstate = next((c.get("BN") for k, c in cfgs.items() if k.startswith("chunk_walk")), 64) or 64
        print(f"== {spec} (dstate {dstate}, against {args.ref})", flush=True)
        t0 = time.time()
        try:
            rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--config", spec, "--tol", str(args.tol),
                                 "--child", spec, args.ref, str(dstate)], timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            print(f"== {spec}: HUNG or too slow: killed after {args.timeout:.0f} s", flush=True)
            status = 2
            continue
        verdict = {0: "ok", DIFFERS: "DIFFERS"}.get(rc, "CRASHED")
        print(f"== {spec}: {verdict} (rc={rc}) in {time.time() - t0:.1f} s", flush=True)
        status = max(status, {0: 0, DIFFERS: 1}.get(rc, 2))
    return status


if __name__ == "__main__":
    sys.exit(main())
