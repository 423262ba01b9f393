/*
 * sweep_common.h: what the standalone sweeps fp8_gemm_sweep.cu and
 * grouped_gemm_sweep.cu share: pseudo-random fills (never zeros: a GEMM
 * over zeros draws less power and clocks higher), the median, and a timer
 * that repeats a call until enough time has been measured.
 */
#ifndef PLACER_SWEEP_COMMON_H
#define PLACER_SWEEP_COMMON_H

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench_check.h"

/* x[i] = a hash of (i, seed) mapped to [-1, 1) */
__device__ __host__ inline float sweep_hash01(size_t i, unsigned seed) {
    unsigned v = (unsigned)(i * 2654435761u) ^ (unsigned)(i >> 32) ^ (seed * 0x9e3779b9u);
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return (float)(v & 0xffffff) / 8388608.0f - 1.0f;
}

/* kind 0: bf16, 1: fp8 e4m3, 2: fp32; values scale * [-1, 1) */
__global__ void sweep_fill_kernel(void *x, size_t n, int kind, float scale, unsigned seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float f = scale * sweep_hash01(i, seed);
        if (kind == 0) ((__nv_bfloat16 *)x)[i] = __float2bfloat16(f);
        else if (kind == 1) ((__nv_fp8_e4m3 *)x)[i] = __nv_fp8_e4m3(f);
        else ((float *)x)[i] = f;
    }
}

static inline void sweep_fill(void *x, size_t n, int kind, float scale, unsigned seed) {
    sweep_fill_kernel<<<4096, 256>>>(x, n, kind, scale, seed);
    cudaCheck(cudaGetLastError());
}

__global__ void sweep_const_kernel(float *x, size_t n, float v) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) x[i] = v;
}

static inline void sweep_const(float *x, size_t n, float v) {
    sweep_const_kernel<<<1024, 256>>>(x, n, v);
    cudaCheck(cudaGetLastError());
}

static inline double sweep_median(std::vector<float> x) {
    std::sort(x.begin(), x.end());
    size_t n = x.size();
    if (!n) return NAN;
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Times call() with events: `warm` untimed calls (the first one timed
 * alone to size the repetitions), then reps so that about target_ms is
 * measured, at least min_reps and at most max_reps; returns the median in
 * ms. call() returns nonzero on failure, which ends the timing (-1). */
template <class F>
static double sweep_time(F call, int warm, int min_reps, int max_reps, double target_ms, cudaEvent_t e0,
                         cudaEvent_t e1) {
    float first = 0;
    for (int w = 0; w < std::max(warm, 1); w++) {
        cudaCheck(cudaEventRecord(e0));
        if (call()) return -1;
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&first, e0, e1));
    }
    int reps = (int)std::ceil(target_ms / std::max(first, 1e-3f));
    reps = std::min(std::max(reps, min_reps), max_reps);
    std::vector<float> ms(reps);
    for (int r = 0; r < reps; r++) {
        cudaCheck(cudaEventRecord(e0));
        if (call()) return -1;
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    return sweep_median(ms);
}

#endif
