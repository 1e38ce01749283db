"""What the mutation runner and the time-to-failure mode share: run the suite on copies of the tree.

A snapshot of the repository (git's view of it, or every file where there is no git), a unified diff
applied to it, the pytest command of a run, its environment, the worker processes (forked from a warm
interpreter or fresh), and the verdict each run gets (Outcome). mutation/run.py builds the catalog run
and the report on these; mutation/ttf.py the time to first failure.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mutation import peer_copy
from mutation.catalog import DEFAULT_TESTS, Catalog, Mutant

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
    """Tracked and untracked-not-ignored files that exist (git's view of the working tree); every file
    under root where root is no git checkout (the suite as a wheel installs it)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
        files = sorted({f for f in out.split("\0") if f})
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
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

