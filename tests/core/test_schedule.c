/* test_schedule.c: schedule parsing and validation, and every order of
 * schedule_rank_ops against its closed forms (step, idle time, memory). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

Test(schedule, parses_order_names) {
    schedule_order o;
    cr_assert_eq(schedule_parse_order("gpipe", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_GPIPE);
    cr_assert_eq(schedule_parse_order("1f1b", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_1F1B);
    cr_assert_eq(schedule_parse_order("interleaved", &o, NULL, 0), PL_OK);
    char msg[128];
    cr_assert_eq(schedule_parse_order("2f2b", &o, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "2f2b") && strstr(msg, "gpipe"), "%s", msg);
    cr_assert_eq(schedule_parse_order(NULL, &o, NULL, 0), PL_ERR_SCHEDULE);
}

Test(schedule, parses_micro_batch_counts) {
    int m = 0;
    cr_assert_eq(schedule_parse_micro_batches("4", &m, NULL, 0), PL_OK);
    cr_assert_eq(m, 4);
    cr_assert_eq(schedule_parse_micro_batches("0", &m, NULL, 0), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_parse_micro_batches("-2", &m, NULL, 0), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_parse_micro_batches("4x", &m, NULL, 0), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_parse_micro_batches("", &m, NULL, 0), PL_ERR_SCHEDULE);
}

Test(schedule, m_must_divide_the_batch) {
    char msg[128];
    schedule s = schedule_make(4, SCHED_1F1B);
    cr_assert_eq(schedule_validate(&s, 16, msg, sizeof msg), PL_OK);
    s.micro_batches = 3;
    cr_assert_eq(schedule_validate(&s, 16, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "does not divide"), "%s", msg);
    s.micro_batches = 32;
    cr_assert_eq(schedule_validate(&s, 16, msg, sizeof msg), PL_ERR_SCHEDULE);
}

Test(schedule, chunks_need_interleaved) {
    schedule s = {4, SCHED_1F1B, 2};
    cr_assert_eq(schedule_validate(&s, 16, NULL, 0), PL_ERR_SCHEDULE);
    s.order = SCHED_INTERLEAVED;
    cr_assert_eq(schedule_validate(&s, 16, NULL, 0), PL_OK);
    s.chunks = 0;
    cr_assert_eq(schedule_validate(&s, 16, NULL, 0), PL_ERR_SCHEDULE);
}

/* ---- the zero-bubble and DualPipeV orders against their closed forms ---- */

#include <criterion/parameterized.h>

typedef struct {
    int order, p, m;
    double F, B, W;
} zb_case;

static int zb_cases(zb_case *out, int order, int m_min_per_p) {
    static const int P[5] = {2, 3, 4, 8, 16};
    static const double C[3][3] = {{1, 1, 1}, {2, 2, 1}, {1, 2, 1}};
    int k = 0;
    for (int a = 0; a < 5; a++)
        for (int m = m_min_per_p * P[a]; m <= 64; m += P[a])
            for (int c = 0; c < 3; c++) out[k++] = (zb_case){order, P[a], m, C[c][0], C[c][1], C[c][2]};
    return k;
}

/* Run the order on the ideal pipeline; the largest idle time inside a
 * rank's own span (first start to last end: the zero-bubble papers'
 * bubble, each rank's optimizer step running after its own last W) and the
 * step's. Every rank's busy time is the whole work, peaks match the
 * order's memory rule. */
static void zb_run(const zb_case *c, double *span_idle, double *step) {
    double busy[16], first[16], last[16];
    int peak[16];
    const schedule_order o = (schedule_order)c->order;
    const schedule s = schedule_make(c->m, o);
    *step = schedule_eval_ideal(&s, c->p, c->F, c->B, c->W, busy, first, last, peak);
    cr_assert_geq(*step, 0, "%s p=%d m=%d did not run", schedule_order_name(o), c->p, c->m);
    const int v = schedule_v_chunks(o);
    *span_idle = 0;
    for (int r = 0; r < c->p; r++) {
        cr_assert_eq(busy[r], v * c->m * (c->F + c->B + c->W));
        const double idle = last[r] - first[r] - busy[r];
        if (idle > *span_idle) *span_idle = idle;
        cr_assert_eq(peak[r], schedule_peak_stash_rule(o, c->p, r, c->m), "%s p=%d m=%d rank %d: peak %d, rule %d",
                     schedule_order_name(o), c->p, c->m, r, peak[r], schedule_peak_stash_rule(o, c->p, r, c->m));
    }
}

ParameterizedTestParameters(schedule_bubble, one_f_one_b) {
    static zb_case cs[512];
    return cr_make_param_array(zb_case, cs, (size_t)zb_cases(cs, SCHED_1F1B, 1));
}
/* 1F1B: (p-1)(F+B+W) idle, the bubble (p-1)/m of the step */
ParameterizedTest(zb_case *c, schedule_bubble, one_f_one_b) {
    double idle, step;
    zb_run(c, &idle, &step);
    cr_assert_eq(idle, (c->p - 1) * (c->F + c->B + c->W));
    cr_assert_eq(step, (c->m + c->p - 1) * (c->F + c->B + c->W) + 0 * c->F);
}

ParameterizedTestParameters(schedule_bubble, zb_h1) {
    static zb_case cs[512];
    return cr_make_param_array(zb_case, cs, (size_t)zb_cases(cs, SCHED_ZB_H1, 1));
}
/* ZB-H1 (m >= p): (p-1)(F+B-W) idle, a third of 1F1B's at F = B = W */
ParameterizedTest(zb_case *c, schedule_bubble, zb_h1) {
    double idle, step;
    zb_run(c, &idle, &step);
    cr_assert_eq(idle, (c->p - 1) * (c->F + c->B - c->W), "p=%d m=%d F=%g B=%g W=%g: idle %g", c->p, c->m, c->F,
                 c->B, c->W, idle);
    cr_assert_eq(step, c->m * (c->F + c->B + c->W) + (c->p - 1) * (c->F + c->B - c->W) + 0.0 * c->F);
}

ParameterizedTestParameters(schedule_bubble, zb_h2) {
    static zb_case cs[512];
    return cr_make_param_array(zb_case, cs, (size_t)zb_cases(cs, SCHED_ZB_H2, 2));
}
/* ZB-H2 (m >= 2p, F = B = W; its list schedule is built at unit costs):
 * no idle time inside any rank's span, at 2p-1 micro-batches held */
ParameterizedTest(zb_case *c, schedule_bubble, zb_h2) {
    if (c->F != c->B || c->B != c->W) return;
    double idle, step;
    zb_run(c, &idle, &step);
    cr_assert_eq(idle, 0.0, "p=%d m=%d: idle %g", c->p, c->m, idle);
    cr_assert_eq(step, c->m * 3 * c->F + (c->p - 1) * c->F); /* the ranks' staggered starts */
}

ParameterizedTestParameters(schedule_bubble, dualpipev) {
    static zb_case cs[512];
    return cr_make_param_array(zb_case, cs, (size_t)zb_cases(cs, SCHED_DUALPIPEV, 2));
}
/* DualPipeV (m >= 2p): DeepSeek's (PP/2-1)(F&B + B - 3W) over PP = 2p
 * stages, an overlapped pair F&B counted as its two ops' sum here
 * (F + B + W: the compute itself does not overlap on one stream), at
 * 2p+1 chunk activations held (PP+1) */
ParameterizedTest(zb_case *c, schedule_bubble, dualpipev) {
    double idle, step;
    zb_run(c, &idle, &step);
    const double fb = c->F + c->B + c->W;
    if (c->F == c->B && c->B == c->W)
        cr_assert_eq(idle, (c->p - 1) * (fb + c->B - 3 * c->W), "p=%d m=%d: idle %g", c->p, c->m, idle);
    /* with pairs run one op after the other and F = B, the drain's idle is
     * ZB-H1's per rank: (p-1)(F+B-W), half ZB-H1's share of a step (two
     * chunks); with B > F more (p = 3, F 1, B 2, W 1: 5 where that gives 4),
     * always under 1F1B's (p-1)(F+B+W) */
    cr_assert_lt(idle, (c->p - 1) * fb);
    if (c->F == c->B)
        cr_assert_eq(idle, (c->p - 1) * (c->F + c->B - c->W), "p=%d m=%d F=%g B=%g W=%g: idle %g", c->p, c->m, c->F, c->B,
                 c->W, idle);
}

/* DualPipe (two directions): p even, m even from 2p to 64, the three cost
 * triples. Each rank runs m micro-batches' worth of work (half of them on
 * each of its two stages); the bubble is DeepSeek's (PP/2-1)(F&B + B - 3W)
 * at F = B = W (PP = p: half DualPipeV's over 2p stages), the V order's
 * drain (p/2-1)(F+B-W) when F = B, and always under 1F1B's share
 * (p/2-1)(F+B+W); the peak is PP+1 of its stages' activations. */
static int dualpipe_cases(zb_case *out) {
    static const int P[4] = {2, 4, 8, 16};
    static const double C[3][3] = {{1, 1, 1}, {2, 2, 1}, {1, 2, 1}};
    int k = 0;
    for (int a = 0; a < 4; a++)
        for (int m = 2 * P[a]; m <= 64; m += 2)
            for (int c = 0; c < 3; c++) out[k++] = (zb_case){SCHED_DUALPIPE, P[a], m, C[c][0], C[c][1], C[c][2]};
    return k;
}

ParameterizedTestParameters(schedule_bubble, dualpipe) {
    static zb_case cs[512];
    return cr_make_param_array(zb_case, cs, (size_t)dualpipe_cases(cs));
}
ParameterizedTest(zb_case *c, schedule_bubble, dualpipe) {
    double busy[16], first[16], last[16];
    int peak[16];
    const schedule s = schedule_make(c->m, SCHED_DUALPIPE);
    const double step = schedule_eval_ideal(&s, c->p, c->F, c->B, c->W, busy, first, last, peak);
    cr_assert_geq(step, 0, "dualpipe p=%d m=%d did not run", c->p, c->m);
    const double fb = c->F + c->B + c->W;
    double idle = 0;
    for (int r = 0; r < c->p; r++) {
        cr_assert_eq(busy[r], c->m * fb, "rank %d runs half the micro-batches on each of its two stages", r);
        const double i = last[r] - first[r] - busy[r];
        if (i > idle) idle = i;
        cr_assert_eq(peak[r], c->p + 1 < c->m ? c->p + 1 : c->m);
        cr_assert_eq(peak[r], schedule_peak_stash_rule(SCHED_DUALPIPE, c->p, r, c->m));
    }
    const double half = c->p / 2 - 1;
    if (c->F == c->B && c->B == c->W)
        cr_assert_eq(idle, half * (fb + c->B - 3 * c->W), "p=%d m=%d: idle %g", c->p, c->m, idle);
    if (c->F == c->B) cr_assert_eq(idle, half * (c->F + c->B - c->W), "p=%d m=%d: idle %g", c->p, c->m, idle);
    cr_assert_leq(idle, half * fb);
}

/* DualPipe's two directions: rank r holds stage r of the down pipeline
 * and stage p-1-r of the up one; micro-batches 0..m/2-1 run down, the rest
 * up; its needs are one line each */
Test(schedule, dualpipe_directions_and_needs) {
    cr_assert_eq(schedule_stage_of(SCHED_DUALPIPE, 4, 0, 0), 0);
    cr_assert_eq(schedule_stage_of(SCHED_DUALPIPE, 4, 0, 1), 7, "model stage 3 of the up pipeline: stage p + 3");
    cr_assert_eq(schedule_stage_of(SCHED_DUALPIPE, 4, 3, 1), 4, "the up pipeline starts on the last rank");
    cr_assert_eq(schedule_pipelines(SCHED_DUALPIPE), 2);
    cr_assert_eq(schedule_pipelines(SCHED_DUALPIPEV), 1);
    cr_assert_eq(schedule_mb_pipeline(SCHED_DUALPIPE, 8, 3), 0);
    cr_assert_eq(schedule_mb_pipeline(SCHED_DUALPIPE, 8, 4), 1);
    cr_assert(schedule_splits_backward(SCHED_DUALPIPE));
    schedule_op ops[96];
    const schedule s = schedule_make(8, SCHED_DUALPIPE);
    for (int r = 0; r < 4; r++) {
        const int n = schedule_rank_ops(&s, 4, r, ops);
        cr_assert_gt(n, 0);
        for (int k = 0; k < n; k++)
            cr_assert_eq(ops[k].mb >= 4, ops[k].chunk == 1, "rank %d op %d: chunk %d mb %d", r, k, ops[k].chunk, ops[k].mb);
    }
    char msg[256];
    cr_assert_eq(schedule_check_pipeline(SCHED_DUALPIPE, 3, 12, 0, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "even") && !strchr(msg, '\n'), "%s", msg);
    cr_assert_eq(schedule_check_pipeline(SCHED_DUALPIPE, 4, 6, 0, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "6 micro-batches over 4 ranks") && strstr(msg, "8 or more"), "%s", msg);
    cr_assert_eq(schedule_check_pipeline(SCHED_DUALPIPE, 4, 9, 0, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert_eq(schedule_check_pipeline(SCHED_DUALPIPE, 4, 10, 8, msg, sizeof msg), PL_OK);
    const schedule bad = schedule_make(6, SCHED_DUALPIPE);
    cr_assert_eq(schedule_rank_ops(&bad, 4, 0, ops), -1);
    schedule_order o;
    cr_assert_eq(schedule_parse_order("dualpipe", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_DUALPIPE);
}

/* Megatron's EP all-to-all overlap on 1F1B: one more warm-up forward, then
 * every steady-state forward paired (overlap) with the next backward, of
 * an earlier micro-batch; the same ops as the plain order */
Test(schedule, paired_one_f_one_b_pairs_forwards_with_other_micro_batches_backwards) {
    schedule s = schedule_make(6, SCHED_1F1B);
    s.paired = 1;
    schedule_op ops[32];
    for (int p = 1; p <= 4; p *= 2)
        for (int r = 0; r < p; r++) {
            const int n = schedule_rank_ops(&s, p, r, ops);
            cr_assert_eq(n, 12);
            int warm = 0, pairs = 0;
            while (warm < n && ops[warm].kind == SOP_F) warm++;
            const int w = p - r < 6 ? p - r : 6; /* 1F1B's p-1-r, one more */
            cr_assert_eq(warm, w < 6 ? w + 1 : 6, "p=%d rank %d: %d forwards before the first backward", p, r, warm);
            for (int k = 0; k < n; k++)
                if (ops[k].overlap) {
                    cr_assert_eq(ops[k].kind, SOP_F);
                    cr_assert_eq(ops[k + 1].kind, SOP_BW);
                    cr_assert_neq(ops[k].mb, ops[k + 1].mb);
                    pairs++;
                }
            cr_assert_eq(pairs, 6 - w);
        }
    cr_assert_eq(schedule_eval_ideal(&s, 4, 1, 1, 1, NULL, NULL, NULL, NULL) > 0, 1);
    char msg[160];
    s.order = SCHED_ZB_H1;
    cr_assert_eq(schedule_validate(&s, 6, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "zb-h1"), "%s", msg);
    cr_assert_eq(schedule_rank_ops(&s, 4, 0, ops), -1);
}

/* ZB-V's grid: every m from 2p to 64 (not only multiples of p), F = B = W
 * = 1, and two unequal triples at m = 2p and 4p */
static int zbv_cases(zb_case *out) {
    static const int P[5] = {2, 3, 4, 8, 16};
    int k = 0;
    for (int a = 0; a < 5; a++) {
        for (int m = 2 * P[a]; m <= 64; m++) out[k++] = (zb_case){SCHED_ZB_V, P[a], m, 1, 1, 1};
        for (int m = 2 * P[a]; m <= 4 * P[a]; m += 2 * P[a]) {
            out[k++] = (zb_case){SCHED_ZB_V, P[a], m, 2, 2, 1};
            out[k++] = (zb_case){SCHED_ZB_V, P[a], m, 1, 2, 1};
        }
    }
    return k;
}

ParameterizedTestParameters(schedule_bubble, zb_v) {
    static zb_case cs[512];
    return cr_make_param_array(zb_case, cs, (size_t)zbv_cases(cs));
}
/* ZB-V (the paper's V, schedule.c's order_zbv), m >= 2p: at F = B = W no
 * idle time inside any rank's span, the step 2m(F+B+W) plus the ranks'
 * staggered starts (p-1)F, at 2p chunk activations held on every rank
 * (1F1B's p micro-batches; zb_run checks each rank's peak against the
 * rule). The order is built for equal costs: with B > W the drain's
 * deferred Ws no longer cover the B chain and idle time comes back, under
 * 1F1B's (p-1)(F+B+W) (measured 2(p-1) at F 2 B 2 W 1 and at F 1 B 2 W 1) */
ParameterizedTest(zb_case *c, schedule_bubble, zb_v) {
    double idle, step;
    zb_run(c, &idle, &step);
    if (c->F == c->B && c->B == c->W) {
        cr_assert_eq(idle, 0.0, "p=%d m=%d: idle %g", c->p, c->m, idle);
        cr_assert_eq(step, 2 * c->m * (c->F + c->B + c->W) + (c->p - 1) * c->F, "p=%d m=%d: step %g", c->p, c->m,
                     step);
        for (int r = 0; r < c->p; r++) cr_assert_eq(schedule_peak_stash_rule(SCHED_ZB_V, c->p, r, c->m), 2 * c->p);
    } else {
        cr_assert_gt(idle, 0.0, "p=%d m=%d F=%g B=%g W=%g", c->p, c->m, c->F, c->B, c->W);
        cr_assert_lt(idle, (c->p - 1) * (c->F + c->B + c->W), "p=%d m=%d F=%g B=%g W=%g: idle %g", c->p, c->m, c->F,
                     c->B, c->W, idle);
    }
}

/* ZB-V below m = 2p and on one rank: every order is whole (each (chunk,
 * mb) has one F, one B after it and one W after that), runs without
 * deadlock, holds what the rule says on every rank (min(2m, 2p, m+1+r)),
 * and, with p >= 2, leaves idle time: 2p is the least m at zero */
Test(schedule, zb_v_runs_below_two_p) {
    static schedule_op ops[3 * 2 * 64];
    for (int p = 1; p <= 16; p++)
        for (int m = 1; m <= (p < 8 ? 64 : 2 * p + 1); m++) {
            const schedule s = schedule_make(m, SCHED_ZB_V);
            for (int r = 0; r < p; r++) {
                const int n = schedule_rank_ops(&s, p, r, ops);
                cr_assert_eq(n, 6 * m, "p=%d m=%d r=%d: %d ops", p, m, r, n);
                int seen[2][64][3] = {{{0}}};
                for (int k = 0; k < n; k++) {
                    const schedule_op *q = ops + k;
                    cr_assert(q->chunk >= 0 && q->chunk < 2 && q->mb >= 0 && q->mb < m && q->kind != SOP_BW);
                    for (int before = 0; before < q->kind; before++)
                        cr_assert(seen[q->chunk][q->mb][before], "p=%d m=%d r=%d: %c of chunk %d mb %d too early", p,
                                  m, r, "FBW"[q->kind], q->chunk, q->mb);
                    cr_assert_eq(seen[q->chunk][q->mb][q->kind]++, 0);
                }
            }
            double busy[16], first[16], last[16];
            int peak[16];
            const double step = schedule_eval_ideal(&s, p, 1, 1, 1, busy, first, last, peak);
            cr_assert_geq(step, 0, "p=%d m=%d deadlocks", p, m);
            double idle = 0;
            for (int r = 0; r < p; r++) {
                cr_assert_eq(peak[r], schedule_peak_stash_rule(SCHED_ZB_V, p, r, m), "p=%d m=%d r=%d: peak %d", p, m,
                             r, peak[r]);
                if (last[r] - first[r] - busy[r] > idle) idle = last[r] - first[r] - busy[r];
            }
            if (p >= 2 && m < 2 * p) cr_assert_gt(idle, 0.0, "p=%d m=%d", p, m);
            if (m >= 2 * p) cr_assert_eq(idle, 0.0, "p=%d m=%d: idle %g", p, m, idle);
        }
}

/* ZB-V's rank orders for p = 2, m = 4 written out: the warm-up's chunk-0
 * forwards (3 on rank 0, 1 on rank 1), the turn of the V on chunk 1, the
 * steady F B W of each chunk in turn, and rank 1's drain with its Ws
 * deferred behind the Bs */
Test(schedule, zb_v_rank_orders) {
    schedule_op ops[64];
    char buf[512];
    const char *want[2] = {
        "F0.0 F0.1 F0.2 F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 F0.3 B0.0 W0.0 F1.2 B1.2 W1.2 B0.1 W0.1 F1.3 B1.3 W1.3 B0.2 "
        "W0.2 B0.3 W0.3 ",
        "F0.0 F1.0 F0.1 F1.1 B1.0 W1.0 F0.2 B0.0 W0.0 F1.2 B1.1 W1.1 F0.3 B0.1 W0.1 F1.3 B1.2 W1.2 B0.2 B1.3 B0.3 "
        "W0.2 W1.3 W0.3 "};
    const schedule s = schedule_make(4, SCHED_ZB_V);
    for (int r = 0; r < 2; r++) {
        const int n = schedule_rank_ops(&s, 2, r, ops);
        int off = 0;
        for (int k = 0; k < n; k++)
            off += snprintf(buf + off, sizeof buf - (size_t)off, "%c%d.%d ", "FBWX"[ops[k].kind], ops[k].chunk,
                            ops[k].mb);
        cr_assert_str_eq(buf, want[r], "rank %d: %s", r, buf);
    }
}

Test(schedule, pipeline_requirements_are_one_line_each) {
    char msg[256];
    cr_assert_eq(schedule_check_pipeline(SCHED_DUALPIPEV, 4, 7, 0, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "7 micro-batches over 4 ranks") && strstr(msg, "8 or more") && !strchr(msg, '\n'), "%s", msg);
    cr_assert_eq(schedule_check_pipeline(SCHED_DUALPIPEV, 4, 8, 8, msg, sizeof msg), PL_OK);
    cr_assert_eq(schedule_check_pipeline(SCHED_ZB_V, 4, 8, 7, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert(strstr(msg, "7 stages over 4 ranks") && strstr(msg, "odd"), "%s", msg);
    cr_assert_eq(schedule_check_pipeline(SCHED_ZB_H1, 4, 1, 4, msg, sizeof msg), PL_OK);
    schedule_order o;
    cr_assert_eq(schedule_parse_order("zb-h1", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_ZB_H1);
    cr_assert_eq(schedule_parse_order("dualpipev", &o, NULL, 0), PL_OK);
    cr_assert_eq(o, SCHED_DUALPIPEV);
    schedule_op ops[96];
    const schedule s = schedule_make(7, SCHED_DUALPIPEV);
    cr_assert_eq(schedule_rank_ops(&s, 4, 0, ops), -1);
}

/* Every order runs each (chunk, mb)'s F before its backward, and B before
 * its W; zb-h1 on rank 0 of 4 with m = 6 is 1F1B's skeleton with each W
 * right after its B (rank 0 keeps none pending) */
Test(schedule, zb_h1_rank_orders) {
    schedule_op ops[64];
    char buf[256];
    const int want_w[4] = {0, 1, 2, 3};
    const schedule s = schedule_make(6, SCHED_ZB_H1);
    for (int r = 0; r < 4; r++) {
        int n = schedule_rank_ops(&s, 4, r, ops), off = 0, pend = 0, maxp = 0;
        cr_assert_eq(n, 18);
        for (int k = 0; k < n; k++) {
            off += snprintf(buf + off, sizeof buf - (size_t)off, "%c%d ", "FBWX"[ops[k].kind], ops[k].mb);
            pend += ops[k].kind == SOP_B ? 1 : ops[k].kind == SOP_W ? -1 : 0;
            if (ops[k].kind == SOP_B && pend - 1 > maxp) maxp = pend - 1;
        }
        cr_assert_eq(maxp, want_w[r], "rank %d keeps %d W pending: %s", r, maxp, buf);
        if (r == 0) cr_assert_str_eq(buf, "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5 ");
        if (r == 3) cr_assert_str_eq(buf, "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5 ");
    }
}

/* ---- gpipe, 1f1b and interleaved against their closed forms ------------- */

/* Rank r's order of s written as "F0.0 B1.0 ..." (kind, chunk, mb;
 * X a fused BW). */
static void order_text(const schedule *s, int p, int r, char *buf, size_t len) {
    schedule_op ops[256];
    const int n = schedule_rank_ops(s, p, r, ops);
    cr_assert_geq(n, 0, "%s p=%d r=%d: no order", schedule_order_name(s->order), p, r);
    size_t off = 0;
    buf[0] = 0;
    for (int k = 0; k < n && off < len; k++)
        off += (size_t)snprintf(buf + off, len - off, "%c%d.%d ", "FBWX"[ops[k].kind], ops[k].chunk, ops[k].mb);
}

/* Every order of m micro-batches over v chunks holds each (chunk, mb)
 * once as a forward and once as a fused backward after it (gpipe, 1f1b
 * and interleaved do not split backwards), and has schedule_max_ops ops */
static void check_whole(const schedule *s, int p) {
    static schedule_op ops[2 * 8 * 64];
    const int v = schedule_rank_chunks(s), m = s->micro_batches;
    cr_assert_eq(schedule_max_ops(s), 2 * v * m);
    for (int r = 0; r < p; r++) {
        const int n = schedule_rank_ops(s, p, r, ops);
        cr_assert_eq(n, 2 * v * m, "%s p=%d v=%d m=%d r=%d: %d ops", schedule_order_name(s->order), p, v, m, r, n);
        static int seen[8][64];
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < n; k++) {
            const schedule_op *q = ops + k;
            cr_assert(q->chunk >= 0 && q->chunk < v && q->mb >= 0 && q->mb < m && !q->overlap);
            cr_assert(q->kind == SOP_F || q->kind == SOP_BW);
            cr_assert_eq(seen[q->chunk][q->mb], q->kind == SOP_F ? 0 : 1, "%s p=%d v=%d m=%d r=%d: op %d out of turn",
                         schedule_order_name(s->order), p, v, m, r, k);
            seen[q->chunk][q->mb]++;
        }
    }
}

/* gpipe, 1f1b and interleaved (v = 1..4, m a multiple of p) on the ideal
 * pipeline: the step is (vm + p - 1)(F + B + W), Megatron-LM's bubble
 * (p-1)/(vm) of the work; the peak stash of rank r is gpipe's m, 1f1b's
 * min(m, p - r), interleaved's warm-up forwards plus one, min(2(p-r-1) +
 * (v-1)p + 1, vm) (all vm when m == p) */
Test(schedule, gpipe_1f1b_interleaved_closed_forms) {
    static const double C[3][3] = {{1, 1, 1}, {1, 2, 0.5}, {2, 3, 0}};
    for (int o = SCHED_GPIPE; o <= SCHED_INTERLEAVED; o++)
        for (int p = 1; p <= 8; p++)
            for (int v = 1; v <= (o == SCHED_INTERLEAVED ? 4 : 1); v++)
                for (int m = p; m <= 32; m += p)
                    for (int c = 0; c < 3; c++) {
                        const schedule s = {m, (schedule_order)o, v};
                        check_whole(&s, p);
                        double busy[8], first[8], last[8];
                        int peak[8];
                        const double F = C[c][0], B = C[c][1], W = C[c][2];
                        const double step = schedule_eval_ideal(&s, p, F, B, W, busy, first, last, peak);
                        cr_assert_eq(step, (v * m + p - 1) * (F + B + W), "%s p=%d v=%d m=%d: step %g",
                                     schedule_order_name(s.order), p, v, m, step);
                        for (int r = 0; r < p; r++) {
                            int want = m;
                            if (o == SCHED_1F1B || (o == SCHED_INTERLEAVED && v == 1)) want = m < p - r ? m : p - r;
                            if (o == SCHED_INTERLEAVED && v > 1) {
                                want = m == p ? v * m : 2 * (p - r - 1) + (v - 1) * p + 1;
                                if (want > v * m) want = v * m;
                            }
                            cr_assert_eq(peak[r], want, "%s p=%d v=%d m=%d r=%d: peak %d", schedule_order_name(s.order),
                                         p, v, m, r, peak[r]);
                            cr_assert_eq(busy[r], v * m * (F + B + W));
                        }
                    }
}

/* 1f1b below m = p: the warm-up is min(m, p-1-r) forwards, so every rank
 * runs all its forwards first and the step is (m + p - 1)(F + B + W) */
Test(schedule, one_f_one_b_below_p) {
    for (int p = 2; p <= 8; p++)
        for (int m = 1; m < p; m++) {
            const schedule s = schedule_make(m, SCHED_1F1B);
            check_whole(&s, p);
            const double step = schedule_eval_ideal(&s, p, 1, 2, 0, NULL, NULL, NULL, NULL);
            cr_assert_eq(step, (m + p - 1) * 3.0, "p=%d m=%d: step %g", p, m, step);
        }
}

/* The rank orders of p = 2, v = 2, m = 4 from Megatron-LM's rule (see
 * schedule.h): virtual micro-batches 0..7 run forward on chunks 0 0 1 1 0
 * 0 1 1 with micro-batches 0 1 0 1 2 3 2 3, backward on chunks 1 1 0 0 1
 * 1 0 0; rank 0 warms up with 2(p-1) + (v-1)p = 4 forwards, rank 1 with 2 */
Test(schedule, interleaved_rank_orders) {
    char buf[512];
    const schedule s = {4, SCHED_INTERLEAVED, 2};
    order_text(&s, 2, 0, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0.0 F0.1 F1.0 F1.1 F0.2 X1.0 F0.3 X1.1 F1.2 X0.0 F1.3 X0.1 X1.2 X1.3 X0.2 X0.3 ");
    order_text(&s, 2, 1, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0.0 F0.1 F1.0 X1.0 F1.1 X1.1 F0.2 X0.0 F0.3 X0.1 F1.2 X1.2 F1.3 X1.3 X0.2 X0.3 ");
}

/* interleaved with v = 1 is 1f1b's order, op for op */
Test(schedule, interleaved_of_one_chunk_is_1f1b) {
    char a[1024], b[1024];
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 12; m++)
            for (int r = 0; r < p; r++) {
                const schedule one = {m, SCHED_INTERLEAVED, 1}, plain = schedule_make(m, SCHED_1F1B);
                order_text(&one, p, r, a, sizeof a);
                order_text(&plain, p, r, b, sizeof b);
                cr_assert_str_eq(a, b, "p=%d m=%d r=%d", p, m, r);
            }
}

/* What schedule_rank_ops refuses: interleaved with v > 1 and m not a
 * multiple of p, chunks on another order, a rank outside 0..p-1, m < 1,
 * NULL arguments */
Test(schedule, rank_ops_refuse_bad_arguments) {
    schedule_op ops[64];
    const schedule odd = {6, SCHED_INTERLEAVED, 2}, chunked = {4, SCHED_1F1B, 2}, ok = schedule_make(4, SCHED_GPIPE),
                   none = schedule_make(0, SCHED_1F1B);
    cr_assert_eq(schedule_rank_ops(&odd, 4, 0, ops), -1);
    cr_assert_eq(schedule_rank_ops(&chunked, 2, 0, ops), -1);
    cr_assert_eq(schedule_rank_ops(&ok, 2, 2, ops), -1);
    cr_assert_eq(schedule_rank_ops(&ok, 2, -1, ops), -1);
    cr_assert_eq(schedule_rank_ops(&none, 2, 0, ops), -1);
    cr_assert_eq(schedule_rank_ops(NULL, 2, 0, ops), -1);
    cr_assert_eq(schedule_rank_ops(&ok, 2, 0, NULL), -1);
    cr_assert_eq(schedule_rank_ops(&ok, 2, 1, ops), 8);
    cr_assert_lt(schedule_eval_ideal(&odd, 4, 1, 1, 1, NULL, NULL, NULL, NULL), 0);
}

/* The stage of a rank's chunk: the V folds back, the others go round */
Test(schedule, stage_of_chunks) {
    cr_assert_eq(schedule_stage_of(SCHED_ZB_V, 4, 1, 0), 1);
    cr_assert_eq(schedule_stage_of(SCHED_ZB_V, 4, 1, 1), 6);
    cr_assert_eq(schedule_stage_of(SCHED_DUALPIPEV, 4, 3, 1), 4);
    cr_assert_eq(schedule_stage_of(SCHED_INTERLEAVED, 4, 1, 2), 9);
    cr_assert_eq(schedule_stage_of(SCHED_1F1B, 4, 3, 0), 3);
    const schedule v3 = {8, SCHED_INTERLEAVED, 3}, zbv = schedule_make(8, SCHED_ZB_V), h1 = schedule_make(8, SCHED_ZB_H1);
    cr_assert_eq(schedule_rank_chunks(&v3), 3);
    cr_assert_eq(schedule_rank_chunks(&zbv), 2);
    cr_assert_eq(schedule_max_ops(&zbv), 48);
    cr_assert_eq(schedule_max_ops(&h1), 24);
}

/* The list of order names the parsers' messages print: every order in
 * enum order, "a, b or c", the skipped ones left out, cut at the buffer's
 * end with its whole length returned */
Test(schedule, order_names_list_every_order) {
    char buf[256], all[256];
    const int n = schedule_order_names(all, sizeof all, 0);
    strcpy(buf, all);
    cr_assert_eq(n, (int)strlen(buf));
    for (int o = 0; o < SCHED_ORDER_COUNT; o++)
        cr_assert(strstr(buf, schedule_order_name((schedule_order)o)), "%s lacks %s", buf,
                  schedule_order_name((schedule_order)o));
    char want[256];
    snprintf(want, sizeof want, " or %s", schedule_order_name((schedule_order)(SCHED_ORDER_COUNT - 1)));
    cr_assert(strstr(buf, want) && !strstr(buf + strlen(buf) - strlen(want) + 1, ","), "%s", buf);
    schedule_order_names(buf, sizeof buf, ~(1u << SCHED_ZB_H1 | 1u << SCHED_ZB_V));
    cr_assert_str_eq(buf, "zb-h1 or zb-v");
    schedule_order_names(buf, sizeof buf, ~(1u << SCHED_1F1B));
    cr_assert_str_eq(buf, "1f1b");
    char small[8];
    cr_assert_eq(schedule_order_names(small, sizeof small, 0), n);
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert_eq(strncmp(small, all, sizeof small - 1), 0);
    cr_assert_eq(schedule_order_names(NULL, 0, 0), n);
    schedule_order o;
    char msg[256];
    cr_assert_eq(schedule_parse_order("zb", &o, msg, sizeof msg), PL_ERR_SCHEDULE);
    char placement[160]; /* the placement path's orders: all but dualpipe (the layout simulator's) */
    schedule_order_names(placement, sizeof placement, 1u << SCHED_DUALPIPE);
    cr_assert(strstr(msg, placement) && !strstr(msg, "dualpipe)") && !strstr(msg, "or dualpipe "), "%s", msg);
}

/* schedule_all_rank_ops writes the lists schedule_rank_ops writes rank by
 * rank (zb-h2's list schedule runs once for all ranks there). */
Test(schedule, all_rank_ops_equal_the_rank_by_rank_lists) {
    const schedule_order orders[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_INTERLEAVED, SCHED_ZB_H1,
                                     SCHED_ZB_H2, SCHED_ZB_V, SCHED_DUALPIPEV};
    int compared = 0;
    for (size_t oi = 0; oi < sizeof orders / sizeof orders[0]; oi++)
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 3 * p + 1; m++) {
                schedule s = schedule_make(m, orders[oi]);
                if (orders[oi] == SCHED_INTERLEAVED) s.chunks = 2;
                const int cap = schedule_max_ops(&s);
                schedule_op *all = calloc((size_t)p * cap, sizeof *all), *one = calloc((size_t)cap, sizeof *one);
                int *n = calloc((size_t)p, sizeof *n);
                cr_assert(all && one && n);
                const int rc = schedule_all_rank_ops(&s, p, all, cap, n);
                const int n0 = schedule_rank_ops(&s, p, 0, one);
                cr_assert_eq(rc < 0, n0 < 0, "%s p %d m %d: all ranks %d, rank 0 %d", schedule_order_name(s.order), p,
                             m, rc, n0);
                for (int r = 0; rc == 0 && r < p; r++) {
                    const int k = schedule_rank_ops(&s, p, r, one);
                    cr_assert_eq(n[r], k, "%s p %d m %d rank %d: %d ops, rank by rank %d", schedule_order_name(s.order),
                                 p, m, r, n[r], k);
                    cr_assert_eq(memcmp(all + (size_t)r * cap, one, sizeof *one * (size_t)k), 0,
                                 "%s p %d m %d rank %d: the lists differ", schedule_order_name(s.order), p, m, r);
                    compared++;
                }
                free(all);
                free(one);
                free(n);
            }
    cr_assert_gt(compared, 500);
}
