#!/usr/bin/env bash
# usage: lab/scripts/snapshot_run.sh [--out DIR] CMD [ARG...]   # env: SNAP=FOLDER (required) SNAPSHOT_S=30
# Runs CMD and packs FOLDER (what CMD writes) into DIR/<FOLDER's name>.tar.xz every SNAPSHOT_S seconds
# and once more when CMD ends. A command cut at a time limit, its whole process group killed, still
# leaves what it had written by its last snapshot; DIR then holds one file per snapshotted folder,
# however many files the folder has. Each pack goes to a temporary name and is renamed over the
# archive whole, so a kill mid-pack leaves the previous snapshot. Exits with CMD's status.
#
#   SNAP=/tmp/ttf lab/scripts/snapshot_run.sh --out /tmp/keep bash lab/scripts/gpu_ttf.sh --out /tmp/ttf
set -uo pipefail
ARGS_PASS=1 source "$(dirname "$0")/_args.sh" out/snapshots "$@"
if [ "${#REST[@]}" -eq 0 ]; then
  echo "snapshot_run.sh: expected a command to run after --out DIR" >&2; exit 2
fi
if [ -z "${SNAP:-}" ]; then
  echo "snapshot_run.sh: SNAP: expected the folder the command writes, got nothing" >&2; exit 2
fi
every=${SNAPSHOT_S:-30}
case "$every" in
  ''|*[!0-9]*|0) echo "snapshot_run.sh: SNAPSHOT_S: expected a positive whole number of seconds, got '$every'" >&2; exit 2 ;;
esac
mkdir -p "$DEST" "$SNAP"
SNAP=$(cd "$SNAP" && pwd)
archive="$DEST/$(basename "$SNAP").tar.xz"
pack() {   # to a temporary name beside the archive, then renamed: the archive is always whole
  tar -C "$(dirname "$SNAP")" -cJf "$archive.partial" "$(basename "$SNAP")" 2>/dev/null \
    && mv -f "$archive.partial" "$archive"
}
"${REST[@]}" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; pack; exit 143' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  for _ in $(seq "$every"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  pack
done
wait "$pid"; rc=$?
pack
exit "$rc"
