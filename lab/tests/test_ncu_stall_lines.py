"""lab/scripts/ncu_stall_lines.py reads Nsight Compute's source page (per-instruction warp stalls), and
lab.bench.segment_passes --without times a forward without an optional input: both on the CPU, from
hand-written inputs whose answers are known."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("ncu_stall_lines", ROOT / "lab" / "scripts" / "ncu_stall_lines.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"# Samples","Instructions Executed","stall_long_sb","stall_barrier","stall_selected",'
          '"stall_long_sb (Not Issued)"')


def _page(tmp_path: Path) -> Path:
    """Two kernels; the second has a consumer loop (ran 8 times), a wait that never ran and a producer
    (ran 2 times)."""
    rows = [
        '"Kernel Name","first_kernel_A"', HEADER,
        '"0x10","MOV R1, R2","5","5","5","4","0","0","5","0"',
        '"Kernel Name","walk_kernel_B"', HEADER,
        '"0x20","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x10], R2","1","1","1","8","1","0","0","1"',
        '"0x30","@!P0 BRA 0x40","60","60","60","8","60","0","0","60"',
        '"0x38","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x20], R2","0","0","0","0","0","0","0","0"',
        '"0x40","FFMA R3, R4, R5, R6","20","10","20","8","0","0","20","0"',
        '"0x50","WARPGROUP.DEPBAR.LE gsb0, 0x0","19","19","19","8","0","19","0","0"',
        '"0x60","@!P0 NANOSLEEP.SYNCS 0x989680","100","100","100","2","100","0","0","100"',
    ]
    path = tmp_path / "page.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_consumers_shares_are_taken_over_its_own_instructions(tmp_path, capsys):
    tool = _tool()
    page = _page(tmp_path)
    assert tool.main([str(page), "--kernel", "walk", "--executed", "8", "--min-share", "15"]) == 0
    out = capsys.readouterr().out
    assert "samples 100 of 200 (50.0%) in the 4 instructions that ran 8 times" in out
    words = [ln.split() for ln in out.splitlines()]
    assert ["long_sb", "61.0%"] in words and ["barrier", "19.0%"] in words and ["selected", "20.0%"] in words
    lines = {w[0]: w[1:] for w in words if w and w[0].isdigit()}
    assert lines["1"][:3] == ["60.0%", "long_sb", "8"] and lines["3"][:3] == ["20.0%", "selected", "8"]
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in lines["0"] and "WARPGROUP.DEPBAR.LE" in lines["4"]  # always listed
    assert "2" not in lines                                     # a wait that never ran is not listed
    assert "5" not in lines                                     # the producer's sleep ran 2 times: left out


def test_a_digest_reads_back_as_the_page_did_and_a_wrong_pick_is_refused(tmp_path, capsys):
    tool = _tool()
    page = _page(tmp_path)
    digest = tmp_path / "walk.csv.xz"
    assert tool.main([str(page), "--kernel", "walk", "--executed", "8", "--digest", str(digest)]) == 0
    full = capsys.readouterr().out
    assert tool.main([str(digest), "--executed", "8"]) == 0
    assert capsys.readouterr().out == full                      # the same indexes: the page's rows
    assert len(tool.blocks(str(digest))[0][2]) == 5             # the wait that never ran is left out
    assert tool.main([str(page), "--kernel", "walk", "--index", "1"]) == 2
    assert "1 kernel(s) named with 'walk'" in capsys.readouterr().err


def test_a_page_without_the_stall_columns_is_refused_by_name(tmp_path):
    tool = _tool()
    bad = tmp_path / "details.csv"
    bad.write_text('"Kernel Name","k"\n"Address","Source"\n"0x1","NOP"\n')
    with pytest.raises(SystemExit, match="Warp Stall Sampling"):
        tool.main([str(bad)])


def test_segment_passes_without_leaves_the_named_input_out(monkeypatch):
    from lab.bench import ab_row, segment_passes
    monkeypatch.setattr(ab_row, "forward_kwargs", lambda shape: {"x": 1, "D": 2, "z": 3})
    assert segment_passes._inputs(None, ("D",)) == {"x": 1, "z": 3}
    assert segment_passes._inputs(None, ()) == {"x": 1, "D": 2, "z": 3}
    with pytest.raises(SystemExit):
        segment_passes.main(["--shape", "b2-l32768-h32-p64-n64-g1", "--variant", "4", "--without", "x", "--list"])


def test_opcodes_count_the_chosen_instructions_that_ran_without_predicates(tmp_path, capsys):
    tool = _tool()
    page = _page(tmp_path)
    assert tool.main([str(page), "--kernel", "walk", "--executed", "8", "--opcodes"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("opcodes of the 4 instructions that ran: ")
    assert sorted(last.split(": ")[1].split(", ")) == ["BRA 1", "FFMA 1", "SYNCS 1", "WARPGROUP 1"]
    assert tool.main([str(page), "--kernel", "walk", "--opcodes"]) == 0   # the producer's sleep too,
    last = capsys.readouterr().out.splitlines()[-1]                       # not the wait that never ran
    assert sorted(last.split(": ")[1].split(", ")) == ["BRA 1", "FFMA 1", "NANOSLEEP 1", "SYNCS 1", "WARPGROUP 1"]
