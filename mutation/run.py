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
import importlib
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
from mutation.catalog import DEFAULT_TESTS, Catalog, Mutant, check_catalog, load_catalog

ROOT = Path(__file__).resolve().parent.parent
TEST_FILE = DEFAULT_TESTS   # a catalog without TESTS: the forward property suite
SKIP_PARTS = {".git", ".hypothesis", ".pytest_cache", "__pycache__", ".ssdcheck-cache"}


@dataclass
class Outcome:
    id: str
    status: str                  # killed | survived | survived (timeout) | invalid | equivalent | baseline
    category: str = ""
    description: str = ""
    killed_by: str | None = None          # test function name of the first failing test
    killers: list = field(default_factory=list)   # with --matrix: every failing test
    examples: int | None = None           # examples of the killing test up to the failing one
    examples_total: int | None = None     # examples over all tests the run executed
    seconds: float = 0.0                  # wall time of the pytest process
    error: str | None = None              # the failure (or why the mutant is invalid)
    problem: str | None = None            # SSDProblem(...) of the killing example
    returncode: int | None = None
    equivalent: str | None = None
    compiled: list = field(default_factory=list)  # --compile-only: the units compiled (none: host side)
    first_failure_s: float | None = None  # seconds from the command's start to the first failing example
    examples_run: int | None = None       # examples over all tests up to and including that one
    compiles: dict = field(default_factory=dict)  # compiles up to that example (count_plugin: cutile, triton)
    tests: dict = field(default_factory=dict)     # test name -> {"outcome", "examples"} of every test that started
    phases: dict = field(default_factory=dict)    # count_plugin's phases, in seconds from the command's start

    @property
    def killed(self) -> bool:
        return self.status == "killed"

    @property
    def survived(self) -> bool:
        return self.status.startswith("survived")


# ---------------------------------------------------------------- one run

def source_files(root: Path) -> list[str]:
    """Tracked and untracked-not-ignored files that exist (git's view of the working tree)."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode()
    files = sorted({f for f in out.split("\0") if f})
    return [f for f in files if not SKIP_PARTS.intersection(Path(f).parts) and (root / f).is_file()]


def snapshot(root: Path, dest: Path) -> Path:
    """Copy git's view of `root` to `dest` once, so every mutant starts from the same tree even while
    others edit the working tree (a file that vanishes between listing and copying is skipped)."""
    for f in source_files(root):
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copy2(root / f, target)
        except FileNotFoundError:
            pass
    return dest


def apply_patch(tree: Path, patch: Path) -> None:
    """Apply a unified diff (relative to the repository root) to a snapshot with `git apply`."""
    proc = subprocess.run(["git", "apply", "--whitespace=nowarn", str(Path(patch).resolve())], cwd=tree,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"--patch {patch}: does not apply: {proc.stderr.strip()}")


def pytest_args(impl: str, matrix: bool, seed: int | None = None, plugins=(), tests: str = TEST_FILE,
                extra=()) -> list[str]:
    """The users' own command (after `python -m pytest`) on the catalog's test file `tests`, plus the
    counting plugin (and a peer's, see peer_copy.pytest_plugins) and the catalog's `extra` arguments;
    with `seed`, the same 12 examples per property drawn at random from that seed instead of derandomized."""
    args = [tests, "--impl", impl, "--hypothesis-profile=mutant", "-q", "-p", "no:cacheprovider",
            "-p", "mutation.count_plugin", *plugins, *extra]
    if seed is not None:
        args.append(f"--hypothesis-seed={seed}")
    return args if matrix else args + ["-x"]


def catalog_pytest_args(catalog: Catalog, matrix: bool, seed: int | None = None) -> list[str]:
    """pytest_args for a catalog: its impl, test file (TESTS), extra arguments and peer plugin."""
    return pytest_args(catalog.impl, matrix, seed, peer_copy.pytest_plugins(catalog.peer), catalog.tests,
                       catalog.pytest_args)


def pytest_command(impl: str, matrix: bool) -> list[str]:
    return [sys.executable, "-m", "pytest", *pytest_args(impl, matrix)]


def _outside_repo(entry: str) -> bool:
    return entry not in ("", ".") and entry != str(ROOT) and not entry.startswith(str(ROOT) + os.sep)


def _child_env(tree: Path, report: Path, threads: int, seed: int | None = None, first=(), extra=None) -> dict:
    """Environment of a run: the parent's, minus anything that could point pytest or Python elsewhere.
    PYTHONPATH: `first` (a peer copy), the tree, then the parent's entries outside this repository
    (where a GPU host's setup puts cuda-tile and the peers). A run may write bytecode whatever the
    host's PYTHONDONTWRITEBYTECODE: pytest then caches its rewritten copy of the plugins' packages
    (hypothesis' 74 modules, a pytest11 entry point) instead of rewriting it at every start, 1.4 s of
    5.6 s to a torch-ref mutant's first failure on a 2-core host."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "HYPOTHESIS_", "SSDCHECK_MUTATION_"))
           and k not in ("PYTHONPATH", "CI", "PYTHONDONTWRITEBYTECODE")}
    inherited = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if _outside_repo(e)]
    env.update(PYTHONPATH=os.pathsep.join([*first, str(tree), *inherited]),
               SSDCHECK_MUTATION_REPORT=str(report),
               OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    env.update(extra or {})
    if seed is not None:
        env["SSDCHECK_MUTATION_SEED"] = str(seed)
    return env


def _tail(text: str, n: int = 6) -> str:
    return " | ".join(ln for ln in text.strip().splitlines()[-n:] if ln.strip())[:600]


# Isolation. "process": every run is a fresh `python -m pytest ...` (the exact user command).
# "fork": the runner imports torch, hypothesis and pytest once, then forks one child per run, which
# drops every module of this repository, enters the mutated tree and calls pytest.main with the same
# arguments. Same command, same process-per-mutant isolation, without paying the imports each time.
HEAVY_MODULES = ("numpy", "torch", "torch.nn.functional", "hypothesis", "hypothesis.strategies", "pytest",
                 "_hypothesis_pytestplugin")


def warm_up(threads: int) -> None:
    """Import the heavy third-party modules once, before forking (no torch op runs here, so no thread
    pool exists yet; OpenBLAS is kept to `threads` so it starts no worker threads either)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    for name in HEAVY_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


# Peer packages a forked child must import afresh from its own copy.
PEER_MODULES = tuple(peer_copy.PACKAGES.values())


def _fork_child(tree: Path, env: dict, args: list[str], log: Path, threads: int, first=()) -> None:
    """In the forked child: become our own process group, enter `tree`, run pytest, exit with its status.
    `first`: sys.path entries ahead of the tree (a peer copy)."""
    code = 99
    try:
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(tree)
        os.environ.clear()
        os.environ.update(env)
        sys.dont_write_bytecode = False     # as in a new process (_child_env)
        root = str(ROOT)
        for name, mod in list(sys.modules.items()):
            f = getattr(mod, "__file__", None) or ""
            if (name == "mutation" or name.startswith("mutation.") or name == "conftest" or f.startswith(root + os.sep)
                    or name.partition(".")[0] in PEER_MODULES):
                del sys.modules[name]
        sys.path[:] = [*first, str(tree)] + [p for p in sys.path if _outside_repo(p) and p not in first]
        importlib.invalidate_caches()
        import torch
        torch.set_num_threads(threads)
        import pytest
        code = int(pytest.main(args))
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class _Running:
    """One pytest run in flight, in its own process group."""

    def __init__(self, tree: Path, env: dict, args: list[str], log: Path, threads: int, isolation: str,
                 first=()):
        self.start = time.monotonic()
        self.start_epoch = time.time()   # the command's start, on the clock count_plugin stamps with
        self.returncode = None
        if isolation == "fork":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _fork_child(tree, env, args, log, threads, first)
            self.pid, self.proc = pid, None
        else:
            with open(log, "wb") as f:
                self.proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=tree, env=env, stdout=f,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            self.pid = self.proc.pid

    def poll(self):
        if self.returncode is None:
            if self.proc is not None:
                self.returncode = self.proc.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:     # a forked child killed before its setsid(): no group yet
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while self.poll() is None:
            time.sleep(0.01)


@dataclass
class _Job:
    mutant: Mutant | None
    outcome: Outcome
    tmp: Path
    running: _Running | None = None
    peer_root: Path | None = None      # a peer catalog: the copy of the peer package (mutated here)

    @property
    def tree(self) -> Path:
        return self.tmp / "repo"


def _prepare(mutant: Mutant | None, snap: Path, problems: list[str], peer_snap: Path | None = None) -> _Job:
    """A fresh copy of the snapshot (and of the peer package's, for a peer catalog) with the mutant
    applied; outcome already 'invalid' if it cannot be."""
    mid = mutant.id if mutant else "(baseline)"
    out = Outcome(id=mid, status="invalid", category=mutant.category if mutant else "",
                  description=mutant.description if mutant else "the unmutated source",
                  equivalent=mutant.equivalent if mutant else None)
    tmp = Path(tempfile.mkdtemp(prefix=f"ssdcheck-mutant-{mid.strip('()')}-"))
    mine = [p for p in problems if mutant is not None and p.split(":", 2)[1] == mutant.id]
    if mine:
        out.error = "; ".join(mine)
        return _Job(mutant, out, tmp)
    shutil.copytree(snap, tmp / "repo")
    peer_root = None
    if peer_snap is not None:
        peer_root = tmp / "peer"
        shutil.copytree(peer_snap, peer_root)
    if mutant is not None:
        try:
            mutant.apply_to_tree(peer_root or tmp / "repo")
        except (ValueError, OSError) as e:
            out.error = str(e).splitlines()[0]
    return _Job(mutant, out, tmp, peer_root=peer_root)


def _finish(job: _Job, timed_out: bool, budget_s: float) -> Outcome:
    out, r = job.outcome, job.running
    out.seconds = round(time.monotonic() - r.start, 2)
    out.returncode = r.returncode
    log, report = job.tmp / "pytest.log", job.tmp / "report.json"
    text = log.read_text(errors="replace") if log.is_file() else ""
    try:
        data = json.loads(report.read_text()) if report.is_file() else {}
    except (OSError, ValueError):
        data = {}
    _classify(out, data.get("tests", {}), text, timed_out, budget_s)
    if job.peer_root is not None:
        stray = [f for f in (data.get("peer_files") or {}).values()
                 if f and not Path(f).resolve().is_relative_to(job.peer_root.resolve())]
        if stray:
            out.status, out.error = "invalid", f"the peer was not loaded from the mutated copy: {', '.join(stray)}"
    out.phases = {k: round(v - r.start_epoch, 2) for k, v in (data.get("phases") or {}).items()}
    first = data.get("first_failure")
    if first:
        out.first_failure_s = round(first["time"] - r.start_epoch, 2)
        out.examples_run = first["examples_run"]
        out.compiles = first["compiles"]
    return out


def execute(todo: list, snap: Path, impl: str, *, problems=(), budget_s: float = 60.0, jobs: int = 2,
            matrix: bool = False, isolation: str = "fork", keep: bool = False, seed: int | None = None,
            progress=None, baseline_budget_s: float | None = None, peer: str | None = None,
            peer_snap: Path | None = None, args: list[str] | None = None, setup=None,
            deadline: float | None = None) -> list[Outcome | None]:
    """Run every mutant in `todo` (None: the baseline), `jobs` at a time, in order of submission.
    The baseline gets `baseline_budget_s` (default: budget_s): it runs every property to its end,
    where a killed mutant stops at its first failure. A peer catalog's mutants apply to a copy of
    `peer_snap` (the unpacked peer package), first on the run's path. `args` replaces the pytest
    arguments; `setup(index, job)` returns (environment, extra pytest arguments) of one run. With a
    `deadline` (time.monotonic()), a run that could not finish by then is not started: its entry is None."""
    threads = max(1, (os.cpu_count() or 1) // max(jobs, 1))
    if isolation == "fork":
        warm_up(threads)
    args = pytest_args(impl, matrix, seed, peer_copy.pytest_plugins(peer)) if args is None else args
    pending, running, done = list(todo), [], {}
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                i = len(todo) - len(pending)
                limit = budget_s if todo[i] is not None else (baseline_budget_s or budget_s)
                if deadline is not None and time.monotonic() + limit > deadline:
                    pending.clear()
                    break
                job = _prepare(pending.pop(0), snap, list(problems), peer_snap)
                if job.outcome.error:      # could not be applied: invalid without running
                    done[i] = job.outcome
                    if progress:
                        progress(job.outcome)
                    _cleanup(job, keep)
                    continue
                extra_env, extra_args = setup(i, job) if setup else ({}, [])
                first, env_peer = [], {}
                if peer is not None:
                    first, env_peer = peer_copy.run_env(peer, job.peer_root)
                env = _child_env(job.tree, job.tmp / "report.json", threads, seed, first=first,
                                 extra={**env_peer, **extra_env})
                job.running = _Running(job.tree, env, args + extra_args, job.tmp / "pytest.log", threads,
                                       isolation, first)
                running.append((i, job))
            time.sleep(0.05)
            for i, job in list(running):
                limit = budget_s if todo[i] is not None else (baseline_budget_s or budget_s)
                timed_out = job.running.poll() is None and time.monotonic() - job.running.start > limit
                if timed_out:
                    job.running.kill()
                if job.running.poll() is not None:
                    running.remove((i, job))
                    done[i] = _finish(job, timed_out, limit)
                    if progress:
                        progress(done[i])
                    _cleanup(job, keep)
    finally:
        for _, job in running:
            job.running.kill()
            _cleanup(job, keep)
    return [done.get(i) for i in range(len(todo))]


def _cleanup(job: _Job, keep: bool) -> None:
    if keep:
        print(f"kept {job.tmp}", file=sys.stderr)
    else:
        shutil.rmtree(job.tmp, ignore_errors=True)


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


def code_root(catalog: Catalog, tmp: Path) -> Path:
    """Where the catalog's files are: this repository, or for a peer catalog a fresh copy of the peer's
    published package unpacked under `tmp` (PeerSourceMissing without $SSDCHECK_PEERS_DIR)."""
    return peer_copy.unpack(catalog.peer, Path(tmp) / "peer") if catalog.peer else ROOT


def _test_name(nodeid: str) -> str:
    return nodeid.split("::")[-1]


def _classify(out: Outcome, tests: dict, text: str, timed_out: bool, budget_s: float) -> None:
    out.examples_total = sum(t["examples"] for t in tests.values()) if tests else None
    out.tests = {_test_name(n): {"outcome": t["outcome"], "examples": t["examples"]} for n, t in tests.items()}
    failed = [(nid, t) for nid, t in tests.items() if t["outcome"] == "failed"]
    errored = [(nid, t) for nid, t in tests.items() if t["outcome"] == "error"]
    if timed_out:
        out.status = "survived (timeout)"
        out.error = f"still running after {budget_s:g} s"
    elif out.returncode == 0 and tests and all(t["outcome"] == "skipped" for t in tests.values()):
        out.status = "invalid"
        out.error = "every test was skipped (does the implementation need a GPU this host lacks?)"
    elif out.returncode == 0:
        out.status = "survived"
    elif out.returncode == 1 and failed:
        nid, t = failed[0]
        out.status = "killed"
        out.killed_by = _test_name(nid)
        out.killers = [_test_name(n) for n, _ in failed]
        out.examples = t["first_failure"] or t["examples"]
        out.error = t["error"]
        out.problem = t["problem"]
    else:
        out.status = "invalid"
        first = errored[0][1]["error"] if errored else None
        out.error = f"pytest exit {out.returncode}: {first or _tail(text)}"


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
