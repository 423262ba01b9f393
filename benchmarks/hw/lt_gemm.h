/*
 * lt_gemm.h: one cuBLASLt matmul, set up once and run many times, for the
 * standalone GEMM sweeps (fp8_gemm_sweep.cu, grouped_gemm_sweep.cu).
 *
 * Every GEMM here is D (m x n, column-major, bf16) = op(A) op(B) with both
 * operands K-major ("TN": A stored k x m, B stored k x n, column-major).
 * That is the only layout cuBLASLt runs FP8 in on Hopper, and bf16 is set
 * up the same way so that a bf16 / fp8 ratio compares precision alone.
 *
 * Kinds:
 *   LT_BF16        bf16 x bf16 -> bf16, fp32 accumulate
 *   LT_FP8_TW      e4m3 x e4m3 -> bf16, one fp32 scale per tensor
 *                  (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER), split
 *                  accumulation (the precise mode, fast accum off)
 *   LT_FP8_TW_FAST the same with CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1
 *                  (what torchao / Transformer Engine use for the forward)
 *   LT_FP8_BLOCK   e4m3 x e4m3 -> bf16 with block scales: A one fp32 scale
 *                  per 1 x 128 along k (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F),
 *                  B one per 128 x 128 block (..._BLK128x128_32F), or both
 *                  1 x 128 (b_vec128 = 1, the weight-gradient case of the
 *                  DeepSeek-V3 recipe)
 * Benchmarks only: errors are returned as the cuBLAS status so that a kind
 * the library does not offer on this GPU is reported, not fatal.
 */
#ifndef PLACER_LT_GEMM_H
#define PLACER_LT_GEMM_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

enum lt_kind { LT_BF16 = 0, LT_FP8_TW = 1, LT_FP8_TW_FAST = 2, LT_FP8_BLOCK = 3 };

static const char *lt_kind_name(int k) {
    switch (k) {
    case LT_BF16: return "bf16";
    case LT_FP8_TW: return "fp8_tensorwise";
    case LT_FP8_TW_FAST: return "fp8_tensorwise_fastacc";
    case LT_FP8_BLOCK: return "fp8_block128";
    }
    return "?";
}

struct lt_gemm {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
    int have_algo = 0;
    long m = 0, n = 0, k = 0;
};

static void lt_gemm_destroy(lt_gemm *g) {
    if (g->op) cublasLtMatmulDescDestroy(g->op);
    if (g->a) cublasLtMatrixLayoutDestroy(g->a);
    if (g->b) cublasLtMatrixLayoutDestroy(g->b);
    if (g->c) cublasLtMatrixLayoutDestroy(g->c);
    memset(g, 0, sizeof(*g));
}

#define LT_TRY(x)                                                                                      \
    do {                                                                                               \
        cublasStatus_t s_ = (x);                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
            lt_gemm_destroy(g);                                                                        \
            return s_;                                                                                 \
        }                                                                                              \
    } while (0)

/* Sets g up for kind over m x n x k; a_scale / b_scale are device fp32
 * scale buffers (ignored for bf16). Returns CUBLAS_STATUS_NOT_SUPPORTED
 * when the heuristic offers no algorithm. */
static cublasStatus_t lt_gemm_setup(cublasLtHandle_t lt, lt_gemm *g, int kind, long m, long n, long k,
                                    const float *a_scale, const float *b_scale, int b_vec128, size_t ws_bytes) {
    memset(g, 0, sizeof(*g));
    g->m = m, g->n = n, g->k = k;
    cudaDataType_t in_t = kind == LT_BF16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
    LT_TRY(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (kind != LT_BF16) {
        LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
        LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
        int8_t fast = kind == LT_FP8_TW_FAST;
        LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    }
    if (kind == LT_FP8_BLOCK) {
        int32_t am = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        int32_t bm = b_vec128 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
        LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof(am)));
        LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof(bm)));
    }
    LT_TRY(cublasLtMatrixLayoutCreate(&g->a, in_t, (uint64_t)k, (uint64_t)m, (int64_t)k));
    LT_TRY(cublasLtMatrixLayoutCreate(&g->b, in_t, (uint64_t)k, (uint64_t)n, (int64_t)k));
    LT_TRY(cublasLtMatrixLayoutCreate(&g->c, CUDA_R_16BF, (uint64_t)m, (uint64_t)n, (int64_t)m));
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    cublasStatus_t st =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
    cublasLtMatmulHeuristicResult_t res;
    int count = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt, g->op, g->a, g->b, g->c, g->c, pref, 1, &res, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS) {
        lt_gemm_destroy(g);
        return st;
    }
    if (count < 1) {
        lt_gemm_destroy(g);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    g->algo = res.algo;
    g->have_algo = 1;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t lt_gemm_run(cublasLtHandle_t lt, const lt_gemm *g, const void *A, const void *B, void *D,
                                  void *ws, size_t ws_bytes, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(lt, g->op, &one, A, g->a, B, g->b, &zero, D, g->c, D, g->c, &g->algo, ws, ws_bytes, s);
}

#endif
