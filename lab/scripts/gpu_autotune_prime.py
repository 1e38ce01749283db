"""Autotune a shipped peer once per battery problem before the property suite runs it.

As shipped, the peers tune every new key on first use: vLLM about 47 configs over its five kernels,
mamba_ssm about 40 per (chunk, headdim, dstate), each compiled and timed (Triton), TileGym an
exhaustive search of each kernel's cuTile configs per shape. In a 16-worker suite every worker would
tune the battery's keys at once, each on its own. This tunes each problem of the triage battery and of
the model-layer batteries (one per dtype) in its own process, side by side, so that the workers find
the work done: Triton's on-disk autotune cache holds the picks (run with TRITON_CACHE_AUTOTUNING=1;
lab/scripts/gpu_vllm.sh and gpu_production_modes.sh set it), and TileGym's candidates are compiled into
the shared cuTile cache (CUDA_TILE_CACHE_DIR), so a worker's own search only times them. It prints
what each problem cost: the autotune cost the suite's time budget has to hold.

With --menu it also tunes one problem per (dtype, chunk size, (headdim, dstate) pair of the GPU menu),
every option on: the Triton peers key their autotune on those (and the dtypes), so the drawn problems
of a whole fill find their picks made; a variant without an option then compiles only the chosen
config. TileGym searches per shape, so --menu compiles its candidates for the menu and no more.

With --checks it then runs the battery checks the suite's warm-up and each test's battery run
(ssdcheck_plugin/warmup.py forward_checks), each in its own process. Their derived runs (splits,
batches, packed sequences) are shapes of their own: in a fill of TileGym as shipped, 8 warm-up checks
were each still in `_compute_out`'s search of such a shape, compiling candidates, after 180 s, and the
workers held every test meanwhile (lab/reports/2026-12-07-shipped-fills-and-peer-ttf.md).

With --precompile, before any of that, an implementation that declares KernelInfo.precompile
(cutile, TileGym) has every compile of those calls and checks built at once, each once, one process
per core, into the shared cuTile cache. TileGym's search launches its candidates one after another,
and its chunk-128 output kernel takes a median of 24 s a compile (10 sampled on a 2-core CPU machine,
lab/scripts/precompile_cost.py), so one process searching one such shape compiles for about half an
hour, while the distinct candidates of all its calls and checks (2,365; 384 of them that kernel)
divide over every core. The calls a check derives (splits, batches, packed sequences) are found on
the CPU: the check runs with the implementation's calls planned and torch-ref answering them
(plan_one).

    TRITON_CACHE_AUTOTUNING=1 python3 lab/scripts/gpu_autotune_prime.py --impl vllm   # a CUDA GPU, the peer
    TRITON_CACHE_AUTOTUNING=1 python3 lab/scripts/gpu_autotune_prime.py --impl mamba-ssm --menu
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import multiprocessing
import os
import sys
import time

DTYPES = ("bfloat16", "float16", "float32")


def menu_problems(info) -> list:
    """One problem per (dtype, chunk size, GPU menu (headdim, dstate) pair) that `info` supports, with
    the most options on that it takes (two sequences packed, initial states, z, softplus(dt + bias), D
    per head; dropped in that order until it takes the problem)."""
    from kernels.registry import UnsupportedProblem, check_supported
    from properties.menus import GPU_DIM_PAIRS
    from properties.problem import SSDProblem
    out = []
    for dtype in DTYPES:
        for chunk in info.chunk_sizes:
            for headdim, dstate in dict.fromkeys(GPU_DIM_PAIRS):
                seqlen = 2 * chunk + (0 if info.seqlen_multiple_of_chunk else 1)
                full = SSDProblem(batch=1, seqlen=seqlen, nheads=8, headdim=headdim, dstate=dstate,
                                  chunk_size=chunk, dtype=dtype, dt_softplus=True, dt_bias=True, D="h", z=True,
                                  initial_states=True, final_states=True, seq_starts=(chunk,))
                forms = [full]       # then with the options an implementation may lack dropped, one by one
                for drop in ({"seq_starts": (), "initial_states": False}, {"z": False},
                             {"dt_softplus": False, "dt_bias": False}, {"D": None}):
                    forms.append(dataclasses.replace(forms[-1], **drop))
                for p in forms:
                    try:
                        check_supported(info, dtype=p.dtype, chunk_size=p.chunk_size, seqlen=p.seqlen,
                                        headdim=p.headdim, dstate=p.dstate, ngroups=p.ngroups,
                                        options=p.options(), nheads=p.nheads)
                    except UnsupportedProblem:
                        continue
                    out.append(p)
                    break      # the first supported form: one problem per key
    return out


def problems(name: str, menu: bool = False) -> list:
    """The triage battery, then each dtype's model-layer battery, then (menu) the menu's keys, each once."""
    from kernels.registry import lookup
    from properties import triage
    info = lookup(name)
    out = list(triage.battery(info, gpu=True))
    for dtype in DTYPES:
        if dtype in info.dtypes:
            out += triage.battery(info, True, dtype, "model")
    if menu:
        out += menu_problems(info)
    return list(dict.fromkeys(out))


def jobs_of(name: str, menu: bool = False, checks: bool = False) -> list[tuple]:
    """("call", problem) for each problem, then (checks) ("check", property, problem) for each battery check."""
    out = [("call", p) for p in problems(name, menu)]
    if checks:
        from ssdcheck_plugin.warmup import forward_checks
        out += [("check", prop, p) for _, prop, p in forward_checks(name)]
    return out


def plan_one(job: tuple) -> tuple[list, str]:
    """(the precompile jobs of every call of `name`'s forward that `todo` makes, a line saying so): a
    ("call", problem) its one call; a ("check", property, problem) the property run on the CPU with the
    implementation's declared capabilities, each call planned (which refuses what the implementation
    refuses, as the implementation would) and answered by torch-ref. A check that stops early (a
    derivation the implementation refuses, or one torch-ref does not pass) gives the calls it made."""
    from kernels.registry import UnsupportedProblem, lookup
    from properties import invariants
    name, todo = job
    info = lookup(name)
    reference, jobs, calls = lookup("torch-ref").fn, [], []

    def planned(**kwargs):
        jobs.extend(j for j in info.precompile.plan(**kwargs) if j not in jobs)
        calls.append(1)
        return reference(**kwargs)

    try:
        if todo[0] == "call":
            planned(**todo[1].inputs("cpu"))
        else:
            invariants.PROPERTIES[todo[1]](info.replace(fn=planned, device="cpu"), todo[2])
    except (UnsupportedProblem, AssertionError):
        pass
    return jobs, f"{todo[0]} {todo[1] if todo[0] == 'check' else ''}: {len(calls)} calls, {len(jobs)} compiles"


def build_one(job: tuple) -> tuple[float, str | None]:
    """(seconds, error or None) of building one precompile job."""
    from kernels.registry import lookup
    from ssdcheck_plugin.warmup import first_line
    name, item, arch = job
    t = time.monotonic()
    try:
        lookup(name).precompile.build(item, arch)
    except Exception as e:   # noqa: BLE001 (a compile that fails here fails in the search too: reported)
        return time.monotonic() - t, f"{type(e).__name__}: {first_line(e)}"
    return time.monotonic() - t, None


def one_torch_thread() -> None:
    """A pool process's initializer: one CPU thread for torch, as conftest.py gives each xdist worker
    (the planning processes run torch-ref and the oracles side by side; torch's pool thrashes otherwise)."""
    import torch
    torch.set_num_threads(1)


def precompile(name: str, todo: list, processes: int, arch: str, build: bool = True) -> list:
    """Plan every call of `todo`, then (build) build each distinct compile once for `arch`, `processes` at
    once; prints what it did and returns the distinct jobs."""
    t = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(processes, initializer=one_torch_thread) as pool:
        planned = []
        for found, line in pool.imap(plan_one, [(name, j) for j in todo]):
            planned += found
            print(line, flush=True)
        distinct = list(dict.fromkeys(planned))
        kinds = ", ".join(f"{k} {n}" for k, n in collections.Counter(j[0] for j in distinct).most_common())
        print(f"{name}: {len(todo)} calls and checks planned, {len(planned)} compiles, {len(distinct)} distinct "
              f"({kinds}), in {time.monotonic() - t:.1f} s", flush=True)
        if not build:
            return distinct
        t, errors, seconds = time.monotonic(), [], 0.0
        for done, (s, error) in enumerate(pool.imap_unordered(build_one, [(name, j, arch) for j in distinct]), 1):
            seconds += s
            if error:
                errors.append(error)
            if done % 100 == 0:       # a run cut by its time limit still says how far it got
                print(f"{name}: built {done} of {len(distinct)} in {time.monotonic() - t:.0f} s", flush=True)
    print(f"{name}: built {len(distinct) - len(errors)} of {len(distinct)} compiles in {time.monotonic() - t:.1f} s "
          f"({seconds:.0f} s of compiling, {processes} at once)" + (f"; errors: {errors[:3]}" if errors else ""), flush=True)
    return distinct


def prime(job: tuple) -> str:
    import torch
    from kernels.registry import UnsupportedProblem, lookup
    from properties import invariants
    name, todo = job
    info = lookup(name)
    p = todo[-1]
    what = (f"{p.dtype:8} chunk {p.chunk_size:3} headdim {p.headdim:3} dstate {p.dstate:3} nheads {p.nheads:2}: "
            + ("first call" if todo[0] == "call" else todo[1]))
    t = time.monotonic()
    try:
        if todo[0] == "call":
            info.fn(**invariants.call_inputs(info, p))
        else:
            invariants.PROPERTIES[todo[1]](info, p)
    except UnsupportedProblem as e:
        return f"{what}: unsupported ({e})"
    except Exception as e:   # noqa: BLE001 (a check that fails: the suite reports it; the prime only compiles)
        if todo[0] == "call":
            raise
        from ssdcheck_plugin.warmup import first_line
        return f"{what}: {type(e).__name__} after {time.monotonic() - t:.1f} s ({first_line(e)})"
    torch.cuda.synchronize()
    return f"{what} {time.monotonic() - t:6.1f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="vllm", help="a registered peer in its shipped mode (vllm, mamba-ssm, tilegym)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at once (default: one per core)")
    ap.add_argument("--menu", action="store_true", help="also one problem per key of the GPU menu (see above)")
    ap.add_argument("--checks", action="store_true", help="then the battery checks the suite runs first (see above)")
    ap.add_argument("--precompile", action="store_true",
                    help="first build every compile of those calls and checks, each once, on every core (see above)")
    ap.add_argument("--list", action="store_true", help="print the problems and exit (no GPU needed); with "
                    "--precompile, plan the compiles too and print their count")
    args = ap.parse_args(argv)
    todo = jobs_of(args.impl, args.menu, args.checks)
    jobs = max(1, min(args.jobs, len(todo)))
    if args.precompile:
        from kernels.registry import lookup
        if lookup(args.impl).precompile is None:
            ap.error(f"--precompile: {args.impl} declares no KernelInfo.precompile")
        from ssdcheck_plugin.precompile import gpu_arch
        precompile(args.impl, todo, max(1, args.jobs), gpu_arch(), build=not args.list)
    if args.list:
        print("\n".join(repr(j[1]) if j[0] == "call" else f"{j[1]} {j[2]!r}" for j in todo)
              + f"\n{len(todo)} problems")
        return 0
    t = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for line in pool.imap_unordered(prime, [(args.impl, job) for job in todo]):
            print(line, flush=True)
    print(f"{args.impl}: {len(todo)} problems tuned in {time.monotonic() - t:.1f} s, {jobs} at once", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
