"""TileGym 1.5.1: mamba2_chunk_backward returns NaN in ddt at every token whose dt is 0, where the true
gradient is finite.

    python tilegym_ddt_zero_dt.py [--fixed]

Needs a CUDA GPU, torch and cuda-tile; imports nothing but torch and tilegym (found on sys.path, e.g.
PYTHONPATH). --fixed runs a copy of the tilegym package with the one-line fix applied (FIX below), to
show the fix gives finite values that match float64.

One sequence of 128 tokens (two chunks of 64), 4 heads, headdim 16, dstate 16, fp32, with an initial
state and a final-state gradient; every 5th token has dt = 0 (as padding to a whole number of chunks,
which TileGym requires, or a negative dt clamped to 0). Prints, per gradient, TileGym's non-finite
entries and its normwise relative error against float64 autograd through the recurrence
h_t = exp(dt_t a) h_{t-1} + dt_t x_t b_t^T, y_t = c_t . h_t + d x_t, computed here on the CPU; then the
first non-finite ddt entries next to the float64 values.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile

import torch

MODULE = "tilegym.ops.cutile.mamba2"
BUGGY_FILE = os.path.join("ops", "cutile", "mamba2.py")
FIX = ("        tile=(rs / dt_tile).reshape((1, chunk_size, 1)).astype(ddt.dtype),\n",
       "        tile=ct.sum(xdoT * W * rawT, axis=1).reshape((1, chunk_size, 1)).astype(ddt.dtype),\n")
BATCH, SEQLEN, NHEADS, NGROUPS, HEADDIM, DSTATE, CHUNK, SKIP_EVERY = 1, 128, 4, 1, 16, 16, 64, 5
NAMES = ("dx", "da", "db", "dc", "dd", "ddt", "dinit_state")


def find_package() -> str:
    spec = importlib.util.find_spec("tilegym")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no tilegym package on sys.path (PYTHONPATH): install tilegym 1.5.1 or unpack its wheel")
    return os.path.abspath(list(spec.submodule_search_locations)[0])


def with_fix(pkg_dir: str) -> str:
    """A copy of the tilegym package with FIX applied to ops/cutile/mamba2.py; returns the folder to put
    first on sys.path."""
    root = tempfile.mkdtemp(prefix="tilegym-fixed-")
    shutil.copytree(pkg_dir, os.path.join(root, "tilegym"))
    path = os.path.join(root, "tilegym", BUGGY_FILE)
    text = open(path).read()
    if text.count(FIX[0]) != 1:
        sys.exit(f"{path}: the line to fix occurs {text.count(FIX[0])} times (expected once): {FIX[0]!r}")
    with open(path, "w") as f:
        f.write(text.replace(FIX[0], FIX[1]))
    return root


def version(dist: str) -> str:
    import importlib.metadata as md
    try:
        return md.version(dist)
    except md.PackageNotFoundError:    # an unpacked wheel on PYTHONPATH has no metadata
        return "(version unknown: not installed as a distribution)"


def problem(device="cpu"):
    """mamba2_chunk_backward's inputs (fp32): x, a, b, c, d, dt, init_state, dout, dfinal_state."""
    g = torch.Generator().manual_seed(0)
    b, l, h, ng, p, n = BATCH, SEQLEN, NHEADS, NGROUPS, HEADDIM, DSTATE
    dt = 0.01 + 0.1 * torch.rand(b, l, h, generator=g)
    dt[:, ::SKIP_EVERY] = 0.0
    kw = dict(x=torch.randn(b, l, h, p, generator=g), a=-(0.5 + torch.rand(h, generator=g)),
              b=torch.randn(b, l, ng, n, generator=g), c=torch.randn(b, l, ng, n, generator=g),
              d=torch.randn(h, generator=g), dt=dt, init_state=torch.randn(b, h, p, n, generator=g),
              dout=torch.randn(b, l, h, p, generator=g), dfinal_state=torch.randn(b, h, p, n, generator=g))
    return {k: v.to(device) for k, v in kw.items()}


def grads_f64(x, a, b, c, d, dt, init_state, dout, dfinal_state):
    """(dx, da, db, dc, dd, ddt, dinit_state) in float64: autograd through the token-by-token recurrence of
    <dout, y> + <dfinal_state, final_state>, on the CPU."""
    leaves = [t.detach().cpu().double().requires_grad_(True) for t in (x, a, b, c, d, dt, init_state)]
    x, a, b, c, d, dt, state = leaves
    dout, dfinal = dout.detach().cpu().double(), dfinal_state.detach().cpu().double()
    rep = x.shape[2] // b.shape[2]
    bh, ch = b.repeat_interleave(rep, 2), c.repeat_interleave(rep, 2)             # (b, l, h, n)
    loss = 0.0
    for t in range(x.shape[1]):
        step = dt[:, t, :, None, None]                                            # (b, h, 1, 1)
        state = torch.exp(step * a[None, :, None, None]) * state + step * x[:, t, :, :, None] * bh[:, t, :, None, :]
        y = (state * ch[:, t, :, None, :]).sum(-1) + d[None, :, None] * x[:, t]
        loss = loss + (y * dout[:, t]).sum()
    loss = loss + (state * dfinal).sum()
    return torch.autograd.grad(loss, leaves)


def rel(a, ref):
    a, ref = a.detach().cpu().double(), ref.detach().double()
    return float((a - ref).norm() / ref.norm())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixed", action="store_true", help="run a copy with the one-line fix applied")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU (torch.cuda.is_available() is False)")
    os.environ.setdefault("TILEGYM_DISABLE_AUTOTUNE", "1")   # the first config of each kernel: no search
    pkg = find_package()
    if args.fixed:
        sys.path.insert(0, with_fix(pkg))
        for name in [m for m in sys.modules if m == "tilegym" or m.startswith("tilegym.")]:
            del sys.modules[name]
    mod = importlib.import_module(MODULE)
    print(f"tilegym {version('tilegym')}{' + the one-line fix' if args.fixed else ''} from "
          f"{os.path.dirname(os.path.dirname(os.path.dirname(mod.__file__)))}; torch {torch.__version__}, "
          f"cuda-tile {version('cuda-tile')}, {torch.cuda.get_device_name()}")
    kw = problem("cuda")
    got = mod.mamba2_chunk_backward(**kw, chunk_size=CHUNK)
    torch.cuda.synchronize()
    ref = grads_f64(**kw)
    zero = kw["dt"].cpu() == 0
    print(f"batch {BATCH}, seqlen {SEQLEN}, nheads {NHEADS}, headdim {HEADDIM}, dstate {DSTATE}, chunk_size {CHUNK}, "
          f"fp32; dt = 0 at every {SKIP_EVERY}th token ({int(zero.sum())} of {zero.numel()} (b, t, h) entries)")
    bad = 0
    for name, g, r in zip(NAMES, got, ref):
        nonfinite = int((~torch.isfinite(g)).sum())
        bad += nonfinite
        finite = torch.isfinite(g.cpu())
        err = rel(torch.where(finite, g.cpu().double(), r), r)
        print(f"  {name:<12} non-finite {nonfinite:>4} of {g.numel():<6} float64 all finite: "
              f"{bool(torch.isfinite(r).all())}; normwise relative error of the finite entries {err:.3g}")
    ddt, ddt_ref = got[5].cpu(), ref[5]
    where = (~torch.isfinite(ddt)).nonzero().tolist()
    if where:
        on_zero = sum(bool(zero[tuple(i)]) for i in where)
        print(f"non-finite ddt entries: {len(where)}, of them at dt == 0: {on_zero}; the first 6 (b, t, h):")
        for i in where[:6]:
            print(f"  ddt{tuple(i)}: tilegym {ddt[tuple(i)].item()}, float64 {ddt_ref[tuple(i)].item():.6g}, "
                  f"dt there {kw['dt'][tuple(i)].item()}")
    else:
        sel = zero.nonzero().tolist()[:6]
        print("ddt at the first 6 tokens with dt == 0 (b, t, h):")
        for i in sel:
            print(f"  ddt{tuple(i)}: tilegym {ddt[tuple(i)].item():.6g}, float64 {ddt_ref[tuple(i)].item():.6g}")
    print("RESULT: " + (f"{bad} non-finite gradient entries (float64: none)" if bad else
                        "every gradient is finite"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
