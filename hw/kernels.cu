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
 *   loss            one block per row: online max/sum, then the logits
 *                   gradient written in place; the row is kept in shared
 *                   memory when it fits (50,304 floats do on an H100/H200), so
 *                   the 823 MB of logits are read from DRAM once and written once
 *   AdamW           one pass over the device's flat buffers, float4
 *
 * Gradient convention as in nodes.h: parameter gradients accumulate (GEMM
 * beta = 1, atomics for the reductions), input gradients assign or add by acc.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_nodes.h"
extern "C" {
#include "nodes.h"
}

#define WARP 32

static inline int ceil_div(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

void cu_kmark(cu_ctx *ctx, const char *name) {
    cu_kprof *k = ctx->kprof;
    if (!k || !k->on || k->n >= CU_KPROF_MAX) return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ctx->stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return;
    if (!k->ev[k->n] && cudaEventCreate(&k->ev[k->n]) != cudaSuccess) return;
    cudaEventRecord(k->ev[k->n], ctx->stream);
    k->name[k->n++] = name;
}

void cu_kprof_collect(cu_kprof *k) {
    if (!k || !k->on) return;
    for (int i = 1; i < k->n; i++) {
        if (!k->name[i]) continue;
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, k->ev[i - 1], k->ev[i]) != cudaSuccess) continue;
        int j;
        for (j = 0; j < k->n_agg; j++)
            if (k->agg_name[j] == k->name[i]) break;
        if (j == k->n_agg) {
            if (k->n_agg == CU_KPROF_NAMES) continue;
            k->agg_name[k->n_agg++] = k->name[i];
        }
        k->agg_ms[j] += ms;
        if (ms > k->agg_max[j]) k->agg_max[j] = ms;
        k->agg_calls[j]++;
    }
    k->n = 0;
}

void cu_kprof_print(const cu_kprof *k, int dev) {
    if (!k || !k->on) return;
    for (int j = 0; j < k->n_agg; j++) {
        long c = k->agg_calls[j];
        double mean_us = c > 1 ? (k->agg_ms[j] - k->agg_max[j]) / (double)(c - 1) * 1e3 : k->agg_ms[j] * 1e3;
        fprintf(stderr, "KPROF dev %d %-34s calls %6ld total %9.3f ms mean %9.2f us\n", dev, k->agg_name[j], c,
                k->agg_ms[j], mean_us);
    }
}

pl_status cu_fail(char *err, size_t len, const char *file, int line, const char *call, const char *what,
                  int is_oom) {
    if (err && len) snprintf(err, len, "%s:%d: %s: %s", file, line, call, what);
    return is_oom ? PL_ERR_DEVICE_OOM : PL_ERR_CUDA;
}

#define TRY(x) CU_TRY(ctx->err, ctx->err_len, x)
#define BTRY(x) BLAS_TRY(ctx->err, ctx->err_len, x)
#define LAUNCHED() TRY(cudaGetLastError())
#define KM(name) cu_kmark(ctx, name)
#define RET(x)                              \
    do {                                    \
        pl_status st_ = (x);                \
        if (st_ != PL_OK) return st_;       \
    } while (0)

/* ---------------- reductions ---------------- */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

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

__global__ void add_k(float *y, const float *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

/* out (N, OC) += bias (OC) */
__global__ void bias_add_k(float *out, const float *bias, int N, int OC) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * OC) out[i] += bias[i % OC];
}

/* dbias (OC) += column sums of dout (N, OC); block (32, 8), grid (OC/32, chunks) */
__global__ void colsum_k(float *dbias, const float *dout, int64_t N, int OC) {
    __shared__ float sh[8][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < OC)
        for (int64_t n = (int64_t)blockIdx.y * 8 + threadIdx.y; n < N; n += (int64_t)gridDim.y * 8)
            s += dout[n * OC + col];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += sh[k][threadIdx.x];
        atomicAdd(&dbias[col], t);
    }
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

/* h (N, 4C) += bias; g = gelu(h) */
__global__ void bias_gelu_k(float *h, float *g, const float *bias, int N, int OC) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * OC) return;
    float x = h[i] + bias[i % OC];
    h[i] = x;
    g[i] = gelu_f(x);
}

__global__ void gelu_bwd_k(float *dg, const float *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dg[i] *= gelu_grad_f(h[i]);
}

/* ---------------- layernorm ----------------
 * One warp per row. K = elements per lane (C <= 32 K): the row lives in
 * registers, read from memory once. K = 0 is the generic version for any C
 * (re-reads the row from L1).
 *
 * Backward: each warp keeps its rows' dweight/dbias partial sums in
 * registers, then a block adds them in shared memory and once into the
 * global gradients. The input gradient is g = rstd * (...) rounded on its
 * own (__fmul_rn) and then added (__fadd_rn): that stops the compiler from
 * fusing the accumulation into an FMA, which would make a tensor's two
 * gradient contributions sum differently depending on which came first, and
 * so on the placement. */

template <int K>
__global__ void layernorm_fwd_k(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                const float *b, int N, int C) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const float *x = inp + (int64_t)row * C;
    float *o = out + (int64_t)row * C;
    float m, r;
    if (K > 0) {
        float v[K > 0 ? K : 1];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            int i = lane + WARP * k;
            v[k] = i < C ? x[i] : 0.0f;
            s += v[k];
        }
        m = warp_sum(s) / C;
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            int i = lane + WARP * k;
            float d = v[k] - m;
            q += i < C ? d * d : 0.0f;
        }
        r = rsqrtf(warp_sum(q) / C + HW_LN_EPS);
#pragma unroll
        for (int k = 0; k < K; k++) {
            int i = lane + WARP * k;
            if (i < C) o[i] = (v[k] - m) * r * w[i] + b[i];
        }
    } else {
        float s = 0.0f;
        for (int i = lane; i < C; i += WARP) s += x[i];
        m = warp_sum(s) / C;
        float q = 0.0f;
        for (int i = lane; i < C; i += WARP) {
            float d = x[i] - m;
            q += d * d;
        }
        r = rsqrtf(warp_sum(q) / C + HW_LN_EPS);
        for (int i = lane; i < C; i += WARP) o[i] = (x[i] - m) * r * w[i] + b[i];
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

template <int K>
__global__ void layernorm_bwd_k(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                const float *w, const float *mean, const float *rstd, int N, int C, int acc) {
    extern __shared__ float sh[];
    float *sdw = sh, *sdb = sh + C;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) sh[i] = 0.0f;
    __syncthreads();
    const int warps = blockDim.x / WARP, lane = threadIdx.x % WARP;
    float pw[K > 0 ? K : 1], pb[K > 0 ? K : 1], wk[K > 0 ? K : 1];
#pragma unroll
    for (int k = 0; k < K; k++) {
        int i = lane + WARP * k;
        pw[k] = pb[k] = 0.0f;
        wk[k] = i < C ? w[i] : 0.0f;
    }
    for (int row = blockIdx.x * warps + threadIdx.x / WARP; row < N; row += gridDim.x * warps) {
        const float *d = dout + (int64_t)row * C, *x = inp + (int64_t)row * C;
        float *di = dinp + (int64_t)row * C;
        const float m = mean[row], r = rstd[row];
        float a = 0.0f, bsum = 0.0f;
        if (K > 0) {
            float dv[K > 0 ? K : 1], nv[K > 0 ? K : 1];
#pragma unroll
            for (int k = 0; k < K; k++) {
                int i = lane + WARP * k;
                dv[k] = i < C ? d[i] : 0.0f;
                nv[k] = i < C ? (x[i] - m) * r : 0.0f;
                float dn = wk[k] * dv[k];
                a += dn;
                bsum += dn * nv[k];
            }
            a = warp_sum(a) / C;
            bsum = warp_sum(bsum) / C;
#pragma unroll
            for (int k = 0; k < K; k++) {
                int i = lane + WARP * k;
                if (i >= C) continue;
                pb[k] += dv[k];
                pw[k] += nv[k] * dv[k];
                float g = __fmul_rn(r, wk[k] * dv[k] - a - nv[k] * bsum);
                di[i] = acc ? __fadd_rn(di[i], g) : g;
            }
        } else {
            for (int i = lane; i < C; i += WARP) {
                float norm = (x[i] - m) * r, dn = w[i] * d[i];
                a += dn;
                bsum += dn * norm;
            }
            a = warp_sum(a) / C;
            bsum = warp_sum(bsum) / C;
            for (int i = lane; i < C; i += WARP) {
                float norm = (x[i] - m) * r, dn = w[i] * d[i];
                atomicAdd(&sdb[i], d[i]);
                atomicAdd(&sdw[i], norm * d[i]);
                float g = __fmul_rn(r, dn - a - norm * bsum);
                di[i] = acc ? __fadd_rn(di[i], g) : g;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < K; k++) {
        int i = lane + WARP * k;
        if (i < C) {
            atomicAdd(&sdw[i], pw[k]);
            atomicAdd(&sdb[i], pb[k]);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        atomicAdd(&dw[i], sdw[i]);
        atomicAdd(&db[i], sdb[i]);
    }
}

/* ---------------- attention helpers ---------------- */

/* The permutes run on a 2-D grid: blockIdx.y walks the (part,) b, h blocks of
 * T x hs elements and blockIdx.x the elements inside one, so a thread does one
 * division instead of five. Reads and writes stay contiguous over hs. */

/* qkv (B,T,3C) + bias -> qkvr (3,B,NH,T,hs) */
__global__ void permute_qkv_k(float *qkvr, const float *qkv, const float *bias, int B, int T, int C, int NH) {
    const int hs = C / NH, THS = T * hs, R = 3 * B * NH;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= THS) return;
    int t = idx / hs, e = idx - t * hs;
    for (int r = blockIdx.y; r < R; r += gridDim.y) {
        int part = r / (B * NH), rem = r - part * B * NH, b = rem / NH, h = rem - b * NH;
        int col = part * C + h * hs + e;
        qkvr[(int64_t)r * THS + idx] = qkv[((int64_t)b * T + t) * 3 * C + col] + (bias ? bias[col] : 0.0f);
    }
}

/* qkvr-layout gradients (3,B,NH,T,hs) -> (B,T,3C) */
__global__ void unpermute_qkv_k(float *qkv, const float *qkvr, int B, int T, int C, int NH) {
    const int hs = C / NH, THS = T * hs, R = 3 * B * NH;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= THS) return;
    int t = idx / hs, e = idx - t * hs;
    for (int r = blockIdx.y; r < R; r += gridDim.y) {
        int part = r / (B * NH), rem = r - part * B * NH, b = rem / NH, h = rem - b * NH;
        qkv[((int64_t)b * T + t) * 3 * C + part * C + h * hs + e] = qkvr[(int64_t)r * THS + idx];
    }
}

/* (B,NH,T,hs) -> (B,T,C) when to_tokens, else the reverse */
__global__ void heads_tokens_k(float *dst, const float *src, int B, int T, int C, int NH, int to_tokens) {
    const int hs = C / NH, THS = T * hs, R = B * NH;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= THS) return;
    int t = idx / hs, e = idx - t * hs;
    for (int r = blockIdx.y; r < R; r += gridDim.y) {
        int b = r / NH, h = r - b * NH;
        int64_t heads = (int64_t)r * THS + idx, tok = ((int64_t)b * T + t) * C + h * hs + e;
        if (to_tokens) dst[tok] = src[heads];
        else dst[heads] = src[tok];
    }
}

/* Grid for the permutes: T*hs elements by up to 65535 blocks of heads. */
static inline dim3 permute_grid(int T, int hs, int blocks_y) {
    return dim3((unsigned)((T * hs + 255) / 256), (unsigned)(blocks_y < 65535 ? blocks_y : 65535));
}

/* causal softmax in place over rows of T (row index -> t = row % T) */
__global__ void softmax_causal_k(float *att, int64_t rows, int T) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x % WARP;
    if (row >= rows) return;
    int t = (int)(row % T);
    float *r = att + row * T;
    float m = -INFINITY;
    for (int s = lane; s <= t; s += WARP) m = fmaxf(m, r[s]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int s = lane; s <= t; s += WARP) sum += expf(r[s] - m);
    float inv = 1.0f / warp_sum(sum);
    for (int s = lane; s < T; s += WARP) r[s] = s <= t ? expf(r[s] - m) * inv : 0.0f;
}

/* datt -> att * (datt - sum(att * datt)) in place (the scale goes into the next GEMMs) */
__global__ void softmax_causal_bwd_k(float *datt, const float *att, int64_t rows, int T) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x % WARP;
    if (row >= rows) return;
    int t = (int)(row % T);
    float *d = datt + row * T;
    const float *a = att + row * T;
    float dot = 0.0f;
    for (int s = lane; s <= t; s += WARP) dot += a[s] * d[s];
    dot = warp_sum(dot);
    for (int s = lane; s < T; s += WARP) d[s] = s <= t ? a[s] * (d[s] - dot) : 0.0f;
}

/* ---------------- loss ---------------- */

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

/* One block per row of logits (stride Vp): loss = logsumexp - logit[target];
 * dlogits = (softmax - onehot) * inv_norm, padding columns zeroed. dlogits
 * may alias logits.
 * CACHE: the row is copied into shared memory while its max is taken, the
 * exponentials are computed once into shared memory with their sum, and the
 * gradient is written from there: the logits are read from DRAM once and
 * written once. Otherwise an online max/sum pass and a second pass over the
 * row (from L2 when it is still there). */
template <bool CACHE>
__global__ void __launch_bounds__(1024) loss_k(float *losses, float *dlogits, double *loss_sum, const float *logits,
                                               const int *targets, float inv_norm, int V, int Vp) {
    extern __shared__ float row_cache[];
    __shared__ float red[32];
    __shared__ float s_xt;
    const int64_t row = blockIdx.x;
    const float *x = logits + row * Vp;
    float *d = dlogits + row * Vp;
    const int tgt = targets[row];
    if (threadIdx.x == 0) s_xt = x[tgt];
    float M, S;
    if (CACHE) {
        float m = -INFINITY;
        /* eight independent loads in flight per thread */
        for (int base = 0; base < V; base += 8 * blockDim.x) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = base + u * blockDim.x + threadIdx.x;
                v[u] = i < V ? x[i] : -INFINITY;
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = base + u * blockDim.x + threadIdx.x;
                if (i < V) row_cache[i] = v[u];
                m = fmaxf(m, v[u]);
            }
        }
        M = block_reduce(m, red, true);
        float s = 0.0f;
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            float e = __expf(row_cache[i] - M);
            row_cache[i] = e;
            s += e;
        }
        S = block_reduce(s, red, false);
    } else {
        float m = -INFINITY, s = 0.0f;
        for (int base = 0; base < V; base += 8 * blockDim.x) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = base + u * blockDim.x + threadIdx.x;
                v[u] = i < V ? x[i] : -INFINITY;
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                int i = base + u * blockDim.x + threadIdx.x;
                if (i >= V) continue;
                if (v[u] > m) {
                    s = s * __expf(m - v[u]) + 1.0f;
                    m = v[u];
                } else {
                    s += __expf(v[u] - m);
                }
            }
        }
        M = block_reduce(m, red, true);
        s = m == -INFINITY ? 0.0f : s * __expf(m - M);
        S = block_reduce(s, red, false);
    }
    /* every read of the row (s_xt included) happened before the last barrier */
    if (threadIdx.x == 0) {
        float loss = logf(S) + M - s_xt;
        losses[row] = loss;
        if (loss_sum) atomicAdd(loss_sum, (double)loss);
    }
    const float inv = 1.0f / S;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float p = CACHE ? row_cache[i] * inv : __expf(x[i] - M) * inv;
        d[i] = (p - (i == tgt ? 1.0f : 0.0f)) * inv_norm;
    }
    for (int i = V + threadIdx.x; i < Vp; i += blockDim.x) d[i] = 0.0f;
}

/* ---------------- AdamW ----------------
 * The step number comes from t_dev (device memory) when given, so that a
 * captured graph replays correctly: each block derives the bias corrections
 * from *t_dev + 1, and adamw_tick_k increments the counter afterwards. */

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

/* The profile's copy of a kernel name (kept in the profile). */
static const char *gemm_name_str(cu_kprof *k, const char *buf) {
    for (int i = 0; i < k->n_gemm_names; i++)
        if (!strcmp(k->gemm_names[i], buf)) return k->gemm_names[i];
    if (k->n_gemm_names == CU_KPROF_NAMES) return "gemm (other)";
    snprintf(k->gemm_names[k->n_gemm_names], sizeof k->gemm_names[0], "%s", buf);
    return k->gemm_names[k->n_gemm_names++];
}

static const char *gemm_name(cu_kprof *k, int m, int n, int k_) {
    char buf[40];
    snprintf(buf, sizeof buf, "gemm %dx%dx%d", m, n, k_);
    return gemm_name_str(k, buf);
}

static pl_status gemm(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    BTRY(cublasGemmEx(ctx->blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C,
                      CUDA_R_32F, ldc, ctx->compute, CUBLAS_GEMM_DEFAULT));
    if (ctx->kprof) KM(gemm_name(ctx->kprof, m, n, k));
    return PL_OK;
}

static pl_status gemm_batched(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              float alpha, const float *A, int lda, long long sa, const float *B, int ldb,
                              long long sb, float beta, float *C, int ldc, long long sc, int batch) {
    BTRY(cublasGemmStridedBatchedEx(ctx->blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb,
                                    sb, &beta, C, CUDA_R_32F, ldc, sc, batch, ctx->compute, CUBLAS_GEMM_DEFAULT));
    if (ctx->kprof) {
        char nm[48];
        snprintf(nm, sizeof nm, "bgemm %dx%dx%d x%d", m, n, k, batch);
        KM(gemm_name_str(ctx->kprof, nm));
    }
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

/* The 32-bit-indexed kernels need tensors below 2^31 elements. */
static pl_status check_size(cu_ctx *ctx, int64_t elements, const char *what) {
    if (elements < (int64_t)1 << 31) return PL_OK;
    return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, what, "tensor too large (2^31 elements or more)", 0);
}

static pl_status bias_add(cu_ctx *ctx, float *out, const float *bias, int64_t N, int OC) {
    RET(check_size(ctx, N * OC, "bias_add"));
    bias_add_k<<<ceil_div(N * OC, 256), 256, 0, ctx->stream>>>(out, bias, (int)N, OC);
    LAUNCHED();
    KM("bias_add_k");
    return PL_OK;
}

static pl_status colsum(cu_ctx *ctx, float *dbias, const float *dout, int64_t N, int OC) {
    int chunks = (int)(N / 256) > 0 ? (int)(N / 256) : 1;
    if (chunks > 64) chunks = 64;
    colsum_k<<<dim3(ceil_div(OC, 32), chunks), dim3(32, 8), 0, ctx->stream>>>(dbias, dout, N, OC);
    LAUNCHED();
    KM("colsum_k");
    return PL_OK;
}

/* ---------------- nodes ---------------- */

/* the bf16 mode (at the end of this file) */
static pl_status cu_node16(cu_ctx *ctx, const hw_node_call *c, int bwd, int *done);
static pl_status cu_adamw16(cu_ctx *ctx, float *p, const float *g, float *m, float *v, int64_t n,
                            const hw_adamw_args *a);
static pl_status cu_init16(cu_ctx *ctx, int smem);

#define P(c, k) ((c)->params + (c)->pl.off[k])
#define G(c, k) ((c)->grads + (c)->pl.off[k])
#define S(c, k) ((c)->saved + (c)->mem.saved_off[k])

static pl_status attention_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int B = c->d.B, T = c->d.T, C = c->d.C, NH = c->d.NH, hs = C / NH, N = B * T;
    const int64_t NC = (int64_t)N * C;
    float *qkv = c->scratch, *yp = c->scratch + 3 * NC;
    float *qkvr = S(c, 0), *att = S(c, 1), *y = S(c, 2);
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    RET(check_size(ctx, 3 * NC, "attention"));
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
    RET(linear_bwd_inp(ctx, dy, c->dout, P(c, 2), N, C, C, C, 0));
    RET(linear_bwd_w(ctx, G(c, 2), c->dout, y, N, C, C, C));
    RET(colsum(ctx, G(c, 3), c->dout, N, C));
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
    return colsum(ctx, G(c, 1), dqkv, N, 3 * C);
}

static pl_status mlp_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    float *h = S(c, 0), *g = S(c, 1);
    RET(check_size(ctx, (int64_t)N * 4 * C, "mlp"));
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
    RET(linear_bwd_inp(ctx, dg, c->dout, P(c, 2), N, 4 * C, C, C, 0));
    RET(linear_bwd_w(ctx, G(c, 2), c->dout, g, N, 4 * C, C, C));
    RET(colsum(ctx, G(c, 3), c->dout, N, C));
    gelu_bwd_k<<<ceil_div((int64_t)N * 4 * C, 256), 256, 0, ctx->stream>>>(dg, h, (int64_t)N * 4 * C);
    LAUNCHED();
    KM("gelu_bwd_k");
    RET(linear_bwd_inp(ctx, c->din[0], dg, P(c, 0), N, C, 4 * C, 4 * C, c->acc[0]));
    RET(linear_bwd_w(ctx, G(c, 0), dg, c->in[0], N, C, 4 * C, 4 * C));
    return colsum(ctx, G(c, 1), dg, N, 4 * C);
}

static pl_status loss_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, V = c->d.V, Vp = c->d.Vp;
    size_t smem = (size_t)Vp * sizeof(float);
    if (ctx->loss_smem_ok && smem <= (size_t)ctx->loss_smem_ok)
        loss_k<true><<<N, 1024, smem, ctx->stream>>>(c->out, c->din[0], c->loss_sum, c->in[0], c->targets,
                                                     c->inv_norm, V, Vp);
    else
        loss_k<false><<<N, 1024, 0, ctx->stream>>>(c->out, c->din[0], c->loss_sum, c->in[0], c->targets,
                                                   c->inv_norm, V, Vp);
    LAUNCHED();
    KM("loss_k");
    return PL_OK;
}

/* Per-lane register count for a row of C floats: 4, 8, 12, 16, 24 or 32
 * (C <= 1024), else 0 for the generic kernels. */
static int ln_k(int C) {
    int k = (C + WARP - 1) / WARP;
    static const int ks[] = {4, 8, 12, 16, 24, 32};
    for (int i = 0; i < 6; i++)
        if (k <= ks[i]) return ks[i];
    return 0;
}

#define LN_DISPATCH(KERNEL, K, ...)                   \
    switch (K) {                                      \
    case 4: KERNEL<4><<<__VA_ARGS__; break;           \
    case 8: KERNEL<8><<<__VA_ARGS__; break;           \
    case 12: KERNEL<12><<<__VA_ARGS__; break;         \
    case 16: KERNEL<16><<<__VA_ARGS__; break;         \
    case 24: KERNEL<24><<<__VA_ARGS__; break;         \
    case 32: KERNEL<32><<<__VA_ARGS__; break;         \
    default: KERNEL<0><<<__VA_ARGS__; break;          \
    }

static pl_status layernorm_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    LN_DISPATCH(layernorm_fwd_k, ln_k(C), ceil_div((int64_t)N * WARP, 256), 256, 0, ctx->stream>>>(
        c->out, S(c, 0), S(c, 1), c->in[0], P(c, 0), P(c, 1), N, C))
    LAUNCHED();
    KM("layernorm_fwd_k");
    return PL_OK;
}

static pl_status layernorm_backward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    int grid = ceil_div(N, 8 * 4); /* about four rows per warp */
    if (grid > 264) grid = 264;
    LN_DISPATCH(layernorm_bwd_k, ln_k(C), grid, 256, 2 * C * sizeof(float), ctx->stream>>>(
        c->din[0], G(c, 0), G(c, 1), c->dout, c->in[0], P(c, 0), S(c, 0), S(c, 1), N, C, c->acc[0]))
    LAUNCHED();
    KM("layernorm_bwd_k");
    return PL_OK;
}

pl_status cu_nodes_init(cu_ctx *ctx) {
    /* let the loss kernel keep a whole row in shared memory where it fits */
    int dev = 0, optin = 0;
    TRY(cudaGetDevice(&dev));
    TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int want = optin - 1024; /* room for the kernel's static shared memory */
    /* the flash kernels use bf16 mma.sync (sm_80+); an older GPU (a T4) takes
     * the unfused attention path, whose scratch the plan always reserves */
    int major = 0;
    TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    ctx->flash_ok = major >= 8;
    ctx->loss_smem_ok = 0;
    if (want > 48 * 1024) {
        TRY(cudaFuncSetAttribute(loss_k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, want));
        ctx->loss_smem_ok = want;
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
    case OP_LAYERNORM: return layernorm_forward(ctx, c);
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
        return linear_fwd(ctx, c->out, c->in[0], P(c, 0), N, C, c->d.Vp, c->d.Vp);
    case OP_LOSS: return loss_forward(ctx, c);
    default: return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cu_node_forward", "unknown node kind", 0);
    }
}

pl_status cu_node_backward(cu_ctx *ctx, const hw_node_call *c) {
    KM(NULL);
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
    case OP_LAYERNORM: return layernorm_backward(ctx, c);
    case OP_ATTENTION: return attention_backward(ctx, c);
    case OP_RESIDUAL:
        residual_bwd_k<<<ceil_div(NC, 256), 256, 0, ctx->stream>>>(c->din[0], c->din[1], c->dout, NC, c->acc[0],
                                                                    c->acc[1]);
        LAUNCHED();
        KM("residual_bwd_k");
        return PL_OK;
    case OP_MLP: return mlp_backward(ctx, c);
    case OP_HEAD:
        /* the loss zeroes the padding columns of dlogits, so the padding rows add nothing */
        RET(linear_bwd_inp(ctx, c->din[0], c->dout, P(c, 0), N, C, c->d.Vp, c->d.Vp, c->acc[0]));
        return linear_bwd_w(ctx, G(c, 0), c->dout, c->in[0], N, C, c->d.Vp, c->d.Vp);
    case OP_LOSS: return PL_OK; /* fused into the forward */
    default: return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cu_node_backward", "unknown node kind", 0);
    }
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

/* ======================================================================
 * The bf16 mixed mode (hw.h states its rules). GEMMs are cuBLASLt with
 * bf16 A and B, fp32 accumulation and an fp32 or bf16 D, bias and GELU in
 * the epilogue; everything else is the small kernels below. Where a
 * cuBLASLt epilogue has no algorithm for a shape, the same result comes
 * from cublasGemmEx and a separate kernel.
 *
 * Attention uses the flash kernel (hw/flash_attention.h) when it is built
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

/* attention's bf16 input copy: after the T x T block (or lse) in saved slot 1 (layout.c) */
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
    RET(lin16_bwd_inp(ctx, dy16, CUDA_R_16BF, d16, P16(c, 2), N, C, C, C, 0));
    RET(lin16_bwd_w(ctx, G(c, 2), d16, y16, N, C, C, C));
    int fe = flash_attn_bwd_bf16(dqkv16, c->scratch + used, dy16, qkv16, y16, lse, B, T, C, NH, ctx->stream);
    if (fe != 0)
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "flash_attn_bwd_bf16",
                       cudaGetErrorString((cudaError_t)fe), 0);
    KM("flash_attn_bwd");
    RET(colsum16(ctx, G(c, 1), dqkv16, N, 3 * C));
    RET(lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dqkv16, P16(c, 0), N, C, 3 * C, 3 * C, c->acc[0]));
    return lin16_bwd_w(ctx, G(c, 0), dqkv16, x16, N, C, 3 * C, 3 * C);
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
    /* dh = (dout @ wproj) * gelu'(h). cuBLASLt's DGELU epilogue does it in one
     * GEMM but ran at 42 us against 18 + 13 for the GEMM and gelu_bwd16v_k on
     * the H200 (shapes 1536 x 4096 x 384), so it stays two passes. */
    RET(lin16_bwd_inp(ctx, dg, CUDA_R_32F, d16, P16(c, 2), N, 4 * C, C, C, 0));
    RET(lin16_bwd_w(ctx, G(c, 2), d16, g16, N, 4 * C, C, C));
    RET(gelu_colsum(ctx, dh16, G(c, 1), dg, h16, N, 4 * C));
    RET(lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dh16, P16(c, 0), N, C, 4 * C, 4 * C, c->acc[0]));
    return lin16_bwd_w(ctx, G(c, 0), dh16, x16, N, C, 4 * C, 4 * C);
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
static pl_status cu_node16(cu_ctx *ctx, const hw_node_call *c, int bwd, int *done) {
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
        RET(lin16_bwd_inp(ctx, c->din[0], CUDA_R_32F, dl, P16(c, 0), N, C, c->d.Vp, c->d.Vp, c->acc[0]));
        return lin16_bwd_w(ctx, G(c, 0), dl, x16, N, C, c->d.Vp, c->d.Vp);
    }
    case OP_LOSS: return bwd ? PL_OK : loss_forward16(ctx, c);
    default: *done = 0; return PL_OK;
    }
}

static pl_status cu_adamw16(cu_ctx *ctx, float *p, const float *g, float *m, float *v, int64_t n,
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

static pl_status cu_init16(cu_ctx *ctx, int smem) {
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
