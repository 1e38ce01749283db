"""Reference answers for the SSD forward.

Three float64 oracles that share no numerical code (their agreement is what makes them
trustworthy) and the frozen same-precision yardstick that sets tolerance budgets.
"""
from oracles.chunked_f64 import (
    chunk_cumsum_f64,
    chunk_scan_f64,
    chunk_state_f64,
    ssd_chunked_f64,
    state_passing_f64,
)
from oracles.quadratic_f64 import ssd_quadratic_f64
from oracles.recurrence_f64 import ssd_recurrence_f64
from oracles.yardstick import ssd_yardstick

__all__ = [
    "ssd_recurrence_f64",
    "ssd_quadratic_f64",
    "ssd_chunked_f64",
    "chunk_cumsum_f64",
    "chunk_state_f64",
    "state_passing_f64",
    "chunk_scan_f64",
    "ssd_yardstick",
]
