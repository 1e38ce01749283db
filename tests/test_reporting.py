"""The tooling around the properties: JSON report, JUnit properties, merge gate, fuzzer, reproducers,
xdist GPU pinning and the cuTile compile cache. All on the CPU, against torch-ref and a planted bug.

End-to-end checks run pytest (or `python -m ssdcheck fuzz`) in a subprocess with the `cpu` profile
(derandomized, so two runs draw the same examples); the rest are unit tests of ssdcheck_plugin.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from properties.problem import SSDProblem
from properties.report import PropertyResult
from properties.tolerance import compare
from ssdcheck_plugin import gate, gpu
from ssdcheck_plugin.aggregate import Aggregate, num, unnum
from ssdcheck_plugin.compare import compare as compare_reports
from ssdcheck_plugin.compare import main as compare_main
from ssdcheck_plugin.fuzzing import FuzzTimeUp, TimeBudget, activate, read_progress, wrap_inner_test
from ssdcheck_plugin import repro
from ssdcheck_plugin.meta import source_digest

ROOT = Path(__file__).resolve().parents[1]
TESTS = "tests/test_properties.py"
BROKEN = "tests.tooling_targets:broken_tail"
ROW_FIELDS = {"impl": str, "prop": str, "output": str, "dtype": str, "examples": int, "failures": int,
              "nonfinite_examples": int, "max_abs": (float, int, str), "max_abs_where": list,
              "max_abs_problem": str, "normwise": (float, int, str), "normwise_problem": str,
              "share": (float, int, str), "share_problem": str, "budget_at_worst": (float, type(None)),
              "err_yardstick_at_worst": (float, type(None)), "normwise_allowed_at_worst": float,
              "tol": dict, "why": list}


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "HYPOTHESIS_PROFILE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def run_pytest(*args: str) -> subprocess.CompletedProcess:
    return run("-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile=cpu", "-q", *args)


def run_pytest_env(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile=cpu",
                           "-q", *args], cwd=ROOT, env={**_env(), **env}, capture_output=True, text=True, timeout=180)


def _strict_json(path: Path) -> dict:
    def no_constants(name):
        raise ValueError(f"non-standard JSON constant {name} in {path}")
    return json.loads(path.read_text(), parse_constant=no_constants)


@pytest.fixture(scope="module")
def report_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    proc = run_pytest(f"{TESTS}::test_matches_oracle", f"{TESTS}::test_causality", f"{TESTS}::test_seq_idx_packing",
                      "--impl", "torch-ref", "--ssd-report", str(d / "r.json"), "--junitxml", str(d / "j.xml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return d, proc


# ---------------------------------------------------------------------------------------- the report

def test_report_follows_the_schema(report_run):
    d, proc = report_run
    r = _strict_json(d / "r.json")
    assert r["schema"] == "ssdcheck-report/1"
    assert set(r) == {"schema", "meta", "summary", "results", "properties", "tallies", "tests", "reproducers", "gate",
                      "deviations", "coverage"}
    assert r["coverage"] is None   # torch-ref declares no dispatch paths (KernelInfo.coverage)
    m = r["meta"]
    for key in ("created", "host", "platform", "python", "command", "cwd", "impls", "hypothesis", "versions",
                "git", "gpu", "tolerance_policy", "compile_cache", "timing", "xdist", "device", "fuzz"):
        assert key in m, key
    assert m["hypothesis"]["profile"] == "cpu" and m["hypothesis"]["derandomize"] is True
    assert m["versions"]["torch"] == torch.__version__ and "cuda_tile" in m["versions"]
    assert m["gpu"]["available"] is torch.cuda.is_available()
    assert m["tolerance_policy"]["k"] > 0 and len(m["tolerance_policy"]["sha256"]) == 64
    assert m["git"]["kernels_sha256"] == source_digest(str(ROOT))   # which kernels ran, whatever .git says
    assert "--ssd-report" in m["command"] and m["impls"] == ["torch-ref"]
    assert r["summary"]["tests"] == {"passed": 3} and r["summary"]["exitstatus"] == 0
    assert (r["summary"]["known_deviations"], r["summary"]["unexpected_passes"], r["deviations"]) == (0, 0, [])
    assert r["summary"]["examples"] == sum(p["examples"] for p in r["properties"]) > 0
    keys = set()
    for row in r["results"]:
        for field, typ in ROW_FIELDS.items():
            assert isinstance(row[field], typ), (field, row[field])
        assert set(row["tol"]) == {"normwise", "atol", "rtol", "k"}
        key = (row["impl"], row["prop"], row["output"], row["dtype"])
        assert key not in keys
        keys.add(key)
        assert row["failures"] == 0 and 0 <= unnum(row["share"]) < 1
        assert row["normwise_allowed_at_worst"] >= row["tol"]["normwise"]
    # the oracle comparison carries the budget; self-comparisons do not
    oracle_y = [row for row in r["results"] if row["prop"] == "prop_matches_oracle" and row["output"] == "y"]
    assert oracle_y and all(row["tol"]["k"] == m["tolerance_policy"]["k"] and row["budget_at_worst"] > 0
                            for row in oracle_y)
    assert {p["prop"] for p in r["properties"]} == {"prop_matches_oracle", "prop_causality", "prop_seq_idx_packing"}
    tally = r["tallies"]["torch-ref"]
    assert set(tally["features"]) >= {"seq_idx", "partial_last_chunk", "strong_decay", "ngroups>1"}
    assert tally["fraction"]["seq_idx"] >= 0.10       # prop_seq_idx_packing always packs sequences
    assert [t["outcome"] for t in r["tests"]] == ["passed"] * 3
    assert "ssdcheck report:" in proc.stdout


def test_report_summary_names_the_dispatch_paths_not_reached(tmp_path, capsys):
    """`ssdcheck report` counts an implementation's paths (KernelInfo.coverage) and names each one no
    launch reached; paths only a switch selects are listed apart, never as missing."""
    from kernels.registry import FORCED_ONLY
    from ssdcheck.summary import summarize
    r = {"meta": {"created": "now", "hypothesis": {"profile": "gpu", "max_examples": 200}, "command": ["pytest"]},
         "summary": {"tests": {"passed": 1}, "examples": 12, "failures": 0, "worst_share": 0.1, "worst": None},
         "properties": [], "tests": [], "tallies": {}, "results": []}
    r["coverage"] = {"cutile": {"chunk_state 0: aligned": 12, "chunk_scan 1: dstate >= 128": 0,
                                f"chunk_walk 0: a segment {FORCED_ONLY}": 0}}
    path = tmp_path / "cov.json"
    path.write_text(json.dumps(r))
    summarize(str(path))
    out = capsys.readouterr().out
    assert "Dispatch paths of cutile (launches): 1 of 2 reached; **not reached**: chunk_scan 1: dstate >= 128" in out
    assert "chunk_walk 0: a segment (0)" in out
    r["coverage"]["cutile"]["chunk_scan 1: dstate >= 128"] = 3
    path.write_text(json.dumps(r))
    summarize(str(path))
    assert "2 of 2 reached, every one" in capsys.readouterr().out


def test_junit_carries_property_names_and_worst_share(report_run):
    d, _ = report_run
    cases = ET.parse(d / "j.xml").getroot().iter("testcase")
    seen = {}
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        seen[case.get("name")] = props
        assert props["ssd_property"].startswith("prop_")
        assert 0 <= float(props["ssd_worst_share"]) < 1
        assert int(props["ssd_examples"]) > 0 and props["ssd_failures"] == "0"
    assert seen["test_matches_oracle[torch-ref]"]["ssd_property"] == "prop_matches_oracle"
    assert "ssd_worst_share.y" in seen["test_matches_oracle[torch-ref]"]


def test_report_and_junit_record_the_toolchain(report_run, tmp_path, capsys):
    """tileiras, ptxas, cuda-tile, torch and Triton are part of the run's identity: JSON, JUnit, markdown."""
    from kernels.cutile.toolchain import identity
    from ssdcheck.summary import summarize
    d, _ = report_run
    m = _strict_json(d / "r.json")["meta"]
    here = identity()
    for k in gate.TOOLCHAIN_FIELDS:
        assert k in m["toolchain"] and m["toolchain"][k] == here[k], k
    assert m["toolchain"]["tileiras_source"] == here["tileiras_source"] and "tileiras_path" in m["toolchain"]
    assert {k: m["versions"][k] for k in ("tileiras", "ptxas", "triton")} == {
        k: here[k] for k in ("tileiras", "ptxas", "triton")}
    suite = ET.parse(d / "j.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties").iter("property")}
    assert {f"ssd_toolchain_{k}" for k in gate.TOOLCHAIN_FIELDS} <= set(props)
    assert props["ssd_toolchain_tileiras"] == str(here["tileiras"]) and props["ssd_toolchain_torch"] == torch.__version__
    summarize(str(d / "r.json"))
    assert f"- toolchain: tileiras {here['tileiras']} ({here['tileiras_source']}: " in capsys.readouterr().out


def test_toolchain_changes_name_each_field_that_differs():
    old = {"toolchain": {"tileiras": "13.4.92", "ptxas": "13.4.92", "cuda_tile": "1.7.0", "torch": "2.9", "triton": None}}
    new = {"toolchain": dict(old["toolchain"], tileiras="13.5.37", ptxas="13.5.37")}
    assert gate.toolchain_changes(new, old) == ["tileiras 13.4.92 -> 13.5.37", "ptxas 13.4.92 -> 13.5.37"]
    assert gate.toolchain_changes(old, old) == []
    assert gate.toolchain_line(new, old).startswith("toolchain DIFFERS from the baseline's: tileiras 13.4.92 -> 13.5.37")
    assert gate.toolchain_line(old, old).startswith("toolchain same as the baseline's: tileiras 13.4.92")
    legacy = {"versions": {"torch": "2.9", "cuda_tile": "1.7.0"}}     # a report from before meta.toolchain
    assert gate.toolchain_changes(old, legacy) == ["tileiras None -> 13.4.92", "ptxas None -> 13.4.92"]


def test_in_run_gate_prints_the_toolchain_line(tmp_path):
    base = json.loads(_fake_baseline(tmp_path / "base.json", 10.0).read_text())
    base["meta"] = {"toolchain": {"tileiras": "0.0.1", "ptxas": "0.0.1"}}
    (tmp_path / "base.json").write_text(json.dumps(base))
    proc = run_pytest(f"{TESTS}::test_causality", "--impl", "torch-ref", "--ssd-baseline", str(tmp_path / "base.json"),
                      "--ssd-report", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "toolchain DIFFERS from the baseline's: tileiras 0.0.1 -> " in proc.stdout
    g = _strict_json(tmp_path / "r.json")["gate"]
    assert g["toolchain_changes"][0].startswith("tileiras 0.0.1 -> ") and g["passed"] is True


# ---------------------------------------------------------------------------------------- the gate

def _fake_baseline(path: Path, value: float) -> Path:
    """A tiny hand-written baseline: oracle y rows of every dtype with worst errors `value`."""
    rows = [{"impl": "torch-ref", "prop": "prop_matches_oracle", "output": "y", "dtype": dt, "examples": 1,
             "failures": 0, "max_abs": value, "normwise": value, "share": value}
            for dt in ("float32", "float16", "bfloat16")]
    path.write_text(json.dumps({"schema": "ssdcheck-report/1", "results": rows}))
    return path


def test_source_digest_names_the_kernel_sources_and_nothing_else(tmp_path):
    (tmp_path / "kernels" / "cutile" / "__pycache__").mkdir(parents=True)
    src = tmp_path / "kernels" / "cutile" / "k.py"
    src.write_text("A = 1\n")
    first = source_digest(str(tmp_path))
    (tmp_path / "kernels" / "cutile" / "__pycache__" / "k.cpython-311.py").write_text("junk")
    (tmp_path / "README.md").write_text("not a kernel")
    assert source_digest(str(tmp_path)) == first
    src.write_text("A = 2\n")
    second = source_digest(str(tmp_path))
    assert second != first
    src.rename(tmp_path / "kernels" / "cutile" / "renamed.py")     # same bytes, other file: other digest
    assert source_digest(str(tmp_path)) != second


def test_gate_fails_when_a_worst_error_grows(tmp_path):
    base = _fake_baseline(tmp_path / "base.json", 1e-9)
    proc = run_pytest(f"{TESTS}::test_matches_oracle", "--impl", "torch-ref", "--ssd-baseline", str(base),
                      "--ssd-max-growth", "2", "--ssd-report", str(tmp_path / "r.json"))
    assert proc.returncode == gate.EXIT_GATE == 6, proc.stdout + proc.stderr
    assert "REGRESSION torch-ref prop_matches_oracle y" in proc.stdout and "gate FAILED" in proc.stdout
    r = _strict_json(tmp_path / "r.json")
    assert r["summary"]["exitstatus"] == 6 and r["gate"]["passed"] is False
    assert {g["metric"] for g in r["gate"]["regressions"]} == {"max_abs", "normwise"}
    assert any("not run now" in n or "no baseline" in n for n in r["gate"]["notes"])


def test_gate_passes_within_the_factor(tmp_path):
    base = _fake_baseline(tmp_path / "base.json", 10.0)
    proc = run_pytest(f"{TESTS}::test_matches_oracle", "--impl", "torch-ref", "--ssd-baseline", str(base))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gate passed" in proc.stdout


def test_gate_rejects_a_missing_baseline(tmp_path):
    proc = run_pytest(f"{TESTS}::test_causality", "--impl", "torch-ref", "--ssd-baseline", str(tmp_path / "nope.json"))
    assert proc.returncode == 4 and "--ssd-baseline" in proc.stderr


def test_compare_rows_growth_floor_and_zero_baseline():
    key = ("k", "prop_x", "y", "float32")
    row = lambda v, s: {"max_abs": v, "normwise": v, "share": s, "max_abs_problem": "P", "normwise_problem": "P"}
    regs, _ = gate.compare_rows({key: row(3e-6, 0.3)}, {key: row(1e-6, 0.1)}, max_growth=2.0)
    assert [r.metric for r in regs] == ["max_abs", "normwise"] and regs[0].growth == pytest.approx(3.0)
    assert gate.compare_rows({key: row(1.9e-6, 0.3)}, {key: row(1e-6, 0.1)}, max_growth=2.0)[0] == []
    # growth from 0 counts only above the floor (share of tolerance)
    assert gate.compare_rows({key: row(1e-9, 0.001)}, {key: row(0.0, 0.0)})[0] == []
    regs, _ = gate.compare_rows({key: row(1e-3, 0.5)}, {key: row(0.0, 0.0)})
    assert regs and regs[0].growth == math.inf and "inf" in regs[0].message(2.0)
    # non-finite values travel as strings
    regs, _ = gate.compare_rows({key: row(math.inf, math.inf)}, {key: {**row(1.0, 0.5), "max_abs": "1.0"}})
    assert regs and regs[0].to_dict()["current"] == "inf"
    regs, notes = gate.compare_rows({}, {key: row(1.0, 1.0)})
    assert not regs and "not run now" in notes[0]
    with pytest.raises(ValueError, match="unknown"):
        gate.compare_rows({}, {}, metrics=("bogus",))


# ---------------------------------------------------------------------------------------- aggregation

def _result(prop: str, dtype: str, err: float, seed: int) -> PropertyResult:
    ref = torch.linspace(-1, 1, 64, dtype=torch.float64).reshape(1, 4, 4, 4)
    out = ref + err * torch.linspace(0, 1, 64, dtype=torch.float64).reshape(ref.shape)
    c = compare("y", out, ref, dtype=dtype)
    return PropertyResult(prop, "fake", SSDProblem(dtype=dtype, seed=seed, seq_starts=(3,) if seed % 2 else ()), [c])


def test_aggregate_merges_worker_outputs_like_one_process():
    results = [_result("prop_a", dt, err, seed) for seed, (dt, err) in
               enumerate([("float32", 1e-6), ("float32", 1e-3), ("bfloat16", 1e-2), ("float32", 1.0)])]
    one = Aggregate(k=3.0)
    for r in results:
        one.add(r)
    w1, w2 = Aggregate(k=3.0), Aggregate(k=3.0)
    for i, r in enumerate(results):
        (w1 if i % 2 else w2).add(r)
    merged = Aggregate(k=3.0)
    for w in (w1, w2):
        merged.merge_dict(json.loads(json.dumps(w.to_dict())))
    assert merged.to_dict() == one.to_dict()
    rows = {r["dtype"]: r for r in one.to_dict()["rows"]}
    assert rows["float32"]["examples"] == 3 and rows["float32"]["failures"] == 1
    assert rows["float32"]["max_abs"] == pytest.approx(1.0) and "seed=3" in rows["float32"]["max_abs_problem"]
    props = one.to_dict()["props"][0]
    assert props["tally"]["seq_idx"] == 2 and props["tally_fraction"]["seq_idx"] == 0.5
    assert num(math.inf) == "inf" and num(math.nan) == "nan" and unnum("-inf") == -math.inf


# ---------------------------------------------------------------------------------------- fuzz + replay

@pytest.fixture(scope="module")
def fuzz_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    t0 = time.time()
    proc = run("-m", "ssdcheck", "fuzz", "--impl", BROKEN, "--seconds", "6", "--props", "causality,matches_oracle",
               "--out", str(d / "out"), "--db", str(d / "db"))
    return d, proc, time.time() - t0


def test_fuzz_runs_for_its_budget_and_saves_the_failure(fuzz_run):
    d, proc, wall = fuzz_run
    assert proc.returncode == 1, proc.stdout + proc.stderr          # pytest's "tests failed"
    out = d / "out"
    r = _strict_json(out / "report.json")
    outcomes = {t["nodeid"].split("::")[1].split("[")[0]: t["outcome"] for t in r["tests"]}
    assert outcomes == {"test_matches_oracle": "failed", "test_causality": "passed"}
    # causality was stopped by the clock (not by max_examples=100000) and still passed; the failing
    # test was never cut: Hypothesis shrank it and reported it
    assert r["meta"]["hypothesis"]["profile"] == "fuzz" and r["meta"]["fuzz"]["tests_cut_by_budget"] == 1
    cut = {t["nodeid"].split("::")[1].split("[")[0]: t["properties"].get("ssd_cut_by_budget") for t in r["tests"]}
    assert cut == {"test_matches_oracle": None, "test_causality": "true"}          # which test, per test
    assert wall < 6 + 60, wall
    files = list((out / "failures").glob("*.pt"))
    assert len(files) == 1 and r["reproducers"][0]["path"] == str(files[0])
    assert f"python -m ssdcheck replay {files[0]}" in proc.stdout
    # the failure runs first next time: the example database keeps a drawn one; one of the triage
    # battery (an explicit example, which Hypothesis does not save) runs first in every run anyway
    from kernels.registry import lookup
    from properties import triage
    failing = eval_problem(repro.load(files[0])["problem"])
    assert failing in triage.battery(lookup(BROKEN), gpu=False) or any((d / "db").rglob("*")), \
        "the example database keeps the failure"
    assert "worst share" in proc.stderr and "failures 1 tests" in proc.stderr   # the progress line
    prog = read_progress(out / "progress.json")
    assert prog["examples"] == r["summary"]["examples"] and prog["failed_tests"] == 1


def test_reproducer_is_self_contained_and_replays(fuzz_run):
    d, _, _ = fuzz_run
    path = next((d / "out" / "failures").glob("*.pt"))
    data = repro.load(path)
    assert data["prop"] == "prop_matches_oracle" and data["impl_spec"] == BROKEN
    assert repro.same_inputs(data["kwargs"], eval_problem(data["problem"]).inputs("cpu")) == []
    assert data["kwargs"]["x"].dtype == getattr(torch, eval_problem(data["problem"]).dtype)
    lines: list[str] = []
    assert repro.replay(path, out=lines.append) == 1 and "still fails" in lines[-1]
    assert repro.replay(path, "torch-ref", out=lines.append) == 0      # the fixed kernel passes
    proc = run("-m", "ssdcheck_fuzz", "replay", str(path))        # the old entry point, an alias
    assert proc.returncode == 1 and "FAILED: the check still fails" in proc.stdout, proc.stdout + proc.stderr


def eval_problem(text: str) -> SSDProblem:
    from properties.problem import parse_problem
    return parse_problem(text)


def test_next_fuzz_run_replays_the_saved_failure_first(fuzz_run):
    """With a budget too short to find anything new, the database still brings the bug back."""
    d, _, _ = fuzz_run
    proc = run("-m", "ssdcheck", "fuzz", "--impl", BROKEN, "--seconds", "1", "--props", "matches_oracle",
               "--out", str(d / "again"), "--db", str(d / "db"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    r = _strict_json(d / "again" / "report.json")
    assert r["summary"]["failures"] >= 1 and r["tests"][0]["outcome"] == "failed"


def test_time_budget_slices_and_never_cuts_a_failure():
    b = TimeBudget(deadline=100.0, items_total=4, workers=2)      # 2 tests per worker
    assert b.start_item(now=0.0) == pytest.approx(50.0)
    assert b.start_item(now=60.0) == pytest.approx(100.0)
    assert not b.expired(now=200.0)                               # not before its first example ...
    b.calls = 1
    assert b.expired(now=200.0)
    b.failure_seen = True                                         # ... nor while a failure shrinks
    assert not b.expired(now=200.0)


def test_a_failure_the_sink_never_saw_is_not_cut_while_it_shrinks():
    # An exception raised inside the implementation (no property result reaches the sink) used to
    # leave failure_seen False: the budget then cut the shrink and the failing test passed
    # (a torch-ref mutant under --ssd-fuzz-seconds 5, found by the time-to-failure runs).
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ssdcheck_plugin import fuzzing

    @settings(database=None, deadline=None, max_examples=50)
    @given(st.integers(4, 10))
    def prop(i):
        raise ValueError("the kernel broke")   # the first example fails; shrinking calls it again

    b = TimeBudget(deadline=0.0)        # expired from the second example on
    b.start_item(now=0.0)
    fuzzing.wrap_inner_test(prop)
    fuzzing.activate(b)
    try:
        prop()
        raised = None
    except BaseException as e:          # FuzzTimeUp is a KeyboardInterrupt: pytest.raises would miss it
        raised = e
    finally:
        fuzzing.activate(None)
    assert isinstance(raised, ValueError), f"the failure was dropped: {type(raised).__name__}"
    assert b.failure_seen


def test_time_budget_counts_the_whole_sessions_tests_under_xdist(tmp_path):
    """30 tests on 16 workers sharing one counter: the first 14 get half the time (two waves), the
    15th and 16th all of it, and the 14 queued behind them start at half time with all that is left.
    Per-worker counting gave a worker's third test everything while two tests still queued."""
    counter = tmp_path / "started"
    workers = [TimeBudget(deadline=100.0, items_total=30, workers=16, counter=counter) for _ in range(16)]
    first = [b.start_item(now=0.0) for b in workers]
    assert first[:14] == [pytest.approx(50.0)] * 14 and first[14:] == [pytest.approx(100.0)] * 2
    second = [b.start_item(now=50.0) for b in workers[:14]]
    assert second == [pytest.approx(100.0)] * 14 and counter.read_text() == "30"


def test_a_test_starts_no_example_it_would_not_finish_by_the_deadline():
    """The longest of the last three examples predicts the next: a job killed a little past the
    deadline would otherwise end the test unfinished mid-example (mamba_ssm's long-sequence and
    packing tests in a shipped-mode fill, where an example on a key not tuned yet takes tens of seconds)."""
    b = TimeBudget(deadline=100.0, items_total=1)
    b.start_item(now=0.0)                     # the only test: its share is the whole session
    b.calls = 1
    b.example_took(30.0)
    b.example_took(12.0)
    assert not b.expired(now=60.0)            # a 30 s example started at 60 ends by 100
    assert b.expired(now=75.0)                # ... started at 75 it would end at 105
    for _ in range(3):
        b.example_took(1.0)                   # the slow one is no longer among the last three
    assert not b.expired(now=75.0) and b.expired(now=99.5)
    b.failure_seen = True
    assert not b.expired(now=99.5)            # never while a failure shrinks
    b.start_item(now=0.0)
    assert b.recent == []                     # each test predicts from its own examples


def test_a_budgeted_test_ends_by_the_deadline_when_its_examples_are_slow():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ssdcheck_plugin import fuzzing

    @settings(database=None, deadline=None, max_examples=50)
    @given(st.integers(0, 10))
    def prop(i):
        time.sleep(0.4)

    b = TimeBudget(deadline=time.time() + 1.0, items_total=1)
    b.start_item()
    fuzzing.wrap_inner_test(prop)
    fuzzing.activate(b)
    try:
        prop()
    except FuzzTimeUp:
        pass
    finally:
        fuzzing.activate(None)
    ended = time.time()
    assert b.calls >= 2 and len(b.recent) >= 2
    assert ended <= b.deadline, f"the last example ended {ended - b.deadline:.2f} s past the deadline"


def test_a_share_stretches_to_the_deadline_once_no_test_is_queued(tmp_path):
    """A share leaves time for the tests not started yet; with all of them started a test past its share
    runs on to the session's deadline, and with one still queued it is cut as before."""
    counter = tmp_path / "started"
    a, b = (TimeBudget(deadline=100.0, items_total=3, workers=2, counter=counter) for _ in range(2))
    assert a.start_item(now=0.0) == pytest.approx(50.0)   # two waves for three tests on two workers
    b.start_item(now=0.0)
    a.calls = 1
    assert a.expired(now=60.0)                  # the third test is still queued
    b.start_item(now=40.0)                      # ... and now it has started
    assert not a.expired(now=60.0) and a.expired(now=100.0)
    from ssdcheck_plugin.stall import StallWatchdog
    now = [60.0]
    dog = StallWatchdog(a, grace_s=5.0, clock=lambda: now[0])
    dog.example_started()
    now[0] = 80.0
    assert dog.check() is None                  # 30 s past its own share, within the stretched one
    now[0] = 105.0
    assert dog.check() is not None


def test_only_hypothesis_tests_share_the_budget():
    # gate runs mix property tests with quick regression tests: counting those would shrink each
    # property's share (18 items on 13 workers gave every property half the session, then idled)
    from types import SimpleNamespace

    from hypothesis import given
    from hypothesis import strategies as st

    from ssdcheck_plugin.plugin import _budgeted

    @given(st.integers())
    def prop(i):
        pass

    def plain():
        pass

    assert _budgeted(SimpleNamespace(obj=prop))
    assert not _budgeted(SimpleNamespace(obj=plain)) and not _budgeted(SimpleNamespace())
    b = TimeBudget(deadline=100.0, items_total=sum(map(_budgeted, [SimpleNamespace(obj=prop)] * 2
                                                        + [SimpleNamespace(obj=plain)] * 3)), workers=2)
    assert b.start_item(now=0.0) == pytest.approx(100.0)          # one property per worker: all of it


def test_budget_stops_hypothesis_cleanly_and_only_while_active():
    from hypothesis import given, settings
    from hypothesis import strategies as st
    calls = []

    @settings(max_examples=50, database=None, deadline=None)
    @given(st.integers())
    def prop(i):
        calls.append(i)

    assert wrap_inner_test(prop)
    budget = TimeBudget(deadline=0.0, items_total=1)     # long expired
    budget.start_item(now=1.0)
    activate(budget)
    try:
        with pytest.raises(FuzzTimeUp):
            prop()
        assert len(calls) == 1                           # the first example always runs
    finally:
        activate(None)
    prop()                                               # no active budget: a normal run
    assert len(calls) == 51


def _check_from_another_thread(dog):
    import threading
    out = []
    t = threading.Thread(target=lambda: out.append(dog.check()))   # as the watchdog's own thread does
    t.start()
    t.join()
    return out[0]


def test_stall_watchdog_names_the_overdue_example_its_problem_and_stack_once(tmp_path):
    from ssdcheck_plugin.stall import StallWatchdog
    now = [0.0]
    budget = TimeBudget(deadline=10.0, items_total=1)
    budget.start_item(now=0.0)                                    # share ends at t = 10
    dog = StallWatchdog(budget, grace_s=5.0, path=tmp_path / "r.stall-gw3.txt", worker="gw3", clock=lambda: now[0])
    dog.nodeid = "tests/test_properties.py::test_causality[x]"
    problem = SSDProblem(batch=1, seqlen=7, nheads=2, headdim=4, dstate=4, ngroups=1, chunk_size=4, seed=11)
    budget.calls = 3
    now[0] = 8.0
    dog.example_started()                                         # from this thread, with `problem` a local
    now[0] = 14.9
    assert _check_from_another_thread(dog) is None          # 4.9 s past the share: within the grace
    now[0] = 15.0
    text = _check_from_another_thread(dog)
    assert text is not None and text.startswith(f"ssdcheck stall: {dog.nodeid} on gw3: example 3 has run 7 s")
    assert f"problem: {problem!r}" in text
    assert f"pytest '{dog.nodeid}' -p no:cacheprovider --ssd-problem \"{problem!r}\"" in text
    assert "test_stall_watchdog_names_the_overdue_example" in text.split("(the stuck one)")[1]
    assert (tmp_path / "r.stall-gw3.txt").read_text() == text + "\n"
    now[0] = 60.0
    assert _check_from_another_thread(dog) is None and dog.reports == 1               # once per example
    dog.example_finished()
    budget.failure_seen = True                                    # a failure shrinking past its share
    dog.example_started()
    assert _check_from_another_thread(dog) is None


def test_a_hung_example_is_reported_while_it_hangs(tmp_path):
    """End to end: the first example sleeps 6 s against a 1 s budget; the watchdog writes its report
    next to --ssd-report before the example returns, the test still passes, and the end of the run
    names the file (under xdist a hung worker sends nothing back: the file is the only trace)."""
    env = {**_env(), "SSDCHECK_TEST_HANG_S": "6"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile=cpu",
                           "-q", f"{TESTS}::test_causality", "--impl", "tests.tooling_targets:hangs_once",
                           "--ssd-fuzz-seconds", "1", "--ssd-stall-seconds", "2",
                           "--ssd-report", str(tmp_path / "r.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "r.stall-main.txt").read_text()
    assert "ssdcheck stall: tests/test_properties.py::test_causality[tests.tooling_targets:hangs_once] on main" in text
    assert "problem: SSDProblem(" in text and "in hangs_once" in text and "time.sleep" in text
    assert "1 example(s) overran their time share by more than 2 s" in proc.stdout, proc.stdout
    assert _strict_json(tmp_path / "r.json")["meta"]["fuzz"]["stall_reports"] == [str(tmp_path / "r.stall-main.txt")]
    summary = subprocess.run([sys.executable, "scripts/summarize_report.py", str(tmp_path / "r.json")], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert f"where it waited: `{tmp_path / 'r.stall-main.txt'}`" in summary


def test_an_example_hung_while_holding_the_gil_still_leaves_its_stack(tmp_path):
    """The stall report is a Python thread: an example stuck in a C call that holds the GIL (on the H200,
    lab/reports/2026-12-01-dtp-hang.md: the DTP kernel hung the H200 behind a synchronous copy) starves it, and the killed run left no
    trace. The faulthandler timer needs no GIL: 2 s into the 5 s GIL-holding sleep it writes the test's
    header and every thread's stack to <report>.hang-main.txt, and the end of the run names the file."""
    env = {**_env(), "SSDCHECK_TEST_HANG_S": "5"}
    target = "tests.tooling_targets:hangs_holding_gil"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile=cpu",
                           "-q", f"{TESTS}::test_causality", "--impl", target,
                           "--ssd-fuzz-seconds", "1", "--ssd-stall-seconds", "60", "--ssd-hang-seconds", "2",
                           "--ssd-report", str(tmp_path / "r.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hang = tmp_path / "r.hang-main.txt"
    text = hang.read_text()
    assert text.startswith(f"ssdcheck hang watch: tests/test_properties.py::test_causality[{target}] on main")
    assert "Timeout (0:00:02)!" in text and "in hangs_holding_gil" in text, text
    assert not (tmp_path / "r.stall-main.txt").exists()           # the 60 s stall grace never came
    assert f"0 example(s) overran their time share by more than 60 s, 1 ran past 2 s; where each waited: {hang}" \
        in proc.stdout, proc.stdout
    assert _strict_json(tmp_path / "r.json")["meta"]["fuzz"]["stall_reports"] == [str(hang)]
    summary = subprocess.run([sys.executable, "scripts/summarize_report.py", str(tmp_path / "r.json")], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert f"**hang**: an example ran past --ssd-hang-seconds; its stacks: `{hang}`" in summary
    # a run killed before its report (what the H200 left twice): the summary says so and where it hung
    (tmp_path / "r.json").unlink()
    summary = subprocess.run([sys.executable, "scripts/summarize_report.py", str(tmp_path / "r.json")], cwd=ROOT,
                             capture_output=True, text=True)
    assert summary.returncode == 3 and f"no ssdcheck report at {tmp_path / 'r.json'}" in summary.stdout
    assert f"`{hang}`: ssdcheck hang watch: tests/test_properties.py::test_causality[{target}] on main: an example " \
           "running 2 s dumps every thread's stack below; Timeout (0:00:02)!" in summary.stdout, summary.stdout


# ---------------------------------------------------------------------------------------- GPUs, xdist

class FakeCuda:
    def __init__(self, n: int):
        self.n, self.current = n, None

    def is_available(self):
        return self.n > 0

    def device_count(self):
        return self.n

    def set_device(self, i):
        self.current = i


@pytest.mark.parametrize("worker,count,device", [("gw0", 2, 0), ("gw1", 2, 1), ("gw2", 2, 0), ("gw3", 2, 1),
                                                 ("gw5", 4, 1), ("gw0", 1, 0), ("gw7", 8, 7)])
def test_xdist_worker_is_pinned_to_gpu_n_mod_count(worker, count, device):
    cuda = FakeCuda(count)
    assert gpu.pin_xdist_worker(worker, cuda=cuda) == device and cuda.current == device


def test_plugin_loads_without_xdist():
    """pytest-xdist is optional: its hook must stay an optional hookimpl (a plain pytest then works)."""
    proc = run_pytest("-p", "no:xdist", "tests/test_property_domains.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_pinning_without_xdist_or_gpus():
    cuda = FakeCuda(2)
    assert gpu.pin_xdist_worker("master", cuda=cuda) is None and cuda.current is None
    assert gpu.pin_xdist_worker("", cuda=cuda) is None
    assert gpu.pin_xdist_worker("gw1", cuda=FakeCuda(0)) is None


def test_n_auto_means_one_worker_per_core_sharing_the_gpus_round_robin():
    assert gpu.auto_num_workers("auto", env={}, cuda=FakeCuda(1), cores=16) == 16   # one GPU: every core
    assert gpu.auto_num_workers("auto", env={}, cuda=FakeCuda(8), cores=4) == 8     # at least one per GPU
    assert gpu.auto_num_workers("auto", env={}, cuda=FakeCuda(1)) == gpu.cpu_cores()
    assert [gpu.worker_device(f"gw{i}", 2) for i in range(5)] == [0, 1, 0, 1, 0]
    assert gpu.auto_num_workers("auto", env={}, cuda=FakeCuda(0)) is None          # xdist: CPU count
    assert gpu.auto_num_workers("logical", env={}, cuda=FakeCuda(4)) is None
    assert gpu.auto_num_workers("auto", env={"PYTEST_XDIST_AUTO_NUM_WORKERS": "3"}, cuda=FakeCuda(4)) is None


def test_xdist_run_reports_the_same_as_one_process(report_run, tmp_path):
    d, _ = report_run
    # the battery warm-up forced on (on a CPU host auto leaves it off): the workers split its checks
    # before the tests, and nothing of it reaches the results
    proc = run_pytest(f"{TESTS}::test_matches_oracle", f"{TESTS}::test_causality", f"{TESTS}::test_seq_idx_packing",
                      "--impl", "torch-ref", "-n", "2", "--ssd-report", str(tmp_path / "x.json"),
                      "--ssd-warm-battery", "on")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    x, one = _strict_json(tmp_path / "x.json"), _strict_json(d / "r.json")
    assert x["meta"]["xdist"]["workers"] == 2 and set(x["meta"]["xdist"]["devices"]) == {"gw0", "gw1"}
    c = compare_reports(one, x)
    assert c["same_verdicts"] and not c["error_diffs"], c
    assert x["tallies"] == one["tallies"]
    from kernels.registry import lookup
    from properties import triage
    checks = 3 * len(triage.battery(lookup("torch-ref"), gpu=False))
    warm = x["meta"]["battery_warmup"]
    assert set(warm) == {"gw0", "gw1"} and sum(w["ran"] for w in warm.values()) == checks, warm
    assert all(w["checks"] == checks and not w["raised"] for w in warm.values()) and one["meta"]["battery_warmup"] is None


def test_compare_flags_a_changed_verdict(report_run, tmp_path):
    d, _ = report_run
    one = _strict_json(d / "r.json")
    other = json.loads(json.dumps(one))
    other["tests"][0]["outcome"] = "failed"
    (tmp_path / "b.json").write_text(json.dumps(other))
    assert compare_main([str(d / "r.json"), str(tmp_path / "b.json"), "--out", str(tmp_path)]) == 1
    assert "Verdicts differ for 1 tests" in (tmp_path / "compare.md").read_text()


def test_compile_cache_location(tmp_path):
    assert gpu.resolve_compile_cache(None, tmp_path, env={}) == str(tmp_path / ".ssdcheck-cache/cutile")
    assert gpu.resolve_compile_cache("c", tmp_path, env={"SSDCHECK_COMPILE_CACHE": "e"}) == str(tmp_path / "c")
    assert gpu.resolve_compile_cache(None, tmp_path, env={"SSDCHECK_COMPILE_CACHE": "/abs"}) == "/abs"
    assert gpu.resolve_compile_cache(None, tmp_path, env={"CUDA_TILE_CACHE_DIR": "/u"}) == "/u"
    assert gpu.resolve_compile_cache("off", tmp_path, env={}) is None


def test_compile_cache_reaches_an_imported_cutile(monkeypatch, tmp_path):
    config = types.SimpleNamespace(cache_dir="/old")
    cext = types.SimpleNamespace(default_tile_context=types.SimpleNamespace(config=config))
    monkeypatch.setitem(sys.modules, "cuda.tile", types.ModuleType("cuda.tile"))
    monkeypatch.setitem(sys.modules, "cuda.tile._cext", cext)
    env: dict = {}
    gpu.apply_compile_cache(str(tmp_path), env=env)
    assert env["CUDA_TILE_CACHE_DIR"] == str(tmp_path) and config.cache_dir == str(tmp_path)
    gpu.apply_compile_cache(None, env=env)
    assert env["CUDA_TILE_CACHE_DIR"] == "off" and config.cache_dir is None


def test_compile_timer_measures_compiles_once_cutile_is_loaded(monkeypatch):
    mod = types.ModuleType("cuda.tile._compile")

    def compile_cubin(*a):
        time.sleep(0.01)
        return b"cubin"

    def compile_tile(*a):
        return mod.compile_cubin()                 # looked up at call time, as cuda.tile does
    mod.compile_tile, mod.compile_cubin = compile_tile, compile_cubin
    timer = gpu.CompileTimer()
    monkeypatch.delitem(sys.modules, "cuda.tile._compile", raising=False)
    assert timer.maybe_install() is False          # never imports cuda.tile itself
    monkeypatch.setitem(sys.modules, "cuda.tile._compile", mod)
    assert timer.maybe_install() is True
    assert mod.compile_tile() == b"cubin"
    s = timer.to_dict()
    assert s["compile_calls"] == 1 and s["tileiras_calls"] == 1 and s["compile_s"] >= s["tileiras_s"] >= 0.01


def test_post_import_hook_wraps_a_module_when_the_code_under_test_imports_it(tmp_path, monkeypatch):
    """cuda.tile imports its compiler module lazily, at the first launch: the timer must catch that."""
    pkg = tmp_path / "fake_tile"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_compile.py").write_text("def compile_cubin():\n    return b'c'\n"
                                     "def compile_tile():\n    return compile_cubin()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    timer = gpu.CompileTimer()
    monkeypatch.setattr(gpu.CompileTimer, "MODULE", "fake_tile._compile")
    timer.watch()
    try:
        assert not timer.installed
        import fake_tile._compile as mod
        assert timer.installed and mod.compile_tile() == b"c"
        assert timer.to_dict()["compile_calls"] == 1 and timer.to_dict()["tileiras_calls"] == 1
    finally:
        timer.unwatch()
        sys.modules.pop("fake_tile._compile", None)
        sys.modules.pop("fake_tile", None)


def test_gate_matches_a_single_revision_with_a_single_baseline_implementation():
    """`--impl mypkg.ssd:forward` against main's `cutile` report: rows match although names differ;
    with several implementations on either side, names must match."""
    row = {"max_abs": 1.0, "normwise": 1.0, "share": 0.5}
    grown = {"max_abs": 3.0, "normwise": 1.0, "share": 0.5}
    base = {("cutile", "prop_matches_oracle", "y", "bfloat16"): row}
    cur = {("mypkg.ssd:forward", "prop_matches_oracle", "y", "bfloat16"): grown}
    regressions, notes = gate.compare_rows(cur, base)
    assert [r.metric for r in regressions] == ["max_abs"]
    assert any("comparing mypkg.ssd:forward with the baseline's cutile" in n for n in notes)
    two = {**base, ("torch-ref", "prop_matches_oracle", "y", "bfloat16"): row}
    regressions, notes = gate.compare_rows(cur, two)
    assert regressions == [] and any("new in this run" in n for n in notes)


def test_jsonl_log_under_xdist_has_each_report_once(tmp_path):
    """lab/scripts/pytest_jsonl.py (the GPU scripts' progress log): the controller writes, workers do not."""
    log = tmp_path / "r.jsonl"
    proc = run_pytest("tests/test_property_domains.py", "-n", "2", "-p", "lab.scripts.pytest_jsonl", f"--jsonl={log}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [json.loads(s) for s in log.read_text().splitlines()]
    calls = [r["nodeid"] for r in calls if r["event"] == "report" and r["when"] == "call"]
    assert calls and len(calls) == len(set(calls))


def test_report_says_where_each_tests_time_went(report_run):
    """ssd_seconds.<phase> per test: inputs, implementation, reference, comparison, each measured and
    together no more than the call (the phases do not nest)."""
    d, _ = report_run
    tests = {t["nodeid"].split("::")[-1]: t for t in _strict_json(d / "r.json")["tests"]}
    t = tests["test_matches_oracle[torch-ref]"]
    sec = {k.split(".", 1)[1]: float(v) for k, v in t["properties"].items() if k.startswith("ssd_seconds.")}
    assert set(sec) >= {"inputs", "impl", "reference", "compare"}, sec
    assert all(v > 0 for v in sec.values()) and sum(sec.values()) <= t["call_duration"] + 1e-3, (sec, t)


def test_timing_phases_add_up_and_reset():
    from properties import timing
    timing.take()
    with timing.phase("impl"):
        time.sleep(0.01)
    with timing.phase("impl"):
        pass
    got = timing.take()
    assert set(got) == {"impl"} and got["impl"] >= 0.01 and timing.take() == {}


def test_summary_flags_features_the_run_barely_reached(tmp_path):
    """The FACT gate (lab/reports/2026-12-01-fact-scan.md) drew whole chunks without seq_idx in 6.8% of its
    examples (the FAST paths' domain), and two mutants there survived: the summary says so next to the
    tallies."""
    import lzma
    root = Path(__file__).resolve().parent.parent
    packed = root / "lab/reports/raw/2026-12-01-fact-scan/gate/gate/report.json.xz"
    report = tmp_path / "report.json"
    report.write_bytes(lzma.decompress(packed.read_bytes()))
    out = subprocess.run([sys.executable, "scripts/summarize_report.py", str(report)], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    flagged = [line for line in out.splitlines() if "**under 10%**" in line]
    assert flagged == ["  - **under 10%** (barely reached): aligned_no_seq_idx 6.8%"]


SLOW_BUG = "tests.tooling_targets:slow_late_tail"


def test_first_failure_prints_its_reproducer_at_once_and_shrinking_is_bounded(tmp_path):
    """A failure the battery misses is drawn, printed (and saved unshrunk) the moment it is found, and
    Hypothesis stops shrinking it after --ssd-shrink-seconds (each step costs 0.3 s here, as a compile
    would): the test still fails with the smallest failure found by then."""
    proc = run_pytest(f"{TESTS}::test_matches_oracle", "--impl", SLOW_BUG, "--ssd-shrink-seconds", "1",
                      "--ssd-repro-dir", str(tmp_path / "f"), "--ssd-report", str(tmp_path / "r.json"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    first = next(line for line in proc.stderr.splitlines() if line.startswith("ssdcheck: first failure in"))
    assert "--ssd-problem" in first and "prop_matches_oracle" in first
    assert "ssdcheck: saved unshrunk" in proc.stderr
    assert "stopped because it is making very slow progress" in out   # the bound cut the shrink
    saved = list((tmp_path / "f").glob("*.pt"))
    assert len(saved) >= 1
    t = _strict_json(tmp_path / "r.json")["tests"][0]
    assert t["call_duration"] < 60, t   # unbounded, Hypothesis shrinks this one for minutes


def test_x_stops_the_other_workers_at_the_first_failure(tmp_path):
    """-n 2 -x: the worker that finds the failure tells the other one, whose passing test stops before
    its next example (its report entry says ssd_cut_by_failure) instead of running its 18 examples."""
    env_call = {"SSDCHECK_TEST_CALL_S": "0.4"}
    proc = run_pytest_env(env_call, f"{TESTS}::test_matches_oracle", f"{TESTS}::test_causality",
                          "--impl", SLOW_BUG, "-n", "2", "-x", "--ssd-shrink-seconds", "1",
                          "--ssd-report", str(tmp_path / "r.json"))
    out = proc.stdout + proc.stderr
    assert proc.returncode in (1, 2), out   # 2: xdist reports the -x stop as an interruption
    tests = {t["nodeid"].split("::")[-1]: t for t in _strict_json(tmp_path / "r.json")["tests"]}
    assert tests["test_matches_oracle[tests.tooling_targets:slow_late_tail]"]["outcome"] == "failed", tests
    causality = tests["test_causality[tests.tooling_targets:slow_late_tail]"]
    assert causality["properties"].get("ssd_cut_by_failure") == "true", causality


def test_a_pinned_regression_failure_prints_a_command_that_replays_exactly_it():
    """A failure of a pinned problem (tests/test_regressions.py: not drawn) prints `reproduce: pytest ...`,
    and that command, run as printed, fails on the same problem: the property's own test with the
    problem pinned. (It once named `'tests/test_regressions.py -k PROP'` in one quoted argument, which
    pytest took for a missing file, exit 4.)"""
    import shlex
    proc = run_pytest("tests/test_regressions.py", "-k", "test_regression and prop_matches_oracle-0", "--impl", BROKEN)
    assert proc.returncode == 1, proc.stdout[-3000:]
    line = next(t for t in proc.stdout.splitlines() if t.lstrip("E ").startswith("reproduce: pytest"))
    argv = shlex.split(line.lstrip("E ").removeprefix("reproduce: "))
    assert argv[:2] == ["pytest", "tests/test_properties.py::test_matches_oracle"], argv
    again = run_pytest(*argv[1:])
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout[-3000:]
    problem = argv[argv.index("--ssd-problem") + 1]
    assert problem in again.stdout.replace("\n", ""), again.stdout[-3000:]


def test_a_regression_says_whether_both_worsts_are_at_one_problem():
    # two runs need not draw the same problems: growth between two different worst problems is said
    # to be undecided until both are replayed under both revisions
    key = ("k", "prop_x", "y", "float32")
    row = lambda v, p: {"max_abs": v, "normwise": v, "share": 0.3, "max_abs_problem": p, "normwise_problem": p}
    (same, _), _ = gate.compare_rows({key: row(3e-6, "P1")}, {key: row(1e-6, "P1")})
    assert same.same_problem and "the same problem" in same.message(2.0) and "replay" not in same.message(2.0)
    (other, _), _ = gate.compare_rows({key: row(3e-6, "P2")}, {key: row(1e-6, "P1")})
    msg = other.message(2.0)
    assert not other.same_problem and "at P2" in msg and "another problem: P1" in msg and "--ssd-problem" in msg
    assert other.to_dict()["baseline_problem"] == "P1"
