"""The findings' scripts (docs/findings/) on the CPU: what they compute without a GPU is right, and the
line each names as the root cause is in the published peer source, where the write-up says."""
from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path

import pytest

from kernels.peers.mamba_ssm import varlen_state0_misses_initial_states
from kernels.peers.sources import PeerSourceMissing, peer_file
from oracles import ssd_recurrence_f64
from properties.problem import SSDProblem

ROOT = Path(__file__).resolve().parent.parent
FINDINGS = ROOT / "docs" / "findings"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, FINDINGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_varlen_state0_script_computes_the_math_and_shows_the_bug():
    s = _script("mamba_ssm_varlen_state0")
    kw = s.problem()
    ref = ssd_recurrence_f64(kw["x"], kw["dt"], kw["A"], kw["B"], kw["C"], s.CHUNKS[0],
                             initial_states=kw["initial_states"], seq_idx=kw["seq_idx"],
                             cu_seqlens=kw["cu_seqlens"], return_varlen_states=True)[1]
    got = s.varlen_states_f64(**kw)
    assert ((got - ref).norm() / ref.norm()).item() <= 1e-12
    starts = tuple(s.CU_SEQLENS[1:-1])
    meets = [varlen_state0_misses_initial_states(SSDProblem(batch=1, seqlen=s.SEQLEN, chunk_size=c, nheads=s.NHEADS,
                                                            headdim=s.HEADDIM, dstate=s.DSTATE, initial_states=True,
                                                            seq_starts=starts, varlen=True)) for c in s.CHUNKS]
    assert meets == [True, False]   # the first chunk size shows the bug, the second does not


def _mamba_tarball() -> str:
    try:
        return peer_file("mamba-ssm")
    except PeerSourceMissing as e:
        pytest.skip(str(e))


def test_varlen_state0_root_cause_line_is_where_the_finding_says():
    tarball = _mamba_tarball()
    s = _script("mamba_ssm_varlen_state0")
    with tarfile.open(tarball) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("mamba_ssm/ops/triton/ssd_chunk_state.py"))
        text = tf.extractfile(member).read().decode()
    assert text.count(s.FIX[0]) == 1
    line = text[:text.index(s.FIX[0])].count("\n") + 1
    assert line == 701 and "ssd_chunk_state.py:701" in (FINDINGS / "mamba-ssm-varlen-state0.md").read_text()
    assert "end_idx = tl.load(cu_seqlens_ptr + pid_b + 1)" in text   # the fix reads a name the kernel defines


def test_varlen_state0_script_applies_its_fix_to_a_copy(tmp_path):
    tarball = _mamba_tarball()
    s = _script("mamba_ssm_varlen_state0")
    with tarfile.open(tarball) as tf:
        tf.extractall(tmp_path, filter="data")
    pkg = s.find_package(str(next(tmp_path.iterdir())))
    fixed = Path(s.with_fix(pkg))
    text = (fixed / s.BUGGY_FILE).read_text()
    assert s.FIX[1] in text and s.FIX[0] not in text
    assert s.FIX[0] in (Path(pkg) / s.BUGGY_FILE).read_text()   # the original is left as it was
    assert s.version(pkg) == "2.3.2.post1"
