"""GradProblem: an SSDProblem plus the regime of the output gradients the backward is fed.

The dy regime is part of the drawn problem, like every other regime: its scale, tokens where dy is
0 (a loss that masks padding or prompt tokens) and whether d final_states is given (training with
state passing between segments) or not (the usual loss on y alone). Tensors still come from the
seed: dy and dfinal_states from a generator of their own, so the forward inputs of a GradProblem are
those of the SSDProblem with the same fields.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from properties.problem import SSDProblem
from properties.timing import phase

GRAD_SEED_OFFSET = 7919   # dy and dfinal_states come from seed + this, apart from the forward's stream


@dataclass(frozen=True)
class GradProblem(SSDProblem):
    dy_scale: float = 1.0      # dy ~ dy_scale * N(0, 1)
    dy_zero_stride: int = 0    # > 0: dy is 0 at every token t with t % dy_zero_stride == 0
    dfinal: bool = True        # a gradient into final_states (needs final_states=True)

    def __post_init__(self):
        super().__post_init__()
        if not self.dy_scale > 0.0:
            raise ValueError(f"GradProblem.dy_scale: expected > 0, got {self.dy_scale}")
        if self.dy_zero_stride < 0:
            raise ValueError(f"GradProblem.dy_zero_stride: expected >= 0, got {self.dy_zero_stride}")
        if self.dfinal and not self.final_states:
            raise ValueError("GradProblem.dfinal: a final-state gradient needs final_states=True")

    @classmethod
    def of(cls, problem: SSDProblem, **grad_fields) -> "GradProblem":
        """The GradProblem with `problem`'s forward fields (varlen states dropped: they have no gradient)."""
        fields = {k: getattr(problem, k) for k in SSDProblem.__dataclass_fields__}
        fields["varlen"] = False
        return cls(**fields, **grad_fields)

    def forward_problem(self) -> SSDProblem:
        return SSDProblem(**{k: getattr(self, k) for k in SSDProblem.__dataclass_fields__})

    def backward_inputs(self, device: str | torch.device = "cpu", varlen_ok: bool = False):
        """(forward kwargs, dy (b,l,h,p) in x.dtype, dfinal_states (b,h,p,n) fp32 or None) on `device`."""
        if self.varlen and not varlen_ok:
            raise ValueError("GradProblem.varlen: varlen states have no gradient in the backward contract")
        kw = self.inputs(device)
        with phase("inputs"):
            g = torch.Generator().manual_seed(self.seed + GRAD_SEED_OFFSET)
            b, l, h, p, n = self.batch, self.seqlen, self.nheads, self.headdim, self.dstate
            dy = self.dy_scale * torch.randn(b, l, h, p, generator=g, dtype=torch.float64)
            if self.dy_zero_stride:
                dy[:, ::self.dy_zero_stride] = 0.0
            dfinal = torch.randn(b, h, p, n, generator=g, dtype=torch.float64) * self.dy_scale if self.dfinal else None
            dy = dy.to(self.torch_dtype).to(device)
            dfinal = dfinal.to(torch.float32).to(device) if dfinal is not None else None
        return kw, dy, dfinal

    def repro(self, impl: str, prop: str, test_file: str = "tests/test_gradients.py") -> str:
        test = f"{test_file}::test_{prop.removeprefix('prop_')}"
        return f"pytest '{test}' --impl {impl} -p no:cacheprovider --ssd-grad-problem \"{self!r}\""


def parse_grad_problem(text: str) -> GradProblem:
    """Inverse of repr(GradProblem): evaluates only the GradProblem constructor."""
    text = text.strip()
    if not text.startswith("GradProblem(") or not text.endswith(")"):
        raise ValueError(f"--ssd-grad-problem: expected 'GradProblem(...)', got {text[:60]!r}")
    return eval(text, {"__builtins__": {}}, {"GradProblem": GradProblem, "inf": float("inf")})
