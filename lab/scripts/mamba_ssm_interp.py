"""`--impl lab/scripts/mamba_ssm_interp.py:INFO`: the mamba-ssm adapter on a CPU under
Triton's interpreter, forward and backward (autograd through MambaChunkScanCombinedFn), for the
property and gradient suites and the mamba_ssm catalogs without a GPU.

The interpreter runs mamba_ssm's @triton.jit kernels on host tensors with numpy (index arithmetic and
data flow are mamba_ssm's; the numerics are not the GPU's: no TF32): evidence for a kernel's logic,
not its precision, so fp32 and chunk sizes 16/32 only (as lab/scripts/vllm_interp.py). Two host calls of
mamba_ssm assume a GPU and are answered here: `torch.cuda.device(index)` (a no-op context) and
`torch.cuda.get_device_properties(...).multi_processor_count` (132, an H200's). Setup as
lab/scripts/cpu_vllm_interpret.py (Triton 3.6.0 and numpy 1.26.4 in their own folders), plus einops:

    pip install --target /tmp/ein --no-deps einops
    TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES= MAMBA_DETERMINISTIC=1 SSDCHECK_PEERS_DIR=<peers> \\
      PYTHONPATH=.:/tmp/ein:/tmp/vnp:/tmp/vt python -c "
    import dataclasses; from mutation.catalog import load_catalog; from mutation.run import run_catalog, _progress
    c = dataclasses.replace(load_catalog('mamba_ssm_bwd'), impl='lab/scripts/mamba_ssm_interp.py:INFO',
                            pytest_args=('-k', 'matches_oracle or group_broadcast'))
    print(run_catalog(c, jobs=2, budget_s=300, baseline_budget_s=420, progress=_progress).markdown())"

(the backward catalog through tests/test_gradients.py on the CPU; about 7 minutes on 2 cores; the file
form of --impl, since the mutation runner keeps no PYTHONPATH entry inside the repository).
"""
from __future__ import annotations

import contextlib
import os
import types

import torch

if os.environ.get("TRITON_INTERPRET") != "1":
    raise ImportError("mamba_ssm_interp: only under Triton's interpreter (TRITON_INTERPRET=1; see its docstring)")

torch.cuda.device = lambda index: contextlib.nullcontext()
torch.cuda.get_device_properties = lambda device: types.SimpleNamespace(multi_processor_count=132)

from kernels.peers import mamba_ssm as _adapter  # noqa: E402

_adapter.require_cuda = lambda peer, x: None
INFO = _adapter.INFO.replace(name="lab/scripts/mamba_ssm_interp.py:INFO", device="cpu", dtypes=("float32",), chunk_sizes=(16, 32),
                             stages=None)
