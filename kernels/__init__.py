"""Implementations under test and the registry that describes them.

Nothing here imports oracles/, properties/ or tests/: kernels stand alone.
"""
