#!/usr/bin/env bash
# usage: lab/scripts/gpu_production_modes.sh [--out DIR]   # env: PART=triage|recheck|fill|prime IMPLS=... TOTAL_S=420
# The peers as production runs them, on a GPU host (after `source .gpu-bundle/setup.sh`, sourced here if
# it was not): state caches and parameters in the model dtype, each peer in its shipped mode.
#
#   PART=triage  (~5 min) the standalone vLLM reproducer of initial states whose dtype is not the state
#                dtype (lab/scripts/repro_vllm_state_dtype.py); where the pristine-vLLM false alarm's
#                elements sit against the elementwise rule, for vLLM's two modes and cuTile
#                (lab/scripts/elementwise_tail.py); test_matches_oracle on a bf16-state, bf16-parameter
#                problem pinned for each implementation. DIR/status.txt: each step's exit code.
#   PART=recheck (~3 min) the false alarm's problem through test_matches_oracle on both vLLM modes and
#                cuTile, its elementwise tail on vLLM's first-config mode, and the bf16-state problem on
#                vLLM's first-config mode: what the policy and adapter fixes must turn into passes.
#   PART=fill    the property suite and the stored regressions on each of IMPLS in turn (default
#                "vllm"), through lab/scripts/gpu_peers.sh with the time budget TOTAL_S per implementation
#                (DIR/<impl>/peers/: summary.txt, report.json, report.md, pytest.log). A peer in its
#                shipped mode (vllm, mamba-ssm, tilegym) first tunes its batteries, one process per
#                problem (lab/scripts/gpu_autotune_prime.py, at most PRIME_S=240 s, within TOTAL_S;
#                Triton's picks shared through TRITON_CACHE_AUTOTUNING=1, TileGym's compiles through
#                the shared cuTile cache of gpu_peers.sh); PRIME_MENU=1 also tunes one problem per key of
#                the GPU menu (`--menu`: 120 for the Triton peers), so the drawn problems find their picks
#                made; PRIME_CHECKS=1 then runs the battery checks the warm-up and each test's battery
#                run (`--checks`: their derived runs are shapes TileGym searches anew); PRIME_PRECOMPILE=1
#                first builds every compile of those calls and checks, each once, on every core
#                (`--precompile`: TileGym's search candidates, which a search compiles one by one).
#                TILEGYM_TUNING=FILE: TileGym's search choices from earlier runs
#                (kernels/peers/tilegym_tuning.py), copied with its sibling files into DIR/tilegym-tuning/,
#                where the workers add theirs: a later fill passes that folder's FILE back and skips every
#                search already made.
#   PART=prime   only the prime of each of IMPLS (PRIME_S=560 each), for a fill in the next call on the
#                same host: TileGym's candidates for the GPU menu take longer to compile (~110 s a key
#                with 16 at once) than one call can hold beside the fill. The caches stay where the
#                fill looks (CUDA_TILE_CACHE_DIR, Triton's cache, DIR/tilegym-tuning/ for TILEGYM_TUNING).
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gpu_production_modes "$@"
cd "$(dirname "$0")/../.."
PART=${PART:-triage}
case "$PART" in   # before the setup: a mistaken run on a GPU host costs minutes
  triage|recheck|fill|prime) ;;
  *) echo "gpu_production_modes: PART must be triage, recheck, fill or prime, got '$PART'" >&2; exit 2 ;;
esac
if [ -z "${SSDCHECK_GPU_SITE:-}" ]; then
  if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_production_modes: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi
fi
export PYTHONUNBUFFERED=1
mkdir -p "$DEST"; : > "$DEST/status.txt"

step() {   # step NAME LIMIT_S CMD...: its output in DIR/NAME.txt, its exit code in DIR/status.txt
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$DEST/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$DEST/status.txt"; tail -n "${TAIL:-14}" "$DEST/$name.txt"
}

# the false alarm on pristine vLLM (bfloat16, first config forced), as reported; pinned in tests/test_regressions.py
ALARM="SSDProblem(batch=8, seqlen=191, nheads=36, headdim=64, dstate=64, ngroups=2, chunk_size=64, dtype='bfloat16', decay=2.0, decay_decades=3.0, dt_mu=1.0, dt_softplus=True, dt_bias=True, dt_limit=(0.0, 1.0), dt_dtype='input', D='h', z=True, initial_states=True, final_states=True, seq_starts=(), varlen=False, seed=0)"
# the same layer with its state cache and parameters in bfloat16, and TileGym's nearest (whole chunks, D only)
STATES16=${ALARM/seed=0)/states_dtype=\'input\', params_dtype=\'input\', seed=0)}
TG16="SSDProblem(batch=2, seqlen=192, nheads=8, headdim=64, dstate=64, ngroups=2, chunk_size=64, dtype='bfloat16', decay=2.0, decay_decades=3.0, dt_dtype='input', D='h', initial_states=True, final_states=True, states_dtype='input', params_dtype='input', seed=0)"

pinned() {   # pinned NAME IMPL PROBLEM: test_matches_oracle on that one problem
  step "$1" "${LIMIT:-150}" python3 -m pytest "tests/test_properties.py::test_matches_oracle" --impl "$2" \
    -p no:cacheprovider --ssd-problem "$3" -x -q -rfE
}

case "$PART" in
  triage)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$DEST/gpu.txt"
    step repro-state-dtype 150 python3 lab/scripts/repro_vllm_state_dtype.py
    step tail-vllm-first-config 120 python3 lab/scripts/elementwise_tail.py --impl vllm-first-config --problem "$ALARM" --seeds 4
    step tail-vllm 150 python3 lab/scripts/elementwise_tail.py --impl vllm --problem "$ALARM" --seeds 2
    step tail-cutile 120 python3 lab/scripts/elementwise_tail.py --impl cutile --problem "$ALARM" --seeds 2
    pinned states16-vllm vllm "$STATES16"
    pinned states16-vllm-first-config vllm-first-config "$STATES16"
    pinned states16-mamba-ssm mamba-ssm "$STATES16"
    pinned states16-cutile cutile "$STATES16"
    pinned states16-tilegym-first-config tilegym-first-config "$TG16"
    ;;
  recheck)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$DEST/gpu.txt"
    pinned alarm-vllm-first-config vllm-first-config "$ALARM"
    pinned alarm-vllm vllm "$ALARM"
    pinned alarm-cutile cutile "$ALARM"
    step tail-vllm-first-config 120 python3 lab/scripts/elementwise_tail.py --impl vllm-first-config --problem "$ALARM" --seeds 2
    pinned states16-vllm-first-config vllm-first-config "$STATES16"
    ;;
  fill|prime)
    export TOTAL_S=${TOTAL_S:-420}
    export CUDA_TILE_CACHE_DIR=${CUDA_TILE_CACHE_DIR:-/tmp/ssdcheck-cutile-cache}   # as gpu_peers.sh: the prime fills it
    # cuTile evicts past 2 GiB by default; TileGym's prime alone writes more (a chunk-128 output cubin is ~4.4 MB)
    export CUDA_TILE_CACHE_SIZE=${CUDA_TILE_CACHE_SIZE:-17179869184}
    if [ -n "${TILEGYM_TUNING:-}" ]; then
      mkdir -p "$DEST/tilegym-tuning"
      tg_base=$(basename "$TILEGYM_TUNING" .json)
      cp "$(dirname "$TILEGYM_TUNING")/$tg_base".*json "$TILEGYM_TUNING" "$DEST/tilegym-tuning/" 2>/dev/null
      export SSDCHECK_TILEGYM_TUNING=$DEST/tilegym-tuning/$tg_base.json
      echo "tilegym tuning: $(ls "$DEST/tilegym-tuning" | wc -l) file(s) in $DEST/tilegym-tuning" | tee -a "$DEST/status.txt"
    fi
    prime_s=${PRIME_S:-240}; [ "$PART" = prime ] && prime_s=${PRIME_S:-560}
    for impl in ${IMPLS:-vllm}; do
      t0=$(date +%s)
      case "$impl" in
        vllm|mamba-ssm|tilegym)   # as shipped: tune the batteries once, the picks shared by the workers
          export TRITON_CACHE_AUTOTUNING=1
          [ "$impl" = mamba-ssm ] && [ "${MAMBA_AUTOTUNE:-1}" = 1 ] && unset MAMBA_DETERMINISTIC
          timeout "$prime_s" python3 lab/scripts/gpu_autotune_prime.py --impl "$impl" ${PRIME_MENU:+--menu} ${PRIME_CHECKS:+--checks} \
            ${PRIME_PRECOMPILE:+--precompile} \
            > "$DEST/autotune-prime-$impl.txt" 2>&1
          echo "prime-$impl rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$DEST/status.txt"
          tail -n 16 "$DEST/autotune-prime-$impl.txt" ;;
      esac
      [ "$PART" = prime ] && continue
      TOTAL_S=$(( TOTAL_S - ($(date +%s) - t0) )) PART=tests IMPLS="$impl" lab/scripts/gpu_peers.sh --out "$DEST/$impl" \
        > "$DEST/$impl.log" 2>&1
      echo "fill-$impl rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$DEST/status.txt"
      [ -f "$DEST/$impl/peers/report.json" ] && python3 -m ssdcheck report "$DEST/$impl/peers/report.json" > "$DEST/$impl/peers/report.md"
      tail -n 30 "$DEST/$impl/peers/summary.txt" 2>/dev/null
    done
    ;;
esac
echo "gpu_production_modes: PART=$PART done ($DEST)"; cat "$DEST/status.txt"
