/*
 * kernels_common.cuh: what the fp32 kernels (kernels.cu) and the bf16 mixed
 * mode (kernels_bf16.cu) share: the error and profiling macros, the device
 * helpers (warp and block reductions, GELU, AdamW's bias corrections), the
 * node-call accessors, the fp32 kernels and launchers the bf16 path reuses
 * (its unfused attention core runs the fp32 one), and the entry points of
 * the pieces kernels.cu calls in their own files (gemm_lt32.cu, layernorm.cu).
 * Internal to hw/.
 */
#ifndef PLACER_HW_KERNELS_COMMON_CUH
#define PLACER_HW_KERNELS_COMMON_CUH

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_nodes.h"
#include "loss32.h"
extern "C" {
#include "nodes.h"
}

#define WARP 32

static inline int ceil_div(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

#define TRY(x) CU_TRY(ctx->err, ctx->err_len, x)
#define BTRY(x) BLAS_TRY(ctx->err, ctx->err_len, x)
#define LAUNCHED() TRY(cudaGetLastError())
#define KM(name) cu_kmark(ctx, name)
#define RET(x)                              \
    do {                                    \
        pl_status st_ = (x);                \
        if (st_ != PL_OK) return st_;       \
    } while (0)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float gelu_f(float x) {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float gelu_grad_f(float x) {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * 0.7978845608028654f * (1.0f + 0.134145f * x * x);
}

/* Block-wide max or sum of v (all threads get the result). red holds 32 floats. */
__device__ __forceinline__ float block_reduce(float v, float *red, bool is_max) {
    int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, nw = blockDim.x / WARP;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* red may still be read from a previous reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = lane < nw ? red[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(r) : warp_sum(r);
}

__device__ __forceinline__ void adamw_bias(const int *t_dev, int t_host, float b1, float b2, float *bc1, float *bc2) {
    __shared__ float s_bc[2];
    if (threadIdx.x == 0) {
        float t = (float)(t_dev ? *t_dev + 1 : t_host);
        s_bc[0] = 1.0f - powf(b1, t);
        s_bc[1] = 1.0f - powf(b2, t);
    }
    __syncthreads();
    *bc1 = s_bc[0];
    *bc2 = s_bc[1];
}

/* Grid for the permutes: T*hs elements by up to 65535 blocks of heads. */
static inline dim3 permute_grid(int T, int hs, int blocks_y) {
    return dim3((unsigned)((T * hs + 255) / 256), (unsigned)(blocks_y < 65535 ? blocks_y : 65535));
}

#define P(c, k) ((c)->params + (c)->pl.off[k])
#define G(c, k) ((c)->grads + (c)->pl.off[k])
#define S(c, k) ((c)->saved + (c)->mem.saved_off[k])

/* ---- fp32 kernels and launchers (kernels_common.cu) that kernels.cu, the bf16
 * path, the TF32 GEMMs and tensor parallelism share ---- */
__global__ void permute_qkv_k(float *qkvr, const float *qkv, const float *bias, int B, int T, int C, int NH);
__global__ void gelu_bwd_k(float *dg, const float *h, int64_t n);
__global__ void colsum_k(float *dbias, const float *dout, int64_t N, int OC);
__global__ void unpermute_qkv_k(float *qkv, const float *qkvr, int B, int T, int C, int NH);
__global__ void heads_tokens_k(float *dst, const float *src, int B, int T, int C, int NH, int to_tokens);
__global__ void softmax_causal_k(float *att, int64_t rows, int T);
__global__ void softmax_causal_bwd_k(float *datt, const float *att, int64_t rows, int T);
__global__ void bias_add_k(float *out, const float *bias, int N, int OC);
__global__ void bias_gelu_k(float *h, float *g, const float *bias, int N, int OC);
const char *gemm_name_str(cu_kprof *k, const char *buf);
pl_status gemm_batched(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                       const float *A, int lda, long long sa, const float *B, int ldb, long long sb, float beta,
                       float *C, int ldc, long long sc, int batch);
/* PL_ERR_CUDA when a tensor has 2^31 elements or more (the kernels index with int) */
pl_status check_size(cu_ctx *ctx, int64_t elements, const char *what);
/* dbias (OC) += column sums of dout (N, OC) */
pl_status colsum(cu_ctx *ctx, float *dbias, const float *dout, int64_t N, int OC);
/* Releases the TF32 mode's cached cuBLASLt descriptors (cu_nodes_fini calls it). */
void cu_nodes_fini32(cu_ctx *ctx);

/* ---- the bf16 mixed mode (kernels_bf16.cu) ---- */
/* One node call in bf16 (*done = 1: attention, MLP, head, loss), or
 * *done = 0 for the kinds the fp32 kernels run (embedding, layernorm,
 * residual). */
pl_status cu_node16(cu_ctx *ctx, const hw_node_call *c, int bwd, int *done);
/* AdamW over fp32 master weights, writing the bf16 copy a->p16 in the same pass. */
pl_status cu_adamw16(cu_ctx *ctx, float *p, const float *g, float *m, float *v, int64_t n, const hw_adamw_args *a);
/* Per-device setup of the bf16 kernels: the cuBLASLt handle, and the bf16
 * loss's shared-memory limit from smem (the fp32 loss's bytes; 0: none). */
pl_status cu_init16(cu_ctx *ctx, int smem);

/* The TF32 mode's cuBLASLt GEMM (gemm_lt32.cu), row-major in the
 * column-major view: D (m x n, ldc) = op(A) op(B) (+ D when accumulate),
 * then the epilogue E32_BIAS (adds bias, length m) or E32_GELU (adds bias,
 * stores the sum in aux, D = gelu(sum)). */
enum { E32_NONE = 0, E32_BIAS, E32_GELU };
pl_status gemm_lt32(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A,
                    int lda, const float *B, int ldb, float *D, int ldc, int accumulate, int epi, const float *bias,
                    float *aux);

/* The loss node (loss.cu): cu_loss_init sets ctx->loss_smem_ok and n_sm and
 * the kernels' shared-memory limits; cu_loss_forward writes the losses and
 * dlogits (in place over the logits). */
pl_status cu_loss_init(cu_ctx *ctx);
pl_status cu_loss_forward(cu_ctx *ctx, const hw_node_call *c);

/* The layernorm node (layernorm.cu): forward, and backward (dw, db accumulate). */
pl_status cu_layernorm_forward(cu_ctx *ctx, const hw_node_call *c);
pl_status cu_layernorm_backward(cu_ctx *ctx, const hw_node_call *c);

#endif
