"""Time to first failure: how soon the users' own fuzz command fails on each mutant, cold and warm.

    python -m mutation.run --time-to-failure --catalog NAME [--cache empty|cold|warm] [--shard I/N]
           [--jobs J] [--fuzz-seconds F] [--budget-s S] [--total-s T] [--results FILE.jsonl]
           [--fill-cache DIR] [--fill-jobs N]
    python -m mutation.run --ttf-summary FILE.jsonl [FILE.jsonl ...] [--md OUT.md]

Each run is a fresh process (process isolation: the seconds include Python's start and imports) of

    python -m pytest tests/test_properties.py --impl <impl> --hypothesis-profile=gpu -x -q
           --ssd-fuzz-seconds=F --ssd-compile-cache <cache>/cutile -p no:cacheprovider -p mutation.count_plugin

(a catalog's TESTS replaces the test file; TRITON_CACHE_DIR=<cache>/triton) on a fresh copy of the tree with one mutant applied (a peer
catalog: a fresh copy of the pristine peer package, first on the path). Per run it records the
seconds from the command's start to the first failing example (the moment it raised, stamped by
mutation/count_plugin.py: what a fail-fast run prints at once; the report after shrinking comes
later and is the run's `wall_s`), the examples up to it (of the killing test, and of every test
so far), the compiles up to it (cuTile's tileiras runs from the ssdcheck plugin's compile timer,
Triton kernels added to its cache) and the property that failed.

Caches (issue 24's "cold": nothing of the revision under test compiled yet, the unmodified
implementation's compiles may be cached):
- empty: every run gets an empty cuTile cache and an empty Triton cache (TileGym's autotune caches
  live in the process, so a new process starts without them): stricter than cold, a first run on a
  fresh host.
- cold: first the unmutated implementation runs the same command once into a cache (recorded as
  `(warm-fill)`), then every run starts from its own copy of that cache: what a revision finds when
  the previous one was fuzzed on this machine (kernels a mutant does not touch are hits: mutants keep
  line numbers, our kernels and TileGym's copies compile under path-independent names). The fill is
  cache preparation, so it runs the command under xdist (`--fill-jobs` workers, the battery warm-up
  compiling in parallel: alone, cutile's took over 170 s); the unmutated verdict is the baseline run's,
  the command as is. With `--fill-cache DIR` catalogs of one implementation share one fill, made once
  under a lock in DIR/<key> (key: the implementation, the command and every file of the trees).
- warm: as cold, then each mutant runs again from the cache its cold run left (both runs recorded,
  as "cold" and "warm"): the revision fuzzed a second time, nothing left to compile.

Shards and resume. The items (the unmutated `(baseline)`, then every non-equivalent mutant in
catalog order) are dealt round-robin: shard I of N takes items I-1, I-1+N, ... Every shard also
runs the unmutated implementation (0 failures expected). A finished run is appended to the JSONL
at once; a run already recorded there (same catalog, cache and mutant text; the baseline per shard)
is skipped, and a run that could not end before --total-s is not started: rerun the same command.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from mutation.catalog import DEFAULT_TESTS, Catalog, Mutant, check_catalog, load_catalog

BASELINE, FILL = "(baseline)", "(warm-fill)"
CACHES = ("empty", "cold", "warm")
# The targets (time from the command's start to the first failure printed).
TARGET_MEDIAN_S = {"tilegym": 15.0}   # per catalog; its kernels cost 3-10 s each to compile cold
DEFAULT_MEDIAN_S = 10.0
TARGET_MAX_S = 60.0
PHASES = ("configured", "collected", "first_example")   # mutation/count_plugin.py's stamps


# ---------------------------------------------------------------- what to run

def parse_shard(text: str) -> tuple[int, int]:
    """'I/N' -> (I, N) with 1 <= I <= N."""
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard: expected I/N with whole numbers (e.g. 2/5), got {text!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard: expected 1 <= I <= N, got {text!r}")
    return i, n


def items(catalog: Catalog) -> list[Mutant | None]:
    """The runs of a catalog: the unmutated baseline (None), then every non-equivalent mutant."""
    return [None] + [m for m in catalog.mutants if m.equivalent is None]


def shard_items(catalog: Catalog, shard: tuple[int, int]) -> list[Mutant | None]:
    """Shard I of N: items I-1, I-1+N, ... (round-robin, so slow and fast mutants spread); every
    shard also runs the baseline."""
    i, n = shard
    mine = items(catalog)[i - 1::n]
    return mine if mine and mine[0] is None else [None] + mine


def mutant_digest(m: Mutant | None) -> str:
    """Identifies a mutant's text: a record of an edited mutant is not taken for the new one."""
    if m is None:
        return "unmutated"
    return hashlib.sha1("\0".join((m.file, m.original, m.replacement)).encode()).hexdigest()[:12]


def record_key(rec: dict) -> tuple:
    shard = rec.get("shard") if rec["id"] in (BASELINE, FILL) else None
    return rec["catalog"], rec["cache"], rec["id"], rec["digest"], shard


def load_records(paths) -> list[dict]:
    """Every record of the JSONL files (a torn last line, from a command cut mid-write, is skipped)."""
    out = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def pending(catalog: Catalog, cache: str, shard: tuple[int, int], done: list[dict]) -> list[Mutant | None]:
    """The shard's runs that `done` (earlier records) does not hold yet."""
    have = {record_key(r) for r in done}
    label = f"{shard[0]}/{shard[1]}"
    return [m for m in shard_items(catalog, shard)
            if (catalog.name, cache, m.id if m else BASELINE, mutant_digest(m), None if m else label) not in have]


def pytest_args(impl: str, profile: str, fuzz_s: float, plugins=(), extra: str = "",
                tests: str = DEFAULT_TESTS, catalog_args=()) -> list[str]:
    """The users' fuzz command (after `python -m pytest`) on the catalog's test file, plus the counting
    plugin, the catalog's PYTEST_ARGS and then --pytest-args (`extra`)."""
    return [tests, "--impl", impl, f"--hypothesis-profile={profile}", "-x", "-q",
            f"--ssd-fuzz-seconds={fuzz_s:g}", "-p", "no:cacheprovider", "-p", "mutation.count_plugin",
            *plugins, *catalog_args, *shlex.split(extra)]


def cache_setup(cache_dir: Path) -> tuple[dict, list[str]]:
    """Environment and pytest arguments that point cuTile and Triton at `cache_dir`."""
    cutile, triton = cache_dir / "cutile", cache_dir / "triton"
    cutile.mkdir(parents=True, exist_ok=True)
    triton.mkdir(parents=True, exist_ok=True)
    return ({"TRITON_CACHE_DIR": str(triton), "CUDA_TILE_CACHE_DIR": str(cutile), "SSDCHECK_COMPILE_CACHE": str(cutile)},
            ["--ssd-compile-cache", str(cutile)])


# ---------------------------------------------------------------- running

PRECOMPILE_ENV = "SSDCHECK_PRECOMPILE_WORKERS"   # ssdcheck_plugin/precompile.py reads it


def precompile_workers_for(jobs: int) -> int:
    """Battery precompile workers per run: $SSDCHECK_PRECOMPILE_WORKERS where set (lab/scripts/gpu_ttf.sh
    sets it from a wave's runs at once), else the cores shared by `jobs` runs, less the run's own."""
    env = os.environ.get(PRECOMPILE_ENV, "")
    return int(env) if env.isdigit() and int(env) > 0 else max((os.cpu_count() or 1) // max(jobs, 1) - 1, 1)


def to_record(o, m: Mutant | None, *, catalog: Catalog, cache: str, shard: tuple[int, int], jobs: int,
              fuzz_s: float, budget_s: float, profile: str) -> dict:
    return {
        "catalog": catalog.name, "impl": catalog.impl, "cache": cache, "id": o.id, "digest": mutant_digest(m),
        "shard": f"{shard[0]}/{shard[1]}", "category": o.category, "status": o.status,
        "first_failure_s": o.first_failure_s, "examples": o.examples, "examples_run": o.examples_run,
        "compiles": o.compiles, "phases": o.phases, "killed_by": o.killed_by, "error": o.error, "problem": o.problem,
        "wall_s": o.seconds, "returncode": o.returncode, "jobs": jobs, "precompile_workers": precompile_workers_for(jobs),
        "fuzz_seconds": fuzz_s,
        "budget_s": budget_s, "profile": profile, "host": platform.node(), "cpus": os.cpu_count(),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def append(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()


def fill_key(impl: str, args: list[str], trees) -> str:
    """What a fill depends on: the implementation, the command, and every file of `trees`."""
    h = hashlib.sha1(json.dumps([impl, args]).encode())
    for tree in trees:
        for path in sorted(p for p in Path(tree).rglob("*") if p.is_file()):
            h.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def shared_fill(root: Path, key: str, fill):
    """The fill for `key` in root/key, made by `fill(folder)` (returns an Outcome or None) the first
    time and reused after: a lock makes concurrent catalogs wait for one fill rather than each run it.
    Returns (folder, outcome); a fill that did not pass is not kept for reuse."""
    from mutation.engine import Outcome
    folder = root / key
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = root / f"{key}.json"
        if marker.is_file():
            return folder, Outcome(**json.loads(marker.read_text()))
        shutil.rmtree(folder, ignore_errors=True)
        o = fill(folder)
        if o is not None and o.status == "survived":
            marker.write_text(json.dumps(dataclasses.asdict(o)))
        return folder, o


def run(catalog: Catalog, *, cache: str = "cold", shard=(1, 1), jobs: int | None = None, fuzz_s: float = 150.0,
        budget_s: float | None = None, total_s: float = 560.0, results: Path, profile: str = "gpu",
        extra: str = "", isolation: str = "process", progress=None, fill_cache: Path | None = None,
        fill_jobs: int | None = None, fill_only: bool = False) -> list[dict]:
    """Time the shard's pending runs (see the module docstring); returns the records it appended.
    `fill_only`: make the fill (cold, warm) and return."""
    from mutation import peer_copy
    from mutation import engine
    from mutation.engine import ROOT, code_root, snapshot
    if cache not in CACHES:
        raise ValueError(f"--cache: expected one of {', '.join(CACHES)}, got {cache!r}")
    jobs = jobs or os.cpu_count() or 1
    precompile_workers = precompile_workers_for(jobs)
    budget_s = budget_s if budget_s is not None else fuzz_s + 60.0
    deadline = time.monotonic() + total_s
    todo = pending(catalog, cache, shard, load_records([results]))
    by_id = {m.id: m for m in catalog.mutants}
    print(f"{catalog.name} ({catalog.impl}) {cache}, shard {shard[0]}/{shard[1]}: {len(todo)} run(s) to do "
          f"of {len(shard_items(catalog, shard))}, {jobs} at once, --ssd-fuzz-seconds={fuzz_s:g}, "
          f"budget {budget_s:g} s each, {total_s:g} s in all", file=sys.stderr)
    written = []

    def keep(o, m, label=cache):
        rec = to_record(o, m, catalog=catalog, cache=label, shard=shard, jobs=jobs, fuzz_s=fuzz_s,
                        budget_s=budget_s, profile=profile)
        append(results, rec)
        written.append(rec)
        if progress:
            progress(rec)

    if not todo:
        return written
    args = pytest_args(catalog.impl, profile, fuzz_s, peer_copy.pytest_plugins(catalog.peer), extra, catalog.tests,
                       catalog.pytest_args)
    with tempfile.TemporaryDirectory(prefix="ssdcheck-ttf-") as tmp:
        tmp = Path(tmp)
        snap = snapshot(ROOT, tmp / "repo")
        peer_snap = code_root(catalog, tmp) if catalog.peer else None
        problems = check_catalog(catalog, peer_snap or snap)
        # the unmutated runs must finish their fuzz time to pass, whatever cut the mutants get
        common = dict(problems=problems, budget_s=budget_s, baseline_budget_s=max(budget_s, fuzz_s + 60.0),
                      isolation=isolation,
                      peer=catalog.peer, peer_snap=peer_snap, args=args, deadline=deadline)
        fill_dir = None
        if cache in ("cold", "warm"):
            workers = fill_jobs or os.cpu_count() or 1

            def make_fill(folder):
                env, cache_args = cache_setup(folder)
                # xdist's workers would overwrite one another's counts: the fill's verdict is pytest's exit
                env = {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                       "SSDCHECK_MUTATION_REPORT": ""}
                xdist = ["-n", str(workers)] if workers > 1 else []
                # the fill compiles what the command needs from nothing: half the total, not the baseline's limit
                return engine.execute([None], snap, catalog.impl, jobs=1, setup=lambda i, job: (env, cache_args + xdist),
                               **{**common, "baseline_budget_s": max(common["baseline_budget_s"], total_s / 2)})[0]

            if fill_cache is not None:
                catalog_env = [f"{k}={v}" for k, v in sorted(dict(catalog.env).items())]   # e.g. a forced path
                key = fill_key(catalog.impl, args + catalog_env, [snap] + ([peer_snap] if peer_snap else []))
                fill_dir, fill = shared_fill(Path(fill_cache), key, make_fill)
            else:
                fill_dir = tmp / "fill-cache"
                fill = make_fill(fill_dir)
            if fill is None:
                print("no time left for the unmutated run that fills the cache", file=sys.stderr)
                return written
            fill.id = FILL
            keep(fill, None)
            if fill.status != "survived":
                print(f"the unmutated {catalog.impl} fails the command ({fill.status}: {fill.error}): no runs on "
                      f"a cache it filled", file=sys.stderr)
                return written
            if fill_only:
                return written
        # each run's cache outlives its job's folder, so that a warm run can start from what its cold run left
        caches = [tmp / "caches" / str(i) for i in range(len(todo))]

        def setup(i, job):
            if fill_dir is not None:
                shutil.copytree(fill_dir, caches[i])
            env, cache_args = cache_setup(caches[i])
            return {**env, PRECOMPILE_ENV: str(precompile_workers)}, cache_args

        def done(label):
            return lambda o: keep(o, by_id.get(o.id), label)

        first = "cold" if cache == "warm" else cache
        results_ = engine.execute(todo, snap, catalog.impl, jobs=jobs, setup=setup, progress=done(first), **common)
        if cache == "warm":
            again = [m for m, r in zip(todo, results_) if r is not None]
            ran = [c for c, r in zip(caches, results_) if r is not None]
            results_ = engine.execute(again, snap, catalog.impl, jobs=jobs, setup=lambda i, job: cache_setup(ran[i]),
                               progress=done("warm"), **common) + [None] * (len(todo) - len(again))
    left = sum(r is None for r in results_)
    if left:
        print(f"{left} run(s) left for lack of time (--total-s {total_s:g}): rerun the same command to do them",
              file=sys.stderr)
    return written


# ---------------------------------------------------------------- summary

def target_median_s(catalog: str) -> float:
    return TARGET_MEDIAN_S.get(catalog, DEFAULT_MEDIAN_S)


def summarize(records: list[dict], expected: dict[str, list[str]] | None = None) -> list[dict]:
    """Per (catalog, cache): the latest record of each run; median and max seconds to the first failure
    over the non-equivalent mutants (a survivor, an invalid run or a missing one counts as infinite:
    it fails the target), killed / total, the unmutated runs' verdict, the targets met, and the runs
    where an example raised but pytest passed (`failure_swallowed`).
    `expected`: catalog -> its non-equivalent mutant ids (missing ones then count as not run)."""
    latest: dict[tuple, dict] = {}
    for r in records:
        latest[record_key(r)] = r          # a later line wins
    groups: dict[tuple, list[dict]] = {}
    for r in latest.values():
        groups.setdefault((r["catalog"], r["cache"]), []).append(r)
    out = []
    for (name, cache), recs in sorted(groups.items()):
        unmutated = [r for r in recs if r["id"] in (BASELINE, FILL)]
        mutants = {}
        for r in recs:
            if r["id"] not in (BASELINE, FILL) and (r["id"] not in mutants or r["time"] >= mutants[r["id"]]["time"]):
                mutants[r["id"]] = r        # one per id: the latest (an edited mutant's new text)
        ids = list(expected.get(name, [])) if expected and name in expected else sorted(mutants)
        seconds = []
        for i in ids:
            r = mutants.get(i)
            ok = r is not None and r["status"] == "killed" and r["first_failure_s"] is not None
            seconds.append(r["first_failure_s"] if ok else float("inf"))
        killed = sum(s != float("inf") for s in seconds)
        measured = [s for i, s in zip(ids, seconds) if i in mutants]
        median = statistics.median(seconds) if seconds else None
        worst = max(seconds) if seconds else None
        passed = bool(unmutated) and all(r["status"] == "survived" for r in unmutated)
        # an example raised, yet pytest passed: the fuzz budget cut the shrinking and the failure was lost
        swallowed = sorted(r["id"] for r in recs if r["status"] != "killed" and r["first_failure_s"] is not None)
        tm = target_median_s(name)
        out.append({
            "catalog": name, "cache": cache, "mutants": len(ids), "killed": killed,
            "not_run": [i for i in ids if i not in mutants],
            "median_s": median, "max_s": worst,
            "median_run_s": statistics.median(measured) if measured else None, "unmutated_runs": len(unmutated), "unmutated_passed": passed,
            "target_median_s": tm, "target_max_s": TARGET_MAX_S,
            "meets_median": median is not None and median <= tm, "meets_max": worst is not None and worst <= TARGET_MAX_S,
            "all_killed": bool(ids) and killed == len(ids), "failure_swallowed": swallowed,
            "jobs": sorted({r.get("jobs") for r in recs if r.get("jobs")}),
        })
    return out


def _s(v) -> str:
    return "-" if v is None else ("inf" if v == float("inf") else f"{v:.1f}")


def markdown(summary: list[dict], records: list[dict]) -> str:
    lines = ["## Time to first failure", "",
             "Seconds from the command's start to the first failing example; a mutant not killed (or not run) "
             "counts as inf. The median over the mutants run so far is in brackets.", "",
             "| catalog | cache | killed / non-equivalent | median s | max s | unmutated | jobs | targets |",
             "|---|---|---|---|---|---|---|---|"]
    for s in summary:
        flags = [f"median {'ok' if s['meets_median'] else 'MISSED'} (<= {s['target_median_s']:g})",
                 f"max {'ok' if s['meets_max'] else 'MISSED'} (<= {s['target_max_s']:g})"]
        if not s["all_killed"]:
            flags.append("NOT ALL KILLED")
        if not s["unmutated_passed"]:
            flags.append("UNMUTATED FAILED OR NOT RUN")
        if s["not_run"]:
            flags.append(f"{len(s['not_run'])} not run")
        if s["failure_swallowed"]:
            flags.append(f"AN EXAMPLE FAILED BUT THE RUN PASSED: {', '.join(s['failure_swallowed'])}")
        lines.append(f"| {s['catalog']} | {s['cache']} | {s['killed']} / {s['mutants']} | {_s(s['median_s'])} ({_s(s['median_run_s'])}) | "
                     f"{_s(s['max_s'])} | {'passed' if s['unmutated_passed'] else 'FAILED'} ({s['unmutated_runs']} run(s)) "
                     f"| {','.join(map(str, s['jobs']))} | {'; '.join(flags)} |")
    lines += ["", "Phases: seconds from the command's start to pytest configured, collection done and the first "
                  "example started.", "",
              "| catalog | cache | id | status | s to first failure | phases | examples (test / all) | compiles | "
              "killed by | wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
    latest = {record_key(r): r for r in records}
    for r in sorted(latest.values(), key=lambda r: (r["catalog"], r["cache"], r["id"] not in (BASELINE, FILL), r["id"])):
        comp = ", ".join(f"{k} {v}" for k, v in sorted((r.get("compiles") or {}).items()))
        ex = "" if r["examples"] is None else f"{r['examples']} / {r['examples_run']}"
        ph = r.get("phases") or {}
        phases = " / ".join(_s(ph.get(k)) for k in PHASES) if ph else ""
        lines.append(f"| {r['catalog']} | {r['cache']} | {r['id']} | {r['status']} | {_s(r['first_failure_s'])} | "
                     f"{phases} | {ex} | {comp} | {(r['killed_by'] or '').replace('test_', '')} | {_s(r['wall_s'])} |")
    return "\n".join(lines) + "\n"


def expected_ids(names) -> dict[str, list[str]]:
    """Each known catalog's non-equivalent mutant ids (catalogs that no longer load are left out)."""
    out = {}
    for name in names:
        try:
            out[name] = [m.id for m in load_catalog(name).mutants if m.equivalent is None]
        except (ValueError, ImportError):
            pass
    return out


def summary_main(paths, md: Path | None = None) -> int:
    records = load_records(paths)
    if not records:
        print(f"--ttf-summary: no records in {', '.join(map(str, paths))}", file=sys.stderr)
        return 2
    summary = summarize(records, expected_ids({r["catalog"] for r in records}))
    text = markdown(summary, records)
    print(text)
    if md:
        md.write_text(text)
    ok = all(s["meets_median"] and s["meets_max"] and s["all_killed"] and s["unmutated_passed"] for s in summary)
    return 0 if ok else 1
