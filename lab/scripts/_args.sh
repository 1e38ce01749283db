# Sourced by the GPU job scripts, before anything runs: reads `--out DIR` (where the script writes;
# a relative DIR is taken from the current folder) and `--help`. Every other setting comes from the
# environment, as each script's header lists. --help prints the header (line 2 up to `set -uo
# pipefail`) and exits 0; a wrong argument prints what was expected and exits 2. Nothing runs in
# either case: on a GPU host a mistaken run costs minutes.
#   source "$(dirname "$0")/_args.sh" DEFAULT "$@"   # DEFAULT: relative to the repository root
# Sets DEST (an absolute path). With ARGS_PASS=1 the first other argument ends the options: it and
# everything after it (a command's own --out too) are kept, in order, in REST.
_usage() { sed -n '2,/^set /{/^#/p}' "$0"; }
_name=$(basename "$0")
DEST=$(cd "$(dirname "$0")/../.." && pwd)/$1; shift
REST=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --out)
      if [ "$#" -lt 2 ] || [ -z "$2" ]; then
        echo "$_name: --out needs a folder: --out DIR" >&2; _usage >&2; exit 2
      fi
      DEST=$2; shift 2 ;;
    --out=*) DEST=${1#--out=}; shift ;;
    -h|--help) _usage; exit 0 ;;
    *)
      if [ "${ARGS_PASS:-0}" = 1 ]; then REST=("$@"); break; fi
      echo "$_name: unknown argument '$1': expected --out DIR or --help (settings come from the environment)" >&2
      _usage >&2; exit 2 ;;
  esac
done
case "$DEST" in /*) ;; *) DEST=$PWD/$DEST ;; esac
