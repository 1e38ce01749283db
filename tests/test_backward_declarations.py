"""KernelInfo.backward: what each implementation declares, and a bad declaration's clear error."""
from __future__ import annotations

import pytest

from kernels.registry import GRAD_INPUTS, Backward, KernelInfo, lookup


def _info(**backward):
    fields = dict(fn="autograd", grads=("x",), options=frozenset({"D"}))
    return KernelInfo(name="t", fn=lambda **kw: None, options=frozenset({"D", "z"}), backward=Backward(**{**fields, **backward}))


@pytest.mark.parametrize("field,value,message", [
    ("fn", "numeric", r"backward\.fn: expected 'autograd' or a callable"),
    ("grads", ("x", "dy"), r"backward\.grads: expected a non-empty subset"),
    ("grads", (), r"backward\.grads: expected a non-empty subset"),
    ("options", frozenset({"seq_index"}), r"backward\.options: unknown \['seq_index'\]"),
    ("state_dtype", "bf16", r"backward\.state_dtype: expected fp32 or input"),
    ("matmul", "tf16", r"backward\.matmul: expected one of"),
    ("explore_one_in", 0, r"backward\.explore_one_in: expected None or an int >= 1"),
])
def test_a_bad_backward_declaration_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        _info(**{field: value})


def test_backward_must_be_a_backward():
    with pytest.raises(ValueError, match=r"\.backward: expected a Backward or None, got str"):
        KernelInfo(name="t", fn=lambda **kw: None, backward="autograd")


def test_narrowing_the_forward_narrows_the_backward():
    """A KernelInfo whose options shrink (a test of a missing feature) keeps a valid backward that
    offers no more than the forward."""
    narrowed = lookup("torch-ref").replace(options=frozenset({"D"}))
    assert narrowed.backward_options() == frozenset({"D"})


def test_declared_backwards():
    ref, tg, ms = lookup("torch-ref"), lookup("tilegym"), lookup("mamba-ssm")
    assert ref.backward.fn == "autograd" and ref.backward.deterministic and ref.backward.grads == GRAD_INPUTS
    assert ref.backward.state_dtype == "input"   # autograd rounds the entering states' gradients to x.dtype
    assert ms.backward.fn == "autograd" and not ms.backward.deterministic
    assert ms.backward.state_dtype == "input" and ms.backward.matmul == "tf32-trunc"
    assert callable(tg.backward.fn) and not tg.backward.deterministic and tg.backward.matmul == "ieee"
    assert set(tg.backward.grads) == {"x", "dt", "A", "B", "C", "D", "initial_states"}
    for info in (ref, tg, ms):
        assert "varlen_states" not in info.backward.options   # no varlen-state gradient in the contract


def test_tilegym_backward_refuses_what_it_lacks_before_loading_the_peer():
    """The adapter validates like the forward: an unsupported option names its argument, no GPU needed."""
    import torch
    from kernels.registry import UnsupportedProblem
    tg = lookup("tilegym")
    x = torch.zeros(1, 64, 4, 16)
    kw = dict(x=x, dt=torch.ones(1, 64, 4), A=-torch.ones(4), B=torch.zeros(1, 64, 1, 16), C=torch.zeros(1, 64, 1, 16),
              chunk_size=64)
    with pytest.raises(UnsupportedProblem, match="^z: option 'z' is not supported by tilegym"):
        tg.backward.fn(dy=x, dfinal_states=None, z=x, **kw)
    with pytest.raises(ValueError, match="dy: expected x's shape"):
        tg.backward.fn(dy=x[:, :1], dfinal_states=None, **kw)


def _grad_classes(info, n: int = 200) -> tuple[int, int]:
    """(compile classes, draws outside the triage battery's classes) of n derandomized GPU gradient draws."""
    from lab.scripts.grad_compile_classes import count_classes
    counts, battery = count_classes(info, n)
    return len(counts), sum(c for k, c in counts.items() if k not in battery)


def test_a_costly_backward_explores_new_compile_classes_at_its_declared_rate():
    """TileGym's backward compiles five kernels per class (about a minute on the H200), so its gradient
    draws explore 1 in 48 (Backward.explore_one_in) rather than the forward's 1 in 8. Measured on the
    derandomized sequence of lab/scripts/grad_compile_classes.py, 200 draws: 3 classes and no draw outside
    the battery's, against 20 classes and 35 draws at 1 in 8. At 1 in 1, 40 of 40 draws explore."""
    import dataclasses
    tg = lookup("tilegym")
    assert tg.backward.explore_one_in == 48
    classes, explored = _grad_classes(tg)
    classes8, explored8 = _grad_classes(tg.replace(backward=dataclasses.replace(tg.backward, explore_one_in=None)))
    assert explored <= 15 and explored8 >= 2 * explored + 10, (explored, explored8)
    assert classes < classes8, (classes, classes8)
    _, explored1 = _grad_classes(tg.replace(backward=dataclasses.replace(tg.backward, explore_one_in=1)), n=40)
    assert explored1 >= 30, explored1   # a free draw may still land in a battery class


def test_group_broadcast_runs_stay_in_the_classes_the_warm_up_compiles():
    """prop_grad_group_broadcast runs each draw grouped and with one group per head. A draw that is
    grouped already runs as drawn, so the warm-up's battery runs hold the classes of all but the
    explored draws' runs: 6 of 400 runs outside them on this sequence. Regrouping every even seed's draw
    (TileGym's heads per group is a compile-time constant) had put 155 of 400 outside, in classes the
    test compiled alone (lab/reports/2026-12-02-backward-h200.md: 128 of 200 examples in 381 s, 360 s compiling)."""
    from lab.scripts.grad_compile_classes import count_classes, group_broadcast_runs
    tg = lookup("tilegym")
    runs, warm = count_classes(tg, 200, group_broadcast_runs)
    draws, battery = count_classes(tg, 200)
    outside = sum(c for k, c in runs.items() if k not in warm)
    explored = sum(c for k, c in draws.items() if k not in battery)
    assert outside <= 2 * explored + 2, (outside, explored)
