"""usage: python lab/scripts/tilegym_compile_probe.py DTYPE,DT_DTYPE,CHUNK,HEADDIM,DSTATE ...

Compile TileGym 1.5.1's forward kernels for sm_90 on the CPU (tileiras, no GPU), with the first config of
each search space (what TILEGYM_DISABLE_AUTOTUNE=1 launches): evidence for kernels/peers/tilegym.py's
declarations beyond what TileGym tests. Compiling is not running: correctness is the GPU suite's job.

    # e.g. bf16,f32,64,64,128 f16,f32,128,64,64 f32,f32,256,64,128      (dtypes: bf16 f16 f32)

TileGym comes from the environment if it is importable, else from its published wheel in
$SSDCHECK_PEERS_DIR (kernels/peers/sources.py; `pip download tilegym==1.5.1 --no-deps`), unpacked to a
temporary folder.

Seen on 2026-11-30 (cuda-tile 1.7.0, tileiras 13.4): every kernel compiled for bf16/f16/f32 inputs, dt in
fp32 or bf16, chunk 32, 64, 128 and 256, headdim 8..256, dstate 16..256.
"""
import importlib.util
import io
import os
import sys
import tempfile
import time

if not sys.argv[1:] or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:] else 2)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
if importlib.util.find_spec("tilegym") is None:
    from kernels.peers.sources import PeerSourceMissing, unpack_wheel
    try:
        sys.path.insert(0, unpack_wheel("tilegym", tempfile.mkdtemp(prefix="tilegym-")))
    except PeerSourceMissing as e:
        sys.exit(f"tilegym_compile_probe: TileGym is not importable and its wheel was not found: {e}")

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

def parse_case(arg):
    """DTYPE,DT_DTYPE,CHUNK,HEADDIM,DSTATE -> (dtype, dt_dtype, chunk, p, n), or SystemExit naming the fault."""
    parts = arg.split(",")
    if len(parts) != 5 or parts[0] not in DT or parts[1] not in DT or not all(x.isdigit() for x in parts[2:]):
        sys.exit(f"tilegym_compile_probe: case {arg!r}: expected DTYPE,DT_DTYPE,CHUNK,HEADDIM,DSTATE with "
                 f"dtypes in {sorted(DT)} and positive integers, e.g. bf16,f32,64,64,128")
    return parts[0], parts[1], int(parts[2]), int(parts[3]), int(parts[4])


for arg in sys.argv[1:]:
    c = parse_case(arg)
    print(c, probe(*c), flush=True)
