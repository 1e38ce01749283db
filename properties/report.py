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
_STRICT = {"deviations": False}


def set_strict_deviations(on: bool) -> None:
    """--ssd-strict-deviations: a declared deviation that does not occur fails the check."""
    _STRICT["deviations"] = bool(on)


def add_sink(fn: Callable[["PropertyResult"], None]) -> None:
    _SINKS.append(fn)


def remove_sink(fn: Callable[["PropertyResult"], None]) -> None:
    if fn in _SINKS:
        _SINKS.remove(fn)


@dataclass
class KnownDeviation:
    """A declared deviation (kernels.registry.Deviation) met by one result, and the checks it covers."""
    reason: str
    finding: str
    outputs: tuple[str, ...]
    comparisons: list[Comparison]
    deviation: object = None          # the kernels.registry.Deviation met
    visible: bool | None = None       # False: the modeled bug passes the same checks (below their resolution)

    @property
    def covered_passed(self) -> bool:
        return all(c.passed for c in self.comparisons)

    @property
    def unexpected_pass(self) -> bool:
        """The condition was met and every covered check passed, where the bug (when the deviation models
        it) would have failed them: the declaration is wider than the bug, or the bug is fixed."""
        return self.covered_passed and self.visible is not False

    @property
    def below_resolution(self) -> bool:
        """Passed, but so does the modeled bug: the example cannot tell (not an unexpected pass)."""
        return self.covered_passed and self.visible is False

    def to_dict(self) -> dict:
        return {"reason": self.reason, "finding": self.finding, "outputs": list(self.outputs)}


@dataclass
class PropertyResult:
    prop: str
    impl: str
    problem: SSDProblem
    comparisons: list[Comparison] = field(default_factory=list)
    skipped: str | None = None     # why the property does not apply (never a silent pass)
    outside_domain: bool = False   # skipped for this problem (e.g. seqlen 1), not for the implementation
    known: list[KnownDeviation] = field(default_factory=list)   # declared deviations this problem met

    def declare(self, deviations, variants=()) -> "PropertyResult":
        """Mark the comparisons covered by those `deviations` whose condition this problem (with the
        `variants` the property compared it with) meets as known deviations."""
        for d in deviations:
            if not d.applies(self.prop, self.problem, variants):
                continue
            covered = [c for c in self.comparisons if c.output in d.outputs and not self.is_known(c)]
            if covered:
                self.known.append(KnownDeviation(d.reason, d.finding, tuple(d.outputs), covered, d))
        return self

    def is_known(self, c: Comparison) -> bool:
        return any(c is k for dev in self.known for k in dev.comparisons)

    @property
    def checked(self) -> list[Comparison]:
        """The comparisons that decide the verdict: all but those of declared deviations."""
        return [c for c in self.comparisons if not self.is_known(c)]

    @property
    def unexpected_passes(self) -> list[KnownDeviation]:
        return [d for d in self.known if d.unexpected_pass]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checked)

    @property
    def strict_passed(self) -> bool:
        """passed, and under --ssd-strict-deviations no declared deviation that did not occur."""
        return self.passed and not (_STRICT["deviations"] and self.unexpected_passes)

    @property
    def worst_share(self) -> float:
        return max((c.share for c in self.checked), default=0.0)

    def coords(self, c: Comparison) -> str:
        """SSD coordinates of a worst index for (b, l, h, p) outputs: which chunk and position."""
        if c.output == "y" and len(c.where) == 4:
            b, l, h, p = c.where
            cs = self.problem.chunk_size
            return f" = (b={b}, l={l}, h={h}, p={p}): chunk {l // cs} pos {l % cs}"
        return ""

    def message(self) -> str:
        p = self.problem
        head = (f"{self.prop} failed: {self.impl} {p.dtype} cs{p.chunk_size}\n")
        body = "\n".join(c.summary() + self.coords(c) for c in self.checked if not c.passed)
        for d in self.unexpected_passes if _STRICT["deviations"] else ():
            body += (f"\nunexpected pass of a declared deviation ({', '.join(d.outputs)}: {d.reason}; {d.finding}): "
                     f"--ssd-strict-deviations makes it a failure; narrow the declaration's condition")
        return (f"{head}{body.strip()}\n{p!r}\nreproduce: {p.repro(self.impl, self.prop)}")

    def publish(self) -> "PropertyResult":
        for sink in list(_SINKS):
            sink(self)
        return self


def assert_passed(result: PropertyResult) -> None:
    """Raise AssertionError with the full report when a checked comparison failed (or, under
    --ssd-strict-deviations, a declared deviation passed unexpectedly)."""
    result.publish()
    if not result.strict_passed:
        raise AssertionError(result.message())
