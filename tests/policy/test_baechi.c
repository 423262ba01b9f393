/*
 * test_baechi.c: Baechi's m-ETF and m-SCT baselines. Their placements are
 * evaluated like every candidate; with room to spare a list scheduler
 * keeps a chain on one device (no transfer can start earlier than the
 * device that just finished), and under a cap it spreads the nodes so that
 * every device's estimated share fits.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "baechi.h"
#include "policy_fixture.h"

static void check_candidate(fixture *f, const policy_cands *c, const char *label) {
    int j = policy_cands_best_with_prefix(c, label);
    cr_assert_geq(j, 0, "%s missing", label);
    const policy_cand *x = &c->items[j];
    for (int i = 0; i < f->g->n_nodes; i++) cr_assert(x->node_dev[i] >= 0 && x->node_dev[i] < f->p->n_devices);
    policy_eval e;
    cr_assert_eq(policy_evaluate_nodes(f->ev, x->node_dev, 1, &e), PL_OK);
    cr_assert_eq(e.cost_us, x->ev.cost_us, "%s: its figure is the simulator's", label);
}

Test(baechi, with_room_to_spare_a_chain_stays_on_one_device) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_NONE, 1, SCHED_GPIPE, 0, 1);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    char msg[256] = "";
    cr_assert_eq(search_etf(f.ev, c), PL_OK);
    check_candidate(&f, c, "m-etf");
    cr_assert_eq(c->items[0].ev.devices_used, 1);
    if (search_sct_available()) {
        cr_assert_eq(search_sct(f.ev, c, msg, sizeof msg), PL_OK, "%s", msg);
        check_candidate(&f, c, "m-sct");
        cr_assert_eq(c->items[1].ev.devices_used, 1);
    } else {
        cr_assert_eq(search_sct(f.ev, c, msg, sizeof msg), PL_ERR_UNSUPPORTED);
        cr_assert(strstr(msg, "GLPK"));
    }
    policy_cands_destroy(c);
    fixture_fini(&f);
}

Test(baechi, under_a_cap_the_nodes_spread_and_fit) {
    fixture f;
    graph *g = fixture_graph("default");
    profile_data *p = fixture_profile("t4x4-pcie", g, 4);
    /* a cap at 75% of what one device needs for the whole model (a cap under
     * the head's own need, about 40%, is infeasible for every placer) */
    fixture_init_with(&f, g, p, GROUPING_NONE, 1, SCHED_GPIPE, 0, 1);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    cr_assert_eq(search_single(f.ev, c), PL_OK);
    int64_t cap = (int64_t)(0.75 * (double)c->items[0].ev.peak_bytes);
    policy_cands_destroy(c);
    policy_evaluator_destroy(f.ev);
    schedule s = schedule_make(1, SCHED_GPIPE);
    char msg[256] = "";
    cr_assert_eq(policy_problem_init(&f.pb, f.g, f.gr, f.p, &s, cap, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(policy_evaluator_create(&f.pb, 1, &f.ev), PL_OK);
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    cr_assert_eq(search_etf(f.ev, c), PL_OK);
    check_candidate(&f, c, "m-etf");
    cr_assert_geq(c->items[0].ev.devices_used, 2);
    cr_assert_eq(c->items[0].ev.oom, 0, "the estimate is conservative: the placement fits (peak %lld cap %lld)",
                 (long long)c->items[0].ev.peak_bytes, (long long)cap);
    if (search_sct_available()) {
        cr_assert_eq(search_sct(f.ev, c, msg, sizeof msg), PL_OK, "%s", msg);
        check_candidate(&f, c, "m-sct");
        cr_assert_geq(c->items[1].ev.devices_used, 2);
        cr_assert_eq(c->items[1].ev.oom, 0, "m-sct: peak %lld cap %lld devs %d", (long long)c->items[1].ev.peak_bytes,
                     (long long)cap, c->items[1].ev.devices_used);
    }
    policy_cands_destroy(c);
    fixture_fini(&f);
}
