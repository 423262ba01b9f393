#!/bin/bash
# benchmarks/hw/side_stream_run.sh [BUILD]: the side stream of the weight
# gradients (hw/kernels/side_stream.cu) on one GPU (the device machine; carry BUILD,
# default build-gpu, made by scripts/gpu-build.sh). Runs from the repository
# root, writes $OUT/side.log (everything) and $OUT/summary.txt (one line a
# step, then the BENCH lines).
#   correctness  gpu_tests side (side stream against one stream, graphs,
#                m = 1 and 4, one and two logical devices, tf32 / bf16 /
#                fp32), then kernels / step tf32, bf16, strict and graphs as
#                the defaults are, memcheck (+ leaks) and racecheck of a
#                2-logical-device step (gpu_tests sanitize)
#   speed        bench_step --quick --graphs (5 warm-up + median of 30) in
#                tf32 and bf16, ROUNDS rounds (default 2) of: the default and
#                each new part turned back (PLACER_SIDE=1 in TF32, =0 in bf16:
#                the side stream; PLACER_LN4=0: the scalar layernorm kernels;
#                PLACER_LN_PART=0: the layernorm backward's dw and db by
#                atomics; PLACER_TF32_OFF=headt: the head's weight gradient
#                from x as stored; the opt-in PLACER_TF32_ON=headlt: the
#                head's GEMMs through cuBLASLt; TF32_VARIANTS and
#                BF16_VARIANTS replace the lists); each line its own process,
#                alternating; then the
#                TF32 kernel breakdown (PLACER_KPROF=1, op by op)
set -u
B=${1:-build-gpu}
OUT=${OUT:-/tmp/side_out}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
LOG="$OUT/side.log"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"
. "$(dirname "$0")/ab_step.sh" # step NAME TIMEOUT CMD...
T="$B/hw/gpu_tests"
BS="$B/benchmarks/hw/bench_step"
nvidia-smi -L >>"$LOG" 2>&1
git log -1 --format='tree at %h %s' >>"$LOG" 2>/dev/null
step side 90 "$T" side
grep -E '^(PASS|FAIL)' "$LOG" | grep 'side:' | grep -E 'losses|FAIL' >>"$SUM"
if [ "${BENCH_ONLY:-0}" != 1 ]; then
  for t in "kernels tf32" "step tf32" "kernels bf16" "step bf16" "kernels strict" "step strict" graphs; do
    step "${t// /_}" 90 "$T" $t
  done
  CS=/usr/local/cuda/bin/compute-sanitizer
  command -v compute-sanitizer >/dev/null 2>&1 && CS=$(command -v compute-sanitizer)
  if [ -x "$CS" ]; then # a 2-logical-device step, every kernel of it (the float4 layernorm ones too)
    step memcheck_tf32_hs64 150 "$CS" --tool memcheck --leak-check full --error-exitcode 9 "$T" sanitize hs64
    step memcheck_bf16 150 "$CS" --tool memcheck --leak-check full --error-exitcode 9 "$T" sanitize bf16
    [ "${RACECHECK:-1}" = 1 ] && step racecheck_tf32_hs64 150 "$CS" --tool racecheck --error-exitcode 9 "$T" sanitize hs64
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$LOG" >>"$SUM"
  fi
fi
for r in $(seq 1 "$ROUNDS"); do
  for prec in tf32 bf16; do
    if [ "$prec" = tf32 ]; then
      VARIANTS=${TF32_VARIANTS:-default PLACER_LN_PART=0 PLACER_TF32_ON=headlt PLACER_SIDE=1 PLACER_LN4=0 PLACER_TF32_OFF=headt}
    else
      VARIANTS=${BF16_VARIANTS:-default PLACER_SIDE=0 PLACER_LN_PART=0}
    fi
    for v in $VARIANTS; do
      e=$v; [ "$v" = default ] && e=
      step "bench_${prec}_${v}_r$r" 60 env $e "$BS" --quick --graphs --precision "$prec" --warmup 5 --steps 30
      grep '^BENCH' "$LOG" | tail -1 | sed -E "s/,\"all_ms\":\[[^]]*\]//; s/^BENCH /BENCH ${prec} ${v} r$r /" >>"$SUM"
    done
  done
done
step kprof_tf32 60 env PLACER_KPROF=1 "$BS" --quick --warmup 2 --steps 5
grep '^KPROF' "$LOG" | grep -E 'gemm|lt32|layernorm|transpose|loss' >>"$SUM"
grep -c '^FAIL' "$LOG" | sed 's/^/FAIL lines: /' >>"$SUM"
