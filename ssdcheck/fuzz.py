"""`ssdcheck fuzz`: fuzz a kernel revision for a time budget (replay what failed: `ssdcheck replay`).

Fuzzing runs the property tests (tests/test_properties.py) in one pytest process with the `fuzz`
Hypothesis profile and ssdcheck's plugin options:

    --ssd-fuzz-until EPOCH       each test gets an equal share of the time left (ssdcheck_plugin/fuzzing.py)
    --ssd-hypothesis-db DIR      failing examples are kept here and replayed first on the next run
    --ssd-repro-dir OUT/failures every failing check is saved as a self-contained file
    --ssd-progress OUT/progress  live counters; this driver turns them into a progress line
    --ssd-report OUT/report.json --junitxml OUT/junit.xml

pytest runs in a child process so that a kernel that crashes the process (an illegal address on
the GPU, a segfault) ends the run with a message instead of taking the driver down; its output goes
to OUT/pytest.log. Exit status: pytest's (0 nothing failed, 1 a property failed, 2 interrupted, ...)
or 128+N when the child died of signal N. `python -m ssdcheck_fuzz` is an alias of this command.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from ssdcheck.paths import PROPERTY_TESTS, ROOT, absolute_impl, state_root

DEFAULT_DB = ".ssdcheck-cache/hypothesis"
TEST_FILE = str(PROPERTY_TESTS.relative_to(ROOT))
DESCRIPTION = """\
Fuzz an SSD forward implementation with ssdcheck's property tests for a time budget, split evenly
over the selected tests, with the fuzz Hypothesis profile (thousands of examples, steered towards
the largest share of the error budget). Failing examples are kept in an example database and
replayed first next time. Arguments after -- go to pytest."""
EPILOG = """\
prints: the pytest command, a live progress line (examples, properties, tests done, failures, the
worst share of the tolerance so far and where; every 30 s when stderr is not a terminal), then a
table per property (examples, failing, worst share), the failing tests, one `python -m ssdcheck replay FILE`
line per reproducer, the feature tallies and where the report, junit and log are.

exit codes:
  0      no property failed
  1      a property failed (its reproducer is under OUT/failures)
  2      interrupted (Ctrl-C, or a run still shrinking --grace seconds past the budget)
  3-5    pytest internal error, usage error, no tests collected
  128+N  the pytest process died of signal N (e.g. 139: a segfault); the crashing example is not saved

examples:
  ssdcheck fuzz --impl mypkg.ssd:forward --minutes 10
  ssdcheck fuzz --impl cutile --minutes 60 --props matches_oracle,seq_idx_packing -n auto --out out/fuzz"""


# ---------------------------------------------------------------------------------------- fuzz

def _test_names(test_file: Path) -> list[str]:
    return re.findall(r"^def (test_\w+)\(", test_file.read_text(), flags=re.M)


def select_tests(props: str | None, test_file: Path, include_slow: bool) -> list[str]:
    """Node ids for --props ("causality,prop_matches_oracle,test_linearity"); all tests when None."""
    names = _test_names(test_file)
    if not props:
        return []
    chosen = []
    for p in (s.strip() for s in props.split(",")):
        if not p:
            continue
        base = p.removeprefix("prop_").removeprefix("test_")
        test = f"test_{base}"
        if test not in names:
            known = ", ".join(n.removeprefix("test_") for n in names)
            raise SystemExit(f"--props: no property test for {p!r}; known: {known}")
        chosen.append(test)
        if include_slow:
            chosen += [n for n in names if n.startswith(test + "_long")]
    rel = test_file.relative_to(ROOT) if test_file.is_relative_to(ROOT) else test_file
    return [f"{rel}::{n}" for n in dict.fromkeys(chosen)]


def count_db_entries(db: Path) -> int:
    if not db.is_dir():
        return 0
    return sum(1 for p in db.rglob("*") if p.is_file())


def _fmt_time(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 60:02d}:{s % 60:02d}"


def progress_line(state: dict, elapsed: float, budget: float) -> str:
    share = state["worst_share"]
    share_s = "inf" if math.isinf(share) else f"{share:.3g}"
    where = f" ({state['worst_where'].strip()})" if state["worst_where"].strip() else ""
    now = f" | now {', '.join(c.split('::')[-1] for c in state['current'])}" if state["current"] else ""
    return (f"fuzz {_fmt_time(elapsed)}/{_fmt_time(budget)} | examples {state['examples']} | "
            f"properties {state['props']} | tests {state['tests_done']}/{state['tests_total'] or '?'} | "
            f"failures {state['failed_tests']} tests ({state['failures']} examples) | "
            f"worst share {share_s}{where}{now}")


def build_command(args, out: Path, db: Path, until: float, tests: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *(tests or [TEST_FILE])]
    for impl in args.impl:
        cmd += ["--impl", impl]
    cmd += [f"--hypothesis-profile={args.profile}", "--ssd-fuzz-until", f"{until:.3f}",
            "--ssd-hypothesis-db", str(db), "--ssd-repro-dir", str(out / "failures"),
            "--ssd-progress", str(out / "progress.json"), "--ssd-report", str(out / "report.json"),
            f"--junitxml={out / 'junit.xml'}", "-p", "no:cacheprovider", "-rfE", "--tb=short"]
    if not args.slow:
        cmd += ["-m", "not slow"]
    if args.workers:
        cmd += ["-n", str(args.workers)]
    return cmd + list(args.pytest_args)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ssdcheck fuzz", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", action="append", required=True,
                    help="implementation under test (repeatable): a registered name, package.module:function "
                         "or path/to/file.py:function")
    budget = ap.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, default=None, help="time budget (default 10)")
    budget.add_argument("--seconds", type=float, default=None, help="time budget in seconds")
    ap.add_argument("--props", default=None,
                    help="comma-separated properties, e.g. causality,matches_oracle (default: all)")
    ap.add_argument("--slow", action="store_true", help="include tests marked slow (64K sequences)")
    ap.add_argument("--out", default=None,
                    help="where the report, junit, log and failures go (default .ssdcheck-cache/fuzz/<time>-<impl>)")
    ap.add_argument("--db", default=None, help=f"Hypothesis example database (default {DEFAULT_DB})")
    ap.add_argument("-n", "--workers", default=None,
                    help="pytest-xdist workers (`auto` on a GPU host: one per CPU core, spread over the GPUs)")
    ap.add_argument("--profile", default="fuzz", help="Hypothesis profile (default fuzz)")
    ap.add_argument("--grace", type=float, default=None,
                    help="seconds a failure may keep shrinking past the budget before the run is "
                         "interrupted (default max(60, budget/4))")
    return ap


def main(argv: list[str]) -> int:
    pytest_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, pytest_args = argv[:i], argv[i + 1:]
    ap = build_parser()
    args = ap.parse_args(argv)
    args.pytest_args = pytest_args
    seconds = args.seconds if args.seconds is not None else 60.0 * (args.minutes if args.minutes is not None else 10.0)
    if seconds <= 0:
        ap.error("the time budget must be positive")
    grace = args.grace if args.grace is not None else max(60.0, seconds / 4)

    cwd = Path.cwd()
    args.impl = [absolute_impl(spec, cwd) for spec in args.impl]     # the child runs in ROOT
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", "+".join(args.impl))[:60]
    out = Path(args.out) if args.out else state_root(cwd) / ".ssdcheck-cache" / "fuzz" / f"{stamp}-{slug}"
    out = out if out.is_absolute() else cwd / out
    db = Path(args.db) if args.db else state_root(cwd) / DEFAULT_DB
    db = db if db.is_absolute() else cwd / db
    out.mkdir(parents=True, exist_ok=True)
    tests = select_tests(args.props, ROOT / TEST_FILE, args.slow)

    t0 = time.time()
    until = t0 + seconds
    cmd = build_command(args, out, db, until, tests)
    env = dict(os.environ)          # its PYTHONPATH has ROOT and cwd (ssdcheck.paths.make_importable)
    env.pop("HYPOTHESIS_PROFILE", None)
    saved = count_db_entries(db)
    print(f"fuzzing {', '.join(args.impl)} for {_fmt_time(seconds)} "
          f"({'all property tests' if not tests else ', '.join(t.split('::')[-1] for t in tests)})")
    print(f"  example database {db} ({saved} saved entries, replayed first)")
    print(f"  output {out}  (pytest log: {out / 'pytest.log'})")
    print(f"  command: {shlex.join(cmd)}", flush=True)

    tty = sys.stderr.isatty()
    last_print = 0.0
    interrupted_at = None
    with open(out / "pytest.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while proc.poll() is None:
                time.sleep(0.5)
                now = time.time()
                from ssdcheck_plugin.fuzzing import read_progress
                line = progress_line(read_progress(out / "progress.json"), now - t0, seconds)
                if tty:
                    sys.stderr.write("\r\033[K" + line[:_width()])
                    sys.stderr.flush()
                elif now - last_print >= 30:
                    print(line, file=sys.stderr, flush=True)
                    last_print = now
                if interrupted_at is None and now > until + grace:
                    print(f"\nstill running {grace:.0f}s past the budget (shrinking a failure?): interrupting",
                          file=sys.stderr)
                    proc.send_signal(signal.SIGINT)
                    interrupted_at = now
                elif interrupted_at is not None and now > interrupted_at + 60:
                    proc.kill()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    rc = proc.wait()
    from ssdcheck_plugin.fuzzing import read_progress
    final = read_progress(out / "progress.json")
    if tty:
        sys.stderr.write("\r\033[K")
    print(progress_line(final, time.time() - t0, seconds), file=sys.stderr)
    return summarize(out, rc, final)


def _width() -> int:
    try:
        return max(40, os.get_terminal_size(sys.stderr.fileno()).columns - 1)
    except OSError:
        return 200


def summarize(out: Path, rc: int, progress: dict) -> int:
    report_path = out / "report.json"
    if rc < 0:
        sig = -rc
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        running = ", ".join(progress["current"]) or "unknown test"
        print(f"the pytest process died of {name} while running {running}; the example that crashed it "
              f"was not saved (see {out / 'pytest.log'})")
        return 128 + sig
    if not report_path.exists():
        print(f"no report was written (pytest exit {rc}); see {out / 'pytest.log'}")
        return rc or 3
    report = json.loads(report_path.read_text())
    w = max([14, *(len(e["impl"]) for e in report["properties"])])      # a file revision's name is its path
    print(f"\n{'property':40s} {'impl':{w}s} {'examples':>9s} {'failing':>8s} {'worst share':>12s}")
    for e in report["properties"]:
        print(f"{e['prop']:40s} {e['impl']:{w}s} {e['examples']:9d} {e['failures']:8d} "
              f"{_num(e['worst_share']):>12s}")
    failed = [t for t in report["tests"] if t["outcome"] in ("failed", "error")]
    for t in failed:
        print(f"FAILED {t['nodeid']}")
    if report["reproducers"]:
        print("\nreproducers (each re-runs exactly one failing check):")
        for r in report["reproducers"]:
            print(f"  python -m ssdcheck replay {r['path']}")
    tally = report.get("tallies", {})
    for impl, t in tally.items():
        fr = ", ".join(f"{f} {100 * v:.0f}%" for f, v in t["fraction"].items())
        print(f"\n{impl}: {t['examples']} examples; features: {fr}")
    print(f"\nreport {report_path}\njunit {out / 'junit.xml'}\nlog {out / 'pytest.log'}")
    if rc == 0:
        print("no property failed")
    return rc


def _num(v) -> str:
    if isinstance(v, str):
        return v
    return f"{v:.3g}"
