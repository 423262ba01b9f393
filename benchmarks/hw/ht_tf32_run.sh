#!/bin/bash
# benchmarks/hw/ht_tf32_run.sh [BUILD]: the TF32 fused paths of issue 16 on
# one GPU (the device machine; carry BUILD, default build-gpu, made by
# scripts/gpu-build.sh). Runs from the repository root, writes $OUT/ht.log
# (everything) and $OUT/summary.txt (one line a step, then the results).
#   correctness  gpu_tests kernels / step tf32 (hs 32 unfused, hs 64 and 128
#                with the TF32 flash kernel; again with PLACER_TF32_ON=tdw),
#                graphs, strict fp32 unchanged,
#                memcheck (+ leaks) of a 2-logical-device TF32 step (gpu_tests
#                sanitize: hs 32 and hs 64) and racecheck of its hs-64 half
#                (sanitize hs64), so every new kernel runs under both;
#                kernels / step bf16 and a bf16 graph bench (the bf16 flash
#                kernels are H3's v3 now)
#   speed        bench_step --graphs TF32 (5 warm-up + median of 30) with
#                every fused path, then with each turned off
#                (PLACER_TF32_OFF=tune|ltnn|flash|loss|epi|all; epi: the MLP's
#                and the unfused attention's epilogues, the flash path always
#                uses its own), the loss variant with two 512-thread blocks an
#                SM (PLACER_LOSS32=512), the opt-in paths (PLACER_TF32_ON=lt:
#                every GEMM through cuBLASLt; =gelu: the fc GEMM's GELU
#                epilogue instead of gelu4_k; =tdw: weight gradients from
#                transposed copies), the flash kernels without their prefetch
#                (PLACER_FLASH32_PF=0), all fused again (the first and last
#                lines bracket the noise), the full bench_step --graphs, and
#                the TF32 kernel breakdown (PLACER_KPROF=1, op by op); with
#                VS=1 also tests/gpu/vs_torch.sh (1 round: the engine beside
#                torch.compile reduce-overhead, bf16 and TF32)
#   kernels      when BUILD/hw/flash_tests is built (ninja -C BUILD
#                hw/flash_tests): its check (bf16 and TF32 against the
#                reference), memcheck and racecheck, and bench
# About 100-150 s on an H200 (call 3: ~110 s), plus vs_torch with VS=1;
# every step has its own timeout.
set -u
B=${1:-build-gpu}
OUT=${OUT:-/tmp/ht_tf32_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
LOG="$OUT/ht.log"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"
. "$(dirname "$0")/ab_step.sh" # step NAME TIMEOUT CMD...
T="$B/hw/gpu_tests"
BS="$B/benchmarks/hw/bench_step"
CS=/usr/local/cuda/bin/compute-sanitizer
command -v compute-sanitizer >/dev/null 2>&1 && CS=$(command -v compute-sanitizer)
nvidia-smi -L >>"$LOG" 2>&1
git log -1 --format='tree at %h %s' >>"$LOG" 2>/dev/null

step kernels_tf32 60 "$T" kernels tf32
step step_tf32 60 "$T" step tf32
step graphs 60 "$T" graphs
# the opt-in weight gradients from transposed copies (PLACER_TF32_ON=tdw): the same checks
step kernels_tf32_tdw 60 env PLACER_TF32_ON=tdw "$T" kernels tf32
step step_tf32_tdw 60 env PLACER_TF32_ON=tdw "$T" step tf32
step kernels_strict 60 "$T" kernels strict
step step_strict 60 "$T" step strict
# the bf16 mode with H3's v3 flash kernels (ldmatrix fragments), adopted in the same tree
step kernels_bf16 60 "$T" kernels bf16
step step_bf16 60 "$T" step bf16
step bench_bf16_graphs 40 "$BS" --quick --graphs --precision bf16 --warmup 5 --steps 30
grep '^BENCH' "$LOG" | tail -1 | sed -E 's/,"all_ms":\[[^]]*\]//; s/^BENCH /BENCH bf16 /' >>"$SUM"
for v in "" PLACER_TF32_OFF=tune PLACER_TF32_OFF=ltnn PLACER_TF32_OFF=flash PLACER_TF32_OFF=loss \
  PLACER_TF32_OFF=epi PLACER_TF32_OFF=all PLACER_LOSS32=512 PLACER_TF32_ON=lt PLACER_TF32_ON=gelu \
  PLACER_TF32_ON=tdw PLACER_FLASH32_PF=0 ""; do
  step "bench_tf32_graphs_${v:-fused}" 40 env $v "$BS" --quick --graphs --precision tf32 --warmup 5 --steps 30
  grep '^BENCH' "$LOG" | tail -1 | sed -E "s/,\"all_ms\":\[[^]]*\]//; s/^BENCH /BENCH ${v:-fused} /" >>"$SUM"
done
step bench_graphs 60 "$BS" --graphs --warmup 3 --steps 20
step kprof_tf32 60 env PLACER_KPROF=1 "$BS" --quick --warmup 2 --steps 5
if [ -x "$B/hw/flash_tests" ]; then # the kernels alone: every shape against the exact reference, and their times
  step flash_check 60 "$B/hw/flash_tests" check
  step flash_check_nopf 60 env PLACER_FLASH32_PF=0 "$B/hw/flash_tests" check
  step flash_memcheck 60 "$CS" --tool memcheck --error-exitcode 3 "$B/hw/flash_tests" sanitize
  step flash_racecheck 60 "$CS" --tool racecheck --error-exitcode 3 "$B/hw/flash_tests" sanitize
  step flash_bench 60 "$B/hw/flash_tests" bench
else
  echo "SKIP flash_tests: $B/hw/flash_tests not built (ninja -C $B hw/flash_tests)" | tee -a "$SUM"
fi
step memcheck_engine 90 "$CS" --tool memcheck --leak-check full --error-exitcode 3 "$T" sanitize
step racecheck_engine 240 "$CS" --tool racecheck --error-exitcode 3 "$T" sanitize hs64

[ "${VS:-0}" = 1 ] && step vs_torch 400 bash tests/gpu/vs_torch.sh "$B" "${VS_ROUNDS:-1}"

{
  echo
  echo "==== results"
  grep -hE "^(FAIL|gpu_tests)" "$LOG"
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY" "$LOG"
  grep -hE "^PASS .*(flash|hs=64|hs=128|attn)" "$LOG" | head -60
  grep -hE "^(FLOOR|BENCH|GRAPH|FLASHBENCH|TORCH|VS) " "$LOG" | sed -E 's/,"all_ms":\[[^]]*\]//'
  grep -hE "^KPROF" "$LOG" | awk '{print $(NF-1), $0}' | sort -rn | cut -d' ' -f2- | head -45
} >>"$SUM"
cat "$SUM"
