"""The race's arithmetic, groups, runner and report, on the CPU (the race itself needs a GPU)."""
from __future__ import annotations

import json
import lzma
import math

import pytest
import torch

from lab.bench import merge, race, roofline
from lab.bench.shapes import CHUNKS, GROUPS, ORDER, SEQS, Shape, grid

KNOWN = Shape(batch=8, seqlen=2048, nheads=32, dstate=128, ngroups=1)   # the README's measured shape


# ---------------------------------------------------------------- floors and FLOPs on a known shape

def test_io_bytes_of_a_known_shape():
    x = y = 8 * 2048 * 32 * 64 * 2          # bf16
    dt = 8 * 2048 * 32 * 4                  # fp32
    bc = 2 * 8 * 2048 * 1 * 128 * 2
    a = d = 32 * 4
    assert roofline.io_bytes(KNOWN) == x + y + dt + bc + a + d == 144_703_744
    assert roofline.input_bytes(KNOWN) == 144_703_744 - y


def test_state_bytes_and_floors_of_a_known_shape():
    st = roofline.state_bytes(KNOWN, 64, 2)
    assert st == 8 * 32 * 32 * 64 * 128 * 2 == 134_217_728        # b * nchunks * h * p * n * bf16
    assert roofline.state_bytes(KNOWN, 256, 4) == 8 * 8 * 32 * 64 * 128 * 4
    io_ms, st_ms = roofline.floors_ms(KNOWN, 64, 2, copy_GBps=4000.0)
    assert io_ms == pytest.approx(144_703_744 / 4e9)
    assert st_ms == pytest.approx((144_703_744 + 2 * 134_217_728) / 4e9)


def test_flops_of_a_known_shape():
    L, p, n, h, g = 64, 64, 128, 32, 1
    per_chunk = h * (2 * L * p * n + 2 * L * p * n + 2 * L * L * p) + g * 2 * L * L * n
    assert roofline.flops(KNOWN, 64) == 8 * 32 * per_chunk == 21_743_271_936
    grouped = Shape(2, 100, 16, 64, ngroups=8)                # a partial last chunk counts whole
    L = 128
    assert roofline.nchunks(100, 128) == 1
    assert roofline.flops(grouped, 128) == 2 * (16 * (4 * L * 64 * 64 + 2 * L * L * 64) + 8 * 2 * L * L * 64)


def test_metrics_are_rates_against_the_ceilings():
    m = roofline.metrics(KNOWN, 64, ms=0.5, state_elem_bytes=2, copy_GBps=4000.0, matmul_TFLOPs=800.0)
    assert m["TFLOPs"] == pytest.approx(21_743_271_936 / 0.5e-3 / 1e12)
    assert m["frac_matmul"] == pytest.approx(m["TFLOPs"] / 800.0)
    assert m["io_GBps"] == pytest.approx(144_703_744 / 0.5e-3 / 1e9)
    assert m["x_floor_states"] == pytest.approx(0.5 / m["floor_states_ms"])


# ---------------------------------------------------------------- shapes and groups

def test_the_grid_covers_the_issue_and_the_groups_cover_the_grid():
    shapes = grid()
    assert len(set(shapes)) == 60
    assert {s.nheads for s in shapes} == {32, 64} and {s.dstate for s in shapes} == {64, 128, 256}
    assert {s.ngroups for s in shapes} == {1, 8} and {s.headdim for s in shapes} == {64}
    assert SEQS[0] == (8, 2048) and SEQS[-1] == (2, 65536)
    covered = {s for name in ORDER for s in GROUPS[name].shapes}
    assert set(shapes) <= covered
    tilegym = {sid for name in ORDER for sid in GROUPS[name].tilegym_shapes}
    assert len(tilegym) >= 6
    for name in ORDER:
        g = GROUPS[name]
        assert 0 < g.est_min <= 9.5, name              # a 10-minute command, with margin
        for s in g.shapes:
            if g.runs("tilegym", s):                   # only shapes TileGym supports
                assert s.nheads % 4 == 0 and all(s.seqlen % c == 0 for c in g.chunks_for("tilegym"))
    assert all(c in CHUNKS for name in ORDER for impl in GROUPS[name].impls for c in GROUPS[name].chunks_for(impl))


def test_the_float64_check_runs_the_dispatch_rows_that_are_timed():
    """The race checks each implementation against float64 on a downscaled copy: shortening the
    sequence must leave cuTile's dispatch choices as they are at full size (they look at batch x
    heads, dstate, the chunk and alignment), or the check verifies other tiles than the timing runs."""
    from kernels.cutile import dispatch, launcher
    for shape in grid():
        full = make_meta(shape, shape.seqlen)
        small = race.downscale(full)
        assert small["x"].shape[0] == shape.batch and small["x"].shape[1] == min(shape.seqlen, race.SMALL_SEQLEN)
        for chunk in CHUNKS:
            a = launcher._problem(full["x"], full["B"], chunk, None)
            b = launcher._problem(small["x"], small["B"], chunk, None)
            for kernel in ("chunk_state", "chunk_scan"):
                assert dispatch.choose(kernel, a) == dispatch.choose(kernel, b), (shape.id, chunk, kernel)


def make_meta(shape, seqlen):
    """The race's inputs as meta tensors (shapes and dtypes only)."""
    dt = race.TORCH_DTYPES[shape.dtype]
    b, h, g = shape.batch, shape.nheads, shape.ngroups
    return {"x": torch.empty(b, seqlen, h, shape.headdim, device="meta", dtype=dt),
            "dt": torch.empty(b, seqlen, h, device="meta"),
            "B": torch.empty(b, seqlen, g, shape.dstate, device="meta", dtype=dt),
            "C": torch.empty(b, seqlen, g, shape.dstate, device="meta", dtype=dt)}


def test_every_shape_is_larger_than_l2():
    for s in grid():
        assert s.batch * s.seqlen * s.nheads * s.headdim * 2 > 50 * 2**20, s.id


def test_race_cli_lists_groups_and_guards_its_preconditions(capsys, monkeypatch):
    assert race.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in ORDER)
    monkeypatch.setenv("TILEGYM_DISABLE_AUTOTUNE", "1")
    assert race.main(["--group", "smoke", "--out", "unused"]) == 2
    assert "TILEGYM_DISABLE_AUTOTUNE is set" in capsys.readouterr().err


def test_parse_chunk_overrides():
    assert race._parse_chunks("tilegym=64+128,cutile=256") == {"tilegym": (64, 128), "cutile": (256,)}


# ---------------------------------------------------------------- the runner end to end, on the CPU

def test_runner_on_cpu_writes_what_merge_reads(tmp_path):
    from lab.bench.shapes import Group
    shapes = (Shape(2, 128, 4, 16, 2, headdim=16, dtype="float32"), Shape(1, 64, 4, 16, 1, headdim=16, dtype="float32"))
    impls = ("torch-ref", "kernels.torch_ref:INFO", "no.such.module:fn")
    group = Group("cpu", shapes, impls, chunks={"torch-ref": (64,), "kernels.torch_ref:INFO": (64,)})
    out = tmp_path / "cpu.json"
    runner = race.Runner(group, impls, str(out), budget_s=120, device="cpu", baseline="torch-ref",
                         ceilings={"copy_bytes": 2**20, "mm_n": 64})
    runner.graphs = True             # no CUDA here: each chunk says why it has no graph figure
    runner.run(shapes)
    doc = json.loads(out.read_text())
    assert doc["schema"] == race.SCHEMA and doc["complete"] and doc["aborted"] is None
    assert len(doc["env"]["kernels_sha256"]) == 64                 # which kernels ran, whatever .git says
    assert doc["ceilings"]["copy_GBps"] > 0 and doc["ceilings"]["matmul_TFLOPs"] > 0
    rec = doc["shapes"][0]
    ref = rec["impls"]["torch-ref"]
    assert ref["status"] == "ok" and ref["best_chunk"] == 64 and ref["ok"]
    c = ref["chunks"]["64"]
    assert c["err_f64_small"] < 1e-4 and c["err_vs_anchor"] == 0.0 and c["ms"] > 0
    assert "graph_ms" not in c and "need a CUDA device" in c["graph_error"] and "graph_ms" not in ref
    assert rec["impls"]["no.such.module:fn"]["status"] == "unavailable"
    assert rec["speedup"]["torch-ref"] == 1.0 and "kernels.torch_ref:INFO" in rec["speedup"]
    assert rec["input_sets"] > 1                                   # tiny inputs: rotated sets
    assert "torch-ref" in race.summary_table(doc)

    assert merge.main([str(tmp_path), "--out", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "bench.md").read_text()
    assert shapes[0].label in md and "kernels.torch_ref:INFO" in md and "no.such.module:fn" in md


# ---------------------------------------------------------------- merge and plot on synthetic results

def _doc(group, started, results, ceilings=None):
    """A lab.bench.race JSON: results = [(shape, {impl: ms or None (failed)}, ok)]."""
    shapes = []
    for shape, by_impl, ok in results:
        impls = {}
        for impl, ms in by_impl.items():
            if ms is None:
                impls[impl] = {"status": "failed", "chunks": {"64": {"status": "failed", "reason": "boom"}}}
                continue
            impls[impl] = {"status": "ok", "best_chunk": 64, "ms": ms, "ok": ok, "first_call_s": 2.0,
                           "state_elem_bytes": 2,
                           "chunks": {"64": {"status": "ok", "ms": ms, "ms_p20": ms * 0.99, "ms_p80": ms * 1.01,
                                             "err_f64_small": 3e-3, "err_vs_anchor": 5e-3, "anchor": "mamba-ssm cs64"}}}
        base = impls.get("mamba-ssm", {}).get("ms")
        rec = {"shape": shape.as_dict(), "id": shape.id, "label": shape.label, "impls": impls}
        if base:
            rec["speedup"] = {i: base / e["ms"] for i, e in impls.items() if e["status"] == "ok"}
        shapes.append(rec)
    return {"schema": race.SCHEMA, "group": group, "started": started, "complete": True, "aborted": None,
            "elapsed_s": 100.0, "env": {"gpu": "NVIDIA H200", "torch": "2.11.0"},
            "ceilings": ceilings or {"copy_GBps": 4300.0, "matmul_TFLOPs": 780.0}, "shapes": shapes}


def test_merge_writes_tables_plot_and_notes(tmp_path):
    s1, s2, s3 = Shape(8, 2048, 32, 128, 1), Shape(2, 32768, 32, 128, 1), Shape(8, 2048, 64, 64, 8)
    a = _doc("n128", "2026-11-30T01:00:00+00:00",
             [(s1, {"mamba-ssm": 0.45, "cutile": 0.30}, True), (s2, {"mamba-ssm": 4.0, "cutile": None}, True)])
    b = _doc("tg128", "2026-11-30T02:00:00+00:00",
             [(s1, {"mamba-ssm": 0.46, "tilegym": 0.168, "cutile": 0.31}, True)])
    c = _doc("n64", "2026-11-30T03:00:00+00:00", [(s3, {"mamba-ssm": 1.0, "cutile": 2.0}, False)])
    (tmp_path / "runs").mkdir()
    for d in (a, b, c):
        (tmp_path / "runs" / f"{d['group']}.json").write_text(json.dumps(d))
    (tmp_path / "runs" / "other.json").write_text('{"not": "ours"}')
    assert merge.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "bench.md").read_text()
    assert "## dstate 64" in md and "## dstate 128" in md
    row = next(line for line in md.splitlines() if line.startswith("| 8x2K") and "| tilegym |" in line)
    assert f"| {0.46 / 0.168:.2f} |" in row                         # speedup from the same run (tg128)
    assert "**NO**" in md                                           # the failed check is visible
    assert "b2-l32768-h32-p64-n128-g1 cutile [n128]: failed" in md  # what did not run, and why
    assert "## Repeated measurements" in md and "n128: 0.450, tg128: 0.460" in md
    assert "off its dispatch table" not in md
    c["env"]["SSDCHECK_CUTILE_CONFIG"] = "chunk_scan:FAST=64"
    (tmp_path / "runs" / "n64.json").write_text(json.dumps(c))
    assert merge.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    assert "SSDCHECK_CUTILE_CONFIG=chunk_scan:FAST=64" in (tmp_path / "out" / "bench.md").read_text()
    merged = json.loads(lzma.open(tmp_path / "out" / "merged.json.xz", "rt").read())
    assert len(merged["runs"]) == 3
    assert {(r["id"], r["impl"]) for r in merged["rows"]} >= {(s1.id, "tilegym"), (s2.id, "mamba-ssm")}
    row = next(r for r in merged["rows"] if r["id"] == s1.id and r["impl"] == "tilegym")
    assert row["flops"] == roofline.flops(s1, 64) and math.isclose(row["ms"], 0.168)
    pytest.importorskip("matplotlib")
    png = (tmp_path / "out" / "speedup.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and "speedup.png" in md


def test_target_compares_cutile_with_tilegym_timed_in_the_same_run():
    s1, s2 = Shape(8, 2048, 32, 128, 1), Shape(2, 32768, 32, 64, 1)
    old = _doc("tg128", "2026-11-30T01:00:00+00:00", [(s1, {"mamba-ssm": 0.6, "tilegym": 0.17, "cutile": 0.15}, True)])
    new = _doc("tg128", "2026-11-30T02:00:00+00:00", [(s1, {"mamba-ssm": 0.6, "tilegym": 0.17, "cutile": 0.26}, True)])
    n64 = _doc("n64", "2026-11-30T03:00:00+00:00", [(s2, {"mamba-ssm": 0.9, "cutile": 0.1}, True)])  # no TileGym
    pairs = merge.target_pairs([new, n64, old])
    assert [p["id"] for p in pairs] == [s1.id]                     # only where both ran in one process
    assert math.isclose(pairs[0]["ratio"], 0.26 / 0.17)              # the latest run, not the faster old one
    rows, _, _ = merge.merge([old, new, n64])
    text = "\n".join(merge.target_lines([old, new, n64], rows))
    assert "Met at 0 of 1 shapes" in text and "**no**" in text
    assert "Moonshot" in text and "1 of 1 shapes" in text             # s2: 0.1 ms is under 2x its I/O floor
    failed = _doc("tg64", "2026-11-30T04:00:00+00:00", [(s2, {"tilegym": 0.5, "cutile": 0.1}, False)])
    assert merge.target_pairs([failed]) == []                       # a failed check never counts as met


def test_target_shows_graph_replays_beside_the_eager_ratio():
    s1 = Shape(8, 2048, 32, 128, 1)
    doc = _doc("tg128", "2026-12-01T01:00:00+00:00", [(s1, {"mamba-ssm": 0.6, "tilegym": 0.17, "cutile": 0.22}, True)])
    rows, _, _ = merge.merge([doc])
    assert "replayed from CUDA graphs" not in "\n".join(merge.target_lines([doc], rows))   # no graph figures
    impls = doc["shapes"][0]["impls"]
    impls["cutile"].update(graph_ms=0.15, graph_chunk=64)
    impls["tilegym"].update(graph_ms=0.16, graph_chunk=64)
    text = "\n".join(merge.target_lines([doc], rows))
    assert "Met at 0 of 1 shapes" in text                           # the target stays on the eager figure
    assert f"| {s1.id} | 0.150 (64) | 0.160 (64) | 0.94 | 1.29 |" in text
    impls["tilegym"].pop("graph_ms")                                # one side without: no graph row
    assert "replayed from CUDA graphs" not in "\n".join(merge.target_lines([doc], rows))


def test_merge_without_results_fails_clearly(tmp_path, capsys):
    assert merge.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "no ssdcheck-bench/1 JSON" in capsys.readouterr().err


def test_sweep_plan_only_holds_configs_the_kernels_accept():
    """Every sweep candidate has its kernel's constants in the dispatch table's order (the launcher
    passes them positionally), tiles no wider than the chunk (token tile) or the state (dstate tile),
    and one label per (shape, chunk, kernel)."""
    from lab.bench import sweep_cutile as sw
    from kernels.cutile import dispatch, launcher
    items = sw.plan()
    assert items and {k for _, _, k, _, _ in items} == {"table", "chunk_cumsum", "chunk_state", "chunk_scan"}
    seen = set()
    for shape, chunk, kernel, label, cfg in items:
        assert (shape.id, chunk, kernel, label) not in seen
        seen.add((shape.id, chunk, kernel, label))
        if cfg is None:
            continue
        names = [n for n, _ in cfg.constants]
        assert names == [n for n, _ in dispatch.TABLE[kernel][0].config.constants], (kernel, label)
        if kernel == "chunk_cumsum":   # heads per block: a power of two (a tile dimension)
            assert cfg.get("BH") & (cfg.get("BH") - 1) == 0 and cfg != dispatch.TABLE[kernel][0].config, label
            continue
        assert chunk % cfg.get("BL") == 0 and cfg.get("BN") <= max(shape.dstate, 64), (shape.id, chunk, label)
        # the sweep's inputs are aligned without seq_idx: a FAST label times its FAST path, not a fallback
        assert ("FAST" in label) == (cfg.get("FAST") != 0), label
        if cfg.get("FAST"):
            prob = dispatch.Problem("bfloat16", shape.headdim, shape.dstate, chunk, shape.batch * shape.nheads,
                                    aligned=shape.seqlen % chunk == 0)
            assert launcher._fast_config(kernel, cfg, prob) is cfg, (shape.id, chunk, label)


def test_sweep_match_keeps_the_table_and_only_matching_candidates():
    from lab.bench import sweep_cutile as sw
    items = sw.plan(match="FASTR,LAT6")
    labels = {lab for _, _, _, lab, _ in items}
    assert "table" in labels and labels - {"table"}
    assert all(lab == "table" or "FASTR" in lab or "LAT6" in lab for lab in labels)
    assert sum(lab == "table" for *_, lab, _ in items) == sum(len(c) for _, c in sw.SHAPES)


def test_sweep_shape_option_takes_race_shapes_and_rejects_the_rest(capsys):
    """--shape ID@CHUNKS sweeps a race shape (the A/B the race asks for) and names a bad id or chunk."""
    from lab.bench import sweep_cutile as sw
    shape, chunks = sw.race_shape("b2-l16384-h64-p64-n256-g1@64,128")
    assert (shape.batch, shape.seqlen, shape.nheads, shape.dstate, chunks) == (2, 16384, 64, 256, (64, 128))
    assert sw.race_shape("b8-l2048-h32-p64-n64-g1")[1] == (64,)
    for bad, word in (("b9-l1-h1-p64-n64-g1", "race shape id"), ("b8-l2048-h32-p64-n64-g1@32", "chunk sizes"),
                      ("b8-l2048-h32-p64-n64-g1@x", "chunk sizes")):
        with pytest.raises(ValueError, match=word):
            sw.race_shape(bad)
    assert sw.main(["--shape", "b2-l16384-h64-p64-n128-g1", "--match", "FAST-LAT4-occ3", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1] == "2 timings" and all("b2-l16384-h64-p64-n128-g1 cs64" in line for line in listed[:-1])


def test_sweep_flags_a_wrong_candidate_and_picks_the_fastest_correct_one():
    """The sweep's bookkeeping on the CPU: a fake kernel set whose output and speed depend on the
    override; a candidate that changes the answer is WRONG and never picked, however fast."""
    import time

    import torch

    from lab.bench import sweep_cutile as sw
    from kernels.cutile import launcher

    class Fake:
        def __init__(self, shape, chunk):
            self.x = torch.ones(64)

        def run(self, kernel):
            cfg = launcher._OVERRIDE.get(kernel)
            if kernel == "chunk_cumsum":                                   # BH32: the fastest cumsum
                time.sleep(0.0005 if cfg is not None and cfg.get("BH") == 32 else 0.001)
                return self.x
            bn = cfg.get("BN") if cfg is not None else 0
            time.sleep({16: 0.002, 64: 0.0005}.get(bn, 0.001))            # BN64: fastest, and ...
            return self.x * (2.0 if bn == 64 and kernel == "chunk_state" else 1.0)   # ... wrong for state

        def forward(self):
            return self.run("chunk_state")

    shape, chunk = Shape(1, 128, 2, 64), 64
    items = [it for it in sw.plan(((shape, (chunk,)),))]
    rows = sw.sweep(items, log=lambda m: None, make=Fake, device="cpu")
    by = {(r["kernel"], r["label"]): r for r in rows}
    assert by[("chunk_state", "BL64-BN64-PF1-occ2")]["status"] == "WRONG"
    assert by[("chunk_scan", "BL64-BN64-occ1")]["status"] == "ok"
    [combo] = sw.best_combinations(items, rows, log=lambda m: None, make=Fake, device="cpu")
    assert "BN64" not in combo["state"] and "BN64" in combo["scan"] and combo["cumsum"].startswith("BH32")
    assert "WRONG" in sw.markdown(rows, [combo], dict(date="d", gpu="cpu", command="c"))


def test_tilegym_budget_estimate_is_long_only_for_a_processs_first_tuning(tmp_path):
    # tg64/tg256 (2026-11-30) skipped TileGym's second shape on a fixed 180 s estimate; it took 9.9 s in tg128
    from lab.bench.shapes import GROUPS
    group = GROUPS["tg128"]
    runner = race.Runner(group, ("tilegym",), str(tmp_path / "x.json"), budget_s=300, device="cpu")
    shape = group.shapes[1]
    assert runner.tilegym_estimate(shape, 64) == race.TILEGYM_TUNE_EST_S
    runner.tilegym_called = True
    assert runner.tilegym_estimate(shape, 64) == race.TILEGYM_RETUNE_EST_S < race.TILEGYM_TUNE_EST_S


def test_stages_plan_covers_the_recorded_tilegym_shapes_and_guards_its_preconditions(capsys):
    from lab.bench import stages
    shapes = stages.default_shapes()
    assert len(shapes) == 6 and all(s.seqlen % stages.TILEGYM_CHUNK == 0 for s in shapes)
    recorded = {e["context"]["shape"] for e in json.loads(open("lab/reports/tilegym-tuning-h200.json").read())["entries"]}
    # TileGym's recorded choices are all for these shapes (b8-l2048 n64's was lost in the first race: it tunes)
    assert recorded <= {s.id for s in shapes} and len(recorded) >= 5
    p = stages.plan(shapes[:1])
    assert [(i, c) for i, _, c in p] == [("cutile", 64), ("cutile", 128), ("tilegym", 64)]
    assert stages.main(["--list", "--only", "n64"]) == 0 and "tilegym  b2-l32768-h32-p64-n64-g1 cs64" in capsys.readouterr().out
    if not torch.cuda.is_available():
        assert stages.main(["--out", "/tmp/x"]) == 2 and "needs a CUDA GPU" in capsys.readouterr().err
    doc = {"rows": [{"impl": "cutile", "shape": "s", "chunk": 64, "cumsum_ms": 0.01, "state_ms": 0.1, "scan_ms": 0.2,
                     "forward_ms": 0.31, "err_vs_other": None},
                    {"impl": "tilegym", "shape": "s", "chunk": 64, "error": "boom"}]}
    text = stages.table(doc)
    assert "(first)" in text and "boom" in text and "0.310" in text


def test_ncu_stages_profiles_each_stage_of_both_implementations_once_and_rejects_unknown_shapes(capsys):
    from lab.bench import ncu_stages, stages
    shapes = [s for s in stages.default_shapes() if "n64-g1" in s.id]
    assert ncu_stages.plan(shapes, ("scan",), 64) == [
        ("cutile", "b8-l2048-h32-p64-n64-g1", 64, "scan"), ("tilegym", "b8-l2048-h32-p64-n64-g1", 64, "scan"),
        ("cutile", "b2-l32768-h32-p64-n64-g1", 64, "scan"), ("tilegym", "b2-l32768-h32-p64-n64-g1", 64, "scan")]
    # TileGym stays at its own chunk size whatever cutile's is
    assert {c for i, _, c, _ in ncu_stages.plan(shapes[:1], ncu_stages.STAGES, 128) if i == "tilegym"} == {64}
    assert ncu_stages.main(["--list", "--only", "l32768-h32-p64-n128", "--stage", "state"]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == ["cutile b2-l32768-h32-p64-n128-g1 64 state",
                                                       "tilegym b2-l32768-h32-p64-n128-g1 64 state"]
    with pytest.raises(SystemExit):
        ncu_stages.main(["--list", "--only", "no-such-shape"])
    assert "no shape of lab.bench.stages matches" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert ncu_stages.main(["--only", "n64"]) == 2 and "needs a CUDA GPU" in capsys.readouterr().err


def test_a_skipped_implementation_says_why_in_the_summary():
    # the FACT run's tg128 with --budget-s 80 (lab/reports/2026-12-01-fact-scan.md): "tilegym   skipped: " and no reason
    chunks = {"64": {"status": "skipped", "reason": "budget: 64 s of 80 s used, TileGym's first call here estimated at 30 s"}}
    reason = race.skipped_reason(chunks)
    assert reason == "cs64: budget: 64 s of 80 s used, TileGym's first call here estimated at 30 s"
    doc = {"shapes": [{"id": "b2-l32768-h32-p64-n128-g1", "impls": {"tilegym": {"status": "skipped", "reason": reason}}}]}
    assert "skipped: cs64: budget: 64 s of 80 s" in race.summary_table(doc)


def test_ab_row_changes_only_the_named_constants_of_the_row_the_shape_runs():
    """lab.bench.ab_row's B side is the table's row for that shape and chunk with the --set constants
    replaced, keyed KERNEL@CHUNK so no other chunk size moves; a constant the row lacks, or a bad
    --set, is an error before any GPU work."""
    from lab.bench import ab_row
    from lab.bench.sweep_cutile import race_shape
    from kernels.cutile import dispatch
    assert ab_row.parse_set(["chunk_state:SLAT=0", "chunk_scan:LAT=2,HB=1"]) == {
        "chunk_state": {"SLAT": 0}, "chunk_scan": {"LAT": 2, "HB": 1}}
    for bad in ("chunk_state", "chunk_state:SLAT", "chunk_state:SLAT=x"):
        with pytest.raises(ValueError, match="--set"):
            ab_row.parse_set([bad])
    many, _ = race_shape("b8-l2048-h32-p64-n64-g1")       # 512 state blocks: the many-block row
    few, _ = race_shape("b2-l32768-h32-p64-n64-g1")       # 128: the few-block row
    for shape, lat in ((many, 4), (few, 6)):
        [(key, cfg)] = ab_row.variant(shape, 64, {"chunk_state": {"SLAT": 0}}).items()
        row = dispatch.choose("chunk_state", dispatch.Problem("bfloat16", 64, 64, 64,
                                                              shape.batch * shape.nheads, aligned=True))
        assert key == "chunk_state@64" and cfg == row.replace(SLAT=0) and row.get("SLAT") == 2
        assert cfg.get("LAT") == lat and cfg.occupancy == row.occupancy
    with pytest.raises(KeyError, match="NOPE"):
        ab_row.variant(many, 64, {"chunk_state": {"NOPE": 1}})
    with pytest.raises(SystemExit):
        ab_row.main(["--shape", "b8-l2048-h32-p64-n64-g1@64", "--set", "chunk_state:NOPE=1"])


def test_ab_row_segments_side_forces_the_segmented_walk_only_where_it_serves():
    """--segments N: B runs the segmented walk where it serves the problem (the segments recorded per
    row), A the table, which segments only its measured rows (64 pairs at dstate 64, not dstate 128);
    the long groups' fp16 / final-state shapes resolve; a B equal to A, or a non-positive N, is an error
    before any GPU work."""
    from lab.bench import ab_row
    from lab.bench.sweep_cutile import race_shape
    long16, _ = race_shape("b2-l32768-h32-p64-n64-g1-float16-fs")
    n128, _ = race_shape("b2-l32768-h32-p64-n128-g1")
    assert long16.dtype == "float16" and long16.final_states
    assert ab_row.segments_run(long16, 64, None) == 4                     # the table's row: one wave of walks
    assert ab_row.segments_run(n128, 64, None) is None                    # dstate 128: the two kernels
    assert ab_row.segments_run(n128, 64, 4) == 4                          # forced: 64 pairs, 4 segments
    assert ab_row.segments_run(long16, 64, 1) is None                     # 1 turns it off
    assert ab_row.segments_run(race_shape("b2-l32768-h32-p64-n256-g1")[0], 64, 4) is None   # dstate 256
    assert ab_row.segments_run(long16, 128, 4) is None                    # its passes are chunk-64 only
    for argv in (["--shape", "b2-l32768-h32-p64-n64-g1"], ["--shape", "b2-l32768-h32-p64-n64-g1", "--segments", "0"]):
        with pytest.raises(SystemExit):
            ab_row.main(argv)


def test_segments_model_sets_the_prediction_beside_measured_ab_rows():
    """lab.bench.segments_model --measured: per shape the model, the two kernels (A: mean over the runs),
    each forced segment count, and best / A, best / floor, model / best from those numbers."""
    from lab.bench import segments_model
    sid = "b2-l32768-h32-p64-n64-g1"
    docs = [{"segments": 4, "rows": [{"shape": sid, "a_ms": 0.56, "b_ms": 0.49}, {"shape": "x", "error": "E"}]},
            {"segments": 2, "rows": [{"shape": sid, "a_ms": 0.54, "b_ms": 0.70}]}]
    lines = segments_model.against_measured(docs).splitlines()
    assert "S=2 ms | S=4 ms" in lines[0] and len(lines) == 3
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    pred = segments_model.predict(next(s for s in segments_model.long_shapes() if s.id == sid))
    assert cells[:5] == [sid, f"{pred.floor_ms:.3f}", "4", f"{pred.ms:.3f}", "0.550"]
    assert cells[5:] == ["0.700", "0.490", f"{0.49 / 0.55:.2f}", f"{0.49 / pred.floor_ms:.2f}", f"{pred.ms / 0.49:.2f}"]


def test_segment_passes_variants_name_segments_and_rows_and_report_each_kernel():
    """lab.bench.segment_passes: a variant is S[/KERNEL:NAME=INT,...]; its segments are those the forward runs
    under its override (a walk row whose BN is not the dstate serves no segments); the table's column per
    kernel is its median duration times its launches per forward; a bad variant fails before GPU work."""
    from lab.bench import segment_passes
    from lab.bench.sweep_cutile import race_shape
    assert segment_passes.parse_variant("8/chunk_walk:BN=64,occupancy=4") == (8, {"chunk_walk": {"BN": 64, "occupancy": 4}})
    assert segment_passes.parse_variant("4") == (4, {})
    for bad in ("0", "x/chunk_walk:BN=64", "4/chunk_walk:BN"):
        with pytest.raises(ValueError):
            segment_passes.parse_variant(bad)
    shape, _ = race_shape("b2-l32768-h32-p64-n64-g1")
    sides = segment_passes.plan(shape, 64, [(v, segment_passes.parse_variant(v)) for v in
                                            ("4", "8/chunk_walk:BN=64,SPLIT=1,occupancy=4",
                                             "4/chunk_walk:BN=128,FACT=1,SPLIT=1", "4/segment_state:BN=64")])
    assert [s["segments"] for s in sides] == [4, 4, 8, None, 4]     # the table segments this shape
    assert str(sides[4]["override"]["segment_state@64"]) == "BL=64,BP=64,BN=64,LAT=0,DLAT=4,SPLIT=1,occupancy=4"
    assert segment_passes.stage_of("segment_state_kernel_Kt2_A4bf16") == "segment_state"
    assert segment_passes.stage_of("void at::native::elementwise") == "other"
    row = {"shape": shape.id, "variant": "4", "segments": 4, "ms": 0.49, "graph_ms": 0.48, "x_floor": 3.7,
           "err_vs_table": 3e-5, "stages": {"segment_state": {"ms": 0.128, "per_forward": 1.0},
                                            "chunk_cumsum": {"ms": 0.006, "per_forward": 2.0}}}
    lines = segment_passes.table({"rows": [row, {"shape": shape.id, "variant": "8", "segments": 8, "error": "E"}]})
    lines = lines.splitlines()
    assert lines[0].split(" | ")[6:8] == ["chunk_cumsum", "segment_state"]
    assert "| 0.0120 | 0.1280 |" in lines[2] and lines[3].endswith("| E |")
    with pytest.raises(SystemExit):
        segment_passes.main(["--shape", shape.id])                       # no variant
    with pytest.raises(SystemExit):
        segment_passes.main(["--shape", shape.id, "--variant", "4/chunk_walk:NOPE=1"])
