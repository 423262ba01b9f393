#!/bin/bash
# scripts/gpu-profile.sh: measures the shipped H200 profiles on the 2-GPU
# device machine, in one go. Run from the repository root with build-gpu/
# (scripts/gpu-build.sh) carried along:
#
#   1. profiles the default GPT on GPUs 0,1 into data/h200x2.db (fresh file,
#      portable) and prints its wall time (target: at most 3 minutes);
#   2. profiles GPU 0 alone into data/h200x1.db;
#   3. profiles GPUs 0,1 a second time into a scratch file and prints the
#      run-to-run variation of the per-node median times (placer profile
#      compare; target under 2% for nodes above 50 us);
#   4. prints the sanity check of both files (placer profile check): per
#      device and micro-batch size, the sum of the node costs against the
#      whole single-device step measured on the engine; and, beside it, the
#      same steps replayed as CUDA graphs (placer step --graphs).
#
#   REPS=100 bash scripts/gpu-profile.sh  other repetitions per node probe (default: the profiler's, 60)
#
# Writes under $OUT: profile.log (everything, with one line per measured unit),
# summary.txt (the tables), and copies of the three profile files.
set -u
OUT="${OUT:-/tmp/placer-gpu-profile}"
mkdir -p "$OUT"
B="${BUILD:-build-gpu}"
P="$B/cli/placer"
REPS_OPT=${REPS:+--reps $REPS}   # placer profile --reps, only when REPS is set
# NVLink multicast stays off on shared machines; GSL/OpenBLAS come from the bundle
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH="$PWD/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
unset PLACER_PROFILE_TEST_KILL_AT
LOG="$OUT/profile.log"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"

if [ ! -x "$P" ]; then
  echo "gpu-profile: $P is missing; run scripts/gpu-build.sh here and carry $B" | tee -a "$SUM" >&2
  exit 1
fi

say() { echo "$*" | tee -a "$SUM"; }

# run NAME TIMEOUT CMD...: log everything, keep stdout in $OUT/NAME.out, time it
run() {
  local name=$1 to=$2
  shift 2
  echo "==== $name: $* ====" >>"$LOG"
  local t0 t1 rc
  t0=$(date +%s%N)
  timeout "$to" "$@" >"$OUT/$name.out" 2>>"$LOG"
  rc=$?
  t1=$(date +%s%N)
  cat "$OUT/$name.out" >>"$LOG"
  local ms=$(((t1 - t0) / 1000000))
  printf "%-16s rc=%-3s wall %4d.%03d s\n" "$name" "$rc" $((ms / 1000)) $((ms % 1000)) | tee -a "$SUM"
  return $rc
}

{
  echo "== machine"
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv
  nvidia-smi topo -m
  uname -r
} >>"$LOG" 2>&1

rm -f data/h200x2.db data/h200x2.db-wal data/h200x2.db-shm data/h200x1.db data/h200x1.db-wal data/h200x1.db-shm
SCRATCH=/tmp/placer-h200x2-rerun.db
rm -f "$SCRATCH" "$SCRATCH-wal" "$SCRATCH-shm"

say "== 1. two GPUs -> data/h200x2.db (target: at most 180 s)"
run profile_x2 200 "$P" profile --db data/h200x2.db --devices 0,1 $REPS_OPT --portable --verbose
grep -E "^(profiled|probe repetitions)" "$OUT/profile_x2.out" | tee -a "$SUM"

say "== 2. GPU 0 alone -> data/h200x1.db"
run profile_x1 120 "$P" profile --db data/h200x1.db --devices 0 $REPS_OPT --portable --verbose
grep -E "^(profiled|probe repetitions)" "$OUT/profile_x1.out" | tee -a "$SUM"

say "== 3. the same two GPUs again -> scratch; run-to-run variation"
run profile_x2_again 200 "$P" profile --db "$SCRATCH" --devices 0,1 $REPS_OPT --portable --verbose
grep -E "^(profiled|probe repetitions)" "$OUT/profile_x2_again.out" | tee -a "$SUM"
run compare_50us 60 "$P" profile compare --db data/h200x2.db --db "$SCRATCH" --min-us 50
cat "$OUT/compare_50us.out" >>"$SUM"
run compare_10us 60 "$P" profile compare --db data/h200x2.db --db "$SCRATCH" --min-us 10
cat "$OUT/compare_10us.out" >>"$SUM"

say "== 4. sanity check: node sums against whole single-device steps (no calibration)"
run check_x2 60 "$P" profile check --db data/h200x2.db
cat "$OUT/check_x2.out" >>"$SUM"
run check_x1 60 "$P" profile check --db data/h200x1.db
cat "$OUT/check_x1.out" >>"$SUM"
say "-- the engine's whole single-GPU steps replayed as CUDA graphs (launch gaps mostly gone), for comparison"
for b in 16 8 4 2 1; do
  run "graph_step_mb$b" 60 "$P" step --devices 0 --config "default,batch=$b" --graphs --warmup 3 --steps 20
  echo "  mb $b: $(grep -E '^(step time|graphs)' "$OUT/graph_step_mb$b.out" | tr -s ' ' | paste -sd ';')" | tee -a "$SUM"
done
run show_x2 60 "$P" profile show --db data/h200x2.db
sed -n '/^node costs/,$p' "$OUT/show_x2.out" >>"$SUM"

for f in data/h200x2.db data/h200x1.db; do [ -f "$f" ] && cp "$f" "$OUT/"; done
[ -f "$SCRATCH" ] && cp "$SCRATCH" "$OUT/h200x2-rerun.db"
rm -f "$OUT"/*.out
echo
cat "$SUM"
