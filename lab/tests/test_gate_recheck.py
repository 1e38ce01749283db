"""lab/scripts/gate_recheck.py replays both worst problems of each flagged row and pairs two replays."""
import importlib.util
import json
import os

_spec = importlib.util.spec_from_file_location(
    "gate_recheck", os.path.join(os.path.dirname(__file__), "..", "scripts", "gate_recheck.py"))
recheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recheck)

P1 = ("SSDProblem(batch=1, seqlen=31, nheads=1, headdim=8, dstate=8, ngroups=1, chunk_size=16, "
      "dtype='float32', decay=1.0, seed=0)")
P2 = P1.replace("seed=0", "seed=1")


def _report(path, value, problem):
    row = {"impl": "torch-ref", "prop": "prop_matches_oracle", "output": "y", "dtype": "float32",
           "max_abs": value, "normwise": 1e-12, "share": 0.5, "max_abs_problem": problem, "normwise_problem": problem}
    path.write_text(json.dumps({"schema": "ssdcheck-report/1", "meta": {}, "results": [row]}))
    return str(path)


def test_run_replays_both_worsts_under_this_revision(tmp_path):
    cand, base = _report(tmp_path / "c.json", 1.0, P2), _report(tmp_path / "b.json", 1e-3, P1)
    jobs = recheck.plan(cand, base)
    assert [(j["side"], j["problem"]) for j in jobs] == [("candidate", P2), ("baseline", P1)]
    assert recheck.main(["run", cand, base, "--out", str(tmp_path / "r"), "--impl", "torch-ref", "-j", "2"]) == 0
    done = json.loads((tmp_path / "r" / "recheck.json").read_text())
    assert [d["said"] for d in done] == ["exit 0", "exit 0"]
    assert all(0 <= d["value"] < 1e-3 for d in done)      # torch-ref's real error, not the report's made-up 1.0


def test_a_problem_behind_several_flagged_rows_is_replayed_once(tmp_path, monkeypatch):
    calls = []

    def fake_replay(prop, problem, impl, report):
        calls.append((prop, problem))
        rows = {("torch-ref", prop, out, "float32"): {"max_abs": v, "normwise": v, "share": 0.1}
                for out, v in (("y", 1.0), ("final_states", 2.0))}
        return rows, "exit 0"

    monkeypatch.setattr(recheck, "replay", fake_replay)
    jobs = [{"impl": "torch-ref", "prop": "prop_x", "output": o, "dtype": "float32", "metric": "max_abs",
             "side": side, "problem": P1} for o in ("y", "final_states") for side in ("candidate", "baseline")]
    done = recheck.run_all(jobs, "torch-ref", str(tmp_path), 4)
    assert calls == [("prop_x", P1)] and [d["value"] for d in done] == [1.0, 1.0, 2.0, 2.0]


def test_compare_judges_growth_on_the_same_input(tmp_path, capsys):
    rec = lambda v: [{"prop": "prop_x", "output": "y", "dtype": "bfloat16", "metric": "max_abs", "side": "candidate",
                      "problem": P1, "value": v, "share": 0.3}]
    (tmp_path / "a.json").write_text(json.dumps(rec(1.0)))
    (tmp_path / "b.json").write_text(json.dumps(rec(1.5)))
    (tmp_path / "c.json").write_text(json.dumps(rec(3.0)))
    assert recheck.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    assert "within the policy" in capsys.readouterr().out
    assert recheck.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "c.json")]) == 1
    assert "GREW on the same input" in capsys.readouterr().out
    assert recheck.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "nope.json")]) == 2
