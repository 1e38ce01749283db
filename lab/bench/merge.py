"""Merge the race's per-group JSON into one markdown report and a speedup plot.

    python -m lab.bench.merge DIR_OR_FILE... --out lab/reports/bench

Writes OUT/bench.md (runs and ceilings, one table per dstate, what did not run, repeated
measurements), OUT/speedup.png (speedup over mamba_ssm against seqlen, one panel per dstate; needs
matplotlib, a bench-only dependency: without it the PNG is skipped with a note) and OUT/merged.json.xz
(every row, xz-packed: `xz -dc merged.json.xz`).

Speedups are the ones measured in one process on the same inputs (the JSON's `speedup`); rates and
floors are recomputed from the raw times with lab/bench/roofline.py and that run's measured ceilings.
When a (shape, implementation) was measured by several runs, the latest is reported and the others
are listed under "Repeated measurements" (their spread is the noise floor of a comparison).
"""
from __future__ import annotations

import argparse
import glob
import io
import json
import lzma
import math
import os
import sys

from lab.bench import roofline
from lab.bench.race import SCHEMA
from lab.bench.shapes import BASELINE, DSTATES, GROUPS, ORDER

IMPL_ORDER = {"mamba-ssm": 0, "cutile": 1, "tilegym": 2, "vllm": 3}
IMPL_STYLE = {"cutile": ("tab:green", "o"), "tilegym": ("tab:orange", "s"), "vllm": ("tab:purple", "D")}
COMBO_STYLE = {(32, 1): "-", (32, 8): "--", (64, 1): "-.", (64, 8): ":"}


def load_docs(paths) -> list[dict]:
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "**", "*.json"), recursive=True)) if os.path.isdir(p) else [p]
    docs = []
    for f in files:
        try:
            with open(f) as fh:
                doc = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            print(f"lab.bench.merge: skipping {f}: {e}", file=sys.stderr)
            continue
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            doc["_file"] = f
            docs.append(doc)
    return docs


def _best_chunk_entry(e: dict) -> dict:
    return e.get("chunks", {}).get(str(e.get("best_chunk")), {})


def rows_of(doc: dict) -> list[dict]:
    rows = []
    ceil = doc.get("ceilings", {})
    for rec in doc.get("shapes", []):
        shape = rec["shape"]
        if "skipped" in rec:
            rows.append({**shape, "id": rec["id"], "label": rec.get("label"), "impl": None, "status": "skipped",
                         "reason": f"shape skipped ({rec['skipped']})", "group": doc["group"],
                         "started": doc.get("started")})
            continue
        for impl, e in rec.get("impls", {}).items():
            row = {**shape, "id": rec["id"], "label": rec.get("label"), "impl": impl, "group": doc["group"],
                   "started": doc.get("started"), "status": e.get("status"), "reason": e.get("reason")}
            if e.get("status") == "ok":
                b = _best_chunk_entry(e)
                row.update(best_chunk=e["best_chunk"], ms=e["ms"], ms_p20=b.get("ms_p20"), ms_p80=b.get("ms_p80"),
                           ok=e.get("ok"), first_call_s=e.get("first_call_s"), host_ms=b.get("host_ms"),
                           tuning=e.get("tuning"), tune_s=e.get("tune_s"),
                           err_f64_small=b.get("err_f64_small"), err_vs_anchor=b.get("err_vs_anchor"),
                           anchor=b.get("anchor"), speedup=rec.get("speedup", {}).get(impl),
                           by_chunk={c: v.get("ms") for c, v in e.get("chunks", {}).items()},
                           **roofline.metrics(shape, e["best_chunk"], e["ms"], e.get("state_elem_bytes", 2),
                                              ceil.get("copy_GBps"), ceil.get("matmul_TFLOPs")))
            else:
                row["chunk_reasons"] = {c: v.get("reason") for c, v in e.get("chunks", {}).items() if v.get("reason")}
            rows.append(row)
    return rows


def merge(docs: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(latest ok row per (shape, impl), rows that did not run, repeated ok measurements)."""
    latest, repeats, missing = {}, {}, []
    for doc in sorted(docs, key=lambda d: d.get("started") or ""):
        for row in rows_of(doc):
            if row["status"] != "ok":
                missing.append(row)
                continue
            key = (row["id"], row["impl"])
            repeats.setdefault(key, []).append(row)
            latest[key] = row
    done = set(latest)
    missing = [r for r in missing if (r["id"], r["impl"]) not in done]
    reps = [dict(id=k[0], impl=k[1], runs=[(r["group"], r["ms"]) for r in v]) for k, v in repeats.items() if len(v) > 1]
    return list(latest.values()), missing, reps


TARGET_IMPL, TARGET_PEER = "cutile", "tilegym"
MOONSHOT = dict(min_seqlen=16384, max_dstate=128, x_io_floor=2.0)


def target_pairs(docs: list[dict]) -> list[dict]:
    """cutile against TileGym where one process timed both on the same inputs (the latest such run per
    shape): the issue's target is cutile ms <= TileGym ms at every shape TileGym ran."""
    pairs = {}
    for doc in sorted(docs, key=lambda d: d.get("started") or ""):
        for rec in doc.get("shapes", []):
            impls = rec.get("impls", {})
            a, b = impls.get(TARGET_IMPL, {}), impls.get(TARGET_PEER, {})
            if a.get("status") == "ok" and b.get("status") == "ok" and a.get("ok") and b.get("ok"):
                pairs[rec["id"]] = {"id": rec["id"], "label": rec.get("label"), **rec["shape"], "group": doc["group"],
                                    "ms": a["ms"], "chunk": a.get("best_chunk"),
                                    "peer_ms": b["ms"], "peer_chunk": b.get("best_chunk"), "ratio": a["ms"] / b["ms"]}
                if a.get("graph_ms") and b.get("graph_ms"):
                    pairs[rec["id"]].update(graph_ms=a["graph_ms"], graph_chunk=a.get("graph_chunk"),
                                            peer_graph_ms=b["graph_ms"], peer_graph_chunk=b.get("graph_chunk"),
                                            graph_ratio=a["graph_ms"] / b["graph_ms"])
    return sorted(pairs.values(), key=lambda r: (r["dstate"], r["nheads"], r["ngroups"], r["seqlen"], r["batch"]))


def target_lines(docs: list[dict], rows: list[dict]) -> list[str]:
    pairs = target_pairs(docs)
    out = ["", f"## Target: {TARGET_IMPL} at least as fast as {TARGET_PEER}", ""]
    if not pairs:
        return out + [f"No run timed {TARGET_IMPL} and {TARGET_PEER} together (both correct)."]
    met = sum(p["ratio"] <= 1.0 for p in pairs)
    out += [f"Met at {met} of {len(pairs)} shapes where one process timed both (same inputs).", "",
            f"| shape | group | {TARGET_IMPL} ms (cs) | {TARGET_PEER} ms (cs) | {TARGET_IMPL} / {TARGET_PEER} | met |",
            "|---|---|---|---|---|---|"]
    for p in pairs:
        out.append(f"| {p['id']} | {p['group']} | {p['ms']:.3f} ({p['chunk']}) | {p['peer_ms']:.3f} ({p['peer_chunk']}) "
                   f"| {p['ratio']:.2f} | {'yes' if p['ratio'] <= 1.0 else '**no**'} |")
    graphed = [p for p in pairs if "graph_ratio" in p]
    if graphed:
        out += ["", "The same pairs replayed from CUDA graphs (no host launches; each at its own best chunk): "
                "where the eager ratio and this one differ, the host's launches decide the eager figure.", "",
                f"| shape | {TARGET_IMPL} graph ms (cs) | {TARGET_PEER} graph ms (cs) | ratio (graph) | ratio (eager) |",
                "|---|---|---|---|---|"]
        for p in graphed:
            out.append(f"| {p['id']} | {p['graph_ms']:.3f} ({p['graph_chunk']}) | {p['peer_graph_ms']:.3f} "
                       f"({p['peer_graph_chunk']}) | {p['graph_ratio']:.2f} | {p['ratio']:.2f} |")
    moon = [r for r in rows if r["impl"] == TARGET_IMPL and r["seqlen"] >= MOONSHOT["min_seqlen"]
            and r["dstate"] <= MOONSHOT["max_dstate"] and r.get("floor_io_ms")]
    if moon:
        x = sorted(r["ms"] / r["floor_io_ms"] for r in moon)
        ok = sum(v <= MOONSHOT["x_io_floor"] for v in x)
        out += ["", f"Moonshot (seqlen >= {MOONSHOT['min_seqlen']}, dstate <= {MOONSHOT['max_dstate']}: within "
                f"{MOONSHOT['x_io_floor']:.0f}x of the I/O floor): {ok} of {len(x)} shapes; {TARGET_IMPL} is "
                f"{x[0]:.1f}x to {x[-1]:.1f}x the I/O floor there."]
    return out


def _f(v, fmt="{:.3f}", none="—"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return fmt.format(v)


def _sort_key(r):
    return (r["dstate"], r["nheads"], r["ngroups"], r["seqlen"], r["batch"], IMPL_ORDER.get(r["impl"], 9))


def markdown(docs, rows, missing, repeats, png: str | None, png_note: str | None) -> str:
    out = ["# SSD forward race", ""]
    out.append("bf16 inputs, headdim 64, dt fp32, D (h,), no initial or final states; each implementation at its "
               "fastest correct chunk size; median of CUDA-event timings (`lab/bench/race.py`). "
               f"`× {BASELINE}`: speedup over mamba_ssm measured in the same process on the same inputs.")
    out += ["", "## Runs and ceilings", "",
            "| group | gpu | started (UTC) | s | complete | copy GB/s | bf16 mm TFLOP/s | torch | triton | cuda-tile "
            "| tilegym | mamba_ssm | git | kernels sha256 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in sorted(docs, key=lambda d: d.get("started") or ""):
        e, c = d.get("env", {}), d.get("ceilings", {})
        complete = "yes" if d.get("complete") else ("aborted: " + d["aborted"] if d.get("aborted") else "no")
        out.append(f"| {d['group']} | {e.get('gpu', '?')} | {d.get('started', '?')} | {d.get('elapsed_s', 0):.0f} "
                   f"| {complete} | {_f(c.get('copy_GBps'), '{:.0f}')} | {_f(c.get('matmul_TFLOPs'), '{:.0f}')} "
                   + "".join(f"| {e.get(k) or '—'} " for k in ("torch", "triton", "cuda_tile", "tilegym", "mamba_ssm", "git"))
                   + f"| {(e.get('kernels_sha256') or '—')[:12]} |")
        untuned = [v for v in ("TILEGYM_DISABLE_AUTOTUNE", "MAMBA_DETERMINISTIC") if e.get(v)]
        if untuned:
            out.append(f"| ↳ untuned run: {', '.join(f'{v}={e[v]}' for v in untuned)} ||||||||||||||")
        if e.get("SSDCHECK_CUTILE_CONFIG"):
            out.append(f"| ↳ cutile off its dispatch table: SSDCHECK_CUTILE_CONFIG={e['SSDCHECK_CUTILE_CONFIG']} ||||||||||||||")
    if png:
        out += ["", f"![speedup over mamba_ssm]({os.path.basename(png)})"]
    elif png_note:
        out += ["", f"(plot not written: {png_note})"]
    out += target_lines(docs, rows)
    cols = ("| b×L | h | g | impl | cs | ms (p20–p80) | host ms | × mamba | TFLOP/s | % mm | GB/s I/O | % copy "
            "| I/O floor ms | +states floor ms | × floor | err f64 (small) | err vs mamba | first call s | ok |")
    for n in sorted({r["dstate"] for r in rows}):
        out += ["", f"## dstate {n}", "", cols, "|" + "---|" * 19]
        for r in sorted((r for r in rows if r["dstate"] == n), key=_sort_key):
            spread = f"{_f(r['ms'])} ({_f(r.get('ms_p20'))}–{_f(r.get('ms_p80'))})"
            host = _f(r.get("host_ms"))
            if r.get("host_ms") and r["host_ms"] > 0.5 * r["ms"]:
                host += " ⚠"
            out.append(
                f"| {r['label']} | {r['nheads']} | {r['ngroups']} | {r['impl']} | {r['best_chunk']} | {spread} | {host} "
                f"| {_f(r.get('speedup'), '{:.2f}')} | {_f(r.get('TFLOPs'), '{:.1f}')} "
                f"| {_f(100 * r['frac_matmul'] if r.get('frac_matmul') else None, '{:.0f}')} "
                f"| {_f(r.get('io_GBps'), '{:.0f}')} | {_f(100 * r['frac_copy'] if r.get('frac_copy') else None, '{:.0f}')} "
                f"| {_f(r.get('floor_io_ms'))} | {_f(r.get('floor_states_ms'))} | {_f(r.get('x_floor_states'), '{:.2f}')} "
                f"| {_f(r.get('err_f64_small'), '{:.1e}')} | {_f(r.get('err_vs_anchor'), '{:.1e}')} "
                f"| {_f(r.get('first_call_s'), '{:.1f}')}{' (recorded tuning)' if r.get('tuning') == 'recorded' else ''} "
                f"| {'yes' if r.get('ok') else '**NO**'} |")
    measured = {r["id"] for r in rows}
    planned = {s.id: s for name in ORDER for s in GROUPS[name].shapes if name != "smoke"}
    never = sorted(set(planned) - measured, key=lambda i: (planned[i].dstate, planned[i].nheads,
                                                             planned[i].ngroups, planned[i].seqlen))
    if missing or never:
        out += ["", "## Not run", ""]
        for r in sorted(missing, key=lambda r: (r["dstate"], r["nheads"], r["ngroups"], r["seqlen"])):
            why = r.get("reason") or "; ".join(f"cs{c}: {w}" for c, w in (r.get("chunk_reasons") or {}).items())
            out.append(f"- {r['id']} {r['impl'] or ''} [{r['group']}]: {r['status']}{': ' + why if why else ''}")
        if never:   # by the group that plans them: a group not run yet would otherwise be a wall of ids
            unrun = set(never)
            by_group = [(name, [s.id for s in GROUPS[name].shapes if s.id in unrun]) for name in ORDER if name != "smoke"]
            parts = [f"{name} {len(ids)} of {len(GROUPS[name].shapes)}" + (f" ({', '.join(ids)})" if len(ids) <= 4 else "")
                     for name, ids in by_group if ids]
            out.append(f"- planned shapes with no result: {len(never)}, by the groups that plan them "
                       f"(`python -m lab.bench.race --list`): {'; '.join(parts)}")
    if repeats:
        out += ["", "## Repeated measurements (latest reported above)", "", "| shape | impl | ms by group | spread |",
                "|---|---|---|---|"]
        for r in repeats:
            ms = [m for _, m in r["runs"]]
            out.append(f"| {r['id']} | {r['impl']} | {', '.join(f'{g}: {m:.3f}' for g, m in r['runs'])} "
                       f"| {100 * (max(ms) - min(ms)) / min(ms):.1f}% |")
    out += ["", "## How to read it", "",
            "- **I/O floor**: x, dt, A, B, C, D read once and y written once, over the measured copy bandwidth. "
            "**+states floor**: plus one write and one read of the chunk states (b·nchunks·h·p·n in the "
            "implementation's state dtype, at its chunk size), what a design passing states between kernels "
            "through memory moves at least. **× floor**: time over the +states floor.",
            "- **TFLOP/s**: the chunked algorithm's matrix products (dense tiles, at the row's chunk size: "
            "h·(4Lpn + 2L²p) + g·2L²n per chunk) over the time; % of the bf16 matmul rate measured in the same run.",
            "- **err f64 (small)**: normwise relative error against ssdcheck's float64 chunked oracle on a downscaled "
            "copy of the inputs (the whole batch, first 1024 tokens; TileGym with autotune off there). **err vs mamba**: "
            "normwise relative difference from mamba_ssm's output on the full inputs (the tuned configs). "
            "ok: err f64 ≤ 2e-2 (bf16) and err vs mamba ≤ 5e-2.",
            "- **host ms**: host time per call when nothing is waited for (argument checks, Python, launches); "
            "⚠ when over half the measured time: at that shape the call may be launch-bound rather than GPU-bound.",
            "- **first call s**: wall time of the first call of that shape: compile plus autotuning "
            "(TileGym's exhaustive search over its configs; Triton's for mamba_ssm), apart from the run time; "
            "*recorded tuning*: TileGym ran its own search's choice from an earlier run (kernels/peers/tilegym_tuning.py).",
            ""]
    return "\n".join(out)


def plot(rows, path: str) -> str | None:
    """speedup over mamba_ssm against seqlen, one panel per dstate; returns why not, or None."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib: a bench-only dependency)"
    pts = [r for r in rows if r["impl"] != BASELINE and r.get("speedup") is not None]
    if not pts:
        return f"no speedups over {BASELINE} to plot"
    dstates = sorted({r["dstate"] for r in pts} | ({n for n in DSTATES} & {r["dstate"] for r in rows}))
    fig, axes = plt.subplots(1, len(dstates), figsize=(5.2 * len(dstates), 4.4), sharey=True, squeeze=False)
    seqs = sorted({(r["seqlen"], r["batch"], r["label"]) for r in rows})
    ymax = max(2.0, max(r["speedup"] for r in pts) * 1.15)
    for ax, n in zip(axes[0], dstates):
        ax.axhline(1.0, color="0.4", lw=1.2, label=f"{BASELINE} (Triton)")
        for impl in sorted({r["impl"] for r in pts}, key=lambda i: IMPL_ORDER.get(i, 9)):
            color, marker = IMPL_STYLE.get(impl, ("tab:blue", "^"))
            for combo in sorted({(r["nheads"], r["ngroups"]) for r in pts if r["impl"] == impl and r["dstate"] == n}):
                line = sorted((r for r in pts if r["impl"] == impl and r["dstate"] == n
                               and (r["nheads"], r["ngroups"]) == combo), key=lambda r: r["seqlen"])
                xs, ys = [r["seqlen"] for r in line], [r["speedup"] for r in line]
                ax.plot(xs, ys, color=color, ls=COMBO_STYLE.get(combo, "-"), marker=marker, ms=5,
                        label=f"{impl} h{combo[0]} g{combo[1]}")
                bad = [(r["seqlen"], r["speedup"]) for r in line if not r.get("ok")]
                if bad:
                    ax.scatter(*zip(*bad), s=90, facecolors="none", edgecolors="red", zorder=5)
        ax.set_xscale("log", base=2)
        ax.set_xticks([s for s, _, _ in seqs])
        ax.set_xticklabels([lab for _, _, lab in seqs], rotation=30)
        ax.set_ylim(0, ymax)
        ax.set_title(f"dstate {n}")
        ax.set_xlabel("batch × seqlen")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"speedup over {BASELINE} (×)")
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=8, frameon=False)
    fig.suptitle("Mamba-2 SSD forward, bf16, headdim 64, H200: speedup over mamba_ssm (red ring: check failed)")
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))
    buf = io.BytesIO()
    fig.savefig(buf, dpi=130, format="png")
    plt.close(fig)
    _write_png_small(buf, path)
    return None


def _write_png_small(buf: io.BytesIO, path: str) -> None:
    """a 128-colour palette: a third of the bytes of matplotlib's RGBA PNG, the lines unchanged to the eye
    (the plot is tracked, and the tree has a size budget: tests/test_tree_hygiene.py)"""
    from PIL import Image   # matplotlib's own dependency
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(colors=128).save(path, format="PNG", optimize=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.merge", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="directories (searched recursively) or JSON files from lab.bench.race")
    ap.add_argument("--out", default="lab/reports/bench")
    args = ap.parse_args(argv)
    docs = load_docs(args.inputs)
    if not docs:
        print(f"lab.bench.merge: no {SCHEMA} JSON under {args.inputs}", file=sys.stderr)
        return 2
    rows, missing, repeats = merge(docs)
    os.makedirs(args.out, exist_ok=True)
    png = os.path.join(args.out, "speedup.png")
    why = plot(rows, png)
    md = markdown(docs, rows, missing, repeats, None if why else png, why)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(md)
    # xz: the merged rows repeat their keys and pack about 10x (the file is tracked: the tree has a budget)
    with lzma.open(os.path.join(args.out, "merged.json.xz"), "wt", preset=9 | lzma.PRESET_EXTREME) as f:
        json.dump({"runs": [{k: v for k, v in d.items() if k != "shapes"} for d in docs],
                   "rows": rows, "not_run": missing, "repeats": repeats}, f, separators=(",", ":"), default=str)
    print(f"lab.bench.merge: {len(docs)} runs, {len(rows)} results -> {args.out}/bench.md"
          + ("" if why else f", {png}") + (f" (no plot: {why})" if why else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
