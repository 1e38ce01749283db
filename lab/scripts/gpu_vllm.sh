#!/usr/bin/env bash
# usage: lab/scripts/gpu_vllm.sh [--out DIR]   # env: MODE=shipped|first|checks TOTAL_S=480, gpu_peers.sh's knobs
# vLLM 0.33.0's prefill SSD on a GPU host. Run from the repo root, after `source .gpu-bundle/setup.sh`
# (sourced here if it was not). Prints where vLLM's fragment loads from and whether this GPU drops the
# configs vLLM says Triton miscompiles on sm90 (DIR/vllm-environment.txt), then by MODE:
#
#   MODE=shipped   tests/test_properties.py and tests/test_regressions.py --impl vllm through
#                  lab/scripts/gpu_peers.sh (its knobs apply: K, M, PROFILE, WORKERS, SHARE_TIME), vLLM
#                  autotuning as it ships (default); files under DIR/peers
#   MODE=first     the same with VLLM_TRITON_FORCE_FIRST_CONFIG=1: vLLM's own force_first_config.py
#                  picks each kernel's first config that fits; one input dtype per process (below),
#                  the three side by side with WORKERS/3 workers each; files under DIR/first-<dtype>/peers
#   MODE=checks    the fast_exp measurement (lab/scripts/gpu_fast_exp_check.py), the two vLLM reproducers,
#                  tests/test_vllm_gpu.py; files under DIR/checks (status.txt: each one's exit code)
#
# Shipped: vLLM autotunes each new key as it ships (Triton's timing of every config, ~47 over the five
# kernels); TRITON_CACHE_AUTOTUNING=1 keeps each pick in Triton's on-disk cache, so the other workers
# (and a later run on the same machine) read it instead of timing the configs again. The triage
# battery's keys are tuned first, one process per problem side by side (lab/scripts/gpu_autotune_prime.py,
# at most PRIME_S=150 s, taken from TOTAL_S; DIR/autotune-prime.txt: what each cost), and vLLM's
# compile key (KernelInfo.compile_key) keeps 7 draws in 8 in those keys. The time budget holds
# whatever autotuning costs: a test past its share stops drawing (examples fall, the time does not).
# First: vLLM's knob keeps its pick per kernel and key values, not per dtype, so fp32 after bf16 at the
# same key fails (docs/findings/vllm-first-config-dtype.md); a process serving a model has one dtype, so
# each dtype runs alone: --impl kernels.peers.vllm:BY_DTYPE.<dtype>.
#
# The whole of vLLM on one H200 (16 cores), one command each, every one under 10 minutes:
#   MODE=shipped lab/scripts/gpu_vllm.sh --out out/vllm-shipped    # ~9 min (TOTAL_S=480 + setup)
#   MODE=first lab/scripts/gpu_vllm.sh --out out/vllm-first        # ~9 min
#   MODE=checks lab/scripts/gpu_vllm.sh --out out/vllm-checks      # ~5 min (limits add up to 9.5)
#   V_GROUPS="v64h32 v64h64" N_GROUPS= TG_GROUPS= STAGES_S=0 lab/scripts/gpu_race.sh --out out/race-v64
#                  # the race with vLLM, two groups per command (v64h32 v64h64, v128h32 v128h64, v256h32
#                  # v256h64: 159-218 s each pair on the H200); merge DIR/vllm-tuning.json's new entries
#                  # into lab/reports/vllm-tuning-h200.json to keep vLLM's autotune picks
#
# Knobs (environment): MODE, TOTAL_S=480 (the wall-clock budget of the tests and, shipped, the
# autotuning first; setup and the loading check not included: ~20 s), PRIME_S=150, and those of
# lab/scripts/gpu_peers.sh (PART is always tests). HALF=1|2 (when K is unset): one half of the property
# tests, split by how long vLLM's autotuning of their new keys took on the H200 (in one command with
# 440 s, 11 of the tests stopped short of 200 examples: lab/reports/2026-12-02-vllm-shipped-suite.md);
# half 1 is the oracle comparisons and the cheap invariants, half 2 the shape-changing invariants
# and the stored regressions. Each half is one command: run both for the whole suite.
# Output for the report: DIR/**/peers/{summary.txt,results.jsonl,report.json,report.md,pytest.log}
# (shipped also DIR/autotune-prime.txt; first also DIR/summary.txt, all three dtypes), DIR/checks/*.txt
# and fast-exp.json.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gpu_vllm "$@"
cd "$(dirname "$0")/../.."
export MODE=${MODE:-shipped}
case "$MODE" in
  shipped|checks) unset VLLM_TRITON_FORCE_FIRST_CONFIG ;;
  first) export VLLM_TRITON_FORCE_FIRST_CONFIG=1 ;;
  *) echo "gpu_vllm: MODE must be shipped, first or checks, got '$MODE'" >&2; exit 2 ;;
esac
case "${SSDCHECK_GPU_SITE:-}" in
  ?*) ;;
  *) if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_vllm: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi ;;
esac
mkdir -p "$DEST"
python3 - <<'PY' 2>&1 | tee "$DEST/vllm-environment.txt"
import os, sys
from kernels.peers import vllm
from kernels.peers import vllm_files
print("vllm fragment:", vllm_files.find_root(), "mode:", os.environ.get("MODE"),
      "VLLM_TRITON_FORCE_FIRST_CONFIG:", os.environ.get("VLLM_TRITON_FORCE_FIRST_CONFIG"))
vllm._load()
scan = sys.modules["vllm.model_executor.layers.mamba.ops.ssd_chunk_scan"]
p = vllm_files.Platform()
print(f"vllm {vllm.version()}; is_cuda={p.is_cuda()} is_device_capability(90)={p.is_device_capability(90)}; "
      f"chunk-scan configs kept: {len(scan._chunk_scan_fwd_kernel.configs)}")
from vllm.triton_utils import force_first_config
print("force_first_config installed:", force_first_config.is_installed())
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu_vllm: vLLM's fragment does not load; see above" >&2; exit 3; }

if [ "$MODE" = checks ]; then   # each prints its verdict; exit codes in DIR/checks/status.txt
  mkdir -p "$DEST/checks"; : > "$DEST/checks/status.txt"
  check() {   # check NAME LIMIT_S CMD...
    local name=$1 limit=$2; shift 2
    timeout "$limit" "$@" > "$DEST/checks/$name.txt" 2>&1
    echo "$name rc=$?" | tee -a "$DEST/checks/status.txt"; tail -n 12 "$DEST/checks/$name.txt"
  }
  check fast-exp 120 python3 lab/scripts/gpu_fast_exp_check.py --out "$DEST/checks"
  check repro-first-config-dtype 200 python3 lab/scripts/repro_vllm_first_config_dtype.py
  check repro-empty-sequence 80 python3 lab/scripts/repro_vllm_empty_sequence.py
  check test-vllm-gpu 160 python3 -m pytest tests/test_vllm_gpu.py -p no:cacheprovider -rxXs -v
  exit 0
fi

export TOTAL_S=${TOTAL_S:-480}
HALF1="matches_oracle or linearity or no_decay or causality or determinism or stages or group_broadcast"
case "${HALF:-}" in
  "") ;;
  1) [ -n "${K:-}" ] || export K="$HALF1 and not regression" ;;
  2) [ -n "${K:-}" ] || export K="not ($HALF1) or regression" ;;
  *) echo "gpu_vllm: HALF must be 1 or 2, got '$HALF'" >&2; exit 2 ;;
esac
runs=()
if [ "$MODE" = shipped ]; then
  export TRITON_CACHE_AUTOTUNING=1
  t0=$(date +%s)
  echo "== autotuning the batteries once (lab/scripts/gpu_autotune_prime.py, at most ${PRIME_S:-150}s)"
  timeout "${PRIME_S:-150}" python3 lab/scripts/gpu_autotune_prime.py --impl vllm 2>&1 | tee "$DEST/autotune-prime.txt"
  TOTAL_S=$(( TOTAL_S - ($(date +%s) - t0) ))
  PART=tests IMPLS=vllm lab/scripts/gpu_peers.sh --out "$DEST"
  runs=("$DEST")
else
  per=$(( ${WORKERS:-16} / 3 )); [ "$per" -ge 1 ] || per=1
  pids=()
  for d in float16 bfloat16 float32; do
    PART=tests IMPLS="kernels.peers.vllm:BY_DTYPE.$d" WORKERS=$per \
      lab/scripts/gpu_peers.sh --out "$DEST/first-$d" > "$DEST/first-$d.log" 2>&1 &
    pids+=($!); runs+=("$DEST/first-$d")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for d in float16 bfloat16 float32; do echo "== first config, $d only"; tail -n 3 "$DEST/first-$d.log"; done
  python3 lab/scripts/summarize_pytest.py "$DEST"/first-*/peers/results.jsonl | tee "$DEST/summary.txt"
fi
for r in "${runs[@]}"; do   # the markdown report of each run, beside its JSON
  [ -f "$r/peers/report.json" ] && python3 -m ssdcheck report "$r/peers/report.json" > "$r/peers/report.md"
done
echo "gpu_vllm: MODE=$MODE done; reports: $(ls "$DEST"/peers/report.md "$DEST"/first-*/peers/report.md 2>/dev/null | tr '\n' ' ')"
