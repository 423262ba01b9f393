#!/bin/bash
# tests/gpu/tp.sh: tensor and data parallelism on the CUDA backend (issue
# 17), on the one-H200 machine: several processes share GPU 0, so their
# collectives are staged through host memory (hw/dist/dist_device.h; NCCL
# refuses two ranks on one GPU and is not exercised here).
#   1. build-gpu/hw/tp_check (tests/gpu/tp_check.c): tp {1,2} x dp {1,2} x
#      zero {0,1} x sp in fp32 and tf32, a 2-logical-device pipeline inside
#      each rank, tp and dp in bf16, ZeRO-1 in bf16, a killed rank; loss, every
#      gradient and the parameters after 3 AdamW steps against the
#      single-process single-device CUDA step; one PASS/FAIL line a case.
#   2. placer step --procs/--tp/--sp/--zero/--layout with --devices 0: the
#      CLI on CUDA (exit status, "backend":"cuda", the collectives named, the
#      loss of the first step against the one-process CUDA run), a refusal,
#      a killed rank.
# Run from the repository root with build-gpu/ (scripts/gpu-build.sh)
# carried along; BUILD=dir or $1 for another. Writes two files, $OUT/tp.log
# (everything) and $OUT/tp-summary.txt (the PASS/FAIL lines); the work files
# stay in a temporary folder (the device tool brings back few files). Exit 0
# when every line is PASS. About 30 s on an H200 (28 s measured).
set -u
OUT="${OUT:-/tmp/placer-gpu-out}"
mkdir -p "$OUT"
B="${1:-${BUILD:-build-gpu}}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH="$PWD/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
LOG="$OUT/tp.log"
SUM="$OUT/tp-summary.txt"
W=$(mktemp -d /tmp/placer-tp.XXXXXX)
trap 'rm -rf "$W"' EXIT
: >"$LOG"
: >"$SUM"
pass=0
fail=0
note() { # note PASS|FAIL text
  echo "$1 $2" | tee -a "$SUM" >>"$LOG"
  if [ "$1" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

# ---- 1. the engine's checks ----
T="$B/hw/tp_check"
if [ -x "$T" ]; then
  t0=$(date +%s)
  timeout 110 "$T" all >"$W/tp_check.out" 2>&1
  rc=$?
  cat "$W/tp_check.out" >>"$LOG"
  grep -E '^(PASS|FAIL|reference|SUMMARY)' "$W/tp_check.out" >>"$SUM"
  p=$(grep -c '^PASS' "$W/tp_check.out")
  f=$(grep -c '^FAIL' "$W/tp_check.out")
  pass=$((pass + p))
  fail=$((fail + f))
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && note FAIL "tp_check exited $rc after $(( $(date +%s) - t0 )) s with no FAIL line"
else
  note FAIL "$T is missing (scripts/gpu-build.sh builds it)"
fi

# ---- 2. placer step on CUDA ----
P="$B/cli/placer"
CFG="tiny,d_model=64,heads=4,seq=32,vocab=101,batch=8"
first_loss() { sed -n 's/.*"loss":{"first":\([-0-9.e]*\).*/\1/p' "$1"; }
if [ -x "$P" ]; then
  timeout 60 "$P" step --config "$CFG" --devices 0 --warmup 0 --steps 1 --lr 1e-3 --json >"$W/ref.json" 2>>"$LOG"
  ref=$(first_loss "$W/ref.json")
  echo "one-process CUDA step: first loss $ref" >>"$LOG"
  cli_case() { # cli_case NAME ARGS...: runs, checks backend, collectives and first loss (tf32: 1e-4 relative; GPU call 2 measured 4e-7)
    local name=$1 want=${WANT:-host staging} tol=${TOL:-1e-4}
    shift
    local f="$W/$name.json"
    timeout 90 "$P" step --config "$CFG" --devices 0 --warmup 0 --steps 1 --lr 1e-3 --json "$@" >"$f" 2>>"$LOG"
    local rc=$?
    cat "$f" >>"$LOG"
    local got
    got=$(first_loss "$f")
    if [ "$rc" -ne 0 ]; then note FAIL "cli $name: exit $rc"; return; fi
    if ! grep -q '"backend":"cuda"' "$f" || ! grep -q "\"collectives\":\"$want\"" "$f"; then
      note FAIL "cli $name: not the CUDA backend with collectives '$want'"; return
    fi
    if [ -z "$ref" ] || [ -z "$got" ]; then note FAIL "cli $name: no loss (ref '$ref', got '$got')"; return; fi
    if awk -v a="$got" -v b="$ref" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; then
      note PASS "cli $name: first loss $got vs one process $ref"
    else
      note FAIL "cli $name: first loss $got vs one process $ref (bound $tol relative)"
    fi
  }
  cli_case tp2 --procs 2 --tp 2
  cli_case tp2_sp --procs 2 --tp 2 --sp
  cli_case dp2_zero1 --procs 2 --zero 1
  cli_case tp2_dp2_sp_zero1 --procs 4 --tp 2 --sp --zero 1
  cli_case layout_tp2_dp2 --layout "tp=2,sp=1,dp=2,mbs=1,gbs=8"
  # bf16: tp 2 x dp 2 with sp against the one-process bf16 step (bound 1e-3: bf16 roundings; call 3 measured 2e-7)
  timeout 60 "$P" step --config "$CFG" --devices 0 --warmup 0 --steps 1 --lr 1e-3 --json --precision bf16 \
    >"$W/ref_bf16.json" 2>>"$LOG"
  ref_fp=$ref
  ref=$(first_loss "$W/ref_bf16.json")
  echo "one-process CUDA bf16 step: first loss $ref" >>"$LOG"
  TOL=1e-3 cli_case tp2_dp2_sp_bf16 --procs 4 --tp 2 --sp --precision bf16
  TOL=1e-3 cli_case dp2_zero1_bf16 --procs 2 --zero 1 --precision bf16
  ref=$ref_fp
  # a killed rank: the run fails within 30 s with one line, no rank left behind
  t0=$(date +%s)
  PLACER_TEST_KILL_RANK=1 timeout 60 "$P" step --config "$CFG" --devices 0 --procs 4 --tp 2 --warmup 1 --steps 2 \
    --timeout 10 >/dev/null 2>"$W/kill.err"
  rc=$?
  dt=$(( $(date +%s) - t0 ))
  cat "$W/kill.err" >>"$LOG"
  left=$(pgrep -f "$P step --config $CFG" | wc -l)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$dt" -lt 30 ] && [ "$(wc -l <"$W/kill.err")" -eq 1 ] && [ "$left" -eq 0 ] &&
    grep -q "rank 1 was killed by signal 9" "$W/kill.err"; then
    note PASS "cli killed rank: exit $rc in $dt s, $left left: $(cat "$W/kill.err")"
  else
    note FAIL "cli killed rank: exit $rc in $dt s, $left left, $(wc -l <"$W/kill.err") lines: $(head -c 300 "$W/kill.err")"
  fi
  # a hung rank: the others time out in their collective (--timeout 5), the run fails with one line, none left
  t0=$(date +%s)
  PLACER_TEST_HANG_RANK=1 timeout 60 "$P" step --config "$CFG" --devices 0 --procs 2 --tp 2 --warmup 1 --steps 2 \
    --timeout 5 >/dev/null 2>"$W/hang.err"
  rc=$?
  dt=$(( $(date +%s) - t0 ))
  cat "$W/hang.err" >>"$LOG"
  left=$(pgrep -f "$P step --config $CFG" | wc -l)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$dt" -lt 30 ] && [ "$(wc -l <"$W/hang.err")" -eq 1 ] && [ "$left" -eq 0 ] &&
    grep -q "no word from rank" "$W/hang.err"; then
    note PASS "cli hung rank: exit $rc in $dt s, $left left: $(cat "$W/hang.err")"
  else
    note FAIL "cli hung rank: exit $rc in $dt s, $left left, $(wc -l <"$W/hang.err") lines: $(head -c 300 "$W/hang.err")"
  fi
else
  note FAIL "$P is missing"
fi
# ---- 3. one GPU a rank, over NCCL: only where the machine has 2 GPUs or more ----
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$NGPU" -ge 2 ] && [ -x "$T" ] && [ -x "$P" ]; then
  TP_CHECK_GPUS=$NGPU timeout 100 "$T" nccl >"$W/tp_check_nccl.out" 2>&1
  cat "$W/tp_check_nccl.out" >>"$LOG"
  grep -E '^(PASS|FAIL|SUMMARY)' "$W/tp_check_nccl.out" | sed 's/^SUMMARY/SUMMARY nccl/' >>"$SUM"
  pass=$((pass + $(grep -c '^PASS' "$W/tp_check_nccl.out")))
  fail=$((fail + $(grep -c '^FAIL' "$W/tp_check_nccl.out")))
  WANT=nccl cli_case nccl_tp2 --procs 2 --tp 2 --gpu-per-rank
  WANT=nccl cli_case nccl_dp2_zero1 --procs 2 --zero 1 --gpu-per-rank
else
  echo "SKIP nccl: needs 2 GPUs, this machine has $NGPU (NCCL refuses two ranks on one GPU)" | tee -a "$SUM" >>"$LOG"
fi
# ---- 4. optional (TP_MEMCHECK=1): compute-sanitizer memcheck over tp_check's bf16 and fp32 cases ----
if [ "${TP_MEMCHECK:-0}" = 1 ] && [ -x "$T" ]; then
  CS=/usr/local/cuda/bin/compute-sanitizer
  command -v compute-sanitizer >/dev/null 2>&1 && CS=$(command -v compute-sanitizer)
  for mode in bf16 fp32; do
    timeout 300 "$CS" --tool memcheck --target-processes all --error-exitcode 3 "$T" "$mode" >"$W/mc.out" 2>&1
    rc=$?
    cat "$W/mc.out" >>"$LOG"
    if [ "$rc" -eq 0 ]; then note PASS "memcheck tp_check $mode: no errors"
    else note FAIL "memcheck tp_check $mode: rc $rc: $(grep -m1 -E 'ERROR SUMMARY|Invalid|FAIL' "$W/mc.out")"; fi
  done
fi
echo "TP SUMMARY: $pass passed, $fail failed" | tee -a "$SUM" >>"$LOG"
cat "$SUM"
[ "$fail" -eq 0 ]
