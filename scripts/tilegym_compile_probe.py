"""Compile TileGym 1.5.1's forward kernels for sm_90 on the CPU (tileiras, no GPU), with the first config of
each search space (what TILEGYM_DISABLE_AUTOTUNE=1 launches): evidence for kernels/peers/tilegym.py's
declarations beyond what TileGym tests. Compiling is not running: correctness is the GPU suite's job.

    pip install --no-deps --target /tmp/tgsite shared/peers/tilegym-1.5.1-py3-none-any.whl
    PYTHONPATH=/tmp/tgsite python scripts/tilegym_compile_probe.py DTYPE,DT_DTYPE,CHUNK,HEADDIM,DSTATE ...
    # e.g. bf16,f32,64,64,128 f16,f32,128,64,64 f32,f32,256,64,128      (dtypes: bf16 f16 f32)

Seen on 2026-11-30 (cuda-tile 1.7.0, tileiras 13.4): every kernel compiled for bf16/f16/f32 inputs, dt in
fp32 or bf16, chunk 32, 64, 128 and 256, headdim 8..256, dstate 16..256.
"""
import io
import sys
import time

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, KernelSignature, CallingConvention, export_kernel
import tilegym.ops.cutile.mamba2 as M

CC = CallingConvention.cutile_python_v1()
DT = {"bf16": ct.bfloat16, "f16": ct.float16, "f32": ct.float32}

def arr(dtype, ndim, group=None):
    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(group,) if group else (), may_alias_internally=False,
                           stride_constant=(None,) * (ndim - 1) + (1,), shape_divisible_by=1,
                           base_addr_divisible_by=16)

def compile_one(kernel, params):
    sig = KernelSignature(params, CC)
    t = time.time()
    export_kernel(kernel, [sig], io.BytesIO(), gpu_code="sm_90", output_format="cubin")
    return time.time() - t

def probe(dtype, dt_dtype, chunk, p, n, h=8):
    xd, dd = DT[dtype], DT[dt_dtype]
    out = {}
    # cumsum: (a, dt, out_bth, out_bht, dt_bht, chunk_size, BLOCK_H)
    cfg = next(M._chunk_cumsum_autotune_configs(h))
    out["cumsum"] = lambda cfg=cfg: compile_one(M.chunk_cumsum_kernel, [arr(ct.float32, 1), arr(dd, 3), arr(ct.float32, 3), arr(ct.float32, 3), arr(dd, 3), chunk, cfg.BLOCK_H])
    cfg = next(M._fwd_pass_state_autotune_configs(n, p, chunk))
    out["state"] = lambda cfg=cfg: compile_one(M.fwd_pass_state_kernel, [arr(xd, 4), arr(xd, 4), arr(dd, 3), arr(ct.float32, 3), arr(ct.float32, 4),
        arr(xd, 5, "h"), arr(xd, 5, "h"), arr(ct.float32, 4), chunk, cfg.BLOCK_STATE, cfg.BLOCK_HEAD, 1, cfg.LOAD_LAT, cfg.STORE_LAT, cfg.BDD_LAT, bool(cfg.SWAP), bool(cfg.BHT), False])
    swap = chunk == 64
    gen = M._compute_out_swap_configs if swap else M._compute_out_configs
    cfg = next(gen(head_size=p, state_size=n))
    common = [arr(xd, 4), arr(xd, 4), arr(xd, 4), arr(ct.float32, 1), arr(dd, 3), arr(ct.float32, 3), arr(xd, 5), arr(xd, 4),
              chunk, cfg.BLOCK_STATE, cfg.BLOCK_HEAD, 1, n]
    if swap:
        out["out"] = lambda: compile_one(M.compute_out_swap_kernel, common + [cfg.LATENCY, cfg.H_LAT, cfg.persistent])
    else:
        out["out"] = lambda: compile_one(M.compute_out_kernel, common + [cfg.H_LAT, cfg.persistent])
    res = {}
    for k, f in out.items():
        try:
            res[k] = f"ok {f():.0f}s"
        except Exception as e:
            res[k] = "FAIL " + (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
    return res

cases = [tuple(a.split(",")) for a in sys.argv[1:]]
for c in cases:
    dtype, dt_dtype, chunk, p, n = c[0], c[1], int(c[2]), int(c[3]), int(c[4])
    print(c, probe(dtype, dt_dtype, chunk, p, n), flush=True)
