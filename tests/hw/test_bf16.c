/*
 * test_bf16.c: the bf16 mixed mode (hw.h) on the CPU backend, which
 * emulates it by rounding the tensors the GPU keeps in bf16 (nodes.h). The
 * GPU suite (tests/gpu) compares the CUDA kernels against this reference.
 *
 * Tolerances, and why. bf16 keeps 8 significant bits: one rounding moves a
 * value by at most 2^-8 = 3.9e-3 relative (about 1.1e-3 rms, normwise).
 * A gradient passes through ~10-20 rounded tensors on its way back through
 * the tiny GPT, and independent roundings add like a random walk, so the
 * bf16 step's gradients differ from fp32 by ~sqrt(15) * 1.1e-3 ~ 4e-3
 * normwise per node, more where a node's gradient is small against what
 * flows through it. We allow 5e-2 per node (about 10x) and 2e-3 on the loss
 * (its logits are rounded once: ~1e-3 relative on each logit, which averages
 * out in the log-sum-exp). And the test checks that bf16 really rounds: the
 * two steps must differ by more than 1e-5 (fp32 against fp32 agrees to
 * ~1e-7 here, so a mode that silently ran fp32 fails).
 */
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "nodes.h"
#include "util.h"

#define MAXN 64

static hw_engine *engine_prec(int n, hw_precision prec) {
    hw_engine_opts o = {0};
    o.backend = HW_BACKEND_CPU;
    o.n_devices = n;
    o.precision = prec;
    hw_engine *e = NULL;
    char msg[256];
    cr_assert_eq(hw_engine_create(&o, &e, msg, sizeof msg), PL_OK, "%s", msg);
    return e;
}

static double relerr(const float *a, const float *ref, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

Test(bf16, rounding_is_nearest_even) {
    cr_assert_eq(hw_bf16_round(1.0f), 1.0f);
    cr_assert_eq(hw_bf16_round(-2.5f), -2.5f);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1) */
    cr_assert_eq(hw_bf16_round(1.0f + 0x1p-8f), 1.0f);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6 */
    cr_assert_eq(hw_bf16_round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
    /* just above the half rounds up */
    cr_assert_eq(hw_bf16_round(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
    cr_assert(isinf(hw_bf16_round(INFINITY)));
    cr_assert(isnan(hw_bf16_round(NAN)));
    cr_assert_eq(hw_bf16_bits(1.0f), 0x3f80);
    cr_assert_eq(hw_bf16_to_float(0xc020), -2.5f);
    /* the largest float rounds to infinity in bf16 (it is above bf16's max + half an ulp) */
    cr_assert(isinf(hw_bf16_round(3.4028235e38f)));
    /* every rounding error is within half an ulp: 2^-8 relative at worst */
    pl_rng r;
    pl_rng_seed(&r, 5);
    for (int i = 0; i < 10000; i++) {
        float x = (float)(pl_rng_normal(&r) * 100.0);
        float y = hw_bf16_round(x);
        cr_assert(fabsf(y - x) <= fabsf(x) * 0x1p-8f, "%g -> %g", x, y);
        cr_assert_eq(hw_bf16_round(y), y);
    }
}

Test(bf16, precision_names_parse) {
    hw_precision p = HW_PREC_DEFAULT;
    char msg[128];
    cr_assert_eq(hw_precision_parse("bf16", &p, msg, sizeof msg), PL_OK);
    cr_assert_eq(p, HW_PREC_BF16);
    cr_assert_eq(hw_precision_parse("tf32", &p, msg, sizeof msg), PL_OK);
    cr_assert_eq(p, HW_PREC_TF32);
    cr_assert_eq(hw_precision_parse("fp16", &p, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "bf16") != NULL, "%s", msg);
    cr_assert_eq(hw_precision_parse(NULL, &p, msg, sizeof msg), PL_ERR_INVALID);
    hw_engine *e = engine_prec(1, HW_PREC_BF16);
    cr_assert_eq(hw_engine_precision(e), HW_PREC_BF16);
    hw_engine_destroy(e);
    e = cpu_engine(1, HW_ISSUE_AUTO);
    cr_assert_eq(hw_engine_precision(e), HW_PREC_FP32);
    hw_engine_destroy(e);
}

Test(bf16, step_tracks_fp32_within_rounding) {
    graph *g = tiny_graph("tiny");
    hw_engine *e32 = engine_prec(1, HW_PREC_FP32), *e16 = engine_prec(1, HW_PREC_BF16);
    int pl[MAXN] = {0};
    step_out a = {0}, b = {0};
    cr_assert_eq(run_one_step(e32, g, pl, 1, SCHED_GPIPE, NULL, &a), PL_OK);
    cr_assert_eq(run_one_step(e16, g, pl, 1, SCHED_GPIPE, NULL, &b), PL_OK);
    double el = fabs(b.loss - a.loss) / a.loss;
    cr_expect(el <= 2e-3, "loss %.6f (bf16) vs %.6f (fp32): %.2e", b.loss, a.loss, el);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    hw_model_param_offsets(g, off);
    double worst = 0.0;
    for (int i = 0; i < g->n_nodes; i++) {
        int64_t n = off[i + 1] - off[i];
        if (n == 0) continue;
        double e = relerr(b.grads + off[i], a.grads + off[i], n);
        cr_expect(e <= 5e-2, "gradients of %s: %.2e", g->nodes[i].name, e);
        if (e > worst) worst = e;
    }
    cr_expect(worst > 1e-5, "bf16 gradients equal fp32's to %.1e: nothing was rounded", worst);
    cr_log_info("bf16 step vs fp32: loss %.2e, worst node gradient %.2e", el, worst);
    free(off);
    step_out_free(&a);
    step_out_free(&b);
    hw_engine_destroy(e32);
    hw_engine_destroy(e16);
    graph_destroy(g);
}

Test(bf16, placement_and_micro_batches_change_nothing) {
    /* the same rounding points on any placement: a 2-device 1F1B run with
     * two micro-batches equals the single-device one to fp32 summation order */
    graph *g = tiny_graph("tiny");
    hw_engine *e1 = engine_prec(1, HW_PREC_BF16), *e2 = engine_prec(2, HW_PREC_BF16);
    int pl[MAXN] = {0};
    step_out a = {0}, b = {0};
    cr_assert_eq(run_one_step(e1, g, pl, 2, SCHED_1F1B, NULL, &a), PL_OK);
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i % 3 == 0 ? 1 : 0;
    cr_assert_eq(run_one_step(e2, g, pl, 2, SCHED_1F1B, NULL, &b), PL_OK);
    cr_expect(fabs(a.loss - b.loss) <= 1e-9 * a.loss, "loss %.9g vs %.9g", a.loss, b.loss);
    cr_expect(relerr(b.grads, a.grads, a.n) <= 1e-6, "grads %.2e", relerr(b.grads, a.grads, a.n));
    cr_expect(relerr(b.params, a.params, a.n) <= 1e-7, "params %.2e", relerr(b.params, a.params, a.n));
    step_out_free(&a);
    step_out_free(&b);
    hw_engine_destroy(e1);
    hw_engine_destroy(e2);
    graph_destroy(g);
}

/* A seeded Markov chain over the vocabulary: each token is followed by one
 * of 4 successors (fixed per token), so the best loss is ln 4 = 1.39. */
static void markov_stream(int *s, int n, int V, uint64_t seed) {
    pl_rng r;
    pl_rng_seed(&r, seed);
    int *next = malloc(sizeof(int) * (size_t)V * 4);
    for (int i = 0; i < V * 4; i++) next[i] = pl_rng_int(&r, V);
    s[0] = 0;
    for (int i = 1; i < n; i++) s[i] = next[s[i - 1] * 4 + pl_rng_int(&r, 4)];
    free(next);
}

Test(bf16, training_curve_tracks_fp32) {
    /* 80 steps on fresh windows of one Markov stream, fp32 and bf16 from the
     * same start. The band: every 10-step mean of the bf16 curve within 3% +
     * 0.02 of fp32's, every single step within 6% + 0.05. At this learning
     * rate (1e-2) the two runs drift apart step by step as any two rounding
     * orders do (the batch-to-batch noise is ~0.1), so single steps get the
     * wider band; both must learn (the last loss well under the first). */
    graph *g = tiny_graph("tiny");
    const int B = g->cfg.batch, T = g->cfg.seq_len, V = g->cfg.vocab, steps = 80;
    int *stream = malloc(sizeof(int) * (size_t)(steps * B * T + 1));
    markov_stream(stream, steps * B * T + 1, V, 77);
    double loss[2][80];
    for (int k = 0; k < 2; k++) {
        hw_engine *e = engine_prec(1, k ? HW_PREC_BF16 : HW_PREC_FP32);
        int pl[MAXN] = {0};
        hw_program_opts o = {0};
        o.placement = pl;
        o.sched = schedule_make(1, SCHED_GPIPE);
        o.seed = 3;
        o.adamw = hw_adamw_default();
        o.adamw.lr = 1e-2f;
        hw_program *p = NULL;
        char msg[256];
        cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
        for (int s = 0; s < steps; s++) {
            const int *w = stream + (int64_t)s * B * T;
            cr_assert_eq(hw_program_set_batch(p, w, w + 1, msg, sizeof msg), PL_OK, "%s", msg);
            hw_step_result r;
            cr_assert_eq(hw_program_step(p, &r, msg, sizeof msg), PL_OK, "%s", msg);
            loss[k][s] = r.loss;
        }
        hw_program_destroy(p);
        hw_engine_destroy(e);
    }
    double worst = 0.0, worst10 = 0.0;
    for (int s = 0; s < steps; s++) {
        double d = fabs(loss[1][s] - loss[0][s]);
        cr_expect(d <= 0.06 * loss[0][s] + 0.05, "step %d: bf16 %.4f fp32 %.4f", s, loss[1][s], loss[0][s]);
        if (d > worst) worst = d;
    }
    for (int s = 0; s + 10 <= steps; s += 10) {
        double m0 = 0.0, m1 = 0.0;
        for (int k = s; k < s + 10; k++) m0 += loss[0][k] / 10, m1 += loss[1][k] / 10;
        cr_expect(fabs(m1 - m0) <= 0.03 * m0 + 0.02, "steps %d-%d: mean bf16 %.4f fp32 %.4f", s, s + 9, m1, m0);
        if (fabs(m1 - m0) > worst10) worst10 = fabs(m1 - m0);
    }
    cr_expect(loss[0][steps - 1] < 0.75 * loss[0][0], "fp32 did not learn: %.3f -> %.3f", loss[0][0], loss[0][steps - 1]);
    cr_expect(loss[1][steps - 1] < 0.75 * loss[1][0], "bf16 did not learn: %.3f -> %.3f", loss[1][0], loss[1][steps - 1]);
    cr_log_info("bf16 vs fp32 over %d steps: largest gap %.4f (10-step means %.4f); losses %.3f -> %.3f (fp32), %.3f -> %.3f (bf16)",
                steps, worst, worst10, loss[0][0], loss[0][steps - 1], loss[1][0], loss[1][steps - 1]);
    free(stream);
    graph_destroy(g);
}
