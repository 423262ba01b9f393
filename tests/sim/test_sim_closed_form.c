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
 * (hw/hw.h; the bubble is the same either way). */
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
