/*
 * dist_tp_cuda.cu: the tensor-parallel node calls on the CUDA backend
 * (dist_tp.h has the split; dist_tp.c is the CPU path this mirrors call for
 * call). fp32 storage, TF32 or strict fp32 GEMMs as the backend was made;
 * in the bf16 mode bf16 GEMMs on the weight copy (the section below).
 *
 * The slices run the fp32 kernels of kernels.cu (the unfused attention
 * core: permute, batched GEMMs, causal softmax) with the local sizes: the
 * qkv GEMM to 3 C/t columns, the core on nh/t heads of the same hs, the
 * projection from C/t columns as a partial product; the MLP on F/t hidden
 * units; the head on its ceil(V/t) rows padded to Vlp. The matrix products
 * are cuBLAS strided-batched calls with one batch (gemm_batched, the
 * launcher kernels.cu exports). What this file adds: the embedding and its
 * backward on the rank's tokens (sp), the bias-after-reduce epilogue and the
 * vocabulary-parallel loss, and the collectives between them through
 * dist_device.h on the device's compute stream.
 *
 * Scratch layout of a call: as dist_tp.c (hw_node_mem_floats_tp sizes it;
 * X = 0 in fp32): the node's own scratch, the (N, C) partial product, and
 * with sp the gathered input and the gathered output gradient.
 */
#include <cuda_bf16.h>

#include "backend_cuda.h"
#include "kernels_common.cuh"

extern "C" {
#include "dist_device.h"
#include "dist_tp.h"
}

/* fp32 kernels of kernels.cu (external linkage) */
__global__ void permute_qkv_k(float *qkvr, const float *qkv, const float *bias, int B, int T, int C, int NH);
__global__ void bias_gelu_k(float *h, float *g, const float *bias, int N, int OC);
__global__ void gelu_bwd_k(float *dg, const float *h, int64_t n);

/* ---- kernels of the split ---- */

/* out (ns, C): rows n0 .. n0 + ns of the whole (N, C) embedding output */
__global__ void tp_embed_fwd_k(float *out, const int *tok, const float *wte, const float *wpe, int64_t n0, int64_t ns,
                               int T, int C) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ns * C) return;
    const int64_t r = i / C, n = n0 + r;
    const int c = (int)(i - r * C);
    out[i] = wte[(int64_t)tok[n] * C + c] + wpe[(n % T) * C + c];
}

__global__ void tp_embed_bwd_k(float *dwte, float *dwpe, const float *dout, const int *tok, int64_t n0, int64_t ns,
                               int T, int C) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ns * C) return;
    const int64_t r = i / C, n = n0 + r;
    const int c = (int)(i - r * C);
    atomicAdd(&dwte[(int64_t)tok[n] * C + c], dout[i]);
    atomicAdd(&dwpe[(n % T) * C + c], dout[i]);
}

/* out (rows, C) = (acc ? out : 0) + src + bias (bias NULL: none) */
__global__ void tp_epilogue_k(float *out, const float *src, const float *bias, int64_t rows, int C, int acc) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * C) return;
    float v = bias ? src[i] + bias[i % C] : src[i];
    out[i] = acc ? out[i] + v : v;
}

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float *p, float v) { *p = v; }
__device__ __forceinline__ void st(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Per row n of the rank's logits x (N, Vlp; fp32, or bf16 in the bf16
 * mode), Vl valid columns: the max. */
template <typename L>
__global__ void tp_loss_max_k(float *mx, const L *x, int Vl, int Vlp) {
    __shared__ float red[32];
    const L *row = x + (int64_t)blockIdx.x * Vlp;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < Vl; v += blockDim.x) m = fmaxf(m, ld(row + v));
    m = block_reduce(m, red, true);
    if (threadIdx.x == 0) mx[blockIdx.x] = m;
}

/* Per row: the sum of exp(x - max) over the rank's columns and the
 * target's logit when the rank owns it (else 0). A rank without a column
 * (Vl = 0) gives 0 and 0; its max is -inf, which the all-reduce's max of
 * the other ranks replaces. */
template <typename L>
__global__ void tp_loss_sum_k(float *sum, float *xt, const L *x, const float *mx, const int *targets, int v0,
                              int Vl, int Vlp) {
    __shared__ float red[32];
    const int n = blockIdx.x;
    const L *row = x + (int64_t)n * Vlp;
    const float m = mx[n];
    float s = 0.0f;
    for (int v = threadIdx.x; v < Vl; v += blockDim.x) s += expf(ld(row + v) - m);
    s = block_reduce(s, red, false);
    if (threadIdx.x == 0) {
        sum[n] = s;
        const int t = targets[n] - v0;
        xt[n] = t >= 0 && t < Vl ? ld(row + t) : 0.0f;
    }
}

/* Per row: the loss, and the logits gradient of the rank's slice, in
 * place over x (dl may equal x: each element is read before written). */
template <typename L>
__global__ void tp_loss_grad_k(float *losses, L *dl, double *loss_sum, const L *x, const float *mx,
                               const float *sum, const float *xt, const int *targets, int v0, int Vl, int Vlp,
                               float inv_norm) {
    const int n = blockIdx.x;
    const L *row = x + (int64_t)n * Vlp;
    L *drow = dl + (int64_t)n * Vlp;
    const float m = mx[n], inv = 1.0f / sum[n];
    const int t = targets[n] - v0;
    for (int v = threadIdx.x; v < Vlp; v += blockDim.x) {
        float g = 0.0f;
        if (v < Vl) g = (expf(ld(row + v) - m) * inv - (v == t ? 1.0f : 0.0f)) * inv_norm;
        st(drow + v, g); /* bf16: the logits gradient is rounded (hw.h) */
    }
    if (threadIdx.x == 0) {
        const float loss = logf(sum[n]) + m - xt[n];
        losses[n] = loss;
        if (loss_sum) atomicAdd(loss_sum, (double)loss);
    }
}

/* ---- GEMMs (row-major, as kernels.cu's linear_*), through gemm_batched with one batch ---- */

/* out (N, OC; row stride ldo) = inp (N, C) @ w^T, w (OC, C) */
static pl_status lin_fwd(cu_ctx *ctx, float *out, const float *inp, const float *w, int64_t N, int C, int OC, int ldo) {
    return gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, (int)N, C, 1.0f, w, C, 0, inp, C, 0, 0.0f, out, ldo, 0, 1);
}

/* dinp (N, C) = (acc ? dinp : 0) + dout (N, OC; stride ldd) @ w */
static pl_status lin_bwd_inp(cu_ctx *ctx, float *dinp, const float *dout, const float *w, int64_t N, int C, int OC,
                             int ldd, int acc) {
    return gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, C, (int)N, OC, 1.0f, w, C, 0, dout, ldd, 0, acc ? 1.0f : 0.0f,
                        dinp, C, 0, 1);
}

/* dw (OC, C) += dout^T @ inp */
static pl_status lin_bwd_w(cu_ctx *ctx, float *dw, const float *dout, const float *inp, int64_t N, int C, int OC,
                           int ldd) {
    return gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, (int)N, 1.0f, inp, C, 0, dout, ldd, 0, 1.0f, dw, C, 0, 1);
}

/* ---- the slices ---- */

/* Attention of nh of NH heads (hs = C / NH, Cl = nh hs): part (N, C) =
 * the heads' share of the projection, no bias. Saved qkvr (3, B, nh, T,
 * hs), att (B, nh, T, T), y (N, Cl); scratch 4 N Cl. */
static pl_status attn_fwd_heads(cu_ctx *ctx, float *part, float *qkvr, float *att, float *y, float *scratch,
                                const float *x, const float *wqkv, const float *bqkv, const float *wproj, int B, int T,
                                int C, int NH, int nh) {
    const int hs = C / NH, Cl = nh * hs;
    const int64_t N = (int64_t)B * T, NCl = N * Cl;
    float *qkv = scratch, *yp = scratch + 3 * NCl;
    const float *q = qkvr, *k = qkvr + NCl, *v = qkvr + 2 * NCl;
    RET(check_size(ctx, 3 * NCl, "tp attention"));
    RET(check_size(ctx, (int64_t)B * nh * T * T, "tp attention scores"));
    RET(lin_fwd(ctx, qkv, x, wqkv, N, C, 3 * Cl, 3 * Cl));
    permute_qkv_k<<<permute_grid(T, hs, 3 * B * nh), 256, 0, ctx->stream>>>(qkvr, qkv, bqkv, B, T, Cl, nh);
    LAUNCHED();
    const float scale = 1.0f / sqrtf((float)hs);
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, hs, (long long)T * hs, q, hs,
                     (long long)T * hs, 0.0f, att, T, (long long)T * T, B * nh));
    const int64_t rows = (int64_t)B * nh * T;
    softmax_causal_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(att, rows, T);
    LAUNCHED();
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, hs, (long long)T * hs, att, T,
                     (long long)T * T, 0.0f, yp, hs, (long long)T * hs, B * nh));
    heads_tokens_k<<<permute_grid(T, hs, B * nh), 256, 0, ctx->stream>>>(y, yp, B, T, Cl, nh, 1);
    LAUNCHED();
    return lin_fwd(ctx, part, y, wproj, N, Cl, C, C);
}

/* Its backward: part (N, C) = the heads' share of the input gradient;
 * dwqkv, dbqkv, dwproj accumulate (dbproj is the caller's). Scratch
 * 8 N Cl + B nh T T. dout has all N rows. */
static pl_status attn_bwd_heads(cu_ctx *ctx, float *part, float *dwqkv, float *dbqkv, float *dwproj, float *scratch,
                                const float *dout, const float *x, const float *qkvr, const float *att, const float *y,
                                const float *wqkv, const float *wproj, int B, int T, int C, int NH, int nh) {
    const int hs = C / NH, Cl = nh * hs;
    const int64_t N = (int64_t)B * T, NCl = N * Cl;
    float *dy = scratch, *dyp = dy + NCl, *dqkvr = dyp + NCl, *dqkv = dqkvr + 3 * NCl, *datt = dqkv + 3 * NCl;
    const float *q = qkvr, *k = qkvr + NCl, *v = qkvr + 2 * NCl;
    float *dq = dqkvr, *dk = dqkvr + NCl, *dv = dqkvr + 2 * NCl;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sT = (long long)T * hs, sTT = (long long)T * T;
    RET(lin_bwd_inp(ctx, dy, dout, wproj, N, Cl, C, C, 0));
    RET(lin_bwd_w(ctx, dwproj, dout, y, N, Cl, C, C));
    heads_tokens_k<<<permute_grid(T, hs, B * nh), 256, 0, ctx->stream>>>(dyp, dy, B, T, Cl, nh, 0);
    LAUNCHED();
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, hs, sT, dyp, hs, sT, 0.0f, datt, T, sTT,
                     B * nh));
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dyp, hs, sT, att, T, sTT, 0.0f, dv, hs, sT,
                     B * nh));
    const int64_t rows = (int64_t)B * nh * T;
    softmax_causal_bwd_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(datt, att, rows, T);
    LAUNCHED();
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, scale, k, hs, sT, datt, T, sTT, 0.0f, dq, hs, sT,
                     B * nh));
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, scale, q, hs, sT, datt, T, sTT, 0.0f, dk, hs, sT,
                     B * nh));
    unpermute_qkv_k<<<permute_grid(T, hs, 3 * B * nh), 256, 0, ctx->stream>>>(dqkv, dqkvr, B, T, Cl, nh);
    LAUNCHED();
    RET(lin_bwd_inp(ctx, part, dqkv, wqkv, N, C, 3 * Cl, 3 * Cl, 0));
    RET(lin_bwd_w(ctx, dwqkv, dqkv, x, N, C, 3 * Cl, 3 * Cl));
    return colsum(ctx, dbqkv, dqkv, N, 3 * Cl);
}

/* MLP over F hidden units: part (N, C), no bias; saved h, g (N, F). */
static pl_status mlp_fwd_cols(cu_ctx *ctx, float *part, float *h, float *g, const float *x, const float *wfc,
                              const float *bfc, const float *wproj, int64_t N, int C, int F) {
    RET(check_size(ctx, N * F, "tp mlp"));
    RET(lin_fwd(ctx, h, x, wfc, N, C, F, F));
    bias_gelu_k<<<ceil_div(N * F, 256), 256, 0, ctx->stream>>>(h, g, bfc, (int)N, F);
    LAUNCHED();
    return lin_fwd(ctx, part, g, wproj, N, F, C, C);
}

/* Its backward (dbproj is the caller's); scratch N F (dg). */
static pl_status mlp_bwd_cols(cu_ctx *ctx, float *part, float *dwfc, float *dbfc, float *dwproj, float *dg,
                              const float *dout, const float *x, const float *h, const float *g, const float *wfc,
                              const float *wproj, int64_t N, int C, int F) {
    RET(lin_bwd_inp(ctx, dg, dout, wproj, N, F, C, C, 0));
    RET(lin_bwd_w(ctx, dwproj, dout, g, N, F, C, C));
    gelu_bwd_k<<<ceil_div(N * F, 256), 256, 0, ctx->stream>>>(dg, h, N * F);
    LAUNCHED();
    RET(lin_bwd_inp(ctx, part, dg, wfc, N, C, F, F, 0));
    RET(lin_bwd_w(ctx, dwfc, dg, x, N, C, F, F));
    return colsum(ctx, dbfc, dg, N, F);
}

/* ---- the bf16 mode's slices (hw.h's rules, as nodes.h's _heads_bf16 /
 * _cols_bf16 forms round): bf16 GEMMs (fp32 accumulation) on the weight
 * copy, the attention core in fp32 on rounded q, k, v; the MLP keeps h and
 * g in bf16 in its saved block (h, then g, in the first slot; the second
 * slot is the forward's fp32 pre-activation and the backward's dh); the
 * head writes bf16 logits and takes bf16 logits gradients, as the whole
 * nodes do. Scratch: the program's bf16 tp sizes (X = N C floats per rounded
 * (N, C) copy: x, and in backward dout). ---- */

__global__ void tp_to16_k(bf16 *dst, const float *src, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void tp_round_k(float *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

/* x (N, OC) = round(x + b16) */
__global__ void tp_bias_round_k(float *x, const bf16 *b, int64_t N, int OC) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * OC) x[i] = __bfloat162float(__float2bfloat16_rn(x[i] + __bfloat162float(b[i % OC])));
}

/* v = pre + b16; h16 = bf16(v), g16 = bf16(gelu(v)) (gelu of the unrounded h) */
__global__ void tp_bias_gelu16_k(bf16 *h16, bf16 *g16, const float *pre, const bf16 *b, int64_t N, int F) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * F) return;
    const float v = pre[i] + __bfloat162float(b[i % F]);
    h16[i] = __float2bfloat16_rn(v);
    g16[i] = __float2bfloat16_rn(gelu_f(v));
}

/* dh = round(dg * gelu'(h)): fp32 rounded back into dg (its bias gradient) and bf16 into dh16 */
__global__ void tp_gelu_bwd16_k(float *dg, bf16 *dh16, const bf16 *h16, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bf16 d = __float2bfloat16_rn(dg[i] * gelu_grad_f(__bfloat162float(h16[i])));
    dh16[i] = d;
    dg[i] = __bfloat162float(d);
}

/* row-major D (m x n as gemm_batched's view, ld ldc; fp32 or bf16) (= or +=) op(A) op(B), A and B bf16 */
static pl_status gemm16(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const bf16 *A,
                        int lda, const bf16 *B, int ldb, void *D, cudaDataType_t dt, int ldc, int acc) {
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    BTRY(cublasGemmEx(ctx->blas, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, D, dt, ldc,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PL_OK;
}

/* out (N, OC; ld ldo) = x16 (N, C) @ w16^T, w (OC, C) */
static pl_status lin16_fwd(cu_ctx *ctx, void *out, cudaDataType_t ot, const bf16 *x, const bf16 *w, int64_t N, int C,
                           int OC, int ldo) {
    return gemm16(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, (int)N, C, w, C, x, C, out, ot, ldo, 0);
}

/* dinp (N, C; fp32) = dout16 (N, OC; ld ldd) @ w16 */
static pl_status lin16_bwd_inp(cu_ctx *ctx, float *dinp, const bf16 *dout, const bf16 *w, int64_t N, int C, int OC,
                               int ldd) {
    return gemm16(ctx, CUBLAS_OP_N, CUBLAS_OP_N, C, (int)N, OC, w, C, dout, ldd, dinp, CUDA_R_32F, C, 0);
}

/* dw (OC, C; fp32) += dout16^T @ x16 */
static pl_status lin16_bwd_w(cu_ctx *ctx, float *dw, const bf16 *dout, const bf16 *x, int64_t N, int C, int OC,
                             int ldd) {
    return gemm16(ctx, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, (int)N, x, C, dout, ldd, dw, CUDA_R_32F, C, 1);
}

#define L16(n) ceil_div((n), 256), 256, 0, ctx->stream
#define RL(what)                                                                                                 \
    RET(cudaGetLastError() == cudaSuccess ? PL_OK                                                                \
                                          : cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, what, "launch failed", 0))

static pl_status attn_fwd_heads16(cu_ctx *ctx, float *part, float *qkvr, float *att, float *y, float *scratch,
                                  const float *x, const bf16 *wqkv, const bf16 *bqkv, const bf16 *wproj, int B,
                                  int T, int C, int NH, int nh) {
    const int hs = C / NH, Cl = nh * hs;
    const int64_t N = (int64_t)B * T, NCl = N * Cl;
    float *qkv = scratch, *yp = scratch + 3 * NCl;
    bf16 *x16 = (bf16 *)(scratch + 4 * NCl), *y16 = (bf16 *)scratch;
    const float *q = qkvr, *k = qkvr + NCl, *v = qkvr + 2 * NCl;
    RET(check_size(ctx, 3 * NCl, "tp attention"));
    RET(check_size(ctx, (int64_t)B * nh * T * T, "tp attention scores"));
    tp_to16_k<<<L16(N * C)>>>(x16, x, N * C);
    RL("tp_to16_k");
    RET(lin16_fwd(ctx, qkv, CUDA_R_32F, x16, wqkv, N, C, 3 * Cl, 3 * Cl));
    tp_bias_round_k<<<L16(N * 3 * Cl)>>>(qkv, bqkv, N, 3 * Cl);
    RL("tp_bias_round_k");
    permute_qkv_k<<<permute_grid(T, hs, 3 * B * nh), 256, 0, ctx->stream>>>(qkvr, qkv, NULL, B, T, Cl, nh);
    LAUNCHED();
    const float scale = 1.0f / sqrtf((float)hs);
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, hs, (long long)T * hs, q, hs,
                     (long long)T * hs, 0.0f, att, T, (long long)T * T, B * nh));
    const int64_t rows = (int64_t)B * nh * T;
    softmax_causal_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(att, rows, T);
    LAUNCHED();
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, hs, (long long)T * hs, att, T,
                     (long long)T * T, 0.0f, yp, hs, (long long)T * hs, B * nh));
    heads_tokens_k<<<permute_grid(T, hs, B * nh), 256, 0, ctx->stream>>>(y, yp, B, T, Cl, nh, 1);
    LAUNCHED();
    tp_round_k<<<L16(NCl)>>>(y, NCl);
    RL("tp_round_k");
    tp_to16_k<<<L16(NCl)>>>(y16, y, NCl); /* over qkv, which the permute has consumed */
    RL("tp_to16_k");
    return lin16_fwd(ctx, part, CUDA_R_32F, y16, wproj, N, Cl, C, C);
}

/* scratch: dy, dyp, dqkvr, dqkv, datt (8 N Cl + B nh T T), then dout16 and x16 (an X each) */
static pl_status attn_bwd_heads16(cu_ctx *ctx, float *part, float *dwqkv, float *dbqkv, float *dwproj, float *scratch,
                                  const float *dout, const float *x, const float *qkvr, const float *att,
                                  const float *y, const bf16 *wqkv, const bf16 *wproj, int B, int T, int C, int NH,
                                  int nh) {
    const int hs = C / NH, Cl = nh * hs;
    const int64_t N = (int64_t)B * T, NCl = N * Cl, NC = N * C, own = 8 * NCl + (int64_t)B * nh * T * T;
    float *dy = scratch, *dyp = dy + NCl, *dqkvr = dyp + NCl, *dqkv = dqkvr + 3 * NCl, *datt = dqkv + 3 * NCl;
    bf16 *dout16 = (bf16 *)(scratch + own), *x16 = (bf16 *)(scratch + own + NC);
    bf16 *y16 = (bf16 *)dqkv, *dqkv16 = (bf16 *)scratch; /* each over a buffer not in use at the time */
    const float *q = qkvr, *k = qkvr + NCl, *v = qkvr + 2 * NCl;
    float *dq = dqkvr, *dk = dqkvr + NCl, *dv = dqkvr + 2 * NCl;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sT = (long long)T * hs, sTT = (long long)T * T;
    tp_to16_k<<<L16(NC)>>>(dout16, dout, NC);
    RL("tp_to16_k");
    tp_to16_k<<<L16(NC)>>>(x16, x, NC);
    RL("tp_to16_k");
    tp_to16_k<<<L16(NCl)>>>(y16, y, NCl);
    RL("tp_to16_k");
    RET(lin16_bwd_inp(ctx, dy, dout16, wproj, N, Cl, C, C));
    tp_round_k<<<L16(NCl)>>>(dy, NCl);
    RL("tp_round_k");
    RET(lin16_bwd_w(ctx, dwproj, dout16, y16, N, Cl, C, C));
    heads_tokens_k<<<permute_grid(T, hs, B * nh), 256, 0, ctx->stream>>>(dyp, dy, B, T, Cl, nh, 0);
    LAUNCHED();
    RET(gemm_batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, hs, sT, dyp, hs, sT, 0.0f, datt, T, sTT,
                     B * nh));
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dyp, hs, sT, att, T, sTT, 0.0f, dv, hs, sT,
                     B * nh));
    const int64_t rows = (int64_t)B * nh * T;
    softmax_causal_bwd_k<<<ceil_div(rows * WARP, 256), 256, 0, ctx->stream>>>(datt, att, rows, T);
    LAUNCHED();
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, scale, k, hs, sT, datt, T, sTT, 0.0f, dq, hs, sT,
                     B * nh));
    RET(gemm_batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, scale, q, hs, sT, datt, T, sTT, 0.0f, dk, hs, sT,
                     B * nh));
    unpermute_qkv_k<<<permute_grid(T, hs, 3 * B * nh), 256, 0, ctx->stream>>>(dqkv, dqkvr, B, T, Cl, nh);
    LAUNCHED();
    tp_round_k<<<L16(3 * NCl)>>>(dqkv, 3 * NCl);
    RL("tp_round_k");
    RET(colsum(ctx, dbqkv, dqkv, N, 3 * Cl));
    tp_to16_k<<<L16(3 * NCl)>>>(dqkv16, dqkv, 3 * NCl); /* over dy and dyp, done with */
    RL("tp_to16_k");
    RET(lin16_bwd_inp(ctx, part, dqkv16, wqkv, N, C, 3 * Cl, 3 * Cl));
    return lin16_bwd_w(ctx, dwqkv, dqkv16, x16, N, C, 3 * Cl, 3 * Cl);
}

/* saved: slot 0 holds h16 then g16 (N F bf16 each), slot 1 (N F floats) the
 * fp32 pre-activation; scratch: x16 (an X) */
static pl_status mlp_fwd_cols16(cu_ctx *ctx, float *part, float *hslot, float *pre, float *scratch, const float *x,
                                const bf16 *wfc, const bf16 *bfc, const bf16 *wproj, int64_t N, int C, int F) {
    bf16 *x16 = (bf16 *)scratch, *h16 = (bf16 *)hslot, *g16 = h16 + N * F;
    RET(check_size(ctx, N * F, "tp mlp"));
    tp_to16_k<<<L16(N * C)>>>(x16, x, N * C);
    RL("tp_to16_k");
    RET(lin16_fwd(ctx, pre, CUDA_R_32F, x16, wfc, N, C, F, F));
    tp_bias_gelu16_k<<<L16(N * F)>>>(h16, g16, pre, bfc, N, F);
    RL("tp_bias_gelu16_k");
    return lin16_fwd(ctx, part, CUDA_R_32F, g16, wproj, N, F, C, C);
}

/* scratch: dg (N F), then dout16 and x16 (an X each); dh16 over saved slot 1 */
static pl_status mlp_bwd_cols16(cu_ctx *ctx, float *part, float *dwfc, float *dbfc, float *dwproj, float *scratch,
                                const float *dout, const float *x, float *hslot, float *slot1, const bf16 *wfc,
                                const bf16 *wproj, int64_t N, int C, int F) {
    const int64_t NC = N * C;
    float *dg = scratch;
    bf16 *dout16 = (bf16 *)(scratch + N * F), *x16 = (bf16 *)(scratch + N * F + NC);
    const bf16 *h16 = (const bf16 *)hslot, *g16 = h16 + N * F;
    bf16 *dh16 = (bf16 *)slot1;
    tp_to16_k<<<L16(NC)>>>(dout16, dout, NC);
    RL("tp_to16_k");
    tp_to16_k<<<L16(NC)>>>(x16, x, NC);
    RL("tp_to16_k");
    RET(lin16_bwd_inp(ctx, dg, dout16, wproj, N, F, C, C));
    RET(lin16_bwd_w(ctx, dwproj, dout16, g16, N, F, C, C));
    tp_gelu_bwd16_k<<<L16(N * F)>>>(dg, dh16, h16, N * F);
    RL("tp_gelu_bwd16_k");
    RET(colsum(ctx, dbfc, dg, N, F));
    RET(lin16_bwd_inp(ctx, part, dh16, wfc, N, C, F, F));
    return lin16_bwd_w(ctx, dwfc, dh16, x16, N, C, F, F);
}

#define P16(c, k) ((const bf16 *)(c)->params16 + (c)->pl.off[k])

/* ---- collectives between the partial products ---- */

typedef struct {
    const hw_tp *tp;
    dist_device *xd;
    cu_ctx *ctx;
    char *msg;
    size_t len;
} tp_run;

/* A kernel or cuBLAS failure's line (the launchers write it to ctx->err)
 * into msg. Only for statuses of cu_ctx functions: a collective's status
 * has its own line in msg already. */
static pl_status kfail(const tp_run *r, pl_status st) {
    if (st != PL_OK) pl_fail(r->msg, r->len, st, "%s", r->ctx->err);
    return st;
}

/* The last launch's error, with one line in msg. */
static pl_status launched(const tp_run *r, const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return PL_OK;
    return pl_fail(r->msg, r->len, PL_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

/* The input of a column-parallel matmul, all tokens: x itself, or with sp
 * the group's all-gather of the rank's Ns rows into buf. */
static pl_status gather_input(const tp_run *r, const float *x, float *buf, int64_t N, int C, const float **full) {
    if (!r->tp->sp) {
        *full = x;
        return PL_OK;
    }
    *full = buf;
    return dist_device_allgather_f32(r->xd, x, buf, N / r->tp->size * C, r->msg, r->len);
}

/* The partial (N, C) product summed over the group into out: all tokens,
 * or the rank's (sp: reduce-scatter); out = (acc ? out + : ) sum + bias. */
static pl_status reduce_partial(const tp_run *r, float *out, float *part, int64_t N, int C, const float *bias,
                                int acc) {
    const hw_tp *tp = r->tp;
    const int64_t rows = tp->sp ? N / tp->size : N;
    float *src = part;
    pl_status st;
    if (tp->sp) {
        src = part + (int64_t)tp->rank * rows * C;
        st = dist_device_reduce_scatter_f32(r->xd, part, src, rows * C, 0, r->msg, r->len);
    } else {
        st = dist_device_allreduce_f32(r->xd, part, N * C, DIST_SUM, 0, r->msg, r->len);
    }
    if (st != PL_OK) return st;
    cu_ctx *ctx = r->ctx;
    if (rows * C == 0) return PL_OK;
    tp_epilogue_k<<<ceil_div(rows * C, 256), 256, 0, ctx->stream>>>(out, src, bias, rows, C, acc);
    return launched(r, "tp_epilogue_k");
}

/* The vocabulary-parallel loss (dist_tp.h): three floats a token in the
 * scratch (max; sum of exp and target logit, adjacent: one all-reduce). */
static pl_status loss_forward(const tp_run *r, const hw_node_call *c) {
    cu_ctx *ctx = r->ctx;
    const hw_dims *d = &c->d;
    const int t = r->tp->size, N = d->B * d->T;
    const int Vs = hw_tp_vocab_slice(d->V, t), Vl = hw_tp_vocab_rows(d->V, t, r->tp->rank);
    const int Vlp = hw_padded_vocab(Vs), v0 = r->tp->rank * Vs;
    float *mx = c->scratch, *sum = mx + N, *xt = sum + N;
    const bf16 *x16 = (const bf16 *)c->in[0];
    if (c->bf16) tp_loss_max_k<bf16><<<N, 256, 0, ctx->stream>>>(mx, x16, Vl, Vlp);
    else tp_loss_max_k<float><<<N, 256, 0, ctx->stream>>>(mx, c->in[0], Vl, Vlp);
    pl_status st = launched(r, "tp_loss_max_k");
    if (st != PL_OK) return st;
    st = dist_device_allreduce_f32(r->xd, mx, N, DIST_MAX, 0, r->msg, r->len);
    if (st != PL_OK) return st;
    if (c->bf16) tp_loss_sum_k<bf16><<<N, 256, 0, ctx->stream>>>(sum, xt, x16, mx, c->targets, v0, Vl, Vlp);
    else tp_loss_sum_k<float><<<N, 256, 0, ctx->stream>>>(sum, xt, c->in[0], mx, c->targets, v0, Vl, Vlp);
    if ((st = launched(r, "tp_loss_sum_k")) != PL_OK) return st;
    if ((st = dist_device_allreduce_f32(r->xd, sum, 2 * (int64_t)N, DIST_SUM, 0, r->msg, r->len)) != PL_OK) return st;
    if (c->bf16)
        tp_loss_grad_k<bf16><<<N, 256, 0, ctx->stream>>>(c->out, (bf16 *)c->din[0], c->loss_sum, x16, mx, sum, xt,
                                                         c->targets, v0, Vl, Vlp, c->inv_norm);
    else
        tp_loss_grad_k<float><<<N, 256, 0, ctx->stream>>>(c->out, c->din[0], c->loss_sum, c->in[0], mx, sum, xt,
                                                          c->targets, v0, Vl, Vlp, c->inv_norm);
    return launched(r, "tp_loss_grad_k");
}

/* the whole-node kernels on the rank's Ns rows (layernorm, residual): the call with N = Ns */
static hw_node_call rows_call(const hw_node_call *c, int64_t Ns) {
    hw_node_call r = *c;
    r.d.B = 1;
    r.d.T = (int)Ns;
    return r;
}

static pl_status tp_forward(const tp_run *r, const hw_node_call *c) {
    cu_ctx *ctx = r->ctx;
    const hw_tp *tp = r->tp;
    const hw_dims *d = &c->d;
    const int C = d->C, t = tp->size;
    const int64_t N = (int64_t)d->B * d->T, Ns = tp->sp ? N / t : N, n0 = tp->sp ? tp->rank * Ns : 0;
    const int nh = d->NH / t, Cl = C / t, Fl = 4 * C / t;
    const int64_t X = c->bf16 ? N * C : 0; /* bf16: the node's rounded input copy (x16) */
    const float *x = NULL;
    pl_status st;
    switch (c->kind) {
    case OP_EMBEDDING:
        if ((st = check_size(ctx, N * C, "tp embedding")) != PL_OK) return kfail(r, st);
        tp_embed_fwd_k<<<ceil_div(Ns * C, 256), 256, 0, ctx->stream>>>(c->out, c->tokens, P(c, 0), P(c, 1), n0, Ns,
                                                                       d->T, C);
        return launched(r, "tp_embed_fwd_k");
    case OP_LAYERNORM:
    case OP_RESIDUAL: {
        hw_node_call rc = rows_call(c, Ns);
        return kfail(r, cu_node_forward(ctx, &rc));
    }
    case OP_ATTENTION: {
        float *part = c->scratch + 4 * N * Cl + X, *gx = part + N * C;
        if ((st = gather_input(r, c->in[0], gx, N, C, &x)) != PL_OK) return st;
        if (c->bf16)
            st = attn_fwd_heads16(ctx, part, S(c, 0), S(c, 1), S(c, 2), c->scratch, x, P16(c, 0), P16(c, 1),
                                  P16(c, 2), d->B, d->T, C, d->NH, nh);
        else
            st = attn_fwd_heads(ctx, part, S(c, 0), S(c, 1), S(c, 2), c->scratch, x, P(c, 0), P(c, 1), P(c, 2), d->B,
                                d->T, C, d->NH, nh);
        if (st != PL_OK) return kfail(r, st);
        return reduce_partial(r, c->out, part, N, C, P(c, 3), 0);
    }
    case OP_MLP: {
        float *part = c->scratch + X, *gx = part + N * C;
        if ((st = gather_input(r, c->in[0], gx, N, C, &x)) != PL_OK) return st;
        if (c->bf16)
            st = mlp_fwd_cols16(ctx, part, S(c, 0), S(c, 1), c->scratch, x, P16(c, 0), P16(c, 1), P16(c, 2), N, C, Fl);
        else
            st = mlp_fwd_cols(ctx, part, S(c, 0), S(c, 1), x, P(c, 0), P(c, 1), P(c, 2), N, C, Fl);
        if (st != PL_OK) return kfail(r, st);
        return reduce_partial(r, c->out, part, N, C, P(c, 3), 0);
    }
    case OP_HEAD: {
        const int Vlp = hw_padded_vocab(hw_tp_vocab_slice(d->V, t));
        if ((st = gather_input(r, c->in[0], c->scratch ? c->scratch + X : NULL, N, C, &x)) != PL_OK) return st;
        /* all Vlp rows: the padding rows of the slice are 0, their logits 0 and unused */
        if (!c->bf16) return kfail(r, lin_fwd(ctx, c->out, x, P(c, 0), N, C, Vlp, Vlp));
        /* bf16: the logits are bf16 (the whole head's layout), from x16 in the scratch */
        tp_to16_k<<<ceil_div(N * C, 256), 256, 0, ctx->stream>>>((bf16 *)c->scratch, x, N * C);
        if ((st = launched(r, "tp_to16_k")) != PL_OK) return st;
        return kfail(r, lin16_fwd(ctx, c->out, CUDA_R_16BF, (const bf16 *)c->scratch, P16(c, 0), N, C, Vlp, Vlp));
    }
    case OP_LOSS: return loss_forward(r, c);
    default: return pl_fail(r->msg, r->len, PL_ERR_INVALID, "unknown node kind %d", (int)c->kind);
    }
}

static pl_status tp_backward(const tp_run *r, const hw_node_call *c) {
    cu_ctx *ctx = r->ctx;
    const hw_tp *tp = r->tp;
    const hw_dims *d = &c->d;
    const int C = d->C, t = tp->size;
    const int64_t N = (int64_t)d->B * d->T, Ns = tp->sp ? N / t : N, n0 = tp->sp ? tp->rank * Ns : 0;
    const int nh = d->NH / t, Cl = C / t, Fl = 4 * C / t;
    const int64_t X = c->bf16 ? N * C : 0; /* bf16: the node's rounded copies (dout16, x16) */
    const float *x = NULL, *dout = NULL;
    pl_status st;
    switch (c->kind) {
    case OP_EMBEDDING:
        tp_embed_bwd_k<<<ceil_div(Ns * C, 256), 256, 0, ctx->stream>>>(G(c, 0), G(c, 1), c->dout, c->tokens, n0, Ns,
                                                                       d->T, C);
        return launched(r, "tp_embed_bwd_k");
    case OP_LAYERNORM:
    case OP_RESIDUAL: {
        hw_node_call rc = rows_call(c, Ns);
        return kfail(r, cu_node_backward(ctx, &rc));
    }
    case OP_ATTENTION:
    case OP_MLP: {
        const int attn = c->kind == OP_ATTENTION;
        const int64_t own = (attn ? 8 * N * Cl + (int64_t)d->B * nh * d->T * d->T : N * Fl) + 2 * X;
        float *part = c->scratch + own, *gx = part + N * C, *gd = gx + N * C;
        if ((st = gather_input(r, c->in[0], gx, N, C, &x)) != PL_OK) return st;
        if ((st = gather_input(r, c->dout, gd, N, C, &dout)) != PL_OK) return st;
        /* bproj is applied on the rank's rows (all of them without sp) */
        if ((st = colsum(ctx, G(c, 3), c->dout, Ns, C)) != PL_OK) return kfail(r, st);
        if (attn && c->bf16)
            st = attn_bwd_heads16(ctx, part, G(c, 0), G(c, 1), G(c, 2), c->scratch, dout, x, S(c, 0), S(c, 1),
                                  S(c, 2), P16(c, 0), P16(c, 2), d->B, d->T, C, d->NH, nh);
        else if (attn)
            st = attn_bwd_heads(ctx, part, G(c, 0), G(c, 1), G(c, 2), c->scratch, dout, x, S(c, 0), S(c, 1), S(c, 2),
                                P(c, 0), P(c, 2), d->B, d->T, C, d->NH, nh);
        else if (c->bf16)
            st = mlp_bwd_cols16(ctx, part, G(c, 0), G(c, 1), G(c, 2), c->scratch, dout, x, S(c, 0), S(c, 1),
                                P16(c, 0), P16(c, 2), N, C, Fl);
        else
            st = mlp_bwd_cols(ctx, part, G(c, 0), G(c, 1), G(c, 2), c->scratch, dout, x, S(c, 0), S(c, 1), P(c, 0),
                              P(c, 2), N, C, Fl);
        if (st != PL_OK) return kfail(r, st);
        return reduce_partial(r, c->din[0], part, N, C, NULL, c->acc[0]);
    }
    case OP_HEAD: {
        const int Vlp = hw_padded_vocab(hw_tp_vocab_slice(d->V, t));
        float *part = c->scratch + X, *gx = part + N * C;
        if ((st = gather_input(r, c->in[0], gx, N, C, &x)) != PL_OK) return st;
        /* the loss zeroed the padding columns of dlogits: the padding rows add nothing */
        if (c->bf16) { /* bf16 logits gradient (the loss's), x16 in the scratch */
            const bf16 *dl16 = (const bf16 *)c->dout, *x16 = (const bf16 *)c->scratch;
            tp_to16_k<<<ceil_div(N * C, 256), 256, 0, ctx->stream>>>((bf16 *)c->scratch, x, N * C);
            if ((st = launched(r, "tp_to16_k")) != PL_OK) return st;
            if ((st = lin16_bwd_inp(ctx, part, dl16, P16(c, 0), N, C, Vlp, Vlp)) != PL_OK) return kfail(r, st);
            if ((st = lin16_bwd_w(ctx, G(c, 0), dl16, x16, N, C, Vlp, Vlp)) != PL_OK) return kfail(r, st);
        } else {
            if ((st = lin_bwd_inp(ctx, part, c->dout, P(c, 0), N, C, Vlp, Vlp, 0)) != PL_OK) return kfail(r, st);
            if ((st = lin_bwd_w(ctx, G(c, 0), c->dout, x, N, C, Vlp, Vlp)) != PL_OK) return kfail(r, st);
        }
        return reduce_partial(r, c->din[0], part, N, C, NULL, c->acc[0]);
    }
    case OP_LOSS: return PL_OK; /* fused into the forward */
    default: return pl_fail(r->msg, r->len, PL_ERR_INVALID, "unknown node kind %d", (int)c->kind);
    }
}

extern "C" pl_status hw_tp_forward_cuda(const hw_tp *tp, dist_device *xd, hw_backend *be, int dev,
                                        const hw_node_call *c, char *msg, size_t len) {
    tp_run r = {tp, xd, cu_backend_ctx(be, dev), msg, len};
    return tp_forward(&r, c);
}

extern "C" pl_status hw_tp_backward_cuda(const hw_tp *tp, dist_device *xd, hw_backend *be, int dev,
                                         const hw_node_call *c, char *msg, size_t len) {
    tp_run r = {tp, xd, cu_backend_ctx(be, dev), msg, len};
    return tp_backward(&r, c);
}
