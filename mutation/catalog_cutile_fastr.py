"""Mutants of the cuTile FAST scan's column tiles (kernels.py `_scan_chunk` with a chunk wider than its
64-row tile: FAST = chunk size 128 or 256, BL = 64).

Table rows select that path for aligned problems without seq_idx at chunk 128 and 256 (sweep 4), so
the catalog runs the table as shipped (no ENV): it says whether the suite catches a broken column tile
there. It needs a GPU: `python -m mutation.run --catalog cutile_fastr`.
"""
from __future__ import annotations

from mutation.catalog import maker

IMPL = "cutile"
K = "kernels/cutile/kernels.py"

_m = maker(K)

MUTANTS = (
    _m("fr_col_loop_short", "tiling",
       "the column loop stops one tile early: a row tile misses the tile left of it",
       "    for j in range(m):\n        jb = c * n_sub + j",
       "    for j in range(m - 1):\n        jb = c * n_sub + j"),
    _m("fr_col_dt_of_row", "dt",
       "column-tile weights take the output row's dt instead of the source token's",
       "* ct.exp2(cst[:, None] - cs_j[None, :], flush_to_zero=ftz) * dt_j[None, :]",
       "* ct.exp2(cst[:, None] - cs_j[None, :], flush_to_zero=ftz) * dtt[:, None]"),
    _m("fr_col_B_of_row", "tiling",
       "the column tile's B read at the row tile's position",
       "cbj = _scores(Cm, Bm, bi, blk, jb, grp, BL, BN, LAT)",
       "cbj = _scores(Cm, Bm, bi, blk, blk, grp, BL, BN, LAT)"),
    _m("fr_col_x_of_row", "tiling",
       "the column tile's x read at the row tile's position",
       "xj = ct.load(x, (bi, jb, head, ptile)",
       "xj = ct.load(x, (bi, blk, head, ptile)"),
)
