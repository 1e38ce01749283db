#!/usr/bin/env bash
# usage: lab/scripts/gpu_bundle.sh [--out DIR] [--python X.Y] [--toolchain SITE]   # DIR default .gpu-bundle, X.Y 3.12
# Packs what an offline GPU host needs to run the suite, on a machine with a network and the cuTile
# compiler installed in the active Python environment (pip install 'cuda-tile[tileiras]'):
#   ctk.tar.xz   the cuTile toolchain: tileiras, ptxas, libnvvm.so.4 (the nvidia.cu13 package)
#   whl/         a cuda-tile wheel of the same version for CPython X.Y on x86-64 Linux (the host's)
#   peers/       the published peer files from $SSDCHECK_PEERS_DIR, as they are (kernels/peers/sources.py)
#   setup.sh     lab/scripts/gpu_setup.sh: on the host, `source .gpu-bundle/setup.sh` installs all of it
# --toolchain SITE packs another tileiras instead of the active environment's: SITE is a folder the
# nvidia-cuda-tileiras, nvidia-cuda-nvcc and nvidia-nvvm wheels of one version were installed into with
# `pip install --no-deps --target SITE` (docs/toolchain-upgrade.md); cuda-tile stays the active one's.
# DIR is ignored by git (.gitignore). A rerun redoes only what changed. docs/gpu-host.md says more.
# Environment: PYTHON=python3 (the environment to pack from); SSDCHECK_PEERS_DIR (unset: no peers).
set -euo pipefail
ARGS_PASS=1 source "$(dirname "$0")/_args.sh" .gpu-bundle "$@"
pyver=3.12
site=
set -- ${REST[@]+"${REST[@]}"}
while [ "$#" -gt 0 ]; do
  case "$1" in
    --python)
      [[ "${2:-}" =~ ^3\.[0-9]+$ ]] || { echo "gpu_bundle.sh: --python needs the host's Python version as X.Y, e.g. --python 3.12; got '${2:-}'" >&2; exit 2; }
      pyver=$2; shift 2 ;;
    --toolchain)
      [ -d "${2:-}/nvidia/cu13" ] || { echo "gpu_bundle.sh: --toolchain needs a folder holding nvidia/cu13 (pip install --no-deps --target SITE nvidia-cuda-tileiras nvidia-cuda-nvcc nvidia-nvvm); got '${2:-}'" >&2; exit 2; }
      site=$(cd "$2" && pwd); shift 2 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1': expected --out DIR, --python X.Y, --toolchain SITE or --help" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
dest=$DEST
mkdir -p "$dest/whl" "$dest/peers"

if [ -n "$site" ]; then
  cu13=$site/nvidia/cu13
  ver=$("$py" -c 'import importlib.metadata as m, sys; print(next(m.distributions(name="nvidia-cuda-tileiras", path=[sys.argv[1]])).version)' "$site" 2>/dev/null) || {
    echo "gpu_bundle.sh: --toolchain $site holds no nvidia-cuda-tileiras wheel's metadata" >&2; exit 1; }
else
  cu13=$("$py" -c 'import nvidia.cu13 as m; print(list(m.__path__)[0])' 2>/dev/null) || {
    echo "gpu_bundle.sh: no nvidia.cu13 package in $("$py" -c 'import sys; print(sys.prefix)'):" \
         "install the compiler first: $py -m pip install 'cuda-tile[tileiras]'" >&2
    exit 1; }
  ver=$("$py" -c 'import importlib.metadata as m; print(m.version("nvidia-cuda-tileiras"))')
fi
ctver=$("$py" -c 'import importlib.metadata as m; print(m.version("cuda-tile"))')
for f in bin/tileiras bin/ptxas lib/libnvvm.so.4; do
  [ -e "$cu13/$f" ] || { echo "gpu_bundle.sh: $cu13/$f is missing (need nvidia-cuda-tileiras, nvidia-cuda-nvcc and nvidia-nvvm of one version)" >&2; exit 1; }
done

if [ "$(cat "$dest/ctk.version" 2>/dev/null)" != "$ver" ]; then
  echo "packing the tileiras $ver toolchain (xz -9: about 4-5 minutes of CPU time)..."
  tar -C "$cu13/.." -cf - cu13/bin/tileiras cu13/bin/ptxas cu13/lib/libnvvm.so.4 | xz -9 -T2 > "$dest/ctk.tar.xz.tmp"
  mv "$dest/ctk.tar.xz.tmp" "$dest/ctk.tar.xz"; echo "$ver" > "$dest/ctk.version"
fi

tag=cp${pyver/./}
if ! ls "$dest"/whl/cuda_tile-"$ctver"-"$tag"-*.whl >/dev/null 2>&1; then
  rm -f "$dest"/whl/cuda_tile-*.whl
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$dest/whl" "cuda-tile==$ctver"
fi

if [ -n "${SSDCHECK_PEERS_DIR:-}" ]; then
  names=$(cd "$here/../.." && "$py" -c 'from kernels.peers.sources import FILES; print(" ".join(FILES.values()))')
  for f in $names; do
    if [ -f "$SSDCHECK_PEERS_DIR/$f" ]; then cp -u "$SSDCHECK_PEERS_DIR/$f" "$dest/peers/"
    else echo "gpu_bundle.sh: $f is not in SSDCHECK_PEERS_DIR=$SSDCHECK_PEERS_DIR: the host will skip that peer" >&2; fi
  done
else
  echo "gpu_bundle.sh: SSDCHECK_PEERS_DIR is not set: no peers in the bundle (the host skips their tests)" >&2
fi
cp "$here/gpu_setup.sh" "$dest/setup.sh"

size=$(du -sm "$dest" | cut -f1)
echo "bundle: $dest (${size} MiB): toolchain $ver, cuda-tile $ctver for Python $pyver, peers: $(ls "$dest/peers" | tr '\n' ' ')"
