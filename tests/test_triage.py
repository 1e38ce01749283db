"""The triage battery (properties/triage.py): within what each implementation declares and every
property's domain, and a typical bug fails its first problem in the first test."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kernels.registry import check_supported, lookup
from properties import invariants, triage
from properties.problem import SSDProblem

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["torch-ref", "cutile", "tilegym", "mamba-ssm"])
@pytest.mark.parametrize("gpu", [False, True])
def test_battery_is_within_declared_capabilities(name, gpu):
    info = lookup(name)
    problems = triage.battery(info, gpu)
    assert 0 < len(problems) <= triage.SLOTS
    assert {p.dtype for p in problems} == set(info.dtypes)   # each dtype
    for p in problems + triage.battery(info, gpu, regime="model"):
        check_supported(info, dtype=p.dtype, chunk_size=p.chunk_size, seqlen=p.seqlen, headdim=p.headdim,
                        dstate=p.dstate, ngroups=p.ngroups, options=p.options(), nheads=p.nheads)
        # headdim != dstate, except the model layer's wide twin for cuTile's walk row at 64 x 64
        assert (p.headdim != p.dstate or p.batch == triage.WIDE_BATCH) and p.decay_decades >= 3.0
        assert p.ngroups == (2 if "ngroups" in info.options else 1)
    # the union covers every declared option, a partial last chunk (where allowed), whole chunks
    # (return_states_dtype is no problem's option: every call of an implementation that declares it passes it)
    used = set().union(*(p.options() for p in problems))
    assert used == set(info.options) - {"return_states_dtype"} - (
        {"dt_input_dtype", "states_input_dtype", "params_input_dtype"} if info.dtypes == ("float32",) else set())
    assert any(not p.partial_last_chunk and not p.uses_seq_idx for p in problems)
    if not info.seqlen_multiple_of_chunk:
        assert any(p.partial_last_chunk for p in problems)
    if "seq_idx" in info.options:   # sequence starts one before, at and one after a chunk edge, and
        starts = next(p.seq_starts for p in problems if p.seq_starts)   # one ending inside its edge's chunk
        c = problems[0].chunk_size
        assert {c - 1, 0, 1} <= {s % c for s in starts}
        assert any(s % c == 0 and nxt < s - s % c + c for s, nxt in zip(starts, starts[1:]))


@pytest.mark.parametrize("prop", sorted(invariants.PROPERTIES))
def test_battery_is_in_every_propertys_domain_and_passes_torch_ref(prop):
    info = lookup("torch-ref")
    for p in triage.battery(info, gpu=False):
        r = invariants.PROPERTIES[prop](info, p)
        assert not r.outside_domain, (prop, p, r.skipped)
        assert r.skipped or r.passed, r.message()


def test_battery_slots_and_dtype_filter():
    info = lookup("torch-ref")
    assert triage.Slot(0).problem(info, False) == triage.battery(info, False)[0]
    assert triage.Slot(triage.SLOTS - 1 + 1).problem(info, False) is None
    assert {p.dtype for p in triage.battery(info, False, "float16")} == {"float16"}
    assert len(triage.battery(info.replace(dtypes=("float32",)), False)) == 2


def _mutated_torch_ref(mutant):
    """kernels/torch_ref.py with `mutant` applied, imported as its own module; its KernelInfo."""
    source = mutant.apply((ROOT / mutant.file).read_text())
    name = f"_mutant_torch_ref_{mutant.id}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        exec(compile(source, str(ROOT / mutant.file), "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module.INFO


def _kills(info, problem) -> bool:
    """prop_matches_oracle (the first test of tests/test_properties.py) fails `problem`."""
    try:
        return not invariants.prop_matches_oracle(info, problem).passed
    except Exception:   # a crash is a failing example too
        return True


def test_a_torch_ref_mutant_dies_on_the_first_battery_example():
    from mutation.catalog import load_catalog
    first = triage.battery(lookup("torch-ref"), gpu=False)[0]
    catalog = load_catalog("torch_ref")
    assert _kills(_mutated_torch_ref(catalog.by_id("causal_mask_strict")), first)
    assert not _kills(lookup("torch-ref"), first)   # and the unmutated one passes it


def test_most_torch_ref_mutants_die_in_the_first_tests_battery():
    """Measured when written: of the 35 non-equivalent mutants of kernels/torch_ref.py, 26 fail the
    first example of the first test and 31 one of its 6 battery examples (the others need another
    property: batch invariance, chunk size invariance, ...)."""
    from mutation.catalog import load_catalog
    mutants = [m for m in load_catalog("torch_ref").mutants if m.file == "kernels/torch_ref.py" and not m.equivalent]
    problems = triage.battery(lookup("torch-ref"), gpu=False)
    first, anywhere = [], []
    for m in mutants:
        info = _mutated_torch_ref(m)
        first.append(_kills(info, problems[0]))
        anywhere.append(first[-1] or any(_kills(info, p) for p in problems[1:]))
    survivors = [m.id for m, k in zip(mutants, anywhere) if not k]
    print(f"of {len(mutants)} mutants: {sum(first)} fail the first battery example, {sum(anywhere)} one of "
          f"the first test's battery; survivors: {survivors}")
    assert sum(first) >= 2 * len(mutants) // 3 and len(survivors) <= len(mutants) // 8, survivors


def _table_problem(p):
    """What cuTile's dispatch table sees of `p`, from shapes alone (meta tensors, no GPU)."""
    import torch
    from kernels.cutile import launcher
    x = torch.empty(p.batch, p.seqlen, p.nheads, p.headdim, device="meta", dtype=getattr(torch, p.dtype))
    B = torch.empty(p.batch, p.seqlen, p.ngroups, p.dstate, device="meta", dtype=x.dtype)
    return launcher._problem(x, B, p.chunk_size, True if p.uses_seq_idx else None)


def test_the_model_layer_battery_reaches_the_paths_only_wide_grids_take():
    """On the GPU the model-layer tests' battery adds each dtype's wide twins (batch 8 x 36 heads,
    headdim 64): cuTile's chunk walk serves the one of three whole chunks of 64, so a walk bug dies on
    the first model-layer examples (before, the walk's mutants waited for a wide draw and outlived a
    150 s fuzz run), and its twin one token short goes to the general path. The plain battery reaches
    no walk row, so the check can fail."""
    from kernels.cutile import launcher
    info = lookup("cutile")

    def walks(problems):
        return [p for p in problems if not p.varlen and launcher._walk_config(_table_problem(p)) is not None]

    for dtype in sorted(info.dtypes):
        model = triage.battery(info, True, dtype, regime="model")
        assert 0 < len(model) <= triage.SLOTS, dtype
        assert all(not p.seq_starts for p in model)   # no packing in a model layer
        # the wide twin one token short of whole chunks: the walk's hand-off to the general path
        assert [p.batch for p in model if p.partial_last_chunk] == [triage.WIDE_BATCH], dtype
        assert walks(model), dtype
        assert not walks(triage.battery(info, True, dtype)), dtype
    assert triage.battery(info, False, "float32", regime="model") == triage.battery(info, False, "float32")


def test_each_walk_row_has_a_16_bit_model_layer_twin():
    """Every chunk-walk row the model-layer batteries reach is reached by a 16-bit one, whose kernels
    compile several times faster than float32's: with both 16-bit twins at dstate 128, the ORD=1 row
    (dstate 64) had only float32's, and its three mutants took 26-37 s to die on the H200 (each alone,
    from an empty cache: lab/reports/2026-12-04-walk-order.md); at bfloat16's twin, 11-12 s from a cold
    fill (lab/reports/2026-12-04-battery-walk-twins.md)."""
    from kernels.cutile import dispatch, launcher
    info = lookup("cutile")
    reached: dict[int, set[str]] = {}
    for dtype in sorted(info.dtypes):
        for p in triage.battery(info, True, dtype, regime="model"):
            tp = _table_problem(p)
            if not p.varlen and launcher._walk_config(tp) is not None:   # the launcher walks it
                reached.setdefault(dispatch.row("chunk_walk", tp), set()).add(dtype)
    assert len(reached) >= 2, reached                  # the dstate-64 and dstate-128 rows
    for i, dtypes in reached.items():
        assert dtypes & {"bfloat16", "float16"}, f"chunk_walk row {i}: only {sorted(dtypes)}"


def _scan_config(problem):
    """cuTile's chunk_scan Config for `problem`, from shapes alone."""
    from kernels.cutile import launcher
    return launcher._launch_config("chunk_scan", _table_problem(problem))


def check_tile_loops(problem) -> None:
    """chunk_scan loops over 2+ dstate tiles (the incoming state's) and 2+ headdim tiles (D of shape
    (h, p) read per tile) on `problem`."""
    cfg = _scan_config(problem)
    assert problem.dstate > cfg.get("BN") and problem.headdim > cfg.get("BP") and problem.D == "hp", \
        f"{problem} takes chunk_scan {cfg}: one dstate or headdim tile, or no D of shape (h, p)"


def test_the_first_battery_problem_runs_the_tile_loops():
    """The first example of every test has the large inner dimensions, so a bug in a tile loop over
    dstate or headdim (the state or D read for tile 0 whatever the tile: cu_scan_state_ktile_fixed,
    cu_scan_D_ptile_fixed) dies there. At headdim 64 and dstate 128 both outlived a 60 s fuzz run on
    the H200 (lab/reports/2026-12-02-ttf-waves.md); that problem fails the check."""
    first = triage.battery(lookup("cutile"), gpu=True)[0]
    check_tile_loops(first)
    with pytest.raises(AssertionError, match="one dstate or headdim tile"):
        check_tile_loops(first.replace(headdim=64, dstate=128))
    for name in ("tilegym", "mamba-ssm", "torch-ref"):   # the others' first problem too, within what they declare
        p = triage.battery(lookup(name), gpu=True)[0]
        assert (p.headdim, p.dstate) == triage.LARGE_DIMS, (name, p)
    # the gradient draws run no explicit examples: their anchors keep the common dimensions
    from properties import grad_strategies
    assert all((g.headdim, g.dstate) != triage.LARGE_DIMS
               for g in grad_strategies.battery(lookup("tilegym"), True))


def check_decay_leaves_float32_range(problem) -> None:
    """cuTile's factored decay row (FACT) serves `problem`, and a chunk's cumulative log-decay reaches
    FACT_RANGE (in log2 units) in some head: where the factored form would overflow, so the kernel's
    choice between its two forms is tested on both sides."""
    import math
    from oracles.chunked_f64 import chunk_cumsum_f64
    fact_range = pytest.importorskip("kernels.cutile.kernels").FACT_RANGE
    cfg = _scan_config(problem)
    kw = problem.inputs()
    cs, _ = chunk_cumsum_f64(kw["dt"], kw["A"], problem.chunk_size, kw.get("dt_bias"), kw["dt_softplus"],
                             kw.get("dt_limit", (0.0, math.inf)))
    reach = float(cs.abs().max()) / math.log(2.0)
    assert cfg.get("FACT") and reach >= fact_range, \
        f"{problem}: chunk_scan {cfg}, largest |cumulative log2-decay| {reach:.1f} (FACT_RANGE {fact_range:g})"


def test_the_battery_decay_leaves_float32s_range_on_the_factored_row():
    """cutile_fast's fc_fact_guard_inverted (the factored form taken exactly where it overflows)
    outlived a 60 s fuzz run on the H200 when the battery's decays centred on 1 (a chunk's largest
    sum 46 in log2, under FACT_RANGE 64): the battery's whole-chunk problem at chunk 64 (bfloat16,
    whose exponent range is float32's) must reach it."""
    whole = next(p for p in triage.battery(lookup("cutile"), gpu=True)
                 if p.chunk_size == 64 and not p.uses_seq_idx and not p.partial_last_chunk)
    assert whole.dtype != "float16"   # the factored form is off for float16
    check_decay_leaves_float32_range(whole)
    with pytest.raises(AssertionError, match="FACT_RANGE"):
        check_decay_leaves_float32_range(whole.replace(decay=1.0))


def _head_pairs(problem) -> bool:
    """Whether cuTile's chunk_scan runs `problem` two heads of a group per block (HB=2 after the
    launcher's fallback to one head where a group has an odd head count; the walk runs no scan)."""
    from kernels.cutile import launcher
    table = _table_problem(problem)
    if launcher._walk_config(table) is not None:
        return False
    return launcher._scan_launch_config(table, problem.nheads, problem.ngroups).get("HB") == 2


def test_the_model_layer_battery_runs_the_fast_scans_head_pairs():
    """cutile_fast's fp_* mutants (a pair's second head reads the first's state, cumulative sums or x, or
    its output is never stored) show only where chunk_scan pairs heads: an aligned chunk-64 problem with
    an even head count per group. The plain battery keeps odd counts (3 per group, so a pairing across
    groups, fl_pairs_across_groups, dies at its second example); the model-layer twin at dstate 256 has
    an even count. With 18 heads (9 per group) it had none, and fp_cs_of_first waited 66 s for a draw
    on the H200 (lab/reports/2026-12-03-scan-bn64.md)."""
    info = lookup("cutile")
    plain = triage.battery(info, True)
    assert not any(map(_head_pairs, plain))
    assert any(p.chunk_size == 64 and not p.uses_seq_idx and (p.nheads // p.ngroups) % 2 for p in plain)
    model = [p for dtype in info.dtypes for p in triage.battery(info, True, dtype, regime="model")]
    paired = [p for p in model if _head_pairs(p)]
    assert paired, "no model-layer battery problem runs chunk_scan's head pairs"
    assert not any(_head_pairs(p.replace(nheads=18)) for p in paired)   # the twin before: 9 heads per group


def _empty_grid_under_a_shape_blind_cache(problems) -> bool:
    """Whether a launch cache keyed on (dtype, chunk size) alone, keeping the first call's tiles as TileGym's
    autotune picks them (a headdim tile of min(64, headdim)), launches some later problem of the same key
    with an empty grid (headdim // tile = 0): TileGym's tg_launch_cache_shape_blind fails there."""
    tile = {}
    for p in problems:
        key = (p.dtype, p.chunk_size)
        tile.setdefault(key, min(64, p.headdim))
        if p.headdim // tile[key] == 0:
            return True
    return False


def test_a_battery_without_the_packed_problem_meets_its_first_key_at_two_shapes():
    """TileGym's battery (seqlen a multiple of the chunk: no packed problem) had one problem per dtype, so
    no two calls shared a compile key with other sizes, and tg_launch_cache_shape_blind waited 22-95 s for
    a draw (60.5 s on 2026-12-04, TileGym's maximum). A second problem of the first dtype and chunk size,
    below a 64-wide tile, comes last. Batteries with the packed problem keep theirs: its first dtype
    meets two shapes already (headdim 128 packed, 64 whole)."""
    tilegym = triage.battery(lookup("tilegym"), True)
    assert _empty_grid_under_a_shape_blind_cache(tilegym)
    assert not _empty_grid_under_a_shape_blind_cache(tilegym[:-1])   # the battery before
    last = tilegym[-1]
    assert (last.dtype, last.chunk_size) == (tilegym[0].dtype, tilegym[0].chunk_size) and max(last.headdim, last.dstate) < 64
    for name in ("cutile", "mamba-ssm", "torch-ref"):
        assert all(p.headdim >= 64 for p in triage.battery(lookup(name), True)), name
    # the model layers (headdim 64) and the gradient draws' anchors (no explicit examples) keep theirs
    from properties import grad_strategies
    assert all(p.headdim >= 64 for p in triage.battery(lookup("tilegym"), True, "bfloat16", "model"))
    assert all(g.headdim >= 64 for g in grad_strategies.battery(lookup("tilegym"), True))
