"""lab/scripts/ncu_details_digest.py reads Nsight Compute's details page kernel by kernel."""
import importlib.util
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    "ncu_details_digest", os.path.join(os.path.dirname(__file__), "..", "scripts", "ncu_details_digest.py"))
digest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(digest)

PAGE = """[1] python3.12@127.0.0.1
  chunk_cumsum_kernel_Kt1_A3f32 (128, 2, 8)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Duration                         us        13.57
    Section: Instruction Statistics
    Executed Instructions                           inst  1,000
  chunk_walk_kernel_Kt2_A4bf16 (1, 32, 8)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Duration                         us       {dur}
    Issue Slots Busy               %        40.57
    Executed Instructions                           inst  {inst}
    Registers Per Thread             register/thread             128
"""


def test_launches_metrics_and_instructions_per_step():
    launches = digest.parse(PAGE.format(dur="285.34", inst="109,159,474"))
    assert [(l["name"], l["blocks"]) for l in launches] == [("chunk_cumsum", 2048), ("chunk_walk", 256)]
    walk = digest.rows(launches, "chunk_walk", 128)[0]
    assert walk["Duration"] == pytest.approx(285.34) and walk["Registers Per Thread"] == 128
    assert walk["Issue Slots Busy"] == pytest.approx(40.57)
    assert walk["inst/step"] == pytest.approx(109159474 / (256 * 128))


def test_two_pages_side_by_side(tmp_path, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(PAGE.format(dur="100.0", inst="2,000"))
    b.write_text(PAGE.format(dur="110.0", inst="1,000"))
    assert digest.main([str(a), str(b), "--kernel", "chunk_walk"]) == 0
    out = capsys.readouterr().out
    assert "| 1. chunk_walk (1, 32, 8) | Duration | 100 | 110 | 1.100 |" in out
    assert "| Executed Instructions | 2,000 | 1,000 | 0.500 |" in out
    assert digest.main([str(a), "--kernel", "chunk_scan"]) == 1      # no such launch: said, not an empty table
