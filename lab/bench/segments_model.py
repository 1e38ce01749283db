"""The segmented walk's prediction, written before its first GPU run (lab/NOTES.md).

    python -m lab.bench.segments_model              # the race grid's seqlen >= 16K shapes, markdown
    python -m lab.bench.segments_model --measured ab-s4/ab.json ab-s2/ab.json   # beside lab.bench.ab_row's runs

For each shape: the I/O floor (lab/bench/roofline.py), S (dispatch.segments, an H200's 132 SMs), the
bytes and the blocks of each pass, and a predicted time from rates measured on the H200 (below, each
with where it was measured). Pass 1 and pass 3 are each the slower of a latency bound (waves x chunk
steps per block x step time) and a byte bound (bytes at the rate the same kind of kernel reached).
The time is the same with and without final states (pass 2 writes them: b*h*p*n*4 bytes, under 1 us)
and for fp16 as for bf16 (same bytes, same kernels).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from lab.bench import roofline
from lab.bench.shapes import Shape, grid
from kernels.cutile import dispatch

COPY_BPS = 4.25e12            # device copy rate, read + written (the race's ceilings, 4273-4275 GB/s)
# pass 3 = chunk_walk_kernel: us per 64-token chunk step of one block at two blocks per SM
# (the chunk-walk run: 8x2K h32 walk 0.098 ms over 32 steps at dstate 64; 0.114 at 128)
WALK_STEP_US = {64: 3.1, 128: 3.6}
# pass 1 ~ chunk_state's FAST few-block row: 0.268 ms over 512 chunk steps (2x32K n64, BN32 DLAT4, the
# DLAT run) is 0.52 us per step and block; with many blocks the FAST state kernel moved 2.6-2.8 TB/s
STATE_STEP_US = 0.52
STATE_BPS = 2.7e12
STATE_SLOTS_PER_SM = 4        # SEGMENT_STATE's occupancy
CUMSUM_PS_PER_TOKEN_HEAD = 7.1  # chunk_cumsum: 0.0133-0.0173 ms at 2x32K h32 (2.1 M token-heads)
PASS2_US = 2.0                # launch and the first load of the S-step scan
PASS2_STEP_US = 1.0           # one segment: a state tile load, a multiply-add, a store


@dataclass(frozen=True)
class Prediction:
    shape: Shape
    floor_ms: float
    segments: int
    walk_blocks: int
    state_blocks: int
    bytes_total: int
    ms: float
    parts: dict

    @property
    def x_floor(self) -> float:
        return self.ms / self.floor_ms


def predict(shape: Shape, sms: int = dispatch.DEFAULT_SMS) -> Prediction:
    b, l, h, p, n, g = shape.batch, shape.seqlen, shape.nheads, shape.headdim, shape.dstate, shape.ngroups
    e = roofline.DTYPE_BYTES[shape.dtype]
    nchunks = l // 64
    bh = b * h
    walk_blocks = bh * -(-p // 64)
    s = dispatch.segments(nchunks, walk_blocks, sms * dispatch.WALK_SLOTS_PER_SM)
    k = nchunks // s
    x = b * l * h * p * e
    bc = b * l * g * n * e          # B or C, once per group (L2 serves the other heads)
    f32_tok = b * l * h * 4         # one fp32 (b, h, l) array: dt read, dtc and cs written
    seg_states = b * s * h * p * n * 4
    cumsum_b = 3 * f32_tok
    pass1_b = x + bc + 2 * f32_tok + seg_states
    pass2_b = 2 * seg_states + b * h * p * n * 4 * 2
    pass3_b = 2 * x + 2 * bc + 2 * f32_tok + seg_states
    state_blocks = walk_blocks * -(-n // dispatch.SEGMENT_STATE.get("BN")) * s
    state_waves = math.ceil(state_blocks / (sms * STATE_SLOTS_PER_SM))
    walk_waves = math.ceil(walk_blocks * s / (sms * dispatch.WALK_SLOTS_PER_SM))
    parts = {
        "cumsum": b * l * h * CUMSUM_PS_PER_TOKEN_HEAD * 1e-9,
        "pass1": max(state_waves * k * STATE_STEP_US * 1e-3, pass1_b / STATE_BPS * 1e3),
        "pass2": (PASS2_US + s * PASS2_STEP_US) * 1e-3,
        "pass3": max(walk_waves * k * WALK_STEP_US[n] * 1e-3, pass3_b / COPY_BPS * 1e3),
    }
    return Prediction(shape, roofline.io_bytes(shape) / COPY_BPS * 1e3, s, walk_blocks * s, state_blocks,
                      cumsum_b + pass1_b + pass2_b + pass3_b, sum(parts.values()), parts)


def long_shapes(dtype: str = "bfloat16") -> tuple[Shape, ...]:
    """The race grid's shapes with seqlen >= 16K at the dstates the walk serves (64, 128)."""
    return tuple(Shape(s.batch, s.seqlen, s.nheads, s.dstate, s.ngroups, dtype=dtype)
                 for s in grid(dstates=(64, 128)) if s.seqlen >= dispatch.SEGMENT_MIN_SEQLEN)


def table(shapes) -> str:
    rows = ["| shape | floor ms | S | walk blocks | bytes / floor bytes | cumsum | pass 1 | pass 2 | pass 3 "
            "| predicted ms | x floor |", "|" + "---|" * 11]
    for s in shapes:
        r = predict(s)
        pt = r.parts
        rows.append(f"| {s.id} | {r.floor_ms:.3f} | {r.segments} | {r.walk_blocks} | "
                    f"{r.bytes_total / roofline.io_bytes(s):.2f} | {pt['cumsum']:.3f} | {pt['pass1']:.3f} | "
                    f"{pt['pass2']:.3f} | {pt['pass3']:.3f} | {r.ms:.3f} | {r.x_floor:.2f} |")
    return "\n".join(rows)


def against_measured(docs: list[dict]) -> str:
    """The prediction beside lab.bench.ab_row's measurements (`--segments N` runs, one doc per N): per shape
    the two kernels (A, the mean of the runs' medians), the segmented walk at each N measured, the best
    of them over A and over the I/O floor."""
    by_n = {d["segments"]: {r["shape"]: r for r in d["rows"] if "error" not in r} for d in docs}
    ns = sorted(by_n)
    rows = ["| shape | floor ms | model S | model ms | two kernels ms | " + " | ".join(f"S={n} ms" for n in ns)
            + " | best / two kernels | best x floor | model / best |", "|" + "---|" * (8 + len(ns))]
    ids = list(next(iter(by_n.values())))
    shapes = {s.id: s for s in long_shapes("bfloat16") + long_shapes("float16")}
    for sid in ids:
        base = sid.removesuffix("-fs")
        if base not in shapes or not all(sid in by_n[n] for n in ns):
            continue
        r = predict(shapes[base])
        a = sum(by_n[n][sid]["a_ms"] for n in ns) / len(ns)
        bs = [by_n[n][sid]["b_ms"] for n in ns]
        best = min(bs)
        rows.append(f"| {sid} | {r.floor_ms:.3f} | {r.segments} | {r.ms:.3f} | {a:.3f} | "
                    + " | ".join(f"{v:.3f}" for v in bs)
                    + f" | {best / a:.2f} | {best / r.floor_ms:.2f} | {r.ms / best:.2f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m lab.bench.segments_model", description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", nargs="+", metavar="AB_JSON",
                    help="lab.bench.ab_row --segments N outputs (ab.json): the prediction beside them")
    args = ap.parse_args(argv)
    if args.measured:
        print(against_measured([json.load(open(f)) for f in args.measured]))
    else:
        print(table(long_shapes()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
