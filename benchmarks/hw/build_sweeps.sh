#!/bin/sh
# Builds the standalone GEMM sweeps (fp8_gemm_sweep, grouped_gemm_sweep) with
# nvcc alone, for sm_90, into build-sweeps/ at the repository root (ignored by
# git, carried to the GPU machine by name). They need only cudart, cuBLAS and
# cuBLASLt, which the GPU machine's CUDA 13 image has.
#   sh benchmarks/hw/build_sweeps.sh [OUTDIR]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build-sweeps}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
mkdir -p "$out"
for s in fp8_gemm_sweep grouped_gemm_sweep; do
    "$nvcc" -O2 -std=c++17 -arch=sm_90 -lineinfo -o "$out/$s" "$root/benchmarks/hw/$s.cu" -lcublasLt -lcublas
    echo "built $out/$s"
done
