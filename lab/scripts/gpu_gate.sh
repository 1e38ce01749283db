#!/usr/bin/env bash
# usage: lab/scripts/gpu_gate.sh [--out DIR]   # env: RUNS="cold warm" WORKERS=16 GATE_SECONDS=420
# The property step of the workflow's gpu-gate job (.github/actions/ssdcheck with the inputs that job
# of .github/workflows/ssdcheck.yml gives it; tests/test_workflow.py checks the command below is that
# step's), timed on this host: "cold" starts from an empty compile cache (.ssdcheck-cache/ removed),
# "warm" is the same command again with the cache it left. Per run: DIR/<run>/report.json, junit.xml,
# gate.log, summary.md (`ssdcheck report`), and the command's wall seconds in DIR/<run>/wall_s.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gate "$@"
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-"cold warm"}; export WORKERS=${WORKERS:-16} GATE_SECONDS=${GATE_SECONDS:-420}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
for run in $RUNS; do
  d=$DEST/$run; mkdir -p "$d"
  [ "$run" = cold ] && rm -rf .ssdcheck-cache
  t0=$(date +%s.%N)
  # --- the workflow step, with out/ as $d ---
  python3 -m ssdcheck test tests/test_properties.py tests/test_regressions.py --impl cutile \
    --hypothesis-profile=gpu -m "not slow" -n "$WORKERS" --ssd-fuzz-seconds "$GATE_SECONDS" \
    --ssd-report "$d/report.json" --junitxml "$d/junit.xml" --ssd-repro-dir "$d/failures" >"$d/gate.log" 2>&1
  rc=$?
  # ---
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)" >"$d/wall_s"
  echo "$run: exit $rc, $(cat "$d/wall_s") s"; tail -n 2 "$d/gate.log"
  python3 -m ssdcheck report "$d/report.json" >"$d/summary.md" 2>&1; sed -n '1,12p' "$d/summary.md"
done
