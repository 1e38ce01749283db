"""Does vLLM 0.33.0's VLLM_TRITON_FORCE_FIRST_CONFIG keep its pick per dtype? A standalone check.

force_first_config.py (vllm/triton_utils/, l.41-47) caches the config it picks per (autotuner, values
of the autotune key), without the argument dtypes that Triton's own Autotuner.run and vLLM's
launch_autotuned (ops/triton_helpers.py l.20-24) put in their keys. `_bmm_chunk_fwd_kernel`
(ops/ssd_bmm.py, key chunk_size, K, IS_CAUSAL) has a first config (128x256x64 tiles, 3 stages) that
fits the H200's shared memory in 16 bits but not in fp32 (294912 > 232448 bytes) once its K loop runs
more than once (dstate > 64). So in one process:

* fp32 alone: config 0 fails, the knob takes config 1 (fine);
* bf16 first, then fp32 at the same chunk size and dstate: fp32 gets bf16's cached config 0 and only
  that, and the call raises "No valid config ... (tried 9 configs)";
* fp32 first, then bf16: bf16 runs config 1, not the config 0 it runs alone.

Each case runs vLLM's entry point, mamba_chunk_scan_combined_varlen, in a fresh process (the knob is
read at import, its cache is per process) and prints, per call, the bmm config vLLM recorded for it
or the error. Without the bug the fp32 call after bf16 succeeds with the config fp32 takes alone.

    python lab/scripts/repro_vllm_first_config_dtype.py   # CUDA GPU, Triton, and vLLM 0.33.0 installed or
                                                      # the published fragment (kernels/peers/vllm_files.py)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository
from kernels.peers.vllm import entry_points as vllm_entry_points  # noqa: E402

ENV = "VLLM_TRITON_FORCE_FIRST_CONFIG"
HELPERS = "vllm.model_executor.layers.mamba.ops.triton_helpers"
# name: (knob set, the calls in order as (dtype, dstate)), all at chunk 64
CASES = {
    "fp32 alone, dstate 128": (True, [("float32", 128)]),
    "fp32 alone, dstate 64": (True, [("float32", 64)]),
    "bf16 alone, dstate 128": (True, [("bfloat16", 128)]),
    "bf16 then fp32, dstate 128": (True, [("bfloat16", 128), ("float32", 128)]),
    "fp32 then bf16, dstate 128": (True, [("float32", 128), ("bfloat16", 128)]),
    "bf16 then fp32, autotuned (control)": (False, [("bfloat16", 128), ("float32", 128)]),
}


def bmm_pick(dtype) -> str:
    """The config launch_autotuned recorded for _bmm_chunk_fwd_kernel with inputs of `dtype`."""
    helpers = sys.modules[HELPERS]
    for key, config in helpers._autotuned_configs.items():
        kernel = key[0]
        name = getattr(getattr(kernel, "base_fn", None), "__name__", "")
        # the key: (kernel, its autotune key values, then the dtype of each argument, a_ptr first)
        if name == "_bmm_chunk_fwd_kernel" and key[1 + len(kernel.keys)] == dtype:
            return ",".join(f"{k[-1]}{v}" for k, v in config.kwargs.items()) + f",stages{config.num_stages}"
    return "none recorded"


def child(calls) -> None:
    import torch
    fn, meta, where = vllm_entry_points()
    print(json.dumps({"where": where, "gpu": torch.cuda.get_device_name()}))
    T, h, p, chunk = 256, 2, 64, 64
    for dtype_name, n in calls:
        dtype = getattr(torch, dtype_name)
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(T, h, p, device="cuda", generator=g).to(dtype)
        dt = torch.nn.functional.softplus(torch.randn(T, h, device="cuda", generator=g) - 1)
        A = -torch.rand(h, device="cuda", generator=g)
        B, C = (torch.randn(T, 1, n, device="cuda", generator=g).to(dtype) for _ in range(2))
        cu = torch.tensor([0, T], dtype=torch.int32, device="cuda")
        cu_chunk, last, seq_chunks = meta(cu, chunk)
        try:
            fn(x, dt, A, B, C, chunk, cu_seqlens=cu, cu_chunk_seqlens=cu_chunk, last_chunk_indices=last,
               seq_idx=seq_chunks, out=torch.empty_like(x), state_dtype=torch.float32)
            torch.cuda.synchronize()
            result = "ok, bmm config " + bmm_pick(dtype)
        except Exception as e:                      # noqa: BLE001 - the error is the finding
            result = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        print(json.dumps({"call": f"{dtype_name} dstate {n}", "result": result}))


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
        return 0
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    results = {}
    for name, (knob, calls) in CASES.items():
        env = {k: v for k, v in os.environ.items() if k != ENV}
        if knob:
            env[ENV] = "1"
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(calls)],
                              capture_output=True, text=True, env=env, cwd=here, timeout=600)
        lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            print(f"{name}: the child failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
            return 2
        if not results:
            print(f"vLLM from {lines[0]['where']}, {lines[0]['gpu']}, chunk 64, nheads 2, headdim 64")
        results[name] = [ln["result"] for ln in lines[1:]]
        print(f"  {name:38} {'knob set' if knob else 'autotuned'}: "
              + "; ".join(f"{ln['call']}: {ln['result']}" for ln in lines[1:]))
    failed = results["bf16 then fp32, dstate 128"][-1]
    order = results["fp32 then bf16, dstate 128"][-1] != results["bf16 alone, dstate 128"][0]
    bug = not failed.startswith("ok") and results["fp32 alone, dstate 128"][0].startswith("ok")
    print("vLLM's first-config pick ignores the dtype: fp32 after bf16 fails" if bug else
          "fp32 after bf16 runs: the pick is kept per dtype")
    if order:
        print("and bf16 after fp32 runs another config than bf16 alone")
    return 1 if bug or order else 0


if __name__ == "__main__":
    sys.exit(main())
