"""Race the SSD forwards on one GPU: ssdcheck's cuTile, NVIDIA TileGym, mamba_ssm's and vLLM's Triton kernels.

    python -m lab.bench.race --list                       # groups, shapes, estimated GPU minutes
    python -m lab.bench.race --group smoke --out out/bench
    python -m lab.bench.race --group n128 --out out/bench [--budget-s 540] [--shapes h32-] [--impls a,b]

For every shape of the group, in one process and on the same inputs: each implementation, at each
chunk size it supports among 64/128/256 (per the group), is (1) called once (wall time of that first
call = compile + autotune: TileGym's exhaustive tuning is reported apart from its run time),
(2) checked: normwise relative error against a float64 reference (ssdcheck's chunked oracle) on a
downscaled copy (the whole batch, first 1024 tokens of the same inputs), and against mamba_ssm's output on
the full inputs, with the allocator poisoned with NaN first so unwritten outputs show, and
(3) timed: median of CUDA-event timings after warm-up (triton.testing.do_bench, return_mode median;
it clears L2 between runs), rotating input sets when the inputs are smaller than 3x L2. The fastest
correct chunk size is kept. Ceilings are measured in the same run (a large device-to-device copy; a
large bf16 matmul) and results are reported against them and against the floors of lab/bench/roofline.py.

Writes DIR/<group>.json after every shape (a timeout keeps what was done) and prints a table last.
TileGym runs autotuned: TILEGYM_DISABLE_AUTOTUNE must be unset, and MAMBA_DETERMINISTIC too (it
pins mamba_ssm to its cheapest config); --allow-untuned overrides, and the JSON records it. Only
the float64 check on the downscaled copy runs TileGym with autotune off (a new shape would otherwise
trigger minutes of tuning): its tuned config is checked by the full-size comparison.
vLLM runs as shipped (autotuned; VLLM_TRITON_FORCE_FIRST_CONFIG unset): its first call and checks go
through the adapter, its timings through `kernels.peers.vllm.prepared`, which builds the chunk metadata
and `out` before the timed region (vLLM builds them once per batch, outside the layers' SSD calls);
`--vllm-tuning FILE` keeps its autotune picks across processes (lab/bench/vllm_tuning.py).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import functools
import importlib.metadata
import itertools
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from lab.bench import roofline, triton_precompile
from lab.bench.shapes import BASELINE, GROUPS, Group, Shape, describe
from ssdcheck_plugin.meta import source_digest

SCHEMA = "ssdcheck-bench/1"
SMALL_SEQLEN = 1024
TOL_F64 = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 2e-3}   # normwise, vs float64 (METHOD.md)
TOL_VS_BASELINE = 5e-2
TILEGYM_TUNE_EST_S = 180.0     # TileGym's first tuning in a process: it compiles every config (157 s measured)
TILEGYM_RETUNE_EST_S = 45.0    # a later shape in the same process: configs compiled, only timed (9.9 s measured)
L2_DEFAULT = 50 * 2**20
TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def log(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------- inputs

def make_inputs(shape: Shape, seed: int, device="cuda") -> dict:
    """mamba_chunk_scan_combined keyword arguments (without chunk_size), random, on `device`.
    dt = softplus(N(-1, 1)) > 0 (as SSDProblem draws it); A spreads a decay of about 1 per 64 tokens
    across heads; D (h,) fp32. No initial states, no final states (the training forward)."""
    g = torch.Generator(device=device).manual_seed(seed)
    b, l, h, p, n, ng = shape.batch, shape.seqlen, shape.nheads, shape.headdim, shape.dstate, shape.ngroups
    dtype = TORCH_DTYPES[shape.dtype]
    x = torch.randn(b, l, h, p, generator=g, device=device, dtype=dtype)
    B = torch.randn(b, l, ng, n, generator=g, device=device, dtype=dtype)
    C = torch.randn(b, l, ng, n, generator=g, device=device, dtype=dtype)
    dt = F.softplus(torch.randn(b, l, h, generator=g, device=device, dtype=torch.float32) - 1.0)
    spread = torch.exp(torch.rand(h, generator=g, device=device, dtype=torch.float32) - 0.5)
    A = -spread / (64.0 * dt.mean(dim=(0, 1)))
    D = torch.randn(h, generator=g, device=device, dtype=torch.float32)
    return dict(x=x, dt=dt.to(TORCH_DTYPES[shape.dt_dtype]), A=A, B=B, C=C, D=D)


def downscale(kw: dict, seqlen: int = SMALL_SEQLEN) -> dict:
    """The whole batch and the first `seqlen` tokens of the same inputs. Kernels choose tiles by batch x
    heads (cuTile's state rows by block count), so the float64 check runs the configurations that are
    timed; batch 1 took the few-block rows (lab/reports/2026-12-01-two-heads-per-block.md). The largest grid shape's reference, b8 h64 n256
    at 1024 tokens, peaks at 8 GB on the CPU."""
    out = dict(kw)
    for k in ("x", "dt", "B", "C"):
        out[k] = kw[k][:, :seqlen].contiguous()
    return out


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Normwise relative error ||got - ref|| / ||ref|| in float64; inf if got has a non-finite value."""
    g, r = got.double(), ref.double()
    if not bool(torch.isfinite(g).all()):
        return math.inf
    return float(torch.linalg.vector_norm(g - r) / torch.linalg.vector_norm(r).clamp_min(1e-300))


def poison_allocator(nbytes: int, device: str = "cuda") -> None:
    """Fill freed blocks of the caching allocator with NaN: an output element a kernel never writes
    then reads NaN instead of a stale (maybe correct) value from an earlier call."""
    if device != "cuda":
        return
    blocks = [torch.full((nbytes // 4 + 1,), math.nan, device="cuda") for _ in range(2)]
    del blocks


# ---------------------------------------------------------------- timing and ceilings

def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _cpu_bench_ms(fn, rep_ms: float = 50.0) -> dict:
    """Median wall time on the CPU (no events there): used by the CPU tests of the bench itself."""
    fn()
    times = []
    t_end = time.perf_counter() + rep_ms / 1e3
    while len(times) < 5 or (time.perf_counter() < t_end and len(times) < 200):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return {"ms": times[len(times) // 2], "ms_p20": times[len(times) // 5], "ms_p80": times[(4 * len(times)) // 5],
            "timer": "perf_counter (cpu)"}


def _event_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def bench_ms(fn, device: str = "cuda") -> dict:
    """Median (and 20th/80th percentiles) of CUDA-event timings after warm-up, L2 cleared between runs."""
    if device != "cuda":
        return _cpu_bench_ms(fn)
    est = min(_event_ms(fn) for _ in range(3))
    rep = min(max(100.0, 30.0 * est), 3000.0)
    warmup = min(max(25.0, 3.0 * est), 500.0)
    try:
        from triton.testing import do_bench
        q = do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.2, 0.5, 0.8], return_mode="median")
        return {"ms": float(q[1]), "ms_p20": float(q[0]), "ms_p80": float(q[2]), "timer": "triton.do_bench"}
    except ImportError:
        flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
        n = max(10, int(rep / max(est, 1e-3)))
        times = []
        for _ in range(n):
            flush.zero_()
            times.append(_event_ms(fn))
        times.sort()
        return {"ms": times[len(times) // 2], "ms_p20": times[len(times) // 5], "ms_p80": times[(4 * len(times)) // 5],
                "timer": "cuda events (no triton)"}


def graph_ms(fn, device: str = "cuda") -> dict:
    """bench_ms of fn captured once in a CUDA graph and replayed: the kernels' time without the host's
    Python and launches, what a model served with CUDA graphs pays. At 8x2K every implementation's host
    time per forward (0.13-0.32 ms on the H200, lab/reports/2026-12-01-two-heads-per-block.md) is as long as its kernels, so the eager figure there
    also measures the host; this one does not. Replays read the inputs the capture saw."""
    if device != "cuda":
        raise RuntimeError("CUDA graphs need a CUDA device")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):         # lazy initialization and allocations outside the capture
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return bench_ms(graph.replay, device)


def host_ms(fn, device: str = "cuda", n: int = 20) -> float:
    """Host time per call with nothing waited for (argument checks, Python, launches): when it nears
    the measured time, the implementation is launch-bound at that shape, not GPU-bound."""
    _sync(device)
    t = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - t
    _sync(device)
    return elapsed / n * 1e3


def measure_ceilings(copy_bytes: int = 2 * 2**30, mm_n: int = 8192, device: str = "cuda") -> dict:
    """Copy bandwidth (bytes read + written) and bf16 matmul rate on random data, medians."""
    src = torch.empty(copy_bytes // 2, dtype=torch.bfloat16, device=device).uniform_(-1, 1)
    dst = torch.empty_like(src)
    t_copy = bench_ms(lambda: dst.copy_(src), device)["ms"]
    del src, dst
    a = torch.randn(mm_n, mm_n, dtype=torch.bfloat16, device=device)
    b = torch.randn(mm_n, mm_n, dtype=torch.bfloat16, device=device)
    c = torch.empty_like(a)
    t_mm = bench_ms(lambda: torch.matmul(a, b, out=c), device)["ms"]
    del a, b, c
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"copy_GBps": 2 * copy_bytes / (t_copy * 1e6), "copy_bytes": copy_bytes, "copy_ms": t_copy,
            "matmul_TFLOPs": 2 * mm_n**3 / (t_mm * 1e9), "matmul_n": mm_n, "matmul_ms": t_mm}


# ---------------------------------------------------------------- environment

def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def switched_on(var: str) -> bool:
    """Whether the environment switch `var` is on (1, true, yes, on), as the peers read theirs."""
    return os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")


def environment() -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "triton": _version("triton"), "cuda_tile": _version("cuda-tile"), "tilegym": _version("tilegym"),
           "host": platform.node(),
           "TILEGYM_DISABLE_AUTOTUNE": os.environ.get("TILEGYM_DISABLE_AUTOTUNE"),
           "MAMBA_DETERMINISTIC": os.environ.get("MAMBA_DETERMINISTIC"),
           "VLLM_TRITON_FORCE_FIRST_CONFIG": os.environ.get("VLLM_TRITON_FORCE_FIRST_CONFIG"),
           "SSDCHECK_CUTILE_CONFIG": os.environ.get("SSDCHECK_CUTILE_CONFIG"),   # cutile not at its table
           "SSDCHECK_CUTILE_SEGMENTS": os.environ.get("SSDCHECK_CUTILE_SEGMENTS")}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, sms=props.multi_processor_count,
                   l2_bytes=getattr(props, "L2_cache_size", None), cuda=torch.version.cuda)
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env["driver"] = None
    try:
        env["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    timeout=10, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env["git"] = None
    try:   # the compiler is part of the run's identity: a new tileiras is a new revision of every kernel
        from kernels.cutile.toolchain import identity  # noqa: PLC0415
        env["toolchain"] = {k: v for k, v in identity().items() if k in ("tileiras", "ptxas", "tileiras_source")}
    except Exception as e:  # noqa: BLE001  the race still runs the peers without cuTile's toolchain
        env["toolchain"] = {"error": f"{type(e).__name__}: {e}"}
    env["kernels_sha256"] = source_digest(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return env


# ---------------------------------------------------------------- one shape

class Runner:
    def __init__(self, group: Group, impls, out_path: str, budget_s: float, seed: int = 0, chunks_override=None,
                 device: str = "cuda", baseline: str = BASELINE, ceilings: dict | None = None):
        self.group, self.impls, self.out_path = group, list(impls), out_path
        self.budget_s, self.seed, self.chunks_override = budget_s, seed, chunks_override or {}
        self.device, self.baseline, self.ceiling_kw = device, baseline, ceilings or {}
        self.t0 = time.monotonic()
        self.infos, self.unavailable = {}, {}
        self.tuning = None                 # kernels.peers.tilegym_tuning.Tuning, when TileGym's choices are recorded
        self.tilegym_called = False        # TileGym ran once in this process (its configs are compiled)
        self.vllm_tuning = None            # lab.bench.vllm_tuning.Tuning, when vLLM's autotune picks are recorded
        self.graphs = False                # also time each forward replayed from a CUDA graph (--graphs)
        self.final_states = False          # the shape being run returns final states (Shape.final_states)
        self.doc = {"schema": SCHEMA, "group": group.name, "note": group.note,
                    "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    "complete": False, "aborted": None, "elapsed_s": 0.0, "budget_s": budget_s,
                    "baseline": baseline, "device": device,
                    "env": {}, "ceilings": {}, "shapes": []}

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def save(self) -> None:
        self.doc["elapsed_s"] = round(self.elapsed(), 1)
        tmp = self.out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, self.out_path)

    def info(self, impl: str):
        if impl in self.unavailable:
            return None
        if impl not in self.infos:
            from kernels.registry import lookup
            try:
                self.infos[impl] = lookup(impl)
            except Exception as e:  # e.g. kernels.cutile not importable yet
                self.unavailable[impl] = f"{type(e).__name__}: {e}"
                log(f"  {impl}: unavailable ({self.unavailable[impl]})")
                return None
        return self.infos[impl]

    def chunks(self, impl: str, info, shape: Shape) -> list[int]:
        wanted = self.chunks_override.get(impl) or self.group.chunks_for(impl)
        return [c for c in wanted if c in info.chunk_sizes
                and not (info.seqlen_multiple_of_chunk and shape.seqlen % c)]

    def call(self, info, kw: dict, chunk: int, autotune_off: bool = False):
        """y of one forward; with final states asked for (the shape's final_states) the call returns them too."""
        saved = os.environ.get("TILEGYM_DISABLE_AUTOTUNE")
        if autotune_off:
            os.environ["TILEGYM_DISABLE_AUTOTUNE"] = "1"
        try:
            if self.final_states:
                return info.fn(**kw, chunk_size=chunk, return_final_states=True)[0]
            return info.fn(**kw, chunk_size=chunk)
        finally:
            if autotune_off:
                if saved is None:
                    os.environ.pop("TILEGYM_DISABLE_AUTOTUNE", None)
                else:
                    os.environ["TILEGYM_DISABLE_AUTOTUNE"] = saved

    def timed_calls(self, impl: str, info, sets: list, chunk: int) -> list:
        """One zero-argument call per input set, what the timings run. vLLM's chunk metadata and `out`
        are built here, outside the timed region (kernels.peers.vllm.prepared)."""
        if impl == "vllm" and info.fn.__module__ == "kernels.peers.vllm":
            from kernels.peers import vllm
            return [vllm.prepared(**kw, chunk_size=chunk) for kw in sets]
        return [functools.partial(self.call, info, kw, chunk) for kw in sets]

    def tilegym_estimate(self, shape: Shape, chunk: int) -> float:
        """Seconds TileGym's first call at (shape, chunk) may take: its tuning compiles every config once
        per process, so only the first tuning is long (tg128, 2026-11-30: 157 s, then 9.9 s)."""
        if self.tuning is not None and self.tuning.knows(shape=shape.tuning_id, chunk=chunk):
            return 30.0
        return TILEGYM_RETUNE_EST_S if self.tilegym_called else TILEGYM_TUNE_EST_S

    def run_shape(self, shape: Shape) -> dict:
        self.final_states = shape.final_states
        rec = {"shape": shape.as_dict(), "id": shape.id, "label": shape.label,
               "io_bytes": roofline.io_bytes(shape), "input_bytes": roofline.input_bytes(shape), "impls": {}}
        l2 = self.doc["env"].get("l2_bytes") or L2_DEFAULT
        n_sets = 1 if rec["input_bytes"] >= 3 * l2 else min(8, math.ceil(3 * l2 / rec["input_bytes"]))
        rec["input_sets"] = n_sets
        sets = [make_inputs(shape, self.seed + i, self.device) for i in range(n_sets)]
        small = downscale(sets[0])
        from oracles import ssd_chunked_f64
        ref_small = ssd_chunked_f64(**{k: v.double() for k, v in small.items()}, chunk_size=64)
        y_bytes = sets[0]["x"].numel() * sets[0]["x"].element_size()
        anchor, anchor_name = None, None
        order = sorted(self.impls, key=lambda i: i != self.baseline)     # the baseline first: it is the anchor
        for impl in order:
            if not self.group.runs(impl, shape):
                continue
            info = self.info(impl)
            if info is None:
                rec["impls"][impl] = {"status": "unavailable", "reason": self.unavailable[impl]}
                continue
            state_elem = roofline.DTYPE_BYTES[shape.dtype] if info.state_dtype == "input" else 4
            entry = {"status": "failed", "state_elem_bytes": state_elem, "chunks": {}}
            rec["impls"][impl] = entry
            for chunk in self.chunks(impl, info, shape):
                if impl == "tilegym" and self.elapsed() + (est := self.tilegym_estimate(shape, chunk)) > self.budget_s:
                    why = (f"budget: {self.elapsed():.0f} s of {self.budget_s:.0f} s used, TileGym's first call "
                           f"here estimated at {est:.0f} s")
                    entry["chunks"][str(chunk)] = {"status": "skipped", "reason": why}
                    log(f"  {impl} cs{chunk}: skipped, {why}")
                    continue
                r = entry["chunks"][str(chunk)] = {"status": "failed"}
                try:
                    poison_allocator(2 * y_bytes, self.device)
                    _sync(self.device)
                    if impl == "tilegym" and self.tuning is not None:
                        self.tuning.context = {"shape": shape.tuning_id, "chunk": chunk}
                    tuned_before = self.vllm_tuning.tuned_since_install() if impl == "vllm" and self.vllm_tuning else 0
                    t = time.monotonic()
                    y = self.call(info, sets[0], chunk)
                    _sync(self.device)
                    r["first_call_s"] = round(time.monotonic() - t, 2)
                    if impl == "vllm" and self.vllm_tuning is not None:
                        r["tuning"] = ("tuned" if self.vllm_tuning.tuned_since_install() > tuned_before
                                       else "recorded")
                    if impl == "tilegym":
                        self.tilegym_called = True
                        if self.tuning is not None:
                            events = self.tuning.take_events()
                            r["tuning"] = ("tuned" if any(e["kind"] == "tuned" for e in events)
                                           else "recorded" if events else "in-process")
                            r["tune_s"] = round(sum(e["seconds"] for e in events), 2)
                    if anchor is None:
                        anchor, anchor_name = y, f"{impl} cs{chunk}"
                    r["err_vs_anchor"] = rel_err(y, anchor)
                    r["anchor"] = anchor_name
                    del y
                    poison_allocator(2 * small["x"].numel() * small["x"].element_size(), self.device)
                    y_small = self.call(info, small, chunk, autotune_off=(impl == "tilegym"))
                    r["err_f64_small"] = rel_err(y_small, ref_small)
                    r["small_autotune_off"] = impl == "tilegym"
                    del y_small
                    r["ok"] = (r["err_f64_small"] <= TOL_F64[shape.dtype]
                               and r["err_vs_anchor"] <= TOL_VS_BASELINE)
                    timed = self.timed_calls(impl, info, sets, chunk)
                    it = itertools.cycle(timed)
                    r.update(bench_ms(lambda: next(it)(), self.device))
                    r["host_ms"] = host_ms(lambda: next(it)(), self.device)
                    if self.graphs:
                        try:
                            g = graph_ms(timed[0], self.device)
                            r.update(graph_ms=g["ms"], graph_ms_p20=g["ms_p20"], graph_ms_p80=g["ms_p80"])
                        except Exception as e:   # a capture that fails says why; the eager figure stands
                            r["graph_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                    r["status"] = "ok"
                    graph = (f"  graph {r['graph_ms']:.3f} ms" if "graph_ms" in r
                             else f"  graph FAILED {r['graph_error']}" if "graph_error" in r else "")
                    log(f"  {impl:9} cs{chunk:<3} {r['ms']:9.3f} ms{graph}  first call {r['first_call_s']:6.1f}s  "
                        f"err f64(small) {r['err_f64_small']:.2e}  vs {anchor_name} {r['err_vs_anchor']:.2e}"
                        f"{'' if r['ok'] else '  NOT OK'}")
                except Exception as e:
                    r["reason"] = f"{type(e).__name__}: {str(e)[:500]}"
                    log(f"  {impl:9} cs{chunk:<3} FAILED {r['reason']}")
                    traceback.print_exc(limit=4)
                    if "illegal" in str(e).lower() or "CUDA error" in str(e):
                        raise
            done = {c: v for c, v in entry["chunks"].items() if v.get("status") == "ok"}
            good = {c: v for c, v in done.items() if v.get("ok")} or done
            if good:
                best = min(good, key=lambda c: good[c]["ms"])
                entry.update(status="ok", best_chunk=int(best), ms=good[best]["ms"], ok=bool(good[best].get("ok")),
                             first_call_s=good[best]["first_call_s"], host_ms=good[best].get("host_ms"),
                             tuning=good[best].get("tuning"), tune_s=good[best].get("tune_s"))
                graphed = {c: v for c, v in good.items() if "graph_ms" in v}
                if graphed:     # its own best chunk: without the host, another chunk size may win
                    gbest = min(graphed, key=lambda c: graphed[c]["graph_ms"])
                    entry.update(graph_ms=graphed[gbest]["graph_ms"], graph_chunk=int(gbest))
                entry.update(roofline.metrics(shape, int(best), entry["ms"], state_elem,
                                              self.doc["ceilings"].get("copy_GBps"),
                                              self.doc["ceilings"].get("matmul_TFLOPs")))
            elif entry["chunks"] and all(v.get("status") == "skipped" for v in entry["chunks"].values()):
                entry.update(status="skipped", reason=skipped_reason(entry["chunks"]))
            elif not entry["chunks"]:
                entry.update(status="unsupported", reason="no chunk size of the group that it supports")
        base = rec["impls"].get(self.baseline, {})
        if base.get("status") == "ok":
            rec["speedup"] = {i: base["ms"] / e["ms"] for i, e in rec["impls"].items()
                                             if e.get("status") == "ok"}
        del sets, small, ref_small, anchor
        if self.device == "cuda":
            torch.cuda.empty_cache()
        return rec

    def run(self, shapes) -> None:
        self.doc["env"] = environment()
        self.doc["impls"] = self.impls
        log(f"group {self.group.name}: {len(shapes)} shapes, impls {self.impls}, budget {self.budget_s:.0f}s; "
            f"gpu {self.doc['env'].get('gpu')}")
        self.doc["ceilings"] = measure_ceilings(device=self.device, **self.ceiling_kw)
        c = self.doc["ceilings"]
        log(f"ceilings: copy {c['copy_GBps']:.0f} GB/s, bf16 matmul {c['matmul_TFLOPs']:.0f} TFLOP/s")
        self.save()
        for i, shape in enumerate(shapes):
            if self.elapsed() > self.budget_s:
                self.doc["shapes"].append({"id": shape.id, "shape": shape.as_dict(), "label": shape.label,
                                           "skipped": "budget"})
                continue
            log(f"[{i + 1}/{len(shapes)}] {shape.id}  ({self.elapsed():.0f}s)")
            try:
                self.doc["shapes"].append(self.run_shape(shape))
            except Exception as e:   # a CUDA error poisons the context: stop here, keep what was done
                self.doc["aborted"] = f"{shape.id}: {type(e).__name__}: {str(e)[:500]}"
                log(f"aborted: {self.doc['aborted']}")
                self.save()
                return
            if self.vllm_tuning is not None:
                self.doc["vllm_tuning"]["saved"] = self.vllm_tuning.save()
            self.save()
        if "mamba-ssm" in self.infos:
            from kernels.peers import mamba_ssm
            self.doc["env"]["mamba_ssm"] = mamba_ssm.version()
        if "vllm" in self.infos:
            from kernels.peers import vllm
            self.doc["env"]["vllm"] = vllm.version()
        self.doc["complete"] = all("skipped" not in s for s in self.doc["shapes"])
        self.save()


def skipped_reason(chunks: dict) -> str:
    """Why an implementation has no result at a shape where every chunk size was skipped (the FACT run's
    summary printed an empty reason: an 80 s group budget left TileGym no slot)."""
    return "; ".join(f"cs{c}: {v.get('reason', '?')}" for c, v in chunks.items())


def summary_table(doc: dict) -> str:
    lines = [f"{'shape':34} {'impl':9} {'cs':>3} {'ms':>9} {'x base':>6} {'TFLOP/s':>7} {'x floor':>7} "
             f"{'x io':>6} {'err f64':>8} {'ok':>3} {'first s':>7}"]
    for s in doc["shapes"]:
        if "skipped" in s:
            lines.append(f"{s['id']:34} skipped ({s['skipped']})")
            continue
        for impl, e in s["impls"].items():
            if e.get("status") != "ok":
                lines.append(f"{s['id']:34} {impl:9} {e.get('status')}: {e.get('reason', '')[:100]}")
                continue
            sp = s.get("speedup", {}).get(impl)
            err = e["chunks"][str(e["best_chunk"])].get("err_f64_small", math.nan)
            lines.append(f"{s['id']:34} {impl:9} {e['best_chunk']:3d} {e['ms']:9.3f} "
                         f"{sp if sp is not None else math.nan:6.2f} {e['TFLOPs']:7.1f} "
                         f"{e.get('x_floor_states', math.nan):7.2f} {e.get('x_floor_io', math.nan):6.2f} "
                         f"{err:8.1e} {'yes' if e['ok'] else 'NO':>3} "
                         f"{e['first_call_s']:7.1f}")
    return "\n".join(lines)


def _parse_chunks(text: str | None) -> dict:
    """'tilegym=64+128,mamba-ssm=64' -> {'tilegym': (64, 128), 'mamba-ssm': (64,)}."""
    out = {}
    for part in filter(None, (text or "").split(",")):
        impl, _, cs = part.partition("=")
        out[impl.strip()] = tuple(int(c) for c in cs.split("+"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.race", description=__doc__.split("\n\n")[0])
    ap.add_argument("--group", choices=sorted(GROUPS))
    ap.add_argument("--out", default="out/bench", help="directory for <group>.json")
    ap.add_argument("--list", action="store_true", help="print the groups and their estimated GPU minutes")
    ap.add_argument("--budget-s", type=float, default=540.0,
                    help="stop starting new work after this many seconds (default 540: a 10-minute command)")
    ap.add_argument("--impls", default=None, help="comma-separated subset of the group's implementations")
    ap.add_argument("--shapes", default=None, help="only shapes whose id contains this text (e.g. h64-)")
    ap.add_argument("--chunks", default=None, help="override chunk sizes, e.g. 'tilegym=64+128,cutile=128'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tilegym-tuning", default=None, metavar="FILE",
                    help="TileGym's recorded tuning choices (kernels/peers/tilegym_tuning.py): read if present, updated "
                         "after each new tuning, so a later run skips the 2-3 minutes per shape")
    ap.add_argument("--vllm-tuning", default=None, metavar="FILE",
                    help="vLLM's recorded autotune picks (lab/bench/vllm_tuning.py): read if present, updated after "
                         "each shape, so a later run skips vLLM's autotuning")
    ap.add_argument("--precompile-workers", type=int, default=-1, metavar="N",
                    help="before timing, N processes compile the Triton peers' autotune configs into Triton's "
                         "cache (lab/bench/triton_precompile.py); -1 (default): one per core but one, 0: off")
    ap.add_argument("--graphs", action="store_true",
                    help="also time each forward captured in a CUDA graph and replayed (graph_ms: no host launches)")
    ap.add_argument("--allow-untuned", action="store_true",
                    help="run even with TILEGYM_DISABLE_AUTOTUNE, MAMBA_DETERMINISTIC or "
                         "VLLM_TRITON_FORCE_FIRST_CONFIG set (recorded in the JSON)")
    args = ap.parse_args(argv)
    if args.list or not args.group:
        print(describe())
        return 0 if args.list else 2
    for var in ("TILEGYM_DISABLE_AUTOTUNE", "MAMBA_DETERMINISTIC", "VLLM_TRITON_FORCE_FIRST_CONFIG"):
        if switched_on(var) and not args.allow_untuned:
            print(f"lab.bench.race: {var} is set; the race times autotuned peers. Unset it (or pass --allow-untuned).",
                  file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("lab.bench.race: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    group = GROUPS[args.group]
    impls = [i for i in (args.impls.split(",") if args.impls else group.impls) if i]
    shapes = [s for s in group.shapes if not args.shapes or args.shapes in s.id]
    os.makedirs(args.out, exist_ok=True)
    runner = Runner(group, impls, os.path.join(args.out, f"{group.name}.json"), args.budget_s, args.seed,
                    _parse_chunks(args.chunks))
    runner.graphs = args.graphs
    if args.tilegym_tuning and "tilegym" in impls:
        try:
            from kernels.peers import tilegym_tuning
            runner.tuning = tilegym_tuning.install(args.tilegym_tuning)
            runner.doc["tilegym_tuning"] = {"file": args.tilegym_tuning, "loaded": len(runner.tuning.entries),
                                            "usable": sum(map(runner.tuning.usable, runner.tuning.entries.values()))}
        except Exception as e:   # TileGym missing: the race reports it unavailable as before
            runner.doc["tilegym_tuning"] = {"file": args.tilegym_tuning, "error": f"{type(e).__name__}: {e}"}
    if args.vllm_tuning and "vllm" in impls:
        try:
            from lab.bench import vllm_tuning
            runner.vllm_tuning = vllm_tuning.install(args.vllm_tuning)
            runner.doc["vllm_tuning"] = {"file": args.vllm_tuning, "loaded": len(runner.vllm_tuning.entries),
                                         "installed": runner.vllm_tuning.installed}
        except Exception as e:   # vLLM's fragment missing: the race reports it unavailable
            runner.doc["vllm_tuning"] = {"file": args.vllm_tuning, "error": f"{type(e).__name__}: {e}"}
    workers = args.precompile_workers if args.precompile_workers >= 0 else max(0, (os.cpu_count() or 1) - 1)
    if workers and any(i in triton_precompile.TRITON_IMPLS for i in impls):
        log(f"precompiling the Triton peers' autotune configs in {workers} processes")
        runner.doc["triton_precompile"] = triton_precompile.run_workers(
            group.name, impls, workers, timeout_s=max(30.0, args.budget_s / 2), shapes_filter=args.shapes, seed=args.seed)
        log(f"precompile: {json.dumps(runner.doc['triton_precompile'])}")
    runner.run(shapes)
    print(summary_table(runner.doc), flush=True)
    print(f"wrote {runner.out_path} ({runner.elapsed():.0f}s)", flush=True)
    return 0 if runner.doc["aborted"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
