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
