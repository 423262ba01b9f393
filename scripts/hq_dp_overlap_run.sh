#!/bin/sh
# HQ (issue 17, item 2): the dp buckets overlapped with backward, on the
# device machine. Two measurements, each as alternating pairs
# PLACER_DP_OVERLAP=1 (overlap, the default) / =0 (synchronous buckets):
#   cpu   placer step --cpu 1 --procs 2 --bucket-mb 0.25 on the host's
#         16 cores (the CPU backend: a comm thread per rank), 5 pairs of 5 steps
#   cuda  placer step --devices 0 --procs 2 --bucket-mb 0.25 (both ranks on
#         GPU 0: host-staged dp collectives, the comm thread path on the
#         CUDA backend), 3 pairs, when the binary has CUDA and a GPU is there
# Each line: mode, median step ms, first and last loss. The CPU losses must
# be equal in every run (same bits); on CUDA the kernels' atomics may differ
# run to run, so the sync-vs-sync pairs are the control. NCCL (distinct
# GPUs) is not exercised: one GPU. Runs past 120 s are skipped (under
# 150 s in all). Everything goes to $OUT/hq.log.
#   OUT=/tmp/x sh scripts/hq_dp_overlap_run.sh [BUILD]   (BUILD default build-gpu)
set -u
cd "$(dirname "$0")/.."
B="${1:-build-gpu}"
OUT="${OUT:-/tmp/hq-dp-overlap}"
mkdir -p "$OUT"
LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; export LD_LIBRARY_PATH
P="$B/cli/placer"
START=$(date +%s)
one() { # label, overlap, args...
  label=$1; ov=$2; shift 2
  if [ $(( $(date +%s) - START )) -gt 120 ]; then echo "$label overlap=$ov skipped (the script's 120 s budget)"; return; fi
  PLACER_DP_OVERLAP=$ov timeout 40 "$P" step "$@" --json 2>&1 | python3 -c "
import json, sys
t = sys.stdin.read()
try:
    d = json.loads(t.strip().splitlines()[-1])
    print('$label overlap=$ov median_ms %.4f loss %s %s' % (d['step_ms']['median'], d['loss']['first'], d['loss']['last']))
except Exception:
    print('$label overlap=$ov FAILED (or past the 40 s timeout): ' + t.strip().replace(chr(10), ' | ')[-400:])
"
}
{
  echo "HQ dp overlap run, $(date -u), host $(hostname), $(nproc) cores, load: $(cat /proc/loadavg)"
  git log --oneline -1 2>/dev/null
  CPU_CFG="${HQ_CPU_CFG:-tiny,d_model=128,heads=4,layers=4,seq=32,batch=8,vocab=512}"
  for i in 1 2 3 4 5; do
    for ov in 1 0; do
      one "cpu pair $i" $ov --cpu 1 --procs 2 --bucket-mb 0.25 --config "$CPU_CFG" --warmup 1 --steps 5
    done
  done
  if nvidia-smi -L >/dev/null 2>&1; then
    GPU_CFG="tiny,d_model=512,heads=8,layers=8,seq=256,batch=8,vocab=8192"
    for i in 1 2 3; do
      for ov in 1 0; do
        one "cuda pair $i" $ov --devices 0 --procs 2 --bucket-mb 0.25 --config "$GPU_CFG" --warmup 2 --steps 10 \
          --precision fp32
      done
    done
  else
    echo "no GPU: cuda pairs skipped"
  fi
  echo "HQ dp overlap run done $(date -u)"
} > "$OUT/hq.log" 2>&1
cat "$OUT/hq.log"
