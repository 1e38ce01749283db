"""One worker of lab/bench/triton_precompile.py: compile its share of a race group's autotune configs.

    python -m lab.bench.triton_precompile_worker --group v64h32 --worker 3/15    # what run_workers starts

It runs the group's forwards through lab.bench.race's Runner with `Autotuner.run` replaced by
`compile_share` (triton_precompile.install) and prints one JSON line: calls, configs compiled and
failed, the kernels seen. A module of its own, so that the race imports the precompile driver and the
worker imports the race, and neither imports the other back.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from lab.bench.triton_precompile import TRITON_IMPLS, WORKER_SEQLEN, Share, install


def _forget_vllm_picks() -> None:
    """vLLM's launch_autotuned keeps the config of a key's first launch and launches it directly later:
    in a worker that pick is only configs[0], so it is dropped after each forward to keep launches out."""
    mod = sys.modules.get("vllm.model_executor.layers.mamba.ops.triton_helpers")
    if mod is not None:
        mod._autotuned_configs.clear()


def worker(group_name: str, impls: list[str], share: Share, shapes_filter: str | None, seed: int) -> dict:
    import torch

    from lab.bench.race import Runner, downscale, make_inputs
    from lab.bench.shapes import GROUPS
    install(share)
    group = GROUPS[group_name]
    runner = Runner(group, impls, os.devnull, budget_s=float("inf"), seed=seed)
    calls, errors = 0, []
    for shape in group.shapes:
        if shapes_filter and shapes_filter not in shape.id:
            continue
        runner.final_states = shape.final_states
        # Triton specializes on dtypes, constants and each integer's divisibility by 16 (and i32 vs i64), not
        # on sizes: a shortened row compiles what the full one needs without its memory (15 workers at
        # 2 x 64K, dstate 256 would not fit next to each other)
        full = make_inputs(dataclasses.replace(shape, seqlen=min(shape.seqlen, WORKER_SEQLEN)), seed, "cuda")
        for impl in impls:
            if not group.runs(impl, shape) or (info := runner.info(impl)) is None:
                continue
            for chunk in runner.chunks(impl, info, shape):
                for kw in (full, downscale(full)):
                    try:
                        runner.call(info, kw, chunk)
                        calls += 1
                    except Exception as e:   # the race reports its own failures; here only compiles matter
                        errors.append(f"{impl} cs{chunk} {shape.id}: {type(e).__name__}: {str(e)[:200]}")
                    _forget_vllm_picks()
        del full
        torch.cuda.empty_cache()
    return {"worker": share.index, "calls": calls, "compiled": share.compiled, "failed_configs": len(share.failed),
            "kernels": sorted(share.seen), "errors": errors[:10]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.triton_precompile_worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("--group", required=True)
    ap.add_argument("--worker", required=True, metavar="I/N", help="this worker's share: I of N")
    ap.add_argument("--impls", default=",".join(TRITON_IMPLS))
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    impls = [i for i in args.impls.split(",") if i in TRITON_IMPLS]
    i, _, n = args.worker.partition("/")
    print(json.dumps(worker(args.group, impls, Share(int(i), int(n)), args.shapes, args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
