import sys

from ssdcheck_fuzz.cli import main

sys.exit(main())
