#!/bin/bash
# experiments.sh: the one command that regenerates every figure and table of
# docs/results.md. Experiments on the 2-GPU H200 profile (or, with
# DEVICES=0,1,2,3, on 4 GPUs into docs/results-h200x4.md), end to end:
#   A  a plain step, m=1 (gpipe)
#   B  m=4 micro-batches, 1F1B
#   C  m=1 with a per-GPU memory cap below what one GPU needs, so that a
#      single GPU runs out of memory (the cap is half-way between the
#      simulator's single-GPU peak and the smallest peak of a 2-GPU split)
# Steps: profile (only when the database holds no measured profile), train
# the RL placer offline against the simulator, search, confirm head to head
# on the GPUs, calibrate the simulator, report.
#
#   scripts/experiments.sh prepare          here (no GPU): builds build/ and
#       build-gpu/ (scripts/gpu-build.sh), copies the profile into
#       out/experiments/, trains A, B and C offline and runs the searches.
#   scripts/experiments.sh gpu              on the GPU machine, with
#       build-gpu (6 MB, no OpenBLAS) and out/experiments carried (the
#       device tool carries 64 MiB, the about 34 MB of tracked files included): profiles if needed (then trains there),
#       confirms A, B, C and calibrates. Logs and the database go to
#       $OUT/results.tar.gz after every step (and $OUT/experiments.log), so a
#       run cut short still returns what it measured. Budget: about 8 minutes.
#   scripts/experiments.sh report [TARBALL] here: unpacks TARBALL (the GPU
#       run's results.tar.gz) into out/, then draws docs/results/ and writes
#       docs/results.md; the database goes to data/results/, xz-compressed.
#   scripts/experiments.sh                  all three in a row, on a machine
#       that has the GPUs and gnuplot.
#
# Knobs (environment): DEVICES=0,1  UPDATES=250  SAMPLES=8  SEED=1  TAG=  COUNT=60
# (calibration placements)  GRAPHS=0 (1: the engine replays CUDA graphs)
# PROFILE=path (profile database to start from; default data/h200xN.db, else
# data/h200xN-spec.db, N the number of DEVICES; give the same DEVICES to all
# three stages)  BUDGET_S=470 (GPU stage: steps that would start
# after this many seconds are skipped and said so).  For a dry run of the
# GPU stage without GPUs: TIMER=synthetic (the simulator with known
# parameters plus noise) and GPU_PLACER=build/cli/placer; SKIP_BUILD=1 and
# PLACER=path skip the builds and use another CPU-side placer.
set -eu -o pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEVICES="${DEVICES:-0,1}"
# The machine follows from the device count: 2 GPUs use out/experiments and
# docs/results.md (+ docs/results/); N != 2 use out/experiments-h200xN and
# docs/results-h200xN.md (+ docs/results-h200xN/), beside the 2-GPU ones.
NDEV=$(( $(echo "$DEVICES" | tr -cd , | wc -c) + 1 ))
MACH="h200x$NDEV"
if [ "$NDEV" = 2 ]; then EXP=out/experiments; RES=results; else EXP="out/experiments-$MACH"; RES="results-$MACH"; fi
# TAG=name keeps a replicate apart (e.g. SEED=2 TAG=seed2: out/experiments-seed2,
# docs/results-seed2.md)
TAG="${TAG:-}"
if [ -n "$TAG" ]; then EXP="$EXP-$TAG"; RES="$RES-$TAG"; fi
UPDATES="${UPDATES:-250}"
SAMPLES="${SAMPLES:-8}"
SEED="${SEED:-1}"
COUNT="${COUNT:-60}"
GRAPHS="${GRAPHS:-0}"
BUDGET_S="${BUDGET_S:-470}"
TIMER="${TIMER:-cuda}"
GPU_PLACER="${GPU_PLACER:-./build-gpu/cli/placer}"
PLACER="${PLACER:-./build/cli/placer}"
SKIP_BUILD="${SKIP_BUILD:-0}"
T0=$(date +%s)

say() { echo "== experiments: $* ($(( $(date +%s) - T0 )) s)"; }
die() { echo "experiments: $*" >&2; exit 1; }

# One value from an SQLite file (python3 is on both machines; the sqlite3
# command line tool is not on the GPU one).
dbq() {
  python3 -c 'import sqlite3,sys
r = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()
print("" if r is None or r[0] is None else r[0])' "$1" "$2"
}

# The cap of setting C in bytes, from the simulator's peaks on database $2
# with placer $1: half-way between one GPU's peak and the smallest largest-
# device peak of a contiguous 2-GPU split.
cap_for_c() {
  n=$(dbq "$2" 'SELECT n_nodes FROM graph ORDER BY id DESC LIMIT 1')
  python3 - "$1" "$2" "$n" <<'EOF'
import json, subprocess, sys
placer, db, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def peak(pl):
    out = subprocess.run([placer, "simulate", "--db", db, "--placement", ",".join(map(str, pl)),
                          "--micro-batches", "1", "--schedule", "gpipe", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return max(d["peak_bytes"] for d in json.loads(out)["devices"])
single = peak([0] * n)
split = min(peak([0] * k + [1] * (n - k)) for k in range(1, n))
if split >= single:
    sys.exit("no 2-GPU split needs less memory than one GPU: setting C is impossible on this profile")
print((single + split) // 2)
EOF
}

# Train A, B and C on $DB with placer $P, search, and write $EXP/settings.
train_all() {
  P=$1
  CAP_C=$(cap_for_c "$P" "$DB") || die "cannot size setting C's cap"
  say "setting C: per-GPU cap $CAP_C bytes"
  for s in "A 1 gpipe 0" "B 4 1f1b 0" "C 1 gpipe $CAP_C"; do
    set -- $s
    capopt=""
    [ "$4" != 0 ] && capopt="--mem-cap $4"
    say "train $1: m=$2 $3 ${capopt:-no cap}, $UPDATES updates x $SAMPLES samples"
    $P train --db "$DB" --micro-batches "$2" --schedule "$3" $capopt --updates "$UPDATES" \
      --samples "$SAMPLES" --seed "$SEED" >"$EXP/train-$1.log" 2>&1 || { tail -20 "$EXP/train-$1.log"; die "train $1 failed"; }
    tail -15 "$EXP/train-$1.log"
    eval "RUN_$1=$(dbq "$DB" 'SELECT max(id) FROM run')"
    say "search $1"
    $P search --db "$DB" --method all --micro-batches "$2" --schedule "$3" $capopt --seed "$SEED" \
      >"$EXP/search-$1.log" 2>&1 || { tail -20 "$EXP/search-$1.log"; die "search $1 failed"; }
    tail -15 "$EXP/search-$1.log"
  done
  cat >"$EXP/settings" <<EOF
# written by scripts/experiments.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)
DB=$DB
CAP_C=$CAP_C
RUN_A=$RUN_A
RUN_B=$RUN_B
RUN_C=$RUN_C
UPDATES=$UPDATES
SAMPLES=$SAMPLES
SEED=$SEED
EOF
}

prepare() {
  if [ "$SKIP_BUILD" != 1 ]; then
    ./scripts/install-deps.sh
    ./scripts/build.sh
    ./scripts/gpu-build.sh
  fi
  mkdir -p "$EXP"
  src="${PROFILE:-}"
  if [ -z "$src" ]; then
    for f in "data/$MACH.db" "data/$MACH-spec.db"; do [ -f "$f" ] && { src=$f; break; }; done
  fi
  [ -n "$src" ] && [ -f "$src" ] || die "no $NDEV-GPU profile: set PROFILE= or ship data/$MACH.db"
  DB="$EXP/$MACH.db"
  rm -f "$DB" "$DB-wal" "$DB-shm" "$EXP"/*.log "$EXP/settings"
  cp "$src" "$DB"
  say "profile $src ($(dbq "$DB" 'SELECT source FROM machine')) copied to $DB"
  train_all "$PLACER"
  say "prepared: carry build-gpu and $EXP to the GPU machine, run scripts/experiments.sh gpu"
}

pack() {
  [ -n "${OUT:-}" ] || return 0
  tar -czf "$OUT/results.tar.gz.tmp" -C out "$(basename "$EXP")" && mv "$OUT/results.tar.gz.tmp" "$OUT/results.tar.gz"
}

# Run a GPU step unless the budget is spent.
budget_left() {
  left=$(( BUDGET_S - ($(date +%s) - T0) ))
  [ "$left" -gt "$1" ] || { say "SKIPPED $2: $left s left of the $BUDGET_S s budget"; return 1; }
}

gpu() {
  [ -x "$GPU_PLACER" ] || die "$GPU_PLACER missing: run scripts/experiments.sh prepare here and carry build-gpu"
  [ -f "$EXP/settings" ] || die "$EXP/settings missing: run scripts/experiments.sh prepare here and carry $EXP"
  if [ -n "${OUT:-}" ]; then exec > >(tee "$OUT/experiments.log" "$EXP/gpu.log") 2>&1
  else exec > >(tee "$EXP/gpu.log") 2>&1; fi
  # GSL/OpenBLAS come from the bundle; NVLink multicast stays off on shared machines
  LD_LIBRARY_PATH="$ROOT/build-gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH NCCL_NVLS_ENABLE=0
  P=$GPU_PLACER
  . "$EXP/settings"
  say "machine: $(nvidia-smi -L 2>/dev/null | tr '\n' ';' || echo 'nvidia-smi missing')"
  $P --version
  gopt="--timer $TIMER"
  [ "$GRAPHS" = 1 ] && gopt="$gopt --graphs"
  if [ "$(dbq "$DB" 'SELECT source FROM machine')" != measured ] && [ "$TIMER" = cuda ]; then
    say "profile: $DB is not a measured profile; measuring devices $DEVICES"
    NEW="$EXP/$MACH-measured.db"
    rm -f "$NEW" "$NEW-wal" "$NEW-shm"
    $P profile --db "$NEW" --devices "$DEVICES" 2>&1 | tail -30
    DB=$NEW
    pack
    train_all "$P"
    . "$EXP/settings"
    pack
  fi
  for s in "A 1 gpipe 0 $RUN_A" "B 4 1f1b 0 $RUN_B" "C 1 gpipe $CAP_C $RUN_C"; do
    set -- $s
    budget_left 60 "confirm $1" || continue
    capopt=""
    [ "$4" != 0 ] && capopt="--mem-cap $4"
    say "confirm $1 (run $5)"
    $P confirm --db "$DB" --run "$5" --devices "$DEVICES" --micro-batches "$2" --schedule "$3" $capopt \
      --label "$1" --seed "$SEED" $gopt 2>&1 | tee "$EXP/confirm-$1.log" || say "confirm $1 FAILED"
    pack
  done
  if budget_left 45 "calibrate"; then
    say "calibrate: $COUNT placements"
    $P calibrate --db "$DB" --devices "$DEVICES" --count "$COUNT" --seed "$SEED" $gopt 2>&1 \
      | tee "$EXP/calibrate.log" || say "calibrate FAILED"
  fi
  pack
  say "gpu stage done"
  sleep 1 # let tee finish $OUT/experiments.log before the command returns
}

report() {
  if [ -n "${1:-}" ]; then
    mkdir -p out
    tar -xzf "$1" -C out
  fi
  [ -f "$EXP/settings" ] || die "$EXP/settings missing: nothing to report"
  . "$EXP/settings"
  [ -x "$PLACER" ] || ./scripts/build.sh
  rm -rf "docs/$RES"
  mkdir -p "docs/$RES"
  "$PLACER" report --db "$DB" --out "docs/$RES" --markdown "docs/$RES.md" --image-prefix "$RES/"
  # the raw material: every log beside the page, and the database the report
  # was read from in data/results/ (copied with SQLite's backup, put in
  # rollback-journal mode, its SHA-256 kept in SHA256SUMS, then xz-compressed:
  # raw data stays out of docs/; data/results/README.md says how to open it)
  mkdir -p "docs/$RES/raw" data/results
  cp "$EXP"/*.log "$EXP/settings" "docs/$RES/raw/" 2>/dev/null || true
  local raw="$RES-$MACH-experiments.db"
  rm -f "data/results/$raw" "data/results/$raw.xz"
  python3 -c 'import sqlite3, sys
dst = sqlite3.connect(sys.argv[2])
sqlite3.connect(sys.argv[1]).backup(dst)
dst.execute("PRAGMA journal_mode=DELETE")
dst.close()' "$DB" "data/results/$raw"
  { grep -v "  $raw\$" data/results/SHA256SUMS 2>/dev/null || true
    (cd data/results && sha256sum "$raw"); } | sort -k2 >data/results/SHA256SUMS.new
  mv data/results/SHA256SUMS.new data/results/SHA256SUMS
  xz -9e -T1 "data/results/$raw"
  {
    echo
    echo "## How these numbers were made"
    echo
    echo "\`DEVICES=$DEVICES scripts/experiments.sh\` (prepare here, gpu on the $NDEV x H200 machine, report here):"
    echo
    echo "- profile: \`$DB\`; placers trained offline against the simulator: $UPDATES updates x $SAMPLES samples, seed $SEED"
    echo "- A: \`placer train/confirm --micro-batches 1 --schedule gpipe\` (run $RUN_A)"
    echo "- B: \`placer train/confirm --micro-batches 4 --schedule 1f1b\` (run $RUN_B)"
    echo "- C: \`placer train/confirm --micro-batches 1 --schedule gpipe --mem-cap $CAP_C\` (run $RUN_C): half-way between the simulator's single-GPU peak and the smallest 2-GPU split peak"
    echo "- raw data: \`$RES/raw/\` (the logs of every stage) and [../data/results/$raw.xz](../data/results/$raw.xz), the database this page is read from (\`xz -dk data/results/$raw.xz\` gives the SQLite file; [../data/results/README.md](../data/results/README.md) says how to check and open it)"
    echo "- confirmation: 4 selection rounds, 8 confirmation rounds, 10 timed steps after 2 warm-up steps per timing; calibration: $COUNT designed placements, 30% held out"
    for x in confirm-A confirm-B confirm-C calibrate; do
      [ -f "$EXP/$x.log" ] || echo "- not run: $x (no $x.log in the results)"
    done
  } >>"docs/$RES.md"
  say "report: docs/$RES.md and docs/$RES/"
}

case "${1:-all}" in
  prepare) prepare ;;
  gpu) gpu ;;
  report) shift; report "${1:-}" ;;
  all) prepare; gpu; report ;;
  *) die "usage: scripts/experiments.sh [prepare|gpu|report [TARBALL]|all]" ;;
esac
