"""A declared deviation of a backward (KernelInfo.deviations with gradient properties), on the CPU.

TileGym 1.5.1's ddt is NaN at every token with dt == 0 (docs/findings/tilegym-ddt-at-zero-dt.md),
declared as kernels/peers/tilegym.py's ZERO_DT_DDT. Its bug, modeled on torch-ref's autograd backward
(tests/test_gradient_power.py's `rs / dt` fault), is reported as that known deviation on the
declaration's examples while every other gradient is still checked; undeclared it fails on ddt alone;
a wider bug and another gradient's bug still fail; a correct backward declaring it passes unexpectedly.
The float64 truth at dt == 0 is finite: the oracles agree there and match a one-sided difference.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from kernels.peers.tilegym import ZERO_DT_DDT
from kernels.registry import Deviation
from oracles.grad_f64 import ssd_grads_chunked_f64, ssd_grads_recurrence_f64
from oracles.chunked_f64 import ssd_chunked_f64
from properties.deviations import declared_examples, unmet
from properties.grad_problem import GradProblem
from properties.gradients import GRAD_PROPERTIES
from tests.deviation_targets import run_declared_deviations
from tests.test_gradient_power import _broken, _ddt_through_a_division, _scaled, _torch_ref

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [GradProblem(**e) for e in ZERO_DT_DDT.examples]
NO_SKIPS = EXAMPLES[0].replace(dt_zero_stride=0)   # outside the condition


def _with(corrupt, declared=True):
    info = _broken(corrupt) if corrupt else _torch_ref()
    return info.replace(name="tilegym-like", deviations=(ZERO_DT_DDT,) if declared else ())


def _both(*corrupts):
    def corrupt(g, kw, dy, df):
        for c in corrupts:
            g = c(g, kw, dy, df)
        return g
    return corrupt


def _runs(info, problems=EXAMPLES):
    return [(prop, p, GRAD_PROPERTIES[prop](info, p)) for p in problems for prop in ZERO_DT_DDT.props]


def _failing(result):
    return sorted({c.output for c in result.checked if not c.passed})


def test_the_declaration_names_gradient_properties_and_its_examples_meet_it():
    info = _with(_ddt_through_a_division)
    got = list(declared_examples(info, backward=True))
    assert {prop for _, _, prop in got} == set(ZERO_DT_DDT.props) and len(got) == len(EXAMPLES) * len(ZERO_DT_DDT.props)
    assert list(declared_examples(info)) == []     # none of the forward's
    wrong = Deviation(props=ZERO_DT_DDT.props, outputs=("ddt",), condition=ZERO_DT_DDT.condition, reason="r",
                      finding="f", examples=(dict(ZERO_DT_DDT.examples[0], dt_zero_stride=0),))
    with pytest.raises(ValueError, match="does not meet the condition"):
        list(declared_examples(info.replace(deviations=(wrong,)), backward=True))


def test_the_declared_bug_is_a_known_deviation_and_the_other_gradients_are_checked():
    info = _with(_ddt_through_a_division)
    runs = []
    for prop, problem, r in _runs(info):
        assert r.passed, r.message("tests/test_gradients.py")
        assert r.known and not r.unexpected_passes, (prop, problem)
        assert {c.output for c in r.known[0].comparisons} == {"ddt"}
        assert {c.output for c in r.checked} >= {"dx", "dA", "dB", "dC"}, prop    # still checked
        runs.append((ZERO_DT_DDT, prop, r))
    assert unmet(info, runs, backward=True) == []
    assert unmet(info, [], backward=True) and unmet(info, []) == []   # a gradient deviation is no forward one


def test_the_same_bug_undeclared_fails_on_ddt_alone():
    for prop, problem, r in _runs(_with(_ddt_through_a_division, declared=False), EXAMPLES[:1]):
        assert not r.passed and _failing(r) == ["ddt"], (prop, problem, _failing(r))


def test_another_gradient_still_fails_under_the_declaration():
    """dB 1% off as well: the properties that compare with a truth (the oracle, the closed form) fail on
    dB and only dB (the self-comparisons see the same scaling on both sides)."""
    runs = {prop: r for prop, _, r in _runs(_with(_both(_ddt_through_a_division, _scaled("B", 1.01))), EXAMPLES[:1])}
    assert all(_failing(r) in ([], ["dB"]) for r in runs.values()), {p: _failing(r) for p, r in runs.items()}
    assert not runs["prop_grad_matches_oracle"].passed and not runs["prop_grad_no_decay_is_linear_attention"].passed


def _ddt_nan_everywhere(g, kw, dy, df):
    return {**g, "dt": torch.full_like(g["dt"], math.nan)}


def test_a_wider_bug_fails_where_no_token_is_skipped():
    """NaN ddt at every token is a bug beyond the declaration: problems without skipped tokens still
    check ddt."""
    for prop, problem, r in _runs(_with(_ddt_nan_everywhere), [NO_SKIPS]):
        assert not r.known, prop
        assert not r.passed and _failing(r) == ["ddt"], (prop, _failing(r))


def test_a_correct_backward_declaring_it_passes_unexpectedly():
    for prop, problem, r in _runs(_with(None), EXAMPLES[:1]):
        assert r.passed and r.unexpected_passes, prop


def test_the_true_gradient_at_dt_zero_is_finite_and_one_sided():
    """The float64 truth TileGym should return: finite ddt at the skipped tokens, the same from two
    independent oracles, and the right-sided derivative (the step cannot go below 0)."""
    problem = EXAMPLES[0]
    kw, dy, dfinal = problem.backward_inputs("cpu")
    skipped = kw["dt"] == 0
    assert skipped[:, ::problem.dt_zero_stride].all() and int(skipped.sum()) == kw["dt"][:, ::5].numel()
    chunked, recurrence = ssd_grads_chunked_f64(kw, dy, dfinal), ssd_grads_recurrence_f64(kw, dy, dfinal)
    ddt = chunked["dt"][skipped]
    assert torch.isfinite(ddt).all() and ddt.abs().max() > 0
    assert torch.allclose(ddt, recurrence["dt"][skipped], rtol=1e-10, atol=1e-10)

    def loss(dt):
        y, final = ssd_chunked_f64(**{**{k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v
                                         for k, v in kw.items()}, "dt": dt})
        return float((y * dy.double()).sum() + (final * dfinal.double()).sum()) if dfinal is not None \
            else float((y * dy.double()).sum())
    b, t, h = (int(i) for i in skipped.nonzero()[7])
    step = 1e-7
    up = kw["dt"].double().clone()
    up[b, t, h] = step
    one_sided = (loss(up) - loss(kw["dt"].double())) / step
    assert abs(one_sided - float(chunked["dt"][b, t, h])) <= 1e-4 * max(1.0, abs(one_sided)), (one_sided, chunked["dt"][b, t, h])


# Implementations for the run through pytest below (usable as --impl tests.test_gradients_deviations:NAME):
# torch-ref with TileGym's ddt bug, declared; and correct, declaring it.
def tilegym_like(**kwargs):
    return _torch_ref().fn(**kwargs)


def correct_declaring(**kwargs):
    return _torch_ref().fn(**kwargs)


tilegym_like.ssd_info = _with(_ddt_through_a_division).replace(fn=tilegym_like)
correct_declaring.ssd_info = _with(None).replace(fn=correct_declaring, name="correct-declaring")


def _declared_run(impl: str, *extra: str, tmp_path: Path):
    return run_declared_deviations("tests/test_gradients.py", impl, *extra, tmp_path=tmp_path)


def test_the_gradient_suite_counts_the_declared_deviation_and_strict_fails_an_unexpected_pass(tmp_path):
    """tests/test_gradients.py::test_grad_declared_deviations_occur, the run a GPU host makes with
    --impl tilegym: each example meets the deviation (counted in the report), and under
    --ssd-strict-deviations a backward without the bug fails it. ~40 s."""
    n = len(EXAMPLES) * len(ZERO_DT_DDT.props)
    proc, rep = _declared_run("tests.test_gradients_deviations:tilegym_like", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (rep["summary"]["known_deviations"], rep["summary"]["unexpected_passes"]) == (n, 0), rep["summary"]
    assert ZERO_DT_DDT.finding in proc.stdout
    proc, rep = _declared_run("tests.test_gradients_deviations:correct_declaring", "--ssd-strict-deviations",
                              tmp_path=tmp_path)
    assert proc.returncode == 1 and "unexpected pass of a declared deviation" in proc.stdout, proc.stdout[-3000:]


# ---------------------------------------------------------------- the finding's script, on the CPU

FINDINGS = ROOT / "docs" / "findings"


def _script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tilegym_ddt_zero_dt", FINDINGS / "tilegym_ddt_zero_dt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_finding_script_computes_the_math():
    """Its float64 gradients are the recurrence oracle's, finite at the tokens with dt == 0."""
    s = _script()
    kw = s.problem()
    got = dict(zip(s.NAMES, s.grads_f64(**kw)))
    ours = ssd_grads_recurrence_f64(dict(x=kw["x"], dt=kw["dt"], A=kw["a"], B=kw["b"], C=kw["c"], D=kw["d"],
                                         initial_states=kw["init_state"], chunk_size=s.CHUNK, return_final_states=True),
                                    kw["dout"], kw["dfinal_state"])
    for name, key in zip(s.NAMES, ("x", "A", "B", "C", "D", "dt", "initial_states")):
        assert torch.allclose(got[name], ours[key], rtol=1e-10, atol=1e-10), name
    zero = kw["dt"] == 0
    assert int(zero.sum()) > 0 and torch.isfinite(got["ddt"][zero]).all()


def _wheel_file(tmp_path) -> Path:
    from kernels.peers.sources import PeerSourceMissing, unpack_wheel
    try:
        return Path(unpack_wheel("tilegym", tmp_path)) / "tilegym"
    except PeerSourceMissing as e:
        pytest.skip(str(e))


def test_the_root_cause_line_is_where_the_finding_says_and_the_fix_applies_to_a_copy(tmp_path):
    s = _script()
    pkg = _wheel_file(tmp_path / "wheel")
    text = (pkg / s.BUGGY_FILE).read_text()
    assert text.count(s.FIX[0]) == 1
    line = text[:text.index(s.FIX[0])].count("\n") + 1
    assert line == 435 and "mamba2.py:435" in (FINDINGS / "tilegym-ddt-at-zero-dt.md").read_text()
    for name in ("dcbT_out = xdoT * W * dt_tile[:, None]", "rs = ct.sum(dcbcb, axis=1)", "rawT = ct.mma("):
        assert name in text     # the fix reads names the kernel defines; rs carries dt
    fixed = Path(s.with_fix(str(pkg))) / "tilegym"
    assert s.FIX[1] in (fixed / s.BUGGY_FILE).read_text() and s.FIX[0] not in (fixed / s.BUGGY_FILE).read_text()
    assert s.FIX[0] in (pkg / s.BUGGY_FILE).read_text()   # the original is left as it was
