"""The mutation runner's peer copies and time-to-failure mode, on the CPU (no suite run, no GPU).

Each check is a helper that raises on a broken input, and each test also feeds it one, so the test is
shown to fail when the runner breaks the way the check exists for.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mutation import peer_copy, ttf
from mutation.catalog import Catalog, Mutant, check_catalog, load_catalog

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- sharding

def check_partition(catalog: Catalog, n: int, shards: list[list]) -> None:
    """Every non-equivalent mutant in exactly one shard, the baseline in every shard."""
    want = [m.id for m in catalog.mutants if m.equivalent is None]
    got = [m.id for s in shards for m in s if m is not None]
    assert sorted(got) == sorted(want), f"{n} shards: missing {set(want) - set(got)}, doubled " \
                                        f"{sorted(i for i in set(got) if got.count(i) > 1)}"
    assert all(s and s[0] is None for s in shards), f"{n} shards: a shard without the unmutated baseline"


def test_shards_split_the_catalog_deterministically_and_disjointly():
    catalog = load_catalog("torch_ref")
    for n in (1, 2, 3, 7, 40):
        shards = [ttf.shard_items(catalog, (i, n)) for i in range(1, n + 1)]
        check_partition(catalog, n, shards)
        assert shards == [ttf.shard_items(catalog, (i, n)) for i in range(1, n + 1)]   # the same every time
    # the check fails on a broken split: a mutant dealt to two shards, or dropped
    s1, s2 = ttf.shard_items(catalog, (1, 2)), ttf.shard_items(catalog, (2, 2))
    with pytest.raises(AssertionError, match="doubled"):
        check_partition(catalog, 2, [s1, s2 + [s1[1]]])
    with pytest.raises(AssertionError, match="missing"):
        check_partition(catalog, 2, [s1, s2[:-1]])


@pytest.mark.parametrize("bad", ["0/3", "4/3", "1", "a/b", "1/0"])
def test_a_bad_shard_names_the_argument(bad):
    with pytest.raises(ValueError, match="--shard"):
        ttf.parse_shard(bad)
    assert ttf.parse_shard("2/5") == (2, 5)


# ---------------------------------------------------------------- resume

def _rec(catalog, m, cache="cold", shard="1/3", status=None, t="2026-12-01T20:00:00+00:00", s=5.0):
    status = status or ("killed" if m else "survived")
    return {"catalog": catalog.name, "cache": cache, "id": m.id if m else ttf.BASELINE, "digest": ttf.mutant_digest(m),
            "shard": shard, "status": status, "first_failure_s": s if status == "killed" else None,
            "examples": 1, "examples_run": 1, "compiles": {}, "killed_by": "test_x", "wall_s": 9.0, "time": t}


def test_resume_skips_the_runs_already_recorded(tmp_path):
    catalog = load_catalog("torch_ref")
    shard = ttf.shard_items(catalog, (1, 3))
    done = [_rec(catalog, shard[1]), _rec(catalog, None, shard="1/3")]
    path = tmp_path / "ttf.jsonl"
    for r in done:
        ttf.append(path, r)
    with open(path, "a") as f:
        f.write('{"catalog": "torch_ref", "cut mid-wr')       # a command killed while writing
    left = ttf.pending(catalog, "cold", (1, 3), ttf.load_records([path]))
    assert [m.id for m in left if m] == [m.id for m in shard[2:]] and None not in left
    # not skipped: the same id in the other cache, an edited mutant's old text, another shard's baseline
    other = [_rec(catalog, shard[1], cache="warm"), _rec(catalog, None, shard="2/3"),
             {**_rec(catalog, shard[2]), "digest": "0ld"}]
    assert ttf.pending(catalog, "cold", (1, 3), other) == shard


# ---------------------------------------------------------------- caches

def _fake_execute(calls, argv=None, fill_status="survived"):
    """Stands in for mutation.engine.execute: records each run's cache folder and what was in it (and in
    `argv`, each run's extra arguments and environment), writes a file there (the compiles a run
    leaves), and kills every mutant; an unmutated run ends with `fill_status` when it runs under xdist."""
    from mutation.run import Outcome

    def execute(todo, snap, impl, *, setup=None, progress=None, **kw):
        out = []
        for i, m in enumerate(todo):
            env, extra = setup(i, None)
            if argv is not None:
                argv.append((m.id if m else ttf.BASELINE, extra, env, kw.get("baseline_budget_s")))
            d = Path(env["SSDCHECK_COMPILE_CACHE"])
            calls.append((m.id if m else ttf.BASELINE, d, sorted(p.name for p in d.iterdir())))
            (d / f"{m.id if m else 'unmutated'}.bin").write_text("x")
            status = "killed" if m else (fill_status if "-n" in extra else "survived")
            o = Outcome(id=m.id if m else ttf.BASELINE, status=status, first_failure_s=1.0 if m else None)
            out.append(o)
            if progress:
                progress(o)
        return out
    return execute


@pytest.mark.parametrize("cache", ttf.CACHES)
def test_each_cache_mode_starts_its_runs_from_what_it_says(cache, tmp_path, monkeypatch):
    """empty: an empty cache per run; cold: a copy of the unmutated run's cache; warm: cold, then each
    run again from the cache its own cold run left. Records are labelled by the run's cache."""
    import mutation.engine as runner
    calls = []
    monkeypatch.setattr(runner, "execute", _fake_execute(calls))
    catalog = load_catalog("torch_ref")
    a, b = [m for m in catalog.mutants if m.equivalent is None][:2]
    monkeypatch.setattr(ttf, "items", lambda c: [None, a, b])
    recs = ttf.run(catalog, cache=cache, jobs=1, fuzz_s=1, results=tmp_path / "r.jsonl")
    seen = {(who, tuple(files)) for who, _, files in calls}
    if cache == "empty":
        assert seen == {(ttf.BASELINE, ()), (a.id, ()), (b.id, ())}
        assert {r["cache"] for r in recs} == {"empty"}
        return
    fill = ("unmutated.bin",)
    assert calls[0][2] == [] and {(a.id, fill), (b.id, fill), (ttf.BASELINE, fill)} <= seen
    if cache == "cold":
        assert len(calls) == 4 and {r["cache"] for r in recs} == {"cold"}
        return
    # the second pass finds each run's own compiles beside the fill's
    assert (a.id, tuple(sorted(fill + (f"{a.id}.bin",)))) in seen
    assert calls[-1][1] == next(d for who, d, _ in calls[1:4] if who == b.id)
    assert [r["cache"] for r in recs].count("warm") == 4 and [r["cache"] for r in recs].count("cold") == 3


def test_the_fill_runs_under_xdist_and_catalogs_of_one_implementation_share_it(tmp_path, monkeypatch):
    """The fill is cache preparation: the command under xdist (--fill-jobs workers, no per-worker counts),
    made once per (implementation, command, tree) in --fill-cache and copied by every later catalog's
    runs; the unmutated baseline still runs the command as is."""
    import mutation.engine as runner
    calls, argv = [], []
    monkeypatch.setattr(runner, "execute", _fake_execute(calls, argv))
    catalog = load_catalog("torch_ref")
    a, b = [m for m in catalog.mutants if m.equivalent is None][:2]
    monkeypatch.setattr(ttf, "items", lambda c: [None, a])
    shared = tmp_path / "fill"
    ttf.run(catalog, jobs=1, fuzz_s=1, results=tmp_path / "1.jsonl", fill_cache=shared, fill_jobs=6)
    _, fill_args, fill_env, fill_limit = argv[0]
    assert fill_args[-2:] == ["-n", "6"] and fill_env["SSDCHECK_MUTATION_REPORT"] == ""
    assert all("-n" not in extra for _, extra, _, _ in argv[1:])         # baseline and mutants: the command
    # the fill compiles from nothing (half the total); the baseline keeps the fuzz time + 60 s
    assert fill_limit == 560 / 2 and argv[1][3] == 1 + 60.0
    monkeypatch.setattr(ttf, "items", lambda c: [None, b])
    recs = ttf.run(catalog, jobs=1, fuzz_s=1, results=tmp_path / "2.jsonl", fill_cache=shared, fill_jobs=6)
    second = calls[3:]
    assert [who for who, _, _ in second] == [ttf.BASELINE, b.id]         # no second fill
    assert all(files == ["unmutated.bin"] for _, _, files in second)      # each run copies the shared fill
    assert recs[0]["id"] == ttf.FILL and recs[0]["status"] == "survived"
    # another tree is another fill
    monkeypatch.setattr(ttf, "fill_key", lambda impl, args, trees: "other")
    n = len(argv)
    ttf.run(catalog, jobs=1, fuzz_s=1, results=tmp_path / "3.jsonl", fill_cache=shared, fill_jobs=6)
    assert "-n" in argv[n][1] and (shared / "other").is_dir()


def test_fill_only_makes_the_shared_fill_and_runs_nothing_else(tmp_path, monkeypatch):
    """gpu_ttf.sh fills every implementation first, so no fill compiles beside the timed runs; a
    catalog run after it copies that fill and runs no fill of its own."""
    import mutation.engine as runner
    calls = []
    monkeypatch.setattr(runner, "execute", _fake_execute(calls))
    catalog = load_catalog("torch_ref")
    a = next(m for m in catalog.mutants if m.equivalent is None)
    monkeypatch.setattr(ttf, "items", lambda c: [None, a])
    shared = tmp_path / "fill"
    recs = ttf.run(catalog, jobs=1, fuzz_s=1, results=tmp_path / "r.jsonl", fill_cache=shared, fill_only=True)
    assert [who for who, _, _ in calls] == [ttf.BASELINE] and [r["id"] for r in recs] == [ttf.FILL]
    ttf.run(catalog, jobs=1, fuzz_s=1, results=tmp_path / "r.jsonl", fill_cache=shared)
    assert sorted(who for who, _, _ in calls[1:]) == sorted([ttf.BASELINE, a.id])
    assert all(files == ["unmutated.bin"] for _, _, files in calls[1:])


def test_fill_only_refuses_the_empty_cache(capsys):
    from mutation.run import main
    with pytest.raises(SystemExit):
        main(["--time-to-failure", "--catalog", "torch_ref", "--cache", "empty", "--fill-only"])
    assert "--fill-only" in capsys.readouterr().err


def test_a_fill_that_failed_is_not_reused(tmp_path, monkeypatch):
    import mutation.engine as runner
    calls = []
    monkeypatch.setattr(runner, "execute", _fake_execute(calls, fill_status="killed"))
    catalog = load_catalog("torch_ref")
    a = next(m for m in catalog.mutants if m.equivalent is None)
    monkeypatch.setattr(ttf, "items", lambda c: [None, a])
    for n in (1, 2):
        recs = ttf.run(catalog, jobs=1, fuzz_s=1, results=tmp_path / f"{n}.jsonl", fill_cache=tmp_path / "fill")
        assert [r["id"] for r in recs] == [ttf.FILL] and recs[0]["status"] == "killed"   # no runs on it
    assert len(calls) == 2                                                # the second catalog filled again


def test_the_fill_key_changes_with_any_file_and_with_the_command(tmp_path):
    (tmp_path / "k.py").write_text("a = 1")
    k = ttf.fill_key("cutile", ["x"], [tmp_path])
    assert ttf.fill_key("cutile", ["y"], [tmp_path]) != k
    (tmp_path / "k.py").write_text("a = 2")
    assert ttf.fill_key("cutile", ["x"], [tmp_path]) != k


# ---------------------------------------------------------------- summary

def test_summary_medians_maxima_kills_and_flags():
    cat = load_catalog("torch_ref")
    a, b, c = [m for m in cat.mutants if m.equivalent is None][:3]
    recs = [_rec(cat, None), _rec(cat, a, s=4.0), _rec(cat, b, s=8.0), _rec(cat, c, s=30.0)]
    (s,) = ttf.summarize(recs, {"torch_ref": [a.id, b.id, c.id]})
    assert (s["killed"], s["mutants"], s["median_s"], s["max_s"]) == (3, 3, 8.0, 30.0)
    assert s["meets_median"] and s["meets_max"] and s["all_killed"] and s["unmutated_passed"]
    # a later record wins; a survivor counts as infinite; a run whose example raised but passed is flagged
    later = {**_rec(cat, c, status="survived", t="2026-12-01T21:00:00+00:00"), "first_failure_s": 12.0}
    (s,) = ttf.summarize(recs + [later], {"torch_ref": [a.id, b.id, c.id]})
    assert (s["killed"], s["median_s"], s["max_s"]) == (2, 8.0, float("inf"))
    assert not s["all_killed"] and not s["meets_max"] and s["failure_swallowed"] == [c.id]
    # slow: median over the 10 s target, max over 60 s; a missing mutant is not run; a failing baseline
    slow = [_rec(cat, None, status="killed"), _rec(cat, a, s=11.0), _rec(cat, b, s=61.0)]
    (s,) = ttf.summarize(slow, {"torch_ref": [a.id, b.id, c.id]})
    assert s["not_run"] == [c.id] and not s["unmutated_passed"]
    (s,) = ttf.summarize(slow[1:], {"torch_ref": [a.id, b.id]})
    assert s["median_s"] == 36.0 and not s["meets_median"] and not s["meets_max"] and not s["unmutated_passed"]
    # TileGym's median target is 15 s
    tg = [{**r, "catalog": "tilegym"} for r in recs[:2]]
    assert ttf.summarize(tg)[0]["target_median_s"] == 15.0


def test_summary_command_exit_status(tmp_path, capsys):
    from mutation.run import main
    cat = load_catalog("torch_ref")
    path = tmp_path / "r.jsonl"
    live = [m for m in cat.mutants if m.equivalent is None]
    for m in [None] + live:
        ttf.append(path, _rec(cat, m, s=3.0))
    assert main(["--ttf-summary", str(path), "--md", str(tmp_path / "s.md")]) == 0
    n = len(live)
    assert f"| torch_ref | cold | {n} / {n} | 3.0 (3.0) | 3.0 | passed" in (tmp_path / "s.md").read_text()
    ttf.append(path, _rec(cat, cat.mutants[0], status="survived", t="2026-12-02T00:00:00+00:00"))
    assert main(["--ttf-summary", str(path)]) == 1
    assert main(["--ttf-summary", str(tmp_path / "none.jsonl")]) == 2


# ---------------------------------------------------------------- peer copies

def _unpacked(peer, tmp_path):
    try:
        return peer_copy.unpack(peer, tmp_path / peer)
    except peer_copy.PeerSourceMissing as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name", ["tilegym", "mamba_ssm", "tilegym_bwd", "mamba_ssm_bwd"])
def test_peer_mutants_apply_to_a_copy_of_the_pristine_package(name, tmp_path):
    """Each mutant applies to a fresh copy unpacked from the published file, and only to that copy."""
    from mutation.run import _prepare
    catalog = load_catalog(name)
    snap = _unpacked(catalog.peer, tmp_path)
    assert check_catalog(catalog, snap) == []
    repo = tmp_path / "repo"
    (repo / "kernels").mkdir(parents=True)
    for m in catalog.mutants:
        job = _prepare(m, repo, [], peer_snap=snap)
        try:
            assert job.outcome.error is None, job.outcome.error
            mutated, pristine = (job.peer_root / m.file).read_text(), (snap / m.file).read_text()
            assert m.replacement in mutated and mutated != pristine and mutated == m.apply(pristine)
            compile(mutated, m.file, "exec")
        finally:
            import shutil
            shutil.rmtree(job.tmp, ignore_errors=True)
    # the checks fail on a broken mutant: a snippet not in the pristine file, a replacement that does not parse
    bad = Catalog(name, catalog.impl, (
        Mutant("gone", catalog.mutants[0].file, "no such text", "x", "d", "mask"),
        Mutant("broken", catalog.mutants[0].file, catalog.mutants[0].original, "def (:", "d", "mask")), peer=catalog.peer)
    problems = check_catalog(bad, snap)
    assert any("gone: snippet occurs 0 times" in p for p in problems), problems
    assert any("broken: the mutated" in p and "does not parse" in p for p in problems), problems


def test_unpack_refuses_an_archive_without_the_package(tmp_path):
    import zipfile
    whl = tmp_path / "tilegym-0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("other/__init__.py", "")
    with pytest.raises(ValueError, match="no tilegym/ package"):
        peer_copy.unpack("tilegym", tmp_path / "out", archive=whl)
    with pytest.raises(ValueError, match="peer: expected one of"):
        peer_copy.unpack("vllm", tmp_path / "out")


def test_a_run_finds_the_peer_copy_first(tmp_path):
    """The environment of a run puts the copy ahead of anything installed: the tilegym package and the
    mamba_ssm source folder the adapters load resolve inside the copy."""
    from mutation.run import _child_env
    probe = ("import importlib.util, sys\n"
             "from kernels.peers.mamba_ssm import find_package_dir\n"
             "print(importlib.util.find_spec('tilegym').origin)\n"
             "print(find_package_dir())\n")
    roots = {}
    for peer in ("tilegym", "mamba-ssm"):
        roots[peer] = _unpacked(peer, tmp_path)
    first = [str(roots["tilegym"])]
    env = {**_child_env(ROOT, tmp_path / "r.json", 1, first=first),
           **peer_copy.run_env("mamba-ssm", roots["mamba-ssm"])[1]}
    env["PYTHONPATH"] = os.pathsep.join([str(roots["tilegym"]), str(ROOT)])
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0].startswith(str(roots["tilegym"])), out
    assert out[1] == str(roots["mamba-ssm"] / "mamba_ssm"), out
    assert _child_env(ROOT, tmp_path / "r.json", 1, first=first)["PYTHONPATH"].split(os.pathsep)[0] == first[0]


def test_runs_cache_pytests_rewritten_plugin_modules(tmp_path, monkeypatch):
    """A run may write bytecode even where the host sets PYTHONDONTWRITEBYTECODE, so the second run
    loads hypothesis' rewritten modules (a pytest11 plugin) from pytest's cache instead of rewriting
    them at its start. (The probe points the caches at an empty prefix, whatever site-packages holds.)"""
    from mutation.run import _child_env
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    (tmp_path / "test_t.py").write_text("def test_t():\n    assert True\n")
    env = {**_child_env(tmp_path, tmp_path / "r.json", 1), "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    assert "PYTHONDONTWRITEBYTECODE" not in env
    probe = ("import sys, _pytest.assertion.rewrite as rw\n"
             "n = []\n"
             "orig = rw._rewrite_test\n"
             "rw._rewrite_test = lambda fn, config: (n.append(str(fn)), orig(fn, config))[1]\n"
             "import pytest\n"
             "pytest.main(['-q', '-p', 'no:cacheprovider', 'test_t.py'])\n"
             "print('REWRITTEN', sum('hypothesis' in f for f in n))\n")
    counts = [int(subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True,
                                 text=True, check=True).stdout.split("REWRITTEN")[1]) for _ in range(2)]
    assert counts[0] > 20 and counts[1] == 0, counts


def test_stable_names_make_debug_info_independent_of_the_copy_path(tmp_path):
    """A module of the copy compiles with its path below the copy as file name, and its source is still
    readable (what cuTile's parser needs); two copies at different paths give the same name."""
    probe = ("import inspect, sys\n"
             "from mutation.peer_plugin import install\n"
             "if sys.argv[2] == '1': install(sys.argv[1], ['pkg'])\n"
             "import pkg.mod as m\n"
             "print(m.f.__code__.co_filename)\n"
             "assert 'return 42' in inspect.getsource(m.f)\n")
    names = []
    for copy in ("a", "deeper/b"):
        root = tmp_path / copy
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("")
        (root / "pkg" / "mod.py").write_text("def f():\n    return 42\n")
        for on in ("1", "0"):
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]), "PYTHONDONTWRITEBYTECODE": "1"}
            names.append(subprocess.run([sys.executable, "-c", probe, str(root), on], env=env, cwd=tmp_path,
                                        capture_output=True, text=True, check=True).stdout.strip())
    assert names[0] == names[2] == "pkg/mod.py", names
    assert names[1] != names[3] and names[1].endswith("a/pkg/mod.py"), names   # without it: the disk path


# ---------------------------------------------------------------- count_plugin's first failure

def test_count_plugin_stamps_the_first_failing_example_not_a_rejected_one(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "from hypothesis import given, settings, reject, strategies as st, Phase\n"
        "@settings(derandomize=True, database=None, phases=(Phase.generate,), max_examples=20)\n"
        "@given(st.integers(0, 100))\n"
        "def test_a(i):\n"
        "    if i % 2: reject()\n"
        "@settings(derandomize=True, database=None, phases=(Phase.generate,), max_examples=50)\n"
        "@given(st.integers(0, 100))\n"
        "def test_b(i):\n"
        "    assert i < 60\n")
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SSDCHECK_MUTATION_REPORT": str(report)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutation.count_plugin",
                           "test_x.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout[-2000:]
    data = json.loads(report.read_text())
    first, tests = data["first_failure"], data["tests"]
    assert first["nodeid"].endswith("test_b"), first          # test_a's rejects are not failures
    b = tests["test_x.py::test_b"]
    assert first["examples_run"] == tests["test_x.py::test_a"]["examples"] + b["first_failure"]
    assert first["compiles"] == {} and first["time"] > 0
    check_phases(data["phases"], first["time"])
    with pytest.raises(AssertionError, match="phases"):
        check_phases({"configured": 2.0, "collected": 1.0, "first_example": 3.0}, 4.0)


def check_phases(phases: dict, first_failure: float) -> None:
    """Each stamp present, in order, and the first example started before the first failure."""
    stamps = [phases.get(k) for k in ttf.PHASES]
    assert None not in stamps and stamps == sorted(stamps) and stamps[-1] <= first_failure, \
        f"phases out of order or missing: {phases}, first failure at {first_failure}"


# ---------------------------------------------------------------- verdicts that would mislead

def _finished(tmp_path, tests, peer_files, returncode=0):
    from mutation.run import Outcome, _finish, _Job
    (tmp_path / "peer").mkdir(exist_ok=True)
    (tmp_path / "report.json").write_text(json.dumps({"tests": tests, "first_failure": None, "peer_files": peer_files}))

    class Done:
        start, start_epoch = 0.0, 0.0
    Done.returncode = returncode
    job = _Job(None, Outcome(id="m", status="invalid"), tmp_path, running=Done(), peer_root=tmp_path / "peer")
    return _finish(job, timed_out=False, budget_s=10)


def test_a_peer_run_that_loaded_the_pristine_package_is_invalid(tmp_path):
    ok = {"t::a": {"examples": 3, "first_failure": None, "error": None, "problem": None, "outcome": "passed"}}
    inside = str(tmp_path / "peer" / "mamba_ssm" / "ops" / "triton" / "ssd_combined.py")
    assert _finished(tmp_path, ok, {"mamba_ssm.ops.triton.ssd_combined": inside}).status == "survived"
    o = _finished(tmp_path, ok, {"mamba_ssm.ops.triton.ssd_combined": "/tmp/peers/mamba_ssm/ops/triton/ssd_combined.py"})
    assert o.status == "invalid" and "not loaded from the mutated copy" in o.error


def test_a_run_where_every_test_skipped_is_not_a_survivor(tmp_path):
    skipped = {"t::a": {"examples": 0, "first_failure": None, "error": None, "problem": None, "outcome": "skipped"}}
    o = _finished(tmp_path, skipped, {})
    assert o.status == "invalid" and "every test was skipped" in o.error
    mixed = {**skipped, "t::b": {**skipped["t::a"], "outcome": "passed"}}
    assert _finished(tmp_path, mixed, {}).status == "survived"
