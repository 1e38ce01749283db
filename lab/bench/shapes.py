"""The race's problem shapes and their split into groups, each sized for one 10-minute GPU command.

The grid (bf16, headdim 64, dt fp32, D (h,), no initial/final states):
    nheads 32, 64  x  dstate 64, 128, 256  x  ngroups 1, 8  x  batch x seqlen in SEQS  = 60 shapes.

Costs that size a group (H200, first run on a fresh machine):
* mamba_ssm: Triton compiles and autotunes each kernel once per (chunk size, dstate) key: about 40
  configs, roughly a minute per chunk size, so ~3 min per dstate for chunk sizes 64/128/256. The key
  holds neither seqlen, nheads nor ngroups, so every shape of one dstate shares it. Triton keeps the
  compiled binaries in ~/.triton/cache: a later group on the same warm machine compiles far less.
* TileGym: exhaustive autotune of every new shape (all of its tensor shapes are in the key), about
  2-3 min per (shape, chunk size) (measured on the H200: lab/reports/2026-11-30-race.md). Hence TileGym
  runs on 6 shapes only, in the `tg*` groups, at chunk size 64 (the faster one at both shapes where
  TileGym's own README measured both).
* vLLM: `launch_autotuned` autotunes each of its five kernels per key on first use (cumsum: chunk
  size, nheads; chunk state and scan: chunk size, headdim, dstate; C^T B: chunk size, dstate; state
  passing: headdim*dstate), about 50 configs per chunk size: a few minutes per dstate on a fresh
  machine, hence the `v*` groups split by (dstate, nheads), with mamba_ssm (the anchor) and cutile in
  the same process. `--vllm-tuning FILE` records the picks (lab/bench/vllm_tuning.py): a later run skips it.
* the rest: about 1 s per (shape, implementation, chunk size) for checks and timing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

SEQS = ((8, 2048), (4, 8192), (2, 16384), (2, 32768), (2, 65536))
NHEADS = (32, 64)
DSTATES = (64, 128, 256)
NGROUPS = (1, 8)
CHUNKS = (64, 128, 256)
IMPLS = ("mamba-ssm", "tilegym", "cutile")
BASELINE = "mamba-ssm"


@dataclass(frozen=True)
class Shape:
    batch: int
    seqlen: int
    nheads: int
    dstate: int
    ngroups: int = 1
    headdim: int = 64
    dtype: str = "bfloat16"
    dt_dtype: str = "float32"
    final_states: bool = False   # the forward also returns the final states (TileGym always computes them)

    @property
    def tuning_id(self) -> str:
        """The id without the final-states mark: TileGym's tuning does not depend on it."""
        return (f"b{self.batch}-l{self.seqlen}-h{self.nheads}-p{self.headdim}-n{self.dstate}-g{self.ngroups}"
                f"{'' if self.dtype == 'bfloat16' else '-' + self.dtype}")

    @property
    def id(self) -> str:
        return self.tuning_id + ("-fs" if self.final_states else "")

    @property
    def label(self) -> str:
        """'8x2K' style batch x seqlen, as on the plot's axis."""
        k = self.seqlen // 1024
        return f"{self.batch}x{k}K" if self.seqlen % 1024 == 0 else f"{self.batch}x{self.seqlen}"

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Group:
    name: str
    shapes: tuple[Shape, ...]
    impls: tuple[str, ...]
    chunks: dict = field(default_factory=dict)   # impl -> chunk sizes tried (default CHUNKS)
    tilegym_shapes: tuple[str, ...] = ()         # ids of the shapes TileGym runs on (others: not run)
    est_min: float = 0.0                         # estimated GPU minutes on a fresh machine
    note: str = ""

    def chunks_for(self, impl: str) -> tuple[int, ...]:
        return tuple(self.chunks.get(impl, CHUNKS))

    def runs(self, impl: str, shape: Shape) -> bool:
        if impl not in self.impls:
            return False
        return impl != "tilegym" or shape.id in self.tilegym_shapes


def grid(dstates=DSTATES, nheads=NHEADS, ngroups=NGROUPS, seqs=SEQS) -> tuple[Shape, ...]:
    return tuple(Shape(b, l, h, n, g) for n in dstates for h in nheads for g in ngroups for (b, l) in seqs)


def _vllm_group(n: int, h: int) -> Group:
    """The 10 shapes of (dstate n, h heads); with 32 heads TileGym joins at its 2 shapes of the tg group
    (chunk 64, from --tilegym-tuning), so all four race in one process there. est_min: measured on the
    H200 with the Triton precompile (130 s with TileGym, 57-74 s without: lab/reports/2026-12-03-vllm-race.md)."""
    tg = _tilegym_group(n).tilegym_shapes if h == 32 else ()
    return Group(f"v{n}h{h}", grid(dstates=(n,), nheads=(h,)), ("mamba-ssm", "vllm", "cutile", "tilegym"),
                 chunks={"tilegym": (64,)}, tilegym_shapes=tg, est_min=2.2 if tg else 1.2,
                 note=f"vLLM autotuned as shipped at the 10 shapes of dstate {n}, {h} heads, chunk 64/128/256, "
                      f"beside mamba_ssm and cutile{' (and TileGym at its 2 shapes)' if tg else ''}")


def _tilegym_group(n: int) -> Group:
    shapes = (Shape(8, 2048, 32, n, 1), Shape(2, 32768, 32, n, 1))
    return Group(f"tg{n}", shapes, IMPLS, chunks={"tilegym": (64,)},
                 tilegym_shapes=tuple(s.id for s in shapes), est_min=5.0,
                 note=f"TileGym autotuned at 2 shapes (dstate {n}), with mamba_ssm and cutile on the same inputs")


def _long(dstates, dtypes=("bfloat16", "float16"), seqs=None, nheads=NHEADS, ngroups=NGROUPS) -> tuple[Shape, ...]:
    """The grid's seqlen >= 16K shapes (issue 27's target rows) in each dtype, without and with final states."""
    seqs = seqs or tuple(s for s in SEQS if s[1] >= 16384)
    return tuple(Shape(s.batch, s.seqlen, s.nheads, s.dstate, s.ngroups, dtype=dt, final_states=fs)
                 for s in grid(dstates=dstates, nheads=nheads, ngroups=ngroups, seqs=seqs)
                 for dt in dtypes for fs in (False, True))


def _tilegym_long() -> Group:
    shapes = _long((64, 128), seqs=((2, 32768),), nheads=(32,), ngroups=(1,))
    return Group("tglong", shapes, IMPLS, chunks={"tilegym": (64,), "cutile": (64,), "mamba-ssm": (64,)},
                 tilegym_shapes=tuple(s.id for s in shapes), est_min=8.0,
                 note="TileGym at 2x32K h32 dstate 64/128, bf16 and fp16, without and with final states, "
                      "beside mamba_ssm and cutile (fp16 is tuned in the run: ~3 min first)")


GROUPS: dict[str, Group] = {
    "smoke": Group("smoke", (Shape(2, 2048, 32, 64, 1),), ("mamba-ssm", "tilegym"),
                   chunks={"mamba-ssm": (64,), "tilegym": (64,)},
                   tilegym_shapes=(Shape(2, 2048, 32, 64, 1).id,), est_min=4.0,
                   note="end-to-end check of the bench: mamba_ssm and TileGym (autotuned) at one small shape, chunk 64"),
    **{f"n{n}": Group(f"n{n}", grid(dstates=(n,)), ("mamba-ssm", "cutile"), est_min=2.5,
                      note=f"all 20 shapes of dstate {n}: mamba_ssm and cutile at chunk 64/128/256")
       for n in DSTATES},
    **{f"tg{n}": _tilegym_group(n) for n in DSTATES},
    **{f"v{n}h{h}": _vllm_group(n, h) for n in DSTATES for h in NHEADS},
    "vsmoke": Group("vsmoke", (Shape(2, 2048, 32, 64, 1),), ("mamba-ssm", "vllm"),
                    chunks={"mamba-ssm": (64,), "vllm": (64,)}, est_min=3.0,
                    note="end-to-end check of vLLM in the bench: vLLM (autotuned) and mamba_ssm at one small shape"),
    **{f"long{n}": Group(f"long{n}", _long((n,)), ("mamba-ssm", "cutile"), est_min=6.0,
                         chunks={"mamba-ssm": (64, 128), "cutile": (64, 128)},
                         note=f"the 12 seqlen >= 16K shapes of dstate {n}, bf16 and fp16, without and with "
                              f"final states: mamba_ssm and cutile at chunk 64/128")
       for n in DSTATES},
    "tglong": _tilegym_long(),
    "tgchunk": Group("tgchunk", (Shape(4, 8192, 32, 128, 1),), IMPLS, chunks={"tilegym": (64, 128)},
                     tilegym_shapes=(Shape(4, 8192, 32, 128, 1).id,), est_min=5.0,
                     note="TileGym at chunk 64 and 128 on one shape: checks the chunk-64 choice of the tg groups"),
}

ORDER = ("smoke", "tg128", "n128", "tg64", "n64", "tg256", "n256", "tgchunk", "vsmoke",
         "long64", "long128", "long256", "tglong",
         *(f"v{n}h{h}" for n in DSTATES for h in NHEADS))


def describe() -> str:
    lines = [f"{'group':8} {'shapes':>6} {'est min':>7}  impls / note"]
    for name in ORDER:
        g = GROUPS[name]
        lines.append(f"{name:8} {len(g.shapes):6d} {g.est_min:7.1f}  {','.join(g.impls)}: {g.note}")
    total = sum(GROUPS[n].est_min for n in ORDER)
    lines.append(f"{'total':8} {sum(len(GROUPS[n].shapes) for n in ORDER):6d} {total:7.1f}  "
                 f"(fresh machine each; a tg group right after its n group on a warm machine reuses Triton's cache)")
    return "\n".join(lines)
