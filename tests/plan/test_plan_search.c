/*
 * test_plan_search.c: the pruned search gives the answer of the full
 * enumeration, on small cases built in memory (synthetic GPU figures: the
 * tests hold properties, not the simulator's numbers):
 *   - the step-time bound is at most the simulated step for every layout
 *     of cases with every pipeline order, FP8 recipes and an MoE model,
 *     under both splits, and for random layouts of a larger case; also
 *     with an expert placement's per-layer load factors;
 *   - plan_search's top list (layouts, stage splits, steps, memory) and its
 *     fastest OOM layout equal those of plan_options.exhaustive (every
 *     layout simulated, no pruning) on dense and MoE cases, with and
 *     without --schedules all and bf16,fp8;
 *   - one thread and several give the same result, counts included.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_file.h"
#include "collective.h"
#include "graph.h"
#include "plan.h"
#include "plan_model.h"
#include "plan_search_internal.h"
#include "plan_fixtures.h"

/* A GPU roughly like an H100's datasheet, with FP8. */
static cluster_gpu gpu_h100(double hbm_gb) { return plan_test_gpu("H100", 989e12, 1979e12, 3.35e12, hbm_gb); }

/* n_nodes nodes of 8 H100s, NVSwitch inside, 8 x 400 Gb/s between. */
static cluster make_cluster(int n_nodes, double hbm_gb) { return plan_test_cluster(n_nodes, gpu_h100(hbm_gb)); }

/* One node of H100s, then one of slower GPUs with less memory. */
static cluster make_mixed(void) {
    cluster c = make_cluster(2, 3.0);
    snprintf(c.name, sizeof c.name, "test-mixed");
    c.n_gpu_types = 2;
    c.gpus[1] = gpu_h100(2.0);
    snprintf(c.gpus[1].name, sizeof c.gpus[1].name, "A100");
    c.gpus[1].peak_flops[PRECISION_BF16] = c.gpus[1].peak_flops[PRECISION_FP16] = 312e12;
    c.gpus[1].peak_flops[PRECISION_FP8] = 0;
    c.gpus[1].hbm_bw = 2.0e12;
    c.n_groups = 2;
    c.groups[0] = (cluster_group){.gpu_type = 0, .n_nodes = 1};
    c.groups[1] = (cluster_group){.gpu_type = 1, .n_nodes = 1};
    return c;
}

static gpt_config model(const char *text) { return plan_test_model(text); }

/* gpt12 with 8 layers made a mixture of experts: 8 experts of width 768,
 * 2 a token, a shared expert, the first layer dense. */
static gpt_config moe_model(void) {
    gpt_config cfg = model("gpt12,layers=8");
    cfg.n_experts = 8;
    cfg.top_k = 2;
    cfg.moe_d_ff = 768;
    cfg.shared_d_ff = 768;
    cfg.first_dense = 1;
    return cfg;
}

static void small_options(plan_options *o, int64_t gpus, int B) {
    plan_options_default(o);
    o->gpus = gpus;
    o->global_batch = B;
    o->max_vp = 2;
    o->max_mbs = 4;
    o->top_k = 5;
}

static void all_orders(plan_options *o) {
    o->sched_mask =
        1u << SCHED_ZB_H1 | 1u << SCHED_ZB_H2 | 1u << SCHED_ZB_V | 1u << SCHED_DUALPIPEV | 1u << SCHED_DUALPIPE;
}

static void bf16_fp8(plan_options *o) {
    char msg[256];
    cr_assert_eq(plan_parse_precisions("bf16,fp8", o, msg, sizeof msg), PL_OK, "%s", msg);
}

/* ---- the bound against the simulator ------------------------------------- */

typedef struct {
    const gpt_config *cfg;
    const cluster *c;
    const layout_sim_params *prm; /* NULL: defaults */
    int64_t n, checked;
    int64_t stride;     /* check every stride-th layout (1: all) */
    double worst;       /* largest bound / step seen */
    int64_t no_split;   /* layouts no stage split fits */
    int64_t uniform_oom; /* layouts plan_uniform_certainly_oom calls OOM */
} bound_ctx;

static void check_layout(bound_ctx *b, const layout *l0, int64_t index) {
    char msg[256];
    const double lb = plan_step_lower_bound_us(b->cfg, b->c, b->prm, l0);
    layout dp = *l0;
    const pl_status split_st = plan_stage_split(b->cfg, b->c, b->prm, &dp, NULL, NULL, 0);
    for (int split = 0; split < 2; split++) {
        layout l = split ? dp : *l0;
        if (split == 1 && split_st != PL_OK) continue;
        layout_result r;
        cr_assert_eq(plan_simulate(b->cfg, b->c, &l, b->prm, &r, msg, sizeof msg), PL_OK, "%s", msg);
        char text[1024];
        layout_format(&l, text, sizeof text);
        /* no DP split fits the memory: then the simulator finds the uniform split OOM too (the search skips such
         * layouts when they cannot be the fastest OOM one) */
        if (split_st == PL_ERR_INVALID)
            cr_assert(r.oom, "layout %lld (%s): no stage split fits, yet the simulator fits it", (long long)index, text);
        if (split_st == PL_ERR_INVALID) b->no_split++;
        /* the V orders' check of the uniform split */
        layout_sim_params dflt;
        layout_sim_params_default(&dflt);
        if (split == 0 && plan_uniform_certainly_oom(b->cfg, b->c, b->prm ? b->prm : &dflt, &l)) {
            cr_assert(r.oom, "layout %lld (%s): called OOM by the stash rules, yet the simulator fits it",
                      (long long)index, text);
            b->uniform_oom++;
        }
        cr_assert(lb <= r.step_us * (1 + 1e-12), "layout %lld (%s): the bound %.3f us exceeds the simulated %.3f us",
                  (long long)index, text, lb, r.step_us);
        /* the memory bound the search prunes with, under every order (DualPipe's two stages a rank) */
        const int64_t mlb = plan_memory_lower_bound(b->cfg, b->prm, &l);
        int64_t peak = 0;
        for (int s = 0; s < l.pp; s++)
            if (r.stage_mem[s] > peak) peak = r.stage_mem[s];
        cr_assert(mlb <= peak, "layout %lld (%s): the memory bound %lld exceeds the simulated %lld bytes",
                  (long long)index, text, (long long)mlb, (long long)peak);
        if (lb / r.step_us > b->worst) b->worst = lb / r.step_us;
    }
    b->checked++;
}

static int bound_each(void *ctx, const layout *l, int64_t index) {
    bound_ctx *b = ctx;
    if (b->n++ % b->stride == 0) check_layout(b, l, index);
    return 0;
}

/* Every (stride-th) layout of the case, every precision asked. */
static void check_bounds(const gpt_config *cfg, const cluster *c, const plan_options *o0, int64_t stride) {
    bound_ctx b = {cfg, c, o0->sim, 0, 0, stride, 0, 0, 0};
    char msg[256];
    const int n = o0->n_prec > 0 ? o0->n_prec : 1;
    for (int i = 0; i < n; i++) {
        plan_options o = *o0;
        if (o0->n_prec > 0) {
            o.n_prec = 0;
            o.prec = o0->precs[i];
            o.fp8 = o0->fp8s[i];
            if (o.prec == PRECISION_FP8 && o.fp8 == FP8_RECIPE_MXFP8) continue; /* not on these GPUs (no peak_mxfp8) */
        }
        cr_assert_eq(plan_enumerate(cfg, c, &o, bound_each, &b, msg, sizeof msg), PL_OK, "%s", msg);
    }
    cr_assert_gt(b.checked, 50, "too few layouts (%lld) to say anything", (long long)b.checked);
    cr_log_info("bound check: %lld layouts, bound / step at most %.3f; %lld with no stage split that fits, %lld "
                "uniform splits OOM by the stash rules",
                (long long)b.checked, b.worst, (long long)b.no_split, (long long)b.uniform_oom);
}

Test(plan_search, the_bound_is_below_the_simulator_under_every_order_and_recipe, .timeout = 240) {
    plan_options o;
    gpt_config dense = model("gpt12,layers=8"), moe = moe_model();
    cluster one = make_cluster(1, 1.0), two = make_cluster(2, 1.2), mixed = make_mixed();
    small_options(&o, 8, 16);
    all_orders(&o);
    bf16_fp8(&o);
    check_bounds(&dense, &one, &o, 1);
    small_options(&o, 16, 32);
    all_orders(&o);
    check_bounds(&dense, &two, &o, 1);
    check_bounds(&moe, &two, &o, 1);
    small_options(&o, 16, 32);
    all_orders(&o);
    check_bounds(&dense, &mixed, &o, 1);
    /* a larger case, a sample of its layouts: 16 nodes, seq 4096 */
    gpt_config big = model("default,layers=24,seq=4096");
    cluster many = make_cluster(16, 12);
    small_options(&o, 128, 256);
    o.max_vp = 3;
    o.max_mbs = 8;
    all_orders(&o);
    bf16_fp8(&o);
    check_bounds(&big, &many, &o, 37);
}

/* The same under the simulator settings the bound reads: scaled
 * collectives, ZeRO 3 gathers at check-published's fitted scale, gradient
 * reduction after backward in fp16 in small buckets, no embedding or head
 * cost, a fixed cost per step, MoE load imbalance. */
Test(plan_search, the_bound_is_below_the_simulator_under_other_settings, .timeout = 240) {
    plan_options o;
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    prm.collective_scale = 1.7;
    prm.zero3_gather_scale = 6.478;
    prm.dp_overlap_grad = 0;
    prm.grad_comm_bytes = 2;
    prm.dp_bucket_bytes = 4e6;
    prm.emb_head_scale = 0;
    prm.step_fixed_us = 500;
    prm.moe.imbalance = 1.4;
    gpt_config dense = model("gpt12,layers=8"), moe = moe_model();
    cluster two = make_cluster(2, 1.2);
    small_options(&o, 16, 32);
    all_orders(&o);
    bf16_fp8(&o);
    o.sim = &prm;
    check_bounds(&dense, &two, &o, 1);
    check_bounds(&moe, &two, &o, 1);
}

/* With an expert placement (layout_sim_params.moe_layer_load, placer plan
 * --experts) the simulator gives each MoE layer of a layout of the
 * placement's ep its own load factor, here far below the uniform factor of
 * a large expert_cv: the bound stays below the simulator on every layout,
 * for placements of each ep, and on a layout of the placement's ep it is
 * below the bound at the uniform factor (which the placement undercuts). */
Test(plan_search, the_bound_is_below_the_simulator_with_an_expert_placement, .timeout = 240) {
    plan_options o;
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    prm.moe.expert_cv = 0.8; /* the uniform factor 2.6 at ep 8 */
    const double f[7] = {1.0, 1.05, 1.3, 1.0, 1.8, 1.1, 1.02}; /* moe_model's 7 MoE layers */
    prm.moe_layer_load = f;
    prm.moe_layer_load_n = 7;
    gpt_config moe = moe_model();
    cluster two = make_cluster(2, 1.2);
    small_options(&o, 16, 32);
    all_orders(&o);
    o.sim = &prm;
    const int eps[] = {8, 4, 2};
    for (int i = 0; i < 3; i++) {
        prm.moe_layer_load_ep = eps[i];
        check_bounds(&moe, &two, &o, 1);
    }
    layout l;
    char msg[256];
    cr_assert_eq(layout_parse("tp=1,pp=2,dp=8,ep=8,mbs=1,gbs=32", &l, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    prm.moe_layer_load_ep = 8;
    cr_assert_eq(plan_simulate(&moe, &two, &l, &prm, &r, msg, sizeof msg), PL_OK, "%s", msg);
    const double placed = plan_step_lower_bound_us(&moe, &two, &prm, &l);
    layout_sim_params uniform = prm;
    uniform.moe_layer_load = NULL;
    const double at_cv = plan_step_lower_bound_us(&moe, &two, &uniform, &l);
    cr_assert(placed <= r.step_us, "the bound %.3f us exceeds the simulated %.3f us", placed, r.step_us);
    cr_assert(placed < at_cv, "the placement's bound %.3f us is not below the uniform factor's %.3f us", placed, at_cv);
}

/* The shipped clusters and models of the benchmark (benchmarks/plan), a
 * sample of their layouts with every option. */
static void check_shipped(const char *model_name, const char *cluster_name, int64_t gpus, int B, int seq,
                          int64_t stride, const char *fix) {
    plan_model m;
    cluster c;
    char msg[512];
    char path[1024];
    snprintf(path, sizeof path, "%s/data/clusters/%s.json", PLACER_SOURCE_DIR, cluster_name);
    cr_assert_eq(cluster_load(path, NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(plan_model_load(model_name, seq, &m, msg, sizeof msg), PL_OK, "%s", msg);
    plan_options o;
    plan_options_default(&o);
    o.gpus = gpus;
    o.global_batch = B;
    all_orders(&o);
    bf16_fp8(&o);
    if (fix) cr_assert_eq(plan_parse_fixed(fix, &o, msg, sizeof msg), PL_OK, "%s", msg);
    check_bounds(&m.cfg, &c, &o, stride);
}

Test(plan_search, the_bound_is_below_the_simulator_on_shipped_models, .timeout = 300) {
    check_shipped("llama-3-70b", "dgx-h100", 128, 512, 8192, 211, NULL);
    check_shipped("deepseek-v3", "h800-deepseek", 2048, 15360, 4096, 3001, NULL);
    /* DeepSeek's own stack held for every layout (DeepEP, its memory options) */
    check_shipped("deepseek-v3", "h800-deepseek", 2048, 15360, 4096, 3001,
                  "dispatcher=flex,mem=norm_mla+fp8_act+bf16_moments+mtp_last+fp32_grads");
}

/* The ZeRO 3 reduction bound (plan_bound.c) takes n bytes reduced in
 * pieces of at most X to cost at least n t(X) / X: a collective's time per
 * byte must not grow with its size. Checked on strided groups of the
 * shipped clusters, for every kind, from 1 kB to 4 GB. */
Test(plan_search, a_collectives_time_per_byte_does_not_grow_with_its_size) {
    const char *names[] = {"dgx-h100", "h800-deepseek", "llama3-h100", "gb200-nvl72", "h200x2"};
    const coll_kind kinds[] = {COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER};
    int checked = 0;
    for (size_t ci = 0; ci < sizeof names / sizeof names[0]; ci++) {
        cluster c;
        char msg[512], path[1024];
        snprintf(path, sizeof path, "%s/data/clusters/%s.json", PLACER_SOURCE_DIR, names[ci]);
        cr_assert_eq(cluster_load(path, NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
        const int64_t N = cluster_n_gpus(&c);
        for (int64_t n = 2; n <= N && n <= 4096; n *= 2)
            for (int64_t stride = 1; stride * n <= N && stride <= 512; stride *= 4) {
                int64_t *g = malloc(sizeof *g * (size_t)n);
                for (int64_t i = 0; i < n; i++) g[i] = i * stride;
                for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
                    double prev = INFINITY;
                    for (double x = 1e3; x <= 4.1e9; x *= 1.5) {
                        coll_estimate e;
                        cr_assert_eq(coll_time(&c, kinds[k], g, (int)n, x, &e), PL_OK);
                        const double per = e.time_us / x;
                        cr_assert_leq(per, prev * (1 + 1e-12), "%s, %lld ranks stride %lld, kind %d: %.3g us/B at %.3g B "
                                      "after %.3g", names[ci], (long long)n, (long long)stride, (int)kinds[k], per, x,
                                      prev);
                        prev = per;
                        checked++;
                    }
                }
                free(g);
            }
    }
    cr_assert_gt(checked, 1000);
}

/* ---- the pruned search against the exhaustive one ----------------------- */

static void same_entry(const plan_entry *a, const plan_entry *b, const char *what, int i) {
    char ta[2048], tb[2048];
    layout_format(&a->l, ta, sizeof ta);
    layout_format(&b->l, tb, sizeof tb);
    cr_assert_str_eq(ta, tb, "%s %d: the pruned search's layout %s, the exhaustive one's %s", what, i, ta, tb);
    cr_assert(a->res.step_us == b->res.step_us, "%s %d (%s): step %.9f us pruned, %.9f us exhaustive", what, i, ta,
              a->res.step_us, b->res.step_us);
    cr_assert_eq(a->res.mem.total, b->res.mem.total, "%s %d: memory differs", what, i);
    cr_assert_eq(a->refined, b->refined, "%s %d: refinement moves differ", what, i);
}

static void check_exhaustive(const char *name, const gpt_config *cfg, const cluster *c, const plan_options *o) {
    plan_result *p = calloc(1, sizeof *p), *x = calloc(1, sizeof *x);
    char msg[256];
    plan_options ox = *o;
    ox.exhaustive = 1;
    cr_assert_eq(plan_search(cfg, c, o, NULL, NULL, p, msg, sizeof msg), PL_OK, "%s: %s", name, msg);
    cr_assert_eq(plan_search(cfg, c, &ox, NULL, NULL, x, msg, sizeof msg), PL_OK, "%s: %s", name, msg);
    cr_assert_eq(x->simulated, x->considered, "%s: the exhaustive search must simulate every layout", name);
    cr_assert_eq(p->considered, x->considered);
    cr_assert_gt(p->pruned_bound + p->pruned_memory, 0, "%s: nothing pruned: the case proves nothing", name);
    cr_assert_gt(p->n_top, 0, "%s: nothing fits: the case proves nothing", name);
    cr_assert_eq(p->n_top, x->n_top, "%s", name);
    for (int i = 0; i < p->n_top; i++) same_entry(&p->top[i], &x->top[i], name, i);
    cr_assert_eq(p->have_oom_best, x->have_oom_best, "%s: the OOM row", name);
    if (p->have_oom_best) same_entry(&p->oom_best, &x->oom_best, name, -1);
    cr_log_info("%s: %lld considered, %lld simulated (exhaustive %lld), best %.3f ms", name, (long long)p->considered,
                (long long)p->simulated, (long long)x->simulated, p->top[0].res.step_us / 1e3);
    free(p);
    free(x);
}

Test(plan_search, the_pruned_search_equals_the_exhaustive_one, .timeout = 300) {
    plan_options o;
    gpt_config dense = model("gpt12,layers=8"), moe = moe_model(), deep = model("default,layers=12,seq=1024");
    cluster one = make_cluster(1, 2.0), two = make_cluster(2, 1.5), mixed = make_mixed();
    small_options(&o, 8, 16);
    check_exhaustive("gpt12 on 8", &dense, &one, &o);
    all_orders(&o);
    check_exhaustive("gpt12 on 8, every order", &dense, &one, &o);
    bf16_fp8(&o);
    check_exhaustive("gpt12 on 8, every order, bf16 and fp8", &dense, &one, &o);
    small_options(&o, 16, 32);
    all_orders(&o);
    bf16_fp8(&o);
    check_exhaustive("gpt12 on 16 (two nodes), every option", &dense, &two, &o);
    small_options(&o, 16, 32);
    check_exhaustive("gpt12-moe on 16", &moe, &two, &o);
    all_orders(&o);
    bf16_fp8(&o);
    check_exhaustive("gpt12-moe on 16, every option", &moe, &two, &o);
    small_options(&o, 16, 32);
    all_orders(&o);
    bf16_fp8(&o);
    char msg[256];
    cr_assert_eq(plan_parse_fixed("dispatcher=flex,mem=bf16_moments+fp32_grads+mtp_last", &o, msg, sizeof msg), PL_OK,
                 "%s", msg);
    check_exhaustive("gpt12-moe on 16, every option, a stack's dispatcher and memory options", &moe, &two, &o);
    small_options(&o, 16, 32);
    o.top_k = 3;
    check_exhaustive("default 12 layers on 16", &deep, &two, &o);
    small_options(&o, 16, 32);
    all_orders(&o);
    check_exhaustive("gpt12 on mixed GPUs, every order", &dense, &mixed, &o);
}

/* Stack settings (--fix dispatcher=, mem=) reach every layout the search
 * returns; settings the model cannot take at any searched precision are
 * refused before the search with the layout's reason. */
Test(plan_search, a_fixed_stack_reaches_every_layout_and_one_the_model_cannot_take_is_refused, .timeout = 120) {
    plan_options o;
    gpt_config moe = moe_model(), dense = model("gpt12,layers=8");
    cluster two = make_cluster(2, 1.5);
    char msg[256];
    small_options(&o, 16, 32);
    cr_assert_eq(plan_parse_fixed("dispatcher=flex,mem=bf16_moments", &o, msg, sizeof msg), PL_OK, "%s", msg);
    plan_result *p = calloc(1, sizeof *p);
    cr_assert_eq(plan_search(&moe, &two, &o, NULL, NULL, p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(p->n_top, 0);
    for (int i = 0; i < p->n_top; i++) {
        cr_assert_eq(p->top[i].l.dispatcher, MOE_DISPATCH_FLEX);
        cr_assert_eq(p->top[i].l.mem, (unsigned)LAYOUT_MEM_BF16_MOMENTS);
    }
    small_options(&o, 16, 32);
    cr_assert_eq(plan_parse_fixed("mem=norm_mla", &o, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(plan_search(&moe, &two, &o, NULL, NULL, p, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "--fix: mem=norm_mla"), "%s", msg);
    small_options(&o, 16, 32);
    cr_assert_eq(plan_parse_fixed("mem=fp8_act", &o, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(plan_search(&moe, &two, &o, NULL, NULL, p, msg, sizeof msg), PL_ERR_INVALID, "bf16 alone");
    cr_assert(strstr(msg, "precision=fp8 needed"), "%s", msg);
    small_options(&o, 16, 32);
    cr_assert_eq(plan_parse_fixed("dispatcher=flex", &o, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(plan_search(&dense, &two, &o, NULL, NULL, p, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "no experts"), "%s", msg);
    free(p);
}

/* ---- threads ---------------------------------------------------------------- */

Test(plan_search, one_thread_and_several_give_the_same_plan, .timeout = 120) {
    plan_options o;
    gpt_config dense = model("gpt12,layers=8");
    cluster two = make_cluster(2, 1.5);
    small_options(&o, 16, 32);
    all_orders(&o);
    bf16_fp8(&o);
    plan_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    char msg[256];
    o.threads = 1;
    cr_assert_eq(plan_search(&dense, &two, &o, NULL, NULL, a, msg, sizeof msg), PL_OK, "%s", msg);
    o.threads = 3;
    cr_assert_eq(plan_search(&dense, &two, &o, NULL, NULL, b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(a->considered, b->considered);
    cr_assert_eq(a->pruned_memory, b->pruned_memory);
    cr_assert_eq(a->pruned_bound, b->pruned_bound);
    cr_assert_eq(a->simulated, b->simulated);
    cr_assert_eq(a->sim_runs, b->sim_runs);
    cr_assert_eq(a->sim_oom, b->sim_oom);
    cr_assert_eq(a->refine_runs, b->refine_runs);
    cr_assert_eq(a->min_mem_bytes, b->min_mem_bytes);
    cr_assert_eq(a->n_top, b->n_top);
    cr_assert_gt(a->n_top, 0);
    for (int i = 0; i < a->n_top; i++) same_entry(&a->top[i], &b->top[i], "threads", i);
    free(a);
    free(b);
}
