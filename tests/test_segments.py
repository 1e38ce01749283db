"""The segmented walk (kernels/cutile: segment_state_kernel, segment_pass_kernel, then chunk_walk_kernel on
each segment), on the CPU: the three-pass decomposition in float64 against the sequential scan, the
launcher's plumbing (segment views, arguments, grids) with its kernels emulated, and where the dispatch
table and the force switch send a problem. The kernels themselves run on a GPU only
(lab/scripts/gpu_segments.sh); they compile on the CPU through kernels/cutile/compile_matrix.py.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from kernels.cutile import dispatch, launcher
from oracles import ssd_chunked_f64, ssd_recurrence_f64

LOG2E = math.log2(math.e)


def _problem(b=2, l=256, h=4, g=2, p=16, n=32, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, l, h, p, generator=gen, dtype=torch.float64)
    B = torch.randn(b, l, g, n, generator=gen, dtype=torch.float64)
    C = torch.randn(b, l, g, n, generator=gen, dtype=torch.float64)
    dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen, dtype=torch.float64) - 1.0)
    A = -torch.rand(h, generator=gen, dtype=torch.float64) * 0.5 - 0.05
    init = torch.randn(b, h, p, n, generator=gen, dtype=torch.float64)
    return {k: v.to(dtype) for k, v in dict(x=x, dt=dt, A=A, B=B, C=C).items()}, init.to(dtype)


# --------------------------------------------------------------------------- the decomposition, float64

BUGS = ("entering_from_zero", "decay_of_next_segment", "boundary_one_chunk_late", "end_state_not_decayed")


def segmented_f64(kw, starts, chunk_size=64, init=None, bug=None):
    """y and final state by the three passes, segments starting at token positions `starts` (0 first; a
    start may fall inside a chunk): pass 1 each segment's end state from zero (the chunked oracle on the
    segment) and its total decay sum(dt*A); pass 2 entering_(s+1) = exp(decay_s) entering_s + end_s from
    init; pass 3 each segment again from its entering state, writing y. `bug` plants one of BUGS."""
    x, dt, A, B, C = (kw[k] for k in ("x", "dt", "A", "B", "C"))
    b, l, h, p = x.shape
    n = B.shape[3]
    bounds = list(starts) + [l]
    if bug == "boundary_one_chunk_late":     # pass 3 walks segments that begin a chunk after pass 1's
        bounds3 = [0] + [min(s + chunk_size, l) for s in bounds[1:-1]] + [l]
    else:
        bounds3 = bounds
    ends, decays = [], []
    for s0, s1 in zip(bounds, bounds[1:]):
        part = {k: (v[:, s0:s1] if k != "A" else v) for k, v in kw.items()}
        _, end = ssd_chunked_f64(**part, chunk_size=chunk_size, return_final_states=True)
        ends.append(end)
        decays.append((dt[:, s0:s1] * A).sum(dim=1))           # (b, h), natural log
    carried = init.clone() if init is not None else torch.zeros(b, h, p, n, dtype=torch.float64)
    entering = []
    for s in range(len(ends)):
        entering.append(torch.zeros_like(carried) if bug == "entering_from_zero" else carried)
        d = decays[min(s + 1, len(ends) - 1)] if bug == "decay_of_next_segment" else decays[s]
        decayed = carried if bug == "end_state_not_decayed" else carried * torch.exp(d)[:, :, None, None]
        carried = decayed + ends[s]
    y = torch.empty_like(x)
    for s, (s0, s1) in enumerate(zip(bounds3, bounds3[1:])):
        if s0 == s1:
            continue
        part = {k: (v[:, s0:s1] if k != "A" else v) for k, v in kw.items()}
        y[:, s0:s1] = ssd_chunked_f64(**part, chunk_size=chunk_size, initial_states=entering[s])
    return y, carried


@pytest.mark.parametrize("starts", [(0, 128), (0, 64, 128, 192), (0, 100), (0, 37, 64, 200), (0, 63, 65, 129)],
                         ids=["2-at-edges", "4-at-edges", "2-inside", "4-mixed", "beside-edges"])
@pytest.mark.parametrize("with_init", [False, True], ids=["zero", "init"])
def test_three_passes_equal_the_sequential_scan(starts, with_init):
    """Segments at and inside chunk edges: the passes give y and the final state of the recurrence
    (which shares no code with the chunked oracle the passes use) to 1e-12."""
    kw, init = _problem()
    init = init if with_init else None
    y, final = segmented_f64(kw, starts, init=init)
    y_ref, final_ref = ssd_recurrence_f64(**kw, chunk_size=64, initial_states=init, return_final_states=True)
    assert torch.allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    assert torch.allclose(final, final_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bug", BUGS)
def test_the_decomposition_check_fails_on_each_planted_bug(bug):
    """The check above can fail: each planted bug of the passes moves y or the final state by far more."""
    kw, init = _problem()
    y_ref, final_ref = ssd_recurrence_f64(**kw, chunk_size=64, initial_states=init, return_final_states=True)
    y, final = segmented_f64(kw, (0, 64, 128, 192), init=init, bug=bug)
    err = max(float((y - y_ref).abs().max()), float((final - final_ref).abs().max()))
    assert err > 1e-3, f"{bug}: {err}"


# --------------------------------------------------------------------------- the launcher's plumbing, kernels emulated

def _chunk_cumsum(dt, A, dt_bias, dtc, cs, seqlen, chunk_size, has_bias, dt_softplus, dt_min, dt_max, *consts):
    d = dt.double() + (dt_bias.double() if has_bias else 0.0)
    if dt_softplus:
        d = torch.where(d > 20.0, d, torch.nn.functional.softplus(d))
    d = d.clamp(dt_min, dt_max)
    b, l, h = dt.shape
    lpad = dtc.shape[2]
    d = torch.nn.functional.pad(d, (0, 0, 0, lpad - l)).permute(0, 2, 1)           # (b, h, lpad)
    run = (d * A.double()[None, :, None] * LOG2E).reshape(b, h, -1, chunk_size).cumsum(-1).reshape(b, h, lpad)
    dtc.copy_(d)
    cs.copy_(run)


def _per_head(t, h):
    return t.double().repeat_interleave(h // t.shape[2], dim=2)


def _chunk_step(state, xc, bc, csc, dtc_c):
    """The state across one chunk: x (b, L, h, p), B (b, L, h, n), cs/dt (b, h, L), log2 units."""
    end = csc[..., -1]
    w = torch.exp2(end[..., None] - csc) * dtc_c                                     # (b, h, L)
    own = torch.einsum("blhp,blhn,bhl->bhpn", xc, bc, w)
    return state * torch.exp2(end)[..., None, None] + own, end


def _segment_state(x, Bm, dtc, cs, ends, decay, nchunks, hpg, BL, *consts):
    rows, _, h, p = x.shape
    Bh = _per_head(Bm, h)
    state = torch.zeros(rows, h, p, Bm.shape[3], dtype=torch.float64)
    total = torch.zeros(rows, h, dtype=torch.float64)
    for c in range(nchunks):
        t = slice(c * BL, (c + 1) * BL)
        state, end = _chunk_step(state, x[:, t].double(), Bh[:, t], cs[..., t].double(), dtc[..., t].double())
        total = total + end
    ends.copy_(state)
    decay.copy_(total[..., None].expand(decay.shape))


def _segment_pass(ends, decay, init, entering, final, nseg, has_init, *consts):
    b = final.shape[0]
    e = ends.double().reshape(b, nseg, *ends.shape[1:])
    d = decay.double()[..., 0].reshape(b, nseg, -1)
    carried = init.double() if has_init else torch.zeros_like(final, dtype=torch.float64)
    for s in range(nseg):
        entering.view(b, nseg, *ends.shape[1:])[:, s] = carried
        carried = carried * torch.exp2(d[:, s])[..., None, None] + e[:, s]
    final.copy_(carried)


def _chunk_walk(x, z, Bm, Cm, dtc, cs, init, D, out, final, nchunks, hpg, has_init, has_d, has_z, BL, *consts):
    rows, _, h, p = x.shape
    Bh, Ch = _per_head(Bm, h), _per_head(Cm, h)
    state = init.double() if has_init else torch.zeros_like(final, dtype=torch.float64)
    causal = torch.tril(torch.ones(BL, BL, dtype=torch.bool))
    for c in range(nchunks):
        t = slice(c * BL, (c + 1) * BL)
        xc, bc, cc, csc, dtt = x[:, t].double(), Bh[:, t], Ch[:, t], cs[..., t].double(), dtc[..., t].double()
        y = torch.einsum("blhn,bhpn->blhp", cc, state) * torch.exp2(csc).permute(0, 2, 1)[..., None]
        seg = torch.where(causal, torch.exp2(csc[..., :, None] - csc[..., None, :]), 0.0)   # (b, h, i, j)
        scores = torch.einsum("bihn,bjhn->bhij", cc, bc) * seg * dtt[..., None, :]
        y = y + torch.einsum("bhij,bjhp->bihp", scores, xc)
        if has_d:
            y = y + xc * D.double().expand(h, p)
        if has_z:
            zc = z[:, t].double()
            y = y * zc * torch.sigmoid(zc)
        out[:, t] = y.to(out.dtype)
        state, _ = _chunk_step(state, xc, bc, csc, dtt)
    final.copy_(state)


EMULATED = {"chunk_cumsum_kernel": _chunk_cumsum, "segment_state_kernel": _segment_state,
            "segment_pass_kernel": _segment_pass, "chunk_walk_kernel": _chunk_walk}


def _forward(kw, segments, **extra):
    """cutile.ssd_forward on CPU tensors with SSDCHECK_CUTILE_SEGMENTS=segments and its kernels emulated
    (lab.bench.host_profile.launches_stubbed) -> (result, kernel names launched)."""
    from lab.bench.host_profile import launches_stubbed
    from kernels import cutile
    names = []

    def launch(stream, grid, kernel, args):
        name = kernel._pyfunc.__name__
        names.append(name.removesuffix("_kernel"))
        if name in EMULATED:
            EMULATED[name](*args)

    saved = launcher._SEGMENTS
    launcher._SEGMENTS = segments
    try:
        with launches_stubbed(launch=launch):
            got = cutile.ssd_forward(**kw, chunk_size=64, **extra)
    finally:
        launcher._SEGMENTS = saved
    return got, names


SEGMENTED = ["chunk_cumsum", "segment_state", "segment_pass", "chunk_walk"]


@pytest.mark.parametrize("segments,l", [(2, 256), (4, 256), (8, 512), (4, 128)],
                         ids=["S2-K2", "S4-K1", "S8-K1", "S2-of-4"])
@pytest.mark.parametrize("options", ["plain", "all"])
def test_the_launcher_runs_the_three_passes_on_segment_views(segments, l, options):
    """The forward with the path forced on and its kernels emulated in float64 (their arguments read
    as the kernels read them) equals the float64 oracle: the (b*S)-batch views, the cumsum on that view,
    the chunk counts, the grids' extents and the final state from pass 2. 'S2-of-4': 2 chunks allow
    only 2 of the 4 segments asked for."""
    kw, init = _problem(l=l, n=64, dtype=torch.float32, seed=segments)
    extra = {"return_final_states": True}
    if options == "all":
        gen = torch.Generator().manual_seed(7)
        extra.update(initial_states=init, D=torch.randn(4, 16, generator=gen), z=torch.randn(2, l, 4, 16, generator=gen),
                     dt_bias=torch.randn(4, generator=gen) * 0.3, dt_softplus=True)
    (y, final), names = _forward(kw, segments, **extra)
    assert names == SEGMENTED
    ref = {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in {**kw, **extra}.items()}
    y_ref, final_ref = ssd_chunked_f64(**ref, chunk_size=64)
    assert torch.linalg.vector_norm(y.double() - y_ref) <= 1e-5 * torch.linalg.vector_norm(y_ref)
    assert torch.linalg.vector_norm(final.double() - final_ref) <= 1e-5 * torch.linalg.vector_norm(final_ref)


def test_the_emulated_launch_check_fails_when_a_segment_starts_from_zero(monkeypatch):
    """The plumbing check can fail: pass 2 handing every segment a zero entering state is caught."""
    kw, _ = _problem(l=256, n=64, dtype=torch.float32)

    def zero_entering(ends, decay, init, entering, final, nseg, has_init, *consts):
        _segment_pass(ends, decay, init, entering, final, nseg, has_init)
        entering.zero_()

    monkeypatch.setitem(EMULATED, "segment_pass_kernel", zero_entering)
    (y, _), names = _forward(kw, 4, return_final_states=True)
    y_ref = ssd_chunked_f64(**{k: v.double() for k, v in kw.items()}, chunk_size=64)
    assert names == SEGMENTED
    assert torch.linalg.vector_norm(y.double() - y_ref) > 1e-2 * torch.linalg.vector_norm(y_ref)


def test_forced_segments_leave_every_problem_the_passes_cannot_serve_to_the_other_paths():
    """No masks in the passes, and the walk's BN is the dstate: unaligned lengths, seq_idx, other chunk
    sizes, dstate without a segment walk row, a single chunk, varlen_states and SEGMENTS=1 keep the
    walk or the two kernels."""
    kw, _ = _problem(l=256, n=64, dtype=torch.float32)
    two = ["chunk_cumsum", "chunk_state", "chunk_scan"]
    assert _forward(kw, 4)[1] == SEGMENTED
    assert _forward(kw, 1)[1] == two
    short = {k: (v[:, :250] if k != "A" else v) for k, v in kw.items()}
    assert _forward(short, 4)[1] == two
    one = {k: (v[:, :64] if k != "A" else v) for k, v in kw.items()}
    assert _forward(one, 4)[1] == two
    seq = torch.zeros(2, 256, dtype=torch.int32)
    seq[:, 100:] = 1
    assert _forward(kw, 4, seq_idx=seq)[1] == two
    wide, _ = _problem(l=256, n=256, dtype=torch.float32)
    assert _forward(wide, 4)[1] == two
    from kernels import cutile
    from lab.bench.host_profile import launches_stubbed
    names = []
    saved, launcher._SEGMENTS = launcher._SEGMENTS, 4
    try:
        with launches_stubbed(launch=lambda s, grid, kernel, args: names.append(kernel._pyfunc.__name__)):
            cutile.ssd_forward(**kw, chunk_size=128)
            assert [k.removesuffix("_kernel") for k in names] == two
            names.clear()
            b1 = {k: (v[:1] if k != "A" else v) for k, v in kw.items()}
            cutile.ssd_forward(**b1, chunk_size=64, seq_idx=seq[:1], cu_seqlens=torch.tensor([0, 100, 256]),
                               return_varlen_states=True)
            assert [k.removesuffix("_kernel") for k in names] == two + ["varlen_state"]
    finally:
        launcher._SEGMENTS = saved


# --------------------------------------------------------------------------- dispatch

def _plan(b, l, h, n, p=64, chunk=64, aligned=True, force=None, sms=132, dtype="bfloat16"):
    saved, launcher._SEGMENTS = launcher._SEGMENTS, force
    try:
        prob = dispatch.Problem(dtype, p, n, chunk, b * h, aligned=aligned and l % chunk == 0, seqlen=l)
        plan = launcher._segment_plan(prob, -(-l // chunk), sms)
    finally:
        launcher._SEGMENTS = saved
    return None if plan is None else plan[0]


def test_the_table_segments_where_it_was_measured_to_pay_and_the_switch_what_the_passes_serve():
    """The table segments 16-bit aligned chunk-64 problems at headdim 64 and dstate 64 with 64 (b, h)
    pairs or fewer and 16K tokens or more (the rows measured faster than the two kernels), S filling one
    wave; not dstate 128, 128 pairs, float32, other headdims or shorter sequences. Forced, the passes
    take only problems they serve."""
    assert _plan(2, 32768, 32, 64) == 4 and _plan(2, 16384, 32, 64, dtype="float16") == 4
    assert _plan(1, 16384, 2, 64) == 128                          # 2 pairs: 128 segments of 2 chunks
    for b, l, h, n, kw in ((2, 16384, 32, 128, {}), (2, 65536, 64, 64, {}), (2, 8192, 32, 64, {}),
                           (2, 32768, 32, 64, {"dtype": "float32"}), (2, 32768, 32, 64, {"p": 128}),
                           (2, 32768, 32, 64, {"chunk": 128}), (2, 32768 - 64, 32, 64, {"aligned": False})):
        assert _plan(b, l, h, n, **kw) is None, (b, l, h, n, kw)
    F = 4   # forced: at most F segments (dispatch.segments without a force fills one wave, tested below)
    assert _plan(2, 32768, 32, 64, force=F) == 4 and _plan(2, 16384, 32, 128, force=F) == 4
    assert _plan(2, 65536, 64, 128, force=2) == 2 and _plan(1, 16384, 32, 64, force=8) == 8
    assert _plan(2, 32768, 32, 256, force=F) is None             # no segment walk at dstate 256
    assert _plan(2, 32768, 32, 64, chunk=128, force=F) is None
    assert _plan(2, 32768, 32, 64, aligned=False, force=F) is None and _plan(2, 32768 - 5, 32, 64, force=F) is None
    assert _plan(2, 32768, 32, 64, p=128, force=F) == 4          # headdim tiles of 64: any headdim
    assert _plan(2, 32768, 32, 64, force=1) is None              # the switch turns it off
    assert _plan(2, 256, 4, 64, p=16, force=8) == 4              # forced: any size, S divides the chunks
    assert _plan(2, 192, 4, 64, force=8) is None                 # 3 chunks: no power of two > 1 divides
    assert _plan(2, 384, 4, 128, force=8) == 2                   # 6 chunks: 2 segments of 3


def test_every_smoke_problem_is_segmented_at_each_forced_count():
    """lab/scripts/smoke_segments.py fails a problem the path does not take; on an H200 its float32 problem
    of 5 chunks (seqlen 320) did exactly that: no power of two above 1 divides 5."""
    from lab.scripts.smoke_segments import PROBLEMS
    for b, l, h, _g, p, n, dtype, *_ in PROBLEMS:
        for force in (2, 4):
            assert _plan(b, l, h, n, p=p, force=force, dtype=dtype) == force, (b, l, h, p, n, dtype, force)
    assert _plan(2, 320, 6, 64, force=4, dtype="float32") is None   # the problem it replaced


def test_segments_is_a_power_of_two_dividing_the_chunks_within_one_wave():
    assert dispatch.segments(512, 64, 264) == 4 and dispatch.segments(512, 128, 264) == 2
    assert dispatch.segments(512, 256, 264) == 1 and dispatch.segments(12, 8, 264) == 4
    assert dispatch.segments(512, 64, 264, force=3) == 2 and dispatch.segments(7, 1, 264, force=8) == 1


def test_the_force_switch_names_itself_when_its_value_is_wrong():
    assert dispatch.parse_segments("") is None and dispatch.parse_segments(" 4 ") == 4
    for bad in ("0", "-2", "two", "2.5"):
        with pytest.raises(ValueError, match="SSDCHECK_CUTILE_SEGMENTS: expected a positive integer"):
            dispatch.parse_segments(bad)


def test_the_pinned_long_sequences_reach_every_segment_row_the_table_can_choose():
    """No drawn problem is 16K tokens long, so tests/test_regressions.py's long sequences are what the gate
    runs the table's segmented walk on: between them they must reach every row of it that is not
    forced-only (segment_state's row, the walk's segment row, segment_pass), in more than one S, and the
    unaligned one must keep the two kernels."""
    from tests.test_regressions import LONG_SEQUENCES
    reached, plans = set(), []
    for _, p in LONG_SEQUENCES:
        dt = getattr(torch, p.dtype)
        x = torch.empty(p.batch, p.seqlen, p.nheads, p.headdim, device="meta", dtype=dt)
        B = torch.empty(p.batch, p.seqlen, p.ngroups, p.dstate, device="meta", dtype=dt)
        prob = launcher._problem(x, B, p.chunk_size, None)
        plan = launcher._segment_plan(prob, -(-p.seqlen // p.chunk_size), 132)
        plans.append(None if plan is None else plan[0])
        if plan is not None:
            reached |= {("segment_state", dispatch.row("segment_state", prob)), ("segment_pass", 0),
                        ("chunk_walk", dispatch.row("chunk_walk", dataclasses.replace(prob, segmented=True)))}
    table = {(k, i) for k, rules in dispatch.TABLE.items() for i, r in enumerate(rules)
             if k.startswith("segment") and r.config != dispatch.SEG_OFF or "segmented walk" in r.when}
    wanted = {(k, i) for k, i in table if not dispatch.TABLE[k][i].forced_only}
    assert wanted and wanted <= reached, (wanted, reached)
    assert plans == [128, 16, None], plans


def test_the_segmented_rows_are_counted_as_reached_only_where_they_decided_what_ran():
    """launcher.coverage (the gate's "dispatch paths reached"): a long problem the table segments counts
    segment_state's segmented row, segment_pass and the walk's segment row; a problem that is not
    segmented counts the "no segments" row; a forced plan counts no segment_state row. (The segmented
    row once went uncounted where it ran: the H200 gate called it not reached.)"""
    from lab.bench.host_profile import launches_stubbed
    from kernels import cutile

    def counts(b, l, h, segments=None):
        kw, _ = _problem(b=b, l=l, h=h, g=1, p=64, n=64, dtype=torch.bfloat16)
        kw.update(A=kw["A"].float(), dt=kw["dt"].float())
        saved, launcher._SEGMENTS = launcher._SEGMENTS, segments
        launcher.LAUNCHED.clear()
        try:
            with launches_stubbed(launch=lambda *a: None):
                cutile.ssd_forward(**kw, chunk_size=64)
        finally:
            launcher._SEGMENTS = saved
        return {k: v for k, v in launcher.LAUNCHED.items() if k[0] in ("segment_state", "segment_pass", "chunk_walk")}

    off = len(dispatch.TABLE["segment_state"]) - 1
    assert counts(1, 16384, 2) == {("segment_state", 0): 1, ("segment_pass", 0): 1, ("chunk_walk", 0): 1}
    assert counts(1, 512, 2) == {("segment_state", off): 1, ("chunk_walk", len(dispatch.TABLE["chunk_walk"]) - 1): 1}
    assert counts(1, 512, 2, segments=4) == {("segment_pass", 0): 1, ("chunk_walk", 0): 1}
