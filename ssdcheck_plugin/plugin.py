"""pytest hooks of ssdcheck's report, gate, fuzzing and GPU support (see docs/jobs.md).

    --ssd-report PATH.json         machine-readable report (docs/report-schema.md)
    --ssd-baseline PATH.json       gate: compare worst errors with an earlier report ...
    --ssd-max-growth FACTOR        ... and exit 6 when one grew by more than FACTOR (default 2)
    --ssd-growth-floor SHARE       ... unless it still uses < SHARE of its tolerance (default 0.01)
    --ssd-gate-metrics LIST        ... of max_abs,normwise,share (default max_abs,normwise)
    --ssd-repro-dir DIR            save each failing check as a replayable file
    --ssd-strict-deviations        a declared deviation that passes (unexpected pass) fails its check
    --ssd-fuzz-seconds S           stop each Hypothesis run so the session takes about S seconds
    --ssd-stall-seconds S          ... and report an example still running S s past its share (default 20)
    --ssd-hang-seconds S           ... and dump the stacks of an example running S s, GIL or not (default 180)
    --ssd-progress PATH.json       live counters for `ssdcheck fuzz`
    --ssd-hypothesis-db DIR        example database of the fuzz profile (.ssdcheck-cache/hypothesis)
    --ssd-compile-cache DIR|off    cuTile cubin cache (.ssdcheck-cache/cutile)
    --ssd-shrink-seconds S         stop shrinking a failure after S seconds (default 30)
    --ssd-warm-battery auto|on|off xdist workers compile the triage battery together first (warmup.py)
    --ssd-precompile auto|off|N    one process: N workers compile the battery's kernels ahead (precompile.py)

Fail fast: the first failing example of a test prints its reproducer at once (and saves it with
--ssd-repro-dir) before Hypothesis shrinks it, and shrinking stops after --ssd-shrink-seconds with the
smallest failure found so far (the unshrunk one if none). With -x/--maxfail under xdist, the first
failure also stops the other workers before their next example (their tests end as cut).

JUnit (`--junitxml`): every property test gets <property> entries ssd_property, ssd_examples,
ssd_failures, ssd_worst_share and ssd_worst_share.<output>, ssd_reproducer when one was saved, and
ssd_cut_by_budget or ssd_cut_by_failure (another worker's failure under -x) when the test was stopped early;
the suite gets ssd_toolchain_<field> for tileiras, ptxas, cuda_tile, torch and triton (meta.toolchain).
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from ssdcheck_plugin import gate as gate_mod
from ssdcheck_plugin import gpu, precompile
from ssdcheck_plugin.aggregate import Aggregate, ItemStats, num
from ssdcheck_plugin import fuzzing
from ssdcheck_plugin.fuzzing import FuzzTimeUp, Progress, StoppedByFailure, TimeBudget, wrap_inner_test
from ssdcheck_plugin.fuzzing import activate as fuzz_activate

SCHEMA = "ssdcheck-report/1"
DEFAULT_DB = ".ssdcheck-cache/hypothesis"
STATE = pytest.StashKey["SSDState"]()


def pytest_addoption(parser):
    g = parser.getgroup("ssdcheck-report", "ssdcheck: report, merge gate, fuzzing, GPUs")
    g.addoption("--ssd-report", metavar="PATH", default=None,
                help="write the machine-readable JSON report here (docs/report-schema.md)")
    g.addoption("--ssd-baseline", metavar="PATH", default=None,
                help="an earlier --ssd-report: fail (exit 6) when a worst error grew by more than --ssd-max-growth")
    g.addoption("--ssd-max-growth", metavar="FACTOR", type=float, default=2.0,
                help="allowed growth of a worst error over the baseline (default 2.0)")
    g.addoption("--ssd-growth-floor", metavar="SHARE", type=float, default=0.01,
                help="ignore growth of errors that use less than SHARE of their tolerance (default 0.01)")
    g.addoption("--ssd-gate-metrics", metavar="LIST", default="max_abs,normwise",
                help="comma-separated metrics the gate watches: max_abs, normwise, share")
    g.addoption("--ssd-repro-dir", metavar="DIR", default=None,
                help="save every failing property check as a reproducer file here")
    g.addoption("--ssd-strict-deviations", action="store_true", default=False,
                help="fail a check where a declared known deviation (KernelInfo.deviations) did not occur")
    g.addoption("--ssd-fuzz-seconds", metavar="S", type=float, default=None,
                help="time budget: stop each Hypothesis run so that the session takes about S seconds")
    g.addoption("--ssd-stall-seconds", metavar="S", type=float, default=20.0,
                help="with a time budget: report an example still running S seconds after its test's share "
                     "ran out (stack and drawn problem to stderr and <report>.stall-<worker>.txt); 0: never")
    g.addoption("--ssd-hang-seconds", metavar="S", type=float, default=180.0,
                help="with a time budget: when one example has run S seconds, dump every thread's stack with "
                     "faulthandler (works while a C call holds the GIL, where the stall report cannot) to "
                     "<report>.hang-<worker>.txt; 0: never")
    g.addoption("--ssd-fuzz-until", metavar="EPOCH", type=float, default=None,
                help="time budget as an absolute time.time() deadline (used by ssdcheck fuzz)")
    g.addoption("--ssd-progress", metavar="PATH", default=None,
                help="keep live progress counters in this JSON file (per xdist worker: PATH.gwN)")
    g.addoption("--ssd-hypothesis-db", metavar="DIR", default=None,
                help=f"example database for the fuzz profile (default {DEFAULT_DB})")
    g.addoption("--ssd-warm-battery", choices=("auto", "on", "off"), default="auto",
                help="xdist workers compile the triage battery's checks together before the tests "
                     "(ssdcheck_plugin/warmup.py; auto: on a GPU, never with -x/--maxfail)")
    g.addoption("--ssd-precompile", metavar="auto|off|N", type=precompile.parse_mode, default="auto",
                help="one-process runs: N worker processes compile the triage battery's kernels ahead "
                     "(ssdcheck_plugin/precompile.py; auto: on a GPU without xdist, a worker per free core)")
    g.addoption("--ssd-shrink-seconds", metavar="S", type=float, default=30.0,
                help="stop shrinking a failing example after S seconds, keeping the smallest found so far "
                     "(default 30; each shrink step may compile again)")
    g.addoption("--ssd-compile-cache", metavar="DIR", default=None,
                help="cuTile compile cache directory, or 'off' (default $SSDCHECK_COMPILE_CACHE or "
                     f"{gpu.DEFAULT_COMPILE_CACHE})")


def _policy_k() -> float | None:
    try:
        from properties.tolerance import load_policy
        return load_policy().k
    except Exception:
        return None


def _metrics(config) -> tuple[str, ...]:
    return tuple(m.strip() for m in config.getoption("ssd_gate_metrics").split(",") if m.strip())


def state_root(config) -> Path:
    """Where .ssdcheck-cache goes: $SSDCHECK_STATE_DIR (the `ssdcheck` command sets it: the checkout, or
    the directory it runs in where the suite is installed), else the rootdir."""
    return Path(os.environ.get("SSDCHECK_STATE_DIR") or config.rootpath)


def _xdist_active(config) -> bool:
    """True on the xdist controller of a distributed run."""
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def _junit_xml(config):
    """pytest's --junitxml writer (it keeps it in config.stash), or None without --junitxml."""
    try:
        from _pytest.junitxml import xml_key
        return config.stash.get(xml_key, None)
    except (ImportError, AttributeError):
        return getattr(config, "_xml", None)


def _resolve(config, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else Path(config.invocation_params.dir) / p


# ---------------------------------------------------------------------------------------- module hooks

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if config.getoption("ssd_baseline") and not hasattr(config, "workerinput"):
        try:
            gate_mod.load_baseline(_resolve(config, config.getoption("ssd_baseline")))
            gate_mod.compare_rows({}, {}, metrics=_metrics(config))
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
    from properties.report import set_strict_deviations
    set_strict_deviations(config.getoption("ssd_strict_deviations"))
    st = SSDState(config)
    config.stash[STATE] = st
    config.pluginmanager.register(st, "ssdcheck-state")


def _seconds_spent(phases: dict, timer, compile0: tuple) -> list[tuple[str, float]]:
    """ssd_seconds.<phase> of one test (properties.timing), and the cuTile compile and tileiras
    seconds within it (part of `impl`)."""
    out = [(f"ssd_seconds.{k}", round(v, 3)) for k, v in sorted(phases.items())]
    if phases and timer.installed:
        out += [("ssd_seconds.compile", round(timer.compile_s - compile0[0], 3)),
                ("ssd_seconds.tileiras", round(timer.tileiras_s - compile0[1], 3))]
    return out


def _bound_shrinking(seconds: float | None) -> tuple[float, float] | None:
    """Bound Hypothesis's shrinking of a failure to `seconds` (its engine's MAX_SHRINKING_SECONDS, 300 by
    default, read when shrinking starts; past it the engine reports the smallest failure so far);
    (new, old) limits, or None where this Hypothesis has no such limit or seconds is None."""
    try:
        from hypothesis.internal.conjecture import engine
    except ImportError:
        return None
    old = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if old is None or seconds is None:
        return None
    engine.MAX_SHRINKING_SECONDS = seconds
    return seconds, old


def _budgeted(item) -> bool:
    """A Hypothesis test: the only kind a fuzz budget can cut, so the only kind it shares among."""
    return hasattr(getattr(item, "obj", None), "hypothesis")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    return gpu.auto_num_workers(getattr(config.option, "numprocesses", None))


def _finite(obj):
    """Strict JSON: non-finite floats anywhere in the report become "inf"/"-inf"/"nan"."""
    if isinstance(obj, float):
        return num(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _impl_spec(config, impl_name: str) -> str:
    """The --impl spec that names `impl_name` (a module:function revision may declare its own name)."""
    specs = config.getoption("impl", None) or []
    if impl_name in specs:
        return impl_name
    try:
        from kernels.registry import lookup
        for spec in specs:
            if lookup(spec).name == impl_name:
                return spec
    except Exception:
        pass
    return impl_name


# ---------------------------------------------------------------------------------------- the state

class SSDState:
    """Per-process state; registered as a plugin object so its hooks see the config."""

    def __init__(self, config):
        self.config = config
        self.worker_id = config.workerinput["workerid"] if hasattr(config, "workerinput") else None
        self.is_controller = self.worker_id is None
        self.aggregate = Aggregate(k=_policy_k())
        self.item: ItemStats | None = None
        self.tests: dict[str, dict] = {}
        self.reproducers: list[dict] = []
        self.devices: dict[str, int | None] = {}
        self.timer = gpu.CompileTimer()
        self.timer_merged: dict = {}
        self.profile: str | None = None
        self.budget: TimeBudget | None = None
        self.progress: Progress | None = None
        self.t0 = time.time()
        self.gate: dict | None = None
        self.gate_regressions: list = []
        self.worker_count = 0
        self.worker_cut = 0
        self.warmups: dict[str, dict] = {}   # worker -> its battery warm-up (warmup.warm), merged at node down
        self.precompiler = None              # precompile.Precompiler of a one-process run, while it runs
        self.precompiled: dict | None = None  # what it did (Precompiler.to_dict), once stopped
        self.coverage_merged: dict[str, dict] = {}   # impl -> path -> launches, summed over workers
        self.report_path: Path | None = None
        # Early, before anything touches CUDA or imports cuda.tile:
        self.device = gpu.pin_xdist_worker()
        self.compile_cache = gpu.resolve_compile_cache(config.getoption("ssd_compile_cache"), state_root(config))
        gpu.apply_compile_cache(self.compile_cache)
        if self.compile_cache is not None and os.environ.get("SSDCHECK_COMPILE_DEDUP", "1") != "0":
            self.timer.dedup_dir = Path(self.compile_cache) / "ssdcheck-tileiras-once"
        self.timer.watch()
        self.shrink_seconds = config.getoption("ssd_shrink_seconds")
        if self.shrink_seconds is not None and self.shrink_seconds <= 0:
            raise pytest.UsageError(f"--ssd-shrink-seconds: expected a positive number of seconds, "
                                    f"got {self.shrink_seconds:g}")
        self.announced: str | None = None   # the test whose first failure was printed
        self.unshrunk: tuple[Path | None, float] = (None, 0.0)   # its reproducer file, and when it was found
        from properties.report import add_sink
        add_sink(self.sink)

    def sink(self, result) -> None:
        self.aggregate.add(result)
        if self.item is not None:
            self.item.add(result)
            if not result.strict_passed and self.budget is not None:
                self.budget.failure_seen = True
            if not result.passed and self.announced != self.item.nodeid:
                self.announced = self.item.nodeid
                self._announce(result)
        if self.progress is not None:
            self.progress.on_result(result)

    def _announce(self, result) -> None:
        """The first failing example of the running test: its reproducer now, before shrinking (which
        may be cut, or take minutes of compiles), and the other workers told to stop under -x."""
        config, nodeid = self.config, self.item.nodeid
        text = (f"\nssdcheck: first failure in {nodeid} (example {self.item.examples}, {result.prop}); "
                f"re-run it alone: {result.problem.repro(_impl_spec(config, result.impl), result.prop)}\n")
        repro_dir = config.getoption("ssd_repro_dir")
        if repro_dir:
            from ssdcheck_plugin import repro
            try:
                path = repro.write(result, _resolve(config, repro_dir), impl_spec=_impl_spec(config, result.impl),
                                   meta={"host": os.uname().nodename, "device": self.device, "nodeid": nodeid,
                                         "shrunk": False})
                self.unshrunk = (path, time.time())
                text += f"ssdcheck: saved unshrunk {path}\n"
            except Exception as e:  # noqa: BLE001 (the failure itself must still be reported)
                text += f"ssdcheck: could not save the unshrunk reproducer: {type(e).__name__}: {e}\n"
        capman = config.pluginmanager.getplugin("capturemanager")
        import sys
        if capman is not None:
            with capman.global_and_fixture_disabled():
                sys.stderr.write(text)
                sys.stderr.flush()
        else:
            sys.stderr.write(text)
        if (config.getoption("maxfail", 0) or 0) > 0:
            fuzzing.request_stop()

    def pytest_unconfigure(self, config):
        if self.precompiler is not None:   # a session that ended before pytest_sessionfinish
            self.precompiler.stop()
            self.precompiler = None
        from properties.report import remove_sink
        remove_sink(self.sink)
        fuzzing.set_stop_file(None)
        self.timer.unwatch()
        if self.budget is not None and self.budget.watchdog is not None:
            self.budget.watchdog.stop()
        fuzz_activate(None)

    # ------------------------------------------------------------------ session start
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session):
        """After every pytest_configure (conftest loads the Hypothesis profile there): give the fuzz
        profile its repo-local example database; set up the time budget and the progress file."""
        config = self.config
        from hypothesis import settings
        self.profile = settings.get_current_profile_name()
        if self.profile == "fuzz":
            from hypothesis.database import DirectoryBasedExampleDatabase
            db = Path(config.getoption("ssd_hypothesis_db") or DEFAULT_DB)
            db = db if db.is_absolute() else state_root(config) / db
            settings.register_profile("fuzz+ssdcheck-db", parent=settings.get_profile("fuzz"),
                                      database=DirectoryBasedExampleDatabase(str(db)))
            settings.load_profile("fuzz+ssdcheck-db")
        xml = _junit_xml(config)   # --junitxml: the toolchain is part of the run's identity
        if self.is_controller and xml is not None:
            from ssdcheck_plugin.meta import toolchain
            tools = toolchain()
            for k in gate_mod.TOOLCHAIN_FIELDS:
                xml.add_global_property(f"ssd_toolchain_{k}", str(tools.get(k)))
        if self.is_controller:
            for old in self._watch_files("stall") + self._watch_files("hang"):   # an earlier run's file would
                Path(old).unlink(missing_ok=True)                                   # be read as this run's
        if self.worker_id and (config.getoption("maxfail", 0) or 0) > 0 and config.workerinput.get("testrunuid"):
            import tempfile   # one file per run, shared by its workers: a worker found a failure
            fuzzing.set_stop_file(Path(tempfile.gettempdir()) / f"ssdcheck-stop-{config.workerinput['testrunuid']}")
        until = config.getoption("ssd_fuzz_until")
        seconds = config.getoption("ssd_fuzz_seconds")
        if until is None and seconds is not None:
            until = self.t0 + seconds
        if until is not None:
            workers = int(config.workerinput.get("workercount", 1)) if self.worker_id else 1
            counter = None
            if self.worker_id and config.workerinput.get("testrunuid"):
                import tempfile   # one file per run, shared by its workers: the tests started so far
                counter = Path(tempfile.gettempdir()) / f"ssdcheck-started-{config.workerinput['testrunuid']}"
            self.budget = TimeBudget(until, workers=workers, counter=counter)
            fuzz_activate(self.budget)
            self._start_watchdog(config)
        path = config.getoption("ssd_progress")
        if path and not _xdist_active(config):
            path = _resolve(config, f"{path}.{self.worker_id}" if self.worker_id else path)
            self.progress = Progress(path, budget=self.budget)
            self.progress.write(force=True)

    def _stall_path(self, config, worker: str, kind: str = "stall") -> Path | None:
        report = config.getoption("ssd_report")
        if not report:
            return None
        report = _resolve(config, report)
        return report.with_name(f"{report.stem}.{kind}-{worker}.txt")

    def _watch_files(self, kind: str) -> list[str]:
        path = self._stall_path(self.config, "*", kind)
        return sorted(str(p) for p in path.parent.glob(path.name)) if path is not None else []

    def _stall_files(self) -> list[str]:
        """Stall reports, and hang files that hold a stack dump (one holding only headers is no news)."""
        from ssdcheck_plugin.stall import hang_dumps
        return self._watch_files("stall") + [f for f in self._watch_files("hang") if hang_dumps(Path(f).read_text())]

    def _start_watchdog(self, config) -> None:
        grace = config.getoption("ssd_stall_seconds")
        if not grace or grace <= 0 or _xdist_active(config):   # the xdist controller runs no examples
            return
        from ssdcheck_plugin.stall import StallWatchdog
        worker = self.worker_id or "main"
        self.budget.watchdog = StallWatchdog(self.budget, grace_s=grace, path=self._stall_path(config, worker),
                                             worker=worker, hang_s=config.getoption("ssd_hang_seconds") or 0.0,
                                             hang_path=self._stall_path(config, worker, "hang"))
        self.budget.watchdog.start()

    @pytest.hookimpl(tryfirst=True)   # before xdist's worker reports its collection: tests wait for it
    def pytest_collection_finish(self, session):
        from ssdcheck_plugin import warmup
        mode = self.config.getoption("ssd_warm_battery")
        if warmup.wanted(self.config, mode):
            checks = warmup.battery_checks(session.items, compiled_only=mode == "auto")
            if checks:
                budget = self.budget
                self.warmups[self.worker_id] = {**warmup.warm(
                    checks, warmup.counter_path(self.config), deadline=budget.deadline if budget else None,
                    watchdog=budget.watchdog if budget else None), "checks": len(checks)}
        workers = precompile.workers_for(self.config)
        problems = precompile.battery_problems(session.items) if workers else []
        if problems:
            self.precompiler = precompile.Precompiler(problems, workers, precompile.gpu_arch(), self.timer).start()
        if self.budget is not None:
            # only Hypothesis tests draw on the budget; plain tests (regressions) run to completion
            self.budget.items_total = sum(_budgeted(i) for i in session.items)
        if self.progress is not None:
            self.progress.tests_total = len(session.items)
            self.progress.write(force=True)

    # ------------------------------------------------------------------ each test
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        from properties import timing
        self.item = ItemStats(item.nodeid)
        timing.take()
        compile0 = (self.timer.compile_s, self.timer.tileiras_s)
        if self.budget is not None and _budgeted(item):
            self.budget.start_item()
            if self.budget.watchdog is not None:
                self.budget.watchdog.nodeid = item.nodeid
        if _budgeted(item) and (self.budget is not None or fuzzing.stop_file() is not None):
            wrap_inner_test(getattr(item, "obj", None))
        if self.progress is not None:
            self.progress.current = item.nodeid
            self.progress.write(force=True)
        failed = cut = stopped = False
        # the property tests (those taking an implementation) shrink for a bounded time; other tests
        # (find() in the strategy tests) keep Hypothesis's own limit
        bound = _bound_shrinking(self.shrink_seconds if "impl" in getattr(item, "fixturenames", ()) else None)
        try:
            return (yield)
        except StoppedByFailure:
            stopped = True
            return None
        except FuzzTimeUp:
            cut = True
            if self.budget is not None:
                self.budget.cut += 1
            return None
        except BaseException:
            failed = True
            raise
        finally:
            if bound is not None:
                _bound_shrinking(bound[1])   # the engine's own limit again
            stats, self.item = self.item, None
            if stats.examples or stats.props:
                item.user_properties.extend(stats.user_properties())
            elif _budgeted(item):
                item.user_properties.append(("ssd_examples", 0))   # no draw was applicable
            if cut:   # stopped by the fuzz budget before the profile's example count: say so per test
                item.user_properties.append(("ssd_cut_by_budget", "true"))
            if stopped:   # another worker's failure under -x/--maxfail
                item.user_properties.append(("ssd_cut_by_failure", "true"))
            item.user_properties.extend(_seconds_spent(timing.take(), self.timer, compile0))
            repro_dir = item.config.getoption("ssd_repro_dir")
            if failed and repro_dir and stats.last_failure is not None:
                final = self._save_reproducer(item, stats.last_failure, repro_dir)
                early, t_first = self.unshrunk
                # the shrunk reproducer replaces the unshrunk one, unless the shrink bound may have cut it
                if early is not None and final is not None and early != final \
                        and time.time() - t_first < 0.9 * (self.shrink_seconds or math.inf):
                    early.unlink(missing_ok=True)
            self.unshrunk = (None, 0.0)
            if self.progress is not None:
                self.progress.tests_done += 1
                self.progress.failed_tests += int(failed)
                self.progress.current = ""
                self.progress.write(force=True)

    def _save_reproducer(self, item, result, repro_dir: str) -> Path | None:
        from ssdcheck_plugin import repro
        try:
            meta = {"host": os.uname().nodename, "device": self.device, "nodeid": item.nodeid}
            path = repro.write(result, _resolve(item.config, repro_dir),
                               impl_spec=_impl_spec(item.config, result.impl), meta=meta)
        except Exception as e:  # a reproducer that cannot be written must not hide the failure itself
            item.add_report_section("call", "ssdcheck", f"could not save a reproducer: {type(e).__name__}: {e}")
            return None
        item.user_properties.append(("ssd_reproducer", str(path)))
        item.add_report_section("call", "ssdcheck reproducer",
                                f"saved {path}\nre-run exactly this check: {repro.replay_command(path)}")
        return path

    def pytest_runtest_logreport(self, report):
        """Per-test verdicts, where the reports arrive (the controller under xdist). A test passes when its
        call passes: one whose call never reported (the run stopped at a time limit while it ran) stays
        "unfinished", not passed."""
        if not self.is_controller:
            return
        t = self.tests.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "unfinished",
                                                  "duration": 0.0, "call_duration": 0.0, "properties": {}})
        t["duration"] = round(t["duration"] + report.duration, 6)
        if report.when == "call":
            t["call_duration"] = round(report.duration, 6)
            for k, v in report.user_properties:
                t["properties"][k] = v
                if k == "ssd_reproducer":
                    self.reproducers.append({"nodeid": report.nodeid, "path": v})
        if report.failed:
            t["outcome"] = "failed" if report.when == "call" else "error"
        elif report.when == "call" and report.passed and t["outcome"] == "unfinished":
            t["outcome"] = "passed"
        elif report.skipped and t["outcome"] in ("unfinished", "passed"):
            t["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"

    # ------------------------------------------------------------------ xdist: workers -> controller
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        out = getattr(node, "workeroutput", {}).get("ssdcheck")
        if out is None:
            return
        self.aggregate.merge_dict(out["aggregate"])
        self.timer_merged = gpu.CompileTimer.merge(self.timer_merged, out["timer"])
        self.devices[node.workerinput["workerid"]] = out["device"]
        self.profile = out.get("profile") or self.profile
        self.worker_cut += out.get("cut", 0)
        self.worker_count += 1
        if out.get("warmup"):
            self.warmups[node.workerinput["workerid"]] = out["warmup"]
        for impl, paths in (out.get("coverage") or {}).items():
            merged = self.coverage_merged.setdefault(impl, {})
            for path, n in paths.items():
                merged[path] = merged.get(path, 0) + n

    # ------------------------------------------------------------------ finish
    def pytest_sessionfinish(self, session, exitstatus):
        config = self.config
        if self.precompiler is not None:
            self.precompiled = self.precompiler.stop()
            precompile.log(self.precompiler.summary())
            self.precompiler = None
        if self.progress is not None:
            self.progress.write(force=True)
        if not self.is_controller:
            config.workeroutput["ssdcheck"] = {"aggregate": self.aggregate.to_dict(), "timer": self.timer.to_dict(),
                                               "device": self.device, "profile": self.profile,
                                               "cut": self.budget.cut if self.budget else 0,
                                               "warmup": self.warmups.get(self.worker_id),
                                               "coverage": self._coverage()}
            return
        status = int(exitstatus)
        baseline = config.getoption("ssd_baseline")
        if baseline:
            from ssdcheck_plugin.meta import toolchain
            base_meta = gate_mod.load_meta(_resolve(config, baseline))
            here = {"toolchain": toolchain()}
            regressions, notes = gate_mod.compare_rows(
                self.aggregate.rows, gate_mod.load_baseline(_resolve(config, baseline)),
                max_growth=config.getoption("ssd_max_growth"), growth_floor=config.getoption("ssd_growth_floor"),
                metrics=_metrics(config))
            self.gate_regressions = regressions
            self.gate = {"baseline": baseline, "max_growth": config.getoption("ssd_max_growth"),
                         "growth_floor": config.getoption("ssd_growth_floor"), "metrics": list(_metrics(config)),
                         "passed": not regressions, "regressions": [r.to_dict() for r in regressions],
                         "notes": notes, "toolchain_changes": gate_mod.toolchain_changes(here, base_meta),
                         "toolchain_line": gate_mod.toolchain_line(here, base_meta)}
            if regressions and status == 0:
                session.exitstatus = status = gate_mod.EXIT_GATE
        path = config.getoption("ssd_report")
        if path:
            self.report_path = _resolve(config, path)
            self.report_path.parent.mkdir(parents=True, exist_ok=True)
            report = self.build_report(status)
            self.report_path.write_text(json.dumps(_finite(report), indent=1, allow_nan=False) + "\n")

    def _coverage(self) -> dict:
        """{implementation: KernelInfo.coverage()} of the implementations this process checked."""
        from kernels.registry import lookup
        out = {}
        for impl in sorted({key[0] for key in self.aggregate.props}):
            try:
                info = lookup(impl)
            except Exception:   # noqa: BLE001 (an implementation that no longer loads has no paths to show)
                continue
            if info.coverage is not None:
                out[impl] = info.coverage()
        return out

    def build_report(self, status: int) -> dict:
        from ssdcheck_plugin import meta
        timer = self.timer_merged if self.worker_count else self.timer.to_dict()
        tests = sorted(self.tests.values(), key=lambda t: t["nodeid"])
        counts: dict[str, int] = {}
        for t in tests:
            counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
        call_s = sum(t["call_duration"] for t in tests)
        m = meta.collect(self.config, profile=self.profile)
        m["xdist"] = ({"workers": self.worker_count, "devices": dict(sorted(self.devices.items()))}
                      if self.worker_count else None)
        m["device"] = self.device
        m["compile_cache"] = self.compile_cache
        # the battery warm-up (warmup.py) per worker: checks run, seconds, the check that raised if one did
        m["battery_warmup"] = dict(sorted(self.warmups.items())) or None
        m["battery_precompile"] = self.precompiled
        m["timing"] = {"session_s": round(time.time() - self.t0, 3), "test_call_s": round(call_s, 3),
                       "cutile_compile": timer,
                       "run_s": round(call_s - timer.get("compile_s", 0.0), 3) if timer.get("measured") else None}
        m["fuzz"] = None if self.budget is None else {"deadline": self.budget.deadline,
                                                      "tests_cut_by_budget": self.budget.cut + self.worker_cut,
                                                      "stall_reports": self._stall_files()}
        examples, failures = self.aggregate.totals()
        deviated, unexpected = self.aggregate.deviation_totals()
        worst, worst_key = self.aggregate.worst()
        data = self.aggregate.to_dict()
        tallies: dict[str, dict] = {}
        for e in data["props"]:
            t = tallies.setdefault(e["impl"], {"examples": 0, "features": {}})
            t["examples"] += e["examples"]
            for f, n in e["tally"].items():
                t["features"][f] = t["features"].get(f, 0) + n
        for t in tallies.values():
            t["fraction"] = {f: round(n / max(t["examples"], 1), 4) for f, n in t["features"].items()}
        return {
            "schema": SCHEMA,
            "meta": m,
            "summary": {"exitstatus": status, "tests": counts, "examples": examples, "failures": failures,
                        "worst_share": num(worst), "worst": list(worst_key) if worst_key else None,
                        "gate_passed": None if self.gate is None else self.gate["passed"],
                        "known_deviations": deviated, "unexpected_passes": unexpected,
                        "strict_deviations": bool(self.config.getoption("ssd_strict_deviations"))},
            "results": data["rows"],
            "properties": data["props"],
            "deviations": data["deviations"],
            "tallies": tallies,
            "coverage": (self.coverage_merged if self.worker_count else self._coverage()) or None,
            "tests": tests,
            "reproducers": self.reproducers,
            "gate": self.gate,
        }

    def _deviation_summary(self, tr, config) -> None:
        """Each declared deviation met: how many examples, how many passed unexpectedly (listed)."""
        deviated, unexpected = self.aggregate.deviation_totals()
        strict = config.getoption("ssd_strict_deviations")
        tr.section("ssdcheck known deviations", yellow=not unexpected, red=bool(unexpected and strict))
        tr.write_line(f"{deviated} example(s) met a declared deviation, {unexpected} passed unexpectedly"
                      f"{' (failures: --ssd-strict-deviations)' if unexpected and strict else ''}")
        for d in self.aggregate.deviations.values():
            tr.write_line(f"{d['impl']} {d['prop']} {','.join(d['outputs'])}: {d['examples']} example(s), "
                          f"{d['unexpected_passes']} unexpected pass(es), {d['below_resolution']} below the "
                          f"check's resolution: {d['reason']} ({d['finding']})")
            for prob in d["unexpected_pass_problems"]:
                tr.write_line(f"  unexpected pass: {prob}")

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if not self.is_controller:
            return
        tr = terminalreporter
        if self.reproducers:
            tr.section("ssdcheck reproducers")
            for r in self.reproducers:
                tr.write_line(f"{r['nodeid']}: python -m ssdcheck replay {r['path']}")
        if self.gate is not None:
            regs, g = self.gate_regressions, self.gate
            tr.section("ssdcheck gate", red=bool(regs), green=not regs)
            tr.write_line(f"baseline {g['baseline']}: max growth {g['max_growth']:g}x on {', '.join(g['metrics'])} "
                          f"(ignoring errors under {100 * g['growth_floor']:g}% of their tolerance)")
            tr.write_line(g["toolchain_line"], yellow=bool(g["toolchain_changes"]))
            for r in regs:
                tr.write_line("REGRESSION " + r.message(g["max_growth"]), red=True)
            for n in g["notes"][:20]:
                tr.write_line("note: " + n)
            if len(g["notes"]) > 20:
                tr.write_line(f"note: ... and {len(g['notes']) - 20} more")
            if regs:
                tr.write_line(f"gate FAILED: {len(regs)} worst error(s) grew by more than {g['max_growth']:g}x "
                              f"(exit {gate_mod.EXIT_GATE} unless tests failed)", red=True)
            else:
                tr.write_line("gate passed: no worst error grew beyond the allowed factor", green=True)
        if self.aggregate.deviations:
            self._deviation_summary(tr, config)
        stalls = self._stall_files()
        if stalls:
            from ssdcheck_plugin.stall import hang_dumps
            n = sum(Path(f).read_text().count("ssdcheck stall: ") for f in stalls)
            hung = sum(hang_dumps(Path(f).read_text()) for f in stalls if ".hang-" in Path(f).name)
            tr.section("ssdcheck stalls", yellow=True)
            tr.write_line(f"{n} example(s) overran their time share by more than "
                          f"{config.getoption('ssd_stall_seconds'):g} s, {hung} ran past "
                          f"{config.getoption('ssd_hang_seconds'):g} s; where each waited: {', '.join(stalls)}")
        if self.report_path is not None:
            examples, failures = self.aggregate.totals()
            worst, key = self.aggregate.worst()
            where = f" at {' '.join(key)}" if key else ""
            tr.write_line(f"ssdcheck report: {self.report_path} ({examples} examples, {failures} failing, "
                          f"worst share {'inf' if math.isinf(worst) else f'{worst:.3g}'}{where})")
