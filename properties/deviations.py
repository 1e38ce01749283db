"""The declared deviations of an implementation (KernelInfo.deviations), run on their own examples.

Drawn problems meet a narrow condition rarely, so each declaration holds explicit examples; the gate
runs them for the implementation under test, and the report counts how many met the deviation and how
many passed unexpectedly, never a silent 0.
"""
from __future__ import annotations

from properties.invariants import PROPERTIES
from properties.problem import SSDProblem
from properties.report import PropertyResult


def declared_examples(info):
    """(deviation, problem, prop) for every example of every declared deviation and each of its
    properties; ValueError naming the declaration when an example does not meet its condition or
    a property is unknown."""
    for d in getattr(info, "deviations", ()):
        for fields in d.examples:
            problem = SSDProblem(**fields)
            if not d.condition(problem):
                raise ValueError(f"{info.name}: Deviation.examples: {problem!r} does not meet the condition "
                                 f"{getattr(d.condition, '__name__', d.condition)} ({d.reason})")
            for prop in d.props:
                if prop not in PROPERTIES:
                    raise ValueError(f"{info.name}: Deviation.props: unknown {prop!r}; known: {sorted(PROPERTIES)}")
                yield d, problem, prop


def unmet(info, runs: list[tuple[object, str, PropertyResult]]) -> list[str]:
    """Each declared (deviation, property) that none of its examples' results met: a declaration
    whose count would stay 0 (say, the property leaves the output out on those problems)."""
    met = {(id(d), prop) for d, prop, r in runs if any(k.reason == d.reason for k in r.known)}
    return [f"{prop}: {d.reason}" for d in getattr(info, "deviations", ()) for prop in d.props
            if (id(d), prop) not in met]
