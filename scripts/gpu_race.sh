#!/usr/bin/env bash
# The whole race on one H200 in one call (issue 4), as session 12 ran it by hand: cutile and mamba_ssm
# at all 60 shapes (groups n64, n128, n256), TileGym at its 6 shapes from the recorded tuning (tg64,
# tg128, tg256; a shape with no record is tuned, 2-3 min), then bench.stages (kernel by kernel, cutile
# vs TileGym) and bench.merge. Run from the repo root; `source .gpu-bundle/setup.sh` first (sourced
# here if it was not). About 6 minutes on a warm machine with every TileGym shape recorded.
#
#   scripts/gpu_race.sh        # env: OUT=out/gpu_race N_BUDGET_S=120 TG_BUDGET_S=85 STAGES_S=200
#
# Knobs (environment):
#   TUNING=reports/tilegym-tuning-h200.json   copied to $OUT/tuning.json, which the race updates:
#                          bring that copy back to keep a new tuning choice
#   N_BUDGET_S, TG_BUDGET_S    each group's --budget-s (a group stops starting shapes past it)
#   STAGES_S               bench.stages' time limit (0: leave it out)
#   N_GROUPS               the cutile + mamba_ssm groups to run (default "n64 n128 n256"; "" runs only
#                          the TileGym groups, the target table, in about half the time)
#   TG_GROUPS              the TileGym groups (default "tg64 tg128 tg256"). A group's budget must leave
#                          TileGym's slot room: below ~85 s it skips TileGym (session 15 at 60 s)
#   GRAPHS=1               the TileGym groups also time each forward replayed from a CUDA graph
#                          (bench.race --graphs: the kernels without the host's launches)
#   V_GROUPS               vLLM's groups (default none; all six: "v64h32 v64h64 v128h32 v128h64 v256h32
#                          v256h64", each ~6-7 min fresh: run them a few per call), with mamba_ssm and
#                          cutile (TileGym too in the h32 groups) in the same process
#   VLLM_TUNING=reports/vllm-tuning-h200.json   vLLM's recorded autotune picks, copied into the
#                          output folder as vllm-tuning.json, which the race updates: commit that
#                          copy over VLLM_TUNING to keep new picks
# Output: $OUT/race.tar.gz (every group's JSON and log, stages, the merged tables and plot: one file,
# since only 8 files come back from a lent GPU; rewritten after each step), $OUT/tuning.json and
# $OUT/summary.txt (the target table and each step's exit status, also printed).
set -uo pipefail
# every setting comes from the environment: any argument (--help too) prints the header and runs nothing
if [ "$#" -gt 0 ]; then sed -n '2,/^set /{/^#/p}' "$0"; exit 2; fi
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu_race}
TUNING=${TUNING:-reports/tilegym-tuning-h200.json}
N_BUDGET_S=${N_BUDGET_S:-120}
TG_BUDGET_S=${TG_BUDGET_S:-85}
STAGES_S=${STAGES_S:-200}
case ":${PYTHONPATH:-}:" in   # setup.sh already sourced: its /tmp/site is on the path
  *:/tmp/site:*) ;;
  *) if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_race: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi ;;
esac
mkdir -p "$OUT/work/race"
cp "$TUNING" "$OUT/tuning.json"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
step() {   # step NAME LIMIT_S CMD...: run with a hard limit, log to work/NAME.log, record the status
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/work/$name.log" 2>&1
  echo "$name rc=$?" | tee -a "$SUMMARY"
  # packed after every step: an outer limit that cuts the script still leaves what finished
  # (session 16's call 3 lost two groups' JSONs, three folders deep, to a timeout)
  tar czf "$OUT/race.tar.gz" -C "$OUT" work
}
N_GROUPS=${N_GROUPS-n64 n128 n256}
for g in $N_GROUPS; do
  step "$g" $((N_BUDGET_S + 30)) python3 -m bench.race --group "$g" --out "$OUT/work/race" --budget-s "$N_BUDGET_S"
done
V_GROUPS=${V_GROUPS-}
VLLM_TUNING=${VLLM_TUNING:-reports/vllm-tuning-h200.json}
[ -n "$V_GROUPS" ] && { [ -f "$VLLM_TUNING" ] && cp "$VLLM_TUNING" "$OUT/vllm-tuning.json"; }
for g in $V_GROUPS; do
  step "$g" $((N_BUDGET_S + 200)) python3 -m bench.race --group "$g" --out "$OUT/work/race" \
    --budget-s "$((N_BUDGET_S + 120))" --tilegym-tuning "$OUT/tuning.json" --vllm-tuning "$OUT/vllm-tuning.json"
done
TG_GROUPS=${TG_GROUPS-tg64 tg128 tg256}
for g in $TG_GROUPS; do
  # a shape TileGym must tune takes 2-3 min more than the budget: the limit leaves it room
  step "$g" $((TG_BUDGET_S + 200)) python3 -m bench.race --group "$g" --out "$OUT/work/race" \
    --budget-s "$TG_BUDGET_S" --tilegym-tuning "$OUT/tuning.json" ${GRAPHS:+--graphs}
done
if [ "$STAGES_S" -gt 0 ]; then
  step stages "$STAGES_S" python3 -m bench.stages --out "$OUT/work/stages" --recorded-only \
    --tilegym-tuning "$OUT/tuning.json"
fi
step merge 60 python3 -m bench.merge "$OUT/work/race" --out "$OUT/work/merged"
sed -n '/^## Target/,/^Moonshot/p' "$OUT/work/merged/bench.md" 2>/dev/null | tee -a "$SUMMARY"
[ -s "$OUT/race.tar.gz" ] && rm -rf "$OUT/work"   # the merge step packed it last
