/*
 * test_layout_ops.c: layout_sim_ops, one pipeline replica's ops per rank
 * (sim/layout/layout_ops.c), on the ideal pipeline of the closed forms
 * (uniform stages, free sends, no embedding or head): every rank runs one F
 * and one B per micro-batch and chunk, the ops of a rank never overlap, and
 * the idle time they leave over the pipeline's span, per unit of compute,
 * is the closed form (p - 1) / (v m) of 1F1B and the interleaved order.
 * The split orders add one W per B. A run without tracing has no ops.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "cluster_file.h"
#include "layout_sim.h"

typedef struct {
    double idle_over_busy;
    int n_f, n_b, n_w, overlaps, ranks;
} ops_summary;

/* Simulate gpt12 with `layers` layers under layout text on dgx-h100 with
 * free sends and no embedding or head cost; summarize its ops. */
static ops_summary run_ideal(const char *text, int layers) {
    gpt_config g;
    char msg[512] = "", preset[64];
    snprintf(preset, sizeof preset, "gpt12,layers=%d", layers);
    cr_assert_eq(gpt_config_parse(preset, &g, msg, sizeof msg), PL_OK, "%s", msg);
    layout l;
    cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s", msg);
    static cluster c;
    cr_assert_eq(cluster_load("dgx-h100", NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create(&g, &l, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.p2p_scale = 0;
    p.emb_head_scale = 0;
    layout_result res;
    layout_op *ops = NULL;
    int n = 0;
    cr_assert_eq(layout_sim_run(s, &p, 0, &res, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_ops(s, &ops, &n), PL_ERR_INVALID, "a run without tracing has no ops");
    cr_assert_null(ops);
    cr_assert_eq(layout_sim_run(s, &p, 1, &res, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_ops(s, &ops, &n), PL_OK);
    ops_summary m = {0};
    m.ranks = l.pp;
    double first = 1e300, last = 0, busy = 0, prev_end = -1;
    int prev_rank = -1;
    for (int i = 0; i < n; i++) {
        const layout_op *o = &ops[i];
        cr_assert(o->rank >= 0 && o->rank < l.pp);
        cr_assert(o->t1_us >= o->t0_us);
        if (i) cr_assert(o->rank > ops[i - 1].rank || o->t0_us >= ops[i - 1].t0_us, "sorted by rank, then start");
        if (o->kind > LAYOUT_OP_W) continue;
        if (o->rank == prev_rank && o->t0_us < prev_end - 1e-6) m.overlaps++;
        prev_rank = o->rank;
        prev_end = o->t1_us;
        m.n_f += o->kind == LAYOUT_OP_F;
        m.n_b += o->kind == LAYOUT_OP_B;
        m.n_w += o->kind == LAYOUT_OP_W;
        busy += o->t1_us - o->t0_us;
        if (o->t0_us < first) first = o->t0_us;
        if (o->t1_us > last) last = o->t1_us;
    }
    m.idle_over_busy = (l.pp * (last - first) - busy) / busy;
    free(ops);
    layout_sim_destroy(s);
    return m;
}

Test(layout_ops, one_f_and_one_b_per_micro_batch_and_the_1f1b_closed_form_bubble) {
    const int p = 4, m = 8;
    ops_summary s = run_ideal("tp=1,pp=4,dp=1,mbs=1,gbs=8", 8);
    cr_assert_eq(s.n_f, p * m);
    cr_assert_eq(s.n_b, p * m);
    cr_assert_eq(s.n_w, 0);
    cr_assert_eq(s.overlaps, 0);
    const double closed = (double)(p - 1) / m;
    cr_assert(fabs(s.idle_over_busy - closed) <= 1e-6 * closed, "idle/busy %.9f, closed form %.9f", s.idle_over_busy,
              closed);
}

Test(layout_ops, interleaved_bubble_is_the_closed_form_over_v) {
    const int p = 4, m = 8, v = 2;
    ops_summary s = run_ideal("tp=1,pp=4,vp=2,dp=1,mbs=1,gbs=8", 16);
    cr_assert_eq(s.n_f, p * m * v);
    cr_assert_eq(s.n_b, p * m * v);
    cr_assert_eq(s.overlaps, 0);
    const double closed = (double)(p - 1) / (v * m);
    cr_assert(fabs(s.idle_over_busy - closed) <= 1e-6 * closed, "idle/busy %.9f, closed form %.9f", s.idle_over_busy,
              closed);
}

Test(layout_ops, split_orders_list_a_w_for_every_b) {
    ops_summary s = run_ideal("tp=1,pp=4,dp=1,mbs=1,gbs=8,sched=zb-h1", 8);
    cr_assert_eq(s.n_b, 4 * 8);
    cr_assert_eq(s.n_w, s.n_b);
    cr_assert_eq(s.overlaps, 0);
}

Test(layout_ops, null_arguments_are_invalid) {
    layout_op *ops = (layout_op *)1;
    int n = 5;
    cr_assert_eq(layout_sim_ops(NULL, &ops, &n), PL_ERR_INVALID);
    cr_assert_null(ops);
    cr_assert_eq(n, 0);
    cr_assert_eq(layout_sim_ops(NULL, NULL, &n), PL_ERR_INVALID);
    cr_assert_str_eq(layout_op_kind_name(LAYOUT_OP_W), "W");
}
