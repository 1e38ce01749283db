"""How many float64 gradient entries of prop_grad_finite_under_extreme_decay's inputs lie beyond the
largest finite value of the gradient's dtype (where +-inf is the correct rounding), on the CPU.

    python lab/scripts/grad_range_check.py "GradProblem(batch=2, seqlen=192, ...)"   # a failure's repro problem

Prints, per gradient, its dtype, the largest float64 magnitude and the entries beyond the dtype's
range and beyond half of it (what finite_comparison excuses).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # the repository


def main(argv=None) -> int:
    import torch
    from oracles.grad_f64 import ssd_grads_chunked_f64
    from properties.grad_problem import GradProblem
    from properties.gradients import extreme_decay_inputs
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].startswith("GradProblem("):
        sys.exit('usage: grad_range_check.py "GradProblem(...)" (the --ssd-grad-problem of a failure)')
    problem = eval(args[0], {"GradProblem": GradProblem})   # noqa: S307 (a repro line the suite printed)
    problem = problem.replace(dt_limit=None, dy_scale=1.0)   # as the property runs it
    kw, dy, dfinal = extreme_decay_inputs(problem, "cpu")
    ref = ssd_grads_chunked_f64(kw, dy, dfinal)
    for name, g in ref.items():
        top = torch.finfo(kw[name].dtype).max
        a = g.abs()
        print(f"d{name:<15} {str(kw[name].dtype):<14} max |float64| {float(a.max()):<12.4g} "
              f"beyond the range: {int((a > top).sum())}, beyond half of it: {int((a > top / 2).sum())} of {g.numel()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
