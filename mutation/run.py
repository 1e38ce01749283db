"""Run the property suite against every mutant of a catalog and report the mutation score.

    python -m mutation.run --catalog torch_ref [--only ID ...] [--budget-s 60] [--jobs 2]
                           [--json out.json] [--md out.md] [--matrix] [--patch DIFF]
                           [--isolation fork|process] [--list] [--check] [--keep]
    python -m mutation.run --catalog cutile --compile-only [--only ID ...] [--jobs 2] [--json F] [--md F]

For each mutant: copy the repository (tracked plus untracked-not-ignored files; no .git or caches) to a
fresh temporary directory, apply the mutant there, and run the users' own command

    python -m pytest tests/test_properties.py --impl <impl> --hypothesis-profile=mutant -x -q
           -p no:cacheprovider -p mutation.count_plugin

(a catalog's TESTS replaces the test file, tests/test_gradients.py for the backward catalogs, and its
PYTEST_ARGS come after the runner's own arguments)

in its own process group, killed when it runs past --budget-s. The outcome:

    killed             pytest exit 1 and a test failed in its call phase (the property that failed, the
                       examples it ran up to the failing one, the seconds the whole run took)
    survived           pytest exit 0: every property held
    survived (timeout) still running after --budget-s
    invalid            anything else (import or collection error, a fixture error, exit 2-5): counts
                       neither way, and means the mutant or the catalog is broken

score = killed / (killed + survived), equivalent mutants (declared in the catalog) left out. The
unmutated tree runs first as a baseline; if the suite fails there, nothing else means anything.
--matrix drops -x and records every property that kills each mutant (slower). --patch applies a
unified diff to the copied tree first (a proposed suite change, tried without touching the tree).
Exit status: 0 all killed, 1 a survivor / invalid / wrongly-equivalent mutant, 2 the baseline fails.

--compile-only (cutile, CPU): no suite run; in each mutated copy, compile for sm_90 (through tileiras)
the covering-set units of the kernel(s) whose source the mutant changes, or just import the package
for a host-side mutant: `compiles` (a candidate for the GPU run) or `invalid (does not compile)`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mutation import peer_copy
from mutation.catalog import Catalog, Mutant, check_catalog, load_catalog
from mutation.engine import (  # noqa: F401 (re-exported: the runner's public names)
    HEAVY_MODULES,
    Outcome,
    PEER_MODULES,
    ROOT,
    SKIP_PARTS,
    TEST_FILE,
    _Job,
    _Running,
    _child_env,
    _classify,
    _cleanup,
    _finish,
    _fork_child,
    _outside_repo,
    _prepare,
    _tail,
    _test_name,
    apply_patch,
    catalog_pytest_args,
    code_root,
    execute,
    pytest_args,
    pytest_command,
    snapshot,
    source_files,
    warm_up,
)


# ---------------------------------------------------------------- one run

def run_one(mutant: Mutant | None, impl: str, *, root: Path = ROOT, budget_s: float = 60.0, matrix: bool = False,
            isolation: str = "fork", keep: bool = False, peer: str | None = None, tests: str = TEST_FILE,
            extra=()) -> Outcome:
    """Run the suite (the test file `tests`, with `extra` arguments) once on a fresh copy of `root` with
    `mutant` applied (None: the unmutated tree)."""
    with tempfile.TemporaryDirectory(prefix="ssdcheck-snapshot-") as tmp:
        snap = snapshot(root, Path(tmp) / "repo")
        peer_snap = peer_copy.unpack(peer, Path(tmp) / "peer") if peer else None
        args = pytest_args(impl, matrix, None, peer_copy.pytest_plugins(peer), tests, extra)
        return execute([mutant], snap, impl, budget_s=budget_s, jobs=1, matrix=matrix, isolation=isolation,
                       keep=keep, peer=peer, peer_snap=peer_snap, args=args)[0]


# ---------------------------------------------------------------- a catalog

@dataclass
class Report:
    catalog: str
    impl: str
    outcomes: list
    baseline: Outcome | None
    seconds: float
    jobs: int
    budget_s: float
    matrix: bool
    isolation: str = "fork"
    patches: tuple = ()
    seed: int | None = None
    seeded: list = field(default_factory=list)   # --seeds: the reports of the seeded re-runs
    tests: str = TEST_FILE                       # the catalog's test file (TESTS)
    extra: tuple = ()                            # the catalog's PYTEST_ARGS

    def counted(self) -> list:
        return [o for o in self.outcomes if o.equivalent is None and o.status != "invalid"]

    @property
    def killed(self) -> list:
        return [o for o in self.outcomes if o.equivalent is None and o.killed]

    @property
    def survivors(self) -> list:
        return [o for o in self.outcomes if o.equivalent is None and o.survived]

    @property
    def invalid(self) -> list:
        return [o for o in self.outcomes if o.status == "invalid"]

    @property
    def equivalent(self) -> list:
        return [o for o in self.outcomes if o.equivalent is not None]

    @property
    def wrongly_equivalent(self) -> list:
        """Declared equivalent, yet a property failed: the written argument is wrong (or the suite is flaky)."""
        return [o for o in self.outcomes if o.equivalent is not None and o.killed]

    @property
    def score(self) -> float | None:
        n = len(self.counted())
        return len(self.killed) / n if n else None

    def summary(self) -> dict:
        k = self.killed
        return {
            "catalog": self.catalog, "impl": self.impl, "mutants": len(self.outcomes),
            "killed": len(k), "survived": len(self.survivors), "invalid": len(self.invalid),
            "equivalent": len(self.equivalent), "wrongly_equivalent": [o.id for o in self.wrongly_equivalent],
            "score": self.score,
            "median_examples_to_kill": statistics.median(o.examples for o in k) if k else None,
            "median_seconds_to_kill": statistics.median(o.seconds for o in k) if k else None,
            "total_seconds": round(self.seconds, 1), "jobs": self.jobs, "budget_s": self.budget_s,
            "matrix": self.matrix, "isolation": self.isolation, "patches": [str(p) for p in self.patches],
            "seed": self.seed,
            "env": {k: v for k, v in os.environ.items() if k.startswith("SSDCHECK_") and "MUTATION" not in k},
            "command": "python -m pytest " + " ".join(pytest_args(self.impl, self.matrix, tests=self.tests,
                                                                  extra=self.extra)),
        }

    def to_json(self) -> dict:
        out = {"summary": self.summary(), "baseline": asdict(self.baseline) if self.baseline else None,
               "mutants": [asdict(o) for o in self.outcomes]}
        if self.seeded:
            out["seeded"] = self.seeded
        return out

    def kills_the_baseline_did_not_cover(self) -> list[str] | None:
        """For a baseline cut by its budget: the killed mutants whose failing (test, example) the
        unmutated run had not passed ([] when it passed every one), or None when the baseline failed a
        test (then nothing stands). The profiles are derandomized, so example k of a test is the same
        problem in every run: a baseline that finished the test, or was past example k in it when cut,
        passed what the mutant failed."""
        seen = self.baseline.tests if self.baseline else {}
        if any(t["outcome"] in ("failed", "error") for t in seen.values()):
            return None
        def covered(o):
            t = seen.get(o.killed_by)
            return t is not None and (t["outcome"] == "passed" or (o.examples or 0) < t["examples"])
        return [o.id for o in self.outcomes if o.killed and not covered(o)]

    def markdown(self) -> str:
        s = self.summary()
        score = "n/a" if s["score"] is None else f"{100 * s['score']:.1f}%"
        lines = [f"## Mutation score: {self.catalog} ({self.impl})", "",
                 f"**{score}** = {s['killed']} killed / {s['killed'] + s['survived']} non-equivalent valid mutants "
                 f"({s['survived']} survived, {s['invalid']} invalid, {s['equivalent']} equivalent). "
                 f"Median examples to kill: {s['median_examples_to_kill']}; median seconds to kill: "
                 f"{s['median_seconds_to_kill']}. Total {s['total_seconds']} s with {self.jobs} jobs.", "",
                 f"Command per mutant: `{s['command']}` ({self.isolation} isolation)"
                 + (f"; suite patched with {', '.join(s['patches'])}" if self.patches else ""), "",
                 "| id | category | status | killed by | examples | seconds | models |",
                 "|---|---|---|---|---|---|---|"]
        for o in self.outcomes:
            status = "equivalent" if o.equivalent is not None and not o.killed else o.status
            if o.equivalent is not None and o.killed:
                status = "KILLED (declared equivalent!)"
            by = ", ".join(o.killers) if self.matrix and o.killers else (o.killed_by or "")
            by = by.replace("test_", "")
            lines.append(f"| {o.id} | {o.category} | {status} | {by} | {o.examples if o.examples is not None else ''} "
                         f"| {o.seconds:.1f} | {o.description} |")
        notes = [o for o in self.outcomes if o.equivalent is not None or o.status == "invalid" or o.survived
                 or (o.killed and o.error and not o.error.startswith("AssertionError"))]
        if notes:
            lines += ["", "Notes:"]
            for o in notes:
                why = o.equivalent if o.equivalent is not None else o.error or "no property failed"
                status = "equivalent" if o.equivalent is not None else (
                    "killed by a crash, not a property's verdict" if o.killed else o.status)
                lines.append(f"- `{o.id}` ({status}): {why}")
        return "\n".join(lines) + "\n"


def run_catalog(catalog: Catalog, *, only=None, budget_s: float = 60.0, jobs: int = 2, matrix: bool = False,
                root: Path = ROOT, baseline: bool = True, include_equivalent: bool = True,
                isolation: str = "fork", patches=(), seed: int | None = None, progress=None,
                baseline_budget_s: float | None = None) -> Report:
    """Run every (or each `only`) mutant of `catalog`; `jobs` pytest processes at a time. `patches`
    (unified diffs) are applied to the snapshot first: a proposed suite change, tried without
    touching the working tree."""
    mutants = [catalog.by_id(i) for i in only] if only else list(catalog.mutants)
    if not include_equivalent:
        mutants = [m for m in mutants if m.equivalent is None]
    start = time.monotonic()
    todo: list = ([None] if baseline else []) + mutants
    with tempfile.TemporaryDirectory(prefix="ssdcheck-snapshot-") as tmp:
        snap = snapshot(root, Path(tmp) / "repo")
        for patch in patches:
            apply_patch(snap, patch)
        peer_snap = code_root(catalog, Path(tmp)) if catalog.peer else None
        problems = check_catalog(catalog, peer_snap or snap)
        results = execute(todo, snap, catalog.impl, problems=problems, budget_s=budget_s, jobs=jobs,
                          matrix=matrix, isolation=isolation, seed=seed, progress=progress,
                          baseline_budget_s=baseline_budget_s, peer=catalog.peer, peer_snap=peer_snap,
                          args=catalog_pytest_args(catalog, matrix, seed))
    base = results.pop(0) if baseline else None
    return Report(catalog=catalog.name, impl=catalog.impl, outcomes=results, baseline=base,
                  seconds=time.monotonic() - start, jobs=jobs, budget_s=budget_s, matrix=matrix,
                  isolation=isolation, patches=tuple(patches), seed=seed, tests=catalog.tests,
                  extra=catalog.pytest_args)


# ---------------------------------------------------------------- --compile-only (cuTile, CPU)

COMPILE_ARCH = "sm_90"
KERNELS_FILE = "kernels/cutile/kernels.py"
# Run inside the mutated copy (cwd and PYTHONPATH), so the mutated source is what imports and compiles:
# argv = result file, kernel names. Compiles that kernel's covering-set units, stops at the first failure.
_COMPILE_CHILD = """
import json, sys
import kernels.cutile
from kernels.cutile import compile_matrix as cm
res = []
for u in cm.covering_set():
    if u.kernel in sys.argv[2:]:
        res.append(cm.compile_unit(u, %r))
        if not res[-1][1]:
            break
open(sys.argv[1], "w").write(json.dumps(res))
""" % COMPILE_ARCH


# CPython 3.11's parser is not safe across threads ("SystemError: AST constructor recursion depth
# mismatch", seen in CI from compile_catalog's worker threads): one parse at a time.
_PARSE_LOCK = threading.Lock()


def touched_kernels(mutant: Mutant | None, root: Path) -> list[str]:
    """The cuTile kernels whose code the mutant changes (every kernel for the baseline or module-level
    code; none for a mutant outside kernels.py): the @ct.kernel holding the snippet, or every kernel
    that calls the helper holding it, directly or through other helpers."""
    import ast
    src = (root / KERNELS_FILE).read_text()
    with _PARSE_LOCK:
        funcs = [n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)]
    kernels = {f.name: f for f in funcs if f.name.endswith("_kernel")}
    every = [k.removesuffix("_kernel") for k in kernels]
    if mutant is None:
        return every
    if mutant.file != KERNELS_FILE:
        return []
    first = src[:src.index(mutant.original)].count("\n") + 1
    last = first + mutant.original.count("\n")
    hit = [f for f in funcs if f.lineno <= last and first <= f.end_lineno]
    if not hit:
        return every
    calls = {f.name: {n.id for n in ast.walk(f) if isinstance(n, ast.Name)} for f in funcs}

    def reached(name: str) -> set[str]:   # the module's functions `name` runs, itself included
        seen, todo = {name}, [name]
        while todo:
            for callee in calls.get(todo.pop(), set()) & calls.keys() - seen:
                seen.add(callee)
                todo.append(callee)
        return seen

    hit_names = {f.name for f in hit}
    out = {name.removesuffix("_kernel") for name in kernels if reached(name) & hit_names}
    return [k for k in every if k in out] or every


def _compile_one(mutant: Mutant | None, snap: Path, problems: list[str], timeout_s: float) -> Outcome:
    job = _prepare(mutant, snap, problems)
    out = job.outcome
    try:
        if out.error:
            return out
        tree, res = job.tmp / "repo", job.tmp / "compile.json"
        kernels = touched_kernels(mutant, snap)
        env = _child_env(tree, job.tmp / "report.json", 1)
        env["CUDA_TILE_CACHE_DIR"] = "off"
        t0 = time.monotonic()
        with open(job.tmp / "compile.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-c", _COMPILE_CHILD, str(res), *kernels], cwd=tree, env=env,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                out.returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seconds = round(time.monotonic() - t0, 2)
        units = json.loads(res.read_text()) if res.is_file() else None
        if units is None:
            text = (job.tmp / "compile.log").read_text(errors="replace")
            why = f"timed out after {timeout_s:g} s" if out.returncode is None else (_tail(text, 1) or "no output")
            out.status, out.error = "invalid (does not compile)", f"import or compile run failed: {why}"
            return out
        out.compiled = [name for name, *_ in units]
        bad = [(name, err) for name, ok, _, err in units if not ok]
        if bad:
            first = next((ln.strip() for ln in bad[0][1].splitlines() if ln.strip()), "no message")
            out.status, out.error = "invalid (does not compile)", f"{bad[0][0]}: {first[:400]}"
        else:
            out.status = "compiles"
        return out
    finally:
        shutil.rmtree(job.tmp, ignore_errors=True)


def compile_catalog(catalog: Catalog, *, only=None, jobs: int = 2, root: Path = ROOT, baseline: bool = True,
                    timeout_s: float = 900.0, progress=None) -> tuple[Outcome | None, list[Outcome], float]:
    """--compile-only: compile every (or each `only`) mutant's touched kernels on the CPU, `jobs` copies
    at a time; the unmutated tree (every kernel's covering set) first. -> (baseline, outcomes, seconds)."""
    from concurrent.futures import ThreadPoolExecutor
    mutants = [catalog.by_id(i) for i in only] if only else list(catalog.mutants)
    todo = ([None] if baseline else []) + mutants
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ssdcheck-snapshot-") as tmp:
        snap = snapshot(root, Path(tmp) / "repo")
        problems = check_catalog(catalog, snap)

        def one(m):
            o = _compile_one(m, snap, problems, timeout_s)
            if progress:
                progress(o)
            return o
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            results = list(ex.map(one, todo))
    base = results.pop(0) if baseline else None
    return base, results, time.monotonic() - start


def compile_markdown(catalog: Catalog, base: Outcome | None, outcomes: list[Outcome], seconds: float,
                     jobs: int) -> str:
    ok = sum(o.status == "compiles" for o in outcomes)
    lines = [f"## Compile check: {catalog.name} ({COMPILE_ARCH}, tileiras, CPU)", "",
             f"**{ok} compile / {len(outcomes) - ok} invalid** of {len(outcomes)} mutants. Total {seconds:.0f} s "
             f"with {jobs} jobs." + (f" Baseline (unmutated, every kernel's covering set): {base.status}"
                                     f"{': ' + base.error if base.error else ''} ({base.seconds:.0f} s)." if base else ""),
             "", "Per mutant: the covering-set units of the kernel(s) whose code it changes; a host-side "
             "(launcher.py) mutant only imports the package.", "",
             "| id | file | compiled | verdict | seconds | first error line |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        m = catalog.by_id(o.id)
        units = "<br>".join(u.replace("|", "\\|") for u in o.compiled) if o.compiled else "(import only)"
        err = (o.error or "").replace("|", "\\|")
        lines.append(f"| {o.id} | {Path(m.file).name} | {units} | {o.status} | {o.seconds:.1f} | {err} |")
    return "\n".join(lines) + "\n"


def _progress(o: Outcome) -> None:
    extra = f" by {o.killed_by} after {o.examples} example(s)" if o.killed else (f": {o.error}" if o.error else "")
    print(f"  {o.id:<40} {o.status}{extra} [{o.seconds:.1f} s]", file=sys.stderr, flush=True)


def _ttf_progress(rec: dict) -> None:
    at = "" if rec["first_failure_s"] is None else f" first failure at {rec['first_failure_s']:.1f} s"
    by = f" by {rec['killed_by']} after {rec['examples']} example(s)" if rec["killed_by"] else ""
    print(f"  {rec['id']:<40} {rec['status']}{by}{at} [{rec['wall_s']:.1f} s, compiles {rec['compiles']}]",
          file=sys.stderr, flush=True)


def seeded_rates(catalog: Catalog, report: Report, args) -> str:
    """Re-run the catalog with seeds 1..K and return a markdown table of kill rates (a kill that
    only the derandomized draws find is fragile: a strategy edit can turn it into a survivor)."""
    runs = []
    for seed in range(1, args.seeds + 1):
        print(f"seed {seed}/{args.seeds}", file=sys.stderr)
        runs.append(run_catalog(catalog, only=args.only, budget_s=args.budget_s, jobs=args.jobs,
                                baseline=True, isolation=args.isolation, patches=args.patch, seed=seed,
                                include_equivalent=False))
    report.seeded = [r.to_json() for r in runs]
    lines = ["", f"### Kill rate over {args.seeds} random seeds (12 examples per property each)", "",
             "| id | derandomized | killed in | killers |", "|---|---|---|---|"]
    for o in report.outcomes:
        if o.equivalent is not None:
            continue
        got = [next(x for x in r.outcomes if x.id == o.id) for r in runs]
        k = sum(x.killed for x in got)
        killers = sorted({x.killed_by.replace("test_", "").replace("[" + catalog.impl + "]", "")
                          for x in got if x.killed})
        lines.append(f"| {o.id} | {o.status} | {k}/{len(got)} | {', '.join(killers)} |")
    bad = [f"seed {i + 1}: {r.baseline.status} ({r.baseline.error})" for i, r in enumerate(runs)
           if r.baseline and r.baseline.status != "survived"]
    if bad:
        lines += ["", "Baseline failures under random seeds (a real failure or a flaky property): " + "; ".join(bad)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mutation.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--catalog", default="torch_ref", help="catalog name (mutation/catalog_<name>.py)")
    ap.add_argument("--only", action="append", metavar="ID", help="run only this mutant (repeatable)")
    ap.add_argument("--budget-s", type=float, help="time budget per mutant, seconds (default 60; 900 with "
                    "--compile-only)")
    ap.add_argument("--baseline-budget-s", type=float, help="time budget of the unmutated baseline run, which "
                    "runs every property to its end (default: 4 x --budget-s)")
    ap.add_argument("--jobs", type=int, help="mutants run in parallel (default 2; --time-to-failure: one per CPU "
                    "core, since compiles are CPU work)")
    ap.add_argument("--json", type=Path, help="write the full report as JSON here")
    ap.add_argument("--md", type=Path, help="write the markdown table here (it is always printed)")
    ap.add_argument("--matrix", action="store_true", help="no -x: record every property that kills each mutant")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated baseline run")
    ap.add_argument("--list", action="store_true", help="list the catalog and exit")
    ap.add_argument("--check", action="store_true", help="check that every snippet applies exactly once, and exit")
    ap.add_argument("--keep", action="store_true", help="keep the temporary tree of a single --only mutant")
    ap.add_argument("--patch", action="append", type=Path, default=[], metavar="DIFF",
                    help="apply this unified diff to the copied tree first (try a proposed suite change)")
    ap.add_argument("--seeds", type=int, metavar="K",
                    help="robustness: run the catalog K more times with 12 random (seeded 1..K) examples per "
                         "property instead of the derandomized ones, and report each mutant's kill rate")
    ap.add_argument("--isolation", choices=("fork", "process"),
                    help="fork: one warm interpreter forks a child per run (default); process: a fresh "
                         "`python -m pytest` per run (default with --time-to-failure: its seconds include the start)")
    ap.add_argument("--compile-only", action="store_true",
                    help="cutile on the CPU: only compile each mutant's kernels for sm_90 (no suite run)")
    t = ap.add_argument_group("time to first failure (mutation/ttf.py)")
    t.add_argument("--time-to-failure", action="store_true",
                   help="time each mutant's first failure under the users' fuzz command; append to --results")
    t.add_argument("--cache", choices=("empty", "cold", "warm"), default="cold",
                   help="empty: empty compile caches per run; cold (default): each run starts from the caches the "
                        "unmutated implementation filled; warm: cold, then each run again from the cache it left")
    t.add_argument("--shard", default="1/1", metavar="I/N", help="run shard I of N of the catalog (default 1/1)")
    t.add_argument("--results", type=Path, default=Path("ttf.jsonl"), metavar="FILE.jsonl",
                   help="records are appended here; runs already in it are skipped (default ttf.jsonl)")
    t.add_argument("--fuzz-seconds", type=float, default=150.0, help="the command's --ssd-fuzz-seconds (default 150)")
    t.add_argument("--total-s", type=float, default=560.0,
                   help="start no run that could not end within this many seconds of the start (default 560)")
    t.add_argument("--fill-cache", type=Path, metavar="DIR",
                   help="cold/warm: share the unmutated fill with other catalogs of the implementation through DIR "
                        "(made once, under a lock; default: a fill of this command's own)")
    t.add_argument("--fill-jobs", type=int, metavar="N",
                   help="xdist workers of the fill (default: one per CPU core)")
    t.add_argument("--fill-only", action="store_true",
                   help="cold/warm: make the fill (into --fill-cache) and stop, so that the mutants of every "
                        "catalog later start without a fill compiling beside them")
    t.add_argument("--profile", default="gpu", help="the command's --hypothesis-profile (default gpu)")
    t.add_argument("--pytest-args", default="", metavar="ARGS", help="more arguments for the command (one string)")
    t.add_argument("--ttf-summary", nargs="+", type=Path, metavar="FILE.jsonl",
                   help="summarize time-to-failure records per catalog and cache (with --md: also write it)")
    args = ap.parse_args(argv)
    if args.ttf_summary:
        from mutation import ttf
        return ttf.summary_main(args.ttf_summary, args.md)
    if args.time_to_failure and (args.matrix or args.compile_only or args.seeds or args.patch or args.keep):
        ap.error("--time-to-failure runs the users' command as is: no --matrix, --compile-only, --seeds, --patch, --keep")
    if args.jobs is None:
        args.jobs = (os.cpu_count() or 1) if args.time_to_failure else 2
    if args.jobs < 1:
        ap.error(f"--jobs: expected a positive number, got {args.jobs}")
    if args.isolation is None:
        args.isolation = "process" if args.time_to_failure or not hasattr(os, "fork") else "fork"
    if args.budget_s is None:
        args.budget_s = 900.0 if args.compile_only else (args.fuzz_seconds + 60.0 if args.time_to_failure else 60.0)

    catalog = load_catalog(args.catalog)
    # a catalog's environment (e.g. a config override that puts the code it mutates on the path the
    # suite runs) reaches the baseline and every mutant through _child_env's copy of os.environ
    os.environ.update(dict(catalog.env))
    if args.list:
        for m in catalog.mutants:
            eq = " [equivalent]" if m.equivalent else ""
            print(f"{m.id:<40} {m.category:<10} {m.description}{eq}")
        return 0
    if args.compile_only and catalog.peer:
        ap.error(f"--compile-only compiles this repository's cuTile kernels; catalog {catalog.name} mutates {catalog.peer}")
    try:
        with tempfile.TemporaryDirectory(prefix="ssdcheck-peer-") as tmp:
            problems = check_catalog(catalog, code_root(catalog, Path(tmp)))
    except peer_copy.PeerSourceMissing as e:
        print(f"--catalog {catalog.name}: needs the pristine {catalog.peer} package: {e}", file=sys.stderr)
        return 2
    if args.check:
        print("\n".join(problems) or f"{catalog.name}: {len(catalog.mutants)} mutants, every snippet applies once")
        return 1 if problems else 0
    if args.keep:
        if not args.only or len(args.only) != 1:
            ap.error("--keep needs exactly one --only ID")
        o = run_one(catalog.by_id(args.only[0]), catalog.impl, budget_s=args.budget_s, matrix=args.matrix,
                    isolation=args.isolation, keep=True, peer=catalog.peer, tests=catalog.tests,
                    extra=catalog.pytest_args)
        _progress(o)
        return 0
    for p in problems:
        print(f"catalog problem: {p}", file=sys.stderr)
    if args.time_to_failure:
        from mutation import ttf
        try:
            shard = ttf.parse_shard(args.shard)
        except ValueError as e:
            ap.error(str(e))
        if args.fill_jobs is not None and args.fill_jobs < 1:
            ap.error(f"--fill-jobs: expected a positive number, got {args.fill_jobs}")
        if args.only:
            catalog = dataclasses.replace(catalog, mutants=tuple(catalog.by_id(i) for i in args.only))
        if args.fill_only and args.cache == "empty":
            ap.error("--fill-only: the empty cache has no fill (expected --cache cold or warm)")
        ttf.run(catalog, cache=args.cache, shard=shard, jobs=args.jobs, fuzz_s=args.fuzz_seconds,
                budget_s=args.budget_s, total_s=args.total_s, results=args.results, profile=args.profile,
                extra=args.pytest_args, isolation=args.isolation, progress=_ttf_progress,
                fill_cache=args.fill_cache, fill_jobs=args.fill_jobs, fill_only=args.fill_only)
        return 0
    if args.compile_only:
        print(f"{catalog.name}: compiling {len(args.only or catalog.mutants)} mutant(s) for {COMPILE_ARCH}, "
              f"{args.jobs} job(s)", file=sys.stderr)
        base, outcomes, secs = compile_catalog(catalog, only=args.only, jobs=args.jobs, timeout_s=args.budget_s,
                                               baseline=not args.no_baseline, progress=_progress)
        md = compile_markdown(catalog, base, outcomes, secs, args.jobs)
        print(md)
        if args.md:
            args.md.write_text(md)
        if args.json:
            args.json.write_text(json.dumps({"baseline": asdict(base) if base else None, "seconds": round(secs, 1),
                                             "mutants": [asdict(o) for o in outcomes]}, indent=1))
        if base is not None and base.status != "compiles":
            print(f"BASELINE DOES NOT COMPILE: {base.error}", file=sys.stderr)
            return 2
        return 0 if all(o.status == "compiles" for o in outcomes) else 1
    print(f"{catalog.name}: {len(args.only or catalog.mutants)} mutant(s) against {catalog.impl}, "
          f"{args.jobs} job(s), {args.budget_s:g} s each, isolation {args.isolation}", file=sys.stderr)
    report = run_catalog(catalog, only=args.only, budget_s=args.budget_s, jobs=args.jobs, matrix=args.matrix,
                         baseline=not args.no_baseline, isolation=args.isolation, patches=args.patch,
                         progress=_progress, baseline_budget_s=args.baseline_budget_s or 4 * args.budget_s)
    md = report.markdown()
    if args.seeds:
        md += seeded_rates(catalog, report, args)
    print(md)
    if args.md:
        args.md.write_text(md)
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=1))
    b = report.baseline
    if b is not None and b.status.endswith("(timeout)") and report.kills_the_baseline_did_not_cover() == []:
        passed = ", ".join(f"{n} ({t['examples']})" for n, t in b.tests.items() if t["outcome"] == "passed")
        print(f"baseline cut by its budget ({b.error}) after {b.examples_total} examples without a failure; it "
              f"passed every test example a mutant failed at (tests passed, with examples: {passed or 'none'}), so "
              f"the kills stand", file=sys.stderr)
    elif b is not None and b.status != "survived":
        if b.status.endswith("(timeout)"):
            uncovered = report.kills_the_baseline_did_not_cover()
            print(f"BASELINE DID NOT FINISH ({b.error}): the unmutated suite ran past its budget (raise "
                  f"--baseline-budget-s) before passing the examples these mutants failed at: "
                  f"{', '.join(uncovered) if uncovered else 'a baseline test failed'}; without a passing baseline "
                  f"these results mean nothing", file=sys.stderr)
        else:
            print(f"BASELINE FAILS ({b.status}: {b.error}): the suite fails on the unmutated source, so these "
                  f"results mean nothing", file=sys.stderr)
        return 2
    for o in report.wrongly_equivalent:
        print(f"{o.id} is declared equivalent but {o.killed_by} failed on it: {o.error}", file=sys.stderr)
    return 1 if report.survivors or report.invalid or report.wrongly_equivalent else 0


if __name__ == "__main__":
    sys.exit(main())
