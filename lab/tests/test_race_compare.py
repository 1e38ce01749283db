"""lab.bench.race_compare: two race runs side by side, shape by shape."""
import json

from lab.bench import race_compare


def _run(folder, ms, copy_gbps, shapes=("b2-l32768-h32-p64-n64-g1",), tileiras="13.4.92", ok=True):
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"env": {"gpu": "GPU X", "driver": "1", "git": "abc", "cuda_tile": "1.7.0",
                   "toolchain": {"tileiras": tileiras}},
           "ceilings": {"copy_GBps": copy_gbps},
           "shapes": [{"id": s, "impls": {"cutile": {"ok": ok, "ms": ms, "best_chunk": 64, "io_bytes": 10,
                                                     "x_floor_io": ms * copy_gbps / 1000}}} for s in shapes]}
    (folder / "n64.json").write_text(json.dumps(doc))


def test_ratios_per_shape_and_the_floor_ratio_divides_out_the_copy_rate(tmp_path, capsys):
    _run(tmp_path / "a" / "g", 1.0, 3000)
    _run(tmp_path / "b" / "g", 1.1, 2000, tileiras="13.5.37")   # slower in ms, on a slower host
    assert race_compare.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c.md")]) == 0
    text = capsys.readouterr().out
    assert "| b2-l32768-h32-p64-n64-g1 | 64 | 64 | 1.0000 | 1.1000 | 1.100 |" in text
    assert "x floor B/A median 0.733" in text        # 1.1 * 2000 / (1.0 * 3000)
    assert "13.4.92" in text and "13.5.37" in text and "copy 2000 GB/s" in text
    assert (tmp_path / "c.md").read_text().strip() == text.strip()


def test_a_shape_wrong_or_missing_in_one_run_is_left_out_and_named(tmp_path, capsys):
    _run(tmp_path / "a", 1.0, 3000, shapes=("s1", "s2"))
    _run(tmp_path / "b", 1.0, 3000, shapes=("s1",))
    assert race_compare.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("1 shapes") and "only in A: s2" in last
    _run(tmp_path / "c", 1.0, 3000, shapes=("s1",), ok=False)
    assert race_compare.main([str(tmp_path / "a"), str(tmp_path / "c")]) == 1
