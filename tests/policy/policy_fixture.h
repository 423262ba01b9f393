/*
 * policy_fixture.h: small problems for the policy tests, built in memory
 * from spec profiles (no database needed).
 */
#ifndef PLACER_TESTS_POLICY_FIXTURE_H
#define PLACER_TESTS_POLICY_FIXTURE_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator.h"
#include "graph.h"
#include "grouping.h"
#include "session.h"
#include "spec.h"

typedef struct {
    graph *g;
    grouping *gr;
    profile_data *p;
    policy_problem pb;
    policy_evaluator *ev;
} fixture;

/* A spec profile of config on spec machine, restricted to n_dev devices. */
static inline profile_data *fixture_profile(const char *spec, const graph *g, int n_dev) {
    static const int mbs[] = {1, 2, 4, 8, 16};
    int n_mb = 0;
    int sizes[5];
    for (int i = 0; i < 5; i++)
        if (mbs[i] <= g->cfg.batch) sizes[n_mb++] = mbs[i];
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(spec_find(spec), g, sizes, n_mb, &p), PL_OK);
    if (n_dev > 0 && n_dev < p->n_devices) {
        profile_data *q = NULL;
        cr_assert_eq(policy_profile_subset(p, n_dev, &q), PL_OK);
        profile_data_destroy(p);
        p = q;
    }
    return p;
}

static inline graph *fixture_graph(const char *config) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse(config, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK, "%s", msg);
    return g;
}

/* Problem over an existing profile (owned by the fixture from now on). */
static inline void fixture_init_with(fixture *f, graph *g, profile_data *p, grouping_mode gm, int m,
                                     schedule_order o, int64_t cap, int threads) {
    memset(f, 0, sizeof *f);
    f->g = g;
    f->p = p;
    char msg[256];
    cr_assert_eq(grouping_build(g, gm, &f->gr, msg, sizeof msg), PL_OK);
    schedule s = schedule_make(m, o);
    cr_assert_eq(policy_problem_init(&f->pb, g, f->gr, p, &s, cap, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(policy_evaluator_create(&f->pb, threads, &f->ev), PL_OK);
}

static inline void fixture_init(fixture *f, const char *config, const char *spec, int n_dev, grouping_mode gm, int m,
                                schedule_order o, int64_t cap, int threads) {
    graph *g = fixture_graph(config);
    fixture_init_with(f, g, fixture_profile(spec, g, n_dev), gm, m, o, cap, threads);
}

static inline void fixture_fini(fixture *f) {
    policy_evaluator_destroy(f->ev);
    grouping_destroy(f->gr);
    profile_data_destroy(f->p);
    graph_destroy(f->g);
}

/* Make devices differ: device d's compute costs scaled per op kind, so no
 * relabelling leaves the problem unchanged and splitting can pay. */
static inline void fixture_make_heterogeneous(profile_data *p, const graph *g) {
    for (int d = 0; d < p->n_devices; d++)
        for (int k = 0; k < p->n_mb; k++)
            for (int i = 0; i < p->n_nodes; i++) {
                double s = 1.0;
                if (d == 1 && g->nodes[i].kind == OP_ATTENTION) s = 0.4;
                if (d == 1 && g->nodes[i].kind == OP_MLP) s = 1.8;
                if (d == 2 && g->nodes[i].kind == OP_HEAD) s = 0.5;
                if (d == 2 && g->nodes[i].kind == OP_ATTENTION) s = 1.5;
                for (int ph = 0; ph < PHASE_OPT; ph++) p->cost_us[profile_cost_index(p, d, k, i, ph)] *= s;
            }
}

/* Odometer over all n^U placements; returns 0 after the last. */
static inline int next_placement(int *a, int U, int n) {
    for (int i = U - 1; i >= 0; i--) {
        if (++a[i] < n) return 1;
        a[i] = 0;
    }
    return 0;
}

#endif
