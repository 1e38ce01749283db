#!/usr/bin/env bash
# usage: lab/scripts/gpu_race.sh [--out DIR]   # env: N_BUDGET_S=120 TG_BUDGET_S=85 STAGES_S=200 (below)
# The whole race on one GPU in one run: cutile and mamba_ssm at all 60 shapes (groups n64, n128,
# n256), TileGym at its 6 shapes from the recorded tuning (tg64, tg128, tg256; a shape with no record
# is tuned, 2-3 min), then lab.bench.stages (kernel by kernel, cutile vs TileGym) and lab.bench.merge, after
# `source .gpu-bundle/setup.sh` (sourced here if it was not). About 6 minutes on a warm machine with
# every TileGym shape recorded.
# DIR defaults to out/gpu_race.
#
# Knobs (environment):
#   TUNING=lab/reports/tilegym-tuning-h200.json   copied to DIR/tuning.json, which the race updates:
#                          commit that copy over TUNING to keep a new tuning choice
#   N_BUDGET_S, TG_BUDGET_S    each group's --budget-s (a group stops starting shapes past it)
#   STAGES_S               lab.bench.stages' time limit (0: leave it out)
#   N_GROUPS               the cutile + mamba_ssm groups to run (default "n64 n128 n256"; "" runs only
#                          the TileGym groups, the target table, in about half the time)
#   TG_GROUPS              the TileGym groups (default "tg64 tg128 tg256"). A group's budget must leave
#                          TileGym's slot room: below ~85 s it skips TileGym (60 s did, 2026-11-30)
#   GRAPHS=1               the TileGym groups also time each forward replayed from a CUDA graph
#                          (lab.bench.race --graphs: the kernels without the host's launches)
#   V_GROUPS               vLLM's groups (default none; all six: "v64h32 v64h64 v128h32 v128h64 v256h32
#                          v256h64", 57-131 s each with the Triton precompile on the H200: two per
#                          call), with mamba_ssm and cutile (TileGym too in the h32 groups) in one process
#   VLLM_TUNING=lab/reports/vllm-tuning-h200.json   vLLM's recorded autotune picks, copied into the
#                          output folder as vllm-tuning.json, which the race updates: commit that
#                          copy over VLLM_TUNING to keep new picks
# Output: DIR/race.tar.gz (every group's JSON and log, stages, the merged tables and plot in one file,
# rewritten after each step), DIR/tuning.json and DIR/summary.txt (the target table and each step's
# exit status, also printed).
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gpu_race "$@"
cd "$(dirname "$0")/../.."
TUNING=${TUNING:-lab/reports/tilegym-tuning-h200.json}
N_BUDGET_S=${N_BUDGET_S:-120}
TG_BUDGET_S=${TG_BUDGET_S:-85}
STAGES_S=${STAGES_S:-200}
if [ -z "${SSDCHECK_GPU_SITE:-}" ]; then   # setup.sh not sourced yet
  if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_race: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi
fi
mkdir -p "$DEST/work/race"
cp "$TUNING" "$DEST/tuning.json"
SUMMARY=$DEST/summary.txt
: > "$SUMMARY"
step() {   # step NAME LIMIT_S CMD...: run with a hard limit, log to work/NAME.log, record the status
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$DEST/work/$name.log" 2>&1
  echo "$name rc=$?" | tee -a "$SUMMARY"
  # packed after every step: an outer limit that cuts the script still leaves what finished
  # (a timeout once lost two groups' JSONs, three folders deep: lab/reports/2026-12-01-fact-scan.md)
  tar czf "$DEST/race.tar.gz" -C "$DEST" work
}
N_GROUPS=${N_GROUPS-n64 n128 n256}
for g in $N_GROUPS; do
  step "$g" $((N_BUDGET_S + 30)) python3 -m lab.bench.race --group "$g" --out "$DEST/work/race" --budget-s "$N_BUDGET_S"
done
V_GROUPS=${V_GROUPS-}
VLLM_TUNING=${VLLM_TUNING:-lab/reports/vllm-tuning-h200.json}
[ -n "$V_GROUPS" ] && { [ -f "$VLLM_TUNING" ] && cp "$VLLM_TUNING" "$DEST/vllm-tuning.json"; }
for g in $V_GROUPS; do
  step "$g" $((N_BUDGET_S + 200)) python3 -m lab.bench.race --group "$g" --out "$DEST/work/race" \
    --budget-s "$((N_BUDGET_S + 120))" --tilegym-tuning "$DEST/tuning.json" --vllm-tuning "$DEST/vllm-tuning.json"
done
TG_GROUPS=${TG_GROUPS-tg64 tg128 tg256}
for g in $TG_GROUPS; do
  # a shape TileGym must tune takes 2-3 min more than the budget: the limit leaves it room
  step "$g" $((TG_BUDGET_S + 200)) python3 -m lab.bench.race --group "$g" --out "$DEST/work/race" \
    --budget-s "$TG_BUDGET_S" --tilegym-tuning "$DEST/tuning.json" ${GRAPHS:+--graphs}
done
if [ "$STAGES_S" -gt 0 ]; then
  step stages "$STAGES_S" python3 -m lab.bench.stages --out "$DEST/work/stages" --recorded-only \
    --tilegym-tuning "$DEST/tuning.json"
fi
step merge 60 python3 -m lab.bench.merge "$DEST/work/race" --out "$DEST/work/merged"
sed -n '/^## Target/,/^Moonshot/p' "$DEST/work/merged/bench.md" 2>/dev/null | tee -a "$SUMMARY"
[ -s "$DEST/race.tar.gz" ] && rm -rf "$DEST/work"   # the merge step packed it last
