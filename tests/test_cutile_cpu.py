"""The cutile implementation on a machine without a GPU: import, declaration, input policy.

What runs the kernels lives in scripts/cutile_smoke.py (GPU) and the property suite; here we check
everything that must hold before any launch: `import kernels.cutile` works, INFO declares exactly
the contract, and every unsupported or malformed argument raises a ValueError naming it.
"""
from __future__ import annotations

import inspect
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
                for bh in (1, 32, 256, 100_000):
                    for chunk in cutile.INFO.chunk_sizes:
                        prob = dispatch.Problem(dtype, p, n, chunk, bh)
                        for kernel in dispatch.KERNEL_NAMES:
                            bl = dispatch.choose(kernel, prob).get("BL")
                            # every kernel walks a chunk in whole BL tiles; only chunk_state leaves 64
                            assert chunk % bl == 0 and (bl == 64 or kernel == "chunk_state")
    # small batch*heads gets narrower dstate tiles (more blocks for the sequential state scan)
    few = dispatch.choose("chunk_state", dispatch.Problem("bfloat16", 64, 64, 64, 32))
    many = dispatch.choose("chunk_state", dispatch.Problem("bfloat16", 64, 64, 64, 1024))
    assert few.get("BN") < many.get("BN")


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


# ---------------------------------------------------------------- chunk_scan: which kernel the launcher runs

def _scan_launch(monkeypatch, cfg=None, b=2, l=300, h=8, g=2, p=64, n=32, chunk=64, dtype=torch.bfloat16):
    """(grid, kernel, Config) of the one launch _run_scan makes on CPU tensors, the launch itself
    replaced; cfg overrides the table as the sweep does (launcher._OVERRIDE)."""
    calls = []
    monkeypatch.setattr(launcher, "_launch", lambda grid, kfn, c, args, device: calls.append((grid, kfn, c, args)))
    monkeypatch.setattr(launcher, "_OVERRIDE", {"chunk_scan": cfg} if cfg is not None else {})
    nc = -(-l // chunk)
    x = torch.zeros(b, l, h, p, dtype=dtype)
    B = torch.zeros(b, l, g, n, dtype=dtype)
    dtc = torch.zeros(b, h, nc * chunk)
    states = torch.zeros(b, nc, h, p, n, dtype=dtype)
    launcher._run_scan(x, None, B, B.clone(), dtc, dtc.clone(), states, None, None, chunk)
    [(grid, kfn, c, args)] = calls
    assert args[13] == h // g                       # heads_per_group, whatever the kernel
    names = list(inspect.signature(kfn._pyfunc).parameters)
    assert names[len(names) - len(c.constants):] == [k for k, _ in c.constants], "constants out of order"
    return grid, kfn, c


def _scan_cfg(hb=None, bn=64, occ=3):
    kv = (("BL", 64), ("BP", 64), ("BN", bn), ("LAT", 0), ("PERSIST", 0)) + ((("HB", hb),) if hb else ())
    return dispatch.Config(kv, occ)


def test_dispatch_table_has_no_head_block_rows_and_its_launches_are_unchanged(monkeypatch):
    """The table's chunk_scan choices launch chunk_scan_kernel with the table's own Config object and a
    grid of one block per (b, chunk, row tile, p tile, head): exactly what ran before head blocks existed."""
    from kernels.cutile import kernels as K
    for kernel in dispatch.KERNEL_NAMES:
        for cfg in dispatch.configs(kernel):
            assert "HB" not in dict(cfg.constants), (kernel, cfg)
    for cfg in dispatch.configs("chunk_scan"):
        assert dispatch.scan_kernel(cfg, 4) == ("chunk_scan_kernel", cfg)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for n in (32, 128, 256):
            for chunk in (64, 128, 256):
                for p in (32, 128):
                    grid, kfn, cfg = _scan_launch(monkeypatch, n=n, chunk=chunk, p=p, dtype=dtype)
                    prob = dispatch.Problem(launcher._TORCH_DTYPES[dtype], p, n, chunk, 2 * 8)
                    assert kfn is K.chunk_scan_kernel and cfg is dispatch.choose("chunk_scan", prob)
                    assert grid == (2 * -(-300 // chunk) * (chunk // 64) * -(-p // 64) * 8, 1, 1)


@pytest.mark.parametrize("hb,h,g,heads_kernel", [
    (2, 8, 2, True), (4, 8, 2, True), (4, 8, 1, True), (8, 8, 1, True), (2, 6, 3, True),
    (8, 8, 2, False),    # HB larger than heads_per_group (4)
    (4, 12, 2, False),   # HB does not divide heads_per_group (6)
    (2, 6, 2, False),    # heads_per_group 3 is odd
    (1, 8, 2, False),    # HB = 1 is the per-head kernel
])
def test_launcher_runs_the_head_block_kernel_only_where_hb_divides_heads_per_group(monkeypatch, hb, h, g,
                                                                                  heads_kernel):
    from kernels.cutile import kernels as K
    for chunk in (64, 256):
        grid, kfn, cfg = _scan_launch(monkeypatch, _scan_cfg(hb), h=h, g=g, chunk=chunk)
        blocks = 2 * -(-300 // chunk) * (chunk // 64)
        if heads_kernel:
            assert kfn is K.chunk_scan_heads_kernel and cfg == _scan_cfg(hb)
            assert grid == (blocks * h // hb, 1, 1)
        else:   # the per-head kernel with the candidate's other constants, HB dropped
            assert kfn is K.chunk_scan_kernel and cfg == _scan_cfg(None)
            assert grid == (blocks * h, 1, 1)
