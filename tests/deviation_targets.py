"""Implementations for the tests of declared deviations (test_deviations.py), usable as `--impl`.

`drops_h0` is torch-ref with mamba_ssm 2.3.2.post1's varlen-state-0 bug reproduced (initial_states
left out of varlen state 0 when sequence 0 ends inside chunk 0 or on its last token: the declaration's
own model of it) and declared with mamba-ssm's own Deviation; `drops_h0_undeclared` is the same without the declaration;
`drops_h0_always` leaves them out at any length (a bug wider than the declaration);
`correct_declared` is torch-ref declaring that deviation (every example meeting it passes
unexpectedly); `drops_h0_and_bad_y` also puts y off, an output the declaration does not cover.
`run_declared_deviations` runs a suite's declared-deviation test against one of them in a fresh process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernels.peers.mamba_ssm import VARLEN_STATE0, drop_initial_states_from_varlen_state0
from kernels.torch_ref import INFO, ssd_forward


ROOT = Path(__file__).resolve().parents[1]


def run_declared_deviations(test_file: str, impl: str, *extra: str, tmp_path: Path, timeout: float = 600):
    """`pytest test_file -k declared_deviations --impl impl` in a fresh process, as a GPU host runs it:
    (the finished process, its --ssd-report JSON)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SSDCHECK_COMPILE_CACHE": "off"}
    out = tmp_path / f"{impl.rsplit(':', 1)[-1]}{len(extra)}.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hypothesis-profile=cpu",
                           test_file, "-k", "declared_deviations", "--impl", impl,
                           "--ssd-report", str(out), *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, json.loads(out.read_text())


drops_h0 = drop_initial_states_from_varlen_state0(ssd_forward)
drops_h0_undeclared = drop_initial_states_from_varlen_state0(ssd_forward)


def drops_h0_always(**kwargs):
    out = ssd_forward(**kwargs)
    if not kwargs.get("return_varlen_states") or kwargs.get("initial_states") is None:
        return out
    varlen = out[-1].clone()
    varlen[0] = ssd_forward(**{**kwargs, "initial_states": None})[-1][0]
    return (*out[:-1], varlen)


def drops_h0_and_bad_y(**kwargs):
    out = drops_h0(**kwargs)
    y = out[0].clone() if isinstance(out, tuple) else out.clone()
    y[:, 0] += 1.0
    return (y, *out[1:]) if isinstance(out, tuple) else y


def correct_declared(**kwargs):
    return ssd_forward(**kwargs)


_BASE = INFO.replace(stages=None)
drops_h0.ssd_info = _BASE.replace(fn=drops_h0, name="drops-h0", deviations=(VARLEN_STATE0,),
                                  notes="torch-ref with mamba_ssm's varlen-state-0 bug, declared")
drops_h0_undeclared.ssd_info = _BASE.replace(fn=drops_h0_undeclared, name="drops-h0-undeclared",
                                             notes="torch-ref with mamba_ssm's varlen-state-0 bug, undeclared")
drops_h0_always.ssd_info = _BASE.replace(fn=drops_h0_always, name="drops-h0-always", deviations=(VARLEN_STATE0,),
                                         notes="varlen state 0 always without initial_states; narrower declaration")
drops_h0_and_bad_y.ssd_info = _BASE.replace(fn=drops_h0_and_bad_y, name="drops-h0-bad-y", deviations=(VARLEN_STATE0,),
                                            notes="the declared bug plus y[:, 0] += 1, which it does not cover")
correct_declared.ssd_info = _BASE.replace(fn=correct_declared, name="correct-declared", deviations=(VARLEN_STATE0,),
                                          notes="torch-ref declaring a deviation it does not have")
