"""`python -m ssdcheck`: the same as the `ssdcheck` console script."""
import sys

from ssdcheck.cli import main

sys.exit(main())
