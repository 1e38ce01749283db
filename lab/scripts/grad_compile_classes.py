"""usage: python lab/scripts/grad_compile_classes.py [--impl tilegym] [--examples 200] [--group-broadcast]

How many compile classes (KernelInfo.compile_key) the gradient tests' draws span for an implementation,
on the CPU: `--examples` derandomized draws of properties.grad_strategies.grad_problems as a GPU run
sizes them, each draw's key counted, the triage battery's keys marked. A class is a compile of every
kernel the backward launches, so for an implementation whose classes cost a minute each this is the
floor of one gradient test's compile time. `--group-broadcast` counts the classes of the two runs
prop_grad_group_broadcast makes of each draw (grouped, and one group per head) instead.
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository


def group_broadcast_runs(info, problem) -> list:
    """The problems prop_grad_group_broadcast runs the backward on for a draw: grouped, then per head."""
    from properties.gradients import group_broadcast_problem
    grouped = group_broadcast_problem(info, problem)
    return [] if grouped is None else [grouped, grouped.replace(ngroups=grouped.nheads)]


def the_problem(info, problem) -> list:
    """The problems a property that runs the backward once launches for a draw: the draw itself."""
    return [problem]


def count_classes(info, examples: int = 200, runs=the_problem) -> tuple[collections.Counter, set]:
    """({compile key: runs} of `examples` derandomized GPU gradient draws, the keys of the battery's runs,
    which the warm-up compiles); `runs` maps a problem to the problems a property launches for it
    (default: the problem itself)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from properties import grad_strategies
    battery = {info.compile_class(q) for p in grad_strategies.battery(info, True) for q in runs(info, p)}
    counts: collections.Counter = collections.Counter()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        for p in runs(info, data.draw(grad_strategies.grad_problems(info, gpu=True))):
            counts[info.compile_class(p)] += 1

    draw()
    return counts, battery


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", default="tilegym", help="a registered implementation with a backward (default tilegym)")
    ap.add_argument("--examples", type=int, default=200, help="draws (default 200, the gpu profile's count)")
    ap.add_argument("--group-broadcast", action="store_true",
                    help="count prop_grad_group_broadcast's two runs of each draw instead of the draws")
    args = ap.parse_args(argv)
    if args.examples < 1:
        ap.error(f"--examples: expected at least 1, got {args.examples}")
    from kernels.registry import lookup
    info = lookup(args.impl)
    if info.compile_key is None or info.backward is None:
        ap.error(f"--impl: {info.name} declares no compile key or no backward")
    counts, battery = count_classes(info, args.examples, group_broadcast_runs if args.group_broadcast else the_problem)
    in_battery = sum(c for k, c in counts.items() if k in battery)
    print(f"{info.name}: {sum(counts.values())} {'runs' if args.group_broadcast else 'draws'}, {len(counts)} compile classes; "
          f"{len(battery & set(counts))} of the battery's {len(battery)} classes take {in_battery}")
    for key, c in counts.most_common():
        print(f"{c:5d}  {'battery ' if key in battery else 'explored'}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
