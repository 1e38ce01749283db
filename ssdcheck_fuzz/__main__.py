"""Alias: `python -m ssdcheck_fuzz ARGS` is `ssdcheck fuzz ARGS`, and `... replay FILE` is `ssdcheck replay FILE`."""
import sys

from ssdcheck.cli import main

args = sys.argv[1:]
sys.exit(main(args if args[:1] == ["replay"] else ["fuzz", *args]))
