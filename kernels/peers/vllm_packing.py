"""The contract's rows and seq_idx sequences as vLLM's packed sequences (pure host code, no GPU).

vLLM's prefill SSD has no batch dimension: tokens of all sequences are packed along one axis and
`cu_seqlens` (num_sequences + 1) delimits them. `mamba_chunk_scan_combined`'s arguments map onto it:

* row r of x (b, l, ...) occupies packed tokens [r*l, (r+1)*l) (x.reshape(b*l, ...));
* inside a row, each run of equal seq_idx is one packed sequence; with batch 1 and cu_seqlens, the
  sequences are cu_seqlens' own, empty ones included (the contract checks they agree with seq_idx);
* a row's initial_states (b, h, p, n) belong to its sequence 0, every other sequence starts at zero
  (the contract); per-sequence initial_states (num_sequences, h, p, n), the varlen_initial_states
  option, are vLLM's own convention and pass through;
* a row's final state is the state of its last sequence; varlen states are every sequence's state.
  With empty cu_seqlens sequences, a row's "first" and "last" sequences are those holding its first
  and last tokens (seq_idx, which starts every row at 0, cannot name an empty sequence).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Packing:
    cu_seqlens: tuple[int, ...]   # packed offsets, num_sequences + 1, over batch * seqlen tokens
    row_first: tuple[int, ...]    # per row: the packed sequence holding its first token
    row_last: tuple[int, ...]     # per row: the packed sequence holding its last token

    @property
    def num_sequences(self) -> int:
        return len(self.cu_seqlens) - 1


def _row_bounds(seq_row: list[int]) -> list[int]:
    """Offsets inside one row where seq_idx changes, with 0 and the row length."""
    return [0] + [t for t in range(1, len(seq_row)) if seq_row[t] != seq_row[t - 1]] + [len(seq_row)]


def packing(batch: int, seqlen: int, seq_idx: torch.Tensor | None = None,
            cu_seqlens: torch.Tensor | None = None) -> Packing:
    """The packed sequences of a contract call (arguments already checked by kernels.contract)."""
    rows = seq_idx.detach().cpu().tolist() if seq_idx is not None else None
    cu, first, last = [0], [], []
    for r in range(batch):
        if rows is None:
            bounds = [0, seqlen]
        elif cu_seqlens is not None and batch == 1:
            bounds = [int(v) for v in cu_seqlens.detach().cpu().tolist()]
        else:
            bounds = _row_bounds(rows[r])
        base = len(cu) - 1
        filled = [i for i in range(len(bounds) - 1) if bounds[i + 1] > bounds[i]]
        first.append(base + filled[0])       # the sequence holding the row's first token
        last.append(base + filled[-1])       # ... and its last token
        cu.extend(r * seqlen + b for b in bounds[1:])
    return Packing(tuple(cu), tuple(first), tuple(last))


def sequence_initial_states(pk: Packing, initial_states: torch.Tensor | None) -> torch.Tensor | None:
    """One initial state per packed sequence: a row's (b, h, p, n) state goes to its first sequence,
    the others get zeros; a (num_sequences, h, p, n) tensor is already one per sequence."""
    if initial_states is None:
        return None
    if initial_states.shape[0] == pk.num_sequences and len(pk.row_first) == 1:
        return initial_states.contiguous()
    per_seq = initial_states.new_zeros(pk.num_sequences, *initial_states.shape[1:])
    per_seq[list(pk.row_first)] = initial_states
    return per_seq


__all__ = ["Packing", "packing", "sequence_initial_states"]
