"""The declared deviations of an implementation (KernelInfo.deviations), run on their own examples.

Drawn problems meet a narrow condition rarely, so each declaration holds explicit examples; the gate
runs them for the implementation under test, and the report counts how many met the deviation and how
many passed unexpectedly, never a silent 0. A deviation of the forward names properties of
properties/invariants.py and its examples are SSDProblem fields; one of the backward names gradient
properties (properties/gradients.py) and its examples are GradProblem fields.
"""
from __future__ import annotations

from properties.grad_problem import GradProblem
from properties.gradients import GRAD_PROPERTIES
from properties.invariants import PROPERTIES
from properties.problem import SSDProblem
from properties.report import PropertyResult


def _kind(backward: bool) -> tuple[dict, type]:
    """The properties and the problem type of the forward's or the backward's deviations."""
    return (GRAD_PROPERTIES, GradProblem) if backward else (PROPERTIES, SSDProblem)


def declared_examples(info, backward: bool = False):
    """(deviation, problem, prop) for every example of every declared deviation and each of its
    properties of the forward (or, with `backward`, of the backward: GradProblem examples); ValueError
    naming the declaration when an example does not meet its condition or a property is unknown."""
    known, problem_type = _kind(backward)
    for d in getattr(info, "deviations", ()):
        for prop in d.props:
            if prop not in PROPERTIES and prop not in GRAD_PROPERTIES:
                raise ValueError(f"{info.name}: Deviation.props: unknown {prop!r}; known: "
                                 f"{sorted(PROPERTIES)} and {sorted(GRAD_PROPERTIES)}")
        props = [p for p in d.props if p in known]
        if not props:
            continue
        for fields in d.examples:
            problem = problem_type(**fields)
            if not d.condition(problem):
                raise ValueError(f"{info.name}: Deviation.examples: {problem!r} does not meet the condition "
                                 f"{getattr(d.condition, '__name__', d.condition)} ({d.reason})")
            for prop in props:
                yield d, problem, prop


def unmet(info, runs: list[tuple[object, str, PropertyResult]], backward: bool = False) -> list[str]:
    """Each declared (deviation, property) of the forward (or the backward) that none of its examples'
    results met: a declaration whose count would stay 0 (say, the property leaves the output out on
    those problems)."""
    known, _ = _kind(backward)
    met = {(id(d), prop) for d, prop, r in runs if any(k.reason == d.reason for k in r.known)}
    return [f"{prop}: {d.reason}" for d in getattr(info, "deviations", ()) for prop in d.props
            if prop in known and (id(d), prop) not in met]
