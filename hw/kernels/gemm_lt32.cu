/*
 * gemm_lt32.cu: the TF32 mode's cuBLASLt GEMMs (kernels.cu calls them):
 * row-major products in the column-major view, optionally with a bias or
 * bias + GELU epilogue, each shape's descriptors and algorithm cached in
 * ctx->lt32_cache; with ctx->tf32_tune the algorithm is chosen by timing the
 * heuristic's candidates at the shape's first call (outside graph capture),
 * and shared across the process's engines. Where cuBLASLt has no algorithm,
 * cublasGemmEx and the plain epilogue kernels give the same result.
 */
#include <math.h>
#include <pthread.h>

#include "kernels_common.cuh"

struct cu_lt32_entry {
    int ta, tb, m, n, k, lda, ldb, ldc, epi, accumulate, align;
    int ok; /* 1: desc and algo usable; 0: no algorithm, use the fallback */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};
#define CU_LT32_CACHE 512

void cu_nodes_fini32(cu_ctx *ctx) {
    if (!ctx->lt32_cache) return;
    for (int i = 0; i < ctx->n_lt32; i++) {
        cu_lt32_entry *e = &ctx->lt32_cache[i];
        if (e->desc) cublasLtMatmulDescDestroy(e->desc);
        if (e->la) cublasLtMatrixLayoutDestroy(e->la);
        if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
        if (e->lc) cublasLtMatrixLayoutDestroy(e->lc);
    }
    free(ctx->lt32_cache);
    ctx->lt32_cache = NULL;
    ctx->n_lt32 = 0;
}

/* the largest power of two (<= 256) that divides every non-NULL pointer */
static int ptr_align(const void *a, const void *b, const void *c, const void *d, const void *e) {
    uintptr_t x = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)(d ? d : a) | (uintptr_t)(e ? e : a) | 256u;
    return (int)(x & (~x + 1));
}

static pl_status lt32_set_pointers(cu_ctx *ctx, cu_lt32_entry *e, const float *bias, float *aux) {
    if (e->epi != E32_NONE)
        BTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (e->epi == E32_GELU)
        BTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    return PL_OK;
}

/* ---- choosing a GEMM shape's algorithm by timing (ctx->tf32_tune) ----
 * cuBLASLt's heuristic ranks algorithms by a model; for the qkv input
 * gradient (384 x 4096 x 1152) its first choice took 35.1 us on the H200
 * (GPU call 3) and the fastest of its best 8 22.0 (call 2). At a shape's first
 * call (outside a graph capture: the engine's first step runs op by op) the
 * heuristic's best LT32_CANDIDATES are timed (1 warm-up and 3 runs each) and
 * the fastest kept. The candidates write either the call's own outputs (a
 * GEMM that overwrites D: the real call overwrites them again) or, for an
 * accumulating GEMM, a scratch D: the upper half of the cuBLAS workspace
 * (the candidates get the lower half) when D fits there, else a temporary
 * cudaMalloc freed before the call returns (the head's weight gradient,
 * 77 MB; if it cannot be had, the heuristic's first choice stays), so tuning
 * changes nothing the call returns and holds no memory after it. The
 * choice is process-wide (one table for every device and
 * engine, by shape and GPU model), so two engines or two logical devices of
 * one process run the same algorithm on the same shape and stay bitwise
 * comparable; another process may choose otherwise (TF32 rounding noise). */
#define LT32_CANDIDATES 8
#define LT32_TUNED_MAX 512

typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc, epi, accumulate, align, cc;
    cublasLtMatmulAlgo_t algo;
} lt32_choice;

static lt32_choice lt32_tuned[LT32_TUNED_MAX];
static int lt32_n_tuned;
static pthread_mutex_t lt32_mu = PTHREAD_MUTEX_INITIALIZER;

static int lt32_same(const lt32_choice *c, const cu_lt32_entry *e, int cc) {
    return c->ta == e->ta && c->tb == e->tb && c->m == e->m && c->n == e->n && c->k == e->k && c->lda == e->lda &&
           c->ldb == e->ldb && c->ldc == e->ldc && c->epi == e->epi && c->accumulate == e->accumulate &&
           c->align == e->align && c->cc == cc;
}

static int lt32_cc(void) {
    int dev = 0, ma = 0, mi = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return -1;
    if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return -1;
    if (cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return -1;
    return ma * 10 + mi;
}

/* Whether this entry's algorithm may be chosen by timing now. */
static int lt32_tunable(cu_ctx *ctx, const cu_lt32_entry *e) {
    if (!ctx->tf32_tune || !ctx->ws || ctx->ws_bytes < ((size_t)4 << 20)) return 0;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ctx->stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return 0;
    (void)e;
    return 1;
}

/* Times the candidates (see above) and stores the fastest in e->algo. A
 * shape another engine of the process has tuned takes its choice untimed. */
static pl_status lt32_pick(cu_ctx *ctx, cu_lt32_entry *e, const cublasLtMatmulHeuristicResult_t *res, int found,
                           const float *A, const float *B, float *D, const float *bias, float *aux) {
    const int cc = lt32_cc();
    pthread_mutex_lock(&lt32_mu);
    for (int i = 0; i < lt32_n_tuned; i++)
        if (lt32_same(&lt32_tuned[i], e, cc)) {
            e->algo = lt32_tuned[i].algo;
            pthread_mutex_unlock(&lt32_mu);
            return PL_OK;
        }
    pthread_mutex_unlock(&lt32_mu);
    RET(lt32_set_pointers(ctx, e, bias, aux));
    const size_t half = ctx->ws_bytes / 2, dbytes = (size_t)e->ldc * (size_t)e->n * sizeof(float);
    float *out = D, *tmp = NULL;
    if (e->accumulate && dbytes <= half) out = (float *)((char *)ctx->ws + half);
    else if (e->accumulate) {
        if (cudaMalloc((void **)&tmp, dbytes) != cudaSuccess) {
            (void)cudaGetLastError(); /* no room to time it: the heuristic's choice stays */
            return PL_OK;
        }
        out = tmp;
    }
    const float alpha = 1.0f, beta = 0.0f;
    cudaEvent_t t0 = NULL, t1 = NULL;
    if (cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess) {
        if (t0) cudaEventDestroy(t0);
        if (tmp) cudaFree(tmp);
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cudaEventCreate", "failed", 0);
    }
    float best = INFINITY;
    int best_i = 0;
    pl_status st = PL_OK;
    for (int i = 0; i < found && st == PL_OK; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > half) continue;
        if (cublasLtMatmul(ctx->lt, e->desc, &alpha, A, e->la, B, e->lb, &beta, out, e->lc, out, e->lc, &res[i].algo,
                           ctx->ws, half, ctx->stream) != CUBLAS_STATUS_SUCCESS)
            continue; /* this candidate cannot run: the others can */
        cudaEventRecord(t0, ctx->stream);
        for (int r = 0; r < 3; r++)
            cublasLtMatmul(ctx->lt, e->desc, &alpha, A, e->la, B, e->lb, &beta, out, e->lc, out, e->lc, &res[i].algo,
                           ctx->ws, half, ctx->stream);
        cudaEventRecord(t1, ctx->stream);
        float ms = 0.0f;
        cudaError_t ce = cudaEventSynchronize(t1);
        if (ce == cudaSuccess) ce = cudaEventElapsedTime(&ms, t0, t1);
        if (ce != cudaSuccess)
            st = cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "lt32_pick", cudaGetErrorString(ce), 0);
        else if (ms < best) {
            best = ms;
            best_i = i;
        }
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (tmp) { /* its candidates are done (the event synchronised the stream) */
        cudaError_t fe = cudaFree(tmp);
        if (fe != cudaSuccess && st == PL_OK)
            st = cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cudaFree", cudaGetErrorString(fe), 0);
    }
    if (st != PL_OK) return st;
    e->algo = res[best_i].algo;
    pthread_mutex_lock(&lt32_mu);
    int i;
    for (i = 0; i < lt32_n_tuned; i++) /* another thread may have tuned it meanwhile: its choice wins */
        if (lt32_same(&lt32_tuned[i], e, cc)) {
            e->algo = lt32_tuned[i].algo;
            break;
        }
    if (i == lt32_n_tuned && lt32_n_tuned < LT32_TUNED_MAX) {
        lt32_choice *c = &lt32_tuned[lt32_n_tuned++];
        c->ta = e->ta; c->tb = e->tb; c->m = e->m; c->n = e->n; c->k = e->k; c->lda = e->lda; c->ldb = e->ldb;
        c->ldc = e->ldc; c->epi = e->epi; c->accumulate = e->accumulate; c->align = e->align; c->cc = cc;
        c->algo = e->algo;
    }
    pthread_mutex_unlock(&lt32_mu);
    return PL_OK;
}

/* Row-major GEMM in the column-major view (as gemm above), TF32:
 * D (m x n, ldc) = op(A) op(B) (+ D when accumulate), then the epilogue:
 * E32_BIAS adds bias (length m); E32_GELU adds bias, stores the sum in aux
 * (m x n, ld ldc) and D = gelu(sum) (cuBLASLt's tanh GELU, as gelu_f). Where
 * cuBLASLt has no algorithm, cublasGemmEx and the old kernels give the same
 * result. The descriptors and the algorithm are cached by shape. */
pl_status gemm_lt32(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *A, int lda, const float *B, int ldb, float *D, int ldc, int accumulate,
                           int epi, const float *bias, float *aux) {
    const int align = ptr_align(A, B, D, bias, aux);
    cu_lt32_entry *e = NULL;
    for (int i = 0; i < ctx->n_lt32; i++) {
        cu_lt32_entry *x = &ctx->lt32_cache[i];
        if (x->ta == (int)ta && x->tb == (int)tb && x->m == m && x->n == n && x->k == k &&
            x->lda == lda && x->ldb == ldb && x->ldc == ldc && x->epi == epi && x->accumulate == accumulate &&
            x->align == align) {
            e = x;
            break;
        }
    }
    if (!e) {
        if (!ctx->lt32_cache) {
            ctx->lt32_cache = (cu_lt32_entry *)calloc(CU_LT32_CACHE, sizeof *ctx->lt32_cache);
            if (!ctx->lt32_cache)
                return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm_lt32", "out of host memory", 0);
        }
        if (ctx->n_lt32 == CU_LT32_CACHE)
            return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm_lt32", "too many GEMM shapes", 0);
        e = &ctx->lt32_cache[ctx->n_lt32++];
        memset(e, 0, sizeof *e);
        e->ta = ta; e->tb = tb; e->m = m; e->n = n; e->k = k; e->lda = lda; e->ldb = ldb; e->ldc = ldc;
        e->epi = epi; e->accumulate = accumulate; e->align = align;
        if (align >= 16 && ctx->lt) {
            BTRY(cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
            BTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
            BTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
            cublasLtEpilogue_t ep = epi == E32_BIAS   ? CUBLASLT_EPILOGUE_BIAS
                                    : epi == E32_GELU ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                      : CUBLASLT_EPILOGUE_DEFAULT;
            BTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
            if (epi == E32_GELU) {
                int64_t ld = ldc;
                BTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
            }
            BTRY(cublasLtMatrixLayoutCreate(&e->la, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m,
                                            lda));
            BTRY(cublasLtMatrixLayoutCreate(&e->lb, CUDA_R_32F, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k,
                                            ldb));
            BTRY(cublasLtMatrixLayoutCreate(&e->lc, CUDA_R_32F, m, n, ldc));
            cublasLtMatmulPreference_t pref = NULL;
            BTRY(cublasLtMatmulPreferenceCreate(&pref));
            size_t wsb = ctx->ws_bytes;
            uint32_t al = (uint32_t)align;
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
            /* tuning keeps the upper half of the workspace for its scratch output */
            const int tune = lt32_tunable(ctx, e);
            if (tune) {
                wsb = ctx->ws_bytes / 2;
                cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
            }
            cublasLtMatmulHeuristicResult_t res[LT32_CANDIDATES];
            int found = 0;
            cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx->lt, e->desc, e->la, e->lb, e->lc, e->lc, pref,
                                                               tune ? LT32_CANDIDATES : 1, res, &found);
            cublasLtMatmulPreferenceDestroy(pref);
            e->ok = hs == CUBLAS_STATUS_SUCCESS && found > 0;
            if (e->ok) e->algo = res[0].algo;
            if (e->ok && tune && found > 1) RET(lt32_pick(ctx, e, res, found, A, B, D, bias, aux));
        }
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (e->ok) {
        RET(lt32_set_pointers(ctx, e, bias, aux));
        BTRY(cublasLtMatmul(ctx->lt, e->desc, &alpha, A, e->la, B, e->lb, &beta, D, e->lc, D, e->lc, &e->algo, ctx->ws,
                            ctx->ws_bytes, ctx->stream));
    } else {
        /* no cuBLASLt algorithm: cublasGemmEx, then the epilogue as the old kernels */
        float *out = epi == E32_GELU ? aux : D;
        BTRY(cublasGemmEx(ctx->blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, out,
                          CUDA_R_32F, ldc, ctx->compute, CUBLAS_GEMM_DEFAULT));
        if (epi != E32_NONE) {
            const int64_t total = (int64_t)m * n;
            RET(check_size(ctx, total, "gemm_lt32 epilogue"));
            if (ldc != m)
                return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm_lt32", "epilogue fallback needs ldc == m",
                               0);
            if (epi == E32_BIAS) bias_add_k<<<ceil_div(total, 256), 256, 0, ctx->stream>>>(D, bias, n, m);
            else bias_gelu_k<<<ceil_div(total, 256), 256, 0, ctx->stream>>>(aux, D, bias, n, m);
            LAUNCHED();
        }
    }
    if (ctx->kprof) {
        char nm[48];
        snprintf(nm, sizeof nm, "lt32 %dx%dx%d%s%s", m, n, k, epi == E32_GELU ? " gelu" : epi == E32_BIAS ? " bias" : "",
                 e->ok ? "" : " (fallback)");
        KM(gemm_name_str(ctx->kprof, nm));
    }
    return PL_OK;
}
