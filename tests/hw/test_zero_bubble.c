/*
 * test_zero_bubble.c: the engine's zero-bubble orders (zb-h1, zb-h2: the
 * backward split into B, the input gradient, and W, the weight gradient,
 * run later as core/schedule.c's order says) give 1F1B's loss, gradients
 * and updated parameters bit for bit in fp32 on the CPU backend, over
 * contiguous and scattered placements and m = 2, 4, 8; the split kernels
 * (nodes.h) give the whole backward's bits; the compiled order has each
 * W after its B, with W deferred where the order defers it.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "nodes.h"
#include "placement.h"
#include "util.h"

static int n_diff(const float *a, const float *b, int64_t n) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return k;
}

static void same_as_1f1b(hw_engine *e, const graph *g, const int *pl, int m, schedule_order o) {
    char pls[256];
    placement_format(pl, g->n_nodes, pls, sizeof pls);
    step_out ref = {0}, s = {0};
    cr_assert_eq(run_one_step(e, g, pl, m, SCHED_1F1B, NULL, &ref), PL_OK);
    pl_status st = run_one_step(e, g, pl, m, o, NULL, &s);
    cr_assert_eq(st, PL_OK, "%s placement %s m=%d: %s", schedule_order_name(o), pls, m, pl_status_str(st));
    cr_assert(ieee_ulp_eq(dbl, s.loss, ref.loss, 0), "%s %s m=%d: loss %.17g vs 1f1b %.17g", schedule_order_name(o),
              pls, m, s.loss, ref.loss);
    const int dg = n_diff(ref.grads, s.grads, s.n), dp = n_diff(ref.params, s.params, s.n);
    cr_assert_eq(dg, 0, "%s %s m=%d: %d of %lld gradients differ from 1f1b", schedule_order_name(o), pls, m, dg,
                 (long long)s.n);
    cr_assert_eq(dp, 0, "%s %s m=%d: %d parameters differ from 1f1b", schedule_order_name(o), pls, m, dp);
    step_out_free(&ref);
    step_out_free(&s);
}

/* contiguous: 2, 3 and 4 stages of the 16-node tiny GPT (batch 8); scattered:
 * random device per node (some need the compiler's early issue) */
Test(zero_bubble, zb_h1_and_zb_h2_match_1f1b_bit_for_bit, .timeout = 600) {
    graph *g = tiny_graph("tiny,batch=8");
    hw_engine *e = cpu_engine(4, HW_ISSUE_AUTO);
    const int n = g->n_nodes;
    int pl[64];
    int runs = 0;
    static const int cuts[3][3] = {{8, 16, 16}, {5, 11, 16}, {3, 7, 12}};
    for (int k = 0; k < 3; k++) {
        for (int i = 0, s = 0; i < n; i++) {
            while (s < 3 && i >= cuts[k][s]) s++;
            pl[i] = s;
        }
        for (int m = 2; m <= 8; m *= 2) {
            same_as_1f1b(e, g, pl, m, SCHED_ZB_H1);
            same_as_1f1b(e, g, pl, m, SCHED_ZB_H2);
            runs += 2;
        }
    }
    pl_rng r;
    pl_rng_seed(&r, 28);
    for (int t = 0; t < 6; t++) {
        for (int i = 0; i < n; i++) pl[i] = pl_rng_int(&r, 2 + t % 3);
        for (int m = 2; m <= 8; m *= 2) {
            same_as_1f1b(e, g, pl, m, SCHED_ZB_H1);
            runs++;
        }
    }
    cr_assert_eq(runs, 36);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* The compiled order of a 4-stage zb-h1 run (m = 4): every node's W comes
 * after its B, the last stage defers W (its first W after its last
 * forward), and W calls are as many as B calls of the split nodes. */
Test(zero_bubble, the_order_defers_w) {
    graph *g = tiny_graph("tiny,batch=8");
    hw_engine *e = cpu_engine(4, HW_ISSUE_AUTO);
    int pl[64];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i * 4 / g->n_nodes;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(4, SCHED_ZB_H1);
    o.seed = 1;
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    char msg[256];
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    hw_program_set_trace(p, 1);
    int tok[8 * 64], tgt[8 * 64];
    hw_make_batch(&g->cfg, 5, tok, tgt);
    cr_assert_eq(hw_program_set_batch(p, tok, tgt, msg, sizeof msg), PL_OK, "%s", msg);
    hw_step_result res;
    cr_assert_eq(hw_program_step(p, &res, msg, sizeof msg), PL_OK, "%s", msg);
    int n_ev = 0;
    const hw_trace_event *ev = hw_program_trace(p, &n_ev);
    cr_assert_gt(n_ev, 0);
    int n_b = 0, n_w = 0, splits = 0, nonloss = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        splits += hw_bwd_splits(g->nodes[i].kind);
        nonloss += g->nodes[i].kind != OP_LOSS;
    }
    /* per device, B and W in the compute stream's order: each W after its B */
    for (int k = 0; k < n_ev; k++) {
        n_b += ev[k].kind == HW_EV_BWD;
        if (ev[k].kind != HW_EV_WGRAD) continue;
        n_w++;
        int seen_b = 0;
        for (int q = 0; q < k; q++)
            seen_b |= ev[q].kind == HW_EV_BWD && ev[q].node == ev[k].node && ev[q].micro_batch == ev[k].micro_batch;
        cr_assert(seen_b, "W of node %d mb %d before its B", ev[k].node, ev[k].micro_batch);
    }
    cr_assert_eq(n_b, 4 * nonloss, "%d B calls, expected %d", n_b, 4 * nonloss);
    cr_assert_eq(n_w, 4 * splits, "%d W calls, expected %d", n_w, 4 * splits);
    /* the last stage (rank 3 of 4) keeps 3 W pending: its first W comes
     * after its last forward */
    const int last_dev = pl[g->n_nodes - 1];
    int last_f = -1, first_w = -1;
    for (int k = 0; k < n_ev; k++) {
        if (ev[k].device != last_dev) continue;
        if (ev[k].kind == HW_EV_FWD) last_f = k;
        if (ev[k].kind == HW_EV_WGRAD && first_w < 0) first_w = k;
    }
    cr_assert(first_w > last_f, "the last stage's first W (event %d) runs before its last forward (%d)", first_w, last_f);
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* The split kernels against the whole backward, bit for bit: attention
 * and MLP (B then W equals the whole call, gradients accumulated twice). */
Test(zero_bubble, split_kernels_match_the_whole_backward) {
    const int B = 2, T = 8, C = 16, NH = 2, N = B * T;
    pl_rng r;
    pl_rng_seed(&r, 7);
#define RND(a, k)                                                            \
    float *a = malloc(sizeof(float) * (size_t)(k));                          \
    for (int64_t q = 0; q < (k); q++) a[q] = (float)(pl_rng_uniform(&r) - 0.5)
    RND(inp, N * C); RND(wqkv, 3 * C * C); RND(bqkv, 3 * C); RND(wproj, C * C); RND(bproj, C);
    RND(dout, N * C); RND(wfc, 4 * C * C); RND(bfc, 4 * C); RND(wp2, 4 * C * C); RND(bp2, C);
    float *out = malloc(sizeof(float) * N * C), *qkvr = malloc(sizeof(float) * 3 * N * C);
    float *att = malloc(sizeof(float) * B * NH * T * T), *y = malloc(sizeof(float) * N * C);
    float *scr = calloc((size_t)(10 * N * C + B * NH * T * T), sizeof(float));
    cpu_attention_forward(out, qkvr, att, y, scr, inp, wqkv, bqkv, wproj, bproj, B, T, C, NH);
    float *g1 = calloc(4 * C * C + 4 * C, sizeof(float)), *g2 = calloc(4 * C * C + 4 * C, sizeof(float));
    float *d1 = malloc(sizeof(float) * N * C), *d2 = malloc(sizeof(float) * N * C), *dq = malloc(sizeof(float) * 4 * N * C);
    cpu_attention_backward(d1, g1, g1 + 3 * C * C, g1 + 3 * C * C + 3 * C, g1 + 4 * C * C + 3 * C, scr, dout, inp, qkvr,
                           att, y, wqkv, wproj, B, T, C, NH, 0);
    cpu_attention_backward_input(d2, dq, scr, dout, qkvr, att, wqkv, wproj, B, T, C, NH, 0);
    cpu_attention_backward_weight(g2, g2 + 3 * C * C, g2 + 3 * C * C + 3 * C, g2 + 4 * C * C + 3 * C, dout, inp, y, dq, N, C);
    cr_assert_eq(n_diff(d1, d2, N * C), 0, "attention: input gradients differ");
    cr_assert_eq(n_diff(g1, g2, 4 * C * C + 4 * C), 0, "attention: weight gradients differ");
    /* MLP: h (N, 4C), g (N, 4C) */
    float *h = malloc(sizeof(float) * 4 * N * C), *gg = malloc(sizeof(float) * 4 * N * C);
    cpu_mlp_forward(out, h, gg, inp, wfc, bfc, wp2, bp2, N, C);
    float *m1 = calloc(8 * C * C + 5 * C, sizeof(float)), *m2 = calloc(8 * C * C + 5 * C, sizeof(float));
    cpu_mlp_backward(d1, m1, m1 + 4 * C * C, m1 + 4 * C * C + 4 * C, m1 + 8 * C * C + 4 * C, scr, dout, inp, h, gg, wfc,
                     wp2, N, C, 0);
    cpu_mlp_backward_input(d2, dq, dout, h, wfc, wp2, N, C, 0);
    cpu_mlp_backward_weight(m2, m2 + 4 * C * C, m2 + 4 * C * C + 4 * C, m2 + 8 * C * C + 4 * C, dout, inp, gg, dq, N, C);
    cr_assert_eq(n_diff(d1, d2, N * C), 0, "mlp: input gradients differ");
    cr_assert_eq(n_diff(m1, m2, 8 * C * C + 5 * C), 0, "mlp: weight gradients differ");
    free(inp); free(wqkv); free(bqkv); free(wproj); free(bproj); free(dout); free(wfc); free(bfc); free(wp2);
    free(bp2); free(out); free(qkvr); free(att); free(y); free(scr); free(g1); free(g2); free(d1); free(d2); free(dq);
    free(h); free(gg); free(m1); free(m2);
}

/* Where the split does not run: bf16, or an order the engine lacks. */
Test(zero_bubble, unsupported_engine_modes_are_refused) {
    graph *g = tiny_graph("tiny,batch=8");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[64];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i * 2 / g->n_nodes;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(4, SCHED_DUALPIPEV);
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    char msg[256];
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(msg, "zb-h1"), "%s", msg);
    hw_engine_destroy(e);
    graph_destroy(g);
}
