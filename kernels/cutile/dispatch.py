"""The dispatch table: problem -> the compile-time constants of each cuTile kernel.

This is data, read by the launcher (to choose) and by compile_matrix.py (to enumerate every
configuration CI must compile). Add a row here and CI compiles it; nothing else chooses constants.

Every kernel tiles the sequence in BL = 64 tokens whatever the chunk size (the chunk size is a
run-time argument), so the table only depends on the element dtype and dstate. Headdim and dstate
below 64 are served by the 64-wide tiles with zero padding (correct, a little wasted work on
problems far from the performance target); headdim and dstate above 64 loop over tiles.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

ELEMENT_DTYPES = ("float32", "float16", "bfloat16")   # x, B, C, z (and dt for chunk_cumsum)


@dataclass(frozen=True)
class Problem:
    """What the table looks at."""
    dtype: str          # x.dtype name, or dt.dtype name for chunk_cumsum
    headdim: int
    dstate: int
    chunk_size: int


@dataclass(frozen=True)
class Config:
    """Constants of one kernel (passed as ct.Constant[int] in this order) and compiler hints."""
    constants: tuple[tuple[str, int], ...]
    occupancy: int | None = None

    def get(self, name: str) -> int:
        return dict(self.constants)[name]

    def __str__(self) -> str:
        s = ",".join(f"{k}={v}" for k, v in self.constants)
        return s + (f",occupancy={self.occupancy}" if self.occupancy else "")


@dataclass(frozen=True)
class Rule:
    when: str                              # human-readable condition, shown in reports
    test: Callable[[Problem], bool] = field(compare=False)
    config: Config = None


def _always(_: Problem) -> bool:
    return True


def _c(**kw) -> tuple[tuple[str, int], ...]:
    return tuple(kw.items())


# First matching rule wins. Occupancy 2 measured best on an H200 (bf16, b8 l2048 h32 p64 n128):
# chunk_scan 0.345 -> 0.193 ms, chunk_state 0.314 -> 0.208 ms against the compiler's default.
TABLE: dict[str, tuple[Rule, ...]] = {
    "chunk_cumsum": (
        Rule("always", _always, Config(_c(BL=64, BH=16))),
    ),
    "chunk_state": (
        Rule("always", _always, Config(_c(BL=64, BP=64, BN=64, PF=1, LAT=0), occupancy=2)),
    ),
    "chunk_scan": (
        Rule("dstate <= 64", lambda p: p.dstate <= 64, Config(_c(BL=64, BP=64, BN=64, LAT=0, PERSIST=0), occupancy=2)),
        Rule("dstate >= 128", lambda p: p.dstate >= 128, Config(_c(BL=64, BP=64, BN=128, LAT=0, PERSIST=0), occupancy=2)),
    ),
    "varlen_state": (
        Rule("always", _always, Config(_c(BL=64, BP=64, BN=64))),
    ),
}

KERNEL_NAMES = tuple(TABLE)


def choose(kernel: str, problem: Problem) -> Config:
    for rule in TABLE[kernel]:
        if rule.test(problem):
            return rule.config
    raise LookupError(f"dispatch table has no {kernel} row for {problem}")


def configs(kernel: str) -> tuple[Config, ...]:
    """Every distinct configuration the table can choose for `kernel`, in table order."""
    seen: list[Config] = []
    for rule in TABLE[kernel]:
        if rule.config not in seen:
            seen.append(rule.config)
    return tuple(seen)
