"""`ssdcheck SUBCOMMAND ...`: the suite's jobs behind one command (also `python -m ssdcheck`).

Each subcommand is a module of this package with `build_parser()` and `main(argv) -> exit status`;
`ssdcheck SUBCOMMAND --help` says what it does, what it prints and its exit codes.
"""
from __future__ import annotations

import importlib
import sys

# name -> module; the order is the order of `ssdcheck --help`
SUBCOMMANDS = {
    "test": "ssdcheck.suite",
    "fuzz": "ssdcheck.fuzz",
    "replay": "ssdcheck.replay",
    "gate": "ssdcheck.gate",
    "report": "ssdcheck.summary",
    "mutants": "ssdcheck.mutants",
}
# shown by `ssdcheck --help` without importing the subcommands (the test and fuzz ones pull in torch)
SUMMARIES = {
    "test": "run the property suite against --impl (pytest underneath; other options go to pytest)",
    "fuzz": "fuzz an implementation for a time budget, with a live progress line and reproducer files",
    "replay": "re-run exactly the check saved in a reproducer file",
    "gate": "compare a report with a baseline report: exit 6 when a worst error grew too much",
    "report": "summarize a report file as markdown",
    "mutants": "mutation testing: run the suite against each planted bug of a catalog",
}
EXIT_USAGE = 4      # pytest's code for a usage error; every subcommand uses it


def usage() -> str:
    lines = ["usage: ssdcheck SUBCOMMAND [options]   (or python -m ssdcheck ...)", "",
             "Verification suite for Mamba-2 SSD forward kernels: float64 oracles, invariants, Hypothesis.", "",
             "subcommands:"]
    lines += [f"  {name:<9} {SUMMARIES[name]}" for name in SUBCOMMANDS]
    lines += ["", "ssdcheck SUBCOMMAND --help: what it does, what it prints, its exit codes",
              "(all of them: docs/report-schema.md)."]
    return "\n".join(lines)


def load(name: str):
    return importlib.import_module(SUBCOMMANDS[name])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else EXIT_USAGE
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"ssdcheck: unknown subcommand {name!r}; expected one of {', '.join(SUBCOMMANDS)}\n\n{usage()}",
              file=sys.stderr)
        return EXIT_USAGE
    from ssdcheck.paths import make_importable
    make_importable()
    try:
        return load(name).main(rest)
    except SystemExit as e:          # argparse: --help exits 0, a usage error 2 (ours is 4); or a message
        if isinstance(e.code, str):
            print(f"ssdcheck {name}: {e.code}", file=sys.stderr)
            return EXIT_USAGE
        code = 0 if e.code is None else e.code
        return EXIT_USAGE if code == 2 else code
