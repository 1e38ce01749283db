"""PropertyResult: what one property measured on one problem, and how a failure reads.

Failures read like torch.testing.assert_close, name the property, the implementation and the drawn
problem, and end with one command that re-runs exactly that check. Every result is also handed to
the registered sinks (the JSON/JUnit reporter and the fuzzer's progress display subscribe there).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from properties.problem import SSDProblem
from properties.tolerance import Comparison

_SINKS: list[Callable[["PropertyResult"], None]] = []


def add_sink(fn: Callable[["PropertyResult"], None]) -> None:
    _SINKS.append(fn)


def remove_sink(fn: Callable[["PropertyResult"], None]) -> None:
    if fn in _SINKS:
        _SINKS.remove(fn)


@dataclass
class PropertyResult:
    prop: str
    impl: str
    problem: SSDProblem
    comparisons: list[Comparison] = field(default_factory=list)
    skipped: str | None = None     # why the property does not apply (never a silent pass)
    outside_domain: bool = False   # skipped for this problem (e.g. seqlen 1), not for the implementation

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)

    @property
    def worst_share(self) -> float:
        return max((c.share for c in self.comparisons), default=0.0)

    def coords(self, c: Comparison) -> str:
        """SSD coordinates of a worst index for (b, l, h, p) outputs: which chunk and position."""
        if c.output == "y" and len(c.where) == 4:
            b, l, h, p = c.where
            cs = self.problem.chunk_size
            return f" = (b={b}, l={l}, h={h}, p={p}): chunk {l // cs} pos {l % cs}"
        return ""

    def message(self, test_file: str = "tests/test_properties.py") -> str:
        p = self.problem
        head = (f"{self.prop} failed: {self.impl} {p.dtype} cs{p.chunk_size}\n")
        body = "\n".join(c.summary() + self.coords(c) for c in self.comparisons if not c.passed)
        return (f"{head}{body}\n{p!r}\nreproduce: {p.repro(self.impl, self.prop, test_file)}")

    def publish(self) -> "PropertyResult":
        for sink in list(_SINKS):
            sink(self)
        return self


def assert_passed(result: PropertyResult, test_file: str = "tests/test_properties.py") -> None:
    """Raise AssertionError with the full report when any comparison failed."""
    result.publish()
    if not result.passed:
        raise AssertionError(result.message(test_file))
