#!/bin/bash
# A torchtitan export of `placer plan` run by torchtitan 0.2.2's trainer for a
# few steps on one GPU (benchmarks/frameworks/run_export.py says how), its
# median step time printed beside placer's prediction for the same layout.
#
#   benchmarks/frameworks/run_export.sh DIR     DIR: placer plan ... --gpus 1
#        --framework torchtitan --export torchtitan --out DIR
# env: STEPS (timed, default 20), WARMUP (default 5), DRY_RUN=1 (the CPU, toy
#      widths), PLACER with MODEL and CLUSTER (a placer binary and the plan's
#      --model / --cluster: also prints `placer layout --framework torchtitan`
#      for the exported layout).
# On the device: torchtitan 0.2.2 and its pure-Python needs travel as wheels in
# .whl/ (carried; installed into /tmp/site here), torch 2.11 is the machine's.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:?usage: run_export.sh EXPORT_DIR}
[ -f "$DIR/job.toml" ] && [ -f "$DIR/plan.json" ] || { echo "run_export: $DIR holds no torchtitan export (job.toml, plan.json)" >&2; exit 2; }
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ -n "${DRY_RUN:-}" ] || ! command -v nvidia-smi >/dev/null 2>&1; then DRY=--dry-run; else DRY=; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader; fi
if [ -n "${PLACER:-}" ] && [ -x "$PLACER" ] && [ -n "${MODEL:-}" ] && [ -n "${CLUSTER:-}" ]; then
  read -r TEXT SEQ < <("$PY" -c 'import json,sys; p=json.load(open(sys.argv[1])); print(p["layout"]["text"], p["model"]["seq_len"])' "$DIR/plan.json")
  echo "run_export: $PLACER layout --model $MODEL --cluster $CLUSTER --gpus 1 --seq $SEQ --framework torchtitan --layout $TEXT"
  "$PLACER" layout --model "$MODEL" --cluster "$CLUSTER" --gpus 1 --seq "$SEQ" --framework torchtitan --layout "$TEXT" | grep -m1 ' step '
fi
"$PY" benchmarks/frameworks/run_export.py "$DIR" --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" $DRY
