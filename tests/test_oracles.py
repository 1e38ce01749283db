"""Testing the tests: the three float64 oracles agree, stage by stage too, and the yardstick lands a
sane, dtype-sized distance from them, bit-for-bit the same on every call."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from oracles import (
    chunk_cumsum_f64,
    chunk_scan_f64,
    chunk_state_f64,
    ssd_chunked_f64,
    ssd_quadratic_f64,
    ssd_recurrence_f64,
    ssd_yardstick,
    state_passing_f64,
)
from oracles.yardstick import _round_tf32, _truncate_tf32

F64_AGREEMENT = 1e-12  # normwise relative; measured ~3e-16
CS = 16
DECAYS = (0.0, 1e-2, 1.0, 1e2)  # |A * dt| * chunk_size: none, weak, moderate, strong
SEEDS = (0, 1, 2)


def _seq_from_bounds(seqlen, starts, batch):
    """seq_idx (batch, seqlen) int32 with a new sequence at every position in `starts`."""
    row = torch.zeros(seqlen, dtype=torch.int32)
    for s in starts:
        row[s:] += 1
    return row.expand(batch, seqlen).contiguous()


def _problem(seed, *, batch=2, seqlen=3 * CS + 5, nheads=4, headdim=8, ngroups=2, dstate=8,
             decay=1.0, D=None, z=False, dt_bias=False, softplus=False, dt_limit=None, init=False,
             seq_starts=None, cu_seqlens=None, final=True):
    """Random inputs at realistic scales -> (args, kwargs) for the mamba_chunk_scan_combined signature.

    x, B, C, z ~ N(0, 1); dt = softplus(N(-1, 1)) (or that pre-activation with dt_softplus);
    A < 0 per head, spread x0.5..x2 around the value giving |A * dt| * chunk_size = decay.
    """
    g = torch.Generator().manual_seed(seed)
    b, l, h, p, n = batch, seqlen, nheads, headdim, dstate

    def normal(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    pre = normal(b, l, h) - 1.0
    dt = pre if softplus else F.softplus(pre)
    spread = torch.exp2(2 * torch.rand(h, generator=g) - 1)
    A = -decay / (CS * 0.45) * spread  # 0.45 ~ mean of softplus(N(-1, 1))
    kw = dict(return_final_states=final)
    if D == "h":
        kw["D"] = normal(h)
    elif D == "hp":
        kw["D"] = normal(h, p)
    if z:
        kw["z"] = normal(b, l, h, p)
    if dt_bias:
        kw["dt_bias"] = 0.5 * normal(h)
    if softplus:
        kw["dt_softplus"] = True
    if dt_limit is not None:
        kw["dt_limit"] = dt_limit
    if init:
        kw["initial_states"] = normal(b, h, p, n)
    if seq_starts is not None:
        kw["seq_idx"] = _seq_from_bounds(l, seq_starts, b)
    if cu_seqlens is not None:
        kw["cu_seqlens"] = torch.tensor(cu_seqlens, dtype=torch.int32)
        kw["return_varlen_states"] = True
    args = (normal(b, l, h, p), dt, A, normal(b, l, ngroups, n), normal(b, l, ngroups, n), CS)
    return args, kw


def _as_tuple(res):
    """An oracle's result (a tensor or a tuple of them) as a tuple."""
    return res if isinstance(res, tuple) else (res,)


def _rel(a, ref):
    """Normwise relative error ||a - ref|| / ||ref|| (absolute when ref is all zeros)."""
    a, ref = a.double(), ref.double()
    return ((a - ref).norm() / ref.norm().clamp_min(1e-300)).item() if ref.norm() > 0 else a.norm().item()


CASES = {
    "len1": dict(seqlen=1),
    "cs-1": dict(seqlen=CS - 1, D="h"),
    "cs+1": dict(seqlen=CS + 1, D="hp", z=True),
    "multiple": dict(seqlen=4 * CS, ngroups=1, init=True),
    "odd-groups": dict(seqlen=3 * CS + 5, nheads=4, ngroups=4, init=True, D="h", z=True),
    "dt-path": dict(dt_bias=True, softplus=True, dt_limit=(0.05, 0.9), D="hp"),
    "dt-bias-only": dict(dt_bias=True, init=True),
    "seq-inside": dict(seq_starts=(5, 21, 22, 40), init=True, D="h", z=True),
    "seq-edges": dict(seq_starts=(CS, 2 * CS), init=True),
    "varlen": dict(batch=1, seq_starts=(7, 7 + CS, 2 * CS), cu_seqlens=(0, 7, 7 + CS, 2 * CS, 3 * CS + 5),
                   init=True, D="h"),
    "varlen-h0-kept": dict(batch=1, seq_starts=(CS + 3, 2 * CS), cu_seqlens=(0, CS + 3, 2 * CS, 2 * CS, 3 * CS + 5),
                           init=True, z=True),
    "varlen-one-seq": dict(batch=1, seqlen=CS + 1, seq_starts=(), cu_seqlens=(0, CS + 1), init=True, final=False),
    # sequence 0 ends inside chunk 0, then on its last token: initial_states still reach its state
    "varlen-short-h0": dict(batch=1, seq_starts=(5, CS), cu_seqlens=(0, 5, CS, 3 * CS + 5), init=True),
    "varlen-h0-edge": dict(batch=1, seq_starts=(CS,), cu_seqlens=(0, CS, 3 * CS + 5), init=True, z=True),
    "varlen-empty-first": dict(batch=1, seq_starts=(7,), cu_seqlens=(0, 0, 7, 3 * CS + 5), init=True),
}


@pytest.mark.parametrize("decay", DECAYS, ids=lambda d: f"decay{d:g}")
@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_f64_oracles_agree(case, decay):
    for seed in SEEDS:
        args, kw = _problem(seed, decay=decay, **CASES[case])
        ref = _as_tuple(ssd_recurrence_f64(*args, **kw))
        for oracle in (ssd_quadratic_f64, ssd_chunked_f64):
            got = _as_tuple(oracle(*args, **kw))
            assert len(got) == len(ref)
            for name, a, r in zip(("out", "states", "varlen_states"), got, ref):
                assert a.dtype == torch.float64 and a.shape == r.shape, name
                err = _rel(a, r)
                assert err <= F64_AGREEMENT, f"{oracle.__name__} {name} seed={seed}: rel err {err:.3g}"


def test_return_convention():
    args, kw = _problem(0, **CASES["varlen"])
    kw.update(return_final_states=False, return_varlen_states=False)
    for oracle in (ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64, ssd_yardstick):
        assert isinstance(oracle(*args, **kw), torch.Tensor)
        out, varlen = oracle(*args, **{**kw, "return_varlen_states": True})
        assert out.shape == args[0].shape and varlen.shape == (4, 4, 8, 8)
        out, final = oracle(*args, **{**kw, "return_final_states": True})
        assert final.shape == (1, 4, 8, 8)
        assert len(oracle(*args, **{**kw, "return_final_states": True, "return_varlen_states": True})) == 3


def _final_of(args, lo, hi, h0=None):
    """The recurrence's final state of tokens [lo, hi) of batch 0, run alone from h0 (None: zero)."""
    x, dt, A, B, C, cs = args
    cut = [t[:1, lo:hi] for t in (x, dt)] + [A] + [t[:1, lo:hi] for t in (B, C)] + [cs]
    return ssd_recurrence_f64(*cut, initial_states=h0, return_final_states=True)[1][0]


@pytest.mark.parametrize("seq0_len", (1, CS - 1, CS, CS + 1, CS + 3))
def test_varlen_state0_includes_initial_states(seq0_len):
    """Varlen state 0 is the state after sequence 0's last token, started from initial_states, at any
    chunk size: mamba_ssm 2.3.2.post1 leaves them out when sequence 0 ends inside chunk 0 or on its
    last token (docs/findings/mamba-ssm-varlen-state0.md); the oracles do the math."""
    args, kw = _problem(3, batch=1, seqlen=2 * CS, init=True, final=False,
                        cu_seqlens=(0, seq0_len, 2 * CS), seq_starts=(seq0_len,))
    expect = [_final_of(args, 0, seq0_len, kw["initial_states"]), _final_of(args, seq0_len, 2 * CS)]
    for oracle in (ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64):
        for cs in (CS, 2 * CS, 4 * CS):
            _, varlen = oracle(*args[:5], cs, **kw)
            for i, want in enumerate(expect):
                assert _rel(varlen[i], want) <= F64_AGREEMENT, f"{oracle.__name__} chunk {cs} state {i}"


@pytest.mark.parametrize("cu, starts", [((0, 0, 5, 2 * CS), (5,)), ((0, 5, 5, 2 * CS), (5,)),
                                        ((0, 2 * CS, 2 * CS), ()), ((0, 0, 0, 2 * CS), ())],
                         ids=["empty-first", "empty-middle", "empty-last", "two-empty-first"])
def test_varlen_empty_sequences(cu, starts):
    """An empty sequence's state is zero; initial_states belong to the sequence holding token 0 (seq_idx
    0), even when empty sequences precede it in cu_seqlens (docs/contract.md)."""
    args, kw = _problem(12, batch=1, seqlen=2 * CS, init=True, final=False, cu_seqlens=cu, seq_starts=starts)
    h0 = kw["initial_states"]
    expect = []
    for lo, hi in zip(cu[:-1], cu[1:]):
        expect.append(torch.zeros_like(h0[0], dtype=torch.float64) if hi == lo
                      else _final_of(args, lo, hi, h0 if lo == 0 else None))
    for oracle in (ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64):
        _, varlen = oracle(*args, **kw)
        for i, want in enumerate(expect):
            assert _rel(varlen[i], want) <= F64_AGREEMENT, f"{oracle.__name__} state {i}"


def test_default_dt_limit_clamps_negative_dt():
    """mamba_ssm's _chunk_cumsum_fwd_kernel clamps to dt_limit even at the default (0, inf), so a
    negative dt acts as 0; every oracle (and the yardstick) does the same."""
    args, kw = _problem(11, init=True)
    x, dt, A, B, C, cs = args
    signed = dt - 0.3  # some steps negative
    for oracle in (ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64, ssd_yardstick):
        got = oracle(x, signed, A, B, C, cs, **kw)
        want = oracle(x, signed.clamp(min=0.0), A, B, C, cs, **kw)
        assert all(torch.equal(a, b) for a, b in zip(got, want)), oracle.__name__


@pytest.mark.parametrize("seqlen", (CS - 3, 2 * CS + 5))
def test_chunk_cumsum_padding(seqlen):
    args, kw = _problem(4, seqlen=seqlen, dt_bias=True, softplus=True)
    dt, A = args[1], args[2]
    dA_cs, dt_out = chunk_cumsum_f64(dt, A, CS, dt_bias=kw["dt_bias"], dt_softplus=True)
    nchunks = -(-seqlen // CS)
    assert dA_cs.shape == dt_out.shape == (2, 4, nchunks, CS)
    flat_dt = dt_out.permute(0, 2, 3, 1).reshape(2, -1, 4)
    assert torch.equal(flat_dt[:, seqlen:], torch.zeros_like(flat_dt[:, seqlen:]))
    expect = F.softplus(dt.double() + kw["dt_bias"].double())
    assert _rel(flat_dt[:, :seqlen], expect) <= F64_AGREEMENT
    last_valid = (seqlen - 1) % CS
    tail = dA_cs[:, :, -1, last_valid:]
    assert torch.equal(tail, tail[..., :1].expand_as(tail))


@pytest.mark.parametrize("case", ["odd-groups", "seq-inside", "seq-edges", "cs+1"])
@pytest.mark.parametrize("decay", (1e-2, 1.0, 1e2), ids=lambda d: f"decay{d:g}")
def test_chunked_stages_match_recurrence(case, decay):
    """Each stage against the recurrence: the state entering chunk c is the recurrence's state after
    token c*CS - 1; chunk_state alone is a zero-start recurrence over one chunk (no seq_idx); the scan
    fed the recurrence's states reproduces the output."""
    args, kw = _problem(5, decay=decay, **CASES[case])
    x, dt, A, B, C, _ = args
    seq_idx, h0 = kw.get("seq_idx"), kw.get("initial_states")
    dA_cs, dt_out = chunk_cumsum_f64(dt, A, CS)
    states = chunk_state_f64(B, x, dt_out, dA_cs, seq_idx)
    states_in, final = state_passing_f64(states, dA_cs, h0, seq_idx)
    l = x.shape[1]
    nchunks = states.shape[1]
    prefix_states = [h0.double() if h0 is not None else torch.zeros_like(states_in[:, 0])]
    for c in range(1, nchunks + 1):
        e = min(c * CS, l)
        cut = dict(initial_states=h0, seq_idx=None if seq_idx is None else seq_idx[:, :e])
        prefix_states.append(ssd_recurrence_f64(x[:, :e], dt[:, :e], A, B[:, :e], C[:, :e], CS,
                                                return_final_states=True, **cut)[1])
    assert _rel(states_in, torch.stack(prefix_states[:-1], dim=1)) <= F64_AGREEMENT
    assert _rel(final, prefix_states[-1]) <= F64_AGREEMENT
    if seq_idx is None:
        for c in range(nchunks):
            sl = slice(c * CS, min((c + 1) * CS, l))
            alone = ssd_recurrence_f64(x[:, sl], dt[:, sl], A, B[:, sl], C[:, sl], CS, return_final_states=True)[1]
            assert _rel(states[:, c], alone) <= F64_AGREEMENT
    out = chunk_scan_f64(B, C, x, dt_out, dA_cs, torch.stack(prefix_states[:-1], dim=1),
                         D=kw.get("D"), z=kw.get("z"), seq_idx=seq_idx)
    ref = ssd_recurrence_f64(*args, D=kw.get("D"), z=kw.get("z"), initial_states=h0, seq_idx=seq_idx)
    assert _rel(out, ref) <= F64_AGREEMENT


def test_oracles_reject_bad_arguments():
    args, kw = _problem(0)
    bad_A = torch.zeros(3)
    for oracle in (ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64, ssd_yardstick):
        with pytest.raises(ValueError, match="A"):
            oracle(args[0], args[1], bad_A, *args[3:], **kw)
    with pytest.raises(ValueError, match="state_dtype"):
        ssd_yardstick(*args, state_dtype="fp16")


# ---- the yardstick -------------------------------------------------------------------------------

YARDSTICK = dict(init=True, seq_starts=(5, 2 * CS), D="h", z=True, dt_bias=True, softplus=True)
# (dtype, state_dtype, matmul) -> largest allowed normwise rel error of out vs the f64 oracle
YARDSTICK_LIMITS = {
    (torch.float32, "fp32", "ieee"): 1e-5,
    (torch.float32, "input", "tf32"): 3e-3,
    (torch.float32, "input", "tf32-trunc"): 3e-3,
    (torch.float16, "fp32", "ieee"): 5e-3,
    (torch.float16, "input", "ieee"): 5e-3,
    (torch.bfloat16, "fp32", "ieee"): 3e-2,
    (torch.bfloat16, "input", "tf32"): 3e-2,
}


def _in_dtype(args, kw, dtype):
    """Cast the tensors a kernel takes in the input dtype (x, B, C, z, initial_states)."""
    x, dt, A, B, C, cs = args
    kw = dict(kw)
    for k in ("z", "initial_states"):
        if k in kw:
            kw[k] = kw[k].to(dtype)
    return (x.to(dtype), dt, A, B.to(dtype), C.to(dtype), cs), kw


@pytest.mark.parametrize("dtype, state_dtype, matmul", list(YARDSTICK_LIMITS),
                         ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("decay", (1e-2, 1.0, 1e2), ids=lambda d: f"decay{d:g}")
def test_yardstick_near_f64(dtype, state_dtype, matmul, decay):
    args, kw = _in_dtype(*_problem(6, decay=decay, **YARDSTICK), dtype)
    out, final = ssd_yardstick(*args, **kw, state_dtype=state_dtype, matmul=matmul)
    ref_out, ref_final = ssd_chunked_f64(*args, **kw)
    assert out.dtype == dtype and final.dtype == torch.float32
    limit = YARDSTICK_LIMITS[(dtype, state_dtype, matmul)]
    assert _rel(out, ref_out) <= limit
    assert _rel(final, ref_final) <= limit


def test_yardstick_error_grows_as_precision_drops():
    """Guards against a yardstick that silently computes in high precision."""
    errs = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        args, kw = _in_dtype(*_problem(7, **YARDSTICK), dtype)
        errs[dtype] = _rel(ssd_yardstick(*args, **kw)[0], ssd_chunked_f64(*args, **kw)[0])
    assert 1e-9 < errs[torch.float32] < errs[torch.float16] / 10 < errs[torch.bfloat16] / 10
    args, kw = _in_dtype(*_problem(7, **YARDSTICK), torch.float32)
    tf32 = _rel(ssd_yardstick(*args, **kw, matmul="tf32")[0], ssd_chunked_f64(*args, **kw)[0])
    assert tf32 > 10 * errs[torch.float32]


@pytest.mark.parametrize("case", ["varlen", "varlen-short-h0"])
def test_yardstick_varlen(case):
    """The yardstick's varlen states sit a dtype-sized distance from the math: with sequence 0 inside
    chunk 0 ("varlen-short-h0") a yardstick missing initial_states is ~100% off and would set the budget."""
    for dtype, limit in ((torch.float32, 1e-5), (torch.bfloat16, 3e-2)):
        args, kw = _in_dtype(*_problem(8, **CASES[case]), dtype)
        got = ssd_yardstick(*args, **kw, state_dtype="input")
        ref = ssd_chunked_f64(*args, **kw)
        assert got[2].dtype == dtype
        for a, r in zip(got, ref):
            assert _rel(a, r) <= limit


def _bits(t):
    """The tensor's bits as a same-sized integer view, so -0.0 != 0.0 and NaN == NaN compare as bits."""
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16), ids=str)
def test_yardstick_bitwise_deterministic(dtype):
    args, kw = _in_dtype(*_problem(9, **CASES["varlen"]), dtype)
    for matmul in ("ieee", "tf32", "tf32-trunc"):
        first = ssd_yardstick(*args, **kw, state_dtype="input", matmul=matmul)
        again = ssd_yardstick(*args, **kw, state_dtype="input", matmul=matmul)
        for a, b in zip(first, again):
            assert torch.equal(_bits(a), _bits(b))


def test_round_tf32():
    ulp = 2.0 ** -10
    vals = torch.tensor([1 + ulp / 2, 1 + 1.5 * ulp, -(1 + 1.5 * ulp), 1 + 0.51 * ulp, 3.0, math.inf, -0.0])
    want = torch.tensor([1.0, 1 + 2 * ulp, -(1 + 2 * ulp), 1 + ulp, 3.0, math.inf, -0.0])
    assert torch.equal(_bits(_round_tf32(vals)), _bits(want))
    r = _round_tf32(torch.randn(1000, generator=torch.Generator().manual_seed(0)))
    assert torch.equal(_bits(r) & 0x1FFF, torch.zeros_like(_bits(r)))
    assert torch.isnan(_round_tf32(torch.tensor([math.nan]))).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_oracles_on_cuda():
    """The oracles run on the inputs' device and agree with the CPU recurrence; the yardstick is
    deterministic there too."""
    args, kw = _problem(10, **CASES["varlen"])
    dev = [a.cuda() if isinstance(a, torch.Tensor) else a for a in args]
    dkw = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    ref = ssd_recurrence_f64(*args, **kw)
    for oracle in (ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64):
        for a, r in zip(oracle(*dev, **dkw), ref):
            assert a.device.type == "cuda" and _rel(a.cpu(), r) <= F64_AGREEMENT
    for dtype in (torch.float32, torch.bfloat16):
        cargs, ckw = _in_dtype(dev, dkw, dtype)
        first = ssd_yardstick(*cargs, **ckw, state_dtype="input")
        assert torch.equal(_bits(first[0]), _bits(ssd_yardstick(*cargs, **ckw, state_dtype="input")[0]))


def test_truncate_tf32():
    ulp = 2.0 ** -10
    vals = torch.tensor([1 + ulp / 2, 1 + 1.9 * ulp, -(1 + 1.9 * ulp), 1 + ulp, 3.0, math.inf, -0.0])
    want = torch.tensor([1.0, 1 + ulp, -(1 + ulp), 1 + ulp, 3.0, math.inf, -0.0])
    assert torch.equal(_bits(_truncate_tf32(vals)), _bits(want))
    r = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    t = _truncate_tf32(r)
    assert torch.equal(_bits(t) & 0x1FFF, torch.zeros_like(_bits(t)))
    assert (t.abs() <= r.abs()).all() and (t.abs() < r.abs()).any()   # toward zero, never away
    assert torch.isnan(_truncate_tf32(torch.tensor([math.nan]))).all()
