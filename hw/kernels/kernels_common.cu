/*
 * kernels_common.cu: what every CUDA kernel file of the engine shares, below
 * the node dispatch in kernels.cu: the error and profiling marks (cu_fail,
 * cu_kmark, the kernel profile), the size check, the batched GEMM wrapper
 * and its profile names, the bias column sums, and the fp32 elementwise and
 * attention-helper kernels that the bf16 path (kernels_bf16.cu), the TF32
 * GEMMs (gemm_lt32.cu) and tensor parallelism (dist_tp_cuda.cu) reuse.
 * Declared in kernels_common.cuh. It calls nothing in the other kernel
 * files, so they depend on it and not on each other in a circle.
 */

#include "kernels_common.cuh"

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

/* The profile's copy of a kernel name (kept in the profile). */
const char *gemm_name_str(cu_kprof *k, const char *buf) {
    for (int i = 0; i < k->n_gemm_names; i++)
        if (!strcmp(k->gemm_names[i], buf)) return k->gemm_names[i];
    if (k->n_gemm_names == CU_KPROF_NAMES) return "gemm (other)";
    snprintf(k->gemm_names[k->n_gemm_names], sizeof k->gemm_names[0], "%s", buf);
    return k->gemm_names[k->n_gemm_names++];
}

pl_status gemm_batched(cu_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
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

/* The 32-bit-indexed kernels need tensors below 2^31 elements. */
pl_status check_size(cu_ctx *ctx, int64_t elements, const char *what) {
    if (elements < (int64_t)1 << 31) return PL_OK;
    return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, what, "tensor too large (2^31 elements or more)", 0);
}

pl_status colsum(cu_ctx *ctx, float *dbias, const float *dout, int64_t N, int OC) {
    int chunks = (int)(N / 256) > 0 ? (int)(N / 256) : 1;
    if (chunks > 64) chunks = 64;
    colsum_k<<<dim3(ceil_div(OC, 32), chunks), dim3(32, 8), 0, ctx->stream>>>(dbias, dout, N, OC);
    LAUNCHED();
    KM("colsum_k");
    return PL_OK;
}
