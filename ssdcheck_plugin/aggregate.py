"""The report sink: what every property result measured, folded into worst cases.

`Aggregate.add(result)` is registered with `properties.report.add_sink`, so it sees every evaluated
example (including Hypothesis's shrink steps and its final replay of a failure). It keeps:

* one row per (impl, prop, output, dtype): examples, failures, the worst max-abs error, the worst
  normwise error and the worst share of the tolerance, each with the problem that produced it, and
  the tolerance in force (dtype is part of the key because the policy is per dtype);
* one entry per (impl, prop): examples, failures, worst share, and feature tallies from
  `properties.strategies.tally(problem)` (how often seq_idx, a partial last chunk, ... occurred);
* per pytest item: the same counts, for JUnit properties and the fuzzer's reproducers;
* one entry per (impl, prop, declared deviation): the examples that met its condition (their covered
  outputs are counted there, not in the rows), those that passed anyway where the modeled bug would
  have failed (unexpected passes), and those where the modeled bug passes too (below resolution).

Everything serialises to JSON-safe dicts (`to_dict`/`merge_dict`) so xdist workers can ship theirs
to the controller. Non-finite floats are written as the strings "inf", "-inf" and "nan".
"""
from __future__ import annotations

import math
from typing import Any

ROW_KEY = ("impl", "prop", "output", "dtype")
MAX_LISTED = 10   # unexpected-pass problems listed per deviation


def num(x: float | None) -> float | str | None:
    """A float for JSON: finite as is, non-finite as "inf"/"-inf"/"nan" (strict JSON has no Infinity)."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def unnum(v: float | str | None) -> float | None:
    """Inverse of `num`."""
    if v is None:
        return None
    return float(v)


def _bad(x: float) -> float:
    """Order NaN as the worst possible value."""
    return math.inf if math.isnan(x) else x


def _tally_fn():
    try:
        from properties.strategies import tally
        return tally
    except Exception:  # the report works without the project's strategies (e.g. another rootdir)
        return None


class Aggregate:
    def __init__(self, k: float | None = None):
        self.rows: dict[tuple, dict] = {}
        self.props: dict[tuple, dict] = {}
        self.deviations: dict[tuple, dict] = {}
        self.k = k
        self._tally = _tally_fn()

    # ------------------------------------------------------------------ the sink
    def add(self, result) -> None:
        p = result.problem
        key2 = (result.impl, result.prop)
        entry = self.props.get(key2)
        if entry is None:
            entry = self.props[key2] = {"impl": result.impl, "prop": result.prop, "examples": 0, "failures": 0,
                                        "worst_share": 0.0, "worst_share_problem": None, "tally": {}}
        entry["examples"] += 1
        entry["failures"] += 0 if result.strict_passed else 1
        share = _bad(result.worst_share)
        if share > _bad(entry["worst_share"]) or entry["worst_share_problem"] is None:
            entry["worst_share"], entry["worst_share_problem"] = share, repr(p)
        if self._tally is not None:
            for feature, present in self._tally(p).items():
                entry["tally"][feature] = entry["tally"].get(feature, 0) + int(bool(present))
        for c in result.checked:
            self._add_comparison(result, c)
        for known in result.known:
            self._add_deviation(result, known)

    def _add_deviation(self, result, known) -> None:
        key = (result.impl, result.prop, known.reason)
        d = self.deviations.get(key)
        if d is None:
            d = self.deviations[key] = {"impl": result.impl, "prop": result.prop, **known.to_dict(),
                                        "examples": 0, "unexpected_passes": 0, "below_resolution": 0,
                                        "unexpected_pass_problems": []}
        d["examples"] += 1
        d["below_resolution"] += int(known.below_resolution)
        if known.unexpected_pass:
            d["unexpected_passes"] += 1
            if len(d["unexpected_pass_problems"]) < MAX_LISTED:
                d["unexpected_pass_problems"].append(repr(result.problem))

    def _add_comparison(self, result, c) -> None:
        key = (result.impl, result.prop, c.output, result.problem.dtype)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = {
                "impl": result.impl, "prop": result.prop, "output": c.output, "dtype": result.problem.dtype,
                "examples": 0, "failures": 0, "nonfinite_examples": 0,
                "max_abs": 0.0, "max_abs_where": [], "max_abs_problem": None,
                "normwise": 0.0, "normwise_problem": None,
                "share": 0.0, "share_problem": None, "budget_at_worst": None, "err_yardstick_at_worst": None,
                "normwise_allowed_at_worst": None,
                "tol": {"normwise": c.tol.normwise, "atol": c.tol.atol, "rtol": c.tol.rtol,
                        "k": None},
                "why": [],
            }
        row["examples"] += 1
        if not c.passed:
            row["failures"] += 1
            for w in c.why:
                if len(row["why"]) < 5 and w not in row["why"]:
                    row["why"].append(w)
        if c.nonfinite:
            row["nonfinite_examples"] += 1
        if c.budget is not None:
            row["tol"]["k"] = self.k
        prob = repr(result.problem)
        if _bad(c.max_abs) > _bad(row["max_abs"]) or row["max_abs_problem"] is None:
            row["max_abs"], row["max_abs_where"], row["max_abs_problem"] = _bad(c.max_abs), list(c.where), prob
        if _bad(c.normwise) > _bad(row["normwise"]) or row["normwise_problem"] is None:
            row["normwise"], row["normwise_problem"] = _bad(c.normwise), prob
        share = _bad(c.share)
        if share > _bad(row["share"]) or row["share_problem"] is None:
            row["share"], row["share_problem"] = share, prob
            row["budget_at_worst"], row["err_yardstick_at_worst"] = c.budget, c.err_yardstick
            row["normwise_allowed_at_worst"] = c.normwise_allowed

    # ------------------------------------------------------------------ (de)serialisation and merging
    def to_dict(self) -> dict[str, Any]:
        return {"rows": [_json_row(r) for _, r in sorted(self.rows.items())],
                "props": [_json_prop(e) for _, e in sorted(self.props.items())],
                "deviations": [dict(d) for _, d in sorted(self.deviations.items())]}

    def merge_dict(self, d: dict[str, Any]) -> None:
        """Fold another process's `to_dict()` into this one (xdist workers -> controller)."""
        for r in d.get("rows", []):
            r = _unjson_row(r)
            key = tuple(r[k] for k in ROW_KEY)
            cur = self.rows.get(key)
            if cur is None:
                self.rows[key] = r
                continue
            for n in ("examples", "failures", "nonfinite_examples"):
                cur[n] += r[n]
            cur["why"] = (cur["why"] + [w for w in r["why"] if w not in cur["why"]])[:5]
            if r["max_abs"] > cur["max_abs"]:
                cur["max_abs"], cur["max_abs_where"], cur["max_abs_problem"] = (
                    r["max_abs"], r["max_abs_where"], r["max_abs_problem"])
            if r["normwise"] > cur["normwise"]:
                cur["normwise"], cur["normwise_problem"] = r["normwise"], r["normwise_problem"]
            if r["share"] > cur["share"]:
                for n in ("share", "share_problem") + AT_WORST:
                    cur[n] = r.get(n)
            if cur["tol"].get("k") is None:
                cur["tol"]["k"] = r["tol"].get("k")
        for e in d.get("props", []):
            e = dict(e, worst_share=unnum(e["worst_share"]))
            key = (e["impl"], e["prop"])
            cur = self.props.get(key)
            if cur is None:
                self.props[key] = dict(e, tally=dict(e.get("tally", {})))
                continue
            cur["examples"] += e["examples"]
            cur["failures"] += e["failures"]
            if e["worst_share"] > cur["worst_share"]:
                cur["worst_share"], cur["worst_share_problem"] = e["worst_share"], e["worst_share_problem"]
            for f, n in e.get("tally", {}).items():
                cur["tally"][f] = cur["tally"].get(f, 0) + n
        for dev in d.get("deviations", []):
            key = (dev["impl"], dev["prop"], dev["reason"])
            cur = self.deviations.get(key)
            if cur is None:
                self.deviations[key] = dict(dev, unexpected_pass_problems=list(dev["unexpected_pass_problems"]))
                continue
            cur["examples"] += dev["examples"]
            cur["unexpected_passes"] += dev["unexpected_passes"]
            cur["below_resolution"] = cur.get("below_resolution", 0) + dev.get("below_resolution", 0)
            cur["unexpected_pass_problems"] = (cur["unexpected_pass_problems"]
                                               + dev["unexpected_pass_problems"])[:MAX_LISTED]

    # ------------------------------------------------------------------ summaries
    def worst(self) -> tuple[float, tuple | None]:
        """The worst share over every row and its key."""
        best = (0.0, None)
        for key, r in self.rows.items():
            if r["share"] > best[0] or best[1] is None:
                best = (r["share"], key)
        return best

    def totals(self) -> tuple[int, int]:
        return (sum(e["examples"] for e in self.props.values()), sum(e["failures"] for e in self.props.values()))

    def deviation_totals(self) -> tuple[int, int]:
        """(examples that met a declared deviation, of which passed unexpectedly)."""
        return (sum(d["examples"] for d in self.deviations.values()),
                sum(d["unexpected_passes"] for d in self.deviations.values()))


# the bounds that applied to a row's worst-share example (the normwise one widens with the yardstick)
AT_WORST = ("budget_at_worst", "err_yardstick_at_worst", "normwise_allowed_at_worst")


def _json_row(r: dict) -> dict:
    out = dict(r)
    for n in ("max_abs", "normwise", "share") + AT_WORST:
        out[n] = num(r.get(n))
    out["tol"] = {k: num(v) for k, v in r["tol"].items()}
    return out


def _unjson_row(r: dict) -> dict:
    out = dict(r)
    for n in ("max_abs", "normwise", "share") + AT_WORST:
        out[n] = unnum(r.get(n))
    out["tol"] = {k: unnum(v) for k, v in r.get("tol", {}).items()}
    out["why"] = list(r.get("why", []))
    out["max_abs_where"] = list(r.get("max_abs_where", []))
    return out


def _json_prop(e: dict) -> dict:
    out = dict(e, worst_share=num(e["worst_share"]), tally=dict(e["tally"]))
    n = max(e["examples"], 1)
    out["tally_fraction"] = {f: round(c / n, 4) for f, c in e["tally"].items()}
    return out


class ItemStats:
    """What one pytest item's examples measured (for JUnit properties and reproducers)."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid
        self.examples = 0
        self.failures = 0
        self.props: set[str] = set()
        self.worst_share = 0.0
        self.output_share: dict[str, float] = {}
        self.known_deviations = 0
        self.unexpected_passes = 0
        self.last_failure = None   # the last failing PropertyResult: Hypothesis replays the minimal one last

    def add(self, result) -> None:
        self.examples += 1
        self.props.add(result.prop)
        self.worst_share = max(self.worst_share, _bad(result.worst_share))
        for c in result.checked:
            self.output_share[c.output] = max(self.output_share.get(c.output, 0.0), _bad(c.share))
        self.known_deviations += bool(result.known)
        self.unexpected_passes += bool(result.unexpected_passes)
        if not result.strict_passed:
            self.failures += 1
            self.last_failure = result

    def user_properties(self) -> list[tuple[str, Any]]:
        """JUnit <property> pairs: names are stable, values are short strings."""
        props = [("ssd_property", ",".join(sorted(self.props)) or "none"),
                 ("ssd_examples", self.examples), ("ssd_failures", self.failures),
                 ("ssd_worst_share", _fmt(self.worst_share))]
        props += [(f"ssd_worst_share.{out}", _fmt(s)) for out, s in sorted(self.output_share.items())]
        if self.known_deviations:
            props += [("ssd_known_deviations", self.known_deviations),
                      ("ssd_unexpected_passes", self.unexpected_passes)]
        return props


def _fmt(x: float) -> str:
    return f"{x:.6g}"
