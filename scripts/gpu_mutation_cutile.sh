#!/usr/bin/env bash
# The H200 mutation run for `cutile` (issue 6): every mutant of mutation/catalog_cutile.py through the
# users' own pytest command (mutant profile, -x), JOBS at a time, plus the unmutated baseline.
#   scripts/gpu_mutation_cutile.sh            # env: JOBS=14 BUDGET_S=240 BASELINE_S=420
# Run it right after scripts/gpu_verify_cutile.sh on the same machine: both use the compile cache in
# $SSDCHECK_COMPILE_CACHE, and since the kernels' debug info names the repository path (not the
# copy's), the baseline and every kernel a mutant leaves alone are cache hits in the runner's copies.
# A killed mutant stops at its first failure (median ~20 s on the H200); the budget matters for one
# that survives a while: 240 s lets a survivor reach the third property test (stages) on a warm cache.
set -uo pipefail
# every setting comes from the environment: any argument (--help too) prints the header and runs nothing
if [ "$#" -gt 0 ]; then sed -n '2,/^set /{/^#/p}' "$0"; exit 2; fi
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
JOBS=${JOBS:-14}; BUDGET_S=${BUDGET_S:-240}; BASELINE_S=${BASELINE_S:-420}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
export PYTHONUNBUFFERED=1 SSDCHECK_COMPILE_CACHE=${SSDCHECK_COMPILE_CACHE:-/tmp/ssdcheck-cutile-cache}
export CUDA_TILE_CACHE_DIR=$SSDCHECK_COMPILE_CACHE
python3 -m mutation.run --catalog cutile --jobs "$JOBS" --budget-s "$BUDGET_S" --baseline-budget-s "$BASELINE_S" \
  --json "$OUT/mutation.json" --md "$OUT/mutation.md" 2>&1 | tee "$OUT/mutation.log"
