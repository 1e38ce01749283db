"""`ssdcheck test`: the property suite against an implementation, from any directory.

pytest runs in this process with the repository as its rootdir (its conftest.py, pyproject.toml and
tests/), while relative paths on the command line (--ssd-report, --junitxml) stay relative to where
you are, and your directory is on sys.path so `--impl mypkg.ssd:forward` imports your revision.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ssdcheck.paths import PROPERTY_TESTS, ROOT, absolute_impl

EXIT_USAGE = 4
# test paths on the command line taken inside the suite's folder rather than the caller's
SUITE_PREFIXES = ("tests/", "tests\\", "lab/tests/", "lab\\tests\\")


def suite_folders() -> list[Path]:
    """What `--all` runs: tests/, and the lab's tests where the lab is there (a checkout, not a wheel)."""
    return [p for p in (ROOT / "tests", ROOT / "lab" / "tests") if p.is_dir()]

DESCRIPTION = """\
Run ssdcheck's property tests (tests/test_properties.py: every invariant and the float64 oracle
comparison, on problems Hypothesis draws from what the implementation declares) against --impl.
pytest runs underneath: every option not listed here goes to pytest unchanged (-k, -x, -n 2,
--hypothesis-profile=gpu, --ssd-report out.json, --ssd-baseline main.json, --junitxml ...).
Test paths starting with tests/ (or lab/tests/) are taken inside the suite (e.g. tests/test_oracles.py).
pytest's own options, and the ssdcheck plugin's (--ssd-*): python3 -m pytest --help in the repository."""

EPILOG = """\
prints: pytest's output; a failing example reads like torch.testing.assert_close (mismatched
elements, worst error and where, the budget) and ends with a command that re-runs just that
problem; with --ssd-report a one-line summary of the report; with --ssd-baseline an
"ssdcheck gate" section.

exit codes: pytest's, and the gate's 6
  0  every test passed (and the gate, if any)
  1  a property failed
  2  interrupted
  3  pytest internal error
  4  usage error (an unknown --impl, an unreadable --ssd-baseline, a bad option)
  5  no tests collected (a -k that matches nothing)
  6  all tests passed, but a worst error grew more than --ssd-max-growth over --ssd-baseline

examples:
  ssdcheck test --impl torch-ref --hypothesis-profile=cpu
  ssdcheck test --impl mypkg.ssd:forward -k matches_oracle -x
  ssdcheck test --impl path/to/ssd.py:forward --hypothesis-profile=gpu -n auto --ssd-report out/gpu.json
  ssdcheck test --all -n 2 --hypothesis-profile=cpu          # the whole CPU suite, as CI runs it"""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ssdcheck test", description=DESCRIPTION, epilog=EPILOG, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", action="append", metavar="SPEC",
                    help="implementation under test (repeatable): a registered name (torch-ref, cutile, tilegym, "
                         "mamba-ssm), package.module:function, or path/to/file.py:function; default torch-ref, "
                         "plus cutile where a GPU is visible")
    ap.add_argument("--all", action="store_true",
                    help="run the whole suite (tests/: oracles, strategies, tooling, mutants too, and lab/tests/ in a "
                         "checkout), not only the property tests")
    return ap


def pytest_args(args: argparse.Namespace, passthrough: list[str], cwd: Path) -> list[str]:
    """The pytest command line: repository rootdir and ini, the tests, the implementations, the rest."""
    tests, rest = [], []
    for a in passthrough:
        (tests if a.startswith(SUITE_PREFIXES) else rest).append(a)
    tests = [str(ROOT / t) for t in tests] or ([str(p) for p in suite_folders()] if args.all else [str(PROPERTY_TESTS)])
    cmd = ["--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), *tests]
    for spec in args.impl or []:
        cmd += ["--impl", absolute_impl(spec, cwd)]
    if args.all and _workers(rest) and not any(a == "--dist" or a.startswith("--dist=") for a in rest):
        # the whole suite's tests differ in length 1000-fold (a compile of 40 s beside checks of 10 ms):
        # idle workers take queued tests from busy ones, where the default hands each its share up
        # front (a 2-core CPU run: 587 s against 686 s, 2026-12-02)
        cmd += ["--dist", "worksteal"]
    return cmd + rest


def _workers(rest: list[str]) -> bool:
    """Whether pytest-xdist workers are asked for (-n N, -nN, --numprocesses), other than -n 0."""
    for i, a in enumerate(rest):
        if a in ("-n", "--numprocesses"):
            return i + 1 < len(rest) and rest[i + 1] != "0"
        if a.startswith(("--numprocesses=", "-n")) and a not in ("-n0", "--numprocesses=0"):
            return True
    return False


def check_revisions(specs: list[str]) -> str | None:
    """Why a revision given by path cannot be looked up (a typo, an import error), or None. Registered
    names are left to the tests: a peer that is not installed skips there with its reason."""
    from kernels.registry import lookup, registered_names  # noqa: PLC0415 (imports torch)
    for spec in specs:
        if spec in registered_names():
            continue
        try:
            lookup(absolute_impl(spec))
        except ValueError as e:
            return f"--impl {spec}: {e}"
    return None


def main(argv: list[str]) -> int:
    args, passthrough = build_parser().parse_known_args(argv)
    cmd = pytest_args(args, passthrough, Path.cwd())
    problem = check_revisions(args.impl or [])
    if problem:
        print(f"ssdcheck test: {problem}", file=sys.stderr)
        return EXIT_USAGE
    import pytest  # noqa: PLC0415 (not needed for --help)
    return int(pytest.main(cmd))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
