"""`ssdcheck report FILE`: markdown summary of an ssdcheck JSON report: per-property examples,
failures, worst share of the tolerance used, and the feature tallies a GPU gate report must show.
(`python3 scripts/summarize_report.py FILE` is an alias.)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_NO_REPORT = 3
DESCRIPTION = """\
Summarize an ssdcheck JSON report (--ssd-report) as markdown, e.g. for a CI job summary or a report
under lab/reports/."""
EPILOG = """\
prints: the run (GPU, driver, versions, profile, command), totals and the worst share, any stall or
hang files, a table per property (examples, failures, worst share of the tolerance), a table per
test (examples, cut by the time budget, where its seconds went), the feature tallies (features under
10% of the examples flagged: code paths the run barely reached) and the worst error per output.
When the file is missing (pytest was killed first) it says so and lists the stall and hang files
beside it.

exit codes:
  0  summarized
  3  no report at that path (the run was killed before writing it)
  4  not an ssdcheck report, or bad arguments"""


FEATURE_FLOOR = 0.10   # strategies.tally: each feature in at least 10% of a GPU gate's examples


def thin_features(fraction: dict[str, float], floor: float = FEATURE_FLOOR) -> dict[str, float]:
    """The tallied features fewer than `floor` of the examples had: code paths the run barely reached
    (a GPU gate once drew whole chunks without seq_idx in 6.8% of its examples, and two mutants of that
    path survived)."""
    return {k: v for k, v in fraction.items() if v < floor}


def missing_report(path: str) -> str:
    """What to say when the run left no report: pytest was killed first (the job's time limit: a hang,
    or a budget too short for its compiles), and the watch files beside the path say where it waited."""
    report = Path(path)
    files = sorted(report.parent.glob(f"{report.stem}.stall-*.txt")) + sorted(report.parent.glob(f"{report.stem}.hang-*.txt"))
    lines = [f"# no ssdcheck report at {path}\n",
             "pytest ended before writing it: killed at the job's time limit (a hung example, or a budget too short "
             "for a cold compile cache). Stall and hang files beside it (a hang file's dump names the stuck test):\n"]
    for f in files:
        text = f.read_text()
        heads = [ln for ln in text.splitlines() if ln.startswith(("ssdcheck stall:", "ssdcheck hang watch:", "Timeout ("))]
        lines.append(f"- `{f}`: " + ("; ".join(heads[-3:]) or "(empty)"))
    if not files:
        lines.append("- none: no example outran its stall grace or the hang timer before the kill")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ssdcheck report", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="an ssdcheck JSON report (ssdcheck test ... --ssd-report FILE)")
    return ap


def main(argv: list[str]) -> int:
    path = build_parser().parse_args(argv).file
    if not Path(path).exists():
        print(missing_report(path))
        return EXIT_NO_REPORT
    try:
        summarize(path)
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        print(f"ssdcheck report: {path} is not an ssdcheck report ({type(e).__name__}: {e})", file=sys.stderr)
        return 4
    return 0


def summarize(path: str) -> None:
    r = json.load(open(path))
    meta = r["meta"]
    gpu = meta.get("gpu") or {}
    print(f"# ssdcheck run {meta['created']}\n")
    print(f"- GPU: {', '.join(d.get('name', '?') for d in gpu.get('devices', [])) or 'none'}; "
          f"driver {gpu.get('driver')}; versions {meta.get('versions')}")
    tools = meta.get("toolchain") or {}
    print(f"- toolchain: tileiras {tools.get('tileiras')} ({tools.get('tileiras_source')}: "
          f"{tools.get('tileiras_path')}), ptxas {tools.get('ptxas')}, cuda-tile {tools.get('cuda_tile')}, "
          f"torch {tools.get('torch')}, Triton {tools.get('triton')}")
    print(f"- profile: {meta['hypothesis']['profile']} (max_examples {meta['hypothesis']['max_examples']}); "
          f"command: {' '.join(meta['command'])}")
    s = r["summary"]
    print(f"- tests: {s['tests']}; examples {s['examples']}; failing examples {s['failures']}; "
          f"worst share {s['worst_share']:.3g} at {s['worst']}\n")
    for f in ((meta.get("fuzz") or {}).get("stall_reports") or []):   # the stall watchdog's files
        if ".hang-" in Path(f).name:
            print(f"- **hang**: an example ran past --ssd-hang-seconds; its stacks: `{f}`\n")
        else:
            print(f"- **stall**: an example overran its time share; where it waited: `{f}`\n")
    if r.get("deviations"):   # declared known bugs met (docs/contract.md)
        print(f"- known deviations: {s.get('known_deviations', 0)} example(s) met a declared deviation, "
              f"{s.get('unexpected_passes', 0)} passed unexpectedly\n")
        print("| impl | property | outputs | examples | unexpected passes | below resolution | reason | finding |")
        print("| --- | --- | --- | ---: | ---: | ---: | --- | --- |")
        for d in r["deviations"]:
            print(f"| {d['impl']} | {d['prop']} | {', '.join(d['outputs'])} | {d['examples']} | "
                  f"{d['unexpected_passes']} | {d.get('below_resolution', 0)} | {d['reason']} | {d['finding']} |")
        for d in r["deviations"]:
            for prob in d["unexpected_pass_problems"]:
                print(f"- unexpected pass ({d['impl']} {d['prop']}): `{prob}`")
        print()
    print("| impl | property | examples | failures | worst share of tolerance |")
    print("| --- | --- | ---: | ---: | ---: |")
    for p in r["properties"]:
        print(f"| {p['impl']} | {p['prop']} | {p['examples']} | {p['failures']} | {p['worst_share']:.3g} |")
    print("\nPer test (a test cut by the time budget ran fewer examples than its profile asks):\n")
    print("Seconds: the call, then where it went (ssd_seconds.*): inputs generated, the implementation "
          "(compiles included, also shown apart), the float64 reference, comparing.\n")
    print("| test | outcome | examples | cut by budget | seconds | inputs | impl | compile | reference | compare |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in r["tests"]:
        up = t.get("properties", {})
        sec = [up.get(f"ssd_seconds.{k}") for k in ("inputs", "impl", "compile", "reference", "compare")]
        sec = " | ".join("" if v is None else f"{float(v):.0f}" for v in sec)
        print(f"| {t['nodeid'].split('::')[-1]} | {t['outcome']} | {up.get('ssd_examples', '')} | "
              f"{'yes' if up.get('ssd_cut_by_budget') else ''} | {t.get('call_duration', 0):.0f} | {sec} |")
    print("\nFeature tallies (fraction of examples):\n")
    for impl, t in r["tallies"].items():
        fr = ", ".join(f"{k} {v:.1%}" for k, v in t["fraction"].items())
        print(f"- {impl}: {t['examples']} examples: {fr}")
        thin = thin_features(t["fraction"])
        if thin:
            print(f"  - **under {FEATURE_FLOOR:.0%}** (barely reached): "
                  + ", ".join(f"{k} {v:.1%}" for k, v in thin.items()))
    if r.get("coverage"):   # kernels.registry imports torch: only for a report that has paths to show
        from kernels.registry import FORCED_ONLY   # noqa: PLC0415
    for impl, paths in (r.get("coverage") or {}).items():
        default = {k: n for k, n in paths.items() if not k.endswith(FORCED_ONLY)}
        missed = [k for k, n in default.items() if not n]
        print(f"\nDispatch paths of {impl} (launches): {len(default) - len(missed)} of {len(default)} reached"
              + (f"; **not reached**: {'; '.join(missed)}" if missed else ", every one")
              + "; paths only a switch selects, aside: "
              + (", ".join(f"{k.removesuffix(FORCED_ONLY).strip()} ({n})" for k, n in paths.items()
                           if k.endswith(FORCED_ONLY)) or "none"))
    print("\nWorst error per output:\n")
    print("| impl | property | output | dtype | examples | max abs | worst share |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for x in r["results"]:
        print(f"| {x['impl']} | {x['prop']} | {x['output']} | {x['dtype']} | {x['examples']} | "
              f"{x['max_abs']:.3g} | {x.get('share', float('nan')):.3g} |")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
