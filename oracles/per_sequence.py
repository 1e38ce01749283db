"""One initial state per packed sequence (the contract's `varlen_initial_states`): the math is that each
sequence runs alone from its own state, so every reference answers such a call by separate runs.

With cu_seqlens (batch 1), initial_states (num_seqs, h, p, n) give sequence i its own start. y is the
concatenation of the sequences' outputs; varlen state i is sequence i's final state (an empty
sequence's is its initial state); final_states is that of the sequence holding the last token.
"""
from __future__ import annotations

import torch

from kernels.contract import unpack_returns

_TIME = ("x", "dt", "B", "C", "z")


def is_per_sequence(x, initial_states, cu_seqlens) -> bool:
    """Whether a (checked) call holds one initial state per cu_seqlens sequence instead of per row."""
    return initial_states is not None and cu_seqlens is not None and initial_states.shape[0] != x.shape[0]


def per_sequence_runs(fn, **kw):
    """`fn` (mamba_chunk_scan_combined's signature, returning (y, final) with return_final_states) on
    each cu_seqlens sequence alone from its own initial state; the results in the call's convention."""
    bounds = [int(v) for v in kw["cu_seqlens"].tolist()]
    h0 = kw["initial_states"]
    ys, finals = [], []
    for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        if e == s:
            finals.append(None)
            continue
        part = {k: (v[:, s:e] if k in _TIME and v is not None else v) for k, v in kw.items()}
        part.update(initial_states=h0[i:i + 1], seq_idx=None, cu_seqlens=None, return_final_states=True,
                    return_varlen_states=False)
        y, final = fn(**part)
        ys.append(y)
        finals.append(final[0])
    like = next(f for f in finals if f is not None)
    states = torch.stack([h0[i].to(like.dtype) if f is None else f for i, f in enumerate(finals)])
    last = max(i for i in range(len(bounds) - 1) if bounds[i + 1] > bounds[i])
    return unpack_returns(torch.cat(ys, dim=1), states[last][None], states, kw.get("return_final_states", False),
                          kw.get("return_varlen_states", False))


__all__ = ["is_per_sequence", "per_sequence_runs"]
