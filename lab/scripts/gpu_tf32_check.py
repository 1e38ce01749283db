"""Which TF32 does a Triton `tl.dot` on fp32 operands compute on this GPU: rounded or truncated operands?

The yardstick models both (`oracles/yardstick.py`: matmul="tf32" rounds to nearest, "tf32-trunc" cuts
the low 13 mantissa bits); mamba_ssm declares "tf32-trunc". This runs one 64x64x64 `tl.dot` with
Triton's default input precision on operands whose low bits are set, and prints the largest difference
from each model's float64 product. The model that the GPU matches to fp32 accumulation noise is the one
the hardware path uses.

    python lab/scripts/gpu_tf32_check.py          # needs a CUDA GPU and Triton
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from oracles.yardstick import _round_tf32, _truncate_tf32

N = 64


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    c = tl.dot(tl.load(a_ptr + offs), tl.load(b_ptr + offs))   # default input_precision: tf32
    tl.store(c_ptr + offs, c)


def main() -> None:
    g = torch.Generator().manual_seed(0)
    # values just below a TF32 rounding boundary (low 13 bits 0x1F00..0x1FFF): rounding goes up,
    # truncation down, so the two models differ by one TF32 ulp in every operand
    base = _truncate_tf32(torch.rand(N, N, generator=g) + 1.0)
    low = torch.randint(0x1F00, 0x2000, (N, N), generator=g, dtype=torch.int32)
    a = (base.view(torch.int32) | low).view(torch.float32)
    b = (_truncate_tf32(torch.rand(N, N, generator=g) + 1.0).view(torch.int32)
         | torch.randint(0x1F00, 0x2000, (N, N), generator=g, dtype=torch.int32)).view(torch.float32)
    c = torch.empty(N, N, device="cuda")
    _dot[(1,)](a.cuda(), b.cuda(), c, N=N)
    got = c.cpu().double()
    print(f"triton {triton.__version__}, {torch.cuda.get_device_name()}: {N}x{N}x{N} tl.dot, fp32 operands")
    for name, f in (("ieee (no TF32)", lambda t: t), ("tf32 rounded", _round_tf32), ("tf32 truncated", _truncate_tf32)):
        model = f(a).double() @ f(b).double()
        print(f"  max |gpu - {name:15s}| = {float((got - model).abs().max()):.3e}   "
              f"(|product| ~ {float(model.abs().max()):.1f}; one TF32 ulp per operand ~ {N * 4 * 2**-10:.2f})")


if __name__ == "__main__":
    main()
