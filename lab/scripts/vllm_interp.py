"""`--impl vllm_interp:INFO` (with lab/scripts/ on PYTHONPATH): the vllm adapter on a CPU under Triton's
interpreter, for the property suite without a GPU (lab/scripts/cpu_vllm_interpret.py says how to set it up).

Importing it lets vLLM's files take their GPU path on the interpreter (current_platform.is_cpu()
answers False, the adapter's CUDA check is skipped) and declares fp32 and chunk sizes 16/32 only:
bf16 under the interpreter is not evidence, and larger chunks are slow there.
"""
from __future__ import annotations

import os

if os.environ.get("TRITON_INTERPRET") != "1":
    raise ImportError("vllm_interp: only under Triton's interpreter (TRITON_INTERPRET=1; see "
                      "lab/scripts/cpu_vllm_interpret.py)")

from kernels.peers import vllm as _adapter  # noqa: E402
from kernels.peers import vllm_files  # noqa: E402

vllm_files.Platform.is_cpu = lambda self: False
_adapter.require_cuda = lambda peer, x: None
INFO = _adapter.INFO.replace(name="vllm_interp:INFO", device="cpu", dtypes=("float32",), chunk_sizes=(16, 32))
