"""Autotune vLLM once per triage-battery problem before the property suite runs it as shipped.

As shipped, vLLM's kernels autotune every new key on first use (about 47 configs over its five
kernels, each compiled and timed). In a 16-worker suite every worker would tune the battery's keys
at once, each on its own. Run with TRITON_CACHE_AUTOTUNING=1 (lab/scripts/gpu_vllm.sh sets it), this
tunes each battery problem of `--impl vllm` in its own process, side by side, so Triton's on-disk
autotune cache holds the picks before the workers start, and prints what each cost: the autotune
cost the suite's time budget has to hold.

    TRITON_CACHE_AUTOTUNING=1 python3 lab/scripts/gpu_vllm_prime.py     # a CUDA GPU and the vLLM fragment
"""
from __future__ import annotations

import multiprocessing
import sys
import time


def _battery():
    from kernels.peers import vllm
    from properties import triage
    return vllm, triage.battery(vllm.INFO, gpu=True)


def prime(i: int) -> str:
    import torch
    vllm, battery = _battery()
    from properties import invariants
    p = battery[i]
    t = time.monotonic()
    vllm.vllm_forward(**invariants.call_inputs(vllm.INFO, p))
    torch.cuda.synchronize()
    return (f"{p.dtype:8} chunk {p.chunk_size:3} headdim {p.headdim:3} dstate {p.dstate:3} nheads {p.nheads:2}: "
            f"first call {time.monotonic() - t:6.1f} s")


def main() -> int:
    _, battery = _battery()
    t = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(len(battery)) as pool:
        for line in pool.imap_unordered(prime, range(len(battery))):
            print(line, flush=True)
    print(f"{len(battery)} battery problems tuned in {time.monotonic() - t:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
