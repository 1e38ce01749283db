"""lab/scripts/gpu_autotune_prime.py --menu: one problem per autotune key the GPU draws can reach."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "gpu_autotune_prime", os.path.join(os.path.dirname(__file__), "..", "scripts", "gpu_autotune_prime.py"))
prime = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prime)


def test_the_menu_holds_one_problem_per_dtype_chunk_and_dim_pair_with_the_options_on():
    from kernels.registry import lookup
    from properties.menus import GPU_DIM_PAIRS
    for name in ("mamba-ssm", "tilegym"):
        info = lookup(name)
        menu = prime.menu_problems(info)
        keys = [(p.dtype, p.chunk_size, (p.headdim, p.dstate)) for p in menu]
        assert len(keys) == len(set(keys))                   # one per key
        assert set(keys) == {(d, c, pair) for d in info.dtypes for c in info.chunk_sizes
                             for pair in GPU_DIM_PAIRS}, name   # every key the GPU draws can reach
        assert all(p.final_states for p in menu)
    mamba = prime.menu_problems(lookup("mamba-ssm"))        # it takes every option: all on
    assert all(p.seq_starts and p.initial_states and p.z and p.D == "h" and p.dt_bias for p in mamba)


def test_list_prints_the_problems_without_a_gpu(capsys):
    assert prime.main(["--impl", "tilegym", "--menu", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"{len(out) - 1} problems" and all(line.startswith("SSDProblem(") for line in out[:-1])


def test_checks_are_the_battery_checks_the_suite_runs_first(tmp_path):
    """--checks primes what the warm-up and each test's battery run: warmup.forward_checks equals the
    checks battery_checks derives from a real collection of tests/test_properties.py."""
    import subprocess
    import sys
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    script = tmp_path / "collect.py"
    script.write_text(
        "import pytest, sys\n"
        "class P:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        from ssdcheck_plugin import warmup\n"
        "        got = set(warmup.battery_checks(session.items, compiled_only=False))\n"
        "        want = set(warmup.forward_checks('tilegym'))\n"
        "        print('SAME' if got == want and got else f'DIFFER {len(got)} {len(want)}', got ^ want)\n"
        "pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests/test_properties.py',\n"
        "             '--impl', 'tilegym'], plugins=[P()])\n")
    out = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, timeout=240)
    assert "SAME" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_list_with_checks_names_each_check_after_the_problems(capsys):
    assert prime.main(["--impl", "tilegym", "--checks", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    calls = [line for line in out[:-1] if line.startswith("SSDProblem(")]
    checks = [line for line in out[:-1] if line.startswith("prop_")]
    assert calls and checks and len(calls) + len(checks) == len(out) - 1
    assert out[:len(calls)] == calls                     # the first calls first, then the checks
    assert {c.split()[0] for c in checks} >= {"prop_matches_oracle", "prop_split_invariance", "prop_causality"}


def test_precompile_plans_the_calls_a_check_derives(tmp_path, monkeypatch):
    """A check's derived calls (here the split sequences of split invariance) are planned as well: their
    shapes are specializations the plain call does not compile."""
    import sys
    import pytest
    from kernels.peers.sources import PeerSourceMissing, unpack_wheel
    from ssdcheck_plugin.warmup import forward_checks
    pytest.importorskip("cuda.tile")
    try:
        monkeypatch.syspath_prepend(unpack_wheel("tilegym", tmp_path))
    except PeerSourceMissing as e:
        pytest.skip(str(e))
    for k in [k for k in sys.modules if k.split(".")[0] == "tilegym"]:
        monkeypatch.delitem(sys.modules, k)
    prop, p = next((prop, p) for _, prop, p in forward_checks("tilegym") if prop == "prop_split_invariance")
    call, line = prime.plan_one(("tilegym", ("call", p)))
    check, check_line = prime.plan_one(("tilegym", ("check", prop, p)))
    assert line.endswith(f"1 calls, {len(call)} compiles") and len(call) > 0
    assert set(call) < set(check), check_line              # the plain call's compiles, and the splits'
    assert int(check_line.split(": ")[1].split()[0]) > 1   # more than one call recorded


def test_precompile_is_refused_by_name_for_an_implementation_without_a_plan(capsys):
    import pytest
    with pytest.raises(SystemExit):
        prime.main(["--impl", "mamba-ssm", "--precompile", "--list"])
    assert "--precompile: mamba-ssm declares no KernelInfo.precompile" in capsys.readouterr().err
