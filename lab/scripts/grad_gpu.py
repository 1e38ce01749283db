"""The gradient properties against a peer's backward on a GPU host, within one time budget.

    python3 lab/scripts/grad_gpu.py --impl tilegym --out DIR             # ~9.5 min: 9 properties, up to 200 examples each
    python3 lab/scripts/grad_gpu.py --impl mamba-ssm --out DIR --budget-s 300 -k matches_oracle

Run from the repository root after `source .gpu-bundle/setup.sh` (the peers on PYTHONPATH). Runs
`pytest tests/test_gradients.py --impl IMPL --hypothesis-profile=gpu` with one xdist worker per core,
TileGym's autotune off and mamba_ssm's cheapest deterministic config (as the forward's correctness
runs), and each test's share of the budget (`--ssd-fuzz-seconds`: a test past its share stops
drawing and passes with the examples it ran, which the summary counts). Writes into DIR:
environment.txt, pytest.log (failures with their `--ssd-grad-problem` repro lines and Hypothesis
statistics), results.jsonl, report.json (`--ssd-report`) and summary.txt (one line per test:
status, seconds, examples, worst share of the tolerance).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMPLS = ("tilegym", "mamba-ssm", "torch-ref")
# seconds kept between the tests' fuzz budget and the run's hard limit: worker start-up and collection
# come before the first test's clock starts, the report after the last (on the H200, 2026-12-02, 30 s
# was not enough: the TileGym run's last tests ended at the limit and report.json was never written)
FINISH_S = 75


def _environment() -> str:
    lines = []
    try:
        lines.append(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                     "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        lines.append(f"nvidia-smi: {e}")
    import importlib.metadata as md
    for dist in ("torch", "triton", "cuda-tile", "tilegym", "hypothesis", "pytest"):
        try:
            lines.append(f"{dist} {md.version(dist)}")
        except md.PackageNotFoundError:
            lines.append(f"{dist} MISSING")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", required=True, choices=IMPLS, help="implementation whose backward is under test")
    ap.add_argument("--out", required=True, type=Path, help="folder for the logs and reports")
    ap.add_argument("--budget-s", type=int, default=570, help="wall-clock budget of the whole run (default 570)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="pytest-xdist workers")
    ap.add_argument("--profile", default="gpu", help="Hypothesis profile (gpu: 200 examples per property)")
    ap.add_argument("-k", dest="k", default=None, help="pytest -k selection of the properties")
    args = ap.parse_args(argv)
    if args.budget_s < 120:
        ap.error(f"--budget-s: expected at least 120 (startup, compiles, the summary), got {args.budget_s}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    (out / "environment.txt").write_text(_environment())
    for name in ("results.jsonl", "report.json", "summary.txt"):
        (out / name).unlink(missing_ok=True)
    left = args.budget_s - int(time.time() - t0) - 40
    env = {**os.environ, "TILEGYM_DISABLE_AUTOTUNE": "1", "MAMBA_DETERMINISTIC": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "lab" / "scripts"), os.environ.get("PYTHONPATH", "")]),
           "CUDA_TILE_CACHE_DIR": os.environ.get("CUDA_TILE_CACHE_DIR", "/tmp/ssdcheck-cutile-cache")}
    cmd = [sys.executable, "-m", "pytest", "tests/test_gradients.py", "--impl", args.impl,
           f"--hypothesis-profile={args.profile}", "-n", str(args.workers), "-p", "no:cacheprovider",
           "-p", "pytest_jsonl", f"--jsonl={out / 'results.jsonl'}", f"--ssd-fuzz-seconds={max(left - FINISH_S, 60)}",
           f"--ssd-report={out / 'report.json'}", "--hypothesis-show-statistics", "-rfE", "-v"]
    if args.k:
        cmd += ["-k", args.k]
    print("grad_gpu:", " ".join(cmd), flush=True)
    with open(out / "pytest.log", "w") as log:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=left).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    summary = subprocess.run([sys.executable, str(ROOT / "lab" / "scripts" / "summarize_pytest.py"), str(out / "results.jsonl")],
                             capture_output=True, text=True).stdout if (out / "results.jsonl").is_file() else ""
    (out / "summary.txt").write_text(summary)
    print(summary)
    print(f"grad_gpu: pytest exit {rc} (124: stopped at the time limit) after {time.time() - t0:.0f}s; files in {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
