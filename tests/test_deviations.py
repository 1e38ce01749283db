"""Declared deviations (KernelInfo.deviations) on the CPU: torch-ref with mamba_ssm's varlen-state-0 bug
reproduced (tests/deviation_targets.py) is reported as the known deviation where declared and fails
where not; a declaration on a correct implementation is an unexpected pass, a failure when strict."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.peers.mamba_ssm import VARLEN_STATE0, varlen_state0_misses_initial_states
from kernels.registry import Deviation
from properties import report
from properties.deviations import declared_examples, unmet
from properties.invariants import PROPERTIES
from properties.problem import SSDProblem
from properties.report import assert_passed
from ssdcheck_plugin.aggregate import Aggregate
from tests import deviation_targets as targets

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [SSDProblem(**e) for e in VARLEN_STATE0.examples]
# sequence 0 ends past chunk 0: outside the declared condition at chunk 64 and at chunk 32 alike
OUTSIDE = SSDProblem(batch=1, seqlen=160, nheads=2, headdim=16, dstate=16, chunk_size=64, initial_states=True,
                     seq_starts=(80,), varlen=True, seed=1)   # seq_idx_packing adds a start at 128


def _runs(info, problems=EXAMPLES):
    return [(prop, p, PROPERTIES[prop](info, p)) for p in problems for prop in VARLEN_STATE0.props]


def _failing(result):
    return sorted({c.output for c in result.checked if not c.passed})


@pytest.fixture
def strict():
    report.set_strict_deviations(True)
    yield
    report.set_strict_deviations(False)


def test_declared_bug_is_a_known_deviation_and_the_other_outputs_are_checked():
    for prop, problem, r in _runs(targets.drops_h0.ssd_info):
        assert r.passed, r.message()
        assert r.known and not r.unexpected_passes, (prop, problem)
        assert {c.output for c in r.known[0].comparisons} == {"varlen_states"}
        assert {c.output for c in r.checked} >= {"y", "final_states"}, prop   # still checked
        assert all(c.passed for c in r.checked)


def test_the_same_bug_undeclared_fails_on_varlen_states():
    for prop, problem, r in _runs(targets.drops_h0_undeclared.ssd_info):
        assert not r.passed and _failing(r) == ["varlen_states"], (prop, problem)


def test_an_output_the_declaration_does_not_cover_still_fails():
    for prop, problem, r in _runs(targets.drops_h0_and_bad_y.ssd_info):
        if prop != "prop_chunk_size_invariance":   # y is off the same way at every chunk size
            assert not r.passed and _failing(r) == ["y"], (prop, problem)


def test_outside_the_condition_the_check_runs_as_before():
    """The declaration is as narrow as the bug: a wider one (initial_states dropped at any length)
    fails where sequence 0 ends past chunk 0, declaration or not."""
    assert not varlen_state0_misses_initial_states(OUTSIDE)
    for prop, problem, r in _runs(targets.drops_h0_always.ssd_info, [OUTSIDE]):
        if prop != "prop_chunk_size_invariance":   # wrong the same way at every chunk size
            assert not r.known and _failing(r) == ["varlen_states"], prop
    assert all(r.passed and not r.known for _, _, r in _runs(targets.drops_h0.ssd_info, [OUTSIDE]))


def test_chunk_size_invariance_meets_the_condition_only_where_the_two_chunk_sizes_disagree():
    p = EXAMPLES[0]   # sequence 0 has 40 tokens
    assert varlen_state0_misses_initial_states(p, p.replace(chunk_size=16))
    assert not varlen_state0_misses_initial_states(p, p.replace(chunk_size=128))   # both miss them alike
    assert not varlen_state0_misses_initial_states(p.replace(initial_states=False))
    assert not varlen_state0_misses_initial_states(p.replace(varlen=False))


def test_a_declaration_on_a_correct_implementation_is_an_unexpected_pass(strict):
    runs = _runs(targets.correct_declared.ssd_info)
    assert all(r.passed and r.unexpected_passes for _, _, r in runs)
    with pytest.raises(AssertionError, match="unexpected pass of a declared deviation"):
        assert_passed(runs[0][2])
    report.set_strict_deviations(False)
    assert_passed(runs[0][2])


def test_a_pass_where_the_modeled_bug_passes_too_is_below_resolution_not_unexpected(strict):
    """Strong decay wipes the initial state out over sequence 0: the bug cannot show, so an example
    passing there says nothing (below resolution), even under --ssd-strict-deviations."""
    wiped = EXAMPLES[0].replace(decay=100.0)
    assert varlen_state0_misses_initial_states(wiped)
    for info in (targets.drops_h0.ssd_info, targets.correct_declared.ssd_info):
        for prop, _, r in _runs(info, [wiped]):
            if r.known:   # chunk-size invariance: at chunk 16 too sequence 0 holds no initial state worth a check
                assert r.known[0].below_resolution and not r.unexpected_passes, (info.name, prop)
            assert_passed(r)
    agg = Aggregate()
    for _, _, r in _runs(targets.correct_declared.ssd_info, [wiped]):
        agg.add(r)
    assert agg.deviation_totals()[1] == 0 and sum(d["below_resolution"] for d in agg.deviations.values()) >= 2


def test_the_report_counts_deviations_and_lists_unexpected_passes():
    agg, other = Aggregate(), Aggregate()
    for _, _, r in _runs(targets.drops_h0.ssd_info):
        agg.add(r)
    for _, _, r in _runs(targets.correct_declared.ssd_info):
        other.add(r)
    n = len(EXAMPLES) * len(VARLEN_STATE0.props)
    assert agg.deviation_totals() == (n, 0) and other.deviation_totals() == (n, n)
    assert not any(row[2] == "varlen_states" for row in agg.rows)   # counted as deviations, not rows
    agg.merge_dict(json.loads(json.dumps(other.to_dict())))
    assert agg.deviation_totals() == (2 * n, n)
    listed = [p for d in agg.deviations.values() for p in d["unexpected_pass_problems"]]
    assert repr(EXAMPLES[0]) in listed and all(d["finding"] == VARLEN_STATE0.finding for d in agg.deviations.values())


def test_declared_examples_are_checked_and_every_property_met():
    info = targets.drops_h0.ssd_info
    runs = [(d, prop, PROPERTIES[prop](info, p)) for d, p, prop in declared_examples(info)]
    assert len(runs) == len(EXAMPLES) * len(VARLEN_STATE0.props) and unmet(info, runs) == []
    assert unmet(info, [(d, prop, PROPERTIES[prop](targets.drops_h0.ssd_info, OUTSIDE)) for d, prop, _ in runs])
    wrong = Deviation(props=("prop_matches_oracle",), outputs=("varlen_states",),
                      condition=varlen_state0_misses_initial_states, reason="r", finding="f",
                      examples=(dict(batch=1, seqlen=96, varlen=True, seq_starts=(80,), initial_states=True),))
    with pytest.raises(ValueError, match="does not meet the condition"):
        list(declared_examples(info.replace(deviations=(wrong,))))
    with pytest.raises(ValueError, match="Deviation.examples"):
        Deviation(props=("prop_matches_oracle",), outputs=("varlen_states",), condition=bool, reason="r",
                  finding="f", examples=())


def _gate(impl: str, *extra: str, tmp_path: Path):
    return targets.run_declared_deviations("tests/test_regressions.py", impl, *extra, tmp_path=tmp_path, timeout=300)


def test_gate_reports_the_declared_deviation_and_strict_fails_an_unexpected_pass(tmp_path):
    n = len(EXAMPLES) * len(VARLEN_STATE0.props)
    proc, rep = _gate("tests.deviation_targets:drops_h0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (rep["summary"]["known_deviations"], rep["summary"]["unexpected_passes"]) == (n, 0)
    assert "ssdcheck known deviations" in proc.stdout and VARLEN_STATE0.finding in proc.stdout
    md = subprocess.run([sys.executable, "scripts/summarize_report.py", str(tmp_path / "drops_h00.json")], cwd=ROOT,
                        capture_output=True, text=True, check=True).stdout
    assert f"known deviations: {n} example(s) met a declared deviation, 0 passed unexpectedly" in md
    proc, rep = _gate("tests.deviation_targets:correct_declared", tmp_path=tmp_path)
    assert proc.returncode == 0 and rep["summary"]["unexpected_passes"] == n, proc.stdout[-3000:]
    assert "unexpected pass: SSDProblem(" in proc.stdout
    proc, rep = _gate("tests.deviation_targets:correct_declared", "--ssd-strict-deviations", tmp_path=tmp_path)
    assert proc.returncode == 1 and "unexpected pass of a declared deviation" in proc.stdout, proc.stdout[-3000:]
