#!/usr/bin/env bash
# usage: lab/scripts/gpu_toolchain.sh [--out DIR]   # env: PARTS="gate race ncu" (or recheck, ttf) RACE_BUDGET_S=60 NCU_BEFORE_S=470
# One toolchain's share of a compiler upgrade on a GPU host (docs/toolchain-upgrade.md): run it once
# with the pinned bundle as .gpu-bundle and once, back to back on the same card, with the candidate's.
#   gate  the GPU gate from an empty compile cache (lab/scripts/gpu_gate.sh RUNS=cold): DIR/gate/cold/
#   race  cutile's forward at the I/O-floor shapes (2x32K and 8x2K, dstate 64/128/256, chunk 64 and 128;
#         lab.bench.race, each group its own process with its copy ceiling): DIR/race/<group>-<shapes>.json
#   ncu   Nsight Compute on one forward of the chunk walk at 2x32K h32 dstate 64 (gpu_ncu_segments.sh),
#         only if the run has taken less than NCU_BEFORE_S seconds so far: DIR/ncu/
#   recheck  lab/scripts/gate_recheck.py run "$RECHECK_CANDIDATE" "$RECHECK_BASELINE": both worst problems of
#         each row the gate flags, replayed under this toolchain (8 at once): DIR/recheck/recheck.json
#   ttf   the cuTile mutant catalogs, time to first failure from a cold fill (gpu_ttf.sh, WAVES=$TTF_WAVES,
#         default "cutile:4,cutile_walk:2 cutile_fast:2,cutile_fastr:1"): DIR/ttf/
# DIR/toolchain.txt names the tileiras every part used; DIR.tar.xz packs DIR at the end. Compare two runs with
# `python -m lab.bench.race_compare DIR_A/race DIR_B/race` and `ssdcheck gate DIR_B/gate/cold/report.json --baseline DIR_A/gate/cold/report.json`.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/toolchain "$@"
cd "$(dirname "$0")/../.."
PARTS=${PARTS:-"gate race ncu"}; RACE_BUDGET_S=${RACE_BUDGET_S:-60}; NCU_BEFORE_S=${NCU_BEFORE_S:-470}
for part in $PARTS; do   # checked before anything runs: on a GPU host a mistaken run costs minutes
  case "$part" in
    gate|race|ncu|ttf) ;;
    recheck) for f in "${RECHECK_CANDIDATE:-}" "${RECHECK_BASELINE:-}"; do
        [ -f "$f" ] || { echo "gpu_toolchain.sh: recheck needs RECHECK_CANDIDATE and RECHECK_BASELINE, two gate reports; got '$f'" >&2; exit 2; }
      done ;;
    *) echo "gpu_toolchain.sh: unknown part '$part' in PARTS: expected gate, race, ncu, recheck or ttf" >&2; exit 2 ;;
  esac
done
mkdir -p "$DEST"
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
    recheck)
      python3 lab/scripts/gate_recheck.py run "$RECHECK_CANDIDATE" "$RECHECK_BASELINE" --out "$DEST/recheck" -j 8 \
        > "$DEST/recheck.log" 2>&1; echo "recheck: exit $? ($((SECONDS - start)) s)"; tail -n 14 "$DEST/recheck.log" ;;
    ttf)
      CACHE=cold FUZZ_S=60 WAVES=${TTF_WAVES:-"cutile:4,cutile_walk:2 cutile_fast:2,cutile_fastr:1"} \
        bash lab/scripts/gpu_ttf.sh --out "$DEST/ttf" | tail -n 12 ;;
  esac
done
echo "toolchain run: $((SECONDS - start)) s"
# one archive beside DIR: what a GPU host hands back whole, however deep DIR's folders go
tar -C "$(dirname "$DEST")" -cJf "$DEST.tar.xz" "$(basename "$DEST")" && echo "packed: $DEST.tar.xz"
