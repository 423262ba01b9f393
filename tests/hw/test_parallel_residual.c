/*
 * test_parallel_residual.c: the engine runs the parallel-residual GPT
 * (GPT-J / NeoX / PaLM block, `parallel=1`) on the CPU backend.
 *
 * The graph builds the block as y = x + attn(ln1(x)) + mlp(ln2(x)) from the
 * usual nodes: res1 = x + attn, ln2 reads x (not res1), res2 = res1 + mlp.
 * The block input x then has three consumers (ln1, res1, ln2), so its
 * gradient is the sum of three contributions, possibly computed on three
 * devices. The reference below does not use the graph: it evaluates the
 * definition directly with nodes.h's cpu_* functions over the full batch,
 * forward and backward, and gets the loss and every parameter gradient in
 * the engine's model view (param_memory.h).
 *
 * Tolerances.
 *   Engine (1 device, m = 1) against the reference: the same functions on
 *   the same inputs; the block input's gradient is a sum of three float
 *   tensors whose order may differ from the reference's, so a gradient may
 *   differ by a few roundings of its partials (2^-24 relative each).
 *   Tolerance 1e-5 * max|g|; measured 0 (bit-identical). A parallel block
 *   built as the serial one (ln2 reading res1) is off by O(max|g|) and
 *   fails; a missing contribution, too.
 *   m = 2, 4: a parameter gradient becomes a float sum of m partials
 *   (test_exec.c: 1e-6 * max|g| has a 9x margin); tolerance 1e-5 * max|g|.
 *   The loss is summed in double: 1e-9 relative.
 *   Across placements with the same m: bit-identical to the single device
 *   (test_exec.c's argument: same kernels on the same inputs, a + b ==
 *   b + a, micro-batch partials added in the same order).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "nodes.h"
#include "placement.h"

#define MAXN 64

/* The loss and gradients of the definition, in the model view. */
typedef struct {
    double loss;
    float *grads;
    int64_t n;
} ref_out;

static float *zalloc(int64_t n) {
    float *p = calloc((size_t)n, sizeof(float));
    cr_assert_not_null(p);
    return p;
}

/* Tensor k of node i's shard in a model-view buffer. */
static float *tensor(const graph *g, const int64_t *off, float *view, int i, int k) {
    hw_param_map pl;
    hw_node_param_map(g, i, &pl);
    cr_assert_lt(k, pl.n);
    return view + off[i] + pl.off[k];
}

/* y = x + attn(ln1(x)) + mlp(ln2(x)) for every block, then ln_f, head and
 * the mean token loss, forward and backward with the full batch. Node
 * indices only locate each block's parameters (1 + 6 l: ln1, attn, -, ln2,
 * mlp, -). */
static void reference(const graph *g, const float *params, const int *tok, const int *tgt, ref_out *r) {
    const gpt_config *c = &g->cfg;
    const int B = c->batch, T = c->seq_len, C = c->d_model, NH = c->n_heads, L = c->n_layers, V = c->vocab;
    const int Vp = hw_padded_vocab(V), N = B * T;
    const int64_t NC = (int64_t)N * C;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    cr_assert_not_null(off);
    r->n = hw_model_param_offsets(g, off);
    r->grads = zalloc(r->n);
    float *P = (float *)params, *G = r->grads;

    /* activations per block: x (input), a = ln1(x), at = attn(a), h = ln2(x),
     * mo = mlp(h), and what each backward needs */
    float *x = zalloc((int64_t)(L + 1) * NC);
    float *a = zalloc(L * NC), *h = zalloc(L * NC), *at = zalloc(NC), *mo = zalloc(NC);
    float *m1 = zalloc((int64_t)L * N), *r1 = zalloc((int64_t)L * N), *m2 = zalloc((int64_t)L * N),
          *r2 = zalloc((int64_t)L * N);
    float *qkvr = zalloc(L * 3 * NC), *att = zalloc((int64_t)L * B * NH * T * T), *yat = zalloc(L * NC);
    float *mh = zalloc(L * 4 * NC), *mg = zalloc(L * 4 * NC);
    float *scratch = zalloc(8 * NC + (int64_t)B * NH * T * T);
    float *xf = zalloc(NC), *mf = zalloc(N), *rf = zalloc(N);
    float *logits = zalloc((int64_t)N * Vp), *losses = zalloc(N);

    cpu_embedding_forward(x, tok, tensor(g, off, P, 0, 0), tensor(g, off, P, 0, 1), B, T, C);
    for (int l = 0; l < L; l++) {
        const int b = 1 + 6 * l;
        float *xl = x + l * NC, *xn = x + (l + 1) * NC;
        cpu_layernorm_forward(a + l * NC, m1 + l * N, r1 + l * N, xl, tensor(g, off, P, b, 0),
                              tensor(g, off, P, b, 1), N, C);
        cpu_attention_forward(at, qkvr + l * 3 * NC, att + (int64_t)l * B * NH * T * T, yat + l * NC, scratch,
                              a + l * NC, tensor(g, off, P, b + 1, 0), tensor(g, off, P, b + 1, 1),
                              tensor(g, off, P, b + 1, 2), tensor(g, off, P, b + 1, 3), B, T, C, NH);
        cpu_layernorm_forward(h + l * NC, m2 + l * N, r2 + l * N, xl, tensor(g, off, P, b + 3, 0),
                              tensor(g, off, P, b + 3, 1), N, C);
        cpu_mlp_forward(mo, mh + l * 4 * NC, mg + l * 4 * NC, h + l * NC, tensor(g, off, P, b + 4, 0),
                        tensor(g, off, P, b + 4, 1), tensor(g, off, P, b + 4, 2), tensor(g, off, P, b + 4, 3), N,
                        C);
        for (int64_t i = 0; i < NC; i++) xn[i] = xl[i] + at[i] + mo[i];
    }
    const int lnf = 1 + 6 * L;
    cpu_layernorm_forward(xf, mf, rf, x + L * NC, tensor(g, off, P, lnf, 0), tensor(g, off, P, lnf, 1), N, C);
    cpu_head_forward(logits, xf, tensor(g, off, P, lnf + 1, 0), N, C, V, Vp);
    double loss_sum = 0;
    cpu_loss_forward(losses, logits, &loss_sum, logits, tgt, 1.0f / (float)N, N, V, Vp);
    r->loss = loss_sum / N;

    /* backward: dlogits are in logits now */
    float *dxf = zalloc(NC), *dx = zalloc(NC), *dh = zalloc(NC), *da = zalloc(NC);
    cpu_head_backward(dxf, tensor(g, off, G, lnf + 1, 0), logits, xf, tensor(g, off, P, lnf + 1, 0), N, C, V, Vp,
                      0);
    cpu_layernorm_backward(dx, tensor(g, off, G, lnf, 0), tensor(g, off, G, lnf, 1), dxf, x + L * NC,
                           tensor(g, off, P, lnf, 0), mf, rf, N, C, 0);
    for (int l = L - 1; l >= 0; l--) {
        const int b = 1 + 6 * l;
        float *xl = x + l * NC;
        /* dy = dx flows to x unchanged, to the MLP and to the attention */
        cpu_mlp_backward(dh, tensor(g, off, G, b + 4, 0), tensor(g, off, G, b + 4, 1), tensor(g, off, G, b + 4, 2),
                         tensor(g, off, G, b + 4, 3), scratch, dx, h + l * NC, mh + l * 4 * NC, mg + l * 4 * NC,
                         tensor(g, off, P, b + 4, 0), tensor(g, off, P, b + 4, 2), N, C, 0);
        cpu_attention_backward(da, tensor(g, off, G, b + 1, 0), tensor(g, off, G, b + 1, 1),
                               tensor(g, off, G, b + 1, 2), tensor(g, off, G, b + 1, 3), scratch, dx, a + l * NC,
                               qkvr + l * 3 * NC, att + (int64_t)l * B * NH * T * T, yat + l * NC,
                               tensor(g, off, P, b + 1, 0), tensor(g, off, P, b + 1, 2), B, T, C, NH, 0);
        /* dx += ln2'(dh) + ln1'(da), into the same buffer (acc = 1) */
        cpu_layernorm_backward(dx, tensor(g, off, G, b + 3, 0), tensor(g, off, G, b + 3, 1), dh, xl,
                               tensor(g, off, P, b + 3, 0), m2 + l * N, r2 + l * N, N, C, 1);
        cpu_layernorm_backward(dx, tensor(g, off, G, b, 0), tensor(g, off, G, b, 1), da, xl, tensor(g, off, P, b, 0),
                               m1 + l * N, r1 + l * N, N, C, 1);
    }
    cpu_embedding_backward(tensor(g, off, G, 0, 0), tensor(g, off, G, 0, 1), dx, tok, B, T, C);

    free(dxf); free(dx); free(dh); free(da);
    free(x); free(a); free(h); free(at); free(mo); free(m1); free(r1); free(m2); free(r2);
    free(qkvr); free(att); free(yat); free(mh); free(mg); free(scratch); free(xf); free(mf); free(rf);
    free(logits); free(losses); free(off);
}

static void reference_for(const graph *g, ref_out *r) {
    const int n = g->cfg.batch * g->cfg.seq_len;
    int *tok = malloc(sizeof(int) * (size_t)n), *tgt = malloc(sizeof(int) * (size_t)n);
    hw_make_batch(&g->cfg, 99, tok, tgt); /* helpers.h's run_one_step batch */
    float *params = zalloc(hw_model_param_offsets(g, NULL));
    hw_params_init(g, 1234, params); /* and its seed */
    reference(g, params, tok, tgt, r);
    free(params);
    free(tok);
    free(tgt);
}

static float max_abs(const float *v, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(v[i]));
    return m;
}

/* Largest |a - b| over the gradients, reported with its index. */
static float max_diff(const float *a, const float *b, int64_t n, int64_t *at) {
    float m = 0;
    *at = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > m) m = fabsf(a[i] - b[i]), *at = i;
    return m;
}

static void expect_near_reference(const ref_out *ref, const step_out *s, const char *what) {
    cr_assert_eq(s->n, ref->n);
    const float gmax = max_abs(ref->grads, ref->n);
    int64_t at;
    const float d = max_diff(ref->grads, s->grads, s->n, &at);
    cr_expect(fabs(s->loss - ref->loss) <= 1e-9 * fabs(ref->loss), "%s: loss %.12g vs the definition's %.12g", what,
              s->loss, ref->loss);
    cr_expect(d <= 1e-5f * gmax, "%s: gradient %lld is %g off the definition's (max |g| %g)", what, (long long)at,
              (double)d, (double)gmax);
}

static int count_diff(const float *a, const float *b, int64_t n) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return k;
}

Test(parallel_residual, one_device_matches_the_definition_and_not_the_serial_block) {
    graph *g = tiny_graph("tiny,parallel=1");
    ref_out ref;
    reference_for(g, &ref);
    cr_assert_gt(max_abs(ref.grads, ref.n), 0.0f);
    hw_engine *e = cpu_engine(1, HW_ISSUE_AUTO);
    int pl[MAXN] = {0};
    step_out s = {0};
    cr_assert_eq(run_one_step(e, g, pl, 1, SCHED_GPIPE, NULL, &s), PL_OK);
    expect_near_reference(&ref, &s, "1 device m=1");
    int64_t at;
    const float d_par = max_diff(ref.grads, s.grads, s.n, &at);

    /* the serial block differs from the definition: the check can fail */
    graph *gs = tiny_graph("tiny");
    step_out ser = {0};
    cr_assert_eq(run_one_step(e, gs, pl, 1, SCHED_GPIPE, NULL, &ser), PL_OK);
    const float d_ser = max_diff(ref.grads, ser.grads, ser.n, &at);
    cr_expect(d_ser > 1e-2f * max_abs(ref.grads, ref.n), "the serial block's gradients are only %g off (parallel %g)",
              (double)d_ser, (double)d_par);
    cr_log_info("parallel=1 vs the definition: max gradient diff %g, serial block %g, max |g| %g", (double)d_par,
                (double)d_ser, (double)max_abs(ref.grads, ref.n));

    step_out_free(&ser);
    graph_destroy(gs);
    step_out_free(&s);
    free(ref.grads);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* Placements that split a block's branches: pl[] over tiny (2 layers, 16
 * nodes: emb, 2 x (ln1 attn res1 ln2 mlp res2), ln_f, head, loss). */
static void split_placements(int nd, int n, int *pl) {
    for (int i = 0; i < n; i++) pl[i] = 0;
    for (int l = 0; l < 2; l++) {
        int b = 1 + 6 * l;
        if (nd == 2) {
            /* the attention branch on 1, the MLP branch and the stream on 0 */
            pl[b] = 1, pl[b + 1] = 1;
        } else {
            /* stream on 0, attention branch on 1, MLP branch on 2: the
             * block input's three gradient contributions come from three
             * devices */
            pl[b] = 1, pl[b + 1] = 1, pl[b + 3] = 2, pl[b + 4] = 2;
        }
    }
    if (nd == 2) pl[n - 2] = 1, pl[n - 1] = 1; /* head and loss on 1 too */
}

Test(parallel_residual, branches_on_different_devices_match_one_device_bit_for_bit, .timeout = 120) {
    graph *g = tiny_graph("tiny,parallel=1");
    cr_assert_lt(g->n_nodes, MAXN);
    ref_out ref;
    reference_for(g, &ref);
    hw_engine *e1 = cpu_engine(1, HW_ISSUE_AUTO);
    int zero[MAXN] = {0};
    int tested = 0;
    for (int m = 1; m <= 4; m *= 2) {
        step_out one = {0};
        cr_assert_eq(run_one_step(e1, g, zero, m, SCHED_GPIPE, NULL, &one), PL_OK);
        char what[320];
        snprintf(what, sizeof what, "1 device m=%d", m);
        expect_near_reference(&ref, &one, what);
        for (int nd = 2; nd <= 3; nd++)
            for (int issue = HW_ISSUE_SINGLE; issue <= HW_ISSUE_THREADS; issue++) {
                hw_engine *e = cpu_engine(nd, (hw_issue_mode)issue);
                int pl[MAXN];
                split_placements(nd, g->n_nodes, pl);
                char pls[256];
                placement_format(pl, g->n_nodes, pls, sizeof pls);
                for (int o = 0; o < 2; o++) {
                    const schedule_order ord = o ? SCHED_1F1B : SCHED_GPIPE;
                    step_out s = {0};
                    pl_status st = run_one_step(e, g, pl, m, ord, NULL, &s);
                    cr_assert_eq(st, PL_OK, "placement %s m=%d: %s", pls, m, pl_status_str(st));
                    snprintf(what, sizeof what, "placement %s m=%d %s %s", pls, m, o ? "1f1b" : "gpipe",
                             issue == HW_ISSUE_THREADS ? "threads" : "one thread");
                    cr_expect(ieee_ulp_eq(dbl, s.loss, one.loss, 0), "%s: loss %.12g vs %.12g", what, s.loss,
                              one.loss);
                    const int dg = count_diff(one.grads, s.grads, s.n), dp = count_diff(one.params, s.params, s.n);
                    cr_expect_eq(dg, 0, "%s: %d gradients differ from the single device", what, dg);
                    cr_expect_eq(dp, 0, "%s: %d parameters differ from the single device", what, dp);
                    step_out_free(&s);
                    tested++;
                }
                hw_engine_destroy(e);
            }
        step_out_free(&one);
    }
    cr_expect_eq(tested, 3 * 2 * 2 * 2);
    free(ref.grads);
    hw_engine_destroy(e1);
    graph_destroy(g);
}

Test(parallel_residual, other_extensions_stay_refused) {
    hw_engine *e = cpu_engine(1, HW_ISSUE_AUTO);
    graph *g = tiny_graph("tiny,parallel=1,mlp=swiglu");
    int pl[MAXN] = {0};
    char msg[256] = "";
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(1, SCHED_GPIPE);
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_UNSUPPORTED);
    cr_assert_null(p);
    cr_assert(strstr(msg, "original GPT") != NULL, "%s", msg);
    graph_destroy(g);
    hw_engine_destroy(e);
}
