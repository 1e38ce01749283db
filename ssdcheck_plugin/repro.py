"""Self-contained reproducers: one file per failing check, and the replay that re-runs it.

A reproducer is a `torch.save`d dict (format "ssdcheck-repro/1"):

    prop, impl, impl_spec      the property, the implementation's name and how to look it up again
    problem                    repr(SSDProblem): shapes, regimes, seed
    kwargs                     problem.inputs("cpu"): the exact tensors, on the CPU
    comparisons                what the failing run measured (output, passed, max_abs, normwise, share, why)
    message                    the failure report as pytest printed it
    meta                       host, GPU, versions (small)
    replay, pytest             the two commands that re-run it

`ssdcheck replay FILE` loads it, looks the implementation up again (or another one
with --impl), runs the property on the saved tensors, prints the comparison next to the recorded one,
and exits 0 when the check now passes, 1 when it still fails.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import shlex
from pathlib import Path

import torch

FORMAT = "ssdcheck-repro/1"
ORACLE_PROPS = ("prop_matches_oracle", "prop_stages_match_oracle")   # run with TF32 off (ieee_reference_math)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_") or "impl"


def _comparison_dict(c) -> dict:
    return {"output": c.output, "passed": bool(c.passed), "max_abs": float(c.max_abs), "where": list(c.where),
            "normwise": float(c.normwise), "share": float(c.share), "mismatched": int(c.mismatched),
            "numel": int(c.numel), "budget": c.budget, "why": list(c.why)}


def replay_command(path: str | Path) -> str:
    return f"python -m ssdcheck replay {shlex.quote(str(path))}"


def pytest_command(impl_spec: str, prop: str, problem_repr: str,
                   test_file: str = "tests/test_properties.py") -> str:
    """The pytest line that re-runs this check through the test suite (--ssd-problem pins the draw)."""
    test = "test_" + prop.removeprefix("prop_")
    return (f"pytest {test_file}::{test} --impl {shlex.quote(impl_spec)} -p no:cacheprovider "
            f"--ssd-problem {shlex.quote(problem_repr)}")


def write(result, directory: str | Path, *, impl_spec: str | None = None, meta: dict | None = None) -> Path:
    """Save `result` (a failing PropertyResult) as a reproducer in `directory`; returns its path."""
    problem = result.problem
    text = repr(problem)
    digest = hashlib.sha1(f"{result.impl}|{result.prop}|{text}".encode()).hexdigest()[:10]
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_slug(result.impl)}__{result.prop}__{digest}.pt"
    spec = impl_spec or result.impl
    payload = {
        "format": FORMAT,
        "prop": result.prop,
        "impl": result.impl,
        "impl_spec": spec,
        "problem": text,
        "kwargs": problem.inputs("cpu"),
        "comparisons": [_comparison_dict(c) for c in result.comparisons],
        "message": result.message(),
        "meta": dict(meta or {}),
        "replay": replay_command(path),
        "pytest": pytest_command(spec, result.prop, text),
    }
    torch.save(payload, path)
    return path


def load(path: str | Path) -> dict:
    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not an ssdcheck reproducer (format {data.get('format') if isinstance(data, dict) else None!r})")
    return data


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and bool(torch.equal(a, b)))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def same_inputs(a: dict, b: dict) -> list[str]:
    """Names of keyword arguments that differ between two input dicts (empty: identical)."""
    return sorted(k for k in set(a) | set(b) if k not in a or k not in b or not _same(a[k], b[k]))


def saved_inputs_problem(problem, kwargs: dict):
    """An SSDProblem whose `inputs()` returns the saved tensors for exactly this problem; derived
    problems (a property's `replace(seed=...)` etc.) still generate their own."""
    from properties.problem import SSDProblem

    fields = dataclasses.astuple(problem)

    @dataclasses.dataclass(frozen=True, repr=False)
    class Replayed(SSDProblem):
        def _inputs(self, device="cpu"):
            # the base's inputs() adds the extension keywords (return_states_dtype) to what this returns
            if dataclasses.astuple(self) == fields:
                return {k: (v.clone().to(device) if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()
                        if k != "return_states_dtype"}
            return super()._inputs(device)

        def __repr__(self):
            return repr(SSDProblem(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SSDProblem)}))

    return Replayed(**{f.name: getattr(problem, f.name) for f in dataclasses.fields(SSDProblem)})


def replay(path: str | Path, impl_spec: str | None = None, *, out=print) -> int:
    """Re-run the saved check; 0 if it passes now, 1 if it still fails."""
    from kernels.registry import lookup
    from properties import invariants
    from properties.problem import parse_problem

    data = load(path)
    spec = impl_spec or data["impl_spec"]
    info = lookup(spec)
    problem = parse_problem(data["problem"])
    prop = data["prop"]
    if prop not in invariants.PROPERTIES:
        raise ValueError(f"{path}: unknown property {prop!r}; known {sorted(invariants.PROPERTIES)}")
    out(f"replaying {prop} on {info.name} ({spec}) from {path}")
    out(f"  {data['problem']}")
    differ = same_inputs(problem.inputs("cpu"), data["kwargs"])
    out("  inputs: regenerated from the seed match the saved tensors" if not differ else
        f"  inputs: regenerating from the seed differs in {differ} (another torch?); using the saved tensors")
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if prop in ORACLE_PROPS:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        result = invariants.PROPERTIES[prop](info, saved_inputs_problem(problem, data["kwargs"]))
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
    if result.skipped:
        out(f"  not applicable to {info.name}: {result.skipped}")
        return 0
    recorded = {c["output"]: c for c in data["comparisons"]}
    for c in result.comparisons:
        r = recorded.get(c.output)
        was = (f" (recorded: {'ok' if r['passed'] else 'FAILED'}, max_abs {r['max_abs']:.4g}, "
               f"share {_share(r['share'])})") if r else ""
        out(f"  {c.output}: {'ok' if c.passed else 'FAILED'}, max_abs {c.max_abs:.4g}, "
            f"share {_share(c.share)}{was}")
    out(f"  through pytest: {data['pytest']}")
    if result.passed:
        out("PASSED: the check passes now")
        return 0
    out(result.message())
    out("FAILED: the check still fails")
    return 1


def _share(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3g}"
