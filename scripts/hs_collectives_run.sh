#!/bin/sh
# HS (issue 17, item 7): the layout simulator's collective model on a quiet
# host. Measures the CPU backend's collective curves (the fork launcher's
# sockets) over 2, 4 and 8 processes, fits the model (placer calibrate
# --collectives, with the held-out check), runs placer layout with and
# without the measured collectives, and placer confirm --layout with
# tp x dp > 1 on the CPU backend against the layout simulator. No GPU is
# used: on the device machine this is the 16-core host's CPU, less loaded
# than the 2-core CI machine. Everything goes to $OUT/hs.log (and the
# collectives file / JSON next to it).
#   OUT=/tmp/x sh scripts/hs_collectives_run.sh [BUILD]   (BUILD default build-gpu)
set -u
cd "$(dirname "$0")/.."
B="${1:-build-gpu}"
OUT="${OUT:-/tmp/hs-collectives}"
MAXB="${MAXB:-16MiB}"
mkdir -p "$OUT"
LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; export LD_LIBRARY_PATH
P="$B/cli/placer"
DB="$OUT/hs-cpu.db"
rm -f "$DB" "$DB-wal" "$DB-shm"
step() { # name, command...
  name=$1; shift
  echo "==== $name: $*"
  t0=$(date +%s)
  timeout 120 "$@"
  rc=$?
  echo "rc=$rc $name ($(( $(date +%s) - t0 )) s)"
}
{
  echo "HS collectives run, $(date -u), host $(hostname), $(nproc) cores, load: $(cat /proc/loadavg)"
  "$P" --version
  if ! "$P" calibrate --collectives --help >/dev/null 2>&1; then
    echo "HS: $P has no 'calibrate --collectives' (build older than commit 3e0f817): rebuild build-gpu"; exit 1
  fi
  for n in 2 4 8; do
    step "profile-collectives-$n" "$P" profile --db "$DB" --cpu 1 --config tiny --collectives "$n" \
      --collective-max-bytes "$MAXB"
  done
  step calibrate "$P" calibrate --collectives --db "$DB" --points --write "$OUT/hs-coll.json"
  "$P" calibrate --collectives --db "$DB" --json > "$OUT/hs-calibrate.json" 2>&1
  for opt in "" "--collectives-from $OUT/hs-coll.json" "--collectives-from $OUT/hs-coll.json --measured-curves"; do
    # shellcheck disable=SC2086
    step "layout $opt" "$P" layout --model default --cluster h200x2 --layout tp=2,mbs=1,gbs=8 --explain $opt
  done
  step confirm-layouts "$P" confirm --db "$DB" --timer cpu --layout tp=1,mbs=1 --layout dp=2,mbs=1 \
    --layout tp=2,mbs=1 --layout dp=4,mbs=1 --layout tp=2,dp=2,mbs=1 --layout tp=2,dp=2,zero=1,mbs=1 \
    --confirm-rounds 4 --steps 5 --warmup 2
  echo "HS done $(date -u)"
} > "$OUT/hs.log" 2>&1
grep -E "^rc=|^HS" "$OUT/hs.log"
