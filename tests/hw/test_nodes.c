/*
 * test_nodes.c: the CPU reference node math against finite differences, for
 * every node kind, plus the accumulate/assign gradient convention and AdamW.
 *
 * Method: each node's forward is wrapped into a scalar objective
 *   L = sum_i out_i * R_i    (R fixed random weights; for the loss node
 *                             L = inv_norm * sum(losses), its own definition)
 * accumulated in double. Backward is run once with dout = R; then for up to
 * FD_SAMPLES elements x_k of every input and parameter tensor the central
 * difference (L(x_k + h) - L(x_k - h)) / 2h is compared with the analytic
 * gradient.
 *
 * Tolerance: |num - ana| <= FD_ATOL + FD_RTOL * |ana|, with h = 1e-2.
 *   - Rounding: outputs are stored in fp32 (relative error 6e-8); with about
 *     100 outputs of size O(1) weighted by O(1) weights, L carries about
 *     6e-8 * sqrt(100) ~ 1e-6 of noise, i.e. 1e-6 / 2h = 5e-5 in the
 *     difference quotient.
 *   - Truncation: the central difference errs by h^2/6 * f''' ~ 2e-5 for the
 *     smooth O(1) functions here (GELU, softmax, layernorm, log-sum-exp).
 *   FD_ATOL = 5e-4 is about 7x the sum of the two; FD_RTOL = 5e-3 allows the
 *   truncation term to scale with the gradient. A wrong backward (a missing
 *   term, a transposed index, a wrong scale) errs by O(|ana|), far above this,
 *   and fd_checker.detects_a_two_percent_error shows that a 2% error in one
 *   element is caught.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nodes.h"
#include "util.h"

#define FD_H 1e-2f
#define FD_ATOL 5e-4
#define FD_RTOL 5e-3
#define FD_SAMPLES 24

/* Small dimensions: every code path (several heads, several tokens, padded
 * vocabulary) is exercised while the check stays exhaustive enough. */
enum { B = 2, T = 5, C = 8, NH = 2, V = 13 };
#define N (B * T)
#define VP 64

static float *randn(pl_rng *r, int64_t n, double std) {
    float *x = malloc(sizeof(float) * (size_t)n);
    cr_assert(x != NULL);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(pl_rng_normal(r) * std);
    return x;
}

static float *zeros(int64_t n) {
    float *x = calloc((size_t)n, sizeof(float));
    cr_assert(x != NULL);
    return x;
}

typedef double (*objective_fn)(void *ctx);

/* Compare ana (n floats) with central differences of f over x (n floats).
 * Returns the number of sampled elements that fail; *worst gets the largest
 * |num - ana| / (FD_ATOL + FD_RTOL |ana|). */
static int fd_check(objective_fn f, void *ctx, float *x, const float *ana, int64_t n, uint64_t seed,
                    double *worst) {
    pl_rng r;
    pl_rng_seed(&r, seed);
    int bad = 0;
    double w = 0.0;
    int samples = n < FD_SAMPLES ? (int)n : FD_SAMPLES;
    for (int s = 0; s < samples; s++) {
        int64_t k = n <= FD_SAMPLES ? s : (int64_t)pl_rng_int(&r, (int)n);
        float x0 = x[k];
        x[k] = x0 + FD_H;
        double lp = f(ctx);
        x[k] = x0 - FD_H;
        double lm = f(ctx);
        x[k] = x0;
        double num = (lp - lm) / (2.0 * (double)FD_H);
        double err = fabs(num - ana[k]);
        double tol = FD_ATOL + FD_RTOL * fabs(ana[k]);
        if (err / tol > w) w = err / tol;
        if (err > tol) bad++;
    }
    if (worst) *worst = w;
    return bad;
}

static double weighted_sum(const float *out, const float *R, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)out[i] * R[i];
    return s;
}

#define EXPECT_FD(f, ctx, x, ana, n, seed, name)                                                   \
    do {                                                                                            \
        double worst_;                                                                              \
        int bad_ = fd_check(f, ctx, x, ana, n, seed, &worst_);                                      \
        cr_log_info("%s: worst error %.3f of the tolerance", name, worst_);                        \
        cr_expect_eq(bad_, 0, "%s: %d sampled elements outside tolerance (worst %.2fx tol)", name, \
                     bad_, worst_);                                                                 \
    } while (0)

/* ---------------- embedding ---------------- */

typedef struct {
    int tokens[N];
    float *wte, *wpe, *out, *R;
} emb_ctx;

static double emb_obj(void *p) {
    emb_ctx *c = p;
    cpu_embedding_forward(c->out, c->tokens, c->wte, c->wpe, B, T, C);
    return weighted_sum(c->out, c->R, (int64_t)N * C);
}

Test(embedding, backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 1);
    emb_ctx c;
    for (int i = 0; i < N; i++) c.tokens[i] = pl_rng_int(&r, V);
    c.tokens[3] = c.tokens[7]; /* a repeated token must accumulate both rows */
    c.wte = randn(&r, V * C, 1.0);
    c.wpe = randn(&r, T * C, 1.0);
    c.out = zeros(N * C);
    c.R = randn(&r, N * C, 1.0);
    float *dwte = zeros(V * C), *dwpe = zeros(T * C);
    cpu_embedding_backward(dwte, dwpe, c.R, c.tokens, B, T, C);
    EXPECT_FD(emb_obj, &c, c.wte, dwte, V * C, 11, "dwte");
    EXPECT_FD(emb_obj, &c, c.wpe, dwpe, T * C, 12, "dwpe");
    free(c.wte); free(c.wpe); free(c.out); free(c.R); free(dwte); free(dwpe);
}

/* ---------------- layernorm ---------------- */

typedef struct {
    float *inp, *w, *b, *out, *mean, *rstd, *R;
} ln_ctx;

static double ln_obj(void *p) {
    ln_ctx *c = p;
    cpu_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, N, C);
    return weighted_sum(c->out, c->R, (int64_t)N * C);
}

Test(layernorm, backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 2);
    ln_ctx c = {randn(&r, N * C, 1.0), randn(&r, C, 1.0), randn(&r, C, 1.0), zeros(N * C), zeros(N),
                zeros(N), randn(&r, N * C, 1.0)};
    ln_obj(&c);
    float *dinp = zeros(N * C), *dw = zeros(C), *db = zeros(C);
    cpu_layernorm_backward(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, N, C, 0);
    EXPECT_FD(ln_obj, &c, c.inp, dinp, N * C, 21, "dinp");
    EXPECT_FD(ln_obj, &c, c.w, dw, C, 22, "dweight");
    EXPECT_FD(ln_obj, &c, c.b, db, C, 23, "dbias");
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.mean); free(c.rstd); free(c.R);
    free(dinp); free(dw); free(db);
}

Test(layernorm, acc_adds_to_the_input_gradient_and_params_accumulate) {
    pl_rng r;
    pl_rng_seed(&r, 3);
    float *inp = randn(&r, N * C, 1.0), *w = randn(&r, C, 1.0), *b = randn(&r, C, 1.0);
    float *out = zeros(N * C), *mean = zeros(N), *rstd = zeros(N), *dout = randn(&r, N * C, 1.0);
    cpu_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    float *d0 = zeros(N * C), *dw0 = zeros(C), *db0 = zeros(C);
    cpu_layernorm_backward(d0, dw0, db0, dout, inp, w, mean, rstd, N, C, 0);
    float *d1 = randn(&r, N * C, 1.0), *prior = malloc(sizeof(float) * N * C);
    memcpy(prior, d1, sizeof(float) * N * C);
    float *dw1 = zeros(C), *db1 = zeros(C);
    memcpy(dw1, dw0, sizeof(float) * C);
    cpu_layernorm_backward(d1, dw1, db1, dout, inp, w, mean, rstd, N, C, 1);
    for (int i = 0; i < N * C; i++)
        cr_assert(ieee_ulp_eq(flt, d1[i], prior[i] + d0[i], 4), "dinp[%d] %g vs %g", i, d1[i], prior[i] + d0[i]);
    for (int i = 0; i < C; i++)
        cr_assert(ieee_ulp_eq(flt, dw1[i], 2.0f * dw0[i], 4), "dweight[%d] did not accumulate", i);
    /* and acc = 0 overwrites whatever was there */
    cpu_layernorm_backward(d1, dw1, db1, dout, inp, w, mean, rstd, N, C, 0);
    for (int i = 0; i < N * C; i++) cr_assert(ieee_ulp_eq(flt, d1[i], d0[i], 0));
    free(inp); free(w); free(b); free(out); free(mean); free(rstd); free(dout);
    free(d0); free(dw0); free(db0); free(d1); free(prior); free(dw1); free(db1);
}

/* ---------------- attention ---------------- */

typedef struct {
    float *inp, *wqkv, *bqkv, *wproj, *bproj;
    float *out, *qkvr, *att, *y, *scratch, *R;
} attn_ctx;

static double attn_obj(void *p) {
    attn_ctx *c = p;
    cpu_attention_forward(c->out, c->qkvr, c->att, c->y, c->scratch, c->inp, c->wqkv, c->bqkv, c->wproj,
                          c->bproj, B, T, C, NH);
    return weighted_sum(c->out, c->R, (int64_t)N * C);
}

Test(attention, backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 4);
    attn_ctx c = {randn(&r, N * C, 1.0), randn(&r, 3 * C * C, 0.4), randn(&r, 3 * C, 0.2),
                  randn(&r, C * C, 0.4), randn(&r, C, 0.2), zeros(N * C), zeros(3 * N * C),
                  zeros(B * NH * T * T), zeros(N * C), zeros(4 * N * C), randn(&r, N * C, 1.0)};
    attn_obj(&c);
    /* the softmax rows sum to one and are causal */
    for (int row = 0; row < B * NH * T; row++) {
        int t = row % T;
        double s = 0;
        for (int j = 0; j < T; j++) {
            s += c.att[row * T + j];
            if (j > t) cr_assert(ieee_ulp_eq(flt, c.att[row * T + j], 0.0f, 0), "att above diagonal");
        }
        cr_assert(epsilon_eq(dbl, s, 1.0, 1e-6));
    }
    float *dinp = zeros(N * C), *dwqkv = zeros(3 * C * C), *dbqkv = zeros(3 * C), *dwproj = zeros(C * C),
          *dbproj = zeros(C), *scratch = zeros(8 * N * C + B * NH * T * T);
    cpu_attention_backward(dinp, dwqkv, dbqkv, dwproj, dbproj, scratch, c.R, c.inp, c.qkvr, c.att, c.y,
                           c.wqkv, c.wproj, B, T, C, NH, 0);
    EXPECT_FD(attn_obj, &c, c.inp, dinp, N * C, 41, "dinp");
    EXPECT_FD(attn_obj, &c, c.wqkv, dwqkv, 3 * C * C, 42, "dwqkv");
    EXPECT_FD(attn_obj, &c, c.bqkv, dbqkv, 3 * C, 43, "dbqkv");
    EXPECT_FD(attn_obj, &c, c.wproj, dwproj, C * C, 44, "dwproj");
    EXPECT_FD(attn_obj, &c, c.bproj, dbproj, C, 45, "dbproj");
    free(c.inp); free(c.wqkv); free(c.bqkv); free(c.wproj); free(c.bproj); free(c.out); free(c.qkvr);
    free(c.att); free(c.y); free(c.scratch); free(c.R);
    free(dinp); free(dwqkv); free(dbqkv); free(dwproj); free(dbproj); free(scratch);
}

Test(attention, output_does_not_depend_on_later_tokens) {
    pl_rng r;
    pl_rng_seed(&r, 5);
    attn_ctx c = {randn(&r, N * C, 1.0), randn(&r, 3 * C * C, 0.4), randn(&r, 3 * C, 0.2),
                  randn(&r, C * C, 0.4), randn(&r, C, 0.2), zeros(N * C), zeros(3 * N * C),
                  zeros(B * NH * T * T), zeros(N * C), zeros(4 * N * C), randn(&r, N * C, 1.0)};
    attn_obj(&c);
    float first[C];
    memcpy(first, c.out, sizeof first); /* sample 0, token 0 */
    for (int t = 1; t < T; t++)
        for (int k = 0; k < C; k++) c.inp[t * C + k] += 1.0f;
    attn_obj(&c);
    for (int k = 0; k < C; k++) cr_assert(ieee_ulp_eq(flt, c.out[k], first[k], 0), "token 0 saw the future");
    free(c.inp); free(c.wqkv); free(c.bqkv); free(c.wproj); free(c.bproj); free(c.out); free(c.qkvr);
    free(c.att); free(c.y); free(c.scratch); free(c.R);
}

/* ---------------- residual ---------------- */

typedef struct {
    float *a, *b, *out, *R;
} res_ctx;

static double res_obj(void *p) {
    res_ctx *c = p;
    cpu_residual_forward(c->out, c->a, c->b, N * C);
    return weighted_sum(c->out, c->R, (int64_t)N * C);
}

Test(residual, backward_matches_finite_differences_and_acc) {
    pl_rng r;
    pl_rng_seed(&r, 6);
    res_ctx c = {randn(&r, N * C, 1.0), randn(&r, N * C, 1.0), zeros(N * C), randn(&r, N * C, 1.0)};
    float *da = zeros(N * C), *db = randn(&r, N * C, 1.0), *prior = malloc(sizeof(float) * N * C);
    memcpy(prior, db, sizeof(float) * N * C);
    cpu_residual_backward(da, db, c.R, N * C, 0, 1);
    EXPECT_FD(res_obj, &c, c.a, da, N * C, 61, "da");
    for (int i = 0; i < N * C; i++) db[i] -= prior[i];
    EXPECT_FD(res_obj, &c, c.b, db, N * C, 62, "db (acc)");
    free(c.a); free(c.b); free(c.out); free(c.R); free(da); free(db); free(prior);
}

/* ---------------- mlp ---------------- */

typedef struct {
    float *inp, *wfc, *bfc, *wproj, *bproj, *out, *h, *g, *R;
} mlp_ctx;

static double mlp_obj(void *p) {
    mlp_ctx *c = p;
    cpu_mlp_forward(c->out, c->h, c->g, c->inp, c->wfc, c->bfc, c->wproj, c->bproj, N, C);
    return weighted_sum(c->out, c->R, (int64_t)N * C);
}

Test(mlp, backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 7);
    mlp_ctx c = {randn(&r, N * C, 1.0), randn(&r, 4 * C * C, 0.4), randn(&r, 4 * C, 0.2),
                 randn(&r, 4 * C * C, 0.3), randn(&r, C, 0.2), zeros(N * C), zeros(4 * N * C),
                 zeros(4 * N * C), randn(&r, N * C, 1.0)};
    mlp_obj(&c);
    float *dinp = zeros(N * C), *dwfc = zeros(4 * C * C), *dbfc = zeros(4 * C), *dwproj = zeros(4 * C * C),
          *dbproj = zeros(C), *scratch = zeros(4 * N * C);
    cpu_mlp_backward(dinp, dwfc, dbfc, dwproj, dbproj, scratch, c.R, c.inp, c.h, c.g, c.wfc, c.wproj, N, C, 0);
    EXPECT_FD(mlp_obj, &c, c.inp, dinp, N * C, 71, "dinp");
    EXPECT_FD(mlp_obj, &c, c.wfc, dwfc, 4 * C * C, 72, "dwfc");
    EXPECT_FD(mlp_obj, &c, c.bfc, dbfc, 4 * C, 73, "dbfc");
    EXPECT_FD(mlp_obj, &c, c.wproj, dwproj, 4 * C * C, 74, "dwproj");
    EXPECT_FD(mlp_obj, &c, c.bproj, dbproj, C, 75, "dbproj");
    free(c.inp); free(c.wfc); free(c.bfc); free(c.wproj); free(c.bproj); free(c.out); free(c.h); free(c.g);
    free(c.R); free(dinp); free(dwfc); free(dbfc); free(dwproj); free(dbproj); free(scratch);
}

Test(mlp, gelu_derivative_matches_finite_differences) {
    for (float x = -5.0f; x <= 5.0f; x += 0.25f) {
        double h = 1e-3;
        double num = (gelu_tanh((float)(x + h)) - gelu_tanh((float)(x - h))) / (2 * h);
        cr_expect(epsilon_eq(dbl, num, gelu_tanh_grad(x), 1e-3), "x=%g num=%g ana=%g", x, num,
                  gelu_tanh_grad(x));
    }
}

/* ---------------- head ---------------- */

typedef struct {
    float *inp, *w, *logits, *R;
} head_ctx;

static double head_obj(void *p) {
    head_ctx *c = p;
    cpu_head_forward(c->logits, c->inp, c->w, N, C, V, VP);
    double s = 0;
    for (int n = 0; n < N; n++)
        for (int v = 0; v < V; v++) s += (double)c->logits[n * VP + v] * c->R[n * VP + v];
    return s;
}

Test(head, backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 8);
    head_ctx c = {randn(&r, N * C, 1.0), randn(&r, V * C, 0.5), zeros(N * VP), randn(&r, N * VP, 1.0)};
    float *dinp = zeros(N * C), *dw = zeros(V * C);
    cpu_head_backward(dinp, dw, c.R, c.inp, c.w, N, C, V, VP, 0);
    EXPECT_FD(head_obj, &c, c.inp, dinp, N * C, 81, "dinp");
    EXPECT_FD(head_obj, &c, c.w, dw, V * C, 82, "dw");
    free(c.inp); free(c.w); free(c.logits); free(c.R); free(dinp); free(dw);
}

/* ---------------- loss ---------------- */

typedef struct {
    float *logits, *losses, *scratch;
    int targets[N];
    float inv_norm;
} loss_ctx;

static double loss_obj(void *p) {
    loss_ctx *c = p;
    double sum = 0.0;
    cpu_loss_forward(c->losses, c->scratch, &sum, c->logits, c->targets, c->inv_norm, N, V, VP);
    return sum * c->inv_norm;
}

Test(loss, gradient_matches_finite_differences_in_and_out_of_place) {
    pl_rng r;
    pl_rng_seed(&r, 9);
    loss_ctx c;
    c.logits = randn(&r, N * VP, 2.0);
    c.losses = zeros(N);
    c.scratch = zeros(N * VP);
    /* micro-batch of N tokens out of a full batch of 4N: the gradient is
     * scaled by the full batch's token count */
    c.inv_norm = 1.0f / (4 * N);
    for (int i = 0; i < N; i++) c.targets[i] = pl_rng_int(&r, V);
    float *dlogits = zeros(N * VP);
    double sum = 0.0;
    cpu_loss_forward(c.losses, dlogits, &sum, c.logits, c.targets, c.inv_norm, N, V, VP);
    /* loss per token is -log p[target] */
    for (int n = 0; n < N; n++) cr_assert(c.losses[n] > 0.0f);
    /* finite differences on the valid columns only */
    for (int n = 0; n < N; n++) {
        double worst;
        int bad = fd_check(loss_obj, &c, c.logits + n * VP, dlogits + n * VP, V, 90 + n, &worst);
        cr_expect_eq(bad, 0, "row %d: %d elements off (worst %.2fx)", n, bad, worst);
        for (int v = V; v < VP; v++) cr_assert(ieee_ulp_eq(flt, dlogits[n * VP + v], 0.0f, 0), "padding");
    }
    /* in place gives the same bits */
    float *inplace = malloc(sizeof(float) * N * VP);
    memcpy(inplace, c.logits, sizeof(float) * N * VP);
    double sum2 = 0.0;
    cpu_loss_forward(c.losses, inplace, &sum2, inplace, c.targets, c.inv_norm, N, V, VP);
    for (int i = 0; i < N * VP; i++) cr_assert(ieee_ulp_eq(flt, inplace[i], dlogits[i], 0));
    cr_assert(ieee_ulp_eq(dbl, sum, sum2, 0));
    free(c.logits); free(c.losses); free(c.scratch); free(dlogits); free(inplace);
}

/* ---------------- the checker itself ---------------- */

Test(fd_checker, detects_a_two_percent_error) {
    pl_rng r;
    pl_rng_seed(&r, 10);
    mlp_ctx c = {randn(&r, N * C, 1.0), randn(&r, 4 * C * C, 0.4), randn(&r, 4 * C, 0.2),
                 randn(&r, 4 * C * C, 0.3), randn(&r, C, 0.2), zeros(N * C), zeros(4 * N * C),
                 zeros(4 * N * C), randn(&r, N * C, 1.0)};
    mlp_obj(&c);
    float *dinp = zeros(N * C), *dwfc = zeros(4 * C * C), *dbfc = zeros(4 * C), *dwproj = zeros(4 * C * C),
          *dbproj = zeros(C), *scratch = zeros(4 * N * C);
    cpu_mlp_backward(dinp, dwfc, dbfc, dwproj, dbproj, scratch, c.R, c.inp, c.h, c.g, c.wfc, c.wproj, N, C, 0);
    /* corrupt the largest element of dinp by 2%; the check covers all N*C
     * elements when FD_SAMPLES >= N*C, else corrupt a sampled one */
    int k = 0;
    for (int i = 1; i < FD_SAMPLES && i < N * C; i++)
        if (fabsf(dinp[i]) > fabsf(dinp[k])) k = i;
    dinp[k] *= 1.02f;
    double worst;
    int bad = fd_check(mlp_obj, &c, c.inp, dinp, N * C, 71, &worst);
    cr_assert_geq(bad, 1, "a 2%% error in dinp[%d]=%g went unnoticed (worst %.2f)", k, dinp[k], worst);
    free(c.inp); free(c.wfc); free(c.bfc); free(c.wproj); free(c.bproj); free(c.out); free(c.h); free(c.g);
    free(c.R); free(dinp); free(dwfc); free(dbfc); free(dwproj); free(dbproj); free(scratch);
}

/* ---------------- AdamW ---------------- */

Test(adamw, first_step_matches_the_closed_form) {
    /* at t = 1 the bias-corrected moments are g and g^2, so the update is
     * lr * (g / (|g| + eps) + wd * p) */
    float p[4] = {0.5f, -1.0f, 2.0f, 0.0f}, g[4] = {0.1f, -0.2f, 0.0f, 3.0f};
    float m[4] = {0}, v[4] = {0};
    float p0[4];
    memcpy(p0, p, sizeof p);
    const float lr = 1e-2f, eps = 1e-8f, wd = 0.1f;
    cpu_adamw(p, g, m, v, 4, lr, 0.9f, 0.95f, eps, wd, 1);
    for (int i = 0; i < 4; i++) {
        double want = p0[i] - lr * (g[i] / (fabs(g[i]) + eps) + wd * p0[i]);
        cr_assert(epsilon_eq(dbl, p[i], want, 1e-6), "p[%d] = %g, want %g", i, p[i], want);
        cr_assert(epsilon_eq(flt, m[i], 0.1f * g[i], 1e-7f));
        cr_assert(epsilon_eq(flt, v[i], 0.05f * g[i] * g[i], 1e-7f));
    }
    /* a second step with the same gradient moves by the same amount (the
     * bias correction cancels the moments' warm-up) */
    float p1[4];
    memcpy(p1, p, sizeof p);
    cpu_adamw(p, g, m, v, 4, lr, 0.9f, 0.95f, eps, 0.0f, 2);
    for (int i = 0; i < 4; i++) {
        double want = p1[i] - lr * (g[i] / (fabs(g[i]) + eps));
        cr_assert(epsilon_eq(dbl, p[i], want, 1e-6), "step 2 p[%d] = %g, want %g", i, p[i], want);
    }
}
