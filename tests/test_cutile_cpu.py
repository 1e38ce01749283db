"""The cutile implementation on a machine without a GPU: import, declaration, input policy.

What runs the kernels is the property suite on a GPU (lab/scripts/gpu_verify_cutile.sh); here we check
everything that must hold before any launch: `import kernels.cutile` works, INFO declares exactly
the contract, and every unsupported or malformed argument raises a ValueError naming it.
"""
from __future__ import annotations

import inspect
import itertools
import math

import pytest
import torch

from kernels import registry
from kernels.contract import SSDArgumentError

cutile = pytest.importorskip("kernels.cutile")
from kernels.cutile import dispatch, launcher  # noqa: E402


def _problem(b=1, l=70, h=4, p=64, n=32, g=2, dtype=torch.bfloat16, device="cpu"):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(b, l, h, p, generator=gen).to(dtype)
    dt = torch.rand(b, l, h, generator=gen)
    A = -torch.rand(h, generator=gen)
    B = torch.randn(b, l, g, n, generator=gen).to(dtype)
    C = torch.randn(b, l, g, n, generator=gen).to(dtype)
    return [t.to(device) for t in (x, dt, A, B, C)]


def test_import_needs_no_gpu_and_registers():
    info = registry.lookup("cutile")
    assert info is cutile.INFO and info.name == "cutile" and info.fn is cutile.ssd_forward
    assert info.device == "cuda" and info.state_dtype == "input" and info.matmul == "ieee"
    assert info.options == registry.ALL_OPTIONS
    assert set(info.dtypes) == {"float32", "float16", "bfloat16"}
    assert info.chunk_sizes == (64, 128, 256) and not info.seqlen_multiple_of_chunk
    assert info.headdims == info.dstates == (16, 32, 64, 128, 256)
    assert set(info.stages) == {"chunk_cumsum", "chunk_state_and_passing", "chunk_scan"}
    assert set(info.stages) <= set(registry.STAGE_NAMES)


def test_signature_is_mamba_ssm():
    params = inspect.signature(cutile.ssd_forward).parameters
    expected = [("x", None), ("dt", None), ("A", None), ("B", None), ("C", None), ("chunk_size", None),
                ("D", None), ("z", None), ("dt_bias", None), ("initial_states", None), ("seq_idx", None),
                ("cu_seqlens", None), ("dt_softplus", False), ("dt_limit", (0.0, math.inf)),
                ("return_final_states", False), ("return_varlen_states", False)]
    assert list(params) == [name for name, _ in expected]
    for name, default in expected[6:]:
        assert params[name].default == default, name


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_running_without_a_gpu_is_a_clear_error():
    with pytest.raises(cutile.CutileUnavailable, match="needs a CUDA GPU"):
        cutile.ssd_forward(*_problem(), 64)
    with pytest.raises(cutile.CutileUnavailable, match="needs a CUDA GPU"):
        cutile.chunk_cumsum(torch.rand(1, 10, 2), -torch.rand(2), 64)


def _bad(name, fn, *args, **kwargs):
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    assert str(info.value).startswith(f"{name}:") or f"{name}:" in str(info.value), str(info.value)


@pytest.mark.parametrize("case", ["chunk32", "chunk512", "headdim48", "dstate24", "x64", "dt_fp16",
                                  "A_bf16", "D_fp64", "bias_fp64", "init_fp16", "B_dtype", "z_dtype"])
def test_unsupported_arguments_are_named(case):
    x, dt, A, B, C = _problem()
    args, kw, chunk, name = [x, dt, A, B, C], {}, 64, None
    if case == "chunk32":
        chunk, name = 32, "chunk_size"
    elif case == "chunk512":
        chunk, name = 512, "chunk_size"
    elif case == "headdim48":
        args[0], name = x[..., :48], "x"
    elif case == "dstate24":
        args[3], args[4], name = B[..., :24], C[..., :24], "B"
    elif case == "x64":
        args = [x.double(), dt, A, B.double(), C.double()]
        name = "x"
    elif case == "dt_fp16":
        args[1], name = dt.half(), "dt"
    elif case == "A_bf16":
        args[2], name = A.bfloat16(), "A"
    elif case == "D_fp64":
        kw["D"], name = torch.ones(4, dtype=torch.float64), "D"
    elif case == "bias_fp64":
        kw["dt_bias"], name = torch.ones(4, dtype=torch.float64), "dt_bias"
    elif case == "init_fp16":
        kw["initial_states"], name = torch.zeros(1, 4, 64, 32, dtype=torch.float16), "initial_states"
    elif case == "B_dtype":
        args[3], name = B.float(), "B"
    elif case == "z_dtype":
        kw["z"], name = x.float(), "z"
    _bad(name, cutile.ssd_forward, *args, chunk, **kw)


def test_mixed_devices_are_named():
    x, dt, A, B, C = _problem()
    _bad("C", cutile.ssd_forward, x, dt, A, B, C.to("meta"), 64)
    _bad("dt_bias", cutile.ssd_forward, x, dt, A, B, C, 64, dt_bias=torch.zeros(4, device="meta"))


def test_stage_arguments_are_named():
    x, dt, A, B, C = _problem(l=130)
    dA = torch.zeros(1, 4, 3, 64)
    _bad("chunk_size", cutile.chunk_cumsum, dt, A, 100)
    _bad("A", cutile.chunk_cumsum, dt, A[:3], 64)
    _bad("dt_out", cutile.chunk_state_and_passing, B, x, dA[:, :, :2], dA)
    _bad("initial_states", cutile.chunk_state_and_passing, B, x, dA, dA, torch.zeros(1, 4, 64, 16))
    states = torch.zeros(1, 3, 4, 64, 32, dtype=torch.bfloat16)
    _bad("states_in", cutile.chunk_scan, B, C, x, dA, dA, states[:, :2])
    _bad("states_in", cutile.chunk_scan, B, C, x, dA, dA, states.half())
    _bad("D", cutile.chunk_scan, B, C, x, dA, dA, states, D=torch.zeros(5))
    _bad("C", cutile.chunk_scan, B, C.float(), x, dA, dA, states)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the checks before the no-GPU error")
@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_cumsum_stage_takes_dt_bias_in_the_model_dtype_beside_a_float32_dt(bias_dtype):
    # the forward accepts a bfloat16 dt_bias with a float32 dt and a bfloat16 x; its stage once refused it
    # (dt_bias held to dt's dtype), a failure of prop_stages_match_oracle on a correct kernel
    _, dt, A, _, _ = _problem()
    with pytest.raises(cutile.CutileUnavailable, match="needs a CUDA GPU"):
        cutile.chunk_cumsum(dt.float(), A, 64, dt_bias=torch.zeros(A.shape[0], dtype=bias_dtype))
    _bad("dt_bias", cutile.chunk_cumsum, dt.float(), A, 64, dt_bias=torch.zeros(A.shape[0], dtype=torch.float64))


def test_contract_errors_come_first():
    x, dt, A, B, C = _problem()
    with pytest.raises(SSDArgumentError, match="^seq_idx"):
        cutile.ssd_forward(x, dt, A, B, C, 64, seq_idx=torch.ones(1, 70, dtype=torch.int32))
    with pytest.raises(SSDArgumentError, match="^B"):
        B3 = torch.randn(1, 70, 3, 32).to(x.dtype)
        cutile.ssd_forward(x, dt, A, B3, B3, 64)   # 3 groups do not divide 4 heads


def test_dispatch_table_chooses_for_every_supported_problem():
    for dtype in dispatch.ELEMENT_DTYPES:
        for p in (16, 32, 64, 128, 256):
            for n in (16, 32, 64, 128, 256):
                for bh, chunk, aligned in itertools.product((1, 32, 256, 100_000), cutile.INFO.chunk_sizes,
                                                            (False, True)):
                    prob = dispatch.Problem(dtype, p, n, chunk, bh, aligned)
                    for kernel in dispatch.KERNEL_NAMES:
                        cfg = dispatch.choose(kernel, prob)
                        if kernel == "segment_pass":     # it scans segment states, no tokens: no BL
                            continue
                        # every kernel walks a chunk in whole BL tiles; only chunk_state leaves 64
                        assert chunk % cfg.get("BL") == 0 and (cfg.get("BL") == 64 or kernel == "chunk_state")
                        # a FAST row serves only the problems its launch-time promise holds for
                        fast = dict(cfg.constants).get("FAST", 0)
                        assert fast == 0 or (aligned and fast == chunk), (kernel, prob, cfg)
    # small batch*heads gets narrower dstate tiles (more blocks for the sequential state scan)
    few = dispatch.choose("chunk_state", dispatch.Problem("bfloat16", 64, 64, 64, 32))
    many = dispatch.choose("chunk_state", dispatch.Problem("bfloat16", 64, 64, 64, 1024))
    assert few.get("BN") < many.get("BN")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_the_chunk_64_fast_scan_takes_two_dstate_tiles_up_to_128_and_keeps_bn128_at_256(dtype):
    """lab/reports/2026-12-03-scan-bn64.md: at dstate 128, BN=64 LAT=2 ties BN=128 LAT=4 on the H200 and
    compiles in half the time; at dstate 256 it lost 3-5%, so that row keeps BN=128."""
    def scan(n, bh):
        return dispatch.choose("chunk_scan", dispatch.Problem(dtype, 64, n, 64, bh, seqlen=192, aligned=True))
    for bh in (12, 64, 1024):
        mid, wide, narrow = scan(128, bh), scan(256, bh), scan(64, bh)
        assert (mid.get("FAST"), mid.get("BN"), mid.get("LAT"), mid.get("FACT"), mid.get("HB")) == (64, 64, 2, 1, 2)
        assert (wide.get("FAST"), wide.get("BN"), wide.get("LAT")) == (64, 128, 4)
        assert (narrow.get("BN"), narrow.get("LAT")) == (64, 0)


def test_batch_slices_keep_int32_indexing():
    assert launcher._batch_slices(8, [1000, 10]) == [(0, 8)]
    big = 2**30
    assert launcher._batch_slices(5, [big, 10]) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert launcher._batch_slices(4, [2**29]) == [(0, 3), (3, 4)]
    with pytest.raises(ValueError, match="^x:"):
        launcher._batch_slices(1, [2**31])


def test_nan_policy_is_documented():
    doc = launcher.__doc__
    assert "NaN / Inf are passed through, never sanitized" in doc
    assert "0 * NaN = NaN" in doc


def test_stage_entry_points_refuse_int32_overflow(monkeypatch):
    with pytest.raises(ValueError, match="^states_in:"):
        launcher._check_int32(x=torch.zeros(2), states_in=2**31)
    launcher._check_int32(x=torch.zeros(2), states_in=2**31 - 1)
    _bad("x", cutile.chunk_state_and_passing, torch.zeros(1, 0, 4, 64), torch.zeros(1, 0, 1, 16),
         torch.zeros(1, 4, 0, 64), torch.zeros(1, 4, 0, 64))


def test_every_config_names_its_kernels_constants_in_order():
    """The launcher passes a Config's constants positionally after the arguments: their names must be
    the kernel's trailing ct.Constant parameters, in order."""
    from kernels.cutile import compile_matrix as cm
    for kernel in dispatch.KERNEL_NAMES:
        params = inspect.signature(cm._kernel_fn(kernel)._pyfunc).parameters
        consts = [n for n, p in params.items() if "Constant" in str(p.annotation)]
        assert consts == list(params)[-len(consts):], kernel
        for cfg in dispatch.configs(kernel):
            assert [n for n, _ in cfg.constants] == consts, (kernel, str(cfg))


@pytest.mark.parametrize("h,g", [(8, 2), (8, 1), (6, 3), (4, 4)])
def test_scan_grid_has_one_block_per_row_tile_and_head(monkeypatch, h, g):
    """_run_scan's grid is one block per (b, chunk, row tile, p tile, head), and the kernel gets the
    heads per B/C group it indexes groups with."""
    seen = []
    monkeypatch.setattr(launcher, "_launch", lambda grid, kfn, cfg, args, dev, stream=None: seen.append((grid, cfg, args)))
    monkeypatch.setattr(launcher, "_kernels", lambda: type("K", (), {"chunk_scan_kernel": None}))
    monkeypatch.setitem(launcher._OVERRIDE, "chunk_scan", dispatch.scan_config(BN=64, occupancy=2))
    b, l, p, n, chunk = 2, 200, 128, 64, 128
    nchunks = -(-l // chunk)
    x = torch.zeros(b, l, h, p)
    B = torch.zeros(b, l, g, n)
    cs = torch.zeros(b, h, nchunks * chunk)
    launcher._run_scan(x, None, B, B, cs, cs, torch.zeros(b, nchunks, h, p, n), None, None, chunk)
    [(grid, cfg, args)] = seen
    assert grid == (b * nchunks * (chunk // 64) * (p // 64) * h, 1, 1)
    assert cfg.get("FAST") == 0                          # l % chunk != 0: the masked path
    assert args[13] == h // g                           # heads_per_group, as the kernel takes it


@pytest.mark.parametrize("h,g,pairs", [(8, 1, True), (8, 2, True), (6, 3, True), (6, 2, False), (6, 6, False)])
def test_head_pairs_halve_the_scan_grid_only_where_a_pair_shares_its_group(monkeypatch, h, g, pairs):
    """HB=2 (two heads of one group per block, sharing C and B) is a FAST path: the grid halves where
    the heads per group are even; with an odd count, or off the FAST path, one head per block."""
    seen = []
    monkeypatch.setattr(launcher, "_launch", lambda grid, kfn, cfg, args, dev, stream=None: seen.append((grid, cfg)))
    monkeypatch.setattr(launcher, "_kernels", lambda: type("K", (), {"chunk_scan_kernel": None}))
    monkeypatch.setitem(launcher._OVERRIDE, "chunk_scan", dispatch.scan_config(BN=64, FAST=64, HB=2, occupancy=2))
    b, p, n, chunk = 2, 64, 64, 64
    for l, fast in ((256, True), (200, False)):
        nchunks = -(-l // chunk)
        x, B = torch.zeros(b, l, h, p), torch.zeros(b, l, g, n)
        cs = torch.zeros(b, h, nchunks * chunk)
        seen.clear()
        launcher._run_scan(x, None, B, B, cs, cs, torch.zeros(b, nchunks, h, p, n), None, None, chunk)
        [(grid, cfg)] = seen
        hb = 2 if fast and pairs else 1
        assert cfg.get("HB") == hb and cfg.get("FAST") == (64 if fast else 0), (l, str(cfg))
        assert grid == (b * nchunks * h // hb, 1, 1)
    with pytest.raises(ValueError, match="HB=2 needs FAST = BL"):     # pairs of whole chunks only
        launcher._fast_config("chunk_scan", dispatch.scan_config(BL=64, FAST=128, HB=2),
                              launcher._problem(torch.empty(1, 256, 4, 64), torch.empty(1, 256, 1, 64), 128, None))


def test_fast_path_runs_only_on_aligned_problems_without_seq_idx():
    """FAST (whole chunks in unmasked tiles) is a promise the launcher makes to the kernel: any
    problem that breaks it must run the general path with the same tiles, never the unmasked one."""
    # the table's FAST rows keep the kernels' terms: one tile per chunk (state), whole row tiles (scan)
    assert all(cfg.get("FAST") in (0, cfg.get("BL")) for cfg in dispatch.configs("chunk_state"))
    assert all(cfg.get("FAST") % cfg.get("BL") == 0 for cfg in dispatch.configs("chunk_scan"))
    def prob(seqlen, chunk, has_seq):   # as the launcher builds it for x (1, seqlen, 4, 64), B (.., 64)
        x, B = torch.empty(1, seqlen, 4, 64), torch.empty(1, seqlen, 1, 64)
        return launcher._problem(x, B, chunk, torch.zeros(1, seqlen, dtype=torch.int32) if has_seq else None)

    for kernel, make in (("chunk_state", dispatch.state_config), ("chunk_scan", dispatch.scan_config)):
        fast = make(BL=64, FAST=64)
        assert launcher._fast_config(kernel, fast, prob(128, 64, False)) is fast
        for seqlen, chunk, has_seq in ((100, 64, False), (128, 64, True), (256, 128, False)):
            got = launcher._fast_config(kernel, fast, prob(seqlen, chunk, has_seq))
            assert got.get("FAST") == 0 and got.get("BL") == 64 and got.occupancy == fast.occupancy, (seqlen, chunk)
        plain = make(BL=64)
        assert launcher._fast_config(kernel, plain, prob(100, 64, True)) is plain
        with pytest.raises(ValueError, match="FAST must"):          # a chunk tile BL does not fit
            launcher._fast_config(kernel, make(BL=128, FAST=64), prob(128, 64, False))
    with pytest.raises(ValueError, match="FAST must equal BL"):   # the state kernel walks one tile per chunk
        launcher._fast_config("chunk_state", dispatch.state_config(BL=64, FAST=128), prob(256, 128, False))
    rows = dispatch.scan_config(BL=64, FAST=128)                  # the scan takes a chunk in 64-row tiles
    assert launcher._fast_config("chunk_scan", rows, prob(256, 128, False)) is rows
    assert launcher._fast_config("chunk_scan", rows, prob(200, 128, False)).get("FAST") == 0
    with pytest.raises(KeyError, match="SWAP"):           # a fallback only sets constants the kernel has
        dispatch.scan_config().replace(SWAP=1)


def test_config_override_from_the_environment_is_parsed_in_kernel_order_and_bad_text_is_named():
    got = dispatch.parse_configs(" chunk_scan:BL=64,BN=128,FAST=64,occupancy=2 ; chunk_state:BN=16,SLAT=2 ;")
    assert got["chunk_scan"] == dispatch.scan_config(BN=128, FAST=64, occupancy=2)
    assert [n for n, _ in got["chunk_state"].constants] == [n for n, _ in dispatch.configs("chunk_state")[0].constants]
    assert got["chunk_state"].get("BN") == 16 and got["chunk_state"].get("SLAT") == 2
    assert dispatch.parse_configs("") == {}
    per_chunk = dispatch.parse_configs("chunk_state@128:BL=128,FAST=128")
    assert per_chunk == {"chunk_state@128": dispatch.state_config(BL=128, FAST=128)}
    for bad, why in (("chunk_scn:BL=64", "is not one of"), ("chunk_scan:BX=64", "BX"),
                     ("chunk_scan:BL=sixty", "NAME=INT"), ("chunk_scan:BL", "NAME=INT"),
                     ("chunk_scan@sixty:BL=64", "positive integer"), ("chunk_scan@0:BL=64", "positive integer")):
        with pytest.raises(ValueError, match=why) as e:
            dispatch.parse_configs(bad)
        assert dispatch.CONFIG_ENV in str(e.value)


def test_reports_record_the_config_override(monkeypatch, pytestconfig):
    from ssdcheck_plugin import meta
    monkeypatch.setenv(dispatch.CONFIG_ENV, "chunk_scan:FAST=64")
    monkeypatch.delenv("TILEGYM_DISABLE_AUTOTUNE", raising=False)
    env = meta.collect(pytestconfig, profile=None)["env"]
    assert env[dispatch.CONFIG_ENV] == "chunk_scan:FAST=64" and "TILEGYM_DISABLE_AUTOTUNE" not in env


def test_an_override_applies_where_its_token_tile_fits_the_chunk(monkeypatch):
    big = dispatch.state_config(BL=128, BN=32, FAST=128, occupancy=2)
    monkeypatch.setattr(launcher, "_OVERRIDE", {"chunk_state": big})
    at = {c: launcher._config("chunk_state", dispatch.Problem("bfloat16", 64, 64, c, 64, True)) for c in (64, 128, 256)}
    assert at[128] is big and at[256] is big                     # FAST falls back later, at launch (chunk 256)
    assert at[64] == dispatch.choose("chunk_state", dispatch.Problem("bfloat16", 64, 64, 64, 64, True))
    assert launcher._config("chunk_scan", dispatch.Problem("bfloat16", 64, 64, 64, 64)) == \
        dispatch.choose("chunk_scan", dispatch.Problem("bfloat16", 64, 64, 64, 64))
    # a per-chunk entry wins at its chunk size only
    at128 = dispatch.state_config(BL=128, BN=16, FAST=128, SWAP=1, occupancy=2)
    at64 = dispatch.state_config(BL=64, BN=32, FAST=64, occupancy=2)
    monkeypatch.setattr(launcher, "_OVERRIDE", {"chunk_state": at64, "chunk_state@128": at128})
    got = {c: launcher._config("chunk_state", dispatch.Problem("bfloat16", 64, 64, c, 64, True)) for c in (64, 128, 256)}
    assert got == {64: at64, 128: at128, 256: at64}


def test_forward_looks_up_the_stream_once_and_passes_a_whole_batch_unsliced(monkeypatch):
    """Host time: one stream lookup per forward, shared by its launches, and the input tensors go to
    the kernels as they are when the batch is not split (slicing costs host time per tensor)."""
    from lab.bench.host_profile import launches_stubbed   # the forward's CUDA calls, replaced by recorders
    launches, lookups, stream = [], [], object()
    b, l, h, p, n = 2, 128, 4, 64, 64
    x, B = torch.randn(b, l, h, p), torch.randn(b, l, 1, n)
    dt, A = torch.rand(b, l, h), -torch.rand(h)
    with launches_stubbed(launch=lambda s, grid, kernel, args: launches.append((s, grid, args)),
                          current_stream=lambda device=None: lookups.append(device) or stream):
        cutile.ssd_forward(x, dt, A, B, B.clone(), 64, D=torch.randn(h))
        assert len(lookups) == 1 and len(launches) == 3 and all(s is stream for s, _, _ in launches)
        (_, _, cum), (_, _, state), (_, _, scan) = launches
        assert cum[0] is dt and state[0] is x and state[1] is B and scan[0] is x

        launches.clear(), lookups.clear()
        monkeypatch.setattr(launcher, "INT32_MAX", l * h * p)   # one batch element per slice
        cutile.ssd_forward(x, dt, A, B, B.clone(), 64)
        assert len(lookups) == 1 and len(launches) == 6
        states_x = [args[0] for _, _, args in launches[1::3]]
        assert [t.shape[0] for t in states_x] == [1, 1] and states_x[1].data_ptr() == x[1:].data_ptr()


def test_forward_passes_a_per_head_D_unexpanded_and_chooses_each_config_once(monkeypatch):
    """Host time (lab/reports/2026-11-30-ftz-decays.md): D (h,) reaches the scan as an (h, 1) view of the caller's float32 tensor
    (the kernel broadcasts it; no expand-and-copy, no GPU copy), D (h, p) as it is; the table is consulted
    once per (kernel, problem), while an override still wins on every call."""
    from lab.bench.host_profile import launches_stubbed
    launches, chosen = [], []
    b, l, h, p, n = 1, 128, 4, 64, 64
    x, B = torch.randn(b, l, h, p), torch.randn(b, l, 1, n)
    dt, A, D = torch.rand(b, l, h), -torch.rand(h), torch.randn(h)
    choose = dispatch.choose
    monkeypatch.setattr(dispatch, "choose", lambda k, prob: chosen.append(k) or choose(k, prob))
    monkeypatch.setattr(launcher, "_CHOSEN", {})
    with launches_stubbed(launch=lambda s, grid, kernel, args: launches.append(args)):
        for _ in range(2):
            cutile.ssd_forward(x, dt, A, B, B.clone(), 64, D=D)
        # the second call: memoized (chunk_walk's row for this narrow problem is WALK_OFF)
        assert sorted(chosen) == ["chunk_cumsum", "chunk_scan", "chunk_state", "chunk_walk", "segment_state"]
        d = launches[2][7]
        assert d.shape == (h, 1) and d.data_ptr() == D.data_ptr()
        Dhp = torch.randn(h, p)
        cutile.ssd_forward(x, dt, A, B, B.clone(), 64, D=Dhp)
        assert launches[-1][7].data_ptr() == Dhp.data_ptr() and launches[-1][7].shape == (h, p)
        other = dispatch.scan_config(BN=64, occupancy=2)
        monkeypatch.setitem(launcher._OVERRIDE, "chunk_scan", other)
        assert launcher._launch_config("chunk_scan", launcher._problem(x, B, 64, None)) == other


def test_worker_warps_is_a_compiler_hint_beside_occupancy_and_bad_values_are_named(monkeypatch):
    cfg = dispatch.scan_config(FAST=64, worker_warps=8)
    assert cfg.hints() == {"occupancy": 3, "num_worker_warps": 8} and str(cfg).endswith(",occupancy=3,worker_warps=8")
    assert dispatch.scan_config(FAST=64).hints() == {"occupancy": 3} and "worker_warps" not in str(dispatch.scan_config())
    assert cfg.replace(BN=64).worker_warps == 8 and cfg != dispatch.scan_config(FAST=64)
    assert dispatch.parse_configs("chunk_state:FAST=64,worker_warps=4")["chunk_state"].worker_warps == 4
    with pytest.raises(ValueError, match="worker_warps: expected 4 or 8"):
        dispatch.scan_config(worker_warps=6)
    with pytest.raises(ValueError, match="worker_warps"):
        dispatch.parse_configs("chunk_scan:worker_warps=16")
    # the launcher compiles one hinted kernel per (occupancy, worker_warps) and hands both hints over
    calls = []

    class Kfn:
        def replace_hints(self, **hints):
            calls.append(hints)
            return ("hinted", tuple(sorted(hints.items())))

    kfn = Kfn()
    monkeypatch.setattr(launcher, "_HINTED", {})
    assert launcher._kernel_for(kfn, dispatch.Config((), None)) is kfn
    a = launcher._kernel_for(kfn, cfg)
    assert a == launcher._kernel_for(kfn, dispatch.scan_config(BN=64, worker_warps=8)) and len(calls) == 1
    assert launcher._kernel_for(kfn, dispatch.scan_config()) != a
    assert calls == [{"occupancy": 3, "num_worker_warps": 8}, {"occupancy": 3}]


def test_the_walks_product_order_is_named_and_needs_split():
    """chunk_walk's ORD=1 (kernels._walk_step) adds a chunk's own state after its product, as SPLIT=1
    does: ORD=1 without SPLIT=1, or an order the kernel does not have (the orders measured and dropped
    among them), is refused with its name, from the environment's override too. The dstate-64 walk rows take
    ORD=1; at dstate 128 it spilled on the H200 (lab/reports/2026-12-04-walk-order.md) and those rows keep
    ORD=0."""
    assert dispatch.parse_configs("chunk_walk:BN=64,SPLIT=1,ORD=1")["chunk_walk"].get("ORD") == 1
    for bad, match in (("chunk_walk:BN=64,ORD=1", "needs SPLIT=1"), ("chunk_walk:BN=64,SPLIT=0,ORD=4", r"expected ORD in \(0, 1\)"),
                       ("chunk_walk:BN=64,SPLIT=1,ORD=2", r"expected ORD in \(0, 1\)")):
        with pytest.raises(ValueError, match=f"SSDCHECK_CUTILE_CONFIG: .*{match}"):
            dispatch.parse_configs(bad)
    orders = {(r.config.get("BN"), r.config.get("ORD")) for r in dispatch.TABLE["chunk_walk"] if r.config.get("BN")}
    assert orders == {(64, 1), (128, 0)}, orders


def test_config_get_names_the_missing_constant():
    cfg = dispatch.scan_config(BN=64)
    assert cfg.get("BN") == 64 and cfg.get("FAST") == 0
    with pytest.raises(KeyError, match="SWAP"):
        cfg.get("SWAP")


def test_argument_checks_are_skipped_only_for_metadata_that_passed_them_before(monkeypatch):
    """Host time (lab/reports/2026-12-01-dtp-hang.md): a forward whose tensors' shapes, dtypes and devices and whose plain
    arguments equal an earlier call's that passed every check skips the checks (about 30 of the 40 us
    they cost). A changed dtype, chunk size or flag is checked again; seq_idx (whose values are
    checked) and arguments of unusual types are checked on every call; a failing call is never
    remembered; the memory is bounded."""
    from lab.bench.host_profile import launches_stubbed
    from kernels.contract import SSDArgumentError
    from kernels.registry import UnsupportedProblem
    checked, launches = [], []
    real = launcher._check_forward
    monkeypatch.setattr(launcher, "_check_forward", lambda *a: checked.append(1) or real(*a))
    monkeypatch.setattr(launcher, "_PASSED", {})
    b, l, h, p, n = 1, 128, 4, 64, 64
    x, B = torch.randn(b, l, h, p), torch.randn(b, l, 1, n)
    dt, A = torch.rand(b, l, h), -torch.rand(h)

    def forward(**kw):
        return cutile.ssd_forward(**{"x": x, "dt": dt, "A": A, "B": B, "C": B.clone(), "chunk_size": 64, **kw})

    with launches_stubbed(launch=lambda s, grid, kernel, args: launches.append((grid, args))):
        forward()
        forward(x=x.clone(), dt=dt.clone())             # other tensors, same metadata: not checked again
        assert len(checked) == 1 and len(launches) == 6
        assert [g for g, _ in launches[:3]] == [g for g, _ in launches[3:]]
        for bad, name in (({"A": A.double()}, "A"), ({"chunk_size": 96}, "chunk_size"),
                          ({"dt_limit": (0.0, math.nan)}, "dt_limit")):
            for _ in range(2):                          # never remembered: raises every time
                with pytest.raises((SSDArgumentError, UnsupportedProblem), match=name):
                    forward(**bad)
        assert len(checked) == 7
        forward(chunk_size=128), forward(dt_softplus=True)             # new metadata: checked once each
        forward(chunk_size=128), forward(dt_softplus=True)
        assert len(checked) == 9
        seq = torch.zeros(b, l, dtype=torch.int32)
        forward(seq_idx=seq), forward(seq_idx=seq), forward(dt_softplus=1), forward(dt_softplus=1)
        assert len(checked) == 13                      # value checks and a non-bool flag: every call
        with pytest.raises(SSDArgumentError, match="seq_idx"):
            forward(seq_idx=seq + 1)                    # same metadata as a passing seq_idx, bad values
        monkeypatch.setattr(launcher, "_PASSED_MAX", 2)
        for chunk in (64, 128, 256):
            forward(chunk_size=chunk)
        assert len(launcher._PASSED) <= 2


def test_the_walk_replaces_state_and_scan_only_where_its_row_matches_and_no_chunk_states_are_needed():
    """chunk_walk has no masks and writes no chunk states: it must run exactly for aligned, seq_idx-free
    chunk-64 problems of its rows' dstate and width, and never when varlen_states are asked for (they
    read the chunk states). Launches recorded with CUDA stubbed (lab.bench.host_profile)."""
    from lab.bench.host_profile import launches_stubbed

    def kernels_run(b, l, h, n, chunk=64, p=64, **kw):
        names = []
        x, B = torch.randn(b, l, h, p), torch.randn(b, l, 1, n)
        dt, A = torch.rand(b, l, h), -torch.rand(h)
        with launches_stubbed(launch=lambda s, grid, kernel, args: names.append(kernel._pyfunc.__name__)):
            cutile.ssd_forward(x, dt, A, B, B.clone(), chunk, **kw)
        return [k.removesuffix("_kernel") for k in names]

    walk = ["chunk_cumsum", "chunk_walk"]
    two = ["chunk_cumsum", "chunk_state", "chunk_scan"]
    assert kernels_run(8, 128, 32, 64) == walk and kernels_run(8, 128, 32, 128) == walk
    assert kernels_run(1, 128, 256, 64) == walk
    assert kernels_run(8, 127, 32, 64) == two                      # a partial last chunk
    assert kernels_run(8, 128, 32, 256) == two                     # no row at dstate 256
    assert kernels_run(8, 128, 32, 64, chunk=128) == two
    assert kernels_run(4, 128, 32, 64) == two                      # batch*heads 128: too few blocks
    assert kernels_run(8, 128, 32, 64, p=128) == two and kernels_run(8, 128, 32, 64, p=32) == two   # headdim
    seq = torch.zeros(8, 128, dtype=torch.int32)
    seq[:, 70:] = 1
    assert kernels_run(8, 128, 32, 64, seq_idx=seq) == two
    cu = torch.tensor([0, 50, 128], dtype=torch.int32)
    assert kernels_run(1, 128, 256, 64, cu_seqlens=cu, seq_idx=(torch.arange(128) >= 50).int()[None],
                       return_varlen_states=True) == two + ["varlen_state"]
    # an override that walks every dstate-64 problem still leaves the unaligned ones to the two kernels
    launcher._OVERRIDE["chunk_walk"] = dispatch.walk_config(BN=64)
    try:
        assert kernels_run(2, 128, 4, 64) == walk
        assert kernels_run(2, 127, 4, 64) == two and kernels_run(8, 128, 32, 64, seq_idx=seq) == two
    finally:
        del launcher._OVERRIDE["chunk_walk"]


def test_varlen_states_reuse_the_pass_whose_seq_idx_matches_cu_seqlens_even_after_empty_sequences():
    """The state pass whose chunk-entering states give varlen_states numbers token 0's sequence 0 (it holds
    initial_states), so cu_seqlens starting with empty sequences matches the seq_idx a caller passes
    (rows start at 0) and needs no second state pass."""
    from lab.bench.host_profile import launches_stubbed

    def kernels_run(cu, seq):
        names = []
        x, B = torch.randn(1, 128, 4, 64), torch.randn(1, 128, 1, 64)
        dt, A = torch.rand(1, 128, 4), -torch.rand(4)
        with launches_stubbed(launch=lambda s, grid, kernel, args: names.append(kernel._pyfunc.__name__)):
            cutile.ssd_forward(x, dt, A, B, B.clone(), 64, initial_states=torch.randn(1, 4, 64, 64),
                               cu_seqlens=torch.tensor(cu, dtype=torch.int32), seq_idx=seq[None],
                               return_varlen_states=True)
        return [k.removesuffix("_kernel") for k in names]

    seq = (torch.arange(128) >= 50).int()
    once = ["chunk_cumsum", "chunk_state", "chunk_scan", "varlen_state"]
    assert kernels_run([0, 0, 50, 128], seq) == once
    # a seq_idx that disagrees with cu_seqlens is refused by the contract, before any launch
    from kernels.contract import SSDArgumentError
    with pytest.raises(SSDArgumentError, match="seq_idx: expected to change exactly where cu_seqlens"):
        kernels_run([0, 60, 128], seq)


def test_coverage_counts_the_rows_that_launched_and_nothing_a_compile_key_chose(monkeypatch):
    """KernelInfo.coverage: each forward adds one launch to the rows it ran (cumsum, state, scan and the
    walk's "otherwise" row for a narrow problem; the walk's row for a wide aligned one), and choosing
    rows for a compile key launches nothing."""
    from lab.bench.host_profile import launches_stubbed
    from properties.problem import SSDProblem
    monkeypatch.setattr(launcher, "LAUNCHED", {})
    rows = {name.split(":")[0]: name for name in cutile.INFO.coverage()}

    def count(prefix):
        return cutile.INFO.coverage()[rows[prefix]]
    narrow = SSDProblem(batch=1, seqlen=100, nheads=2, headdim=64, dstate=64, chunk_size=64, dtype="float32")
    cutile.compile_key(narrow)
    assert not any(cutile.INFO.coverage().values())
    with launches_stubbed():
        cutile.ssd_forward(**narrow.inputs("cpu"))
        walk_off = len(dispatch.TABLE["chunk_walk"]) - 1
        assert count("chunk_cumsum 0") == 1 and count(f"chunk_walk {walk_off}") == 1
        assert sum(count(f"chunk_state {i}") for i in range(len(dispatch.TABLE["chunk_state"]))) == 1
        wide = narrow.replace(batch=8, nheads=32, seqlen=192)     # aligned at chunk 64, 256 pairs: the walk
        cutile.ssd_forward(**wide.inputs("cpu"))
    walked = [k for k, n in cutile.INFO.coverage().items() if n and k.startswith("chunk_walk") and k != rows[f"chunk_walk {walk_off}"]]
    assert len(walked) == 1 and "dstate 64" in walked[0], walked
    assert sum(count(f"chunk_state {i}") for i in range(len(dispatch.TABLE["chunk_state"]))) == 1   # not again
