/*
 * test_sim_closed_form.c: the pipeline bubble against its closed form.
 *
 * Unit costs (forward 1, backward 2, free transfers, no optimizer) on a
 * contiguous chain of p stages, one device each (or p*v chunks cycling over
 * p devices for interleaved): every device's idle time over its busy time
 * must be exactly (p-1)/(v*m). All times are small integers, so the check
 * is exact (0 ulp) apart from the final division.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>

#include "sim.h"
#include "sim_fixtures.h"

#include <stdlib.h>

typedef struct {
    int order; /* schedule_order */
    int p;     /* devices */
    int v;     /* chunks per device */
    int m;     /* micro-batches */
    int nps;   /* nodes per chunk */
} bubble_case;

static int fill_cases(bubble_case *out, int order, int v) {
    static const int P[4] = {2, 4, 8, 16};
    int k = 0;
    for (int a = 0; a < 4; a++)
        for (int m = P[a]; m <= 64; m += P[a]) {
            /* vary the stage size a little; the bubble must not care */
            out[k++] = (bubble_case){order, P[a], v, m, 1 + (m / P[a]) % 3};
        }
    return k;
}

static void check_bubble(const bubble_case *c) {
    const int S = c->p * c->v, n = S * c->nps;
    graph *g = simfix_chain_graph(n, c->m);
    cr_assert_not_null(g);
    profile_data *p = simfix_unit_profile(g, c->p, 1, 1.0, 2.0, 0.0, 0);
    cr_assert_not_null(p);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, c->m, &ctx), PL_OK);
    int dev[1024];
    for (int i = 0; i < n; i++) dev[i] = (i / c->nps) % c->p;
    schedule s = {c->m, (schedule_order)c->order, c->v};
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    double expect = (double)(c->p - 1) / (double)(c->v * c->m);
    double per = 3.0 * c->nps; /* forward + backward of one chunk */
    cr_assert(ieee_ulp_eq(dbl, r.step_us, per * (c->v * c->m + c->p - 1), 0),
              "%s p=%d v=%d m=%d: step %.1f, expected %.1f", schedule_order_name(s.order), c->p, c->v, c->m,
              r.step_us, per * (c->v * c->m + c->p - 1));
    for (int d = 0; d < c->p; d++) {
        cr_assert(ieee_ulp_eq(dbl, r.busy_us[d], per * c->v * c->m, 0));
        cr_assert(ieee_ulp_eq(dbl, r.bubble[d], expect, 1), "%s p=%d v=%d m=%d device %d: bubble %.17g, expected %.17g",
                  schedule_order_name(s.order), c->p, c->v, c->m, d, r.bubble[d], expect);
    }
    cr_assert(ieee_ulp_eq(dbl, r.bubble_fraction, expect, 4));
    cr_assert_eq(r.n_stages, S);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

ParameterizedTestParameters(sim_bubble, gpipe_matches_closed_form) {
    static bubble_case cases[64];
    int k = fill_cases(cases, SCHED_GPIPE, 1);
    return cr_make_param_array(bubble_case, cases, (size_t)k);
}
ParameterizedTest(bubble_case *c, sim_bubble, gpipe_matches_closed_form) { check_bubble(c); }

ParameterizedTestParameters(sim_bubble, one_f_one_b_matches_closed_form) {
    static bubble_case cases[64];
    int k = fill_cases(cases, SCHED_1F1B, 1);
    return cr_make_param_array(bubble_case, cases, (size_t)k);
}
ParameterizedTest(bubble_case *c, sim_bubble, one_f_one_b_matches_closed_form) { check_bubble(c); }

ParameterizedTestParameters(sim_bubble, interleaved_matches_closed_form) {
    static bubble_case cases[192];
    int k = fill_cases(cases, SCHED_INTERLEAVED, 2);
    k += fill_cases(cases + k, SCHED_INTERLEAVED, 3);
    k += fill_cases(cases + k, SCHED_INTERLEAVED, 4);
    return cr_make_param_array(bubble_case, cases, (size_t)k);
}
ParameterizedTest(bubble_case *c, sim_bubble, interleaved_matches_closed_form) { check_bubble(c); }

/* The orders themselves, on a 4-stage pipeline with m = 8: stage 0 of 1F1B
 * runs 4 forwards (3 warm-up + 1), then alternates; GPipe runs all
 * forwards, then the backwards in micro-batch order, as the engine does
 * (hw/exec/hw.h; the bubble is the same either way). */
static void stage_order(int order, int stage, char *out, size_t len) {
    graph *g = simfix_chain_graph(4, 8);
    profile_data *p = simfix_unit_profile(g, 4, 1, 1.0, 2.0, 0.0, 0);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 8, &ctx), PL_OK);
    sim_ctx_set_trace(ctx, 1);
    int dev[4] = {0, 1, 2, 3};
    schedule s = schedule_make(8, (schedule_order)order);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK);
    int n = 0;
    const sim_event *ev = sim_events(ctx, &n);
    size_t off = 0;
    out[0] = 0;
    for (int e = 0; e < n; e++)
        if (ev[e].device == stage && (ev[e].kind == SIM_EV_FWD || ev[e].kind == SIM_EV_BWD))
            off += (size_t)snprintf(out + off, len - off, "%s%d ", sim_event_kind_name(ev[e].kind), ev[e].micro_batch);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(sim_order, one_f_one_b_is_pipedream_flush_on_a_contiguous_pipeline) {
    char buf[512];
    stage_order(SCHED_1F1B, 0, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 ");
    stage_order(SCHED_1F1B, 2, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7 ");
    stage_order(SCHED_1F1B, 3, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 ");
}

Test(sim_order, gpipe_runs_all_forwards_then_backwards_in_micro_batch_order) {
    char buf[512];
    stage_order(SCHED_GPIPE, 1, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7 ");
}

/* Megatron-LM's interleaved order for p = 2, v = 2, m = 4 on rank 0 (chunks
 * are nodes 0 and 2): 2(p-1) + (v-1)p = 4 warm-up forwards, forwards
 * walking chunk 0 then chunk 1 in groups of p micro-batches, backwards
 * walking the chunks in reverse. Written node.mb. */
Test(sim_order, interleaved_is_megatron_order) {
    graph *g = simfix_chain_graph(4, 4);
    profile_data *p = simfix_unit_profile(g, 2, 1, 1.0, 2.0, 0.0, 0);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 4, &ctx), PL_OK);
    sim_ctx_set_trace(ctx, 1);
    int dev[4] = {0, 1, 0, 1};
    schedule s = {4, SCHED_INTERLEAVED, 2};
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    int n = 0;
    const sim_event *ev = sim_events(ctx, &n);
    char buf[512];
    size_t off = 0;
    for (int e = 0; e < n; e++)
        if (ev[e].device == 0 && (ev[e].kind == SIM_EV_FWD || ev[e].kind == SIM_EV_BWD))
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%d.%d ", sim_event_kind_name(ev[e].kind),
                                    ev[e].node, ev[e].micro_batch);
    cr_assert_str_eq(buf, "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3 ");
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

/* ---- orders that split the backward: B and W apart ---------------------- */

/* Unit costs with the backward split in halves (F 1, B 1, W 1 per node, a
 * profile that records the split: w_frac 0.5) on a chain of p stages (or 2p
 * in a V for the two-chunk orders), free transfers: every device's busy
 * time is the whole work, and the largest idle time inside a device's own
 * span (first op to last, the zero-bubble papers' bubble) and the step are
 * the order's closed forms (core/schedule.c's ideal pipeline gives the
 * same, tests/core/test_schedule.c checks those against the papers):
 *   zb-h1      step (3m + p - 1) F, idle (p-1) F: (p-1)/(3m) of the busy time
 *   zb-h2      idle 0 for m >= 2p, step (3m + p - 1) F
 *   dualpipev  idle (p-1) F per chunk-pair of F, B, W (DeepSeek's
 *              (PP/2-1)(F&B + B - 3W) at F = B = W), m >= 2p
 * and each device's peak of micro-batches in flight is the order's rule. */
typedef struct {
    int order, p, m, nps;
} split_case;

static int split_cases(split_case *out, int order, int mmin) {
    static const int P[3] = {2, 4, 8};
    int k = 0;
    for (int a = 0; a < 3; a++)
        for (int m = mmin * P[a]; m <= 32; m += P[a]) out[k++] = (split_case){order, P[a], m, 1 + (m / P[a]) % 3};
    return k;
}

static void check_split(const split_case *c) {
    const schedule_order o = (schedule_order)c->order;
    const int v = schedule_v_chunks(o), S = c->p * v, n = S * c->nps;
    graph *g = simfix_chain_graph(n, c->m);
    cr_assert_not_null(g);
    profile_data *p = simfix_unit_profile(g, c->p, 1, 1.0, 2.0, 0.0, 0);
    cr_assert_not_null(p);
    p->w_frac = malloc(sizeof *p->w_frac * (size_t)n);
    for (int i = 0; i < n; i++) p->w_frac[i] = 0.5;
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, c->m, &ctx), PL_OK);
    sim_ctx_set_trace(ctx, 1);
    int dev[1024];
    for (int i = 0; i < n; i++) {
        const int k = i / c->nps;
        dev[i] = k < c->p ? k : 2 * c->p - 1 - k;
    }
    schedule s = schedule_make(c->m, o);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    const double F = c->nps;
    double busy[16], first[16], last[16];
    int peak[16];
    const double ideal = schedule_eval_ideal(&s, c->p, F, F, F, busy, first, last, peak);
    /* zb-h2 runs on the engine's comm streams (the engine runs it): with
     * one node per stage a receive posted behind the receiver's issued
     * work can idle a device (p=4, m=12: 2 F; p=8, m=24: 6 F), bounded by
     * ZB-H1's (p-1) F; with two or more nodes per stage the ideal holds */
    const int hol = o == SCHED_ZB_H2 && c->nps == 1;
    if (!hol)
        cr_assert(ieee_ulp_eq(dbl, r.step_us, ideal, 0), "%s p=%d m=%d nps=%d: step %.1f, ideal pipeline %.1f",
                  schedule_order_name(o), c->p, c->m, c->nps, r.step_us, ideal);
    int ne = 0;
    const sim_event *ev = sim_events(ctx, &ne);
    double t0[16], t1[16];
    int nw = 0;
    for (int d = 0; d < c->p; d++) t0[d] = 1e300, t1[d] = 0;
    for (int e = 0; e < ne; e++) {
        if (ev[e].kind != SIM_EV_FWD && ev[e].kind != SIM_EV_BWD && ev[e].kind != SIM_EV_WGRAD) continue;
        nw += ev[e].kind == SIM_EV_WGRAD;
        const int d = ev[e].device;
        if (ev[e].start_us < t0[d]) t0[d] = ev[e].start_us;
        if (ev[e].end_us > t1[d]) t1[d] = ev[e].end_us;
    }
    cr_assert_eq(nw, n * c->m, "every node's W is an event of its own");
    double idle = 0, want = 0;
    for (int d = 0; d < c->p; d++) {
        cr_assert(ieee_ulp_eq(dbl, r.busy_us[d], 3.0 * F * v * c->m, 0));
        const double id = t1[d] - t0[d] - r.busy_us[d];
        if (id > idle) idle = id;
        const double iw = last[d] - first[d] - busy[d];
        if (iw > want) want = iw;
        /* micro-batches held from F to W: the rule's count with one chunk;
         * with two, at most the rule's chunk activations */
        const int rule = schedule_peak_stash_rule(o, c->p, d, c->m);
        if (v == 1) cr_assert_eq(r.max_in_flight[d], rule, "device %d: %d in flight, rule %d", d, r.max_in_flight[d], rule);
        else cr_assert_leq(r.max_in_flight[d], rule);
    }
    if (hol) cr_assert_leq(idle, F * (c->p - 1), "zb-h2 p=%d m=%d: idle %.1f", c->p, c->m, idle);
    else
        cr_assert(ieee_ulp_eq(dbl, idle, want, 0), "%s p=%d m=%d: idle %.1f, ideal pipeline %.1f",
                  schedule_order_name(o), c->p, c->m, idle, want);
    if (o == SCHED_ZB_H1) {
        cr_assert(ieee_ulp_eq(dbl, r.step_us, F * (3 * c->m + c->p - 1), 0));
        for (int d = 0; d < c->p; d++)
            cr_assert(ieee_ulp_eq(dbl, r.bubble[d], (double)(c->p - 1) / (3.0 * c->m), 1), "device %d: %.17g", d,
                      r.bubble[d]);
    }
    if (o == SCHED_ZB_H2 && !hol) cr_assert_eq(idle, 0.0);
    if (o == SCHED_DUALPIPEV) cr_assert(ieee_ulp_eq(dbl, idle, F * (c->p - 1), 0));
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

ParameterizedTestParameters(sim_bubble, zb_h1_matches_closed_form) {
    static split_case cs[64];
    return cr_make_param_array(split_case, cs, (size_t)split_cases(cs, SCHED_ZB_H1, 1));
}
ParameterizedTest(split_case *c, sim_bubble, zb_h1_matches_closed_form) { check_split(c); }

ParameterizedTestParameters(sim_bubble, zb_h2_matches_closed_form) {
    static split_case cs[64];
    return cr_make_param_array(split_case, cs, (size_t)split_cases(cs, SCHED_ZB_H2, 2));
}
ParameterizedTest(split_case *c, sim_bubble, zb_h2_matches_closed_form) { check_split(c); }

ParameterizedTestParameters(sim_bubble, dualpipev_matches_closed_form) {
    static split_case cs[64];
    return cr_make_param_array(split_case, cs, (size_t)split_cases(cs, SCHED_DUALPIPEV, 2));
}
ParameterizedTest(split_case *c, sim_bubble, dualpipev_matches_closed_form) { check_split(c); }
