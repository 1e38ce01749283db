"""The suite's power, measured: every non-equivalent torch-ref mutant must be killed.

`python -m mutation.run` copies the tree once per mutant, applies the mutant and runs the users' own
`pytest tests/test_properties.py --impl torch-ref --hypothesis-profile=mutant -x` there (2 at a time).
A survivor is a bug the suite would ship; the failure names each one with the mistake it models.
See mutation/README.md for what the numbers mean and how to add a mutant.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mutation.catalog import available_catalogs, check_catalog, load_catalog

ROOT = Path(__file__).resolve().parent.parent


def _code_root(catalog, tmp_path):
    """The repository, or a peer catalog's pristine package unpacked from $SSDCHECK_PEERS_DIR (skip without)."""
    from mutation.peer_copy import PeerSourceMissing
    from mutation.run import code_root
    try:
        return code_root(catalog, tmp_path)
    except PeerSourceMissing as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", available_catalogs())
def test_catalog_snippets_apply_exactly_once(name, tmp_path):
    """Catalog rot: every snippet still occurs exactly once in its kernel file, and the result parses
    (a peer catalog: in the pristine package, unpacked from the published file)."""
    catalog = load_catalog(name)
    problems = check_catalog(catalog, _code_root(catalog, tmp_path))
    assert not problems, f"catalog {name}: {len(problems)} problem(s):\n" + "\n".join(problems)


@pytest.mark.parametrize("name", ["cutile", "cutile_fast", "cutile_fastr", "cutile_walk", "cutile_seg"])
def test_cutile_mutants_keep_the_line_numbers_of_the_kernels_they_do_not_touch(name):
    """The compile cache keys on debug info (line numbers too): a mutant that moved the lines after it
    would recompile every later kernel on the GPU, for nothing."""
    catalog = load_catalog(name)
    for m in catalog.mutants:
        src = (ROOT / m.file).read_text()
        if m.replacement.count("\n") <= m.original.count("\n"):
            assert m.apply(src).count("\n") == src.count("\n"), m.id


@pytest.mark.mutation
def test_torch_ref_mutants_are_killed(tmp_path):
    out = tmp_path / "mutants.json"
    cmd = [sys.executable, "-m", "mutation.run", "--catalog", "torch_ref", "--jobs", "2", "--budget-s", "90",
           "--json", str(out), "--md", str(tmp_path / "mutants.md")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.is_file(), f"mutation.run wrote no report (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(out.read_text())
    base = report["baseline"]
    assert base["status"] == "survived", (
        f"the suite fails on the unmutated tree ({base['status']}: {base['error']}); mutation results mean nothing")
    lines = []
    for m in report["mutants"]:
        if m["equivalent"] is None and m["status"] != "killed":
            why = m["error"] or "every property held"
            lines.append(f"  {m['id']} [{m['category']}] {m['status']}: {m['description']} ({why})")
        elif m["equivalent"] is not None and m["status"] == "killed":
            lines.append(f"  {m['id']} is declared equivalent, but {m['killed_by']} killed it: {m['error']}")
    s = report["summary"]
    if lines:
        pytest.fail(
            f"mutation score {s['score'] or 0:.1%} ({s['killed']} killed, {s['survived']} survived, "
            f"{s['invalid']} invalid, {s['equivalent']} equivalent); not killed:\n" + "\n".join(lines)
            + "\nreproduce one: python -m mutation.run --catalog torch_ref --only ID"
              "\nwhy it survives: python -m mutation.probe --only ID (try a fix with: python -m mutation.run --patch X.diff)",
            pytrace=False)


@pytest.mark.compile
def test_cutile_compile_only_tells_a_compiling_mutant_from_a_broken_one():
    """`--compile-only` (CPU, tileiras): a catalog mutant compiles, a shape error does not (~5 s)."""
    pytest.importorskip("cuda.tile")
    from mutation.catalog import Catalog, Mutant
    from mutation.run import compile_catalog
    real = load_catalog("cutile").by_id("cu_bias_dropped")
    broken = Mutant(id="broken_extract", file=real.file, category="tiling", description="shape error",
                    original="carry = ct.extract(run, (BL - 1, 0), shape=(1, BH))",
                    replacement="carry = ct.extract(run, (BL - 1, 0), shape=(2, BH))")
    base, (ok, bad), _ = compile_catalog(Catalog("t", "cutile", (real, broken)), baseline=False, jobs=2)
    assert base is None
    assert ok.status == "compiles" and ok.compiled and all(u.startswith("chunk_cumsum[") for u in ok.compiled), ok
    assert bad.status == "invalid (does not compile)" and "chunk_cumsum" in bad.error, bad


def test_the_fast_catalog_mutates_code_the_table_runs():
    """cutile_fast mutates the FAST paths: table rows must select them for aligned problems (else its
    mutants survive for want of a path, not of a test), and it runs the table as shipped (no ENV)."""
    from kernels.cutile import dispatch
    for kernel in ("chunk_state", "chunk_scan"):
        chosen = dispatch.choose(kernel, dispatch.Problem("bfloat16", 64, 64, 64, 64, aligned=True))
        assert chosen.get("FAST") == 64, (kernel, chosen)
    assert load_catalog("cutile_fast").env == () and load_catalog("cutile").env == ()


def test_the_fastr_catalog_mutates_code_the_table_runs():
    """cutile_fastr mutates _scan_chunk's column tiles: table rows must put aligned chunk-128/256
    problems on FAST = chunk with 64-row tiles (else its mutants survive for want of a path), with no ENV."""
    from kernels.cutile import dispatch, launcher
    for chunk in (128, 256):
        for bh in (16, 64, 512):
            prob = dispatch.Problem("bfloat16", 64, 128, chunk, bh, aligned=True)
            cfg = launcher._fast_config("chunk_scan", dispatch.choose("chunk_scan", prob), prob)
            assert (cfg.get("FAST"), cfg.get("BL")) == (chunk, 64), cfg
    assert load_catalog("cutile_fastr").env == ()


def test_compile_only_compiles_just_the_kernel_a_helper_mutant_reaches():
    """A mutant in a helper compiles the kernels that run it, through any depth of helpers
    (_scan_tile is called by _scan_block, called by chunk_scan_kernel), not every kernel."""
    from mutation.run import touched_kernels
    for name in ("cutile", "cutile_fast", "cutile_fastr", "cutile_walk", "cutile_seg"):
        for m in load_catalog(name).mutants:
            got = touched_kernels(m, ROOT)
            if m.file.endswith("kernels.py"):
                # the scan's diagonal tile and D/z tail (_chunk_diagonal, _chunk_store) serve the walk too,
                # the walk's state step (_state_step) the segmented walk's pass 1
                assert len(got) == 1 or got in (["chunk_scan", "chunk_walk"], ["chunk_walk", "segment_state"]), \
                    (m.id, got)
    scan = next(m for m in load_catalog("cutile").mutants if "wj = cbj" in m.original)
    assert touched_kernels(scan, ROOT) == ["chunk_scan"]


# ---------------------------------------------------------------- catalogs judged by another test file

def test_a_tests_catalog_builds_its_own_command():
    """A catalog's TESTS replaces the forward suite in every command the runner builds (the kill run,
    --keep, the report's command line, time to first failure); PYTEST_ARGS follow the runner's own."""
    from mutation import ttf
    from mutation.run import Report, catalog_pytest_args
    for name, impl in (("tilegym_bwd", "tilegym-first-config"), ("mamba_ssm_bwd", "mamba-ssm")):
        catalog = load_catalog(name)
        assert catalog.tests == "tests/test_gradients.py" and catalog.impl == impl and catalog.peer
        args = catalog_pytest_args(catalog, matrix=False)
        assert args[:3] == ["tests/test_gradients.py", "--impl", impl] and args[-1] == "-x", args
        assert "--hypothesis-profile=mutant" in args and "tests/test_properties.py" not in args
        ttf_args = ttf.pytest_args(impl, "gpu", 60, (), "", catalog.tests, catalog.pytest_args)
        assert ttf_args[0] == "tests/test_gradients.py", ttf_args
        report = Report(catalog.name, impl, [], None, 0.0, 1, 60.0, False, tests=catalog.tests)
        assert report.summary()["command"].startswith(f"python -m pytest tests/test_gradients.py --impl {impl} ")
    forward = load_catalog("tilegym")
    assert catalog_pytest_args(forward, False)[0] == "tests/test_properties.py"
    extra = dataclasses.replace(forward, pytest_args=("-k", "matches_oracle"))
    assert catalog_pytest_args(extra, True)[-2:] == ["-k", "matches_oracle"]


def test_a_bad_tests_field_is_refused_naming_it(tmp_path, monkeypatch):
    """TESTS must name a test file of this repository; PYTEST_ARGS a tuple of strings."""
    import sys as _sys
    import types
    from mutation import catalog as cat
    for field, value, match in (("TESTS", "test_gradients.py", "TESTS: expected a test file path"),
                                ("PYTEST_ARGS", "-k x", "PYTEST_ARGS: expected a tuple of strings")):
        module = types.ModuleType("mutation._bad_catalog")
        module.IMPL, module.MUTANTS = "torch-ref", ()
        setattr(module, field, value)
        monkeypatch.setitem(_sys.modules, "mutation._bad_catalog", module)
        monkeypatch.setitem(cat.CATALOGS, "bad", "mutation._bad_catalog")
        with pytest.raises(ValueError, match=match):
            cat.load_catalog("bad")
    missing = dataclasses.replace(load_catalog("torch_ref"), tests="tests/test_no_such_file.py")
    assert any("TESTS tests/test_no_such_file.py does not exist" in p for p in check_catalog(missing, ROOT))


@pytest.mark.mutation
def test_a_tests_catalog_is_judged_by_its_test_file():
    """End to end on the CPU: a torch-ref mutant under a catalog whose TESTS is tests/test_gradients.py is
    killed by a gradient test, with the GradProblem it failed on (the forward suite would name
    test_matches_oracle and an SSDProblem: the runner ignoring TESTS fails this). ~20 s."""
    from mutation.run import run_catalog
    mutant = load_catalog("torch_ref").by_id("causal_mask_strict")
    catalog = dataclasses.replace(load_catalog("torch_ref"), name="torch_ref_bwd", mutants=(mutant,),
                                  tests="tests/test_gradients.py")
    report = run_catalog(catalog, baseline=False, jobs=1, budget_s=300)
    (o,) = report.outcomes
    assert o.status == "killed" and o.killed_by.startswith("test_grad_"), (o.status, o.killed_by, o.error)
    assert o.problem and o.problem.startswith("GradProblem("), o.problem
    assert report.summary()["command"].startswith("python -m pytest tests/test_gradients.py --impl torch-ref")


def test_a_baseline_cut_by_its_budget_vouches_only_for_the_kills_it_passed():
    """A baseline that ran out of time (TileGym's backward on the H200: 44 examples in 420 s, no
    failure) still vouches for a kill whose failing example it passed: the test finished, or the cut
    came after that example. A kill further on, or any baseline failure, leaves nothing standing."""
    from mutation.run import Outcome, Report

    def report(baseline_tests, kills):
        base = Outcome(id="(baseline)", status="survived (timeout)", tests=baseline_tests)
        outs = [Outcome(id=f"m{i}", status="killed", killed_by=t, examples=k) for i, (t, k) in enumerate(kills)]
        return Report(catalog="c", impl="i", outcomes=outs, baseline=base, seconds=1.0, jobs=1, budget_s=1.0,
                      matrix=False)

    tests = {"test_a[x]": {"outcome": "passed", "examples": 12}, "test_b[x]": {"outcome": None, "examples": 5}}
    assert report(tests, [("test_a[x]", 12), ("test_b[x]", 4)]).kills_the_baseline_did_not_cover() == []
    assert report(tests, [("test_b[x]", 5), ("test_c[x]", 1)]).kills_the_baseline_did_not_cover() == ["m0", "m1"]
    failed = {**tests, "test_a[x]": {"outcome": "failed", "examples": 3}}
    assert report(failed, [("test_b[x]", 1)]).kills_the_baseline_did_not_cover() is None
