"""Mutants of cuTile's chunk walk (kernels.py `chunk_walk_kernel`; launcher `_walk_config`).

The walk replaces chunk_state and chunk_scan where the table's chunk_walk rows match: aligned problems
without seq_idx at chunk 64, dstate 64 or 128, batch*heads >= 256, no varlen_states. Among the GPU
draws only the model layers' wide half (batch 8 x 32-36 heads) reaches it: about 14% of that regime's
draws at dstate 64 and 2% at 128 (tests/test_strategies.py keeps every row above 1%). Its diagonal
tile and D/z tail are the scan's own helpers (`_chunk_diagonal`, `_d_skip`, `_gate_store`), mutated in
catalog_cutile_fast.py; these mutate what only the walk does: carry the state from chunk to chunk in
registers, read the operands of its head's group, and hand y the state entering each chunk. The
dstate-64 rows order a step's products with ORD=1 (`_walk_step`), the dstate-128 rows keep ORD=0
(`_walk_chunk`); the fw_ord_* mutants are the ORD=1 step's own lines.
Running them needs a GPU: `python -m mutation.run --catalog cutile_walk --no-baseline --budget-s 300`.
"""
from __future__ import annotations

from mutation.catalog import maker

IMPL = "cutile"
K = "kernels/cutile/kernels.py"
LAUNCHER = "kernels/cutile/launcher.py"

_m = maker(K)


MUTANTS = (
    _m("fw_end_row", "decay",
       "chunk-end decay of the walked state read one token early",
       "end = ct.extract(cst, (BL - 1,), shape=(1,))",
       "end = ct.extract(cst, (BL - 2,), shape=(1,))"),
    _m("fw_weight_sign", "decay",
       "the walk's chunk weights 2^(cs_j - cs_end) instead of 2^(cs_end - cs_j)",
       "(dtt * ct.exp2(end - cst))",
       "(dtt * ct.exp2(cst - end))"),
    _m("fw_state_not_decayed", "decay",
       "the walked state carried into the next chunk without its decay",
       "return walked * ct.exp2(end).reshape((1, 1)) + own",
       "return walked + own"),
    _m("fw_c_of_wrong_group", "layout",
       "C read from group head % g instead of head's own group (heads // heads_per_group)",
       "ck = ct.load(Cm, (bi, c, grp, 0)",
       "ck = ct.load(Cm, (bi, c, head % Cm.shape[2], 0)"),
    _m("fw_init_ignored", "state",
       "initial_states never loaded: the walk starts from zero",
       "walked = ct.load(init, (bi, head, ptile, 0), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))",
       "walked = ct.zeros((BP, BN), ct.float32)"),
    _m("fw_final_of_head0", "state",
       "every head's final state written to head 0's slot",
       "ct.store(final, (bi, head, ptile, 0), walked",
       "ct.store(final, (bi, 0, ptile, 0), walked"),
    _m("fw_y_from_next_state", "state",
       "y of a chunk computed from the state leaving it instead of the one entering it",
       "yt = ct.mma(ck, ct.transpose(walked.astype(ck.dtype)), ct.zeros((BL, BP), ct.float32))",
       "yt = ct.mma(ck, ct.transpose((walked * ct.exp2(ct.extract(cst, (BL - 1,), shape=(1,))).reshape((1, 1)) "
       "+ ct.mma(ct.transpose(xt), (bk.astype(ct.float32) * (dtt * ct.exp2(ct.extract(cst, (BL - 1,), shape=(1,)) "
       "- cst))[:, None]).astype(xt.dtype), ct.zeros((BP, BN), ct.float32))).astype(ck.dtype)), "
       "ct.zeros((BL, BP), ct.float32))"),
    _m("fw_ord_y_from_next_state", "state",
       "ORD=1 (the dstate-64 rows): y of a chunk from the state leaving it instead of the one entering it",
       "yt = ct.mma(ck, ct.transpose(entering), ct.zeros((BL, BP), ct.float32))",
       "yt = ct.mma(ck, ct.transpose(_carry(walked, own, end).astype(ck.dtype)), ct.zeros((BL, BP), ct.float32))"),
    _m("fw_ord_entering_not_decayed", "decay",
       "ORD=1 (the dstate-64 rows): C S^T added to y without its in-chunk decay 2^cs",
       "yt = yt * ct.exp2(cst)[:, None] + yd",
       "yt = yt + yd"),
    _m("fw_ord_own_state_of_next_step", "state",
       "ORD=1 (the dstate-64 rows): a chunk's own state left out of the state it hands on",
       "    return _carry(walked, own, end)",
       "    return _carry(walked, own * 0.0, end)"),
    _m("fw_taken_unaligned", "seq_idx",
       "the walk also taken for unaligned problems and with seq_idx (it has no masks)",
       "if cfg.get(\"BN\") != prob.dstate or not prob.aligned or prob.chunk_size != cfg.get(\"BL\"):",
       "if cfg.get(\"BN\") != prob.dstate or prob.chunk_size != cfg.get(\"BL\"):",
       equivalent="under the table: its walk rows test alignment themselves; the launcher's check guards "
                  "overrides (SSDCHECK_CUTILE_CONFIG=chunk_walk:BN=64 on every problem), where "
                  "tests/test_cutile_cpu.py::test_the_walk_replaces_state_and_scan_only_where_its_row_matches"
                  "_and_no_chunk_states_are_needed kills it on the CPU",
       file=LAUNCHER),
    _m("fw_taken_for_varlen", "state",
       "the walk also taken when varlen_states are asked for: they read chunk states never written",
       "walk = None if return_varlen_states else _walk_config(",
       "walk = _walk_config(",
       equivalent="varlen_states need seq_idx (the contract), and with seq_idx the walk is off (not aligned): "
                  "the guard is a second lock on the same door",
       file=LAUNCHER),
)
