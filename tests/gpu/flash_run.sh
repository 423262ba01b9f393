#!/bin/bash
# tests/gpu/flash_run.sh: the flash-attention kernels' checks, sanitizer runs
# and timings (next to PyTorch SDPA and, when given, the engine's current
# attention kernels under PLACER_KPROF) in one go on the device machine. Run
# from the repository root; FLASH_BIN names the folder holding flash_tests
# (meson target hw/flash_tests) and, optionally, bench_step_head (a
# bench_step built from the commit before the fused attention).
# Writes $OUT/flash.log (everything) and $OUT/summary.txt.
set -u
OUT="${OUT:-/tmp/flash-out}"
mkdir -p "$OUT"
D="${FLASH_BIN:-build-h3-dev}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
LOG="$OUT/flash.log"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"
step() { # step NAME TIMEOUT CMD...
  local name=$1 to=$2 t0 t1 rc
  shift 2
  echo "==== $name: $* ====" >>"$LOG"
  t0=$(date +%s%N)
  timeout "$to" "$@" >>"$LOG" 2>&1
  rc=$?
  t1=$(date +%s%N)
  printf "%-12s rc=%-3s %6d ms\n" "$name" "$rc" "$(( (t1 - t0) / 1000000 ))" | tee -a "$SUM"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >>"$LOG" 2>&1
CS=/usr/local/cuda/bin/compute-sanitizer
command -v compute-sanitizer >/dev/null 2>&1 && CS=$(command -v compute-sanitizer)
step check 120 "$D/flash_tests" check
step memcheck 60 "$CS" --tool memcheck --error-exitcode 3 "$D/flash_tests" sanitize
step bench 45 "$D/flash_tests" bench
step sdpa 120 python3 tests/gpu/flash_sdpa.py
step racecheck 120 "$CS" --tool racecheck --error-exitcode 3 "$D/flash_tests" sanitize
step initcheck 45 "$CS" --tool initcheck --error-exitcode 3 "$D/flash_tests" sanitize
[ -x "$D/bench_step_head" ] && step kprof_head 60 env PLACER_KPROF=1 "$D/bench_step_head" --quick --warmup 2 --steps 5
{
  echo "==== results"
  grep -hE "^(FAIL|flash_tests )" "$LOG"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$LOG"
  grep -hE "^(FLASHBENCH|SDPA) " "$LOG"
  grep -hE "^KPROF.*(permute|unpermute|softmax|heads_tokens|bgemm)" "$LOG"
} >>"$SUM"
cat "$SUM"
