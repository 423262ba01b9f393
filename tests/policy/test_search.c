/*
 * test_search.c: the baselines and searches. Exhaustive search (with its
 * device-relabelling symmetry) against plain brute force; the DP against
 * exhaustive enumeration of the contiguous placements it optimises over.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <math.h>

#include "policy_fixture.h"
#include "search.h"
#include "util.h"

/* Brute force: every placement of the units, simulated one by one. */
static double brute_force(fixture *f, int *best) {
    const int U = f->gr->n_groups, D = f->p->n_devices;
    int *a = calloc((size_t)U, sizeof *a);
    double lo = INFINITY;
    do {
        policy_eval e;
        cr_assert_eq(policy_evaluate(f->ev, a, 1, &e), PL_OK);
        if (e.cost_us < lo) {
            lo = e.cost_us;
            memcpy(best, a, sizeof *a * (size_t)U);
        }
    } while (next_placement(a, U, D));
    free(a);
    return lo;
}

static void check_exhaustive(fixture *f, int expect_automorphisms) {
    int best[64];
    double bf = brute_force(f, best);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f->g->n_nodes, f->gr->n_groups, &c), PL_OK);
    search_exhaustive_info xi;
    char msg[256];
    cr_assert_eq(search_exhaustive(f->ev, 1e7, c, &xi, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(xi.n_automorphisms, expect_automorphisms);
    cr_assert(ieee_ulp_eq(dbl, c->items[0].ev.cost_us, bf, 0), "exhaustive %.3f vs brute force %.3f",
              c->items[0].ev.cost_us, bf);
    /* one simulation per orbit (Burnside's count), fewer than brute force when symmetric */
    cr_assert_eq((double)xi.evaluated, round(xi.orbits));
    if (expect_automorphisms > 1) cr_assert_lt((double)xi.evaluated, xi.space);
    else cr_assert_eq((double)xi.evaluated, xi.space);
    /* the reported placement really has that cost */
    policy_eval e;
    cr_assert_eq(policy_evaluate(f->ev, c->items[0].unit_dev, 1, &e), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, e.cost_us, bf, 0));
    policy_cands_destroy(c);
}

Test(search, exhaustive_equals_brute_force_tiny_nodes_on_2_identical_devices) {
    fixture f;
    fixture_init(&f, "tiny", "t4x4-pcie", 2, GROUPING_NONE, 2, SCHED_1F1B, 0, 2);
    cr_assert_eq(f.gr->n_groups, 16);
    check_exhaustive(&f, 2);
    fixture_fini(&f);
}

Test(search, exhaustive_equals_brute_force_9_groups_on_3_identical_devices) {
    fixture f;
    fixture_init(&f, "tiny,layers=4", "t4x4-pcie", 3, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 2);
    cr_assert_eq(f.gr->n_groups, 9);
    check_exhaustive(&f, 6);
    fixture_fini(&f);
}

Test(search, exhaustive_equals_brute_force_on_3_different_devices) {
    graph *g = fixture_graph("tiny,layers=4");
    profile_data *p = fixture_profile("t4x4-pcie", g, 3);
    fixture_make_heterogeneous(p, g);
    fixture f;
    fixture_init_with(&f, g, p, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    check_exhaustive(&f, 1);
    fixture_fini(&f);
}

Test(search, exhaustive_uses_partial_symmetry_of_4_devices_two_alike) {
    graph *g = fixture_graph("tiny");
    profile_data *p = fixture_profile("t4x4-pcie", g, 4);
    fixture_make_heterogeneous(p, g); /* devices 1 and 2 differ; 0 and 3 stay alike */
    fixture f;
    fixture_init_with(&f, g, p, GROUPING_COLOCATE, 2, SCHED_GPIPE, 0, 2);
    cr_assert_eq(f.gr->n_groups, 5);
    check_exhaustive(&f, 2);
    fixture_fini(&f);
}

Test(search, exhaustive_under_a_tight_cap_reports_the_best_that_fits) {
    fixture f;
    fixture_init(&f, "default,layers=4", "t4x4-pcie", 3, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 2);
    /* cap at 70% of the single-device peak: single devices run out */
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    cr_assert_eq(search_single(f.ev, c), PL_OK);
    int64_t cap = (int64_t)(0.7 * (double)c->items[0].ev.peak_bytes);
    policy_cands_destroy(c);
    graph *g = f.g;
    f.g = NULL;
    profile_data *p = f.p;
    f.p = NULL;
    fixture_fini(&f);
    fixture_init_with(&f, g, p, GROUPING_COLOCATE, 1, SCHED_GPIPE, cap, 2);
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    cr_assert_eq(search_single(f.ev, c), PL_OK);
    for (int i = 0; i < c->n; i++) cr_assert(c->items[i].ev.oom, "single device must not fit");
    policy_cands_destroy(c);
    check_exhaustive(&f, 6);
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    char msg[256];
    cr_assert_eq(search_exhaustive(f.ev, 1e7, c, NULL, msg, sizeof msg), PL_OK);
    cr_assert_not(c->items[0].ev.oom, "a split fits under the cap");
    cr_assert_geq(c->items[0].ev.devices_used, 2);
    policy_cands_destroy(c);
    fixture_fini(&f);
}

Test(search, exhaustive_refuses_a_space_over_the_limit) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_NONE, 1, SCHED_GPIPE, 0, 1);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    char msg[256] = "";
    search_exhaustive_info xi;
    cr_assert_eq(search_exhaustive(f.ev, 1e6, c, &xi, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "--max-evals") != NULL, "%s", msg);
    cr_assert_eq(c->n, 0);
    policy_cands_destroy(c);
    fixture_fini(&f);
}

Test(search, default_gpt_13_groups_on_4_identical_devices_has_2798251_orbits) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    search_exhaustive_info xi;
    char msg[256];
    /* refuse just below the count, so nothing runs but the count is checked */
    cr_assert_eq(search_exhaustive(f.ev, 2798250, c, &xi, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(xi.n_automorphisms, 24);
    cr_assert(ieee_ulp_eq(dbl, xi.orbits, 2798251.0, 4)); /* S(13,1)+S(13,2)+S(13,3)+S(13,4) */
    policy_cands_destroy(c);
    fixture_fini(&f);
}

/* ---- the DP --------------------------------------------------------------- */

/* 1 when a is a contiguous placement on distinct devices (the DP's domain). */
static int contiguous_distinct(const int *a, int U) {
    unsigned used = 0;
    for (int u = 0; u < U; u++) {
        if (u > 0 && a[u] == a[u - 1]) continue;
        if (used >> a[u] & 1) return 0;
        used |= 1u << a[u];
    }
    return 1;
}

typedef struct {
    char config[32];
    int n_dev;
    int m;
    int order;
    double cap_frac; /* of the single-device peak; 0 = none */
    int hetero;
} dp_case;

static void dp_setup(fixture *f, const dp_case *k) {
    graph *g = fixture_graph(k->config);
    profile_data *p = fixture_profile("t4x4-pcie", g, k->n_dev);
    if (k->hetero) fixture_make_heterogeneous(p, g);
    fixture_init_with(f, g, p, GROUPING_COLOCATE, k->m, (schedule_order)k->order, 0, 2);
    if (k->cap_frac > 0) {
        policy_cands *c = NULL;
        cr_assert_eq(policy_cands_create(f->g->n_nodes, f->gr->n_groups, &c), PL_OK);
        cr_assert_eq(search_single(f->ev, c), PL_OK);
        int64_t cap = (int64_t)(k->cap_frac * (double)c->items[0].ev.peak_bytes);
        policy_cands_destroy(c);
        g = f->g;
        p = f->p;
        f->g = NULL;
        f->p = NULL;
        fixture_fini(f);
        fixture_init_with(f, g, p, GROUPING_COLOCATE, k->m, (schedule_order)k->order, cap, 2);
    }
    cr_assert(f->gr->chain, "the grouped GPT is a chain");
}

ParameterizedTestParameters(search, dp_optimum_equals_enumeration_of_its_estimate) {
    static dp_case cases[] = {
        {"tiny,layers=4", 3, 1, SCHED_GPIPE, 0, 0},     {"tiny,layers=4", 3, 4, SCHED_1F1B, 0, 0},
        {"tiny,layers=4", 3, 4, SCHED_GPIPE, 0, 1},     {"default,layers=4", 3, 2, SCHED_1F1B, 0.7, 1},
        {"default,layers=4", 4, 4, SCHED_1F1B, 0.6, 0}, {"default", 2, 4, SCHED_1F1B, 0, 0},
        {"default", 3, 1, SCHED_GPIPE, 0.7, 1},         {"default", 4, 4, SCHED_GPIPE, 0.8, 0},
    };
    return cr_make_param_array(dp_case, cases, sizeof cases / sizeof cases[0]);
}

/* The DP's claim, checked literally: its best estimate is the minimum of
 * search_dp_estimate over every contiguous placement on distinct devices
 * that fits the estimated caps. */
ParameterizedTest(dp_case *k, search, dp_optimum_equals_enumeration_of_its_estimate) {
    fixture f;
    dp_setup(&f, k);
    const int U = f.gr->n_groups, D = f.p->n_devices;
    int *a = calloc((size_t)U, sizeof *a);
    double lo = INFINITY;
    int n_dom = 0;
    do {
        if (!contiguous_distinct(a, U)) continue;
        n_dom++;
        int ok = 0;
        double t = search_dp_estimate(&f.pb, a, &ok);
        cr_assert(isfinite(t));
        if (ok && t < lo) lo = t;
    } while (next_placement(a, U, D));
    free(a);
    cr_assert_gt(n_dom, 0);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, U, &c), PL_OK);
    search_dp_info info;
    cr_assert_eq(search_dp(f.ev, c, &info), PL_OK);
    cr_assert(isfinite(lo), "some contiguous placement fits");
    cr_assert(info.mem_feasible);
    /* equal up to summation order */
    cr_assert(fabs(info.best_estimate_us - lo) <= 1e-12 * lo, "dp %.9f vs enumeration %.9f (%s, %d dev, m=%d)",
              info.best_estimate_us, lo, k->config, D, k->m);
    /* and its candidates carry their estimate and a simulated cost */
    cr_assert_gt(c->n, 0);
    double est = search_dp_estimate(&f.pb, c->items[0].unit_dev, NULL);
    cr_assert(fabs(c->items[0].aux - est) <= 1e-12 * est, "aux %.9f vs estimate %.9f", c->items[0].aux, est);
    policy_cands_destroy(c);
    fixture_fini(&f);
}

/* With m = 1, zero optimizer cost and no contention, the estimate is the
 * simulated step time of every contiguous placement, so the DP's answer is
 * the simulator's optimum over the contiguous placements. */
Test(search, dp_equals_exhaustive_simulation_on_chain_with_m1) {
    graph *g = fixture_graph("default,layers=4");
    profile_data *p = fixture_profile("t4x4-pcie", g, 3);
    fixture_make_heterogeneous(p, g);
    for (int d = 0; d < p->n_devices; d++)
        for (int k = 0; k < p->n_mb; k++)
            for (int i = 0; i < p->n_nodes; i++) p->cost_us[profile_cost_index(p, d, k, i, PHASE_OPT)] = 0.0;
    fixture f;
    fixture_init_with(&f, g, p, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 2);
    const int U = f.gr->n_groups, D = f.p->n_devices;
    int *a = calloc((size_t)U, sizeof *a);
    double lo = INFINITY;
    int n_split = 0;
    do {
        if (!contiguous_distinct(a, U)) continue;
        policy_eval e;
        cr_assert_eq(policy_evaluate(f.ev, a, 1, &e), PL_OK);
        double t = search_dp_estimate(&f.pb, a, NULL);
        /* same sums in a different order: equal to rounding (1e-12 relative) */
        cr_assert(fabs(t - e.step_us) <= 1e-12 * e.step_us, "estimate %.9f vs simulated %.9f", t, e.step_us);
        if (e.cost_us < lo) lo = e.cost_us;
        n_split += e.devices_used > 1;
    } while (next_placement(a, U, D));
    free(a);
    cr_assert_gt(n_split, 0);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, U, &c), PL_OK);
    cr_assert_eq(search_dp(f.ev, c, NULL), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, c->items[0].ev.cost_us, lo, 64), "dp %.6f vs exhaustive %.6f", c->items[0].ev.cost_us, lo);
    cr_assert_geq(c->items[0].ev.devices_used, 2, "the heterogeneous devices make a split pay");
    policy_cands_destroy(c);
    fixture_fini(&f);
}

/* ---- the other baselines ---------------------------------------------------- */

Test(search, single_and_human_splits_cover_every_device_assignment) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    policy_cands *c = NULL;
    cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c), PL_OK);
    cr_assert_eq(search_single(f.ev, c), PL_OK);
    cr_assert_eq(c->n, 4);
    for (int d = 0; d < 4; d++) {
        for (int i = 0; i < f.g->n_nodes; i++) cr_assert_eq(c->items[d].node_dev[i], d);
        cr_assert(ieee_ulp_eq(dbl, c->items[d].ev.step_us, c->items[0].ev.step_us, 0), "identical devices");
    }
    cr_assert_eq(search_human(f.ev, c), PL_OK);
    /* layer splits over 2, 3, 4 devices: 12 + 24 + 24 arrangements; emb|body|head 24; two 2-way: 12 + 12 */
    cr_assert_eq(c->n, 4 + 12 + 24 + 24 + 24 + 12 + 12);
    int found = 0;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->items[i].label, "human layers 3|3 on 0,1")) {
            found = 1;
            cr_assert_eq(c->items[i].node_dev[0], 0);  /* embedding with the first half */
            cr_assert_eq(c->items[i].node_dev[18], 0); /* res2.2 */
            cr_assert_eq(c->items[i].node_dev[19], 1); /* ln1.3 */
            cr_assert_eq(c->items[i].node_dev[39], 1); /* loss */
        }
    cr_assert(found);
    policy_cands_destroy(c);
    fixture_fini(&f);
}

Test(search, budgeted_searches_respect_budget_and_seed) {
    fixture f;
    fixture_init(&f, "default", "h200x2-nvlink", 2, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    double curve1[300], curve2[300];
    for (int method = 0; method < 3; method++) {
        policy_cands *c1 = NULL, *c2 = NULL;
        cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c1), PL_OK);
        cr_assert_eq(policy_cands_create(f.g->n_nodes, f.gr->n_groups, &c2), PL_OK);
        search_budget b1 = {300, 8, 7, curve1}, b2 = {300, 8, 7, curve2};
        pl_status (*fn)(policy_evaluator *, const search_budget *, policy_cands *) =
            method == 0 ? search_random : method == 1 ? search_anneal : search_local;
        cr_assert_eq(fn(f.ev, &b1, c1), PL_OK);
        cr_assert_eq(fn(f.ev, &b2, c2), PL_OK);
        cr_assert_eq(c1->n, 1);
        cr_assert_arr_eq(c1->items[0].unit_dev, c2->items[0].unit_dev, sizeof(int) * (size_t)f.gr->n_groups);
        for (int i = 1; i < 300; i++) cr_assert_leq(curve1[i], curve1[i - 1], "best-so-far never rises");
        cr_assert(ieee_ulp_eq(dbl, curve1[299], c1->items[0].ev.cost_us, 0));
        cr_assert_arr_eq(curve1, curve2, sizeof curve1);
        policy_cands_destroy(c1);
        policy_cands_destroy(c2);
    }
    fixture_fini(&f);
}

Test(search, parallel_evaluation_matches_one_thread) {
    fixture f1, f2;
    fixture_init(&f1, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 1);
    fixture_init(&f2, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 3);
    enum { N = 37 };
    int rows[N * 13];
    pl_rng r;
    pl_rng_seed(&r, 5);
    for (int i = 0; i < N * 13; i++) rows[i] = pl_rng_int(&r, 4);
    policy_eval e1[N], e2[N];
    cr_assert_eq(policy_evaluate(f1.ev, rows, N, e1), PL_OK);
    cr_assert_eq(policy_evaluate(f2.ev, rows, N, e2), PL_OK);
    for (int i = 0; i < N; i++) {
        cr_assert(ieee_ulp_eq(dbl, e1[i].step_us, e2[i].step_us, 0));
        cr_assert_eq(e1[i].peak_bytes, e2[i].peak_bytes);
    }
    rows[5] = 7; /* out of range */
    cr_assert_eq(policy_evaluate(f2.ev, rows, N, e2), PL_ERR_PLACEMENT_RANGE);
    fixture_fini(&f1);
    fixture_fini(&f2);
}
