/*
 * test_plan.c: the layout search against brute force, on clusters built in
 * memory (synthetic GPU figures: the tests hold properties, not the
 * simulator's numbers):
 *   - the enumeration yields exactly the layouts layout_validate accepts in
 *     the searched space (every tp, cp, pp, vp, mbs, recompute, zero);
 *   - both bounds are lower bounds of what the simulator says, for every
 *     layout and both splits, so pruning never drops a layout that fits
 *     or one that would enter the top k;
 *   - the search's top k equals the top k of simulating everything;
 *   - mixed GPUs: the faster node group's stage gets more layers, a small
 *     memory caps a stage;
 *   - nothing fits: no top layouts, the smallest memory needed reported.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "graph.h"
#include "layout_memory.h"
#include "plan.h"
#include "plan_fixtures.h"

/* A GPU roughly like a datasheet's (peak, bandwidth, memory), no FP8. */
static cluster_gpu gpu_of(const char *name, double bf16, double hbm_bw, double hbm_gb) {
    return plan_test_gpu(name, bf16, 0, hbm_bw, hbm_gb);
}

/* n_nodes nodes of 8 H100s, NVSwitch inside, 8 x 400 Gb/s between. */
static cluster make_cluster(int n_nodes, double hbm_gb) {
    return plan_test_cluster(n_nodes, gpu_of("H100", 989e12, 3.35e12, hbm_gb));
}

/* One node of fast GPUs, then one of slow ones (H100 then A100-like). */
static cluster make_mixed(double slow_gb) {
    cluster c = make_cluster(2, 80);
    snprintf(c.name, sizeof c.name, "test-mixed");
    c.n_gpu_types = 2;
    c.gpus[1] = gpu_of("A100", 312e12, 2.0e12, slow_gb);
    c.gpus[1].sm_count = 108;
    c.n_groups = 2;
    c.groups[0] = (cluster_group){.gpu_type = 0, .n_nodes = 1};
    c.groups[1] = (cluster_group){.gpu_type = 1, .n_nodes = 1};
    return c;
}

static gpt_config model(const char *text) { return plan_test_model(text); }

/* ---- enumeration -------------------------------------------------------- */

typedef struct {
    int64_t *keys;
    int n, cap;
} key_list;

static int64_t key_of(const layout *l) {
    return ((((((int64_t)l->tp * 64 + l->cp) * 64 + l->pp) * 16 + l->vp) * 64 + l->micro_batch) * 4 + l->recompute) * 8 +
           l->zero;
}

static int collect(void *ctx, const layout *l, int64_t index) {
    key_list *k = ctx;
    cr_assert_eq(index, k->n);
    cr_assert_eq(layout_world_size(l), l->tp * l->cp * l->pp * (int64_t)l->dp);
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 256;
        k->keys = realloc(k->keys, sizeof *k->keys * (size_t)k->cap);
    }
    k->keys[k->n++] = key_of(l);
    return 0;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void check_enumeration(const char *model_text, int64_t N, int B, int max_tp, int max_cp) {
    gpt_config cfg = model(model_text);
    cluster c = make_cluster(4, 80);
    plan_options o;
    plan_options_default(&o);
    o.gpus = N;
    o.global_batch = B;
    o.max_tp = max_tp;
    o.max_cp = max_cp;
    o.max_vp = 3;
    o.max_mbs = 8;
    key_list got = {0};
    char msg[256];
    cr_assert_eq(plan_enumerate(&cfg, &c, &o, collect, &got, msg, sizeof msg), PL_OK, "%s", msg);
    /* brute force over a superset: every factor up to N, every value */
    key_list want = {0};
    layout l;
    for (int tp = 1; tp <= N; tp++)
        for (int cp = 1; cp <= N; cp++)
            for (int pp = 1; pp <= N; pp++) {
                if (N % ((int64_t)tp * cp * pp)) continue;
                const int dp = (int)(N / ((int64_t)tp * cp * pp));
                for (int vp = 1; vp <= o.max_vp; vp++)
                    for (int mbs = 1; mbs <= o.max_mbs; mbs++)
                        for (int rc = 0; rc < 3; rc++)
                            for (int z = 0; z < 5; z++) {
                                if (tp > max_tp || cp > max_cp) continue; /* the searched space */
                                if (z > 0 && dp == 1) continue;           /* zero is a no-op without dp */
                                layout_default(&l);
                                l.tp = tp;
                                l.sp = tp > 1;
                                l.cp = cp;
                                l.pp = pp;
                                l.vp = vp;
                                l.dp = dp;
                                l.micro_batch = mbs;
                                l.global_batch = B;
                                l.recompute = (recompute_kind)rc;
                                l.zero = (zero_kind)z;
                                if (layout_validate(&l, &cfg, N, NULL, 0) != PL_OK) continue;
                                collect(&want, &l, want.n);
                            }
            }
    cr_assert_gt(want.n, 0);
    cr_assert_eq(got.n, want.n, "%s on %lld GPUs: enumerated %d layouts, %d are valid", model_text, (long long)N, got.n,
                 want.n);
    qsort(got.keys, (size_t)got.n, sizeof *got.keys, cmp64);
    qsort(want.keys, (size_t)want.n, sizeof *want.keys, cmp64);
    for (int i = 0; i < got.n; i++) cr_assert_eq(got.keys[i], want.keys[i], "layout %d differs", i);
    for (int i = 1; i < got.n; i++) cr_assert_neq(got.keys[i], got.keys[i - 1], "a layout enumerated twice");
    free(got.keys);
    free(want.keys);
}

Test(plan, enumerates_exactly_the_valid_layouts) {
    check_enumeration("gpt12", 8, 32, 8, 1);
    check_enumeration("gpt12,layers=6", 12, 24, 4, 2);
    check_enumeration("default,seq=512", 16, 16, 8, 4); /* 6 heads: tp 1, 2, 3, 6 only where they divide */
}

/* ---- bounds and pruning against simulating everything ----------------- */

typedef struct {
    const gpt_config *cfg;
    const cluster *c;
    int n, oom, pruned_ok;
    double best[PLAN_MAX_TOP]; /* brute force's top-k fitting step times, ascending */
    int k, n_best;
} brute_ctx;

static void best_insert(brute_ctx *b, double t) {
    int i = b->n_best;
    if (i == b->k) {
        if (t >= b->best[b->k - 1]) return;
        i--;
    } else {
        b->n_best++;
    }
    while (i > 0 && b->best[i - 1] > t) {
        b->best[i] = b->best[i - 1];
        i--;
    }
    b->best[i] = t;
}

static int simulate_all(void *ctx, const layout *l0, int64_t index) {
    brute_ctx *b = ctx;
    char msg[256];
    layout l = *l0;
    double lb = plan_step_lower_bound_us(b->cfg, b->c, NULL, &l);
    const int64_t mlb = plan_memory_lower_bound(b->cfg, NULL, &l);
    double best = INFINITY;
    for (int split = 0; split < 2; split++) {
        l = *l0;
        if (split == 1 && plan_stage_split(b->cfg, b->c, NULL, &l, NULL, NULL, 0) != PL_OK) continue;
        layout_result r;
        cr_assert_eq(plan_simulate(b->cfg, b->c, &l, NULL, &r, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert(lb <= r.step_us * (1 + 1e-12), "layout %lld: the bound %.3f us exceeds the simulated %.3f us",
                  (long long)index, lb, r.step_us);
        /* the memory bound: below the worst stage's simulated memory */
        cr_assert_leq(mlb, r.mem.total, "layout %lld: memory bound %lld above the simulated %lld", (long long)index,
                      (long long)mlb, (long long)r.mem.total);
        if (!r.oom && r.step_us < best) best = r.step_us;
        if (r.oom) b->oom++;
    }
    if (isfinite(best)) best_insert(b, best);
    b->n++;
    return 0;
}

static void check_against_brute_force(const char *model_text, int nodes, double hbm_gb, int B) {
    gpt_config cfg = model(model_text);
    cluster c = make_cluster(nodes, hbm_gb);
    plan_options o;
    plan_options_default(&o);
    o.gpus = 8 * nodes;
    o.global_batch = B;
    o.refine_sims = 0; /* brute force simulates the DP and uniform splits only */
    o.max_vp = 2;
    o.max_mbs = 4;
    o.top_k = 5;
    brute_ctx b = {.cfg = &cfg, .c = &c, .k = o.top_k};
    char msg[256];
    cr_assert_eq(plan_enumerate(&cfg, &c, &o, simulate_all, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(b.oom, 0, "the case should have layouts that do not fit");
    plan_result *r = calloc(1, sizeof *r);
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r->considered, b.n);
    cr_assert_eq(r->pruned_memory + r->pruned_bound + r->simulated, r->considered);
    cr_log_info("plan bounds case: %lld considered, %lld pruned by memory, %lld by bound, %lld simulated, %d OOM runs",
                (long long)r->considered, (long long)r->pruned_memory, (long long)r->pruned_bound,
                (long long)r->simulated, b.oom);
    cr_assert_gt(r->pruned_memory, 0, "no layout pruned by memory: the case proves nothing");
    cr_assert_gt(r->pruned_bound, 0, "no layout pruned by the bound: the case proves nothing");
    cr_assert_eq(r->n_top, o.top_k);
    for (int i = 0; i < o.top_k; i++) {
        cr_assert(!r->top[i].res.oom);
        cr_assert(fabs(r->top[i].res.step_us - b.best[i]) <= 1e-9 * b.best[i],
                  "top %d: search %.6f us, brute force %.6f us", i, r->top[i].res.step_us, b.best[i]);
        if (i) cr_assert_geq(r->top[i].res.step_us, r->top[i - 1].res.step_us);
    }
    free(r);
}

Test(plan, bounds_hold_and_the_top_k_is_the_brute_force_top_k, .timeout = 120) {
    check_against_brute_force("gpt12,layers=8", 1, 1.5, 16);  /* 1.5 GB GPUs: some layouts do not fit */
    check_against_brute_force("gpt12,layers=8", 2, 1.0, 32);  /* across nodes: pipeline and dp traffic on the NICs */
    check_against_brute_force("default,layers=12,seq=1024", 2, 0.8, 32);
}

/* ---- progress and cancellation (the seam the server and Ctrl-C use) ------ */

typedef struct {
    int calls;           /* callbacks seen */
    int stop_after;      /* ask to stop on this call (0: never) */
    int64_t last_done;   /* done of the previous call, for monotonicity */
    int had_best;        /* a best layout was reported */
    double best_step;    /* its step at the last report */
} cancel_ctx;

static int stop_on_call(void *ctx, const plan_progress *p) {
    cancel_ctx *k = ctx;
    k->calls++;
    cr_assert_leq(p->done, p->total);
    cr_assert_geq(p->done, k->last_done, "progress went backwards: %lld after %lld", (long long)p->done,
                  (long long)k->last_done);
    cr_assert_eq(p->pruned_memory + p->pruned_bound + p->simulated <= p->considered, 1);
    k->last_done = p->done;
    if (p->best) {
        k->had_best = 1;
        k->best_step = p->best->res.step_us;
    }
    return k->stop_after > 0 && k->calls >= k->stop_after;
}

Test(plan, progress_reports_and_a_cancel_returns_the_best_so_far, .timeout = 120) {
    gpt_config cfg = model("gpt12,layers=8");
    cluster c = make_cluster(2, 1.0);
    plan_options o;
    plan_options_default(&o);
    o.gpus = 16;
    o.global_batch = 32;
    o.max_vp = 2;
    o.max_mbs = 4;
    char msg[256];
    plan_result *full = calloc(1, sizeof *full), *part = calloc(1, sizeof *part);
    cancel_ctx all = {0};
    cr_assert_eq(plan_search(&cfg, &c, &o, stop_on_call, &all, full, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(all.calls, 3, "too few reports (%d) to cancel in the middle", all.calls);
    cr_assert(all.had_best);
    cr_assert_gt(full->n_top, 0);
    /* stop half way: PL_ERR_INTERRUPTED, a message, and the best found up to then */
    cancel_ctx half = {.stop_after = all.calls / 2};
    cr_assert_eq(plan_search(&cfg, &c, &o, stop_on_call, &half, part, msg, sizeof msg), PL_ERR_INTERRUPTED);
    cr_assert(strstr(msg, "stopped"), "%s", msg);
    cr_assert_eq(half.calls, all.calls / 2);
    cr_assert_lt(part->simulated, full->simulated);
    if (half.had_best) {
        cr_assert_gt(part->n_top, 0);
        cr_assert_geq(part->top[0].res.step_us, full->top[0].res.step_us * (1 - 1e-12));
        for (int i = 1; i < part->n_top; i++) cr_assert_geq(part->top[i].res.step_us, part->top[i - 1].res.step_us);
    }
    /* a precision search stops in its first pass and still returns what it found */
    cr_assert_eq(plan_parse_precisions("bf16,fp16", &o, msg, sizeof msg), PL_OK, "%s", msg);
    cancel_ctx first = {.stop_after = 2};
    cr_assert_eq(plan_search(&cfg, &c, &o, stop_on_call, &first, part, msg, sizeof msg), PL_ERR_INTERRUPTED);
    free(full);
    free(part);
}

/* ---- mixed GPUs --------------------------------------------------------- */

Test(plan, faster_stage_gets_more_layers_on_mixed_gpus) {
    gpt_config cfg = model("gpt12,layers=24");
    cluster c = make_mixed(80);
    layout l;
    layout_default(&l);
    l.tp = 8;
    l.sp = 1;
    l.pp = 2;
    l.dp = 1;
    l.micro_batch = 1;
    l.global_batch = 16;
    char msg[256];
    cr_assert_eq(plan_stage_split(&cfg, &c, NULL, &l, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(l.n_stage_layers, 2);
    cr_assert_eq(l.stage_layers[0] + l.stage_layers[1], 24);
    cr_assert_gt(l.stage_layers[0], l.stage_layers[1] + 4, "H100 stage %d layers, A100 stage %d", l.stage_layers[0],
                 l.stage_layers[1]);
    /* the same cluster with both groups fast: the split is (nearly) even */
    cluster same = make_cluster(2, 80);
    layout u = l;
    u.n_stage_layers = 0;
    cr_assert_eq(plan_stage_split(&cfg, &same, NULL, &u, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_leq(abs(u.stage_layers[0] - u.stage_layers[1]), 2);
}

Test(plan, small_memory_caps_a_stage) {
    gpt_config cfg = model("gpt12,layers=24,seq=2048");
    layout l;
    layout_default(&l);
    l.tp = 8;
    l.sp = 1;
    l.pp = 2;
    l.dp = 1;
    l.micro_batch = 8;
    l.global_batch = 64;
    /* the slow GPUs get just the memory of 3 layers on the last stage (1F1B
     * stashes one micro-batch there): less than their speed would give them */
    layout_memory m;
    layout_stage_memory_p(&cfg, &l, NULL, 1, 3, 1, &m);
    cluster c = make_mixed(m.total / 1e9 + 0.001);
    char msg[256];
    cr_assert_eq(plan_stage_split(&cfg, &c, NULL, &l, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(l.stage_layers[1], 3, "the small GPUs' stage holds %d layers", l.stage_layers[1]);
    /* too little memory for any split */
    cluster tiny = make_mixed(0.01);
    for (int g = 0; g < 2; g++) tiny.gpus[g].hbm_bytes = 10000000;
    layout t = l;
    t.n_stage_layers = 0;
    cr_assert_eq(plan_stage_split(&cfg, &tiny, NULL, &t, NULL, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(t.n_stage_layers, 0);
}

/* ---- nothing fits ------------------------------------------------------- */

Test(plan, nothing_fits_reports_the_memory_needed) {
    gpt_config cfg = model("gpt12,layers=24");
    cluster c = make_cluster(1, 0.05); /* 50 MB GPUs */
    plan_options o;
    plan_options_default(&o);
    o.gpus = 8;
    o.global_batch = 8;
    plan_result *r = calloc(1, sizeof *r);
    char msg[256];
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r->n_top, 0);
    cr_assert_gt(r->considered, 0);
    cr_assert_gt(r->min_mem_bytes, c.gpus[0].hbm_bytes);
    free(r);
}

Test(plan, bad_options_are_refused) {
    gpt_config cfg = model("gpt12,layers=6");
    cluster c = make_cluster(1, 80);
    plan_options o;
    plan_options_default(&o);
    o.global_batch = 8;
    plan_result *r = calloc(1, sizeof *r);
    char msg[256];
    o.gpus = 9; /* more than the cluster */
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "--gpus"), "%s", msg);
    o.gpus = 7; /* 7 GPUs, 12 heads, 6 layers, batch 8, seq 256: no layout at all */
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "no layout"), "%s", msg);
    o.gpus = 8;
    o.top_k = 0;
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, r, msg, sizeof msg), PL_ERR_INVALID);
    free(r);
}

/* ---- fixed dimensions --------------------------------------------------- */

static int check_fixed(void *ctx, const layout *l, int64_t index) {
    int *n = ctx;
    cr_assert_eq(l->tp, 2);
    cr_assert_eq(l->pp, 2);
    cr_assert_eq(l->recompute, RECOMPUTE_FULL);
    cr_assert_eq(l->zero, ZERO_1);
    (*n)++;
    return 0;
}

Test(plan, fixed_dimensions_restrict_the_enumeration) {
    gpt_config cfg = model("gpt12");
    cluster c = make_cluster(1, 80);
    plan_options o;
    plan_options_default(&o);
    o.gpus = 8;
    o.global_batch = 32;
    char msg[256];
    cr_assert_eq(plan_parse_fixed("tp=2,pp=2,recompute=full,zero=1", &o, msg, sizeof msg), PL_OK, "%s", msg);
    int n = 0;
    cr_assert_eq(plan_enumerate(&cfg, &c, &o, check_fixed, &n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(n, 0);
    /* a tp beyond max_tp is tried when fixed */
    plan_options_default(&o);
    o.gpus = 8;
    o.global_batch = 32;
    o.max_tp = 1;
    cr_assert_eq(plan_parse_fixed("tp=4", &o, msg, sizeof msg), PL_OK);
    cr_assert_eq(o.fix_tp, 4);
    /* the stack's settings: the layout text form's values, every layout takes them */
    cr_assert_eq(o.fix_dispatcher, -1);
    cr_assert_eq(plan_parse_fixed("dispatcher=flex,mem=bf16_moments+fp32_grads", &o, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(o.fix_dispatcher, (int)MOE_DISPATCH_FLEX);
    cr_assert_eq(o.fix_mem, (unsigned)(LAYOUT_MEM_BF16_MOMENTS | LAYOUT_MEM_FP32_GRADS));
    const char *bad[] = {"",           "tp",           "tp=",          "tp=0",           "tp=x",
                         "tp=2,bogus=1", "recompute=some", "zero=4",     "=3",             "pp=2,,",
                         "dispatcher=bogus", "mem=ema",    "mem=fp32_grads+fp32_grads"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plan_options before = o;
        cr_assert_eq(plan_parse_fixed(bad[i], &o, msg, sizeof msg), PL_ERR_INVALID, "'%s' accepted", bad[i]);
        cr_assert(!memcmp(&before, &o, sizeof o), "'%s' changed the options", bad[i]);
    }
}

/* ---- frameworks --------------------------------------------------------- */

typedef struct {
    plan_framework f;
    int n;
} fw_ctx;

static int check_framework(void *ctx, const layout *l, int64_t index) {
    fw_ctx *k = ctx;
    const int z = l->dp > 1 ? (int)l->zero : 0;
    if (k->f == PLAN_FRAMEWORK_DEEPSPEED) cr_assert(l->vp == 1 && l->cp == 1 && (l->pp == 1 || z <= 1));
    if (k->f == PLAN_FRAMEWORK_MEGATRON) cr_assert(l->pp == 1 || z <= 1);
    if (k->f == PLAN_FRAMEWORK_TORCHTITAN) cr_assert(z != 1 && z != 2);
    k->n++;
    return 0;
}

static int count_all(void *ctx, const layout *l, int64_t index) {
    int *n = ctx;
    (*n)++;
    return 0;
}

Test(plan, framework_filters_keep_what_it_runs) {
    /* a shape every framework builds: torchtitan's llama3 8B, cut to 12 layers */
    gpt_config cfg = model("gpt12,seq=1024");
    cfg.d_model = 4096, cfg.n_heads = 32, cfg.n_kv_heads = 8, cfg.d_ff = 14336, cfg.vocab = 128256;
    cfg.norm = NORM_RMSNORM, cfg.mlp = MLP_SWIGLU, cfg.pos = POS_ROTARY, cfg.no_bias = 1, cfg.tied = 0;
    cluster c = make_cluster(2, 80);
    plan_options o;
    plan_options_default(&o);
    o.gpus = 16;
    o.global_batch = 32;
    o.max_cp = 2;
    char msg[256];
    int all = 0;
    cr_assert_eq(plan_enumerate(&cfg, &c, &o, count_all, &all, msg, sizeof msg), PL_OK);
    for (int f = PLAN_FRAMEWORK_MEGATRON; f < PLAN_FRAMEWORK_COUNT; f++) {
        o.framework = f;
        fw_ctx k = {(plan_framework)f, 0};
        cr_assert_eq(plan_enumerate(&cfg, &c, &o, check_framework, &k, msg, sizeof msg), PL_OK);
        cr_assert(k.n > 0 && k.n < all, "%s kept %d of %d", plan_framework_name((plan_framework)f), k.n, all);
    }
}

/* A stage across both node groups runs at the slower GPU's pace; stages
 * on one group each are simulated as they are. */
Test(plan, straddling_stages_run_on_the_slowest_gpu) {
    gpt_config cfg = model("gpt12,layers=8,heads=16");
    cluster mixed = make_mixed(40); /* A100-like group with half the memory */
    cluster slow = make_mixed(40);
    slow.groups[0].gpu_type = 1; /* both groups slow */
    layout l;
    layout_default(&l);
    l.tp = 8;
    l.sp = 1;
    l.pp = 1;
    l.dp = 2;
    l.micro_batch = 1;
    l.global_batch = 8;
    char msg[256];
    layout_result a, b, raw;
    cr_assert_eq(plan_simulate(&cfg, &mixed, &l, NULL, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(plan_simulate(&cfg, &slow, &l, NULL, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(fabs(a.step_us - b.step_us) <= 1e-9 * b.step_us, "straddling %.3f us, all slow %.3f us", a.step_us,
              b.step_us);
    cr_assert_eq(a.mem_cap, (int64_t)(40 * 1e9));
    /* the simulator alone would have used the replica-0 (fast) GPU */
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create(&cfg, &l, &mixed, &s, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_run(s, NULL, 0, &raw, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    cr_assert_lt(raw.step_us, a.step_us);
    /* pp = 2, one stage per group: nothing merged */
    l.pp = 2;
    l.dp = 1;
    cr_assert_eq(plan_simulate(&cfg, &mixed, &l, NULL, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_create(&cfg, &l, &mixed, &s, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_run(s, NULL, 0, &raw, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    cr_assert(a.step_us == raw.step_us, "%.6f vs %.6f", a.step_us, raw.step_us);
}

/* The refinement only shortens the top layouts and keeps them fitting. */
Test(plan, refinement_only_improves_the_top) {
    gpt_config cfg = model("gpt12");
    cluster c = make_cluster(1, 80);
    plan_options o;
    plan_options_default(&o);
    o.gpus = 8;
    o.global_batch = 16;
    char msg[256];
    cr_assert_eq(plan_parse_fixed("pp=4,dp=1,mbs=2", &o, msg, sizeof msg), PL_OK);
    plan_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    o.refine_sims = 0;
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, a, msg, sizeof msg), PL_OK, "%s", msg);
    o.refine_sims = 256;
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(a->n_top, b->n_top);
    cr_assert_eq(a->refine_runs, 0);
    cr_assert_gt(b->refine_runs, 0);
    for (int i = 0; i < b->n_top; i++) {
        cr_assert_leq(b->top[i].res.step_us, a->top[i].res.step_us * (1 + 1e-12), "top %d got slower", i);
        cr_assert(!b->top[i].res.oom);
        if (i) cr_assert_geq(b->top[i].res.step_us, b->top[i - 1].res.step_us);
        int sum = 0;
        for (int k = 0; k < b->top[i].l.pp * b->top[i].l.vp; k++) {
            cr_assert_geq(b->top[i].l.stage_layers[k], 1);
            sum += b->top[i].l.stage_layers[k];
        }
        cr_assert_eq(sum, cfg.n_layers);
    }
    free(a);
    free(b);
}

/* ---- precisions (issue 27) ------------------------------------------------ */

Test(plan, precision_lists_parse_and_bad_ones_are_refused) {
    plan_options o;
    char msg[256];
    plan_options_default(&o);
    cr_assert_eq(plan_parse_precisions("bf16", &o, msg, sizeof msg), PL_OK);
    cr_assert(o.n_prec == 0 && o.prec == PRECISION_BF16, "one precision is a plain one");
    cr_assert_eq(plan_parse_precisions("fp8=blockwise", &o, msg, sizeof msg), PL_OK);
    cr_assert(o.n_prec == 0 && o.prec == PRECISION_FP8 && o.fp8 == FP8_RECIPE_BLOCKWISE);
    cr_assert_eq(plan_parse_precisions("fp8", &o, msg, sizeof msg), PL_OK);
    cr_assert_eq(o.n_prec, FP8_RECIPE_COUNT, "fp8 alone: every recipe");
    cr_assert_eq(plan_parse_precisions("bf16,fp8=delayed|mxfp8", &o, msg, sizeof msg), PL_OK);
    cr_assert_eq(o.n_prec, 3);
    cr_assert(o.precs[0] == PRECISION_BF16 && o.precs[1] == PRECISION_FP8 && o.fp8s[1] == FP8_RECIPE_DELAYED &&
              o.fp8s[2] == FP8_RECIPE_MXFP8);
    static const char *const bad[] = {"", "bf17", "fp8=e4m3", "bf16=delayed", "fp8,fp8=delayed", "bf16,bf16", "fp8="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plan_options_default(&o);
        msg[0] = 0;
        cr_assert_eq(plan_parse_precisions(bad[i], &o, msg, sizeof msg), PL_ERR_INVALID, "'%s'", bad[i]);
        cr_assert(msg[0] && !strchr(msg, '\n'), "'%s': %s", bad[i], msg);
        cr_assert_eq(o.n_prec, 0, "'%s' left the options untouched", bad[i]);
        cr_assert_eq(o.prec, PRECISION_BF16);
    }
}

/* A search over bf16 and every FP8 recipe keeps the fastest layouts of all:
 * its best is no slower than each precision searched alone, and it equals
 * the best of those; an H100 never gets MXFP8 layouts (no MXFP8 tensor
 * cores), a Blackwell-like GPU does. */
Test(plan, a_precision_search_keeps_the_fastest_over_all, .timeout = 120) {
    gpt_config cfg = model("gpt12,layers=8,d_model=1024,heads=16,seq=2048,batch=32");
    cluster c = make_cluster(1, 80);
    c.gpus[0].peak_flops[PRECISION_FP8] = 2 * 989e12;
    plan_options o;
    plan_options_default(&o);
    o.gpus = 8;
    o.global_batch = 32;
    o.top_k = 8;
    char msg[256];
    cr_assert_eq(plan_parse_precisions("bf16,fp8", &o, msg, sizeof msg), PL_OK);
    plan_result *all = calloc(1, sizeof *all), *one = calloc(1, sizeof *one);
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, all, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(all->n_top, 0);
    double best_alone = INFINITY;
    int64_t considered = 0;
    for (int i = 0; i < o.n_prec; i++) {
        plan_options oi = o;
        oi.n_prec = 0;
        oi.prec = o.precs[i];
        oi.fp8 = o.fp8s[i];
        pl_status st = plan_search(&cfg, &c, &oi, NULL, NULL, one, msg, sizeof msg);
        if (o.fp8s[i] == FP8_RECIPE_MXFP8 && o.precs[i] == PRECISION_FP8) {
            cr_assert_eq(st, PL_ERR_INVALID, "mxfp8 on an H100");
            continue;
        }
        cr_assert_eq(st, PL_OK, "%s", msg);
        considered += one->considered;
        if (one->n_top && one->top[0].res.step_us < best_alone) best_alone = one->top[0].res.step_us;
    }
    cr_assert_eq(all->considered, considered, "the merged counts are the sums");
    cr_assert(all->top[0].res.step_us == best_alone, "%.3f vs %.3f", all->top[0].res.step_us, best_alone);
    cr_assert_eq(all->top[0].l.prec, PRECISION_FP8, "FP8 wins at this size");
    for (int i = 0; i < all->n_top; i++) {
        cr_assert_neq(all->top[i].l.fp8 == FP8_RECIPE_MXFP8 && all->top[i].l.prec == PRECISION_FP8, 1);
        if (i) cr_assert_geq(all->top[i].res.step_us, all->top[i - 1].res.step_us);
    }
    /* with MXFP8 tensor cores the mxfp8 searches run too */
    c.gpus[0].peak_mxfp8 = 2 * 989e12;
    cr_assert_eq(plan_parse_precisions("fp8=mxfp8|delayed", &o, msg, sizeof msg), PL_OK);
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, all, msg, sizeof msg), PL_OK, "%s", msg);
    int mx = 0;
    for (int i = 0; i < all->n_top; i++) mx += all->top[i].l.fp8 == FP8_RECIPE_MXFP8;
    cr_assert_gt(mx, 0);
    /* nothing the cluster runs: one line */
    c.gpus[0].peak_flops[PRECISION_FP8] = 0;
    cr_assert_eq(plan_search(&cfg, &c, &o, NULL, NULL, all, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "runs any of the precisions") != NULL, "%s", msg);
    free(all);
    free(one);
}
