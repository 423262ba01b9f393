/*
 * wgrad_layouts.cu: the engine's weight-gradient GEMMs (dW += dout^T x, a
 * sum over the tokens) in TF32 and bf16 with each operand either as the
 * engine holds it (row-major [tokens][features]: MN-major for cuBLAS) or
 * transposed first ([features][tokens]: K-major), to decide which operand is
 * worth a transposed copy, and what that copy costs.
 *
 * For D = dW (column-major C x OC, i.e. row-major (OC, C)), k = the tokens:
 *   mn,mn  A = x as stored (op N, ld C), B = dout as stored (op T, ld OC)
 *   k,mn   A = x^T (op T, ld N),         B = dout as stored
 *   mn,k   A = x as stored,              B = dout^T (op N, ld N)
 *   k,k    both transposed
 * Shapes: the 49M GPT (C 384, 4,096 tokens): qkv (OC 1152), proj (384), fc
 * (1536), fc proj (C 1536, OC 384), the head (OC 50304). Also the transpose
 * (32 x 32 tiles through shared memory) of each operand.
 * Timing: 2 s of warm-up GEMMs, then per variant the median of REPS (20)
 * cudaEvent-timed calls after 3 untimed. Output: "prec shape variant us
 * tflops" lines, "transpose R K us" lines.
 *
 *   wgrad_layouts [--reps N]
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_check.h"

__global__ void fill_k(float *x, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = (unsigned)(i * 2654435761u);
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    x[i] = (float)(v & 0xffffff) / 8388608.0f - 1.0f;
}

__global__ void transpose_k(float *dst, const float *src, int R, int K) {
    __shared__ float t[32][33];
    const int k0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int r = r0 + j, k = k0 + threadIdx.x;
        if (r < R && k < K) t[j][threadIdx.x] = src[(size_t)r * K + k];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int k = k0 + j, r = r0 + threadIdx.x;
        if (r < R && k < K) dst[(size_t)k * R + r] = t[threadIdx.x][j];
    }
}

static double median(std::vector<float> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

template <class F> static double time_us(F f, int reps, cudaEvent_t e0, cudaEvent_t e1) {
    for (int w = 0; w < 3; w++) f();
    std::vector<float> ms(reps);
    for (int r = 0; r < reps; r++) {
        cudaCheck(cudaEventRecord(e0));
        f();
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    return median(ms) * 1e3;
}

int main(int argc, char **argv) {
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: wgrad_layouts [--reps N]\n");
            return 2;
        }
    }
    const int N = 4096;
    struct sh { const char *name; int C, OC; } shapes[] = {
        {"qkv", 384, 1152}, {"proj", 384, 384}, {"fc", 384, 1536}, {"fcproj", 1536, 384}, {"head", 384, 50304}};
    size_t maxe = (size_t)N * 50304;
    float *x, *d, *xt, *dt, *w;
    cudaCheck(cudaMalloc(&x, maxe * 4));
    cudaCheck(cudaMalloc(&d, maxe * 4));
    cudaCheck(cudaMalloc(&xt, maxe * 4));
    cudaCheck(cudaMalloc(&dt, maxe * 4));
    cudaCheck(cudaMalloc(&w, (size_t)50304 * 1536 * 4));
    fill_k<<<(unsigned)((maxe + 255) / 256), 256>>>(x, maxe);
    fill_k<<<(unsigned)((maxe + 255) / 256), 256>>>(d, maxe);
    cudaCheck(cudaGetLastError());
    void *ws;
    const size_t wsb = 32u << 20;
    cudaCheck(cudaMalloc(&ws, wsb));
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    cublasCheck(cublasSetWorkspace(h, ws, wsb));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("# device %s\n", prop.name);
    const float one = 1.0f;
    { /* warm-up: 2 s of the largest shape */
        float spent = 0;
        cudaCheck(cudaEventRecord(e0));
        while (spent < 2000) {
            for (int i = 0; i < 10; i++)
                cublasCheck(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 384, 50304, N, &one, x, CUDA_R_32F, 384, d,
                                         CUDA_R_32F, 50304, &one, w, CUDA_R_32F, 384, CUBLAS_COMPUTE_32F_FAST_TF32,
                                         CUBLAS_GEMM_DEFAULT));
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&spent, e0, e1));
        }
    }
    for (int p = 0; p < 2; p++) {
        const int bf = p == 1;
        const cudaDataType_t ty = bf ? CUDA_R_16BF : CUDA_R_32F;
        const cublasComputeType_t ct = bf ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
        for (auto &s : shapes) {
            const int C = s.C, OC = s.OC;
            const double flop = 2.0 * C * OC * N;
            for (int v = 0; v < 4; v++) {
                const int at = v & 1, bt = v >> 1; /* 1: transposed (K-major) */
                auto f = [&]() {
                    cublasCheck(cublasGemmEx(h, at ? CUBLAS_OP_T : CUBLAS_OP_N, bt ? CUBLAS_OP_N : CUBLAS_OP_T, C, OC,
                                             N, &one, at ? xt : x, ty, at ? N : C, bt ? dt : d, ty, bt ? N : OC, &one,
                                             w, CUDA_R_32F, C, ct, CUBLAS_GEMM_DEFAULT));
                };
                double us = time_us(f, reps, e0, e1);
                printf("%s %s %dx%dx%d %s,%s %.1f us %.1f TFLOP/s\n", bf ? "bf16" : "tf32", s.name, C, OC, N,
                       at ? "k" : "mn", bt ? "k" : "mn", us, flop / (us * 1e-6) / 1e12);
                fflush(stdout);
            }
        }
    }
    int trs[][2] = {{N, 384}, {N, 1152}, {N, 1536}};
    for (auto &t : trs) {
        auto f = [&]() {
            transpose_k<<<dim3((unsigned)((t[1] + 31) / 32), (unsigned)((t[0] + 31) / 32)), dim3(32, 8)>>>(dt, d, t[0],
                                                                                                          t[1]);
        };
        printf("transpose %d %d %.1f us\n", t[0], t[1], time_us(f, reps, e0, e1));
    }
    cudaCheck(cudaGetLastError());
    return 0;
}
