/*
 * flash_tests.c: the flash-attention kernels (hw/kernels/flash_attention.h), bf16
 * and TF32, against the double-precision reference (hw/kernels/attention_ref.h),
 * and their timing. Runs on the device machine; needs no Criterion.
 *
 *   flash_tests check      every shape the engine uses (GPT default B = 16, 8,
 *                          4, 2, 1 at T = 256, C = 384, NH = 6; gpt12 C = 768,
 *                          NH = 12), odd T (100, 65, 1), peaked scores, and
 *                          hs = 128; forward and backward; plus bad arguments
 *   flash_tests sanitize   a few small shapes, for compute-sanitizer
 *   flash_tests bench      fwd, bwd and fwd+bwd times (median of 50 after 10
 *                          warm-up calls, one cudaEvent pair per call)
 * Exit status 0 when every check passed, 1 otherwise, 2 on bad usage.
 *
 * Inputs are N(0,1) values rounded to bf16 (so the input rounding of the
 * reference is exact and both sides see the same numbers); the reference is
 * attn_ref_* in ATTN_REF_BF16 mode (the kernel's roundings emulated); the
 * error against the exact formula is printed too.
 *
 * Tolerances, per tensor (out, dq, dk, dv; r = reference, g = GPU):
 *   normwise ||g - r|| / ||r|| <= 2^-7. Each rounding to bf16 errs by at
 *     most 2^-8 relative (8 bits of mantissa), uniformly spread, so its rms is
 *     2^-8 / sqrt(3) ~ 2^-9. Two roundings differ between the two sides: the
 *     final store (both round, possibly to neighbouring values when the fp32
 *     and double values straddle a rounding point) and the weights P, which
 *     the kernel rounds against its running max, the reference against the
 *     final max (same bound, different values). Random signs keep the sums
 *     at the per-term relative size, so the expected error is ~2^-9..2^-8
 *     normwise; 2^-7 leaves 2-4x. fp32 accumulation (~1e-6) is negligible.
 *   elementwise max |g - r| <= 2^-6 max|r| + 1e-4. Worst case for out: the
 *     output rounding (2^-8 |r|) plus the two P roundings (2 x 2^-8 sum P |v|
 *     <= 2^-7 max|v|, and max|out| >= max|v_0| since row 0's output is v_0).
 *     The 1e-4 floor is for gradients whose reference is ~0: dS = P (dP - D)
 *     with dP (a tensor-core fp32 sum over hs) and D (the D kernel's fp32 sum
 *     of the same products dout . out in another order) cancelling; at T = 1
 *     the reference dS is exactly 0 (P = 1, out = v) and the GPU's is their
 *     rounding difference, ~2^-24 sqrt(hs) |dout||v| ~ 1e-6 per term (seen:
 *     4e-7 in dq, dk).
 *   lse max |g - r| <= 1e-3: fp32 exp2/log of O(1)..O(10) values (~1e-6) on
 *     the same bf16 inputs; the margin catches nothing real but a bug.
 * A wrong index, mask or scale errs by O(1) normwise, far above these.
 *
 * The TF32 kernels (flash_attn_*_tf32; "-tf32" in the names) run every
 * shape too, on unrounded fp32 N(0,1) inputs, against the EXACT reference:
 *   normwise <= 2^-8. The kernel rounds q, k, v, dout, P and dS to TF32
 *     (10-bit mantissa, round to nearest: <= 2^-11 relative, rms ~2^-12.3)
 *     and sums in fp32: seven roundings that reach a gradient, each 8x finer
 *     than bf16's, whose kernels measured ~2.5e-3 normwise against the exact
 *     formula with three (P, dS, the output); ~5e-4..1e-3 expected, 2^-8
 *     (3.9e-3) leaves 4x and is still 100x below an indexing error.
 *   elementwise as for bf16 (2^-6 max|r| + 1e-4). At T = 1 the reference
 *     dq, dk are 0 and the kernel's are dP - D, both sums of the same TF32
 *     products in another order (~1e-6), under the 1e-4 floor.
 *   lse max |g - r| <= 2^-10 max|r| + 1e-3. Here the reference has the
 *     unrounded inputs, so lse errs by about its scores' error: each score
 *     q.k / sqrt(hs) takes the TF32 rounding of q and k (~2^-11 relative a
 *     factor, random signs), ~3e-4 x its size; the H200 gave max 1.1e-3
 *     (max|lse| 6.6) and 4.6e-3 for the peaked rows (max|lse| 19.2), i.e.
 *     1.7e-4 and 2.4e-4 of max|r|; the bound (2^-10 = 9.8e-4 of it) leaves
 *     4x, and the 1e-3 floor covers small lse.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attention_ref.h"
#include "flash_attention.h"

#define TOL_NORM (1.0 / 128.0)
#define TOL_MAX (1.0 / 64.0)
#define TOL_MAX_ABS 1e-4
#define TOL_LSE 1e-3
#define TOL_NORM_TF32 (1.0 / 256.0)
#define TOL_LSE_TF32_REL (1.0 / 1024.0)

static int n_pass, n_fail;

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            printf("FAIL cuda %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
            n_fail++;                                                                                  \
            goto cleanup;                                                                              \
        }                                                                                              \
    } while (0)

/* ---- seeded normals (xorshift64*, Box-Muller) ---- */
typedef struct { uint64_t s; } rng;
static double rng_uniform(rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return ((r->s * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}
static double rng_normal(rng *r) {
    double u = rng_uniform(r), v = rng_uniform(r);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* x[i] = bf16(scale * N(0,1)), bits[i] its bf16 pattern */
static void fill(float *x, uint16_t *bits, int64_t n, double scale, rng *r) {
    for (int64_t i = 0; i < n; i++) {
        bits[i] = attn_bf16_bits((float)(scale * rng_normal(r)));
        x[i] = attn_bf16_value(bits[i]);
    }
}

/* ---- the reference, one thread per sequence ---- */
typedef struct {
    float *out, *lse, *dqkv;
    const float *qkv, *dout;
    int T, C, NH, mode, rc;
} ref_job;

static void *ref_run(void *arg) {
    ref_job *j = arg;
    j->rc = (int)attn_ref_forward(j->out, j->lse, j->qkv, 1, j->T, j->C, j->NH, j->mode);
    if (j->rc == 0 && j->dqkv) j->rc = (int)attn_ref_backward(j->dqkv, j->dout, j->qkv, 1, j->T, j->C, j->NH, j->mode);
    return NULL;
}

/* out (B,T,C), lse (B,NH,T), dqkv (B,T,3C) (NULL: forward only) of the reference */
static int reference(float *out, float *lse, float *dqkv, const float *qkv, const float *dout, int B, int T, int C,
                     int NH, int mode) {
    ref_job *jobs = calloc((size_t)B, sizeof *jobs);
    pthread_t *th = calloc((size_t)B, sizeof *th);
    int rc = 0;
    if (!jobs || !th) {
        free(jobs);
        free(th);
        return 1;
    }
    for (int b = 0; b < B; b++) {
        const int64_t t3 = (int64_t)b * T * 3 * C, t1 = (int64_t)b * T * C;
        jobs[b] = (ref_job){out + t1, lse + (int64_t)b * NH * T, dqkv ? dqkv + t3 : NULL, qkv + t3, dout + t1,
                            T, C, NH, mode, 0};
        if (pthread_create(&th[b], NULL, ref_run, &jobs[b])) {
            ref_run(&jobs[b]);
            th[b] = 0;
        }
    }
    for (int b = 0; b < B; b++) {
        if (th[b]) pthread_join(th[b], NULL);
        rc |= jobs[b].rc;
    }
    free(jobs);
    free(th);
    return rc;
}

/* ---- comparison ---- */
typedef struct {
    double norm, max_abs, max_ref, max_rel;
} errs;

/* Over 'rows' rows of w values starting at column 'off' of rows of ld values
 * (one part of qkv-shaped tensors). max_rel divides by |r| only where
 * |r| >= max|r| / 16 (near-zero references make relative error meaningless). */
static errs compare(const float *g, const float *r, int64_t rows, int w, int64_t ld, int64_t off) {
    errs e = {0, 0, 0, 0};
    double num = 0, den = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int j = 0; j < w; j++) {
            const double b = r[i * ld + off + j];
            if (fabs(b) > e.max_ref) e.max_ref = fabs(b);
        }
    for (int64_t i = 0; i < rows; i++)
        for (int j = 0; j < w; j++) {
            const double a = g[i * ld + off + j], b = r[i * ld + off + j], d = fabs(a - b);
            if (!isfinite(a)) {
                e.norm = e.max_abs = e.max_rel = INFINITY;
                return e;
            }
            num += d * d;
            den += b * b;
            if (d > e.max_abs) e.max_abs = d;
            if (fabs(b) >= e.max_ref / 16 && fabs(b) > 0 && d / fabs(b) > e.max_rel) e.max_rel = d / fabs(b);
        }
    e.norm = den > 0 ? sqrt(num / den) : sqrt(num);
    return e;
}

/* lse_rel > 0: the lse bound is lse_rel * max|r| + TOL_LSE (TF32), else TOL_LSE */
static void verdict_tol(const char *shape, const char *what, errs e, errs exact, int is_lse, double tol_norm,
                        double lse_rel) {
    const int ok = is_lse ? e.max_abs <= lse_rel * e.max_ref + TOL_LSE
                          : (e.norm <= tol_norm && e.max_abs <= TOL_MAX * e.max_ref + TOL_MAX_ABS);
    if (ok) n_pass++;
    else n_fail++;
    printf("%s %-28s %-4s norm %.2e  max_abs %.2e (max|ref| %.2f, %.2e of it)  max_rel %.2e  | vs exact: norm "
           "%.2e max_abs %.2e\n",
           ok ? "PASS" : "FAIL", shape, what, e.norm, e.max_abs, e.max_ref, e.max_ref > 0 ? e.max_abs / e.max_ref : 0,
           e.max_rel, exact.norm, exact.max_abs);
    fflush(stdout);
}

static void verdict(const char *shape, const char *what, errs e, errs exact, int is_lse) {
    verdict_tol(shape, what, e, exact, is_lse, TOL_NORM, 0.0);
}

static void check(const char *what, int ok) {
    if (ok) n_pass++;
    else n_fail++;
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    fflush(stdout);
}

typedef struct {
    int B, T, C, NH;
    double qscale; /* q's scale: 1 gives scores of sd 1, 4 peaked rows */
    const char *name;
} shape;

/* Forward and backward on one shape against the reference (both modes). */
static void run_case(shape sh, int with_exact) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
    const int64_t n3 = (int64_t)B * T * 3 * C, n1 = (int64_t)B * T * C, nl = (int64_t)B * NH * T;
    char name[64];
    snprintf(name, sizeof name, "%s B%d T%d C%d NH%d", sh.name, B, T, C, NH);
    float *qkv = malloc(sizeof(float) * n3), *dout = malloc(sizeof(float) * n1);
    float *out = malloc(sizeof(float) * n1), *lse = malloc(sizeof(float) * nl), *dqkv = malloc(sizeof(float) * n3);
    float *r_out = malloc(sizeof(float) * n1), *r_lse = malloc(sizeof(float) * nl);
    float *r_dqkv = malloc(sizeof(float) * n3);
    float *x_out = malloc(sizeof(float) * n1), *x_lse = malloc(sizeof(float) * nl);
    float *x_dqkv = malloc(sizeof(float) * n3);
    uint16_t *h3 = malloc(2 * n3), *h1 = malloc(2 * n1);
    void *d_qkv = NULL, *d_out = NULL, *d_dout = NULL, *d_dqkv = NULL, *d_scr = NULL;
    float *d_lse = NULL;
    if (!qkv || !dout || !out || !lse || !dqkv || !r_out || !r_lse || !r_dqkv || !x_out || !x_lse || !x_dqkv ||
        !h3 || !h1) {
        check("host allocation", 0);
        goto cleanup;
    }
    rng r = {0x9e3779b97f4a7c15ull ^ (uint64_t)(B * 1000003 + T * 1009 + C * 7 + NH)};
    fill(qkv, h3, n3, 1.0, &r);
    if (sh.qscale != 1.0)
        for (int64_t i = 0; i < (int64_t)B * T; i++)
            for (int c = 0; c < C; c++) {
                h3[i * 3 * C + c] = attn_bf16_bits((float)(sh.qscale * qkv[i * 3 * C + c]));
                qkv[i * 3 * C + c] = attn_bf16_value(h3[i * 3 * C + c]);
            }
    fill(dout, h1, n1, 1.0, &r);
    const size_t scr = flash_attn_bwd_scratch_bytes(B, T, C, NH);
    CK(cudaMalloc(&d_qkv, 2 * n3));
    CK(cudaMalloc(&d_dqkv, 2 * n3));
    CK(cudaMalloc(&d_out, 2 * n1));
    CK(cudaMalloc(&d_dout, 2 * n1));
    CK(cudaMalloc((void **)&d_lse, sizeof(float) * nl));
    CK(cudaMalloc(&d_scr, scr));
    CK(cudaMemcpy(d_qkv, h3, 2 * n3, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dout, h1, 2 * n1, cudaMemcpyHostToDevice));
    /* poison the outputs: every element must be written */
    CK(cudaMemset(d_out, 0xff, 2 * n1));
    CK(cudaMemset(d_dqkv, 0xff, 2 * n3));
    CK(cudaMemset(d_lse, 0xff, sizeof(float) * nl));
    CK((cudaError_t)flash_attn_fwd_bf16(d_out, d_lse, d_qkv, B, T, C, NH, 0));
    CK((cudaError_t)flash_attn_bwd_bf16(d_dqkv, d_scr, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h1, d_out, 2 * n1, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n1; i++) out[i] = attn_bf16_value(h1[i]);
    CK(cudaMemcpy(h3, d_dqkv, 2 * n3, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n3; i++) dqkv[i] = attn_bf16_value(h3[i]);
    CK(cudaMemcpy(lse, d_lse, sizeof(float) * nl, cudaMemcpyDeviceToHost));

    if (reference(r_out, r_lse, r_dqkv, qkv, dout, B, T, C, NH, ATTN_REF_BF16)) {
        check("reference (bf16 mode) ran", 0);
        goto cleanup;
    }
    if (with_exact) {
        if (reference(x_out, x_lse, x_dqkv, qkv, dout, B, T, C, NH, ATTN_REF_EXACT)) {
            check("reference (exact) ran", 0);
            goto cleanup;
        }
    } else {
        memcpy(x_out, r_out, sizeof(float) * n1);
        memcpy(x_lse, r_lse, sizeof(float) * nl);
        memcpy(x_dqkv, r_dqkv, sizeof(float) * n3);
    }
    verdict(name, "out", compare(out, r_out, (int64_t)B * T, C, C, 0), compare(out, x_out, (int64_t)B * T, C, C, 0), 0);
    verdict(name, "lse", compare(lse, r_lse, nl, 1, 1, 0), compare(lse, x_lse, nl, 1, 1, 0), 1);
    static const char *part[3] = {"dq", "dk", "dv"};
    for (int p = 0; p < 3; p++)
        verdict(name, part[p], compare(dqkv, r_dqkv, (int64_t)B * T, C, 3 * C, (int64_t)p * C),
                compare(dqkv, x_dqkv, (int64_t)B * T, C, 3 * C, (int64_t)p * C), 0);
cleanup:
    cudaFree(d_qkv);
    cudaFree(d_dqkv);
    cudaFree(d_out);
    cudaFree(d_dout);
    cudaFree(d_lse);
    cudaFree(d_scr);
    free(qkv);
    free(dout);
    free(out);
    free(lse);
    free(dqkv);
    free(r_out);
    free(r_lse);
    free(r_dqkv);
    free(x_out);
    free(x_lse);
    free(x_dqkv);
    free(h3);
    free(h1);
}

/* The TF32 kernels on one shape against the exact reference: fp32 inputs
 * off every rounding grid (the kernel's own TF32 rounding is exercised). */
static void run_case_tf32(shape sh) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH;
    const int64_t n3 = (int64_t)B * T * 3 * C, n1 = (int64_t)B * T * C, nl = (int64_t)B * NH * T;
    char name[64];
    snprintf(name, sizeof name, "%s-tf32 B%d T%d C%d NH%d", sh.name, B, T, C, NH);
    float *qkv = malloc(sizeof(float) * n3), *dout = malloc(sizeof(float) * n1);
    float *out = malloc(sizeof(float) * n1), *lse = malloc(sizeof(float) * nl), *dqkv = malloc(sizeof(float) * n3);
    float *x_out = malloc(sizeof(float) * n1), *x_lse = malloc(sizeof(float) * nl);
    float *x_dqkv = malloc(sizeof(float) * n3);
    float *d_qkv = NULL, *d_out = NULL, *d_dout = NULL, *d_dqkv = NULL, *d_lse = NULL;
    void *d_scr = NULL;
    if (!qkv || !dout || !out || !lse || !dqkv || !x_out || !x_lse || !x_dqkv) {
        check("host allocation", 0);
        goto cleanup;
    }
    rng r = {0x243f6a8885a308d3ull ^ (uint64_t)(B * 1000003 + T * 1009 + C * 7 + NH)};
    for (int64_t i = 0; i < n3; i++) qkv[i] = (float)rng_normal(&r);
    if (sh.qscale != 1.0)
        for (int64_t i = 0; i < (int64_t)B * T; i++)
            for (int c = 0; c < C; c++) qkv[i * 3 * C + c] = (float)(sh.qscale * qkv[i * 3 * C + c]);
    for (int64_t i = 0; i < n1; i++) dout[i] = (float)rng_normal(&r);
    const size_t scr = flash_attn_bwd_scratch_bytes(B, T, C, NH);
    CK(cudaMalloc((void **)&d_qkv, 4 * n3));
    CK(cudaMalloc((void **)&d_dqkv, 4 * n3));
    CK(cudaMalloc((void **)&d_out, 4 * n1));
    CK(cudaMalloc((void **)&d_dout, 4 * n1));
    CK(cudaMalloc((void **)&d_lse, sizeof(float) * nl));
    CK(cudaMalloc(&d_scr, scr));
    CK(cudaMemcpy(d_qkv, qkv, 4 * n3, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dout, dout, 4 * n1, cudaMemcpyHostToDevice));
    /* poison the outputs (NaN): every element must be written */
    CK(cudaMemset(d_out, 0xff, 4 * n1));
    CK(cudaMemset(d_dqkv, 0xff, 4 * n3));
    CK(cudaMemset(d_lse, 0xff, sizeof(float) * nl));
    CK((cudaError_t)flash_attn_fwd_tf32(d_out, d_lse, d_qkv, B, T, C, NH, 0));
    CK((cudaError_t)flash_attn_bwd_tf32(d_dqkv, d_scr, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out, d_out, 4 * n1, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(dqkv, d_dqkv, 4 * n3, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse, d_lse, sizeof(float) * nl, cudaMemcpyDeviceToHost));
    if (reference(x_out, x_lse, x_dqkv, qkv, dout, B, T, C, NH, ATTN_REF_EXACT)) {
        check("reference (exact) ran", 0);
        goto cleanup;
    }
    errs eo = compare(out, x_out, (int64_t)B * T, C, C, 0), el = compare(lse, x_lse, nl, 1, 1, 0);
    verdict_tol(name, "out", eo, eo, 0, TOL_NORM_TF32, TOL_LSE_TF32_REL);
    verdict_tol(name, "lse", el, el, 1, TOL_NORM_TF32, TOL_LSE_TF32_REL);
    static const char *part[3] = {"dq", "dk", "dv"};
    for (int p = 0; p < 3; p++) {
        errs e = compare(dqkv, x_dqkv, (int64_t)B * T, C, 3 * C, (int64_t)p * C);
        verdict_tol(name, part[p], e, e, 0, TOL_NORM_TF32, TOL_LSE_TF32_REL);
    }
cleanup:
    cudaFree(d_qkv);
    cudaFree(d_dqkv);
    cudaFree(d_out);
    cudaFree(d_dout);
    cudaFree(d_lse);
    cudaFree(d_scr);
    free(qkv);
    free(dout);
    free(out);
    free(lse);
    free(dqkv);
    free(x_out);
    free(x_lse);
    free(x_dqkv);
}

/* Shapes the kernels must refuse, without launching. */
static void bad_args(void) {
    void *p = NULL;
    float *l = NULL;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaMalloc((void **)&l, 1 << 16) != cudaSuccess) {
        check("bad-argument buffers", 0);
        cudaFree(p);
        return;
    }
    check("hs 32 refused", flash_attn_fwd_bf16(p, l, p, 1, 16, 64, 2, 0) == (int)cudaErrorInvalidValue);
    check("C not a multiple of NH refused", flash_attn_fwd_bf16(p, l, p, 1, 16, 130, 3, 0) == (int)cudaErrorInvalidValue);
    check("T = 0 refused", flash_attn_fwd_bf16(p, l, p, 1, 0, 384, 6, 0) == (int)cudaErrorInvalidValue);
    check("misaligned qkv refused",
          flash_attn_fwd_bf16(p, l, (const __nv_bfloat16 *)((char *)p + 2), 1, 16, 384, 6, 0) ==
              (int)cudaErrorInvalidValue);
    check("NULL scratch refused",
          flash_attn_bwd_bf16(p, NULL, p, p, p, l, 1, 16, 384, 6, 0) == (int)cudaErrorInvalidValue);
    float *f = (float *)p;
    check("tf32: hs 32 refused", flash_attn_fwd_tf32(f, l, f, 1, 16, 64, 2, 0) == (int)cudaErrorInvalidValue);
    check("tf32: misaligned qkv refused",
          flash_attn_fwd_tf32(f, l, (const float *)((char *)p + 4), 1, 16, 384, 6, 0) == (int)cudaErrorInvalidValue);
    check("tf32: misaligned dout refused",
          flash_attn_bwd_tf32(f, p, (const float *)((char *)p + 4), f, f, l, 1, 16, 384, 6, 0) ==
              (int)cudaErrorInvalidValue);
    check("no launch error left behind", cudaGetLastError() == cudaSuccess);
    cudaFree(p);
    cudaFree(l);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median over 'iters' timed samples (after 'warm') of fwd (what 0), bwd (1) or
 * fwd+bwd (2); a sample is 'reps' back-to-back calls between two events,
 * divided by reps (reps 1: one call, launch latency included; reps 20: the
 * GPU time of a call when launches run ahead, as in a graph or a busy stream). */
/* One forward or backward call of the bf16 (tf32 = 0) or the TF32 kernels. */
static int fwd_call(int tf32, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    return tf32 ? flash_attn_fwd_tf32((float *)out, lse, (const float *)qkv, B, T, C, NH, s)
                : flash_attn_fwd_bf16((__nv_bfloat16 *)out, lse, (const __nv_bfloat16 *)qkv, B, T, C, NH, s);
}
static int bwd_call(int tf32, void *dqkv, void *scr, const void *dout, const void *qkv, const void *out,
                    const float *lse, int B, int T, int C, int NH, cudaStream_t s) {
    return tf32 ? flash_attn_bwd_tf32((float *)dqkv, scr, (const float *)dout, (const float *)qkv, (const float *)out,
                                      lse, B, T, C, NH, s)
                : flash_attn_bwd_bf16((__nv_bfloat16 *)dqkv, scr, (const __nv_bfloat16 *)dout,
                                      (const __nv_bfloat16 *)qkv, (const __nv_bfloat16 *)out, lse, B, T, C, NH, s);
}

static int time_it(float *median, int tf32, int what, void *qkv, void *out, float *lse, void *dout, void *dqkv,
                   void *scr, int B, int T, int C, int NH, int warm, int iters, int reps) {
    float *ms = malloc(sizeof(float) * (size_t)iters);
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = 1;
    if (!ms || cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) goto out;
    for (int i = 0; i < warm + iters; i++) {
        cudaEventRecord(e0, 0);
        int r = 0;
        for (int k = 0; k < reps; k++) {
            if (what != 1) r |= fwd_call(tf32, out, lse, qkv, B, T, C, NH, 0);
            if (what != 0) r |= bwd_call(tf32, dqkv, scr, dout, qkv, out, lse, B, T, C, NH, 0);
        }
        cudaEventRecord(e1, 0);
        if (r || cudaEventSynchronize(e1) != cudaSuccess) goto out;
        if (i >= warm) {
            cudaEventElapsedTime(&ms[i - warm], e0, e1);
            ms[i - warm] /= (float)reps;
        }
    }
    qsort(ms, (size_t)iters, sizeof(float), cmp_float);
    *median = ms[iters / 2];
    rc = 0;
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    free(ms);
    return rc;
}

/* The same 'reps' calls captured once into a CUDA graph on stream st, then
 * the median over 'iters' replays (after 3) divided by reps: the GPU's time
 * per call without host launch overhead, and proof that the calls capture. */
static int time_graph(float *median, int tf32, int what, void *qkv, void *out, float *lse, void *dout, void *dqkv,
                      void *scr, int B, int T, int C, int NH, int iters, int reps) {
    cudaStream_t st = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float *ms = malloc(sizeof(float) * (size_t)iters);
    int rc = 1, r = 0;
    if (!ms || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) goto out;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) goto out;
    if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) goto out;
    for (int k = 0; k < reps; k++) {
        if (what != 1) r |= fwd_call(tf32, out, lse, qkv, B, T, C, NH, st);
        if (what != 0) r |= bwd_call(tf32, dqkv, scr, dout, qkv, out, lse, B, T, C, NH, st);
    }
    if (cudaStreamEndCapture(st, &g) != cudaSuccess || r) goto out;
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) goto out;
    for (int i = 0; i < 3 + iters; i++) {
        cudaEventRecord(e0, st);
        if (cudaGraphLaunch(ge, st) != cudaSuccess) goto out;
        cudaEventRecord(e1, st);
        if (cudaEventSynchronize(e1) != cudaSuccess) goto out;
        if (i >= 3) {
            cudaEventElapsedTime(&ms[i - 3], e0, e1);
            ms[i - 3] /= (float)reps;
        }
    }
    qsort(ms, (size_t)iters, sizeof(float), cmp_float);
    *median = ms[iters / 2];
    rc = 0;
out:
    if (rc) printf("graph capture/replay failed: %s (kernel rc %d)\n", cudaGetErrorString(cudaGetLastError()), r);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    free(ms);
    return rc;
}

static void bench(const shape *shapes, int n, int tf32) {
    printf("single call: median of 50 after 10 warm-up; b2b: 20 calls back to back per sample, median of 30;\n"
           "graph: 20 calls in one CUDA graph per replay, median of 30 replays; TF/s from the graph times\n");
    printf("%-10s %3s %4s %4s %3s %10s %10s %10s %8s %8s %10s %8s %8s %8s %9s %9s\n", "shape", "B", "T", "C", "NH",
           "fwd_us", "bwd_us", "fwdbwd_us", "b2b_fwd", "b2b_bwd", "b2b_fwdbwd", "g_fwd", "g_bwd", "g_fwdbwd",
           "fwd_TF/s", "bwd_TF/s");
    for (int s = 0; s < n; s++) {
        const int B = shapes[s].B, T = shapes[s].T, C = shapes[s].C, NH = shapes[s].NH;
        const int64_t n3 = (int64_t)B * T * 3 * C, n1 = (int64_t)B * T * C;
        const size_t es = tf32 ? 4 : 2; /* bytes an element */
        void *qkv = NULL, *out = NULL, *dout = NULL, *dqkv = NULL, *scr = NULL;
        float *lse = NULL, t[3] = {0, 0, 0}, tb[3] = {0, 0, 0}, tg[3] = {0, 0, 0};
        char *h = malloc(es * n3);
        char name[32];
        snprintf(name, sizeof name, "%s%s", shapes[s].name, tf32 ? "-tf32" : "");
        if (!h) continue;
        rng r = {12345};
        for (int64_t i = 0; i < n3; i++) {
            const float x = (float)rng_normal(&r);
            if (tf32) memcpy(h + 4 * i, &x, 4);
            else {
                const uint16_t b16 = attn_bf16_bits(x);
                memcpy(h + 2 * i, &b16, 2);
            }
        }
        CK(cudaMalloc(&qkv, es * n3));
        CK(cudaMalloc(&dqkv, es * n3));
        CK(cudaMalloc(&out, es * n1));
        CK(cudaMalloc(&dout, es * n1));
        CK(cudaMalloc((void **)&lse, sizeof(float) * B * NH * T));
        CK(cudaMalloc(&scr, flash_attn_bwd_scratch_bytes(B, T, C, NH)));
        CK(cudaMemcpy(qkv, h, es * n3, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dout, h, es * n1, cudaMemcpyHostToDevice));
        for (int w = 0; w < 3; w++)
            if (time_it(&t[w], tf32, w, qkv, out, lse, dout, dqkv, scr, B, T, C, NH, 10, 50, 1) ||
                time_it(&tb[w], tf32, w, qkv, out, lse, dout, dqkv, scr, B, T, C, NH, 3, 30, 20) ||
                time_graph(&tg[w], tf32, w, qkv, out, lse, dout, dqkv, scr, B, T, C, NH, 30, 20)) {
                check("timing ran", 0);
                goto cleanup;
            }
        /* useful causal FLOPs: 2 products of 2 T(T+1)/2 hs multiply-adds forward, 5 backward (FA convention) */
        const double f = 2.0 * 2.0 * (double)B * NH * (C / NH) * T * (T + 1) / 2.0;
        printf("%-10s %3d %4d %4d %3d %10.2f %10.2f %10.2f %8.2f %8.2f %10.2f %8.2f %8.2f %8.2f %9.1f %9.1f\n",
               name, B, T, C, NH, 1e3 * t[0], 1e3 * t[1], 1e3 * t[2], 1e3 * tb[0], 1e3 * tb[1],
               1e3 * tb[2], 1e3 * tg[0], 1e3 * tg[1], 1e3 * tg[2], f / (tg[0] * 1e9), 2.5 * f / (tg[1] * 1e9));
        printf("FLASHBENCH {\"shape\":\"%s\",\"B\":%d,\"T\":%d,\"C\":%d,\"NH\":%d,\"fwd_us\":%.2f,\"bwd_us\":%.2f,"
               "\"fwdbwd_us\":%.2f,\"b2b_fwd_us\":%.2f,\"b2b_bwd_us\":%.2f,\"b2b_fwdbwd_us\":%.2f,"
               "\"graph_fwd_us\":%.2f,\"graph_bwd_us\":%.2f,\"graph_fwdbwd_us\":%.2f}\n",
               name, B, T, C, NH, 1e3 * t[0], 1e3 * t[1], 1e3 * t[2], 1e3 * tb[0], 1e3 * tb[1], 1e3 * tb[2],
               1e3 * tg[0], 1e3 * tg[1], 1e3 * tg[2]);
    cleanup:
        cudaFree(qkv);
        cudaFree(dqkv);
        cudaFree(out);
        cudaFree(dout);
        cudaFree(lse);
        cudaFree(scr);
        free(h);
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    static const shape all[] = {
        {16, 256, 384, 6, 1.0, "gpt"},  {8, 256, 384, 6, 1.0, "gpt"},   {4, 256, 384, 6, 1.0, "gpt"},
        {2, 256, 384, 6, 1.0, "gpt"},   {1, 256, 384, 6, 1.0, "gpt"},   {16, 256, 768, 12, 1.0, "gpt12"},
        {1, 256, 768, 12, 1.0, "gpt12"}, {2, 100, 384, 6, 1.0, "oddT"}, {3, 65, 384, 6, 1.0, "oddT"},
        {3, 1, 384, 6, 1.0, "T1"},      {2, 256, 384, 6, 4.0, "peaked"}, {2, 200, 256, 2, 1.0, "hs128"},
    };
    static const shape small[] = {
        {1, 130, 384, 6, 1.0, "san"}, {2, 1, 384, 6, 1.0, "san"}, {1, 70, 256, 2, 1.0, "san128"},
    };
    static const shape timed[] = {
        {16, 256, 384, 6, 1.0, "gpt"}, {8, 256, 384, 6, 1.0, "gpt"},   {4, 256, 384, 6, 1.0, "gpt"},
        {2, 256, 384, 6, 1.0, "gpt"},  {1, 256, 384, 6, 1.0, "gpt"},   {16, 256, 768, 12, 1.0, "gpt12"},
    };
    if (!strcmp(mode, "check")) {
        bad_args();
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) run_case(all[i], 1);
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) run_case_tf32(all[i]);
    } else if (!strcmp(mode, "sanitize")) {
        for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) run_case(small[i], 0);
        for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) run_case_tf32(small[i]);
    } else if (!strcmp(mode, "bench")) {
        bench(timed, (int)(sizeof timed / sizeof timed[0]), 0);
        bench(timed, (int)(sizeof timed / sizeof timed[0]), 1);
    } else {
        fprintf(stderr, "usage: flash_tests check|sanitize|bench\n");
        return 2;
    }
    printf("flash_tests %s: %d passed, %d failed\n", mode, n_pass, n_fail);
    return n_fail ? 1 : 0;
}
