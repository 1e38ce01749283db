#!/usr/bin/env bash
# usage: scripts/gpu_ttf.sh [--out DIR]   # env: CACHE=empty|cold|warm FUZZ_S=90 TOTAL_S=500 CATALOGS=... (below)
# Time to first failure over the mutant catalogs on one GPU host (mutation/ttf.py): every catalog of
# CATALOGS runs at once, each with its share of the host's cores, so the runs in flight add up to
# one per core; each run is a fresh process of the users' fuzz command on one mutant. Records land
# in DIR/ttf-<catalog>-<cache>.jsonl (a rerun skips the runs already recorded there), the logs
# beside them, and DIR/ttf-<cache>.md is the summary (`--ttf-summary`; exit 1 if a target is missed).
#
# Knobs (environment):
#   CACHE=cold             empty: every run starts with empty cuTile and Triton caches; cold: from a
#                          copy of the cache the unmutated implementation filled with the same command
#                          (nothing of the mutant compiled); warm: cold, then each mutant again from
#                          the cache its cold run left (both recorded)
#   CATALOGS="cutile:5 cutile_fast:3 cutile_fastr:1 cutile_walk:1 tilegym:3 mamba_ssm:3"
#                          catalog:jobs pairs (jobs = runs of that catalog at once)
#   FUZZ_S=90              the command's --ssd-fuzz-seconds (an unmutated run passes after it)
#   TOTAL_S=500            each catalog's wall-clock budget: a run that could not end in it is not
#                          started (rerun the same command to do it)
#   FILL_DIR=/tmp/ssdcheck-ttf-fill
#                          cold and warm: the catalogs of one implementation share one fill there
#                          (made once, under xdist with the host's cores split between the
#                          implementations of CATALOGS; kept for a rerun of the same tree and command),
#                          so cutile's four catalogs compile the unmutated kernels once, in parallel
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/ttf "$@"
cd "$(dirname "$0")/.."
mkdir -p "$DEST"
CACHE=${CACHE:-cold}; FUZZ_S=${FUZZ_S:-90}; TOTAL_S=${TOTAL_S:-500}; FILL_DIR=${FILL_DIR:-/tmp/ssdcheck-ttf-fill}
CATALOGS=${CATALOGS:-"cutile:5 cutile_fast:3 cutile_fastr:1 cutile_walk:1 tilegym:3 mamba_ssm:3"}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
total=0
for pair in $CATALOGS; do total=$((total + ${pair#*:})); done
echo "ttf: $CACHE cache, $total runs at once on $(nproc) cores: $CATALOGS; --ssd-fuzz-seconds=$FUZZ_S" | tee "$DEST/ttf-$CACHE.log"
impls=$(python3 -c "import sys; from mutation.catalog import load_catalog
print(len({load_catalog(p.split(':')[0]).impl for p in sys.argv[1:]}))" $CATALOGS) || exit 2
FILL_JOBS=$(( $(nproc) / impls > 0 ? $(nproc) / impls : 1 ))
pids=()
for pair in $CATALOGS; do
  name=${pair%%:*}; jobs=${pair#*:}
  python3 -m mutation.run --time-to-failure --catalog "$name" --cache "$CACHE" --jobs "$jobs" \
    --fuzz-seconds "$FUZZ_S" --total-s "$TOTAL_S" --results "$DEST/ttf-$name-$CACHE.jsonl" \
    --fill-cache "$FILL_DIR" --fill-jobs "$FILL_JOBS" \
    >"$DEST/ttf-$name-$CACHE.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
tail -n 3 "$DEST"/ttf-*-"$CACHE".log >>"$DEST/ttf-$CACHE.log"
python3 -m mutation.run --ttf-summary "$DEST"/ttf-*-"$CACHE".jsonl --md "$DEST/ttf-$CACHE.md" | sed -n '1,20p'
