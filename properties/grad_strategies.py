"""Hypothesis strategies for backward problems: a forward problem the backward supports, plus a dy regime.

`grad_problems(info)` draws the forward part with `ssd_problems` restricted to the options the
declared backward supports (never varlen states: they have no gradient), then the dy regime: its
scale (1, or 1e-2 / 1e2: small and large gradients, inside float16's normal range at the sizes drawn:
at 1e-3 fp16 gradients of a seqlen-1 problem reach its subnormals, 2e-5, and lose digits), tokens
where dy is 0, d final_states on or off, and in half the draws skipped tokens (processed dt 0: padding,
a clamped negative dt) every 3rd or 5th token. On the GPU the forward part is drawn compile-aware, new
classes explored at the backward's own rate (Backward.explore_one_in) where it declares one.
"""
from __future__ import annotations

from hypothesis import strategies as st

from properties import triage
from properties.grad_problem import GradProblem
from properties.strategies import EXPLORE_ONE_IN, ssd_problems

PINNED: GradProblem | None = None   # set by conftest's --ssd-grad-problem: every draw returns it
GPU_MAX_SEQLEN = 2048               # the closed forms and oracles keep O(seqlen^2) blocks per head


def forward_info(info):
    """The KernelInfo a gradient draw takes its forward part from: the options the backward supports,
    never varlen states (they have no gradient), and float32 initial states and parameters: the
    backward yardstick (oracles/yardstick_bwd.py) models their gradients in float32."""
    return info.replace(options=info.backward_options() - {"varlen_states", "states_input_dtype",
                                                           "params_input_dtype", "return_states_dtype"})


def battery(info, gpu: bool) -> list[GradProblem]:
    """The problems whose compile classes the compile-aware GPU draws copy (properties/strategies.py):
    the triage battery of forward_info(info), as GradProblems."""
    return [GradProblem.of(p, dfinal=p.final_states) for p in triage.battery(forward_info(info), gpu, None, None, large_first=False)]


@st.composite
def grad_problems(draw, info, *, gpu: bool = False, max_seqlen: int | None = None):
    if PINNED is not None:
        return PINNED
    if info.backward is None:
        raise ValueError(f"info: {info.name} declares no backward (KernelInfo.backward is None)")
    base = draw(ssd_problems(forward_info(info), gpu=gpu, max_seqlen=max_seqlen or (GPU_MAX_SEQLEN if gpu else None),
                             explore_one_in=info.backward.explore_one_in or EXPLORE_ONE_IN, large_first=False))
    dfinal = base.final_states and draw(st.booleans())
    # float16 has no room for 1e2: a dt gradient of 1e2 * |A| * (a chunk's terms) passes 65504 (and inf
    # is then the right float16 answer, not a bug)
    scales = [1.0, 1.0, 1e-2] + ([] if base.dtype == "float16" else [1e2])
    return GradProblem.of(base, dy_scale=draw(st.sampled_from(scales)),
                          dy_zero_stride=draw(st.sampled_from([0, 0, 2, 5])), dfinal=dfinal,
                          dt_zero_stride=draw(st.sampled_from([0, 0, 3, 5])))
