"""The merge gate: fail when a worst error grows by more than a factor over a baseline report.

A baseline is an earlier `--ssd-report` JSON (e.g. main's, kept as a CI artifact or committed).
Rows are matched on (impl, prop, output, dtype); when each report holds a single implementation, a
revision is matched against the baseline's implementation whatever the names. For each metric in `metrics` (default max_abs and
normwise), a row regresses when

    new > max_growth * baseline        and        new row's worst share >= growth_floor

The second condition ignores growth that stays in the noise: an error using less than `growth_floor`
of its tolerance (default 1%) may double between runs without anyone needing to look at it (e.g.
from 0 to one rounding error). Rows missing on either side are reported as notes, never failures;
test failures are pytest's business (exit 1), the gate only adds exit code EXIT_GATE.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ssdcheck_plugin.aggregate import ROW_KEY, num, unnum

EXIT_GATE = 6           # pytest uses 0-5 (3 is INTERNAL_ERROR), so the gate takes the next free code
METRICS = ("max_abs", "normwise", "share")
DEFAULT_METRICS = ("max_abs", "normwise")


@dataclass
class Regression:
    impl: str
    prop: str
    output: str
    dtype: str
    metric: str
    baseline: float
    current: float
    growth: float
    share: float
    problem: str | None
    baseline_problem: str | None = None

    @property
    def same_problem(self) -> bool:
        return self.problem is not None and self.problem == self.baseline_problem

    def message(self, max_growth: float) -> str:
        text = (f"{self.impl} {self.prop} {self.output} {self.dtype}: worst {self.metric} grew "
                f"{_g(self.growth)}x (> {max_growth:g}x): {self.baseline:.4g} -> {self.current:.4g} "
                f"(now {100 * self.share:.3g}% of tolerance)\n    at {self.problem}")
        if self.same_problem:
            return text + "\n    (the baseline's worst was at the same problem)"
        # Two runs need not draw the same problems (a budget, a failure or a compile-aware draw changes
        # the sequence), so two worsts over different problems say nothing yet about the revision:
        # replaying both problems under both revisions does.
        return (text + f"\n    the baseline's worst was at another problem: {self.baseline_problem}"
                       "\n    (different problems: replay both under each revision with --ssd-problem to tell "
                       "the revision from the draw)")

    def to_dict(self) -> dict:
        d = asdict(self)
        for n in ("baseline", "current", "growth", "share"):
            d[n] = num(d[n])
        return d


def _g(x: float) -> str:
    return "inf" if x == float("inf") else f"{x:.3g}"


TOOLCHAIN_FIELDS = ("tileiras", "ptxas", "cuda_tile", "torch", "triton")   # toolchain.IDENTITY_FIELDS


def toolchain_of(meta: dict) -> dict:
    """A report's toolchain: meta.toolchain, or for a report from before that field, what its
    meta.versions holds (tileiras and ptxas then read None)."""
    tools = meta.get("toolchain") or {}
    versions = meta.get("versions") or {}
    return {k: tools.get(k, versions.get(k)) for k in TOOLCHAIN_FIELDS}


def toolchain_changes(current_meta: dict, baseline_meta: dict) -> list[str]:
    """'tileiras 13.4.92 -> 13.5.37' for each toolchain field that differs between two reports' meta."""
    now, old = toolchain_of(current_meta), toolchain_of(baseline_meta)
    return [f"{k} {old[k]} -> {now[k]}" for k in TOOLCHAIN_FIELDS if now[k] != old[k]]


def toolchain_line(current_meta: dict, baseline_meta: dict) -> str:
    """The gate's line on the toolchains: which fields differ, or that they are the same."""
    changes = toolchain_changes(current_meta, baseline_meta)
    if changes:
        return ("toolchain DIFFERS from the baseline's: " + "; ".join(changes) +
                " (every cuTile kernel is a new revision: gated by the same policy)")
    tools = toolchain_of(current_meta)
    return "toolchain same as the baseline's: " + ", ".join(f"{k} {tools[k]}" for k in TOOLCHAIN_FIELDS)


def load_meta(path: str | Path) -> dict:
    """A report file's meta ({} when it has none); load_baseline has checked the file."""
    try:
        return json.loads(Path(path).read_text()).get("meta") or {}
    except (OSError, json.JSONDecodeError, AttributeError):
        return {}


def load_baseline(path: str | Path, what: str = "--ssd-baseline") -> dict[tuple, dict]:
    """Rows of a report file keyed on (impl, prop, output, dtype); raises ValueError on a bad file,
    naming the argument `what` that gave it."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{what} {path}: cannot read a report ({e})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("ssdcheck-report/"):
        schema = data.get("schema") if isinstance(data, dict) else None
        raise ValueError(f"{what} {path}: not an ssdcheck report (schema={schema!r})")
    rows = {}
    for r in data.get("results", []):
        rows[tuple(r[k] for k in ROW_KEY)] = r
    return rows


def compare_rows(current: dict[tuple, dict], baseline: dict[tuple, dict], *, max_growth: float = 2.0,
                 growth_floor: float = 0.01, metrics=DEFAULT_METRICS) -> tuple[list[Regression], list[str]]:
    """Regressions of `current` over `baseline`, and notes about rows present on one side only."""
    bad = [m for m in metrics if m not in METRICS]
    if bad:
        raise ValueError(f"--ssd-gate-metrics: unknown {bad}; known {METRICS}")
    regressions, notes = [], []
    impls_now, impls_base = {k[0] for k in current}, {k[0] for k in baseline}
    if len(impls_now) == 1 and len(impls_base) == 1 and impls_now != impls_base:
        # One revision against one baseline implementation (e.g. mypkg.ssd:forward against cutile):
        # compare them row by row although their names differ.
        (now,), (old,) = impls_now, impls_base
        notes.append(f"comparing {now} with the baseline's {old}")
        baseline = {(now, *k[1:]): r for k, r in baseline.items()}
    for key, row in sorted(current.items()):
        base = baseline.get(key)
        if base is None:
            notes.append(f"new in this run (no baseline): {' '.join(key)}")
            continue
        share = unnum(row["share"])
        for m in metrics:
            new, old = unnum(row[m]), unnum(base[m])
            if new is None or old is None:
                continue
            if new > max_growth * old and share >= growth_floor:
                growth = new / old if old > 0 else float("inf")
                regressions.append(Regression(*key, metric=m, baseline=old, current=new, growth=growth,
                                              share=share, problem=row.get(f"{m}_problem"),
                                              baseline_problem=base.get(f"{m}_problem")))
    for key in sorted(set(baseline) - set(current)):
        notes.append(f"in the baseline but not run now: {' '.join(key)}")
    return regressions, notes
