"""Does vLLM 0.33.0's prefill SSD take initial states whose dtype differs from its state dtype? A standalone check.

`_chunk_scan_fwd_kernel` (ops/ssd_chunk_scan.py l.264-277) picks the pointer it reads the previous
state through at run time: `initstates_ptr` where a sequence starts (HAS_INITSTATES), else
`states_ptr`, the chunk states `_state_passing_fwd` wrote in `out_dtype = state_dtype or C.dtype`
(ops/ssd_combined.py l.118-128). Triton needs both branches of that `if` to give `prev_states_ptr` one
type, so initial states whose dtype differs from the state dtype should fail to compile (the kernel's
line 91 is that `if`), whatever config runs. A model server passes both from its state cache
(`initial_states=ssm_state[...]`, `state_dtype=ssm_state.dtype`), so they agree there.

Each case calls vLLM's entry point, mamba_chunk_scan_combined_varlen, once on a small problem (one
sequence of 64 tokens, chunk 64, 2 heads, headdim 16, dstate 16) and prints `ok` with the returned
states' dtype, or the error's type and first line. The smallest failing input is the first failing case.

    python lab/scripts/repro_vllm_state_dtype.py    # CUDA GPU, Triton, and vLLM 0.33.0 installed or the
                                                # published fragment (kernels/peers/vllm_files.py)
Exit 0 when every case behaves as the line above predicts (the mismatched ones fail, the others run).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository
from kernels.peers.vllm import entry_points as vllm_entry_points  # noqa: E402

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32
# (x/B/C dtype, initial states dtype or None, state_dtype argument or None)
CASES = [
    (BF16, BF16, FP32),   # bf16 states with fp32 requested: mismatched
    (BF16, FP32, None),   # fp32 states, state dtype defaulting to C's bf16: mismatched
    (FP16, FP16, FP32),   # the same in fp16: mismatched
    (FP32, BF16, FP32),   # fp32 model, bf16 states: mismatched
    (BF16, BF16, BF16),   # bf16 state cache (mamba_ssm_cache_dtype auto): matched
    (BF16, FP32, FP32),   # fp32 state cache: matched
    (BF16, BF16, None),   # state dtype defaulting to C's bf16: matched
    (BF16, None, BF16),   # no initial states, bf16 states returned: nothing to mismatch
    (FP32, FP32, FP32),   # all fp32: matched
]


def run_case(fn, meta, dtype, init_dtype, state_dtype):
    T, h, p, n, chunk = 64, 2, 16, 16, 64
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, h, p, device="cuda", generator=g).to(dtype)
    dt = torch.nn.functional.softplus(torch.randn(T, h, device="cuda", generator=g) - 1)
    A = -torch.rand(h, device="cuda", generator=g)
    B = torch.randn(T, 1, n, device="cuda", generator=g).to(dtype)
    C = torch.randn(T, 1, n, device="cuda", generator=g).to(dtype)
    h0 = None if init_dtype is None else torch.randn(1, h, p, n, device="cuda", generator=g).to(init_dtype)
    cu = torch.tensor([0, T], dtype=torch.int32, device="cuda")
    cu_chunk, last, seq_chunks = meta(cu, chunk)
    out = torch.empty_like(x)
    states = fn(x, dt, A, B, C, chunk, cu_seqlens=cu, cu_chunk_seqlens=cu_chunk, last_chunk_indices=last,
                seq_idx=seq_chunks, out=out, initial_states=h0, state_dtype=state_dtype)
    torch.cuda.synchronize()
    return states


def name(d) -> str:
    return "none" if d is None else str(d).removeprefix("torch.")


def main() -> int:
    fn, meta, where = vllm_entry_points()
    print(f"vLLM from {where}, {torch.cuda.get_device_name()}")
    as_predicted = True
    for dtype, init_dtype, state_dtype in CASES:
        effective = state_dtype or dtype
        mismatched = init_dtype is not None and init_dtype != effective
        label = f"x {name(dtype):8} initial_states {name(init_dtype):8} state_dtype {name(state_dtype):8}"
        try:
            states = run_case(fn, meta, dtype, init_dtype, state_dtype)
            verdict = f"ok, states returned in {name(states.dtype)}"
            failed = False
        except Exception as e:   # noqa: BLE001 (Triton's CompilationError and friends: print, go on)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            verdict = f"FAILED {type(e).__name__}: {first[:160]}"
            failed = True
        as_predicted &= failed == mismatched
        print(f"  {label} ({'mismatched' if mismatched else 'matched'}): {verdict}")
    print("as predicted: initial states must have the state dtype" if as_predicted
          else "NOT as predicted: see the cases above")
    return 0 if as_predicted else 1


if __name__ == "__main__":
    sys.exit(main())
