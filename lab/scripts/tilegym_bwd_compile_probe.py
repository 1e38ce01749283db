"""usage: python lab/scripts/tilegym_bwd_compile_probe.py [--mutants]

Compile TileGym 1.5.1's three backward kernels (the reverse state pass, dx/dD/dCB, dA/dB/dC/ddt) for
sm_90 on the CPU (tileiras, no GPU): fp32 inputs, chunk 64, headdim 16, dstate 16, two heads per group
(the atomic group sums), the first config of each search space (what TILEGYM_DISABLE_AUTOTUNE=1 launches).
With --mutants: each mutant of mutation/catalog_tilegym_bwd.py applied to its own copy of the package,
compiling the kernel whose code it changes (a mutant that does not compile would be `invalid` on a GPU
host, where its run costs minutes). Compiling is not running: killing is the GPU run's job.

TileGym comes from its published wheel in $SSDCHECK_PEERS_DIR (kernels/peers/sources.py), unpacked to
a temporary folder. Prints one line per kernel (per mutant): ok and seconds, or FAIL and the first
line of the compiler's error; exit 1 if anything failed.
"""
from __future__ import annotations

import ast
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL_OF = {"bwd_pass_state_kernel": "state", "_compute_dd_dcb_dx_tile": "dx", "compute_dd_dcb_dx_kernel": "dx",
             "_compute_da_db_dc_ddt_tile": "da", "compute_da_db_dc_ddt_kernel": "da"}
MAMBA2 = "tilegym/ops/cutile/mamba2.py"


def compile_kernels(which: list[str]) -> bool:
    """In this process (the package to compile first on sys.path): compile the named kernels (state: the
    reverse state pass, dx: dx/dD/dCB, da: dA/dB/dC/ddt)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel
    import tilegym.ops.cutile.mamba2 as M

    def arr(ndim):
        return ArrayConstraint(ct.float32, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None,) * (ndim - 1) + (1,),
                               shape_divisible_by=1, base_addr_divisible_by=16)
    chunk, p, n, per_group = 64, 16, 16, 2
    st = next(M._bwd_pass_state_autotune_configs(n, p))
    dx = next(M._compute_dd_dcb_dx_autotune_configs(n, p))
    da = next(M._compute_da_db_dc_ddt_autotune_configs(p, n))
    partials = (p // st.BLOCK_HEAD) * (n // st.BLOCK_STATE) * M._PARTIALS_PER_TILE
    kernels = {   # argument lists as mamba2_chunk_backward's launchers pass them (l.1666, l.1737, l.1832)
        "state": (M.bwd_pass_state_kernel, [arr(4), arr(3), arr(4), arr(4), arr(5), arr(5), arr(6), arr(4), chunk,
                                            st.BLOCK_STATE, st.BLOCK_HEAD, per_group, st.LOAD_LAT, st.STORE_LAT,
                                            st.CD_LAT, st.HID_LAT, True]),
        "dx": (M.compute_dd_dcb_dx_kernel, [arr(4), arr(4), arr(4), arr(1), arr(3), arr(3), arr(4), arr(5), arr(4),
                                            arr(3), arr(3), arr(3), arr(4), chunk, dx.BLOCK_STATE, dx.BLOCK_HEAD,
                                            per_group, n, p, dx.LOAD_LAT, dx.STORE_LAT, dx.DOUT_LAT, dx.DHID_LAT,
                                            dx.persistent]),
        "da": (M.compute_da_db_dc_ddt_kernel, [arr(4), arr(1), arr(4), arr(4), arr(3), arr(3), arr(5), arr(4), arr(5),
                                               arr(4), arr(3), arr(4), arr(3), arr(4), arr(4), arr(3), arr(3), chunk,
                                               da.BLOCK_STATE, da.BLOCK_HEAD, per_group, n, p, partials, da.LOAD_LAT,
                                               da.STORE_LAT, da.persistent, True]),
    }
    ok = True
    for name in which:
        kernel, params = kernels[name]
        t = time.time()
        try:
            export_kernel(kernel, [KernelSignature(params, CallingConvention.cutile_python_v1())], io.BytesIO(),
                          gpu_code="sm_90", output_format="cubin")
            print(f"{name}: ok {time.time() - t:.0f}s", flush=True)
        except Exception as e:   # the compiler's error, first line
            ok = False
            print(f"{name}: FAIL {(str(e).strip().splitlines() or [type(e).__name__])[0][:200]}", flush=True)
    return ok


def unpack(dest: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from kernels.peers.sources import PeerSourceMissing, peer_file
    try:
        wheel = peer_file("tilegym")
    except PeerSourceMissing as e:
        sys.exit(f"tilegym_bwd_compile_probe: {e}")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest, [m for m in z.namelist() if m.startswith("tilegym/")])
    return dest


def child(pkg_root: Path, which: list[str]) -> tuple[bool, list[str]]:
    """Compile in a fresh interpreter with `pkg_root` first on the path (a mutated copy)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pkg_root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, "--child", ",".join(which)], capture_output=True, text=True,
                          env=env, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ": ok " in ln or ": FAIL " in ln]
    return proc.returncode == 0 and bool(lines), lines or [f"no result (exit {proc.returncode}): {proc.stderr[-300:]}"]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        return 0 if compile_kernels(argv[1].split(",")) else 1
    if argv and argv != ["--mutants"]:
        print(__doc__)
        return 0 if argv[0] in ("-h", "--help") else 2
    with tempfile.TemporaryDirectory(prefix="tilegym-bwd-") as tmp:
        pristine = unpack(Path(tmp) / "pristine")
        ok, lines = child(pristine, ["state", "dx", "da"])
        print("pristine:", " | ".join(lines), flush=True)
        if argv == ["--mutants"]:
            from mutation.catalog import load_catalog
            src = (pristine / MAMBA2).read_text()
            funcs = [f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef)]
            for m in load_catalog("tilegym_bwd").mutants:
                line = src[:src.index(m.original)].count("\n") + 1
                fn = next(f.name for f in funcs if f.lineno <= line <= f.end_lineno)
                copy = Path(tmp) / m.id
                shutil.copytree(pristine, copy)
                m.apply_to_tree(copy)
                good, out = child(copy, [KERNEL_OF[fn]])
                ok &= good
                print(f"{m.id:<32} ({fn}): {' | '.join(out)}", flush=True)
                shutil.rmtree(copy)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
