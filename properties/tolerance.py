"""The tolerance policy (tolerances.toml) and the comparison every property reports through.

`compare` measures one output against a reference and returns a `Comparison`: max abs error and its
index, normwise relative error, mismatched count, and, when a yardstick error is given, the
FlashAttention-style budget `k * err_yardstick + floor` and the share of it used.
"""
from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from properties.problem import DTYPES
from properties.timing import phase

POLICY_PATH = Path(os.environ.get("SSDCHECK_TOLERANCES", Path(__file__).resolve().parent.parent / "tolerances.toml"))


@dataclass(frozen=True)
class Tol:
    normwise: float
    atol: float   # in units of rms(reference)
    rtol: float


@dataclass(frozen=True)
class Policy:
    k: float
    acc_floor: float  # fp32 accumulation allowance, in units of 2^-24 * max|ref|
    decay_floor: float  # fp32 decay-exponent allowance, in units of 2^-24 * decay_span * max|ref|
    bounds: dict  # dtype -> output -> Tol

    def tol(self, dtype: str, output: str) -> Tol:
        try:
            return self.bounds[dtype][output]
        except KeyError:
            raise KeyError(f"tolerance policy {POLICY_PATH}: no bound for dtype={dtype!r} output={output!r}") from None


@lru_cache(maxsize=None)
def load_policy(path: str | Path = POLICY_PATH) -> Policy:
    data = tomllib.loads(Path(path).read_text())
    bounds = {dt: {out: Tol(**v) for out, v in outs.items()} for dt, outs in data.items() if dt != "budget"}
    b = data["budget"]
    return Policy(k=float(b["k"]), acc_floor=float(b["acc_floor"]), decay_floor=float(b["decay_floor"]), bounds=bounds)


def rounding_floor(ref: torch.Tensor, dtype: torch.dtype, decay_span: float = 0.0) -> float:
    """The budget's floor: twice the largest single rounding error of `dtype` at the reference's
    magnitude (FlashAttention's `2 * max|ref + 0.3 - 0.3 - ref|`), so an exact yardstick still leaves
    room for one rounding, plus an fp32 accumulation allowance: two fp32 summation orders differ by a
    few units of 2^-24 * max|ref|, and an fp32 yardstick can be luckily exact where the other is not.
    `decay_span` (max |dA_cumsum| within a chunk) adds the decay exponent's own conditioning: every
    implementation forms exp(cs_i - cs_j) from fp32 cumsums of that size, an error of ~2^-24 * span
    relative in each decay, realised differently by each summation order (strong decay in fp32)."""
    if not ref.numel():
        return 0.0
    r = ref.to(dtype)
    one_rounding = 2.0 * float(((r + 0.3) - 0.3 - r).double().abs().max())
    pol = load_policy()
    return one_rounding + (pol.acc_floor + pol.decay_floor * decay_span) * 2.0 ** -24 * float(ref.abs().max())


def unit_floor(at: torch.Tensor, dtype: torch.dtype, decay_span: float = 0.0) -> float:
    """rounding_floor's deterministic twin, for a reference whose own size is not its error's scale (a
    gradient summed over tokens: `at` is the root of the sum of its squared terms): twice one unit roundoff of
    `dtype` at max|at|, plus the same fp32 allowances. rounding_floor measures the rounding of the
    reference's own elements, which for a handful of elements (dA has one per head) can be 0 by luck."""
    if not at.numel():
        return 0.0
    top = float(at.abs().max())
    pol = load_policy()
    return 2.0 * torch.finfo(dtype).eps / 2 * top + (pol.acc_floor + pol.decay_floor * decay_span) * 2.0 ** -24 * top


@dataclass
class Comparison:
    output: str
    passed: bool
    max_abs: float
    where: tuple
    normwise: float
    mismatched: int
    numel: int
    tol: Tol
    budget: float | None = None       # k * err_yardstick + floor, when a yardstick was given
    err_yardstick: float | None = None
    nonfinite: int = 0
    why: list = field(default_factory=list)
    normwise_limit: float | None = None  # the normwise bound applied; None: the policy's tol.normwise
    elementwise_scale: float = 1.0       # the elementwise bound's widening: k x the yardstick's use of it, if > 1

    @property
    def normwise_allowed(self) -> float:
        return self.tol.normwise if self.normwise_limit is None else self.normwise_limit

    @property
    def share(self) -> float:
        """Fraction of the binding limit used (1.0 = at the limit); the fuzzer's target()."""
        shares = [self.normwise / self.normwise_allowed if self.normwise_allowed else 0.0]
        if self.budget:
            shares.append(self.max_abs / self.budget)
        return math.inf if self.nonfinite else max(shares)

    def summary(self) -> str:
        lines = [f"{self.output}: {'ok' if self.passed else 'FAILED ' + '; '.join(self.why)}",
                 f"  Mismatched elements: {self.mismatched} / {self.numel} "
                 f"({100.0 * self.mismatched / max(self.numel, 1):.2g}%)",
                 f"  Greatest absolute difference: {self.max_abs:.4g} at index {self.where}"]
        if self.budget is not None:
            lines[-1] += (f" (budget {self.budget:.4g} = {load_policy().k:g} x {self.err_yardstick:.4g}"
                          f" + floor; {100 * self.max_abs / self.budget:.3g}% used)")
        if self.elementwise_scale > 1.0:
            lines.append(f"  Elementwise bound x{self.elementwise_scale:.3g}: {load_policy().k:g} x the yardstick's "
                         f"largest use of atol*rms + rtol*|ref|")
        lines.append(f"  Normwise relative difference: {self.normwise:.4g} (up to {self.normwise_allowed:.3g} allowed"
                     + (f": {load_policy().k:g} x the yardstick's normwise error, above the policy's "
                        f"{self.tol.normwise:g}" if self.normwise_allowed > self.tol.normwise else "") + ")")
        if self.nonfinite:
            lines.append(f"  Non-finite elements: {self.nonfinite}")
        return "\n".join(lines)


def compare(output: str, actual: torch.Tensor, expected: torch.Tensor, *, dtype: str,
            yardstick: torch.Tensor | None = None, tol: Tol | None = None,
            bitwise: bool = False, decay_span: float = 0.0, conditioning: torch.Tensor | None = None,
            floor_at: torch.Tensor | None = None, magnitude: torch.Tensor | None = None) -> Comparison:
    """`yardstick`: the same problem in the implementation's declared precision; sets the max-abs budget
    and widens the normwise bound to k times its normwise error. `conditioning`: such a result used only
    to widen the normwise bound (a stage whose upstream differs from the yardstick's, so no budget).
    `floor_at`: the magnitude the budget's rounding floor is taken at (`unit_floor`), when it is not the
    reference's own (a gradient summed over tokens: the root of the sum of its squared terms, which cancellation hides).
    `magnitude`: the elementwise bound's rtol term is taken at it instead of |expected|, for a reference
    combined from rounded results (prop_linearity's a f(u) + b f(v): |a f(u)| + |b f(v)|), whose rounding
    is its terms' whatever their sum cancels to."""
    with phase("compare"):
        return _compare(output, actual, expected, dtype=dtype, yardstick=yardstick, tol=tol, bitwise=bitwise,
                        decay_span=decay_span, conditioning=conditioning, floor_at=floor_at, magnitude=magnitude)


def _compare(output: str, actual: torch.Tensor, expected: torch.Tensor, *, dtype: str,
             yardstick: torch.Tensor | None, tol: Tol | None, bitwise: bool, decay_span: float,
             conditioning: torch.Tensor | None = None, floor_at: torch.Tensor | None = None,
             magnitude: torch.Tensor | None = None) -> Comparison:
    """Compare `actual` with `expected` (any dtypes; measured in float64 on their device when they
    share one, else on the CPU: at GPU sizes a dozen float64 passes over 30M elements take seconds
    on one CPU thread)."""
    tol = tol or load_policy().tol(dtype, output)
    if tuple(actual.shape) != tuple(expected.shape):
        return Comparison(output, False, math.inf, (), math.inf, expected.numel(), expected.numel(), tol,
                          why=[f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"])
    dev = expected.device if actual.device == expected.device else torch.device("cpu")
    a = actual.detach().to(dev, torch.float64)
    e = expected.detach().to(dev, torch.float64)
    nonfinite = int((~torch.isfinite(a)).sum()) - int((~torch.isfinite(e)).sum())
    diff = (a - e).abs()
    diff = torch.where(torch.isnan(diff) & ~torch.isnan(e), torch.full_like(diff, math.inf), diff)
    if e.numel() == 0:
        return Comparison(output, True, 0.0, (), 0.0, 0, 0, tol)
    flat = int(torch.nan_to_num(diff, nan=math.inf).argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(diff.shape)))
    max_abs = float(diff.reshape(-1)[flat])
    enorm = float(e.norm())
    dnorm = float(torch.nan_to_num(a - e, nan=math.inf).norm())
    normwise = dnorm / enorm if enorm > 0 else (0.0 if dnorm == 0 else math.inf)
    rms = enorm / math.sqrt(e.numel())
    size = e.abs() if magnitude is None else torch.maximum(e.abs(), magnitude.detach().to(dev, torch.float64))
    allowed = tol.atol * rms + tol.rtol * size
    bad = ~(diff <= allowed)
    budget = err_y = None
    limit = tol.normwise
    scale = 1.0
    if yardstick is not None and not bitwise:
        yard_diff = (yardstick.detach().to(dev, torch.float64) - e).abs()
        err_y = float(yard_diff.max())
        # The elementwise rule, like the normwise bound, never demands less than k times what the declared
        # precision reaches against it: at millions of 16-bit elements the rule's tail meets elements whose
        # terms cancel (|terms| ~ 7000 |ref| in a bfloat16 model layer), where the yardstick itself used 40-53%
        # of it and a correct vLLM 103% (lab/reports/2026-12-06-production-modes.md).
        used = float(torch.nan_to_num(yard_diff / allowed, nan=0.0, posinf=0.0).max())
        scale = max(1.0, load_policy().k * used)
        if scale > 1.0:
            allowed = allowed * scale
            bad = ~(diff <= allowed)
        floor = (rounding_floor(e, DTYPES[dtype], decay_span) if floor_at is None
                 else unit_floor(floor_at.detach().to(dev, torch.float64), DTYPES[dtype], decay_span))
        budget = load_policy().k * err_y + floor
        conditioning = yardstick if conditioning is None else conditioning
    if conditioning is not None and not bitwise and enorm > 0:
        # The fixed normwise bound assumes a well-conditioned problem. When the same-precision
        # computation itself misses by more (a TF32 dot product C.B that cancels, amplifying 2^-11 to
        # 1e-2 at seqlen 1), demanding less than k times its error would flag a correct kernel.
        same_precision = float((conditioning.detach().to(dev, torch.float64) - e).norm()) / enorm
        if math.isfinite(same_precision):
            limit = max(limit, load_policy().k * same_precision)
    why = []
    if bitwise:
        bad = ~((a == e) | (torch.isnan(a) & torch.isnan(e)))
        if bad.any():
            why.append("not bitwise equal")
    else:
        if nonfinite > 0:
            why.append(f"{nonfinite} non-finite where the reference is finite")
        if not normwise <= limit:
            why.append(f"normwise {normwise:.3g} > {limit:.3g}")
        if bad.any():
            why.append(f"{int(bad.sum())} elements over atol*rms + rtol*|ref|")
        if budget is not None and not max_abs <= budget:
            why.append(f"max abs {max_abs:.3g} over budget {budget:.3g}")
    return Comparison(output, not why, max_abs, where, normwise, int(bad.sum()), e.numel(), tol,
                      budget=budget, err_yardstick=err_y, nonfinite=max(nonfinite, 0), why=why,
                      normwise_limit=limit, elementwise_scale=scale)

