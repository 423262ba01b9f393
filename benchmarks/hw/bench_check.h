/*
 * bench_check.h: the standalone GPU benchmarks' error checks (gemm_sweep.cu,
 * wgrad_layouts.cu): a failed CUDA or cuBLAS call prints "file:line: call:
 * error" on stderr and exits 1. Benchmarks only: the engine returns status
 * codes (hw/kernels/cuda_nodes.h).
 */
#ifndef PLACER_BENCH_CHECK_H
#define PLACER_BENCH_CHECK_H

#include <cstdio>
#include <cstdlib>

#define cudaCheck(x)                                                                                   \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)
#define cublasCheck(x)                                                                                 \
    do {                                                                                               \
        cublasStatus_t s_ = (x);                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
            fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_);         \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

#endif
