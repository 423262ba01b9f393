#!/bin/bash
# tests/gpu/vs_torch.sh BUILD ROUNDS: the engine's 1-GPU step (CUDA graphs,
# bf16 and tf32) against torch.compile(mode="reduce-overhead") over model
# and optimizer (bf16 autocast and tf32), alternating engine and PyTorch in
# each round, so both see the same machine state. Prints one line per round:
#   VS {"round":R,"engine_bf16_ms":..,"torch_ro_bf16_ms":..,"ratio_bf16":..,
#       "engine_tf32_ms":..,"torch_ro_tf32_ms":..,"ratio_tf32":..}
# and the medians over the rounds. Run from the repository root.
set -u
B=${1:-build-gpu}
R=${2:-3}
BS="$B/benchmarks/hw/bench_step"
med() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "nan"}'; }
field() { sed -nE "s/.*\"$1\": ?([0-9.]+).*/\1/p" | head -1; } # json.dumps puts a space after ':'
RAW=/tmp/vs_raw
: >/tmp/vs_rows
: >"$RAW"
for r in $(seq 1 "$R"); do
  eb=$("$BS" --quick --graphs --precision bf16 --warmup 5 --steps 30 | grep '^BENCH' | tee -a "$RAW" | field median_ms)
  tb=$(python3 benchmarks/hw/pytorch_gpt.py --warmup 8 --steps 30 --configs sdpa:bf16:1:ro 2>&1 | grep -E '^TORCH|Error' |
       tee -a "$RAW" | grep '^TORCH' | field median_ms)
  et=$("$BS" --quick --graphs --precision tf32 --warmup 5 --steps 30 | grep '^BENCH' | tee -a "$RAW" | field median_ms)
  tt=$(python3 benchmarks/hw/pytorch_gpt.py --warmup 8 --steps 30 --configs sdpa:tf32:1:ro 2>&1 | grep -E '^TORCH|Error' |
       tee -a "$RAW" | grep '^TORCH' | field median_ms)
  line=$(awk -v r="$r" -v eb="${eb:-nan}" -v tb="${tb:-nan}" -v et="${et:-nan}" -v tt="${tt:-nan}" 'BEGIN {
    printf "VS {\"round\":%d,\"engine_bf16_ms\":%s,\"torch_ro_bf16_ms\":%s,\"ratio_bf16\":%.3f,", r, eb, tb, (tb > 0 ? eb / tb : -1)
    printf "\"engine_tf32_ms\":%s,\"torch_ro_tf32_ms\":%s,\"ratio_tf32\":%.3f}\n", et, tt, (tt > 0 ? et / tt : -1) }')
  echo "$line"
  echo "$eb $tb $et $tt" >>/tmp/vs_rows
done
sed -E 's/,? ?"all_ms": ?\[[^]]*\]//' "$RAW"
EB=$(awk '{print $1}' /tmp/vs_rows | med); TB=$(awk '{print $2}' /tmp/vs_rows | med)
ET=$(awk '{print $3}' /tmp/vs_rows | med); TT=$(awk '{print $4}' /tmp/vs_rows | med)
awk -v eb="$EB" -v tb="$TB" -v et="$ET" -v tt="$TT" -v n="$R" 'BEGIN {
  printf "VS {\"rounds\":%d,\"median_engine_bf16_ms\":%s,\"median_torch_ro_bf16_ms\":%s,\"ratio_bf16\":%.3f,", n, eb, tb, (tb > 0 ? eb / tb : -1)
  printf "\"median_engine_tf32_ms\":%s,\"median_torch_ro_tf32_ms\":%s,\"ratio_tf32\":%.3f}\n", et, tt, (tt > 0 ? et / tt : -1) }'
