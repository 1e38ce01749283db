#!/usr/bin/env bash
# usage: lab/scripts/gpu_toolchain.sh [--out DIR]   # env: PARTS="gate race ncu" RACE_BUDGET_S=60 NCU_BEFORE_S=470
# One toolchain's share of a compiler upgrade on a GPU host (docs/toolchain-upgrade.md): run it once
# with the pinned bundle as .gpu-bundle and once, back to back on the same card, with the candidate's.
#   gate  the GPU gate from an empty compile cache (lab/scripts/gpu_gate.sh RUNS=cold): DIR/gate/cold/
#   race  cutile's forward at the I/O-floor shapes (2x32K and 8x2K, dstate 64/128/256, chunk 64 and 128;
#         lab.bench.race, each group its own process with its copy ceiling): DIR/race/<group>-<shapes>.json
#   ncu   Nsight Compute on one forward of the chunk walk at 2x32K h32 dstate 64 (gpu_ncu_segments.sh),
#         only if the run has taken less than NCU_BEFORE_S seconds so far: DIR/ncu/
# DIR/toolchain.txt names the tileiras every part used. Compare two runs with
# `python -m lab.bench.race_compare DIR_A/race DIR_B/race` and `ssdcheck gate DIR_B/gate/cold/report.json --baseline DIR_A/gate/cold/report.json`.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/toolchain "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
PARTS=${PARTS:-"gate race ncu"}; RACE_BUDGET_S=${RACE_BUDGET_S:-60}; NCU_BEFORE_S=${NCU_BEFORE_S:-470}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
python3 -m kernels.cutile.toolchain sm_90 > "$DEST/toolchain.txt" 2>&1; head -n 4 "$DEST/toolchain.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$DEST/gpu.txt" 2>&1
start=$SECONDS
for part in $PARTS; do
  case "$part" in
    gate) RUNS=cold bash lab/scripts/gpu_gate.sh --out "$DEST/gate" ;;
    race)
      for g in n64 n128 n256; do
        for s in b2-l32768 b8-l2048; do
          python3 -m lab.bench.race --group "$g" --impls cutile --shapes "$s" --chunks cutile=64+128 \
            --budget-s "$RACE_BUDGET_S" --out "$DEST/race/$g-$s" > "$DEST/race-$g-$s.log" 2>&1
          echo "race $g $s: exit $? ($((SECONDS - start)) s)"; tail -n 1 "$DEST/race-$g-$s.log"
        done
      done ;;
    ncu)
      if [ $((SECONDS - start)) -lt "$NCU_BEFORE_S" ]; then
        VARIANT=4 SET=full bash lab/scripts/gpu_ncu_segments.sh --out "$DEST/ncu" | tail -n 3
      else echo "ncu: skipped, $((SECONDS - start)) s gone (NCU_BEFORE_S=$NCU_BEFORE_S)" | tee "$DEST/ncu-skipped.txt"; fi ;;
    *) echo "gpu_toolchain.sh: unknown part '$part': expected gate, race or ncu" >&2; exit 2 ;;
  esac
done
echo "toolchain run: $((SECONDS - start)) s"
