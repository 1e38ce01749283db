"""Does vLLM 0.33.0's prefill SSD handle an empty sequence in cu_seqlens? A standalone check.

compute_varlen_chunk_metadata (v1/attention/backends/mamba2_attn.py l.27-92) supports empty sequences
and gives them last_chunk_indices = -1. Reading the kernels, two places do not expect that:

* _state_passing_fwd_kernel (ops/ssd_state_passing.py l.69-72) starts sequence b at chunk
  last_chunk_indices[b - 1] + 1: after an empty sequence that is chunk 0, so the next sequence would
  accumulate the states of every chunk before it (and its program would write their `out` entries, which
  the earlier sequences' programs also write);
* _mamba_chunk_scan_combined_fwd returns states[last_chunk_indices] (ops/ssd_combined.py l.161): for
  an empty sequence, index -1, the state of the batch's last chunk.

This runs each case packed and each sequence alone (vLLM against itself, no reference needed) and
prints the largest difference of y and of every sequence's returned state, plus a repeat of the
packed call (a race between programs writing the same entries shows as a difference). Without the
suspected bugs every number is 0 up to fp32 rounding (~1e-6).

    python lab/scripts/repro_vllm_empty_sequence.py    # CUDA GPU, Triton, and vLLM 0.33.0 installed or the
                                                   # published fragment (kernels/peers/vllm_files.py)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository
from kernels.peers.vllm import entry_points as vllm_entry_points  # noqa: E402


def call(fn, meta, x, dt, A, B, C, cu, chunk, h0):
    cu_t = torch.tensor(cu, dtype=torch.int32, device=x.device)
    cu_chunk, last, seq_chunks = meta(cu_t, chunk)
    out = torch.empty_like(x)
    states = fn(x, dt, A, B, C, chunk, cu_seqlens=cu_t, cu_chunk_seqlens=cu_chunk, last_chunk_indices=last,
                seq_idx=seq_chunks, out=out, initial_states=h0, state_dtype=torch.float32)
    return out, states


def main() -> int:
    fn, meta, where = vllm_entry_points()
    torch.manual_seed(0)
    h, p, n, chunk = 4, 64, 64, 32
    cases = {"empty in the middle": [0, 40, 40, 100], "empty first": [0, 0, 60], "empty last": [0, 60, 60],
             "no empty (control)": [0, 40, 100]}
    print(f"vLLM from {where}, {torch.cuda.get_device_name()}, chunk {chunk}, fp32 inputs, nheads {h}, "
          f"headdim {p}, dstate {n}")
    bad = False
    for name, cu in cases.items():
        T, S = cu[-1], len(cu) - 1
        x = torch.randn(T, h, p, device="cuda")
        dt = torch.nn.functional.softplus(torch.randn(T, h, device="cuda") - 1)
        A = -torch.rand(h, device="cuda") * 0.1
        B, C = torch.randn(T, 1, n, device="cuda"), torch.randn(T, 1, n, device="cuda")
        h0 = torch.randn(S, h, p, n, device="cuda")
        out, states = call(fn, meta, x, dt, A, B, C, cu, chunk, h0)
        out2, states2 = call(fn, meta, x, dt, A, B, C, cu, chunk, h0)
        dy, ds = [], []
        for i in range(S):
            s, e = cu[i], cu[i + 1]
            if e == s:                       # the math: an empty sequence ends in its initial state
                ds.append(float((states[i] - h0[i]).abs().max()))
                continue
            y1, st1 = call(fn, meta, x[s:e], dt[s:e], A, B[s:e], C[s:e], [0, e - s], chunk, h0[i:i + 1])
            dy.append(float((out[s:e] - y1).abs().max()))
            ds.append(float((states[i] - st1[0]).abs().max()))
        rep = max(float((out - out2).abs().max()), float((states - states2).abs().max()))
        worst = max(dy + ds + [rep])
        bad |= worst > 1e-3 and "control" not in name
        print(f"  {name:20} cu_seqlens={cu}: max|y packed - alone| per non-empty sequence "
              f"{['%.1e' % v for v in dy]}, max|state - alone (or h0 if empty)| {['%.1e' % v for v in ds]}, "
              f"repeat {rep:.1e}")
    print("vLLM mishandles empty sequences" if bad else "empty sequences are handled")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
