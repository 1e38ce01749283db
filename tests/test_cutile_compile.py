"""CI compile of the cuTile kernels on the CPU (no GPU), one test per compile unit and architecture:

- sm_90, the GPU the suite runs on: a covering set as below by default (the GPU gate runs every row
  of the dispatch table there); with SSDCHECK_COMPILE_SM90=full every unit the table can launch in
  float32 and bfloat16, and every kernel in float16 (compile_matrix.two_width_set), 560 CPU seconds. float16 runs bfloat16's code path with
  another element type, and on the GPU the JIT compiles whatever runs, so the gate meets a float16
  config that fails there. The other 14 float16 units were 160 s of compiling in a 2-core CI run
  (about 80 s of its wall time).
- sm_100, sm_120: a covering set (each kernel's every constant value and occupancy once,
  dtypes rotating; compile_matrix.covering_set): these catch a construct an architecture's lowering
  rejects (tcgen05 MMA and tensor memory for wgmma follow a config's tile shapes and code paths), not
  every config's resource budget. sm_100 has sm_90's budgets (228 KB of shared memory and 64K
  registers per SM), within which every config compiles on sm_90. sm_100 compiled every config once
  until 2026-12-02, when a fresh-clone CI run took 19 minutes on a 2-core machine running at half the
  speed it had the day before: its 13 extra units were the first to go. Ampere (sm_80), which tileiras 13.2 and later also
  targets, is not among the suite's architectures; its covering set was 140 CPU seconds of the run.
- sm_103, sm_100's sibling (the same SM budgets and tcgen05 lowering): each kernel once, its cheapest
  unit of the covering set (compile_matrix.smoke_set), about 32 CPU seconds where the covering set was
  260 (a 2-core CI run took 923 s with it, installs included, against a 15-minute budget).

Units that lower to one specialization (compile_matrix.specialization: the signature cuTile names
and the hints) compile once. The compiling tests are marked `compile` (select with `-m compile`,
skip with `-m "not compile"`); the enumeration checks are quick and unmarked. Each unit is its own
test, so xdist workers share the matrix (`-n 2`); compiles use the suite's compile cache
(`--ssd-compile-cache`, `.ssdcheck-cache/cutile`), empty on a clean checkout such as CI's, so a
unit compiled by another test of the run is not compiled twice. Measured on the 2-core CI machine:
see lab/NOTES.md.
"""
from __future__ import annotations

import functools
import os
import re

import pytest

cm = pytest.importorskip("kernels.cutile.compile_matrix")
pytest.importorskip("cuda.tile")

ARCHS = cm.CI_ARCHS


def test_matrix_is_not_empty_and_covers_every_kernel_and_dtype():
    from kernels.cutile import dispatch
    units = cm.enumerate_matrix()
    assert units, "the dispatch table enumerates no compile unit"
    for kernel in dispatch.KERNEL_NAMES:
        assert dispatch.configs(kernel), f"{kernel}: no configuration in the dispatch table"
        for dtype in dispatch.ELEMENT_DTYPES:
            assert any(u.kernel == kernel and u.dtype == dtype for u in units), (kernel, dtype)
    assert len(set(units)) == len(units)


def test_matrix_holds_every_config_the_launcher_can_choose():
    """Every problem the launcher accepts maps through the table onto an enumerated unit."""
    from kernels.cutile import dispatch
    units = set(cm.enumerate_matrix())
    for dtype in dispatch.ELEMENT_DTYPES:
        for p in (16, 32, 64, 128, 256):
            for n in (16, 32, 64, 128, 256):
                for chunk in (64, 128, 256):
                    for bh in (1, 8, 64, 256, 4096):
                        for aligned in (False, True):
                            prob = dispatch.Problem(dtype, p, n, chunk, bh, aligned)
                            for kernel in dispatch.KERNEL_NAMES:
                                cfg = dispatch.choose(kernel, prob)
                                if cfg != dispatch.WALK_OFF:     # launches nothing
                                    assert cm.Unit(kernel, cfg, dtype) in units


def test_empty_enumeration_fails(monkeypatch):
    """An empty table must not pass as 'everything compiled'."""
    from kernels.cutile import dispatch
    monkeypatch.setattr(dispatch, "TABLE", {k: () for k in dispatch.TABLE})
    monkeypatch.setattr(dispatch, "FORCED", {})
    assert cm.enumerate_matrix() == []
    with pytest.raises(AssertionError, match="enumerates no compile unit"):
        test_matrix_is_not_empty_and_covers_every_kernel_and_dtype()


_spec = functools.lru_cache(maxsize=None)(cm.specialization)   # the checks below ask often


def _keys(units) -> set:
    return {_spec(u) for u in units}


def scope_gaps(arch: str, units: list) -> list[str]:
    """What `units` leave out of `arch`'s scope (module docstring), each need met by any unit of the
    specializations listed for it; empty: nothing."""
    matrix = cm.enumerate_matrix()

    def keys_where(match) -> set:
        return {_spec(v) for v in matrix if match(v)}

    if arch in cm.TWO_WIDTH_ARCHS:
        need = {str(u): {_spec(u)} for u in matrix if u.dtype not in cm.HALF_WIDTH[1:]}
        need |= {f"{u.kernel} in {u.dtype}": keys_where(lambda v: (v.kernel, v.dtype) == (u.kernel, u.dtype))
                 for u in matrix}
    elif arch in cm.SMOKE_ARCHS:
        need = {f"{u.kernel} once": keys_where(lambda v: v.kernel == u.kernel) for u in matrix}
    else:
        need = {f"{u.kernel} {name}={value}": keys_where(lambda v: v.kernel == u.kernel and (name, value) in
                                                         v.config.constants)
                for u in matrix for name, value in u.config.constants}
        need |= {f"{u.kernel} occupancy={u.config.occupancy}": keys_where(
                    lambda v: (v.kernel, v.config.occupancy) == (u.kernel, u.config.occupancy)) for u in matrix}
    have = _keys(units)
    return sorted(what for what, keys in need.items() if not keys & have)


@pytest.mark.parametrize("arch", ARCHS)
def test_each_arch_compiles_its_whole_scope_once(arch):
    """units_for(arch) holds every specialization its scope asks for (module docstring), each once."""
    units = cm.units_for(arch)
    assert units, f"{arch}: nothing to compile"
    assert len(_keys(units)) == len(units), f"{arch}: a specialization compiled twice"
    assert not scope_gaps(arch, units), f"{arch} leaves out: {scope_gaps(arch, units)}"


def test_a_scope_with_a_unit_left_out_shows_the_gap():
    for arch in ARCHS:
        units = cm.units_for(arch)
        for dropped in (units[0], units[-1]):
            rest = [u for u in units if u is not dropped]
            assert scope_gaps(arch, rest), (arch, str(dropped))


def test_units_of_one_specialization_compile_once(monkeypatch):
    """A kernel whose arrays do not take the element dtype compiles one unit, not one per dtype."""
    units = cm.enumerate_matrix()
    kept = cm.distinct(units)
    assert len(kept) == len(_keys(units)) and _keys(kept) == _keys(units)
    f32 = {(u.kernel, u.config): u for u in units if u.dtype == "float32"}
    real = cm.signature
    monkeypatch.setattr(cm, "signature", lambda u: real(f32[u.kernel, u.config]))
    assert len(cm.distinct(units)) == len(f32)


def _compile_params():
    return [pytest.param(arch, u, id=f"{arch}-{u.kernel}-{u.dtype}-{u.config}") for arch in ARCHS
            for u in cm.units_for(arch)]


@pytest.mark.compile
@pytest.mark.parametrize("arch,unit", _compile_params())
def test_kernels_compile(arch, unit):
    name, ok, seconds, err = cm.compile_unit(unit, arch)
    assert ok, f"{arch}: {name} does not compile ({seconds:.1f} s):\n{err[:2000]}"


def test_a_unit_that_does_not_compile_fails_its_test():
    """A tile that is not a power of two: cuTile rejects it before tileiras (about 1 s)."""
    from kernels.cutile.dispatch import Config
    broken = cm.Unit("chunk_cumsum", Config((("BL", 48), ("BH", 16))), "float32")
    with pytest.raises(AssertionError, match=r"sm_90: chunk_cumsum\[float32\|BL=48,BH=16\] does not compile"):
        test_kernels_compile("sm_90", broken)


@pytest.mark.compile
def test_compile_cache_is_shared_by_checkouts_at_other_paths(tmp_path):
    """Two copies of the kernels at different paths compile to one cache entry: the cache key holds
    the kernels' debug info, which names the repository path, not the disk path. (Before this, the
    mutation runner's copies recompiled every kernel of every mutant on the H200.)"""
    import shutil
    import sqlite3
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    probe = ("from kernels.cutile import compile_matrix as cm\n"
             "u = [x for x in cm.enumerate_matrix() if x.kernel == 'chunk_cumsum'][0]\n"
             "r = cm.compile_unit(u, 'sm_90'); assert r[1], r\n")
    cache = tmp_path / "cache"
    for copy in ("a", "deeper/b"):
        tree = tmp_path / copy
        shutil.copytree(root / "kernels", tree / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
        env = {**os.environ, "PYTHONPATH": str(tree), "CUDA_TILE_CACHE_DIR": str(cache)}
        subprocess.run([sys.executable, "-c", probe], cwd=tree, env=env, check=True, timeout=300)
    entries = sqlite3.connect(cache / "cache.db").execute("select count(*) from cache").fetchone()[0]
    assert entries == 1, f"{entries} cache entries for one kernel compiled from two checkouts"


@pytest.mark.compile
def test_concurrent_workers_run_tileiras_once_per_input(tmp_path):
    """ssdcheck_plugin.gpu.once_per_input: two processes compiling the same kernel variant at the same
    moment (xdist workers missing the shared cache together) run tileiras once between them and get
    the same cubin; cuTile's own cache is off here so only the lock can save the second run."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    probe = ("import json, sys\n"
             "from ssdcheck_plugin import gpu\n"
             "t = gpu.CompileTimer(dedup_dir=sys.argv[1]); t.watch()\n"
             "from kernels.cutile import compile_matrix as cm\n"
             "u = [x for x in cm.enumerate_matrix() if x.kernel == 'chunk_state'][0]\n"
             "r = cm.compile_unit(u, 'sm_90', out_dir=sys.argv[2]); assert r[1], r\n"
             "print(json.dumps({'tileiras': t.tileiras_calls}))\n")
    env = {**os.environ, "PYTHONPATH": str(root), "CUDA_TILE_CACHE_DIR": "off"}
    outs = [tmp_path / f"out{i}" for i in range(2)]
    procs = []
    for out in outs:
        out.mkdir()
        procs.append(subprocess.Popen([sys.executable, "-c", probe, str(tmp_path / "once"), str(out)], cwd=root,
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    runs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        runs.append(json.loads(stdout.strip().splitlines()[-1])["tileiras"])
    assert sorted(runs) == [0, 1], runs
    cubins = [next(out.glob("*.cubin")).read_bytes() for out in outs]
    assert cubins[0] == cubins[1] and cubins[0]


def test_kernel_source_name_is_the_import_name_so_two_checkouts_never_share_it(tmp_path):
    """Two copies imported under different package names (two revisions raced in one process) keep
    their own source entries: cuTile parses each kernel from the entry its debug name points at."""
    import importlib.util
    import linecache
    from pathlib import Path

    from kernels.cutile import kernels as ours
    other_src = Path(ours.__file__).read_text() + "\n# another revision\n"
    (tmp_path / "kernels.py").write_text(other_src)
    spec = importlib.util.spec_from_file_location("rev2.kernels.cutile.kernels", tmp_path / "kernels.py")
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    assert (ours.SOURCE_NAME, other.SOURCE_NAME) == ("kernels/cutile/kernels.py", "rev2/kernels/cutile/kernels.py")
    assert "".join(linecache.getlines(other.SOURCE_NAME)) == other_src
    assert "".join(linecache.getlines(ours.SOURCE_NAME)) == Path(ours.__file__).read_text()
    assert ours._scan_tile.__code__.co_filename == ours.SOURCE_NAME   # what debug info names


@pytest.mark.compile
def test_cubin_resources_reads_a_fresh_compile_from_any_directory(tmp_path):
    """lab/scripts/cubin_resources.py run as a script from elsewhere (its --compile-scan once failed to
    import the kernels that way): a spill-free FAST state candidate reports registers and frame 0."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parent.parent / "lab" / "scripts" / "cubin_resources.py"
    env = dict(os.environ, CUTILE_COMPILE_JOBS="1")
    proc = subprocess.run([sys.executable, str(script), "--compile-sweep", "BL64-BN32-FAST-occ2"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "chunk_state BL64-BN32-FAST-occ2" in proc.stdout and "'frame': 0" in proc.stdout, proc.stdout
    proc = subprocess.run([sys.executable, str(script), "--compile-scan", "bfloat16", "64"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "chunk_scan bfloat16 BN64 occ3" in proc.stdout, proc.stderr[-2000:]


def _cubin_resources():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "lab" / "scripts" / "cubin_resources.py"
    spec = importlib.util.spec_from_file_location("cubin_resources", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Nsight Compute's text pages, xz-packed: both scans at 8x2K and 2x32K n64 (2026-11-30, dlat-rows)
NCU_SCANS = "lab/reports/raw/2026-11-30-dlat-rows/ncu-scan/ncu-details.txt.xz"
# the state kernels before the scan's FTZ and D changes (2026-11-30, ftz-decays)
NCU_STATE = "lab/reports/raw/2026-11-30-ftz-decays/sweep-persist-ncu/ncu-details.txt.xz"
# the table's chunk-64 scan at dstate 64 (FACT=0) and TileGym's, at 8x2K and 2x32K (2026-12-01, peers-suite)
NCU_SCAN_PLAIN = "lab/reports/raw/2026-12-01-peers-suite/ncu-fact/plain-ncu-details.txt.xz"
# chunk_scan's constants added after that profile, as the table sets them: HB (landed with HB2,
# lab/reports/2026-12-01-two-heads-per-block.md), 2 on the chunk-64 rows, 1 elsewhere. The modeled
# symbol ends with them and, without them, is the recorded one (until a new profile).
SCAN_CONSTANTS_SINCE_PROFILE = "_I2"
SCAN_CONSTANTS_SINCE_PROFILE_CHUNK128 = "_I1"


def _profile_text(rel: str) -> str:
    import lzma
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / rel
    return lzma.open(path, "rt").read() if path.suffix == ".xz" else path.read_text()


def test_jit_symbols_are_read_from_profiler_text_and_demangle_to_the_launch_specialization():
    from pathlib import Path

    from cuda.tile.compilation import demangle_kernel_name
    cr = _cubin_resources()
    text = _profile_text(NCU_SCANS)
    syms = cr.jit_symbols(text + "\n  chunk_state_kernel_Kt2_bogus_but_ours (1, 1, 1)")
    assert set(syms) == {"chunk_scan", "chunk_state"}          # TileGym's compute_out_swap_kernel is not ours
    name, sig = demangle_kernel_name(syms["chunk_scan"])
    assert name == "chunk_scan_kernel"
    x = sig.parameters[0]                                       # the JIT assumed what compile_matrix does not
    assert tuple(x.shape_divisible_by) == (1, 16, 16, 16) and tuple(x.stride_divisible_by) == (8, 8, 8, 1)


def test_launch_symbols_model_the_jit_specialization_the_profiler_recorded(monkeypatch):
    """The forward run on the CPU with its launches recorded, each launch's arguments turned into a
    signature by the JIT's rule: the state and scan symbols at 8x2K and 2x32K n64, chunk 64, are the
    ones Nsight Compute recorded there (state: 2026-11-30, ftz-decays; scan: 2026-12-01, peers-suite,
    with D passed as (h, 1) and FTZ, FACT in its constants). It fails if the rule or the launcher's
    arguments drift from what the GPU ran. Since the chunk walk (2026-12-01) the table walks 8x2K (chunk_walk): the walk is turned off to reach
    the two kernels the profiler saw."""
    from kernels.cutile import dispatch, launcher
    cr = _cubin_resources()
    assert set(cr.launch_symbols("b8-l2048-h32-p64-n64-g1", 64)) == {"chunk_cumsum", "chunk_walk"}
    monkeypatch.setitem(launcher._OVERRIDE, "chunk_walk", dispatch.WALK_OFF)
    state_text, scan_text = _profile_text(NCU_STATE), _profile_text(NCU_SCAN_PLAIN)
    for sid in ("b8-l2048-h32-p64-n64-g1", "b2-l32768-h32-p64-n64-g1"):
        syms = cr.launch_symbols(sid, 64)
        assert set(syms) == {"chunk_cumsum", "chunk_state", "chunk_scan"}
        assert syms["chunk_state"] in state_text, syms["chunk_state"]
        scan = syms["chunk_scan"]
        assert scan.endswith(SCAN_CONSTANTS_SINCE_PROFILE), scan
        recorded = scan[:-len(SCAN_CONSTANTS_SINCE_PROFILE)]
        assert re.search(re.escape(recorded) + r"\b", scan_text), scan        # the whole symbol, not a prefix
    other = cr.launch_symbols("b2-l32768-h32-p64-n64-g1", 128)["chunk_scan"]   # other constants
    assert other.endswith(SCAN_CONSTANTS_SINCE_PROFILE_CHUNK128), other
    assert not re.search(re.escape(other[:-len(SCAN_CONSTANTS_SINCE_PROFILE_CHUNK128)]) + r"\b", scan_text)


@pytest.mark.compile
def test_compile_like_reproduces_the_kernel_the_profiler_measured():
    """ncu measured the table's FAST scan (bf16, chunk 64, dstate 64) at 80 registers per thread; the
    same Config exported with compile_matrix's signature (no divisibility assumed) compiles to other
    code, with a stack frame. compile_like, in the JIT's specialization, gives ncu's figure."""
    from pathlib import Path

    from kernels.cutile import dispatch
    cr = _cubin_resources()
    sym = cr.jit_symbols(_profile_text(NCU_SCANS))["chunk_scan"]
    cfg = dispatch.scan_config(BL=64, BN=64, FAST=64, occupancy=3)      # the table's row for those problems
    like, _ = cr.compile_like("chunk_scan", cfg, sym)
    matrix, _ = cr.compile_unit("chunk_scan", cfg, "bfloat16")
    r_like, r_matrix = (next(v for k, v in cr.resources(b).items() if k.startswith("chunk_scan_kernel"))
                        for b in (like, matrix))
    assert r_like["regcount"] == 80 and r_like["frame"] == 0, r_like
    assert r_matrix["frame"] > 0 and cr.text_of(like) != cr.text_of(matrix), r_matrix


@pytest.mark.compile
def test_the_kernels_the_race_launches_compile_for_sm90_as_the_jit_specializes_them():
    """compile_matrix compiles each table config once, with no divisibility assumed; on the GPU the JIT
    compiles other specializations (aligned shapes: divisible by 16), which are other machine code. The
    ones lab.bench.stages' shapes launch at chunk 64 and 128 (8 distinct kernels), as launches() derives them,
    compile here with their hints."""
    import io

    from cuda.tile.compilation import export_kernel, mangle_kernel_name
    from lab.bench.stages import default_shapes
    cr = _cubin_resources()
    units = {}
    for shape in default_shapes():
        for chunk in (64, 128):
            for kernel, sig in cr.launches(shape.id, chunk):
                units.setdefault(mangle_kernel_name(kernel._pyfunc.__name__, sig), (kernel, sig))
    assert len(units) >= 6, list(units)
    failed = []
    for sym, (kernel, sig) in units.items():
        buf = io.BytesIO()
        try:
            export_kernel(kernel, [sig], buf, gpu_code="sm_90", output_format="cubin")
            assert buf.getvalue()
        except Exception as e:  # noqa: BLE001 - every unit is tried, then all failures reported
            failed.append(f"{sym[:60]}...: {type(e).__name__}: {str(e)[:300]}")
    assert not failed, "\n".join(failed)


@pytest.mark.compile
def test_the_walk_rows_compile_without_a_stack_frame_where_they_run():
    """chunk_walk keeps a (64, dstate) fp32 state, a 64x64 score tile and y in registers: at the table's
    occupancy 2 (128 registers) both rows compiled with no frame on the H200 (lab/reports/2026-12-01-chunk-walk.md; 93-101 KB of shared
    memory, two blocks per SM). A change that makes them spill shows here, in the JIT's specialization
    at the benchmark shapes the rows serve (the table's walk at 8x2K, the segmented walk's pass 3 at
    2x32K), before it costs GPU time. (Loading the next chunk's tiles ahead spilled a 48 B frame at
    dstate 64 and needed 235 registers at 128; it was slower on the H200, lab/reports/2026-12-04-walk-d-row.md.
    The dstate-64 rows order a step's products with ORD=1, 84 KB; at dstate 128 ORD=1 spills a 240 B
    frame and ran 1.6x slower, lab/reports/2026-12-04-walk-order.md, so that row keeps ORD=0.)"""
    from kernels.cutile import dispatch
    cr = _cubin_resources()
    for sid, row in (("b8-l2048-h32-p64-n64-g1", 2), ("b8-l2048-h32-p64-n128-g1", 3), ("b2-l32768-h32-p64-n64-g1", 0)):
        cfg = dispatch.TABLE["chunk_walk"][row].config
        blob, _ = cr.compile_like("chunk_walk", cfg, cr.launch_symbols(sid, 64)["chunk_walk"])
        res = next(iter(cr.resources(blob).values()))
        assert res["frame"] == 0 and res["regcount"] <= 128, (sid, str(cfg), res)
        assert res["smem"] <= 114 * 1024, (sid, str(cfg), res)      # two blocks fit an H200 SM's 228 KB


def test_match_selects_units_by_their_text_and_refuses_a_text_no_unit_has(capsys):
    from kernels.cutile import compile_matrix   # noqa: PLC0415
    assert compile_matrix.main(["--list", "--match", "chunk_cumsum[float32"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == ["chunk_cumsum[float32|BL=64,BH=16]", "1 units"]
    with pytest.raises(SystemExit) as stop:
        compile_matrix.main(["--list", "--match", "no_such_kernel"])
    assert stop.value.code == 2 and "--match" in capsys.readouterr().err


def test_remarks_are_read_per_source_line_from_the_yaml_tileiras_writes():
    cr = _cubin_resources()
    text = ("--- !Passed\nPass: Memory\nName: RemarkMemoryLoadInstructionSelected\n"
            "DebugLoc: { File: 'kernels/cutile/kernels.py', Line: 640, Column: 10 }\nArgs:\n"
            "  - RemarkId: 5\n  - Remark: Load instruction selected\n  - Instruction: TMA Load instruction\n"
            "  - Shape: '[32, 1, 1]'\n...\n--- !Failure\nPass: Memory\nName: RemarkMemoryTmaLoadFailed\n"
            "DebugLoc: { File: 'kernels/cutile/kernels.py', Line: 363, Column: 18 }\nArgs:\n"
            "  - RemarkId: 15\n  - Reason: leading tile dimension not 16-byte aligned\n...\n")
    got = cr.parse_remarks(text)
    assert [(e["line"], e["kind"], e["name"]) for e in got] == [
        (363, "Failure", "RemarkMemoryTmaLoadFailed"), (640, "Passed", "RemarkMemoryLoadInstructionSelected")]
    assert got[1]["Instruction"] == "TMA Load instruction" and got[1]["Shape"] == "[32, 1, 1]"
    assert cr.remark_line(got[0]).endswith("TmaLoadFailed: leading tile dimension not 16-byte aligned")


@pytest.mark.compile
def test_the_walks_one_load_that_is_not_tma_is_ds_and_it_is_issued_once():
    """tileiras's remarks (`lab/scripts/cubin_resources.py --remarks`): at the walk's row every load is TMA but
    D's, whose (h, 1) one-element tile fails TMA's 16-byte alignment. Issued in every chunk it became an
    LDGSTS and cost the H200 4-9% of the walk (lab/reports/2026-12-04-walk-d-row.md); loaded before the
    chunk loop it is a plain global load. A new load that misses TMA, or D's load back in the loop
    (an LDGSTS again), fails this."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    src = (root / "kernels" / "cutile" / "kernels.py").read_text().splitlines()
    d_line = 1 + next(i for i, t in enumerate(src) if "dv = dv + ct.load(D, (head, 0), shape=(1, 1))" in t)
    out = subprocess.run([sys.executable, str(root / "lab" / "scripts" / "cubin_resources.py"), "--compile-config",
                          "chunk_walk:BN=64,SPLIT=1", "--shape", "b8-l2048-h32-p64-n64-g1@64",
                          "--remarks"], capture_output=True, text=True, timeout=600, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    loads = re.findall(r"line +(\d+) Passed +LoadInstructionSelected: (.+?)(?: \[|$)", out.stdout, re.M)
    found = {(int(line), what) for line, what in loads if not what.startswith("TMA")}
    assert found == {(d_line, "Global-memory load instruction")}, found


