"""The `ssdcheck` command (ssdcheck/): it parses, every subcommand's --help says what it does, prints
and exits with, and `ssdcheck test` runs the suite from another directory against a revision given
by file or by import path, with the exit codes docs/report-schema.md lists.

The end-to-end runs start `python -m ssdcheck` in tmp_path with only the repository on PYTHONPATH
(what the editable install's .pth file does), on the CPU against torch-ref wrapped in user files.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssdcheck import cli, suite
from ssdcheck.paths import PROPERTY_TESTS, ROOT, absolute_impl

REVISION = """\
from kernels.torch_ref import INFO, ssd_forward


def forward(**kwargs):
    out = ssd_forward(**kwargs)
    if {broken}:                 # a planted bug: the last token of y is off by one
        y, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
        y = y.clone()
        y[:, -1] += 1.0
        out = (y, *rest) if rest else y
    return out


forward.ssd_info = INFO.replace(fn=forward, name="user-revision", stages=None)
"""
ORACLE_TEST = "test_matches_oracle and not model_layer and not precision"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "HYPOTHESIS_PROFILE"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def ssdcheck(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ssdcheck", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------- parsing, --help

def test_top_level_help_lists_every_subcommand(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("test", "fuzz", "replay", "gate", "report", "mutants"):
        assert f"\n  {name} " in out
    assert set(cli.SUMMARIES) == set(cli.SUBCOMMANDS)


def test_no_or_unknown_subcommand_is_a_usage_error(capsys):
    assert cli.main([]) == cli.EXIT_USAGE
    assert cli.main(["fuz"]) == cli.EXIT_USAGE
    assert "unknown subcommand 'fuz'; expected one of test, fuzz" in capsys.readouterr().err
    assert cli.main(["gate", "r.json"]) == cli.EXIT_USAGE          # argparse's 2 becomes ssdcheck's 4
    assert "--baseline" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(cli.SUBCOMMANDS))
def test_each_subcommand_help_says_what_it_prints_and_its_exit_codes(name, capsys):
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ssdcheck {name}"), out[:200]
    assert "prints:" in out and "exit codes:" in out
    assert "python -m mutation.run" not in out and "ssdcheck_fuzz" not in out


def test_report_schema_documents_every_subcommands_exit_codes():
    text = (ROOT / "docs/report-schema.md").read_text()
    for name in cli.SUBCOMMANDS:
        assert f"`ssdcheck {name}`" in text, name


def test_test_runs_the_repository_suite_and_passes_everything_else_to_pytest(tmp_path):
    args, rest = suite.build_parser().parse_known_args(
        ["--impl", "rev.py:forward", "-k", "causality", "-n", "2", "--ssd-report", "out/r.json", "--impl", "cutile"])
    cmd = suite.pytest_args(args, rest, tmp_path)
    assert cmd[:5] == ["--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(PROPERTY_TESTS)]
    assert cmd[5:] == ["--impl", f"{tmp_path / 'rev.py'}:forward", "--impl", "cutile",
                       "-k", "causality", "-n", "2", "--ssd-report", "out/r.json"]
    args, rest = suite.build_parser().parse_known_args(["--all", "-x"])
    assert suite.pytest_args(args, rest, tmp_path)[4:] == [*map(str, suite.suite_folders()), "-x"]
    assert suite.suite_folders()[0] == ROOT / "tests"
    # the whole suite under xdist steals work (its tests' lengths differ 1000-fold); a --dist of one's own wins
    for argv, extra in ((["--all", "-n", "2"], ["--dist", "worksteal", "-n", "2"]), (["--all", "-n", "0"], ["-n", "0"]),
                        (["--all", "-n", "2", "--dist=load"], ["-n", "2", "--dist=load"]),
                        (["-n", "2"], ["-n", "2"])):
        args, rest = suite.build_parser().parse_known_args(argv)
        skip = 4 + (len(suite.suite_folders()) if "--all" in argv else 1)
        assert suite.pytest_args(args, rest, tmp_path)[skip:] == extra, argv
    args, rest = suite.build_parser().parse_known_args(["tests/test_oracles.py::test_x", "-q"])
    assert suite.pytest_args(args, rest, tmp_path)[4:] == [str(ROOT / "tests/test_oracles.py::test_x"), "-q"]
    # only file specs change: names and import paths resolve the same everywhere
    assert absolute_impl("mypkg.ssd:forward") == "mypkg.ssd:forward" and absolute_impl("torch-ref") == "torch-ref"


# ---------------------------------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("user")
    (d / "good.py").write_text(REVISION.format(broken=False))
    (d / "mypkg").mkdir()
    (d / "mypkg" / "__init__.py").write_text("")
    (d / "mypkg" / "ssd.py").write_text(REVISION.format(broken=True))
    return d


@pytest.fixture(scope="module")
def good_run(user_dir):
    """A file revision from the user's directory; the report path is relative to that directory."""
    proc = ssdcheck("test", "--impl", "good.py:forward", "-k", ORACLE_TEST, "--hypothesis-profile=cpu",
                    "--ssd-report", "out/good.json", "-q", cwd=user_dir)
    return proc


def test_a_file_revision_passes_from_another_directory(good_run, user_dir):
    assert good_run.returncode == 0, good_run.stdout + good_run.stderr
    assert "1 passed" in good_run.stdout
    report = json.loads((user_dir / "out/good.json").read_text())
    assert report["summary"]["examples"] > 0 and report["summary"]["failures"] == 0
    # the implementation is named by its absolute spec, so reproducers resolve it from anywhere
    assert {r["impl"] for r in report["results"]} == {f"{user_dir / 'good.py'}:forward"}


def test_an_importable_revision_with_a_bug_fails_with_exit_1(user_dir):
    proc = ssdcheck("test", "--impl", "mypkg.ssd:forward", "-k", ORACLE_TEST, "--hypothesis-profile=cpu",
                    "--ssd-report", "out/broken.json", "-x", "-q", cwd=user_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout and "--ssd-problem" in proc.stdout     # the re-run command
    assert json.loads((user_dir / "out/broken.json").read_text())["summary"]["failures"] >= 1


def test_usage_errors_exit_4_and_an_empty_selection_exits_5(user_dir):
    proc = ssdcheck("test", "--impl", "missing.py:forward", cwd=user_dir)
    assert proc.returncode == 4 and "--impl missing.py:forward: impl: no such file" in proc.stderr
    proc = ssdcheck("test", "--impl", "good.py:nothing", cwd=user_dir)
    assert proc.returncode == 4 and "has no attribute 'nothing'" in proc.stderr
    proc = ssdcheck("test", "--impl", "good.py:forward", "-k", "no_such_test", "-q", cwd=user_dir)
    assert proc.returncode == 5, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------- gate, report

def _scaled(report: dict, factor: float) -> dict:
    out = json.loads(json.dumps(report))
    for r in out["results"]:
        for m in ("max_abs", "normwise"):
            if isinstance(r[m], (int, float)):
                r[m] *= factor
    return out


def test_gate_passes_fails_on_growth_and_on_a_failed_run(good_run, user_dir, tmp_path, capsys):
    assert good_run.returncode == 0
    report = user_dir / "out/good.json"
    data = json.loads(report.read_text())
    assert cli.main(["gate", str(report), "--baseline", str(report)]) == 0
    assert "gate passed" in capsys.readouterr().out
    shrunk = tmp_path / "baseline.json"              # a baseline whose errors were 10x smaller
    shrunk.write_text(json.dumps(_scaled(data, 0.1)))
    assert cli.main(["gate", str(report), "--baseline", str(shrunk)]) == 6
    out = capsys.readouterr().out
    assert f"REGRESSION {user_dir / 'good.py'}:forward prop_matches_oracle" in out and "gate FAILED" in out
    assert cli.main(["gate", str(report), "--baseline", str(shrunk), "--max-growth", "20"]) == 0
    capsys.readouterr()
    failed = dict(data, summary=dict(data["summary"], failures=2))
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    assert cli.main(["gate", str(tmp_path / "failed.json"), "--baseline", str(report)]) == 1
    assert "the run itself FAILED (2 failing example(s)" in capsys.readouterr().out
    (tmp_path / "junk.json").write_text("{}")
    assert cli.main(["gate", str(report), "--baseline", str(tmp_path / "junk.json")]) == 4
    assert f"--baseline {tmp_path / 'junk.json'}: not an ssdcheck report" in capsys.readouterr().err
    assert cli.main(["gate", str(report), "--baseline", str(report), "--metrics", "max"]) == 4
    assert "--metrics: unknown ['max']" in capsys.readouterr().err


def test_gate_says_when_the_toolchains_differ_and_gates_by_the_policy(good_run, user_dir, tmp_path, capsys):
    """A baseline under tileiras 13.4 gates a run under 13.5: the toolchain line, then the same verdicts."""
    assert good_run.returncode == 0
    data = json.loads((user_dir / "out/good.json").read_text())

    def under(d, version, name):
        d = json.loads(json.dumps(d))
        d["meta"]["toolchain"] = dict(d["meta"]["toolchain"], tileiras=version, ptxas=version)
        (tmp_path / name).write_text(json.dumps(d))
        return str(tmp_path / name)

    base, cand = under(data, "13.4.92", "base.json"), under(data, "13.5.37", "cand.json")
    assert cli.main(["gate", cand, "--baseline", base]) == 0
    out = capsys.readouterr().out
    assert "toolchain DIFFERS from the baseline's: tileiras 13.4.92 -> 13.5.37; ptxas 13.4.92 -> 13.5.37" in out
    assert "gate passed" in out
    assert cli.main(["gate", base, "--baseline", base]) == 0
    assert "toolchain same as the baseline's: tileiras 13.4.92, ptxas 13.4.92" in capsys.readouterr().out
    grown = under(_scaled(data, 10.0), "13.5.37", "grown.json")      # worst errors grew 10x under 13.5
    assert cli.main(["gate", grown, "--baseline", base]) == 6
    out = capsys.readouterr().out
    assert "toolchain DIFFERS" in out and "REGRESSION" in out and "gate FAILED" in out
    failed = json.loads(Path(cand).read_text())
    failed["summary"]["failures"] = 1
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    assert cli.main(["gate", str(tmp_path / "failed.json"), "--baseline", base]) == 1
    lost = json.loads(Path(cand).read_text())
    dropped = lost["results"].pop()
    (tmp_path / "lost.json").write_text(json.dumps(lost))
    assert cli.main(["gate", str(tmp_path / "lost.json"), "--baseline", base]) == 0
    assert f"note: in the baseline but not run now: {dropped['impl']} {dropped['prop']}" in capsys.readouterr().out


def test_report_summarizes_a_report_file(good_run, user_dir, tmp_path, capsys):
    assert good_run.returncode == 0
    assert cli.main(["report", str(user_dir / "out/good.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# ssdcheck run ") and f"| {user_dir / 'good.py'}:forward | prop_matches_oracle |" in out
    assert cli.main(["report", str(tmp_path / "none.json")]) == 3
    assert f"no ssdcheck report at {tmp_path / 'none.json'}" in capsys.readouterr().out
    (tmp_path / "junk.json").write_text("[]")
    assert cli.main(["report", str(tmp_path / "junk.json")]) == 4


def test_mutants_forwards_to_the_mutation_runner(capsys):
    assert cli.main(["mutants", "--catalog", "torch_ref", "--list"]) == 0
    from mutation.catalog import load_catalog
    assert capsys.readouterr().out.count("\n") == len(load_catalog("torch_ref").mutants)


def test_the_old_fuzz_entry_point_is_an_alias():
    proc = subprocess.run([sys.executable, "-m", "ssdcheck_fuzz", "--help"], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: ssdcheck fuzz")


def test_a_file_revision_that_fails_to_import_names_the_file(tmp_path):
    from kernels.registry import lookup
    (tmp_path / "bad.py").write_text("import no_such_module_here\n")
    with pytest.raises(ValueError, match=r"^impl: importing '.*bad.py' failed \(ModuleNotFoundError"):
        lookup(f"{tmp_path / 'bad.py'}:forward")
    (tmp_path / "sibling.py").write_text("VALUE = 3\n")
    (tmp_path / "uses_sibling.py").write_text("from sibling import VALUE\n\ndef forward(**kw):\n    return VALUE\n")
    assert lookup(f"{tmp_path / 'uses_sibling.py'}:forward").fn() == 3     # its own directory imports
