"""Autotune a shipped peer once per battery problem before the property suite runs it.

As shipped, the peers tune every new key on first use: vLLM about 47 configs over its five kernels,
mamba_ssm about 40 per (chunk, headdim, dstate), each compiled and timed (Triton), TileGym an
exhaustive search of each kernel's cuTile configs per shape. In a 16-worker suite every worker would
tune the battery's keys at once, each on its own. This tunes each problem of the triage battery and of
the model-layer batteries (one per dtype) in its own process, side by side, so that the workers find
the work done: Triton's on-disk autotune cache holds the picks (run with TRITON_CACHE_AUTOTUNING=1;
lab/scripts/gpu_vllm.sh and gpu_production_modes.sh set it), and TileGym's candidates are compiled into
the shared cuTile cache (CUDA_TILE_CACHE_DIR), so a worker's own search only times them. It prints
what each problem cost: the autotune cost the suite's time budget has to hold.

    TRITON_CACHE_AUTOTUNING=1 python3 lab/scripts/gpu_autotune_prime.py --impl vllm   # a CUDA GPU, the peer
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

DTYPES = ("bfloat16", "float16", "float32")


def problems(name: str) -> list:
    """The triage battery, then each dtype's model-layer battery, each problem once."""
    from kernels.registry import lookup
    from properties import triage
    info = lookup(name)
    out = list(triage.battery(info, gpu=True))
    for dtype in DTYPES:
        if dtype in info.dtypes:
            out += triage.battery(info, True, dtype, "model")
    return list(dict.fromkeys(out))


def prime(job: tuple[str, int]) -> str:
    import torch
    from kernels.registry import lookup
    from properties import invariants
    name, i = job
    info, p = lookup(name), problems(name)[i]
    t = time.monotonic()
    info.fn(**invariants.call_inputs(info, p))
    torch.cuda.synchronize()
    return (f"{p.dtype:8} chunk {p.chunk_size:3} headdim {p.headdim:3} dstate {p.dstate:3} nheads {p.nheads:2}: "
            f"first call {time.monotonic() - t:6.1f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="vllm", help="a registered peer in its shipped mode (vllm, mamba-ssm, tilegym)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at once (default: one per core)")
    args = ap.parse_args(argv)
    todo = problems(args.impl)
    t = time.monotonic()
    jobs = max(1, min(args.jobs, len(todo)))
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for line in pool.imap_unordered(prime, [(args.impl, i) for i in range(len(todo))]):
            print(line, flush=True)
    print(f"{args.impl}: {len(todo)} battery problems tuned in {time.monotonic() - t:.1f} s, {jobs} at once", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
