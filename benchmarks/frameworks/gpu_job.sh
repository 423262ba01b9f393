#!/bin/bash
# The one GPU job of this round's measurements, run on the one-H200 device
# machine from the repository root, everything logged into $OUT:
#   1. the standalone sweeps (built here by benchmarks/hw/build_sweeps.sh into
#      build-sweeps/, carried): fp8_gemm_sweep, grouped_gemm_sweep, then
#      benchmarks/hw/grouped_mm_torch.py (torch._grouped_mm) -- about 90 s;
#   2. the framework matrix, benchmarks/frameworks/bench_frameworks.py, with
#      whatever is left of JOB_S seconds (default 560) as its budget.
# torchtitan 0.2.2, torchao 0.17.0 and their pure-Python needs travel as
# wheels in .whl/ (ignored by git, carried): see benchmarks/frameworks/README.md.
#
#   device run, carry [".whl", "build-sweeps"]:
#     bash benchmarks/frameworks/gpu_job.sh
#   env: JOB_S (total seconds), SWEEPS=0 (skip 1), MATRIX=0 (skip 2),
#        MATRIX_ARGS (extra arguments, e.g. "--only tt05,hf05")
set -u
START=$(date +%s)
JOB_S=${JOB_S:-560}
END=$((START + JOB_S))
OUT=${OUT:-/tmp/gpu_job_out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee -a "$OUT/job.log") 2>&1
echo "# gpu_job start $(date -u +%FT%TZ) host $(hostname) JOB_S=$JOB_S"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
    echo "# wheels installed into /tmp/site: $(ls .whl | tr '\n' ' ')"
else
    echo "# no .whl folder: torchtitan runs will fail"
fi
python3 - <<'PY'
import importlib
for m in ("torch", "transformers", "torchtitan", "torchao", "triton"):
    try:
        mod = importlib.import_module(m)
        print(f"# {m} {getattr(mod, '__version__', '?')}")
    except Exception as e:
        print(f"# {m} import failed: {type(e).__name__}: {e}")
import torch
print(f"# cuda {torch.version.cuda} device {torch.cuda.get_device_name(0)} "
      f"capability {torch.cuda.get_device_capability(0)}")
PY

if [ "${SWEEPS:-1}" != 0 ]; then
    for b in fp8_gemm_sweep grouped_gemm_sweep; do
        if [ ! -x build-sweeps/$b ]; then
            echo "# build-sweeps/$b missing: building here"
            sh benchmarks/hw/build_sweeps.sh || break
        fi
    done
    t=$(date +%s)
    timeout 75 build-sweeps/fp8_gemm_sweep --warm 3 > "$OUT/fp8_gemm_sweep.txt" 2>&1
    echo "# fp8_gemm_sweep rc=$? in $(( $(date +%s) - t )) s; $(grep -c '^gemm' "$OUT/fp8_gemm_sweep.txt") gemm rows"
    grep '^check\|^# warm\|status=' "$OUT/fp8_gemm_sweep.txt" | head -40
    t=$(date +%s)
    timeout 50 build-sweeps/grouped_gemm_sweep --warm 1 > "$OUT/grouped_gemm_sweep.txt" 2>&1
    echo "# grouped_gemm_sweep rc=$? in $(( $(date +%s) - t )) s; $(grep -c '^grouped' "$OUT/grouped_gemm_sweep.txt") rows"
    grep '^check\|^# warm\|^reference\|^#.*buffers' "$OUT/grouped_gemm_sweep.txt" | head -20
    t=$(date +%s)
    timeout 45 python3 benchmarks/hw/grouped_mm_torch.py --budget-s 35 > "$OUT/grouped_mm_torch.txt" 2>&1
    echo "# grouped_mm_torch rc=$? in $(( $(date +%s) - t )) s; $(grep -c '^torch_grouped_mm' "$OUT/grouped_mm_torch.txt") rows"
fi

if [ "${MATRIX:-1}" != 0 ]; then
    budget=$((END - $(date +%s) - 15))
    echo "# framework matrix: budget $budget s"
    if [ "$budget" -gt 30 ]; then
        # shellcheck disable=SC2086
        python3 benchmarks/frameworks/bench_frameworks.py --out "$OUT/frameworks.csv" \
            --log "$OUT/frameworks.log" --budget-s "$budget" ${MATRIX_ARGS:-}
        echo "# bench_frameworks rc=$?"
    fi
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,memory.used --format=csv
echo "# gpu_job end after $(( $(date +%s) - START )) s"
