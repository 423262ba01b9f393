#!/bin/sh
# Writes what the program prints for a fixed list of commands into DIR, one
# file per command, with wall-clock timings masked, so that two builds can be
# compared with `diff -r` (a refactoring must leave every file identical).
# usage: scripts/snapshot-outputs.sh DIR [BUILD]
# The list: sim_checksum; every check-published table (dense, FP8, MoE; text
# and JSON); plan and layout for the README's examples (text, JSON, exports);
# profile show on every shipped database; simulate, search and train; graph;
# calibrate --layout-runs; the CPU engine's steps.
set -u
out="$1"; B="${2:-build}"
cd "$(dirname "$0")/.."
P="$B/cli/placer"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
mask() {  # wall-clock figures only; simulated times stay
  sed -E -e 's/in [0-9]+\.[0-9]+ s/in T s/g' -e 's/[0-9]+\.[0-9]+ s wall/T s wall/g' \
      -e 's/"(wall|elapsed|seconds|search_s|time_s|wall_s|planner_s)": *[0-9.e+-]+/"\1": T/g' \
      -e 's/run id [0-9]+/run id N/g' -e "s#$tmp#TMP#g" -e 's/[0-9]+\.[0-9]+ (updates|samples)\/s/R \1\/s/g' \
      -e 's/"step_ms":\{[^}]*\}/"step_ms":T/g' -e 's/"tokens_per_s":[0-9.]+/"tokens_per_s":T/g'
}
run() {  # run NAME CMD...: stdout+stderr and the exit code, masked
  name="$1"; shift
  n=$((n + 1))
  "$@" >"$tmp/o" 2>&1; rc=$?
  { mask <"$tmp/o"; echo "rc=$rc"; } >"$out/$name"
}
run sim_checksum "$B/benchmarks/sim/sim_checksum"
run published_dense "$P" check-published
run published_dense_json "$P" check-published --json
run published_breakdown "$P" check-published --breakdown
run published_fit "$P" check-published --fit
run published_moe "$P" check-published --moe
run published_moe_json "$P" check-published --moe --json
PL="--model llama-3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --seq 8192"
run plan_readme "$P" plan $PL --top 3
run plan_readme_json "$P" plan $PL --top 3 --json
for e in megatron torchtitan deepspeed json; do run plan_export_$e "$P" plan $PL --export $e; done
run plan_70b_fp8 "$P" plan --model llama-3-70b --cluster dgx-h100 --gpus 128 --global-batch 512 --seq 8192 --precision bf16,fp8 --json
run plan_dsv3 "$P" plan --model deepseek-v3 --cluster h800-deepseek --gpus 2048 --global-batch 15360 --seq 4096 --json
run plan_mixtral_sched "$P" plan --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --global-batch 256 --seq 4096 --schedules all --json
LA="--model mixtral-8x7b --cluster dgx-b200 --gpus 64 --seq 4096 --layout tp=2,pp=2,ep=8,dp=16,mbs=1,gbs=512,zero=1,precision=fp8,fp8=delayed"
run layout_readme "$P" layout $LA
run layout_readme_json "$P" layout $LA --json
for s in 1f1b interleaved zb-h1 zb-h2 zb-v dualpipev; do
  v=1; k=",sched=$s"; case $s in interleaved) v=2; k="";; zb-v|dualpipev) v=2;; esac
  run layout_70b_$s "$P" layout --model llama-3-70b --cluster dgx-h100 --gpus 128 --seq 8192 \
    --layout tp=4,pp=4,vp=$v,dp=8,mbs=1,gbs=512$k,precision=fp8 --json
done
run layout_dsv3 "$P" layout --model deepseek-v3 --cluster h800-deepseek --gpus 2048 --seq 4096 \
  --layout tp=1,pp=16,ep=64,dp=128,mbs=1,gbs=15360,recompute=full,precision=bf16 --json
run layout_405b "$P" layout --model llama-3-405b --cluster llama3-h100 --gpus 16384 --seq 8192 \
  --layout tp=8,cp=1,pp=16,vp=7,dp=128,mbs=1,gbs=2048,zero=3 --json
for f in megatron torchtitan hf; do
  run layout_fw_$f "$P" layout --model llama-3-8b --cluster dgx-h200 --gpus 8 --seq 4096 --framework $f \
    --layout tp=1,dp=8,mbs=1,gbs=64 --json
done
for f in torchtitan hf; do
  run calib_layout_runs_$f "$P" calibrate --layout-runs data/frameworks/runs/h200-matrix.csv --framework $f
done
for db in data/*.db; do
  b=$(basename "$db" .db)
  run profile_show_$b "$P" profile show --db "$db"
  run profile_show_json_$b "$P" profile show --db "$db" --json
  half=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1
  case $b in h200x1*) half=$(echo $half | tr 1 0);; esac
  run simulate_$b "$P" simulate --db "$db" --placement $half --micro-batches 4 --schedule 1f1b --json
done
run simulate_gpipe "$P" simulate --db data/h200x2.db --placement $half --micro-batches 1 --schedule gpipe
run simulate_interleaved "$P" simulate --db data/h200x2.db --placement 0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1 --micro-batches 4 --schedule interleaved --chunks 2
run search_readme "$P" search --db data/h200x2.db --method dp,single,human --micro-batches 4 --schedule 1f1b
run search_all "$P" search --db data/h200x4-spec.db --method dp,single,human,random,anneal --micro-batches 4 --schedule 1f1b
cp data/h200x2.db "$tmp/train.db"
run train_reinforce "$P" train --db "$tmp/train.db" --updates 20 --samples 8 --seed 3 --threads 1
run train_ppo "$P" train --db "$tmp/train.db" --updates 10 --samples 8 --seed 3 --algo ppo --groups learned --threads 1
run graph_default "$P" graph
run graph_gpt12 "$P" graph --config gpt12 --json
run step_cpu "$P" step --cpu 2 --placement 0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1 \
  --config tiny --micro-batches 2 --warmup 1 --steps 2 --json
run step_cpu_zb "$P" step --cpu 2 --config tiny --micro-batches 4 --schedule zb-h1 --warmup 1 --steps 2 --json
echo "$n commands into $out"
