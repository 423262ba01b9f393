#!/usr/bin/env bash
# plan-published.sh: `placer plan` on every published run's model, cluster,
# GPU count and global batch (Megatron SC21 Table 1, Llama 3 Table 4), with
# the published layout simulated beside the plan's best (--compare) under the
# same simulator settings as placer check-published uses for that row
# (SC21: fp16, unfused attention, fp16 gradients on the wire, 'local' DDP
# not overlapped for the rows that used it; Llama 3: bf16, flash attention,
# fp32 gradients overlapped). Prints one line per row and the wall time of
# each search; docs/plan.md has the table.
#   PLACER=build/cli/placer scripts/plan-published.sh [--json DIR]
#   FRAMEWORK=megatron ...  plan for that stack: only the layouts it runs
#                      (placer plan --framework; FOR= is its older name)
#   MARKDOWN=1 ...     one Markdown table row per run (docs/plan.md's table)
set -euo pipefail
cd "$(dirname "$0")/.."
PLACER=${PLACER:-build/cli/placer}
JSON_DIR=""
EXTRA=()
FRAMEWORK=${FRAMEWORK:-${FOR:-}}
if [[ -n "$FRAMEWORK" ]]; then EXTRA=(--framework "$FRAMEWORK"); fi
if [[ "${1:-}" == "--json" ]]; then JSON_DIR=$2; mkdir -p "$JSON_DIR"; fi

# model gpus gbs published-layout dp_overlap
T1=(
  "megatron-1.7b 32 512 tp=1,pp=1,dp=32,mbs=16 1"
  "megatron-3.6b 64 512 tp=2,pp=1,dp=32,mbs=16 1"
  "megatron-7.5b 128 512 tp=4,pp=1,dp=32,mbs=16 1"
  "megatron-18b 256 1024 tp=8,pp=1,dp=32,mbs=8 1"
  "megatron-39b 512 1536 tp=8,pp=2,dp=32,mbs=4 0"
  "megatron-76b 1024 1792 tp=8,pp=4,vp=3,dp=32,mbs=2 0"
  "megatron-145b 1536 2304 tp=8,pp=8,vp=2,dp=24,mbs=2 0"
  "megatron-310b 1920 2160 tp=8,pp=16,vp=2,dp=15,mbs=1 0"
  "megatron-530b 2520 2520 tp=8,pp=35,vp=3,dp=9,mbs=1 0"
  "megatron-1t 3072 3072 tp=8,pp=64,dp=6,mbs=1 0"
)
# model gpus gbs seq published-layout (mbs and vp ASSUMED as check-published does)
L3=(
  "llama-3-405b 8192 2048 8192 tp=8,sp=1,pp=16,vp=2,dp=64,mbs=1,zero=fsdp"
  "llama-3-405b 16384 2048 8192 tp=8,sp=1,pp=16,vp=2,dp=128,mbs=1,zero=fsdp"
  "llama-3-405b 16384 128 131072 tp=8,sp=1,cp=16,pp=16,vp=2,dp=8,mbs=1,zero=fsdp"
)

row() { # label, then placer plan arguments
  local label=$1; shift
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$PLACER" plan "$@" "${EXTRA[@]}" --json)
  t1=$(date +%s.%N)
  if [[ -n "$JSON_DIR" ]]; then echo "$out" >"$JSON_DIR/${label//\//_}.json"; fi
  PLAN_JSON=$out python3 - "$label" "$(echo "$t1 - $t0" | bc)" <<'PY'
import json, os, sys
label, wall = sys.argv[1], float(sys.argv[2])
d = json.loads(os.environ["PLAN_JSON"])
b, c = d["top"][0], d["compare"]
def lay(x):
    l = x["layout"]
    s = f'tp{l["tp"]} cp{l["cp"]} pp{l["pp"]}' + (f'x{l["vp"]}' if l["vp"] > 1 else '') + f' dp{l["dp"]} mbs{l["micro_batch"]} {l["recompute"]} z{l["zero"]}'
    if len(set(x["chunk_layers"])) > 1: s += ' [' + '/'.join(map(str, x["chunk_layers"][:4])) + ('/..' if len(x["chunk_layers"]) > 4 else '') + ']'
    return s
pb, pc = b["predicted"], c["predicted"]
if os.environ.get("MARKDOWN"):
    oom = " **OOM**" if pc["oom"] else ""
    print(f'| {label} | {lay(c)}: {pc["step_ms"]:.1f} ms, {pc["memory_bytes"]["total"]/1e9:.1f} GB{oom} | '
          f'{lay(b)}: {pb["step_ms"]:.1f} ms, {pb["memory_bytes"]["total"]/1e9:.1f} GB | '
          f'{100*(pc["step_ms"]/pb["step_ms"]-1):+.1f}% | {wall:.1f} s |')
    sys.exit(0)
print(f'{label:28s} published {lay(c):44s} {pc["step_ms"]:10.1f} ms {pc["memory_bytes"]["total"]/1e9:6.1f} GB{" OOM" if pc["oom"] else "    "} | '
      f'plan {lay(b):52s} {pb["step_ms"]:10.1f} ms {pb["memory_bytes"]["total"]/1e9:6.1f} GB | '
      f'{100*(pc["step_ms"]/pb["step_ms"]-1):+6.1f}% | search {d["search"]["wall_s"]:.1f} s ({wall:.1f} s wall), '
      f'{d["search"]["considered"]} layouts, {d["search"]["simulated"]} simulated')
PY
}

for r in "${T1[@]}"; do
  read -r model gpus gbs lay ovl <<<"$r"
  row "$model@$gpus" --model "$model" --cluster dgx-a100-80gb --gpus "$gpus" --global-batch "$gbs" --seq 2048 \
    --precision fp16 --attention unfused --grad-bytes 2 --dp-overlap "$ovl" \
    --compare "$lay,gbs=$gbs,recompute=full,precision=fp16"
done
for r in "${L3[@]}"; do
  read -r model gpus gbs seq lay <<<"$r"
  row "$model@$gpus/$seq" --model "$model" --cluster llama3-h100 --gpus "$gpus" --global-batch "$gbs" --seq "$seq" \
    --precision bf16 --attention flash --grad-bytes 4 --dp-overlap 1 \
    --compare "$lay,gbs=$gbs,recompute=none,precision=bf16"
done
