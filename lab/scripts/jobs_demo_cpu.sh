#!/usr/bin/env bash
# usage: lab/scripts/jobs_demo_cpu.sh [--out DIR]   # DIR default out/jobs_demo (emptied first)
# Two of the three jobs end to end on the CPU, against planted revisions (tests/tooling_targets.py):
#  1. fuzz `broken_tail` for 60 s, then replay a saved reproducer on it (fails) and on torch-ref (passes);
#  2. gate `eroded` against a torch-ref baseline: every test passes, the gate exits 6.
# Used for lab/reports/2026-11-30-jobs-cpu.md.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/jobs_demo "$@"
cd "$(dirname "$0")/../.."
D=$DEST; rm -rf "$D"; mkdir -p "$D"
python3 -m ssdcheck_fuzz --impl tests.tooling_targets:broken_tail --seconds 60 --out "$D/fuzz" --db "$D/db" \
  > "$D/fuzz.txt" 2>&1; echo "fuzz exit $?" | tee -a "$D/fuzz.txt"
repro=$(ls "$D"/fuzz/failures/*prop_matches_oracle*.pt | head -1)
python3 -m ssdcheck_fuzz replay "$repro" > "$D/replay_buggy.txt" 2>&1; echo "replay on broken_tail exit $?" | tee -a "$D/replay_buggy.txt"
python3 -m ssdcheck_fuzz replay "$repro" --impl torch-ref > "$D/replay_fixed.txt" 2>&1; echo "replay on torch-ref exit $?" | tee -a "$D/replay_fixed.txt"
python3 -m pytest tests/test_properties.py -k matches_oracle --impl torch-ref --hypothesis-profile=cpu -q \
  --ssd-report "$D/baseline.json" > "$D/baseline.txt" 2>&1; echo "baseline exit $?" | tee -a "$D/baseline.txt"
python3 -m pytest tests/test_properties.py -k matches_oracle --impl tests.tooling_targets:eroded --hypothesis-profile=cpu -q \
  --ssd-report "$D/eroded.json" --ssd-baseline "$D/baseline.json" --ssd-max-growth 2 > "$D/gate.txt" 2>&1
echo "gate exit $?" | tee -a "$D/gate.txt"
