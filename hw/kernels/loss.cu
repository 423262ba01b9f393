/*
 * loss.cu: the loss node on the GPU (fp32 and TF32 modes; the bf16 mode's
 * is loss16_k in kernels_bf16.cu). One row of logits (stride Vp) a block:
 * loss = logsumexp - logit[target], dlogits = (softmax - onehot) * inv_norm
 * with the padding columns zeroed, written in place over the logits (the
 * executor's program aliases them). The row is 201 KB at the 49M GPT's vocabulary, so the
 * kernels differ in where they keep it between reading it and writing the
 * gradient (the read and the write of 823 MB are the whole cost: ~0.39 ms
 * on the H200 at the bandwidth a copy reaches):
 *
 *   loss_k<CACHE>  strict fp32: the row in shared memory (one block an SM)
 *                  or, where it does not fit, re-read
 *   lossf_k        TF32 (LOSS32_F*, LOSS32_PERSIST): an online max and sum
 *                  over 16-byte loads, then the row re-read, mostly from L2
 *   lossr_k        TF32 (LOSS32_REG*): one pass; the row on chip, REG float4
 *                  a thread in registers and the rest in shared memory
 *
 * The TF32 variants compute the same function with __expf and fp32 sums in
 * different orders: their losses and gradients differ in the last bits only
 * (benchmarks/hw/loss_variants.cu checks each against a double reference).
 */
#include <cuda_pipeline.h>

#include "kernels_common.cuh"
#include "loss32.h"


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

/* The TF32 mode's loss: one block per row, no copy of the row in shared
 * memory (loss_k<true> copies the 201 KB row there and works in three
 * barrier-separated phases: read, exp, write). Two passes over the row with
 * 16-byte accesses: the first keeps an online max and sum, one rescale per 4
 * elements instead of one per element; the second re-reads the row (mostly
 * from L2, where the first pass left it: the stores are streaming so they do
 * not evict it) and writes dlogits = (softmax - onehot) * inv_norm, padding
 * columns 0. 2 exps and ~8 ALU ops an element. On the H200 (GPU calls 2, 3):
 * loss_k 688 us, this kernel with two 512-thread blocks an SM 553 us, and
 * with one 1024-thread block (the default; probably because fewer rows in
 * flight leave more of them in L2 for the second pass) ~0.1 ms less again
 * in the graph step; the floor (823 MB read and written once) is ~0.4 ms. Vp % 4 == 0
 * (it is a multiple of 64), 16-byte aligned rows. dlogits may alias logits:
 * thread 0 reads the target's logit before the barrier that precedes every
 * write. */
#define LOSSF_UNROLL 4
template <int THREADS, int BLOCKS>
__global__ void __launch_bounds__(THREADS, BLOCKS) lossf_k(float *losses, float *dlogits, double *loss_sum,
                                                           const float *logits, const int *targets, float inv_norm,
                                                           int V, int Vp, int N) {
    __shared__ float red[32];
    for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
        const float4 *x = (const float4 *)(logits + row * Vp);
        float4 *d = (float4 *)(dlogits + row * Vp);
        const int tgt = targets[row], nvec = Vp / 4;
        float m = -INFINITY, s = 0.0f;
        for (int base = threadIdx.x; base < nvec; base += LOSSF_UNROLL * THREADS) {
            float4 u[LOSSF_UNROLL];
#pragma unroll
            for (int j = 0; j < LOSSF_UNROLL; j++) {
                int i = base + j * THREADS;
                if (i < nvec) u[j] = x[i];
            }
#pragma unroll
            for (int j = 0; j < LOSSF_UNROLL; j++) {
                int i = base + j * THREADS;
                if (i >= nvec) break;
                float v[4] = {u[j].x, u[j].y, u[j].z, u[j].w};
                if (i * 4 + 4 > V) /* the row's last real vector or padding */
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        if (i * 4 + k >= V) v[k] = -INFINITY;
                const float mx = fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3]));
                if (mx == -INFINITY) continue; /* padding only */
                if (mx > m) {
                    s = m == -INFINITY ? 0.0f : s * __expf(m - mx);
                    m = mx;
                }
                s += __expf(v[0] - m) + __expf(v[1] - m) + __expf(v[2] - m) + __expf(v[3] - m);
            }
        }
        const float M = block_reduce(m, red, true);
        s = m == -INFINITY ? 0.0f : s * __expf(m - M);
        const float S = block_reduce(s, red, false);
        if (threadIdx.x == 0) {
            const float loss = logf(S) + M - logits[row * Vp + tgt];
            losses[row] = loss;
            if (loss_sum) atomicAdd(loss_sum, (double)loss);
        }
        __syncthreads(); /* thread 0 has read logit[tgt] before anyone overwrites it */
        const float inv = 1.0f / S, sc = inv * inv_norm;
        for (int i = threadIdx.x; i < nvec; i += THREADS) {
            const float4 u = __ldcs(x + i); /* last use of the row */
            float4 o;
            if (i * 4 + 4 <= V && (tgt < i * 4 || tgt >= i * 4 + 4)) { /* the common case: no guards, no target */
                o.x = __expf(u.x - M) * sc;
                o.y = __expf(u.y - M) * sc;
                o.z = __expf(u.z - M) * sc;
                o.w = __expf(u.w - M) * sc;
            } else {
                float v[4] = {u.x, u.y, u.z, u.w}, r[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int col = i * 4 + k;
                    r[k] = col < V ? (__expf(v[k] - M) * inv - (col == tgt ? 1.0f : 0.0f)) * inv_norm : 0.0f;
                }
                o = make_float4(r[0], r[1], r[2], r[3]);
            }
            __stcs(d + i, o);
        }
    }
}

/* lossr_k: the TF32 loss in one pass, the row kept on chip between its read
 * and its gradient's write (823 MB read once and written once, nothing
 * re-read from L2). One 1024-thread block an SM (__launch_bounds__(1024, 1):
 * at most 64 registers a thread): vectors j * 1024 + tid (j < REG) of the
 * row in registers, the rest (REG * 1024 <= i < Vp / 4) copied by cp.async
 * into shared memory ((Vp / 4 - REG * 1024) * 16 bytes: 70 KB for Vp 50304
 * and REG 8). Three phases split by the two block reductions: the max, the
 * exponentials (in place) with their sum, the scaled gradient. Padding
 * columns enter as -inf, so their exponential and gradient are 0. dlogits may
 * alias logits: every read of the row (the target's logit included) ends
 * before the first reduction's barrier, every write comes after it. */
__device__ __forceinline__ float4 lossr_mask(float4 u, int i, int V) {
    if (i * 4 + 4 > V) { /* the row's last real vector, or padding */
        if (i * 4 + 0 >= V) u.x = -INFINITY;
        if (i * 4 + 1 >= V) u.y = -INFINITY;
        if (i * 4 + 2 >= V) u.z = -INFINITY;
        if (i * 4 + 3 >= V) u.w = -INFINITY;
    }
    return u;
}

__device__ __forceinline__ float lossr_max(float4 u) { return fmaxf(fmaxf(u.x, u.y), fmaxf(u.z, u.w)); }

__device__ __forceinline__ float lossr_exp(float4 *u, float M) {
    u->x = __expf(u->x - M);
    u->y = __expf(u->y - M);
    u->z = __expf(u->z - M);
    u->w = __expf(u->w - M);
    return (u->x + u->y) + (u->z + u->w);
}

/* the gradient of vector i: e * sc, less inv_norm at the target's column */
__device__ __forceinline__ float4 lossr_grad(float4 e, int i, int tgt, float sc, float inv_norm) {
    float4 o = make_float4(e.x * sc, e.y * sc, e.z * sc, e.w * sc);
    if (tgt >= i * 4 && tgt < i * 4 + 4) {
        const int k = tgt - i * 4;
        if (k == 0) o.x -= inv_norm;
        if (k == 1) o.y -= inv_norm;
        if (k == 2) o.z -= inv_norm;
        if (k == 3) o.w -= inv_norm;
    }
    return o;
}

#define LOSSR_THREADS 1024
template <int REG>
__global__ void __launch_bounds__(LOSSR_THREADS, 1) lossr_k(float *losses, float *dlogits, double *loss_sum,
                                                            const float *logits, const int *targets, float inv_norm,
                                                            int V, int Vp) {
    extern __shared__ float4 lossr_spill[];
    __shared__ float red[32];
    __shared__ float s_xt;
    const int64_t row = blockIdx.x;
    const float4 *x = (const float4 *)(logits + row * Vp);
    float4 *d = (float4 *)(dlogits + row * Vp);
    const int tid = threadIdx.x, tgt = targets[row], nvec = Vp / 4;
    const int nreg = nvec < REG * LOSSR_THREADS ? nvec : REG * LOSSR_THREADS;
    if (tid == 0) s_xt = logits[row * Vp + tgt];
    for (int i = nreg + tid; i < nvec; i += LOSSR_THREADS)
        __pipeline_memcpy_async(lossr_spill + (i - nreg), x + i, sizeof(float4));
    __pipeline_commit();
    float4 r[REG];
#pragma unroll
    for (int j = 0; j < REG; j++) {
        const int i = j * LOSSR_THREADS + tid;
        r[j] = i < nreg ? __ldcs(x + i) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < REG; j++) {
        r[j] = lossr_mask(r[j], j * LOSSR_THREADS + tid, V);
        m = fmaxf(m, lossr_max(r[j]));
    }
    __pipeline_wait_prior(0); /* each thread reads back only the vectors it copied */
    for (int i = nreg + tid; i < nvec; i += LOSSR_THREADS) {
        const float4 u = lossr_mask(lossr_spill[i - nreg], i, V);
        lossr_spill[i - nreg] = u;
        m = fmaxf(m, lossr_max(u));
    }
    const float M = block_reduce(m, red, true);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < REG; j++) s += lossr_exp(&r[j], M);
    for (int i = nreg + tid; i < nvec; i += LOSSR_THREADS) {
        float4 u = lossr_spill[i - nreg];
        s += lossr_exp(&u, M);
        lossr_spill[i - nreg] = u;
    }
    const float S = block_reduce(s, red, false);
    if (tid == 0) {
        const float loss = logf(S) + M - s_xt;
        losses[row] = loss;
        if (loss_sum) atomicAdd(loss_sum, (double)loss);
    }
    const float sc = inv_norm / S;
#pragma unroll
    for (int j = 0; j < REG; j++) {
        const int i = j * LOSSR_THREADS + tid;
        if (i < nreg) __stcs(d + i, lossr_grad(r[j], i, tgt, sc, inv_norm));
    }
    for (int i = nreg + tid; i < nvec; i += LOSSR_THREADS)
        __stcs(d + i, lossr_grad(lossr_spill[i - nreg], i, tgt, sc, inv_norm));
}

/* ---------------- the TF32 variants, by number (loss32.h) ---------------- */

static const char *const loss32_names[LOSS32_N] = {"off", "512", "1024", "1sm", "persist", "reg8", "reg12"};

const char *cu_loss32_name(int v) { return v >= 0 && v < LOSS32_N ? loss32_names[v] : "?"; }

int cu_loss32_parse(const char *s) {
    for (int v = 0; v < LOSS32_N; v++)
        if (s && !strcmp(s, loss32_names[v])) return v;
    return -1;
}

/* the dynamic shared memory a variant asks for: lossr_k's spill; for
 * LOSS32_F1SM and LOSS32_PERSIST more than half an SM's, so that one block
 * runs an SM (LOSS32_F1SM_SMEM) */
#define LOSS32_F1SM_SMEM (120 * 1024)
static size_t loss32_smem(int v, int Vp) {
    const int64_t nvec = Vp / 4;
    switch (v) {
    case LOSS32_F1SM:
    case LOSS32_PERSIST: return LOSS32_F1SM_SMEM;
    case LOSS32_REG8: return nvec > 8 * LOSSR_THREADS ? (size_t)(nvec - 8 * LOSSR_THREADS) * sizeof(float4) : 0;
    case LOSS32_REG12: return nvec > 12 * LOSSR_THREADS ? (size_t)(nvec - 12 * LOSSR_THREADS) * sizeof(float4) : 0;
    default: return 0;
    }
}

int cu_loss32_fits(int v, int Vp, int smem_max) {
    if (v <= LOSS32_OFF || v >= LOSS32_N || Vp % 4 != 0) return 0;
    return loss32_smem(v, Vp) <= (size_t)smem_max;
}

/* Each kernel may take up to smem_max of dynamic shared memory, which is
 * what cu_loss32_fits allows it (lossf_k's one-block-an-SM variants only on
 * a GPU where their LOSS32_F1SM_SMEM fits). */
cudaError_t cu_loss32_setup(int smem_max) {
    const cudaFuncAttribute a = cudaFuncAttributeMaxDynamicSharedMemorySize;
    cudaError_t e = cudaSuccess;
    if (smem_max >= LOSS32_F1SM_SMEM) e = cudaFuncSetAttribute(lossf_k<1024, 1>, a, smem_max);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(lossr_k<8>, a, smem_max);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(lossr_k<12>, a, smem_max);
    return e;
}

cudaError_t cu_loss32_launch(int v, cudaStream_t s, int n_sm, float *losses, float *dlogits, double *loss_sum,
                             const float *logits, const int *targets, float inv_norm, int N, int V, int Vp) {
    const size_t smem = loss32_smem(v, Vp);
    switch (v) {
    case LOSS32_F512:
        lossf_k<512, 2><<<N, 512, 0, s>>>(losses, dlogits, loss_sum, logits, targets, inv_norm, V, Vp, N);
        break;
    case LOSS32_F1024:
    case LOSS32_F1SM:
        lossf_k<1024, 1><<<N, 1024, smem, s>>>(losses, dlogits, loss_sum, logits, targets, inv_norm, V, Vp, N);
        break;
    case LOSS32_PERSIST:
        lossf_k<1024, 1><<<n_sm < N ? n_sm : N, 1024, smem, s>>>(losses, dlogits, loss_sum, logits, targets,
                                                                  inv_norm, V, Vp, N);
        break;
    case LOSS32_REG8:
        lossr_k<8><<<N, LOSSR_THREADS, smem, s>>>(losses, dlogits, loss_sum, logits, targets, inv_norm, V, Vp);
        break;
    case LOSS32_REG12:
        lossr_k<12><<<N, LOSSR_THREADS, smem, s>>>(losses, dlogits, loss_sum, logits, targets, inv_norm, V, Vp);
        break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

/* ---------------- the node ---------------- */

pl_status cu_loss_init(cu_ctx *ctx) {
    /* let loss_k keep a whole row in shared memory where it fits, and the
     * TF32 variants take what they ask for */
    int dev = 0, optin = 0;
    TRY(cudaGetDevice(&dev));
    TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    TRY(cudaDeviceGetAttribute(&ctx->n_sm, cudaDevAttrMultiProcessorCount, dev));
    int want = optin - 1024; /* room for the kernels' static shared memory */
    ctx->loss_smem_ok = 0;
    if (want > 48 * 1024) {
        TRY(cudaFuncSetAttribute(loss_k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, want));
        TRY(cu_loss32_setup(want));
        ctx->loss_smem_ok = want;
    }
    return PL_OK;
}

pl_status cu_loss_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, V = c->d.V, Vp = c->d.Vp;
    size_t smem = (size_t)Vp * sizeof(float);
    if (ctx->tf32_loss && ((uintptr_t)c->in[0] | (uintptr_t)c->din[0]) % 16 == 0) {
        /* the chosen variant where its shared memory fits, else the two-pass one */
        const int v = cu_loss32_fits(ctx->tf32_loss, Vp, ctx->loss_smem_ok) ? ctx->tf32_loss
                      : Vp % 4 == 0                                          ? LOSS32_F1024
                                                                             : LOSS32_OFF;
        if (v != LOSS32_OFF) {
            TRY(cu_loss32_launch(v, ctx->stream, ctx->n_sm, c->out, c->din[0], c->loss_sum, c->in[0], c->targets,
                                 c->inv_norm, N, V, Vp));
            KM(v >= LOSS32_REG8 ? "lossr_k" : "lossf_k");
            return PL_OK;
        }
    }
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
