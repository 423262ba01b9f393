/*
 * grouped_gemm_sweep.cu: MoE expert compute as batches of per-expert GEMMs
 * with few tokens per expert, on one GPU, for the layout simulator's
 * expert-efficiency curve.
 *
 * Expert shapes (hidden h, expert FFN f, SwiGLU: the gate and up
 * projections fused into one 2f-wide GEMM):
 *   mixtral-8x7b   h 4096, f 14336 (8 experts, top-2)    E local = 8
 *   qwen3-30b-a3b  h 2048, f 768   (128 experts, top-8)  E local = 16, 128
 *   deepseek-v3    h 7168, f 2048  (256 experts, top-8)  E local = 8, 32
 * (E local is the experts one GPU holds: all of them, or 1/8 .. 1/32 under
 * expert parallelism.) Tokens per expert m = 16 .. 4096 (doubling).
 * Per expert the six training GEMMs (M x N x K, both operands K-major):
 *   fc1_fwd (m, 2f, h)   fc2_fwd (m, h, f)
 *   fc1_dgrad (m, h, 2f) fc2_dgrad (m, f, h)
 *   fc1_wgrad (h, 2f, m) fc2_wgrad (f, h, m)      (the reduction is over m)
 * Methods, each timed as the whole batch of E GEMMs between two events:
 *   loop     E x cublasGemmEx on one stream (bf16 in / out, fp32 accumulate)
 *   grouped  cublasGemmGroupedBatchedEx (cuBLAS 12.5+; one group of E)
 *   strided  cublasGemmStridedBatchedEx (equal shapes only)
 *   dense    one cublasGemmEx of the same FLOPs with the token dimension
 *            E times longer (the ideal: one big GEMM)
 *   fp8_loop E x cublasLtMatmul e4m3 tensorwise (fast accumulation in the
 *            forward, split accumulation in the gradients)
 * Distributions: "uniform" (every expert m tokens) and "random" (E m tokens
 * routed in chunks of 16 to experts drawn uniformly at random, fixed seed:
 * the imbalance of a random router; loop and grouped only; idle experts
 * are skipped). Reported TFLOP/s count the FLOPs actually done.
 *
 * Output (stdout), whitespace-separated, '#' lines are comments:
 *   grouped MODEL E M DIST KIND METHOD MS TFLOPS STATUS
 *   check WHAT REL_ERR PASS|FAIL
 *
 *   grouped_gemm_sweep [--reps N] [--warm S] [--models mixtral,qwen3,dsv3] [--max-m M]
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench_check.h"
#include "lt_gemm.h"
#include "sweep_common.h"

struct moe_model {
    const char *name, *key;
    long h, f;
    int experts, topk;
    int local[2];
};
static const moe_model MODELS[] = {
    {"mixtral-8x7b", "mixtral", 4096, 14336, 8, 2, {8, 0}},
    {"qwen3-30b-a3b", "qwen3", 2048, 768, 128, 8, {16, 128}},
    {"deepseek-v3", "dsv3", 7168, 2048, 256, 8, {8, 32}},
};

enum { FC1_FWD, FC2_FWD, FC1_DGRAD, FC2_DGRAD, FC1_WGRAD, FC2_WGRAD, NKINDS };
static const char *KIND_NAMES[NKINDS] = {"fc1_fwd", "fc2_fwd", "fc1_dgrad", "fc2_dgrad", "fc1_wgrad", "fc2_wgrad"};

/* M, N, K of kind for one expert with t tokens */
static void kind_dims(int kind, long h, long f, long t, long *M, long *N, long *K) {
    switch (kind) {
    case FC1_FWD: *M = t, *N = 2 * f, *K = h; break;
    case FC2_FWD: *M = t, *N = h, *K = f; break;
    case FC1_DGRAD: *M = t, *N = h, *K = 2 * f; break;
    case FC2_DGRAD: *M = t, *N = f, *K = h; break;
    case FC1_WGRAD: *M = h, *N = 2 * f, *K = t; break;
    default: *M = f, *N = h, *K = t; break;
    }
}

static int g_fail = 0;

static cublasStatus_t gemm_one(cublasHandle_t h, long M, long N, long K, const void *A, const void *B, void *C) {
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &one, A, CUDA_R_16BF, (int)K, B,
                        CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* one batch: per-expert dims and the device pointer arrays for the grouped call */
struct batch {
    std::vector<long> M, N, K;
    std::vector<const void *> A, B;
    std::vector<void *> C;
    const void **dA = nullptr, **dB = nullptr;
    void **dC = nullptr;
    double flops = 0;
    void upload() {
        size_t n = M.size();
        if (!dA) {
            cudaCheck(cudaMalloc(&dA, 256 * sizeof(void *)));
            cudaCheck(cudaMalloc(&dB, 256 * sizeof(void *)));
            cudaCheck(cudaMalloc(&dC, 256 * sizeof(void *)));
        }
        cudaCheck(cudaMemcpy(dA, A.data(), n * sizeof(void *), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dB, B.data(), n * sizeof(void *), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dC, C.data(), n * sizeof(void *), cudaMemcpyHostToDevice));
    }
};

static cublasStatus_t run_loop(cublasHandle_t h, const batch &b) {
    for (size_t e = 0; e < b.M.size(); e++) {
        cublasStatus_t s = gemm_one(h, b.M[e], b.N[e], b.K[e], b.A[e], b.B[e], b.C[e]);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t run_grouped(cublasHandle_t h, const batch &b, bool uniform) {
    int n = (int)b.M.size();
    int groups = uniform ? 1 : n;
    std::vector<cublasOperation_t> ta(groups, CUBLAS_OP_T), tb(groups, CUBLAS_OP_N);
    std::vector<int> m(groups), nn(groups), k(groups), lda(groups), ldb(groups), ldc(groups), gs(groups);
    std::vector<float> alpha(groups, 1.0f), beta(groups, 0.0f);
    for (int g = 0; g < groups; g++) {
        m[g] = (int)b.M[g], nn[g] = (int)b.N[g], k[g] = (int)b.K[g];
        lda[g] = k[g], ldb[g] = k[g], ldc[g] = m[g];
        gs[g] = uniform ? n : 1;
    }
    return cublasGemmGroupedBatchedEx(h, ta.data(), tb.data(), m.data(), nn.data(), k.data(), alpha.data(), b.dA,
                                      CUDA_R_16BF, lda.data(), b.dB, CUDA_R_16BF, ldb.data(), beta.data(), b.dC,
                                      CUDA_R_16BF, ldc.data(), groups, gs.data(), CUBLAS_COMPUTE_32F);
}

static cublasStatus_t run_strided(cublasHandle_t h, const batch &b, long sA, long sB, long sC) {
    const float one = 1.0f, zero = 0.0f;
    long M = b.M[0], N = b.N[0], K = b.K[0];
    return cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K, &one, b.A[0], CUDA_R_16BF,
                                      (int)K, sA, b.B[0], CUDA_R_16BF, (int)K, sB, &zero, b.C[0], CUDA_R_16BF, (int)M,
                                      sC, (int)b.M.size(), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static void check(cublasHandle_t h) {
    /* 4 experts, small dims: loop, grouped and strided against a host fp32 reference */
    const int E = 4;
    const long M = 64, N = 192, K = 256;
    __nv_bfloat16 *A, *B, *C;
    cudaCheck(cudaMalloc(&A, E * M * K * 2));
    cudaCheck(cudaMalloc(&B, E * N * K * 2));
    cudaCheck(cudaMalloc(&C, E * M * N * 2));
    sweep_fill(A, E * M * K, 0, 1.0f, 41);
    sweep_fill(B, E * N * K, 0, 1.0f, 42);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> hA(E * M * K), hB(E * N * K), hC(E * M * N);
    cudaCheck(cudaMemcpy(hA.data(), A, hA.size() * 2, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hB.data(), B, hB.size() * 2, cudaMemcpyDeviceToHost));
    batch b;
    for (int e = 0; e < E; e++) {
        b.M.push_back(M), b.N.push_back(N), b.K.push_back(K);
        b.A.push_back(A + e * M * K), b.B.push_back(B + e * N * K), b.C.push_back(C + e * M * N);
    }
    b.upload();
    for (int method = 0; method < 4; method++) {
        cudaCheck(cudaMemset(C, 0xff, E * M * N * 2));
        cublasStatus_t s = method == 0   ? run_loop(h, b)
                           : method == 1 ? run_grouped(h, b, true)
                           : method == 2 ? run_grouped(h, b, false)
                                         : run_strided(h, b, M * K, N * K, M * N);
        cudaCheck(cudaDeviceSynchronize());
        const char *name = method == 0 ? "loop" : method == 1 ? "grouped_uniform" : method == 2 ? "grouped_var" : "strided";
        if (s != CUBLAS_STATUS_SUCCESS) {
            printf("check %s status=%d UNSUPPORTED\n", name, (int)s);
            if (method == 0) g_fail = 1;
            continue;
        }
        cudaCheck(cudaMemcpy(hC.data(), C, hC.size() * 2, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int e = 0; e < E; e++)
            for (long i = 0; i < M; i++)
                for (long j = 0; j < N; j++) {
                    double acc = 0;
                    for (long q = 0; q < K; q++)
                        acc += (double)__bfloat162float(hA[e * M * K + i * K + q]) *
                               (double)__bfloat162float(hB[e * N * K + j * K + q]);
                    double g = __bfloat162float(hC[e * M * N + j * M + i]);
                    if (std::isnan(g)) g = 1e30;
                    num += (g - acc) * (g - acc);
                    den += acc * acc;
                }
        double err = std::sqrt(num / den);
        int ok = err < 1e-2;
        if (!ok) g_fail = 1;
        printf("check %s %.3e %s\n", name, err, ok ? "PASS" : "FAIL");
    }
    cudaFree(A), cudaFree(B), cudaFree(C);
    cudaFree(b.dA), cudaFree(b.dB), cudaFree(b.dC);
}

int main(int argc, char **argv) {
    int reps = 10;
    double warm_s = 2.0;
    long max_m = 4096;
    const char *models_s = "mixtral,qwen3,dsv3";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warm") && i + 1 < argc) warm_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-m") && i + 1 < argc) max_m = atol(argv[++i]);
        else if (!strcmp(argv[i], "--models") && i + 1 < argc) models_s = argv[++i];
        else {
            fprintf(stderr, "usage: grouped_gemm_sweep [--reps N] [--warm S] [--models mixtral,qwen3,dsv3] [--max-m M]\n");
            return 2;
        }
    }
    if (reps < 3 || reps > 1000 || !(warm_s >= 0 && warm_s <= 600) || max_m < 16 || max_m > 16384) {
        fprintf(stderr, "grouped_gemm_sweep: --reps 3..1000, --warm 0..600 s, --max-m 16..16384\n");
        return 2;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int ver = 0;
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    cublasCheck(cublasGetVersion(h, &ver));
    printf("# device %s sms %d cc %d.%d cublas %d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor, ver);
    size_t ws_bytes = 64u << 20;
    void *ws;
    cudaCheck(cudaMalloc(&ws, ws_bytes));
    cublasCheck(cublasSetWorkspace(h, ws, ws_bytes));
    cublasLtHandle_t lt;
    cublasCheck(cublasLtCreate(&lt));
    void *lt_ws;
    cudaCheck(cudaMalloc(&lt_ws, ws_bytes));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));

    check(h);

    /* buffers: the largest per-kind A, B, C over the models, E and m chosen */
    std::vector<const moe_model *> models;
    for (auto &m : MODELS)
        if (strstr(models_s, m.key)) models.push_back(&m);
    size_t max_a = 8192L * 8192, max_b = 8192L * 8192, max_c = 8192L * 8192;
    for (auto *md : models)
        for (int li = 0; li < 2; li++) {
            long E = md->local[li];
            if (!E) continue;
            /* random routing can give one expert up to E m tokens */
            for (int kind = 0; kind < NKINDS; kind++) {
                long M, N, K;
                kind_dims(kind, md->h, md->f, max_m, &M, &N, &K);
                long slots = E * 3 / 2 + 4; /* slack: random routing gives some experts more */
                max_a = std::max(max_a, (size_t)(M * K * slots));
                max_b = std::max(max_b, (size_t)(N * K * slots));
                max_c = std::max(max_c, (size_t)(M * N * slots));
            }
        }
    void *A, *B, *C, *A8, *B8;
    float *sc;
    cudaCheck(cudaMalloc(&A, max_a * 2));
    cudaCheck(cudaMalloc(&B, max_b * 2));
    cudaCheck(cudaMalloc(&C, max_c * 2));
    cudaCheck(cudaMalloc(&A8, max_a));
    cudaCheck(cudaMalloc(&B8, max_b));
    cudaCheck(cudaMalloc(&sc, 64));
    sweep_fill(A, max_a, 0, 1.0f, 1);
    sweep_fill(B, max_b, 0, 1.0f, 2);
    sweep_fill(A8, max_a, 1, 1.0f, 3);
    sweep_fill(B8, max_b, 1, 1.0f, 4);
    sweep_const(sc, 16, 1.0f);
    cudaCheck(cudaDeviceSynchronize());
    printf("# buffers A %.2f GB, B %.2f GB, C %.2f GB (bf16)\n", max_a * 2e-9, max_b * 2e-9, max_c * 2e-9);

    {   /* warm-up to sustained clocks; the dense 8192^3 TN reference */
        float spent = 0;
        int calls = 0;
        cudaCheck(cudaEventRecord(e0));
        while (spent < std::max(warm_s, 0.2) * 1e3) {
            for (int i = 0; i < 10; i++) cublasCheck(gemm_one(h, 8192, 8192, 8192, A, B, C));
            calls += 10;
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&spent, e0, e1));
        }
        printf("# warm-up bf16 8192^3 TN: %d calls in %.2f s, %.1f TFLOP/s\n", calls, spent / 1e3,
               2.0 * 8192.0 * 8192.0 * 8192.0 * calls / (spent * 1e-3) / 1e12);
        double ms = sweep_time([&]() { return (int)gemm_one(h, 8192, 8192, 8192, A, B, C); }, 2, 5, 10, 50, e0, e1);
        printf("reference dense_8192_cube bf16 %.4f %.1f\n", ms, 2.0 * 8192.0 * 8192.0 * 8192.0 / (ms * 1e-3) / 1e12);
    }

    printf("# grouped MODEL E M DIST KIND METHOD MS TFLOPS STATUS\n");
    unsigned rng = 12345u;
    for (auto *md : models)
        for (int li = 0; li < 2; li++) {
            int E = md->local[li];
            if (!E) continue;
            for (long m = 16; m <= max_m; m *= 2) {
                /* the random distribution: E*m tokens in chunks of 16 */
                std::vector<long> cnt(E, 0);
                for (long c = 0; c < E * m / 16; c++) {
                    rng = rng * 1664525u + 1013904223u;
                    cnt[(rng >> 8) % E] += 16;
                }
                for (int kind = 0; kind < NKINDS; kind++) {
                    long M0, N0, K0;
                    kind_dims(kind, md->h, md->f, m, &M0, &N0, &K0);
                    for (int dist = 0; dist < 2; dist++) {
                        batch b;
                        /* slots: expert e's operands at e * (size at the largest count) */
                        long cmax = dist == 0 ? m : *std::max_element(cnt.begin(), cnt.end());
                        long Mx, Nx, Kx;
                        kind_dims(kind, md->h, md->f, cmax, &Mx, &Nx, &Kx);
                        if ((size_t)(Mx * Kx) * E > max_a || (size_t)(Nx * Kx) * E > max_b ||
                            (size_t)(Mx * Nx) * E > max_c) {
                            printf("grouped %s %d %ld %s %s all nan nan skipped_buffer\n", md->name, E, m,
                                   dist ? "random" : "uniform", KIND_NAMES[kind]);
                            continue;
                        }
                        for (int e = 0; e < E; e++) {
                            long t = dist == 0 ? m : cnt[e];
                            if (!t) continue;
                            long M, N, K;
                            kind_dims(kind, md->h, md->f, t, &M, &N, &K);
                            b.M.push_back(M), b.N.push_back(N), b.K.push_back(K);
                            b.A.push_back((char *)A + 2 * (size_t)e * Mx * Kx);
                            b.B.push_back((char *)B + 2 * (size_t)e * Nx * Kx);
                            b.C.push_back((char *)C + 2 * (size_t)e * Mx * Nx);
                            b.flops += 2.0 * M * N * K;
                        }
                        b.upload();
                        const char *dname = dist ? "random" : "uniform";
                        auto report = [&](const char *method, double ms, int st) {
                            if (ms > 0 && st == 0)
                                printf("grouped %s %d %ld %s %s %s %.4f %.2f ok\n", md->name, E, m, dname,
                                       KIND_NAMES[kind], method, ms, b.flops / (ms * 1e-3) / 1e12);
                            else
                                printf("grouped %s %d %ld %s %s %s nan nan status=%d\n", md->name, E, m, dname,
                                       KIND_NAMES[kind], method, st);
                        };
                        cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
                        double ms;
                        ms = sweep_time(
                            [&]() {
                                st = run_loop(h, b);
                                return st != CUBLAS_STATUS_SUCCESS;
                            },
                            2, 3, reps, 5, e0, e1);
                        report("loop", ms, st);
                        st = CUBLAS_STATUS_SUCCESS;
                        ms = sweep_time(
                            [&]() {
                                st = run_grouped(h, b, dist == 0);
                                return st != CUBLAS_STATUS_SUCCESS;
                            },
                            2, 3, reps, 5, e0, e1);
                        report("grouped", ms, st);
                        if (dist == 0) {
                            st = CUBLAS_STATUS_SUCCESS;
                            ms = sweep_time(
                                [&]() {
                                    st = run_strided(h, b, Mx * Kx, Nx * Kx, Mx * Nx);
                                    return st != CUBLAS_STATUS_SUCCESS;
                                },
                                2, 3, reps, 5, e0, e1);
                            report("strided", ms, st);
                            /* dense: the token dimension E times longer */
                            long dM = M0, dN = N0, dK = K0;
                            if (kind <= FC2_DGRAD) dM = M0 * E;
                            else dK = K0 * E;
                            st = CUBLAS_STATUS_SUCCESS;
                            ms = sweep_time(
                                [&]() {
                                    st = gemm_one(h, dM, dN, dK, A, B, C);
                                    return st != CUBLAS_STATUS_SUCCESS;
                                },
                                2, 3, reps, 5, e0, e1);
                            report("dense", ms, st);
                            /* fp8 loop over cuBLASLt, one setup for the common shape */
                            lt_gemm g;
                            int lkind = kind <= FC2_FWD ? LT_FP8_TW_FAST : LT_FP8_TW;
                            st = lt_gemm_setup(lt, &g, lkind, M0, N0, K0, sc, sc, 0, ws_bytes);
                            if (st == CUBLAS_STATUS_SUCCESS) {
                                ms = sweep_time(
                                    [&]() {
                                        for (int e = 0; e < E; e++) {
                                            st = lt_gemm_run(lt, &g, (char *)A8 + (size_t)e * Mx * Kx,
                                                             (char *)B8 + (size_t)e * Nx * Kx,
                                                             (char *)C + 2 * (size_t)e * Mx * Nx, lt_ws, ws_bytes, 0);
                                            if (st != CUBLAS_STATUS_SUCCESS) return 1;
                                        }
                                        return 0;
                                    },
                                    2, 3, reps, 5, e0, e1);
                                lt_gemm_destroy(&g);
                            } else {
                                ms = -1;
                            }
                            report("fp8_loop", ms, st);
                        }
                        cudaError_t ce = cudaGetLastError();
                        if (ce != cudaSuccess) {
                            fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(ce));
                            return 1;
                        }
                        cudaFree(b.dA), cudaFree(b.dB), cudaFree(b.dC);
                        fflush(stdout);
                    }
                }
            }
        }
    cudaCheck(cudaGetLastError());
    cublasDestroy(h);
    cublasLtDestroy(lt);
    printf("# done%s\n", g_fail ? " (a check FAILED)" : "");
    return g_fail ? 3 : 0;
}
