/*
 * test_experts.c: expert placement (policy/experts/): EPLB reproduced on its
 * README example and the FlashLB toy, the exact program's optimum and the
 * lower bounds, the refinement and node-aware packing's contracts, the
 * planner's maps (valid, deterministic, independent of the threads) and the
 * relabelling of re-plans.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eplb.h"
#include "exact.h"
#include "expert_gen.h"
#include "experts.h"
#include "nodelpt.h"
#include "refine.h"

/* the busiest GPU's load of phy2log under the even split */
static double busiest(const eplb_shape *s, const double *w, const int32_t *p) {
    int cnt[4096] = {0};
    for (int i = 0; i < s->n_slots; i++) cnt[p[i]]++;
    const int S = s->n_slots / s->n_gpus;
    double mx = 0;
    for (int g = 0; g < s->n_gpus; g++) {
        double v = 0;
        for (int j = 0; j < S; j++) v += w[p[g * S + j]] / cnt[p[g * S + j]];
        if (v > mx) mx = v;
    }
    return mx;
}

static void valid_map(const eplb_shape *s, const int32_t *p) {
    int cnt[4096] = {0};
    for (int i = 0; i < s->n_slots; i++) {
        cr_assert(p[i] >= 0 && p[i] < s->n_experts, "slot %d holds %d", i, p[i]);
        cnt[p[i]]++;
    }
    for (int e = 0; e < s->n_experts; e++) cr_assert_gt(cnt[e], 0, "expert %d has no slot", e);
}

/* deepseek-ai/EPLB README: two layers of 12 experts, 16 replicas, 4 groups, 2 nodes, 8 GPUs */
static const double README_W[2][12] = {{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
                                       {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
static const int32_t README_PHY2LOG[2][16] = {{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
                                              {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}};

Test(eplb, reproduces_the_readme_example_exactly) {
    const eplb_shape s = {12, 16, 8, 4, 4};
    eplb_work *wk = NULL;
    cr_assert_eq(eplb_work_create(&s, &wk), PL_OK);
    for (int l = 0; l < 2; l++) {
        int32_t p[16], r[16];
        int hier = 0;
        cr_assert_eq(eplb_auto(wk, &s, README_W[l], p, r, &hier), PL_OK);
        cr_assert(hier, "4 groups on 2 nodes: the hierarchical policy");
        cr_assert_arr_eq(p, README_PHY2LOG[l], sizeof p, "layer %d", l);
    }
    eplb_work_destroy(wk);
}

/* vllm-project/vllm-ascend PR 3042 (FlashLB): loads [600,560,120,120,20,10,10,10], 8 GPUs, 2 slots each */
static const double TOY[8] = {600, 560, 120, 120, 20, 10, 10, 10};

Test(eplb, flashlb_toy_busiest_gpu_carries_232) {
    const eplb_shape s = {8, 16, 8, 8, 0};
    eplb_work *wk = NULL;
    cr_assert_eq(eplb_work_create(&s, &wk), PL_OK);
    int32_t p[16];
    cr_assert_eq(eplb_auto(wk, &s, TOY, p, NULL, NULL), PL_OK); /* one node: global */
    valid_map(&s, p);
    cr_assert(fabs(busiest(&s, TOY, p) - 232.0) < 1e-9, "EPLB's busiest %g", busiest(&s, TOY, p));
    eplb_work_destroy(wk);
}

Test(eplb, hierarchical_refuses_shapes_it_cannot_take) {
    const eplb_shape s = {12, 16, 8, 4, 3}; /* 3 groups on 2 nodes */
    eplb_work *wk = NULL;
    cr_assert_eq(eplb_work_create(&s, &wk), PL_OK);
    int32_t p[16];
    cr_assert_eq(eplb_hierarchical(wk, &s, README_W[0], p, NULL), PL_ERR_INVALID);
    int hier = 1;
    cr_assert_eq(eplb_auto(wk, &s, README_W[0], p, NULL, &hier), PL_OK);
    cr_assert_eq(hier, 0, "EPLB falls back to its global policy");
    valid_map(&s, p);
    eplb_work_destroy(wk);
}

Test(eplb, load_unaware_baselines_hold_every_expert) {
    const eplb_shape s = {12, 16, 8, 4, 4};
    int32_t p[16];
    eplb_contiguous(&s, p);
    valid_map(&s, p);
    cr_assert_eq(p[12], 0);
    eplb_round_robin(&s, p);
    valid_map(&s, p);
    cr_assert_eq(p[1 * 2 + 0], 1, "expert 1's first slot on GPU 1");
}

Test(exact, flashlb_toy_optimum_is_196_67_and_proven) {
    const eplb_shape s = {8, 16, 8, 8, 0};
    int32_t p[16];
    double b = 0, bound = 0;
    int proven = 0;
    char msg[256] = "";
    cr_assert_eq(experts_exact(&s, TOY, 60, p, &b, &bound, &proven, msg, sizeof msg), PL_OK, "%s", msg);
    valid_map(&s, p);
    cr_assert(proven);
    cr_assert(fabs(b - 590.0 / 3.0) < 1e-6, "optimum %g", b);
    cr_assert(fabs(busiest(&s, TOY, p) - b) < 1e-9);
    const double lb = experts_lower_bound(&s, TOY);
    cr_assert(lb <= b + 1e-9 && fabs(lb - 181.25) < 1e-9, "bound %g", lb);
}

Test(exact, optimum_beats_eplb_and_respects_the_bound_on_small_random_layers) {
    expert_gen_params p;
    expert_gen_params_default(&p);
    p.layers = 4, p.experts = 8, p.groups = 4, p.topk_groups = 2, p.top_k = 2, p.topics = 3, p.route_tokens = 200;
    p.samples = 0, p.popularity_sd[0] = 0.3, p.popularity_sd[1] = 0.8, p.topic_affinity[0] = 0.3;
    p.topic_affinity[1] = 0.6;
    expert_load *ld = NULL;
    char msg[256] = "";
    cr_assert_eq(expert_gen_run(&p, 1, 4, &ld, msg, sizeof msg), PL_OK, "%s", msg);
    const eplb_shape s = {8, 12, 4, 4, 0};
    eplb_work *wk = NULL;
    cr_assert_eq(eplb_work_create(&s, &wk), PL_OK);
    for (int l = 0; l < 4; l++) {
        const double *w = expert_load_row_c(ld, 0, l);
        int32_t a[12], b[12];
        double opt = 0;
        int proven = 0;
        cr_assert_eq(experts_exact(&s, w, 60, a, &opt, NULL, &proven, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert(proven, "layer %d", l);
        eplb_global(wk, &s, w, b, NULL);
        cr_assert_leq(opt, busiest(&s, w, b) + 1e-9, "layer %d: the optimum is no worse than EPLB", l);
        cr_assert_geq(opt, experts_lower_bound(&s, w) - 1e-9, "layer %d: nor better than the bound", l);
    }
    eplb_work_destroy(wk);
    expert_load_destroy(ld);
}

Test(exact, pigeonhole_bound_without_spare_slots) {
    /* 4 experts on 2 GPUs of 2 slots: some GPU holds two of the three heaviest: >= 3 + 2 */
    const eplb_shape s = {4, 4, 2, 2, 0};
    const double w[4] = {4, 3, 2, 1};
    cr_assert(fabs(experts_lower_bound(&s, w) - 5.0) < 1e-12, "%g", experts_lower_bound(&s, w));
}

Test(refine, never_worsens_its_objective_and_keeps_the_map_valid) {
    expert_gen_params p;
    char msg[256] = "";
    cr_assert_eq(expert_gen_params_load("inference-skew", &p, msg, sizeof msg), PL_OK, "%s", msg);
    p.layers = 2, p.route_tokens = 128;
    expert_load *ld = NULL;
    cr_assert_eq(expert_gen_run(&p, 1, 2, &ld, msg, sizeof msg), PL_OK, "%s", msg);
    const eplb_shape s = {256, 320, 64, 8, 8};
    eplb_work *wk = NULL;
    refine_work *rw = NULL;
    cr_assert_eq(eplb_work_create(&s, &wk), PL_OK);
    cr_assert_eq(refine_work_create(&s, ld->n_samples, ld->sample_k, &rw), PL_OK);
    for (int l = 0; l < 2; l++) {
        int32_t m[320];
        const double *w = expert_load_row_c(ld, 0, l);
        cr_assert_eq(eplb_hierarchical(wk, &s, w, m, NULL), PL_OK);
        refine_opts o;
        memset(&o, 0, sizeof o);
        o.n_scen = 1, o.scen[0] = w, o.scen_weight[0] = 1;
        o.samples = expert_load_samples_c(ld, 0, l), o.n_samples = ld->n_samples, o.sample_k = ld->sample_k;
        double c0 = 0;
        experts_refine_objective(rw, &s, &o, m, &c0);
        o.copies_cap = c0 * 1.03, o.replicate = 1, o.max_moves = 40;
        refine_stats st;
        cr_assert_eq(experts_refine(rw, &s, &o, m, &st), PL_OK);
        valid_map(&s, m);
        cr_assert_leq(st.f_end, st.f_start + 1e-12, "layer %d: %g -> %g", l, st.f_start, st.f_end);
        cr_assert_gt(st.moves, 0);
        cr_assert_leq(st.copies_end, c0 * 1.03 + 1e-9, "the cap holds: %g > %g", st.copies_end, c0 * 1.03);
        double c1 = 0;
        const double f1 = experts_refine_objective(rw, &s, &o, m, &c1);
        cr_assert(fabs(f1 - st.f_end) < 1e-9 && fabs(c1 - st.copies_end) < 1e-9, "the objective recomputed agrees");
    }
    refine_work_destroy(rw);
    eplb_work_destroy(wk);
    expert_load_destroy(ld);
}

Test(nodelpt, mu_zero_is_eplb_global_and_a_large_mu_keeps_replicas_home) {
    expert_gen_params p;
    char msg[256] = "";
    cr_assert_eq(expert_gen_params_load("inference-skew", &p, msg, sizeof msg), PL_OK, "%s", msg);
    p.layers = 1, p.route_tokens = 128;
    expert_load *ld = NULL;
    cr_assert_eq(expert_gen_run(&p, 1, 8, &ld, msg, sizeof msg), PL_OK, "%s", msg);
    const eplb_shape s = {256, 320, 64, 8, 8};
    const double *w = expert_load_row_c(ld, 0, 0);
    eplb_work *wk = NULL;
    nodelpt_work *nw = NULL;
    refine_work *rw = NULL;
    cr_assert_eq(eplb_work_create(&s, &wk), PL_OK);
    cr_assert_eq(nodelpt_work_create(&s, &nw), PL_OK);
    cr_assert_eq(refine_work_create(&s, ld->n_samples, ld->sample_k, &rw), PL_OK);
    cr_assert_eq(nodelpt_prepare(nw, &s, w, expert_load_samples_c(ld, 0, 0), ld->n_samples, ld->sample_k, 8), PL_OK);
    int32_t a[320], g[320], h[320];
    nodelpt_pack(nw, 0.0, a);
    eplb_global(wk, &s, w, g, NULL);
    valid_map(&s, a);
    cr_assert(fabs(busiest(&s, w, a) - busiest(&s, w, g)) < 1e-9 * busiest(&s, w, g), "mu 0: EPLB global's balance");
    refine_opts o;
    memset(&o, 0, sizeof o);
    o.n_scen = 1, o.scen[0] = w, o.scen_weight[0] = 1, o.copies_cap = INFINITY;
    o.samples = expert_load_samples_c(ld, 0, 0), o.n_samples = ld->n_samples, o.sample_k = ld->sample_k;
    double ca = 0, cb = 0, ch = 0;
    experts_refine_objective(rw, &s, &o, a, &ca);
    nodelpt_pack(nw, 1e6, a);
    valid_map(&s, a);
    experts_refine_objective(rw, &s, &o, a, &cb);
    eplb_hierarchical(wk, &s, w, h, NULL);
    experts_refine_objective(rw, &s, &o, h, &ch);
    cr_assert_lt(cb, ca, "a large mu reaches fewer nodes (%g) than mu 0 (%g)", cb, ca);
    cr_assert_lt(cb, ch * 1.10, "and nearly hierarchical's (%g vs %g)", cb, ch);
    refine_work_destroy(rw);
    nodelpt_work_destroy(nw);
    eplb_work_destroy(wk);
    expert_load_destroy(ld);
}

Test(experts_plan, small_layers_come_within_one_percent_of_the_optimum) {
    /* the FlashLB toy as a one-layer load, and the search on its known load */
    expert_load *ld = NULL;
    char msg[256] = "";
    cr_assert_eq(expert_load_create(1, 1, 8, 0, 0, 0, &ld, msg, sizeof msg), PL_OK);
    memcpy(expert_load_row(ld, 0, 0), TOY, sizeof TOY);
    ld->top_k = 2;
    experts_options o = {.shape = {8, 16, 8, 8, 0}, .top_k = 2, .copies_margin = -1, .threads = 1};
    experts_planner *pp = NULL;
    expert_map *m = NULL;
    cr_assert_eq(experts_planner_create(&o, 0, 0, &pp, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(expert_map_create(1, 8, 16, 8, 8, &m, msg, sizeof msg), PL_OK);
    cr_assert_eq(experts_plan(pp, EXPERTS_SEARCH, ld, 0, NULL, m, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    const double got = busiest(&o.shape, TOY, m->phy2log), opt = 590.0 / 3.0;
    cr_assert_leq(got, opt * 1.01, "search %g against the optimum %g", got, opt);
    experts_planner_destroy(pp);
    expert_map_destroy(m);
    expert_load_destroy(ld);
}

Test(experts_plan, every_placer_gives_valid_maps_deterministically_whatever_the_threads) {
    expert_gen_params p;
    char msg[256] = "";
    cr_assert_eq(expert_gen_params_load("domain-shift", &p, msg, sizeof msg), PL_OK, "%s", msg);
    p.layers = 5, p.route_tokens = 128;
    expert_load *ld = NULL;
    cr_assert_eq(expert_gen_run(&p, 3, 9, &ld, msg, sizeof msg), PL_OK, "%s", msg);
    experts_model model;
    experts_model_default(&model);
    model.scen_weight[1] = 0.5, model.mu = 4.0;
    experts_options o = {.shape = {256, 288, 32, 8, 8}, .top_k = 8, .copies_margin = 0.03, .model = &model};
    for (int pl = 0; pl < EXPERTS_PLACER_COUNT; pl++) {
        if (pl == EXPERTS_EXACT) continue; /* DeepSeek-V3's layers are too big for it */
        expert_map *m[2] = {NULL, NULL};
        for (int i = 0; i < 2; i++) {
            experts_planner *pp = NULL;
            o.threads = i ? 3 : 1;
            cr_assert_eq(experts_planner_create(&o, ld->n_samples, ld->sample_k, &pp, msg, sizeof msg), PL_OK, "%s", msg);
            cr_assert_eq(expert_map_create(5, 256, 288, 32, 8, &m[i], msg, sizeof msg), PL_OK);
            experts_plan_info info;
            cr_assert_eq(experts_plan(pp, pl, ld, 2, NULL, m[i], &info, msg, sizeof msg), PL_OK, "%s: %s",
                         experts_placer_name(pl), msg);
            cr_assert_eq(expert_map_validate(m[i], msg, sizeof msg), PL_OK, "%s: %s", experts_placer_name(pl), msg);
            cr_assert_eq(info.layers, 5);
            experts_planner_destroy(pp);
        }
        cr_assert_arr_eq(m[0]->phy2log, m[1]->phy2log, sizeof(int32_t) * 5 * 288, "%s: 1 and 3 threads differ",
                         experts_placer_name(pl));
        expert_map_destroy(m[0]);
        expert_map_destroy(m[1]);
    }
    expert_load_destroy(ld);
}

Test(experts_plan, relabelling_keeps_loads_and_moves_fewer_weights) {
    expert_gen_params p;
    char msg[256] = "";
    cr_assert_eq(expert_gen_params_load("inference-skew", &p, msg, sizeof msg), PL_OK, "%s", msg);
    p.layers = 3, p.route_tokens = 128;
    expert_load *ld = NULL;
    cr_assert_eq(expert_gen_run(&p, 2, 6, &ld, msg, sizeof msg), PL_OK, "%s", msg);
    const eplb_shape s = {256, 320, 64, 8, 8};
    experts_options o = {.shape = s, .top_k = 8, .copies_margin = -1, .threads = 1};
    experts_planner *pp = NULL;
    expert_map *a = NULL, *b = NULL, *c = NULL;
    cr_assert_eq(experts_planner_create(&o, ld->n_samples, ld->sample_k, &pp, msg, sizeof msg), PL_OK);
    cr_assert_eq(expert_map_create(3, 256, 320, 64, 8, &a, msg, sizeof msg), PL_OK);
    cr_assert_eq(expert_map_create(3, 256, 320, 64, 8, &b, msg, sizeof msg), PL_OK);
    cr_assert_eq(expert_map_create(3, 256, 320, 64, 8, &c, msg, sizeof msg), PL_OK);
    cr_assert_eq(experts_plan(pp, EXPERTS_SEARCH, ld, 0, NULL, a, NULL, msg, sizeof msg), PL_OK);
    cr_assert_eq(experts_plan(pp, EXPERTS_SEARCH, ld, 1, NULL, b, NULL, msg, sizeof msg), PL_OK);
    cr_assert_eq(experts_plan(pp, EXPERTS_SEARCH, ld, 1, a, c, NULL, msg, sizeof msg), PL_OK);
    cr_assert_lt(expert_map_moved(a, c), expert_map_moved(a, b), "relabelled %lld, as planned %lld",
                 (long long)expert_map_moved(a, c), (long long)expert_map_moved(a, b));
    for (int l = 0; l < 3; l++) {
        const double *w = expert_load_row_c(ld, 1, l);
        cr_assert(fabs(busiest(&s, w, expert_map_layer_c(b, l)) - busiest(&s, w, expert_map_layer_c(c, l))) < 1e-6,
                  "layer %d: the same loads", l);
    }
    cr_assert_eq(expert_map_moved(a, a), 0);
    experts_planner_destroy(pp);
    expert_map_destroy(a);
    expert_map_destroy(b);
    expert_map_destroy(c);
    expert_load_destroy(ld);
}
