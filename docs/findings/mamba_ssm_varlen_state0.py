"""mamba_ssm 2.3.2.post1: with cu_seqlens, return_varlen_states=True and initial_states, varlen state 0
leaves the initial state out when sequence 0 ends inside chunk 0 or on its last token.

    python mamba_ssm_varlen_state0.py [--mamba-src DIR] [--fixed]

Needs a CUDA GPU, torch and triton; imports nothing but torch and mamba_ssm. mamba_ssm's package
__init__ imports its compiled selective-scan extension, which the Triton SSD kernels do not need, so
the script loads mamba_ssm/ops/triton/ssd_combined.py without running that __init__. It finds the
`mamba_ssm` source folder on sys.path (PYTHONPATH) or at --mamba-src. --fixed runs a copy of that
folder with the one-line fix applied (FIX below), to show the fix gives the float64 values.

Prints, per chunk size: mamba_ssm's varlen states, the same states by the recurrence in float64
computed here (a plain loop over tokens), and the normwise relative error of each.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import os
import shutil
import sys
import tempfile
import types

import torch

MARKER = os.path.join("ops", "triton", "ssd_combined.py")
BUGGY_FILE = os.path.join("ops", "triton", "ssd_chunk_state.py")
FIX = ("    if start_idx < pid_c * chunk_size:\n",
       "    if (start_idx < pid_c * chunk_size) | ((start_idx == 0) & (end_idx > 0)):\n")
# the smallest problem that shows it: two packed sequences, the first ending inside chunk 0 at chunk 32
SEQLEN, CU_SEQLENS, NHEADS, HEADDIM, DSTATE, CHUNKS = 64, (0, 24, 64), 1, 16, 16, (32, 16)


def find_package(src: str | None) -> str:
    for root in ([src] if src else []) + sys.path:
        for cand in (os.path.join(root or os.getcwd(), "mamba_ssm"), root or os.getcwd()):
            if os.path.basename(os.path.normpath(cand)) == "mamba_ssm" and os.path.isfile(os.path.join(cand, MARKER)):
                return os.path.abspath(cand)
    sys.exit("no mamba_ssm source folder (holding ops/triton/ssd_combined.py) on sys.path; give --mamba-src DIR")


def with_fix(pkg_dir: str) -> str:
    """A copy of the package with FIX applied to ssd_chunk_state.py."""
    copy = os.path.join(tempfile.mkdtemp(prefix="mamba-ssm-fixed-"), "mamba_ssm")
    shutil.copytree(pkg_dir, copy)
    path = os.path.join(copy, BUGGY_FILE)
    text = open(path).read()
    if text.count(FIX[0]) != 1:
        sys.exit(f"{path}: the line to fix occurs {text.count(FIX[0])} times (expected once): {FIX[0]!r}")
    with open(path, "w") as f:
        f.write(text.replace(FIX[0], FIX[1]))
    return copy


def load_ssd_combined(pkg_dir: str):
    """mamba_ssm.ops.triton.ssd_combined from pkg_dir, without running mamba_ssm/__init__.py."""
    stub = types.ModuleType("mamba_ssm")
    stub.__spec__ = importlib.machinery.ModuleSpec("mamba_ssm", loader=None, is_package=True)
    stub.__spec__.submodule_search_locations = [pkg_dir]
    stub.__path__ = [pkg_dir]
    sys.modules["mamba_ssm"] = stub
    return importlib.import_module("mamba_ssm.ops.triton.ssd_combined")


def version(pkg_dir: str) -> str:
    for line in open(os.path.join(pkg_dir, "__init__.py")):
        if line.startswith("__version__"):
            return line.split("=")[1].strip().strip("\"'")
    return "unknown"


def problem(device="cpu"):
    """Inputs (fp32) of mamba_chunk_scan_combined for two packed sequences of one row."""
    g = torch.Generator().manual_seed(0)
    l, h, p, n = SEQLEN, NHEADS, HEADDIM, DSTATE
    seq_idx = torch.zeros(1, l, dtype=torch.int32)
    for start in CU_SEQLENS[1:-1]:
        seq_idx[:, start:] += 1
    kw = dict(x=torch.randn(1, l, h, p, generator=g), dt=torch.rand(1, l, h, generator=g) * 0.1,
              A=-torch.rand(h, generator=g), B=torch.randn(1, l, 1, n, generator=g),
              C=torch.randn(1, l, 1, n, generator=g), initial_states=torch.randn(1, h, p, n, generator=g),
              seq_idx=seq_idx, cu_seqlens=torch.tensor(CU_SEQLENS, dtype=torch.int32))
    return {k: v.to(device) for k, v in kw.items()}


def varlen_states_f64(x, dt, A, B, initial_states, cu_seqlens, **_):
    """The state after the last token of each packed sequence, one token at a time in float64:
    h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T; sequence 0 starts from initial_states, the others from 0."""
    x, dt, A, B, h0 = (t.detach().cpu().double() for t in (x, dt, A, B, initial_states))
    bounds = [int(v) for v in cu_seqlens.tolist()]
    heads_per_group = x.shape[2] // B.shape[2]
    out = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        state = h0[0].clone() if start == 0 else torch.zeros_like(h0[0])
        for t in range(start, end):
            for hi in range(x.shape[2]):
                decay = torch.exp(dt[0, t, hi] * A[hi])
                state[hi] = decay * state[hi] + dt[0, t, hi] * torch.outer(x[0, t, hi], B[0, t, hi // heads_per_group])
        out.append(state)
    return torch.stack(out)


def rel(a, ref):
    a, ref = a.detach().cpu().double(), ref.double()
    return float((a - ref).norm() / ref.norm())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mamba-src", help="the mamba_ssm package folder, or the folder holding it")
    ap.add_argument("--fixed", action="store_true", help="run a copy with the one-line fix applied")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU (torch.cuda.is_available() is False)")
    os.environ.setdefault("MAMBA_DETERMINISTIC", "1")   # one config per kernel: no autotuning wait
    pkg = find_package(args.mamba_src)
    ver = version(pkg)
    mod = load_ssd_combined(with_fix(pkg) if args.fixed else pkg)
    import triton  # noqa: PLC0415 (mamba_ssm brought it)
    print(f"mamba_ssm {ver}{' + the one-line fix' if args.fixed else ''} from {pkg}; torch {torch.__version__}, "
          f"triton {triton.__version__}, {torch.cuda.get_device_name()}")
    kw = problem("cuda")
    ref = varlen_states_f64(**kw)
    own = varlen_states_f64(**{**kw, "initial_states": torch.zeros_like(kw["initial_states"])})[0]
    print(f"seqlen {SEQLEN}, cu_seqlens {list(CU_SEQLENS)}, nheads {NHEADS}, headdim {HEADDIM}, dstate {DSTATE}, "
          f"fp32, initial_states given; float64: |varlen state 0| = {ref[0].norm():.4g}, of which the decayed "
          f"initial state {(ref[0] - own).norm():.4g} and sequence 0's own tokens {own.norm():.4g}")
    bad = 0
    for chunk in CHUNKS:
        _, varlen = mod.mamba_chunk_scan_combined(chunk_size=chunk, return_varlen_states=True, **kw)
        torch.cuda.synchronize()
        ends = "inside chunk 0 or on its last token" if CU_SEQLENS[1] <= chunk else "past chunk 0"
        print(f"chunk_size {chunk} (sequence 0 ends {ends}):")
        for i in range(len(CU_SEQLENS) - 1):
            err = rel(varlen[i], ref[i])
            bad += err > 1e-2
            print(f"  varlen state {i}: mamba_ssm [0,0,:4] = {varlen[i, 0, 0, :4].tolist()}")
            print(f"  varlen state {i}: float64   [0,0,:4] = {ref[i, 0, 0, :4].tolist()}")
            print(f"  varlen state {i}: normwise relative error {err:.3g}{'   <-- wrong' if err > 1e-2 else ''}")
    print("RESULT: " + (f"{bad} varlen state(s) off by more than 1e-2 (TF32 noise is ~1e-3)" if bad else
                        "every varlen state matches the float64 recurrence"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
