"""pytest wiring for ssdcheck: implementations under test, Hypothesis profiles, GPU skips, repro.

    pytest --impl torch-ref                     # a registered name (repeatable)
    pytest --impl mypkg.ssd:forward             # any revision, by import path
    pytest --hypothesis-profile=gpu             # cpu | dev | gpu | fuzz (or HYPOTHESIS_PROFILE=...)
    pytest ... --ssd-problem "SSDProblem(...)"  # re-run exactly one drawn problem
"""
from __future__ import annotations
pytest_plugins = ["ssdcheck_plugin.plugin"]  # --ssd-report/--ssd-baseline gate, fuzz budget, GPU pinning (docs/jobs.md)

import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture]
# deadline=None everywhere: the first call of a kernel configuration compiles it.
settings.register_profile("cpu", max_examples=12, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_SLOW_OK, print_blob=True)
settings.register_profile("dev", max_examples=20, deadline=None, suppress_health_check=_SLOW_OK,
                          print_blob=True)
settings.register_profile("gpu", max_examples=200, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_SLOW_OK, print_blob=True)
settings.register_profile("fuzz", max_examples=100_000, deadline=None, suppress_health_check=_SLOW_OK,
                          print_blob=True, phases=tuple(Phase))
# A mutant run only needs the first failure: small, derandomized, no shrinking.
settings.register_profile("mutant", max_examples=12, deadline=None, derandomize=True, database=None,
                          suppress_health_check=_SLOW_OK, phases=(Phase.explicit, Phase.generate),
                          print_blob=False)
PROFILES = ("cpu", "dev", "gpu", "fuzz", "mutant")


def pytest_addoption(parser):
    group = parser.getgroup("ssdcheck")
    group.addoption("--impl", action="append", default=None,
                    help="implementation under test: a registered name or package.module:function (repeatable)")
    group.addoption("--ssd-problem", default=None,
                    help="re-run exactly this problem: the SSDProblem(...) text a failure printed")
    group.addoption("--ssd-grad-problem", default=None,
                    help="re-run exactly this backward problem: the GradProblem(...) text a failure printed")


def _profile_name(config) -> str:
    # Hypothesis loads its built-in `ci` profile when CI is set; ours are chosen explicitly.
    chosen = config.getoption("hypothesis_profile", None) or os.environ.get("HYPOTHESIS_PROFILE")
    return chosen if chosen in PROFILES else ("gpu" if torch.cuda.is_available() else "dev")


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)   # one CPU thread per xdist worker: torch's pool thrashes otherwise
    if config.pluginmanager.hasplugin("xdist") and config.getoption("maxschedchunk", None) is None:
        # xdist's load scheduling first hands each worker a block of a quarter of its share: the block
        # holding the compile tests (sorted first, below) kept one worker compiling for minutes after
        # the other ran out of tests. Handed out one at a time, the tests keep both busy to the end.
        config.option.maxschedchunk = 1
    settings.load_profile(_profile_name(config))
    problem = config.getoption("ssd_problem")
    if problem:
        from properties.problem import parse_problem
        from properties import strategies
        strategies.PINNED = parse_problem(problem)
    grad_problem = config.getoption("ssd_grad_problem")
    if grad_problem:
        from properties.grad_problem import parse_grad_problem
        from properties import grad_strategies
        grad_strategies.PINNED = parse_grad_problem(grad_problem)


def impl_names(config) -> list[str]:
    names = config.getoption("impl")
    if names:
        return names
    return ["torch-ref"] + (["cutile"] if torch.cuda.is_available() else [])


def pytest_generate_tests(metafunc):
    if "impl" in metafunc.fixturenames:
        names = impl_names(metafunc.config)
        metafunc.parametrize("impl", names, ids=names, indirect=True)


@pytest.fixture
def impl(request):
    """The KernelInfo of the implementation under test; skips with a reason when it needs a GPU."""
    from kernels.registry import lookup
    info = lookup(request.param)
    if info.device == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"{info.name} needs a CUDA GPU and none is visible (torch.cuda.is_available() is False)")
    return info


@pytest.fixture
def ieee_reference_math():
    """Oracles run in IEEE float64; keep TF32 off so a GPU oracle is not silently rounded."""
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec and callspec.params.get("impl") not in (None, "torch-ref"):
            item.add_marker(pytest.mark.gpu)
    # The tileiras compiles and the mutation run (most of the CPU suite's time, up to 2 minutes a test)
    # go first: xdist hands tests out one at a time as workers free up (pytest_configure), so the
    # light tests even out the heavy ones and no worker is left compiling alone at the end.
    items.sort(key=lambda item: not any(item.get_closest_marker(name) for name in ("compile", "mutation")))


LAB = Path(__file__).resolve().parent / "lab"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Where the suite is installed (a wheel carries no lab/), a test that reaches for the lab's tools
    (lab.bench, lab.scripts, lab/reports) skips and says so instead of failing."""
    try:
        return (yield)
    except (ModuleNotFoundError, FileNotFoundError) as e:
        missing = e.name if isinstance(e, ModuleNotFoundError) else str(e.filename or "")
        lab_module = isinstance(e, ModuleNotFoundError) and (missing or "").split(".")[0] == "lab"
        lab_file = isinstance(e, FileNotFoundError) and ("lab" + os.sep) in missing
        if (lab_module or lab_file) and not LAB.is_dir():
            pytest.skip(f"needs the lab ({missing}), which only a checkout of the repository has")
        raise
