"""The GPU job scripts take `--out DIR` and `--help`, every other setting from the environment; a
wrong argument must not start a run, and each script's first comment line is its usage.

On a GPU host a mistaken `--help` that runs the whole script costs minutes of GPU time (it happened
on the H200: 240 s lost to `gpu_peers.sh --help`, 2026-11-30).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[2] / "lab" / "scripts").glob("*.sh"))
JOB_SCRIPTS = [s for s in SCRIPTS if not s.name.startswith("_") and s.name != "gpu_setup.sh"]   # sourced ones
TAKES_ARGS = {"gpu_ci_compare.sh", "snapshot_run.sh"}   # other arguments: a pytest selection, a command


def _run(script, tmp_path, *args):
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=20,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})


@pytest.mark.parametrize("script", JOB_SCRIPTS, ids=lambda s: s.name)
def test_help_prints_the_usage_and_runs_nothing(script, tmp_path):
    proc = _run(script, tmp_path, "--help", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.startswith("#") for line in lines) and len(lines) >= 3
    assert lines[0].startswith(f"# usage: lab/scripts/{script.name} [--out DIR]"), lines[0]
    assert not (tmp_path / "out").exists()    # nothing ran: no output folder


@pytest.mark.parametrize("script", [s for s in JOB_SCRIPTS if s.name not in TAKES_ARGS], ids=lambda s: s.name)
@pytest.mark.parametrize("args", [("--bogus",), ("--out",), ("--out", "")], ids=["unknown", "no-dir", "empty-dir"])
def test_a_wrong_argument_says_what_was_expected_and_runs_nothing(script, args, tmp_path):
    proc = _run(script, tmp_path, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--out DIR" in proc.stderr.splitlines()[0], proc.stderr
    assert list(tmp_path.iterdir()) == []     # nothing ran, nothing written


def test_no_script_reads_an_output_folder_from_the_environment():
    """--out DIR is the one way to say where a job writes (the scripts once read it from a variable)."""
    import re
    for script in SCRIPTS:
        assert not re.search(r"\$\{?OU[T]\b", script.read_text()), script.name


def test_the_race_script_packs_every_step_into_one_archive_without_a_gpu(tmp_path):
    """gpu_race.sh on a machine without a GPU: every step fails fast (the race needs CUDA), and still
    each one's status is in summary.txt and its log in race.tar.gz, next to the tuning copy: 3 files
    in all, however many steps ran."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": str(root), "SSDCHECK_GPU_SITE": "/tmp/site",   # as if setup.sh had run
           "N_BUDGET_S": "5", "TG_BUDGET_S": "5", "STAGES_S": "30",
           "CUDA_VISIBLE_DEVICES": "", **{k: v for k, v in os.environ.items() if k.startswith("LD_")}}
    proc = subprocess.run(["bash", str(root / "lab" / "scripts" / "gpu_race.sh"), "--out", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["race.tar.gz", "summary.txt", "tuning.json"]
    steps = [line.split()[0] for line in (out / "summary.txt").read_text().splitlines() if " rc=" in line]
    assert steps == ["n64", "n128", "n256", "tg64", "tg128", "tg256", "stages", "merge"]
    with tarfile.open(out / "race.tar.gz") as tar:
        logs = {Path(n).name for n in tar.getnames() if n.endswith(".log")}
        assert logs == {f"{s}.log" for s in steps}
        assert "needs a CUDA GPU" in tar.extractfile("work/n64.log").read().decode()


def test_the_race_archive_keeps_the_finished_steps_when_a_limit_cuts_the_script(tmp_path):
    """On the H200 (lab/reports/2026-12-01-fact-scan.md) an outer `timeout` cut gpu_race.sh in its third
    group and the finished groups' JSONs, three folders deep, were lost. The archive is now rewritten after every step. A fake
    python3 finishes the first step at once and hangs in the second; the cut leaves the first's log."""
    root = Path(__file__).resolve().parents[2]
    out, bin_dir = tmp_path / "out", tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/bash\ncase "$*" in *n128*) exec sleep 6 ;; esac\necho "first step done"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SSDCHECK_GPU_SITE": "/tmp/site",
           "N_GROUPS": "n64 n128", "TG_GROUPS": "", "STAGES_S": "0"}
    proc = subprocess.run(["timeout", "3", "bash", str(root / "lab" / "scripts" / "gpu_race.sh"), "--out", str(out)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 124, proc.stdout + proc.stderr
    with tarfile.open(out / "race.tar.gz") as tar:
        assert tar.extractfile("work/n64.log").read().decode() == "first step done\n"
    assert (out / "summary.txt").read_text().splitlines() == ["n64 rc=0"]


def _wheel(path: Path, dist: str, version: str, tag: str, package: str) -> Path:
    """A minimal installable wheel holding an empty `package`."""
    import zipfile
    info = f"{dist}-{version}.dist-info"
    files = {f"{package}/__init__.py": "",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"])
    whl = path / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return whl


def test_the_bundle_packs_toolchain_wheel_and_peers_and_its_setup_unsets_cuda_home(tmp_path):
    """lab/scripts/gpu_bundle.sh against a fake cuTile install (nvidia.cu13 with tileiras, ptxas, libnvvm)
    and a peers folder missing vLLM, then the bundle's setup.sh sourced with an old CUDA_HOME set:
    the toolchain is on PATH, the peers are importable and SSDCHECK_PEERS_DIR names the bundled
    files, and CUDA_HOME/CUDA_PATH are gone (tileiras would load an older libnvvm from there)."""
    root = Path(__file__).resolve().parents[2]
    fake = tmp_path / "fakepy"
    cu13 = fake / "nvidia" / "cu13"
    for d in ("bin", "lib"):
        (cu13 / d).mkdir(parents=True)
    (fake / "nvidia" / "__init__.py").write_text("")
    (cu13 / "__init__.py").write_text("")
    for f in ("bin/tileiras", "bin/ptxas"):
        (cu13 / f).write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.4, V13.4.92'\n")
        (cu13 / f).chmod(0o755)
    (cu13 / "lib" / "libnvvm.so.4").write_bytes(b"\x7fELF")
    for dist, version in (("nvidia_cuda_tileiras", "13.4.92"), ("cuda_tile", "9.9.9")):
        info = fake / f"{dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    peers = tmp_path / "peers"
    peers.mkdir()
    _wheel(peers, "tilegym", "1.5.1", "py3-none-any", "tilegym")
    src = tmp_path / "src" / "mamba_ssm-2.3.2.post1" / "mamba_ssm"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    with tarfile.open(peers / "mamba_ssm-2.3.2.post1.tar.gz", "w:gz") as tar:
        tar.add(src.parent, arcname="mamba_ssm-2.3.2.post1")
    bundle = tmp_path / "bundle"
    (bundle / "whl").mkdir(parents=True)
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    _wheel(bundle / "whl", "cuda_tile", "9.9.9", f"{tag}-none-any", "cuda_tile_fake")   # no download
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": str(fake), "PYTHON": sys.executable, "SSDCHECK_PEERS_DIR": str(peers)}
    proc = subprocess.run(["bash", str(root / "lab" / "scripts" / "gpu_bundle.sh"), "--out", str(bundle), "--python", pyver],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vllm-0.33.0-mamba-ssd.tar.gz is not in SSDCHECK_PEERS_DIR" in proc.stderr
    assert (bundle / "setup.sh").read_bytes() == (root / "lab" / "scripts" / "gpu_setup.sh").read_bytes()
    assert sorted(p.name for p in (bundle / "peers").iterdir()) == ["mamba_ssm-2.3.2.post1.tar.gz",
                                                                  "tilegym-1.5.1-py3-none-any.whl"]
    with tarfile.open(bundle / "ctk.tar.xz") as tar:
        assert sorted(tar.getnames()) == ["cu13/bin/ptxas", "cu13/bin/tileiras", "cu13/lib/libnvvm.so.4"]
    bad = subprocess.run(["bash", str(root / "lab" / "scripts" / "gpu_bundle.sh"), "--python", "py3"],
                         capture_output=True, text=True, timeout=20, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "--python needs the host's Python version as X.Y" in bad.stderr

    gpu_tmp = tmp_path / "gpu"
    show = ('export CUDA_HOME=/usr/local/cuda CUDA_PATH=/usr/local/cuda; source bundle/setup.sh >/dev/null; '
            'echo "${CUDA_HOME-unset} ${CUDA_PATH-unset} $SSDCHECK_PEERS_DIR $(command -v tileiras) $SSDCHECK_TILEIRAS"; '
            'python3 -c "import tilegym, mamba_ssm, cuda_tile_fake; print(tilegym.__file__); print(mamba_ssm.__file__)"')
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "SSDCHECK_GPU_TMP": str(gpu_tmp)}
    proc = subprocess.run(["bash", "-c", show], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cuda_home, cuda_path, peers_dir, tileiras, chosen, tilegym, mamba = proc.stdout.split()
    assert (cuda_home, cuda_path) == ("unset", "unset")
    assert peers_dir == str(bundle / "peers") and tileiras == chosen == str(gpu_tmp / "ctk-13.4.92/cu13/bin/tileiras")
    assert tilegym.startswith(str(gpu_tmp / "site")) and mamba.startswith(str(gpu_tmp / "peers-src"))
    # --toolchain: a second bundle packs another tileiras (a pip --target folder), its own ctk folder on the host
    other = tmp_path / "tc135"
    shutil.copytree(cu13, other / "nvidia" / "cu13")
    info = other / "nvidia_cuda_tileiras-13.5.37.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cuda-tileiras\nVersion: 13.5.37\n")
    (other / "nvidia" / "cu13" / "bin" / "tileiras").write_text("#!/bin/sh\necho 'release 13.5, V13.5.37'\n")
    bundle2 = tmp_path / "bundle2"
    shutil.copytree(bundle / "whl", bundle2 / "whl")
    benv = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
            "PYTHONPATH": str(fake), "PYTHON": sys.executable, "SSDCHECK_PEERS_DIR": str(peers)}
    proc = subprocess.run(["bash", str(root / "lab" / "scripts" / "gpu_bundle.sh"), "--out", str(bundle2), "--python",
                           pyver, "--toolchain", str(other)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=benv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (bundle2 / "ctk.version").read_text().strip() == "13.5.37" and "toolchain 13.5.37" in proc.stdout
    proc = subprocess.run(["bash", "-c", show.replace("bundle/setup.sh", "bundle2/setup.sh")], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.stdout.split()[4] == str(gpu_tmp / "ctk-13.5.37/cu13/bin/tileiras"), proc.stdout + proc.stderr
    bad = subprocess.run(["bash", str(root / "lab" / "scripts" / "gpu_bundle.sh"), "--toolchain", str(tmp_path / "no")],
                         capture_output=True, text=True, timeout=20, cwd=tmp_path, env=benv)
    assert bad.returncode == 2 and "--toolchain needs a folder holding nvidia/cu13" in bad.stderr
    direct = subprocess.run(["bash", str(bundle / "setup.sh")], capture_output=True, text=True, timeout=20, env=env)
    assert direct.returncode == 2 and "source it" in direct.stderr


def test_the_gpu_host_doc_names_the_bundle_scripts_and_the_host_settings():
    """docs/gpu-host.md is what a GPU host's operator reads: it must name the scripts that build and
    install the bundle and each setting the scripts depend on."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "gpu-host.md").read_text()
    for needed in ("lab/scripts/gpu_bundle.sh", "source .gpu-bundle/setup.sh", "lab/scripts/gpu_setup.sh",
                   "$SSDCHECK_PEERS_DIR", "CUDA_HOME", "--ssd-compile-cache", "$SSDCHECK_COMPILE_CACHE",
                   "one worker per CPU core", "tilegym-1.5.1", "mamba-ssm==2.3.2.post1", "vllm==0.33.0"):
        assert needed in text, needed


# ---------------------------------------------------------------- snapshot_run.sh

def _snapshot_run(tmp_path, *cmd, snap="work", every="1", wait=True):
    script = Path(__file__).resolve().parents[2] / "lab" / "scripts" / "snapshot_run.sh"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SNAP": str(tmp_path / snap) if snap else "",
           "SNAPSHOT_S": every}
    args = ["bash", str(script), "--out", str(tmp_path / "keep"), *cmd]
    if wait:
        return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    return subprocess.Popen(args, cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _packed(tmp_path) -> set[str]:
    with tarfile.open(tmp_path / "keep" / "work.tar.xz") as tar:
        return {Path(n).name for n in tar.getnames() if tar.getmember(n).isfile()}


def test_snapshot_run_keeps_what_a_killed_command_had_written(tmp_path):
    """A command whose whole process group is killed at a limit (SIGKILL: no trap runs) still leaves
    its last snapshot: the files written before the kill, not the ones after."""
    import signal
    import time
    proc = _snapshot_run(tmp_path, "bash", "-c", f"echo a > {tmp_path}/work/first.txt; sleep 30; "
                                                 f"echo b > {tmp_path}/work/second.txt", wait=False)
    deadline = time.monotonic() + 20
    while not (tmp_path / "keep" / "work.tar.xz").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert _packed(tmp_path) == {"first.txt"}


def test_snapshot_run_packs_at_the_end_and_returns_the_commands_status(tmp_path):
    proc = _snapshot_run(tmp_path, "bash", "-c", f"echo a > {tmp_path}/work/a.txt; echo b > {tmp_path}/work/b.txt; exit 3",
                         every="600")
    assert proc.returncode == 3, proc.stderr
    assert _packed(tmp_path) == {"a.txt", "b.txt"}
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == ["work.tar.xz"]


def test_snapshot_run_leaves_the_commands_own_out_to_the_command(tmp_path):
    """`snapshot_run.sh --out KEEP gpu_ttf.sh --out WORK`: the second --out is the command's. Taken as
    the snapshot's, the command ran without it and wrote elsewhere, and KEEP never got the archive."""
    proc = _snapshot_run(tmp_path, "bash", "-c", f'echo "$@" > {tmp_path}/work/args.txt', "_", "--out", "work",
                         every="600")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "work" / "args.txt").read_text().split() == ["--out", "work"]
    assert _packed(tmp_path) == {"args.txt"}


@pytest.mark.parametrize("cmd, snap, every, says", [((), "work", "1", "expected a command"),
                                                     (("true",), "", "1", "SNAP"),
                                                     (("true",), "work", "0", "SNAPSHOT_S")])
def test_snapshot_run_refuses_what_it_cannot_do(cmd, snap, every, says, tmp_path):
    proc = _snapshot_run(tmp_path, *cmd, snap=snap, every=every)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert not (tmp_path / "keep").exists()


def _plugin_paths(text: str, root: Path) -> tuple[set[str], list[Path]]:
    """The pytest plugins a script loads (`-p NAME`, the no: ones aside) and the folders its PYTHONPATH
    names ($PWD in a shell script, ROOT / ... in a Python one: the checkout's root)."""
    plugins = set(re.findall(r'"-p",\s*"(?!no:)([\w.]+)"', text)) | set(re.findall(r"\s-p (?!no:)([\w.]+)", text))
    folders = [root / p for p in re.findall(r'PYTHONPATH="?(?:\$PWD/)?([\w/]+)', text)]
    folders += [root.joinpath(*parts) for parts in
                (re.findall(r'"(\w+)"', m) for m in re.findall(r"ROOT((?: / \"\w+\")+)\)?,\s*os\.environ\.get\(\"PYTHONPATH\"", text))]
    return plugins, folders


def test_every_pytest_plugin_a_gpu_script_loads_is_on_the_path_it_sets():
    """`-p pytest_jsonl` under a PYTHONPATH naming a folder that moved fails only on the GPU host, after
    the warm-up: a fill run that ran no test (2026-12-07)."""
    root = SCRIPTS[0].parents[2]
    checked = 0
    for script in sorted((root / "lab" / "scripts").glob("*.*")):
        plugins, folders = _plugin_paths(script.read_text(), root)
        for name in plugins:
            assert folders, f"{script.name}: loads -p {name} without setting PYTHONPATH"
            assert any((f / f"{name.replace('.', '/')}.py").is_file() for f in folders), \
                f"{script.name}: -p {name} is in none of {[str(f.relative_to(root)) for f in folders]}"
            checked += 1
    assert checked >= 2     # gpu_peers.sh and grad_gpu.py load the JSON-lines plugin


def test_a_plugin_path_that_moved_is_caught():
    root = SCRIPTS[0].parents[2]
    plugins, folders = _plugin_paths('PYTHONPATH="$PWD/scripts:$X" python3 -m pytest -p pytest_jsonl', root)
    assert plugins == {"pytest_jsonl"} and not (folders[0] / "pytest_jsonl.py").is_file()


@pytest.mark.parametrize("env,says", [({"PARTS": "gate bogus"}, "unknown part 'bogus'"),
                                      ({"PARTS": "recheck", "RECHECK_CANDIDATE": "/nope"}, "two gate reports")])
def test_the_toolchain_script_checks_every_part_before_running_any(env, says, tmp_path):
    proc = subprocess.run(["bash", str(next(s for s in SCRIPTS if s.name == "gpu_toolchain.sh")), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=20, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env})
    assert proc.returncode == 2 and says in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()     # nothing ran: not even the gate that came first


def test_the_production_modes_script_refuses_an_unknown_part_before_the_setup(tmp_path):
    script = next(s for s in SCRIPTS if s.name == "gpu_production_modes.sh")
    proc = subprocess.run(["bash", str(script), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=20, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PART": "fil"})
    assert proc.returncode == 2 and "PART must be triage, recheck, fill or prime, got 'fil'" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists() and "gpu_setup" not in proc.stderr   # neither the setup nor a step ran
