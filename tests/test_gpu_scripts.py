"""The GPU scripts take every setting from the environment; an argument must not start a run.

On a lent GPU a mistaken `--help` that runs the whole script costs minutes of a 30-minute lease
(it happened: session 10 lost 240 s to `gpu_peers.sh --help`).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("gpu_*.sh"))
TAKES_ARGS = {"gpu_ci_compare.sh"}   # its arguments are pytest selections


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name not in TAKES_ARGS], ids=lambda s: s.name)
def test_an_argument_prints_the_header_and_runs_nothing(script, tmp_path):
    proc = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=20,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith("#") for line in lines) and len(lines) >= 3
    assert not (tmp_path / "out").exists()    # nothing ran: no output folder
