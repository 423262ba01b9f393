/*
 * test_attention_ref.c: the reference of the fused attention kernels
 * (hw/kernels/attention_ref.h), which CI can run without a GPU:
 *   - exact mode against the existing node reference (cpu_attention_forward /
 *     cpu_attention_backward, fp32 storage, double sums), on the pre-projection
 *     output y and the qkv gradient;
 *   - the bf16 rounding helper (nearest, ties to even, specials, 2^-8 bound);
 *   - bf16 mode does what its comment says: inputs rounded, outputs on the
 *     bf16 grid, lse untouched, and a difference from exact mode within the
 *     bound the GPU tests' tolerances rest on.
 *
 * Getting dqkv out of the node reference: cpu_attention_* include the qkv
 * and output projections. With inp = identity (B*T == C tokens), the qkv
 * GEMM gives qkv[n][j] = wqkv[j][n] + bqkv[j], and its weight gradient
 * dwqkv[j][n] = sum_m dqkv[m][j] inp[m][n] = dqkv[n][j]; with wproj =
 * identity and no bias, y is the attention core's output and dy = dout.
 *
 * Tolerance against the node reference: |a - b| <= 1e-5 * max|b| + 1e-6.
 * The node reference stores q, k, v, the softmax and its gradient in fp32
 * (2^-24 relative each) and chains about four such roundings; 1e-5 is ~10x.
 * A wrong mask, scale or index errs by O(max|b|).
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "nodes.h"

static uint64_t lcg_state;
static double unit_normal(void) {
    double u, v;
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    u = ((lcg_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    v = (lcg_state >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static float *alloc_f(size_t n) {
    float *x = calloc(n, sizeof(float));
    cr_assert(x != NULL);
    return x;
}

static double max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* The node reference on the identity-input set-up above: y (B,T,C) and dqkv
 * (B,T,3C) of the attention core for qkv = wqkv^T + bqkv. Fills qkv too. */
static void node_reference(float *qkv, float *y, float *dqkv, const float *dout, int B, int T, int C, int NH) {
    const int N = B * T;
    cr_assert_eq(N, C, "the identity trick needs B*T == C");
    float *inp = alloc_f((size_t)N * C), *wqkv = alloc_f((size_t)3 * C * C), *bqkv = alloc_f((size_t)3 * C);
    float *wproj = alloc_f((size_t)C * C), *bproj = alloc_f((size_t)C), *out = alloc_f((size_t)N * C);
    float *qkvr = alloc_f((size_t)3 * N * C), *att = alloc_f((size_t)B * NH * T * T);
    float *scratch = alloc_f((size_t)8 * N * C + (size_t)B * NH * T * T), *dinp = alloc_f((size_t)N * C);
    float *dwqkv = alloc_f((size_t)3 * C * C), *dbqkv = alloc_f((size_t)3 * C);
    float *dwproj = alloc_f((size_t)C * C), *dbproj = alloc_f((size_t)C);
    for (int i = 0; i < C; i++) inp[(size_t)i * C + i] = wproj[(size_t)i * C + i] = 1.0f;
    for (size_t i = 0; i < (size_t)3 * C * C; i++) wqkv[i] = (float)unit_normal();
    for (int i = 0; i < 3 * C; i++) bqkv[i] = (float)(0.1 * unit_normal());
    cpu_attention_forward(out, qkvr, att, y, scratch, inp, wqkv, bqkv, wproj, bproj, B, T, C, NH);
    cpu_attention_backward(dinp, dwqkv, dbqkv, dwproj, dbproj, scratch, dout, inp, qkvr, att, y, wqkv, wproj, B, T,
                           C, NH, 0);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < 3 * C; j++) {
            qkv[(size_t)n * 3 * C + j] = (float)((double)wqkv[(size_t)j * C + n] + bqkv[j]);
            dqkv[(size_t)n * 3 * C + j] = dwqkv[(size_t)j * C + n];
        }
    free(inp), free(wqkv), free(bqkv), free(wproj), free(bproj), free(out), free(qkvr), free(att);
    free(scratch), free(dinp), free(dwqkv), free(dbqkv), free(dwproj), free(dbproj);
}

static void expect_close(const float *a, const float *b, size_t n, const char *what) {
    const double tol = 1e-5 * max_abs(b, n) + 1e-6;
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs((double)a[i] - b[i]) <= tol, "%s[%zu]: %.8g vs node reference %.8g (tol %.2g)", what, i,
                  a[i], b[i], tol);
}

Test(attention_ref, exact_mode_matches_the_node_reference) {
    static const int shapes[][4] = {{2, 16, 32, 2}, {1, 24, 24, 3}, {4, 12, 48, 4}}; /* B, T, C, NH */
    lcg_state = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        const size_t n1 = (size_t)B * T * C, n3 = 3 * n1;
        float *qkv = alloc_f(n3), *y = alloc_f(n1), *dqkv_node = alloc_f(n3), *dout = alloc_f(n1);
        float *out = alloc_f(n1), *lse = alloc_f((size_t)B * NH * T), *dqkv = alloc_f(n3);
        for (size_t i = 0; i < n1; i++) dout[i] = (float)unit_normal();
        node_reference(qkv, y, dqkv_node, dout, B, T, C, NH);
        cr_assert_eq(attn_ref_forward(out, lse, qkv, B, T, C, NH, ATTN_REF_EXACT), PL_OK);
        cr_assert_eq(attn_ref_backward(dqkv, dout, qkv, B, T, C, NH, ATTN_REF_EXACT), PL_OK);
        expect_close(out, y, n1, "out");
        expect_close(dqkv, dqkv_node, n3, "dqkv");
        /* row 0 sees only key 0: lse = s_00 = q_0 . k_0 / sqrt(hs) */
        const int hs = C / NH;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs, *k = q + C;
                double s00 = 0.0;
                for (int i = 0; i < hs; i++) s00 += (double)q[i] * k[i];
                s00 /= sqrt((double)hs);
                cr_assert(fabs(lse[((size_t)b * NH + h) * T] - s00) <= 1e-5 * (1.0 + fabs(s00)));
            }
        free(qkv), free(y), free(dqkv_node), free(dout), free(out), free(lse), free(dqkv);
    }
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

Test(attention_ref, bf16_rounding_is_nearest_even) {
    cr_assert_eq(attn_bf16_round(1.0f), 1.0f);
    cr_assert_eq(attn_bf16_round(-2.5f), -2.5f);
    cr_assert_eq(attn_bf16_bits(-0.0f), 0x8000);
    cr_assert_eq(attn_bf16_round(1.0f + 0x1p-7f), 1.0f + 0x1p-7f);          /* representable */
    cr_assert_eq(attn_bf16_round(1.0f + 0x1p-8f), 1.0f);                    /* tie -> even (down) */
    cr_assert_eq(attn_bf16_round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);      /* tie -> even (up) */
    cr_assert_eq(attn_bf16_round(-(1.0f + 0x1p-8f)), -1.0f);
    cr_assert_eq(attn_bf16_round(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f); /* past the tie */
    cr_assert_eq(attn_bf16_round(INFINITY), INFINITY);
    cr_assert_eq(attn_bf16_round(-INFINITY), -INFINITY);
    cr_assert(isnan(attn_bf16_round(NAN)));
    cr_assert(isnan(attn_bf16_round(from_bits(0x7f800001u)))); /* a NaN whose payload rounding would make inf */
    cr_assert_eq(attn_bf16_round(FLT_MAX), INFINITY);
    cr_assert_eq(attn_bf16_round(from_bits(0x7f7f0000u)), from_bits(0x7f7f0000u)); /* largest finite bf16 */
    lcg_state = 7;
    for (int i = 0; i < 100000; i++) {
        const float x = (float)(unit_normal() * exp(8.0 * unit_normal()));
        const float r = attn_bf16_round(x);
        cr_assert(fabsf(r - x) <= 0x1p-8f * fabsf(x), "x %.9g rounds to %.9g", x, r);
        uint32_t u;
        memcpy(&u, &r, sizeof u);
        const float up = from_bits(u + 0x10000u), down = from_bits(u - 0x10000u); /* the neighbours */
        cr_assert(fabsf(x - r) <= fabsf(x - up) && fabsf(x - r) <= fabsf(x - down), "x %.9g: %.9g not nearest", x, r);
    }
}

Test(attention_ref, bf16_mode_rounds_as_stated) {
    enum { B = 2, T = 70, C = 64, NH = 2 };
    const size_t n1 = (size_t)B * T * C, n3 = 3 * n1, nl = (size_t)B * NH * T;
    float *qkv = alloc_f(n3), *qkv_r = alloc_f(n3), *dout = alloc_f(n1), *dout_r = alloc_f(n1);
    float *o_raw = alloc_f(n1), *o_bf = alloc_f(n1), *o_ex = alloc_f(n1);
    float *l_bf = alloc_f(nl), *l_ex = alloc_f(nl), *l_raw = alloc_f(nl);
    float *g_raw = alloc_f(n3), *g_bf = alloc_f(n3), *g_ex = alloc_f(n3);
    lcg_state = 3;
    for (size_t i = 0; i < n3; i++) qkv_r[i] = attn_bf16_round(qkv[i] = (float)unit_normal());
    for (size_t i = 0; i < n1; i++) dout_r[i] = attn_bf16_round(dout[i] = (float)unit_normal());
    cr_assert_eq(attn_ref_forward(o_raw, l_raw, qkv, B, T, C, NH, ATTN_REF_BF16), PL_OK);
    cr_assert_eq(attn_ref_forward(o_bf, l_bf, qkv_r, B, T, C, NH, ATTN_REF_BF16), PL_OK);
    cr_assert_eq(attn_ref_forward(o_ex, l_ex, qkv_r, B, T, C, NH, ATTN_REF_EXACT), PL_OK);
    cr_assert_eq(attn_ref_backward(g_raw, dout, qkv, B, T, C, NH, ATTN_REF_BF16), PL_OK);
    cr_assert_eq(attn_ref_backward(g_bf, dout_r, qkv_r, B, T, C, NH, ATTN_REF_BF16), PL_OK);
    cr_assert_eq(attn_ref_backward(g_ex, dout_r, qkv_r, B, T, C, NH, ATTN_REF_EXACT), PL_OK);
    /* inputs are rounded on entry: raw and pre-rounded inputs give the same bits */
    cr_assert(!memcmp(o_raw, o_bf, sizeof(float) * n1));
    cr_assert(!memcmp(l_raw, l_bf, sizeof(float) * nl));
    cr_assert(!memcmp(g_raw, g_bf, sizeof(float) * n3));
    /* lse is never rounded */
    cr_assert(!memcmp(l_bf, l_ex, sizeof(float) * nl));
    /* outputs lie on the bf16 grid */
    for (size_t i = 0; i < n1; i++) cr_assert_eq(attn_bf16_round(o_bf[i]), o_bf[i]);
    for (size_t i = 0; i < n3; i++) cr_assert_eq(attn_bf16_round(g_bf[i]), g_bf[i]);
    /* forward: weights (2^-8 each, so 2^-8 sum P|v| <= 2^-8 max|v|) plus the store (2^-8 |out|) */
    const double vmax = max_abs(qkv_r, n3);
    int differs = 0;
    for (size_t i = 0; i < n1; i++) {
        const double d = fabs((double)o_bf[i] - o_ex[i]);
        cr_assert(d <= 0x1p-8 * fabs(o_ex[i]) + 0x1p-8 * vmax + 1e-6, "out[%zu] %.8g vs exact %.8g", i, o_bf[i],
                  o_ex[i]);
        differs |= d > 0;
    }
    cr_assert(differs, "bf16 mode changed nothing");
    /* backward: normwise within 2^-7 (the GPU tests' bound) and not identical */
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n3; i++) {
        num += ((double)g_bf[i] - g_ex[i]) * ((double)g_bf[i] - g_ex[i]);
        den += (double)g_ex[i] * g_ex[i];
    }
    cr_assert(num > 0 && sqrt(num / den) <= 0x1p-7, "dqkv bf16 vs exact normwise %.3g", sqrt(num / den));
    free(qkv), free(qkv_r), free(dout), free(dout_r), free(o_raw), free(o_bf), free(o_ex);
    free(l_bf), free(l_ex), free(l_raw), free(g_raw), free(g_bf), free(g_ex);
}

Test(attention_ref, rejects_bad_arguments) {
    float buf[3 * 8 * 8] = {0}, out[8 * 8], lse[2 * 8]; /* B 1, T 8, C 8, NH 2 */
    cr_assert_eq(attn_ref_forward(out, lse, NULL, 1, 8, 8, 2, ATTN_REF_EXACT), PL_ERR_INVALID);
    cr_assert_eq(attn_ref_forward(out, lse, buf, 1, 8, 8, 3, ATTN_REF_EXACT), PL_ERR_INVALID);
    cr_assert_eq(attn_ref_forward(out, lse, buf, 0, 8, 8, 2, ATTN_REF_EXACT), PL_ERR_INVALID);
    cr_assert_eq(attn_ref_forward(out, lse, buf, 1, 8, 8, 2, 7), PL_ERR_INVALID);
    cr_assert_eq(attn_ref_backward(buf, NULL, buf, 1, 8, 8, 2, ATTN_REF_EXACT), PL_ERR_INVALID);
    cr_assert_eq(attn_ref_forward(out, lse, buf, 1, 8, 8, 2, ATTN_REF_BF16), PL_OK);
}
