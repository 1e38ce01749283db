#!/usr/bin/env bash
# usage: lab/scripts/gpu_ttf.sh [--out DIR]   # env: CACHE=empty|cold|warm FUZZ_S=90 TOTAL_S=500 WAVES=... (below)
# Time to first failure over the mutant catalogs on one GPU host (mutation/ttf.py). Two steps:
#   1. cold and warm: the fills, one catalog after another, each with every core (`--fill-only`;
#      catalogs of one implementation share one fill through FILL_DIR, so the second finds it made);
#   2. the waves one after another; the catalogs of a wave run at once, each with its number of runs
#      at once (catalog:jobs). Each run is a fresh process of the users' fuzz command on one mutant.
# The fills go first so that no fill compiles beside a timed run: a run's seconds are its own, shared
# only with the runs of its wave. Records land in DIR/ttf-<catalog>-<cache>.jsonl (a rerun skips the
# runs already recorded there), the logs beside them, and DIR/ttf-<cache>.md is the summary
# (`--ttf-summary`; exit 1 if a target is missed).
#
# Knobs (environment):
#   CACHE=cold             empty: every run starts with empty cuTile and Triton caches; cold: from a
#                          copy of the cache the unmutated implementation filled with the same command
#                          (nothing of the mutant compiled); warm: cold, then each mutant again from
#                          the cache its cold run left (both recorded)
#   WAVES="cutile:4,cutile_fast:2,cutile_fastr:1,cutile_walk:1 tilegym:4,mamba_ssm:4"
#                          waves (space-separated) of catalog:jobs pairs (comma-separated)
#   FUZZ_S=90              the command's --ssd-fuzz-seconds (an unmutated run passes after it)
#   TOTAL_S=500            each catalog's wall-clock budget, counted from its own start: a run that
#                          could not end in it is not started (rerun the same command to do it)
#   PRECOMPILE_WORKERS     each run's battery precompile workers (ssdcheck_plugin/precompile.py);
#                          default: cores / the wave's runs at once - 1, at least 1
#   FILL_DIR=/tmp/ssdcheck-ttf-fill
#                          cold and warm: where the fills are kept (per implementation, command and
#                          tree), reused by a rerun on the same host
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/ttf "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
CACHE=${CACHE:-cold}; FUZZ_S=${FUZZ_S:-90}; TOTAL_S=${TOTAL_S:-500}; FILL_DIR=${FILL_DIR:-/tmp/ssdcheck-ttf-fill}
WAVES=${WAVES:-"cutile:4,cutile_fast:2,cutile_fastr:1,cutile_walk:1 tilegym:4,mamba_ssm:4"}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
common=(--time-to-failure --cache "$CACHE" --fuzz-seconds "$FUZZ_S" --total-s "$TOTAL_S" --fill-cache "$FILL_DIR")
echo "ttf: $CACHE cache on $(nproc) cores, waves: $WAVES; --ssd-fuzz-seconds=$FUZZ_S" | tee "$DEST/ttf-$CACHE.log"
if [ "$CACHE" != empty ]; then
  for pair in ${WAVES//,/ }; do
    name=${pair%%:*}
    python3 -m mutation.run "${common[@]}" --catalog "$name" --fill-only --fill-jobs "$(nproc)" \
      --results "$DEST/ttf-$name-$CACHE.jsonl" >>"$DEST/ttf-$name-$CACHE.log" 2>&1
    echo "fill for $name: $(tail -n 1 "$DEST/ttf-$name-$CACHE.jsonl" 2>/dev/null | cut -c 1-400)" | tee -a "$DEST/ttf-$CACHE.log"
  done
fi
for wave in $WAVES; do
  pids=(); total=0
  for pair in ${wave//,/ }; do total=$((total + ${pair#*:})); done
  # each run's battery precompile workers: the cores the wave's runs share, less each run's own
  pw=${PRECOMPILE_WORKERS:-$(( $(nproc) / total - 1 ))}; [ "$pw" -ge 1 ] || pw=1
  export SSDCHECK_PRECOMPILE_WORKERS=$pw
  echo "wave: $wave ($(date -u +%T)), $pw battery precompile workers per run" | tee -a "$DEST/ttf-$CACHE.log"
  for pair in ${wave//,/ }; do
    name=${pair%%:*}; jobs=${pair#*:}
    python3 -m mutation.run "${common[@]}" --catalog "$name" --jobs "$jobs" --fill-jobs "$(nproc)" \
      --results "$DEST/ttf-$name-$CACHE.jsonl" >>"$DEST/ttf-$name-$CACHE.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
done
for f in "$DEST"/ttf-*-"$CACHE".log; do tail -n 3 "$f"; done >>"$DEST/ttf-$CACHE.log"
python3 -m mutation.run --ttf-summary "$DEST"/ttf-*-"$CACHE".jsonl --md "$DEST/ttf-$CACHE.md" | sed -n '1,20p'
