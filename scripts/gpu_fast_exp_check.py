"""vLLM's fast_exp against exp on this GPU: the error the yardstick's exp="fast" model must cover.

fast_exp (vllm/model_executor/layers/mamba/ops/triton_helpers.py l.36-45) is exp2(LOG2E * x) on
ex2.approx.f32. This evaluates vLLM's own @triton.jit function (loaded from the published fragment),
Triton's tl.exp and the yardstick's model (oracles/yardstick.py `_fast_exp`) on 2^22 decay exponents
per range of |x|, and prints each one's relative error against float64 exp, in units of 2^-24: the
largest, and the mean with its sign (a one-signed error compounds along the state-passing chain).
The model covers the GPU where its max is at least the GPU's in every range.

    python scripts/gpu_fast_exp_check.py          # needs a CUDA GPU, Triton and the vLLM fragment
"""
from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl

from kernels.peers import vllm
from oracles.yardstick import FAST_EXP_ULPS, _fast_exp

N = 1 << 22
RANGES = ((0.0, 1e-3), (1e-3, 1.0), (1.0, 10.0), (10.0, 40.0), (40.0, 87.0))
fast_exp = None   # vLLM's, set in main() before the first launch (Triton resolves globals then)


@triton.jit
def _both(x_ptr, fast_ptr, exp_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(fast_ptr + offs, fast_exp(x))
    tl.store(exp_ptr + offs, tl.exp(x))   # mamba_ssm's decays: does Triton lower it to ex2.approx too?


def main() -> int:
    global fast_exp
    vllm._load()
    fast_exp = sys.modules["vllm.model_executor.layers.mamba.ops.triton_helpers"].fast_exp

    g = torch.Generator().manual_seed(0)
    print(f"triton {triton.__version__}, {torch.cuda.get_device_name()}; model: fp32 product, exp2, "
          f"{FAST_EXP_ULPS} ulps toward zero. Relative error vs float64 exp, units of 2^-24:")
    print(f"{'|x| range':>16}  {'fast_exp max':>12} {'mean':>7}  {'tl.exp max':>10} {'mean':>7}  "
          f"{'model max':>9} {'mean':>7}  covered")
    covered_all = True
    for lo, hi in RANGES:
        x = -(lo + (hi - lo) * torch.rand(N, generator=g))
        xd = x.cuda()
        fast, exp = torch.empty_like(xd), torch.empty_like(xd)
        _both[(N // 1024,)](xd, fast, exp, BLOCK=1024)
        ref = torch.exp(x.double())
        rows = []
        for got in (fast.cpu(), exp.cpu(), _fast_exp(x)):
            rel = (got.double() / ref - 1.0) / 2.0 ** -24
            rows.append((float(rel.abs().max()), float(rel.mean())))
        covered = rows[2][0] >= rows[0][0]
        covered_all &= covered
        print(f"{lo:7.0e}-{hi:<8.0e}  {rows[0][0]:12.2f} {rows[0][1]:7.2f}  {rows[1][0]:10.2f} {rows[1][1]:7.2f}  "
              f"{rows[2][0]:9.2f} {rows[2][1]:7.2f}  {'yes' if covered else 'NO'}")
    print("the model covers fast_exp in every range" if covered_all else
          "the model does NOT cover fast_exp everywhere: raise FAST_EXP_ULPS or model the error better")
    return 0 if covered_all else 1


if __name__ == "__main__":
    sys.exit(main())
