"""The menus of compile-time constants that problems are drawn from, shared by the strategies that draw
them (properties/strategies.py) and the triage battery that anchors the draws (properties/triage.py)."""
from __future__ import annotations

CPU_DIMS = (4, 8, 16, 32)
GPU_HEADDIMS = (16, 32, 64, 128, 256)
GPU_DSTATES = (16, 32, 64, 128, 256)
# (headdim, dstate) pairs on the GPU: every value at least once on each side, headdim != dstate in most,
# 64 (the benchmark shape) most often. A short list, because each pair is a new compile of every kernel
# for every dtype: with all 25 pairs, the H200 gate runs spent ~88% of their time in tileiras.
GPU_DIM_PAIRS = ((64, 64), (64, 64), (64, 128), (64, 256), (32, 16), (128, 64), (16, 32), (256, 128), (128, 128))
# head counts of GPU draws (properties/strategies.py says why these)
GPU_HEADS = (2, 6, 8, 16)
