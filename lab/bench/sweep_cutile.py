"""Sweep the cuTile kernels' dispatch constants at bench shapes: the tuning step before the race.

    python -m lab.bench.sweep_cutile --out out/sweep            # on the GPU host, after setup.sh
    python -m lab.bench.sweep_cutile --list                      # the plan (any machine)

For each shape and chunk size it times the chunk_state and chunk_scan kernels alone, once with the
dispatch table's choice and once per candidate configuration (tile sizes BL/BN, prefetch, latency
hint, occupancy), on the race's own inputs (lab.bench.race.make_inputs). Every candidate's output is
compared with the table's (normwise): a candidate that changes the answer by more than 1e-2 is
reported as WRONG and never as a speed-up. Then the whole forward runs with the fastest correct
state and scan candidates together, next to the table. Output: sweep.json and sweep.md in --out.

Compiles dominate a cold run (a chunk_scan unit with 128-token tiles takes 15-40 s), so every
(shape, chunk, kernel, candidate) is first run once in --jobs worker processes that only fill
cuTile's disk cache (CUDA_TILE_CACHE_DIR, shared); the timing process then hits the cache. A result
feeds kernels/cutile/dispatch.py (rows are data) and its measurement goes to lab/NOTES.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

from lab.bench.shapes import Shape

SHAPES = (
    (Shape(8, 2048, 32, 128), (64, 128, 256)),
    (Shape(2, 16384, 64, 256, ngroups=8), (64, 128)),
    (Shape(2, 65536, 32, 64), (64, 128, 256)),
)
WRONG = 1e-2   # normwise difference from the table's output that marks a candidate as wrong
STAGE_KERNELS = ("chunk_cumsum", "chunk_state", "chunk_scan")   # the kernels a candidate can replace


def state_candidates(chunk: int, dstate: int):
    """(label, Config) for chunk_state: token tile up to the chunk, dstate tile, prefetch, latency."""
    from kernels.cutile.dispatch import state_config
    for bl in (64, 128, 256):
        if bl > chunk:
            continue
        for bn in (16, 32, 64):
            if bn > dstate:
                continue
            for pf in (0, 1):
                occ = 4 if bn <= 32 else 2
                yield (f"BL{bl}-BN{bn}-PF{pf}-occ{occ}",
                       state_config(BL=bl, BN=bn, PF=pf, occupancy=occ))
    yield ("BL64-BN32-PF1-LAT4-occ4", state_config(BL=64, BN=32, PF=1, LAT=4, occupancy=4))
    # load latency hints (x and B tiles) on the table's PF=0 rows: TileGym tunes 4/6 on its state loads
    for bl, bn in ((64, 16), (64, 32), (128, 16)):
        if bl > chunk or bn > dstate:
            continue
        for lat in (2, 4, 6, 8):
            yield (f"BL{bl}-BN{bn}-PF0-LAT{lat}-occ4",
                   state_config(BL=bl, BN=bn, LAT=lat, occupancy=4))
    # occupancy 2: the cubins at occupancy 4 spill (40-88 B of stack), BN32 at occupancy 2 does not
    yield "BL64-BN32-PF0-occ2", state_config(BL=64, BN=32, occupancy=2)
    # FAST: one chunk-long tile per iteration, unmasked, straight-line body; store latency hint
    for bn in (16, 32, 64):
        if bn > dstate:
            continue
        for occ in (2, 4):
            yield f"BL{chunk}-BN{bn}-FAST-occ{occ}", state_config(BL=chunk, BN=bn, FAST=chunk, occupancy=occ)
    for occ in (2, 4):
        yield (f"BL{chunk}-BN32-FAST-LAT4-SLAT2-occ{occ}",
               state_config(BL=chunk, BN=32, LAT=4, SLAT=2, FAST=chunk, occupancy=occ))
    # SWAP: the state carried transposed, (B w)^T x, as TileGym's tuner chose at 8x2K (BLOCK_STATE 64)
    for bn in (32, 64):
        if bn <= dstate:
            yield (f"BL{chunk}-BN{bn}-FAST-SWAP-occ2", state_config(BL=chunk, BN=bn, FAST=chunk, SWAP=1, occupancy=2))
    # SPLIT: each chunk's product from zero, added to the decayed state (products independent)
    for bn in (16, 32):
        if bn <= dstate:
            yield (f"BL{chunk}-BN{bn}-FAST-SPLIT-occ2", state_config(BL=chunk, BN=bn, FAST=chunk, SPLIT=1, occupancy=2))
    # sweep 4, around sweep 3's winners: hints on BN16 (few blocks) and on SWAP, SWAP at occupancy 3
    yield (f"BL{chunk}-BN16-FAST-LAT4-SLAT2-occ4",
           state_config(BL=chunk, BN=16, LAT=4, SLAT=2, FAST=chunk, occupancy=4))
    yield (f"BL{chunk}-BN32-FAST-LAT6-SLAT2-occ4",
           state_config(BL=chunk, BN=32, LAT=6, SLAT=2, FAST=chunk, occupancy=4))
    if dstate >= 64:
        yield (f"BL{chunk}-BN64-FAST-SWAP-LAT4-SLAT2-occ2",
               state_config(BL=chunk, BN=64, LAT=4, SLAT=2, FAST=chunk, SWAP=1, occupancy=2))
        yield (f"BL{chunk}-BN64-FAST-SWAP-occ3", state_config(BL=chunk, BN=64, FAST=chunk, SWAP=1, occupancy=3))
    # DLAT: a latency hint on the loop's dt and cumsum loads (TileGym tunes one on its decay loads; its
    # choice with few blocks at dstate 64/128 is BN32, occupancy 2, loads 6, decay 4, stores 2)
    for lat, occ in ((4, 4), (4, 2), (6, 2)):
        yield (f"BL{chunk}-BN32-FAST-LAT{lat}-DLAT4-SLAT2-occ{occ}",
               state_config(BL=chunk, BN=32, LAT=lat, SLAT=2, DLAT=4, FAST=chunk, occupancy=occ))
    yield (f"BL{chunk}-BN16-FAST-LAT4-DLAT4-SLAT2-occ4",
           state_config(BL=chunk, BN=16, LAT=4, SLAT=2, DLAT=4, FAST=chunk, occupancy=4))
    if dstate >= 64:
        yield (f"BL{chunk}-BN64-FAST-SWAP-DLAT4-occ2",
               state_config(BL=chunk, BN=64, DLAT=4, FAST=chunk, SWAP=1, occupancy=2))
    # 2026-11-30 (dlat-rows): the table's FAST rows at this chunk with 8 worker warps (cuTile's num_worker_warps)
    yield from _with_worker_warps("chunk_state", chunk)


def cumsum_candidates():
    """(label, Config) for chunk_cumsum (2026-11-30, ftz-decays: 16 us against TileGym's 14 at 2x32K, the one stage
    never swept): heads per block and occupancy, as TileGym tunes its own (BLOCK_H, occupancy 4-8)."""
    from kernels.cutile.dispatch import Config, _c
    for bh in (8, 16, 32, 64):
        for occ in (None, 4, 8):
            if (bh, occ) != (16, None):   # the table's row
                yield f"BH{bh}-occ{occ or 'auto'}", Config(_c(BL=64, BH=bh), occ)


def _with_worker_warps(kernel: str, chunk: int, warps: int = 8):
    """(label, Config): each FAST row of the dispatch table at `chunk`, with `warps` worker warps; the
    label names the row by its index in the table (ROW2-FAST-WW8)."""
    from kernels.cutile.dispatch import TABLE, Config
    for i, rule in enumerate(TABLE[kernel]):
        c = rule.config
        if c.get("FAST") == chunk:
            yield f"ROW{i}-FAST-WW{warps}", Config(c.constants, c.occupancy, warps)


def scan_candidates(chunk: int, dstate: int):
    """(label, Config) for chunk_scan: row tile up to 128 tokens, dstate tile, occupancy, latency,
    and the FAST paths. (The head loop, HL heads per block, lost every sweep and was removed on
    2026-11-30: NOTES.)"""
    from kernels.cutile.dispatch import scan_config

    def cfg(bl, bn, lat, occ):
        return scan_config(BL=bl, BN=bn, LAT=lat, occupancy=occ)

    for bl in (64, 128):
        if bl > chunk:
            continue
        for bn in (64, 128):
            if bn > max(dstate, 64):
                continue
            for occ in (1, 2, 3):
                yield f"BL{bl}-BN{bn}-occ{occ}", cfg(bl, bn, 0, occ)
    bn = 128 if dstate >= 128 else 64
    for lat in (2, 4, 6, 8):
        yield f"BL64-BN{bn}-LAT{lat}-occ3", cfg(64, bn, lat, 3)
    # FAST: one whole chunk per block, unmasked (aligned problems without seq_idx; the sweep's
    # inputs are); at chunk 128 the 128 x 128 fp32 score tile is large, so only few blocks per SM
    if chunk == 64:
        for occ in (1, 2, 3):
            yield f"BL64-BN{bn}-FAST-occ{occ}", scan_config(BL=64, BN=bn, FAST=64, occupancy=occ)
        for lat in (4, 6):
            yield f"BL64-BN{bn}-FAST-LAT{lat}-occ2", scan_config(BL=64, BN=bn, LAT=lat, FAST=64, occupancy=2)
        yield f"BL64-BN{bn}-FAST-PERSIST-occ2", scan_config(BL=64, BN=bn, PERSIST=1, FAST=64, occupancy=2)
        # sweep 4, around sweep 3's winner (FAST occ3): latency hints at occ3, occupancy 4
        for lat in (3, 4, 6):
            yield f"BL64-BN{bn}-FAST-LAT{lat}-occ3", scan_config(BL=64, BN=bn, LAT=lat, FAST=64, occupancy=3)
        yield f"BL64-BN{bn}-FAST-occ4", scan_config(BL=64, BN=bn, FAST=64, occupancy=4)
        # 2026-11-30 (fastr-table): a narrower dstate tile for a smaller register footprint (the 528 B frame it aimed at
        # exists only in compile_matrix's export, not in the kernel the JIT builds: NOTES, Nsight Compute)
        for occ in (3, 4):
            yield f"BL64-BN32-FAST-NARROW-occ{occ}", scan_config(BL=64, BN=32, FAST=64, occupancy=occ)
        # 2026-11-30 (dlat-rows): Nsight Compute put the FAST scan at 80 registers x 256 threads, 3 blocks per SM of
        # ~3.7 us each (83 waves), 70% of its theoretical occupancy achieved; TileGym's persistent grid
        # (2 blocks per SM) moves 10% more bytes per second. Persistence at the table's occupancy 3 and 4:
        for occ in (3, 4):
            yield f"BL64-BN{bn}-FAST-PERSIST-occ{occ}", scan_config(BL=64, BN=bn, PERSIST=1, FAST=64, occupancy=occ)
        yield f"BL64-BN{bn}-FAST-PERSIST-LAT4-occ3", scan_config(BL=64, BN=bn, PERSIST=1, LAT=4, FAST=64, occupancy=3)
        # cuTile's num_worker_warps: the table's units compile as with 4 (same machine code); 8 gives other
        # code (in the JIT's specialization at occ3: 56 registers instead of 80, no stack frame either way)
        for occ in (2, 3):
            yield (f"BL64-BN{bn}-FAST-WW8-occ{occ}",
                   scan_config(BL=64, BN=bn, LAT=4 if bn == 128 else 0, FAST=64, occupancy=occ, worker_warps=8))
        yield (f"BL64-BN{bn}-FAST-PERSIST-WW8-occ3",
               scan_config(BL=64, BN=bn, PERSIST=1, FAST=64, occupancy=3, worker_warps=8))
        # 2026-11-30 (ftz-decays): FTZ (the decay tile's exp2 without its denormal fix-up, 1 instruction instead of 4)
        # won at every shape and is now every row's default; FTZ0 is the A/B. (LDT, dt_j folded into the
        # exponent, lost: NOTES.)
        yield (f"BL64-BN{bn}-FAST-FTZ0-occ3",
               scan_config(BL=64, BN=bn, LAT=4 if bn == 128 else 0, FAST=64, FTZ=0, occupancy=3))
        # 2026-11-30 (ftz-decays): FACT, the decay factored as 2^cs_i * (2^-cs_j dt_j) where every |cs| of the chunk
        # is below 64 (the race's inputs: always): one multiply per score element instead of four ops
        yield (f"BL64-BN{bn}-FAST-FACT-occ3",
               scan_config(BL=64, BN=bn, LAT=4 if bn == 128 else 0, FAST=64, FACT=1, occupancy=3))
        # 2026-12-01 (peers-suite): HB2, two heads of a group per block sharing the C/B loads and the score tile
        # (ncu: the scan waits on memory; a pair puts two x and two state tiles in flight per block)
        for occ in (2, 3):
            yield (f"BL64-BN{bn}-FAST-HB2-occ{occ}",
                   scan_config(BL=64, BN=bn, LAT=4 if bn == 128 else 0, FAST=64, FACT=int(bn > 64), HB=2,
                               occupancy=occ))
        # 2026-12-01 (two-heads-per-block): HB2 over half the headdim (BP32), twice the blocks. At 8x2K the HB2 grid is 4096
        # blocks, 15.5 waves of 264 at occupancy 2: the half-empty last wave is about the 2-3 us the
        # scan trails TileGym's by. 31 waves leave less idle, for a score tile computed twice per pair
        for occ in (2, 3):
            yield (f"BL64-BN{bn}-BP32-FAST-HB2-occ{occ}",
                   scan_config(BL=64, BN=bn, BP=32, LAT=4 if bn == 128 else 0, FAST=64, FACT=int(bn > 64),
                               HB=2, occupancy=occ))
        # 2026-12-01 (two-heads-per-block): latency hints on the pair's loads (the scan waits on memory;
        # LAT 3-6 lost with one head per block on 2026-11-30 (ftz-decays), at 80 registers and occupancy 3, not at HB2's 128 and 2)
        if bn == 64:
            for lat in (2, 4, 6):
                yield (f"BL64-BN64-LAT{lat}-FAST-HB2-occ2",
                       scan_config(BL=64, BN=64, LAT=lat, FAST=64, HB=2, occupancy=2))
        # 8 worker warps: 80 registers and no frame at occupancy 2 (the JIT's specialization, CPU
        # compile), where 4 take 128; perhaps a warpgroup per head
        yield (f"BL64-BN{bn}-FAST-HB2-WW8-occ2",
               scan_config(BL=64, BN=bn, LAT=4 if bn == 128 else 0, FAST=64, FACT=int(bn > 64), HB=2,
                           occupancy=2, worker_warps=8))
    elif chunk == 128:
        yield f"BL128-BN{bn}-FAST-occ1", scan_config(BL=128, BN=bn, FAST=128, occupancy=1)
    if chunk > 64:
        # FASTR: an aligned chunk in 64-row tiles, one per block, unmasked column tiles (_scan_chunk
        # with FAST = chunk > BL): chunk 128/256 halve/quarter the state traffic and their state kernel
        # is faster. BN64 too at dstate 128+: a BN128 C and B tile pair alone fills 128 registers
        for fbn in sorted({bn, 64}):
            for occ in (2, 3):
                yield (f"BL64-BN{fbn}-FASTR{chunk}-occ{occ}",
                       scan_config(BL=64, BN=fbn, FAST=chunk, occupancy=occ))
            yield (f"BL64-BN{fbn}-FASTR{chunk}-LAT4-occ3",
                   scan_config(BL=64, BN=fbn, LAT=4, FAST=chunk, occupancy=3))
        yield (f"BL64-BN64-FASTR{chunk}-LAT4-WW8-occ3",
               scan_config(BL=64, BN=64, LAT=4, FAST=chunk, occupancy=3, worker_warps=8))
        yield (f"BL64-BN64-FASTR{chunk}-LAT4-FTZ0-occ3",
               scan_config(BL=64, BN=64, LAT=4, FAST=chunk, FTZ=0, occupancy=3))


def race_shape(spec: str) -> tuple[Shape, tuple[int, ...]]:
    """'ID' or 'ID@64,128': a shape of the race (lab.bench.shapes: its grid and its groups) and the chunk sizes."""
    from lab.bench.shapes import CHUNKS, GROUPS, grid
    sid, _, chunks = spec.partition("@")
    by_id = {s.id: s for s in grid()}
    by_id.update((s.id, s) for g in GROUPS.values() for s in g.shapes)   # the long groups' fp16 and -fs shapes
    if sid not in by_id:
        raise ValueError(f"--shape: expected a race shape id such as {next(iter(by_id))}, got {sid!r}")
    try:
        cs = tuple(int(c) for c in chunks.split(",")) if chunks else (64,)
    except ValueError:
        raise ValueError(f"--shape: expected chunk sizes as '@64,128', got {chunks!r}") from None
    if not cs or any(c not in CHUNKS for c in cs):
        raise ValueError(f"--shape: chunk sizes must be among {', '.join(map(str, CHUNKS))}, got {chunks!r}")
    return by_id[sid], cs


def plan(shapes=SHAPES, match: str | None = None):
    """Every (shape, chunk, kernel, label, config) the sweep times; label 'table' is the dispatch row.
    match: comma-separated label substrings; only candidates holding one are kept (the table always)."""
    out = []
    for shape, chunks in shapes:
        for chunk in chunks:
            out.append((shape, chunk, "table", "table", None))
            out += [(shape, chunk, "chunk_cumsum", lab, cfg) for lab, cfg in cumsum_candidates()]
            out += [(shape, chunk, "chunk_state", lab, cfg) for lab, cfg in state_candidates(chunk, shape.dstate)]
            out += [(shape, chunk, "chunk_scan", lab, cfg)
                    for lab, cfg in scan_candidates(chunk, shape.dstate)]
    if match:
        keys = [m for m in match.split(",") if m]
        out = [it for it in out if it[3] == "table" or any(m in it[3] for m in keys)]
    return out


class Stages:
    """The three kernels of one (shape, chunk) on fixed inputs, callable alone (launcher internals)."""

    def __init__(self, shape: Shape, chunk: int, seed: int = 0):
        from lab.bench.race import make_inputs
        from kernels.cutile import launcher as L
        self.L, self.chunk = L, chunk
        kw = make_inputs(shape, seed)
        self.x, self.B, self.C, self.dt = kw["x"], kw["B"], kw["C"], kw["dt"]
        self.A32 = kw["A"].float()
        self.D32 = kw["D"].float().reshape(shape.nheads, 1)   # per head: the kernel broadcasts it
        self.kw = dict(kw, chunk_size=chunk)
        self.cs, self.dtc = self.cumsum()
        self.states, _ = self.state()

    def cumsum(self):
        return self.L._run_cumsum(self.dt, self.A32, None, self.chunk, False, (0.0, math.inf))

    def state(self):
        return self.L._run_state(self.x, self.B, self.dtc, self.cs, None, None, self.chunk, self.x.dtype)

    def scan(self):
        return self.L._run_scan(self.x, None, self.B, self.C, self.dtc, self.cs, self.states, self.D32, None,
                                self.chunk)

    def forward(self):
        from kernels.cutile import ssd_forward
        return ssd_forward(**self.kw)

    def run(self, kernel: str):
        """Launch one stage (what the sweep times); chunk_cumsum returns its two outputs (cs, dtc)."""
        return {"chunk_cumsum": self.cumsum, "chunk_state": lambda: self.state()[0], "chunk_scan": self.scan,
                "table": self.forward}[kernel]()


def _one_tensor(out):
    """A stage's output as one tensor for the error check (cumsum's pair concatenated), outside the
    timed call so the concatenation is not timed."""
    if isinstance(out, tuple):
        import torch
        return torch.cat([t.reshape(-1) for t in out])
    return out


def _override(kernel: str, cfg) -> None:
    from kernels.cutile import launcher
    launcher._OVERRIDE.clear()
    if cfg is not None:
        launcher._OVERRIDE[kernel] = cfg


def _warm(items) -> list[str]:
    """Worker: run each item once so its compile lands in the shared disk cache; errors are returned."""
    import torch
    errors, cache = [], {}
    for shape, chunk, kernel, label, cfg in items:
        try:
            key = (shape, chunk)
            if key not in cache:
                _override("", None)
                cache.clear()
                cache[key] = Stages(shape, chunk)
            _override(kernel, cfg)
            cache[key].run(kernel)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported by the timing pass too
            errors.append(f"{shape.id} cs{chunk} {kernel} {label}: {type(e).__name__}: {str(e)[:300]}")
        finally:
            _override("", None)
    return errors


def warm_all(items, jobs: int) -> list[str]:
    """Fill the compile cache from `jobs` processes (items grouped by shape, so inputs are made once)."""
    if jobs <= 1:
        return _warm(items)
    buckets: list[list] = [[] for _ in range(jobs)]
    for i, it in enumerate(sorted(items, key=lambda it: (it[2] != "chunk_scan", it[0].id, it[1]))):
        buckets[i % jobs].append(it)   # the slow scan compiles first, spread over the workers
    errors = []
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        for f in as_completed([pool.submit(_warm, b) for b in buckets if b]):
            errors += f.result()
    return errors


def sweep(items, log=print, make=Stages, device="cuda") -> list[dict]:
    """Time every item; `make` builds the (shape, chunk) kernels (a fake in the CPU test)."""
    from lab.bench.race import bench_ms as _bench_ms
    from lab.bench.race import rel_err

    def bench_ms(fn):
        return _bench_ms(fn, device)

    rows, key, stages, ref, ref_ms = [], None, None, {}, {}
    for shape, chunk, kernel, label, cfg in items:
        if (shape, chunk) != key:
            _override("", None)
            key, stages = (shape, chunk), make(shape, chunk)
            ref = {k: _one_tensor(stages.run(k)).clone() for k in STAGE_KERNELS}
            ref_ms = {k: bench_ms(lambda k=k: stages.run(k))["ms"] for k in STAGE_KERNELS}
        row = dict(shape=shape.id, chunk=chunk, kernel=kernel, label=label, config=str(cfg) if cfg else "table")
        try:
            _override(kernel, cfg)
            if kernel == "table":
                row.update(ms=bench_ms(stages.forward)["ms"], state_ms=ref_ms["chunk_state"],
                           scan_ms=ref_ms["chunk_scan"], err=0.0)
            else:
                out = _one_tensor(stages.run(kernel))
                row.update(ms=bench_ms(lambda: stages.run(kernel))["ms"], err=rel_err(out, ref[kernel]),
                           table_ms=ref_ms[kernel])
                row["status"] = "WRONG" if not row["err"] <= WRONG else "ok"
        except Exception as e:  # noqa: BLE001
            row.update(status="FAILED", error=f"{type(e).__name__}: {str(e)[:300]}")
        finally:
            _override("", None)
        log(json.dumps(row))
        rows.append(row)
    return rows


def best_combinations(items, rows, log=print, make=Stages, device="cuda") -> list[dict]:
    """The whole forward with the fastest correct state and scan candidates of each (shape, chunk)."""
    from lab.bench.race import bench_ms as _bench_ms
    from kernels.cutile import launcher

    def bench_ms(fn):
        return _bench_ms(fn, device)

    configs = {(s.id, c, k, lab): cfg for s, c, k, lab, cfg in items}
    out = []
    for shape, chunk in dict.fromkeys((s, c) for s, c, *_ in items):
        pick = {}
        for kernel in STAGE_KERNELS:
            ok = [r for r in rows if r["shape"] == shape.id and r["chunk"] == chunk and r["kernel"] == kernel
                  and r.get("status") == "ok"]
            if ok:
                best = min(ok, key=lambda r: r["ms"])
                pick[kernel] = (best["label"], configs[(shape.id, chunk, kernel, best["label"])])
        stages = make(shape, chunk)
        launcher._OVERRIDE.clear()
        launcher._OVERRIDE.update({k: cfg for k, (_, cfg) in pick.items()})
        try:
            ms = bench_ms(stages.forward)["ms"]
        finally:
            launcher._OVERRIDE.clear()
        table = next(r["ms"] for r in rows if r["shape"] == shape.id and r["chunk"] == chunk and r["kernel"] == "table")
        row = dict(shape=shape.id, chunk=chunk, table_ms=table, best_ms=ms,
                   cumsum=pick.get("chunk_cumsum", ("table",))[0], state=pick.get("chunk_state", ("table",))[0],
                   scan=pick.get("chunk_scan", ("table",))[0])
        log(json.dumps(row))
        out.append(row)
    return out


def markdown(rows, combos, meta) -> str:
    lines = [f"# cuTile dispatch sweep ({meta['date']}, {meta['gpu']})", "",
             f"Command: `{meta['command']}`; timings: median of CUDA events after warm-up (lab.bench.race.bench_ms).", "",
             "| shape | chunk | table ms | best ms | speed-up | cumsum candidate | state candidate | scan candidate |",
             "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    lines += [f"| {c['shape']} | {c['chunk']} | {c['table_ms']:.4f} | {c['best_ms']:.4f} | "
              f"{c['table_ms'] / c['best_ms']:.2f}x | {c.get('cumsum', 'table')} | {c['state']} | {c['scan']} |"
              for c in combos]
    lines += ["", "Per kernel (ms; err = normwise difference from the table's output):", "",
              "| shape | chunk | kernel | candidate | ms | table ms | err | status |", "| --- | ---: | --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        if r["kernel"] != "table":
            ms = f"{r['ms']:.4f}" if "ms" in r else ""
            tms = f"{r['table_ms']:.4f}" if "table_ms" in r else ""
            err = f"{r['err']:.1e}" if "err" in r else ""
            lines.append(f"| {r['shape']} | {r['chunk']} | {r['kernel']} | {r['label']} | {ms} | {tms} | {err} | "
                         f"{r.get('status', '')} {r.get('error', '')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")) / "sweep")
    ap.add_argument("--jobs", type=int, default=min(14, os.cpu_count() or 1), help="compile-cache warm-up processes")
    ap.add_argument("--only", help="substring of a shape id: sweep only those shapes")
    ap.add_argument("--match", help="comma-separated candidate label substrings, e.g. 'FASTR,LAT6' (the table always runs)")
    ap.add_argument("--shape", action="append", default=[], metavar="ID[@CHUNKS]",
                    help="a race shape by id (lab.bench.shapes), e.g. b2-l16384-h64-p64-n256-g1@64,128, instead "
                         "of the default shapes (repeatable; chunks default to 64)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    try:
        chosen = tuple(race_shape(spec) for spec in args.shape) or SHAPES
    except ValueError as e:
        ap.error(str(e))
    shapes = tuple((s, c) for s, c in chosen if not args.only or args.only in s.id)
    items = plan(shapes, args.match)
    if args.list:
        for shape, chunk, kernel, label, cfg in items:
            print(f"{shape.id} cs{chunk} {kernel:12s} {label:26s} {cfg or ''}")
        print(f"{len(items)} timings")
        return 0
    import torch
    if not torch.cuda.is_available():
        print("lab.bench.sweep_cutile: needs a CUDA GPU (use --list for the plan)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    errors = warm_all(items, args.jobs)
    warm_s = time.time() - t0
    for e in errors:
        print("warm-up:", e, file=sys.stderr)
    with open(args.out / "sweep.log", "w") as f:
        def log(msg):
            print(msg, flush=True)
            f.write(msg + "\n")
        rows = sweep(items, log)
        combos = best_combinations(items, rows, log)
    meta = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), gpu=torch.cuda.get_device_name(),
                command="python -m lab.bench.sweep_cutile " + " ".join(argv if argv is not None else sys.argv[1:]),
                warm_s=round(warm_s, 1), total_s=round(time.time() - t0, 1), warm_errors=errors)
    (args.out / "sweep.json").write_text(json.dumps(dict(meta=meta, rows=rows, best=combos), indent=1))
    (args.out / "sweep.md").write_text(markdown(rows, combos, meta))
    print(markdown(rows, combos, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
