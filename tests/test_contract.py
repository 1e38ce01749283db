"""Bad arguments get a clear error naming the argument; the registry resolves names and import paths."""
from __future__ import annotations

import math
import sys
import types

import pytest
import torch

from kernels.contract import SSDArgumentError
from kernels.registry import ALL_OPTIONS, KernelInfo, UnsupportedProblem, lookup
from properties.problem import SSDProblem, parse_problem


def _kw(**over):
    kw = SSDProblem(batch=2, seqlen=10, nheads=4, headdim=8, dstate=8, ngroups=2, chunk_size=16,
                    D="h", z=True, initial_states=True, seq_starts=(5,)).inputs()
    kw.update(over)
    return kw


def _expect(fn, kw, match):
    with pytest.raises((SSDArgumentError, UnsupportedProblem, ValueError, TypeError), match=match):
        fn(**kw)


BAD = [
    ("x rank", lambda kw: {"x": kw["x"][0]}, r"^x: expected a 4-dim"),
    ("dt shape", lambda kw: {"dt": kw["dt"][:, :5]}, r"^dt: expected shape"),
    ("A shape", lambda kw: {"A": kw["A"][:2]}, r"^A: expected shape"),
    ("B ngroups", lambda kw: {"B": torch.zeros(2, 10, 3, 8), "C": torch.zeros(2, 10, 3, 8)}, r"^B: expected ngroups"),
    ("C shape", lambda kw: {"C": kw["C"][:, :, :, :4]}, r"^C: expected shape"),
    ("D shape", lambda kw: {"D": torch.zeros(3)}, r"^D: expected shape"),
    ("z shape", lambda kw: {"z": kw["z"][:, :3]}, r"^z: expected shape"),
    ("dt_bias shape", lambda kw: {"dt_bias": torch.zeros(5)}, r"^dt_bias: expected shape"),
    ("initial_states", lambda kw: {"initial_states": torch.zeros(2, 4, 8, 9)}, r"^initial_states: expected shape"),
    ("seq_idx dtype", lambda kw: {"seq_idx": kw["seq_idx"].float()}, r"^seq_idx: expected an integer dtype"),
    ("seq_idx decreasing", lambda kw: {"seq_idx": torch.tensor([[0] * 5 + [1] * 4 + [0]] * 2)}, r"^seq_idx: expected non-decreasing"),
    ("seq_idx start", lambda kw: {"seq_idx": torch.ones(2, 10, dtype=torch.int32)}, r"^seq_idx: expected every row to start at 0"),
    ("B dtype mix", lambda kw: {"B": kw["B"].double()}, r"^B: expected x's dtype"),
    ("chunk_size", lambda kw: {"chunk_size": 0}, r"^chunk_size: expected a positive int"),
    ("chunk_size type", lambda kw: {"chunk_size": 16.0}, r"^chunk_size: expected a positive int"),
    ("dt_limit", lambda kw: {"dt_limit": (1.0, 0.5)}, r"^dt_limit: expected lo <= hi"),
    ("x dtype", lambda kw: {"x": kw["x"].to(torch.int32)}, r"^x: expected a floating dtype"),
    ("varlen without cu_seqlens", lambda kw: {"return_varlen_states": True}, r"^cu_seqlens: expected a tensor"),
    ("varlen batch", lambda kw: {"return_varlen_states": True, "cu_seqlens": torch.tensor([0, 5, 10])}, r"^x: expected batch == 1"),
    ("cu_seqlens end", lambda kw: {"cu_seqlens": torch.tensor([0, 5, 9])}, r"^cu_seqlens: expected non-decreasing offsets"),
    ("A not a tensor", lambda kw: {"A": [0.0] * 4}, r"^A: expected a torch.Tensor"),
]
if torch.cuda.is_available():
    BAD.append(("device mix", lambda kw: {"B": kw["B"].cuda()}, r"^B: expected a tensor on x's device"))


def _callables():
    from oracles import ssd_chunked_f64, ssd_quadratic_f64, ssd_recurrence_f64
    return {"torch-ref": lookup("torch-ref").fn, "recurrence_f64": ssd_recurrence_f64,
            "quadratic_f64": ssd_quadratic_f64, "chunked_f64": ssd_chunked_f64}


@pytest.mark.parametrize("fn_name", ["torch-ref", "recurrence_f64", "quadratic_f64", "chunked_f64"])
@pytest.mark.parametrize("case,change,match", BAD, ids=[b[0] for b in BAD])
def test_bad_argument_is_named(fn_name, case, change, match):
    kw = _kw()
    _expect(_callables()[fn_name], {**kw, **change(kw)}, match)


def test_device_mismatch_is_named_without_gpu():
    kw = _kw()
    meta_B = torch.empty(kw["B"].shape, dtype=kw["B"].dtype, device="meta")
    _expect(lookup("torch-ref").fn, {**kw, "B": meta_B}, r"^B: expected a tensor on x's device")


def test_unsupported_option_names_the_argument():
    ref = lookup("torch-ref")
    narrow = ref.replace(options=ref.options - {"z"})
    from kernels.registry import check_supported
    with pytest.raises(UnsupportedProblem, match=r"^z: option 'z' is not supported by torch-ref"):
        check_supported(narrow, dtype="float32", chunk_size=16, seqlen=10, headdim=8, dstate=8, ngroups=1,
                        options={"z"})
    with pytest.raises(UnsupportedProblem, match=r"^chunk_size: torch-ref supports"):
        check_supported(ref, dtype="float32", chunk_size=48, seqlen=10, headdim=8, dstate=8, ngroups=1, options=set())
    with pytest.raises(UnsupportedProblem, match=r"^chunk_size"):
        ref.fn(**_kw(chunk_size=48))


def test_unknown_implementation_names():
    with pytest.raises(ValueError, match=r"^impl: unknown implementation 'nope'; registered: torch-ref"):
        lookup("nope")
    with pytest.raises(ValueError, match=r"^impl: cannot import module 'no_such_pkg.mod'"):
        lookup("no_such_pkg.mod:fn")
    with pytest.raises(ValueError, match=r"has no attribute 'missing'"):
        lookup("kernels.torch_ref:missing")


def test_module_function_revisions(monkeypatch):
    """A revision declares itself with `fn.ssd_info`, or is assumed to support the full contract."""
    mod = types.ModuleType("user_rev")

    def declared(*a, **k):
        return None
    declared.ssd_info = KernelInfo(name="mine", fn=declared, device="cpu", chunk_sizes=(32,),
                                   options=frozenset({"D"}))

    def undeclared(*a, **k):
        return None
    mod.declared, mod.undeclared = declared, undeclared
    monkeypatch.setitem(sys.modules, "user_rev", mod)
    info = lookup("user_rev:declared")
    assert (info.name, info.chunk_sizes, info.fn) == ("user_rev:declared", (32,), declared)
    full = lookup("user_rev:undeclared")
    assert full.options == ALL_OPTIONS and full.device == "cuda"   # the whole contract, no extension
    assert lookup("kernels.torch_ref:ssd_forward").fn is lookup("torch-ref").fn


def test_keyinfo_rejects_unknown_fields():
    with pytest.raises(ValueError, match=r"options: unknown \['zz'\]"):
        KernelInfo(name="bad", fn=print, options=frozenset({"zz"}))


def test_problem_round_trips_through_repr():
    p = SSDProblem(seqlen=77, dt_limit=(0.05, math.inf), seq_starts=(3, 64), varlen=True, D="hp")
    assert parse_problem(repr(p)) == p
    with pytest.raises(ValueError, match="--ssd-problem"):
        parse_problem("__import__('os')")


def test_decay_decades_spreads_only_A_across_heads():
    """decay_decades log-spaces the heads' decays (the model-layer regime) and touches nothing else,
    so the other inputs of a seed, and every problem that leaves it at 0, reproduce as before."""
    base = SSDProblem(nheads=8, seqlen=128, decay=5.0, seed=3)
    wide = base.replace(decay_decades=3.0)
    assert parse_problem(repr(wide)) == wide
    a, b = base.inputs(), wide.inputs()
    for name in ("x", "dt", "B", "C"):
        assert torch.equal(a[name], b[name]), name
    # per head, |A| x mean dt x chunk_size is the per-chunk log-decay: decay x 10^(3 (k/7 - 1/2))
    per_chunk = -b["A"].double() * b["dt"].double().mean(dim=(0, 1)) * wide.chunk_size
    steps = torch.arange(8, dtype=torch.float64) / 7 - 0.5
    assert torch.allclose(per_chunk, 5.0 * 10.0 ** (3.0 * steps), rtol=1e-5)
    assert not torch.equal(a["A"], b["A"])
    with pytest.raises(ValueError, match="SSDProblem.decay_decades: expected >= 0"):
        SSDProblem(decay_decades=-1.0)
