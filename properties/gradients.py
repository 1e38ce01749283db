"""The invariants of the SSD backward, each `prop_grad_<name>(info, problem: GradProblem) -> PropertyResult`.

`info.backward` (kernels.registry.Backward) says how the implementation differentiates: "autograd"
through `info.fn`, or a callable `fn(dy, dfinal_states, **forward_kwargs) -> {input: gradient}`.
Gradients are named by the input they belong to; comparisons by "d" + input (dx, ddt, dA, dB, dC,
dD, dz, ddt_bias, dinitial_states: tolerances.toml). `prop_grad_matches_oracle` compares with the
float64 gradient oracle within the backward yardstick's budget; every other property compares the
backward with itself or with a closed form, so an oracle bug cannot hide a backward bug there.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from oracles.grad_f64 import autograd_grads, grad_inputs, ssd_grads_chunked_f64
from oracles.yardstick_bwd import ssd_yardstick_bwd
from properties.grad_problem import GradProblem, skip_tokens
from properties.invariants import _outside, _result, _slice_time, decay_span, device_for, finite_comparison, split_point
from properties.report import PropertyResult
from properties.timing import phase
from properties.tolerance import Comparison, compare, load_policy

SUMMED = ("A", "D", "dt_bias")   # gradients of inputs shared by every token: sums over tokens
PER_TOKEN = ("x", "dt", "B", "C", "z")


def grad_name(name: str) -> str:
    return "d" + name


def run_backward(info, kw: dict, dy: torch.Tensor, dfinal: torch.Tensor | None) -> dict:
    """{input name: gradient} from the implementation's declared backward."""
    bwd = info.backward
    with phase("impl"):
        if bwd.fn == "autograd":
            return autograd_grads(info.fn, kw, dy, dfinal)
        return bwd.fn(dy=dy, dfinal_states=dfinal, **kw)


def expected_grads(info, kw: dict) -> tuple[str, ...]:
    """The gradients this call must return: the inputs it passes, among those the backward declares."""
    return tuple(k for k in grad_inputs(kw) if k in info.backward.grads)


def _missing(info, got: dict, kw: dict, dtype: str) -> list:
    out = []
    for k in expected_grads(info, kw):
        if k not in got or not isinstance(got[k], torch.Tensor):
            out.append(Comparison(grad_name(k), False, math.inf, (), math.inf, 0, 0,
                                  load_policy().tol(dtype, grad_name(k)),
                                  why=[f"the backward returned no gradient for {k} (it declares {info.backward.grads})"]))
    return out


def _compare_grads(got: dict, ref: dict, dtype: str, names, scales: dict | None = None) -> list:
    """Per-gradient comparisons by the policy's bounds; the summed gradients (dA, dD, ddt_bias) against
    `scales`, the root of the sum of their squared terms, where given (see _compare_sum)."""
    out = []
    for k in names:
        if k not in got or k not in ref:
            continue
        if scales is not None and k in SUMMED and k in scales:
            out.append(_compare_sum(grad_name(k), got[k], ref[k], scales[k], dtype))
        else:
            out.append(compare(grad_name(k), got[k], ref[k], dtype=dtype))
    return out


def _compare_sum(output: str, actual: torch.Tensor, expected: torch.Tensor, scale: torch.Tensor,
                 dtype: str) -> Comparison:
    """A gradient summed over every token against another computation of it. Its rounding errors are
    those of its terms, whatever the sum cancels to (dA of a strongly decaying head: terms of 1e1 summing
    to 1e-1), so the bounds are taken relative to `scale`, the root of the sum of its squared terms:
    |a - e| <= rtol * scale elementwise and ||a - e|| <= normwise * ||scale||."""
    tol = load_policy().tol(dtype, output)
    a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
    sc = scale.detach().double().cpu().expand_as(e)
    diff = (a - e).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    bad = ~(diff <= tol.rtol * sc)
    flat = int(diff.reshape(-1).argmax()) if diff.numel() else 0
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(diff.shape))) if diff.numel() else ()
    snorm = float(sc.norm())
    normwise = float(diff.norm()) / snorm if snorm > 0 else (0.0 if float(diff.norm()) == 0 else math.inf)
    why = []
    if bad.any():
        why.append(f"{int(bad.sum())} elements over rtol * (root sum of squares of the terms)")
    if not normwise <= tol.normwise:
        why.append(f"normwise {normwise:.3g} (relative to the terms' root sum of squares) > {tol.normwise:.3g}")
    return Comparison(output, not why, float(diff.reshape(-1)[flat]) if diff.numel() else 0.0, where, normwise,
                      int(bad.sum()), e.numel(), tol, why=why)


def term_scales(info, kw: dict, dy: torch.Tensor, dfinal: torch.Tensor | None) -> dict:
    """The root sum of squares of the terms of each summed gradient (dA, dD, ddt_bias, ddt) of this call, from the
    backward yardstick: the scale a self-comparison measures those gradients against."""
    scales = {}
    with phase("reference"):
        ssd_yardstick_bwd(dy=dy, dfinal_states=dfinal, state_dtype=info.backward.state_dtype,
                          matmul=info.backward.matmul, term_scales=scales, **kw)
    return scales


def _needs_backward(prop: str, info, problem) -> PropertyResult | None:
    if info.backward is None:
        return _result(prop, info, problem, skipped="declares no backward")
    return None


def _supports(info, *options) -> bool:
    return all(o in info.backward_options() for o in options)


# ---------------------------------------------------------------- agreement with the oracle

def prop_grad_matches_oracle(info, problem: GradProblem) -> PropertyResult:
    """Every gradient against the float64 oracle, within its policy bounds and the backward yardstick's budget."""
    prop = "prop_grad_matches_oracle"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    got = run_backward(info, kw, dy, dfinal)
    with phase("reference"):
        ref = ssd_grads_chunked_f64(kw, dy, dfinal)
        scales = {}
        yard = ssd_yardstick_bwd(dy=dy, dfinal_states=dfinal, state_dtype=info.backward.state_dtype,
                                 matmul=info.backward.matmul, term_scales=scales, **kw)
    span = decay_span(kw, problem.chunk_size)
    names = expected_grads(info, kw)
    comps = _missing(info, got, kw, problem.dtype)
    # dA, dD, ddt_bias sum over every token, and ddt over the rest of its chunk (through the cumsum of
    # dt*A): their rounding floor is taken at the root of the sum of its squared terms (a sum that cancels keeps
    # its terms' rounding errors, not its own size's)
    comps += [compare(grad_name(k), got[k], ref[k], dtype=problem.dtype, yardstick=yard[k], decay_span=span,
                      floor_at=scales.get(k)) for k in names if k in got]
    return _result(prop, info, problem, comps)


# ---------------------------------------------------------------- closed form

def prop_grad_no_decay_is_linear_attention(info, problem: GradProblem) -> PropertyResult:
    """With A = 0 the gradients are those of causal linear attention, including dA: the closed form's
    first-order term in A, sum over pairs s <= t of the steps between them (see _linear_attention_f64)."""
    prop = "prop_grad_no_decay_is_linear_attention"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    problem = problem.replace(decay=0.0)
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    got = run_backward(info, kw, dy, dfinal)
    with phase("reference"):
        ref = autograd_grads(_linear_attention_f64, kw, dy, dfinal, cast=torch.float64)
    comps = _missing(info, got, kw, problem.dtype) + _compare_grads(got, ref, problem.dtype, expected_grads(info, kw),
                                                                    term_scales(info, kw, dy, dfinal))
    return _result(prop, info, problem, comps)


_ROWS = 256   # query rows per block of the closed form


def _linear_attention_f64(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                          seq_idx=None, dt_softplus=False, dt_limit=(0.0, math.inf), return_final_states=False,
                          **_):
    """Causal linear attention plus the first-order term in A, exact in value and gradient at A = 0:
    exp(A * (T_t - T_s)) ~ 1 + A (T_t - T_s), T the running sum of steps (zero where a sequence starts
    is not needed: pairs of different sequences are masked, and the differences cancel the offset)."""
    b, l, h, p = x.shape
    rep = h // B.shape[2]
    Bh, Ch = B.repeat_interleave(rep, 2), C.repeat_interleave(rep, 2)
    step = dt + dt_bias if dt_bias is not None else dt
    if dt_softplus:
        step = F.softplus(step, threshold=20.0)   # the identity above 20, as the contract
    step = step.clamp(float(dt_limit[0]), float(dt_limit[1]))
    T = torch.cumsum(step, dim=1)                                           # (b, l, h)
    seq = seq_idx if seq_idx is not None else torch.zeros(b, l, dtype=torch.int32, device=x.device)
    dtx = step[..., None] * x
    rows = []
    for t0 in range(0, l, _ROWS):
        t1 = min(l, t0 + _ROWS)
        same = seq[:, t0:t1, None] == seq[:, None, :t1]
        causal = torch.arange(t0, t1, device=x.device)[:, None] >= torch.arange(t1, device=x.device)
        gap = T[:, t0:t1, None, :] - T[:, None, :t1, :]                     # (b, t, s, h)
        w = (1.0 + A * gap) * (same & causal)[..., None]
        scores = torch.einsum("bthn,bshn->bhts", Ch[:, t0:t1], Bh[:, :t1]) * w.permute(0, 3, 1, 2)
        rows.append(torch.einsum("bhts,bshp->bthp", scores, dtx[:, :t1]))
    y = torch.cat(rows, dim=1)
    last = seq[:, -1:]
    to_end = (1.0 + A * (T[:, -1:] - T)) * (seq == last)[..., None]         # (b, l, h)
    final = torch.einsum("bsh,bshp,bshn->bhpn", to_end, dtx, Bh)
    if initial_states is not None:
        first = (seq == 0).to(x.dtype)[..., None]
        y = y + torch.einsum("bthn,bhpn->bthp", Ch, initial_states) * ((1.0 + A * T) * first)[..., None]
        final = final + initial_states * ((1.0 + A * T[:, -1]) * (last == 0))[..., None, None]
    if D is not None:
        y = y + x * (D if D.dim() == 2 else D[:, None])
    if z is not None:
        y = y * F.silu(z)
    return (y, final) if return_final_states else y


# ---------------------------------------------------------------- the backward against itself

def prop_grad_chunk_size_invariance(info, problem: GradProblem) -> PropertyResult:
    """Another supported chunk size gives the same gradients."""
    prop = "prop_grad_chunk_size_invariance"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    if len(info.chunk_sizes) < 2:
        return _result(prop, info, problem, skipped="one chunk size supported")
    others = [c for c in info.chunk_sizes if c != problem.chunk_size
              and not (info.seqlen_multiple_of_chunk and problem.seqlen % c)]
    if not others:
        return _outside(prop, info, problem, "no other usable chunk size")
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    chunk = others[problem.seed % len(others)]
    base = run_backward(info, kw, dy, dfinal)
    other = run_backward(info, {**kw, "chunk_size": chunk}, dy, dfinal)
    return _result(prop, info, problem, _compare_grads(other, base, problem.dtype, expected_grads(info, kw),
                                                       term_scales(info, kw, dy, dfinal)))


def prop_grad_split_invariance(info, problem: GradProblem) -> PropertyResult:
    """Backward through [t1:T] from the first half's final state, then through [0:t1] with the second
    half's initial-state gradient as its final-state gradient, equals the whole backward: per-token
    gradients concatenate, shared ones (dA, dD, ddt_bias) add, dinitial_states is the first half's."""
    prop = "prop_grad_split_invariance"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    if not _supports(info, "initial_states", "final_states"):
        return _result(prop, info, problem, skipped="needs initial_states and final_states in the backward")
    problem = problem.replace(seq_starts=(), final_states=True)
    t1 = split_point(problem, problem.chunk_size if info.seqlen_multiple_of_chunk else 1)
    if t1 is None:
        return _outside(prop, info, problem, "sequence too short to split")
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    kw["return_final_states"] = True
    whole = run_backward(info, kw, dy, dfinal)
    first_kw = _slice_time(kw, 0, t1)
    with phase("impl"):
        out = info.fn(**first_kw)
    h1 = out[1].detach().float()
    second = run_backward(info, {**_slice_time(kw, t1, problem.seqlen), "initial_states": h1}, dy[:, t1:].contiguous(),
                          dfinal)
    first = run_backward(info, first_kw, dy[:, :t1].contiguous(), second["initial_states"].float())
    joined = {}
    for k in whole:
        if k in PER_TOKEN:
            joined[k] = torch.cat([first[k], second[k]], dim=1)
        elif k in SUMMED:
            joined[k] = first[k].double() + second[k].double()
        elif k == "initial_states":
            joined[k] = first[k]
    return _result(prop, info, problem, _compare_grads(joined, whole, problem.dtype, list(joined),
                                                       term_scales(info, kw, dy, dfinal)))


def prop_grad_linearity(info, problem: GradProblem) -> PropertyResult:
    """The gradients are linear in (dy, dfinal_states) jointly: g(a u + b v) = a g(u) + b g(v)."""
    prop = "prop_grad_linearity"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    kw, dy1, df1 = problem.backward_inputs(device_for(info))
    _, dy2, df2 = problem.replace(seed=problem.seed + 1).backward_inputs(device_for(info))
    a, b = 2.0, -0.75
    dy = (a * dy1.double() + b * dy2.double()).to(dy1.dtype)
    df = None if df1 is None else a * df1 + b * df2
    g_mix, g1, g2 = run_backward(info, kw, dy, df), run_backward(info, kw, dy1, df1), run_backward(info, kw, dy2, df2)
    ref = {k: a * g1[k].double() + b * g2[k].double() for k in g1}
    s1, s2 = term_scales(info, kw, dy1, df1), term_scales(info, kw, dy2, df2)
    scales = {k: abs(a) * s1[k] + abs(b) * s2[k] for k in s1}
    return _result(prop, info, problem, _compare_grads(g_mix, ref, problem.dtype, expected_grads(info, kw), scales))


def group_broadcast_problem(info, problem: GradProblem) -> GradProblem | None:
    """The grouped problem prop_grad_group_broadcast runs (None: nheads 1, nothing to group). A drawn
    problem with 1 < ngroups < nheads runs as drawn: heads per group is a compile-time constant in
    TileGym's kernels, and regrouping every even seed's draw had put 155 of 400 runs outside the
    classes the warm-up compiles, against 6 (lab/scripts/grad_compile_classes.py --group-broadcast)."""
    if 1 < problem.ngroups < problem.nheads:
        return problem
    if problem.seed % 2 == 0:
        # 1 < ngroups < nheads, as prop_group_broadcast: where group i // (h/g) differs from i % g
        h = max(problem.nheads, 4)
        h += (-h) % info.nheads_multiple_of
        middle = [g for g in range(2, h) if h % g == 0]
        return problem.replace(nheads=h, ngroups=middle[(problem.seed // 2) % len(middle)])
    if problem.nheads == 1:
        return None
    return problem.replace(ngroups=1) if problem.ngroups == problem.nheads else problem


def prop_grad_group_broadcast(info, problem: GradProblem) -> PropertyResult:
    """With ngroups < nheads, dB and dC are the per-head gradients (B and C repeated per head) summed over
    each group's heads; every other gradient is unchanged."""
    prop = "prop_grad_group_broadcast"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    if not _supports(info, "ngroups"):
        return _result(prop, info, problem, skipped="needs ngroups support in the backward")
    if (grouped_problem := group_broadcast_problem(info, problem)) is None:
        return _outside(prop, info, problem, "needs nheads > 1")
    problem = grouped_problem
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    rep = problem.nheads // problem.ngroups
    grouped = run_backward(info, kw, dy, dfinal)
    per_head = run_backward(info, {**kw, "B": kw["B"].repeat_interleave(rep, 2).contiguous(),
                                   "C": kw["C"].repeat_interleave(rep, 2).contiguous()}, dy, dfinal)
    b, l, g, n = kw["B"].shape
    for k in ("B", "C"):
        if k in per_head:
            per_head[k] = per_head[k].double().reshape(b, l, g, rep, n).sum(dim=3)
    return _result(prop, info, problem, _compare_grads(grouped, per_head, problem.dtype, expected_grads(info, kw),
                                                       term_scales(info, kw, dy, dfinal)))


def prop_grad_seq_idx_packing(info, problem: GradProblem) -> PropertyResult:
    """Sequences packed with seq_idx have the gradients of separate runs: per-token gradients per
    segment, shared ones summed, dinitial_states from sequence 0, d final_states into the last sequence."""
    prop = "prop_grad_seq_idx_packing"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    if not _supports(info, "seq_idx") or info.seqlen_multiple_of_chunk:
        return _result(prop, info, problem, skipped="no seq_idx support in the backward")
    if problem.seqlen < 2:
        return _outside(prop, info, problem, "seqlen 1 cannot be packed")
    starts = problem.seq_starts or (1 + problem.seed % (problem.seqlen - 1),)
    if problem.seqlen > problem.chunk_size:   # and one sequence starting exactly on a chunk edge
        edge = problem.chunk_size * (1 + problem.seed % ((problem.seqlen - 1) // problem.chunk_size))
        starts = tuple(sorted({*starts, edge}))
    problem = problem.replace(batch=1, seq_starts=starts)
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    packed = run_backward(info, kw, dy, dfinal)
    bounds = [0, *starts, problem.seqlen]
    parts = []
    for j, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        seg_kw = _slice_time(kw, s, e)
        seg_kw.pop("seq_idx", None)
        if j > 0:
            seg_kw.pop("initial_states", None)
        last = j == len(bounds) - 2   # the packed final state is the last sequence's
        parts.append(run_backward(info, seg_kw, dy[:, s:e].contiguous(), dfinal if last else None))
    joined = {}
    for k in packed:
        if k in PER_TOKEN:
            joined[k] = torch.cat([part[k] for part in parts], dim=1)
        elif k in SUMMED:
            joined[k] = sum(part[k].double() for part in parts)
        elif k == "initial_states":
            joined[k] = parts[0][k]
    return _result(prop, info, problem, _compare_grads(packed, joined, problem.dtype, list(joined),
                                                       term_scales(info, kw, dy, dfinal)))


def extreme_decay_inputs(problem: GradProblem, device) -> tuple[dict, torch.Tensor, torch.Tensor | None]:
    """problem.backward_inputs with A from -1 to -1e2 per head and steps from 1e-3 to 1e2 per token
    (A*dt down to -1e4), the problem's skipped tokens kept, no dt_limit."""
    kw, dy, dfinal = problem.backward_inputs(device)
    g = torch.Generator().manual_seed(problem.seed)
    h = problem.nheads
    kw["A"] = (-(10.0 ** (2.0 * torch.rand(h, generator=g)))).to(kw["A"].device)          # -1 .. -1e2
    target = 10.0 ** (-3.0 + 5.0 * torch.rand(kw["dt"].shape, generator=g, dtype=torch.float64))
    bias = kw["dt_bias"].double().cpu() if "dt_bias" in kw else 0.0
    kw["dt"] = (target - bias).to(kw["dt"].dtype).to(kw["dt"].device)                   # softplus(v) ~ v above 20
    if problem.dt_zero_stride:
        kw["dt"] = skip_tokens(kw, problem.dt_zero_stride)
    kw.pop("dt_limit", None)
    return kw, dy, dfinal


def prop_grad_finite_under_extreme_decay(info, problem: GradProblem) -> PropertyResult:
    """Finite gradients when A*dt reaches -1e4 and steps span 1e-3 to 1e2, with the problem's skipped
    tokens (dt_zero_stride: processed dt exactly 0, as padding or a clamped negative dt), where the true
    gradient fits its dtype (finite_comparison: a float16 ddt there reaches 1e6, an infinity for float16)."""
    prop = "prop_grad_finite_under_extreme_decay"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    problem = problem.replace(dt_limit=None, dy_scale=1.0)   # steps of 1e2 already make the gradients large
    kw, dy, dfinal = extreme_decay_inputs(problem, device_for(info))
    got = run_backward(info, kw, dy, dfinal)

    @functools.cache
    def ref():
        with phase("reference"):
            return ssd_grads_chunked_f64(kw, dy, dfinal)
    comps = [finite_comparison(grad_name(k), t, problem.dtype, lambda k=k: ref()[k]) for k, t in got.items()]
    return _result(prop, info, problem, comps)


def prop_grad_determinism(info, problem: GradProblem) -> PropertyResult:
    """Two backward calls on the same inputs give bitwise equal gradients (where the backward declares it)."""
    prop = "prop_grad_determinism"
    if (skip := _needs_backward(prop, info, problem)) is not None:
        return skip
    if not info.backward.deterministic:
        return _result(prop, info, problem, skipped="backward declared nondeterministic")
    kw, dy, dfinal = problem.backward_inputs(device_for(info))
    first, second = run_backward(info, kw, dy, dfinal), run_backward(info, kw, dy, dfinal)
    comps = [compare(grad_name(k), second[k], first[k], dtype=problem.dtype, bitwise=True) for k in first]
    return _result(prop, info, problem, comps)


GRAD_PROPERTIES = {f.__name__: f for f in (
    prop_grad_matches_oracle, prop_grad_no_decay_is_linear_attention, prop_grad_chunk_size_invariance,
    prop_grad_split_invariance, prop_grad_linearity, prop_grad_group_broadcast, prop_grad_seq_idx_packing,
    prop_grad_finite_under_extreme_decay, prop_grad_determinism)}
