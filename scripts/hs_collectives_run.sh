#!/bin/sh
# HS (issue 17, item 7): the layout simulator's collective model on a quiet
# host. Measures the CPU backend's collective curves (the fork launcher's
# sockets) over 2, 4 and 8 processes, fits the model (placer calibrate
# --collectives, with the held-out check), runs placer layout with and
# without the measured collectives, and placer confirm --layout with
# tp x dp > 1 on the CPU backend against the layout simulator, on the
# device machine's 16-core host (less loaded than the 2-core CI machine);
# then, when the binary has the CUDA engine and a GPU is there, a tiny
# profile of GPU 0 with its collectives and placer confirm --timer cuda over
# tp x dp layouts whose ranks share GPU 0 (host-staged collectives). Everything goes to $OUT/hs.log (and the
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
    --confirm-rounds 4 --steps 20 --warmup 3
  # the CUDA path of tp / dp (hw/dist/dist_device.h): every rank on GPU 0, host-staged collectives
  if "$P" --version | grep -q "CUDA engine built" && command -v nvidia-smi >/dev/null 2>&1; then
    GDB="$OUT/hs-gpu.db"
    rm -f "$GDB" "$GDB-wal" "$GDB-shm"
    step gpu-profile "$P" profile --db "$GDB" --devices 0 --config tiny --reps 20 --collectives 2 \
      --collective-max-bytes "$MAXB"
    step gpu-confirm-layouts "$P" confirm --db "$GDB" --timer cuda --layout tp=1,mbs=1 --layout dp=2,mbs=1 \
      --layout tp=2,mbs=1 --layout tp=2,dp=2,mbs=1 --confirm-rounds 3 --steps 20 --warmup 3
  else
    echo "HS: no CUDA engine or no GPU: the CUDA confirm is skipped"
  fi
  echo "HS done $(date -u)"
} > "$OUT/hs.log" 2>&1
grep -E "^rc=|^HS" "$OUT/hs.log"
