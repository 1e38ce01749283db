"""`ssdcheck gate REPORT --baseline BASELINE`: the merge gate on two report files.

The same comparison as `ssdcheck test ... --ssd-baseline BASELINE` (ssdcheck_plugin/gate.py), run on a
report written earlier, so that the test run and the gate can be separate CI steps.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_FAILED, EXIT_USAGE = 1, 4

DESCRIPTION = """\
Compare a report (--ssd-report of this run) with a baseline report (main's): a row (implementation,
property, output, dtype) regresses when its worst error grew by more than --max-growth over the
baseline's, unless it still uses less than --growth-floor of its tolerance. A precision regression
is caught before it crosses the tolerance."""


def build_parser() -> argparse.ArgumentParser:
    from ssdcheck_plugin.gate import EXIT_GATE  # noqa: PLC0415
    ap = argparse.ArgumentParser(
        prog="ssdcheck gate", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"""\
prints: the toolchain line (tileiras, ptxas, cuda-tile, torch, Triton: "toolchain DIFFERS from the
baseline's: tileiras 13.4.92 -> 13.5.37" when they differ; the gate is the same either way), one REGRESSION line per grown worst error (old -> new, the growth, the share of the
tolerance it uses now, the problem), notes on rows present on one side only, then the verdict.

exit codes:
  0  gate passed: the run passed and no worst error grew beyond the factor
  1  the run itself failed (its report records failing examples or tests)
  4  a report cannot be read, or a bad option
  {EXIT_GATE}  the run passed, but a worst error grew by more than --max-growth

example:
  ssdcheck gate out/gpu.json --baseline baseline/gpu.json --max-growth 2""")
    ap.add_argument("report", help="this run's report (ssdcheck test ... --ssd-report PATH)")
    ap.add_argument("--baseline", required=True, metavar="PATH", help="the baseline report (main's)")
    ap.add_argument("--max-growth", type=float, default=2.0, metavar="FACTOR",
                    help="allowed growth of a worst error over the baseline (default 2)")
    ap.add_argument("--growth-floor", type=float, default=0.01, metavar="SHARE",
                    help="ignore growth of errors that use less than SHARE of their tolerance (default 0.01)")
    ap.add_argument("--metrics", default="max_abs,normwise", metavar="LIST",
                    help="comma-separated metrics watched: max_abs, normwise, share (default max_abs,normwise)")
    return ap


def run_failed(path: str) -> str | None:
    """Why the run of this report failed (failing examples or tests), or None."""
    data = json.loads(Path(path).read_text())
    summary = data.get("summary", {})
    failed = sum(n for outcome, n in summary.get("tests", {}).items() if outcome in ("failed", "error"))
    if summary.get("failures") or failed:
        return f"{summary.get('failures', 0)} failing example(s), {failed} failed test(s)"
    return None


def main(argv: list[str]) -> int:
    from ssdcheck_plugin.gate import EXIT_GATE, compare_rows, load_baseline, load_meta, toolchain_line  # noqa: PLC0415
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.max_growth <= 0:
        ap.error(f"--max-growth: expected a positive factor, got {args.max_growth:g}")
    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    try:
        current = load_baseline(args.report, what="report")
        baseline = load_baseline(args.baseline, what="--baseline")
        regressions, notes = compare_rows(current, baseline, max_growth=args.max_growth,
                                          growth_floor=args.growth_floor, metrics=metrics)
    except ValueError as e:
        print(f"ssdcheck gate: {e.args[0].replace('--ssd-gate-metrics', '--metrics')}", file=sys.stderr)
        return EXIT_USAGE
    print(f"ssdcheck gate: {args.report} against {args.baseline}: max growth {args.max_growth:g}x on "
          f"{', '.join(metrics)} (ignoring errors under {100 * args.growth_floor:g}% of their tolerance)")
    print(toolchain_line(load_meta(args.report), load_meta(args.baseline)))
    for r in regressions:
        print("REGRESSION " + r.message(args.max_growth))
    for n in notes:
        print("note: " + n)
    failed = run_failed(args.report)
    if failed:
        print(f"the run itself FAILED ({failed}): exit {EXIT_FAILED}")
        return EXIT_FAILED
    if regressions:
        print(f"gate FAILED: {len(regressions)} worst error(s) grew by more than {args.max_growth:g}x "
              f"(exit {EXIT_GATE})")
        return EXIT_GATE
    print(f"gate passed: {len(current)} rows, no worst error grew beyond {args.max_growth:g}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
