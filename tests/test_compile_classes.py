"""Compile-aware draws (issue 24, lever 1): what a drawn problem costs in compiles, counted on the CPU.

cuTile's JIT compiles one kernel per launch signature (array dtypes, divisibility of shapes and strides,
constants, hints). lab/scripts/cubin_resources.recorded_launches runs the forward on CPU tensors with its
launches recorded and derives each signature by the JIT's rule (checked against Nsight Compute's
symbols in tests/test_cutile_compile.py), so the distinct signatures of a set of draws are the cold
compiles a GPU run of them needs (a property's derived problems, another chunk size say, add more).
"""
from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.registry import lookup
from properties.strategies import ssd_problems, tally

pytest.importorskip("cuda.tile")


def _signatures(problem) -> frozenset:
    from lab.scripts.cubin_resources import recorded_symbols, unfilled_normals
    with unfilled_normals():
        inputs = problem.inputs("cpu")
    return recorded_symbols(inputs)


def _draws(info, n: int, regime=None) -> list:
    got = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(data=st.data())
    def draw(data):
        kw = {"regime": regime, "dtype": "bfloat16"} if regime == "model" else {"regime": regime}
        got.append(data.draw(ssd_problems(info, gpu=True, **kw)))

    draw()
    return got


def _mixed_classes(problems, key) -> list:
    """Compile classes (by `key`) whose problems launch different signatures."""
    by_key = defaultdict(set)
    for p in problems:
        by_key[key(p)].add(_signatures(p))
    return [k for k, sigs in by_key.items() if len(sigs) > 1]


def test_cutile_compile_key_determines_the_launch_signatures():
    """Problems of one compile class launch the same kernel signatures: the key misses nothing that
    costs a compile. A key that ignores the sizes' divisibility (dtype, chunk and options only) fails
    the same check, so the check can fail."""
    info = lookup("cutile")
    problems = _draws(info, 60) + _draws(info, 30, "model") + _draws(info, 30, "precision")
    assert not _mixed_classes(problems, info.compile_class)
    coarse = _mixed_classes(problems, lambda p: (p.dtype, p.chunk_size, tuple(sorted(p.options()))))
    assert coarse, "a key without the sizes' classes should mix signatures"


@pytest.mark.parametrize("regime", [None, "model"])
def test_compile_aware_draws_need_far_fewer_compiles(regime):
    """200 GPU draws of cutile: the distinct launch signatures (the cold compiles) with compile-aware
    draws against the same strategy drawing freely (no compile_key declared). Measured: 48-52 against
    161; the model regime (bfloat16) 11 against 89-93, since its draws copy the model-layer
    battery's classes (64 before, when they took the plain battery's options only and drew their own
    sizes: the H200 gate's float32 model-layer test then spent 387 s compiling)."""
    info = lookup("cutile")
    aware = set().union(*map(_signatures, _draws(info, 200, regime)))
    free = set().union(*map(_signatures, _draws(info.replace(compile_key=None), 200, regime)))
    print(f"distinct launch signatures in 200 draws ({regime or 'default'} regime): compile-aware "
          f"{len(aware)}, free {len(free)}")
    assert len(aware) <= 0.4 * len(free), (len(aware), len(free))


@pytest.mark.parametrize("name", ["cutile", "tilegym", "mamba-ssm"])
def test_compile_aware_draws_keep_the_gates_coverage(name):
    """Each feature the gate report tallies stays in >= 10% of the GPU draws (of the implementations that
    declare it), and classes stay few: 200 draws hit far fewer compile classes than they did drawing
    freely."""
    info = lookup(name)
    problems = _draws(info, 200)
    share = {f: sum(tally(p)[f] for p in problems) / len(problems) for f in tally(problems[0])}
    declared = {"seq_idx": "seq_idx" in info.options, "partial_last_chunk": not info.seqlen_multiple_of_chunk,
                "ngroups>1": "ngroups" in info.options}
    low = {f: s for f, s in share.items() if s < 0.10 and declared.get(f, True)}
    assert not low, f"{name}: features under 10% of 200 GPU draws: {low} (all: {share})"
    aware = len({info.compile_class(p) for p in problems})
    free = len({info.compile_class(p) for p in _draws(info.replace(compile_key=None), 200)})
    print(f"{name}: compile classes in 200 draws: compile-aware {aware}, free {free}")
    assert aware <= 0.5 * free, (aware, free)
