"""lab/scripts/toolchain_compare.py: the side-by-side table says what differs between toolchains."""
from __future__ import annotations

from lab.scripts import toolchain_compare as tcmp

A = {"ok": True, "s": 1.0, "error": "", "regcount": 128, "frame": 0, "smem": 1024}


def test_the_table_names_each_difference_and_counts_it():
    jobs = [("chunk_scan[float32|BL=64]", "sm_90"), ("chunk_cumsum[float32|BL=64]", "sm_120"), ("k[x]", "sm_100")]
    b_fail = {"ok": False, "s": 0.5, "error": "TileCompilerExecutionError: boom"}
    lines, counts = tcmp.table(jobs, [A, A, A], [dict(A, regcount=130, frame=64), A, b_fail])
    assert lines[2].startswith("| `chunk_scan[float32\\|BL=64]` | sm_90 | 128 / 0 / 1024 | 130 / 64 / 1024 |")
    assert "regcount 128 -> 130, frame 0 -> 64" in lines[2]
    assert lines[3].endswith("| - |")
    assert "FAIL" in lines[4] and "compiles under A only" in lines[4] and "B: TileCompilerExecutionError: boom" in lines[4]
    assert (counts["result"], counts["regcount"], counts["frame"], counts["smem"]) == (1, 1, 1, 0)
