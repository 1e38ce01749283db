"""The peer adapters on a CPU machine without the peers: they import, declare what the peers support,
reject what they don't (naming the argument) before touching the peer, and convert arguments only."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from kernels import torch_ref
from kernels.contract import SSDArgumentError
from kernels.peers import PeerUnavailable
from kernels.registry import ALL_OPTIONS, UnsupportedProblem, lookup
from properties.problem import SSDProblem


def test_adapters_import_without_their_peers():
    code = ("import sys, kernels.peers.tilegym, kernels.peers.mamba_ssm\n"
            "from kernels.registry import lookup\n"
            "lookup('tilegym'); lookup('mamba-ssm')\n"
            "bad = [m for m in ('tilegym', 'mamba_ssm', 'triton', 'cuda.tile', 'einops') if m in sys.modules]\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------- what each INFO declares

def test_tilegym_declares_its_real_capabilities():
    info = lookup("tilegym")
    assert info.name == "tilegym" and info.device == "cuda"
    assert info.seqlen_multiple_of_chunk and info.nheads_multiple_of == 4
    assert info.options == {"D", "initial_states", "final_states", "ngroups", "dt_input_dtype",
                            "states_input_dtype", "params_input_dtype"}   # the last two converted on the host
    for missing in ("z", "seq_idx", "varlen_states", "dt_bias", "dt_softplus", "dt_limit", "D_headdim"):
        assert not info.supports(missing)
    assert 64 in info.chunk_sizes and set(info.chunk_sizes) <= {64, 128}
    assert info.state_dtype == "input" and info.matmul == "tf32"   # states in c.dtype, TF32 ct.mma
    assert "bfloat16" in info.dtypes
    assert all(n % 16 == 0 for n in info.dstates)
    assert info.stages is None and not info.bitwise_batch_invariant


def test_mamba_ssm_declares_the_whole_contract():
    info = lookup("mamba-ssm")
    assert info.name == "mamba-ssm" and info.device == "cuda"
    assert info.options == ALL_OPTIONS and not info.seqlen_multiple_of_chunk
    assert {64, 128, 256} <= set(info.chunk_sizes)
    assert info.headdims is None and info.dstates is None
    assert info.state_dtype == "input" and info.matmul == "tf32-trunc"   # out_dtype=C.dtype; Triton TF32 cuts
    assert set(info.stages) == {"chunk_cumsum", "chunk_state", "state_passing", "chunk_scan"}


# ---------------------------------------------------------------- rejected before the peer is touched

def _kw(**over):
    kw = SSDProblem(batch=2, seqlen=128, nheads=4, headdim=16, dstate=16, ngroups=2, chunk_size=64,
                    dtype="bfloat16", D="h", initial_states=True).inputs()
    kw.update(over)
    return kw


TILEGYM_REJECTS = [
    ("z", lambda kw: {"z": torch.zeros_like(kw["x"])}, r"^z: option 'z' is not supported by tilegym"),
    ("seq_idx", lambda kw: {"seq_idx": torch.zeros(2, 128, dtype=torch.int32)}, r"^seq_idx: option 'seq_idx' is not supported"),
    ("varlen", lambda kw: {"x": kw["x"][:1], "dt": kw["dt"][:1], "B": kw["B"][:1], "C": kw["C"][:1],
                           "initial_states": None, "cu_seqlens": torch.tensor([0, 64, 128], dtype=torch.int32),
                           "seq_idx": torch.tensor([[0] * 64 + [1] * 64], dtype=torch.int32),
                           "return_varlen_states": True}, r"^(seq_idx|return_varlen_states): option '(seq_idx|varlen_states)' is not supported"),
    ("dt_bias", lambda kw: {"dt_bias": torch.zeros(4)}, r"^dt_bias: option 'dt_bias' is not supported"),
    ("dt_softplus", lambda kw: {"dt_softplus": True}, r"^dt_softplus: option 'dt_softplus' is not supported"),
    ("dt_limit", lambda kw: {"dt_limit": (0.0, 1.0)}, r"^dt_limit: option 'dt_limit' is not supported"),
    ("D (h, p)", lambda kw: {"D": torch.ones(4, 16)}, r"^D: option 'D_headdim' is not supported"),
    ("chunk_size", lambda kw: {"chunk_size": 256}, r"^chunk_size: tilegym supports \(64, 128\), got 256"),
    ("seqlen", lambda kw: {"x": kw["x"][:, :100], "dt": kw["dt"][:, :100], "B": kw["B"][:, :100],
                           "C": kw["C"][:, :100]}, r"^x: tilegym needs seqlen divisible by chunk_size=64"),
    ("nheads", lambda kw: {"x": kw["x"][:, :, :2], "dt": kw["dt"][:, :, :2], "A": kw["A"][:2], "D": kw["D"][:2],
                           "initial_states": kw["initial_states"][:, :2]}, r"^x: tilegym needs nheads divisible by 4"),
    ("headdim", lambda kw: {"x": torch.zeros(2, 128, 4, 24, dtype=torch.bfloat16),
                            "initial_states": None}, r"^x: tilegym supports headdim"),
    ("dstate", lambda kw: {"B": kw["B"][..., :8], "C": kw["C"][..., :8], "initial_states": None},
     r"^B: tilegym supports dstate"),
]


@pytest.mark.parametrize("case,change,match", TILEGYM_REJECTS, ids=[c[0] for c in TILEGYM_REJECTS])
def test_tilegym_rejects_unsupported_arguments_by_name(case, change, match):
    kw = _kw()
    kw.update(change(kw))
    with pytest.raises(UnsupportedProblem, match=match):
        lookup("tilegym").fn(**kw)


def test_contract_errors_come_first_and_read_the_same():
    for name in ("tilegym", "mamba-ssm"):
        kw = _kw()
        kw["A"] = kw["A"][:3]
        with pytest.raises(SSDArgumentError, match=r"^A: expected shape"):
            lookup(name).fn(**kw)


def test_mamba_ssm_rejects_an_undeclared_chunk_size():
    with pytest.raises(UnsupportedProblem, match=r"^chunk_size: mamba-ssm supports"):
        lookup("mamba-ssm").fn(**_kw(chunk_size=48))


@pytest.mark.parametrize("name", ["tilegym", "mamba-ssm"])
def test_a_supported_call_on_cpu_says_the_peer_needs_a_gpu(name):
    with pytest.raises(PeerUnavailable, match="CUDA"):
        lookup(name).fn(**_kw(return_final_states=True))


# ---------------------------------------------------------------- the TileGym adapter converts arguments only

def _fake_tilegym(x, a, b, c, d, dt, init_state, chunk_size=64):
    """TileGym's signature and semantics (d and init_state required, final state returned), computed
    by torch-ref: lets the adapter's conversions run on the CPU."""
    assert d.dtype == torch.float32 and d.shape == (x.shape[2],)
    assert init_state.dtype == torch.float32 and init_state.shape == (x.shape[0], x.shape[2], x.shape[3], b.shape[3])
    assert a.dtype == torch.float32
    return torch_ref.ssd_forward(x, dt, a, b, c, chunk_size, D=d, initial_states=init_state, return_final_states=True)


@pytest.mark.parametrize("D", [None, "h"])
@pytest.mark.parametrize("init", [False, True])
@pytest.mark.parametrize("final", [False, True])
def test_tilegym_adapter_only_converts_arguments(monkeypatch, D, init, final):
    import kernels.peers.tilegym as tg
    monkeypatch.setattr(tg, "require_cuda", lambda peer, x: None)
    monkeypatch.setattr(tg, "_peer_fn", _fake_tilegym)
    kw = SSDProblem(batch=2, seqlen=128, nheads=4, headdim=16, dstate=16, ngroups=2, chunk_size=64,
                    dtype="float32", D=D, initial_states=init, final_states=final, seed=3).inputs()
    if init:   # a bf16 start state must reach TileGym as fp32 (exactly)
        kw["initial_states"] = kw["initial_states"].to(torch.bfloat16)
    got = tg.tilegym_forward(**kw)
    ref = torch_ref.ssd_forward(**kw)
    got, ref = (got, ref) if final else ((got,), (ref,))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and torch.equal(g, r)


# ---------------------------------------------------------------- loading mamba_ssm without its __init__

@pytest.fixture
def clean_mamba_modules(monkeypatch):
    from kernels.peers import mamba_ssm as adapter
    monkeypatch.delenv(adapter.SRC_ENV, raising=False)
    saved = {k: v for k, v in sys.modules.items() if k == "mamba_ssm" or k.startswith("mamba_ssm.")}
    for k in saved:
        del sys.modules[k]
    yield adapter
    for k in [k for k in sys.modules if k == "mamba_ssm" or k.startswith("mamba_ssm.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def _fake_source_tree(root):
    pkg = root / "mamba_ssm-9.9" / "mamba_ssm"
    (pkg / "ops" / "triton").mkdir(parents=True)
    (pkg / "utils").mkdir()
    (pkg / "__init__.py").write_text('__version__ = "9.9"\nimport selective_scan_cuda_that_is_not_built\n')
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "triton" / "__init__.py").write_text("")
    (pkg / "utils" / "__init__.py").write_text("")
    (pkg / "utils" / "helper.py").write_text("VALUE = 7\n")
    (pkg / "ops" / "triton" / "ssd_combined.py").write_text(textwrap.dedent("""
        from mamba_ssm.utils.helper import VALUE
        def mamba_chunk_scan_combined(*args, **kwargs):
            return VALUE
    """))
    return pkg.parent


def test_mamba_ssm_loads_without_running_its_package_init(clean_mamba_modules, tmp_path):
    adapter = clean_mamba_modules
    top = _fake_source_tree(tmp_path)
    module = adapter.load_ssd_combined(search_path=["/nonexistent", str(top)])
    assert module.mamba_chunk_scan_combined() == 7
    stub = sys.modules["mamba_ssm"]
    assert stub.__ssdcheck_stub__ and stub.__version__ == "9.9"
    assert stub.__path__ == [str(top / "mamba_ssm")]


def test_mamba_ssm_source_folder_from_the_environment(clean_mamba_modules, tmp_path, monkeypatch):
    adapter = clean_mamba_modules
    top = _fake_source_tree(tmp_path)
    monkeypatch.setenv(adapter.SRC_ENV, str(top / "mamba_ssm"))
    assert adapter.find_package_dir(search_path=[]) == str(top / "mamba_ssm")


def test_mamba_ssm_missing_source_is_a_clear_error(clean_mamba_modules, tmp_path):
    with pytest.raises(PeerUnavailable, match="SSDCHECK_MAMBA_SSM_SRC"):
        clean_mamba_modules.load_ssd_combined(search_path=[str(tmp_path)])


# ---------------------------------------------------------------- the GPU script's per-test summary

def test_gpu_run_summary_names_each_outcome_and_the_repro():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "lab" / "scripts" / "summarize_pytest.py"
    spec = importlib.util.spec_from_file_location("summarize_pytest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    render, summarize = module.render, module.summarize
    repro = 'reproduce: pytest tests/test_properties.py -k x --impl tilegym --ssd-problem "SSDProblem(seed=1)"'
    recs = [
        {"event": "start", "nodeid": "t.py::test_a[tilegym]"},
        {"event": "report", "nodeid": "t.py::test_a[tilegym]", "when": "setup", "outcome": "passed", "duration": 0.1, "text": ""},
        {"event": "report", "nodeid": "t.py::test_a[tilegym]", "when": "call", "outcome": "failed", "duration": 2.0,
         "text": f"long traceback\nE   AssertionError: out not within budget: tilegym bfloat16 cs64\nE   {repro}\n"},
        {"event": "start", "nodeid": "t.py::test_b[mamba-ssm]"},
        {"event": "report", "nodeid": "t.py::test_b[mamba-ssm]", "when": "setup", "outcome": "skipped", "duration": 0.0,
         "text": "('conftest.py', 90, 'Skipped: mamba-ssm needs a CUDA GPU')"},
        {"event": "start", "nodeid": "t.py::test_c[tilegym]", "t": 100.0},
        {"event": "report", "nodeid": "t.py::test_c[tilegym]", "when": "setup", "outcome": "passed", "duration": 0.0, "text": "",
         "t": 100.5},
        {"event": "report", "nodeid": "t.py::test_b[mamba-ssm]", "when": "teardown", "outcome": "passed", "duration": 0.0,
         "text": "", "t": 612.0},
    ]
    rows, counts = summarize(recs)
    assert counts == {"FAIL": 1, "SKIP": 1, "INTERRUPTED": 1}
    fail = rows[0]
    assert fail["detail"] == "AssertionError: out not within budget: tilegym bfloat16 cs64"
    assert "--ssd-problem" in fail["repro"]
    assert rows[1]["detail"] == "mamba-ssm needs a CUDA GPU"
    hung = rows[2]     # a test that never ends (TileGym's run in lab/reports/2026-12-01-peers-suite.md): how long it ran, not 0 s
    assert hung["duration"] == pytest.approx(512.0) and "512 s after it started" in hung["detail"]
    assert "INTERRUPTED" in render(rows, counts)


def test_mamba_ssm_stages_say_they_need_a_gpu():
    kw = _kw()
    with pytest.raises(PeerUnavailable, match="CUDA"):
        lookup("mamba-ssm").stages["chunk_cumsum"](kw["dt"], kw["A"], 64)


def test_tilegym_compile_key_holds_each_size_its_kernels_take_as_a_constant(tmp_path):
    """TileGym's kernels take the heads per group as a ct.Constant (a compile per value), so its compile
    key must tell 6 heads in 2 groups from 6 in 3; the check reads the constants from TileGym's
    published source where it is present. The JIT's generic key (size classes only) sees them alike."""
    import re
    from kernels.peers.sources import PeerSourceMissing
    from kernels.registry import jit_specialization_key
    from mutation.peer_copy import unpack
    from properties.problem import SSDProblem
    info = lookup("tilegym")
    a = SSDProblem(batch=1, seqlen=128, nheads=6, headdim=64, dstate=64, ngroups=2, chunk_size=64, dtype="bfloat16")
    b = a.replace(ngroups=3)
    assert jit_specialization_key(a, ignore=frozenset({"D", "initial_states", "final_states"})) == \
        jit_specialization_key(b, ignore=frozenset({"D", "initial_states", "final_states"}))
    assert info.compile_class(a) != info.compile_class(b)
    try:
        src = (unpack("tilegym", tmp_path) / "tilegym" / "ops" / "cutile" / "mamba2.py").read_text()
    except PeerSourceMissing as e:
        pytest.skip(f"TileGym's source: {e}")
    constants = set(re.findall(r"(\w+): ct\.Constant\[int\]", src))
    # every integer constant is a tile or latency choice of a fixed config, a problem size the key holds
    # exactly (chunk_size, head_size, state_size) or the heads per group
    sized = constants - {c for c in constants if c.isupper() and ("BLOCK" in c or "LAT" in c or c == "ND_LEN")}
    assert sized == {"chunk_size", "head_size", "state_size", "num_heads_per_group"}, sized


def test_tilegym_compile_key_holds_the_backwards_chunk_count_strides(tmp_path):
    """TileGym's backward allocates fp32 arrays of shape (b, h, nchunks) (dd and da), so cuTile's JIT
    sees whether nchunks and h * nchunks are multiples of 4 elements (16 bytes): 3 and 4 chunks of 6
    heads and 2 chunks are one class of the generic key (none divisible by 16) but three compiles here."""
    import re
    from kernels.peers.sources import PeerSourceMissing
    from kernels.registry import jit_specialization_key
    from mutation.peer_copy import unpack
    from properties.problem import SSDProblem
    info = lookup("tilegym")
    ignore = frozenset({"D", "initial_states", "final_states"})
    three = SSDProblem(batch=1, seqlen=192, nheads=6, headdim=64, dstate=64, ngroups=2, chunk_size=64, dtype="bfloat16")
    four, two = three.replace(seqlen=256), three.replace(seqlen=128)
    assert len({jit_specialization_key(p, ignore=ignore) for p in (two, three, four)}) == 1
    assert len({info.compile_class(p) for p in (two, three, four)}) == 3   # (nc % 4, h*nc % 4): 2 (no, yes), 3 (no, no), 4 (yes, yes)
    assert info.compile_class(three.replace(seqlen=5 * 64)) == info.compile_class(three)   # 5 and 3: alike
    try:
        src = (unpack("tilegym", tmp_path) / "tilegym" / "ops" / "cutile" / "mamba2.py").read_text()
    except PeerSourceMissing as e:
        pytest.skip(f"TileGym's source: {e}")
    chunk_arrays = re.findall(r"new_empty\(batch_size, num_heads, (?:num_chunks|num_tokens // chunk_size), "
                              r"dtype=torch\.float32\)", src)
    assert len(chunk_arrays) == 2, chunk_arrays
