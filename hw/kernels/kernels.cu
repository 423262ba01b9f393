/*
 * kernels.cu: the GPT's node math on the GPU. The same math and the same
 * saved-tensor layouts as the CPU reference (nodes.h): matrix products go
 * through cuBLAS, everything else through the small fused kernels below.
 *
 *   linear layers   cublasGemmEx (row-major tensors seen as column-major
 *                   transposes, the llm.c way)
 *   attention       qkv GEMM, a permute that adds the bias, two strided
 *                   batched GEMMs around a fused causal softmax (the 1/sqrt(hs)
 *                   scale folded into the first GEMM's alpha), an unpermute,
 *                   the projection GEMM and a bias add
 *   mlp             fc GEMM, a fused bias + GELU-tanh (keeping pre- and post-
 *                   activation), proj GEMM, bias add
 *   loss            loss.cu
 *   AdamW           one pass over the device's flat buffers, float4
 *   layernorm       layernorm.cu
 *
 * That is strict fp32 exactly, and TF32 with PLACER_TF32_OFF=all. TF32
 * otherwise (cu_ctx's tf32_* flags) takes fused paths with the same TF32
 * precision (TF32 products, fp32 sums, everything else fp32):
 *   epilogues       the biases in cuBLASLt epilogues, the fc GEMM's GELU
 *                   after it by gelu4_k (cuBLASLt's GELU epilogue measured
 *                   slower: PLACER_TF32_ON=gelu); the bias gradients by
 *                   16-byte column sums, GELU's backward fused with the fc
 *                   bias gradient (gelu_colsum4_k); the residual backward
 *                   4 elements a thread
 *   loss            lossf_k or lossr_k (loss.cu; PLACER_LOSS32 picks)
 *   attention       flash_attn_*_tf32 (flash_attention.h) for hs 64 / 128:
 *                   no permutes and no T x T matrix
 *   GEMMs           the input-gradient ones (N, N) and those with an
 *                   epilogue through cuBLASLt (gemm_lt32.cu), each shape's algorithm chosen
 *                   by timing at its first call; the forward and
 *                   weight-gradient ones by cublasGemmEx (faster on the
 *                   H200 for those layouts); with PLACER_TF32_ON=tdw the
 *                   weight gradients from transposed copies (opt-in)
 *
 * Gradient convention as in nodes.h: parameter gradients accumulate (GEMM
 * beta = 1, atomics for the reductions), input gradients assign or add by acc.
 * The bf16 mixed mode is kernels_bf16.cu; what both use is kernels_common.cuh.
 */

#include "kernels_common.cuh"
#if PLACER_HAVE_FLASH
#include "flash_attention.h"
#endif


/* ---------------- reductions ---------------- */


/* ---------------- elementwise ---------------- */

/* Index arithmetic below is 32-bit where a kernel divides: the launchers
 * check that the tensor has fewer than 2^31 elements. */
__global__ void embedding_fwd_k(float *out, const int *tok, const float *wte, const float *wpe, int N, int T,
                                int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    int bt = i / C, c = i - bt * C, t = bt % T;
    out[i] = wte[(int64_t)tok[bt] * C + c] + wpe[t * C + c];
}

__global__ void embedding_bwd_wte_k(float *dwte, const int *tok, const float *dout, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    int bt = i / C;
    atomicAdd(&dwte[(int64_t)tok[bt] * C + (i - bt * C)], dout[i]);
}

__global__ void embedding_bwd_wpe_k(float *dwpe, const float *dout, int B, int T, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * C) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += dout[(int64_t)b * T * C + i];
    dwpe[i] += s;
}

__global__ void residual_fwd_k(float4 *out, const float4 *a, const float4 *b, int64_t n4) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

__global__ void residual_fwd_scalar_k(float *out, const float *a, const float *b, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

__global__ void residual_bwd_k(float *da, float *db, const float *dout, int64_t n, int acc_a, int acc_b) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float d = dout[i];
    da[i] = acc_a ? da[i] + d : d;
    db[i] = acc_b ? db[i] + d : d; /* da == db (one tensor fed twice): applied in turn */
}

/* residual_bwd_k 4 elements a thread (TF32 mode); da == db allowed: db is
 * read after da is written, as in the scalar kernel */
__global__ void residual_bwd4_k(float4 *da, float4 *db, const float4 *dout, int64_t n4, int acc_a, int acc_b) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 d = dout[i];
    float4 a = d;
    if (acc_a) {
        const float4 x = da[i];
        a = make_float4(x.x + d.x, x.y + d.y, x.z + d.z, x.w + d.w);
    }
    da[i] = a;
    float4 b = d;
    if (acc_b) {
        const float4 x = db[i];
        b = make_float4(x.x + d.x, x.y + d.y, x.z + d.z, x.w + d.w);
    }
    db[i] = b;
}

/* g = gelu(h), 4 elements a thread (the TF32 MLP after its bias epilogue) */
__global__ void gelu4_k(float4 *g, const float4 *h, int64_t n4) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 x = h[i];
    g[i] = make_float4(gelu_f(x.x), gelu_f(x.y), gelu_f(x.z), gelu_f(x.w));
}

__global__ void add_k(float *y, const float *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}


/* ---------------- attention helpers ---------------- */

/* The permutes run on a 2-D grid: blockIdx.y walks the (part,) b, h blocks of
 * T x hs elements and blockIdx.x the elements inside one, so a thread does one
 * division instead of five. Reads and writes stay contiguous over hs. */


/* ---------------- AdamW ----------------
 * The step number comes from t_dev (device memory) when given, so that a
 * captured graph replays correctly: each block derives the bias corrections
 * from *t_dev + 1, and adamw_tick_k increments the counter afterwards. */


__global__ void adamw_k(float4 *p, const float4 *g, float4 *m, float4 *v, int64_t n4, float lr, float b1, float b2,
                        float eps, float wd, const int *t_dev, int t_host) {
    float bc1, bc2;
    adamw_bias(t_dev, t_host, b1, b2, &bc1, &bc2);
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 P = p[i], G = g[i], M = m[i], Vv = v[i];
#define ADAM1(f)                                                                 \
    {                                                                            \
        M.f = b1 * M.f + (1.0f - b1) * G.f;                                      \
        Vv.f = b2 * Vv.f + (1.0f - b2) * G.f * G.f;                              \
        float mh = M.f / bc1, vh = Vv.f / bc2;                                   \
        P.f -= lr * (mh / (sqrtf(vh) + eps) + wd * P.f);                         \
    }
    ADAM1(x) ADAM1(y) ADAM1(z) ADAM1(w)
#undef ADAM1
    p[i] = P;
    m[i] = M;
    v[i] = Vv;
}

__global__ void adamw_scalar_k(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1, float b2,
                               float eps, float wd, const int *t_dev, int t_host) {
    float bc1, bc2;
    adamw_bias(t_dev, t_host, b1, b2, &bc1, &bc2);
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float M = b1 * m[i] + (1.0f - b1) * g[i], Vv = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    m[i] = M;
    v[i] = Vv;
    p[i] -= lr * ((M / bc1) / (sqrtf(Vv / bc2) + eps) + wd * p[i]);
}

__global__ void adamw_tick_k(int *t_dev) { *t_dev += 1; }

/* ---------------- cuBLAS wrappers (row-major) ---------------- */

static const char *gemm_name(cu_kprof *k, int m, int n, int k_) {
    char buf[40];
    snprintf(buf, sizeof buf, "gemm %dx%dx%d", m, n, k_);
    return gemm_name_str(k, buf);
}

static pl_status gemm(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    /* TF32: the input-gradient GEMMs (N, N) through cuBLASLt with the timed
     * choice of algorithm, faster there on the H200 (GPU call 2:
     * 384x4096x1152 22.0 against cublasGemmEx's 34.7 us, the head's
     * 384x4096x50304 489 against 547); the others (the forward's (T, N), the
     * weight gradients' (N, T), slower through cuBLASLt) only on request */
    const int lt = ctx->tf32_lt || (ctx->tf32_ltnn && ta == CUBLAS_OP_N && tb == CUBLAS_OP_N);
    if (lt && alpha == 1.0f && (beta == 0.0f || beta == 1.0f))
        return gemm_lt32(ctx, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, beta != 0.0f, 0, NULL, NULL);
    BTRY(cublasGemmEx(ctx->blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C,
                      CUDA_R_32F, ldc, ctx->compute, CUBLAS_GEMM_DEFAULT));
    if (ctx->kprof) KM(gemm_name(ctx->kprof, m, n, k));
    return PL_OK;
}

/* out (N, OC; row stride ldo) = inp (N, C) @ w^T, w (OC, C) */
static pl_status linear_fwd(cu_ctx *ctx, float *out, const float *inp, const float *w, int N, int C, int OC, int ldo) {
    return gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, 1.0f, w, C, inp, C, 0.0f, out, ldo);
}

/* dinp (N, C) = (acc ? dinp : 0) + dout (N, OC; stride ldd) @ w */
static pl_status linear_bwd_inp(cu_ctx *ctx, float *dinp, const float *dout, const float *w, int N, int C, int OC,
                                int ldd, int acc) {
    return gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, 1.0f, w, C, dout, ldd, acc ? 1.0f : 0.0f, dinp, C);
}

/* dw (OC, C) += dout^T @ inp */
static pl_status linear_bwd_w(cu_ctx *ctx, float *dw, const float *dout, const float *inp, int N, int C, int OC,
                              int ldd) {
    return gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, 1.0f, inp, C, dout, ldd, 1.0f, dw, C);
}

static pl_status bias_add(cu_ctx *ctx, float *out, const float *bias, int64_t N, int OC) {
    RET(check_size(ctx, N * OC, "bias_add"));
    bias_add_k<<<ceil_div(N * OC, 256), 256, 0, ctx->stream>>>(out, bias, (int)N, OC);
    LAUNCHED();
    KM("bias_add_k");
    return PL_OK;
}

/* ---------------- the TF32 mode's fused paths ----------------
 * In TF32 (ctx->compute = CUBLAS_COMPUTE_32F_FAST_TF32) the forward GEMMs
 * that have a bias run through cuBLASLt with the bias (or bias + GELU, the
 * pre-activation stored as the epilogue's aux output) in the epilogue, and
 * the bias gradients come from fused or vectorised passes, so the separate
 * bias_add_k / bias_gelu_k / gelu_bwd_k / colsum_k passes are gone. Strict
 * fp32 keeps the cublasGemmEx path above bit for bit. The precision is the
 * same TF32 as cublasGemmEx's: fp32 storage, TF32 products, fp32
 * accumulation, the epilogue in fp32. */

/* out (N, OC; ld ldo) = inp (N, C) @ w^T + bias, in TF32 with the bias in the epilogue */
static pl_status linear_fwd_bias(cu_ctx *ctx, float *out, const float *inp, const float *w, const float *bias, int N,
                                 int C, int OC, int ldo) {
    return gemm_lt32(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w, C, inp, C, out, ldo, 0, E32_BIAS, bias, NULL);
}

static int colsum_chunks32(int64_t N) {
    int chunks = (int)(N / 64);
    return chunks < 1 ? 1 : chunks > 128 ? 128 : chunks;
}

/* dbias (OC) += column sums of dout (N, OC), 4 columns a thread (16-byte
 * loads); block (32, 8) covers 128 columns, its 8 row groups meet in shared
 * memory, one atomic per column and block. OC % 4 == 0, 16-byte aligned. */
__global__ void colsum4_k(float *dbias, const float4 *dout, int64_t N, int OC) {
    __shared__ float sh[8][128 + 1];
    const int q = blockIdx.x * 32 + threadIdx.x, q4 = OC / 4;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (q < q4)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8) {
            float4 v = dout[n * q4 + q];
            acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
        }
#pragma unroll
    for (int k = 0; k < 4; k++) sh[threadIdx.y][threadIdx.x * 4 + k] = acc[k];
    __syncthreads();
    for (int j = threadIdx.y * 32 + threadIdx.x; j < 128; j += 256) {
        int col = blockIdx.x * 128 + j;
        if (col >= OC) continue;
        float t = 0.0f;
        for (int r = 0; r < 8; r++) t += sh[r][j];
        atomicAdd(&dbias[col], t);
    }
}

/* dg (N, OC) *= gelu'(h) in place and dbias += column sums of the product
 * (the MLP fc's backward in one pass); layout as colsum4_k. */
__global__ void gelu_colsum4_k(float4 *dg, float *dbias, const float4 *h, int64_t N, int OC) {
    __shared__ float sh[8][128 + 1];
    const int q = blockIdx.x * 32 + threadIdx.x, q4 = OC / 4;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (q < q4)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8) {
            const int64_t i = n * q4 + q;
            float4 d = dg[i];
            const float4 x = h[i];
            d.x *= gelu_grad_f(x.x), d.y *= gelu_grad_f(x.y), d.z *= gelu_grad_f(x.z), d.w *= gelu_grad_f(x.w);
            dg[i] = d;
            acc[0] += d.x, acc[1] += d.y, acc[2] += d.z, acc[3] += d.w;
        }
#pragma unroll
    for (int k = 0; k < 4; k++) sh[threadIdx.y][threadIdx.x * 4 + k] = acc[k];
    __syncthreads();
    for (int j = threadIdx.y * 32 + threadIdx.x; j < 128; j += 256) {
        int col = blockIdx.x * 128 + j;
        if (col >= OC) continue;
        float t = 0.0f;
        for (int r = 0; r < 8; r++) t += sh[r][j];
        atomicAdd(&dbias[col], t);
    }
}

/* dbias += column sums of dout: the vectorised pass when it can, else colsum_k */
static pl_status colsum_fast(cu_ctx *ctx, float *dbias, const float *dout, int64_t N, int OC) {
    if (OC % 4 != 0 || (uintptr_t)dout % 16 != 0) return colsum(ctx, dbias, dout, N, OC);
    colsum4_k<<<dim3(ceil_div(OC, 128), colsum_chunks32(N)), dim3(32, 8), 0, ctx->stream>>>(dbias, (const float4 *)dout,
                                                                                            N, OC);
    LAUNCHED();
    KM("colsum4_k");
    return PL_OK;
}

/* dg *= gelu'(h) and dbias += its column sums */
static pl_status gelu_colsum(cu_ctx *ctx, float *dg, float *dbias, const float *h, int64_t N, int OC) {
    if (OC % 4 != 0 || ((uintptr_t)dg | (uintptr_t)h) % 16 != 0) {
        RET(check_size(ctx, N * OC, "gelu_colsum"));
        gelu_bwd_k<<<ceil_div(N * OC, 256), 256, 0, ctx->stream>>>(dg, h, N * OC);
        LAUNCHED();
        KM("gelu_bwd_k");
        return colsum(ctx, dbias, dg, N, OC);
    }
    gelu_colsum4_k<<<dim3(ceil_div(OC, 128), colsum_chunks32(N)), dim3(32, 8), 0, ctx->stream>>>(
        (float4 *)dg, dbias, (const float4 *)h, N, OC);
    LAUNCHED();
    KM("gelu_colsum4_k");
    return PL_OK;
}

/* ---- weight gradients from transposed copies (ctx->tf32_tdw, opt-in;
 * GPU call 5: the TF32 step 5.582 ms with it, 5.349 without) ----
 * dW += dout^T x sums over the tokens, the slow index of both row-major
 * operands: for cuBLAS both are MN-major, which TF32 tensor-core kernels
 * cannot read directly (1536 x 384 x 4096 ran at 110 TFLOP/s, against ~180
 * for the forward's K-major GEMMs of the same size). With x^T and dout^T
 * ([features][tokens]) the same product is a (T, N) GEMM of K-major
 * operands; the transposes cost one read and one write of each. */

/* dst (K x R, row-major) = src (R x K, row-major)^T; block (32, 8), grid (ceil(K/32), ceil(R/32)) */
__global__ void transpose_k(float *dst, const float *src, int R, int K) {
    __shared__ float t[32][33];
    const int k0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int r = r0 + j, k = k0 + threadIdx.x;
        if (r < R && k < K) t[j][threadIdx.x] = src[(int64_t)r * K + k];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int k = k0 + j, r = r0 + threadIdx.x;
        if (r < R && k < K) dst[(int64_t)k * R + r] = t[threadIdx.x][j];
    }
}

static pl_status transpose(cu_ctx *ctx, float *dst, const float *src, int R, int K) {
    if ((R + 31) / 32 > 65535)
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "transpose", "too many rows", 0);
    transpose_k<<<dim3((unsigned)((K + 31) / 32), (unsigned)((R + 31) / 32)), dim3(32, 8), 0, ctx->stream>>>(dst, src,
                                                                                                           R, K);
    LAUNCHED();
    KM("transpose_k");
    return PL_OK;
}

/* dw (OC, Cin) += dout^T @ inp from inpT (Cin, N) and doutT (OC, N): a (T, N) GEMM */
static pl_status linear_bwd_w_t(cu_ctx *ctx, float *dw, const float *doutT, const float *inpT, int N, int Cin,
                                int OC) {
    return gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, Cin, OC, N, 1.0f, inpT, N, doutT, N, 1.0f, dw, Cin);
}

/* ---------------- nodes ---------------- */



/* Whether this attention call takes the TF32 flash kernel (flash_attention.h's
 * requirements). Forward and backward of a node decide alike (the flags are
 * fixed when the backend starts), so the saved tensors match: with the flash
 * kernel the saved slots hold qkv (B,T,3C) with its bias, the rows'
 * log-sum-exp (B*NH*T floats at the start of the T x T slot) and y (B,T,C). */
static int use_flash32(const cu_ctx *ctx, const hw_node_call *c) {
#if PLACER_HAVE_FLASH
    const int hs = c->d.C / c->d.NH;
    return ctx->tf32_flash && (hs == 64 || hs == 128) && c->d.C % 8 == 0 && c->d.B * c->d.NH <= 65535;
#else
    (void)ctx;
    (void)c;
    return 0;
#endif
}

static pl_status attention_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int B = c->d.B, T = c->d.T, C = c->d.C, NH = c->d.NH, hs = C / NH, N = B * T;
    const int64_t NC = (int64_t)N * C;
    float *qkv = c->scratch, *yp = c->scratch + 3 * NC;
    float *qkvr = S(c, 0), *att = S(c, 1), *y = S(c, 2);
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    RET(check_size(ctx, 3 * NC, "attention"));
#if PLACER_HAVE_FLASH
    if (use_flash32(ctx, c)) {
        /* qkv with its bias straight into the saved slot, the fused core, the projection with its bias */
        RET(linear_fwd_bias(ctx, qkvr, c->in[0], P(c, 0), P(c, 1), N, C, 3 * C, 3 * C));
        int fe = flash_attn_fwd_tf32(y, att, qkvr, B, T, C, NH, ctx->stream);
        if (fe != 0)
            return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "flash_attn_fwd_tf32",
                           cudaGetErrorString((cudaError_t)fe), 0);
        KM("flash_attn_fwd_tf32");
        return linear_fwd_bias(ctx, c->out, y, P(c, 2), P(c, 3), N, C, C, C);
    }
#endif
    RET(linear_fwd(ctx, qkv, c->in[0], P(c, 0), N, C, 3 * C, 3 * C));
    permute_qkv_k<<<permute_grid(T, hs, 3 * B * NH), 256, 0, ctx->stream>>>(qkvr, qkv, P(c, 1), B, T, C, NH);
    LAUNCHED();
    KM("permute_qkv_k");
    const float scale = 1.0f / sqrtf((float)hs);
    /* preatt^T = k q^T per (b, h), scaled */
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, hs, (long long)T * hs, q, hs,
                     (long long)T * hs, 0.0f, att, T, (long long)T * T, B * NH));
    int64_t rows = (int64_t)B * NH * T;
    softmax_causal_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(att, rows, T);
    LAUNCHED();
    KM("softmax_causal_k");
    /* y^T = v^T att^T */
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, hs, (long long)T * hs, att, T,
                     (long long)T * T, 0.0f, yp, hs, (long long)T * hs, B * NH));
    heads_tokens_k<<<permute_grid(T, hs, B * NH), 256, 0, ctx->stream>>>(y, yp, B, T, C, NH, 1);
    LAUNCHED();
    KM("heads_tokens_k");
    if (ctx->tf32_epi) return linear_fwd_bias(ctx, c->out, y, P(c, 2), P(c, 3), N, C, C, C);
    RET(linear_fwd(ctx, c->out, y, P(c, 2), N, C, C, C));
    return bias_add(ctx, c->out, P(c, 3), N, C);
}

static pl_status attention_backward(cu_ctx *ctx, const hw_node_call *c) {
    const int B = c->d.B, T = c->d.T, C = c->d.C, NH = c->d.NH, hs = C / NH, N = B * T;
    const int64_t NC = (int64_t)N * C;
    float *dy = c->scratch, *dyp = dy + NC, *dqkvr = dyp + NC, *dqkv = dqkvr + 3 * NC, *datt = dqkv + 3 * NC;
    const float *qkvr = S(c, 0), *att = S(c, 1), *y = S(c, 2);
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    float *dq = dqkvr, *dk = dqkvr + NC, *dv = dqkvr + 2 * NC;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sT = (long long)T * hs, sTT = (long long)T * T;
#if PLACER_HAVE_FLASH
    if (use_flash32(ctx, c)) {
        /* scratch (floats): dy [0, NC), dqkv [A, A + 3NC), the kernel's D after it */
        const int64_t A = (NC + 63) / 64 * 64, used = A + (3 * NC + 63) / 64 * 64;
        float *dqkv_f = c->scratch + A;
        const size_t fsb = flash_attn_bwd_scratch_bytes(B, T, C, NH);
        if ((int64_t)((fsb + 3) / 4) > c->mem.bwd_scratch - used)
            return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "attention_backward",
                           "the flash kernel's scratch does not fit the node's backward scratch", 0);
        /* with tdw: the transposed copies after the kernel's scratch, 4 NC floats */
        const int64_t t0 = used + ((int64_t)((fsb + 3) / 4) + 63) / 64 * 64;
        const int tdw = ctx->tf32_tdw && t0 + A + (3 * NC + 63) / 64 * 64 <= c->mem.bwd_scratch;
        float *tA = c->scratch + t0, *tB = tA + A;
        /* the weight and bias gradients on the side stream (side_stream.cu),
         * beside the input-gradient chain; with tdw all on one stream */
        if (!tdw) {
            RET(cu_side_fork(ctx));
            RET(linear_bwd_w(ctx, G(c, 2), c->dout, y, N, C, C, C));
            RET(colsum_fast(ctx, G(c, 3), c->dout, N, C));
            cu_side_back(ctx);
        }
        RET(linear_bwd_inp(ctx, dy, c->dout, P(c, 2), N, C, C, C, 0));
        if (tdw) {
            RET(transpose(ctx, tA, y, N, C));
            RET(transpose(ctx, tB, c->dout, N, C));
            RET(linear_bwd_w_t(ctx, G(c, 2), tB, tA, N, C, C));
            RET(colsum_fast(ctx, G(c, 3), c->dout, N, C));
        }
        int fe = flash_attn_bwd_tf32(dqkv_f, c->scratch + used, dy, qkvr, y, att, B, T, C, NH, ctx->stream);
        if (fe != 0)
            return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "flash_attn_bwd_tf32",
                           cudaGetErrorString((cudaError_t)fe), 0);
        KM("flash_attn_bwd_tf32");
        if (!tdw) {
            RET(cu_side_fork(ctx));
            RET(colsum_fast(ctx, G(c, 1), dqkv_f, N, 3 * C));
            RET(linear_bwd_w(ctx, G(c, 0), dqkv_f, c->in[0], N, C, 3 * C, 3 * C));
            cu_side_back(ctx);
            return linear_bwd_inp(ctx, c->din[0], dqkv_f, P(c, 0), N, C, 3 * C, 3 * C, c->acc[0]);
        }
        RET(colsum_fast(ctx, G(c, 1), dqkv_f, N, 3 * C));
        RET(linear_bwd_inp(ctx, c->din[0], dqkv_f, P(c, 0), N, C, 3 * C, 3 * C, c->acc[0]));
        /* x^T (C, N) and dqkv^T (3C, N) */
        RET(transpose(ctx, tA, c->in[0], N, C));
        RET(transpose(ctx, tB, dqkv_f, N, 3 * C));
        return linear_bwd_w_t(ctx, G(c, 0), tB, tA, N, C, 3 * C);
    }
#endif
    RET(linear_bwd_inp(ctx, dy, c->dout, P(c, 2), N, C, C, C, 0));
    RET(linear_bwd_w(ctx, G(c, 2), c->dout, y, N, C, C, C));
    RET(ctx->tf32_epi ? colsum_fast(ctx, G(c, 3), c->dout, N, C) : colsum(ctx, G(c, 3), c->dout, N, C));
    heads_tokens_k<<<permute_grid(T, hs, B * NH), 256, 0, ctx->stream>>>(dyp, dy, B, T, C, NH, 0);
    LAUNCHED();
    KM("heads_tokens_k");
    /* datt^T = v dy^T ; dv^T = dy^T att */
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, hs, sT, dyp, hs, sT, 0.0f, datt, T, sTT,
                     B * NH));
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dyp, hs, sT, att, T, sTT, 0.0f, dv, hs, sT,
                     B * NH));
    int64_t rows = (int64_t)B * NH * T;
    softmax_causal_bwd_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(datt, att, rows, T);
    LAUNCHED();
    KM("softmax_causal_bwd_k");
    /* dq^T = k^T dpre^T * scale ; dk^T = q^T dpre * scale */
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, scale, k, hs, sT, datt, T, sTT, 0.0f, dq, hs, sT,
                     B * NH));
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, scale, q, hs, sT, datt, T, sTT, 0.0f, dk, hs, sT,
                     B * NH));
    unpermute_qkv_k<<<permute_grid(T, hs, 3 * B * NH), 256, 0, ctx->stream>>>(dqkv, dqkvr, B, T, C, NH);
    LAUNCHED();
    KM("unpermute_qkv_k");
    RET(linear_bwd_inp(ctx, c->din[0], dqkv, P(c, 0), N, C, 3 * C, 3 * C, c->acc[0]));
    RET(linear_bwd_w(ctx, G(c, 0), dqkv, c->in[0], N, C, 3 * C, 3 * C));
    return ctx->tf32_epi ? colsum_fast(ctx, G(c, 1), dqkv, N, 3 * C) : colsum(ctx, G(c, 1), dqkv, N, 3 * C);
}

static pl_status mlp_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    float *h = S(c, 0), *g = S(c, 1);
    RET(check_size(ctx, (int64_t)N * 4 * C, "mlp"));
    if (ctx->tf32_epi) {
        const int64_t n4 = (int64_t)N * C; /* 4C columns, 4 a thread */
        if (ctx->tf32_gelu_epi || ((uintptr_t)h | (uintptr_t)g) % 16 != 0) {
            /* h = x W^T + b kept as the epilogue's aux output, g = gelu(h) */
            RET(gemm_lt32(ctx, CUBLAS_OP_T, CUBLAS_OP_N, 4 * C, N, C, P(c, 0), C, c->in[0], C, g, 4 * C, 0, E32_GELU,
                          P(c, 1), h));
        } else {
            /* h = x W^T + b (bias epilogue), then g = gelu(h): GPU call 2 timed the GELU_AUX_BIAS
             * epilogue at 48.5 us against 28.4 for the plain GEMM (1536x4096x384) */
            RET(linear_fwd_bias(ctx, h, c->in[0], P(c, 0), P(c, 1), N, C, 4 * C, 4 * C));
            gelu4_k<<<ceil_div(n4, 256), 256, 0, ctx->stream>>>((float4 *)g, (const float4 *)h, n4);
            LAUNCHED();
            KM("gelu4_k");
        }
        return linear_fwd_bias(ctx, c->out, g, P(c, 2), P(c, 3), N, 4 * C, C, C);
    }
    RET(linear_fwd(ctx, h, c->in[0], P(c, 0), N, C, 4 * C, 4 * C));
    bias_gelu_k<<<ceil_div((int64_t)N * 4 * C, 256), 256, 0, ctx->stream>>>(h, g, P(c, 1), N, 4 * C);
    LAUNCHED();
    KM("bias_gelu_k");
    RET(linear_fwd(ctx, c->out, g, P(c, 2), N, 4 * C, C, C));
    return bias_add(ctx, c->out, P(c, 3), N, C);
}

static pl_status mlp_backward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    const float *h = S(c, 0), *g = S(c, 1);
    float *dg = c->scratch;
    if (ctx->tf32_epi && !ctx->tf32_tdw) {
        /* the weight and bias gradients on the side stream (side_stream.cu) */
        RET(cu_side_fork(ctx));
        RET(linear_bwd_w(ctx, G(c, 2), c->dout, g, N, 4 * C, C, C));
        RET(colsum_fast(ctx, G(c, 3), c->dout, N, C));
        cu_side_back(ctx);
        RET(linear_bwd_inp(ctx, dg, c->dout, P(c, 2), N, 4 * C, C, C, 0));
        RET(gelu_colsum(ctx, dg, G(c, 1), h, N, 4 * C));
        RET(cu_side_fork(ctx));
        RET(linear_bwd_w(ctx, G(c, 0), dg, c->in[0], N, C, 4 * C, 4 * C));
        cu_side_back(ctx);
        return linear_bwd_inp(ctx, c->din[0], dg, P(c, 0), N, C, 4 * C, 4 * C, c->acc[0]);
    }
    RET(linear_bwd_inp(ctx, dg, c->dout, P(c, 2), N, 4 * C, C, C, 0));
    if (ctx->tf32_epi) {
        /* the transposed copies go into the saved slots (4 NC floats each),
         * each written once what it held is dead: h after GELU's backward,
         * g after its transpose, and so on. The saved h and g are gone after
         * this backward (a second backward from them would be garbage). */
        float *sh = S(c, 0), *sg = S(c, 1);
        RET(colsum_fast(ctx, G(c, 3), c->dout, N, C));
        RET(gelu_colsum(ctx, dg, G(c, 1), h, N, 4 * C));
        RET(transpose(ctx, sh, g, N, 4 * C));      /* g^T (4C, N) over h */
        RET(transpose(ctx, sg, c->dout, N, C));    /* dout^T (C, N) over g */
        RET(linear_bwd_w_t(ctx, G(c, 2), sg, sh, N, 4 * C, C));
        RET(transpose(ctx, sh, dg, N, 4 * C));     /* dh^T (4C, N) */
        RET(transpose(ctx, sg, c->in[0], N, C));   /* x^T (C, N) */
        RET(linear_bwd_inp(ctx, c->din[0], dg, P(c, 0), N, C, 4 * C, 4 * C, c->acc[0]));
        return linear_bwd_w_t(ctx, G(c, 0), sh, sg, N, C, 4 * C);
    }
    RET(linear_bwd_w(ctx, G(c, 2), c->dout, g, N, 4 * C, C, C));
    RET(colsum(ctx, G(c, 3), c->dout, N, C));
    gelu_bwd_k<<<ceil_div((int64_t)N * 4 * C, 256), 256, 0, ctx->stream>>>(dg, h, (int64_t)N * 4 * C);
    LAUNCHED();
    KM("gelu_bwd_k");
    RET(linear_bwd_inp(ctx, c->din[0], dg, P(c, 0), N, C, 4 * C, 4 * C, c->acc[0]));
    RET(linear_bwd_w(ctx, G(c, 0), dg, c->in[0], N, C, 4 * C, 4 * C));
    return colsum(ctx, G(c, 1), dg, N, 4 * C);
}

/* Whether the comma-separated list (an environment variable, or NULL) names tok. */
static int env_token(const char *list, const char *tok) {
    const size_t n = strlen(tok);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, tok, n)) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

pl_status cu_nodes_init(cu_ctx *ctx) {
    RET(cu_loss_init(ctx)); /* the loss kernels' shared memory (loss.cu) */
    int dev = 0;
    TRY(cudaGetDevice(&dev));
    /* the flash kernels use bf16 mma.sync (sm_80+); an older GPU (a T4) takes
     * the unfused attention path, whose scratch the executor always reserves */
    int major = 0;
    TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    ctx->flash_ok = major >= 8;
    /* the layernorm backward with 16 warps a block and the float4 layernorm
     * kernels; PLACER_LN_BWD=256 and PLACER_LN4=0 give the old ones */
    const char *lnb = getenv("PLACER_LN_BWD"), *ln4 = getenv("PLACER_LN4");
    ctx->ln_bwd_threads = lnb ? atoi(lnb) : 512;
    ctx->ln4 = !(ln4 && !strcmp(ln4, "0"));
    /* the TF32 mode's fused paths: PLACER_TF32_OFF=epi,loss,flash,ltnn,tune,headt (or
     * all) turns those off for measurement; PLACER_TF32_ON=tdw turns on the
     * weight gradients from transposed copies (call 5: the step 5.582 ms
     * against 5.349: the transposes cost more than the GEMMs save), =lt,gelu
     * what measured slower on the H200 (GPU call 2: every GEMM through
     * cuBLASLt, the weight gradients 51.7 / 50.8 / 40.9 / 30.7 us against
     * cublasGemmEx's 44.2 / 42.7 / 37.4 / 20.1; the fc GEMM with its GELU
     * epilogue 48.5 us against 28.4 plain, call 3: the step 5.688 ms against
     * 5.637); PLACER_LOSS32 picks the loss variant by name (loss32.h; the
     * default reg12, the one-pass lossr_k: fourth session, call 1,
     * loss_variants 422 us against lossf_k's 480, a copy of the same bytes
     * 388; graph step 5.019-5.028 ms against 5.071-5.088 with lossf_k).
     * Measured slower and removed: a split-K of the weight gradients over one
     * batched cuBLASLt GEMM (call 3: 50.7 / 49.6 / 36.6 / 23.4 us), a
     * layernorm backward with two rows a warp in flight (19.6 against 16.1
     * us). */
    if (ctx->compute == CUBLAS_COMPUTE_32F_FAST_TF32) {
        const char *off = getenv("PLACER_TF32_OFF"), *on = getenv("PLACER_TF32_ON");
        const int all = env_token(off, "all");
        ctx->tf32_epi = !(all || env_token(off, "epi"));
        const char *lv = getenv("PLACER_LOSS32");
        const int lp = cu_loss32_parse(lv);
        ctx->tf32_loss = all || env_token(off, "loss") ? LOSS32_OFF : lp > LOSS32_OFF ? lp : LOSS32_REG12;
        ctx->tf32_flash = ctx->flash_ok && !(all || env_token(off, "flash")) && !getenv("PLACER_NO_FLASH");
        ctx->tf32_ltnn = !(all || env_token(off, "ltnn"));
        ctx->tf32_tune = !(all || env_token(off, "tune"));
        ctx->tf32_lt = !all && env_token(on, "lt");
        ctx->tf32_gelu_epi = !all && env_token(on, "gelu");
        ctx->tf32_tdw = !all && env_token(on, "tdw");
        ctx->tf32_headt = !(all || env_token(off, "headt"));
        ctx->tf32_headlt = !(all || env_token(off, "headlt"));
    } else {
        ctx->tf32_headt = ctx->tf32_headlt = 0;
        ctx->tf32_epi = ctx->tf32_loss = ctx->tf32_flash = ctx->tf32_lt = ctx->tf32_tune = 0;
        ctx->tf32_ltnn = ctx->tf32_gelu_epi = ctx->tf32_tdw = 0;
    }
    return cu_init16(ctx, ctx->loss_smem_ok);
}

pl_status cu_node_forward(cu_ctx *ctx, const hw_node_call *c) {
    KM(NULL);
    if (c->bf16) {
        int done = 0;
        pl_status st = cu_node16(ctx, c, 0, &done);
        if (done) return st;
    }
    const int B = c->d.B, T = c->d.T, C = c->d.C, N = B * T;
    const int64_t NC = (int64_t)N * C;
    switch (c->kind) {
    case OP_EMBEDDING:
        RET(check_size(ctx, NC, "embedding"));
        embedding_fwd_k<<<ceil_div(NC, 256), 256, 0, ctx->stream>>>(c->out, c->tokens, P(c, 0), P(c, 1), N, T, C);
        LAUNCHED();
        KM("embedding_fwd_k");
        return PL_OK;
    case OP_LAYERNORM: return cu_layernorm_forward(ctx, c);
    case OP_ATTENTION: return attention_forward(ctx, c);
    case OP_RESIDUAL:
        if (NC % 4 == 0 && ((uintptr_t)c->out | (uintptr_t)c->in[0] | (uintptr_t)c->in[1]) % 16 == 0)
            residual_fwd_k<<<ceil_div(NC / 4, 256), 256, 0, ctx->stream>>>(
                (float4 *)c->out, (const float4 *)c->in[0], (const float4 *)c->in[1], NC / 4);
        else
            residual_fwd_scalar_k<<<ceil_div(NC, 256), 256, 0, ctx->stream>>>(c->out, c->in[0], c->in[1], NC);
        LAUNCHED();
        KM("residual_fwd_k");
        return PL_OK;
    case OP_MLP: return mlp_forward(ctx, c);
    case OP_HEAD: /* over the padded vocabulary: aligned GEMM sizes; the padding rows of w are 0 */
        if (ctx->tf32_headlt) /* TF32: through cuBLASLt, its algorithm chosen by timing */
            return gemm_lt32(ctx, CUBLAS_OP_T, CUBLAS_OP_N, c->d.Vp, N, C, P(c, 0), C, c->in[0], C, c->out, c->d.Vp, 0,
                             E32_NONE, NULL, NULL);
        return linear_fwd(ctx, c->out, c->in[0], P(c, 0), N, C, c->d.Vp, c->d.Vp);
    case OP_LOSS: return cu_loss_forward(ctx, c);
    default: return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cu_node_forward", "unknown node kind", 0);
    }
}

/* The backward split into B (input gradient) and W (weight gradients) of an
 * order that splits it (zb-h1, zb-h2: nodes.h, schedule.h), in strict fp32
 * (the plain paths, which every TF32 flag leaves): the whole backward's
 * kernels on the same operands, in two calls; B keeps attention's dqkv and
 * the MLP's dh in c->wstash. The head's weight gradient runs on the side
 * stream as in the whole backward (the same cuBLAS handle and workspace). */
static pl_status node_backward_part(cu_ctx *ctx, const hw_node_call *c) {
    if (ctx->compute == CUBLAS_COMPUTE_32F_FAST_TF32 || c->bf16)
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "node_backward_part",
                       "a split backward (B and W) runs in strict fp32 only", 0);
    const int B = c->d.B, T = c->d.T, C = c->d.C, NH = c->d.NH, hs = C / NH, N = B * T;
    const int64_t NC = (int64_t)N * C;
    const int w = c->part == HW_BWD_WEIGHT;
    switch (c->kind) {
    case OP_ATTENTION: {
        const float *y = S(c, 2);
        float *dqkv = c->wstash;
        if (w) {
            RET(linear_bwd_w(ctx, G(c, 2), c->dout, y, N, C, C, C));
            RET(colsum(ctx, G(c, 3), c->dout, N, C));
            RET(linear_bwd_w(ctx, G(c, 0), dqkv, c->in[0], N, C, 3 * C, 3 * C));
            return colsum(ctx, G(c, 1), dqkv, N, 3 * C);
        }
        float *dy = c->scratch, *dyp = dy + NC, *dqkvr = dyp + NC, *datt = dqkvr + 6 * NC;
        const float *qkvr = S(c, 0), *att = S(c, 1);
        const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
        float *dq = dqkvr, *dk = dqkvr + NC, *dv = dqkvr + 2 * NC;
        const float scale = 1.0f / sqrtf((float)hs);
        const long long sT = (long long)T * hs, sTT = (long long)T * T;
        RET(linear_bwd_inp(ctx, dy, c->dout, P(c, 2), N, C, C, C, 0));
        heads_tokens_k<<<permute_grid(T, hs, B * NH), 256, 0, ctx->stream>>>(dyp, dy, B, T, C, NH, 0);
        LAUNCHED();
        KM("heads_tokens_k");
        RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, hs, sT, dyp, hs, sT, 0.0f, datt, T, sTT,
                         B * NH));
        RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dyp, hs, sT, att, T, sTT, 0.0f, dv, hs, sT,
                         B * NH));
        int64_t rows = (int64_t)B * NH * T;
        softmax_causal_bwd_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(datt, att, rows, T);
        LAUNCHED();
        KM("softmax_causal_bwd_k");
        RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, scale, k, hs, sT, datt, T, sTT, 0.0f, dq, hs, sT,
                         B * NH));
        RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, scale, q, hs, sT, datt, T, sTT, 0.0f, dk, hs, sT,
                         B * NH));
        unpermute_qkv_k<<<permute_grid(T, hs, 3 * B * NH), 256, 0, ctx->stream>>>(dqkv, dqkvr, B, T, C, NH);
        LAUNCHED();
        KM("unpermute_qkv_k");
        return linear_bwd_inp(ctx, c->din[0], dqkv, P(c, 0), N, C, 3 * C, 3 * C, c->acc[0]);
    }
    case OP_MLP: {
        const float *h = S(c, 0), *g = S(c, 1);
        float *dg = c->wstash;
        if (w) {
            RET(linear_bwd_w(ctx, G(c, 2), c->dout, g, N, 4 * C, C, C));
            RET(colsum(ctx, G(c, 3), c->dout, N, C));
            RET(linear_bwd_w(ctx, G(c, 0), dg, c->in[0], N, C, 4 * C, 4 * C));
            return colsum(ctx, G(c, 1), dg, N, 4 * C);
        }
        RET(linear_bwd_inp(ctx, dg, c->dout, P(c, 2), N, 4 * C, C, C, 0));
        gelu_bwd_k<<<ceil_div((int64_t)N * 4 * C, 256), 256, 0, ctx->stream>>>(dg, h, (int64_t)N * 4 * C);
        LAUNCHED();
        KM("gelu_bwd_k");
        return linear_bwd_inp(ctx, c->din[0], dg, P(c, 0), N, C, 4 * C, 4 * C, c->acc[0]);
    }
    case OP_HEAD:
        if (w) {
            RET(cu_side_fork(ctx));
            RET(linear_bwd_w(ctx, G(c, 0), c->dout, c->in[0], N, C, c->d.Vp, c->d.Vp));
            cu_side_back(ctx);
            return PL_OK;
        }
        return linear_bwd_inp(ctx, c->din[0], c->dout, P(c, 0), N, C, c->d.Vp, c->d.Vp, c->acc[0]);
    default:
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "node_backward_part",
                       "a split backward needs a node with weight GEMMs (attention, MLP, head)", 0);
    }
}

static pl_status node_backward(cu_ctx *ctx, const hw_node_call *c) {
    KM(NULL);
    if (c->part != HW_BWD_WHOLE) return node_backward_part(ctx, c);
    if (c->bf16) {
        int done = 0;
        pl_status st = cu_node16(ctx, c, 1, &done);
        if (done) return st;
    }
    const int B = c->d.B, T = c->d.T, C = c->d.C, N = B * T;
    const int64_t NC = (int64_t)N * C;
    switch (c->kind) {
    case OP_EMBEDDING:
        RET(check_size(ctx, NC, "embedding"));
        embedding_bwd_wte_k<<<ceil_div(NC, 256), 256, 0, ctx->stream>>>(G(c, 0), c->tokens, c->dout, N, C);
        LAUNCHED();
        KM("embedding_bwd_wte_k");
        embedding_bwd_wpe_k<<<ceil_div((int64_t)T * C, 256), 256, 0, ctx->stream>>>(G(c, 1), c->dout, B, T, C);
        LAUNCHED();
        KM("embedding_bwd_wpe_k");
        return PL_OK;
    case OP_LAYERNORM: return cu_layernorm_backward(ctx, c);
    case OP_ATTENTION: return attention_backward(ctx, c);
    case OP_RESIDUAL:
        if (ctx->tf32_epi && NC % 4 == 0 && ((uintptr_t)c->din[0] | (uintptr_t)c->din[1] | (uintptr_t)c->dout) % 16 == 0)
            residual_bwd4_k<<<ceil_div(NC / 4, 256), 256, 0, ctx->stream>>>(
                (float4 *)c->din[0], (float4 *)c->din[1], (const float4 *)c->dout, NC / 4, c->acc[0], c->acc[1]);
        else
            residual_bwd_k<<<ceil_div(NC, 256), 256, 0, ctx->stream>>>(c->din[0], c->din[1], c->dout, NC, c->acc[0],
                                                                        c->acc[1]);
        LAUNCHED();
        KM("residual_bwd_k");
        return PL_OK;
    case OP_MLP: return mlp_backward(ctx, c);
    case OP_HEAD:
        /* the loss zeroes the padding columns of dlogits, so the padding rows
         * add nothing. The weight gradient on the side stream, beside the
         * input gradient (96 tiles, K = Vp). In TF32 it reads x^T (C, N),
         * made in the backward scratch: a K-major operand, where both as
         * stored are MN-major (benchmarks/hw/wgrad_layouts.cu on the H200:
         * 601 against 781 us for 384 x 50304 x 4096; the transpose 9.7 us). */
        RET(cu_side_fork(ctx));
        if (ctx->tf32_headt && c->mem.bwd_scratch >= NC) {
            RET(transpose(ctx, c->scratch, c->in[0], N, C));
            if (ctx->tf32_headlt)
                RET(gemm_lt32(ctx, CUBLAS_OP_T, CUBLAS_OP_T, C, c->d.Vp, N, c->scratch, N, c->dout, c->d.Vp, G(c, 0), C,
                              1, E32_NONE, NULL, NULL));
            else
                RET(gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_T, C, c->d.Vp, N, 1.0f, c->scratch, N, c->dout, c->d.Vp, 1.0f,
                         G(c, 0), C));
        } else {
            RET(linear_bwd_w(ctx, G(c, 0), c->dout, c->in[0], N, C, c->d.Vp, c->d.Vp));
        }
        cu_side_back(ctx);
        return linear_bwd_inp(ctx, c->din[0], c->dout, P(c, 0), N, C, c->d.Vp, c->d.Vp, c->acc[0]);
    case OP_LOSS: return PL_OK; /* fused into the forward */
    default: return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cu_node_backward", "unknown node kind", 0);
    }
}

/* The node's backward, then the compute stream waits for what it put on the
 * side stream (side_stream.cu), also when it failed half way. */
pl_status cu_node_backward(cu_ctx *ctx, const hw_node_call *c) {
    pl_status st = node_backward(ctx, c);
    pl_status sj = cu_side_join(ctx);
    return st != PL_OK ? st : sj;
}

pl_status cu_add(cu_ctx *ctx, float *y, const float *x, int64_t n) {
    KM(NULL);
    add_k<<<ceil_div(n, 256), 256, 0, ctx->stream>>>(y, x, n);
    LAUNCHED();
    KM("add_k");
    return PL_OK;
}

pl_status cu_adamw(cu_ctx *ctx, float *p, const float *g, float *m, float *v, int64_t n, const hw_adamw_args *a) {
    KM(NULL);
    if (a->p16) {
        RET(cu_adamw16(ctx, p, g, m, v, n, a));
    } else {
        if (n % 4 == 0 && ((uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) % 16 == 0)
            adamw_k<<<ceil_div(n / 4, 256), 256, 0, ctx->stream>>>((float4 *)p, (const float4 *)g, (float4 *)m,
                                                                    (float4 *)v, n / 4, a->lr, a->beta1, a->beta2,
                                                                    a->eps, a->weight_decay, a->t_dev, a->t);
        else
            adamw_scalar_k<<<ceil_div(n, 256), 256, 0, ctx->stream>>>(p, g, m, v, n, a->lr, a->beta1, a->beta2,
                                                                       a->eps, a->weight_decay, a->t_dev, a->t);
        LAUNCHED();
        KM("adamw_k");
    }
    if (a->t_dev) {
        adamw_tick_k<<<1, 1, 0, ctx->stream>>>(a->t_dev);
        LAUNCHED();
        KM("adamw_tick_k");
    }
    return PL_OK;
}

