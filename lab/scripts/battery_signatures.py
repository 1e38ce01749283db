"""The cuTile kernel signatures (cold compiles) the gate's triage battery needs, per property test and in
all, counted on the CPU: each property runs on each battery problem with cutile's launches recorded
(lab/scripts/cubin_resources.recorded_launches) and stubbed, inputs left unfilled.

    python lab/scripts/battery_signatures.py        # ~2.5 min on 2 cores; needs cuda-tile (no GPU)

The sum over tests is what the tests compile one by one; the union is what the battery warm-up
(ssdcheck_plugin/warmup.py) spreads over the workers.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # the repository


def main() -> int:
    from lab.bench.host_profile import launches_stubbed
    from kernels.cutile import ssd_forward
    from kernels.registry import lookup
    from properties import invariants, triage
    from lab.scripts.cubin_resources import recorded_symbols, unfilled_normals
    seen: set = set()

    def recording_forward(**kw):
        seen.update(recorded_symbols(kw))
        with launches_stubbed():
            return ssd_forward(**kw)

    real = lookup("cutile")
    info = real.replace(fn=recording_forward, device="cpu")
    invariants.device_for = lambda i: "cpu"   # the problems stay GPU-sized (battery(..., gpu=True))
    runs = [(p, triage.battery(real, True)) for p in sorted(invariants.PROPERTIES)]
    runs += [(f"prop_matches_oracle (model layer, {d})", triage.battery(real, True, d, "model")) for d in sorted(real.dtypes)]
    per = {}
    with unfilled_normals():   # only the launches count
        for name, problems in runs:
            seen = set()
            for problem in problems:
                try:
                    invariants.PROPERTIES[name.split(" ")[0]](info, problem)
                except Exception:   # noqa: BLE001 (outputs are unfilled: comparisons may fail on them)
                    pass
            per[name] = seen
    for name, sigs in per.items():
        print(f"{name:<50} {len(sigs)}")
    print(f"sum over tests {sum(map(len, per.values()))}, distinct {len(set().union(*per.values()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
