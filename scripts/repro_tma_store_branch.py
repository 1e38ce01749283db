"""A minimal kernel for session 19's hang: TMA stores under a block-uniform runtime branch inside a loop.

    python scripts/repro_tma_store_branch.py              # on the GPU host, after setup.sh (~1 min)
    python scripts/repro_tma_store_branch.py --compile    # any machine: compile every variant for sm_90

In session 19, chunk_state with DTP stored two (1, 1, 64) fp32 tiles under `if col == 0:` (col =
ct.bid(0)) inside its chunk loop, beside the loop's TMA loads and an unconditional state store; every
launch hung the H200 (tileiras 13.4.92, cuda-tile 1.7.0). The same stores with allow_tma=False, or
made unconditional, finished (reports/2026-12-01-dtp-hang.md). This kernel keeps only that pattern:
each block walks `n_iter` 64-wide tiles of its row, takes a running cumsum, stores a (64, 64) product
tile every iteration (the "state" store) and, in the blocks of column 0 only, the cumsum tile. Each
variant runs in its own process under a timeout; a finished one is checked against torch.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time

import cuda.tile as ct

VARIANTS = {            # name -> (BRANCH, TMA, STATE): the cumsum store under `if col == 0`, by TMA, beside the state store
    "branch-tma-state": (1, 1, 1),      # the session-19 pattern (hung there)
    "branch-notma-state": (1, 0, 1),    # its fix
    "always-tma-state": (0, 1, 1),      # the other fix
    "branch-tma": (1, 1, 0),            # without the per-iteration state store
}


@ct.kernel
def tma_branch_kernel(src, out, state, n_iter,
                      BRANCH: ct.Constant[int], TMA: ct.Constant[int], STATE: ct.Constant[int]):
    """grid (2, rows): src, out (rows, n_iter * 64) fp32; state (2, rows, 64, 64) fp32."""
    col = ct.bid(0)
    row = ct.bid(1)
    carry = ct.zeros((1,), ct.float32)
    acc = ct.zeros((64, 64), ct.float32)
    for c in range(n_iter):
        t = ct.load(src, (row, c), shape=(1, 64)).reshape((64,))
        run = ct.cumsum(t, axis=0) + carry
        carry = ct.extract(run, (63,), shape=(1,))
        if STATE != 0:
            acc = acc + run[:, None] * t[None, :]
            ct.store(state, (col, row, 0, 0), acc.reshape((1, 1, 64, 64)))
        if BRANCH != 0:
            if col == 0:
                if TMA != 0:
                    ct.store(out, (row, c), run.reshape((1, 64)))
                else:
                    ct.store(out, (row, c), run.reshape((1, 64)), allow_tma=False)
        else:
            ct.store(out, (row, c), run.reshape((1, 64)))


CHILD = r'''
import json, sys, time, torch
sys.path.insert(0, "scripts")
import cuda.tile as ct
from repro_tma_store_branch import VARIANTS, tma_branch_kernel
branch, tma, state_on = VARIANTS[sys.argv[1]]
rows, n_iter = 64, 32
src = torch.rand(rows, n_iter * 64, device="cuda")
out = torch.full_like(src, float("nan"))
state = torch.zeros(2, rows, 64, 64, device="cuda")
t = time.time()
ct.launch(torch.cuda.current_stream(), (2, rows, 1), tma_branch_kernel, (src, out, state, n_iter, branch, tma, state_on))
print("launched", round(time.time() - t, 1), flush=True)
torch.cuda.synchronize()
print("synced", round(time.time() - t, 1), flush=True)
err = float((out - src.cumsum(1)).abs().max() / src.cumsum(1).abs().max())
print(json.dumps({"max_rel_err": err}), flush=True)
'''


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=40.0)
    ap.add_argument("--compile", action="store_true", help="only compile each variant for sm_90 (no GPU needed)")
    args = ap.parse_args()
    if args.compile:
        import io

        from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                           ScalarConstraint, export_kernel)

        def arr(ndim):   # divisible shapes and strides, as the JIT specializes the launch (TMA needs them)
            return ArrayConstraint(ct.float32, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                                   may_alias_internally=False, stride_constant=(None,) * (ndim - 1) + (1,),
                                   stride_divisible_by=(16,) * (ndim - 1) + (1,), shape_divisible_by=(16,) * ndim,
                                   base_addr_divisible_by=16)
        for name, consts in VARIANTS.items():
            sig = KernelSignature([arr(2), arr(2), arr(4), ScalarConstraint(ct.int32)]
                                  + [ConstantConstraint(v) for v in consts], CallingConvention.cutile_python_v1())
            buf = io.BytesIO()
            export_kernel(tma_branch_kernel, [sig], buf, gpu_code="sm_90", output_format="cubin")
            print(name, "compiled,", len(buf.getvalue()), "bytes, sha256", hashlib.sha256(buf.getvalue()).hexdigest()[:16])
        return 0
    for name in VARIANTS:
        t = time.time()
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True,
                                  timeout=args.timeout)
            rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-800:]
        except subprocess.TimeoutExpired as e:
            rc, tail = "timeout", ((e.stdout or b"").decode() + (e.stderr or b"").decode())[-800:]
        print(name, json.dumps({"rc": rc, "s": round(time.time() - t, 1), "tail": tail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
