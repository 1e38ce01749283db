"""Battery precompile: a one-process run compiles the triage battery's kernels ahead, on the free CPU cores.

A fail-fast run (`-x`, one process: a new kernel revision fuzzed until its first failure) checks the
triage battery (properties/triage.py) example by example, and each example that meets a kernel the
revision changed waits for its compile: on the H200 a mutant of cuTile's fast chunk_scan died at the
battery's second example about 13 s in, of which 10 were that one compile, which had waited for the first
example to end (lab/reports/2026-12-02-ttf-new-battery-and-gate.md). The battery warm-up (warmup.py) spreads
compiles over xdist workers, but it runs before any test and never with -x.

Here, once collection is done, the main process forks worker processes that compile, for every
collected property test's battery problem in test order, what the implementation's plain forward on
it will compile (KernelInfo.precompile: `plan` on CPU tensors, then one `build` per job, each job once).
The tests start at once. An example whose kernel a worker is still compiling waits for that compile
instead of starting its own: cuTile's compiles go through the plugin's one-compile-per-input lock
(gpu.once_per_input, on whenever a compile cache is), which the forked workers share. The examples
whose kernels a worker finished find them in the cache. The workers never touch the GPU (forking
after CUDA is initialised is safe for processes that never use it), and each runs in its own process
group so that stopping it at the session's end also stops the tileiras it started.

`--ssd-precompile auto` (the default): on a GPU, for implementations that declare KernelInfo.precompile,
in a run of one process (the fail-fast command, `ssdcheck fuzz` without -n), as many workers as usable CPU cores less one (or
$SSDCHECK_PRECOMPILE_WORKERS, which the time-to-failure runner sets when it runs several at once).
`N` forces N workers (on the CPU too: tests), `off` disables it. Only the plain forward of each battery
problem is planned: the calls properties derive from it (other chunk sizes, split sequences, stages)
compile in the test, as before.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time

ENV_WORKERS = "SSDCHECK_PRECOMPILE_WORKERS"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def workers_for(config) -> int:
    """Worker processes this run starts (0: none); see the module docstring."""
    mode = str(config.getoption("ssd_precompile"))
    if mode == "off" or hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return 0
    if mode != "auto":
        return int(mode)
    import torch
    if not torch.cuda.is_available():
        return 0
    env = os.environ.get(ENV_WORKERS, "")
    return int(env) if env.isdigit() else max(usable_cores() - 1, 1)


def parse_mode(text: str) -> str:
    """argparse type of --ssd-precompile: auto, off or a positive worker count."""
    if text in ("auto", "off") or (text.isdigit() and int(text) > 0):
        return text
    import argparse
    raise argparse.ArgumentTypeError(f"expected auto, off or a positive number of worker processes, got {text!r}")


def battery_problems(items) -> list[tuple[str, object]]:
    """(implementation, battery problem) of every collected property test, each once, in test order, for
    implementations that declare KernelInfo.precompile (forward problems only: a gradient test's
    problems are GradProblems, whose backward is not planned)."""
    from kernels.registry import lookup
    from properties.problem import SSDProblem
    from ssdcheck_plugin import warmup
    seen, out = set(), []
    for check in filter(None, map(warmup.check_of, items)):
        impl, prop, regime, dtype = check
        info = lookup(impl)
        if info.precompile is None:
            continue
        for problem in warmup._battery(info, prop, regime, dtype):
            if isinstance(problem, SSDProblem) and (impl, problem) not in seen:
                seen.add((impl, problem))
                out.append((impl, problem))
    return out


def _worker(tasks, results, problems, arch: str, timer, lookup) -> None:
    """Run tasks until the None: ("plan", index into `problems`, inherited through the fork, never
    pickled) or ("build", implementation, job); each answer is (kind, implementation, item, jobs or
    None, seconds, tileiras runs, error or None)."""
    os.setpgrp()   # its own process group: stop() ends it and the tileiras it runs together
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the main process's to handle
    while (task := tasks.get()) is not None:
        kind, impl, item = task
        t0, before = time.perf_counter(), getattr(timer, "tileiras_calls", 0)
        try:
            pre = lookup(impl).precompile
            out = pre.plan(**problems[item][1].inputs("cpu")) if kind == "plan" else pre.build(item, arch)
            pickle.dumps(out)   # an answer that cannot travel fails here, not silently in the queue's thread
            answer = (kind, impl, item, out, time.perf_counter() - t0, getattr(timer, "tileiras_calls", 0) - before, None)
        except Exception as e:   # noqa: BLE001 (reported; the test compiles it itself)
            answer = (kind, impl, item, None, time.perf_counter() - t0, 0,
                      f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        results.put(answer)


class Precompiler:
    """Worker processes planning and building `problems` ([(implementation, problem)]) for GPU `arch`.
    start() returns at once; done() says whether every job has ended; stop() ends the workers and
    returns what they did (to_dict)."""

    def __init__(self, problems, workers: int, arch: str, timer=None, lookup=None):
        from kernels.registry import lookup as registry_lookup
        self.problems, self.workers, self.arch, self.timer = list(problems), workers, arch, timer
        self.lookup = lookup or registry_lookup   # implementation name -> KernelInfo (forked, never pickled)
        self.jobs: list = []                  # (implementation, job) in the order they were queued
        self.planned = self.built = self.compiled = 0
        self.errors: list[str] = []
        self.build_s = 0.0
        self.t0 = None
        self.finished_s = None                # seconds from start() to the last job's end
        self._procs: list = []
        self._thread = None
        self._stopping = False

    def start(self) -> "Precompiler":
        ctx = multiprocessing.get_context("fork")   # no re-import: the first compile starts at once
        self.t0 = time.perf_counter()
        # Queues whose put never blocks (a feeder thread drains them); that thread, like the collector,
        # starts after the fork: a thread running while a process forks could leave a lock held in the child
        self._tasks, self._results = ctx.Queue(), ctx.Queue()
        self._procs = [ctx.Process(target=_worker, args=(self._tasks, self._results, self.problems, self.arch, self.timer, self.lookup),
                                   daemon=True) for _ in range(self.workers)]
        for p in self._procs:
            p.start()
        for i, (impl, _) in enumerate(self.problems):
            self._tasks.put(("plan", impl, i))
        self._thread = threading.Thread(target=self._collect, name="ssdcheck-precompile", daemon=True)
        self._thread.start()
        return self

    def _collect(self) -> None:
        queued, pending_plans, pending_builds = set(), len(self.problems), 0
        while pending_plans or pending_builds:
            try:
                kind, impl, item, out, seconds, compiled, error = self._results.get()
            except (EOFError, OSError):   # the workers were stopped
                return
            if error and len(self.errors) < 5:
                what = self.problems[item][1] if kind == "plan" else item
                self.errors.append(f"{kind} {what!r}: {error}")
            if kind == "plan":
                pending_plans -= 1
                self.planned += error is None
                for job in out or ():
                    if (impl, job) not in queued:
                        queued.add((impl, job))
                        self.jobs.append((impl, job))
                        self._tasks.put(("build", impl, job))
                        pending_builds += 1
            else:
                pending_builds -= 1
                self.built += error is None
                self.compiled += compiled
                self.build_s += seconds
        self.finished_s = time.perf_counter() - self.t0
        for _ in self._procs:
            self._tasks.put(None)

    def done(self) -> bool:
        return self.finished_s is not None

    def stop(self) -> dict:
        for q in (getattr(self, "_tasks", None), getattr(self, "_results", None)):
            if q is not None:
                q.cancel_join_thread()   # exit must not wait for a feeder thread on a pipe nobody reads
        for p in self._procs:
            if p.is_alive():
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
            p.join(timeout=5)
        return self.to_dict()

    def to_dict(self) -> dict:
        return {"workers": self.workers, "problems": len(self.problems), "planned": self.planned,
                "jobs": len(self.jobs), "built": self.built, "tileiras_runs": self.compiled,
                "build_s": round(self.build_s, 1),
                "finished_s": None if self.finished_s is None else round(self.finished_s, 1),
                "errors": self.errors}

    def summary(self) -> str:
        d = self.to_dict()
        done = f"all done {d['finished_s']} s after the start" if d["finished_s"] is not None else "stopped before the end"
        return (f"ssdcheck battery precompile: {d['workers']} workers, {d['planned']} of {d['problems']} problems "
                f"planned, {d['built']} of {d['jobs']} jobs built ({d['tileiras_runs']} tileiras runs, "
                f"{d['build_s']} s), {done}" + (f"; errors: {'; '.join(d['errors'])}" if d["errors"] else ""))


def gpu_arch() -> str:
    """The current GPU's architecture as cuTile names it ("sm_90"), or sm_90 where torch sees none."""
    import torch
    if not torch.cuda.is_available():
        return "sm_90"
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
