"""ssdcheck's pytest plugin: the JSON report and merge gate, time-budgeted fuzzing, GPU pinning.

Registered from conftest.py (`pytest_plugins = ["ssdcheck_plugin.plugin"]`). The modules:

    aggregate.py  the report sink: per (impl, prop, output, dtype) counts and worst errors
    meta.py       run metadata (host, GPU, driver, versions, profile, command line)
    gate.py       `--ssd-baseline` / `--ssd-max-growth`: fail when a worst error grows
    gpu.py        xdist worker -> GPU pinning, `-n auto` = GPU count, cuTile compile cache and timer
    fuzzing.py    `--ssd-fuzz-seconds`: a time budget instead of an example count; live progress
    repro.py      self-contained reproducer files and their replay
    compare.py    diff the verdicts of two reports (lab/scripts/gpu_ci_compare.sh)

docs/report-schema.md describes the JSON; docs/jobs.md the three jobs it serves.
"""
