/*
 * test_nn.c: every hand-written backward pass of the placer network against
 * central finite differences.
 *
 * Tolerance: in double precision a central difference with step 1e-6 has a
 * truncation error of O(h^2) ~ 1e-12 and a rounding error of about
 * eps * |f| / h ~ 1e-10 relative to the loss magnitude (~1), so analytic and
 * numeric gradients agree to ~1e-8 absolute; we require relative error
 * below 1e-6 (or absolute below 1e-8 for near-zero entries). A sign or
 * indexing mistake gives errors of order 1.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "placer_net.h"
#include "util.h"

#define FD_H 1e-6

static void fill(double *x, int n, pl_rng *r, double s) {
    for (int i = 0; i < n; i++) x[i] = s * (2.0 * pl_rng_uniform(r) - 1.0);
}

static void check_close(double analytic, double numeric, const char *what, int i) {
    double err = fabs(analytic - numeric);
    double scale = fmax(fabs(analytic), fabs(numeric));
    cr_assert(err <= 1e-8 || err <= 1e-6 * scale, "%s[%d]: analytic %.10g numeric %.10g", what, i, analytic,
              numeric);
}

/* ---- LSTM cell: loss = sum(h * gh) + sum(c * gc) ------------------------ */
enum { LB = 3, LX = 4, LH = 5 };
typedef struct {
    double xh[LB * (LX + LH)], c_prev[LB * LH], W[4 * LH * (LX + LH)], b[4 * LH], gh[LB * LH], gc[LB * LH];
} lstm_case;

static double lstm_loss(const lstm_case *k) {
    double h[LB * LH], c[LB * LH], gates[LB * 4 * LH], tc[LB * LH];
    lstm_forward(h, c, gates, tc, k->xh, k->c_prev, k->W, k->b, LB, LX + LH, LH);
    double L = 0;
    for (int i = 0; i < LB * LH; i++) L += h[i] * k->gh[i] + c[i] * k->gc[i];
    return L;
}

Test(nn, lstm_backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 1);
    lstm_case k;
    fill(k.xh, LB * (LX + LH), &r, 1.0);
    fill(k.c_prev, LB * LH, &r, 1.0);
    fill(k.W, 4 * LH * (LX + LH), &r, 0.7);
    fill(k.b, 4 * LH, &r, 0.5);
    fill(k.gh, LB * LH, &r, 1.0);
    fill(k.gc, LB * LH, &r, 1.0);
    double h[LB * LH], c[LB * LH], gates[LB * 4 * LH], tc[LB * LH];
    lstm_forward(h, c, gates, tc, k.xh, k.c_prev, k.W, k.b, LB, LX + LH, LH);
    double dxh[LB * (LX + LH)], dcp[LB * LH], dW[4 * LH * (LX + LH)] = {0}, db[4 * LH] = {0}, dz[LB * 4 * LH];
    lstm_backward(dxh, dcp, dW, db, dz, k.gh, k.gc, gates, tc, k.c_prev, k.xh, k.W, LB, LX + LH, LH);
    struct { double *p; double *g; int n; const char *name; } t[] = {
        {k.xh, dxh, LB * (LX + LH), "dxh"}, {k.c_prev, dcp, LB * LH, "dc_prev"},
        {k.W, dW, 4 * LH * (LX + LH), "dW"}, {k.b, db, 4 * LH, "db"}};
    for (int q = 0; q < 4; q++)
        for (int i = 0; i < t[q].n; i++) {
            double old = t[q].p[i];
            t[q].p[i] = old + FD_H;
            double lp = lstm_loss(&k);
            t[q].p[i] = old - FD_H;
            double lm = lstm_loss(&k);
            t[q].p[i] = old;
            check_close(t[q].g[i], (lp - lm) / (2 * FD_H), t[q].name, i);
        }
}

/* ---- attention: loss = sum(ctx * g) ------------------------------------ */
enum { AB = 2, AT = 5, AH = 4, AA = 3 };
typedef struct {
    double h[AB * AH], E[AT * AH], Wk[AA * AH], Wq[AA * AH], v[AA], g[AB * AH];
} att_case;

static double att_loss(const att_case *k) {
    double K[AT * AA], ctx[AB * AH], alpha[AB * AT], u[AB * AT * AA], q[AB * AA];
    linear_forward(K, k->E, k->Wk, NULL, AT, AH, AA);
    attention_forward(ctx, alpha, u, q, k->h, k->E, K, k->Wq, k->v, AB, AT, AH, AA);
    double L = 0;
    for (int i = 0; i < AB * AH; i++) L += ctx[i] * k->g[i];
    return L;
}

Test(nn, attention_backward_matches_finite_differences) {
    pl_rng r;
    pl_rng_seed(&r, 2);
    att_case k;
    fill(k.h, AB * AH, &r, 1.0);
    fill(k.E, AT * AH, &r, 1.0);
    fill(k.Wk, AA * AH, &r, 1.0);
    fill(k.Wq, AA * AH, &r, 1.0);
    fill(k.v, AA, &r, 1.5);
    fill(k.g, AB * AH, &r, 1.0);
    double K[AT * AA], ctx[AB * AH], alpha[AB * AT], u[AB * AT * AA], q[AB * AA];
    linear_forward(K, k.E, k.Wk, NULL, AT, AH, AA);
    attention_forward(ctx, alpha, u, q, k.h, k.E, K, k.Wq, k.v, AB, AT, AH, AA);
    double dh[AB * AH], dE[AT * AH] = {0}, dK[AT * AA] = {0}, dWq[AA * AH] = {0}, dv[AA] = {0};
    double scratch[AB * AT + AB * AA + AA], dWk[AA * AH] = {0}, dEk[AT * AH];
    attention_backward(dh, dE, dK, dWq, dv, scratch, k.g, alpha, u, k.h, k.E, k.Wq, k.v, AB, AT, AH, AA);
    linear_backward(dEk, dWk, NULL, dK, k.E, k.Wk, AT, AH, AA);
    for (int i = 0; i < AT * AH; i++) dE[i] += dEk[i];
    /* alpha rows are distributions */
    for (int b = 0; b < AB; b++) {
        double s = 0;
        for (int j = 0; j < AT; j++) s += alpha[b * AT + j];
        cr_assert(fabs(s - 1.0) < 1e-12);
    }
    struct { double *p; double *g; int n; const char *name; } t[] = {
        {k.h, dh, AB * AH, "dh"}, {k.E, dE, AT * AH, "dE"}, {k.Wq, dWq, AA * AH, "dWq"},
        {k.Wk, dWk, AA * AH, "dWk"}, {k.v, dv, AA, "dv"}};
    for (int q2 = 0; q2 < 5; q2++)
        for (int i = 0; i < t[q2].n; i++) {
            double old = t[q2].p[i];
            t[q2].p[i] = old + FD_H;
            double lp = att_loss(&k);
            t[q2].p[i] = old - FD_H;
            double lm = att_loss(&k);
            t[q2].p[i] = old;
            check_close(t[q2].g[i], (lp - lm) / (2 * FD_H), t[q2].name, i);
        }
}

/* ---- softmax + policy loss with entropy -------------------------------- */
Test(nn, softmax_policy_loss_backward_matches_finite_differences) {
    enum { B = 3, D = 4 };
    pl_rng r;
    pl_rng_seed(&r, 3);
    double z[B * D], p[B * D], dz[B * D], dzs[B * D], w[B] = {1.3, -0.7, 0.2};
    int a[B] = {2, 0, 3};
    fill(z, B * D, &r, 2.0);
    softmax_forward(p, z, B, D);
    policy_loss_backward(dz, p, a, w, 0.3, 0.5, B, D);
    for (int i = 0; i < B * D; i++) {
        double old = z[i];
        z[i] = old + FD_H;
        softmax_forward(p, z, B, D);
        double lp = policy_loss_backward(dzs, p, a, w, 0.3, 0.5, B, D);
        z[i] = old - FD_H;
        softmax_forward(p, z, B, D);
        double lm = policy_loss_backward(dzs, p, a, w, 0.3, 0.5, B, D);
        z[i] = old;
        check_close(dz[i], (lp - lm) / (2 * FD_H), "dlogits", i);
    }
}

Test(nn, linear_backward_matches_finite_differences) {
    enum { B = 3, I = 4, O = 2 };
    pl_rng r;
    pl_rng_seed(&r, 4);
    double x[B * I], W[O * I], b[O], g[B * O], y[B * O], dx[B * I], dW[O * I] = {0}, db[O] = {0};
    fill(x, B * I, &r, 1);
    fill(W, O * I, &r, 1);
    fill(b, O, &r, 1);
    fill(g, B * O, &r, 1);
    linear_backward(dx, dW, db, g, x, W, B, I, O);
    double *ps[3] = {x, W, b}, *gs[3] = {dx, dW, db};
    int ns[3] = {B * I, O * I, O};
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < ns[q]; i++) {
            double old = ps[q][i], lp = 0, lm = 0;
            ps[q][i] = old + FD_H;
            linear_forward(y, x, W, b, B, I, O);
            for (int j = 0; j < B * O; j++) lp += y[j] * g[j];
            ps[q][i] = old - FD_H;
            linear_forward(y, x, W, b, B, I, O);
            for (int j = 0; j < B * O; j++) lm += y[j] * g[j];
            ps[q][i] = old;
            check_close(gs[q][i], (lp - lm) / (2 * FD_H), "linear", i);
        }
}

/* ---- the whole network: REINFORCE loss with fixed actions ---------------- */
static double net_loss(placer_net *net, placer_acts *acts, const double *feat, int T, int B, int *act,
                       const double *w, double beta) {
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_GIVEN, NULL, act, NULL), PL_OK);
    return placer_net_policy_loss(acts, w, beta, 1.0 / B, NULL);
}

static void check_whole_network(double clip, double pipe) {
    enum { F = 6, D = 3, T = 5, B = 4 };
    placer_net_config cfg = {F, D, 4, 5, 3, 2, 0.7, clip, pipe};
    placer_net *net = NULL;
    cr_assert_eq(placer_net_create(&cfg, 7, &net), PL_OK);
    /* bigger output weights than the default init, so every path matters */
    pl_rng r;
    pl_rng_seed(&r, 5);
    fill(placer_net_param(net, PN_OUT_W), (int)net->size[PN_OUT_W], &r, 1.0);
    fill(placer_net_param(net, PN_DEV_EMB), (int)net->size[PN_DEV_EMB], &r, 1.0);
    placer_acts *acts = NULL;
    cr_assert_eq(placer_acts_create(net, T, B, &acts), PL_OK);
    double feat[T * F], w[B] = {0.9, -1.1, 0.4, -0.2};
    fill(feat, T * F, &r, 1.0);
    int act[B * T];
    pl_rng srng;
    pl_rng_seed(&srng, 11);
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_SAMPLE, &srng, act, NULL), PL_OK);
    placer_net_zero_grad(net);
    net_loss(net, acts, feat, T, B, act, w, 0.05);
    placer_net_backward(net, acts, feat);
    double *grad = malloc(sizeof *grad * net->n_params);
    memcpy(grad, net->grads, sizeof *grad * net->n_params);
    for (size_t i = 0; i < net->n_params; i++) {
        double old = net->params[i];
        net->params[i] = old + FD_H;
        double lp = net_loss(net, acts, feat, T, B, act, w, 0.05);
        net->params[i] = old - FD_H;
        double lm = net_loss(net, acts, feat, T, B, act, w, 0.05);
        net->params[i] = old;
        check_close(grad[i], (lp - lm) / (2 * FD_H), "param", (int)i);
    }
    free(grad);
    placer_acts_destroy(acts);
    placer_net_destroy(net);
}

Test(nn, whole_network_backward_matches_finite_differences) { check_whole_network(0.0, 0.0); }

Test(nn, whole_network_with_logit_clipping_matches_finite_differences) { check_whole_network(2.0, 0.0); }

/* the pipeline prior shifts the softmax's input; with clipping too, the
 * clip's backward must still see the clipped logits, not the shifted ones */
Test(nn, whole_network_with_the_pipeline_prior_matches_finite_differences) {
    check_whole_network(0.0, 1.5);
    check_whole_network(2.0, 1.5);
}

Test(nn, pipeline_prior_makes_the_first_policy_a_pipeline_in_unit_order) {
    enum { F = 6, D = 4, T = 16 };
    placer_net_config cfg = placer_net_default_config(F, D);
    cfg.stay = 0.0; /* uniform start but for the prior */
    cfg.pipe = 4.0;
    placer_net *net = NULL;
    cr_assert_eq(placer_net_create(&cfg, 3, &net), PL_OK);
    placer_acts *acts = NULL;
    cr_assert_eq(placer_acts_create(net, T, 1, &acts), PL_OK);
    double feat[T * F];
    pl_rng r;
    pl_rng_seed(&r, 2);
    fill(feat, T * F, &r, 1.0);
    int g[T];
    cr_assert_eq(placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, g, NULL), PL_OK);
    /* x_t D = (t + 1/2) / 4: units 0-3 on device 0, 4-7 on 1, ... */
    for (int t = 0; t < T; t++) cr_assert_eq(g[t], t / 4, "unit %d on device %d", t, g[t]);
    /* at unit 1 the prior gives device 0 logit -k (3/8 - 1/2)^2 and device 1
     * -k (11/8 - 1/2)^2: a clear preference, not a certainty */
    const double *p = placer_acts_probs(acts, 1);
    cr_assert(p[0] > 0.9 && p[0] < 0.999, "p0 = %g", p[0]);
    /* shares 3:1:0.5:0.5 on 4 devices: intervals [0, .6), [.6, .8),
     * [.8, .9), [.9, 1) of x; with the widths scaling the distance the
     * greedy stages are 10, 3, 1 and 2 units */
    const double w[D] = {3, 1, 0.5, 0.5}, bad[D] = {1, -1, 1, 1}, none[D] = {0, 0, 0, 0}, gap[D] = {1, 0, 1, 0};
    cr_assert_eq(placer_net_set_pipe_shares(net, bad), PL_ERR_INVALID);
    cr_assert_eq(placer_net_set_pipe_shares(net, none), PL_ERR_INVALID);
    /* a share 0 gives no stage: devices 0 and 2 split the units in half,
     * and the stageless devices are below both at every unit */
    cr_assert_eq(placer_net_set_pipe_shares(net, gap), PL_OK);
    cr_assert_eq(placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, g, NULL), PL_OK);
    for (int t = 0; t < T; t++) cr_assert_eq(g[t], t < T / 2 ? 0 : 2, "gap: unit %d on device %d", t, g[t]);
    for (int t = 0; t < T; t++) {
        const double *q = placer_acts_probs(acts, t);
        cr_assert(q[1] < q[0] && q[1] < q[2] && q[3] < q[0] && q[3] < q[2], "gap: unit %d", t);
    }
    cr_assert_eq(placer_net_set_pipe_shares(net, w), PL_OK);
    cr_assert_eq(placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, g, NULL), PL_OK);
    const int want[T] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 3, 3};
    for (int t = 0; t < T; t++) cr_assert_eq(g[t], want[t], "shares: unit %d on device %d", t, g[t]);
    /* without the prior the same network is near uniform */
    net->cfg.pipe = 0.0;
    cr_assert_eq(placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, g, NULL), PL_OK);
    p = placer_acts_probs(acts, 1);
    for (int d = 0; d < D; d++) cr_assert(fabs(p[d] - 0.25) < 0.05, "p%d = %g", d, p[d]);
    placer_acts_destroy(acts);
    placer_net_destroy(net);
}

/* The plain-loop products are the ones of one output at a time with four
 * partial sums per dot product (k mod 4, added (s0 + s1) + (s2 + s3)) and
 * rows of B added in k order with zero factors skipped: the blocked loops
 * must give exactly these bits, on shapes that are not multiples of 4 and
 * with zeros in the input. */
static void ref_dot_rows(double *c, const double *a, const double *W, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const double *x = a + (size_t)i * K, *w = W + (size_t)j * K;
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int k = 0;
            for (; k + 4 <= K; k += 4) {
                s0 += x[k] * w[k];
                s1 += x[k + 1] * w[k + 1];
                s2 += x[k + 2] * w[k + 2];
                s3 += x[k + 3] * w[k + 3];
            }
            for (; k < K; k++) s0 += x[k] * w[k];
            c[(size_t)i * N + j] += (s0 + s1) + (s2 + s3);
        }
}

static void ref_scaled_rows(double *c, const double *a, const double *W, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) {
            const double x = a[(size_t)i * K + k];
            if (x != 0.0)
                for (int j = 0; j < N; j++) c[(size_t)i * N + j] += x * W[(size_t)k * N + j];
        }
}

Test(nn, loop_products_are_bit_identical_to_one_output_at_a_time) {
    const int shapes[][3] = {{1, 256, 136}, {3, 7, 9}, {8, 13, 5}, {2, 4, 4}, {1, 1, 1}, {5, 18, 3}};
    int prev = nn_set_loops(1);
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
        const int B = shapes[q][0], O = shapes[q][1], I = shapes[q][2];
        double *x = malloc(sizeof(double) * (size_t)B * I), *W = malloc(sizeof(double) * (size_t)O * I);
        double *y = malloc(sizeof(double) * (size_t)B * O), *yr = calloc((size_t)B * O, sizeof(double));
        double *dy = malloc(sizeof(double) * (size_t)B * O), *dx = malloc(sizeof(double) * (size_t)B * I);
        double *dxr = calloc((size_t)B * I, sizeof(double));
        pl_rng r;
        pl_rng_seed(&r, 10 + q);
        fill(x, B * I, &r, 1.0);
        fill(W, O * I, &r, 1.0);
        fill(dy, B * O, &r, 1.0);
        for (int i = 0; i < B * O; i += 3) dy[i] = 0.0; /* skipped factors */
        linear_forward(y, x, W, NULL, B, I, O);
        ref_dot_rows(yr, x, W, B, O, I);
        cr_assert(memcmp(y, yr, sizeof(double) * (size_t)B * O) == 0, "forward %dx%dx%d differs", B, O, I);
        linear_backward(dx, NULL, NULL, dy, x, W, B, I, O);
        ref_scaled_rows(dxr, dy, W, B, I, O);
        cr_assert(memcmp(dx, dxr, sizeof(double) * (size_t)B * I) == 0, "dinp %dx%dx%d differs", B, O, I);
        free(x); free(W); free(y); free(yr); free(dy); free(dx); free(dxr);
    }
    nn_set_loops(prev);
}

/* nn_tanh (the attention's tanh) is within 3 ulp of libm's over the range
 * that matters, exact at 0 (signed), saturates to +-1, keeps NaN NaN. */
Test(nn, fast_tanh_is_within_3_ulp_of_libm) {
    pl_rng r;
    pl_rng_seed(&r, 12);
    double worst = 0;
    for (int i = 0; i < 200000; i++) {
        double u = 2.0 * pl_rng_uniform(&r) - 1.0;
        double x = i % 3 == 0 ? 25.0 * u : i % 3 == 1 ? u : ldexp(u, -(i % 60));
        double a = nn_tanh(x), b = tanh(x);
        double rel = b != 0 ? fabs(a - b) / fabs(b) : fabs(a);
        if (rel > worst) worst = rel;
    }
    cr_assert(worst <= 3 * DBL_EPSILON, "worst relative error %.3g (%.2f ulp)", worst, worst / DBL_EPSILON);
    cr_assert(nn_tanh(0.0) == 0.0 && !signbit(nn_tanh(0.0)) && signbit(nn_tanh(-0.0)));
    cr_assert_eq(nn_tanh(30.0), 1.0);
    cr_assert_eq(nn_tanh(-1e300), -1.0);
    cr_assert(isnan(nn_tanh(NAN)));
}

/* linear_backward_dw_steps is S per-step dW terms, last step first, bit for
 * bit, with the loops and with BLAS. */
Test(nn, dw_over_steps_equals_the_per_step_terms_last_step_first) {
    enum { S = 7, B = 3, I = 10, O = 12 };
    double dout[S * B * O], inp[S * B * I], dW0[O * I], a[O * I], b[O * I];
    pl_rng r;
    pl_rng_seed(&r, 8);
    fill(dout, S * B * O, &r, 1.0);
    fill(inp, S * B * I, &r, 1.0);
    fill(dW0, O * I, &r, 1.0);
    for (int i = 0; i < S * B * O; i += 5) dout[i] = 0.0;
    for (int loops = 0; loops < 2; loops++) {
        int prev = nn_set_loops(loops);
        memcpy(a, dW0, sizeof a);
        memcpy(b, dW0, sizeof b);
        for (int s = S - 1; s >= 0; s--)
            linear_backward(NULL, a, NULL, dout + s * B * O, inp + s * B * I, NULL, B, I, O);
        linear_backward_dw_steps(b, dout, inp, S, B, I, O, I);
        cr_assert(memcmp(a, b, sizeof a) == 0, "loops=%d: dW over steps differs", loops);
        nn_set_loops(prev);
    }
}

Test(nn, sampling_is_deterministic_for_a_seed_and_greedy_takes_the_mode) {
    enum { F = 6, D = 4, T = 7, B = 3 };
    placer_net_config cfg = placer_net_default_config(F, D);
    placer_net *net = NULL;
    cr_assert_eq(placer_net_create(&cfg, 9, &net), PL_OK);
    placer_acts *acts = NULL;
    cr_assert_eq(placer_acts_create(net, T, B, &acts), PL_OK);
    double feat[T * F];
    pl_rng r;
    pl_rng_seed(&r, 1);
    fill(feat, T * F, &r, 1.0);
    int a1[B * T], a2[B * T], g[T];
    pl_rng s1, s2;
    pl_rng_seed(&s1, 42);
    pl_rng_seed(&s2, 42);
    placer_net_forward(net, acts, feat, T, B, PN_SAMPLE, &s1, a1, NULL);
    placer_net_forward(net, acts, feat, T, B, PN_SAMPLE, &s2, a2, NULL);
    cr_assert_arr_eq(a1, a2, sizeof a1);
    placer_net_forward(net, acts, feat, T, 1, PN_GREEDY, NULL, g, NULL);
    for (int t = 0; t < T; t++) {
        const double *p = placer_acts_probs(acts, t);
        for (int d = 0; d < D; d++) cr_assert(p[d] <= p[g[t]]);
    }
    placer_acts_destroy(acts);
    placer_net_destroy(net);
}

/* nn_set_loops: the plain-loop products give BLAS's results up to rounding,
 * through a whole forward and backward pass. */
Test(nn, loop_products_match_blas_through_the_whole_network) {
    enum { F = 6, D = 3, T = 9, B = 5 };
    placer_net_config cfg = {F, D, 8, 12, 6, 3, 0.6, 0.0, 0.0};
    placer_net *net = NULL;
    cr_assert_eq(placer_net_create(&cfg, 21, &net), PL_OK);
    placer_acts *acts = NULL;
    cr_assert_eq(placer_acts_create(net, T, B, &acts), PL_OK);
    pl_rng r;
    pl_rng_seed(&r, 4);
    double feat[T * F], w[B] = {0.5, -1.0, 0.25, 2.0, -0.75}, lp_blas[B], lp_loop[B], dfb[T * F], dfl[T * F];
    fill(feat, T * F, &r, 1.0);
    int act[B * T];
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_SAMPLE, &r, act, lp_blas), PL_OK);
    placer_net_zero_grad(net);
    placer_net_policy_loss(acts, w, 0.03, 1.0 / B, NULL);
    placer_net_backward_input(net, acts, feat, dfb);
    double *g_blas = malloc(sizeof(double) * net->n_params);
    memcpy(g_blas, net->grads, sizeof(double) * net->n_params);
    int prev = nn_set_loops(1);
    cr_assert_eq(prev, 0);
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_GIVEN, NULL, act, lp_loop), PL_OK);
    placer_net_zero_grad(net);
    placer_net_policy_loss(acts, w, 0.03, 1.0 / B, NULL);
    placer_net_backward_input(net, acts, feat, dfl);
    cr_assert_eq(nn_set_loops(prev), 1);
    for (int b = 0; b < B; b++) cr_assert(fabs(lp_blas[b] - lp_loop[b]) <= 1e-12 * fabs(lp_blas[b]) + 1e-14);
    for (size_t i = 0; i < net->n_params; i++)
        cr_assert(fabs(g_blas[i] - net->grads[i]) <= 1e-10 * fabs(g_blas[i]) + 1e-13, "grad %zu: %.17g vs %.17g", i,
                  g_blas[i], net->grads[i]);
    for (int i = 0; i < T * F; i++) cr_assert(fabs(dfb[i] - dfl[i]) <= 1e-10 * fabs(dfb[i]) + 1e-13);
    free(g_blas);
    placer_acts_destroy(acts);
    placer_net_destroy(net);
}
