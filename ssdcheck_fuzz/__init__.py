"""Fuzz a kernel revision for a time budget; replay the failures it saved.

    python -m ssdcheck_fuzz --impl NAME|module:function --minutes 10 [--props causality,matches_oracle]
    python -m ssdcheck_fuzz replay FILE [--impl NAME|module:function]

See docs/jobs.md ("Fuzz a new kernel revision") and ssdcheck_fuzz/cli.py.
"""
