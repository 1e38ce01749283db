"""The dispatch table: problem -> the compile-time constants of each cuTile kernel.

This is data, read by the launcher (to choose) and by compile_matrix.py (to enumerate every
configuration CI must compile). Add a row here and CI compiles it; nothing else chooses constants.

The kernels tile the sequence in BL = 64 tokens whatever the chunk size (the chunk size is a
run-time argument), except chunk_state with few blocks, which takes BL = 128 at chunk sizes 128 and
256 (BL must divide the chunk size). So the table looks at dstate (chunk_scan's dstate tile),
batch*heads (chunk_state's dstate tile, which sets how many blocks walk the sequence in parallel)
and the chunk size. Aligned problems (seqlen a multiple of the chunk size, no seq_idx) take FAST rows
first, with no masks: chunk_state walks one whole-chunk tile per chunk (BL = FAST = chunk size),
chunk_scan takes one 64-row tile of a chunk per block (FAST = chunk size, BL = 64). Headdim and
dstate below the tile width are served with zero padding (correct, a little wasted work on problems
far from the performance target); larger ones loop over tiles. The element dtype does not change
the choice but does make a separate compile unit (compile_matrix.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

ELEMENT_DTYPES = ("float32", "float16", "bfloat16")   # x, B, C, z (and dt for chunk_cumsum)


@dataclass(frozen=True)
class Problem:
    """What the table looks at."""
    dtype: str          # x.dtype name, or dt.dtype name for chunk_cumsum
    headdim: int
    dstate: int
    chunk_size: int
    batch_heads: int = 1  # batch * nheads: the independent sequences the state scan runs over
    aligned: bool = False  # seqlen % chunk_size == 0 and no seq_idx: a FAST row (FAST = chunk_size) may serve it
    seqlen: int = 0        # tokens per (batch, head) sequence: the segmented walk pays only on long ones
    segmented: bool = False  # one segment of a segmented walk (pass 3): the walk's segment rows serve it


@dataclass(frozen=True)
class Config:
    """Constants of one kernel (passed as ct.Constant[int] in this order) and compiler hints."""
    constants: tuple[tuple[str, int], ...]
    occupancy: int | None = None
    worker_warps: int | None = None   # cuTile's num_worker_warps (4 or 8 with tileiras 13.4); None: auto

    def __post_init__(self):
        if self.worker_warps not in (None, 4, 8):
            raise ValueError(f"worker_warps: expected 4 or 8 (other values need tileiras 13.5), got {self.worker_warps!r}")

    def hints(self) -> dict[str, int]:
        """The compiler hints that are set, as ct.kernel.replace_hints takes them."""
        h = {"occupancy": self.occupancy, "num_worker_warps": self.worker_warps}
        return {k: v for k, v in h.items() if v is not None}

    def get(self, name: str) -> int:
        for k, v in self.constants:   # a few pairs: a scan beats building a dict (host time per launch)
            if k == name:
                return v
        raise KeyError(name)

    def replace(self, **values: int) -> "Config":
        """The same Config with some constants set to other values (same names, same order)."""
        unknown = set(values) - {k for k, _ in self.constants}
        if unknown:
            raise KeyError(f"Config {self} has no constant {sorted(unknown)}")
        return Config(tuple((k, values.get(k, v)) for k, v in self.constants), self.occupancy, self.worker_warps)

    def __str__(self) -> str:
        s = ",".join(f"{k}={v}" for k, v in self.constants)
        return (s + (f",occupancy={self.occupancy}" if self.occupancy else "")
                + (f",worker_warps={self.worker_warps}" if self.worker_warps else ""))


@dataclass(frozen=True)
class Rule:
    when: str                              # human-readable condition, shown in reports
    test: Callable[[Problem], bool] = field(compare=False)
    config: Config = None
    forced_only: bool = False              # only a force switch reaches it (SEGMENTS_ENV), never the table


def state_config(BL=64, BN=32, PF=0, LAT=0, SLAT=0, FAST=0, SPLIT=0, SWAP=0, DLAT=0, BP=64, occupancy=4,
                 worker_warps=None) -> Config:
    """A chunk_state Config with its constants in the kernel's order (table rows, sweeps, tools); a
    constant left out takes the value every table row shares."""
    return Config(_c(BL=BL, BP=BP, BN=BN, PF=PF, LAT=LAT, SLAT=SLAT, FAST=FAST, SPLIT=SPLIT, SWAP=SWAP, DLAT=DLAT),
                  occupancy, worker_warps)


def scan_config(BL=64, BN=128, LAT=0, PERSIST=0, FAST=0, FTZ=1, FACT=0, HB=1, BP=64, occupancy=3,
                worker_warps=None) -> Config:
    """A chunk_scan Config with its constants in the kernel's order (table rows, sweeps, tools); a
    constant left out takes the value every table row shares."""
    return Config(_c(BL=BL, BP=BP, BN=BN, LAT=LAT, PERSIST=PERSIST, FAST=FAST, FTZ=FTZ, FACT=FACT, HB=HB),
                  occupancy, worker_warps)


CONFIG_ENV = "SSDCHECK_CUTILE_CONFIG"


def parse_configs(text: str, source: str = CONFIG_ENV) -> dict[str, Config]:
    """Configs that replace the table, e.g. to put a sweep candidate through the whole property suite
    before it becomes a row:
        chunk_scan:BL=64,BN=128,FAST=64,occupancy=2;chunk_state:BL=64,BN=32,FAST=64,occupancy=2,worker_warps=8
    KERNEL@CHUNK (e.g. chunk_state@128:BL=128,FAST=128) applies at that chunk size only and wins over a
    plain KERNEL entry there. Unnamed constants take state_config/scan_config/walk_config's defaults
    (the table's common values; chunk_walk's BN defaults to 0, the walk off). A plain entry applies to
    the problems whose chunk size its BL divides; the others keep the table.
    Returns {KERNEL or KERNEL@CHUNK: Config}."""
    builders = {"chunk_state": state_config, "chunk_scan": scan_config, "chunk_walk": walk_config,
                "segment_state": segment_state_config}
    out: dict[str, Config] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, _, body = part.partition(":")
        kernel, at, chunk = key.strip().partition("@")
        if kernel not in builders:
            raise ValueError(f"{source}: kernel {kernel!r} is not one of {sorted(builders)} (in {part!r})")
        if at and not (chunk.isdigit() and int(chunk) > 0):
            raise ValueError(f"{source}: {key.strip()!r}: the chunk size after @ must be a positive integer")
        try:
            kw = {k.strip(): int(v) for k, v in (item.split("=") for item in body.split(",") if item.strip())}
            out[key.strip()] = builders[kernel](**kw)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{source}: {part!r} is not KERNEL[@CHUNK]:NAME=INT,...: {e}") from None
    return out


def _always(_: Problem) -> bool:
    return True


def _c(**kw) -> tuple[tuple[str, int], ...]:
    return tuple(kw.items())


def walk_config(BN=0, BP=64, LAT=0, FTZ=1, FACT=0, SPLIT=0, ORD=0, occupancy=2, worker_warps=None) -> Config:
    """A chunk_walk Config (BL = 64: chunk 64 only). BN = 0 is the row that turns the walk off (the
    state and scan kernels run); otherwise BN must equal the problem's dstate (the launcher checks).
    ORD=1 issues a step's state product first and adds the chunk's own state after it, as SPLIT=1
    does, so it needs SPLIT=1 (kernels.chunk_walk_kernel)."""
    if ORD not in (0, 1):
        raise ValueError(f"chunk_walk: expected ORD in (0, 1) (the order of a step's products), got {ORD!r}")
    if ORD == 1 and not SPLIT:
        raise ValueError("chunk_walk: ORD=1 adds each chunk's own state after its product: it needs SPLIT=1")
    return Config(_c(BL=64, BP=BP, BN=BN, LAT=LAT, FTZ=FTZ, FACT=FACT, SPLIT=SPLIT, ORD=ORD), occupancy, worker_warps)


WALK_OFF = walk_config()

# The segmented walk (kernels.py segment_state_kernel, segment_pass_kernel, then chunk_walk_kernel on
# each segment): S segments per (batch, head) sequence walked in parallel. SEGMENTS_ENV forces it:
# unset, the table decides; N >= 2, every problem the path serves takes it with at most N segments
# (at least 2 chunks, aligned at chunk 64, no seq_idx or varlen_states, dstate 64 or 128); 1, never.
SEGMENTS_ENV = "SSDCHECK_CUTILE_SEGMENTS"
WALK_SLOTS_PER_SM = 2     # the walk rows' occupancy: a segment walk per slot, one wave fills the GPU
DEFAULT_SMS = 132         # an H200's SMs: what S is chosen for where no GPU is seen (compile keys on the CPU)
SEGMENT_MIN_SEQLEN = 16384


def segment_state_config(BN=0, BP=64, LAT=0, DLAT=0, SPLIT=1, occupancy=4, worker_warps=None) -> Config:
    """A segment_state Config (pass 1; BL = 64: chunk 64 only). BN = 0 turns the segmented walk off
    (the table's off row is SEG_OFF)."""
    return Config(_c(BL=64, BP=BP, BN=BN, LAT=LAT, DLAT=DLAT, SPLIT=SPLIT), occupancy, worker_warps)


SEG_OFF = WALK_OFF   # the segmented walk off: the walk's sentinel (BN = 0), which launches nothing
SEGMENT_STATE = segment_state_config(BN=32, DLAT=4, occupancy=4)   # the row, and what SEGMENTS_ENV forces


def parse_segments(text: str, source: str = SEGMENTS_ENV) -> int | None:
    """SEGMENTS_ENV's value: None (unset or empty: the table decides), else the most segments forced
    (1: the path never runs)."""
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{source}: expected a positive integer (the most segments per sequence; 1 turns "
                         f"the segmented walk off), got {text!r}")
    return int(text)


def segments(nchunks: int, walk_blocks: int, slots: int, force: int | None = None) -> int:
    """S, the segments per (batch, head) sequence: a power of two dividing nchunks (every segment whole
    chunks, the same count), the largest whose walk_blocks * S walks fit the GPU's slots in one wave
    (more waves make each segment shorter but not the pass faster), or at most `force` where forced.
    1: do not segment."""
    cap = force if force is not None else slots // max(walk_blocks, 1)
    cap = min(cap, nchunks & -nchunks)       # nchunks & -nchunks: the largest power of two dividing it
    s = 1
    while 2 * s <= cap:
        s *= 2
    return s


def _state_blocks(p: Problem, bn: int) -> int:
    """Blocks of the chunk_state grid with 64-wide headdim tiles and bn-wide dstate tiles."""
    return p.batch_heads * -(-p.headdim // 64) * -(-p.dstate // bn)


# First matching rule wins. Measured on an H200 (bf16, b8 l2048 h32 p64 n128, chunk 64; ms):
#   chunk_state (one sequential loop per block, so parallelism is blocks x occupancy):
#     BN64 occ2 0.178 | BN64 occ4 0.179 | BN128 occ2 0.145 | BN32 occ4 0.140 | BP32 occ4 0.655
#   chunk_scan: BN128 occ1 0.345 | occ2 0.154 | occ3 0.132 | occ4 0.288; BN64 occ2 0.291 | occ4 0.175;
#     persistent grid occ2 0.263
# chunk_state drops to BN 16 when BN 32 leaves fewer than two blocks per SM of an H200 (b*h small,
# long sequences), since each block walks the whole sequence.
# Sweep of 2026-11-30 (lab/bench/sweep_cutile.py, lab/reports/raw/2026-11-30-sweep-cutile/): PF=0 (no manual
# one-tile-ahead prefetch) beat PF=1 at 7 of the 8 (shape, chunk) points, by 7-13% where blocks are
# many (b8 l2048 h32 n128: 0.125 vs 0.140 ms at chunk 64); with few blocks (b2 l65536 h32 n64) BL=128,
# BN=16 took 0.81 vs 1.12 ms at chunk 128 and 0.74 vs 0.98 ms at chunk 256 (BL=128 with BN=32 was
# 2.1 ms: the tile pair matters, so only the measured pair is used).
# Sweep 3 of 2026-11-30 (FAST paths, lab/reports/raw/2026-11-30-sweep-cutile-run3/): on aligned problems
# without seq_idx (the launcher's promise for FAST = chunk size) the one-tile-per-chunk paths win
# everywhere measured. chunk_state at chunk 64, BN32 LAT4 SLAT2 occ4: 0.125 -> 0.076 (b8 l2048 h32
# n128), 1.20 -> 0.58 (b2 l65536 h32 n64), 0.91 -> 0.59 ms (b2 l16384 h64 n256 g8; SWAP BN64 0.55);
# at chunk 128/256 the transposed state (SWAP) BN64 occ2: 0.109 -> 0.061 and 0.097 -> 0.049 (b8 l2048
# n128), 0.81 -> 0.59 and 0.74 -> 0.46 (b2 l65536 n64, few blocks). chunk_scan FAST at chunk 64, occ3:
# 0.132 -> 0.097 (n128, BN128), 1.21 -> 0.61 (n64, BN64), 0.67 -> 0.56 ms (n256 g8). The FAST scan at
# chunk 128 needs BL 128 (occ1, 1.3-1.7x slower than the table): no row.
# Sweep 4 of 2026-11-30 (lab/reports/raw/2026-11-30-sweep-cutile-run4/): FASTR, the FAST scan at chunk
# 128/256 in 64-row tiles (BN64 LAT4 occ3), beat the general scan at every point: 0.152 -> 0.127
# (b8 l2048 n128, chunk 128), 0.80 -> 0.67 (b2 l16384 n256 g8), 1.38 -> 0.76 and 1.78 -> 1.11 ms (b2
# l65536 n64, chunk 128/256). LAT4 on the chunk-64 FAST scan with BN128: 0.558 -> 0.513 (n256 g8),
# 0.0973 -> 0.0971 (n128). With few state blocks the chunk-128 state prefers BN16 LAT4 SLAT2 occ4
# (0.594 -> 0.492, b2 l65536 n64) and chunk 256 BN32 occ4 (0.462 -> 0.351); SWAP stays elsewhere.
# Sweep 5 of 2026-11-30 (lab/reports/raw/2026-11-30-dlat-rows/): DLAT4, the hint on the state loop's dt and
# cumsum loads, pays with few blocks: at chunk 64 BN32 LAT6 DLAT4 SLAT2 occ2 takes 0.297 -> 0.268
# (b2 l32768 h32 n64), 0.365 -> 0.328 (n128) and 0.589 -> 0.523 ms (b2 l65536 n64); at chunk 128 the
# few-block row gains DLAT4 (0.496 -> 0.418), at chunk 256 LAT4 DLAT4 SLAT2 (0.354 -> 0.339). With many
# blocks it is -4% to +5% (noise-sized or worse): those rows keep no hint.
# Measured 2026-11-30 (lab/reports/raw/2026-11-30-ftz-decays/): FTZ=1, the FAST scan's decay tile exp2 without its
# denormal fix-up, won at every point: 0.310 -> 0.301 (b2 l32768 n64), 0.357 -> 0.346 (n128), 0.0862 ->
# 0.0834 (b8 l2048 n64), 0.538 -> 0.503 (b2 l16384 n256 g8), 1.106 -> 1.032 ms (b2 l65536 n64, chunk 256),
# outputs bitwise equal. It is scan_config's default, so every row has it (the general path ignores it).
# Measured 2026-12-01 (lab/reports/raw/2026-12-01-two-heads-per-block/sweep-hb2/): HB=2, two heads of one
# group per block sharing the C/B loads and the score tile, at occupancy 2 beat the chunk-64 FAST rows everywhere measured, outputs
# bitwise equal: 0.306 -> 0.283 (b2 l32768 n64), 0.358 -> 0.328 (n128), 0.0852 -> 0.0794 (b8 l2048
# n64), 0.0960 -> 0.0921 ms (n128). Occupancy 3 took 0.277 at b2 l32768 n64 (a 104 B frame) and 0.516 at
# n128 (214 KB of shared memory per block: one block per SM):
# both rows keep 2. With odd heads per group the launcher falls back to HB=1 at the row's occupancy.
# Measured 2026-12-03 (lab/reports/2026-12-03-scan-bn64.md, lab.bench.ab_row): the chunk-64 FAST scan at dstate 128
# with BN=64 LAT=2 (two dstate tiles) ties BN=128 LAT=4, 0.996-1.003x over five shapes, bitwise equal,
# and its tileiras compile takes half the time (3.7-4.2 s against 7.8 s on a 2-core CPU, float32): the
# first compile a fail-fast run of a changed scan waits for. BN=64 LAT=4 lost 0-1.4% eager (up to 3.6%
# graph), occupancy 3 lost 6-14%; at dstate 256 BN=64 lost 3-4% at LAT=2 and 0-2% at LAT=4, so that row
# keeps BN=128.
_ALIGNED = "aligned (seqlen % chunk == 0, no seq_idx)"


def _aligned_at(chunk: int) -> Callable[[Problem], bool]:
    return lambda p: p.aligned and p.chunk_size == chunk


def _walks(p: Problem) -> bool:
    """Where chunk_walk was measured and where the suite's GPU draws reach it (the wide model layers:
    headdim 64): other headdims keep the two kernels."""
    return _aligned_at(64)(p) and p.headdim == 64 and p.batch_heads >= 256


def _segments_pay(p: Problem) -> bool:
    """Where the segmented walk was measured faster than the two kernels (64 (b, h) pairs or fewer,
    dstate 64, bf16 and fp16, seqlen >= 16K): the walk alone would leave most of the GPU idle."""
    return (_aligned_at(64)(p) and p.headdim == 64 and p.dstate == 64 and p.dtype in ("bfloat16", "float16")
            and p.batch_heads <= 64 and p.seqlen >= SEGMENT_MIN_SEQLEN)


TABLE: dict[str, tuple[Rule, ...]] = {
    "chunk_cumsum": (
        Rule("always", _always, Config(_c(BL=64, BH=16))),
    ),
    "chunk_state": (
        Rule(f"{_ALIGNED}, chunk 64, blocks(BN=32) < 264",
             lambda p: _aligned_at(64)(p) and _state_blocks(p, 32) < 264,
             state_config(BL=64, BN=32, FAST=64, LAT=6, DLAT=4, SLAT=2, occupancy=2)),
        Rule(f"{_ALIGNED}, chunk 64", _aligned_at(64),
             state_config(BL=64, BN=32, FAST=64, LAT=4, SLAT=2, occupancy=4)),
        Rule(f"{_ALIGNED}, chunk 128, blocks(BN=32) < 264",
             lambda p: _aligned_at(128)(p) and _state_blocks(p, 32) < 264,
             state_config(BL=128, BN=16, FAST=128, LAT=4, DLAT=4, SLAT=2, occupancy=4)),
        Rule(f"{_ALIGNED}, chunk 128", _aligned_at(128),
             state_config(BL=128, BN=64, FAST=128, SWAP=1, occupancy=2)),
        Rule(f"{_ALIGNED}, chunk 256, blocks(BN=32) < 264",
             lambda p: _aligned_at(256)(p) and _state_blocks(p, 32) < 264,
             state_config(BL=256, BN=32, FAST=256, LAT=4, DLAT=4, SLAT=2, occupancy=4)),
        Rule(f"{_ALIGNED}, chunk 256", _aligned_at(256),
             state_config(BL=256, BN=64, FAST=256, SWAP=1, occupancy=2)),
        Rule("blocks(BN=32) >= 264", lambda p: _state_blocks(p, 32) >= 264,
             state_config(BL=64, BN=32, occupancy=4)),
        Rule("blocks(BN=32) < 264, chunk >= 128", lambda p: p.chunk_size >= 128,
             state_config(BL=128, BN=16, occupancy=4)),
        Rule("blocks(BN=32) < 264", _always, state_config(BL=64, BN=16, occupancy=4)),
    ),
    "chunk_scan": (
        Rule(f"{_ALIGNED}, chunk 64, dstate <= 64", lambda p: _aligned_at(64)(p) and p.dstate <= 64,
             scan_config(BL=64, BN=64, FAST=64, HB=2, occupancy=2)),
        Rule(f"{_ALIGNED}, chunk 64, dstate <= 128", lambda p: _aligned_at(64)(p) and p.dstate <= 128,
             scan_config(BL=64, BN=64, FAST=64, LAT=2, FACT=1, HB=2, occupancy=2)),
        Rule(f"{_ALIGNED}, chunk 64", _aligned_at(64),
             scan_config(BL=64, BN=128, FAST=64, LAT=4, FACT=1, HB=2, occupancy=2)),
        Rule(f"{_ALIGNED}, chunk 128", _aligned_at(128), scan_config(BL=64, BN=64, FAST=128, LAT=4, occupancy=3)),
        Rule(f"{_ALIGNED}, chunk 256", _aligned_at(256), scan_config(BL=64, BN=64, FAST=256, LAT=4, occupancy=3)),
        Rule("dstate <= 64", lambda p: p.dstate <= 64, scan_config(BL=64, BN=64, occupancy=3)),
        Rule("dstate >= 128", lambda p: p.dstate >= 128, scan_config(BL=64, BN=128, occupancy=3)),
    ),
    "varlen_state": (
        Rule("always", _always, Config(_c(BL=64, BP=64, BN=64))),
    ),
    # chunk_walk replaces chunk_state + chunk_scan where its rows match (BN = dstate) and the caller
    # wants no varlen_states; WALK_OFF (BN = 0) keeps the two kernels. Measured 2026-12-01 (lab.bench.ab_row, whole
    # forward replayed from a CUDA graph, ms, walk vs the two kernels; outputs bitwise equal at SPLIT=0):
    # batch*heads 256-512 at chunk 64: b8 l2048 h32 n64 0.106 vs 0.128, n128 0.122 vs 0.172, n64 g8
    # 0.108 vs 0.134, b8 l2048 h64 n128 g8 0.229 vs 0.329, b4 l8192 h64 n64 0.370 vs 0.447. With 128
    # (b, h) it lost, one block per SM: b4 l8192 h32 n64 0.296 vs 0.243 (BP32's 256 blocks 0.270),
    # b2 l16384 h64 n64 0.577 vs 0.464, n128 1.10x; with 64, 1.9x (b2 l32768). dstate 256 lost at 256
    # (b, h) (BN256 WW8 occ1 0.314 vs 0.274; BP32 occ1 0.336): no row. SPLIT=1 0.985-1.003x of SPLIT=0.
    # ORD=1 (a step's state-free products first) measured 2026-12-04 (lab/reports/2026-12-04-walk-order.md,
    # lab.bench.segment_passes, same process): the walk 0.313 -> 0.269 ms at 2x32K h32 n64 (4 segments),
    # 0.0863 -> 0.0720 at 8x2K h32 n64; at dstate 128 its three live fp32 tiles spill (240 B frame) and
    # the walk took 0.388 -> 0.624, so those rows keep ORD=0.
    "chunk_walk": (
        # pass 3 of the segmented walk: the walk's own rows, on each segment
        Rule("a segment of the segmented walk, dstate 64", lambda p: p.segmented and p.dstate == 64,
             walk_config(BN=64, SPLIT=1, ORD=1, occupancy=2)),
        Rule("a segment of the segmented walk, dstate 128", lambda p: p.segmented and p.dstate == 128,
             walk_config(BN=128, FACT=1, SPLIT=1, occupancy=2), forced_only=True),
        Rule(f"{_ALIGNED}, chunk 64, headdim 64, dstate 64, batch*heads >= 256",
             lambda p: _walks(p) and p.dstate == 64,
             walk_config(BN=64, SPLIT=1, ORD=1, occupancy=2)),
        Rule(f"{_ALIGNED}, chunk 64, headdim 64, dstate 128, batch*heads >= 256",
             lambda p: _walks(p) and p.dstate == 128,
             walk_config(BN=128, FACT=1, SPLIT=1, occupancy=2)),
        Rule("otherwise: chunk_state and chunk_scan", _always, WALK_OFF),
    ),
    # The segmented walk (then the walk's segment rows, above, and segment_pass). Measured 2026-12-03
    # (lab/reports/2026-12-03-segmented-walk.md, lab.bench.ab_row, S=4 against the two kernels, 16K-64K, g1
    # and g8, bf16 and fp16, with and without final states): 0.86-0.91x at 64 (b, h) pairs and dstate
    # 64; 1.03-1.06x at 128 pairs, 0.97-1.09x at dstate 128, which keep the two kernels. The walk's D
    # row out of its loop then took 7.5% off pass 3 (lab/reports/2026-12-04-walk-d-row.md). Fewer pairs get
    # more segments (dispatch.segments fills one wave), the same kernels.
    "segment_state": (
        Rule(f"{_ALIGNED}, chunk 64, headdim 64, dstate 64, 16-bit, batch*heads <= 64, seqlen >= {SEGMENT_MIN_SEQLEN}",
             _segments_pay, SEGMENT_STATE),
        Rule("otherwise: no segments", _always, SEG_OFF),
    ),
    "segment_pass": (
        Rule("always", _always, Config(_c(BP=64, BN=64))),
    ),
}

KERNEL_NAMES = tuple(TABLE)


def row(kernel: str, problem: Problem) -> int:
    """Index of the first row of TABLE[kernel] that serves `problem`."""
    for i, rule in enumerate(TABLE[kernel]):
        if rule.test(problem):
            return i
    raise LookupError(f"dispatch table has no {kernel} row for {problem}")


def choose(kernel: str, problem: Problem) -> Config:
    return TABLE[kernel][row(kernel, problem)].config




def row_names() -> list[tuple[str, int, str]]:
    """(kernel, row, "<kernel> <row>: <when>") of every table row, the rows a force switch alone reaches
    (Rule.forced_only: the segmented walk's at dstate 128) named with kernels.registry.FORCED_ONLY."""
    from kernels.registry import FORCED_ONLY   # noqa: PLC0415 (this module is data: no torch at import)
    out = []
    for kernel, rules in TABLE.items():
        for i, rule in enumerate(rules):
            out.append((kernel, i, f"{kernel} {i}: {rule.when}" + (f" {FORCED_ONLY}" if rule.forced_only else "")))
    return out


# What a switch can launch beyond the table's rows (compiled by the compile matrix all the same)
FORCED = {"segment_state": (SEGMENT_STATE,)}


def configs(kernel: str) -> tuple[Config, ...]:
    """Every distinct configuration the launcher can choose for `kernel`: the table's, in table order,
    then what a force switch launches (FORCED); WALK_OFF, which launches nothing, left out (SEG_OFF is
    the same sentinel)."""
    seen: list[Config] = []
    for config in [rule.config for rule in TABLE[kernel]] + list(FORCED.get(kernel, ())):
        if config not in seen and config != WALK_OFF:
            seen.append(config)
    return tuple(seen)
