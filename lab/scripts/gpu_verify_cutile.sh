#!/usr/bin/env bash
# usage: lab/scripts/gpu_verify_cutile.sh [--out DIR]   # env: IMPL=cutile WORKERS=16 TOTAL_S=480 SLACK_S=120 M=""
# The GPU gate run: the whole property suite against IMPL with the gpu profile (200 examples per
# property, derandomized), the pinned regressions, a JSON report and JUnit XML, then a markdown
# summary. On the GPU host; env.txt, pytest.log, report.json, junit.xml, repro/ and summary.md land in
# DIR (default out/).
# SLACK_S: time past TOTAL_S before the run is killed (on the H200 60 s cut a cold run of new
# specializations short of its report: lab/reports/2026-11-30-ftz-decays.md).
# Many xdist workers share the one GPU on purpose: cuTile specializes each kernel on dtypes and on the
# divisibility of shapes and strides, so drawn problems keep the CPU-bound tileiras busy; the GPU idles.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
IMPL=${IMPL:-cutile}; WORKERS=${WORKERS:-16}; TOTAL_S=${TOTAL_S:-480}; M=${M:-}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
export PYTHONUNBUFFERED=1 SSDCHECK_COMPILE_CACHE=${SSDCHECK_COMPILE_CACHE:-/tmp/ssdcheck-cutile-cache}
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cuda.tile as ct; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| cuda-tile', ct.__version__)"
  tileiras --version | tail -1
  echo "toolchain diagnosis (as set up):"; python3 -m kernels.cutile.toolchain 2>&1 | tail -3
  echo "toolchain diagnosis with CUDA_HOME=/usr/local/cuda (the known trap):"
  CUDA_HOME=/usr/local/cuda python3 -m kernels.cutile.toolchain 2>&1 | tail -3
} 2>&1 | tee "$DEST/env.txt"
# --ssd-fuzz-seconds is the run's budget: each test gets an equal share of the time left, stops
# drawing when it is spent (passing with the examples it ran, which the report counts), so a slow
# property cannot cut the whole run at the 10-minute limit.
timeout $((TOTAL_S + ${SLACK_S:-120})) python3 -m pytest tests/test_properties.py tests/test_regressions.py \
  --impl "$IMPL" --hypothesis-profile=gpu -n "$WORKERS" -p no:cacheprovider ${M:+-m "$M"} -q -rfEs \
  --ssd-fuzz-seconds "$TOTAL_S" --ssd-report "$DEST/report.json" \
  --junitxml "$DEST/junit.xml" --ssd-repro-dir "$DEST/repro" 2>&1 | tee "$DEST/pytest.log" | tail -40
python3 scripts/summarize_report.py "$DEST/report.json" | tee "$DEST/summary.md"
