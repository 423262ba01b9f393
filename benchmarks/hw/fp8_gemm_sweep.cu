/*
 * fp8_gemm_sweep.cu: FP8 GEMMs through cuBLASLt next to bf16 on the same
 * shapes in the same run, over the training GEMMs of Llama 3 8B / 70B /
 * 405B (data/models/llama-3-*.json) at tp 1, 2, 4, 8 and 4,096 / 8,192 /
 * 16,384 tokens, and the costs of the FP8 casts (amax, cast, transpose-cast,
 * 1 x 128 block cast) as bandwidth.
 *
 * GEMMs (m x n x k, C = A B; the compute model's convention as in
 * gemm_sweep.cu): per layer QKV (T, (heads + 2 kv) 128 / tp, h), attention
 * output (T, h, h / tp), SwiGLU in (T, 2 ffn / tp, h), out (T, h, ffn / tp),
 * each with its data gradient (m, k, n) and weight gradient (k, n, m). Every
 * GEMM runs TN (both operands K-major, the only FP8 layout cuBLASLt has on
 * Hopper), bf16 too, so the ratio compares precision alone. Per shape, back
 * to back: bf16, fp8 tensorwise (split accumulation), fp8 tensorwise with
 * fast accumulation, fp8 with 1 x 128 (A) and 128 x 128 (B) block scales
 * (both 1 x 128 for weight gradients). A kind cuBLASLt does not offer is
 * printed with its status, not fatal.
 *
 * Timing: WARM seconds (default 3) of back-to-back 8192^3 bf16 GEMMs first
 * (sustained clocks), then per shape and kind 2 untimed calls and the
 * median of 3..REPS (default 10) cudaEvent-timed calls (enough for ~8 ms). Inputs are
 * pseudo-random, never zeros. A correctness check first: fp8 against bf16
 * on the same fp8-representable inputs, with scales 2 and 0.25.
 *
 * Output (stdout), whitespace-separated, '#' lines are comments:
 *   gemm MODEL LAYER PASS TP TOKENS M N K KIND MS TFLOPS STATUS
 *   ratio MODEL LAYER PASS TP TOKENS M N K TW/BF16 TWFAST/BF16 BLOCK/BF16
 *   cast KERNEL ROWS COLS MS GBPS FRAC_OF_COPY
 *   check WHAT REL_ERR PASS|FAIL
 *
 *   fp8_gemm_sweep [--reps N] [--warm S] [--set check|gemm|cast|all]
 *                  [--models 8b,70b,405b] [--tokens 4096,8192,16384] [--tp 1,2,4,8]
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_check.h"
#include "lt_gemm.h"
#include "sweep_common.h"

struct model_dims {
    const char *name;
    long h, ffn, heads, kv;
};
static const model_dims MODELS[] = {
    {"llama-3-8b", 4096, 14336, 32, 8},
    {"llama-3-70b", 8192, 28672, 64, 8},
    {"llama-3-405b", 16384, 53248, 128, 8},
};

struct gshape {
    const char *model, *layer, *pass;
    int tp;
    long tokens, m, n, k;
};

static std::vector<long> parse_list(const char *s) {
    std::vector<long> v;
    std::string t(s);
    size_t p = 0;
    while (p <= t.size()) {
        size_t q = t.find(',', p);
        if (q == std::string::npos) q = t.size();
        if (q > p) v.push_back(atol(t.substr(p, q - p).c_str()));
        p = q + 1;
    }
    return v;
}

/* ---------------- FP8 cast kernels (bf16 in, e4m3 out) ---------------- */

__device__ inline float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* block-wide max of v into *out (non-negative floats order as unsigned) */
__device__ inline void block_amax_to(float v, unsigned *out) {
    __shared__ float red[32];
    v = warp_max(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) red[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
        v = warp_max(v);
        if (lane == 0) atomicMax(out, __float_as_uint(v));
    }
}

__device__ inline float amax8(uint4 u) {
    const __nv_bfloat162 *p = (const __nv_bfloat162 *)&u;
    float m = 0.f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(p[j]);
        m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
    return m;
}

__device__ inline uint2 cvt8(uint4 u, float s) {
    const __nv_bfloat162 *p = (const __nv_bfloat162 *)&u;
    unsigned short r[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(p[j]);
        f.x *= s, f.y *= s;
        r[j] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
    }
    uint2 o;
    o.x = (unsigned)r[0] | ((unsigned)r[1] << 16);
    o.y = (unsigned)r[2] | ((unsigned)r[3] << 16);
    return o;
}

/* amax of |x| over n8 groups of 8 bf16 */
__global__ void k_amax(const uint4 *__restrict__ x, size_t n8, unsigned *amax) {
    float m = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + stride < n8; i += 2 * stride) {
        uint4 a = x[i], b = x[i + stride];
        m = fmaxf(m, fmaxf(amax8(a), amax8(b)));
    }
    if (i < n8) m = fmaxf(m, amax8(x[i]));
    block_amax_to(m, amax);
}

/* y = fp8(x * scale); with amax != null also the amax of |x| (delayed scaling) */
__global__ void k_cast(const uint4 *__restrict__ x, uint2 *__restrict__ y, size_t n8, const float *scale,
                       unsigned *amax) {
    float s = *scale, m = 0.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += stride) {
        uint4 a = x[i];
        if (amax) m = fmaxf(m, amax8(a));
        y[i] = cvt8(a, s);
    }
    if (amax) block_amax_to(m, amax);
}

/* tensorwise dynamic scaling's second pass: scale = 448 / amax read from device */
__global__ void k_cast_dyn(const uint4 *__restrict__ x, uint2 *__restrict__ y, size_t n8, const unsigned *amax) {
    float a = __uint_as_float(*amax);
    float s = a > 0.f ? 448.f / a : 1.f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += stride) y[i] = cvt8(x[i], s);
}

/* 1 x 128 block cast: 16 threads per 128 values; scale_inv[g] = amax / 448.
 * n8 must be a multiple of 32 (n of 256) so that every warp's shuffles see
 * all 32 lanes. */
__global__ void k_cast_block128(const uint4 *__restrict__ x, uint2 *__restrict__ y, float *__restrict__ sinv,
                                size_t n8) {
    size_t stride = (size_t)gridDim.x * blockDim.x; /* a multiple of 16 */
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8; i += stride) {
        uint4 a = x[i];
        float m = amax8(a);
        for (int o = 8; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o, 16));
        float s = m > 0.f ? 448.f / m : 1.f;
        y[i] = cvt8(a, s);
        if ((threadIdx.x & 15) == 0) sinv[i >> 4] = m / 448.f;
    }
}

/* 64 x 64 tiles of x (rows x cols, bf16, row-major): yt = fp8(x^T * s)
 * (cols x rows), and with y != null also y = fp8(x * s) (one read, both
 * outputs: the cast-transpose of FP8 training); amax != null adds the
 * amax. rows and cols multiples of 64; 256 threads. */
__global__ void k_cast_transpose(const __nv_bfloat16 *__restrict__ x, unsigned char *__restrict__ y,
                                 unsigned char *__restrict__ yt, int rows, int cols, const float *scale,
                                 unsigned *amax) {
    __shared__ float tile[64][65];
    int r0 = blockIdx.y * 64, c0 = blockIdx.x * 64, t = threadIdx.x;
    float s = *scale, m = 0.f;
#pragma unroll
    for (int p = 0; p < 2; p++) {
        int idx = t + p * 256, r = idx >> 3, cv = idx & 7;
        uint4 u = *(const uint4 *)(x + (size_t)(r0 + r) * cols + c0 + cv * 8);
        if (amax) m = fmaxf(m, amax8(u));
        if (y) *(uint2 *)(y + (size_t)(r0 + r) * cols + c0 + cv * 8) = cvt8(u, s);
        const __nv_bfloat162 *b = (const __nv_bfloat162 *)&u;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 f = __bfloat1622float2(b[j]);
            tile[r][cv * 8 + 2 * j] = f.x;
            tile[r][cv * 8 + 2 * j + 1] = f.y;
        }
    }
    __syncthreads();
    int orow = t >> 2, seg = t & 3; /* output row = input column */
    unsigned short q[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float2 f = make_float2(tile[seg * 16 + 2 * j][orow] * s, tile[seg * 16 + 2 * j + 1][orow] * s);
        q[j] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
    }
    uint4 o;
    o.x = q[0] | ((unsigned)q[1] << 16);
    o.y = q[2] | ((unsigned)q[3] << 16);
    o.z = q[4] | ((unsigned)q[5] << 16);
    o.w = q[6] | ((unsigned)q[7] << 16);
    *(uint4 *)(yt + (size_t)(c0 + orow) * rows + r0 + seg * 16) = o;
    if (amax) block_amax_to(m, amax);
}

__global__ void k_fp8_to_bf16(const __nv_fp8_e4m3 *x, __nv_bfloat16 *y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) y[i] = __float2bfloat16((float)x[i]);
}

/* ---------------- checks ---------------- */

static int g_fail = 0;

static double rel_err_bf16(const std::vector<__nv_bfloat16> &got, const std::vector<__nv_bfloat16> &ref, double f) {
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double g = __bfloat162float(got[i]), r = f * __bfloat162float(ref[i]);
        if (std::isnan(g)) return INFINITY;
        num += (g - r) * (g - r);
        den += r * r;
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

static void report_check(const char *what, double err, double tol) {
    int ok = err <= tol;
    if (!ok) g_fail = 1;
    printf("check %s %.3e %s\n", what, err, ok ? "PASS" : "FAIL");
}

static void check_gemms(cublasLtHandle_t lt, void *ws, size_t ws_bytes) {
    const long shapes[2][3] = {{1024, 1024, 1024}, {512, 768, 2048}};
    for (auto &sh : shapes) {
        long m = sh[0], n = sh[1], k = sh[2];
        __nv_fp8_e4m3 *a8, *b8;
        __nv_bfloat16 *a16, *b16, *d;
        float *sa, *sb;
        size_t ns = (size_t)(std::max(m, n) + 128) * (k / 128 + 4);
        cudaCheck(cudaMalloc(&a8, m * k));
        cudaCheck(cudaMalloc(&b8, n * k));
        cudaCheck(cudaMalloc(&a16, m * k * 2));
        cudaCheck(cudaMalloc(&b16, n * k * 2));
        cudaCheck(cudaMalloc(&d, m * n * 2));
        cudaCheck(cudaMalloc(&sa, ns * 4));
        cudaCheck(cudaMalloc(&sb, ns * 4));
        sweep_fill(a8, m * k, 1, 1.0f, 11);
        sweep_fill(b8, n * k, 1, 1.0f, 12);
        k_fp8_to_bf16<<<1024, 256>>>(a8, a16, m * k);
        k_fp8_to_bf16<<<1024, 256>>>(b8, b16, n * k);
        sweep_const(sa, ns, 2.0f);
        sweep_const(sb, ns, 0.25f);
        cudaCheck(cudaDeviceSynchronize());
        std::vector<__nv_bfloat16> ref(m * n), got(m * n);
        for (int kind = 0; kind < 4; kind++) {
            lt_gemm g;
            cublasStatus_t st = lt_gemm_setup(lt, &g, kind, m, n, k, sa, sb, 0, ws_bytes);
            char what[96];
            snprintf(what, sizeof what, "%s_%ldx%ldx%ld", lt_kind_name(kind), m, n, k);
            if (st != CUBLAS_STATUS_SUCCESS) {
                printf("check %s status=%d UNSUPPORTED\n", what, (int)st);
                if (kind != LT_FP8_BLOCK) g_fail = 1;
                continue;
            }
            cudaCheck(cudaMemset(d, 0xff, m * n * 2)); /* poison: NaN */
            st = kind == LT_BF16 ? lt_gemm_run(lt, &g, a16, b16, d, ws, ws_bytes, 0)
                                 : lt_gemm_run(lt, &g, a8, b8, d, ws, ws_bytes, 0);
            cudaCheck(cudaDeviceSynchronize());
            lt_gemm_destroy(&g);
            if (st != CUBLAS_STATUS_SUCCESS) {
                printf("check %s run_status=%d FAIL\n", what, (int)st);
                if (kind != LT_FP8_BLOCK) g_fail = 1;
                continue;
            }
            cudaCheck(cudaMemcpy(kind == LT_BF16 ? ref.data() : got.data(), d, m * n * 2, cudaMemcpyDeviceToHost));
            if (kind == LT_BF16) {
                /* bf16 against a host fp32 reference on 64 sampled outputs */
                std::vector<__nv_fp8_e4m3> ha(m * k), hb(n * k);
                cudaCheck(cudaMemcpy(ha.data(), a8, m * k, cudaMemcpyDeviceToHost));
                cudaCheck(cudaMemcpy(hb.data(), b8, n * k, cudaMemcpyDeviceToHost));
                double num = 0, den = 0;
                for (int sIdx = 0; sIdx < 64; sIdx++) {
                    long i = (sIdx * 7919L) % m, j = (sIdx * 104729L) % n;
                    double acc = 0;
                    for (long q = 0; q < k; q++) acc += (double)(float)ha[i * k + q] * (double)(float)hb[j * k + q];
                    double g = __bfloat162float(ref[j * m + i]);
                    num += (g - acc) * (g - acc);
                    den += acc * acc;
                }
                report_check(what, std::sqrt(num / den), 1e-2);
            } else {
                report_check(what, rel_err_bf16(got, ref, 0.5), kind == LT_FP8_TW_FAST ? 3e-2 : 1e-2);
            }
        }
        cudaFree(a8), cudaFree(b8), cudaFree(a16), cudaFree(b16), cudaFree(d), cudaFree(sa), cudaFree(sb);
    }
}

static float host_u2f(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void check_casts() {
    const int rows = 256, cols = 512;
    size_t n = (size_t)rows * cols;
    __nv_bfloat16 *x;
    unsigned char *y, *yt, *yb;
    float *s, *sinv;
    unsigned *am;
    cudaCheck(cudaMalloc(&x, n * 2));
    cudaCheck(cudaMalloc(&y, n));
    cudaCheck(cudaMalloc(&yt, n));
    cudaCheck(cudaMalloc(&yb, n));
    cudaCheck(cudaMalloc(&s, 4));
    cudaCheck(cudaMalloc(&sinv, n / 128 * 4));
    cudaCheck(cudaMalloc(&am, 8));
    sweep_fill(x, n, 0, 3.0f, 21);
    sweep_const(s, 1, 100.0f);
    cudaCheck(cudaMemset(am, 0, 8));
    k_cast_transpose<<<dim3(cols / 64, rows / 64), 256>>>(x, y, yt, rows, cols, s, am);
    k_cast_block128<<<64, 256>>>((const uint4 *)x, (uint2 *)yb, sinv, n / 8);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> hx(n);
    std::vector<unsigned char> hy(n), hyt(n), hyb(n);
    std::vector<float> hs(n / 128);
    unsigned ham;
    cudaCheck(cudaMemcpy(hx.data(), x, n * 2, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hy.data(), y, n, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hyt.data(), yt, n, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hyb.data(), yb, n, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hs.data(), sinv, n / 128 * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(&ham, am, 4, cudaMemcpyDeviceToHost));
    float amax = 0;
    size_t bad_y = 0, bad_t = 0, bad_b = 0, bad_s = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float v = __bfloat162float(hx[(size_t)r * cols + c]);
            amax = fmaxf(amax, fabsf(v));
            unsigned char want = __nv_cvt_float_to_fp8(v * 100.0f, __NV_SATFINITE, __NV_E4M3);
            if (hy[(size_t)r * cols + c] != want) bad_y++;
            if (hyt[(size_t)c * rows + r] != want) bad_t++;
        }
    for (size_t g = 0; g < n / 128; g++) {
        float m = 0;
        for (int j = 0; j < 128; j++) m = fmaxf(m, fabsf(__bfloat162float(hx[g * 128 + j])));
        if (fabsf(hs[g] - m / 448.f) > 1e-6f * m) bad_s++;
        float sc = m > 0 ? 448.f / m : 1.f;
        for (int j = 0; j < 128; j++) {
            float v = __bfloat162float(hx[g * 128 + j]);
            unsigned char want = __nv_cvt_float_to_fp8(v * sc, __NV_SATFINITE, __NV_E4M3);
            /* a one-ulp difference may come from 448/m rounded differently */
            if (abs((int)(hyb[g * 128 + j] & 0x7f) - (int)(want & 0x7f)) > 1 ||
                (hyb[g * 128 + j] & 0x80) != (want & 0x80))
                bad_b++;
        }
    }
    report_check("cast_rowwise_mismatches", (double)bad_y, 0);
    report_check("cast_transposed_mismatches", (double)bad_t, 0);
    report_check("cast_amax_abs_err", fabs(host_u2f(ham) - amax), 0);
    report_check("cast_block128_scale_mismatches", (double)bad_s, 0);
    report_check("cast_block128_value_mismatches", (double)bad_b, 0);
    cudaFree(x), cudaFree(y), cudaFree(yt), cudaFree(yb), cudaFree(s), cudaFree(sinv), cudaFree(am);
}

/* ---------------- sweeps ---------------- */

static std::vector<gshape> gemm_shapes(const std::vector<long> &models, const std::vector<long> &tokens,
                                       const std::vector<long> &tps) {
    std::vector<gshape> v;
    for (long mi : models) {
        const model_dims &md = MODELS[mi];
        for (long tp : tps)
            for (long T : tokens) {
                struct {
                    const char *layer;
                    long n, k;
                } L[4] = {{"qkv", (md.heads + 2 * md.kv) * 128 / tp, md.h},
                          {"attn_out", md.h, md.h / tp},
                          {"mlp_in", 2 * md.ffn / tp, md.h},
                          {"mlp_out", md.h, md.ffn / tp}};
                for (auto &l : L) {
                    v.push_back({md.name, l.layer, "fwd", (int)tp, T, T, l.n, l.k});
                    v.push_back({md.name, l.layer, "dgrad", (int)tp, T, T, l.k, l.n});
                    v.push_back({md.name, l.layer, "wgrad", (int)tp, T, l.k, l.n, T});
                }
            }
    }
    return v;
}

static void run_casts(cudaEvent_t e0, cudaEvent_t e1) {
    const long sizes[][2] = {{8192, 8192}, {16384, 8192}, {8192, 28672}, {16384, 16384}};
    size_t maxn = 0;
    for (auto &s : sizes) maxn = std::max(maxn, (size_t)(s[0] * s[1]));
    __nv_bfloat16 *x, *xc;
    unsigned char *y, *yt;
    float *scale, *sinv;
    unsigned *am;
    cudaCheck(cudaMalloc(&x, maxn * 2));
    cudaCheck(cudaMalloc(&xc, maxn * 2));
    cudaCheck(cudaMalloc(&y, maxn));
    cudaCheck(cudaMalloc(&yt, maxn));
    cudaCheck(cudaMalloc(&scale, 4));
    cudaCheck(cudaMalloc(&sinv, maxn / 128 * 4));
    cudaCheck(cudaMalloc(&am, 4));
    sweep_fill(x, maxn, 0, 4.0f, 31);
    sweep_const(scale, 1, 50.0f);
    cudaCheck(cudaDeviceSynchronize());
    int sms = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int grid = sms * 8, blk = 256;
    printf("# cast KERNEL ROWS COLS MS GBPS FRAC_OF_COPY  (bytes = read + write; bf16 in, e4m3 out)\n");
    for (auto &sz : sizes) {
        long R = sz[0], C = sz[1];
        size_t n = (size_t)R * C, n8 = n / 8;
        auto t = [&](auto f) {
            return sweep_time(
                [&]() {
                    f();
                    return 0;
                },
                3, 10, 30, 20.0, e0, e1);
        };
        double copy_ms = t([&]() { cudaCheck(cudaMemcpyAsync(xc, x, n * 2, cudaMemcpyDeviceToDevice)); });
        double copy_bw = 4.0 * n / (copy_ms * 1e-3) / 1e9;
        struct {
            const char *name;
            double bytes;
            double ms;
        } rows[8];
        int nr = 0;
        rows[nr++] = {"copy_d2d_bf16", 4.0 * n, copy_ms};
        rows[nr++] = {"amax", 2.0 * n, t([&]() { k_amax<<<grid, blk>>>((const uint4 *)x, n8, am); })};
        rows[nr++] = {"cast_known_scale", 3.0 * n,
                      t([&]() { k_cast<<<grid, blk>>>((const uint4 *)x, (uint2 *)y, n8, scale, nullptr); })};
        rows[nr++] = {"cast_plus_amax_fused", 3.0 * n,
                      t([&]() { k_cast<<<grid, blk>>>((const uint4 *)x, (uint2 *)y, n8, scale, am); })};
        rows[nr++] = {"tensorwise_dynamic_amax_then_cast", 5.0 * n, t([&]() {
                          k_amax<<<grid, blk>>>((const uint4 *)x, n8, am);
                          k_cast_dyn<<<grid, blk>>>((const uint4 *)x, (uint2 *)y, n8, am);
                      })};
        rows[nr++] = {"transpose_cast", 3.0 * n, t([&]() {
                          k_cast_transpose<<<dim3(C / 64, R / 64), 256>>>(x, nullptr, yt, R, C, scale, nullptr);
                      })};
        rows[nr++] = {"cast_and_transpose_cast_fused_amax", 4.0 * n, t([&]() {
                          k_cast_transpose<<<dim3(C / 64, R / 64), 256>>>(x, y, yt, R, C, scale, am);
                      })};
        rows[nr++] = {"block1x128_cast", 3.0 * n + n / 32.0,
                      t([&]() { k_cast_block128<<<grid, blk>>>((const uint4 *)x, (uint2 *)y, sinv, n8); })};
        cudaCheck(cudaGetLastError());
        for (int i = 0; i < nr; i++) {
            double bw = rows[i].bytes / (rows[i].ms * 1e-3) / 1e9;
            printf("cast %s %ld %ld %.4f %.1f %.3f\n", rows[i].name, R, C, rows[i].ms, bw, bw / copy_bw);
        }
        fflush(stdout);
    }
    cudaFree(x), cudaFree(xc), cudaFree(y), cudaFree(yt), cudaFree(scale), cudaFree(sinv), cudaFree(am);
}

int main(int argc, char **argv) {
    int reps = 10;
    double warm_s = 3.0;
    const char *set = "all", *models_s = "8b,70b,405b", *tokens_s = "4096,8192,16384", *tp_s = "1,2,4,8";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warm") && i + 1 < argc) warm_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) set = argv[++i];
        else if (!strcmp(argv[i], "--models") && i + 1 < argc) models_s = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens_s = argv[++i];
        else if (!strcmp(argv[i], "--tp") && i + 1 < argc) tp_s = argv[++i];
        else {
            fprintf(stderr, "usage: fp8_gemm_sweep [--reps N] [--warm S] [--set check|gemm|cast|all] "
                            "[--models 8b,70b,405b] [--tokens 4096,8192,16384] [--tp 1,2,4,8]\n");
            return 2;
        }
    }
    if (reps < 3 || reps > 1000 || !(warm_s >= 0 && warm_s <= 600)) {
        fprintf(stderr, "fp8_gemm_sweep: --reps must be 3..1000 and --warm 0..600 seconds\n");
        return 2;
    }
    std::vector<long> models;
    {
        std::string m(models_s);
        const char *names[3] = {"8b", "70b", "405b"};
        size_t p = 0;
        while (p <= m.size()) {
            size_t q = m.find(',', p);
            if (q == std::string::npos) q = m.size();
            std::string t = m.substr(p, q - p);
            for (int i = 0; i < 3; i++)
                if (t == names[i]) models.push_back(i);
            p = q + 1;
        }
    }
    std::vector<long> tokens = parse_list(tokens_s), tps = parse_list(tp_s);
    bool do_check = !strcmp(set, "all") || !strcmp(set, "check");
    bool do_gemm = !strcmp(set, "all") || !strcmp(set, "gemm");
    bool do_cast = !strcmp(set, "all") || !strcmp(set, "cast");

    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    cudaCheck(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    printf("# device %s sms %d clock_mhz %d cc %d.%d cublasLt %zu\n", prop.name, prop.multiProcessorCount,
           clock_khz / 1000, prop.major, prop.minor, cublasLtGetVersion());

    cublasLtHandle_t lt;
    cublasCheck(cublasLtCreate(&lt));
    size_t ws_bytes = 64u << 20;
    void *ws;
    cudaCheck(cudaMalloc(&ws, ws_bytes));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));

    if (do_check) {
        check_gemms(lt, ws, ws_bytes);
        check_casts();
    }
    if (do_cast) run_casts(e0, e1); /* short: before the long GEMM sweep */
    if (do_gemm) {
        std::vector<gshape> shapes = gemm_shapes(models, tokens, tps);
        size_t max_a = 8192L * 8192, max_b = 8192L * 8192, max_c = 8192L * 8192, max_s = 1;
        for (auto &s : shapes) {
            max_a = std::max(max_a, (size_t)(s.m * s.k));
            max_b = std::max(max_b, (size_t)(s.k * s.n));
            max_c = std::max(max_c, (size_t)(s.m * s.n));
            max_s = std::max(max_s, (size_t)((std::max(s.m, s.n) + 128) * (s.k / 128 + 4)));
        }
        void *a16, *b16, *a8, *b8, *c;
        float *sa, *sb;
        cudaCheck(cudaMalloc(&a16, max_a * 2));
        cudaCheck(cudaMalloc(&b16, max_b * 2));
        cudaCheck(cudaMalloc(&a8, max_a));
        cudaCheck(cudaMalloc(&b8, max_b));
        cudaCheck(cudaMalloc(&c, max_c * 2));
        cudaCheck(cudaMalloc(&sa, max_s * 4));
        cudaCheck(cudaMalloc(&sb, max_s * 4));
        sweep_fill(a16, max_a, 0, 1.0f, 1);
        sweep_fill(b16, max_b, 0, 1.0f, 2);
        sweep_fill(a8, max_a, 1, 1.0f, 3);
        sweep_fill(b8, max_b, 1, 1.0f, 4);
        sweep_const(sa, max_s, 1.0f);
        sweep_const(sb, max_s, 1.0f);
        cudaCheck(cudaDeviceSynchronize());
        /* warm-up: sustained clocks, and the two 8192^3 ceilings */
        for (int kind = 0; kind < 2; kind++) {
            lt_gemm g;
            cublasCheck(lt_gemm_setup(lt, &g, kind == 0 ? LT_BF16 : LT_FP8_TW_FAST, 8192, 8192, 8192, sa, sb, 0,
                                      ws_bytes));
            const void *A = kind == 0 ? a16 : a8, *B = kind == 0 ? b16 : b8;
            float spent = 0;
            int calls = 0;
            double lim = kind == 0 ? warm_s * 1e3 : 1e3;
            cudaCheck(cudaEventRecord(e0));
            while (spent < lim) {
                for (int i = 0; i < 10; i++) cublasCheck(lt_gemm_run(lt, &g, A, B, c, ws, ws_bytes, 0));
                calls += 10;
                cudaCheck(cudaEventRecord(e1));
                cudaCheck(cudaEventSynchronize(e1));
                cudaCheck(cudaEventElapsedTime(&spent, e0, e1));
            }
            printf("# warm-up %s 8192^3 TN: %d calls in %.2f s, %.1f TFLOP/s\n", lt_kind_name(kind == 0 ? LT_BF16 : LT_FP8_TW_FAST),
                   calls, spent / 1e3, 2.0 * 8192.0 * 8192.0 * 8192.0 * calls / (spent * 1e-3) / 1e12);
            lt_gemm_destroy(&g);
        }
        printf("# gemm MODEL LAYER PASS TP TOKENS M N K KIND MS TFLOPS STATUS\n");
        for (auto &s : shapes) {
            double tf[4] = {NAN, NAN, NAN, NAN};
            for (int kind = 0; kind < 4; kind++) {
                int bvec = kind == LT_FP8_BLOCK && !strcmp(s.pass, "wgrad");
                lt_gemm g;
                cublasStatus_t st = lt_gemm_setup(lt, &g, kind, s.m, s.n, s.k, sa, sb, bvec, ws_bytes);
                double ms = -1;
                if (st == CUBLAS_STATUS_SUCCESS) {
                    const void *A = kind == LT_BF16 ? a16 : a8, *B = kind == LT_BF16 ? b16 : b8;
                    cublasStatus_t rs = CUBLAS_STATUS_SUCCESS;
                    ms = sweep_time(
                        [&]() {
                            rs = lt_gemm_run(lt, &g, A, B, c, ws, ws_bytes, 0);
                            return rs != CUBLAS_STATUS_SUCCESS;
                        },
                        2, 3, reps, 8.0, e0, e1);
                    if (rs != CUBLAS_STATUS_SUCCESS) st = rs;
                    lt_gemm_destroy(&g);
                }
                cudaError_t ce = cudaGetLastError();
                if (ce != cudaSuccess) {
                    fprintf(stderr, "CUDA error after %s: %s\n", lt_kind_name(kind), cudaGetErrorString(ce));
                    return 1;
                }
                if (st == CUBLAS_STATUS_SUCCESS && ms > 0) {
                    tf[kind] = 2.0 * s.m * s.n * s.k / (ms * 1e-3) / 1e12;
                    printf("gemm %s %s %s %d %ld %ld %ld %ld %s %.4f %.1f ok\n", s.model, s.layer, s.pass, s.tp,
                           s.tokens, s.m, s.n, s.k, lt_kind_name(kind), ms, tf[kind]);
                } else {
                    printf("gemm %s %s %s %d %ld %ld %ld %ld %s nan nan status=%d\n", s.model, s.layer, s.pass,
                           s.tp, s.tokens, s.m, s.n, s.k, lt_kind_name(kind), (int)st);
                }
            }
            printf("ratio %s %s %s %d %ld %ld %ld %ld %.3f %.3f %.3f\n", s.model, s.layer, s.pass, s.tp, s.tokens, s.m,
                   s.n, s.k, tf[1] / tf[0], tf[2] / tf[0], tf[3] / tf[0]);
            fflush(stdout);
        }
        cudaFree(a16), cudaFree(b16), cudaFree(a8), cudaFree(b8), cudaFree(c), cudaFree(sa), cudaFree(sb);
    }
    cudaCheck(cudaGetLastError());
    cublasLtDestroy(lt);
    cudaFree(ws);
    printf("# done%s\n", g_fail ? " (a check FAILED)" : "");
    return g_fail ? 3 : 0;
}
