"""TileGym's search candidates planned and compiled on the CPU: the `tilegym` modes' KernelInfo.precompile
(kernels/peers/tilegym.py, kernels/peers/tilegym_precompile.py).

TileGym comes from its published wheel in $SSDCHECK_PEERS_DIR (skipped without it), unpacked for
this module and removed from sys.modules after it.
"""
from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("cuda.tile")

# A launch of TileGym 1.5.1's output kernel that Nsight Compute recorded on a GPU host (sm_90) while the
# race timed shape b8-l2048-h32-p64-n64-g1 at chunk 64, bf16 inputs, fp32 dt, TileGym's tuned config
# (BLOCK_STATE 64, LATENCY 3, H_LAT 5, persistent): lab/reports/raw/2026-11-30.tar.xz,
# 2026-11-30-ftz-decays/ncu-ftz/ncu-details.txt.
GPU_SYMBOL = ("compute_out_swap_kernel_Kt2_A4bf16_7v8l0_8t1_ei16_p16_A4bf16_4s1_7v8l0_8t1_ai16_p16_A4bf16_4s1_"
              "7v8l0_8t1_ai16_p16_A1f32_1i16t1_p16_A3f32_3v4l0_4t1_6i16_p16_A3f32_3v4l0_4t1_6i16_p16_A5bf16_"
              "fv8l0_10t1_1ei16_p16_A4bf16_7v8l0_8t1_ei16_p16_I64_I64_I64_I32_I64_I3_I5_B1")


@pytest.fixture(scope="module")
def tg(tmp_path_factory):
    """(the shipped mode's Precompile, the first-config mode's, TileGym's mamba2 module), TileGym
    unpacked from its wheel."""
    from kernels.peers.sources import PeerSourceMissing, unpack_wheel
    try:
        site = unpack_wheel("tilegym", tmp_path_factory.mktemp("tilegym-site"))
    except PeerSourceMissing as e:
        pytest.skip(str(e))
    saved = {k: v for k, v in sys.modules.items() if k == "tilegym" or k.startswith("tilegym.")}
    sys.path.insert(0, site)
    try:
        from kernels.peers import tilegym as adapter
        from kernels.registry import lookup
        yield lookup("tilegym").precompile, lookup("tilegym-first-config").precompile, adapter._peer_module()
    finally:
        sys.path.remove(site)
        for k in [k for k in sys.modules if k == "tilegym" or k.startswith("tilegym.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _inputs(b=2, seqlen=128, h=8, p=64, g=2, n=64, dtype=torch.bfloat16, dt_dtype=torch.float32):
    return dict(x=torch.zeros(b, seqlen, h, p, dtype=dtype), dt=torch.zeros(b, seqlen, h, dtype=dt_dtype),
                A=torch.zeros(h), B=torch.zeros(b, seqlen, g, n, dtype=dtype), C=torch.zeros(b, seqlen, g, n, dtype=dtype),
                chunk_size=64, D=torch.zeros(h), return_final_states=True)


def _counts(jobs) -> dict:
    out: dict = {}
    for name, _, _ in jobs:
        out[name] = out.get(name, 0) + 1
    return out


def test_the_plan_holds_every_candidate_of_each_search(tg):
    """TileGym's search at chunk 64 launches each config of three spaces; the plan holds each one."""
    pre, _, M = tg
    want = {"chunk_cumsum_kernel": len(list(M._chunk_cumsum_autotune_configs(8))),
            "fwd_pass_state_kernel": len(list(M._fwd_pass_state_autotune_configs(64, 64, 64))),
            "compute_out_swap_kernel": len(list(M._compute_out_swap_configs(64, 64)))}
    jobs = pre.plan(**_inputs())
    assert _counts(jobs) == want and want == {"chunk_cumsum_kernel": 10, "fwd_pass_state_kernel": 24,
                                              "compute_out_swap_kernel": 54}
    assert len(set(jobs)) == len(jobs)


class _Recorded:
    """Recorded entries that name `config` for every search, tuned on `device` (read by a real Tuning)."""
    def __init__(self, config: dict, device: str):
        self.config, self.device = config, device

    def get(self, sig):
        return {"signature": sig, "config": self.config, "device": self.device, "tilegym": "1.5.1"}


def _tuning(config: dict, device: str):
    from kernels.peers.tilegym_tuning import Tuning
    tuning = Tuning("/nonexistent/tuning.json", "NVIDIA H100 80GB HBM3", "1.5.1")
    tuning.entries = _Recorded(config, device)
    return tuning


def test_a_recorded_search_plans_its_chosen_candidate_only(tg):
    """A search the tuning file records is not run on the GPU: its chosen config is the one compile."""
    from kernels.peers import tilegym_precompile
    from kernels.peers.tilegym import _peer_args
    _, _, M = tg
    args, kwargs = _peer_args(**_inputs())
    chosen = vars(list(M._compute_out_swap_configs(64, 64))[2])   # matches no cumsum or state config
    jobs = tilegym_precompile.plan(M, args, kwargs, _tuning(chosen, "NVIDIA H100 80GB HBM3"))
    assert _counts(jobs) == {"chunk_cumsum_kernel": 10, "fwd_pass_state_kernel": 24, "compute_out_swap_kernel": 1}
    assert jobs[-1] in tilegym_precompile.plan(M, args, kwargs)
    unusable = tilegym_precompile.plan(M, args, kwargs, _tuning(chosen, "NVIDIA H200"))   # another GPU's choice
    assert _counts(unusable)["compute_out_swap_kernel"] == 54


def test_the_first_config_plan_is_the_first_candidate_of_each_search(tg):
    pre, first_config, _ = tg
    first = first_config.plan(**_inputs())
    every = pre.plan(**_inputs())
    assert [j[0] for j in first] == ["chunk_cumsum_kernel", "fwd_pass_state_kernel", "compute_out_swap_kernel"]
    assert all(j in every for j in first)
    assert [j for j in every if j[0] == "chunk_cumsum_kernel"][0] == first[0]


def test_the_plan_names_the_signature_a_gpu_launch_compiled(tg):
    """The JIT's specialization as modelled (kernels/cutile/precompile.py) is the one a GPU run compiled."""
    pre, _, _ = tg
    jobs = pre.plan(**_inputs(b=8, seqlen=2048, h=32, p=64, g=1, n=64))
    assert GPU_SYMBOL in {symbol for _, _, symbol in jobs}


def test_planning_leaves_tilegym_and_torch_as_they_were(tg):
    import cuda.tile as ct
    pre, _, M = tg
    before = (M.exhaustive_search, ct.launch, torch.cuda.current_stream, torch.cuda.get_device_properties)
    M._chunk_cumsum_tune_cache["sentinel"] = "kept"
    try:
        pre.plan(**_inputs())
        after = (M.exhaustive_search, ct.launch, torch.cuda.current_stream, torch.cuda.get_device_properties)
        assert after == before
        assert M._chunk_cumsum_tune_cache == {"sentinel": "kept"} and not M._compute_out_tune_cache
    finally:
        M._chunk_cumsum_tune_cache.pop("sentinel", None)


def test_the_plan_refuses_what_the_adapter_refuses_by_name(tg):
    from kernels.registry import UnsupportedProblem
    pre, _, _ = tg
    with pytest.raises(UnsupportedProblem, match="^x: tilegym needs seqlen divisible by chunk_size=64"):
        pre.plan(**_inputs(seqlen=100))


@pytest.mark.compile
def test_a_built_job_is_the_compile_the_jit_looks_up(tg, tmp_path):
    """build() fills the cache entry that the JIT's compile of the same launch reads: no tileiras run for
    a built job, one for a candidate that was not built (the count sees a miss)."""
    import cuda.tile._compile as C
    from cuda.tile._cext import default_tile_context
    from cuda.tile.compilation import demangle_kernel_name
    pre, _, M = tg
    cumsum = [j for j in pre.plan(**_inputs()) if j[0] == "chunk_cumsum_kernel"]
    config, runs, real = default_tile_context.config, [], C.compile_cubin
    saved = config.cache_dir
    config.cache_dir = str(tmp_path)
    C.compile_cubin = lambda *a, **k: runs.append(1) or real(*a, **k)
    try:
        pre.build(cumsum[0], "sm_90")
        assert len(runs) == 1

        def jit(job):
            name, hints, symbol = job
            getattr(M, name).replace_hints(**dict(hints))._compile(demangle_kernel_name(symbol)[1],
                                                                   default_tile_context, (9, 0))
        jit(cumsum[0])
        assert len(runs) == 1           # a cache hit
        jit(cumsum[1])
        assert len(runs) == 2           # not built: compiled
    finally:
        C.compile_cubin = real
        config.cache_dir = saved
