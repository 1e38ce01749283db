"""Alias of `ssdcheck report FILE` (ssdcheck/summary.py), for the GPU job scripts:

    python3 scripts/summarize_report.py out/report.json
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ssdcheck.summary import main  # noqa: E402 (after the path)

sys.exit(main(sys.argv[1:]))
