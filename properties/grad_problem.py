"""GradProblem: an SSDProblem plus the regime of the output gradients the backward is fed.

The dy regime is part of the drawn problem, like every other regime: its scale, tokens where dy is
0 (a loss that masks padding or prompt tokens) and whether d final_states is given (training with
state passing between segments) or not (the usual loss on y alone). So are skipped tokens, whose
processed dt is 0 (a sequence padded to a whole number of chunks, a negative dt the default dt_limit
clamps to 0): the forward leaves them out of every state, and their gradients must stay finite.
Tensors still come from the seed: dy and dfinal_states from a generator of their own, so the forward
inputs of a GradProblem are those of the SSDProblem with the same fields (the skipped tokens' dt aside).
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
    dt_zero_stride: int = 0    # > 0: every token t with t % dt_zero_stride == 0 is skipped (see skip_tokens)

    def __post_init__(self):
        super().__post_init__()
        if not self.dy_scale > 0.0:
            raise ValueError(f"GradProblem.dy_scale: expected > 0, got {self.dy_scale}")
        if self.dy_zero_stride < 0:
            raise ValueError(f"GradProblem.dy_zero_stride: expected >= 0, got {self.dy_zero_stride}")
        if self.dt_zero_stride < 0:
            raise ValueError(f"GradProblem.dt_zero_stride: expected >= 0, got {self.dt_zero_stride}")
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
            if self.dt_zero_stride:
                kw["dt"] = skip_tokens(kw, self.dt_zero_stride)
            g = torch.Generator().manual_seed(self.seed + GRAD_SEED_OFFSET)
            b, l, h, p, n = self.batch, self.seqlen, self.nheads, self.headdim, self.dstate
            dy = self.dy_scale * torch.randn(b, l, h, p, generator=g, dtype=torch.float64)
            if self.dy_zero_stride:
                dy[:, ::self.dy_zero_stride] = 0.0
            dfinal = torch.randn(b, h, p, n, generator=g, dtype=torch.float64) * self.dy_scale if self.dfinal else None
            dy = dy.to(self.torch_dtype).to(device)
            dfinal = dfinal.to(torch.float32).to(device) if dfinal is not None else None
        return kw, dy, dfinal

    def repro(self, impl: str, prop: str) -> str:
        test = f"tests/test_gradients.py::test_{prop.removeprefix('prop_')}"
        return f"pytest '{test}' --impl {impl} -p no:cacheprovider --ssd-grad-problem \"{self!r}\""


SKIP_SOFTPLUS_INPUT = -1.0e4   # softplus(-1e4) is exactly 0 in fp32 (exp underflows) and has gradient 0


def skip_tokens(kw: dict, stride: int) -> torch.Tensor:
    """kw's dt with every token t, t % stride == 0, skipped: its processed dt (dt + dt_bias, then softplus
    where asked) is 0 before dt_limit. Without softplus that is dt = -dt_bias (exactly 0 without a bias;
    within dt's rounding of the bias with one), with it dt = -1e4. A dt_limit above 0 then lifts the
    step to its lower bound, as it would a padded token's."""
    dt = kw["dt"].clone()
    if kw.get("dt_softplus"):
        skip = torch.full_like(dt[:, ::stride], SKIP_SOFTPLUS_INPUT)
    elif kw.get("dt_bias") is not None:
        skip = (-kw["dt_bias"]).to(dt.dtype).expand_as(dt[:, ::stride])
    else:
        skip = torch.zeros_like(dt[:, ::stride])
    dt[:, ::stride] = skip
    return dt


def parse_grad_problem(text: str) -> GradProblem:
    """Inverse of repr(GradProblem): evaluates only the GradProblem constructor."""
    text = text.strip()
    if not text.startswith("GradProblem(") or not text.endswith(")"):
        raise ValueError(f"--ssd-grad-problem: expected 'GradProblem(...)', got {text[:60]!r}")
    return eval(text, {"__builtins__": {}}, {"GradProblem": GradProblem, "inf": float("inf")})
