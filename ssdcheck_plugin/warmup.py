"""Battery warm-up: the triage battery's compiles spread over every xdist worker before any test starts.

Every property test checks the triage battery (properties/triage.py) first, so in a cold run each test
first compiles what the battery needs, serially in its own worker. The battery's derived runs make
many classes of their own. In the cold gate on the H200 (lab/reports/2026-12-02-gate-model-classes.md)
test_seq_idx_packing spent 205 s compiling for the battery's 6 problems: counted on the CPU, they need
66 cuTile kernel signatures, since each packed sequence's separate run is a class of its own. Its time
share then cut it at 6 examples, while other workers sat idle.

Here each worker, once collection is done and before xdist hands out tests, claims (property, battery
problem) checks one at a time from a list every worker derives alike, through a counter under a file
lock. It runs each check only to compile what it needs and discards the result. The tests then run the
same checks from the compile cache. Counted on the CPU (lab/scripts/battery_signatures.py), the gate's
battery checks need 121 distinct signatures; run test by test they are compiled 351 times over, though
the compile lock lets only one process build each. Spread over every core, they all compile at once.

Gradient tests (tests/test_gradients.py) have no explicit battery, but most of their GPU draws copy
a compile class of the battery of the backward's options; those problems are their checks. On the
H200 one TileGym gradient class cost about a minute of compiling (lab/reports/2026-12-02-backward-h200.md),
and a lone test compiled its three serially.

Under a time budget the warm-up claims no check once half the time to the session's deadline is spent,
nor one that the longest of its checks so far says would end past that point: it is an optimization
that must leave the tests their time. TileGym as shipped (its exhaustive search for every new shape)
spent a whole 457 s budget of 16 workers in the warm-up, and no test started
(lab/reports/2026-12-07-shipped-fills-and-peer-ttf.md). A check that runs on has the stall watchdog's
hang timer over it, as an example has, so a wedged check leaves its stack.

It runs under xdist with more than one worker, on a GPU, for implementations that declare a compile key
(`--ssd-warm-battery auto`, the default), and never with -x/--maxfail: a fail-fast run wants its first
example at once. `on` warms every implementation's battery wherever there are workers (tests use it on
the CPU); `off` disables it.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

SUFFIXES = ("_precision", "_long")   # test variants that check the plain battery of their property
MODEL = "_model_layer"               # test_<prop>_model_layer[impl-dtype]: the model-layer battery of a dtype


def check_of(item) -> tuple[str, str, str | None, str | None] | None:
    """(implementation, property, regime, dtype) whose battery the test item `item` checks first, or None
    for a test that is not a property test of tests/test_properties.py's or tests/test_gradients.py's
    kind. A gradient test has no explicit battery, but its draws copy the battery's compile classes
    (properties/grad_strategies.py), so compiling those first serves them the same way."""
    from properties import gradients, invariants
    if not hasattr(getattr(item, "obj", None), "hypothesis"):
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    impl = params.get("impl")
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    base, regime, dtype = name.removeprefix("test_"), None, None
    if base.endswith(MODEL):
        base, regime, dtype = base[:-len(MODEL)], "model", params.get("dtype")
    for suffix in SUFFIXES:
        base = base.removesuffix(suffix)
    prop = "prop_" + base
    if not isinstance(impl, str) or (prop not in invariants.PROPERTIES and prop not in gradients.GRAD_PROPERTIES):
        return None
    return impl, prop, regime, dtype


def battery_checks(items, compiled_only: bool = True) -> list[tuple[str, str, object]]:
    """(implementation, property, battery problem) of every collected property test, each once, sized as
    the test sizes it (GPU or CPU); the checks against the oracle first (their compiles are the base
    classes every other check shares). compiled_only: only implementations that declare a compile key."""
    return _checks(filter(None, map(check_of, items)), compiled_only)


def forward_checks(impl: str) -> list[tuple[str, str, object]]:
    """The checks battery_checks derives from a collection of tests/test_properties.py for `impl`, without
    collecting it: every forward property's triage battery, and the model-layer battery of each of its
    dtypes (for a prime that runs them before the suite, lab/scripts/gpu_autotune_prime.py --checks)."""
    from kernels.registry import lookup
    from properties import invariants
    wanted = [(impl, prop, None, None) for prop in invariants.PROPERTIES]
    wanted += [(impl, "prop_matches_oracle", "model", d) for d in lookup(impl).dtypes]
    return _checks(wanted, compiled_only=False)


def _checks(wanted, compiled_only: bool) -> list[tuple[str, str, object]]:
    from kernels.registry import lookup
    seen, out = set(), []
    for impl, prop, regime, dtype in wanted:
        info = lookup(impl)
        if compiled_only and info.compile_key is None:
            continue
        for problem in _battery(info, prop, regime, dtype):
            key = (impl, prop, problem)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return sorted(out, key=lambda c: c[1] not in ("prop_matches_oracle", "prop_grad_matches_oracle"))


def _battery(info, prop: str, regime: str | None, dtype: str | None) -> list:
    """The problems whose compiles `prop`'s test reuses: the triage battery as tests/test_properties.py
    sizes it, or for a gradient property (none where the backward is not declared) the battery of the
    forward options the backward supports, as GradProblems (properties/grad_strategies.py)."""
    from properties import grad_strategies, gradients, invariants, triage
    gpu = info.device == "cuda" or invariants.device_for(info) == "cuda"   # as the test files
    if prop not in gradients.GRAD_PROPERTIES:
        return triage.battery(info, gpu, dtype, regime)
    return [] if info.backward is None else grad_strategies.battery(info, gpu)


def wanted(config, mode: str) -> bool:
    """Whether this xdist worker warms the battery (see the module docstring)."""
    workerinput = getattr(config, "workerinput", None)
    if mode == "off" or workerinput is None or int(workerinput.get("workercount", 1)) < 2:
        return False
    if (config.getoption("maxfail", 0) or 0) > 0 or not workerinput.get("testrunuid"):
        return False
    if mode == "on":
        return True
    import torch
    return torch.cuda.is_available()


def counter_path(config) -> Path:
    return Path(tempfile.gettempdir()) / f"ssdcheck-warm-{config.workerinput['testrunuid']}"


def first_line(e: BaseException) -> str:
    """The first line of an exception's message ("" for none), for one-line logs."""
    return str(e).splitlines()[0] if str(e) else ""


SHARE = 0.5     # of the time to the session's deadline, at most, for the warm-up
SLOW_S = 30.0   # a check that took this long is named in the log as it ends


def warm(checks, counter: Path, run_check=None, log=sys.stderr, deadline: float | None = None,
         watchdog=None, clock=time.time) -> dict:
    """Claim and run checks until none is left (the claims shared through `counter`) or, with a session
    `deadline` (time.time() seconds), until the next check would end past the warm-up's SHARE of the time
    to it: {"ran": n, "seconds": s, "raised": "<the first check that raised>" or None, "stopped_for_time":
    bool}. A check that raises stops this worker's warm-up (its test will report the failure; a crashed
    kernel may have left the CUDA context unusable). `watchdog` (stall.StallWatchdog) times each check
    as an example."""
    from kernels.registry import lookup
    from properties import gradients, invariants
    from ssdcheck_plugin.fuzzing import _count_start
    props = {**invariants.PROPERTIES, **gradients.GRAD_PROPERTIES}
    run_check = run_check or (lambda impl, prop, problem: props[prop](lookup(impl), problem))
    t0, ran, raised, longest, timed_out = clock(), 0, None, 0.0, False
    until = None if deadline is None else t0 + SHARE * max(0.0, deadline - t0)
    while True:
        if until is not None and clock() + longest >= until:
            timed_out = True   # checked before claiming: an unclaimed check stays for the next worker's test
            break
        if (i := _count_start(counter)) >= len(checks):
            break
        impl, prop, problem = checks[i]
        if watchdog is not None:
            watchdog.nodeid = f"battery warm-up: {prop} on {impl}"
            watchdog.example_started()
        start = clock()
        try:
            run_check(impl, prop, problem)
        except Exception as e:   # noqa: BLE001 (the test reruns this check and reports it)
            raised = f"{prop} on {problem!r}: {type(e).__name__}: {first_line(e)}"
            break
        finally:
            if watchdog is not None:
                watchdog.example_finished()
        took = clock() - start
        longest = max(longest, took)
        if took >= SLOW_S:
            print(f"ssdcheck battery warm-up: {prop} on {impl} took {took:.0f} s: {problem!r}", file=log, flush=True)
        ran += 1
    out = {"ran": ran, "seconds": round(clock() - t0, 1), "raised": raised, "stopped_for_time": timed_out}
    print(f"ssdcheck battery warm-up: ran {ran} of {len(checks)} battery checks in {out['seconds']} s"
          + (f"; stopped: {raised}" if raised else "")
          + ("; stopped: half the time to the deadline spent" if timed_out else ""), file=log, flush=True)
    return out
