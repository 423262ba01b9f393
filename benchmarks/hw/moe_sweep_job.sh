#!/bin/bash
# The MoE measurements of issue 33 as one GPU job (one call of the device
# tool), from a copy of benchmarks/ (this script's ../..), everything into $OUT:
#   SWEEPS=1  grouped_gemm_sweep (cuBLAS, built by build_sweeps.sh into $SWEEP_BIN),
#             grouped_mm_torch.py (torch._grouped_mm / _scaled_grouped_mm),
#             moe_parts_torch.py (router, permutation, tails, shared expert)
#   RUNS=ids  bench_frameworks.py --matrix moe --only ids (torchtitan 0.2.2 steps,
#             the router histograms into frameworks_moe_hist.json)
# Each part under its own time budget (seconds): GG_S, TG_S, PARTS_S, and the
# framework runs get what is left of JOB_S. torchtitan and its pure-Python needs
# travel as wheels in $WHL (benchmarks/frameworks/README.md).
#
#   JOB_S=330 SWEEP_BIN=../build-sweeps WHL=../.whl RUNS=tm00,tm01 bash benchmarks/hw/moe_sweep_job.sh
set -u
START=$(date +%s)
JOB_S=${JOB_S:-330}
END=$((START + JOB_S))
OUT=${OUT:-/tmp/moe_job_out}
SWEEP_BIN=${SWEEP_BIN:-build-sweeps}
WHL=${WHL:-.whl}
SWEEP_BIN=$(cd "$SWEEP_BIN" 2>/dev/null && pwd || echo "$SWEEP_BIN")
WHL=$(cd "$WHL" 2>/dev/null && pwd || echo "$WHL")
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee -a "$OUT/job.log") 2>&1
echo "# moe_sweep_job start $(date -u +%FT%TZ) JOB_S=$JOB_S SWEEPS=${SWEEPS:-1} RUNS=${RUNS:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1
if ls "$WHL"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$WHL"/*.whl && export PYTHONPATH=/tmp/site
    echo "# wheels installed from $WHL"
else
    echo "# no wheels in $WHL: torchtitan runs and the whole-layer timings will fail"
fi
python3 -c "import torch; print('# torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"

left() { echo $((END - $(date +%s))); }
if [ "${SWEEPS:-1}" != 0 ]; then
    t=$(date +%s)
    timeout $(( ${GG_S:-100} + 40 )) "$SWEEP_BIN/grouped_gemm_sweep" --warm 1 --budget-s "${GG_S:-100}" \
        > "$OUT/grouped_gemm_sweep.txt" 2>&1
    echo "# grouped_gemm_sweep rc=$? in $(( $(date +%s) - t )) s; $(grep -c '^grouped' "$OUT/grouped_gemm_sweep.txt") rows"
    grep '^check\|^# warm\|^reference\|^# grid\|^# budget\|^# done' "$OUT/grouped_gemm_sweep.txt" | head -20
    t=$(date +%s)
    timeout $(( ${TG_S:-80} + 40 )) python3 benchmarks/hw/grouped_mm_torch.py --budget-s "${TG_S:-80}" \
        > "$OUT/grouped_mm_torch.txt" 2>&1
    echo "# grouped_mm_torch rc=$? in $(( $(date +%s) - t )) s; $(grep -c '^tgmm ' "$OUT/grouped_mm_torch.txt") rows"
    grep '^check\|^# \|Error' "$OUT/grouped_mm_torch.txt" | head -20
    t=$(date +%s)
    timeout $(( ${PARTS_S:-45} + 40 )) python3 benchmarks/hw/moe_parts_torch.py --budget-s "${PARTS_S:-45}" \
        > "$OUT/moe_parts.txt" 2>&1
    echo "# moe_parts_torch rc=$? in $(( $(date +%s) - t )) s; $(grep -c '^part ' "$OUT/moe_parts.txt") rows," \
         "$(grep -c 'FAIL' "$OUT/moe_parts.txt") failed checks"
    grep 'FAIL\|^layer\|^# ' "$OUT/moe_parts.txt" | head -20
fi
if [ -n "${RUNS:-}" ]; then
    budget=$(( $(left) - 10 ))
    echo "# framework runs ${RUNS}: budget $budget s"
    if [ "$budget" -gt 30 ]; then
        python3 benchmarks/frameworks/bench_frameworks.py --matrix moe --only "$RUNS" \
            --out "$OUT/frameworks_moe.csv" --log "$OUT/frameworks_moe.log" \
            --hist-out "$OUT/frameworks_moe_hist.json" --budget-s "$budget"
        echo "# bench_frameworks rc=$?"
        python3 benchmarks/frameworks/bench_frameworks.py --summary "$OUT/frameworks_moe.csv" | cut -c1-200
    fi
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,memory.used --format=csv
echo "# moe_sweep_job end after $(( $(date +%s) - START )) s"
