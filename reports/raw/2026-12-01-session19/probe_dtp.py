"""Session 19 probe: does the DTP forward (chunk_state doing chunk_cumsum's work) finish on the GPU, and
which form of its dt / A / dt_bias loads does? Each variant is a copy of this tree with one edit of
kernels/cutile/kernels.py, run in its own process under a timeout (a hang is killed and reported).

    python scripts/probe_dtp.py --out $OUT/probe        # on the GPU host, after setup.sh

Per variant: rc, seconds, and the normwise difference between the DTP forward and the same forward
with DTP=0 (chunk_cumsum then chunk_state), at an aligned bf16 problem, chunk 64 and 128.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE_DTC = "ct.store(dtc, (bi, head, c), dtt.reshape((1, 1, CH)))"
STORE_CS = "ct.store(cs, (bi, head, c), cst.reshape((1, 1, CH)))"
CUMSUM = "cst = ct.cumsum(dtt * a, axis=0)"
# Call 3 (session 19) ran the loads' variants: as-is, dt-no-tma (the dt load without TMA), all-no-tma (dt,
# A, dt_bias without TMA) and dt-gather (dt by ct.gather): all four hung (75 s, no output). Call 4 takes
# the rest of the DTP path apart, one piece per variant; every edit keeps the line count (so the other
# kernels' debug info, and their compile-cache entries, stay the same).
VARIANTS = {
    "no-stores": [(STORE_DTC, "dtt = dtt"), (STORE_CS, "cst = cst")],
    "stores-unconditional": [("if col == 0:    # one writer", "if DTP != 0:    # one writer")],
    "stores-no-tma": [(STORE_DTC, STORE_DTC[:-1] + ", allow_tma=False)"),
                      (STORE_CS, STORE_CS[:-1] + ", allow_tma=False)")],
    "no-cumsum": [(CUMSUM, "cst = dtt * a")],
    "no-softplus": [("bias, dt_softplus, dt_min, dt_max)", "bias, 0, dt_min, dt_max)")],
}

CHILD = r'''
import json, sys, time, torch
from bench.race import rel_err
from kernels.cutile import dispatch, launcher, ssd_forward
out = {}
for chunk in (64,):
    g = torch.Generator(device="cuda").manual_seed(0)
    b, l, h, p, n = 2, 512, 8, 64, 64
    x = torch.randn(b, l, h, p, device="cuda", dtype=torch.bfloat16, generator=g)
    B = torch.randn(b, l, 1, n, device="cuda", dtype=torch.bfloat16, generator=g)
    C = torch.randn(b, l, 1, n, device="cuda", dtype=torch.bfloat16, generator=g)
    dt = torch.randn(b, l, h, device="cuda", generator=g)
    A = -torch.rand(h, device="cuda", generator=g) * 0.1
    kw = dict(x=x, dt=dt, A=A, B=B, C=C, chunk_size=chunk, dt_bias=torch.rand(h, device="cuda"), dt_softplus=True,
              return_final_states=True)
    t = time.time()
    y, fin = ssd_forward(**kw)
    print("launched (compiled)", round(time.time() - t, 1), flush=True)
    torch.cuda.synchronize()
    print("synced", round(time.time() - t, 1), flush=True)
    prob = launcher._problem(x, B, chunk, None)
    launcher._OVERRIDE[f"chunk_state@{chunk}"] = dispatch.choose("chunk_state", prob).replace(DTP=0)
    y0, fin0 = ssd_forward(**kw)
    launcher._OVERRIDE.clear()
    torch.cuda.synchronize()
    out[chunk] = {"s": round(time.time() - t, 1), "err_y": rel_err(y, y0), "err_final": rel_err(fin, fin0)}
    print(json.dumps(out), flush=True)
'''


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=40.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    src = (ROOT / "kernels/cutile/kernels.py").read_text()
    results = {}
    for name, edits in VARIANTS.items():
        text = src
        for old, new in edits:
            assert text.count(old) == 1, (name, old)
            text = text.replace(old, new)
        work = Path(tempfile.mkdtemp(prefix=f"probe-{name}-"))
        for part in ("kernels", "bench", "oracles", "ssdcheck_plugin"):
            shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
        (work / "kernels/cutile/kernels.py").write_text(text)
        t = time.time()
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD], cwd=work, capture_output=True, text=True,
                                  timeout=args.timeout * (1.5 if not results else 1))    # the first compiles chunk_scan
            rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-1500:]
        except subprocess.TimeoutExpired as e:
            rc, tail = "timeout", ((e.stdout or b"").decode() + (e.stderr or b"").decode())[-1500:]
        results[name] = {"rc": rc, "s": round(time.time() - t, 1), "tail": tail}
        print(name, json.dumps(results[name]), flush=True)
        (args.out / "probe.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
