"""`ssdcheck mutants [options]`: the mutation runner (mutation/run.py), every option passed to it."""
from __future__ import annotations

import argparse
import contextlib
import io
import sys

DESCRIPTION = """\
Mutation testing: apply each realistic kernel bug of a catalog (mutation/catalog_<name>.py) to a
fresh copy of the repository, run the property suite against it, and report which mutants were
killed, by which property, after how many examples and seconds. The unmutated tree runs first as
a baseline. Every option goes to the runner (mutation/run.py); its options follow."""
EPILOG = """\
prints: progress per mutant on stderr, then a markdown table (mutant, status, the property that
killed it, examples, seconds) and the mutation score (killed / (killed + survived), declared
equivalent mutants left out); --json/--md keep it.

exit codes:
  0  every non-equivalent mutant killed (--compile-only: every mutant compiles)
  1  a mutant survived, was invalid, or a mutant declared equivalent was killed
  2  the baseline fails (or does not compile): the results mean nothing

examples:
  ssdcheck mutants --catalog torch_ref                       # on the CPU
  ssdcheck mutants --catalog cutile --budget-s 300 --jobs 4  # GPU host
  ssdcheck mutants --list"""


def build_parser() -> argparse.ArgumentParser:
    """The runner's own parser (mutation/run.py), presented under this command's name."""
    from mutation import run  # noqa: PLC0415
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        run.main(["--help"])
    runner_help = text.getvalue().replace("python -m mutation.run", "ssdcheck mutants")
    ap = argparse.ArgumentParser(prog="ssdcheck mutants", add_help=False, description=DESCRIPTION,
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.runner_help = runner_help
    return ap


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        ap = build_parser()
        print(f"{ap.format_usage().strip()} [runner options]\n\n{DESCRIPTION}\n\nrunner options:\n"
              f"{ap.runner_help.split('options:', 1)[-1].rstrip()}\n\n{EPILOG}")
        return 0
    from mutation.run import main as run_main  # noqa: PLC0415
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
