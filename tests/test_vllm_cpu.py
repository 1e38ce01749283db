"""The vllm adapter on the CPU: the contract mapping (rows, seq_idx sequences, empty and one-token
sequences, per-sequence initial states), vLLM's own chunk metadata function from the published
tarball, the stand-ins, the new contract errors, and the skip without a GPU or triton."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import os
import sys
import tarfile
import types

import pytest
import torch

from kernels.contract import SSDArgumentError
from kernels.peers import PeerUnavailable
from kernels.peers import vllm as adapter
from kernels.peers import vllm_files
from kernels.peers.sources import PeerSourceMissing, peer_file
from kernels.peers.vllm_packing import packing, sequence_initial_states
from kernels.registry import UnsupportedProblem, check_call, lookup
from oracles import ssd_chunked_f64
from properties.problem import SSDProblem

HAS_TRITON = importlib.util.find_spec("triton") is not None


def _vllm_metadata_fn():
    try:
        return vllm_files.load_chunk_metadata_fn()
    except PeerSourceMissing as e:
        pytest.skip(f"vLLM's compute_varlen_chunk_metadata is read from the published tarball: {e}")


# -- packing: expectations written here ------------------------------------------------------------

def test_rows_become_packed_sequences():
    pk = packing(3, 10)
    assert pk.cu_seqlens == (0, 10, 20, 30) and pk.row_first == (0, 1, 2) and pk.row_last == (0, 1, 2)


def test_seq_idx_sequences_inside_rows_become_packed_sequences():
    seq = torch.tensor([[0] * 4 + [1] * 5 + [2], [0] * 10], dtype=torch.int32)
    pk = packing(2, 10, seq)
    assert pk.cu_seqlens == (0, 4, 9, 10, 20)        # row 0: 4, 5, 1 tokens (a one-token sequence last)
    assert pk.row_first == (0, 3) and pk.row_last == (2, 3)


def test_cu_seqlens_keeps_empty_and_one_token_sequences():
    seq = torch.tensor([[0] + [2] * 7], dtype=torch.int32)      # sequence 2 is empty: seq_idx jumps
    pk = packing(1, 8, seq, torch.tensor([0, 0, 1, 1, 8, 8], dtype=torch.int32))
    assert pk.cu_seqlens == (0, 0, 1, 1, 8, 8) and pk.num_sequences == 5
    # the row's first and last tokens are in sequences 1 (one token) and 3; 0, 2 and 4 are empty
    assert pk.row_first == (1,) and pk.row_last == (3,)


def test_a_rows_initial_state_goes_to_its_sequence_0_and_the_others_start_at_zero():
    pk = packing(2, 10, torch.tensor([[0] * 4 + [1] * 6, [0] * 5 + [1] * 5], dtype=torch.int32))
    h0 = torch.arange(2 * 3, dtype=torch.float32).reshape(2, 3, 1, 1) + 1
    per_seq = sequence_initial_states(pk, h0)
    assert per_seq.shape == (4, 3, 1, 1)
    assert torch.equal(per_seq[0], h0[0]) and torch.equal(per_seq[2], h0[1])
    assert not per_seq[1].any() and not per_seq[3].any()
    assert sequence_initial_states(pk, None) is None


def test_per_sequence_initial_states_pass_through():
    pk = packing(1, 8, torch.tensor([[0] * 3 + [1] * 5], dtype=torch.int32), torch.tensor([0, 3, 8]))
    h0 = torch.randn(2, 3, 4, 5)
    assert torch.equal(sequence_initial_states(pk, h0), h0)


# -- chunk metadata: vLLM's own function, from the tarball -----------------------------------------

def test_vllms_chunk_metadata_cuts_at_sequence_and_physical_chunk_boundaries():
    fn = _vllm_metadata_fn()
    cu_chunk, last, seq_chunks = fn(torch.tensor([0, 5, 5, 6, 20], dtype=torch.int32), 8)
    # sequence 0: [0,5) one chunk; 1: empty; 2: [5,6); 3: [6,8) [8,16) [16,20) (physical chunks of 8)
    assert cu_chunk.tolist() == [0, 5, 6, 8, 16, 20]
    assert last.tolist() == [0, -1, 1, 4]
    assert seq_chunks.tolist() == [0, 2, 3, 3, 3]


def _expected_chunks(cu: list[int], chunk: int):
    """The chunking vLLM documents, written out: each sequence cut where the packed position is a
    multiple of `chunk` (a physical chunk edge) and at its own ends; an empty sequence has no chunk and
    last_chunk_indices -1."""
    edges, last, owner = [0], [], []
    for s, (a, b) in enumerate(zip(cu, cu[1:])):
        cuts = [a] + [t for t in range(a + 1, b) if t % chunk == 0] + [b] if b > a else [a]
        for lo, hi in zip(cuts, cuts[1:]):
            edges.append(hi)
            owner.append(s)
        last.append(len(owner) - 1 if b > a else -1)
    return edges, last, owner


def test_vllms_chunk_metadata_matches_the_written_rule_on_random_packings():
    fn = _vllm_metadata_fn()
    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        chunk = (4, 8, 16)[trial % 3]
        lengths = torch.randint(0, 3 * chunk, (int(torch.randint(1, 7, (1,), generator=g)),), generator=g)
        lengths[lengths < chunk // 2] = lengths[lengths < chunk // 2] % 2     # many empty and one-token ones
        if int(lengths.sum()) == 0:
            lengths[-1] = 1
        cu = [0] + torch.cumsum(lengths, 0).tolist()
        cu_chunk, last, seq_chunks = fn(torch.tensor(cu, dtype=torch.int32), chunk)
        assert (cu_chunk.tolist(), last.tolist(), seq_chunks.tolist()) == _expected_chunks(cu, chunk), (cu, chunk)


def test_adapter_metadata_is_vllms_for_the_packing():
    fn = _vllm_metadata_fn()
    seq = torch.tensor([[0] * 3 + [1] * 7, [0] * 10], dtype=torch.int32)
    meta = adapter.chunk_metadata(packing(2, 10, seq), 4, "cpu", metadata_fn=fn)
    assert meta["cu_seqlens"].tolist() == [0, 3, 10, 20]
    # row 0: [0,3) [3,4) [4,8) [8,10); row 1: [10,12) [12,16) [16,20)
    assert meta["cu_chunk_seqlens"].tolist() == [0, 3, 4, 8, 10, 12, 16, 20]
    assert meta["last_chunk_indices"].tolist() == [0, 3, 6]
    assert meta["seq_idx"].tolist() == [0, 1, 1, 1, 2, 2, 2]


# -- the whole mapping, against the contract oracle ------------------------------------------------

def _fake_vllm_varlen(x, dt, A, B, C, chunk_size, cu_seqlens, cu_chunk_seqlens, last_chunk_indices, seq_idx, out,
                      D=None, z=None, dt_bias=None, initial_states=None, dt_softplus=False,
                      dt_limit=(0.0, float("inf")), state_dtype=None):
    """vLLM's entry point's contract in float64: each packed sequence alone from its own initial state,
    y into `out`, one state per sequence. It also checks the chunk metadata it is handed, and that
    initial states come in the state dtype (vLLM's chunk scan compiles no other: on an H100,
    lab/scripts/repro_vllm_state_dtype.py, docs/findings/vllm-initial-states-dtype.md)."""
    if initial_states is not None and initial_states.dtype != (state_dtype or C.dtype):
        raise RuntimeError(f"CompilationError: at 91:4: initial_states {initial_states.dtype}, "
                           f"chunk states {state_dtype or C.dtype}")
    bounds = cu_seqlens.tolist()
    chunks = cu_chunk_seqlens.tolist()
    assert chunks[0] == 0 and chunks[-1] == bounds[-1]
    for c, s in enumerate(seq_idx.tolist()):           # every chunk lies inside the sequence it names
        assert bounds[s] <= chunks[c] < chunks[c + 1] <= bounds[s + 1]
    states = []
    for i in range(len(bounds) - 1):
        s, e = bounds[i], bounds[i + 1]
        h0 = None if initial_states is None else initial_states[i:i + 1]
        if e == s:
            states.append(torch.zeros_like(initial_states[0]) if h0 is None else h0[0])
            continue
        piece = {"x": x, "dt": dt, "B": B, "C": C, "z": z}
        kw = {k: (None if v is None else v[None, s:e]) for k, v in piece.items()}
        y, final = ssd_chunked_f64(chunk_size=chunk_size, A=A, D=D, dt_bias=dt_bias, initial_states=h0,
                                   dt_softplus=dt_softplus, dt_limit=dt_limit, return_final_states=True, **kw)
        out[s:e] = y[0].to(out.dtype)
        states.append(final[0])
    return torch.stack(states).to(state_dtype)


@pytest.fixture
def cpu_adapter(monkeypatch):
    """The adapter with vLLM's kernels replaced by _fake_vllm_varlen and vLLM's own metadata function."""
    monkeypatch.setitem(adapter._loaded, "fn", _fake_vllm_varlen)
    monkeypatch.setitem(adapter._loaded, "metadata", _vllm_metadata_fn())
    monkeypatch.setitem(adapter._loaded, "mode", adapter.SHIPPED)
    monkeypatch.setattr(adapter, "require_cuda", lambda peer, x: None)
    return adapter.vllm_forward


@pytest.mark.parametrize("states", ["float32", "input"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_state_cache_in_either_dtype_reaches_vllm_paired_with_its_state_dtype(cpu_adapter, states, dtype):
    """A server passes initial states and state_dtype from one cache; the adapter pairs them the same way
    (before, it passed state_dtype=float32 whatever the initial states were, which vLLM cannot compile)."""
    problem = MAPPED["varlen"].replace(dtype=dtype, states_dtype=states, final_states=True)
    kw = problem.inputs(return_states_dtype=True)
    out, final, varlen = cpu_adapter(**kw)
    assert final.dtype == varlen.dtype == problem.states_torch_dtype
    want = ssd_chunked_f64(**kw)
    torch.testing.assert_close(final.double(), want[1], rtol=2e-2, atol=2e-2)
    # without the keyword the initial states name the cache
    assert cpu_adapter(**{k: v for k, v in kw.items() if k != "return_states_dtype"})[1].dtype == kw["initial_states"].dtype


def test_initial_states_narrower_than_the_cache_are_converted_and_wider_refused(cpu_adapter):
    kw = MAPPED["rows"].replace(dtype="bfloat16", final_states=True).inputs()
    bf16_states = {**kw, "initial_states": kw["initial_states"].to(torch.bfloat16)}
    _, final = cpu_adapter(**bf16_states, return_states_dtype=torch.float32)   # exact bf16 -> fp32
    assert final.dtype == torch.float32
    with pytest.raises(UnsupportedProblem, match=r"^initial_states: vllm takes initial states in its state dtype "
                                                 r"torch.bfloat16 .*got the wider torch.float32"):
        cpu_adapter(**kw, return_states_dtype=torch.bfloat16)


def test_each_mode_is_registered_and_one_mode_holds_a_process(monkeypatch):
    assert lookup("vllm").fn is adapter.vllm_forward and lookup("vllm").dtypes == ("float32", "float16", "bfloat16")
    first = lookup("vllm-first-config")
    assert first.fn is adapter.vllm_first_config_forward and first.dtypes == ("bfloat16",)
    assert lookup("kernels.peers.vllm:BY_DTYPE.float32").fn is adapter.vllm_first_config_forward
    monkeypatch.setattr(adapter, "_loaded", {"fn": None, "metadata": None, "mode": adapter.SHIPPED})
    with pytest.raises(PeerUnavailable, match=r"^vllm: this process loaded vLLM shipped \(registered as vllm\); "
                                              r"the first-config mode needs a process of its own"):
        adapter._load(adapter.FIRST_CONFIG_MODE)


@pytest.mark.parametrize("mode", ["shipped", "first-config"])
@pytest.mark.parametrize("caller", [None, "1"])
def test_the_mode_not_the_callers_environment_sets_vllms_switch_while_it_loads(monkeypatch, mode, caller):
    seen = {}

    def fake_load_ops():
        seen["env"] = os.environ.get(adapter.FIRST_CONFIG_ENV)
        return types.SimpleNamespace(mamba_chunk_scan_combined_varlen="fn")
    monkeypatch.setattr(adapter, "_loaded", {})
    monkeypatch.setattr(adapter, "load_ops", fake_load_ops)
    monkeypatch.setattr(adapter, "load_chunk_metadata_fn", lambda: "meta")
    if caller is None:
        monkeypatch.delenv(adapter.FIRST_CONFIG_ENV, raising=False)
    else:
        monkeypatch.setenv(adapter.FIRST_CONFIG_ENV, caller)
    assert adapter._load(mode) == ("fn", "meta") and adapter.loaded_mode() == mode
    assert seen["env"] == ("1" if mode == "first-config" else None)
    assert os.environ.get(adapter.FIRST_CONFIG_ENV) == caller      # restored


def _close(got, want, msg=None):
    """fp32 results (the adapter's out and states) against the float64 oracle's."""
    torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-5, msg=msg)


MAPPED = {
    "rows": SSDProblem(batch=3, seqlen=40, nheads=2, headdim=4, dstate=4, chunk_size=16, initial_states=True, D="h"),
    "seq_idx": SSDProblem(batch=2, seqlen=37, nheads=4, headdim=4, dstate=4, ngroups=2, chunk_size=16,
                          initial_states=True, seq_starts=(1, 2, 20), z=True, dt_softplus=True, dt_bias=True),
    # packed sequences with varlen states and a row's initial state on sequence 0
    "varlen": SSDProblem(batch=1, seqlen=50, nheads=2, headdim=4, dstate=4, chunk_size=16, initial_states=True,
                         seq_starts=(20, 21, 33), varlen=True),
}


@pytest.mark.parametrize("name", list(MAPPED))
def test_mapping_matches_the_contract_oracle(cpu_adapter, name):
    kw = MAPPED[name].inputs()
    want = ssd_chunked_f64(**kw)
    got = cpu_adapter(**kw)
    for g, w, what in zip(got, want, ("out", "final", "varlen")):
        _close(g, w, msg=lambda m, what=what: f"{name} {what}: {m}")


def test_mapping_with_empty_and_one_token_sequences(cpu_adapter):
    kw = (SSDProblem(batch=1, seqlen=24, nheads=2, headdim=4, dstate=4, chunk_size=16, initial_states=True,
                         seq_starts=(1, 2)).inputs())
    kw.update(cu_seqlens=torch.tensor([0, 1, 1, 2, 24, 24], dtype=torch.int32), return_varlen_states=True)
    out, final, varlen = cpu_adapter(**kw)
    want_out, want_final = ssd_chunked_f64(**{**kw, "return_varlen_states": False, "cu_seqlens": None})
    _close(out, want_out)
    _close(final, want_final)   # the row ends with an empty sequence
    assert varlen.shape == (5, 2, 4, 4)
    assert not varlen[1].any() and not varlen[4].any()    # empty sequences: zero states
    one = ssd_chunked_f64(**{**kw, "return_varlen_states": False, "cu_seqlens": None, "seq_idx": None,
                             **{k: kw[k][:, :1] for k in ("x", "dt", "B", "C")}})[1]
    _close(varlen[0], one[0])   # one-token sequence 0 from h0


EMPTY_AND_ONE_TOKEN = {    # cu_seqlens over 24 tokens -> (row_first, row_last): the sequences holding its ends
    "empty first": ([0, 0, 10, 24], 1, 2),
    "empty middle": ([0, 10, 10, 24], 0, 2),
    "empty last": ([0, 10, 24, 24], 0, 1),
    "one token first, then empty": ([0, 1, 1, 24], 0, 2),
    "one token last": ([0, 23, 24], 0, 1),
}


@pytest.mark.parametrize("name", list(EMPTY_AND_ONE_TOKEN))
def test_mapping_of_empty_and_one_token_sequences_matches_the_contract_oracle(cpu_adapter, name):
    """The row's initial state on the sequence holding its first token, the final state from the one
    holding its last; y, final and every varlen state against the oracle run with the same cu_seqlens."""
    cu, first, last = EMPTY_AND_ONE_TOKEN[name]
    starts = tuple(sorted({c for c in cu[1:-1] if 0 < c < 24}))
    kw = SSDProblem(batch=1, seqlen=24, nheads=2, headdim=4, dstate=4, chunk_size=16, initial_states=True,
                    seq_starts=starts, varlen=True).inputs()
    kw["cu_seqlens"] = torch.tensor(cu, dtype=torch.int32)
    pk = packing(1, 24, kw["seq_idx"], kw["cu_seqlens"])
    assert (pk.row_first, pk.row_last) == ((first,), (last,))
    for g, w, what in zip(cpu_adapter(**kw), ssd_chunked_f64(**kw), ("out", "final", "varlen")):
        _close(g, w, msg=lambda m, what=what: f"{name} {what}: {m}")


def test_per_sequence_initial_states_equal_separate_runs(cpu_adapter):
    p = SSDProblem(batch=1, seqlen=44, nheads=2, headdim=4, dstate=4, chunk_size=16, seq_starts=(3, 19), varlen=True)
    kw = p.inputs()
    h0 = torch.randn(3, 2, 4, 4, generator=torch.Generator().manual_seed(1))
    out, final, varlen = cpu_adapter(**{**kw, "initial_states": h0})
    for i, (s, e) in enumerate(((0, 3), (3, 19), (19, 44))):
        alone = {**kw, "seq_idx": None, "cu_seqlens": None, "return_varlen_states": False,
                 "initial_states": h0[i:i + 1], **{k: kw[k][:, s:e] for k in ("x", "dt", "B", "C")}}
        y, f = ssd_chunked_f64(**alone)
        _close(out[:, s:e], y)
        _close(varlen[i], f[0])
    torch.testing.assert_close(final[0], varlen[2])


# -- contract errors -------------------------------------------------------------------------------

def _varlen_kw(**over):
    kw = SSDProblem(batch=1, seqlen=12, nheads=2, headdim=4, dstate=4, chunk_size=16, seq_starts=(5,),
                    varlen=True, initial_states=True).inputs()
    kw.update(over)
    return kw


CONTRACT_ERRORS = [
    ("seq_idx changes elsewhere", {"seq_idx": torch.tensor([[0] * 6 + [1] * 6], dtype=torch.int32)},
     r"^seq_idx: expected to change exactly where cu_seqlens starts a sequence \(positions \[5\]; .* changes at \[6\]"),
    ("seq_idx misses a sequence", {"cu_seqlens": torch.tensor([0, 5, 9, 12], dtype=torch.int32)},
     r"^seq_idx: expected to change exactly where cu_seqlens starts a sequence \(positions \[5, 9\]"),
    ("per-sequence count", {"initial_states": torch.zeros(3, 2, 4, 4)},
     r"^initial_states: expected shape \(1, 2, 4, 4\) \(one per row\) or \(2, 2, 4, 4\) \(one per cu_seqlens"),
    ("per-sequence without seq_idx", {"initial_states": torch.zeros(2, 2, 4, 4), "seq_idx": None,
                                      "return_varlen_states": False},
     r"^seq_idx: expected a tensor with one initial state per cu_seqlens sequence"),
]


@pytest.mark.parametrize("name, over, match", CONTRACT_ERRORS, ids=[c[0] for c in CONTRACT_ERRORS])
def test_contract_errors(name, over, match):
    with pytest.raises(SSDArgumentError, match=match):
        ssd_chunked_f64(**_varlen_kw(**over))


def test_per_sequence_initial_states_need_batch_1():
    kw = SSDProblem(batch=2, seqlen=12, nheads=2, headdim=4, dstate=4, chunk_size=4, seq_starts=(5,)).inputs()
    kw.update(cu_seqlens=torch.tensor([0, 5, 12], dtype=torch.int32), initial_states=torch.zeros(3, 2, 4, 4))
    with pytest.raises(SSDArgumentError, match=r"^initial_states: expected shape \(2, 2, 4, 4\) \(one per row\) or "
                                               r"\(2, 2, 4, 4\)|^x: expected batch == 1"):
        ssd_chunked_f64(**kw)
    kw["cu_seqlens"] = torch.tensor([0, 2, 5, 12], dtype=torch.int32)
    kw["seq_idx"] = torch.tensor([[0, 0, 1, 1, 1] + [2] * 7] * 2, dtype=torch.int32)
    with pytest.raises(SSDArgumentError, match=r"^x: expected batch == 1 with one initial state per cu_seqlens"):
        ssd_chunked_f64(**kw)


def test_per_sequence_initial_states_are_an_option_to_declare():
    kw = _varlen_kw(initial_states=torch.zeros(2, 2, 4, 4))
    with pytest.raises(UnsupportedProblem, match=r"^initial_states: option 'varlen_initial_states' is not "
                                                 r"supported by mamba-ssm"):
        check_call(lookup("mamba-ssm"), **kw)
    check_call(lookup("vllm"), **kw)                          # vLLM declares it: no error
    check_call(lookup("mamba-ssm"), **_varlen_kw())           # one per row: the contract's own option


# -- the adapter on this machine, the loader and the stand-ins -------------------------------------

def test_info_declares_vllms_capabilities():
    info = lookup("vllm")
    assert info.fn is adapter.vllm_forward and info.device == "cuda" and info.stages is None
    assert info.exp == "fast" and info.matmul == "tf32-trunc" and info.state_dtype == "input"
    assert {"varlen_initial_states", "varlen_states", "seq_idx", "z", "D_headdim"} <= info.options
    assert not info.seqlen_multiple_of_chunk and info.chunk_sizes == (16, 32, 64, 128, 256)


def test_adapter_skips_without_a_gpu():
    kw = SSDProblem(batch=1, seqlen=8, nheads=2, headdim=4, dstate=4, chunk_size=16).inputs()
    with pytest.raises(PeerUnavailable, match=r"^vllm: runs on CUDA tensors only"):
        adapter.vllm_forward(**kw)
    with pytest.raises(SSDArgumentError, match=r"^dt: expected shape"):      # validation comes first
        adapter.vllm_forward(**{**kw, "dt": kw["dt"][:, :3]})


@pytest.mark.skipif(HAS_TRITON, reason="triton is importable here: the fragment loads")
def test_loading_without_triton_says_so(monkeypatch):
    monkeypatch.setattr(adapter, "_loaded", {})
    with pytest.raises(PeerUnavailable, match=r"^vllm: cannot import the 0.33.0 SSD fragment: .*need triton"):
        adapter._load()
    assert "vllm" not in sys.modules                            # checked before anything is registered


def test_missing_fragment_is_a_clear_skip_reason(monkeypatch):
    monkeypatch.delenv(vllm_files.SRC_ENV, raising=False)
    with pytest.raises(vllm_files.FragmentMissing, match=r"^vllm: no folder holding .*ssd_combined.py"):
        vllm_files.find_root(search_path=[])


def test_platform_stand_in_answers_from_torch():
    p = vllm_files.Platform()
    assert p.is_cuda() == (torch.version.cuda is not None and torch.cuda.is_available())
    assert p.is_cpu() == (not (p.is_cuda() or p.is_rocm() or p.is_xpu()))
    if not torch.cuda.is_available():
        assert not p.is_device_capability(90)
    else:
        major, minor = torch.cuda.get_device_capability()
        assert p.is_device_capability(major * 10 + minor)


def test_compile_definitions_keeps_lines_and_takes_the_branch(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("import nothing_here\n\nif FLAG:\n    def f(x):\n        return x + 1\nelse:\n"
                   "    def f(x):\n        return x - 1\n\ndef g():\n    return 0\n")
    ns = vllm_files.compile_definitions(src.read_text(), str(src), {"f"}, {"FLAG": True})
    assert ns["f"](1) == 2 and "g" not in ns                  # the import and g are not run
    assert inspect.getsourcelines(ns["f"])[1] == 4            # Triton's JIT reads the source from here
    with pytest.raises(vllm_files.FragmentMissing, match="no longer defines"):
        vllm_files.compile_definitions(src.read_text(), str(src), {"h"}, {})


def test_the_metadata_function_is_vllms_text():
    fn = _vllm_metadata_fn()
    assert fn.__code__.co_filename.endswith(vllm_files.METADATA_FILE)
    assert fn.__code__.co_firstlineno == 27                   # mamba2_attn.py l.27, line numbers kept


# -- the fast_exp precision model ----------------------------------------------------------------

# fp32, ieee matmul, 256 chunks of slow decay: the states pass through 256 fast_exp factors near 1
LONG_SLOW = SSDProblem(batch=1, seqlen=4096, nheads=2, headdim=8, dstate=8, chunk_size=16, dtype="float32",
                       decay=1e-3, final_states=True, seed=3)


def test_every_declarable_exp_has_a_yardstick_model():
    from kernels.registry import EXPS as DECLARABLE
    from oracles.yardstick import EXPS as MODELED
    assert DECLARABLE == MODELED
    with pytest.raises(ValueError, match=r"^KernelInfo\('vllm'\).exp: expected one of"):
        lookup("vllm").replace(exp="ex2")
    with pytest.raises(ValueError, match=r"^exp: expected one of"):
        from oracles import ssd_yardstick
        ssd_yardstick(**LONG_SLOW.replace(seqlen=16).inputs(), exp="ex2")


def test_fast_exp_models_the_products_rounding_and_the_approximation():
    from oracles.yardstick import FAST_EXP_ULPS, _fast_exp
    x = torch.tensor([-1e-3, -1.0, -10.0, -80.0])
    rel = (_fast_exp(x).double() / torch.exp(x.double()) - 1).abs()
    ieee = (torch.exp(x).double() / torch.exp(x.double()) - 1).abs()
    assert bool((rel > ieee).all())                              # always further from exp than expf
    assert float(rel[-1]) > float(rel[1])                        # the product's rounding grows with |x|
    assert float(rel.max()) < (FAST_EXP_ULPS + 80 * 1.45 + 1) * 2.0 ** -24


@pytest.mark.parametrize("output", ("y", "final_states"))
def test_a_fast_exp_result_passes_only_against_the_fast_yardstick(output):
    """A result that differs from the ieee yardstick only by fast_exp fails the ieee budget on a long
    slow-decay fp32 problem and passes the fast one; 2% off still fails the fast one."""
    from oracles import ssd_yardstick
    from properties.tolerance import compare
    kw = LONG_SLOW.inputs()
    names = ("y", "final_states")
    ref = dict(zip(names, ssd_chunked_f64(**kw)))
    ieee, fast = (dict(zip(names, ssd_yardstick(**kw, state_dtype="input", exp=e))) for e in ("ieee", "fast"))
    assert not compare(output, fast[output], ref[output], dtype="float32", yardstick=ieee[output]).passed
    ok = compare(output, fast[output], ref[output], dtype="float32", yardstick=fast[output])
    assert ok.passed, ok.summary()
    assert not compare(output, 1.02 * fast[output], ref[output], dtype="float32", yardstick=fast[output]).passed


def _fast_exp_kernel(ulps: float):
    """An fp32 implementation declaring exp="fast" whose exp has `ulps` units of 2^-24 of its own error:
    the yardstick's forward, run with FAST_EXP_ULPS = ulps (the property's yardstick keeps the declared)."""
    from oracles import yardstick

    def fn(**kw):
        declared = yardstick.FAST_EXP_ULPS
        yardstick.FAST_EXP_ULPS = ulps
        try:
            return yardstick.ssd_yardstick(**kw, state_dtype="input", matmul="ieee", exp="fast")
        finally:
            yardstick.FAST_EXP_ULPS = declared
    return lookup("torch-ref").replace(name=f"fast_exp-{ulps}", fn=fn, device="cpu", state_dtype="input",
                                       matmul="ieee", exp="fast")


def test_an_fp32_run_within_the_declared_exp_error_passes_and_one_past_it_fails():
    """The budget is k x the yardstick's error: an exp error up to the declared FAST_EXP_ULPS passes, one
    k + 1 times the declared fails (LONG_SLOW: the bias compounds over 256 chunks of decays near 1)."""
    from oracles.yardstick import FAST_EXP_ULPS
    from properties.invariants import prop_matches_oracle
    from properties.tolerance import load_policy
    for ulps in (0, FAST_EXP_ULPS):
        ok = prop_matches_oracle(_fast_exp_kernel(ulps), LONG_SLOW)
        assert ok.passed, ok
    broken = (load_policy().k + 1) * max(FAST_EXP_ULPS, 1)
    bad = prop_matches_oracle(_fast_exp_kernel(broken), LONG_SLOW)
    assert not bad.passed and {c.output for c in bad.comparisons if not c.passed} == {"y", "final_states"}


# -- the race: vLLM's timed call and its recorded autotune picks -----------------------------------

def test_the_race_times_vllm_through_prepared_calls(monkeypatch):
    from lab.bench import race
    from lab.bench.shapes import GROUPS
    made = []
    monkeypatch.setattr(adapter, "prepared", lambda **kw: made.append(kw["chunk_size"]) or (lambda: "ran"))
    runner = race.Runner(GROUPS["vsmoke"], ("vllm",), "/dev/null", budget_s=1, device="cpu")
    calls = runner.timed_calls("vllm", lookup("vllm"), [{"x": 1}, {"x": 2}], 128)
    assert made == [128, 128] and [c() for c in calls] == ["ran", "ran"]   # built before any timing
    other = runner.timed_calls("torch-ref", lookup("torch-ref"), [{}], 64)
    assert isinstance(other[0], functools.partial)


def test_the_race_refuses_first_config_vllm(monkeypatch, capsys):
    from lab.bench import race
    monkeypatch.setenv("VLLM_TRITON_FORCE_FIRST_CONFIG", "1")
    assert race.main(["--group", "vsmoke", "--out", "/tmp/unused"]) == 2
    assert "VLLM_TRITON_FORCE_FIRST_CONFIG is set" in capsys.readouterr().err


def test_vllm_groups_cover_the_grid_and_fit_a_command():
    from lab.bench.shapes import GROUPS, ORDER, grid
    vgroups = [GROUPS[n] for n in ORDER if n.startswith("v") and n != "vsmoke"]
    assert {s for g in vgroups for s in g.shapes} == set(grid())
    assert all("vllm" in g.impls and "mamba-ssm" in g.impls and g.est_min <= 9.5 for g in vgroups)
    assert {sid for g in vgroups for sid in g.tilegym_shapes} == {
        sid for n in ("tg64", "tg128", "tg256") for sid in GROUPS[n].tilegym_shapes}


def test_recorded_vllm_picks_round_trip(tmp_path, monkeypatch):
    """save() writes launch_autotuned's cache; install() fills an empty one so the keys never retune."""
    from lab.bench import vllm_tuning

    class Picked:                                   # a Triton config as launch_autotuned keeps it
        pre_hook = None

        def all_kwargs(self):
            return {"BLOCK_SIZE_H": 16, "num_warps": 4, "num_stages": 3}

    base = vllm_tuning.HELPERS.rpartition(".")[0]
    kernels = {n: object() for n in vllm_tuning.KERNELS}
    for mod in set(vllm_tuning.KERNELS.values()):
        monkeypatch.setitem(sys.modules, f"{base}.{mod}", types.SimpleNamespace(
            **{n: k for n, k in kernels.items() if vllm_tuning.KERNELS[n] == mod}))
    helpers = types.SimpleNamespace(_autotuned_configs={
        (kernels["_chunk_cumsum_fwd_kernel"], 256, 32, torch.float32, None, torch.bfloat16): Picked()})
    monkeypatch.setitem(sys.modules, vllm_tuning.HELPERS, helpers)
    path = tmp_path / "vllm-tuning.json"
    t = vllm_tuning.Tuning(path, "NVIDIA H200", "3.6.0", "0.33.0")
    assert t.tuned_since_install() == 1 and t.save() == 1
    helpers._autotuned_configs.clear()
    again = vllm_tuning.Tuning(path, "NVIDIA H200", "3.6.0", "0.33.0")
    assert again.install() == 1 and again.tuned_since_install() == 0
    (key, config), = helpers._autotuned_configs.items()
    assert key == (kernels["_chunk_cumsum_fwd_kernel"], 256, 32, torch.float32, None, torch.bfloat16)
    assert config.all_kwargs() == Picked().all_kwargs() and config.pre_hook is None
    helpers._autotuned_configs.clear()
    assert vllm_tuning.Tuning(path, "NVIDIA B200", "3.6.0", "0.33.0").install() == 0   # another GPU: not used


# -- per-sequence initial states in the oracles and the property ------------------------------------

PER_SEQ = SSDProblem(batch=1, seqlen=45, nheads=2, headdim=4, dstate=4, chunk_size=16, initial_states=True,
                     seq_starts=(20, 21, 37), varlen=True, D="h", seed=5)


def test_oracles_agree_on_per_sequence_initial_states():
    from oracles import ssd_quadratic_f64, ssd_recurrence_f64
    kw = PER_SEQ.inputs()
    kw["initial_states"] = torch.randn(4, 2, 4, 4, generator=torch.Generator().manual_seed(2))
    outs = [f(**kw) for f in (ssd_chunked_f64, ssd_quadratic_f64, ssd_recurrence_f64)]
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_per_sequence_states_of_a_row_state_and_zeros_equal_the_row_convention():
    """Two independent paths: per-sequence states (h0, 0, 0, 0) run each sequence alone; a row's h0 runs
    the packed seq_idx algorithm."""
    kw = PER_SEQ.inputs()
    row = ssd_chunked_f64(**kw)
    h0 = kw["initial_states"]
    per = ssd_chunked_f64(**{**kw, "initial_states": torch.cat([h0, torch.zeros(3, *h0.shape[1:])])})
    for a, b in zip(row, per):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def _oracle_impl(drop_states_after: int | None = None):
    """The fp32 yardstick as an implementation declaring per-sequence initial states; with
    `drop_states_after`, a broken one that zeroes the per-sequence states from that sequence on."""
    from oracles import ssd_yardstick

    def fn(**kw):
        h0 = kw.get("initial_states")
        if drop_states_after is not None and h0 is not None and kw.get("cu_seqlens") is not None \
                and h0.shape[0] > 1:
            h0 = h0.clone()
            h0[drop_states_after:] = 0
            kw["initial_states"] = h0
        return functools.partial(ssd_yardstick, state_dtype="fp32")(**kw)
    info = lookup("torch-ref")
    return info.replace(fn=fn, options=info.options | {"varlen_initial_states"}, device="cpu")


def test_the_property_passes_a_correct_implementation_and_fails_a_broken_one():
    from properties.invariants import prop_per_sequence_initial_states
    ok = prop_per_sequence_initial_states(_oracle_impl(), PER_SEQ)
    assert ok.passed and not ok.skipped, ok
    bad = prop_per_sequence_initial_states(_oracle_impl(drop_states_after=1), PER_SEQ)
    assert not bad.passed
    skipped = prop_per_sequence_initial_states(lookup("torch-ref"), PER_SEQ)
    assert skipped.skipped == "no per-sequence initial states (varlen_initial_states)"


@pytest.fixture
def fragment(tmp_path, monkeypatch):
    """The published fragment unpacked, its stand-ins installed; every vllm module removed afterwards."""
    try:
        tarball = peer_file("vllm")
    except PeerSourceMissing as e:
        pytest.skip(str(e))
    with tarfile.open(tarball, "r:gz") as tar:
        tar.extractall(tmp_path, filter="data")
    root = str(tmp_path / vllm_files.TOP)
    monkeypatch.setenv(vllm_files.SRC_ENV, root)
    yield root
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.mark.skipif(HAS_TRITON, reason="with triton the fragment's own files use it, not vLLM's placeholders")
def test_the_stand_ins_answer_every_import_of_the_kernel_modules(fragment, monkeypatch):
    """Without triton, vLLM's own files fall back to their placeholders (triton_utils/importing.py), so
    the kernel modules import here: every module outside the fragment that they ask for is stood in."""
    vllm_files.install_stand_ins(fragment)
    base = vllm_files.OPS.replace("/", ".")
    for mod in ("triton_helpers", "ssd_bmm", "ssd_chunk_state", "ssd_state_passing", "ssd_chunk_scan"):
        m = importlib.import_module(f"{base}.{mod}")
        assert m.__file__.startswith(fragment), m.__file__        # vLLM's file, not a stand-in
    softplus = sys.modules[f"{base}.ssd_chunk_state"].softplus
    assert softplus.__code__.co_filename.endswith("ops/mamba_ssm.py")   # vLLM's own softplus
    assert softplus.__code__.co_firstlineno == 202      # l.202-205, the branch without Triton 3 (none here)
    scan = sys.modules[f"{base}.ssd_chunk_scan"]
    assert scan._drop_racy_wgmma_configs(["a", "b"]) == ["a", "b"]        # not CUDA sm90: nothing dropped
    envs = sys.modules["vllm.envs"]
    monkeypatch.setenv("VLLM_TRITON_FORCE_FIRST_CONFIG", "1")
    assert envs.VLLM_TRITON_FORCE_FIRST_CONFIG is True
    monkeypatch.delenv("VLLM_TRITON_FORCE_FIRST_CONFIG")
    assert envs.VLLM_TRITON_FORCE_FIRST_CONFIG is False and envs.VLLM_TRITON_USE_TD is None
    # ssd_combined.py l.249: on a CPU platform vLLM swaps in its CPU module, which is not published
    with pytest.raises(ImportError, match=r"ops\.cpu"):
        importlib.import_module(f"{base}.ssd_combined")
    with pytest.raises(RuntimeError, match="a real vllm package is already imported"):
        sys.modules["vllm"] = type(sys)("vllm")
        vllm_files.install_stand_ins(fragment)


def test_recorded_vllm_picks_are_written_one_per_line_and_read_back_unchanged():
    """lab.bench.vllm_tuning.dumps: valid JSON that loads back to the same schema and entries, one entry per
    line (the tracked file stays small and a new pick is a one-line diff)."""
    from lab.bench import vllm_tuning
    entries = [{"kernel": "_bmm_chunk_fwd_kernel", "key": [64, 128, True, {"dtype": "bfloat16"}, None],
                "config": {"BLOCK_SIZE_M": 64, "num_warps": 4}, "device": "NVIDIA H200", "triton": "3.6.0",
                "vllm": "0.33.0", "tuned": "2026-12-03T07:40:03+00:00"}] * 3
    text = vllm_tuning.dumps(entries)
    assert json.loads(text) == {"schema": vllm_tuning.SCHEMA, "entries": entries}
    assert len(text.splitlines()) == 2 + len(entries)
