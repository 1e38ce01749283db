#!/usr/bin/env bash
# usage: scripts/gpu_vllm.sh [--out DIR]   # env: MODE=shipped|first, and gpu_peers.sh's knobs (below)
# vLLM 0.33.0's prefill SSD under the property suite on a GPU host. Run from the repo root,
# after `source .gpu-bundle/setup.sh` (sourced here if it was not). Prints where vLLM's fragment loads
# from, whether this GPU drops the configs vLLM says Triton miscompiles on sm90, and then runs
# tests/test_properties.py --impl vllm through scripts/gpu_peers.sh (its knobs apply: K, M, PROFILE,
# TOTAL_S, WORKERS, SHARE_TIME); everything lands in DIR (default out/gpu_vllm), under peers/.
#
#   MODE=shipped scripts/gpu_vllm.sh            # autotuning as vLLM ships it (default)
#   MODE=first scripts/gpu_vllm.sh              # VLLM_TRITON_FORCE_FIRST_CONFIG=1: vLLM's own
#                                               # force_first_config.py takes every kernel's first config
#   PROFILE=cpu K="matches_oracle and not model" scripts/gpu_vllm.sh   # a smoke: 12 examples
#
# Knobs (environment): MODE=shipped|first, and those of scripts/gpu_peers.sh (PART is always tests,
# IMPLS always vllm).
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
MODE=$MODE PART=tests IMPLS=vllm exec scripts/gpu_peers.sh --out "$DEST"
