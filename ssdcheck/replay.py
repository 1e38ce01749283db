"""`ssdcheck replay FILE`: re-run exactly the check a reproducer file saved (ssdcheck_plugin/repro.py)."""
from __future__ import annotations

import argparse
import sys

from ssdcheck.paths import absolute_impl

EXIT_UNREADABLE = 4

DESCRIPTION = """\
Re-run exactly the check saved in a reproducer file (written by `ssdcheck fuzz` or by
`ssdcheck test --ssd-repro-dir DIR`): the same property on the saved input tensors, on the recorded
implementation or on another one (--impl), with no Hypothesis and no test harness."""
EPILOG = """\
prints: the property, implementation and problem; whether the tensors regenerated from the seed
match the saved ones; per output ok/FAILED with its max_abs and share of the tolerance, beside the
recorded values; the pytest command that re-runs it through the suite; then PASSED or FAILED (with
the failure report).

exit codes:
  0  the check passes now (or does not apply to this implementation)
  1  it still fails
  4  the file cannot be read, or --impl cannot be looked up"""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ssdcheck replay", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a .pt reproducer file")
    ap.add_argument("--impl", default=None, metavar="SPEC",
                    help="run it on this implementation instead of the recorded one (a registered name, "
                         "package.module:function or path/to/file.py:function), e.g. your fixed revision")
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from ssdcheck_plugin.repro import replay  # noqa: PLC0415 (imports torch: not for --help)
    try:
        return replay(args.file, absolute_impl(args.impl) if args.impl else None)
    except (OSError, ValueError) as e:
        print(f"ssdcheck replay: {e}", file=sys.stderr)
        return EXIT_UNREADABLE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
