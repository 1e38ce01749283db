#!/usr/bin/env bash
# usage: lab/scripts/gpu_ci_compare.sh [--out DIR] [PYTEST SELECTION...]   # env: WORKERS=2 COMPILE_CACHE=cold
# Run the same test selection on one GPU and with `-n 2` (one xdist worker per GPU), record the wall
# time of each, and diff the per-test verdicts (and worst errors) of the two JSON reports.
#
#   lab/scripts/gpu_ci_compare.sh                    # tests/test_properties.py --impl cutile, gpu profile, not slow
#   lab/scripts/gpu_ci_compare.sh --out out/cmp tests/test_properties.py --impl cutile -k matches_oracle
#
# DIR defaults to out/gpu_ci_compare. Environment:
#   WORKERS=N        xdist workers of the second run (default 2)
#   COMPILE_CACHE=cold|shared
#                    cold (default): each run starts with an empty cuTile compile cache of its own, so
#                    both pay the same compiles; shared: both use .ssdcheck-cache/cutile (the second
#                    run then finds the first one's cubins, which flatters it)
#   PYTHON=python3   the interpreter
#
# Writes: one-gpu.{json,xml,log}, n2.{json,xml,log} (n$WORKERS), times.txt, compare.md, compare.json,
# summary.json, nvidia-smi.txt. Exit 0 when every test has the same outcome in both runs, 1 when a
# verdict differs, 2 when a run could not produce its report.
set -uo pipefail
ARGS_PASS=1 source "$(dirname "$0")/_args.sh" out/gpu_ci_compare "$@"
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
WORKERS="${WORKERS:-2}"
mkdir -p "$DEST"
if [ "${#REST[@]}" -gt 0 ]; then
  SEL=("${REST[@]}")
else
  SEL=(tests/test_properties.py --impl cutile --hypothesis-profile=gpu -m "not slow")
fi

(nvidia-smi || true) > "$DEST/nvidia-smi.txt" 2>&1
NGPU=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
echo "visible GPUs: $NGPU; selection: ${SEL[*]}" | tee "$DEST/times.txt"
if [ "$NGPU" -eq 0 ]; then
  echo "warning: no GPU visible: both runs use the CPU (only the verdict diff means anything)" | tee -a "$DEST/times.txt"
elif [ "$NGPU" -lt "$WORKERS" ]; then
  echo "warning: $NGPU GPU(s) for $WORKERS workers: workers share GPUs (gwN -> GPU N % $NGPU)" | tee -a "$DEST/times.txt"
fi

run() {  # run NAME [extra pytest args...]; env CVD limits the visible GPUs
  local name=$1; shift
  local cache="$PWD/.ssdcheck-cache/cutile"
  if [ "${COMPILE_CACHE:-cold}" = cold ]; then
    cache="$DEST/cutile-cache-$name"; rm -rf "$cache"
  fi
  local start end rc
  start=$(date +%s.%N)
  env ${CVD:+CUDA_VISIBLE_DEVICES=$CVD} "$PY" -m pytest "${SEL[@]}" "$@" -p no:cacheprovider -q -rfE \
    --ssd-compile-cache "$cache" --ssd-report "$DEST/$name.json" --junitxml "$DEST/$name.xml" \
    --ssd-repro-dir "$DEST/$name-failures" > "$DEST/$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "$name rc=$rc wall_s=$("$PY" -c "print(round($end - $start, 2))")" | tee -a "$DEST/times.txt"
  tail -n 3 "$DEST/$name.log"
}

CVD=0 run one-gpu
CVD="" run "n$WORKERS" -n "$WORKERS"

for name in one-gpu "n$WORKERS"; do
  if [ ! -s "$DEST/$name.json" ]; then
    echo "no report from the $name run; see $DEST/$name.log"; exit 2
  fi
done

"$PY" -m ssdcheck_plugin.compare "$DEST/one-gpu.json" "$DEST/n$WORKERS.json" \
  --names "1 GPU,-n $WORKERS" --out "$DEST"
status=$?

"$PY" - "$DEST" "n$WORKERS" <<'PYEOF'
import json, re, sys
from pathlib import Path
dest, name = Path(sys.argv[1]), sys.argv[2]
times = {m[0]: {"rc": int(m[1]), "wall_s": float(m[2])}
         for m in re.findall(r"^(\S+) rc=(-?\d+) wall_s=([\d.]+)$", (dest / "times.txt").read_text(), re.M)}
two = json.loads((dest / f"{name}.json").read_text())
cmp = json.loads((dest / "compare.json").read_text())
summary = {"runs": times, "speedup": round(times["one-gpu"]["wall_s"] / max(times[name]["wall_s"], 1e-9), 2),
           "worker_devices": (two["meta"].get("xdist") or {}).get("devices"),
           "gpus": two["meta"]["gpu"], "same_verdicts": cmp["same_verdicts"],
           "verdict_diffs": len(cmp["verdict_diffs"]), "error_diffs": len(cmp["error_diffs"])}
(dest / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print(f"speedup {summary['speedup']}x; worker -> GPU {summary['worker_devices']}; "
      f"verdicts {'identical' if summary['same_verdicts'] else 'DIFFER'}")
PYEOF
echo "results in $DEST"
exit "$status"
