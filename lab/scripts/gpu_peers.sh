#!/usr/bin/env bash
# usage: lab/scripts/gpu_peers.sh [--out DIR]   # env: PART=all|tests|bench IMPLS=... TOTAL_S=570 (below)
# The peers on a GPU host: the property suite against TileGym and mamba_ssm, and one bench group that
# checks the race end to end, after `source .gpu-bundle/setup.sh` (sourced here if it was not).
# Everything lands in DIR (default out/gpu_peers); the per-test summary and the bench table are
# printed last.
#
#   lab/scripts/gpu_peers.sh                        # bench smoke (~4 min), then the tests until TOTAL_S
#   PART=tests IMPLS=tilegym lab/scripts/gpu_peers.sh --out out/tg
#   PART=bench GROUP=tg128 lab/scripts/gpu_peers.sh # any bench group (python -m lab.bench.race --list)
#
# Knobs (environment):
#   PART=all|tests|bench   what to run (default all: bench first, it is bounded; tests get the rest)
#   IMPLS="tilegym mamba-ssm"   implementations under test
#   K=<pytest -k expression>    a subset of the properties
#   M=<pytest -m expression>    e.g. M="not slow" leaves out the 64K-token extreme-decay test
#   PROFILE=gpu            Hypothesis profile (gpu: derandomized, 200 examples per property)
#   TOTAL_S=570            wall-clock budget of the whole script
#   TUNING=lab/reports/tilegym-tuning-h200.json   TileGym's recorded tuning choices, read by the race
#   CHUNKS='mamba-ssm=64+128'  override the group's chunk sizes per implementation (race --chunks)
#   GROUP=smoke, BENCH_BUDGET_S=360   the bench group and its budget (TileGym tuning is skipped when
#                          fewer than 180 s of it are left; PART=bench gives it all of TOTAL_S)
#   WORKERS=16             pytest-xdist workers for the tests (one GPU, shared: the peers' compiles
#                          and the float64 references are CPU work, so one worker per core)
#   SHARE_TIME=1           give each test an equal share of the time left (the ssdcheck plugin's
#                          --ssd-fuzz-seconds: a test past its share stops drawing and passes with the
#                          examples it ran, counted in the summary); 0: the profile's full example
#                          counts, first tests first, the rest INTERRUPTED at the time limit
#   MAMBA_AUTOTUNE=1       mamba_ssm as it ships: Triton autotunes each new (chunk, headdim, dstate)
#                          (~1 min each); 0 pins its cheapest config with MAMBA_DETERMINISTIC=1 for
#                          fast fuzzing. TileGym and vLLM take their mode from the registered name:
#                          `tilegym`, `vllm` as shipped (autotuned), `tilegym-first-config`,
#                          `vllm-first-config` with their first configs forced (kernels/registry.py)
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gpu_peers "$@"
cd "$(dirname "$0")/../.."
T0=$(date +%s)
PART=${PART:-all}
IMPLS=${IMPLS:-tilegym mamba-ssm}
PROFILE=${PROFILE:-gpu}
TOTAL_S=${TOTAL_S:-570}
GROUP=${GROUP:-smoke}
BENCH_BUDGET_S=${BENCH_BUDGET_S:-360}
MAMBA_AUTOTUNE=${MAMBA_AUTOTUNE:-1}
SHARE_TIME=${SHARE_TIME:-1}
WORKERS=${WORKERS:-16}
export CUDA_TILE_CACHE_DIR=${CUDA_TILE_CACHE_DIR:-/tmp/ssdcheck-cutile-cache}   # TileGym's compiles, shared by workers
mkdir -p "$DEST/peers" "$DEST/bench"
rm -f "$DEST/peers/results.jsonl" "$DEST/peers/report.json" "$DEST/peers/summary.txt"
export PYTHONUNBUFFERED=1

if [ -z "${SSDCHECK_GPU_SITE:-}" ]; then   # setup.sh not sourced yet
  if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_peers: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi
fi

{
  echo "== environment"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1
  python3 - <<'EOF' 2>&1
import importlib, importlib.metadata as md, os, sys
for d in ("torch", "triton", "cuda-tile", "tilegym", "einops", "hypothesis", "pytest", "matplotlib"):
    try:
        print(f"{d} {md.version(d)}")
    except md.PackageNotFoundError:
        print(f"{d} MISSING")
try:
    from kernels.peers import mamba_ssm
    print("mamba_ssm source:", mamba_ssm.find_package_dir(), "version", mamba_ssm.load_ssd_combined() and mamba_ssm.version())
except Exception as e:
    print("mamba_ssm: NOT LOADABLE:", e)
try:
    importlib.import_module("tilegym.ops.cutile.mamba2")
    print("tilegym.ops.cutile.mamba2: importable")
except Exception as e:
    print("tilegym: NOT IMPORTABLE:", type(e).__name__, e)
EOF
} 2>&1 | tee "$DEST/peers/environment.txt"

left() { echo $(( TOTAL_S - ($(date +%s) - T0) )); }

BENCH_RC=skipped
if [ "$PART" = all ] || [ "$PART" = bench ]; then
  echo "== bench: python -m lab.bench.race --group $GROUP (budget ${BENCH_BUDGET_S}s)"
  budget=$BENCH_BUDGET_S
  [ "$PART" = bench ] && budget=$(( $(left) - 60 ))
  # TileGym's recorded tuning choices (kernels/peers/tilegym_tuning.py); the updated file is written to
  # DIR/bench: commit it over $TUNING so the next run skips those searches.
  TUNING=${TUNING:-lab/reports/tilegym-tuning-h200.json}
  [ -f "$TUNING" ] && cp "$TUNING" "$DEST/bench/tilegym-tuning.json"
  # The race times autotuned peers: neither switch may leak into it.
  chunk_args=(); [ -n "${CHUNKS:-}" ] && chunk_args=(--chunks "$CHUNKS")
  env -u TILEGYM_DISABLE_AUTOTUNE -u MAMBA_DETERMINISTIC \
    timeout --signal=INT --kill-after=30 $(( budget + 60 )) \
    python3 -m lab.bench.race --group "$GROUP" --out "$DEST/bench" --budget-s "$budget" \
      --tilegym-tuning "$DEST/bench/tilegym-tuning.json" "${chunk_args[@]}" 2>&1 | tee "$DEST/bench/race.log"
  BENCH_RC=${PIPESTATUS[0]}
fi

TESTS_RC=skipped
if [ "$PART" = all ] || [ "$PART" = tests ]; then
  t=$(( $(left) - 25 ))
  if [ "$t" -lt 40 ]; then
    echo "== tests: skipped, only $(left)s left of TOTAL_S=$TOTAL_S"
  else
    impl_args=(); for i in $IMPLS; do impl_args+=(--impl "$i"); done
    k_args=(); [ -n "${K:-}" ] && k_args=(-k "$K")
    [ -n "${M:-}" ] && k_args+=(-m "$M")
    echo "== tests: ${impl_args[*]} ${k_args[*]} --hypothesis-profile=$PROFILE -n $WORKERS, ${t}s (MAMBA_DETERMINISTIC=$([ "$MAMBA_AUTOTUNE" = 1 ] && echo unset || echo 1))"
    mamba_env=(MAMBA_DETERMINISTIC=1); [ "$MAMBA_AUTOTUNE" = 1 ] && mamba_env=()
    share_args=(); [ "$SHARE_TIME" = 1 ] && share_args=(--ssd-fuzz-seconds=$(( t - 30 )))
    env -u MAMBA_DETERMINISTIC "${mamba_env[@]}" PYTHONPATH="$PWD/lab/scripts:${PYTHONPATH:-}" \
      timeout --signal=INT --kill-after=20 "$t" \
      python3 -m pytest tests/test_properties.py tests/test_regressions.py "${impl_args[@]}" "${k_args[@]}" --hypothesis-profile="$PROFILE" \
        -n "$WORKERS" -p no:cacheprovider -p pytest_jsonl --jsonl="$DEST/peers/results.jsonl" "${share_args[@]}" \
        --ssd-report="$DEST/peers/report.json" --ssd-repro-dir="$DEST/peers/repro" \
        --hypothesis-show-statistics -rfE -v >"$DEST/peers/pytest.log" 2>&1
    TESTS_RC=$?
    echo "   pytest exit $TESTS_RC (124: stopped at the time limit); log $DEST/peers/pytest.log, report $DEST/peers/report.json"
  fi
fi

echo
echo "== summary ($(( $(date +%s) - T0 ))s)"
if [ -f "$DEST/peers/results.jsonl" ]; then
  python3 lab/scripts/summarize_pytest.py "$DEST/peers/results.jsonl" | tee "$DEST/peers/summary.txt"
  # an example that overran its share: the stall watchdog's report (test, problem, stacks)
  for f in "$DEST"/peers/report.stall-*.txt; do
    [ -f "$f" ] && { echo "stall report $f:"; grep -A2 "^ssdcheck stall:" "$f"; } | tee -a "$DEST/peers/summary.txt"
  done
fi
if [ -f "$DEST/bench/$GROUP.json" ]; then
  python3 - "$DEST/bench/$GROUP.json" <<'EOF'
import json, sys
from lab.bench.race import summary_table
doc = json.load(open(sys.argv[1]))
c = doc.get("ceilings", {})
print(f"bench {doc['group']}: complete={doc['complete']} aborted={doc['aborted']} elapsed={doc['elapsed_s']}s "
      f"copy={c.get('copy_GBps', 0):.0f} GB/s mm={c.get('matmul_TFLOPs', 0):.0f} TFLOP/s")
print(summary_table(doc))
EOF
fi
echo "bench exit: $BENCH_RC; tests exit: $TESTS_RC; files under $DEST"
