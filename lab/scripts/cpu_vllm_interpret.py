"""vLLM 0.33.0's own SSD kernels on a CPU, under Triton's interpreter: the adapter's mapping and the
empty-sequence check without a GPU.

Triton's interpreter (TRITON_INTERPRET=1) runs @triton.jit kernels on host tensors with numpy, one
program at a time: the index arithmetic and the data flow are vLLM's, the numerics are not the GPU's
(no TF32, no ex2.approx), and programs never overlap. Two settings make vLLM's files take their GPU
path there: CUDA_VISIBLE_DEVICES="" (vllm/triton_utils/importing.py l.58-69 then keeps Triton without an
active driver) and, in this script only, current_platform.is_cpu() answering False (otherwise
ssd_combined.py l.249 swaps in vLLM's CPU module, which is not published). VLLM_TRITON_FORCE_FIRST_CONFIG=1
avoids benchmarking configs. The interpreter needs numpy < 2 (it converts 1-element arrays to ints).
Use fp32 inputs only: with bf16 the interpreter's results were off by ~1e10 even on a one-chunk
problem, which says nothing about the GPU (numpy has no bf16; mamba_ssm's kernels of the same shape
pass on the H200), so bf16 there is not evidence.

    pip install --target /tmp/vt --no-deps triton==3.6.0; pip install --target /tmp/vnp --no-deps numpy==1.26.4
    TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES= VLLM_TRITON_FORCE_FIRST_CONFIG=1 \\
      PYTHONPATH=/tmp/vnp:/tmp/vt:. SSDCHECK_VLLM_SRC=<unpacked vllm-0.33.0-mamba-ssd> \\
      python lab/scripts/cpu_vllm_interpret.py          # about 1 minute

Prints, per case, the adapter's largest error against the float64 oracle (fp32 inputs: ~1e-5 is
rounding), then vLLM packed against vLLM on each sequence alone with empty sequences in cu_seqlens
(lab/scripts/repro_vllm_empty_sequence.py is the same check on a GPU).
"""
from __future__ import annotations

import os
import sys
import time

import torch

from kernels.peers import vllm_files

MAPPED = {   # SSDProblem keyword arguments: rows; seq_idx sequences with z, softplus, bias, groups; varlen
    "rows b2": dict(batch=2, seqlen=40, nheads=2, initial_states=True, D="h"),
    "seq_idx, z, softplus": dict(batch=2, seqlen=37, nheads=4, ngroups=2, initial_states=True, seq_starts=(1, 2, 20),
                                 z=True, dt_softplus=True, dt_bias=True),
    "varlen": dict(batch=1, seqlen=50, nheads=2, initial_states=True, seq_starts=(20, 21, 33), varlen=True),
}
EMPTY = {"control": [0, 20, 50], "empty middle": [0, 20, 20, 50], "empty first": [0, 0, 40], "empty last": [0, 40, 40]}


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("cpu_vllm_interpret: set TRITON_INTERPRET=1 (and see the docstring)", file=sys.stderr)
        return 2
    vllm_files.Platform.is_cpu = lambda self: False      # vLLM's GPU path, on the interpreter
    from kernels.peers import vllm as adapter
    from oracles import ssd_chunked_f64
    from properties.problem import SSDProblem
    adapter.require_cuda = lambda peer, x: None
    fn, meta = adapter._load()
    print("adapter vs float64 oracle (fp32 inputs, chunk 16, headdim = dstate = 16):")
    for name, spec in MAPPED.items():
        kw = SSDProblem(headdim=16, dstate=16, chunk_size=16, dtype="float32", **spec).inputs()
        t = time.time()
        got, want = adapter.vllm_forward(**kw), ssd_chunked_f64(**kw)
        errs = [f"{what} {float((g.double() - w).abs().max()):.1e}" for g, w, what in zip(got, want, ("y", "final", "varlen"))]
        print(f"  {name:22} {', '.join(errs)}  ({time.time() - t:.0f} s)")

    def call(x, dt, A, B, C, cu, h0, chunk=16):
        cu_t = torch.tensor(cu, dtype=torch.int32)
        cu_chunk, last, seq_chunks = meta(cu_t, chunk)
        out = torch.empty_like(x)
        states = fn(x, dt, A, B, C, chunk, cu_seqlens=cu_t, cu_chunk_seqlens=cu_chunk, last_chunk_indices=last,
                    seq_idx=seq_chunks, out=out, initial_states=h0, state_dtype=torch.float32)
        return out, states, last

    print("vLLM packed vs each sequence alone (an empty sequence's state should be its initial state):")
    torch.manual_seed(0)
    bad = False
    for name, cu in EMPTY.items():
        T, S, h, p, n = cu[-1], len(cu) - 1, 2, 16, 16
        x, dt = torch.randn(T, h, p), torch.nn.functional.softplus(torch.randn(T, h) - 1)
        A, B, C, h0 = -torch.rand(h) * 0.1, torch.randn(T, 1, n), torch.randn(T, 1, n), torch.randn(S, h, p, n)
        out, states, last = call(x, dt, A, B, C, cu, h0)
        dy, ds = [], []
        for i in range(S):
            s, e = cu[i], cu[i + 1]
            if e == s:
                ds.append(float((states[i] - h0[i]).abs().max()))
                continue
            y1, st1, _ = call(x[s:e], dt[s:e], A, B[s:e], C[s:e], [0, e - s], h0[i:i + 1])
            dy.append(float((out[s:e] - y1).abs().max()))
            ds.append(float((states[i] - st1[0]).abs().max()))
        bad |= max(dy + ds) > 1e-3 and name != "control"
        print(f"  {name:13} cu_seqlens={cu} last_chunk_indices={last.tolist()}: max|y packed - alone| "
              f"{['%.1e' % v for v in dy]}, max|state - alone (h0 if empty)| {['%.1e' % v for v in ds]}")
    print("vLLM mishandles empty sequences" if bad else "empty sequences are handled")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
