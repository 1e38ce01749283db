"""The GPU job scripts take `--out DIR` and `--help`, every other setting from the environment; a
wrong argument must not start a run, and each script's first comment line is its usage.

On a GPU host a mistaken `--help` that runs the whole script costs minutes of GPU time (it happened
on the H200: 240 s lost to `gpu_peers.sh --help`, 2026-11-30).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.sh"))
JOB_SCRIPTS = [s for s in SCRIPTS if not s.name.startswith("_")]
TAKES_ARGS = {"gpu_ci_compare.sh"}   # other arguments are its pytest selection


def _run(script, tmp_path, *args):
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=20,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})


@pytest.mark.parametrize("script", JOB_SCRIPTS, ids=lambda s: s.name)
def test_help_prints_the_usage_and_runs_nothing(script, tmp_path):
    proc = _run(script, tmp_path, "--help", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith("#") for line in lines) and len(lines) >= 3
    assert lines[0].startswith(f"# usage: scripts/{script.name} [--out DIR]"), lines[0]
    assert not (tmp_path / "out").exists()    # nothing ran: no output folder


@pytest.mark.parametrize("script", [s for s in JOB_SCRIPTS if s.name not in TAKES_ARGS], ids=lambda s: s.name)
@pytest.mark.parametrize("args", [("--bogus",), ("--out",), ("--out", "")], ids=["unknown", "no-dir", "empty-dir"])
def test_a_wrong_argument_says_what_was_expected_and_runs_nothing(script, args, tmp_path):
    proc = _run(script, tmp_path, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--out DIR" in proc.stderr.splitlines()[0], proc.stderr
    assert list(tmp_path.iterdir()) == []     # nothing ran, nothing written


def test_no_script_reads_an_output_folder_from_the_environment():
    """--out DIR is the one way to say where a job writes (the scripts once read it from a variable)."""
    import re
    for script in SCRIPTS:
        assert not re.search(r"\$\{?OU[T]\b", script.read_text()), script.name


def test_the_race_script_packs_every_step_into_one_archive_without_a_gpu(tmp_path):
    """gpu_race.sh on a machine without a GPU: every step fails fast (the race needs CUDA), and still
    each one's status is in summary.txt and its log in race.tar.gz, next to the tuning copy: 3 files
    in all, however many steps ran."""
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": f"/tmp/site:{root}",       # as if setup.sh had run: do not source the bundle
           "N_BUDGET_S": "5", "TG_BUDGET_S": "5", "STAGES_S": "30",
           "CUDA_VISIBLE_DEVICES": "", **{k: v for k, v in os.environ.items() if k.startswith("LD_")}}
    proc = subprocess.run(["bash", str(root / "scripts" / "gpu_race.sh"), "--out", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["race.tar.gz", "summary.txt", "tuning.json"]
    steps = [line.split()[0] for line in (out / "summary.txt").read_text().splitlines() if " rc=" in line]
    assert steps == ["n64", "n128", "n256", "tg64", "tg128", "tg256", "stages", "merge"]
    with tarfile.open(out / "race.tar.gz") as tar:
        logs = {Path(n).name for n in tar.getnames() if n.endswith(".log")}
        assert logs == {f"{s}.log" for s in steps}
        assert "needs a CUDA GPU" in tar.extractfile("work/n64.log").read().decode()


def test_the_race_archive_keeps_the_finished_steps_when_a_limit_cuts_the_script(tmp_path):
    """On the H200 (reports/2026-12-01-fact-scan.md) an outer `timeout` cut gpu_race.sh in its third
    group and the finished groups' JSONs, three folders deep, were lost. The archive is now rewritten after every step. A fake
    python3 finishes the first step at once and hangs in the second; the cut leaves the first's log."""
    root = Path(__file__).resolve().parents[1]
    out, bin_dir = tmp_path / "out", tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/bash\ncase "$*" in *n128*) exec sleep 6 ;; esac\necho "first step done"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": "/tmp/site",
           "N_GROUPS": "n64 n128", "TG_GROUPS": "", "STAGES_S": "0"}
    proc = subprocess.run(["timeout", "3", "bash", str(root / "scripts" / "gpu_race.sh"), "--out", str(out)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 124, proc.stdout + proc.stderr
    with tarfile.open(out / "race.tar.gz") as tar:
        assert tar.extractfile("work/n64.log").read().decode() == "first step done\n"
    assert (out / "summary.txt").read_text().splitlines() == ["n64 rc=0"]
