/*
 * attention_ref.c: the naive causal attention of attention_ref.h. One head of
 * one sequence at a time, a row of scores at a time: O(T^2 hs) work, O(T hs)
 * memory, every dot product and sum in double.
 */
#include "attention_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint16_t attn_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it quiet */
    u += 0x7fffu + ((u >> 16) & 1u);                                                /* nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float attn_bf16_value(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float attn_bf16_round(float x) { return attn_bf16_value(attn_bf16_bits(x)); }

/* x rounded as the kernel stores it: to bf16 in ATTN_REF_BF16 mode */
static double rnd(double x, int bf) { return bf ? (double)attn_bf16_round((float)x) : x; }

static double dot(const double *a, const double *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* part 0/1/2 (q/k/v) of head h of sequence b, rows 0..T-1, into dst (T, hs) */
static void gather(double *dst, const float *qkv, int b, int h, int part, int T, int C, int hs, int bf) {
    for (int t = 0; t < T; t++) {
        const float *src = qkv + ((int64_t)b * T + t) * 3 * C + (int64_t)part * C + (int64_t)h * hs;
        for (int i = 0; i < hs; i++) dst[(int64_t)t * hs + i] = rnd(src[i], bf);
    }
}

static int bad_args(const float *qkv, int B, int T, int C, int NH, int mode) {
    return !qkv || B < 1 || T < 1 || NH < 1 || C < 1 || C % NH != 0 ||
           (mode != ATTN_REF_EXACT && mode != ATTN_REF_BF16);
}

/* Scores of row t (s[0..t]), their max and ln of the sum of exp(s - max). */
static void row_scores(double *s, double *mx, double *lsum, const double *qt, const double *k, int t, int hs,
                       double scale) {
    double m = -INFINITY, l = 0.0;
    for (int j = 0; j <= t; j++) {
        s[j] = scale * dot(qt, k + (int64_t)j * hs, hs);
        if (s[j] > m) m = s[j];
    }
    for (int j = 0; j <= t; j++) l += exp(s[j] - m);
    *mx = m;
    *lsum = l;
}

/* out_t (hs) = sum_j w_j v_j / l, w_j = exp(s_j - m) (rounded in bf16 mode), o rounded likewise */
static void row_output(double *o, const double *s, double m, double l, const double *v, int t, int hs, int bf) {
    for (int i = 0; i < hs; i++) o[i] = 0.0;
    for (int j = 0; j <= t; j++) {
        const double w = rnd(exp(s[j] - m), bf);
        const double *vj = v + (int64_t)j * hs;
        for (int i = 0; i < hs; i++) o[i] += w * vj[i];
    }
    for (int i = 0; i < hs; i++) o[i] = rnd(o[i] / l, bf);
}

pl_status attn_ref_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH, int mode) {
    if (bad_args(qkv, B, T, C, NH, mode)) return PL_ERR_INVALID;
    const int hs = C / NH, bf = mode == ATTN_REF_BF16;
    const double scale = 1.0 / sqrt((double)hs);
    double *work = malloc(sizeof(double) * ((size_t)4 * T * hs + (size_t)T));
    if (!work) return PL_ERR_NOMEM;
    double *q = work, *k = q + (size_t)T * hs, *v = k + (size_t)T * hs, *o = v + (size_t)T * hs, *s = o + hs;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            gather(q, qkv, b, h, 0, T, C, hs, bf);
            gather(k, qkv, b, h, 1, T, C, hs, bf);
            gather(v, qkv, b, h, 2, T, C, hs, bf);
            for (int t = 0; t < T; t++) {
                double m, l;
                row_scores(s, &m, &l, q + (int64_t)t * hs, k, t, hs, scale);
                if (lse) lse[((int64_t)b * NH + h) * T + t] = (float)(m + log(l));
                if (!out) continue;
                row_output(o, s, m, l, v, t, hs, bf);
                float *dst = out + ((int64_t)b * T + t) * C + (int64_t)h * hs;
                for (int i = 0; i < hs; i++) dst[i] = (float)o[i];
            }
        }
    free(work);
    return PL_OK;
}

pl_status attn_ref_backward(float *dqkv, const float *dout, const float *qkv, int B, int T, int C, int NH,
                            int mode) {
    if (bad_args(qkv, B, T, C, NH, mode) || !dqkv || !dout) return PL_ERR_INVALID;
    const int hs = C / NH, bf = mode == ATTN_REF_BF16;
    const int64_t Ths = (int64_t)T * hs;
    const double scale = 1.0 / sqrt((double)hs);
    double *work = malloc(sizeof(double) * ((size_t)6 * Ths + (size_t)2 * hs + (size_t)2 * T));
    if (!work) return PL_ERR_NOMEM;
    double *q = work, *k = q + Ths, *v = k + Ths, *dO = v + Ths, *dk = dO + Ths, *dv = dk + Ths;
    double *dq = dv + Ths, *o = dq + hs, *s = o + hs, *dp = s + T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            gather(q, qkv, b, h, 0, T, C, hs, bf);
            gather(k, qkv, b, h, 1, T, C, hs, bf);
            gather(v, qkv, b, h, 2, T, C, hs, bf);
            for (int t = 0; t < T; t++) {
                const float *src = dout + ((int64_t)b * T + t) * C + (int64_t)h * hs;
                for (int i = 0; i < hs; i++) dO[(int64_t)t * hs + i] = rnd(src[i], bf);
            }
            memset(dk, 0, sizeof(double) * (size_t)Ths);
            memset(dv, 0, sizeof(double) * (size_t)Ths);
            for (int t = 0; t < T; t++) {
                const double *qt = q + (int64_t)t * hs, *dOt = dO + (int64_t)t * hs;
                double m, l, D = 0.0;
                row_scores(s, &m, &l, qt, k, t, hs, scale);
                const double lse = m + log(l);
                for (int j = 0; j <= t; j++) dp[j] = dot(dOt, v + (int64_t)j * hs, hs);
                if (bf) { /* the kernel's D: the stored bf16 output against dout */
                    row_output(o, s, m, l, v, t, hs, bf);
                    D = dot(dOt, o, hs);
                } else {
                    for (int j = 0; j <= t; j++) D += exp(s[j] - lse) * dp[j];
                }
                for (int i = 0; i < hs; i++) dq[i] = 0.0;
                for (int j = 0; j <= t; j++) {
                    const double p = exp(s[j] - lse), ds = p * (dp[j] - D);
                    const double pr = rnd(p, bf), dsr = rnd(ds, bf);
                    double *dkj = dk + (int64_t)j * hs, *dvj = dv + (int64_t)j * hs;
                    const double *kj = k + (int64_t)j * hs;
                    for (int i = 0; i < hs; i++) {
                        dvj[i] += pr * dOt[i];
                        dkj[i] += dsr * qt[i];
                        dq[i] += dsr * kj[i];
                    }
                }
                float *dst = dqkv + ((int64_t)b * T + t) * 3 * C + (int64_t)h * hs;
                for (int i = 0; i < hs; i++) dst[i] = (float)rnd(scale * dq[i], bf);
            }
            for (int t = 0; t < T; t++) {
                float *dst = dqkv + ((int64_t)b * T + t) * 3 * C + (int64_t)h * hs;
                for (int i = 0; i < hs; i++) {
                    dst[C + i] = (float)rnd(scale * dk[(int64_t)t * hs + i], bf);
                    dst[2 * C + i] = (float)rnd(dv[(int64_t)t * hs + i], bf);
                }
            }
        }
    free(work);
    return PL_OK;
}
