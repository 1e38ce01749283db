"""lab/bench/triton_precompile.py: a worker compiles its share of every autotuned launch's configs and
launches nothing (checked here with a stand-in for Triton's Autotuner; the GPU run is in the race's JSON,
`triton_precompile`)."""
import pytest

from lab.bench.triton_precompile import Share, compile_share


class Config:
    def __init__(self, i, bad=False):
        self.i, self.bad = i, bad

    def all_kwargs(self):
        return {"BLOCK": 16 * (self.i + 1), "num_warps": 4}

    def __repr__(self):
        return f"cfg{self.i}"


class Fn:
    def __init__(self):
        self.calls = []

    def run(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if kwargs["BLOCK"] == 16 * 3:     # config 2: Triton cannot build it
            raise RuntimeError("out of resources")


class Tuner:
    """The attributes of triton.runtime.autotuner.Autotuner that compile_share uses."""
    arg_names = ["x", "n"]

    def __init__(self, n_configs, keep=None):
        self.configs = [Config(i) for i in range(n_configs)]
        self.fn, self.keep, self.nargs, self.best_config = Fn(), keep, None, None
        self.pruned_with = None

        def base_fn():
            pass
        self.base_fn = base_fn

    def prune_configs(self, kwargs):
        self.pruned_with = (dict(self.nargs), dict(kwargs))
        return [c for c in self.configs if self.keep is None or c.i in self.keep]


def test_each_worker_compiles_its_share_and_launches_nothing():
    tuners = [Tuner(7) for _ in range(3)]
    shares = [Share(i, 3) for i in range(3)]
    for t, s in zip(tuners, shares):
        assert compile_share(t, s, ("X", 5), {"grid": (1,), "warmup": False, "chunk_size": 64}) is None
    built = sorted(kw["BLOCK"] // 16 - 1 for t in tuners for _, kw in t.fn.calls)
    assert built == list(range(7))                          # every config once over the workers
    for t, s in zip(tuners, shares):
        assert all(kw["warmup"] is True for _, kw in t.fn.calls), "a worker launched a kernel"
        assert all(args == ("X", 5) and kw["chunk_size"] == 64 and kw["grid"] == (1,) for args, kw in t.fn.calls)
        assert t.best_config is t.configs[0] and t.nargs is None
        assert t.pruned_with == ({"x": "X", "n": 5}, {"grid": (1,), "chunk_size": 64})
    assert [s.compiled for s in shares] == [3, 2, 1]       # configs 0,3,6 / 1,4 / 2 (fails),5
    assert shares[2].failed and "out of resources" in shares[2].failed[0] and "cfg2" in shares[2].failed[0]
    assert shares[0].seen == {"base_fn"}


def test_pruned_configs_are_the_ones_compiled():
    t, s = Tuner(6, keep={1, 4, 5}), Share(0, 1)
    compile_share(t, s, ("X", 5), {"grid": (1,), "warmup": False})
    assert [kw["BLOCK"] // 16 - 1 for _, kw in t.fn.calls] == [1, 4, 5]
    assert t.best_config.i == 1


def test_a_single_config_is_compiled_without_pruning():
    t, s = Tuner(1), Share(0, 2)
    compile_share(t, s, ("X", 5), {"grid": (1,), "warmup": False})
    assert len(t.fn.calls) == 1 and t.pruned_with is None


def test_share_index_out_of_range():
    with pytest.raises(ValueError, match="worker index 3 not in 0..2"):
        Share(3, 3)
