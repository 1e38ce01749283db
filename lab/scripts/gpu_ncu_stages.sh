#!/usr/bin/env bash
# usage: lab/scripts/gpu_ncu_stages.sh [--out DIR]   # env: ONLY=n64-g1 (shape id substring) STAGE=scan SET=full
#   (STAGE may name several: STAGE="state scan")
# Nsight Compute on one launch of each implementation's stage kernels (lab.bench.ncu_stages: cutile and
# TileGym on the same inputs, warmed up outside the profiled range), on a GPU host whose hardware
# counters can be read (a Firecracker VM can; a gVisor sandbox cannot). Writes to DIR (default out/):
# ncu.ncu-rep (open with `ncu -i`), ncu-details.txt (every section, as text), ncu-run.log.
# The clocks are left alone (--clock-control none), so the figures are those of the clocks the race
# runs at. SET=detailed (lab/reports/2026-11-30-dlat-rows.md) printed no warp-state or scheduler section
# (the stall reasons); "full" adds them (lab/reports/2026-11-30-ftz-decays.md).
set -uo pipefail
source "$(dirname "$0")/_args.sh" out "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
ONLY=${ONLY:-n64-g1}; STAGE=${STAGE:-scan}; SET=${SET:-full}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -z "$NCU" ]; then echo "gpu_ncu_stages.sh: ncu (Nsight Compute) not found" | tee "$DEST/ncu-run.log"; exit 3; fi
{ echo "ncu: $NCU"; "$NCU" --version | tail -1; } | tee "$DEST/ncu-run.log"
"$NCU" --clock-control none --profile-from-start off --set "$SET" -f -o "$DEST/ncu" \
  python3 -m lab.bench.ncu_stages --only "$ONLY" $(printf -- '--stage %s ' $STAGE) >> "$DEST/ncu-run.log" 2>&1
echo "ncu rc=$?" | tee -a "$DEST/ncu-run.log"
"$NCU" -i "$DEST/ncu.ncu-rep" --page details > "$DEST/ncu-details.txt" 2>&1
tail -n 20 "$DEST/ncu-run.log"
