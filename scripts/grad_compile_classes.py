"""usage: python scripts/grad_compile_classes.py [--impl tilegym] [--examples 200]

How many compile classes (KernelInfo.compile_key) the gradient tests' draws span for an implementation,
on the CPU: `--examples` derandomized draws of properties.grad_strategies.grad_problems as a GPU run
sizes them, each draw's key counted, the triage battery's keys marked. A class is a compile of every
kernel the backward launches, so for an implementation whose classes cost a minute each this is the
floor of one gradient test's compile time.
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the repository


def count_classes(info, examples: int = 200) -> tuple[collections.Counter, set]:
    """({compile key: draws} of `examples` derandomized GPU gradient draws, the battery's keys)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from properties import grad_strategies
    battery = {info.compile_class(p) for p in grad_strategies.battery(info, True)}
    counts: collections.Counter = collections.Counter()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        counts[info.compile_class(data.draw(grad_strategies.grad_problems(info, gpu=True)))] += 1

    draw()
    return counts, battery


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", default="tilegym", help="a registered implementation with a backward (default tilegym)")
    ap.add_argument("--examples", type=int, default=200, help="draws (default 200, the gpu profile's count)")
    args = ap.parse_args(argv)
    if args.examples < 1:
        ap.error(f"--examples: expected at least 1, got {args.examples}")
    from kernels.registry import lookup
    info = lookup(args.impl)
    if info.compile_key is None or info.backward is None:
        ap.error(f"--impl: {info.name} declares no compile key or no backward")
    counts, battery = count_classes(info, args.examples)
    in_battery = sum(c for k, c in counts.items() if k in battery)
    print(f"{info.name}: {sum(counts.values())} draws, {len(counts)} compile classes; "
          f"{len(battery & set(counts))} of the battery's {len(battery)} classes take {in_battery} draws")
    for key, c in counts.most_common():
        print(f"{c:5d}  {'battery ' if key in battery else 'explored'}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
