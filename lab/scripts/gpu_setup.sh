# usage: source .gpu-bundle/setup.sh    (the copy lab/scripts/gpu_bundle.sh makes; from the repository root)
# Sets up an offline GPU host from the bundle: installs its wheels (cuda-tile, TileGym) into a
# temporary site folder, unpacks the cuTile toolchain and the peers' sources, and sets PATH,
# PYTHONPATH and SSDCHECK_PEERS_DIR (the bundled peer files). Idempotent. Folders go under
# $SSDCHECK_GPU_TMP (default /tmp/ssdcheck-gpu): site/, ctk-<tileiras version>/ (two bundles with two
# toolchains share a host), peers-src/. SSDCHECK_TILEIRAS names the bundled tileiras.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  sed -n '1,/^if /{/^#/p}' "$0"
  echo "gpu_setup.sh: source it (it sets this shell's PATH and PYTHONPATH): source .gpu-bundle/setup.sh" >&2
  exit 2
fi
_b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_t=${SSDCHECK_GPU_TMP:-/tmp/ssdcheck-gpu}
_c=$_t/ctk-$(cat "$_b/ctk.version" 2>/dev/null || echo unknown)
mkdir -p "$_t/site" "$_c" "$_t/peers-src"
_w=$(ls "$_b"/whl/*.whl "$_b"/peers/*.whl 2>/dev/null)
if [ -n "$_w" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$_t/site" $_w >/dev/null \
    || echo "gpu_setup.sh: installing the bundled wheels failed" >&2
fi
[ -x "$_c/cu13/bin/tileiras" ] || { [ -f "$_b/ctk.tar.xz" ] && xz -dc "$_b/ctk.tar.xz" | tar -xf - -C "$_c"; }
for _s in "$_b"/peers/*.tar.gz; do [ -e "$_s" ] && tar -xzf "$_s" -C "$_t/peers-src"; done
export PATH=$_c/cu13/bin:$PATH SSDCHECK_TILEIRAS=$_c/cu13/bin/tileiras
export PYTHONPATH=$_t/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
for _d in "$_t"/peers-src/*/; do [ -d "$_d" ] && export PYTHONPATH=$PYTHONPATH:${_d%/}; done
export SSDCHECK_PEERS_DIR=$_b/peers SSDCHECK_GPU_SITE=$_t/site PYTHONUNBUFFERED=1
# tileiras loads libnvvm from $CUDA_HOME when that is set; an older toolkit there makes every compile
# fail ("failed to compile Tile IR program"). The bundled libnvvm sits beside the bundled tileiras.
unset CUDA_HOME CUDA_PATH
echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1);" \
     "tileiras $(tileiras --version 2>/dev/null | grep -o 'V[0-9][0-9.]*' | head -1);" \
     "cuda-tile $(python3 -c 'import cuda.tile as ct; print(ct.__version__)' 2>/dev/null)"
unset _b _t _c _w _s _d
