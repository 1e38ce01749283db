"""The Mamba-2 SSD forward pass as cuTile kernels.

Seven `@ct.kernel`s; the host side (launcher.py) chooses their constants from an explicit dispatch
table and launches them:

1. `chunk_cumsum_kernel`   dt processing and the per-chunk cumulative sum of dt*A, in log2 units
2. `chunk_state_kernel`    each chunk's state (x^T @ decayed B on tensor cores) fused with the scan
                           that carries the state across chunks: writes the state entering every
                           chunk and the final state
3. `chunk_scan_kernel`     the output: masked, decayed C B^T kept on chip times x, plus C times the
                           incoming state, plus D x, gated by silu(z); y written once in x.dtype
3'. `chunk_walk_kernel`    2 and 3 in one pass where the grid is wide enough: each block walks its
                           head's chunks with the state in registers; the chunk states stay on chip
3''. `segment_state_kernel`, `segment_pass_kernel`: the segmented walk for long sequences with few
                           (batch, head) pairs: each segment's end state from zero, then the scan
                           over segments giving each its entering state; the walk then runs per segment
4. `varlen_state_kernel`   (cu_seqlens only) the state at the last token of every packed sequence

Conventions shared by all kernels:

* Every tile is `BL` tokens long (BL = 64, a constant) whatever the chunk size; a chunk of 64, 128
  or 256 tokens is 1, 2 or 4 such tiles, so the chunk size is a run-time argument and not a
  compile-time constant (one compiled kernel serves every chunk size).
* `cs` is the cumulative sum of dt*A*log2(e) within each chunk (fp32), so every decay is one exp2.
  `dtc` is the processed dt (fp32). Both are (b, h, Lpad) with Lpad = nchunks * chunk_size; past
  the sequence end dtc is 0 and cs repeats its last value.
* A tile never lies wholly outside an array (undefined behaviour in cuTile): loops stop at the last
  tile holding a valid token, and tiles that overhang the sequence end load zeros there.
* Values past the sequence end are also masked by position, so the stage entry points give the
  right answer whatever a caller left in the padding of dA_cumsum / dt.
* Group of head hh: hh // heads_per_group (mamba_ssm's convention).
* Runtime flags (has_seq, has_d, has_z, has_init) are uniform branches: a tensor that is absent is
  replaced by a dummy argument that the kernel never reads.
"""
from __future__ import annotations

import linecache
import math
from pathlib import Path

import cuda.tile as ct

LOG2E = math.log2(math.e)
FACT_RANGE = 64.0   # chunk_scan FACT: the largest |cs| (log2 units) of a chunk whose decay is factored
ZERO = ct.PaddingMode.ZERO

# The compiled kernels' debug info names this file, and cuTile's disk cache keys on the debug info:
# name it by its module path (kernels/cutile/kernels.py), not its place on this disk, so every
# checkout of the same source (CI workspaces, the mutation runner's copies) shares one compile cache.
# The source is registered under that name so cuTile's parser (inspect.findsource) reads this file
# whatever the cwd; the name comes from the module's import name, unique in a process, so a second
# checkout imported under another package name cannot overwrite this entry.
SOURCE_NAME = __name__.replace(".", "/") + ".py"
_text = Path(__file__).read_text()
linecache.cache[SOURCE_NAME] = (len(_text), None, _text.splitlines(True), SOURCE_NAME)


def _relocatable(fn):
    fn.__code__ = fn.__code__.replace(co_filename=SOURCE_NAME)
    return fn


def _kernel(fn):
    return ct.kernel(_relocatable(fn))


# --------------------------------------------------------------------------- 1. chunk cumsum

@_kernel
def chunk_cumsum_kernel(dt, A, dt_bias, dtc, cs,
                        seqlen, chunk_size, has_bias, dt_softplus, dt_min, dt_max,
                        BL: ct.Constant[int], BH: ct.Constant[int]):
    """grid (nchunks, cdiv(h, BH), b). dt (b,l,h) any float; A, dt_bias (h) fp32; dtc, cs (b,h,Lpad) fp32."""
    c = ct.bid(0)
    hb = ct.bid(1)
    b = ct.bid(2)
    n_sub = chunk_size // BL
    a = ct.load(A, (hb,), shape=(BH,), padding_mode=ZERO) * LOG2E
    bias = ct.zeros((BH,), ct.float32)
    if has_bias != 0:
        bias = ct.load(dt_bias, (hb,), shape=(BH,), padding_mode=ZERO)
    carry = ct.zeros((1, BH), ct.float32)
    for s in range(n_sub):
        t0 = c * chunk_size + s * BL                  # first token of this tile
        blk = c * n_sub + s                           # tile index along the sequence
        d = ct.zeros((BL, BH), ct.float32)
        if t0 < seqlen:
            d = ct.load(dt, (b, blk, hb), shape=(1, BL, BH), padding_mode=ZERO).reshape((BL, BH))
            d = d.astype(ct.float32) + bias[None, :]
            if dt_softplus != 0:
                # softplus(d) = log1p(exp(d)), with log1p(e) = log(u) * e / (u - 1), u = 1 + e
                # (accurate where exp(d) is tiny); identity above 20 as in mamba_ssm. NaN stays NaN.
                e = ct.exp(d)
                u = 1.0 + e
                sp = ct.where(u == 1.0, e, ct.log(u) * (e / (u - 1.0)))
                d = ct.where(d > 20.0, d, sp)
            # clamp to dt_limit, always (mamba_ssm: the default (0, inf) maps dt < 0 to 0); NaN stays
            d = ct.minimum(ct.maximum(d, dt_min, propagate_nan=True), dt_max, propagate_nan=True)
            pos = t0 + ct.arange(BL, dtype=ct.int32)
            d = ct.where((pos < seqlen)[:, None], d, 0.0)
        run = ct.cumsum(d * a[None, :], axis=0) + carry
        carry = ct.extract(run, (BL - 1, 0), shape=(1, BH))
        ct.store(dtc, (b, hb, blk), ct.permute(d, (1, 0)).reshape((1, BH, BL)))
        ct.store(cs, (b, hb, blk), ct.permute(run, (1, 0)).reshape((1, BH, BL)))


# --------------------------------------------------------------------------- 2. chunk state + passing

@_relocatable
def _lat(LAT):
    """Load latency hint from a constant: 0 lets the compiler choose."""
    return ct.static_eval(None if LAT == 0 else LAT)


@_kernel
def chunk_state_kernel(x, Bm, dtc, cs, init, seq_idx, states, final,
                       seqlen, chunk_size, nchunks, heads_per_group, has_init, has_seq,
                       BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int],
                       PF: ct.Constant[int], LAT: ct.Constant[int], SLAT: ct.Constant[int],
                       FAST: ct.Constant[int], SPLIT: ct.Constant[int], SWAP: ct.Constant[int],
                       DLAT: ct.Constant[int]):
    """grid (cdiv(p,BP) * cdiv(n,BN), h, b). SLAT: latency hint of the state stores (0: none).
    DLAT (FAST path only): latency hint of the per-chunk dt and cumsum loads, which sit on the
    sequential loop's critical path (TileGym tunes the same hint on its decay loads).
    FAST = chunk_size (= BL): the launcher vouches that seqlen % chunk_size == 0 and there is no
    seq_idx, and _state_chunks runs (no masks, one tile per chunk); FAST = 0: _state_tiles.
    SPLIT (FAST path only; the general path ignores it): 1 computes each chunk's product from zero
    and adds it to the decayed carried state, 0 accumulates the product into the decayed state.
    SWAP (FAST path only): 1 carries the state transposed, (BN, BP) = (B w)^T x, stored and loaded
    through a permuted tile space so memory keeps the (p, n) layout; 0 carries x^T (B w).
    """
    if FAST != 0:
        _state_chunks(x, Bm, dtc, cs, init, states, final, nchunks, heads_per_group, has_init,
                      BP, BN, FAST, LAT, SLAT, SPLIT, SWAP, DLAT)
    else:
        _state_tiles(x, Bm, dtc, cs, init, seq_idx, states, final,
                     seqlen, chunk_size, nchunks, heads_per_group, has_init, has_seq, BL, BP, BN, PF, LAT, SLAT)


@_relocatable
def _state_chunks(x, Bm, dtc, cs, init, states, final, nchunks, heads_per_group, has_init,
                  BP: ct.Constant[int], BN: ct.Constant[int], CH: ct.Constant[int],
                  LAT: ct.Constant[int], SLAT: ct.Constant[int], SPLIT: ct.Constant[int],
                  SWAP: ct.Constant[int], DLAT: ct.Constant[int]):
    """chunk_state_kernel on an aligned problem without seq_idx: one CH-token tile per chunk and a
    straight-line loop body (store the state entering chunk c, load its operands, decay, one mma);
    no position or sequence masks, no sub-tile bookkeeping, the chunk-end decay taken from the
    loaded cs tile instead of a separate scalar load. Same arithmetic as _state_tiles at BL = CH.
    SPLIT=1: the chunk's product starts from zero and is added after, so successive products do not
    wait on each other's accumulator (one more fp32 add per element; other rounding, not other math)."""
    col = ct.bid(0)
    head = ct.bid(1)
    bi = ct.bid(2)
    n_cols = ct.cdiv(Bm.shape[3], BN)
    ptile = col // n_cols
    ntile = col % n_cols
    grp = head // heads_per_group
    # SWAP: the (BN, BP) transpose of the state, in the tile space of (b, h, n, p) / (b, c, h, n, p)
    rows, cols = (BN, BP) if SWAP != 0 else (BP, BN)
    at = (ntile, ptile) if SWAP != 0 else (ptile, ntile)
    perm4 = (0, 1, 3, 2) if SWAP != 0 else (0, 1, 2, 3)
    perm5 = (0, 1, 2, 4, 3) if SWAP != 0 else (0, 1, 2, 3, 4)
    carried = ct.zeros((rows, cols), ct.float32)
    if has_init != 0:
        carried = ct.load(init, (bi, head, at[0], at[1]), shape=(1, 1, rows, cols), order=perm4,
                          padding_mode=ZERO).reshape((rows, cols))
    for c in range(nchunks):
        ct.store(states, (bi, c, head, at[0], at[1]), carried.reshape((1, 1, 1, rows, cols)).astype(states.dtype),
                 order=perm5, latency=_lat(SLAT))
        xt = ct.load(x, (bi, c, head, ptile), shape=(1, CH, 1, BP), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((CH, BP))
        bt = ct.load(Bm, (bi, c, grp, ntile), shape=(1, CH, 1, BN), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((CH, BN))
        dtt = ct.load(dtc, (bi, head, c), shape=(1, 1, CH), latency=_lat(DLAT)).reshape((CH,))
        cst = ct.load(cs, (bi, head, c), shape=(1, 1, CH), latency=_lat(DLAT)).reshape((CH,))
        end = ct.extract(cst, (CH - 1,), shape=(1,))
        scaled = (bt.astype(ct.float32) * (ct.exp2(end - cst) * dtt)[:, None]).astype(x.dtype)
        lhs, rhs = (ct.transpose(scaled), xt) if SWAP != 0 else (ct.transpose(xt), scaled)
        if SPLIT != 0:
            own = ct.mma(lhs, rhs, ct.zeros((rows, cols), ct.float32))
            carried = carried * ct.exp2(end).reshape((1, 1)) + own
        else:
            carried = ct.mma(lhs, rhs, carried * ct.exp2(end).reshape((1, 1)))
    ct.store(final, (bi, head, at[0], at[1]), carried.reshape((1, 1, rows, cols)), order=perm4, latency=_lat(SLAT))


@_relocatable
def _state_tiles(x, Bm, dtc, cs, init, seq_idx, states, final,
                 seqlen, chunk_size, nchunks, heads_per_group, has_init, has_seq,
                 BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int],
                 PF: ct.Constant[int], LAT: ct.Constant[int], SLAT: ct.Constant[int]):
    """chunk_state_kernel for any problem.

    x (b,l,h,p), Bm (b,l,g,n) in the input dtype; dtc, cs (b,h,Lpad) fp32 (cs repeats its last
    value past seqlen); init (b,h,p,n) fp32; seq_idx (b,l) int32; states (b,nchunks,h,p,n) in the
    state dtype; final (b,h,p,n) fp32.

    One sequential loop over the BL-token tiles of the sequence, the state carried in fp32
    registers. At a chunk's first tile the state is decayed to the chunk end (or dropped where the
    sequence changes); every tile adds x^T (B * 2^(cs_last - cs) * dt); after a chunk's last tile
    the state is stored as the state entering the next chunk. Loads come before the store in each
    iteration, and with PF=1 the next tile's operands (and the next chunk's end values) are loaded
    one iteration ahead, so memory latency overlaps the product instead of following it.
    """
    tile = ct.bid(0)
    hh = ct.bid(1)
    b = ct.bid(2)
    n_ntiles = ct.cdiv(Bm.shape[3], BN)
    pt = tile // n_ntiles
    nt = tile % n_ntiles
    g = hh // heads_per_group
    n_sub = chunk_size // BL
    ntiles = ct.cdiv(seqlen, BL)

    state = ct.zeros((BP, BN), ct.float32)
    if has_init != 0:
        state = ct.load(init, (b, hh, pt, nt), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))
    ct.store(states, (b, 0, hh, pt, nt), state.reshape((1, 1, 1, BP, BN)).astype(states.dtype),
             latency=_lat(SLAT))
    seq_prev = ct.full((), 0, ct.int32)            # initial_states belong to sequence 0
    # chunk 0's end values and tile 0's operands
    te = ct.minimum(chunk_size, seqlen) - 1
    cs_last = ct.load(cs, (b, hh, te), shape=())
    seq_last = ct.full((), 0, ct.int32)
    if has_seq != 0:
        seq_last = ct.load(seq_idx, (b, te), shape=())
    xs = ct.load(x, (b, 0, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BP))
    bs = ct.load(Bm, (b, 0, g, nt), shape=(1, BL, 1, BN), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BN))
    dts = ct.load(dtc, (b, hh, 0), shape=(1, 1, BL)).reshape((BL,))
    css = ct.load(cs, (b, hh, 0), shape=(1, 1, BL)).reshape((BL,))
    for t in range(ntiles):
        c = t // n_sub
        sub = t - c * n_sub
        if PF == 0:
            if t > 0:
                xs = ct.load(x, (b, t, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO,
                             latency=_lat(LAT)).reshape((BL, BP))
                bs = ct.load(Bm, (b, t, g, nt), shape=(1, BL, 1, BN), padding_mode=ZERO,
                             latency=_lat(LAT)).reshape((BL, BN))
                dts = ct.load(dtc, (b, hh, t), shape=(1, 1, BL)).reshape((BL,))
                css = ct.load(cs, (b, hh, t), shape=(1, 1, BL)).reshape((BL,))
                if sub == 0:
                    te = ct.minimum(c * chunk_size + chunk_size, seqlen) - 1
                    cs_last = ct.load(cs, (b, hh, te), shape=())
                    if has_seq != 0:
                        seq_last = ct.load(seq_idx, (b, te), shape=())
        xc, bc, dtc_t, csc, csl, sql = xs, bs, dts, css, cs_last, seq_last
        if PF != 0:
            if t + 1 < ntiles:
                xs = ct.load(x, (b, t + 1, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO,
                             latency=_lat(LAT)).reshape((BL, BP))
                bs = ct.load(Bm, (b, t + 1, g, nt), shape=(1, BL, 1, BN), padding_mode=ZERO,
                             latency=_lat(LAT)).reshape((BL, BN))
                dts = ct.load(dtc, (b, hh, t + 1), shape=(1, 1, BL)).reshape((BL,))
                css = ct.load(cs, (b, hh, t + 1), shape=(1, 1, BL)).reshape((BL,))
                if sub == n_sub - 1:                                       # t + 1 starts chunk c + 1
                    te = ct.minimum(c * chunk_size + 2 * chunk_size, seqlen) - 1
                    cs_last = ct.load(cs, (b, hh, te), shape=())
                    if has_seq != 0:
                        seq_last = ct.load(seq_idx, (b, te), shape=())
        keep = (t * BL + ct.arange(BL, dtype=ct.int32)) < seqlen
        if has_seq != 0:
            seqs = ct.load(seq_idx, (b, t), shape=(1, BL), padding_mode=ZERO).reshape((BL,))
            keep = keep & (seqs == sql)
        w = ct.where(keep, ct.exp2(csl - csc) * dtc_t, 0.0)
        bw = (bc.astype(ct.float32) * w[:, None]).astype(x.dtype)
        if sub == 0:
            # select, not multiply, so a NaN state does not cross a sequence boundary
            state = ct.where(sql == seq_prev, state * ct.exp2(csl), 0.0)
            seq_prev = sql
        state = ct.mma(ct.transpose(xc), bw, state)
        if sub == n_sub - 1:
            if c + 1 < nchunks:
                ct.store(states, (b, c + 1, hh, pt, nt),
                         state.reshape((1, 1, 1, BP, BN)).astype(states.dtype), latency=_lat(SLAT))
    ct.store(final, (b, hh, pt, nt), state.reshape((1, 1, BP, BN)))


# --------------------------------------------------------------------------- 3. chunk scan (output)

@_kernel
def chunk_scan_kernel(x, z, Bm, Cm, dtc, cs, states, D, seq_idx, out,
                      seqlen, chunk_size, nchunks, heads_per_group, has_seq, has_d, has_z,
                      BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int],
                      LAT: ct.Constant[int], PERSIST: ct.Constant[int], FAST: ct.Constant[int],
                      FTZ: ct.Constant[int], FACT: ct.Constant[int], HB: ct.Constant[int]):
    """1-D grid over (b, chunk, row tile, p tile, head), head fastest so the heads of a group
    read the same B/C tiles back to back.

    x, z, out (b,l,h,p); Bm, Cm (b,l,g,n); dtc, cs (b,h,Lpad) fp32; states (b,nchunks,h,p,n);
    D (h,p) or (h,1) fp32; seq_idx (b,l) int32. Each block computes BL rows x BP columns of y:
        y_i = sum_{j<=i, same seq} (C_i . B_j) 2^(cs_i - cs_j) dt_j x_j      (C B^T on chip)
            + [seq_i == seq at previous chunk end] 2^(cs_i) C_i . S_in
            + D x_i,   then  y *= silu(z)
    The dstate loop computes C_i S_in^T and the diagonal score tile C_i B_i^T from one load of C_i;
    the column tiles left of the diagonal (chunks longer than BL) follow.
    PERSIST=1: a grid of a few blocks per SM loops over the tiles (grid-stride).
    FAST = chunk_size (the table's rows for aligned problems): the launcher vouches that seqlen %
    chunk_size == 0 and there is no seq_idx; _scan_chunk computes one BL-row tile of a chunk per block
    unmasked (FAST = BL: the whole chunk; FAST a multiple of BL: one of its row tiles).
    FTZ (FAST path only): 1 flushes the score tiles' decays exp2(cs_i - cs_j) below 2^-126 to zero, one
    MUFU per element instead of four instructions (the denormal range fix-up); such a decay is below
    the rounding of any term it multiplies.
    FACT (FAST path, chunk = BL only): where every |cs| of the chunk is below FACT_RANGE, the decay is
    factored, 2^(cs_i - cs_j) dt_j = 2^cs_i * (2^-cs_j dt_j): the score tile takes one multiply per
    element (by the column factor) and the row factor scales the finished row, instead of a subtract,
    an exp2 and two multiplies per element. The bound keeps both factors within 2^64, so nothing
    overflows fp32 (terms up to 2^64 |C.B x|); a chunk outside it (or with NaN/Inf) takes the plain path.
    HB = 2 (FAST path, chunk = BL; the launcher's promise: heads per group even): each block computes
    two heads of one group, whose C and B loads and score tile C B^T are the same: one score product
    and one C/B load per pair, and twice the x and state loads in flight per block.
    """
    if HB == 2:
        _scan_pair(ct.bid(0), x, z, Bm, Cm, dtc, cs, states, D, out, nchunks, heads_per_group, has_d, has_z,
                   BL, BP, BN, LAT, FTZ, FACT)
    elif PERSIST == 0:
        _scan_block(ct.bid(0), x, z, Bm, Cm, dtc, cs, states, D, seq_idx, out,
                    seqlen, chunk_size, nchunks, heads_per_group, has_seq, has_d, has_z, BL, BP, BN, LAT, FAST,
                    FTZ, FACT)
    else:
        # blocks of both paths (FAST: BL divides chunk_size, the launcher's promise)
        total = x.shape[0] * nchunks * (chunk_size // BL) * ct.cdiv(x.shape[3], BP) * x.shape[2]
        for pid in range(ct.bid(0), total, ct.num_blocks(0)):
            _scan_block(pid, x, z, Bm, Cm, dtc, cs, states, D, seq_idx, out,
                        seqlen, chunk_size, nchunks, heads_per_group, has_seq, has_d, has_z, BL, BP, BN, LAT, FAST,
                        FTZ, FACT)


@_relocatable
def _block_tile(pid, n_heads, n_ptiles, n_sub, nchunks):
    """(b, chunk, row tile in the chunk, p tile, head) of chunk_scan's flat block index `pid`, head
    fastest (so the heads of a group read the same B/C tiles back to back)."""
    h = pid % n_heads
    r = pid // n_heads
    pt = r % n_ptiles
    r = r // n_ptiles
    m = r % n_sub
    r = r // n_sub
    c = r % nchunks
    return r // nchunks, c, m, pt, h


@_relocatable
def _scores(Cm, Bm, b, row, col, g, BL: ct.Constant[int], BN: ct.Constant[int], LAT: ct.Constant[int]):
    """C B^T of token tile `row` (rows) against token tile `col` (columns), group g, summed over the
    dstate tiles: one (BL, BL) fp32 score tile of chunk_scan (LAT: the loads' latency hint, 0: none)."""
    acc = ct.zeros((BL, BL), ct.float32)
    for k in range(ct.cdiv(Bm.shape[3], BN)):
        ck = ct.load(Cm, (b, row, g, k), shape=(1, BL, 1, BN), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BL, BN))
        bk = ct.load(Bm, (b, col, g, k), shape=(1, BL, 1, BN), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BL, BN))
        acc = ct.mma(ck, ct.transpose(bk), acc)
    return acc


@_relocatable
def _d_row(D, head, ptile, BP: ct.Constant[int]):
    """The (1, BP) tile of D for head `head`, p tile `ptile`: D is (h, p), or (h, 1) with one value per
    head (mamba_ssm's usual D, passed without expanding it on the host), broadcast along p."""
    dv = ct.zeros((1, BP), ct.float32)
    if D.shape[1] == 1:
        dv = dv + ct.load(D, (head, 0), shape=(1, 1))
    else:
        dv = ct.load(D, (head, ptile), shape=(1, BP), padding_mode=ZERO)
    return dv


@_relocatable
def _scan_block(pid, x, z, Bm, Cm, dtc, cs, states, D, seq_idx, out,
                seqlen, chunk_size, nchunks, heads_per_group, has_seq, has_d, has_z,
                BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], LAT: ct.Constant[int],
                FAST: ct.Constant[int], FTZ: ct.Constant[int], FACT: ct.Constant[int]):
    """Block `pid` of chunk_scan_kernel, by path: one unmasked row tile of an aligned chunk (FAST), or
    one row tile of one head."""
    if FAST != 0:
        _scan_chunk(pid, x, z, Bm, Cm, dtc, cs, states, D, out, nchunks, heads_per_group, has_d, has_z,
                    BL, BP, BN, FAST, LAT, FTZ, FACT)
    else:
        _scan_tile(pid, x, z, Bm, Cm, dtc, cs, states, D, seq_idx, out,
                   seqlen, chunk_size, nchunks, heads_per_group, has_seq, has_d, has_z, BL, BP, BN, LAT)


@_relocatable
def _scan_chunk(pid, x, z, Bm, Cm, dtc, cs, states, D, out, nchunks, heads_per_group, has_d, has_z,
                BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], CH: ct.Constant[int],
                LAT: ct.Constant[int], FTZ: ct.Constant[int], FACT: ct.Constant[int]):
    """One BL-row tile of an aligned CH-token chunk (CH a multiple of BL; no seq_idx): _scan_tile's
    arithmetic without its position and sequence masks or past-the-end guard. CH = BL (the table's
    chunk-64 rows): the whole chunk, every load issued before the first product, no column tiles.
    CH > BL: chunks wider than the row tile (fewer chunk states to write and read); columns left of
    the diagonal tile need no mask, since there cs_i - cs_j <= 0. At CH = BL this compiles to the
    same machine code as the earlier whole-chunk-only helper (checked for the table's units)."""
    n_pt = ct.cdiv(x.shape[3], BP)
    n_kt = ct.cdiv(Bm.shape[3], BN)
    n_sub = CH // BL
    bi, c, m, ptile, head = _block_tile(pid, x.shape[2], n_pt, n_sub, nchunks)
    grp = head // heads_per_group
    blk = c * n_sub + m
    cst = ct.load(cs, (bi, head, blk), shape=(1, 1, BL)).reshape((BL,))
    dtt = ct.load(dtc, (bi, head, blk), shape=(1, 1, BL)).reshape((BL,))
    xt = ct.load(x, (bi, blk, head, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO,
                 latency=_lat(LAT)).reshape((BL, BP))
    yt = ct.zeros((BL, BP), ct.float32)
    scores = ct.zeros((BL, BL), ct.float32)
    for k in range(n_kt):
        ct_k = ct.load(Cm, (bi, blk, grp, k), shape=(1, BL, 1, BN), padding_mode=ZERO,
                       latency=_lat(LAT)).reshape((BL, BN))
        bt_k = ct.load(Bm, (bi, blk, grp, k), shape=(1, BL, 1, BN), padding_mode=ZERO,
                       latency=_lat(LAT)).reshape((BL, BN))
        st_k = ct.load(states, (bi, c, head, ptile, k), shape=(1, 1, 1, BP, BN), padding_mode=ZERO,
                       latency=_lat(LAT)).reshape((BP, BN))
        yt = ct.mma(ct_k, ct.transpose(st_k.astype(Cm.dtype)), yt)
        scores = ct.mma(ct_k, ct.transpose(bt_k), scores)
    yt = _chunk_diagonal(scores, yt, cst, dtt, xt, BL, CH, FTZ, FACT)
    ftz = FTZ != 0
    for j in range(m):
        jb = c * n_sub + j
        cbj = _scores(Cm, Bm, bi, blk, jb, grp, BL, BN, LAT)
        cs_j = ct.load(cs, (bi, head, jb), shape=(1, 1, BL)).reshape((BL,))
        dt_j = ct.load(dtc, (bi, head, jb), shape=(1, 1, BL)).reshape((BL,))
        xj = ct.load(x, (bi, jb, head, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BL, BP))
        wj = cbj * ct.exp2(cst[:, None] - cs_j[None, :], flush_to_zero=ftz) * dt_j[None, :]
        yt = ct.mma(wj.astype(x.dtype), xj, yt)
    _chunk_store(yt, xt, z, D, out, bi, blk, head, ptile, has_d, has_z, BL, BP)


@_relocatable
def _chunk_diagonal(scores, yt, cst, dtt, xt, BL: ct.Constant[int], CH: ct.Constant[int],
                    FTZ: ct.Constant[int], FACT: ct.Constant[int]):
    """y of a row tile from its own chunk's diagonal tile: yt (C_i . S_in, not yet decayed) decayed by
    2^cs_i, plus the causal (C_i . B_j) 2^(cs_i - cs_j) dt_j x_j of the tile; factored where FACT allows."""
    ftz = FTZ != 0
    factored = False
    # not for float16: its 5-bit exponent cannot hold the column factor 2^-cs_j (up to 2^64) in wd
    if FACT != 0 and CH == BL and xt.dtype != ct.float16:
        factored = ct.max(ct.abs(cst), propagate_nan=True) < FACT_RANGE
    tok = ct.arange(BL, dtype=ct.int32)
    causal = tok[:, None] >= tok[None, :]
    if factored:
        # y_i = 2^cs_i (C_i . S_in + sum_j<=i (C_i . B_j) (2^-cs_j dt_j) x_j)
        wd = ct.where(causal, scores * (ct.exp2(-cst, flush_to_zero=ftz) * dtt)[None, :], 0.0)
        yt = ct.mma(wd.astype(xt.dtype), xt, yt) * ct.exp2(cst)[:, None]
    else:
        yt = yt * ct.exp2(cst)[:, None]
        # select after the product: above the diagonal exp2 of a positive exponent may overflow
        wd = ct.where(causal, scores * ct.exp2(cst[:, None] - cst[None, :], flush_to_zero=ftz) * dtt[None, :], 0.0)
        yt = ct.mma(wd.astype(xt.dtype), xt, yt)
    return yt


@_relocatable
def _scan_pair(pid, x, z, Bm, Cm, dtc, cs, states, D, out, nchunks, heads_per_group, has_d, has_z,
               BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], LAT: ct.Constant[int],
               FTZ: ct.Constant[int], FACT: ct.Constant[int]):
    """_scan_chunk at chunk = BL for heads 2q and 2q + 1 of one group (HB = 2)."""
    n_pt = ct.cdiv(x.shape[3], BP)
    n_kt = ct.cdiv(Bm.shape[3], BN)
    bi, c, m, ptile, q = _block_tile(pid, x.shape[2] // 2, n_pt, 1, nchunks)
    h0 = 2 * q
    h1 = h0 + 1
    grp = h0 // heads_per_group
    cs0 = ct.load(cs, (bi, h0, c), shape=(1, 1, BL)).reshape((BL,))
    cs1 = ct.load(cs, (bi, h1, c), shape=(1, 1, BL)).reshape((BL,))
    dt0 = ct.load(dtc, (bi, h0, c), shape=(1, 1, BL)).reshape((BL,))
    dt1 = ct.load(dtc, (bi, h1, c), shape=(1, 1, BL)).reshape((BL,))
    x0 = ct.load(x, (bi, c, h0, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BP))
    x1 = ct.load(x, (bi, c, h1, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BP))
    y0 = ct.zeros((BL, BP), ct.float32)
    y1 = ct.zeros((BL, BP), ct.float32)
    scores = ct.zeros((BL, BL), ct.float32)
    for k in range(n_kt):
        ck = ct.load(Cm, (bi, c, grp, k), shape=(1, BL, 1, BN), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BN))
        bk = ct.load(Bm, (bi, c, grp, k), shape=(1, BL, 1, BN), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BN))
        s0 = ct.load(states, (bi, c, h0, ptile, k), shape=(1, 1, 1, BP, BN), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BP, BN))
        s1 = ct.load(states, (bi, c, h1, ptile, k), shape=(1, 1, 1, BP, BN), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BP, BN))
        y0 = ct.mma(ck, ct.transpose(s0.astype(Cm.dtype)), y0)
        y1 = ct.mma(ck, ct.transpose(s1.astype(Cm.dtype)), y1)
        scores = ct.mma(ck, ct.transpose(bk), scores)
    y0 = _chunk_diagonal(scores, y0, cs0, dt0, x0, BL, BL, FTZ, FACT)
    y1 = _chunk_diagonal(scores, y1, cs1, dt1, x1, BL, BL, FTZ, FACT)
    _chunk_store(y0, x0, z, D, out, bi, c, h0, ptile, has_d, has_z, BL, BP)
    _chunk_store(y1, x1, z, D, out, bi, c, h1, ptile, has_d, has_z, BL, BP)


@_relocatable
def _chunk_store(yt, xt, z, D, out, bi, blk, head, ptile, has_d, has_z, BL: ct.Constant[int], BP: ct.Constant[int]):
    """The D skip and z gate of a finished row tile, then its store."""
    if has_d != 0:
        yt = _d_skip(yt, xt, _d_row(D, head, ptile, BP))
    _gate_store(yt, z, out, bi, blk, head, ptile, has_z, BL, BP)


@_relocatable
def _d_skip(yt, xt, dv):
    """y + D x of a row tile (dv: D's (1, BP) row)."""
    return yt + xt.astype(ct.float32) * dv


@_relocatable
def _gate_store(yt, z, out, bi, blk, head, ptile, has_z, BL: ct.Constant[int], BP: ct.Constant[int]):
    """The z gate of a finished row tile (D already added), then its store."""
    if has_z != 0:
        zt = ct.load(z, (bi, blk, head, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO).reshape((BL, BP)).astype(ct.float32)
        yt = yt * (zt / (1.0 + ct.exp(-zt)))
    ct.store(out, (bi, blk, head, ptile), yt.reshape((1, BL, 1, BP)).astype(out.dtype))


@_relocatable
def _scan_tile(pid, x, z, Bm, Cm, dtc, cs, states, D, seq_idx, out,
               seqlen, chunk_size, nchunks, heads_per_group, has_seq, has_d, has_z,
               BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], LAT: ct.Constant[int]):
    """One (b, chunk, row tile, p tile, head) tile of chunk_scan_kernel; pid is its flat index."""
    n_ptiles = ct.cdiv(x.shape[3], BP)
    n_ktiles = ct.cdiv(Bm.shape[3], BN)
    n_sub = chunk_size // BL
    b, c, m, pt, hh = _block_tile(pid, x.shape[2], n_ptiles, n_sub, nchunks)
    g = hh // heads_per_group
    blk = c * n_sub + m                     # this block's row tile along the sequence
    if blk * BL < seqlen:
        pos_i = blk * BL + ct.arange(BL, dtype=ct.int32)
        cs_i = ct.load(cs, (b, hh, blk), shape=(1, 1, BL)).reshape((BL,))
        seq_i = ct.zeros((BL,), ct.int32)
        seq_prev = ct.full((), 0, ct.int32)
        if has_seq != 0:
            seq_i = ct.load(seq_idx, (b, blk), shape=(1, BL), padding_mode=ZERO).reshape((BL,))
            if c > 0:
                seq_prev = ct.load(seq_idx, (b, c * chunk_size - 1), shape=())

        # one pass over dstate: C_i . S_in (incoming state) and C_i . B_i (diagonal scores)
        acc = ct.zeros((BL, BP), ct.float32)
        cb = ct.zeros((BL, BL), ct.float32)
        for k in range(n_ktiles):
            ck = ct.load(Cm, (b, blk, g, k), shape=(1, BL, 1, BN), padding_mode=ZERO,
                         latency=_lat(LAT)).reshape((BL, BN))
            bk = ct.load(Bm, (b, blk, g, k), shape=(1, BL, 1, BN), padding_mode=ZERO,
                         latency=_lat(LAT)).reshape((BL, BN))
            sk = ct.load(states, (b, c, hh, pt, k), shape=(1, 1, 1, BP, BN), padding_mode=ZERO,
                         latency=_lat(LAT)).reshape((BP, BN))
            acc = ct.mma(ck, ct.transpose(sk.astype(Cm.dtype)), acc)
            cb = ct.mma(ck, ct.transpose(bk), cb)
        acc = ct.where((seq_i == seq_prev)[:, None], acc * ct.exp2(cs_i)[:, None], 0.0)

        # diagonal tile: causal mask within the tile
        dt_i = ct.load(dtc, (b, hh, blk), shape=(1, 1, BL)).reshape((BL,))
        keep = (pos_i[:, None] >= pos_i[None, :]) & (pos_i < seqlen)[None, :]
        if has_seq != 0:
            keep = keep & (seq_i[:, None] == seq_i[None, :])
        # select, so exp2 of a positive (masked) exponent never reaches the product
        w = ct.where(keep, cb * ct.exp2(cs_i[:, None] - cs_i[None, :]) * dt_i[None, :], 0.0)
        xi = ct.load(x, (b, blk, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BL, BP))
        acc = ct.mma(w.astype(x.dtype), xi, acc)

        # column tiles j < m of the same chunk (all causal; only the sequence mask applies)
        for j in range(m):
            jb = c * n_sub + j
            cbj = _scores(Cm, Bm, b, blk, jb, g, BL, BN, 0)
            cs_j = ct.load(cs, (b, hh, jb), shape=(1, 1, BL)).reshape((BL,))
            dt_j = ct.load(dtc, (b, hh, jb), shape=(1, 1, BL)).reshape((BL,))
            wj = cbj * ct.exp2(cs_i[:, None] - cs_j[None, :]) * dt_j[None, :]
            if has_seq != 0:
                seq_j = ct.load(seq_idx, (b, jb), shape=(1, BL), padding_mode=ZERO).reshape((BL,))
                wj = ct.where(seq_i[:, None] == seq_j[None, :], wj, 0.0)
            xj = ct.load(x, (b, jb, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO).reshape((BL, BP))
            acc = ct.mma(wj.astype(x.dtype), xj, acc)

        if has_d != 0:
            acc = acc + xi.astype(ct.float32) * _d_row(D, hh, pt, BP)
        if has_z != 0:
            zi = ct.load(z, (b, blk, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO).reshape((BL, BP))
            zf = zi.astype(ct.float32)
            acc = acc * (zf / (1.0 + ct.exp(-zf)))
        ct.store(out, (b, blk, hh, pt), acc.reshape((1, BL, 1, BP)).astype(out.dtype))


# --------------------------------------------------------------------------- 3'. chunk walk (state and output fused)

@_kernel
def chunk_walk_kernel(x, z, Bm, Cm, dtc, cs, init, D, out, final,
                      nchunks, heads_per_group, has_init, has_d, has_z,
                      BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], LAT: ct.Constant[int],
                      FTZ: ct.Constant[int], FACT: ct.Constant[int], SPLIT: ct.Constant[int],
                      ORD: ct.Constant[int]):
    """grid (cdiv(p,BP), h, b): chunk_state_kernel and chunk_scan_kernel in one pass, for aligned
    problems without seq_idx at chunk size BL (the launcher's promise) and BN = dstate (one tile).

    Each block walks its head's chunks in order with the state in fp32 registers, like chunk_state;
    at chunk c it first computes y of the chunk from the state entering it (rounded to the input
    dtype, as chunk_state stores it and chunk_scan reads it: the same operands), then adds the chunk
    to the state. The chunk states never reach memory: x is read once and the (b, nchunks, h, p, n)
    states are neither written nor read, which is as many bytes as x at dstate = chunk = 64. The
    price is parallelism: b * h * cdiv(p, BP) blocks, each a chain of nchunks steps, so the table
    takes it only where there are blocks enough to fill the GPU.
    SPLIT as in chunk_state: 1 adds the chunk's product to the decayed state after it, 0 accumulates
    into it. D's row is loaded once, before the chunk loop: it is the walk's one load that TMA cannot
    take, and reloaded in every chunk it cost the H200 4-9% of the walk (lab/reports/2026-12-04-walk-d-row.md).
    ORD, the order of a step's products (_walk_step): 0 C S^T first, as above; 1 (SPLIT=1) the three
    that do not read the walked state (C B^T, the diagonal tile times x, x^T B) first, then C S^T and
    the state update. On the H200 ORD=1 took 14-17% off the walk at dstate 64; the other orders
    measured there, and at dstate 128, were slower and were dropped (lab/reports/2026-12-04-walk-order.md,
    lab/reports/2026-12-04-walk-x-wait.md).
    x, z, out (b,l,h,p); Bm, Cm (b,l,g,n); dtc, cs (b,h,Lpad) fp32; init, final (b,h,p,n) fp32.
    """
    ptile = ct.bid(0)
    head = ct.bid(1)
    bi = ct.bid(2)
    grp = head // heads_per_group
    walked = ct.zeros((BP, BN), ct.float32)
    if has_init != 0:
        walked = ct.load(init, (bi, head, ptile, 0), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))
    dv = ct.zeros((1, BP), ct.float32)
    if has_d != 0:
        dv = _d_row(D, head, ptile, BP)
    for c in range(nchunks):
        cst, dtt = _walk_decays(dtc, cs, bi, c, head, BL)
        xt, ck, bk = _walk_tiles(x, Bm, Cm, bi, c, head, grp, ptile, BL, BP, BN, LAT)
        if ORD != 0:
            walked = _walk_step(walked, cst, dtt, xt, ck, bk, z, dv, out, bi, c, head, ptile, has_d, has_z,
                                BL, BP, BN, FTZ, FACT)
        else:
            walked = _walk_chunk(walked, cst, dtt, xt, ck, bk, z, dv, out, bi, c, head, ptile, has_d, has_z,
                                 BL, BP, BN, FTZ, FACT, SPLIT)
    ct.store(final, (bi, head, ptile, 0), walked.reshape((1, 1, BP, BN)))


@_relocatable
def _walk_decays(dtc, cs, bi, c, head, BL: ct.Constant[int]):
    """Chunk c's cumsum and dt rows of the walk."""
    cst = ct.load(cs, (bi, head, c), shape=(1, 1, BL), padding_mode=ZERO).reshape((BL,))
    dtt = ct.load(dtc, (bi, head, c), shape=(1, 1, BL), padding_mode=ZERO).reshape((BL,))
    return cst, dtt


@_relocatable
def _walk_tiles(x, Bm, Cm, bi, c, head, grp, ptile, BL: ct.Constant[int], BP: ct.Constant[int],
                BN: ct.Constant[int], LAT: ct.Constant[int]):
    """Chunk c's x, C and B tiles of the walk."""
    xt = ct.load(x, (bi, c, head, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO,
                 latency=_lat(LAT)).reshape((BL, BP))
    ck = ct.load(Cm, (bi, c, grp, 0), shape=(1, BL, 1, BN), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BN))
    bk = ct.load(Bm, (bi, c, grp, 0), shape=(1, BL, 1, BN), padding_mode=ZERO, latency=_lat(LAT)).reshape((BL, BN))
    return xt, ck, bk


@_relocatable
def _walk_step(walked, cst, dtt, xt, ck, bk, z, dv, out, bi, c, head, ptile, has_d, has_z,
               BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], FTZ: ct.Constant[int],
               FACT: ct.Constant[int]):
    """_walk_chunk with the state product x^T B issued before C S^T (ORD=1, SPLIT=1): y of chunk c from
    the state entering it as C S^T decayed by 2^cs plus the diagonal part, stored; -> the state leaving
    it, the entering one decayed plus the chunk's own."""
    entering = walked.astype(ck.dtype)
    yd = _walk_diagonal(cst, dtt, xt, ck, bk, BL, BP, FTZ, FACT)
    own, end = _own_state(xt, bk, cst, dtt, BL, BP, BN)
    yt = ct.mma(ck, ct.transpose(entering), ct.zeros((BL, BP), ct.float32))
    yt = yt * ct.exp2(cst)[:, None] + yd
    if has_d != 0:
        yt = _d_skip(yt, xt, dv)
    _gate_store(yt, z, out, bi, c, head, ptile, has_z, BL, BP)
    return _carry(walked, own, end)


@_relocatable
def _walk_diagonal(cst, dtt, xt, ck, bk, BL: ct.Constant[int], BP: ct.Constant[int], FTZ: ct.Constant[int],
                   FACT: ct.Constant[int]):
    """y's part from the chunk's own tokens, decayed: the causal (C B^T) 2^(cs_i - cs_j) dt_j x_j."""
    scores = ct.mma(ck, ct.transpose(bk), ct.zeros((BL, BL), ct.float32))
    return _chunk_diagonal(scores, ct.zeros((BL, BP), ct.float32), cst, dtt, xt, BL, BL, FTZ, FACT)


@_relocatable
def _walk_chunk(walked, cst, dtt, xt, ck, bk, z, dv, out, bi, c, head, ptile, has_d, has_z,
                BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], FTZ: ct.Constant[int],
                FACT: ct.Constant[int], SPLIT: ct.Constant[int]):
    """One chunk of the walk: y of chunk c from the state entering it, stored; -> the state leaving it.
    dv: D's row (loaded before the chunk loop)."""
    yt = ct.mma(ck, ct.transpose(walked.astype(ck.dtype)), ct.zeros((BL, BP), ct.float32))
    scores = ct.mma(ck, ct.transpose(bk), ct.zeros((BL, BL), ct.float32))
    yt = _chunk_diagonal(scores, yt, cst, dtt, xt, BL, BL, FTZ, FACT)
    if has_d != 0:
        yt = _d_skip(yt, xt, dv)
    _gate_store(yt, z, out, bi, c, head, ptile, has_z, BL, BP)
    walked, _ = _state_step(walked, xt, bk, cst, dtt, BL, BP, BN, SPLIT)
    return walked


@_relocatable
def _own_state(xt, bk, cst, dtt, BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int]):
    """A chunk's own (BP, BN) fp32 state, x^T (B 2^(end - cs) dt), and end, its last cumsum (log2 units)."""
    scaled, end = _decayed_b(bk, cst, dtt, xt.dtype, BL)
    return ct.mma(ct.transpose(xt), scaled, ct.zeros((BP, BN), ct.float32)), end


@_relocatable
def _carry(walked, own, end):
    """The state leaving a chunk (SPLIT=1): the state entering it decayed by 2^end, plus its own."""
    return walked * ct.exp2(end).reshape((1, 1)) + own


@_relocatable
def _decayed_b(bk, cst, dtt, dtype, BL: ct.Constant[int]):
    """B 2^(end - cs) dt of a chunk in `dtype` (the state product's right operand), and end."""
    end = ct.extract(cst, (BL - 1,), shape=(1,))
    return (bk.astype(ct.float32) * (dtt * ct.exp2(end - cst))[:, None]).astype(dtype), end


@_relocatable
def _state_step(walked, xt, bk, cst, dtt, BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int],
                SPLIT: ct.Constant[int]):
    """The (BP, BN) fp32 state carried across one aligned BL-token chunk: decayed by 2^end (end = the
    chunk's last cumsum, log2 units) plus x^T (B 2^(end - cs) dt) of the chunk. -> (state, end).
    SPLIT as in chunk_state: 1 adds the chunk's product to the decayed state after it, 0 accumulates
    into it. The walk and the segmented walk's pass 1 carry their states through this one step."""
    if SPLIT != 0:
        own, end = _own_state(xt, bk, cst, dtt, BL, BP, BN)
        walked = _carry(walked, own, end)
    else:
        scaled, end = _decayed_b(bk, cst, dtt, xt.dtype, BL)
        walked = ct.mma(ct.transpose(xt), scaled, walked * ct.exp2(end).reshape((1, 1)))
    return walked, end


# --------------------------------------------------------------------------- 3''. segmented walk (passes 1 and 2)
# Pass 3 is chunk_walk_kernel on each segment from its entering state: the launcher views x, z, B, C and
# the cumsum (computed on the same view) as a batch of b*S segments, row b*S + s holding segment s of
# sample b (aligned segments of whole chunks: a free reshape of the contiguous arrays).

@_kernel
def segment_state_kernel(x, Bm, dtc, cs, ends, decay, nchunks, heads_per_group,
                         BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], LAT: ct.Constant[int],
                         DLAT: ct.Constant[int], SPLIT: ct.Constant[int]):
    """Pass 1, grid (cdiv(p,BP) * cdiv(n,BN), h, b*S) on the segment views (nchunks: chunks per
    segment, chunk = BL; aligned, no seq_idx: the launcher's promise): each block walks its segment's
    chunks from a zero state, as chunk_walk carries its state, and stores the segment's end state
    (ends (b*S, h, p, n) fp32) and its total decay, the sum of its chunks' cumsum ends in log2 units
    (decay (b*S, h, blocks per head) fp32: every block of a head stores the same value in its own slot,
    so no store is conditional). DLAT: latency hint of the dt and cumsum loads (chunk_state's). Those
    rows go through TMA: loaded without it (plain global loads) pass 1 ran 12-15% slower on the H200
    (lab/reports/2026-12-04-walk-x-wait.md)."""
    col = ct.bid(0)
    head = ct.bid(1)
    bs = ct.bid(2)
    n_cols = ct.cdiv(Bm.shape[3], BN)
    ptile = col // n_cols
    ntile = col % n_cols
    grp = head // heads_per_group
    own = ct.zeros((BP, BN), ct.float32)
    total = ct.zeros((1,), ct.float32)
    for c in range(nchunks):
        xt = ct.load(x, (bs, c, head, ptile), shape=(1, BL, 1, BP), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BL, BP))
        bt = ct.load(Bm, (bs, c, grp, ntile), shape=(1, BL, 1, BN), padding_mode=ZERO,
                     latency=_lat(LAT)).reshape((BL, BN))
        dtt = ct.load(dtc, (bs, head, c), shape=(1, 1, BL), latency=_lat(DLAT)).reshape((BL,))
        cst = ct.load(cs, (bs, head, c), shape=(1, 1, BL), latency=_lat(DLAT)).reshape((BL,))
        own, end = _state_step(own, xt, bt, cst, dtt, BL, BP, BN, SPLIT)
        total = total + end
    ct.store(ends, (bs, head, ptile, ntile), own.reshape((1, 1, BP, BN)))
    ct.store(decay, (bs, head, col), total.reshape((1, 1, 1)))


@_kernel
def segment_pass_kernel(ends, decay, init, entering, final, nseg, has_init,
                        BP: ct.Constant[int], BN: ct.Constant[int]):
    """Pass 2, grid (cdiv(p,BP) * cdiv(n,BN), h, b): the scan over a sequence's nseg segments,
    entering_0 = initial_states (or zero), entering_(s+1) = 2^decay_s entering_s + end_s, all fp32;
    stores each segment's entering state (entering (b*S, h, p, n), pass 3's initial states) and the
    last one, the final state (final (b, h, p, n)). ends, decay: pass 1's; init (b, h, p, n)."""
    col = ct.bid(0)
    head = ct.bid(1)
    bi = ct.bid(2)
    n_cols = ct.cdiv(ends.shape[3], BN)
    ptile = col // n_cols
    ntile = col % n_cols
    carried = ct.zeros((BP, BN), ct.float32)
    if has_init != 0:
        carried = ct.load(init, (bi, head, ptile, ntile), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))
    for s in range(nseg):
        seg = bi * nseg + s
        ct.store(entering, (seg, head, ptile, ntile), carried.reshape((1, 1, BP, BN)))
        end_state = ct.load(ends, (seg, head, ptile, ntile), shape=(1, 1, BP, BN), padding_mode=ZERO).reshape((BP, BN))
        carried = carried * ct.exp2(ct.load(decay, (seg, head, 0), shape=())) + end_state
    ct.store(final, (bi, head, ptile, ntile), carried.reshape((1, 1, BP, BN)))


# --------------------------------------------------------------------------- 4. varlen states

@_kernel
def varlen_state_kernel(x, Bm, dtc, cs, states, cu_seqlens, out,
                        chunk_size, heads_per_group,
                        BL: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int]):
    """grid (nseq * h, cdiv(p,BP) * cdiv(n,BN)). Batch 1: x (1,l,h,p), Bm (1,l,g,n), dtc/cs (1,h,Lpad),
    states (1,nchunks,h,p,n), cu_seqlens (nseq+1) int32, out (nseq,h,p,n) in the state dtype.

    The state at token end-1 of sequence s is the part of its chunk from max(start, chunk start)
    decayed to end-1, plus the state entering that chunk decayed likewise when it belongs to the
    sequence: the sequence began before the chunk, or it starts at token 0, where the state entering
    chunk 0 is initial_states (mamba_ssm's chunk_state_varlen tests only the first, so its varlen
    state 0 misses them: docs/findings/mamba-ssm-varlen-state0.md). An empty sequence gets zeros.
    """
    nheads = x.shape[2]
    sid = ct.bid(0) // nheads
    hh = ct.bid(0) % nheads
    n_ntiles = ct.cdiv(Bm.shape[3], BN)
    pt = ct.bid(1) // n_ntiles
    nt = ct.bid(1) % n_ntiles
    g = hh // heads_per_group
    start = ct.load(cu_seqlens, (sid,), shape=())
    end = ct.load(cu_seqlens, (sid + 1,), shape=())
    acc = ct.zeros((BP, BN), ct.float32)
    if end > start:
        c = (end - 1) // chunk_size
        c0 = c * chunk_size
        n_sub = chunk_size // BL
        cs_last = ct.load(cs, (0, hh, end - 1), shape=())
        for s in range(ct.cdiv(end - c0, BL)):
            blk = c * n_sub + s
            pos = blk * BL + ct.arange(BL, dtype=ct.int32)
            dts = ct.load(dtc, (0, hh, blk), shape=(1, 1, BL)).reshape((BL,))
            css = ct.load(cs, (0, hh, blk), shape=(1, 1, BL)).reshape((BL,))
            keep = (pos >= start) & (pos < end)
            w = ct.where(keep, ct.exp2(cs_last - css) * dts, 0.0)
            xs = ct.load(x, (0, blk, hh, pt), shape=(1, BL, 1, BP), padding_mode=ZERO).reshape((BL, BP))
            bs = ct.load(Bm, (0, blk, g, nt), shape=(1, BL, 1, BN), padding_mode=ZERO).reshape((BL, BN))
            bw = (bs.astype(ct.float32) * w[:, None]).astype(x.dtype)
            acc = ct.mma(ct.transpose(xs), bw, acc)
        if (start < c0) | (start == 0):
            st = ct.load(states, (0, c, hh, pt, nt), shape=(1, 1, 1, BP, BN),
                         padding_mode=ZERO).reshape((BP, BN))
            acc = acc + st.astype(ct.float32) * ct.exp2(cs_last)
    ct.store(out, (sid, hh, pt, nt), acc.reshape((1, 1, BP, BN)).astype(out.dtype))
