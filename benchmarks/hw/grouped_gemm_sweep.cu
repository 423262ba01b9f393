/*
 * grouped_gemm_sweep.cu: MoE expert GEMMs as the frameworks run them, over
 * the shipped MoE models' expert shapes, local expert counts 1 .. 256 and
 * tokens per expert 8 .. 16,384, on one GPU: the data behind the layout
 * simulator's MoE layer (issue 33; fitted by fit_sweeps.py moe).
 *
 * Expert shapes (hidden h x expert FFN f, data/models/*.json; SwiGLU, the
 * gate and up projections fused into one 2f-wide GEMM here):
 *   qwen3-30b-a3b    2048 x   768  (128 experts, top-8)
 *   qwen3-235b-a22b  4096 x  1536  (128, top-8)
 *   deepseek-v3      7168 x  2048  (256, top-8, 1 shared; Kimi K2: 384, same shape)
 *   gpt-oss          2880 x  2880  (120b: 128, 20b: 32, top-4)
 *   llama-4-scout    5120 x  8192  (16, top-1, 1 shared)
 *   mixtral-8x7b     4096 x 14336  (8, top-2)
 *   mixtral-8x22b    6144 x 16384  (8, top-2)
 * Local experts E = 1, 2, 4, .. up to the model's experts (at most 256);
 * tokens per expert m = 8, 16, .. 16,384 while E m <= --max-pairs (default
 * 131,072 = 16,384 tokens x top-8) and the layer's forward FLOPs 6 E m h f
 * <= --max-tflop (default 8).
 * Per expert the six training GEMMs (M x N x K, both operands K-major):
 *   fc1_fwd (m, 2f, h)   fc2_fwd (m, h, f)
 *   fc1_dgrad (m, h, 2f) fc2_dgrad (m, f, h)
 *   fc1_wgrad (h, 2f, m) fc2_wgrad (f, h, m)      (the reduction is over m)
 * Every expert's operands are its own memory (weights are read from E
 * distinct tensors, as in a real layer). Methods, each timed as the whole
 * batch of E GEMMs between two events:
 *   loop     E x cublasGemmEx on one stream (bf16 in / out, fp32 accumulate)
 *   grouped  cublasGemmGroupedBatchedEx (one group of E, or E groups of one)
 *   strided  cublasGemmStridedBatchedEx (equal shapes only)
 *   dense    one cublasGemmEx of the same FLOPs with the token dimension
 *            E times longer (the ideal: one big GEMM)
 *   fp8_loop E x cublasLtMatmul e4m3 tensorwise (fast accumulation in the
 *            forward, split accumulation in the gradients)
 * Distributions: "uniform" (every expert m tokens) and, on the coarse grid
 * (E a power of 4, m = 8 x a power of 4) with E >= 4, "random": E m tokens
 * routed in chunks of 8 (torchtitan pads each expert's tokens to 8) to
 * experts drawn uniformly at random (fixed seed): a random router's
 * imbalance; loop and grouped only; idle experts skipped; the counts are
 * printed on a "counts" line. Reported TFLOP/s count the FLOPs done.
 * Order: the coarse grid first, then the rest, so that --budget-s cuts
 * density, not models.
 *
 * Output (stdout), whitespace-separated, '#' lines are comments:
 *   grouped MODEL E M DIST KIND METHOD MS TFLOPS STATUS
 *   counts MODEL E M c_0,c_1,..,c_{E-1}
 *   check WHAT REL_ERR PASS|FAIL
 *
 *   grouped_gemm_sweep [--reps N] [--warm S] [--budget-s S] [--models a,b,..]
 *                      [--max-m M] [--max-pairs P] [--max-tflop F] [--no-fp8]
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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
    const char *name;
    long h, f;
    int experts, topk;
};
static const moe_model MODELS[] = {
    {"qwen3-30b-a3b", 2048, 768, 128, 8},   {"qwen3-235b-a22b", 4096, 1536, 128, 8},
    {"deepseek-v3", 7168, 2048, 256, 8},    {"gpt-oss", 2880, 2880, 128, 4},
    {"llama-4-scout", 5120, 8192, 16, 1},   {"mixtral-8x7b", 4096, 14336, 8, 2},
    {"mixtral-8x22b", 6144, 16384, 8, 2},
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
            cudaCheck(cudaMalloc(&dA, 512 * sizeof(void *)));
            cudaCheck(cudaMalloc(&dB, 512 * sizeof(void *)));
            cudaCheck(cudaMalloc(&dC, 512 * sizeof(void *)));
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

/* one point of the grid */
struct point {
    const moe_model *md;
    int E;
    long m;
    int coarse; /* E a power of 4 and m / 8 a power of 4 */
};

static int ilog2(long x) {
    int r = 0;
    while (x > 1) x >>= 1, r++;
    return r;
}

/* per-expert token counts: uniform, or E m tokens in chunks of 8 to random experts */
static std::vector<long> expert_counts(int E, long m, int random, unsigned *rng) {
    std::vector<long> cnt(E, random ? 0 : m);
    if (random)
        for (long c = 0; c < E * m / 8; c++) {
            *rng = *rng * 1664525u + 1013904223u;
            cnt[(*rng >> 8) % E] += 8;
        }
    return cnt;
}

/* elements of A, B, C over the experts for kind at these counts */
static void batch_elems(int kind, long h, long f, const std::vector<long> &cnt, size_t *a, size_t *b, size_t *c) {
    *a = *b = *c = 0;
    for (long t : cnt) {
        if (!t) continue;
        long M, N, K;
        kind_dims(kind, h, f, t, &M, &N, &K);
        *a += (size_t)M * K, *b += (size_t)N * K, *c += (size_t)M * N;
    }
}

int main(int argc, char **argv) {
    int reps = 10, fp8 = 1;
    double warm_s = 2.0, budget_s = 1e9, max_tflop = 8.0;
    long max_m = 16384, max_pairs = 131072;
    std::string models_s = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warm") && i + 1 < argc) warm_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--budget-s") && i + 1 < argc) budget_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-m") && i + 1 < argc) max_m = atol(argv[++i]);
        else if (!strcmp(argv[i], "--max-pairs") && i + 1 < argc) max_pairs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--max-tflop") && i + 1 < argc) max_tflop = atof(argv[++i]);
        else if (!strcmp(argv[i], "--models") && i + 1 < argc) models_s = argv[++i];
        else if (!strcmp(argv[i], "--no-fp8")) fp8 = 0;
        else {
            fprintf(stderr, "usage: grouped_gemm_sweep [--reps N] [--warm S] [--budget-s S] [--models a,b,..|all] "
                            "[--max-m M] [--max-pairs P] [--max-tflop F] [--no-fp8]\n");
            return 2;
        }
    }
    if (reps < 3 || reps > 1000 || !(warm_s >= 0 && warm_s <= 600) || max_m < 8 || max_m > 65536 ||
        max_pairs < 8 || max_pairs > (1L << 22) || !(max_tflop > 0 && max_tflop <= 1000) || !(budget_s > 0)) {
        fprintf(stderr, "grouped_gemm_sweep: --reps 3..1000, --warm 0..600 s, --max-m 8..65536, "
                        "--max-pairs 8..4194304, --max-tflop (0, 1000], --budget-s > 0\n");
        return 2;
    }
    auto t_start = std::chrono::steady_clock::now();
    auto elapsed = [&]() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int ver = 0;
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    cublasCheck(cublasGetVersion(h, &ver));
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    printf("# device %s sms %d cc %d.%d cublas %d memory %.1f GiB\n", prop.name, prop.multiProcessorCount, prop.major,
           prop.minor, ver, total_b / 1073741824.0);
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

    /* the grid, coarse points first */
    std::vector<point> pts;
    for (auto &md : MODELS) {
        if (models_s != "all") {
            std::string list = "," + models_s + ",";
            if (list.find(std::string(",") + md.name + ",") == std::string::npos) continue;
        }
        for (int E = 1; E <= std::min(md.experts, 256); E *= 2)
            for (long m = 8; m <= max_m; m *= 2) {
                if ((long)E * m > max_pairs) continue;
                if (6.0 * E * m * md.h * md.f > max_tflop * 1e12) continue;
                pts.push_back({&md, E, m, ilog2(E) % 2 == 0 && ilog2(m / 8) % 2 == 0});
            }
    }
    std::stable_sort(pts.begin(), pts.end(), [](const point &a, const point &b) { return a.coarse > b.coarse; });
    /* buffers: the largest A, B, C over the grid (random counts included; same seed sequence as below) */
    size_t max_a = 8192L * 8192, max_b = 8192L * 8192, max_c = 8192L * 8192;
    {
        unsigned rng = 12345u;
        for (auto &p : pts)
            for (int dist = 0; dist < 2; dist++) {
                if (dist && !(p.coarse && p.E >= 4)) continue;
                std::vector<long> cnt = expert_counts(p.E, p.m, dist, &rng);
                for (int kind = 0; kind < NKINDS; kind++) {
                    size_t a, b, c;
                    batch_elems(kind, p.md->h, p.md->f, cnt, &a, &b, &c);
                    max_a = std::max(max_a, a), max_b = std::max(max_b, b), max_c = std::max(max_c, c);
                }
            }
    }
    void *A, *B, *C, *A8 = nullptr, *B8 = nullptr;
    float *sc;
    cudaCheck(cudaMalloc(&A, max_a * 2));
    cudaCheck(cudaMalloc(&B, max_b * 2));
    cudaCheck(cudaMalloc(&C, max_c * 2));
    if (fp8) {
        cudaCheck(cudaMalloc(&A8, max_a));
        cudaCheck(cudaMalloc(&B8, max_b));
    }
    cudaCheck(cudaMalloc(&sc, 64));
    sweep_fill(A, max_a, 0, 1.0f, 1);
    sweep_fill(B, max_b, 0, 1.0f, 2);
    if (fp8) {
        sweep_fill(A8, max_a, 1, 1.0f, 3);
        sweep_fill(B8, max_b, 1, 1.0f, 4);
    }
    sweep_const(sc, 16, 1.0f);
    cudaCheck(cudaDeviceSynchronize());
    printf("# grid %zu points (%zu coarse); buffers A %.2f GB, B %.2f GB, C %.2f GB (bf16)%s\n", pts.size(),
           (size_t)std::count_if(pts.begin(), pts.end(), [](const point &p) { return p.coarse; }), max_a * 2e-9,
           max_b * 2e-9, max_c * 2e-9, fp8 ? " + fp8 copies of A and B" : "");

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
    size_t done = 0;
    for (auto &p : pts) {
        if (elapsed() > budget_s) {
            printf("# budget of %.0f s spent after %zu of %zu points\n", budget_s, done, pts.size());
            break;
        }
        const moe_model *md = p.md;
        const int E = p.E;
        const long m = p.m;
        for (int dist = 0; dist < 2; dist++) {
            if (dist && !(p.coarse && E >= 4)) continue;
            std::vector<long> cnt = expert_counts(E, m, dist, &rng);
            const char *dname = dist ? "random" : "uniform";
            if (dist) {
                printf("counts %s %d %ld ", md->name, E, m);
                for (int e = 0; e < E; e++) printf("%s%ld", e ? "," : "", cnt[e]);
                printf("\n");
            }
            for (int kind = 0; kind < NKINDS; kind++) {
                long M0, N0, K0;
                kind_dims(kind, md->h, md->f, m, &M0, &N0, &K0);
                batch b;
                size_t oa = 0, ob = 0, oc = 0; /* element offsets: each expert its own memory */
                for (int e = 0; e < E; e++) {
                    long t = cnt[e];
                    if (!t) continue;
                    long M, N, K;
                    kind_dims(kind, md->h, md->f, t, &M, &N, &K);
                    b.M.push_back(M), b.N.push_back(N), b.K.push_back(K);
                    b.A.push_back((char *)A + 2 * oa);
                    b.B.push_back((char *)B + 2 * ob);
                    b.C.push_back((char *)C + 2 * oc);
                    b.flops += 2.0 * M * N * K;
                    oa += (size_t)M * K, ob += (size_t)N * K, oc += (size_t)M * N;
                }
                b.upload();
                auto report = [&](const char *method, double ms, int st) {
                    if (ms > 0 && st == 0)
                        printf("grouped %s %d %ld %s %s %s %.4f %.2f ok\n", md->name, E, m, dname, KIND_NAMES[kind],
                               method, ms, b.flops / (ms * 1e-3) / 1e12);
                    else
                        printf("grouped %s %d %ld %s %s %s nan nan status=%d\n", md->name, E, m, dname,
                               KIND_NAMES[kind], method, st);
                };
                cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
                double ms = sweep_time(
                    [&]() {
                        st = run_loop(h, b);
                        return st != CUBLAS_STATUS_SUCCESS;
                    },
                    2, 3, reps, 3, e0, e1);
                report("loop", ms, st);
                st = CUBLAS_STATUS_SUCCESS;
                ms = sweep_time(
                    [&]() {
                        st = run_grouped(h, b, dist == 0);
                        return st != CUBLAS_STATUS_SUCCESS;
                    },
                    2, 3, reps, 3, e0, e1);
                report("grouped", ms, st);
                if (dist == 0) {
                    st = CUBLAS_STATUS_SUCCESS;
                    ms = sweep_time(
                        [&]() {
                            st = run_strided(h, b, M0 * K0, N0 * K0, M0 * N0);
                            return st != CUBLAS_STATUS_SUCCESS;
                        },
                        2, 3, reps, 3, e0, e1);
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
                        2, 3, reps, 3, e0, e1);
                    report("dense", ms, st);
                    if (fp8) {
                        /* fp8 loop over cuBLASLt, one setup for the common shape */
                        lt_gemm g;
                        int lkind = kind <= FC2_FWD ? LT_FP8_TW_FAST : LT_FP8_TW;
                        st = lt_gemm_setup(lt, &g, lkind, M0, N0, K0, sc, sc, 0, ws_bytes);
                        if (st == CUBLAS_STATUS_SUCCESS) {
                            ms = sweep_time(
                                [&]() {
                                    for (int e = 0; e < E; e++) {
                                        st = lt_gemm_run(lt, &g, (char *)A8 + (size_t)e * M0 * K0,
                                                         (char *)B8 + (size_t)e * N0 * K0,
                                                         (char *)C + 2 * (size_t)e * M0 * N0, lt_ws, ws_bytes, 0);
                                        if (st != CUBLAS_STATUS_SUCCESS) return 1;
                                    }
                                    return 0;
                                },
                                2, 3, reps, 3, e0, e1);
                            lt_gemm_destroy(&g);
                        } else {
                            ms = -1;
                        }
                        report("fp8_loop", ms, st);
                    }
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
        done++;
    }
    cudaCheck(cudaGetLastError());
    cublasDestroy(h);
    cublasLtDestroy(lt);
    printf("# done %zu of %zu points in %.1f s%s\n", done, pts.size(), elapsed(), g_fail ? " (a check FAILED)" : "");
    return g_fail ? 3 : 0;
}
