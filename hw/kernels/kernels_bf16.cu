/*
 * kernels_bf16.cu: the bf16 mixed mode of the node math (hw.h states its
 * rules; kernels.cu is the fp32 / TF32 path, kernels_common.cuh what the
 * two share).
 */
#include "kernels_common.cuh"

/* ======================================================================
 * The bf16 mixed mode (hw.h states its rules). GEMMs are cuBLASLt with
 * bf16 A and B, fp32 accumulation and an fp32 or bf16 D, bias and GELU in
 * the epilogue; everything else is the small kernels below. Where a
 * cuBLASLt epilogue has no algorithm for a shape, the same result comes
 * from cublasGemmEx and a separate kernel.
 *
 * Attention uses the flash kernel (hw/kernels/flash_attention.h) when it is built
 * in (PLACER_HAVE_FLASH): it reads qkv (B,T,3C) with its bias and writes
 * y (B,T,C) and the rows' log-sum-exp, so neither the T x T matrix nor the
 * permutes exist. Without it, the attention core runs as in the fp32 path
 * (TF32 batched GEMMs around the fp32 softmax) on the bf16 qkv, and only
 * the projections are bf16 GEMMs.
 * ====================================================================== */
#include <cuda_bf16.h>
#if PLACER_HAVE_FLASH
#include "flash_attention.h"
#endif

typedef __nv_bfloat16 bf16;

enum { EPI_NONE = 0, EPI_BIAS, EPI_GELU_AUX_BIAS, EPI_DGELU };

struct cu_lt_entry {
    int ta, tb, m, n, k, lda, ldb, ldc, ctype, epi, bias32, accumulate;
    int ok; /* 1: desc and algo usable; 0: no algorithm, use the fallback */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};
/* distinct GEMMs (shape, epilogue, output type, accumulate): about 20 per
 * micro-batch size of a GPT; the profiler probes every size on one device */
#define CU_LT_CACHE 512

#define LTTRY(x) BLAS_TRY(ctx->err, ctx->err_len, x)

void cu_nodes_fini(cu_ctx *ctx) {
    cu_nodes_fini32(ctx); /* the TF32 mode's cache (kernels.cu) */
    if (ctx->lt_cache) {
        for (int i = 0; i < ctx->n_lt; i++) {
            cu_lt_entry *e = &ctx->lt_cache[i];
            if (e->desc) cublasLtMatmulDescDestroy(e->desc);
            if (e->la) cublasLtMatrixLayoutDestroy(e->la);
            if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
            if (e->lc) cublasLtMatrixLayoutDestroy(e->lc);
        }
        free(ctx->lt_cache);
        ctx->lt_cache = NULL;
        ctx->n_lt = 0;
    }
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    ctx->lt = NULL;
}

/* ---------------- small bf16 kernels ---------------- */

/* dst (bf16) = src (fp32), n elements; 4 at a time when n % 4 == 0 */
__global__ void to_bf16_k(bf16 *dst, const float *src, int64_t n) {
    int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n) {
        float4 v = *(const float4 *)(src + i);
        __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
        *(__nv_bfloat162 *)(dst + i) = a;
        *(__nv_bfloat162 *)(dst + i + 2) = b;
    } else {
        for (; i < n; i++) dst[i] = __float2bfloat16_rn(src[i]);
    }
}

/* x = float(bf16(x)) in place */
__global__ void round_bf16_k(float *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

/* out (N, OC) += bias (OC): bf16 out with a bf16 bias, or fp32 with fp32 */
__global__ void bias_add16_k(bf16 *out, const bf16 *bias, int N, int OC) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * OC) out[i] = __float2bfloat16_rn(__bfloat162float(out[i]) + __bfloat162float(bias[i % OC]));
}

__global__ void bias_add32_k(float *out, const float *bias, int N, int OC) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * OC) out[i] += bias[i % OC];
}

/* g = gelu(h) (both bf16), the fallback of the GELU epilogue */
__global__ void gelu16_k(bf16 *g, const bf16 *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) g[i] = __float2bfloat16_rn(gelu_f(__bfloat162float(h[i])));
}

/* dh (bf16) = dg (fp32) * gelu'(h (bf16)) */
__global__ void gelu_bwd16_k(bf16 *dh, const float *dg, const bf16 *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dh[i] = __float2bfloat16_rn(dg[i] * gelu_grad_f(__bfloat162float(h[i])));
}

/* dbias (OC) += column sums of a bf16 (N, OC); block (32, 8), grid (OC/32, chunks) */
__global__ void colsum16_k(float *dbias, const bf16 *dout, int64_t N, int OC) {
    __shared__ float sh[8][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < OC)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8)
            s += __bfloat162float(dout[n * OC + col]);
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += sh[k][threadIdx.x];
        atomicAdd(&dbias[col], t);
    }
}

/* qkv (B,T,3C) bf16, bias included -> qkvr (3,B,NH,T,hs) fp32 */
__global__ void permute16_k(float *qkvr, const bf16 *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH, THS = T * hs, R = 3 * B * NH;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= THS) return;
    int t = idx / hs, e = idx - t * hs;
    for (int r = blockIdx.y; r < R; r += gridDim.y) {
        int part = r / (B * NH), rem = r - part * B * NH, b = rem / NH, h = rem - b * NH;
        qkvr[(int64_t)r * THS + idx] = __bfloat162float(qkv[((int64_t)b * T + t) * 3 * C + part * C + h * hs + e]);
    }
}

/* The loss on bf16 logits: one block per row; the row (bf16) is kept in
 * shared memory (Vp * 2 bytes: 100.6 KB for GPT-2's vocabulary, so two
 * blocks share an SM and one block's reads overlap the other's writes). One
 * pass reads the row with 16-byte loads, keeping an online max and sum in
 * fp32; the second writes dlogits = (softmax - onehot) * inv_norm in bf16
 * from shared memory, padding columns 0. dlogits may alias logits. Vp must
 * be a multiple of 8 (it is of 64). */
#define LOSS16_THREADS 512
#define LOSS16_UNROLL 4
template <bool CACHE>
__global__ void __launch_bounds__(LOSS16_THREADS, 2) loss16_k(float *losses, bf16 *dlogits, double *loss_sum,
                                                              const bf16 *logits, const int *targets, float inv_norm,
                                                              int V, int Vp) {
    extern __shared__ uint4 row16[];
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    const uint4 *x = (const uint4 *)(logits + row * Vp);
    uint4 *d = (uint4 *)(dlogits + row * Vp);
    const int tgt = targets[row], nvec = Vp / 8;
    float m = -INFINITY, s = 0.0f;
    /* LOSS16_UNROLL independent 16-byte loads in flight per thread */
    for (int base = threadIdx.x; base < nvec; base += LOSS16_UNROLL * blockDim.x) {
        uint4 u[LOSS16_UNROLL];
#pragma unroll
        for (int j = 0; j < LOSS16_UNROLL; j++) {
            int i = base + j * blockDim.x;
            if (i < nvec) u[j] = x[i];
        }
#pragma unroll
        for (int j = 0; j < LOSS16_UNROLL; j++) {
            int i = base + j * blockDim.x;
            if (i >= nvec) break;
            if (CACHE) row16[i] = u[j];
            const bf16 *e = (const bf16 *)&u[j];
            float v[8], mx = -INFINITY;
            if (i * 8 + 8 <= V) { /* a whole vector of real columns: no per-element guards */
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    v[k] = __bfloat162float(e[k]);
                    mx = fmaxf(mx, v[k]);
                }
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    v[k] = i * 8 + k < V ? __bfloat162float(e[k]) : -INFINITY;
                    mx = fmaxf(mx, v[k]);
                }
            }
            if (mx == -INFINITY) continue; /* padding only */
            if (mx > m) {
                s = m == -INFINITY ? 0.0f : s * __expf(m - mx);
                m = mx;
            }
#pragma unroll
            for (int k = 0; k < 8; k++) s += __expf(v[k] - m); /* exp(-inf) = 0 for padding */
        }
    }
    const float M = block_reduce(m, red, true);
    s = m == -INFINITY ? 0.0f : s * __expf(m - M);
    const float S = block_reduce(s, red, false);
    /* block_reduce's barriers order the shared row's writes before these reads */
    if (threadIdx.x == 0) {
        float xt = __bfloat162float(CACHE ? ((const bf16 *)row16)[tgt] : logits[row * Vp + tgt]);
        float loss = logf(S) + M - xt;
        losses[row] = loss;
        if (loss_sum) atomicAdd(loss_sum, (double)loss);
    }
    if (!CACHE) __syncthreads(); /* thread 0 reads logit[tgt] before anyone overwrites it */
    const float inv = 1.0f / S;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        uint4 u = CACHE ? row16[i] : x[i];
        const bf16 *e = (const bf16 *)&u;
        uint4 o;
        bf16 *oe = (bf16 *)&o;
        if (i * 8 + 8 <= V && (tgt < i * 8 || tgt >= i * 8 + 8)) { /* the common case: no guards, no target */
            const float sc = inv * inv_norm;
#pragma unroll
            for (int k = 0; k < 8; k++) oe[k] = __float2bfloat16_rn(__expf(__bfloat162float(e[k]) - M) * sc);
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int col = i * 8 + k;
                float p = col < V ? __expf(__bfloat162float(e[k]) - M) * inv : 0.0f;
                oe[k] = __float2bfloat16_rn(col < V ? (p - (col == tgt ? 1.0f : 0.0f)) * inv_norm : 0.0f);
            }
        }
        d[i] = o;
    }
}

/* AdamW as adamw_k, writing the bf16 copy of the updated weights too */
__global__ void adamw16_k(float4 *p, const float4 *g, float4 *m, float4 *v, uint2 *p16, int64_t n4, float lr,
                          float b1, float b2, float eps, float wd, const int *t_dev, int t_host) {
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
    __nv_bfloat162 lo = __floats2bfloat162_rn(P.x, P.y), hi = __floats2bfloat162_rn(P.z, P.w);
    uint2 o;
    memcpy(&o.x, &lo, 4);
    memcpy(&o.y, &hi, 4);
    p16[i] = o;
}

__global__ void adamw16_scalar_k(float *p, const float *g, float *m, float *v, bf16 *p16, int64_t n, float lr,
                                 float b1, float b2, float eps, float wd, const int *t_dev, int t_host) {
    float bc1, bc2;
    adamw_bias(t_dev, t_host, b1, b2, &bc1, &bc2);
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float M = b1 * m[i] + (1.0f - b1) * g[i], Vv = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    m[i] = M;
    v[i] = Vv;
    float P = p[i] - lr * ((M / bc1) / (sqrtf(Vv / bc2) + eps) + wd * p[i]);
    p[i] = P;
    p16[i] = __float2bfloat16_rn(P);
}

/* ---------------- launchers ---------------- */

static pl_status to_bf16(cu_ctx *ctx, bf16 *dst, const float *src, int64_t n) {
    if (((uintptr_t)src % 16) || ((uintptr_t)dst % 4)) /* the vector path's alignment */
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "to_bf16", "misaligned tensor", 0);
    to_bf16_k<<<ceil_div((n + 3) / 4, 256), 256, 0, ctx->stream>>>(dst, src, n);
    LAUNCHED();
    KM("to_bf16_k");
    return PL_OK;
}

/* Column sums with wide loads: each thread adds VEC consecutive columns (a
 * 16-byte load: 8 bf16 or 4 floats) over a strided set of rows; block
 * (32, 8) covers 32 * VEC columns; the 8 row groups meet in shared memory
 * and one atomic per column and block adds into dbias. OC % VEC == 0 and
 * 16-byte aligned rows. */
template <typename Tv, int VEC>
__global__ void colsumv_k(float *dbias, const Tv *dout, int64_t N, int OC) {
    __shared__ float sh[8][32 * VEC + 1];
    const int c0 = (blockIdx.x * 32 + threadIdx.x) * VEC;
    float acc[VEC];
#pragma unroll
    for (int k = 0; k < VEC; k++) acc[k] = 0.0f;
    if (c0 < OC)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8) {
            uint4 u = *(const uint4 *)(dout + n * OC + c0);
            const Tv *e = (const Tv *)&u;
#pragma unroll
            for (int k = 0; k < VEC; k++) acc[k] += (float)e[k];
        }
#pragma unroll
    for (int k = 0; k < VEC; k++) sh[threadIdx.y][threadIdx.x * VEC + k] = acc[k];
    __syncthreads();
    for (int j = threadIdx.y * 32 + threadIdx.x; j < 32 * VEC; j += 256) {
        int col = blockIdx.x * 32 * VEC + j;
        if (col >= OC) continue;
        float t = 0.0f;
        for (int r = 0; r < 8; r++) t += sh[r][j];
        atomicAdd(&dbias[col], t);
    }
}

/* dh (bf16) = dg (fp32) * gelu'(h (bf16)), 8 elements a thread */
__global__ void gelu_bwd16v_k(uint4 *dh, const float4 *dg, const uint4 *h, int64_t n8) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    uint4 hv = h[i], o;
    float4 a = dg[2 * i], b = dg[2 * i + 1];
    const bf16 *he = (const bf16 *)&hv;
    bf16 *oe = (bf16 *)&o;
    float d[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < 8; k++) oe[k] = __float2bfloat16_rn(d[k] * gelu_grad_f(__bfloat162float(he[k])));
    dh[i] = o;
}

static pl_status gelu_bwd16(cu_ctx *ctx, bf16 *dh, const float *dg, const bf16 *h, int64_t n) {
    if (n % 8 == 0 && ((uintptr_t)dh | (uintptr_t)dg | (uintptr_t)h) % 16 == 0)
        gelu_bwd16v_k<<<ceil_div(n / 8, 256), 256, 0, ctx->stream>>>((uint4 *)dh, (const float4 *)dg, (const uint4 *)h,
                                                                      n / 8);
    else
        gelu_bwd16_k<<<ceil_div(n, 256), 256, 0, ctx->stream>>>(dh, dg, h, n);
    LAUNCHED();
    KM("gelu_bwd16_k");
    return PL_OK;
}

/* Fused passes over a gradient with a bias (block (32, 8), grid (OC / 128
 * or 256, chunks), rows strided as in colsumv_k):
 *   tobf16_colsum_k  d16 = bf16(dout) and dbias += column sums of the fp32
 *                    dout (the attention and MLP projections' backward)
 *   gelu_colsum_k    dh = bf16(dg * gelu'(h)) and dbias += column sums of
 *                    the rounded dh (the MLP fc's backward)
 * OC % 8 == 0 and 16-byte aligned rows. */
__global__ void tobf16_colsum_k(uint2 *d16, float *dbias, const float4 *dout, int64_t N, int OC) {
    __shared__ float sh[8][128 + 1];
    const int q = blockIdx.x * 32 + threadIdx.x, c0 = q * 4, q4 = OC / 4; /* 4 columns a thread */
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (c0 < OC)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8) {
            float4 v = dout[n * q4 + q];
            acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
            __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
            uint2 o;
            memcpy(&o.x, &lo, 4);
            memcpy(&o.y, &hi, 4);
            d16[n * q4 + q] = o;
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

__global__ void gelu_colsum_k(uint4 *dh, float *dbias, const float4 *dg, const uint4 *h, int64_t N, int OC) {
    __shared__ float sh[8][256 + 1];
    const int q = blockIdx.x * 32 + threadIdx.x, c0 = q * 8, q8 = OC / 8; /* 8 columns a thread */
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; k++) acc[k] = 0.0f;
    if (c0 < OC)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8) {
            int64_t i = n * q8 + q;
            uint4 hv = h[i], o;
            float4 a = dg[2 * i], b = dg[2 * i + 1];
            const bf16 *he = (const bf16 *)&hv;
            bf16 *oe = (bf16 *)&o;
            float d[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int k = 0; k < 8; k++) {
                oe[k] = __float2bfloat16_rn(d[k] * gelu_grad_f(__bfloat162float(he[k])));
                acc[k] += __bfloat162float(oe[k]);
            }
            dh[i] = o;
        }
#pragma unroll
    for (int k = 0; k < 8; k++) sh[threadIdx.y][threadIdx.x * 8 + k] = acc[k];
    __syncthreads();
    for (int j = threadIdx.y * 32 + threadIdx.x; j < 256; j += 256) {
        int col = blockIdx.x * 256 + j;
        if (col >= OC) continue;
        float t = 0.0f;
        for (int r = 0; r < 8; r++) t += sh[r][j];
        atomicAdd(&dbias[col], t);
    }
}

static int colsum_chunks(int64_t N);

/* d16 = bf16(dout (N, OC)) and dbias += its column sums, in one pass */
static pl_status tobf16_colsum(cu_ctx *ctx, bf16 *d16, float *dbias, const float *dout, int64_t N, int OC) {
    if (OC % 8 != 0 || ((uintptr_t)d16 | (uintptr_t)dout) % 16 != 0) {
        RET(to_bf16(ctx, d16, dout, N * OC));
        return colsum(ctx, dbias, dout, N, OC);
    }
    tobf16_colsum_k<<<dim3(ceil_div(OC, 128), colsum_chunks(N)), dim3(32, 8), 0, ctx->stream>>>(
        (uint2 *)d16, dbias, (const float4 *)dout, N, OC);
    LAUNCHED();
    KM("tobf16_colsum_k");
    return PL_OK;
}

static pl_status colsum16(cu_ctx *ctx, float *dbias, const bf16 *dout, int64_t N, int OC);

/* dh = bf16(dg * gelu'(h)) over (N, OC) and dbias += column sums of dh */
static pl_status gelu_colsum(cu_ctx *ctx, bf16 *dh, float *dbias, const float *dg, const bf16 *h, int64_t N, int OC) {
    if (OC % 8 != 0 || ((uintptr_t)dh | (uintptr_t)dg | (uintptr_t)h) % 16 != 0) {
        RET(gelu_bwd16(ctx, dh, dg, h, N * OC));
        return colsum16(ctx, dbias, dh, N, OC);
    }
    gelu_colsum_k<<<dim3(ceil_div(OC, 256), colsum_chunks(N)), dim3(32, 8), 0, ctx->stream>>>(
        (uint4 *)dh, dbias, (const float4 *)dg, (const uint4 *)h, N, OC);
    LAUNCHED();
    KM("gelu_colsum_k");
    return PL_OK;
}

static int colsum_chunks(int64_t N) {
    int chunks = (int)(N / 64);
    return chunks < 1 ? 1 : chunks > 128 ? 128 : chunks;
}

static pl_status colsum16(cu_ctx *ctx, float *dbias, const bf16 *dout, int64_t N, int OC) {
    if (OC % 8 == 0 && (uintptr_t)dout % 16 == 0)
        colsumv_k<bf16, 8><<<dim3(ceil_div(OC, 256), colsum_chunks(N)), dim3(32, 8), 0, ctx->stream>>>(dbias, dout, N, OC);
    else
        colsum16_k<<<dim3(ceil_div(OC, 32), colsum_chunks(N)), dim3(32, 8), 0, ctx->stream>>>(dbias, dout, N, OC);
    LAUNCHED();
    KM("colsum16_k");
    return PL_OK;
}


/* Row-major GEMM in the column-major view (as gemm above), A and B bf16:
 * D (m x n, ldc; ctype CUDA_R_32F or CUDA_R_16BF) = alpha op(A) op(B)
 * (+ D when accumulate), then the epilogue: EPI_BIAS adds bias (length m;
 * fp32 when bias32, else bf16), EPI_GELU_AUX_BIAS adds the bf16 bias, stores
 * the sum in aux (bf16, ld ldc) and D = gelu(sum); EPI_DGELU multiplies by
 * gelu'(aux) (aux the bf16 pre-activation, ld ldc) into a bf16 D, and takes
 * in `bias` an fp32 m x n scratch for its fallback. */
static pl_status gemm16(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const bf16 *A,
                        int lda, const bf16 *B, int ldb, void *D, cudaDataType_t ctype, int ldc, int accumulate,
                        int epi, const void *bias, int bias32, bf16 *aux) {
    cu_lt_entry *e = NULL;
    for (int i = 0; i < ctx->n_lt; i++) {
        cu_lt_entry *x = &ctx->lt_cache[i];
        if (x->ta == (int)ta && x->tb == (int)tb && x->m == m && x->n == n && x->k == k && x->lda == lda &&
            x->ldb == ldb && x->ldc == ldc && x->ctype == (int)ctype && x->epi == epi && x->bias32 == bias32 &&
            x->accumulate == accumulate) {
            e = x;
            break;
        }
    }
    if (!e) {
        if (!ctx->lt_cache) {
            ctx->lt_cache = (cu_lt_entry *)calloc(CU_LT_CACHE, sizeof *ctx->lt_cache);
            if (!ctx->lt_cache) return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm16", "out of host memory", 0);
        }
        if (ctx->n_lt == CU_LT_CACHE)
            return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm16", "too many GEMM shapes", 0);
        e = &ctx->lt_cache[ctx->n_lt++];
        memset(e, 0, sizeof *e);
        e->ta = ta; e->tb = tb; e->m = m; e->n = n; e->k = k; e->lda = lda; e->ldb = ldb; e->ldc = ldc;
        e->ctype = ctype; e->epi = epi; e->bias32 = bias32; e->accumulate = accumulate;
        LTTRY(cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
        LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
        cublasLtEpilogue_t ep = epi == EPI_BIAS ? CUBLASLT_EPILOGUE_BIAS
                                : epi == EPI_GELU_AUX_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                : epi == EPI_DGELU         ? CUBLASLT_EPILOGUE_DGELU
                                                           : CUBLASLT_EPILOGUE_DEFAULT;
        LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        if (epi == EPI_BIAS || epi == EPI_GELU_AUX_BIAS) {
            cudaDataType_t bt = bias32 ? CUDA_R_32F : CUDA_R_16BF;
            LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        }
        if (epi == EPI_GELU_AUX_BIAS || epi == EPI_DGELU) {
            int64_t ld = ldc;
            LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
        }
        LTTRY(cublasLtMatrixLayoutCreate(&e->la, CUDA_R_16BF, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda));
        LTTRY(cublasLtMatrixLayoutCreate(&e->lb, CUDA_R_16BF, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb));
        LTTRY(cublasLtMatrixLayoutCreate(&e->lc, ctype, m, n, ldc));
        cublasLtMatmulPreference_t pref = NULL;
        LTTRY(cublasLtMatmulPreferenceCreate(&pref));
        size_t wsb = ctx->ws_bytes;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx->lt, e->desc, e->la, e->lb, e->lc, e->lc, pref, 1, &res,
                                                           &found);
        cublasLtMatmulPreferenceDestroy(pref);
        e->ok = hs == CUBLAS_STATUS_SUCCESS && found > 0;
        if (e->ok) e->algo = res.algo;
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (e->ok) {
        if (epi == EPI_BIAS || epi == EPI_GELU_AUX_BIAS)
            LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        if (epi == EPI_GELU_AUX_BIAS || epi == EPI_DGELU)
            LTTRY(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        LTTRY(cublasLtMatmul(ctx->lt, e->desc, &alpha, A, e->la, B, e->lb, &beta, D, e->lc, D, e->lc, &e->algo, ctx->ws,
                             ctx->ws_bytes, ctx->stream));
    } else {
        /* no cuBLASLt algorithm: cublasGemmEx, then the epilogue as kernels */
        void *out = epi == EPI_GELU_AUX_BIAS ? (void *)aux : epi == EPI_DGELU ? (void *)bias : D;
        BTRY(cublasGemmEx(ctx->blas, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, out,
                          epi == EPI_DGELU ? CUDA_R_32F : ctype, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (epi == EPI_DGELU) {
            int64_t total = (int64_t)m * n;
            if (ldc != m)
                return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm16", "epilogue fallback needs ldc == m", 0);
            gelu_bwd16_k<<<ceil_div(total, 256), 256, 0, ctx->stream>>>((bf16 *)D, (const float *)bias, aux, total);
            LAUNCHED();
        } else if (epi != EPI_NONE) {
            int64_t total = (int64_t)m * n;
            RET(check_size(ctx, total, "gemm16 epilogue"));
            if (ldc != m)
                return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "gemm16", "epilogue fallback needs ldc == m", 0);
            if (ctype == CUDA_R_32F)
                bias_add32_k<<<ceil_div(total, 256), 256, 0, ctx->stream>>>((float *)out, (const float *)bias, n, m);
            else
                bias_add16_k<<<ceil_div(total, 256), 256, 0, ctx->stream>>>((bf16 *)out, (const bf16 *)bias, n, m);
            LAUNCHED();
            if (epi == EPI_GELU_AUX_BIAS) {
                gelu16_k<<<ceil_div(total, 256), 256, 0, ctx->stream>>>((bf16 *)D, aux, total);
                LAUNCHED();
            }
        }
    }
    if (ctx->kprof) {
        char nm[48];
        snprintf(nm, sizeof nm, "lt %dx%dx%d%s%s%s", m, n, k, ctype == CUDA_R_16BF ? " bf16" : "",
                 epi == EPI_GELU_AUX_BIAS ? " gelu" : epi == EPI_BIAS ? " bias" : epi == EPI_DGELU ? " dgelu" : "",
                 e->ok ? "" : " (fallback)");
        KM(gemm_name_str(ctx->kprof, nm));
    }
    return PL_OK;
}

/* The linear layers in bf16 (weights w (OC, C) from the copy):
 * out (N, OC; ld ldo) = x @ w^T (+ bias) */
static pl_status lin16_fwd(cu_ctx *ctx, void *out, cudaDataType_t ot, const bf16 *x, const bf16 *w, int N, int C,
                           int OC, int ldo, int epi, const void *bias, int bias32, bf16 *aux) {
    return gemm16(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w, C, x, C, out, ot, ldo, 0, epi, bias, bias32, aux);
}

/* dinp (N, C; fp32 or bf16) (=, or += when acc) = dout (N, OC; ld ldd) @ w */
static pl_status lin16_bwd_inp(cu_ctx *ctx, void *dinp, cudaDataType_t dt, const bf16 *dout, const bf16 *w, int N,
                               int C, int OC, int ldd, int acc) {
    return gemm16(ctx, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, w, C, dout, ldd, dinp, dt, C, acc, EPI_NONE, NULL, 0, NULL);
}

/* dw (OC, C; fp32) += dout^T @ x */
static pl_status lin16_bwd_w(cu_ctx *ctx, float *dw, const bf16 *dout, const bf16 *x, int N, int C, int OC, int ldd) {
    return gemm16(ctx, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, x, C, dout, ldd, dw, CUDA_R_32F, C, 1, EPI_NONE, NULL, 0,
                  NULL);
}

#define P16(c, k) ((const bf16 *)(c)->params16 + (c)->pl.off[k])
/* a bf16 view at float offset o of the scratch (offsets are multiples of 64 floats) */
#define SCR16(c, o) ((bf16 *)((c)->scratch + (o)))

static int64_t al64(int64_t x) { return (x + 63) / 64 * 64; }

/* attention's bf16 input copy: after the T x T block (or lse) in saved slot 1 (param_memory.c) */
static bf16 *attn_x16(const hw_node_call *c) {
    return (bf16 *)(c->saved + c->mem.saved_off[1] + al64((int64_t)c->d.B * c->d.NH * c->d.T * c->d.T));
}

/* Whether the flash kernel takes this call (flash_attention.h's
 * requirements); otherwise the attention core runs unfused. Forward and
 * backward of a node decide alike, so the saved tensors match. */
static int use_flash(const cu_ctx *ctx, const hw_node_call *c) {
#if PLACER_HAVE_FLASH
    const int hs = c->d.C / c->d.NH;
    return ctx->flash_ok && (hs == 64 || hs == 128) && c->d.C % 8 == 0 && c->d.B * c->d.NH <= 65535 && !getenv("PLACER_NO_FLASH");
#else
    (void)ctx;
    (void)c;
    return 0;
#endif
}

static pl_status attention_forward16(cu_ctx *ctx, const hw_node_call *c) {
    const int B = c->d.B, T = c->d.T, C = c->d.C, NH = c->d.NH, N = B * T;
    const int64_t NC = (int64_t)N * C;
    RET(check_size(ctx, 3 * NC, "attention"));
    bf16 *x16 = attn_x16(c); /* kept for the backward */
    RET(to_bf16(ctx, x16, c->in[0], NC));
    if (use_flash(ctx, c)) {
#if PLACER_HAVE_FLASH
        bf16 *qkv16 = (bf16 *)S(c, 0), *y16 = (bf16 *)S(c, 2);
        float *lse = S(c, 1);
        RET(lin16_fwd(ctx, qkv16, CUDA_R_16BF, x16, P16(c, 0), N, C, 3 * C, 3 * C, EPI_BIAS, P16(c, 1), 0, NULL));
        int fe = flash_attn_fwd_bf16(y16, lse, qkv16, B, T, C, NH, ctx->stream);
        if (fe != 0)
            return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "flash_attn_fwd_bf16",
                           cudaGetErrorString((cudaError_t)fe), 0);
        KM("flash_attn_fwd");
        return lin16_fwd(ctx, c->out, CUDA_R_32F, y16, P16(c, 2), N, C, C, C, EPI_BIAS, P(c, 3), 1, NULL);
#endif
    }
    const int hs = C / NH;
    bf16 *qkv16 = SCR16(c, al64(NC));
    float *yp = c->scratch + al64(NC) + al64(2 * NC);
    bf16 *y16 = SCR16(c, al64(NC) + al64(2 * NC) + al64(NC));
    float *qkvr = S(c, 0), *att = S(c, 1), *y = S(c, 2);
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    RET(lin16_fwd(ctx, qkv16, CUDA_R_16BF, x16, P16(c, 0), N, C, 3 * C, 3 * C, EPI_BIAS, P16(c, 1), 0, NULL));
    permute16_k<<<permute_grid(T, hs, 3 * B * NH), 256, 0, ctx->stream>>>(qkvr, qkv16, B, T, C, NH);
    LAUNCHED();
    KM("permute16_k");
    const float scale = 1.0f / sqrtf((float)hs);
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, hs, (long long)T * hs, q, hs,
                     (long long)T * hs, 0.0f, att, T, (long long)T * T, B * NH));
    int64_t rows = (int64_t)B * NH * T;
    softmax_causal_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(att, rows, T);
    LAUNCHED();
    KM("softmax_causal_k");
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, hs, (long long)T * hs, att, T,
                     (long long)T * T, 0.0f, yp, hs, (long long)T * hs, B * NH));
    heads_tokens_k<<<permute_grid(T, hs, B * NH), 256, 0, ctx->stream>>>(y, yp, B, T, C, NH, 1);
    LAUNCHED();
    KM("heads_tokens_k");
    RET(to_bf16(ctx, y16, y, NC));
    return lin16_fwd(ctx, c->out, CUDA_R_32F, y16, P16(c, 2), N, C, C, C, EPI_BIAS, P(c, 3), 1, NULL);
}

static pl_status attention_backward16(cu_ctx *ctx, const hw_node_call *c) {
    const int B = c->d.B, T = c->d.T, C = c->d.C, NH = c->d.NH, N = B * T;
    const int64_t NC = (int64_t)N * C;
    if (use_flash(ctx, c)) {
#if PLACER_HAVE_FLASH
    /* scratch: d16, dy16, dqkv16, x16 (bf16), then the flash kernel's own */
    bf16 *d16 = SCR16(c, 0), *dy16 = SCR16(c, al64(NC)), *dqkv16 = SCR16(c, 2 * al64(NC));
    const bf16 *x16 = attn_x16(c);
    int64_t used = 2 * al64(NC) + al64(2 * NC);
    size_t fsb = flash_attn_bwd_scratch_bytes(B, T, C, NH);
    int64_t have = c->mem.bwd_scratch - used;
    if ((int64_t)((fsb + 3) / 4) > have)
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "attention_backward16",
                       "the flash kernel's scratch does not fit the node's backward scratch", 0);
    const bf16 *qkv16 = (const bf16 *)S(c, 0), *y16 = (const bf16 *)S(c, 2);
    const float *lse = S(c, 1);
    RET(tobf16_colsum(ctx, d16, G(c, 3), c->dout, N, C));
    /* the weight and bias gradients on the side stream (side_stream.cu) */
    RET(cu_side_fork(ctx));
    RET(lin16_bwd_w(ctx, G(c, 2), d16, y16, N, C, C, C));
    cu_side_back(ctx);
    RET(lin16_bwd_inp(ctx, dy16, CUDA_R_16BF, d16, P16(c, 2), N, C, C, C, 0));
    int fe = flash_attn_bwd_bf16(dqkv16, c->scratch + used, dy16, qkv16, y16, lse, B, T, C, NH, ctx->stream);
    if (fe != 0)
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "flash_attn_bwd_bf16",
                       cudaGetErrorString((cudaError_t)fe), 0);
    KM("flash_attn_bwd");
    RET(cu_side_fork(ctx));
    RET(colsum16(ctx, G(c, 1), dqkv16, N, 3 * C));
    RET(lin16_bwd_w(ctx, G(c, 0), dqkv16, x16, N, C, 3 * C, 3 * C));
    cu_side_back(ctx);
    return lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dqkv16, P16(c, 0), N, C, 3 * C, 3 * C, c->acc[0]);
#endif
    }
    /* scratch (floats): dy [0,NC) dyp [NC,2NC) dqkvr [2NC,5NC) dqkv [5NC,8NC)
     * datt [8NC, +BHTT) d16; later dqkv16 over dy/dyp, x16 over dqkvr, y16
     * over dqkv (each free by then) */
    const int hs = C / NH;
    const int64_t A = al64(NC), BHTT = al64((int64_t)B * NH * T * T);
    float *dy = c->scratch, *dyp = dy + A, *dqkvr = dyp + A, *dqkv = dqkvr + 3 * A, *datt = dqkv + 3 * A;
    bf16 *d16 = (bf16 *)(datt + BHTT), *dqkv16 = (bf16 *)dy, *y16 = (bf16 *)dqkv;
    const bf16 *x16 = attn_x16(c);
    const float *qkvr = S(c, 0), *att = S(c, 1), *y = S(c, 2);
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    float *dq = dqkvr, *dk = dqkvr + NC, *dv = dqkvr + 2 * NC;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sT = (long long)T * hs, sTT = (long long)T * T;
    RET(tobf16_colsum(ctx, d16, G(c, 3), c->dout, N, C));
    RET(to_bf16(ctx, y16, y, NC));
    RET(lin16_bwd_inp(ctx, dy, CUDA_R_32F, d16, P16(c, 2), N, C, C, C, 0));
    RET(lin16_bwd_w(ctx, G(c, 2), d16, y16, N, C, C, C));
    round_bf16_k<<<ceil_div(NC, 256), 256, 0, ctx->stream>>>(dy, NC); /* as the flash kernel's bf16 dy */
    LAUNCHED();
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
    RET(to_bf16(ctx, dqkv16, dqkv, 3 * NC));
    RET(colsum16(ctx, G(c, 1), dqkv16, N, 3 * C));
    RET(lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dqkv16, P16(c, 0), N, C, 3 * C, 3 * C, c->acc[0]));
    return lin16_bwd_w(ctx, G(c, 0), dqkv16, x16, N, C, 3 * C, 3 * C);
}

static pl_status mlp_forward16(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    const int64_t NC = (int64_t)N * C;
    /* x16 after h16 in h's slot, kept for the backward */
    bf16 *h16 = (bf16 *)S(c, 0), *g16 = (bf16 *)S(c, 1), *x16 = (bf16 *)(S(c, 0) + al64(2 * NC));
    RET(check_size(ctx, 4 * NC, "mlp"));
    RET(to_bf16(ctx, x16, c->in[0], NC));
    RET(lin16_fwd(ctx, g16, CUDA_R_16BF, x16, P16(c, 0), N, C, 4 * C, 4 * C, EPI_GELU_AUX_BIAS, P16(c, 1), 0, h16));
    return lin16_fwd(ctx, c->out, CUDA_R_32F, g16, P16(c, 2), N, 4 * C, C, C, EPI_BIAS, P(c, 3), 1, NULL);
}

static pl_status mlp_backward16(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    const int64_t NC = (int64_t)N * C;
    const bf16 *h16 = (const bf16 *)S(c, 0), *g16 = (const bf16 *)S(c, 1);
    /* scratch (floats): dg [0,4NC) d16 [4NC,4.5NC) dh16 [4.5NC,6.5NC) x16 [6.5NC,7NC) */
    float *dg = c->scratch;
    bf16 *d16 = SCR16(c, al64(4 * NC)), *dh16 = SCR16(c, al64(4 * NC) + al64((NC + 1) / 2));
    const bf16 *x16 = (const bf16 *)(S(c, 0) + al64(2 * NC));
    RET(tobf16_colsum(ctx, d16, G(c, 3), c->dout, N, C));
    /* the weight gradients on the side stream (side_stream.cu) */
    RET(cu_side_fork(ctx));
    RET(lin16_bwd_w(ctx, G(c, 2), d16, g16, N, 4 * C, C, C));
    cu_side_back(ctx);
    /* dh = (dout @ wproj) * gelu'(h). cuBLASLt's DGELU epilogue does it in one
     * GEMM but ran at 42 us against 18 + 13 for the GEMM and gelu_bwd16v_k on
     * the H200 (shapes 1536 x 4096 x 384), so it stays two passes. */
    RET(lin16_bwd_inp(ctx, dg, CUDA_R_32F, d16, P16(c, 2), N, 4 * C, C, C, 0));
    RET(gelu_colsum(ctx, dh16, G(c, 1), dg, h16, N, 4 * C));
    RET(cu_side_fork(ctx));
    RET(lin16_bwd_w(ctx, G(c, 0), dh16, x16, N, C, 4 * C, 4 * C));
    cu_side_back(ctx);
    return lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dh16, P16(c, 0), N, C, 4 * C, 4 * C, c->acc[0]);
}

static pl_status loss_forward16(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, V = c->d.V, Vp = c->d.Vp;
    size_t smem = (size_t)Vp * sizeof(bf16);
    if (ctx->loss_smem_ok && smem <= (size_t)ctx->loss_smem_ok / 2 && !ctx->loss16_nocache)
        loss16_k<true><<<N, LOSS16_THREADS, smem, ctx->stream>>>(c->out, (bf16 *)c->din[0], c->loss_sum, (const bf16 *)c->in[0],
                                                       c->targets, c->inv_norm, V, Vp);
    else
        loss16_k<false><<<N, LOSS16_THREADS, 0, ctx->stream>>>(c->out, (bf16 *)c->din[0], c->loss_sum, (const bf16 *)c->in[0],
                                                     c->targets, c->inv_norm, V, Vp);
    LAUNCHED();
    KM("loss16_k");
    return PL_OK;
}

/* The bf16 versions of the nodes that have one; *done = 0 for the others
 * (embedding, layernorm, residual: fp32 in every mode). */
pl_status cu_node16(cu_ctx *ctx, const hw_node_call *c, int bwd, int *done) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    *done = 1;
    switch (c->kind) {
    case OP_ATTENTION: return bwd ? attention_backward16(ctx, c) : attention_forward16(ctx, c);
    case OP_MLP: return bwd ? mlp_backward16(ctx, c) : mlp_forward16(ctx, c);
    case OP_HEAD: {
        bf16 *x16 = (bf16 *)S(c, 0); /* the input's bf16 copy, made by the forward */
        if (!bwd) {
            RET(to_bf16(ctx, x16, c->in[0], (int64_t)N * C));
            return lin16_fwd(ctx, c->out, CUDA_R_16BF, x16, P16(c, 0), N, C, c->d.Vp, c->d.Vp, EPI_NONE, NULL, 0, NULL);
        }
        const bf16 *dl = (const bf16 *)c->dout;
        /* the weight gradient on the side stream (side_stream.cu) */
        RET(cu_side_fork(ctx));
        RET(lin16_bwd_w(ctx, G(c, 0), dl, x16, N, C, c->d.Vp, c->d.Vp));
        cu_side_back(ctx);
        return lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dl, P16(c, 0), N, C, c->d.Vp, c->d.Vp, c->acc[0]);
    }
    case OP_LOSS: return bwd ? PL_OK : loss_forward16(ctx, c);
    default: *done = 0; return PL_OK;
    }
}

pl_status cu_adamw16(cu_ctx *ctx, float *p, const float *g, float *m, float *v, int64_t n,
                     const hw_adamw_args *a) {
    if (n % 4 == 0 && ((uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) % 16 == 0 &&
        (uintptr_t)a->p16 % 8 == 0)
        adamw16_k<<<ceil_div(n / 4, 256), 256, 0, ctx->stream>>>((float4 *)p, (const float4 *)g, (float4 *)m,
                                                                  (float4 *)v, (uint2 *)a->p16, n / 4, a->lr, a->beta1,
                                                                  a->beta2, a->eps, a->weight_decay, a->t_dev, a->t);
    else
        adamw16_scalar_k<<<ceil_div(n, 256), 256, 0, ctx->stream>>>(p, g, m, v, (bf16 *)a->p16, n, a->lr, a->beta1,
                                                                     a->beta2, a->eps, a->weight_decay, a->t_dev, a->t);
    LAUNCHED();
    KM("adamw16_k");
    return PL_OK;
}

pl_status cu_init16(cu_ctx *ctx, int smem) {
    if (!ctx->lt) BTRY(cublasLtCreate(&ctx->lt));
    if (smem > 0) {
        TRY(cudaFuncSetAttribute(loss16_k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem / 2));
        /* two rows' blocks per SM need the largest shared-memory carveout */
        TRY(cudaFuncSetAttribute(loss16_k<true>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
    }
    /* PLACER_LOSS16=l2: the two-pass loss that re-reads each row from L2 instead
     * of keeping it in shared memory (for measurement) */
    const char *lv = getenv("PLACER_LOSS16");
    ctx->loss16_nocache = lv && !strcmp(lv, "l2");
    return PL_OK;
}
