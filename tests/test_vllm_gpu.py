"""The vllm adapter on a GPU host: the timed call is the adapter's call, vLLM's first-config mode is
its own force_first_config.py, and the sm90 guard answers from the device. The property suite itself
runs with `pytest tests/test_properties.py --impl vllm` (lab/scripts/gpu_vllm.sh)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from kernels.peers import PeerUnavailable
from properties.problem import SSDProblem

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="needs a CUDA GPU (torch.cuda.is_available() is False)")]


@pytest.fixture
def vllm():
    from kernels.peers import vllm as adapter
    try:
        adapter._load()
    except PeerUnavailable as e:
        pytest.skip(str(e))
    return adapter


def test_the_prepared_call_is_the_adapters_call(vllm):
    kw = SSDProblem(batch=2, seqlen=300, nheads=4, headdim=64, dstate=64, chunk_size=64, dtype="bfloat16",
                    D="h", seq_starts=(100,), final_states=False).inputs("cuda")
    want = vllm.vllm_forward(**kw)
    call = vllm.prepared(**{k: v for k, v in kw.items() if k != "return_final_states"})
    got = call()
    assert got.shape == want.shape and torch.equal(got, want)
    assert call() is got                                       # out is written in place, call after call


def _loaded_in_child(first_config: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_TRITON_FORCE_FIRST_CONFIG"}
    if first_config:
        env["VLLM_TRITON_FORCE_FIRST_CONFIG"] = "1"
    code = ("from kernels.peers import vllm; vllm._load()\n"
            "from vllm.triton_utils import force_first_config\n"
            "import triton.runtime.autotuner as a\n"
            "print(force_first_config.is_installed(), a.Autotuner.run.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_first_config_mode_is_vllms_own_force_first_config(vllm):
    assert _loaded_in_child(True) == ["True", "_run_first_valid_config"]
    assert _loaded_in_child(False)[0] == "False"


def _first_config_calls_in_child(dtypes) -> list[str]:
    """vllm_forward at chunk 64, dstate 128 in each dtype in turn, in a fresh process with vLLM's
    first-config knob: "ok" or the error's type per call."""
    env = {**os.environ, "VLLM_TRITON_FORCE_FIRST_CONFIG": "1"}
    code = ("import sys, torch\nfrom kernels.peers import vllm\nfrom properties.problem import SSDProblem\n"
            "for d in sys.argv[1:]:\n"
            "    kw = SSDProblem(batch=1, seqlen=128, nheads=2, headdim=64, dstate=128, chunk_size=64,\n"
            "                    dtype=d).inputs('cuda')\n"
            "    try:\n        vllm.vllm_forward(**kw); torch.cuda.synchronize(); print('ok')\n"
            "    except Exception as e:\n        print(type(e).__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code, *dtypes], capture_output=True, text=True, timeout=300,
                          env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if proc.returncode != 0:            # pytest.fail, not assert: the xfail below expects an AssertionError
        pytest.fail(f"the child process failed: {proc.stderr[-2000:]}")
    return proc.stdout.split()


def test_first_config_fp32_alone_runs(vllm):
    """fp32 alone: config 0 of _bmm_chunk_fwd_kernel does not fit the shared memory, the knob takes
    the next one (what each first-config process of lab/scripts/gpu_vllm.sh sees)."""
    assert _first_config_calls_in_child(["float32", "float32"]) == ["ok", "ok"]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="vLLM 0.33.0's first-config pick ignores the "
                   "dtype: docs/findings/vllm-first-config-dtype.md")
def test_first_config_fp32_after_bf16_runs(vllm):
    calls = _first_config_calls_in_child(["bfloat16", "float32"])
    if calls[:1] != ["ok"]:
        pytest.fail(f"bf16 alone should run: {calls}")
    assert calls == ["ok", "ok"]       # 0.33.0: ['ok', 'RuntimeError'] (No valid config for _bmm_chunk_fwd_kernel)


def test_the_sm90_guard_answers_from_the_device(vllm):
    scan = sys.modules["vllm.model_executor.layers.mamba.ops.ssd_chunk_scan"]
    configs = scan._chunk_scan_fwd_kernel.configs
    racy = [c for c in configs if c.num_stages > 1 and c.num_warps % 4 == 0 and c.kwargs["BLOCK_SIZE_M"] % 64 == 0]
    if torch.cuda.get_device_capability() == (9, 0):
        assert not racy                                        # an H200: vLLM's guard dropped them
    else:
        assert racy                                            # elsewhere vLLM keeps every config


@pytest.mark.xfail(strict=True, reason="vLLM 0.33.0 mishandles an empty sequence in cu_seqlens: "
                                       "docs/findings/vllm-empty-sequences.md")
def test_empty_sequences_equal_separate_runs(vllm):
    """An empty sequence in the middle of cu_seqlens: the packed run equals each sequence run alone,
    and the empty sequence's varlen state is its initial state (zero: it is not the row's first)."""
    from oracles import ssd_chunked_f64
    kw = SSDProblem(batch=1, seqlen=100, nheads=4, headdim=64, dstate=64, chunk_size=32, dtype="float32",
                    initial_states=True, seq_starts=(40,), varlen=True).inputs("cuda")
    kw["cu_seqlens"] = torch.tensor([0, 40, 40, 100], dtype=torch.int32, device="cuda")
    out, final, varlen = vllm.vllm_forward(**kw)
    want_out, want_final, want_varlen = ssd_chunked_f64(**kw)
    assert float((out.double() - want_out).abs().max()) < 1e-2 * float(want_out.abs().max())
    assert float((varlen.double() - want_varlen).abs().max()) < 1e-2 * float(want_varlen.abs().max())
