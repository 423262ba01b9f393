/*
 * gemm_sweep.cu: a cuBLAS GEMM sweep over the shapes the layout
 * simulator's compute model (sim/layout/compute_model.c) prices, in bf16 and TF32,
 * to check its base efficiency, tile / wave quantisation and short-k
 * factor against a measurement.
 *
 * Shapes (C = A B, m x n, reduction k; the model's convention):
 *   model   every transformer-layer GEMM of the published-runs check set:
 *           Megatron SC21 Table 1's ten GPTs at their tp and micro-batch
 *           (QKV, attention output, MLP in and out) and Llama 3 405B at tp 8
 *           (8,192 tokens per micro-batch), each with its backward pair
 *           (data gradient m x k x n, weight gradient k x n x m)
 *   nsweep  m = k = 8192, n = 128 .. 4096 step 128 (tile and wave steps)
 *   ksweep  m = n = 8192, k = 64 .. 8192 (doubling: the short-k factor)
 *   square  4096 .. 16384
 * Timing: first WARM seconds (default 5) of back-to-back 8192^3 GEMMs of
 * each precision, so that the GPU runs at the clock and power a training
 * run sustains (a cold H200 ran the first shapes ~15% faster); then per
 * shape cudaEvent around one cublasGemmEx, 3 warm-up calls, and the
 * median of REPS (default 10) timed calls. Inputs are filled once with
 * pseudo-random values in [-1, 1) (not zeros: a GEMM over zeros toggles
 * fewer bits, draws less power and clocks higher than one over real data).
 *
 * Output, one line per shape and precision (stdout):
 *   prec set m n k ms tflops
 * and a first line "# device NAME sms N clock_mhz C". Exit 1 on any CUDA
 * or cuBLAS error (printed with file and line).
 *
 *   gemm_sweep [--reps N] [--warm S] [--set model|nsweep|ksweep|square|all] [--prec bf16|tf32|all]
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

struct shape {
    const char *set;
    long m, n, k;
};

static void add_with_backward(std::vector<shape> &v, long m, long n, long k) {
    v.push_back({"model", m, n, k});
    v.push_back({"model", m, k, n}); /* data gradient */
    v.push_back({"model", k, n, m}); /* weight gradient */
}

static void model_shapes(std::vector<shape> &v) {
    /* Megatron SC21 Table 1: hidden, tp, micro-batch (sequence 2048) */
    static const int t1[10][3] = {{2304, 1, 16}, {3072, 2, 16}, {4096, 4, 16}, {6144, 8, 8},  {8192, 8, 4},
                                  {10240, 8, 2}, {12288, 8, 2}, {16384, 8, 1}, {20480, 8, 1}, {25600, 8, 1}};
    for (auto &r : t1) {
        long h = r[0], t = r[1], T = 2048L * r[2];
        add_with_backward(v, T, 3 * h / t, h);
        add_with_backward(v, T, h, h / t);
        add_with_backward(v, T, 4 * h / t, h);
        add_with_backward(v, T, h, 4 * h / t);
    }
    /* Llama 3 405B at tp 8, 8192 tokens: QKV (128 + 16 heads of 128), out, SwiGLU in (x2), out */
    long h = 16384, f = 53248, t = 8, T = 8192;
    add_with_backward(v, T, (128 + 16) * 128 / t, h);
    add_with_backward(v, T, h, h / t);
    add_with_backward(v, T, 2 * f / t, h);
    add_with_backward(v, T, h, f / t);
}

/* x[i] = a hash of i mapped to [-1, 1), as bf16 (bf = 1) or float. */
__global__ void fill_random(void *x, size_t n, int bf) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = (unsigned)(i * 2654435761u) ^ (unsigned)(i >> 32);
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    float f = (float)(v & 0xffffff) / 8388608.0f - 1.0f;
    if (bf) ((__nv_bfloat16 *)x)[i] = __float2bfloat16(f);
    else ((float *)x)[i] = f;
}

static void fill(void *x, size_t n, int bf) {
    fill_random<<<(unsigned)((n + 255) / 256), 256>>>(x, n, bf);
    cudaCheck(cudaGetLastError());
}

static double median(std::vector<float> x) {
    std::sort(x.begin(), x.end());
    size_t n = x.size();
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(int argc, char **argv) {
    int reps = 10;
    double warm_s = 5.0;
    const char *set = "all", *prec = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warm") && i + 1 < argc) warm_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) set = argv[++i];
        else if (!strcmp(argv[i], "--prec") && i + 1 < argc) prec = argv[++i];
        else {
            fprintf(stderr, "usage: gemm_sweep [--reps N] [--warm S] [--set model|nsweep|ksweep|square|all] [--prec bf16|tf32|all]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 1000 || !(warm_s >= 0 && warm_s <= 600)) {
        fprintf(stderr, "gemm_sweep: --reps must be 1..1000 and --warm 0..600 seconds\n");
        return 2;
    }
    std::vector<shape> all;
    model_shapes(all);
    for (long n = 128; n <= 4096; n += 128) all.push_back({"nsweep", 8192, n, 8192});
    for (long k = 64; k <= 8192; k *= 2) all.push_back({"ksweep", 8192, 8192, k});
    for (long s = 4096; s <= 16384; s *= 2) all.push_back({"square", s, s, s});
    std::vector<shape> shapes;
    for (auto &s : all)
        if (!strcmp(set, "all") || !strcmp(set, s.set)) shapes.push_back(s);

    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    cudaCheck(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    printf("# device %s sms %d clock_mhz %d\n", prop.name, prop.multiProcessorCount, clock_khz / 1000);
    printf("# prec set m n k ms tflops\n");

    size_t max_a = 8192 * 8192, max_b = 8192 * 8192, max_c = 8192 * 8192; /* the warm-up's */
    for (auto &s : shapes) {
        max_a = std::max(max_a, (size_t)(s.m * s.k));
        max_b = std::max(max_b, (size_t)(s.k * s.n));
        max_c = std::max(max_c, (size_t)(s.m * s.n));
    }
    void *A, *B, *C;
    cudaCheck(cudaMalloc(&A, max_a * 4));
    cudaCheck(cudaMalloc(&B, max_b * 4));
    cudaCheck(cudaMalloc(&C, max_c * 4));
    void *ws;
    size_t ws_bytes = 32u << 20;
    cudaCheck(cudaMalloc(&ws, ws_bytes));
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    cublasCheck(cublasSetWorkspace(h, ws, ws_bytes));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));

    for (int p = 0; p < 2; p++) {
        const char *pname = p == 0 ? "bf16" : "tf32";
        if (strcmp(prec, "all") && strcmp(prec, pname)) continue;
        cudaDataType_t dt = p == 0 ? CUDA_R_16BF : CUDA_R_32F;
        cublasComputeType_t ct = p == 0 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
        fill(A, max_a, p == 0);
        fill(B, max_b, p == 0);
        cudaCheck(cudaDeviceSynchronize());
        {
            const float one = 1.0f, zero = 0.0f;
            float spent = 0;
            int calls = 0;
            cudaCheck(cudaEventRecord(e0));
            while (spent < warm_s * 1e3) {
                for (int i = 0; i < 20; i++)
                    cublasCheck(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8192, 8192, 8192, &one, A, dt, 8192, B, dt,
                                             8192, &zero, C, dt, 8192, ct, CUBLAS_GEMM_DEFAULT));
                calls += 20;
                cudaCheck(cudaEventRecord(e1));
                cudaCheck(cudaEventSynchronize(e1));
                cudaCheck(cudaEventElapsedTime(&spent, e0, e1));
            }
            printf("# %s warm-up: %d calls of 8192^3 in %.1f s, %.1f TFLOP/s\n", pname, calls, spent / 1e3,
                   2.0 * 8192.0 * 8192.0 * 8192.0 * calls / (spent * 1e-3) / 1e12);
        }
        for (auto &s : shapes) {
            const float one = 1.0f, zero = 0.0f;
            auto call = [&]() {
                cublasCheck(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)s.m, (int)s.n, (int)s.k, &one, A, dt,
                                         (int)s.m, B, dt, (int)s.k, &zero, C, dt, (int)s.m, ct, CUBLAS_GEMM_DEFAULT));
            };
            for (int w = 0; w < 3; w++) call();
            std::vector<float> ms(reps);
            for (int r = 0; r < reps; r++) {
                cudaCheck(cudaEventRecord(e0));
                call();
                cudaCheck(cudaEventRecord(e1));
                cudaCheck(cudaEventSynchronize(e1));
                cudaCheck(cudaEventElapsedTime(&ms[r], e0, e1));
            }
            double med = median(ms);
            double tf = 2.0 * s.m * s.n * s.k / (med * 1e-3) / 1e12;
            printf("%s %s %ld %ld %ld %.4f %.1f\n", pname, s.set, s.m, s.n, s.k, med, tf);
            fflush(stdout);
        }
    }
    cudaCheck(cudaGetLastError());
    cublasCheck(cublasDestroy(h));
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(C));
    cudaCheck(cudaFree(ws));
    return 0;
}
