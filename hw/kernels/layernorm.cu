/*
 * layernorm.cu: the layernorm node on the GPU (fp32 in every precision; the
 * CPU reference is nodes_cpu.c). One warp a row, the row in registers: the
 * scalar kernels for any C, float4 kernels when C is a multiple of 128 and
 * the rows are 16-byte aligned (PLACER_LN4=0 turns those off). Called from
 * cu_node_forward / cu_node_backward (kernels.cu) through
 * cu_layernorm_forward / cu_layernorm_backward (kernels_common.cuh).
 */
#include "kernels_common.cuh"

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

/* The float4 versions (LN4 below: C a multiple of 128 with V = C / 128 in
 * 1..8, rows 16-byte aligned): V float4 a lane, so a lane issues V 16-byte
 * loads a row instead of 4V scalar ones. Same formulas, per element, as
 * the scalar kernels; the row sums add in another order (within 2e-5). */
#define LN4_APPLY(OP)                                                                                  \
    OP(x) OP(y) OP(z) OP(w)

template <int V>
__global__ void layernorm_fwd4_k(float4 *out, float *mean, float *rstd, const float4 *inp, const float4 *w,
                                 const float4 *b, int N, int C) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const int C4 = C / 4;
    const float4 *x = inp + (int64_t)row * C4;
    float4 v[V];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) {
        v[k] = x[lane + WARP * k];
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    const float m = warp_sum(s) / C;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) {
#define LN4_SQ(f) { const float d_ = v[k].f - m; q += d_ * d_; }
        LN4_APPLY(LN4_SQ)
#undef LN4_SQ
    }
    const float r = rsqrtf(warp_sum(q) / C + HW_LN_EPS);
    float4 *o = out + (int64_t)row * C4;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const int i = lane + WARP * k;
        const float4 wk = w[i], bk = b[i];
        float4 y;
#define LN4_OUT(f) y.f = (v[k].f - m) * r * wk.f + bk.f;
        LN4_APPLY(LN4_OUT)
#undef LN4_OUT
        o[i] = y;
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

template <int V>
__global__ void layernorm_bwd4_k(float4 *dinp, float *dw, float *db, const float4 *dout, const float4 *inp,
                                 const float4 *w, const float *mean, const float *rstd, int N, int C, int acc) {
    extern __shared__ float sh[];
    float *sdw = sh, *sdb = sh + C;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) sh[i] = 0.0f;
    __syncthreads();
    const int warps = blockDim.x / WARP, lane = threadIdx.x % WARP, C4 = C / 4;
    float4 pw[V], pb[V], wk[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        pw[k] = pb[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        wk[k] = w[lane + WARP * k];
    }
    for (int row = blockIdx.x * warps + threadIdx.x / WARP; row < N; row += gridDim.x * warps) {
        const float4 *d = dout + (int64_t)row * C4, *x = inp + (int64_t)row * C4;
        float4 *di = dinp + (int64_t)row * C4;
        const float m = mean[row], r = rstd[row];
        float a = 0.0f, bsum = 0.0f;
        float4 dv[V], nv[V];
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int i = lane + WARP * k;
            dv[k] = d[i];
            const float4 xv = x[i];
#define LN4_DOT(f) { nv[k].f = (xv.f - m) * r; const float dn_ = wk[k].f * dv[k].f; a += dn_; bsum += dn_ * nv[k].f; }
            LN4_APPLY(LN4_DOT)
#undef LN4_DOT
        }
        a = warp_sum(a) / C;
        bsum = warp_sum(bsum) / C;
#pragma unroll
        for (int k = 0; k < V; k++) {
            const int i = lane + WARP * k;
            float4 g, old = acc ? di[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#define LN4_GRAD(f)                                                                                    \
    {                                                                                                  \
        pb[k].f += dv[k].f;                                                                            \
        pw[k].f += nv[k].f * dv[k].f;                                                                  \
        const float g_ = __fmul_rn(r, wk[k].f * dv[k].f - a - nv[k].f * bsum);                         \
        g.f = acc ? __fadd_rn(old.f, g_) : g_;                                                         \
    }
            LN4_APPLY(LN4_GRAD)
#undef LN4_GRAD
            di[i] = g;
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) {
        const int i = 4 * (lane + WARP * k);
        atomicAdd(&sdw[i], pw[k].x); atomicAdd(&sdw[i + 1], pw[k].y);
        atomicAdd(&sdw[i + 2], pw[k].z); atomicAdd(&sdw[i + 3], pw[k].w);
        atomicAdd(&sdb[i], pb[k].x); atomicAdd(&sdb[i + 1], pb[k].y);
        atomicAdd(&sdb[i + 2], pb[k].z); atomicAdd(&sdb[i + 3], pb[k].w);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        atomicAdd(&dw[i], sdw[i]);
        atomicAdd(&db[i], sdb[i]);
    }
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

/* The V of the float4 kernels for these rows, or 0 (the scalar kernels). */
static int ln4_v(const cu_ctx *ctx, int C, const void *a, const void *b, const void *d, const void *e) {
    if (!ctx->ln4 || C % 128 != 0 || ((uintptr_t)a | (uintptr_t)b | (uintptr_t)d | (uintptr_t)e) % 16 != 0) return 0;
    const int v = C / 128;
    return v == 1 || v == 2 || v == 3 || v == 4 || v == 6 || v == 8 ? v : 0;
}

#define LN4_DISPATCH(KERNEL, V, ...)                  \
    switch (V) {                                      \
    case 1: KERNEL<1><<<__VA_ARGS__; break;           \
    case 2: KERNEL<2><<<__VA_ARGS__; break;           \
    case 3: KERNEL<3><<<__VA_ARGS__; break;           \
    case 4: KERNEL<4><<<__VA_ARGS__; break;           \
    case 6: KERNEL<6><<<__VA_ARGS__; break;           \
    default: KERNEL<8><<<__VA_ARGS__; break;          \
    }

pl_status cu_layernorm_forward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    const int v4 = ln4_v(ctx, C, c->out, c->in[0], P(c, 0), P(c, 1));
    if (v4) {
        LN4_DISPATCH(layernorm_fwd4_k, v4, ceil_div((int64_t)N * WARP, 256), 256, 0, ctx->stream>>>(
            (float4 *)c->out, S(c, 0), S(c, 1), (const float4 *)c->in[0], (const float4 *)P(c, 0),
            (const float4 *)P(c, 1), N, C))
        LAUNCHED();
        KM("layernorm_fwd4_k");
        return PL_OK;
    }
    LN_DISPATCH(layernorm_fwd_k, ln_k(C), ceil_div((int64_t)N * WARP, 256), 256, 0, ctx->stream>>>(
        c->out, S(c, 0), S(c, 1), c->in[0], P(c, 0), P(c, 1), N, C))
    LAUNCHED();
    KM("layernorm_fwd_k");
    return PL_OK;
}

pl_status cu_layernorm_backward(cu_ctx *ctx, const hw_node_call *c) {
    const int N = c->d.B * c->d.T, C = c->d.C;
    /* 16 warps a block, about two rows each (PLACER_LN_BWD=256: 8 warps,
     * four rows each, the same number of blocks, so of global atomics).
     * GPU call 3 of the third session, graph step, 2 rounds: bf16 3.003 /
     * 3.005 ms against 3.033 / 3.032, TF32 5.237 / 5.206 against 5.239 /
     * 5.246 */
    const int threads = ctx->ln_bwd_threads == 256 ? 256 : 512;
    /* Each block adds its sums to dw and db by atomics. Measured slower (third
     * session): partial sums a block added up by a second kernel (call 5:
     * 15.6 + 6.7 us against 15.9; graph step TF32 5.240 / 5.219 ms against
     * 5.182 / 5.161), one row a warp with twice the blocks (call 6: TF32
     * 5.254 / 5.216 against 5.158 / 5.152, bf16 3.067 / 3.066 against 2.986 /
     * 2.985) */
    int grid = ceil_div(N, 8 * 4);
    if (grid > 264) grid = 264;
    const int v4 = ln4_v(ctx, C, c->din[0], c->dout, c->in[0], P(c, 0));
    if (v4) {
        LN4_DISPATCH(layernorm_bwd4_k, v4, grid, threads, 2 * C * sizeof(float), ctx->stream>>>(
            (float4 *)c->din[0], G(c, 0), G(c, 1), (const float4 *)c->dout, (const float4 *)c->in[0],
            (const float4 *)P(c, 0), S(c, 0), S(c, 1), N, C, c->acc[0]))
        LAUNCHED();
        KM("layernorm_bwd4_k");
    } else {
        LN_DISPATCH(layernorm_bwd_k, ln_k(C), grid, threads, 2 * C * sizeof(float), ctx->stream>>>(
            c->din[0], G(c, 0), G(c, 1), c->dout, c->in[0], P(c, 0), S(c, 0), S(c, 1), N, C, c->acc[0]))
        LAUNCHED();
        KM("layernorm_bwd_k");
    }
    return PL_OK;
}
