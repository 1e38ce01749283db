"""Where does an output element leave the elementwise bound, and would the same-precision yardstick too?

prop_matches_oracle's elementwise rule is |out - ref| <= atol * rms(ref) + rtol * |ref| per element.
At millions of 16-bit elements its tail can reach an element whose |ref| is small only because its
terms cancel (y = the scan's sum + D x, times silu(z)). This runs an implementation, the float64
oracle and the yardstick on one problem (and on other seeds of it), and prints for each output the
elements over the rule, for the implementation and for the yardstick alike, with what each element is
made of: |ref|, the error, the allowed bound, and the size of its terms (the oracle on the inputs'
absolute values: |x|, |B|, |C|, |D|, |initial_states|, z -> |z|, which bounds the sum of |terms|).

    python lab/scripts/elementwise_tail.py --impl torch-ref --problem "SSDProblem(...)" [--seeds 4]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository
from kernels.registry import lookup  # noqa: E402
from oracles import ssd_chunked_f64  # noqa: E402
from properties.invariants import call_inputs, run, run_ref, run_yardstick  # noqa: E402
from properties.problem import parse_problem  # noqa: E402
from properties.tolerance import load_policy  # noqa: E402

ABS = ("x", "B", "C", "D", "z", "initial_states")


def term_sizes(kw: dict) -> dict:
    """The oracle on the inputs' absolute values: per output element, a bound on the sum of |terms|."""
    return run_ref(ssd_chunked_f64, {k: (v.abs() if k in ABS and isinstance(v, torch.Tensor) else v)
                                     for k, v in kw.items()})


def over_rule(out, ref, tol):
    e, a = ref.double(), out.double()
    rms = float(e.norm()) / math.sqrt(e.numel())
    allowed = tol.atol * rms + tol.rtol * e.abs()
    diff = (a - e).abs()
    return diff > allowed, diff, allowed, rms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", required=True)
    ap.add_argument("--problem", required=True, help="SSDProblem(...) as a failure prints it")
    ap.add_argument("--seeds", type=int, default=1, help="also seeds seed+1 .. seed+N-1")
    ap.add_argument("--show", type=int, default=5, help="elements listed per output")
    args = ap.parse_args()
    info = lookup(args.impl)
    base = parse_problem(args.problem)
    pol = load_policy()
    totals = {"impl": 0, "yardstick": 0, "elements": 0}
    for seed in range(base.seed, base.seed + args.seeds):
        problem = base.replace(seed=seed)
        kw = call_inputs(info, problem)
        got, ref, yard = run(info, kw), run_ref(ssd_chunked_f64, kw), run_yardstick(info, kw)
        sizes = None
        for name in ref:
            tol = pol.tol(problem.dtype, name)
            bad_i, diff_i, allowed, rms = over_rule(got[name], ref[name], tol)
            bad_y, diff_y, _, _ = over_rule(yard[name], ref[name], tol)
            totals["impl"] += int(bad_i.sum())
            totals["yardstick"] += int(bad_y.sum())
            totals["elements"] += ref[name].numel()
            print(f"seed {seed} {name}: {ref[name].numel()} elements, rms {rms:.4g}; over the rule: "
                  f"{args.impl} {int(bad_i.sum())}, yardstick {int(bad_y.sum())}; max error / allowed "
                  f"{args.impl} {float((diff_i / allowed).max()):.3g}, yardstick {float((diff_y / allowed).max()):.3g}")
            if not (bad_i.any() or bad_y.any()):
                continue
            if sizes is None:
                sizes = term_sizes(kw)
            worst = torch.topk(torch.maximum(diff_i / allowed, diff_y / allowed).reshape(-1).cpu(),
                               min(args.show, ref[name].numel())).indices
            for flat in worst.tolist():
                where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(ref[name].shape)))
                r, s = float(ref[name][where]), float(sizes[name][where])
                print(f"    at {where}: ref {r:.4g}, |terms| {s:.4g} ({s / max(abs(r), 1e-30):.3g}x |ref|), "
                      f"allowed {float(allowed[where]):.4g}; error {args.impl} {float(diff_i[where]):.4g}, "
                      f"yardstick {float(diff_y[where]):.4g}; error / |terms| {args.impl} "
                      f"{float(diff_i[where]) / max(s, 1e-30):.3g}, yardstick {float(diff_y[where]) / max(s, 1e-30):.3g}")
    print(f"total over the rule in {totals['elements']} elements: {args.impl} {totals['impl']}, "
          f"yardstick {totals['yardstick']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
