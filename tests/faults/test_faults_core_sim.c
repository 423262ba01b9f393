/*
 * test_faults_core_sim.c: make the N-th allocation fail for N = 0, 1, ...
 * until a call completes, in the graph builder, the profile code, the spec
 * profile builder and the simulator. Each failure must come back as
 * PL_ERR_NOMEM with nothing leaked; sim_run must not allocate at all.
 */
#include <criterion/criterion.h>

#include "failalloc.h"
#include "graph.h"
#include "profile_data.h"
#include "sim.h"
#include "spec.h"

/* Run op with the n-th allocation failing for n = 0.. until it succeeds.
 * op returns a status and must clean up after itself. */
static int sweep(pl_status (*op)(void)) {
    for (long n = 0; n < 100000; n++) {
        long live0 = failalloc_live();
        failalloc_arm(n);
        pl_status st = op();
        int fired = failalloc_fired();
        failalloc_arm(-1);
        cr_assert_eq(failalloc_live(), live0, "leak after failing allocation %ld (status %d)", n, st);
        if (!fired) {
            cr_assert_eq(st, PL_OK, "completed without a failure but returned %d", st);
            return (int)n; /* allocations the whole call needs */
        }
        cr_assert_eq(st, PL_ERR_NOMEM, "allocation %ld failed but status was %d", n, st);
    }
    cr_assert_fail("never completed");
    return -1;
}

static pl_status op_graph(void) {
    gpt_config c;
    pl_status st = gpt_config_parse("default", &c, NULL, 0);
    if (st) return st;
    graph *g = NULL;
    st = graph_build_gpt(&c, &g, NULL, 0);
    graph_destroy(g);
    return st;
}

static pl_status op_spec_and_clone(void) {
    gpt_config c;
    gpt_config_parse("default", &c, NULL, 0);
    graph *g = NULL;
    profile_data *p = NULL, *q = NULL;
    pl_status st = graph_build_gpt(&c, &g, NULL, 0);
    if (st) goto out;
    int mb[3] = {4, 8, 16};
    st = spec_profile_build(spec_find("h200x2-nvlink"), g, mb, 3, &p);
    if (st) goto out;
    st = profile_data_clone(p, &q);
out:
    profile_data_destroy(q);
    profile_data_destroy(p);
    graph_destroy(g);
    return st;
}

static graph *G;
static profile_data *P;

static pl_status op_sim_ctx(void) {
    sim_ctx *ctx = NULL;
    pl_status st = sim_ctx_create(G, P, 8, &ctx);
    if (st == PL_OK) st = sim_ctx_set_trace(ctx, 1);
    if (st == PL_OK) {
        int place[40];
        for (int i = 0; i < 40; i++) place[i] = i >= 20;
        schedule s = schedule_make(4, SCHED_1F1B);
        sim_result r;
        pl_status rs = sim_run(ctx, place, &s, NULL, NULL, &r);
        if (rs != PL_OK && rs != PL_ERR_NOMEM) st = PL_ERR_INVALID;
        else st = rs;
    }
    sim_ctx_destroy(ctx);
    return st;
}

static void setup_sim(void) {
    gpt_config c;
    gpt_config_parse("default", &c, NULL, 0);
    cr_assert_eq(graph_build_gpt(&c, &G, NULL, 0), PL_OK);
    int mb[3] = {4, 8, 16};
    cr_assert_eq(spec_profile_build(spec_find("h200x2-nvlink"), G, mb, 3, &P), PL_OK);
}

static void teardown_sim(void) {
    profile_data_destroy(P);
    graph_destroy(G);
}

Test(faults, graph_builder_fails_cleanly_at_every_allocation) {
    int n = sweep(op_graph);
    cr_assert_gt(n, 2);
}

Test(faults, spec_profile_and_clone_fail_cleanly_at_every_allocation) {
    int n = sweep(op_spec_and_clone);
    cr_assert_gt(n, 5);
}

Test(faults, simulator_context_fails_cleanly_at_every_allocation, .init = setup_sim, .fini = teardown_sim) {
    int n = sweep(op_sim_ctx);
    cr_assert_gt(n, 0);
}

Test(faults, sim_run_allocates_nothing, .init = setup_sim, .fini = teardown_sim) {
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(G, P, 8, &ctx), PL_OK);
    int place[40];
    for (int i = 0; i < 40; i++) place[i] = (i * 7) % 2;
    schedule s = schedule_make(8, SCHED_1F1B);
    sim_result r;
    failalloc_arm(-1);
    for (int k = 0; k < 100; k++) {
        place[k % 40] ^= 1;
        cr_assert_eq(sim_run(ctx, place, &s, NULL, NULL, &r), PL_OK);
    }
    cr_assert_eq(failalloc_count(), 0, "sim_run allocated %ld times", failalloc_count());
    sim_ctx_destroy(ctx);
}
