"""Mutants of cuTile's segmented walk (kernels.py `segment_state_kernel`, `segment_pass_kernel`; launcher
`_segment_plan`, `_run_segments`).

The table takes the segmented walk only at seqlen >= 16K with few (batch, head) pairs (aligned, chunk
64, headdim 64, dstate 64, 16-bit), which no drawn problem reaches, so the suite that judges these is
tests/test_regressions.py's long sequences (TESTS, PYTEST_ARGS): 16K-token problems the table
segments as it ships (128 segments at 2 pairs, 16 at 16 pairs in 2 groups, one with initial states).
Pass 3 is chunk_walk_kernel itself (mutated in catalog_cutile_walk.py); these mutate what only the
segmentation does: each segment's end state and total decay, the scan over segments, and the
launcher's segment views.
Running them needs a GPU: `python -m mutation.run --catalog cutile_seg --no-baseline --budget-s 300`.
"""
from __future__ import annotations

from mutation.catalog import maker

IMPL = "cutile"
K = "kernels/cutile/kernels.py"
LAUNCHER = "kernels/cutile/launcher.py"
TESTS = "tests/test_regressions.py"
PYTEST_ARGS = ("-k", "long_sequence")

_m = maker(K)


MUTANTS = (
    _m("sg_entering_from_zero", "state",
       "each segment's walk starts from zero: the scan's entering state never stored",
       "        ct.store(entering, (seg, head, ptile, ntile), carried.reshape((1, 1, BP, BN)))",
       "        ct.store(entering, (seg, head, ptile, ntile), ct.zeros((1, 1, BP, BN), ct.float32))"),
    _m("sg_decay_of_next_segment", "decay",
       "pass 2 decays the carried state by the next segment's total decay (off by one segment)",
       "carried = carried * ct.exp2(ct.load(decay, (seg, head, 0), shape=())) + end_state",
       "carried = carried * ct.exp2(ct.load(decay, (ct.minimum(seg + 1, bi * nseg + nseg - 1), head, 0), "
       "shape=())) + end_state"),
    _m("sg_entering_after_own_segment", "state",
       "the entering state stored after its own segment is added (the state leaving the segment)",
       "        ct.store(entering, (seg, head, ptile, ntile), carried.reshape((1, 1, BP, BN)))\n"
       "        end_state = ct.load(ends, (seg, head, ptile, ntile), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))\n"
       "        carried = carried * ct.exp2(ct.load(decay, (seg, head, 0), shape=())) + end_state",
       "        end_state = ct.load(ends, (seg, head, ptile, ntile), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))\n"
       "        carried = carried * ct.exp2(ct.load(decay, (seg, head, 0), shape=())) + end_state\n"
       "        ct.store(entering, (seg, head, ptile, ntile), carried.reshape((1, 1, BP, BN)))"),
    _m("sg_decay_missing_first_chunk", "decay",
       "a segment's total decay sums its chunks' ends from the second chunk on",
       "        total = total + end",
       "        total = total + ct.where(c > 0, end, 0.0)"),
    _m("sg_end_state_skips_last_chunk", "tiling",
       "pass 1 walks one chunk fewer than its segment holds (the segment boundary a chunk early)",
       "    for c in range(nchunks):\n        xt = ct.load(x, (bs, c, head, ptile)",
       "    for c in range(nchunks - 1):\n        xt = ct.load(x, (bs, c, head, ptile)"),
    _m("sg_init_ignored", "state",
       "pass 2 drops initial_states: the first segment starts from zero",
       "        carried = ct.load(init, (bi, head, ptile, ntile), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))",
       "        carried = ct.zeros((BP, BN), ct.float32)"),
    _m("sg_ends_of_wrong_group", "groups",
       "pass 1 reads B of group head % g instead of the head's own group",
       "        bt = ct.load(Bm, (bs, c, grp, ntile)",
       "        bt = ct.load(Bm, (bs, c, head % Bm.shape[2], ntile)"),
    _m("sg_final_of_last_entering", "state",
       "the final state is the last segment's entering state (its own chunks left out)",
       "    ct.store(final, (bi, head, ptile, ntile), carried.reshape((1, 1, BP, BN)))",
       "    ct.store(final, (bi, head, ptile, ntile), ct.load(entering, (bi * nseg + nseg - 1, head, ptile, ntile), "
       "shape=(1, 1, BP, BN)))"),
    _m("sg_segment_rows_interleaved", "layout",
       "the segment views' rows taken as s * b + sample instead of sample * S + s in pass 2",
       "        seg = bi * nseg + s",
       "        seg = s * ct.num_blocks(2) + bi"),
    _m("sg_final_from_the_walk", "state",
       "the final states taken from pass 3's walk at each sample's first segment instead of from pass 2",
       "    y, _ = _run_walk(walk_cfg, xs, zs, Bs, Cs, dtc, cs, entering, D32, stream)\n    return y.view(b, l, h, p), final",
       "    y, final = _run_walk(walk_cfg, xs, zs, Bs, Cs, dtc, cs, entering, D32, stream)\n"
       "    return y.view(b, l, h, p), final[::nseg]",
       file=LAUNCHER),
    _m("sg_taken_unaligned", "padding",
       "the segmented walk also taken for unaligned problems and with seq_idx (its passes have no masks)",
       "if state.get(\"BN\") == 0 or not prob.aligned or prob.chunk_size != state.get(\"BL\"):",
       "if state.get(\"BN\") == 0 or prob.chunk_size != state.get(\"BL\"):",
       equivalent="under the table: its segment row tests alignment itself; the launcher's check guards "
                  "the force switch (SSDCHECK_CUTILE_SEGMENTS=4 on every problem), where "
                  "tests/test_segments.py::test_forced_segments_leave_every_problem_the_passes_cannot_serve_to_"
                  "the_other_paths kills it on the CPU",
       file=LAUNCHER),
)
