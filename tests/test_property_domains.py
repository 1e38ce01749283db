"""Which skips are the drawn problem's and which the implementation's.

A problem outside a property's domain (seqlen 1 for causality, one head for group broadcast) is
rejected by the Hypothesis test, so it is not counted and each property gets its full example count
of problems it really checks; an implementation that lacks a feature skips the property for every
problem and must not be rejected (Hypothesis would then fail the test as unsatisfiable).
"""
from __future__ import annotations

import dataclasses

import pytest

from kernels.registry import lookup
from properties import invariants
from properties.problem import SSDProblem

SMALL = SSDProblem(batch=1, seqlen=1, nheads=1, headdim=16, dstate=16, ngroups=1, chunk_size=64,
                   dtype="float32", decay=1.0, seed=0)


@pytest.mark.parametrize("prop", ["prop_causality", "prop_seq_idx_packing", "prop_split_invariance",
                                  "prop_group_broadcast"])
def test_problem_outside_the_domain_is_rejected_not_counted(prop):
    r = invariants.PROPERTIES[prop](lookup("torch-ref"), SMALL.replace(seed=1))   # odd: as drawn
    assert r.skipped and r.outside_domain and not r.comparisons


def test_chunk_size_without_another_usable_size_is_the_problems():
    info = dataclasses.replace(lookup("torch-ref"), chunk_sizes=(64, 128), seqlen_multiple_of_chunk=True)
    r = invariants.prop_chunk_size_invariance(info, SMALL.replace(seqlen=64))
    assert r.skipped and r.outside_domain


@pytest.mark.parametrize("change, prop", [
    (dict(chunk_sizes=(64,)), "prop_chunk_size_invariance"),
    (dict(options=frozenset()), "prop_seq_idx_packing"),
    (dict(stages=None), "prop_stages_match_oracle"),
    (dict(deterministic=False), "prop_determinism"),
])
def test_missing_feature_is_the_implementations(change, prop):
    info = dataclasses.replace(lookup("torch-ref"), **change)
    r = invariants.PROPERTIES[prop](info, SMALL.replace(seqlen=130))
    assert r.skipped and not r.outside_domain
