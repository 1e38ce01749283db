"""The battery warm-up (ssdcheck_plugin/warmup.py): which checks it derives from the collected tests and how
workers share them (a 2-worker run with it forced on: tests/test_reporting.py's xdist report test)."""
from __future__ import annotations

from types import SimpleNamespace

from properties import triage
from ssdcheck_plugin import warmup


class _Fn:   # a Hypothesis test function is what carries a battery
    hypothesis = object()


def _item(name, **params):
    return SimpleNamespace(obj=_Fn, name=f"{name}[{'-'.join(map(str, params.values()))}]", originalname=name,
                           callspec=SimpleNamespace(params=params))


def test_each_property_test_names_its_battery():
    assert warmup.check_of(_item("test_matches_oracle", impl="cutile")) == ("cutile", "prop_matches_oracle", None, None)
    assert warmup.check_of(_item("test_matches_oracle_model_layer", impl="cutile", dtype="float16")) == \
        ("cutile", "prop_matches_oracle", "model", "float16")
    assert warmup.check_of(_item("test_finite_under_extreme_decay_long", impl="tilegym")) == \
        ("tilegym", "prop_finite_under_extreme_decay", None, None)
    assert warmup.check_of(_item("test_grad_linearity", impl="tilegym")) == ("tilegym", "prop_grad_linearity", None, None)
    assert warmup.check_of(_item("test_regression", impl="cutile")) is None   # no such property
    plain = SimpleNamespace(obj=object(), name="test_seq_idx_packing[cutile]", originalname="test_seq_idx_packing",
                            callspec=SimpleNamespace(params={"impl": "cutile"}))
    assert warmup.check_of(plain) is None   # not a Hypothesis test: no battery


def test_checks_cover_every_collected_battery_once_oracle_first():
    from kernels.registry import lookup
    info = lookup("cutile")
    items = [_item("test_seq_idx_packing", impl="cutile"), _item("test_matches_oracle", impl="cutile"),
             _item("test_matches_oracle_precision", impl="cutile"),
             _item("test_matches_oracle_model_layer", impl="cutile", dtype="bfloat16"),
             _item("test_matches_oracle", impl="torch-ref")]   # declares no compile key: nothing to warm
    checks = warmup.battery_checks(items)
    plain, model = triage.battery(info, True), triage.battery(info, True, "bfloat16", "model")
    oracle = set(plain) | set(model)   # the model battery repeats a whole-chunk problem; precision's are plain's
    assert len(checks) == len(set(checks)) == len(oracle) + len(plain)
    assert [c[1] for c in checks] == ["prop_matches_oracle"] * len(oracle) + ["prop_seq_idx_packing"] * len(plain)
    assert {c[2] for c in checks} == set(plain) | set(model)


def test_gradient_tests_warm_the_classes_their_draws_copy():
    """A gradient test's draws copy the compile classes of the battery of its backward's options
    (properties/grad_strategies.py): those are its checks, as GradProblems, the oracle's first; an
    implementation without a backward has none."""
    from kernels.registry import lookup
    from properties.grad_problem import GradProblem
    tg = lookup("tilegym")
    items = [_item("test_grad_linearity", impl="tilegym"), _item("test_grad_matches_oracle", impl="tilegym"),
             _item("test_grad_matches_oracle", impl="cutile")]   # cutile: forward only
    checks = warmup.battery_checks(items)
    battery = triage.battery(tg.replace(options=tg.backward_options() - {"varlen_states"}), True, large_first=False)
    assert [c[:2] for c in checks] == [("tilegym", "prop_grad_matches_oracle")] * len(battery) + \
        [("tilegym", "prop_grad_linearity")] * len(battery)
    assert all(isinstance(c[2], GradProblem) for c in checks)
    assert {tg.compile_class(c[2]) for c in checks} == {tg.compile_class(p) for p in battery}


def test_workers_claim_disjoint_checks_until_none_is_left(tmp_path):
    import threading
    import time
    checks = [("i", "p", n) for n in range(40)]
    ran: dict[str, list] = {"a": [], "b": []}
    null = open("/dev/null", "w")

    def worker(name):
        warmup.warm(checks, tmp_path / "counter", run_check=lambda i, p, n: (ran[name].append(n), time.sleep(0.002)),
                    log=null)
    threads = [threading.Thread(target=worker, args=(w,)) for w in ran]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(ran["a"] + ran["b"]) == list(range(40))   # each check once, none left
    assert ran["a"] and ran["b"], ran                           # both took a share


def test_a_check_that_raises_stops_the_workers_warmup(tmp_path):
    def boom(impl, prop, n):
        if n == 1:
            raise RuntimeError("illegal memory access")
    out = warmup.warm([("i", "p", 0), ("i", "p", 1), ("i", "p", 2)], tmp_path / "c", run_check=boom,
                      log=open("/dev/null", "w"))
    assert out["ran"] == 1 and "illegal memory access" in out["raised"]


class _Clock:
    """A clock that a check advances by its own length."""
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_under_a_budget_the_warmup_leaves_the_tests_their_time(tmp_path):
    """With a deadline 100 s away, 20 s checks: the warm-up runs two (to 40 s), does not claim a third
    that would end past its half (60 s > 50 s), and leaves the other checks unclaimed for the tests.
    Without a deadline (the broken input: TileGym's shipped warm-up spent a whole budget) it runs all."""
    import io
    clock, ran = _Clock(), []

    def check(impl, prop, n):
        ran.append(n)
        clock.t += 20.0
    checks = [("i", "p", n) for n in range(10)]
    log = io.StringIO()
    out = warmup.warm(checks, tmp_path / "c", run_check=check, log=log, deadline=clock.t + 100.0, clock=clock)
    assert ran == [0, 1] and out["stopped_for_time"] and out["seconds"] == 40.0, (ran, out)
    assert "half the time to the deadline" in log.getvalue()
    from ssdcheck_plugin.fuzzing import _count_read
    assert _count_read(tmp_path / "c") == 2   # the checks not run are not claimed either
    ran.clear()
    out = warmup.warm(checks, tmp_path / "d", run_check=check, log=io.StringIO(), clock=clock)
    assert ran == list(range(10)) and not out["stopped_for_time"]


def test_a_slow_warmup_check_is_named_and_timed_by_the_watchdog(tmp_path):
    """A check of 45 s is named in the log with its problem, and the stall watchdog's hang timer is
    armed over each check under a name that says it is the warm-up (a wedged check leaves its stack)."""
    import io
    clock, seen = _Clock(), []

    class Watch:
        nodeid = ""

        def example_started(self):
            seen.append(("start", self.nodeid))

        def example_finished(self):
            seen.append(("end", self.nodeid))

    def check(impl, prop, n):
        clock.t += 45.0 if n == 1 else 1.0
    log = io.StringIO()
    warmup.warm([("tilegym", "prop_linearity", 0), ("tilegym", "prop_linearity", 1)], tmp_path / "c",
                run_check=check, log=log, watchdog=Watch(), clock=clock)
    assert seen == [("start", "battery warm-up: prop_linearity on tilegym"),
                    ("end", "battery warm-up: prop_linearity on tilegym")] * 2
    slow = [line for line in log.getvalue().splitlines() if " took " in line]
    assert slow == ["ssdcheck battery warm-up: prop_linearity on tilegym took 45 s: 1"], log.getvalue()


def test_a_gradient_check_runs_its_gradient_property(tmp_path):
    """warm()'s default runner finds a gradient property among the gradient properties (torch-ref on
    the CPU, its battery warmed as `--ssd-warm-battery on` would)."""
    import io
    checks = warmup.battery_checks([_item("test_grad_group_broadcast", impl="torch-ref")], compiled_only=False)
    assert checks and all(c[1] == "prop_grad_group_broadcast" for c in checks)
    log = io.StringIO()
    out = warmup.warm(checks[:1], tmp_path / "counter", log=log)
    assert out["ran"] == 1 and out["raised"] is None, (out, log.getvalue())
