"""Compile a race group's Triton autotune configs in parallel, before the race times them.

    python -m lab.bench.triton_precompile --group v64h32 --workers 15      # what lab.bench.race --precompile-workers runs

Triton autotunes a kernel on its first launch for a key by compiling and timing every config, one after
another on one core: mamba_ssm's and vLLM's SSD kernels have 20-50 configs each, so a fresh machine spends
minutes per (chunk size, dstate) compiling while 15 of 16 cores idle. (Threads do not help: Triton 3.6
holds the GIL while it compiles; two threads compiling took as long as one did, measured on the CPU host.)

Here N worker processes (lab/bench/triton_precompile_worker.py) each run the group's forwards (every shape and chunk size of the group, rows
shortened to 4096 tokens, and lab.bench.race's downscaled inputs) with `Autotuner.run` replaced by `compile_share`: worker i compiles configs
i, i+N, ... of each autotuned launch into Triton's on-disk cache and launches nothing. The race's own
autotune then finds every binary on disk: it times every config and picks as it always does; only the
compiling moved. Nothing of the peers' files changes; the replacement lives in the workers only.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

TRITON_IMPLS = ("mamba-ssm", "vllm")   # the race's implementations that autotune with Triton
WORKER_SEQLEN = 4096


class Share:
    """What one worker compiled: its index among `of` workers, per-kernel counts, and failures."""

    def __init__(self, index: int, of: int):
        if not 0 <= index < of:
            raise ValueError(f"worker index {index} not in 0..{of - 1}")
        self.index, self.of = index, of
        self.compiled, self.failed, self.seen = 0, [], set()

    def mine(self, j: int) -> bool:
        return j % self.of == self.index


def compile_share(tuner, share: Share, args: tuple, kwargs: dict):
    """Autotuner.run's stand-in: compile this worker's share of the configs `tuner` would time, launch
    nothing. `best_config` is set as after a run (vLLM's launch_autotuned reads it)."""
    kw = {k: v for k, v in kwargs.items() if k != "warmup"}
    tuner.nargs = dict(zip(tuner.arg_names, args))
    try:
        configs = tuner.prune_configs(kw) if len(tuner.configs) > 1 else list(tuner.configs)
        name = getattr(getattr(tuner, "base_fn", None), "__name__", type(tuner).__name__)
        for j, cfg in enumerate(configs):
            if not share.mine(j):
                continue
            try:
                tuner.fn.run(*args, **kw, warmup=True, **cfg.all_kwargs())
                share.compiled += 1
            except Exception as e:   # a config Triton cannot build: the race's autotune times it as inf too
                share.failed.append(f"{name} {cfg}: {type(e).__name__}: {str(e)[:200]}")
        share.seen.add(name)
        tuner.best_config = configs[0]
    finally:
        tuner.nargs = None
    return None


def install(share: Share) -> None:
    """Replace Triton's Autotuner.run in this process (a worker's only)."""
    from triton.runtime import autotuner

    def run(self, *args, **kwargs):
        return compile_share(self, share, args, kwargs)
    autotuner.Autotuner.run = run


def run_workers(group_name: str, impls: list[str], workers: int, timeout_s: float,
                shapes_filter: str | None = None, seed: int = 0) -> dict:
    """Start `workers` processes of this module and wait for them (each under `timeout_s`): a summary."""
    impls = [i for i in impls if i in TRITON_IMPLS]
    t0 = time.monotonic()
    if not impls or workers < 1:
        return {"workers": 0, "seconds": 0.0, "impls": impls}
    procs = []
    for i in range(workers):
        cmd = [sys.executable, "-m", "lab.bench.triton_precompile_worker", "--group", group_name, "--worker", f"{i}/{workers}",
               "--impls", ",".join(impls), "--seed", str(seed)] + (["--shapes", shapes_filter] if shapes_filter else [])
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, timeout_s - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            results.append({"error": "timeout", "stderr": err[-400:]})
            continue
        line = (out.strip().splitlines() or [""])[-1]
        try:
            results.append(json.loads(line))
        except ValueError:
            results.append({"error": f"rc={p.returncode}", "stderr": err[-400:]})
    ok = [r for r in results if "error" not in r]
    return {"workers": workers, "impls": impls, "seconds": round(time.monotonic() - t0, 1),
            "compiled": sum(r["compiled"] for r in ok), "failed_configs": sum(r["failed_configs"] for r in ok),
            "calls": sum(r["calls"] for r in ok), "worker_errors": [r for r in results if "error" in r][:4],
            "call_errors": [e for r in ok for e in r["errors"]][:6]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.triton_precompile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--group", required=True)
    ap.add_argument("--impls", default=",".join(TRITON_IMPLS))
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0, help="start N workers and wait for them")
    ap.add_argument("--timeout-s", type=float, default=300.0)
    args = ap.parse_args(argv)
    impls = [i for i in args.impls.split(",") if i in TRITON_IMPLS]
    if args.workers < 1:
        ap.error("--workers N (N >= 1); one worker alone: python -m lab.bench.triton_precompile_worker")
    print(json.dumps(run_workers(args.group, impls, args.workers, args.timeout_s, args.shapes, args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
