"""SSDProblem: a frozen, printable description of one drawn SSD forward problem.

A problem holds shapes, regimes and a seed, never tensor elements: tensors come from a CPU
`torch.Generator` seeded by `seed`, so Hypothesis shrinks shapes and regimes, and the printed
`SSDProblem(...)` alone reproduces a failure on any machine.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from properties.timing import phase

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class SSDProblem:
    batch: int = 1
    seqlen: int = 64
    nheads: int = 2
    headdim: int = 16
    dstate: int = 16
    ngroups: int = 1
    chunk_size: int = 64
    dtype: str = "float32"
    decay: float = 1.0           # target |A * dt| * chunk_size, the log-decay over one chunk; 0: A = 0
    decay_decades: float = 0.0   # > 0: the heads' decays log-spaced over this many decades around decay
    dt_mu: float = -1.0          # dt = softplus(N(dt_mu, 1)) before bias/limit
    dt_softplus: bool = False    # pass raw dt and let the implementation apply softplus
    dt_bias: bool = False
    dt_limit: tuple[float, float] | None = None
    dt_dtype: str = "float32"    # "float32" or "input"
    # The model's state cache: initial states are passed in this dtype ("float32" or "input", x's),
    # and an implementation that lets the caller choose its returned states' dtype (extension
    # "return_states_dtype", vLLM's state_dtype) is asked for it. A server keeps its SSM state cache in
    # the model dtype (vLLM's mamba_ssm_cache_dtype "auto") or in float32.
    states_dtype: str = "float32"
    # D and dt_bias: "float32" or "input". A model cast to bfloat16 (mamba_ssm's Mamba2 after
    # .to(bfloat16)) passes its D and dt_bias parameters in bfloat16; A is -exp(A_log.float()), float32.
    params_dtype: str = "float32"
    D: str | None = None         # None, "h" or "hp"
    z: bool = False
    initial_states: bool = False
    final_states: bool = True
    seq_starts: tuple[int, ...] = ()  # token positions where sequences 1, 2, ... start (seq_idx)
    varlen: bool = False         # also pass cu_seqlens and ask for varlen states
    seed: int = 0

    def __post_init__(self):
        for name in ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups", "chunk_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"SSDProblem.{name}: expected >= 1, got {getattr(self, name)}")
        if self.nheads % self.ngroups:
            raise ValueError(f"SSDProblem.ngroups: expected to divide nheads={self.nheads}, got {self.ngroups}")
        if self.dtype not in DTYPES:
            raise ValueError(f"SSDProblem.dtype: expected one of {sorted(DTYPES)}, got {self.dtype!r}")
        if list(self.seq_starts) != sorted(set(self.seq_starts)) or any(
                not 0 < s < self.seqlen for s in self.seq_starts):
            raise ValueError(f"SSDProblem.seq_starts: expected increasing positions in (0, {self.seqlen}), "
                             f"got {self.seq_starts}")
        if not self.decay_decades >= 0.0:
            raise ValueError(f"SSDProblem.decay_decades: expected >= 0, got {self.decay_decades}")
        for name in ("dt_dtype", "states_dtype", "params_dtype"):
            if getattr(self, name) not in ("float32", "input"):
                raise ValueError(f"SSDProblem.{name}: expected 'float32' or 'input', got {getattr(self, name)!r}")
        if self.varlen and self.batch != 1:
            raise ValueError("SSDProblem.varlen: needs batch == 1")

    # -- derived facts, used by strategies' event() tallies and by properties --
    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def states_torch_dtype(self) -> torch.dtype:
        """The state cache's dtype: initial states come in it (and chosen returned states)."""
        return self.torch_dtype if self.states_dtype == "input" else torch.float32

    @property
    def params_torch_dtype(self) -> torch.dtype:
        return self.torch_dtype if self.params_dtype == "input" else torch.float32

    @property
    def uses_seq_idx(self) -> bool:
        return bool(self.seq_starts) or self.varlen

    @property
    def partial_last_chunk(self) -> bool:
        return self.seqlen % self.chunk_size != 0

    @property
    def nchunks(self) -> int:
        return -(-self.seqlen // self.chunk_size)

    def replace(self, **changes) -> "SSDProblem":
        return dataclasses.replace(self, **changes)

    def options(self) -> set[str]:
        """Contract options this problem exercises, named as kernels.registry.ALL_OPTIONS."""
        used = set()
        if self.D:
            used.add("D_headdim" if self.D == "hp" else "D")
        flags = {"z": self.z, "dt_bias": self.dt_bias, "dt_softplus": self.dt_softplus,
                 "dt_limit": self.dt_limit is not None, "initial_states": self.initial_states,
                 "final_states": self.final_states, "seq_idx": self.uses_seq_idx,
                 "varlen_states": self.varlen, "ngroups": self.ngroups > 1,
                 "dt_input_dtype": self.dt_dtype == "input" and self.dtype != "float32",
                 "states_input_dtype": self.initial_states and self.states_torch_dtype != torch.float32,
                 "params_input_dtype": bool(self.D or self.dt_bias) and self.params_torch_dtype != torch.float32}
        used.update(k for k, on in flags.items() if on)
        return used

    def inputs(self, device: str | torch.device = "cpu", return_states_dtype: bool = False) -> dict:
        """The keyword arguments of mamba_chunk_scan_combined for this problem, on `device`;
        `return_states_dtype`: also the extension keyword of that name, the state cache's dtype (for an
        implementation that declares it: it returns its final and varlen states in that dtype)."""
        with phase("inputs"):
            kwargs = self._inputs(device)
        if return_states_dtype:
            kwargs["return_states_dtype"] = self.states_torch_dtype
        return kwargs

    def _inputs(self, device: str | torch.device) -> dict:
        g = torch.Generator().manual_seed(self.seed)
        b, l, h, p, n, ng = self.batch, self.seqlen, self.nheads, self.headdim, self.dstate, self.ngroups
        dtype = self.torch_dtype

        def randn(*shape):
            return torch.randn(*shape, generator=g, dtype=torch.float64)

        x = randn(b, l, h, p)
        B = randn(b, l, ng, n)
        C = randn(b, l, ng, n)
        raw = self.dt_mu + randn(b, l, h)          # dt before softplus
        bias = 0.5 * randn(h) if self.dt_bias else None
        if bias is not None and self.params_dtype == "input":
            bias = bias.to(self.params_torch_dtype).double()   # dt is drawn around the bias as passed
        if self.dt_softplus:
            dt_in = raw - (bias if bias is not None else 0.0)   # the implementation adds bias, then softplus
        else:
            dt_in = F.softplus(raw) - (bias if bias is not None else 0.0)
        dt_eff = F.softplus(raw)
        lim = None
        if self.dt_limit is not None:
            lim = (float(self.dt_limit[0]), float(self.dt_limit[1]))
            dt_eff = dt_eff.clamp(*lim)
        # A per head: the drawn per-chunk decay spread over the mean processed dt, varied across heads.
        if self.decay == 0.0:
            A = torch.zeros(h, dtype=torch.float64)
        else:
            # drawn even when decay_decades replaces it: D, z and initial_states come later from the
            # same generator, so a problem's other inputs do not depend on decay_decades
            spread = torch.exp(torch.rand(h, generator=g, dtype=torch.float64) - 0.5)
            if self.decay_decades > 0.0 and h > 1:
                # a model layer's heads: Mamba-2's A in [1, 16] and dt in [1e-3, 1e-1] span about 3.5
                # decades of per-chunk decay, so one problem holds slow and fast heads side by side
                steps = torch.arange(h, dtype=torch.float64) / (h - 1) - 0.5
                spread = 10.0 ** (self.decay_decades * steps)
            A = -self.decay * spread / (self.chunk_size * dt_eff.mean(dim=(0, 1)).clamp_min(1e-6))
        dt_t = torch.float32 if self.dt_dtype == "float32" else dtype
        kwargs = dict(
            x=x.to(dtype), dt=dt_in.to(dt_t), A=A.to(torch.float32), B=B.to(dtype), C=C.to(dtype),
            chunk_size=self.chunk_size, dt_softplus=self.dt_softplus,
            return_final_states=self.final_states,
        )
        params = self.params_torch_dtype
        if bias is not None:
            kwargs["dt_bias"] = bias.to(params)
        if lim is not None:
            kwargs["dt_limit"] = lim
        if self.D == "h":
            kwargs["D"] = randn(h).to(params)
        elif self.D == "hp":
            kwargs["D"] = randn(h, p).to(params)
        if self.z:
            kwargs["z"] = randn(b, l, h, p).to(dtype)
        if self.initial_states:
            kwargs["initial_states"] = randn(b, h, p, n).to(self.states_torch_dtype)
        if self.uses_seq_idx:
            seq = torch.zeros(b, l, dtype=torch.int32)
            for s in self.seq_starts:
                seq[:, s:] += 1
            kwargs["seq_idx"] = seq
        if self.varlen:
            kwargs["cu_seqlens"] = torch.tensor([0, *self.seq_starts, l], dtype=torch.int32)
            kwargs["return_varlen_states"] = True
        return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}

    def repro(self, impl: str, prop: str) -> str:
        """One command that re-runs exactly this check: the property's test in tests/test_properties.py
        with this problem pinned (--ssd-problem), whichever test found it (the pinned problems of
        tests/test_regressions.py are not drawn, so they re-run there too)."""
        return f"pytest '{property_test(prop)}' --impl {impl} -p no:cacheprovider --ssd-problem \"{self!r}\""


def property_test(prop: str) -> str:
    """The test of tests/test_properties.py that runs property `prop` (prop_x -> test_x)."""
    return f"tests/test_properties.py::test_{prop.removeprefix('prop_')}"


def parse_problem(text: str) -> SSDProblem:
    """Inverse of repr(SSDProblem): evaluates only the SSDProblem constructor."""
    text = text.strip()
    if not text.startswith("SSDProblem(") or not text.endswith(")"):
        raise ValueError(f"--ssd-problem: expected 'SSDProblem(...)', got {text[:60]!r}")
    return eval(text, {"__builtins__": {}}, {"SSDProblem": SSDProblem, "inf": math.inf})
