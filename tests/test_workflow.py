"""The committed workflow (.github/workflows/ssdcheck.yml) and the action it uses and a kernel team
copies (.github/actions/ssdcheck/action.yml) only run commands that exist here, and docs/jobs.md
shows the workflow file, not a variant.

Every `run:` step is split into shell commands; each must be an `ssdcheck` subcommand whose options
its parser accepts (`ssdcheck test`'s other options: ones pytest with ssdcheck's plugin defines), a
Python module or script of this repository, pip on an existing requirements file, or one of a few
shell utilities. `test_a_bad_step_is_caught` shows each kind of rot failing.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
import yaml

from ssdcheck import cli, mutants, suite

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "ssdcheck.yml"
ACTION = ROOT / ".github" / "actions" / "ssdcheck" / "action.yml"
SHELL_TOOLS = {"mkdir", "cp", "echo", "test", "[", "cat", "tee"}
SHELL_WORDS = {"if", "then", "else", "elif", "fi", "do", "done", "!"}


@pytest.fixture(scope="module")
def pytest_options(pytestconfig) -> set[str]:
    """Every option of this pytest session's parser: pytest's, xdist's, Hypothesis's and the ones
    conftest.py and ssdcheck_plugin add (the session running these tests has them all loaded)."""
    parser = pytestconfig._parser
    names = {name for group in [parser._anonymous, *parser._groups] for o in group.options for name in o.names()}
    assert {"--junitxml", "-n", "--hypothesis-profile", "--impl", "--ssd-report"} <= names
    return names


def run_steps(workflow: dict) -> list[tuple[str, str]]:
    """(job: step, script) of every run step, with the job's and step's env variables filled in (an
    option's value must parse: --minutes "$FUZZ_MINUTES"). A composite action's steps count as one job."""
    out = []
    jobs = workflow["jobs"] if "jobs" in workflow else {"action": workflow["runs"]}
    defaults = {k: str(v.get("default", "")) for k, v in (workflow.get("inputs") or {}).items() if "default" in v}
    for job, spec in jobs.items():
        for step in spec["steps"]:
            if "run" in step:
                env = {**workflow.get("env", {}), **spec.get("env", {}), **step.get("env", {})}
                env = {k: re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: defaults.get(m.group(1), m.group(0)),
                                 str(v)) for k, v in env.items()}
                script = re.sub(r"\$\{?(\w+)\}?", lambda m: str(env.get(m.group(1), m.group(0))), step["run"])
                out.append((f"{job}: {step.get('name', step['run'].splitlines()[0])}", script))
    return out


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a step's script: continuations joined, split at ; && || | and newlines,
    redirections, shell keywords and leading VAR=value assignments dropped."""
    script = re.sub(r"\$\{\{.*?\}\}", "EXPR", script).replace("\\\n", " ")
    commands: list[list[str]] = []
    for line in script.splitlines():
        line = re.sub(r"\d*>&\d+", " ", line)                                   # 2>&1
        line = re.sub(r"\d*(>>|>|<)\s*(\"[^\"]*\"|'[^']*'|\S+)", " ", line)        # >> "$FILE"
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words: list[str] = []
        for tok in [*lexer, ";"]:
            if tok and set(tok) <= set(";&|"):
                commands.append(words)
                words = []
            else:
                words.append(tok)
    for words in commands:
        while words and (words[0] in SHELL_WORDS or re.match(r"^[A-Za-z_]\w*=", words[0])):
            words.pop(0)
    return [c for c in commands if c]


def _options(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("-") and a != "--"]


def _unknown_pytest_options(args: list[str], known: set[str]) -> list[str]:
    # combined short flags (-rfEs) are checked by their first letter
    return [o for o in _options(args) if o not in known and not (not o.startswith("--") and o[:2] in known)]


def check_ssdcheck(args: list[str], pytest_options: set[str]) -> list[str]:
    if not args or args[0] not in cli.SUBCOMMANDS:
        return [f"ssdcheck has no subcommand {args[0] if args else '(none)'!r}"]
    name, rest = args[0], args[1:]
    if name == "test":
        _, passthrough = suite.build_parser().parse_known_args(rest)
        bad = _unknown_pytest_options(passthrough, pytest_options)
        return [f"ssdcheck test: pytest has no option {o}" for o in bad]
    if name == "mutants":
        known = set(re.findall(r"(--?[A-Za-z][\w-]*)", mutants.build_parser().runner_help))
        return [f"ssdcheck mutants: no option {o}" for o in _options(rest) if o not in known]
    if "--" in rest:                                   # ssdcheck fuzz ... -- PYTEST OPTIONS
        i = rest.index("--")
        rest, after = rest[:i], rest[i + 1:]
        bad = [f"ssdcheck {name} -- : pytest has no option {o}" for o in _unknown_pytest_options(after, pytest_options)]
        if bad:
            return bad
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            cli.load(name).build_parser().parse_args(rest)
    except SystemExit:
        return [f"ssdcheck {name}: {err.getvalue().strip().splitlines()[-1]}"]
    return []


def _module_exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def check_command(words: list[str], pytest_options: set[str]) -> list[str]:
    """What is wrong with one command of a step, as messages ([] when it exists as called)."""
    prog, args = words[0], words[1:]
    if prog == "ssdcheck":
        return check_ssdcheck(args, pytest_options)
    if prog in ("python", "python3"):
        if args[:1] == ["-m"] and len(args) > 1:
            module, rest = args[1], args[2:]
            if module == "ssdcheck":
                return check_ssdcheck(rest, pytest_options)
            if module == "pytest":
                return [f"pytest has no option {o}" for o in _unknown_pytest_options(rest, pytest_options)]
            if module == "pip":
                reqs = [rest[i + 1] for i, a in enumerate(rest[:-1]) if a in ("-r", "--requirement")]
                return [f"pip: no requirements file {r}" for r in reqs if not (ROOT / r).is_file()]
            return [] if _module_exists(module) else [f"no module {module} in the repository"]
        return [] if args and (ROOT / args[0]).is_file() else [f"no script {args[:1]} in the repository"]
    if prog in ("bash", "sh"):
        return [] if args and (ROOT / args[0]).is_file() else [f"no script {args[:1]} in the repository"]
    if prog.startswith(("scripts/", "./scripts/", "lab/scripts/")):
        return [] if (ROOT / prog).is_file() else [f"no script {prog} in the repository"]
    if prog in SHELL_TOOLS:
        return []
    return [f"unknown command {prog!r}"]


def check_workflow(text: str, pytest_options: set[str]) -> list[str]:
    problems = []
    for where, script in run_steps(yaml.safe_load(text)):
        for words in shell_commands(script):
            problems += [f"{where}: {p} (in: {shlex.join(words)})" for p in check_command(words, pytest_options)]
    return problems


# ---------------------------------------------------------------------------------------- the tests

def test_every_run_step_calls_a_command_that_exists(pytest_options):
    text = WORKFLOW.read_text()
    assert check_workflow(text, pytest_options) == []
    workflow = yaml.safe_load(text)
    assert set(workflow["jobs"]) == {"cpu", "gpu-gate", "fuzz"}
    called = [shlex.join(c) for _, s in run_steps(workflow) for c in shell_commands(s)]
    # the jobs: the README's two commands and the wheel on the CPU, the gate on the GPU, the nightly fuzz
    assert "python3 -m pip install -r requirements-cpu.txt" in called
    assert any(c.startswith("python3 -m ssdcheck test --all") for c in called)
    assert "bash .ci/wheel" in called
    assert any(c.startswith("python3 -m ssdcheck fuzz --impl cutile") for c in called)
    assert workflow[True]["schedule"] and workflow["jobs"]["fuzz"]["if"] == "github.event_name == 'schedule'"
    assert workflow["jobs"]["gpu-gate"]["runs-on"] == ["self-hosted", "linux", "gpu"]
    caches = [s["with"]["path"] for s in workflow["jobs"]["gpu-gate"]["steps"] if "cache" in s.get("uses", "")]
    assert ".ssdcheck-cache/cutile" in caches and "baseline/gpu.json" in caches


def test_the_cpu_job_runs_the_readmes_two_commands_and_the_wheel_as_ci_does():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    install, test, wheel = [s["run"] for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["cpu"]["steps"] if "run" in s]
    assert install in readme and test in readme
    assert re.search(r"^python3 -m pip install [^\n]*-r requirements-cpu.txt$", ci, re.M) and f"\n{test}\n" in ci
    assert wheel == "bash .ci/wheel" and ci.rstrip().endswith(wheel)


def test_the_action_runs_only_ssdcheck_commands_that_exist(pytest_options):
    """The action's logic is the ssdcheck command: install, test, report, gate, and the upload."""
    text = ACTION.read_text()
    assert check_workflow(text, pytest_options) == []
    action = yaml.safe_load(text)
    assert action["runs"]["using"] == "composite"
    assert {"impl", "profile", "baseline", "time-budget"} <= set(action["inputs"])
    assert action["inputs"]["impl"]["required"] is True
    called = [c for _, s in run_steps(action) for c in shell_commands(s) if c[0] != "tee"]
    assert [c[0] if c[0] == "ssdcheck" else shlex.join(c[:4]) for c in called] == [
        "python3 -m pip install", "ssdcheck", "ssdcheck", "ssdcheck"]
    assert [c[1] for c in called if c[0] == "ssdcheck"] == ["test", "report", "gate"]
    uploads = [s for s in action["runs"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert len(uploads) == 1 and uploads[0]["if"] == "always()" and "inputs.out" in uploads[0]["with"]["path"]
    test_step = next(s["run"] for s in action["runs"]["steps"] if "ssdcheck test" in s.get("run", ""))
    for out in ("--ssd-report \"$REPORT_DIR/report.json\"", "--junitxml \"$REPORT_DIR/junit.xml\"", "--ssd-repro-dir \"$REPORT_DIR/failures\""):
        assert out in test_step, out


def test_the_gpu_gate_job_uses_the_action():
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gpu-gate"]["steps"]
    used = [s for s in steps if s.get("uses") == "./.github/actions/ssdcheck"]
    assert len(used) == 1
    inputs = set(yaml.safe_load(ACTION.read_text())["inputs"])
    assert set(used[0]["with"]) <= inputs and used[0]["with"]["impl"] == "cutile"
    assert "baseline/gpu.json" in used[0]["with"]["baseline"]
    caches = [s["with"]["path"] for s in steps if "cache" in s.get("uses", "")]
    assert ".ssdcheck-cache/cutile" in caches and "baseline/gpu.json" in caches


def test_the_readme_shows_the_action_with_its_inputs():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert block, "README.md: a copy-paste example of the action"
    steps = yaml.safe_load(block.group(1))
    step = next(s for s in (steps if isinstance(steps, list) else steps["steps"]) if "ssdcheck" in s.get("uses", ""))
    assert step["uses"].endswith("/.github/actions/ssdcheck@main") or step["uses"].endswith("@v0.1.0")
    assert set(step["with"]) <= set(yaml.safe_load(ACTION.read_text())["inputs"])
    assert {"impl", "baseline", "time-budget"} <= set(step["with"])


def test_a_bad_step_is_caught(pytest_options):
    bad = WORKFLOW.read_text().replace("run: bash .ci/wheel", "run: bash .ci/wheels")
    bad += """
  extra:
    runs-on: ubuntu-latest
    steps:
      - run: python3 -m ssdcheck test --impl cutile --ssd-baseliine b.json -n 2
      - run: |
          python3 -m ssdcheck fuzz --impl cutile --minuts 5 && bash scripts/gpu_nothing.sh
          python3 -m bench.nothing --out x; frobnicate --all
      - run: python3 -m pip install -r requirements-gpu.txt
      - run: python3 -m ssdcheck fuzz --impl cutile -- --ssd-nope 1
"""
    problems = check_workflow(bad, pytest_options)
    expected = ["no script ['.ci/wheels']", "ssdcheck test: pytest has no option --ssd-baseliine",
                "ssdcheck fuzz: ", "unrecognized arguments: --minuts", "no script ['scripts/gpu_nothing.sh']",
                "no module bench.nothing", "unknown command 'frobnicate'", "no requirements file requirements-gpu.txt",
                "pytest has no option --ssd-nope"]
    for e in expected:
        assert any(e in p for p in problems), (e, problems)
    assert len(problems) == len(expected) - 1, problems       # the fuzz typo gives one message


def test_shell_commands_splits_a_script():
    script = 'a=1 python3 -m x --y "$Z" >> "$LOG" 2>&1 && cp a b\nif [ -f f ]; then echo ${{ github.sha }}; fi | tee l'
    assert shell_commands(script) == [["python3", "-m", "x", "--y", "$Z"], ["cp", "a", "b"], ["[", "-f", "f", "]"],
                                      ["echo", "EXPR"], ["tee", "l"]]


def test_docs_jobs_shows_the_workflow_file_verbatim():
    text = WORKFLOW.read_text()
    jobs = (ROOT / "docs" / "jobs.md").read_text()
    assert f"```yaml\n{text}```" in jobs, "docs/jobs.md must quote .github/workflows/ssdcheck.yml verbatim"
    variant = text.replace('max-growth: "2"', 'max-growth: "3"')
    assert variant != text and f"```yaml\n{variant}```" not in jobs


def _action_inputs(job_step: dict, job_env: dict) -> dict[str, str]:
    """The action's inputs as a job's step sets them (its `with:`, the job's env filled in), else the defaults."""
    inputs = {k: str(v.get("default", "")) for k, v in yaml.safe_load(ACTION.read_text())["inputs"].items()}
    for k, v in job_step.get("with", {}).items():
        inputs[k] = re.sub(r"\$\{\{\s*env\.(\w+)\s*\}\}", lambda m: str(job_env[m.group(1)]), str(v))
    return inputs


def _action_test_command(inputs: dict[str, str]) -> list[str]:
    """The action's `ssdcheck test` command with these inputs, as the shell would split it."""
    step = next(s for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"] if "ssdcheck test" in s.get("run", ""))
    env = {k: re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m.group(1)], v) for k, v in step["env"].items()}
    script = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), step["run"])
    cmds = [c for c in shell_commands(script) if c[:2] == ["ssdcheck", "test"]]
    assert len(cmds) == 1, cmds
    return cmds[0]


def test_the_gate_script_times_the_workflows_property_step():
    """lab/scripts/gpu_gate.sh, which the gate's committed wall times come from, runs the command the
    gpu-gate job's action step runs (only the output folder differs)."""
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gpu-gate"]
    step = next(s for s in job["steps"] if s.get("uses") == "./.github/actions/ssdcheck")
    want = _action_test_command(_action_inputs(step, job["env"]))
    script = (ROOT / "lab" / "scripts" / "gpu_gate.sh").read_text()

    def script_command(text: str) -> list[str]:
        text = text.replace('"$WORKERS"', str(job["env"]["WORKERS"])).replace('"$GATE_SECONDS"', str(job["env"]["GATE_SECONDS"]))
        cmds = [c for c in shell_commands(text) if c[:4] == ["python3", "-m", "ssdcheck", "test"]]
        assert len(cmds) == 1, cmds
        return ["ssdcheck"] + [re.sub(r"^\$d/", f"{step['with']['out']}/", w) for w in cmds[0][3:]]

    assert script_command(script) == want
    changed = script.replace("-m \"not slow\"", "-m \"not gpu\"")
    assert script_command(changed) != want
