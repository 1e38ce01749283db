#!/usr/bin/env bash
# usage: scripts/gpu_vllm.sh [--out DIR]   # env: MODE=shipped|first TOTAL_S=480, gpu_peers.sh's knobs (below)
# vLLM 0.33.0's prefill SSD under the property suite on a GPU host. Run from the repo root,
# after `source .gpu-bundle/setup.sh` (sourced here if it was not). Prints where vLLM's fragment loads
# from, whether this GPU drops the configs vLLM says Triton miscompiles on sm90, and then runs
# tests/test_properties.py and tests/test_regressions.py through scripts/gpu_peers.sh (its knobs
# apply: K, M, PROFILE, WORKERS, SHARE_TIME); everything lands in DIR (default out/gpu_vllm).
#
#   MODE=shipped scripts/gpu_vllm.sh            # autotuning as vLLM ships it (default), --impl vllm;
#                                               # files under DIR/peers
#   MODE=first scripts/gpu_vllm.sh              # VLLM_TRITON_FORCE_FIRST_CONFIG=1: vLLM's own
#                                               # force_first_config.py picks each kernel's first config
#                                               # that fits; one input dtype per process (below), the
#                                               # three side by side, files under DIR/first-<dtype>/peers
#   PROFILE=cpu K="matches_oracle and not model" scripts/gpu_vllm.sh   # a smoke: 12 examples
#
# Shipped: every worker autotunes each new key as vLLM does (Triton's timing of every config);
# TRITON_CACHE_AUTOTUNING=1 keeps each pick in Triton's on-disk cache, so the other workers (and a later
# run on the same machine) read it instead of timing the configs again.
# First: vLLM's knob keeps its pick per kernel and key values, not per dtype, so fp32 after bf16 at the
# same key fails (docs/findings/vllm-first-config-dtype.md); a process serving a model has one dtype, so
# each dtype runs alone: --impl kernels.peers.vllm:BY_DTYPE.<dtype>, WORKERS/3 workers each.
#
# Knobs (environment): MODE=shipped|first, TOTAL_S=480 (the wall-clock budget of the tests, setup and
# the loading check not included: ~20 s), and those of scripts/gpu_peers.sh (PART is always tests).
# Output for the report: DIR/**/peers/{summary.txt,results.jsonl,report.json,pytest.log};
# `python3 scripts/summarize_pytest.py DIR/*/results.jsonl` and `ssdcheck report .../report.json`.
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gpu_vllm "$@"
cd "$(dirname "$0")/.."
export MODE=${MODE:-shipped}
case "$MODE" in
  shipped) unset VLLM_TRITON_FORCE_FIRST_CONFIG ;;
  first) export VLLM_TRITON_FORCE_FIRST_CONFIG=1 ;;
  *) echo "gpu_vllm: MODE must be shipped or first, got '$MODE'" >&2; exit 2 ;;
esac
case "${SSDCHECK_GPU_SITE:-}" in
  ?*) ;;
  *) if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_vllm: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi ;;
esac
mkdir -p "$DEST/peers"
python3 - <<'PY' 2>&1 | tee "$DEST/peers/vllm-environment.txt"
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
export TOTAL_S=${TOTAL_S:-480}
if [ "$MODE" = shipped ]; then
  MODE=$MODE PART=tests IMPLS=vllm TRITON_CACHE_AUTOTUNING=1 exec scripts/gpu_peers.sh --out "$DEST"
fi
per=$(( ${WORKERS:-16} / 3 )); [ "$per" -ge 1 ] || per=1
pids=()
for d in float16 bfloat16 float32; do
  PART=tests IMPLS="kernels.peers.vllm:BY_DTYPE.$d" WORKERS=$per \
    scripts/gpu_peers.sh --out "$DEST/first-$d" > "$DEST/first-$d.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for d in float16 bfloat16 float32; do echo "== first config, $d only"; tail -n 3 "$DEST/first-$d.log"; done
python3 scripts/summarize_pytest.py "$DEST"/first-*/peers/results.jsonl | tee "$DEST/summary.txt"
