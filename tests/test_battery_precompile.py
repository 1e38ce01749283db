"""The battery precompile (ssdcheck_plugin/precompile.py, kernels/cutile/precompile.py): what cutile plans
for a call, that a build lands where the JIT looks, the worker processes, and the plugin's switch."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from properties import triage
from properties.problem import SSDProblem
from ssdcheck_plugin import precompile

ROOT = Path(__file__).resolve().parents[1]


def _cutile_problem():
    from kernels.registry import lookup
    return triage.battery(lookup("cutile"), True)[1]   # whole chunks of 64: the FAST rows


def test_cutile_plans_each_launch_once_with_the_dispatch_hints():
    """One job per kernel the forward launches, named by the symbol the launch's arguments give, with
    the occupancy the dispatch table chose: a job without it would compile another kernel than the
    launch runs (the launcher passes hints with replace_hints)."""
    pytest.importorskip("cuda.tile")
    from kernels.cutile import dispatch, launcher
    from kernels.cutile.precompile import plan
    problem = _cutile_problem()
    jobs = plan(**problem.inputs("cpu"))
    names = [j[0] for j in jobs]
    assert names == ["chunk_cumsum_kernel", "chunk_state_kernel", "chunk_scan_kernel"], jobs
    assert len({j[3] for j in jobs}) == len(jobs)
    prob = launcher._problem(*(problem.inputs("cpu")[k] for k in ("x", "B")), problem.chunk_size, None)
    assert jobs[2][1] == dispatch.choose("chunk_scan", prob).occupancy == 2
    assert all(j[3].startswith(j[0] + "_K") for j in jobs)


def test_a_build_is_the_cache_entry_the_launch_signature_finds(tmp_path, monkeypatch):
    """build() writes cuTile's cache under the key that compile_tile computes for the launch's own
    KernelSignature (symbol unset, as the JIT passes it): compiling that afterwards runs no tileiras.
    On the CPU this checks the build path against the JIT's compile call; the signature rule itself is
    checked against a recorded GPU symbol in tests/test_cutile_compile.py."""
    pytest.importorskip("cuda.tile")
    from cuda.tile import _compile
    from cuda.tile._cext import default_tile_context
    from kernels.cutile.precompile import build, plan, recorded_launches
    monkeypatch.setattr(default_tile_context.config, "cache_dir", str(tmp_path))
    kw = _cutile_problem().inputs("cpu")
    job = plan(**kw)[0]                                         # chunk_cumsum: compiles in about a second
    build(job, "sm_90")
    kernel, sig = recorded_launches(kw)[0]
    runs = []
    real = _compile.compile_cubin
    monkeypatch.setattr(_compile, "compile_cubin", lambda *a, **k: runs.append(a) or real(*a, **k))
    _compile.compile_tile(kernel._annotated_function, [sig], "sm_90", kernel._compiler_options, default_tile_context)
    assert runs == [], "the launch's compile missed the cache the build filled"
    other = _compile.compile_tile(kernel._annotated_function, [sig], "sm_100", kernel._compiler_options,
                                  default_tile_context)   # another arch: another key, so tileiras runs
    assert len(runs) == 1 and other.cubin


class _Fake:
    """A registry stand-in: plan returns one job per (dtype, chunk size), build logs or hangs."""

    def __init__(self, log: Path, hang_on=None):
        self.log, self.hang_on = log, hang_on
        self.precompile = SimpleNamespace(plan=self.plan, build=self.build)

    def plan(self, **kw):
        return [(str(kw["x"].dtype), kw["chunk_size"])]

    def build(self, job, arch):
        if job == self.hang_on:
            time.sleep(120)
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {arch} {job}\n")


def _problems():
    base = SSDProblem(batch=1, seqlen=40, nheads=2, headdim=8, dstate=8, chunk_size=16, dtype="float32")
    return [("fake", base), ("fake", base.replace(seed=3)), ("fake", base.replace(chunk_size=32)),
            ("fake", base.replace(dtype="bfloat16"))]


def _wait(pc, seconds=60):
    t = time.time()
    while not pc.done() and time.time() - t < seconds:
        time.sleep(0.05)


def test_workers_build_each_job_once_in_other_processes(tmp_path):
    fake = _Fake(tmp_path / "log")
    pc = precompile.Precompiler(_problems(), 2, "sm_90", lookup=lambda impl: fake).start()
    _wait(pc)
    out = pc.stop()
    lines = (tmp_path / "log").read_text().splitlines()
    jobs = sorted(line.split(" ", 2)[2] for line in lines)
    assert jobs == sorted(["('torch.float32', 16)", "('torch.float32', 32)", "('torch.bfloat16', 16)"]), lines
    assert {line.split()[0] for line in lines} - {str(os.getpid())} == {line.split()[0] for line in lines}
    assert all(line.split()[1] == "sm_90" for line in lines)
    assert out["planned"] == 4 and out["jobs"] == out["built"] == 3 and out["errors"] == [], out
    assert out["finished_s"] is not None


def test_a_failing_plan_is_reported_and_the_rest_still_builds(tmp_path):
    fake = _Fake(tmp_path / "log")
    problems = _problems()[:1] + [("fake", SimpleNamespace(inputs=lambda device: 1 / 0))]
    pc = precompile.Precompiler(problems, 1, "sm_90", lookup=lambda impl: fake).start()
    _wait(pc)
    out = pc.stop()
    assert out["planned"] == 1 and out["built"] == 1, out
    assert len(out["errors"]) == 1 and "ZeroDivisionError" in out["errors"][0]


def test_stop_ends_a_worker_in_the_middle_of_a_build(tmp_path):
    """A session that ends (its first failure found) must not leave workers compiling on its cores."""
    fake = _Fake(tmp_path / "log", hang_on=("torch.float32", 16))
    pc = precompile.Precompiler(_problems()[:1], 1, "sm_90", lookup=lambda impl: fake).start()
    time.sleep(1.0)
    t0 = time.time()
    out = pc.stop()
    assert time.time() - t0 < 10
    assert not any(p.is_alive() for p in pc._procs)
    assert out["built"] == 0 and out["finished_s"] is None


def _config(mode="auto", maxfail=0, worker=False, numprocesses=None):
    opts = {"ssd_precompile": mode, "maxfail": maxfail}
    cfg = SimpleNamespace(getoption=lambda name, default=None: opts.get(name, default),
                          option=SimpleNamespace(numprocesses=numprocesses))
    if worker:
        cfg.workerinput = {}
    return cfg


def test_auto_starts_workers_only_for_one_process_on_a_gpu(monkeypatch):
    import torch
    monkeypatch.delenv(precompile.ENV_WORKERS, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert precompile.workers_for(_config(maxfail=1)) == max(precompile.usable_cores() - 1, 1)
    assert precompile.workers_for(_config(maxfail=0)) == max(precompile.usable_cores() - 1, 1)   # fuzz: no -x
    assert precompile.workers_for(_config(maxfail=1, worker=True)) == 0       # xdist: warmup.py's job
    assert precompile.workers_for(_config(maxfail=1, numprocesses=4)) == 0
    assert precompile.workers_for(_config("off", maxfail=1)) == 0
    monkeypatch.setenv(precompile.ENV_WORKERS, "3")
    assert precompile.workers_for(_config(maxfail=1)) == 3
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precompile.workers_for(_config(maxfail=1)) == 0          # no GPU: nothing compiles
    assert precompile.workers_for(_config("2")) == 2                # forced


def test_the_option_names_what_it_takes():
    import argparse
    assert precompile.parse_mode("auto") == "auto" and precompile.parse_mode("4") == "4"
    for bad in ("0", "-1", "many"):
        with pytest.raises(argparse.ArgumentTypeError, match="auto, off or a positive number"):
            precompile.parse_mode(bad)


def test_battery_problems_follow_the_tests_once_each_for_declaring_implementations():
    from ssdcheck_plugin import warmup

    class _Fn:
        hypothesis = object()

    def item(name, **params):
        return SimpleNamespace(obj=_Fn, name=f"{name}[{'-'.join(map(str, params.values()))}]", originalname=name,
                               callspec=SimpleNamespace(params=params))
    from kernels.registry import lookup
    items = [item("test_matches_oracle", impl="cutile"), item("test_causality", impl="cutile"),
             item("test_matches_oracle_model_layer", impl="cutile", dtype="float16"),
             item("test_matches_oracle", impl="torch-ref")]   # declares no precompile
    got = precompile.battery_problems(items)
    plain = triage.battery(lookup("cutile"), True)
    model = triage.battery(lookup("cutile"), True, "float16", "model")
    assert [p for _, p in got] == list(plain) + [p for p in model if p not in plain]
    assert {i for i, _ in got} == {"cutile"}
    assert warmup.check_of(items[1])   # causality's battery is the plain one: no new problems


def _pytest(tmp_path, *args):
    env = {**os.environ, "SSDCHECK_TEST_PRECOMPILE_LOG": str(tmp_path / "built.log"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile=cpu",
                           "-q", "tests/test_properties.py::test_matches_oracle", "--impl",
                           "tests.tooling_targets:precompiled", "-x", "--ssd-report", str(tmp_path / "r.json"), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_fail_fast_run_precompiles_its_battery_in_other_processes(tmp_path):
    """End to end: with --ssd-precompile 2 the plugin builds each battery job of the collected test once,
    from processes other than pytest's, says so on stderr and in the report; with off, nothing is built."""
    import json
    proc = _pytest(tmp_path, "--ssd-precompile", "2")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = (tmp_path / "built.log").read_text().splitlines()
    from kernels.registry import lookup
    battery = triage.battery(lookup("torch-ref"), False)
    assert len(lines) == len({(p.dtype, p.chunk_size) for p in battery}), lines
    meta = json.loads((tmp_path / "r.json").read_text())["meta"]["battery_precompile"]
    assert meta["workers"] == 2 and meta["built"] == meta["jobs"] == len(lines), meta
    assert "ssdcheck battery precompile: 2 workers" in proc.stderr
    (tmp_path / "built.log").unlink()
    off = _pytest(tmp_path, "--ssd-precompile", "off")
    assert off.returncode == 0 and not (tmp_path / "built.log").exists()
    assert json.loads((tmp_path / "r.json").read_text())["meta"]["battery_precompile"] is None
