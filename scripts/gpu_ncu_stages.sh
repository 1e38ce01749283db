#!/usr/bin/env bash
# Nsight Compute on one launch of each implementation's stage kernels (bench.ncu_stages: cutile and
# TileGym on the same inputs, warmed up outside the profiled range). Run from the repo root on the GPU
# host (Firecracker machines read the hardware counters; gVisor ones cannot). Writes to $OUT (default out/):
# ncu.ncu-rep (open with `ncu -i`), ncu-details.txt (every section, as text), ncu-run.log.
#   scripts/gpu_ncu_stages.sh               # env: ONLY=n64-g1 (shape id substring) STAGE=scan SET=full
#   (STAGE may name several: STAGE="state scan")
# The clocks are left alone (--clock-control none), as the device notes ask, so the figures are those
# of the clocks the race runs at. Session 14 ran SET=detailed, which printed no warp-state or scheduler
# section (the stall reasons); "full" is meant to add them (not yet run here).
set -uo pipefail
# every setting comes from the environment: any argument (--help too) prints the header and runs nothing
if [ "$#" -gt 0 ]; then sed -n '2,/^set /{/^#/p}' "$0"; exit 2; fi
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
ONLY=${ONLY:-n64-g1}; STAGE=${STAGE:-scan}; SET=${SET:-full}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -z "$NCU" ]; then echo "gpu_ncu_stages.sh: ncu (Nsight Compute) not found" | tee "$OUT/ncu-run.log"; exit 3; fi
{ echo "ncu: $NCU"; "$NCU" --version | tail -1; } | tee "$OUT/ncu-run.log"
"$NCU" --clock-control none --profile-from-start off --set "$SET" -f -o "$OUT/ncu" \
  python3 -m bench.ncu_stages --only "$ONLY" $(printf -- '--stage %s ' $STAGE) >> "$OUT/ncu-run.log" 2>&1
echo "ncu rc=$?" | tee -a "$OUT/ncu-run.log"
"$NCU" -i "$OUT/ncu.ncu-rep" --page details > "$OUT/ncu-details.txt" 2>&1
tail -n 20 "$OUT/ncu-run.log"
