/*
 * plan_search.c: `placer plan`'s search over layouts (plan.h says what is
 * enumerated, how it is pruned and how stages are split).
 *
 * Shape of the search. Enumeration keeps a small record per valid layout
 * (its dimensions and two lower bounds), drops the ones whose memory bound
 * exceeds every GPU, sorts the rest by their step-time bound and simulates
 * them in that order. Once top_k fitting layouts are known, the first
 * record whose bound is no better than the k-th best time ends the loop:
 * every later record has a bound at least as large (sorted), so none of
 * them can enter the top k. That is what makes 16,384-GPU plans take
 * seconds: the bound is tight for layouts that are compute-bound, and the
 * compute-bound ones are the fast ones.
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "framework.h"
#include "model_params.h"
#include "plan_search_internal.h"
#include "util.h"

void plan_options_default(plan_options *o) {
    memset(o, 0, sizeof *o);
    o->prec = PRECISION_BF16;
    o->max_vp = 4;
    o->max_mbs = 16;
    o->top_k = 5;
    o->refine_sims = 256;
    o->fix_recompute = -1;
    o->fix_zero = -1;
    o->fix_dispatcher = -1;
    o->threads = 0;
    o->exhaustive = 0;
}

pl_status plan_parse_fixed(const char *text, plan_options *o, char *msg, size_t len) {
    if (!text || !*text) return pl_fail(msg, len, PL_ERR_INVALID, "empty list of fixed dimensions (e.g. tp=8,pp=4)");
    char buf[512];
    if (strlen(text) >= sizeof buf) return pl_fail(msg, len, PL_ERR_INVALID, "the fixed dimensions are too long");
    if (text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,"))
        return pl_fail(msg, len, PL_ERR_INVALID, "'%s' has an empty entry", text);
    strcpy(buf, text);
    plan_options t = *o;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s' is not key=value (keys: tp cp pp vp dp mbs recompute zero dispatcher mem)", tok);
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        if (!strcmp(key, "recompute")) {
            const int k = recompute_kind_from_name(val);
            if (k < 0) return pl_fail(msg, len, PL_ERR_INVALID, "recompute=%s: use none, selective or full", val);
            t.fix_recompute = k;
            continue;
        }
        if (!strcmp(key, "dispatcher") || !strcmp(key, "mem")) { /* the layout text form's values */
            char one[160];
            layout parsed;
            snprintf(one, sizeof one, "%s=%s", key, val);
            if (layout_parse(one, &parsed, msg, len) != PL_OK) return PL_ERR_INVALID;
            if (key[0] == 'd') t.fix_dispatcher = (int)parsed.dispatcher;
            else t.fix_mem = parsed.mem;
            continue;
        }
        if (!strcmp(key, "zero")) {
            static const char *names[] = {"0", "1", "2", "3", "fsdp"};
            int k = -1;
            for (int i = 0; i < 5; i++)
                if (!strcmp(val, names[i])) k = i;
            if (!strcmp(val, "none")) k = 0;
            if (k < 0) return pl_fail(msg, len, PL_ERR_INVALID, "zero=%s: use 0, 1, 2, 3 or fsdp", val);
            t.fix_zero = k;
            continue;
        }
        int *field = !strcmp(key, "tp")    ? &t.fix_tp
                     : !strcmp(key, "cp")  ? &t.fix_cp
                     : !strcmp(key, "pp")  ? &t.fix_pp
                     : !strcmp(key, "vp")  ? &t.fix_vp
                     : !strcmp(key, "dp")  ? &t.fix_dp
                     : !strcmp(key, "mbs") ? &t.fix_mbs
                                           : NULL;
        if (!field)
            return pl_fail(msg, len, PL_ERR_INVALID, "unknown key '%s' (keys: tp cp pp vp dp mbs recompute zero dispatcher mem)", key);
        char *end = NULL;
        long v = strtol(val, &end, 10);
        if (*end || v < 1 || v > (1L << 24))
            return pl_fail(msg, len, PL_ERR_INVALID, "%s=%s: a positive integer is needed", key, val);
        *field = (int)v;
    }
    *o = t;
    return PL_OK;
}

/* ---- the top list ------------------------------------------------------------ */

/* a ranks before b: faster, or as fast with more memory to spare (zero
 * 1, 2, fsdp often tie in time; the one that leaves headroom is the one to
 * run; then the one enumerated first) */
static int entry_before(const plan_entry *a, const plan_entry *b) {
    if (a->res.step_us != b->res.step_us) return a->res.step_us < b->res.step_us;
    if (a->res.mem.total != b->res.mem.total) return a->res.mem.total < b->res.mem.total;
    return a->index < b->index; /* the enumeration's order: the same whatever was simulated first */
}

/* Insert e into the top list (first by entry_before, at most k). */
static void top_insert(plan_result *r, int k, const plan_entry *e) {
    int i = r->n_top;
    if (i == k) {
        if (!entry_before(e, &r->top[k - 1])) return;
        i = k - 1;
    } else {
        r->n_top++;
    }
    while (i > 0 && entry_before(e, &r->top[i - 1])) {
        r->top[i] = r->top[i - 1];
        i--;
    }
    r->top[i] = *e;
}

/* Hill-climb e's split on the simulator (plan.h): move one layer across a
 * chunk boundary while that shortens the step and the layout still fits. */
static pl_status refine_entry(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm,
                              const plan_options *o, plan_entry *e, int budget, int64_t *runs, char *msg, size_t len) {
    /* DualPipe's split is one pipeline's pp chunks, run once each way (layout.h's stages=) */
    const int C = e->l.sched == SCHED_DUALPIPE ? e->l.pp : e->l.pp * e->l.vp;
    if (C < 2 || budget <= 0) return PL_OK;
    layout *t = malloc(sizeof *t);
    layout_result *r = malloc(sizeof *r);
    pl_status st = PL_OK;
    if (!t || !r) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (e->l.n_stage_layers == 0) {
        if ((st = layout_chunk_layers(&e->l, cfg->n_layers, e->l.stage_layers, msg, len)) != PL_OK) goto out;
        e->l.n_stage_layers = C;
    }
    /* moves: one layer between neighbouring chunks of the pipeline (b, b + 1),
     * and between neighbouring chunks of one stage (b, b + pp), which keeps
     * the stages' totals (none under DualPipe: C = pp) */
    const int P = e->l.pp;
    int spent = 0, improved = 1;
    while (improved && spent < budget) {
        improved = 0;
        for (int mv = 0; mv < 2 * C && spent < budget; mv++)
            for (int d = -1; d <= 1 && spent < budget; d += 2) {
                const int b = mv < C ? mv : mv - C, b2 = mv < C ? b + 1 : b + P;
                if (b2 >= C) continue;
                if (e->l.stage_layers[b] + d < 1 || e->l.stage_layers[b2] - d < 1) continue;
                *t = e->l;
                t->stage_layers[b] += d;
                t->stage_layers[b2] -= d;
                if ((st = plan_simulate(cfg, c, t, prm, r, msg, len)) != PL_OK) goto out;
                spent++;
                (*runs)++;
                const int fits = !r->oom && !(o->reserve_bytes > 0 && r->mem.total + o->reserve_bytes > r->mem_cap);
                if (fits && r->step_us < e->res.step_us) {
                    e->l = *t;
                    e->res = *r;
                    e->refined++;
                    improved = 1;
                }
            }
    }
out:
    free(t);
    free(r);
    return st;
}

/* ---- the search ------------------------------------------------------------ */

/* One precision the search runs (o->prec alone, or each of o->precs the
 * cluster runs). */
typedef struct {
    precision prec;
    fp8_recipe fp8;
} plan_pass;

/* candidates simulated together: fixed, so the layouts simulated (and the
 * counts) do not depend on the thread count */
#define WAVE 64

typedef struct {
    const gpt_config *cfg;
    const cluster *c;
    const layout_sim_params *prm;
    const plan_options *o;
    plan_result *res;
    plan_bounds *bounds;
    plan_cand *cands;
    int64_t n, cap;
    int64_t mem_cap;  /* the largest GPU memory, less the reserve */
    int64_t base;     /* considered layouts of the passes before this one */
    int pass;
    /* the wave under way */
    const plan_pass *passes;
    int64_t first;    /* index of its first candidate */
    double oom_skip;  /* a candidate no stage split fits is not simulated when its bound exceeds this */
    int split_memory_exact; /* 1: the stage split's memory rules are the simulator's (no framework
                               profile of its own for a dense model) */
    struct job *jobs; /* WAVE */
    /* the caller's progress callback, asked during the enumeration too */
    plan_progress_fn progress;
    void *progress_ctx;
    double t0;
    int stopped;      /* 1: progress asked to stop during the enumeration */
    /* the memory bound of the last layout enumerated (on_layout) */
    int have_prev;
    int64_t prev_mem;
    int prev[15];
} search_ctx;

/* One candidate's simulation (a wave's slot). */
typedef struct job {
    plan_entry e, u;  /* the kept entry; scratch for the uniform split */
    int runs;         /* simulator runs */
    int skipped;      /* 1: no stage split fits and it cannot be the fastest OOM layout: not simulated */
    pl_status st;
    char msg[256];
} job;

/* Tell progress (when set) where the search stands; 1 when it asks to stop. */
static int report(plan_progress_fn progress, void *ctx, const plan_result *res, int64_t done, int64_t total, double t0) {
    if (!progress) return 0;
    plan_progress p = {done, total, 0, 1, res->considered, res->pruned_memory, res->pruned_bound,
                       res->simulated, res->n_top > 0 ? &res->top[0] : NULL, (pl_now_us() - t0) / 1e6};
    return progress(ctx, &p) != 0;
}

/* Bound one enumerated layout: drop it by memory or keep its record. */
static int on_layout(void *ctx, const layout *l, int64_t index) {
    search_ctx *sc = ctx;
    plan_result *res = sc->res;
    res->considered++;
    /* a large enumeration takes seconds: report (done 0 of total 0) and
     * honour a stop every 65536 layouts */
    if ((res->considered & 0xffff) == 0 && report(sc->progress, sc->progress_ctx, res, 0, 0, sc->t0)) {
        sc->stopped = 1;
        return -1;
    }
    /* the memory depends on the order only through DualPipe's two copies
     * of each stage, and the enumeration varies the order innermost: one
     * bound for the other orders of one layout */
    const int key[15] = {l->tp, l->sp, l->cp, l->pp, l->vp, l->dp, l->micro_batch, l->global_batch, (int)l->recompute,
                         (int)l->zero, (int)l->prec, (int)l->fp8, l->ep, l->etp, l->sched == SCHED_DUALPIPE};
    if (!sc->have_prev || memcmp(key, sc->prev, sizeof key)) {
        memcpy(sc->prev, key, sizeof key);
        sc->have_prev = 1;
        sc->prev_mem = plan_memory_lower_bound(sc->cfg, sc->prm, l);
    }
    const int64_t mem_lb = sc->prev_mem;
    const int over = mem_lb > sc->mem_cap;
    if (over && mem_lb < res->min_mem_bytes) res->min_mem_bytes = mem_lb;
    if (over && !sc->o->exhaustive) {
        res->pruned_memory++;
        return 0;
    }
    if (sc->n == sc->cap) {
        int64_t cap = sc->cap ? 2 * sc->cap : 1024;
        plan_cand *q = realloc(sc->cands, sizeof *q * (size_t)cap);
        if (!q) return -1;
        sc->cands = q;
        sc->cap = cap;
    }
    sc->cands[sc->n++] = (plan_cand){l->tp,
                                     l->cp,
                                     l->pp,
                                     l->vp,
                                     l->dp,
                                     l->micro_batch,
                                     l->ep,
                                     l->etp,
                                     (signed char)l->recompute,
                                     (signed char)l->zero,
                                     (signed char)l->sched,
                                     (signed char)sc->pass,
                                     over,
                                     plan_bounds_step_us(sc->bounds, l),
                                     sc->base + index};
    return 0;
}

static int cand_cmp(const void *a, const void *b) {
    const plan_cand *x = a, *y = b;
    if (x->lb_us < y->lb_us) return -1;
    if (x->lb_us > y->lb_us) return 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Simulate candidate first + i: the DP split and the uniform one, the
 * better kept (plan.h). Writes only jobs[i]. */
static void run_job(void *ctx, int64_t i) {
    search_ctx *sc = ctx;
    job *jb = &sc->jobs[i];
    const plan_cand *k = &sc->cands[sc->first + i];
    const plan_pass *ps = &sc->passes[k->pass];
    const gpt_config *cfg = sc->cfg;
    plan_entry *e = &jb->e, *u = &jb->u;
    jb->runs = 0;
    jb->skipped = 0;
    jb->st = PL_OK;
    jb->msg[0] = 0;
    plan_cand_layout(k, sc->o, ps->prec, ps->fp8, &e->l);
    e->lb_us = k->lb_us;
    e->split_dp = 1;
    e->refined = 0;
    e->index = k->index;
    const pl_status split = plan_stage_split(cfg, sc->c, sc->prm, &e->l, NULL, NULL, 0);
    /* no split fits every stage's memory (or, for the V orders, which have no
     * DP split, the uniform one does not): the simulator will find the layout
     * OOM (tests/plan/test_plan_search.c checks it), so it matters only if it
     * can be the fastest OOM layout */
    if (k->lb_us > sc->oom_skip &&
        ((split == PL_ERR_INVALID && sc->split_memory_exact) ||
         (split == PL_ERR_UNSUPPORTED && plan_uniform_certainly_oom(cfg, sc->c, sc->prm, &e->l)))) {
        jb->skipped = 1;
        return;
    }
    const int have_dp = split == PL_OK;
    if (have_dp) {
        int chunks[LAYOUT_MAX_CHUNKS];
        /* a DP split that is the uniform one is simulated once */
        if (layout_chunk_layers(&(layout){.pp = e->l.pp, .vp = e->l.vp}, cfg->n_layers, chunks, NULL, 0) == PL_OK &&
            !memcmp(chunks, e->l.stage_layers, sizeof *chunks * (size_t)(e->l.pp * e->l.vp)))
            e->l.n_stage_layers = 0;
        if ((jb->st = plan_simulate(cfg, sc->c, &e->l, sc->prm, &e->res, jb->msg, sizeof jb->msg)) != PL_OK) return;
        jb->runs++;
    }
    if (!have_dp || (!sc->o->no_uniform && e->l.n_stage_layers != 0)) {
        plan_cand_layout(k, sc->o, ps->prec, ps->fp8, &u->l);
        u->lb_us = k->lb_us;
        u->split_dp = 0;
        u->refined = 0;
        u->index = k->index;
        if ((jb->st = plan_simulate(cfg, sc->c, &u->l, sc->prm, &u->res, jb->msg, sizeof jb->msg)) != PL_OK) return;
        jb->runs++;
        /* keep the uniform split when it fits and the DP one does not,
         * or when it is faster with the same verdict */
        if (!have_dp || (e->res.oom && !u->res.oom) || (e->res.oom == u->res.oom && u->res.step_us < e->res.step_us))
            *e = *u;
    }
}


/* Every GPU type of c runs precision p (recipe r when fp8). */
static int cluster_runs(const cluster *c, precision p, fp8_recipe r) {
    for (int t = 0; t < c->n_gpu_types; t++) {
        if (!(c->gpus[t].peak_flops[p] > 0)) return 0;
        if (p == PRECISION_FP8 && fp8_check_gpu(&c->gpus[t], r, NULL, 0) != PL_OK) return 0;
    }
    return 1;
}

/* The options' checks and the precisions to run into passes (*n_passes). */
static pl_status check_options(const cluster *c, const plan_options *o, plan_pass *passes, int *n_passes, char *msg,
                               size_t len) {
    const int64_t N = o->gpus, total = cluster_n_gpus(c);
    if (N < 1 || N > total)
        return pl_fail(msg, len, PL_ERR_INVALID, "--gpus %lld is not in 1..%lld (the cluster's GPUs)", (long long)N,
                       (long long)total);
    if (o->global_batch < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "the global batch must be at least 1, not %d", o->global_batch);
    if (o->top_k < 1 || o->top_k > PLAN_MAX_TOP)
        return pl_fail(msg, len, PL_ERR_INVALID, "top must be in 1..%d, not %d", PLAN_MAX_TOP, o->top_k);
    if (o->max_vp < 1 || o->max_mbs < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "max_vp and max_mbs must be at least 1");
    *n_passes = 0;
    if (o->n_prec <= 0) {
        const cluster_gpu *fast = plan_fastest_gpu(c, o->prec);
        if (!fast || fast->peak_flops[o->prec] <= 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "no GPU of cluster %s runs %s", c->name, precision_name(o->prec));
        if (o->prec == PRECISION_FP8)
            for (int t = 0; t < c->n_gpu_types; t++)
                if (fp8_check_gpu(&c->gpus[t], o->fp8, msg, len) != PL_OK) return PL_ERR_INVALID;
        passes[(*n_passes)++] = (plan_pass){o->prec, o->fp8};
        return PL_OK;
    }
    if (o->n_prec > PLAN_MAX_PRECISIONS)
        return pl_fail(msg, len, PL_ERR_INVALID, "more than %d precisions", PLAN_MAX_PRECISIONS);
    for (int i = 0; i < o->n_prec; i++)
        if (cluster_runs(c, o->precs[i], o->fp8s[i])) passes[(*n_passes)++] = (plan_pass){o->precs[i], o->fp8s[i]};
    if (*n_passes == 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "no GPU of cluster %s runs any of the precisions asked", c->name);
    return PL_OK;
}

static int64_t largest_memory(const cluster *c) {
    int64_t m = 0;
    for (int g = 0; g < c->n_groups; g++) {
        const int64_t b = c->gpus[c->groups[g].gpu_type].hbm_bytes;
        if (b > m) m = b;
    }
    return m;
}

/* Fold a wave's results into res, in candidate order (the first error
 * stops it: then *st and msg say why). */
static void merge_wave(search_ctx *sc, int64_t n_jobs, pl_status *st, char *msg, size_t len) {
    plan_result *res = sc->res;
    const plan_options *o = sc->o;
    for (int64_t i = 0; i < n_jobs; i++) {
        job *jb = &sc->jobs[i];
        if (jb->st != PL_OK) {
            *st = jb->st;
            pl_fail(msg, len, jb->st, "%s", jb->msg);
            return;
        }
        if (jb->skipped) {
            res->pruned_memory++;
            continue;
        }
        plan_entry *e = &jb->e;
        res->sim_runs += jb->runs;
        res->simulated++;
        if (e->res.mem.total < res->min_mem_bytes) res->min_mem_bytes = e->res.mem.total;
        if (o->reserve_bytes > 0 && e->res.mem.total + o->reserve_bytes > e->res.mem_cap) e->res.oom = 1;
        if (e->res.oom) {
            res->sim_oom++;
            /* layouts over the memory bound (only an exhaustive search
             * simulates them) are not candidates for the OOM row */
            if (!sc->cands[sc->first + i].over_mem &&
                (!res->have_oom_best || entry_before(e, &res->oom_best))) {
                res->oom_best = *e;
                res->have_oom_best = 1;
            }
            continue;
        }
        top_insert(res, o->top_k, e);
    }
}

/* The refinement of the top entries, one job each (budgets fixed before:
 * the same for any thread count). */
typedef struct {
    const gpt_config *cfg;
    const cluster *c;
    const layout_sim_params *prm;
    const plan_options *o;
    plan_result *res;
    int budget;
    int64_t runs[PLAN_MAX_TOP];
    pl_status st[PLAN_MAX_TOP];
    char msg[PLAN_MAX_TOP][256];
} refine_ctx;

static void run_refine(void *ctx, int64_t i) {
    refine_ctx *rc = ctx;
    rc->runs[i] = 0;
    rc->msg[i][0] = 0;
    rc->st[i] = refine_entry(rc->cfg, rc->c, rc->prm, rc->o, &rc->res->top[i], rc->budget, &rc->runs[i], rc->msg[i],
                             sizeof rc->msg[i]);
}

pl_status plan_search(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_progress_fn progress,
                      void *progress_ctx, plan_result *res, char *msg, size_t len) {
    memset(res, 0, sizeof *res);
    res->min_mem_bytes = INT64_MAX;
    const double t0 = pl_now_us();
    plan_pass passes[PLAN_MAX_PRECISIONS];
    int n_passes = 0;
    pl_status st = check_options(c, o, passes, &n_passes, msg, len);
    if (st != PL_OK) return st;
    if (o->fix_dispatcher >= 0 || o->fix_mem) {
        /* the stack's settings must suit the model at one of the precisions searched */
        char why[256] = "";
        int ok = 0;
        for (int p = 0; p < n_passes && !ok; p++) {
            layout t;
            layout_default(&t);
            plan_stack_apply(o, &t);
            t.prec = passes[p].prec;
            t.fp8 = passes[p].fp8;
            ok = layout_validate(&t, cfg, layout_world_size(&t), why, sizeof why) == PL_OK;
        }
        if (!ok) return pl_fail(msg, len, PL_ERR_INVALID, "--fix: %s", why);
    }
    layout_sim_params dflt;
    const layout_sim_params *prm = o->sim;
    if (!prm) {
        layout_sim_params_default(&dflt);
        prm = &dflt;
    }
    const int threads = plan_threads_resolve(o->threads);
    search_ctx sc;
    memset(&sc, 0, sizeof sc);
    sc.cfg = cfg;
    sc.c = c;
    sc.prm = prm;
    sc.o = o;
    sc.res = res;
    sc.bounds = plan_bounds_new(cfg, c, prm);
    sc.mem_cap = largest_memory(c) - (o->reserve_bytes > 0 ? o->reserve_bytes : 0);
    sc.passes = passes;
    sc.oom_skip = INFINITY;
    sc.progress = progress;
    sc.progress_ctx = progress_ctx;
    sc.t0 = t0;
    plan_options *oi = malloc(sizeof *oi);
    sc.jobs = malloc(sizeof *sc.jobs * WAVE);
    sc.split_memory_exact = gpt_is_moe(cfg) || !prm->framework || framework_is_neutral(prm->framework);
    if (!sc.bounds || !oi || !sc.jobs) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* every precision's layouts in one list: one bound order, one top list */
    for (int p = 0; p < n_passes && st == PL_OK; p++) {
        *oi = *o;
        oi->n_prec = 0;
        oi->prec = passes[p].prec;
        oi->fp8 = passes[p].fp8;
        sc.pass = p;
        sc.base = res->considered;
        st = plan_enumerate(cfg, c, oi, on_layout, &sc, msg, len);
    }
    if (sc.stopped)
        st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "the search was stopped while enumerating (%lld layouts so far)",
                     (long long)res->considered);
    if (st != PL_OK) goto out;
    if (res->considered == 0) {
        st = pl_fail(msg, len, PL_ERR_INVALID,
                     "no layout of %lld GPUs fits the model (%d layers, %d heads) and batch %d: try another --gpus or "
                     "--global-batch",
                     (long long)o->gpus, cfg->n_layers, cfg->n_heads, o->global_batch);
        goto out;
    }
    const int64_t n = sc.n;
    if (n > 0 && !o->exhaustive) qsort(sc.cands, (size_t)n, sizeof *sc.cands, cand_cmp);
    /* in waves, in the order of the bound: a candidate whose bound exceeds
     * the k-th best step simulated so far cannot enter the top k, and
     * neither can any after it */
    const int k = o->top_k;
    for (int64_t i = 0; i < n;) {
        if (!o->exhaustive && res->n_top == k && sc.cands[i].lb_us > res->top[k - 1].res.step_us) {
            res->pruned_bound += n - i;
            break;
        }
        if (report(progress, progress_ctx, res, i, n, t0)) {
            st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "the search was stopped after %lld of %lld candidates",
                         (long long)i, (long long)n);
            break;
        }
        int64_t j = i;
        while (j < n && j - i < WAVE &&
               (o->exhaustive || res->n_top < k || sc.cands[j].lb_us <= res->top[k - 1].res.step_us))
            j++;
        sc.first = i;
        /* once a layout fits (so the memory needed is known), one that no
         * split fits is simulated only while it may be the fastest OOM one:
         * its bound at most the fastest OOM step and the k-th best step */
        sc.oom_skip = INFINITY;
        if (!o->exhaustive && res->n_top > 0) {
            if (res->n_top == k) sc.oom_skip = res->top[k - 1].res.step_us;
            if (res->have_oom_best && res->oom_best.res.step_us < sc.oom_skip) sc.oom_skip = res->oom_best.res.step_us;
        }
        plan_parallel_for(threads, j - i, run_job, &sc);
        merge_wave(&sc, j - i, &st, msg, len);
        if (st != PL_OK) break;
        i = j;
    }
    if (st == PL_OK && report(progress, progress_ctx, res, n, n, t0))
        st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "the search was stopped before refining the top splits");
    /* the fastest OOM layout only when it is faster than the k-th best
     * that fits: every such layout is simulated whatever the bound prunes */
    if (res->have_oom_best && res->n_top == k && !(res->oom_best.res.step_us < res->top[k - 1].res.step_us))
        res->have_oom_best = 0;
    if (st == PL_OK && res->n_top > 0 && o->refine_sims > 0) {
        /* each top layout's split refined on its own budget: refine_sims,
         * and never more runs in all than layouts were considered */
        refine_ctx *rc = malloc(sizeof *rc);
        if (!rc) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        rc->cfg = cfg;
        rc->c = c;
        rc->prm = prm;
        rc->o = o;
        rc->res = res;
        const int64_t share = res->considered / res->n_top;
        rc->budget = (int)(share < o->refine_sims ? share : o->refine_sims);
        plan_parallel_for(threads, res->n_top, run_refine, rc);
        for (int i = 0; i < res->n_top; i++) {
            res->refine_runs += rc->runs[i];
            if (st == PL_OK && rc->st[i] != PL_OK) st = pl_fail(msg, len, rc->st[i], "%s", rc->msg[i]);
        }
        free(rc);
    }
    if (st == PL_OK) { /* insertion sort again: refinement only shortens */
        for (int i = 1; i < res->n_top; i++)
            for (int j = i; j > 0 && entry_before(&res->top[j], &res->top[j - 1]); j--) {
                sc.jobs[0].e = res->top[j];
                res->top[j] = res->top[j - 1];
                res->top[j - 1] = sc.jobs[0].e;
            }
    }
out:
    free(sc.cands);
    free(sc.jobs);
    free(oi);
    plan_bounds_free(sc.bounds);
    if (res->min_mem_bytes == INT64_MAX) res->min_mem_bytes = 0;
    res->wall_s = (pl_now_us() - t0) / 1e6;
    return st;
}

/* ---- precisions (plan_parse_precisions; issue 27) ------------------------ */

pl_status plan_parse_precisions(const char *text, plan_options *o, char *msg, size_t len) {
    if (!text || !*text) return pl_fail(msg, len, PL_ERR_INVALID, "no precision given (e.g. bf16, fp8 or bf16,fp8)");
    if (strlen(text) > 512) return pl_fail(msg, len, PL_ERR_INVALID, "precision list is too long");
    char buf[520];
    snprintf(buf, sizeof buf, "%s", text);
    precision precs[PLAN_MAX_PRECISIONS];
    fp8_recipe recs[PLAN_MAX_PRECISIONS];
    int n = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq) *eq = 0;
        precision p;
        char m[200];
        if (precision_parse(item, &p, m, sizeof m) != PL_OK) return pl_fail(msg, len, PL_ERR_INVALID, "%s", m);
        fp8_recipe want[FP8_RECIPE_COUNT];
        int nw = 0;
        if (p != PRECISION_FP8) {
            if (eq) return pl_fail(msg, len, PL_ERR_INVALID, "'%.32s=...': only fp8 takes recipes", item);
            want[nw++] = FP8_RECIPE_DELAYED;
        } else if (!eq) {
            for (int r = 0; r < FP8_RECIPE_COUNT; r++) want[nw++] = (fp8_recipe)r;
        } else {
            char *save2 = NULL;
            for (char *r = strtok_r(eq + 1, "|", &save2); r; r = strtok_r(NULL, "|", &save2)) {
                if (nw == FP8_RECIPE_COUNT) return pl_fail(msg, len, PL_ERR_INVALID, "fp8 recipe named twice");
                if (fp8_recipe_parse(r, &want[nw], m, sizeof m) != PL_OK)
                    return pl_fail(msg, len, PL_ERR_INVALID, "%s", m);
                nw++;
            }
            if (!nw) return pl_fail(msg, len, PL_ERR_INVALID, "fp8= needs a recipe (delayed, tensorwise, blockwise, mxfp8)");
        }
        for (int w = 0; w < nw; w++) {
            for (int i = 0; i < n; i++)
                if (precs[i] == p && (p != PRECISION_FP8 || recs[i] == want[w]))
                    return pl_fail(msg, len, PL_ERR_INVALID, "precision %s%s%s is named twice", precision_name(p),
                                   p == PRECISION_FP8 ? " recipe " : "", p == PRECISION_FP8 ? fp8_recipe_name(want[w]) : "");
            if (n == PLAN_MAX_PRECISIONS)
                return pl_fail(msg, len, PL_ERR_INVALID, "more than %d precisions", PLAN_MAX_PRECISIONS);
            precs[n] = p;
            recs[n++] = want[w];
        }
    }
    if (n == 0) return pl_fail(msg, len, PL_ERR_INVALID, "no precision given (e.g. bf16, fp8 or bf16,fp8)");
    if (n == 1) {
        o->prec = precs[0];
        o->fp8 = recs[0];
        o->n_prec = 0;
        return PL_OK;
    }
    o->n_prec = n;
    memcpy(o->precs, precs, sizeof precs[0] * (size_t)n);
    memcpy(o->fp8s, recs, sizeof recs[0] * (size_t)n);
    o->prec = precs[0];
    o->fp8 = recs[0];
    return PL_OK;
}
