#!/usr/bin/env bash
# usage: lab/scripts/gpu_segments.sh [--out DIR]   # env: PART="smoke suite race catalog ab passes nod occ1 lat10 scanhd" WORKERS=16 SUITE_S=420
# The segmented walk (issue 27) and the kernels of the long shapes on a GPU host, in ten parts (PART
# picks some; each is one 10-minute command at most, so a call may run one or two):
#   smoke    lab/scripts/smoke_segments.py at 2 and 4 segments: forced on, against float64 (~1 min cold)
#   suite    tests/test_properties.py + test_regressions.py --impl cutile with SSDCHECK_CUTILE_SEGMENTS=4
#            (every aligned chunk-64 dstate-64/128 problem of 2+ chunks segmented), SUITE_S of drawing
#            through lab/scripts/gpu_verify_cutile.sh (~8 min: SUITE_S=420 + compiles)
#   race     lab.bench.race groups long64 long128 long256 (cutile, mamba_ssm; bf16 and fp16; without and
#            with final states; the I/O floor column) and tglong (TileGym too, 2x32K h32), ~6 min each:
#            RACE_GROUPS picks them (default "long64 long128"; run "long256 tglong" in a second call)
#   catalog  python -m mutation.run --catalog cutile_seg (the 11 mutants, judged by tests/test_regressions.py's
#            long sequences, which the table segments), --budget-s CATALOG_S (default 240), ~3-5 min
#   ab       lab.bench.ab_row --segments N for each N in AB_SEGMENTS (default "4 2"; DIR/ab-sN/): the table
#            against the segmented walk forced at up to N segments in one process, same inputs, at the long
#            groups' dstate 64/128 shapes (AB_DSTATES picks): bf16 without final states at every seqlen >= 16K, heads and
#            groups, plus 2x32K g1 with final states and in fp16 (36 rows per N, ~2-3 min each; N=1: B
#            the two kernels where the table segments). The race part times the table only.
#   passes   lab.bench.segment_passes: each kernel's time at 2x32K h32 dstate 64 and 128, the table beside
#            variant 1 (the two kernels) and 4 (the segmented walk at up to 4 segments) (DIR/passes/, ~1 min)
#   nod      the walk's D skip: the table with and without D (lab.bench.segment_passes --without D) at 2x32K
#            and 8x2K h32 dstate 64 (DIR/nod-*/; ~1 min)
#   occ1     the walk at occupancy 1, where tileiras gives each tile two buffers (120 KB): lab.bench.segment_passes
#            beside the table at 2x32K h32 dstate 64 with 2 and 4 segments (and 8 worker warps at 2), and
#            at 8x2K h32 dstate 64 (DIR/occ1-*/; ~2 min)
#   lat10    latency hint 10, where tileiras buffers the loads more deeply (CPU, the SASS's barriers): the
#            walk at BP=32 (occupancy 2) and pass 1 at occupancy 2, by lab.bench.segment_passes beside the
#            table at 2x32K h32 dstate 64 (4 and 2 segments), at 8x2K h32 dstate 64 and 128 (BP=64 too), and
#            at 2x32K h32 dstate 128 with 4 segments forced, with and without each hint (DIR/lat10-*/; ~2 min)
#   scanhd   lab.bench.ab_row --set chunk_scan:HD=1 (D's row loaded with the scan tile's first loads) at six
#            shapes the two kernels serve, 3 rounds (DIR/scanhd/, ~2 min)
# Output in DIR (default out/segments): smoke.log, suite/ (gpu_verify_cutile.sh's files), race/<group>.json
# and race.log, mutation.json/.md/.log; summary.txt lists each part's exit status.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/segments "$@"
cd "$(dirname "$0")/../.."
mkdir -p "$DEST"
PART=${PART:-smoke suite race catalog}; WORKERS=${WORKERS:-16}; SUITE_S=${SUITE_S:-420}
RACE_GROUPS=${RACE_GROUPS:-long64 long128}
[ -f .gpu-bundle/setup.sh ] && source .gpu-bundle/setup.sh
export PYTHONUNBUFFERED=1 SSDCHECK_COMPILE_CACHE=${SSDCHECK_COMPILE_CACHE:-/tmp/ssdcheck-cutile-cache}
export CUDA_TILE_CACHE_DIR=$SSDCHECK_COMPILE_CACHE
# lab.bench.segment_passes into DIR/NAME/ and DIR/NAME.log (its JSON lines left out of the log); returns its status
passes_to() { local name=$1; shift
  python3 -m lab.bench.segment_passes "$@" --out "$DEST/$name" 2>&1 | grep -v "^{" | tee "$DEST/$name.log"
  return "${PIPESTATUS[0]}"; }
: > "$DEST/summary.txt"
for part in $PART; do
  t0=$(date +%s)
  case "$part" in
    smoke) timeout 300 python3 lab/scripts/smoke_segments.py --segments 2 --segments 4 --timeout 140 2>&1 | tee "$DEST/smoke.log" ;;
    suite) SSDCHECK_CUTILE_SEGMENTS=4 IMPL=cutile WORKERS=$WORKERS TOTAL_S=$SUITE_S SLACK_S=90 \
             bash lab/scripts/gpu_verify_cutile.sh --out "$DEST/suite" ;;
    race)  mkdir -p "$DEST/race"
           for g in $RACE_GROUPS; do
             python3 -m lab.bench.race --group "$g" --out "$DEST/race" --budget-s 330 \
               --tilegym-tuning lab/reports/tilegym-tuning-h200.json 2>&1 | tee -a "$DEST/race.log"
           done ;;
    ab)    for nseg in ${AB_SEGMENTS:-4 2}; do
           python3 -m lab.bench.ab_row --segments "$nseg" --rounds 3 --out "$DEST/ab-s$nseg" $(AB_DSTATES=${AB_DSTATES:-64 128} python3 -c '
import os
from lab.bench.shapes import GROUPS
for n in map(int, os.environ["AB_DSTATES"].split()):
    for s in GROUPS[f"long{n}"].shapes:
        if (s.dtype == "bfloat16" and not s.final_states) or (s.seqlen == 32768 and s.ngroups == 1):
            print(f"--shape {s.id}@64")') 2>&1 | tee -a "$DEST/ab.log"
           done ;;
    catalog) python3 -m mutation.run --catalog cutile_seg --jobs 14 --budget-s "${CATALOG_S:-240}" --no-baseline \
               --json "$DEST/mutation.json" --md "$DEST/mutation.md" 2>&1 | tee "$DEST/mutation.log" ;;
    passes) python3 -m lab.bench.segment_passes --shape b2-l32768-h32-p64-n64-g1 --shape b2-l32768-h32-p64-n128-g1 \
             --variant 1 --variant 4 --out "$DEST/passes" 2>&1 | tee "$DEST/passes.log" ;;
    nod)   for s in b2-l32768-h32-p64-n64-g1:4 b8-l2048-h32-p64-n64-g1:1; do
             passes_to "nod-${s%%-h*}" --shape "${s%:*}" --variant "${s#*:}" --without D
           done ;;
    occ1)  w64="chunk_walk:BN=64,SPLIT=1,ORD=1,occupancy=1"
           passes_to occ1-2x32k --shape b2-l32768-h32-p64-n64-g1 --variant "2/$w64" --variant "4/$w64" \
             --variant "2/$w64,worker_warps=8"
           passes_to occ1-8x2k --shape b8-l2048-h32-p64-n64-g1 --variant 1/chunk_walk:occupancy=1 ;;
    lat10) w64="chunk_walk:BN=64,SPLIT=1,ORD=1,BP=32,LAT=10"; p1="segment_state:LAT=10,DLAT=10,occupancy=2"
           w128="chunk_walk:BN=128,FACT=1,SPLIT=1,BP=32,LAT=10"
           passes_to lat10-2x32k --shape b2-l32768-h32-p64-n64-g1 --variant "4/$w64" --variant "2/$w64" \
             --variant "4/$p1" --variant "4/$w64/$p1"
           passes_to lat10-8x2k --shape b8-l2048-h32-p64-n64-g1 --shape b8-l2048-h32-p64-n128-g1 \
             --variant 1/chunk_walk:BP=32,LAT=10 --variant 1/chunk_walk:LAT=10
           passes_to lat10-2x32k-n128 --shape b2-l32768-h32-p64-n128-g1 --variant 4 --variant "4/$w128" \
             --variant "4/$p1" --variant "4/$w128/$p1" ;;
    scanhd) python3 -m lab.bench.ab_row --set chunk_scan:HD=1 --rounds 3 --out "$DEST/scanhd" \
             --shape b2-l32768-h32-p64-n128-g1@64 --shape b2-l16384-h64-p64-n64-g1@64 --shape b2-l16384-h64-p64-n128-g8@64 \
             --shape b2-l32768-h32-p64-n256-g1@64 --shape b4-l8192-h32-p64-n64-g1@64 --shape b8-l2048-h32-p64-n256-g1@64 \
             2>&1 | tee "$DEST/scanhd.log" ;;
    *) echo "gpu_segments.sh: unknown PART '$part': expected smoke, suite, race, catalog, ab, passes, nod, occ1, lat10 or scanhd" >&2; exit 2 ;;
  esac
  echo "$part: exit ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s" | tee -a "$DEST/summary.txt"
done
