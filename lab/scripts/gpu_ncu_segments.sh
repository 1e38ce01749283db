#!/usr/bin/env bash
# usage: lab/scripts/gpu_ncu_segments.sh [--out DIR]   # env: SHAPE=b2-l32768-h32-p64-n64-g1 VARIANT=4 SET=full
# Nsight Compute on one forward of the table (chunk_state, chunk_scan) and of the segmented walk
# (VARIANT: lab.bench.segment_passes' S[/KERNEL:NAME=INT,...]) at SHAPE: one launch of each kernel, warmed
# up outside the profiled range (lab.bench.segment_passes --profile-once). Writes DIR (default out/ncu-seg):
# ncu.ncu-rep, ncu-details.txt (every section, as text), ncu-source-sass.csv (SOURCE_KERNEL's
# instructions with their sampled warp stalls), ncu-run.log.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/ncu-seg "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
SHAPE=${SHAPE:-b2-l32768-h32-p64-n64-g1}; VARIANT=${VARIANT:-4}; SET=${SET:-full}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -z "$NCU" ]; then echo "gpu_ncu_segments.sh: ncu (Nsight Compute) not found" | tee "$DEST/ncu-run.log"; exit 3; fi
{ echo "ncu: $NCU"; "$NCU" --version | tail -1; } | tee "$DEST/ncu-run.log"
"$NCU" --clock-control none --profile-from-start off --set "$SET" -f -o "$DEST/ncu" \
  python3 -m lab.bench.segment_passes --shape "$SHAPE" --variant "$VARIANT" --profile-once >> "$DEST/ncu-run.log" 2>&1
echo "ncu rc=$?" | tee -a "$DEST/ncu-run.log"
"$NCU" -i "$DEST/ncu.ncu-rep" --page details > "$DEST/ncu-details.txt" 2>&1
# per-instruction warp-stall samples of SOURCE_KERNEL (default the walk; the source page, SASS), for lab/scripts/ncu_stall_lines.py
"$NCU" -i "$DEST/ncu.ncu-rep" --page source --print-source sass --csv --kernel-name regex:"${SOURCE_KERNEL:-chunk_walk}" \
  > "$DEST/ncu-source-sass.csv" 2> "$DEST/ncu-source.err"
tail -n 20 "$DEST/ncu-run.log"
