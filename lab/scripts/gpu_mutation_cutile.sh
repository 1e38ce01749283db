#!/usr/bin/env bash
# usage: lab/scripts/gpu_mutation_cutile.sh [--out DIR]   # env: JOBS=14 BUDGET_S=240 BASELINE_S=420
# The GPU mutation run for `cutile`: every mutant of mutation/catalog_cutile.py through the users' own
# pytest command (mutant profile, -x), JOBS at a time, plus the unmutated baseline. mutation.json,
# mutation.md and mutation.log land in DIR (default out/).
# Run it right after lab/scripts/gpu_verify_cutile.sh on the same machine: both use the compile cache in
# $SSDCHECK_COMPILE_CACHE, and since the kernels' debug info names the repository path (not the
# copy's), the baseline and every kernel a mutant leaves alone are cache hits in the runner's copies.
# A killed mutant stops at its first failure (median ~20 s on the H200); the budget matters for one
# that survives a while: 240 s lets a survivor reach the third property test (stages) on a warm cache.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
JOBS=${JOBS:-14}; BUDGET_S=${BUDGET_S:-240}; BASELINE_S=${BASELINE_S:-420}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
export PYTHONUNBUFFERED=1 SSDCHECK_COMPILE_CACHE=${SSDCHECK_COMPILE_CACHE:-/tmp/ssdcheck-cutile-cache}
export CUDA_TILE_CACHE_DIR=$SSDCHECK_COMPILE_CACHE
python3 -m mutation.run --catalog cutile --jobs "$JOBS" --budget-s "$BUDGET_S" --baseline-budget-s "$BASELINE_S" \
  --json "$DEST/mutation.json" --md "$DEST/mutation.md" 2>&1 | tee "$DEST/mutation.log"
