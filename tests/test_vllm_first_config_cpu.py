"""vLLM's first-config mode on the CPU: its own force_first_config.py and launch_autotuned, compiled from
the published tarball, driving a stand-in for Triton's Autotuner (docs/findings/vllm-first-config-dtype.md);
and lab/scripts/gpu_vllm.sh's runs, with stand-ins for python3 and lab/scripts/gpu_peers.sh.

The stand-in kernel has the first two configs of `_bmm_chunk_fwd_kernel` (ssd_bmm.py l.17-26) and
refuses config 0 in fp32 as the H200 did: OutOfResources, 294912 bytes of shared memory = 3 stages x
(128x64 + 64x256) fp32 tiles x 4 bytes, over the 232448 available. Everything else is vLLM's code.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from kernels.peers import vllm as adapter
from kernels.peers import vllm_files
from kernels.peers.sources import PeerSourceMissing
from kernels.registry import lookup

FORCE_FIRST = "vllm/triton_utils/force_first_config.py"
HELPERS = f"{vllm_files.OPS}/triton_helpers.py"
H200_SHARED = 232448


def _bytes(config, dtype) -> int:
    """Shared memory of a pipelined tl.dot loop: num_stages x (M x K + K x N) tiles of the input dtype."""
    m, n, k = (config.kwargs[f"BLOCK_SIZE_{d}"] for d in "MNK")
    return config.num_stages * (m * k + k * n) * torch.empty(0, dtype=dtype).element_size()


class OutOfResources(Exception):
    pass


class Config:
    """A triton.Config as the two vLLM files use it: kwargs, num_stages, pre_hook, all_kwargs()."""

    def __init__(self, kwargs, num_stages, num_warps):
        self.kwargs, self.num_stages, self.num_warps, self.pre_hook = kwargs, num_stages, num_warps, None

    def all_kwargs(self):
        return {**self.kwargs, "num_stages": self.num_stages, "num_warps": self.num_warps}


BMM_CONFIGS = (Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64}, 3, 8),
               Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32}, 4, 4))


class Kernel:
    """A JIT function: `run(**kwargs)` and `kernel[grid](**kwargs)` launch with the config's kwargs,
    OutOfResources where the tiles do not fit. `launched` records the BLOCK_SIZE_K of each launch."""

    def __init__(self):
        self.launched = []

    def run(self, *args, grid=None, warmup=False, **kwargs):
        config = next(c for c in BMM_CONFIGS if c.all_kwargs().items() <= kwargs.items())
        if _bytes(config, kwargs["a_ptr"].dtype) > H200_SHARED:
            raise OutOfResources(f"shared memory, Required: {_bytes(config, kwargs['a_ptr'].dtype)}")
        self.launched.append(BMM_CONFIGS.index(config))

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)


class Autotuner:
    """triton.runtime.autotuner.Autotuner's attributes that force_first_config and launch_autotuned read;
    its `run` is what force_first_config.install() replaces."""

    def __init__(self):
        self.fn = self.base_fn = Kernel()
        self.configs, self.keys, self.arg_names = list(BMM_CONFIGS), ["chunk_size", "K", "IS_CAUSAL"], []
        self.best_config = None

    def run(self, *args, **kwargs):
        raise AssertionError("force_first_config.install() did not replace Autotuner.run")

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)


def _fake_triton(monkeypatch):
    errors = types.ModuleType("triton.runtime.errors")
    errors.OutOfResources, errors.PTXASError = OutOfResources, type("PTXASError", (Exception,), {})
    compiler_errors = types.ModuleType("triton.compiler.errors")
    compiler_errors.CompileTimeAssertionFailure = type("CompileTimeAssertionFailure", (Exception,), {})
    autotuner = types.ModuleType("triton.runtime.autotuner")
    autotuner.Autotuner = type("Autotuner", (Autotuner,), {})        # a fresh class: install() patches it
    for name, mod in {"triton": types.ModuleType("triton"), "triton.runtime": types.ModuleType("triton.runtime"),
                      "triton.compiler": types.ModuleType("triton.compiler"), "triton.runtime.errors": errors,
                      "triton.compiler.errors": compiler_errors, "triton.runtime.autotuner": autotuner}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return autotuner.Autotuner


def _vllms(name: str, rel_path: str, namespace: dict):
    try:
        text, filename = vllm_files.read_source(rel_path)
    except PeerSourceMissing as e:
        pytest.skip(f"vLLM's {rel_path} is read from the published tarball: {e}")
    return vllm_files.compile_definitions(text, filename, {name}, namespace)[name]


@pytest.fixture
def process(monkeypatch):
    """A fresh process's view: vLLM's force_first_config installed on a stand-in Autotuner class, and
    vLLM's launch_autotuned with an empty cache. Returns (bmm kernel factory, launch(kernel, dtype, K))."""
    cls = _fake_triton(monkeypatch)
    install = _vllms("install", FORCE_FIRST, {"HAS_TRITON": True, "_installed": False,
                                              "logger": logging.getLogger("vllm.triton_utils.force_first_config")})
    install()
    launch_autotuned = _vllms("launch_autotuned", HELPERS, {"_autotuned_configs": {}})

    def launch(kernel, dtype, k, chunk_size=64):
        a = torch.zeros(chunk_size, 1, k, dtype=dtype)
        launch_autotuned(kernel, lambda meta: (1, 1), a_ptr=a, b_ptr=a, chunk_size=chunk_size, K=k, IS_CAUSAL=False)
        return kernel.fn.launched[-1]
    return cls, launch


def test_the_stand_in_refuses_what_the_h200_refused():
    assert _bytes(BMM_CONFIGS[0], torch.float32) == 294912 > H200_SHARED       # the H200's message
    assert _bytes(BMM_CONFIGS[0], torch.bfloat16) <= H200_SHARED
    assert _bytes(BMM_CONFIGS[1], torch.float32) <= H200_SHARED


def test_alone_each_dtype_gets_its_first_fitting_config(process):
    cls, launch = process
    assert launch(cls(), torch.float32, 128) == 1        # config 0 does not fit fp32: the next one
    assert launch(cls(), torch.bfloat16, 128) == 0


def test_a_bf16_pick_makes_fp32_fail_at_the_same_key(process):
    """vLLM 0.33.0's bug: the pick is cached per (autotuner, key values), without the dtypes that
    Triton's own Autotuner and launch_autotuned key on; fp32 gets bf16's config 0 and no other."""
    cls, launch = process
    kernel = cls()
    assert launch(kernel, torch.bfloat16, 128) == 0
    with pytest.raises(RuntimeError, match=r"^No valid config for kernel .* key=\(64, 128, False\) "
                                           r"\(tried 2 configs\)") as e:
        launch(kernel, torch.float32, 128)
    assert isinstance(e.value.__cause__, OutOfResources)
    assert launch(kernel, torch.float32, 128, chunk_size=128) == 1      # another key: fp32 alone again


def test_an_fp32_pick_gives_bf16_a_config_that_is_not_its_first(process):
    """The other order does not fail, it only changes what bf16 runs: the config a process picks
    depends on which dtype came first, which the knob exists to rule out."""
    cls, launch = process
    kernel = cls()
    assert launch(kernel, torch.float32, 128) == 1
    assert launch(kernel, torch.bfloat16, 128) == 1      # alone, bf16 runs config 0


def test_a_cached_pick_leaves_launch_autotuned_another_keys_config(process):
    """The same root: on a cached pick force_first_config does not set best_config (l.71-73), and
    launch_autotuned, whose key has the dtypes, records whatever best_config last was: the next call
    of identical inputs runs another config than the first."""
    cls, launch = process
    kernel = cls()
    assert launch(kernel, torch.float32, 128) == 1                   # picks config 1 for (64, 128)
    assert launch(kernel, torch.bfloat16, 128, chunk_size=128) == 0  # picks config 0 for (128, 128)
    assert launch(kernel, torch.bfloat16, 128) == 1                  # (64, 128) cached: config 1 ...
    assert launch(kernel, torch.bfloat16, 128) == 0                  # ... recorded: config 0


def test_first_config_runs_take_one_input_dtype_per_process():
    """The suite's fix: vLLM's knob is right for a process that serves one dtype, so a first-config run
    puts each input dtype under test in its own processes (lab/scripts/gpu_vllm.sh, MODE=first)."""
    for dtype in adapter.INFO.dtypes:
        spec = f"kernels.peers.vllm:BY_DTYPE.{dtype}"
        info = lookup(spec)
        assert info.dtypes == (dtype,) and info.name == spec and info.fn is adapter.vllm_first_config_forward
        assert info.replace(name="vllm", dtypes=adapter.INFO.dtypes, fn=adapter.vllm_forward,
                            notes=adapter.INFO.notes) == adapter.INFO
        assert lookup(info.name) == info                  # the name re-runs a failure's repro command


# -- lab/scripts/gpu_vllm.sh's orchestration, with stand-ins for python3 and lab/scripts/gpu_peers.sh ------

FAKE_PEERS = """#!/usr/bin/env bash
# records what gpu_vllm.sh asked of it, and when
source "$(dirname "$0")/_args.sh" out/x "$@"
mkdir -p "$DEST/peers"
{ echo "start $(date +%s.%N)"; env | grep -E '^(IMPLS|WORKERS|PART|TOTAL_S|VLLM_TRITON_FORCE_FIRST_CONFIG|TRITON_CACHE_AUTOTUNING|K)='
  sleep 1; echo "end $(date +%s.%N)"; } > "$DEST/peers/asked.txt"
echo '{}' > "$DEST/peers/report.json"
"""


def _gpu_vllm(tmp_path, mode, python_rc=0, **knobs):
    root = Path(__file__).resolve().parents[1]
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    (repo / "lab" / "scripts").mkdir(parents=True)
    bin_dir.mkdir()
    for name in ("gpu_vllm.sh", "_args.sh"):
        shutil.copy(root / "lab" / "scripts" / name, repo / "lab" / "scripts" / name)
    (repo / "lab" / "scripts" / "gpu_peers.sh").write_text(FAKE_PEERS)
    (repo / "lab" / "scripts" / "gpu_peers.sh").chmod(0o755)
    (bin_dir / "python3").write_text(f"#!/usr/bin/env bash\necho \"python3 $*\"; exit {python_rc}\n")
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SSDCHECK_GPU_SITE": "/tmp/site", "MODE": mode, **knobs}
    proc = subprocess.run(["bash", str(repo / "lab" / "scripts" / "gpu_vllm.sh"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    return proc, tmp_path / "out"


def _asked(folder):
    lines = (folder / "peers" / "asked.txt").read_text().split("\n")
    times = {ln.split()[0]: float(ln.split()[1]) for ln in lines if ln.startswith(("start", "end"))}
    return dict(ln.split("=", 1) for ln in lines if "=" in ln), times


def test_gpu_vllm_first_runs_each_dtype_alone_side_by_side(tmp_path):
    proc, out = _gpu_vllm(tmp_path, "first")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = {d: _asked(out / f"first-{d}") for d in ("float16", "bfloat16", "float32")}
    for d, (env, _) in runs.items():
        assert env == {"IMPLS": f"kernels.peers.vllm:BY_DTYPE.{d}", "WORKERS": "5", "PART": "tests",
                       "TOTAL_S": "480", "VLLM_TRITON_FORCE_FIRST_CONFIG": "1"}, env
        assert (out / f"first-{d}" / "peers" / "report.md").exists()
    starts = [t["start"] for _, t in runs.values()]
    assert max(starts) < min(t["end"] for _, t in runs.values())      # all three at once, not in turn


def test_gpu_vllm_shipped_tunes_the_battery_first_and_shares_the_picks(tmp_path):
    proc, out = _gpu_vllm(tmp_path, "shipped")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env, _ = _asked(out)
    total = int(env.pop("TOTAL_S"))
    assert env == {"IMPLS": "vllm", "PART": "tests", "TRITON_CACHE_AUTOTUNING": "1"}, env
    assert 470 <= total <= 480                                       # the tuning's time comes off the budget
    assert (out / "autotune-prime.txt").read_text() == "python3 lab/scripts/gpu_autotune_prime.py --impl vllm\n"


def test_gpu_vllm_halves_split_the_property_tests_and_each_test_falls_in_exactly_one(tmp_path):
    """HALF=1 and HALF=2 pass -k expressions to the tests; every test of tests/test_properties.py and
    tests/test_regressions.py is selected by exactly one of them."""
    import ast
    ks = {}
    for half in ("1", "2"):
        proc, out = _gpu_vllm(tmp_path / half, "shipped", HALF=half)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        ks[half] = _asked(out)[0]["K"]
    root = Path(__file__).resolve().parents[1]
    names = [f.name for t in ("test_properties.py", "test_regressions.py")
             for f in ast.parse((root / "tests" / t).read_text()).body
             if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
    assert "test_regression" in names and len(names) > 15

    def selects(expr, name):   # pytest's -k: each bare word a substring of the name
        words = {w for w in expr.replace("(", " ").replace(")", " ").split() if w not in ("and", "or", "not")}
        return eval(expr, {}, {w: w in name for w in words})   # noqa: S307 (the script's own expression)
    both = [n for n in names if selects(ks["1"], n) == selects(ks["2"], n)]
    assert not both, f"tests in both halves or in neither: {both}"
    proc, _ = _gpu_vllm(tmp_path / "bad", "shipped", HALF="3")
    assert proc.returncode == 2 and "HALF must be 1 or 2" in proc.stderr


def test_gpu_vllm_stops_when_the_fragment_does_not_load(tmp_path):
    proc, out = _gpu_vllm(tmp_path, "first", python_rc=1)
    assert proc.returncode == 3 and "vLLM's fragment does not load" in proc.stderr
    assert not list(out.glob("first-*"))


# -- the lines the finding cites are in the published files, where it says -------------------------

CITED = [   # (file, line, text on that line), as docs/findings/vllm-first-config-dtype.md cites them
    (FORCE_FIRST, 41, "key_vals = tuple(kwargs[name] for name in self.keys if name in kwargs)"),
    (FORCE_FIRST, 42, "cache_key = (id(self), key_vals)"),
    (FORCE_FIRST, 47, "[cached_idx] if cached_idx is not None else list(range(len(self.configs)))"),
    (FORCE_FIRST, 71, "if cached_idx is None:"),
    (FORCE_FIRST, 73, "self.best_config = config"),
    ("vllm/triton_utils/__init__.py", 33, "if envs.VLLM_TRITON_FORCE_FIRST_CONFIG:"),
    (HELPERS, 23, '*[getattr(arg, "dtype", None) for arg in kwargs.values()],'),
    (f"{vllm_files.OPS}/ssd_bmm.py", 18, '{"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64},'),
    (f"{vllm_files.OPS}/ssd_bmm.py", 19, "num_stages=3,"),
    (f"{vllm_files.OPS}/ssd_bmm.py", 63, 'key=["chunk_size", "K", "IS_CAUSAL"],'),
]


@pytest.mark.parametrize("rel_path, line, text", CITED, ids=[f"{p.rsplit('/', 1)[-1]}:{n}" for p, n, _ in CITED])
def test_the_findings_lines_are_where_it_says(rel_path, line, text):
    try:
        source, _ = vllm_files.read_source(rel_path)
    except PeerSourceMissing as e:
        pytest.skip(f"vLLM's {rel_path} is read from the published tarball: {e}")
    assert source.splitlines()[line - 1].strip() == text
