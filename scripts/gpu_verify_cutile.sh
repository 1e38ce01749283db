#!/usr/bin/env bash
# The H200 gate run for `cutile` (issue 3): the whole property suite with the gpu profile (200 examples
# per property, derandomized), the pinned regressions, a JSON report and JUnit XML, then a markdown
# summary. Run from the repo root on the GPU host; logs and reports land in $OUT (default out/).
#   scripts/gpu_verify_cutile.sh            # env: IMPL=cutile WORKERS=16 TOTAL_S=480 SLACK_S=120 M=""
# SLACK_S: time past TOTAL_S before the run is killed (session 15: 60 s cut a cold run of new
# specializations short of its report).
# Many xdist workers share the one GPU on purpose: cuTile specializes each kernel on dtypes and on the
# divisibility of shapes and strides, so drawn problems keep the CPU-bound tileiras busy; the GPU idles.
set -uo pipefail
# every setting comes from the environment: any argument (--help too) prints the header and runs nothing
if [ "$#" -gt 0 ]; then sed -n '2,/^set /{/^#/p}' "$0"; exit 2; fi
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
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
} 2>&1 | tee "$OUT/env.txt"
# --ssd-fuzz-seconds is the session's budget: each test gets an equal share of the time left, stops
# drawing when it is spent (passing with the examples it ran, which the report counts), so a slow
# property cannot cut the whole run at the 10-minute limit.
timeout $((TOTAL_S + ${SLACK_S:-120})) python3 -m pytest tests/test_properties.py tests/test_regressions.py \
  --impl "$IMPL" --hypothesis-profile=gpu -n "$WORKERS" -p no:cacheprovider ${M:+-m "$M"} -q -rfEs \
  --ssd-fuzz-seconds "$TOTAL_S" --ssd-report "$OUT/report.json" \
  --junitxml "$OUT/junit.xml" --ssd-repro-dir "$OUT/repro" 2>&1 | tee "$OUT/pytest.log" | tail -40
python3 scripts/summarize_report.py "$OUT/report.json" | tee "$OUT/summary.md"
