"""kernels/peers/tilegym_tuning.py on a stand-in for tilegym.ops.cutile.mamba2: the same call shape
(`exhaustive_search(configs, stream, grid_fn, kernel, args_fn, hints_fn).best.config`), no GPU."""
from __future__ import annotations

import json
from types import ModuleType, SimpleNamespace

import pytest
import torch

from kernels.peers import tilegym_tuning


def _peer(searches: list):
    """A module like TileGym's: a kernel global, a search that picks the last config, a forward that
    calls the search the way TileGym does (looking the name up in its module at call time)."""
    mod = ModuleType("fake_mamba2")

    def exhaustive_search(configs, stream, grid_fn, kernel, args_fn, hints_fn):
        searches.append(len(configs))
        return SimpleNamespace(best=SimpleNamespace(config=configs[-1]))

    def forward(x, block_choices=(16, 32, 64)):
        configs = [SimpleNamespace(BLOCK=b, occupancy=2) for b in block_choices]
        result = mod.exhaustive_search(configs, None, None, mod.state_kernel,
                                       lambda cfg: (x, x.shape[-1], cfg.BLOCK), lambda cfg: {})
        return result.best.config

    mod.state_kernel = object()
    mod.exhaustive_search = exhaustive_search
    mod.forward = forward
    return mod


def test_a_recorded_choice_skips_the_search_in_a_new_process(tmp_path):
    path, x = tmp_path / "tuning.json", torch.zeros(2, 8)
    searches = []
    mod1 = _peer(searches)
    first = tilegym_tuning.install(path, mod1, device="NVIDIA H200", version="1.5.1")
    first.context = {"shape": "b2-l8", "chunk": 64}
    assert vars(mod1.forward(x)) == {"BLOCK": 64, "occupancy": 2} and searches == [3]
    assert [e["kind"] for e in first.take_events()] == ["tuned"]

    again = _peer(searches)                    # a later process: its own module, the same file
    tuning = tilegym_tuning.install(path, again, device="NVIDIA H200", version="1.5.1")
    assert tuning.knows(shape="b2-l8", chunk=64)
    cfg = again.forward(x)
    assert vars(cfg) == {"BLOCK": 64, "occupancy": 2} and searches == [3]          # no new search
    assert [e["kind"] for e in tuning.take_events()] == ["recorded"]
    entry = json.loads(path.read_text())["entries"][0]
    assert entry["kernel"] == "state_kernel" and entry["device"] == "NVIDIA H200" and entry["tune_s"] >= 0


def test_context_tells_which_shapes_have_recorded_choices(tmp_path):
    path, searches = tmp_path / "tuning.json", []
    mod = _peer(searches)
    tuning = tilegym_tuning.install(path, mod, device="NVIDIA H200", version="1.5.1")
    tuning.context = {"shape": "b2-l8", "chunk": 64}
    mod.forward(torch.zeros(2, 8))
    later = tilegym_tuning.Tuning(path, "NVIDIA H200", "1.5.1")
    assert later.knows(shape="b2-l8", chunk=64) and not later.knows(shape="b2-l8", chunk=128)
    assert not tilegym_tuning.Tuning(path, "NVIDIA H100", "1.5.1").knows(shape="b2-l8", chunk=64)


@pytest.mark.parametrize("change", ["device", "version", "shape", "candidates"])
def test_a_choice_is_used_only_where_it_was_tuned(tmp_path, change):
    path, searches = tmp_path / "tuning.json", []
    tilegym_tuning.install(path, mod := _peer(searches), device="NVIDIA H200", version="1.5.1")
    mod.forward(torch.zeros(2, 8))
    device = "NVIDIA H100" if change == "device" else "NVIDIA H200"
    version = "1.6.0" if change == "version" else "1.5.1"
    tilegym_tuning.install(path, later := _peer(searches), device=device, version=version)
    x = torch.zeros(2, 16) if change == "shape" else torch.zeros(2, 8)
    later.forward(x, block_choices=(16, 32) if change == "candidates" else (16, 32, 64))
    assert len(searches) == 2                  # the search ran again


def test_installing_twice_wraps_the_real_search_once(tmp_path):
    searches = []
    mod = _peer(searches)
    tilegym_tuning.install(tmp_path / "a.json", mod, device="d", version="v")
    tilegym_tuning.install(tmp_path / "b.json", mod, device="d", version="v")
    mod.forward(torch.zeros(2, 8))
    assert searches == [3] and (tmp_path / "b.json").exists() and not (tmp_path / "a.json").exists()


def test_a_file_of_another_schema_is_refused(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": "something-else", "entries": []}))
    with pytest.raises(ValueError, match="schema"):
        tilegym_tuning.Tuning(path, "d", "v")


def test_workers_write_their_own_files_and_every_process_reads_them_all(tmp_path):
    path, searches = tmp_path / "tuning.json", []
    a, b = torch.zeros(2, 8), torch.zeros(4, 8)
    w0 = tilegym_tuning.install(path, m0 := _peer(searches), device="d", version="v", writer="gw0")
    m0.forward(a)
    w1 = tilegym_tuning.install(path, m1 := _peer(searches), device="d", version="v", writer="gw1")
    m1.forward(b)
    assert searches == [3, 3] and not path.exists()          # each worker its own file, the shared one untouched
    assert (tmp_path / "tuning.gw0.json").exists() and (tmp_path / "tuning.gw1.json").exists()
    assert len(w0.entries) == 1 and len(w1.entries) == 2      # gw1 started after gw0's file was there
    later = tilegym_tuning.install(path, m2 := _peer(searches), device="d", version="v", writer="gw0")
    assert len(later.entries) == 2                            # both workers' choices
    assert m2.forward(a).BLOCK == 64 and m2.forward(b).BLOCK == 64 and searches == [3, 3]
    (tmp_path / "tuning.gw2.json").write_text("{not json")
    with pytest.raises(ValueError, match="tuning.gw2.json: not a tuning file"):
        tilegym_tuning.Tuning(path, "d", "v")


def test_the_shipped_adapter_installs_the_tuning_named_by_the_environment(tmp_path, monkeypatch):
    import sys
    from kernels.peers import tilegym as adapter
    searches = []
    fake = _peer(searches)
    fake.mamba2_chunk_forward = fake.forward
    monkeypatch.setitem(sys.modules, adapter.PEER_MODULE, fake)
    monkeypatch.setattr(adapter, "_peer_fn", None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    monkeypatch.setenv(adapter.TUNING_ENV, str(tmp_path / "tg.json"))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    fn = adapter._load()
    assert hasattr(fake.exhaustive_search, "__wrapped__")     # TileGym's search, wrapped
    fn(torch.zeros(2, 8))
    saved = json.loads((tmp_path / "tg.gw7.json").read_text())["entries"]
    assert searches == [3] and saved[0]["device"] == "GPU X" and saved[0]["config"] == {"BLOCK": 64, "occupancy": 2}
    monkeypatch.setattr(adapter, "_peer_fn", None)
    monkeypatch.delenv(adapter.TUNING_ENV)
    fresh = _peer(searches)
    fresh.mamba2_chunk_forward = fresh.forward
    monkeypatch.setitem(sys.modules, adapter.PEER_MODULE, fresh)
    adapter._load()
    assert not hasattr(fresh.exhaustive_search, "__wrapped__")  # unset: TileGym as it is
