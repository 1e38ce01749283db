#!/usr/bin/env bash
# usage: lab/scripts/gpu_backward.sh [--out DIR]   # env: PART=grad-mamba-ssm|grad-tilegym|mutants-tilegym|mutants-mamba-ssm
# The backward on a GPU host, one part per call (each fits 9 minutes on one H200 with 16 cores), after
# `source .gpu-bundle/setup.sh` (sourced here if it was not). Everything lands in DIR/PART (default
# out/gpu_backward/PART).
#
#   PART=grad-mamba-ssm lab/scripts/gpu_backward.sh --out DIR     # every gradient property vs mamba_ssm's
#                                                             # backward (autograd), 200 examples each
#   PART=grad-tilegym lab/scripts/gpu_backward.sh --out DIR       # the same vs TileGym's mamba2_chunk_backward,
#                                                             # its ZERO_DT_DDT deviation declared
#   PART=mutants-tilegym lab/scripts/gpu_backward.sh --out DIR    # mutation/catalog_tilegym_bwd.py (13)
#   PART=mutants-mamba-ssm lab/scripts/gpu_backward.sh --out DIR  # mutation/catalog_mamba_ssm_bwd.py (14)
#
# grad-*: lab/scripts/grad_gpu.py (pytest tests/test_gradients.py, gpu profile: derandomized, 200 examples
#   per property, one xdist worker per core, each test stopping at its share of BUDGET_S); writes
#   pytest.log, results.jsonl, report.json (known deviations and unexpected passes counted in its
#   summary) and summary.txt (per test: status, seconds, examples, worst share of the tolerance).
# mutants-*: python -m mutation.run --catalog <name>_bwd, every mutant and the unmutated baseline at
#   once (JOBS), each through `pytest tests/test_gradients.py --impl <peer> --hypothesis-profile=mutant
#   -x`; writes mutation.json, mutation.md (score, examples and seconds to kill) and mutation.log.
#
# Knobs (environment):
#   PART                  required: which of the four parts
#   BUDGET_S=530          grad-*: the wall-clock budget of the pytest run (lab/scripts/grad_gpu.py --budget-s)
#   K=<pytest -k>         grad-*: a subset of the properties
#   JOBS=14               mutants-*: runs at once (14: every mutant and the baseline of the larger catalog)
#   MUTANT_S=300          mutants-*: seconds per mutant (a killed one stops at its first failure)
#   BASELINE_S=480        mutants-*: seconds for the unmutated baseline (it runs every test to its end)
set -uo pipefail
source "$(dirname "$0")/_args.sh" out/gpu_backward "$@"
cd "$(dirname "$0")/../.."
PART=${PART:-}
case "$PART" in
  grad-mamba-ssm|grad-tilegym|mutants-tilegym|mutants-mamba-ssm) ;;
  *) echo "gpu_backward.sh: PART: expected grad-mamba-ssm, grad-tilegym, mutants-tilegym or mutants-mamba-ssm, got '$PART'" >&2
     exit 2 ;;
esac
BUDGET_S=${BUDGET_S:-530}; JOBS=${JOBS:-14}; MUTANT_S=${MUTANT_S:-300}; BASELINE_S=${BASELINE_S:-480}
PART_DIR=$DEST/$PART
mkdir -p "$PART_DIR"
if [ -z "${SSDCHECK_GPU_SITE:-}" ]; then   # setup.sh not sourced yet
  if [ -f .gpu-bundle/setup.sh ]; then source .gpu-bundle/setup.sh; else echo "gpu_backward: no .gpu-bundle/setup.sh; assuming the peers are importable" >&2; fi
fi
export PYTHONUNBUFFERED=1
export CUDA_TILE_CACHE_DIR=${CUDA_TILE_CACHE_DIR:-/tmp/ssdcheck-cutile-cache}   # TileGym's compiles, shared by runs

case "$PART" in
  grad-*)
    impl=${PART#grad-}
    python3 lab/scripts/grad_gpu.py --impl "$impl" --out "$PART_DIR" --budget-s "$BUDGET_S" ${K:+-k "$K"}
    rc=$?
    python3 - "$PART_DIR/report.json" <<'EOF' | tee "$PART_DIR/deviations.txt"
import json, sys
try:
    s = json.load(open(sys.argv[1]))["summary"]
except (OSError, ValueError, KeyError) as e:
    sys.exit(f"no report summary: {e}")
print(f"known deviations: {s.get('known_deviations')} example(s), unexpected passes: {s.get('unexpected_passes')}")
EOF
    ;;
  mutants-*)
    catalog=${PART#mutants-}; catalog=${catalog//-/_}_bwd
    timeout $((BASELINE_S + 60)) python3 -m mutation.run --catalog "$catalog" --jobs "$JOBS" --budget-s "$MUTANT_S" \
      --baseline-budget-s "$BASELINE_S" --json "$PART_DIR/mutation.json" --md "$PART_DIR/mutation.md" 2>&1 \
      | tee "$PART_DIR/mutation.log"
    rc=${PIPESTATUS[0]}
    ;;
esac
echo "gpu_backward: $PART exit $rc; files in $PART_DIR"
exit "$rc"
