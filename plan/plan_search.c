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
#include "model_params.h"
#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_model.h"
#include "fp8.h"
#include "layout_memory.h"
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
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s' is not key=value (keys: tp cp pp vp dp mbs recompute zero)", tok);
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        if (!strcmp(key, "recompute")) {
            const int k = recompute_kind_from_name(val);
            if (k < 0) return pl_fail(msg, len, PL_ERR_INVALID, "recompute=%s: use none, selective or full", val);
            t.fix_recompute = k;
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
            return pl_fail(msg, len, PL_ERR_INVALID, "unknown key '%s' (keys: tp cp pp vp dp mbs recompute zero)", key);
        char *end = NULL;
        long v = strtol(val, &end, 10);
        if (*end || v < 1 || v > (1L << 24))
            return pl_fail(msg, len, PL_ERR_INVALID, "%s=%s: a positive integer is needed", key, val);
        *field = (int)v;
    }
    *o = t;
    return PL_OK;
}

/* ---- the cluster seen by stages ---------------------------------------- */

/* GPU index range [lo, hi) of group g. */
static void group_range(const cluster *c, int g, int64_t *lo, int64_t *hi) {
    int64_t start = 0;
    for (int i = 0; i < g; i++) start += (int64_t)c->groups[i].n_nodes * c->gpus_per_node;
    *lo = start;
    *hi = start + (int64_t)c->groups[g].n_nodes * c->gpus_per_node;
}

/* Per-layer cost (forward + backward + recompute) of l on gpu. */
static void layer_costs(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l, const compute_params *cp,
                        double *layer, double *fb, double *embed, double *head) {
    layer_cost lc, ec, hc;
    layer_compute_cost(gpu, cfg, l, cp, &lc);
    if (gpt_is_moe(cfg)) { /* the cheaper of a dense layer and an MoE layer (a bound for either) */
        layer_cost a, m;
        layer_compute_cost_mlp(gpu, cfg, l, cp, 0, &a);
        moe_block_compute_cost(gpu, cfg, l, cp, NULL, &m);
        if (a.fwd_us + m.fwd_us + a.bwd_us + m.bwd_us < lc.fwd_us + lc.bwd_us) {
            lc.fwd_us = a.fwd_us + m.fwd_us;
            lc.bwd_us = a.bwd_us + m.bwd_us;
            lc.recompute_us = a.recompute_us + m.recompute_us;
        }
    }
    embedding_compute_cost(gpu, cfg, l, cp, &ec);
    head_compute_cost(gpu, cfg, l, cp, &hc);
    *layer = lc.fwd_us + lc.bwd_us + lc.recompute_us;
    if (fb) *fb = lc.fwd_us + lc.bwd_us;
    *embed = ec.fwd_us + ec.bwd_us + ec.recompute_us;
    *head = hc.fwd_us + hc.bwd_us + hc.recompute_us;
}

/* The fastest GPU type for prec (largest peak; ties: larger bandwidth). */
static const cluster_gpu *fastest_gpu(const cluster *c, precision prec) {
    const cluster_gpu *best = NULL;
    for (int g = 0; g < c->n_groups; g++) {
        const cluster_gpu *x = &c->gpus[c->groups[g].gpu_type];
        if (!best || x->peak_flops[prec] > best->peak_flops[prec] ||
            (x->peak_flops[prec] == best->peak_flops[prec] && x->hbm_bw > best->hbm_bw))
            best = x;
    }
    return best;
}

/* GPUs of the cluster (inputs/cluster.h's numbering: group by group). */
static int64_t total_gpus(const cluster *c) {
    int64_t lo, hi;
    group_range(c, c->n_groups - 1, &lo, &hi);
    return hi;
}

static int64_t largest_memory(const cluster *c) {
    int64_t m = 0;
    for (int g = 0; g < c->n_groups; g++) {
        const int64_t b = c->gpus[c->groups[g].gpu_type].hbm_bytes;
        if (b > m) m = b;
    }
    return m;
}

/* Micro-batches stage s stashes at the peak, in chunk forwards (the unit
 * of layout_stage_memory): 1F1B min(m, pp - s); interleaved Megatron's
 * warm-up 2 (pp - s - 1) + (vp - 1) pp + 1, at most m vp. */
static int stage_in_flight(const layout *l, int m, int s) {
    if (l->sched != SCHED_1F1B) return schedule_peak_stash_rule(l->sched, l->pp, s, m); /* schedule.h's rules */
    if (l->vp == 1) return m < l->pp - s ? m : l->pp - s;
    int64_t n = 2 * (int64_t)(l->pp - s - 1) + (int64_t)(l->vp - 1) * l->pp + 1, cap = (int64_t)m * l->vp;
    return (int)(n < cap ? n : cap);
}

/* ---- bounds ------------------------------------------------------------- */

int64_t plan_memory_lower_bound(const gpt_config *cfg, const layout_sim_params *prm, const layout *l) {
    /* the stage holding the most layers has at least ceil(L / pp) of them
     * and at least one micro-batch stashed; it is one of the stages, so its
     * memory is at least the smallest of these over the stage kinds
     * (first, middle, last: the only ones that differ) */
    const int per = (cfg->n_layers + l->pp - 1) / l->pp;
    int64_t lb = INT64_MAX;
    const int kinds[3] = {0, l->pp > 2 ? 1 : 0, l->pp - 1};
    for (int i = 0; i < 3; i++) {
        layout_memory m;
        layout_stage_memory_moe(cfg, l, prm ? &prm->compute : NULL, prm ? &prm->moe : NULL, kinds[i], per, 1, &m);
        if (m.total < lb) lb = m.total;
    }
    return lb;
}

double plan_step_lower_bound_us(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm,
                                const layout *l) {
    layout_sim_params dflt;
    if (!prm) {
        layout_sim_params_default(&dflt);
        prm = &dflt;
    }
    const cluster_gpu *gpu = fastest_gpu(c, l->prec);
    double layer, fb, embed, head;
    layer_costs(gpu, cfg, l, &prm->compute, &layer, &fb, &embed, &head);
    const int m = layout_micro_batches(l);
    /* stage s idles at least s one-layer forwards before its first op and
     * s one-layer backwards after its last; averaged over the stages */
    layer_cost lc;
    layer_compute_cost(gpu, cfg, l, &prm->compute, &lc);
    if (gpt_is_moe(cfg)) layer_compute_cost_mlp(gpu, cfg, l, &prm->compute, 0, &lc); /* attention only: a bound */
    double busy = (double)m * ((double)cfg->n_layers * layer + embed + head) / l->pp;
    if (gpt_is_moe(cfg) && l->ep > 1 && l->ep <= 4096) {
        /* the MoE dispatch: at least 2 forward + 2 backward all-to-alls per MoE layer and micro-batch, over the
         * first stage's ep group (every stage's has its shape), spread over the stages */
        int64_t g[4096];
        double t = 0;
        const int n = layout_expert_group_ranks(l, 0, LAYOUT_EDIM_EP, g);
        if (l->dispatcher == MOE_DISPATCH_ALLTOALL && n > 1 &&
            moe_all_to_all_us(c, g, n, moe_dispatch_bytes(cfg, l, &prm->moe), &t, NULL) == PL_OK)
            busy += (double)m * gpt_moe_layers_in(cfg, 0, cfg->n_layers) * 4.0 * prm->collective_scale * t / l->pp;
    }
    /* the split orders' idle can be far less (ZB-H2 none inside a stage's
     * span): no idle bound for them */
    const double idle = l->sched != SCHED_1F1B ? 0.0 : 0.5 * (l->pp - 1) * (lc.fwd_us + lc.bwd_us);
    return busy + idle + prm->step_fixed_us;
}

/* ---- the stage split ---------------------------------------------------- */

pl_status plan_stage_split(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, layout *l,
                           double *est_us, char *msg, size_t len) {
    layout_sim_params dflt;
    if (!prm) {
        layout_sim_params_default(&dflt);
        prm = &dflt;
    }
    const int S = l->pp, V = l->vp, L = cfg->n_layers, m = layout_micro_batches(l);
    if ((int64_t)S * V > L || m < 1) return pl_fail(msg, len, PL_ERR_INVALID, "no split of %d layers into %d chunks", L, S * V);
    if (schedule_v_chunks(l->sched) == 2) /* the split assigns chunk v * pp + s to stage s: not a V */
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the stage split does not place the chunks of a V (sched=%s)",
                       schedule_order_name(l->sched));
    const int64_t R = (int64_t)l->tp * l->cp * l->dp;
    double *cost = malloc(sizeof *cost * (size_t)S * (size_t)(L + 1));
    double *per_layer = malloc(sizeof *per_layer * (size_t)S), embed0 = 0, head_last = 0;
    int *n = malloc(sizeof *n * (size_t)S);
    pl_status st = PL_ERR_NOMEM;
    if (!cost || !n || !per_layer) goto out;
    layout plain = *l;
    plain.n_stage_layers = 0;
    for (int s = 0; s < S; s++) {
        /* the stage's GPUs: every group its ranks touch; cost on the
         * slowest, memory against the smallest */
        const int64_t lo = (int64_t)s * R, hi = lo + R;
        double layer = 0, embed = 0, head = 0;
        int64_t cap = INT64_MAX;
        for (int g = 0; g < c->n_groups; g++) {
            int64_t glo, ghi;
            group_range(c, g, &glo, &ghi);
            if (ghi <= lo || glo >= hi) continue;
            const cluster_gpu *gpu = &c->gpus[c->groups[g].gpu_type];
            double a, e, h;
            layer_costs(gpu, cfg, &plain, &prm->compute, &a, NULL, &e, &h);
            if (a > layer) layer = a;
            if (e > embed) embed = e;
            if (h > head) head = h;
            if (gpu->hbm_bytes < cap) cap = gpu->hbm_bytes;
        }
        const double fixed = (s == 0 ? embed : 0) + (s == S - 1 ? head : 0);
        per_layer[s] = layer;
        if (s == 0) embed0 = embed;
        if (s == S - 1) head_last = head;
        const int inflight = stage_in_flight(&plain, m, s);
        /* memory grows with the layers: the most that fit, by bisection
         * (kmax < V: none) */
        int klo = V - 1, khi = L;
        while (klo < khi) {
            const int mid = klo + (khi - klo + 1) / 2;
            layout_memory mem;
            layout_stage_memory_moe(cfg, &plain, &prm->compute, &prm->moe, s, mid, inflight, &mem);
            if (mem.total <= cap) klo = mid;
            else khi = mid - 1;
        }
        const int kmax = klo;
        for (int k = 0; k <= L; k++) cost[(size_t)s * (L + 1) + k] = k >= V && k <= kmax ? fixed + k * layer : INFINITY;
    }
    const double w = (double)m * V - 1;
    const double obj = plan_split_dp(S, L, V, cost, w, n);
    if (isnan(obj)) goto out;
    if (!isfinite(obj)) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "no split of %d layers over %d stages fits the GPUs' memory", L, S);
        goto out;
    }
    /* each stage's layers over its vp chunks (chunk v * pp + s): one at a
     * time to the chunk whose cost (its layers, plus the embedding in the
     * first chunk and the head in the last) is lowest, first chunk on ties,
     * after one layer each: the most even chunk costs, so the chunks with
     * the embedding or the head get fewer layers */
    for (int s = 0; s < S; s++) {
        double cc[LAYOUT_MAX_CHUNKS];
        for (int v = 0; v < V; v++) {
            l->stage_layers[v * S + s] = 1;
            cc[v] = per_layer[s] + (s == 0 && v == 0 ? embed0 : 0) + (s == S - 1 && v == V - 1 ? head_last : 0);
        }
        for (int k = V; k < n[s]; k++) {
            int best = 0;
            for (int v = 1; v < V; v++)
                if (cc[v] < cc[best]) best = v;
            l->stage_layers[best * S + s]++;
            cc[best] += per_layer[s];
        }
    }
    l->n_stage_layers = S * V;
    if (est_us) *est_us = obj / V;
    st = PL_OK;
out:
    free(cost);
    free(per_layer);
    free(n);
    return st;
}

/* ---- simulation --------------------------------------------------------- */

/* The cluster as plan.h says stages see it: the simulator runs a stage on
 * its replica-0 rank's GPU, which on a mixed cluster may be the fast half
 * of a stage whose data-parallel peers sit on slower GPUs. Node groups
 * that share a stage are merged into one class; every group of a class
 * takes the class's slowest GPU type, with the smallest memory of the
 * class (a new type slot when one is free). *out is c when nothing
 * straddles. */
static void stage_weakest_cluster(const cluster *c, const layout *l, cluster *out) {
    *out = *c;
    if (c->n_groups < 2) return;
    int cls[CLUSTER_MAX_GROUPS];
    for (int g = 0; g < c->n_groups; g++) cls[g] = g;
    const int64_t R = (int64_t)l->tp * l->cp * l->dp;
    for (int s = 0; s < l->pp; s++) {
        const int64_t lo = (int64_t)s * R, hi = lo + R;
        int first = -1;
        for (int g = 0; g < c->n_groups; g++) {
            int64_t glo, ghi;
            group_range(c, g, &glo, &ghi);
            if (ghi <= lo || glo >= hi) continue;
            if (first < 0) {
                first = g;
                continue;
            }
            /* merge g's class into first's */
            const int from = cls[g], to = cls[first];
            for (int k = 0; k < c->n_groups; k++)
                if (cls[k] == from) cls[k] = to;
        }
    }
    for (int k = 0; k < c->n_groups; k++) {
        if (cls[k] != k) continue; /* k is a class's representative */
        int members = 0, slow = -1;
        int64_t mem = INT64_MAX;
        for (int g = 0; g < c->n_groups; g++) {
            if (cls[g] != k) continue;
            members++;
            const int t = c->groups[g].gpu_type;
            if (slow < 0 || c->gpus[t].peak_flops[l->prec] < c->gpus[slow].peak_flops[l->prec]) slow = t;
            if (c->gpus[t].hbm_bytes < mem) mem = c->gpus[t].hbm_bytes;
        }
        if (members < 2) continue;
        int t = slow;
        if (c->gpus[slow].hbm_bytes > mem && out->n_gpu_types < CLUSTER_MAX_GPU_TYPES) {
            t = out->n_gpu_types++;
            out->gpus[t] = c->gpus[slow];
            out->gpus[t].hbm_bytes = mem;
        }
        for (int g = 0; g < c->n_groups; g++)
            if (cls[g] == k) out->groups[g].gpu_type = t;
    }
}

pl_status plan_simulate(const gpt_config *cfg, const cluster *c0, const layout *l, const layout_sim_params *prm,
                        layout_result *res, char *msg, size_t len) {
    cluster *c = malloc(sizeof *c);
    if (!c) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    stage_weakest_cluster(c0, l, c);
    layout_sim *s = NULL;
    pl_status st = layout_sim_create(cfg, l, c, &s, msg, len);
    if (st != PL_OK) {
        free(c);
        return st;
    }
    if (st != PL_OK) return st;
    st = layout_sim_run(s, prm, 0, res, msg, len);
    layout_sim_destroy(s);
    free(c);
    return st;
}

/* ---- the search --------------------------------------------------------- */

typedef struct {
    int tp, cp, pp, vp, dp, mbs;
    signed char recompute, zero, sched;
    int ep, etp;    /* the expert grid (1, 1 for a dense model) */
    double lb_us;   /* step-time bound */
    int64_t order;  /* enumeration index, for a stable sort */
} plan_cand;

static int cand_cmp(const void *a, const void *b) {
    const plan_cand *x = a, *y = b;
    if (x->lb_us < y->lb_us) return -1;
    if (x->lb_us > y->lb_us) return 1;
    return (x->order > y->order) - (x->order < y->order);
}

static void cand_layout(const plan_cand *k, const plan_options *o, layout *l) {
    layout_default(l);
    l->tp = k->tp;
    l->sp = k->tp > 1;
    l->cp = k->cp;
    l->pp = k->pp;
    l->vp = k->vp;
    l->dp = k->dp;
    l->micro_batch = k->mbs;
    l->global_batch = o->global_batch;
    l->recompute = (recompute_kind)k->recompute;
    l->zero = (zero_kind)k->zero;
    l->prec = o->prec;
    l->fp8 = o->fp8;
    l->sched = (schedule_order)k->sched;
    l->ep = k->ep;
    l->etp = k->etp;
}

/* a ranks before b: faster, or as fast with more memory to spare (zero
 * 1, 2, fsdp often tie in time; the one that leaves headroom is the one to
 * run) */
static int entry_before(const plan_entry *a, const plan_entry *b) {
    if (a->res.step_us != b->res.step_us) return a->res.step_us < b->res.step_us;
    return a->res.mem.total < b->res.mem.total;
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

/* The enumeration of plan.h's file comment, in a fixed order: tp, cp, pp,
 * vp, mbs, recompute, zero. */
pl_status plan_enumerate(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_layout_fn fn,
                         void *ctx, char *msg, size_t len) {
    const int64_t N = o->gpus;
    const int L = cfg->n_layers, B = o->global_batch;
    int max_tp = o->max_tp > 0 ? o->max_tp : (int)cluster_domain_gpus(c); /* tp stays on NVLink */
    int max_cp = o->max_cp;
    if (max_cp <= 0)
        for (max_cp = 1; cfg->seq_len / (2 * max_cp) >= 4096; max_cp *= 2) {
        }
    if (o->fix_tp > max_tp) max_tp = o->fix_tp;
    if (o->fix_cp > max_cp) max_cp = o->fix_cp;
    const int max_vp = o->fix_vp > o->max_vp ? o->fix_vp : o->max_vp;
    const int max_mbs = o->fix_mbs > o->max_mbs ? o->fix_mbs : o->max_mbs;
    layout *l = malloc(sizeof *l);
    if (!l) return PL_ERR_NOMEM;
    pl_status st = PL_OK;
    int64_t index = 0;
    const int moe = gpt_is_moe(cfg); /* ep over the experts' divisors, etp 1 or tp (torchtitan's choices) */
    for (int tp = 1; tp <= max_tp && tp <= N; tp++) {
        if (N % tp || (o->fix_tp && tp != o->fix_tp)) continue;
        for (int cp = 1; cp <= max_cp && tp * cp <= N; cp++) {
            if ((N / tp) % cp || (o->fix_cp && cp != o->fix_cp)) continue;
            const int64_t rest = N / tp / cp;
            for (int pp = 1; pp <= L && pp <= rest; pp++) {
                if (rest % pp || (o->fix_pp && pp != o->fix_pp)) continue;
                const int64_t dp64 = rest / pp;
                if (dp64 > B || B % dp64) continue; /* dp * mbs must divide B: no mbs can help */
                const int dp = (int)dp64;
                if (o->fix_dp && dp != o->fix_dp) continue;
                for (int vp = 1; vp <= max_vp; vp++) {
                    if (vp > 1 && (pp < 2 || pp * vp > L)) break;
                    if (o->fix_vp && vp != o->fix_vp) continue;
                    for (int mbs = 1; mbs <= max_mbs && mbs <= B / dp; mbs++) {
                        if ((B / dp) % mbs || (o->fix_mbs && mbs != o->fix_mbs)) continue;
                        for (int rc = 0; rc <= RECOMPUTE_FULL; rc++)
                            for (int z = 0; z <= (dp > 1 ? ZERO_FSDP : 0); z++)
                            for (int ep = 1; ep <= (moe ? cfg->n_experts : 1); ep++)
                            for (int ei = 0; ei < (moe && tp > 1 ? 2 : 1); ei++) {
                                const int etp = ei ? tp : 1; /* expert tp: none, or the attention's */
                                if (moe && (cfg->n_experts % ep || ((int64_t)tp * cp * dp) % ((int64_t)ep * etp)))
                                    continue;
                                if ((o->fix_recompute >= 0 && rc != o->fix_recompute) ||
                                    (o->fix_zero >= 0 && z != (dp > 1 ? o->fix_zero : 0)))
                                    continue;
                                layout_default(l);
                                l->tp = tp;
                                l->sp = tp > 1;
                                l->cp = cp;
                                l->pp = pp;
                                l->vp = vp;
                                l->dp = dp;
                                l->micro_batch = mbs;
                                l->global_batch = B;
                                l->recompute = (recompute_kind)rc;
                                l->zero = (zero_kind)z;
                                l->prec = o->prec;
                                l->fp8 = o->fp8;
                                l->ep = ep;
                                l->etp = etp;
                                /* 1F1B (interleaved with vp > 1), then the orders of
                                 * sched_mask that take this vp (schedule.h) */
                                for (int so = SCHED_1F1B; so < SCHED_ORDER_COUNT; so++) {
                                    if (so == SCHED_GPIPE || so == SCHED_INTERLEAVED) continue;
                                    if (so != SCHED_1F1B && (!(o->sched_mask >> so & 1u) ||
                                                             schedule_v_chunks((schedule_order)so) != vp))
                                        continue;
                                    l->sched = (schedule_order)so;
                                    if (layout_validate(l, cfg, N, NULL, 0) != PL_OK) continue;
                                    if (!plan_framework_runs(o->framework, cfg, l)) continue;
                                    if (fn(ctx, l, index++) != 0) {
                                        st = pl_fail(msg, len, PL_ERR_NOMEM, "no memory for the layouts");
                                        goto out;
                                    }
                                }
                            }
                    }
                }
            }
        }
    }
out:
    free(l);
    return st;
}

typedef struct {
    const gpt_config *cfg;
    const cluster *c;
    const layout_sim_params *prm;
    plan_result *res;
    plan_cand *cands;
    int64_t n, cap;
    int64_t mem_cap;  /* the largest GPU memory */
} search_ctx;

/* Bound one enumerated layout: drop it by memory or keep its record. */
static int on_layout(void *ctx, const layout *l, int64_t index) {
    search_ctx *sc = ctx;
    plan_result *res = sc->res;
    res->considered++;
    const int64_t mem_lb = plan_memory_lower_bound(sc->cfg, sc->prm, l);
    if (mem_lb > sc->mem_cap) {
        res->pruned_memory++;
        if (mem_lb < res->min_mem_bytes) res->min_mem_bytes = mem_lb;
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
                                     (signed char)l->recompute,
                                     (signed char)l->zero,
                                     (signed char)l->sched,
                                     l->ep,
                                     l->etp,
                                     plan_step_lower_bound_us(sc->cfg, sc->c, sc->prm, l),
                                     index};
    return 0;
}

/* Hill-climb e's split on the simulator (plan.h): move one layer across a
 * chunk boundary while that shortens the step and the layout still fits. */
static pl_status refine_entry(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm,
                              const plan_options *o, plan_entry *e, plan_result *res, int64_t left, char *msg,
                              size_t len) {
    const int C = e->l.pp * e->l.vp;
    const int budget = (int)(left < o->refine_sims ? left : o->refine_sims);
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
     * the stages' totals */
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
                res->refine_runs++;
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

/* The search for one precision (o->prec, o->fp8). */
/* Tell progress (when set) where the search stands; 1 when it asks to stop. */
static int report(plan_progress_fn progress, void *ctx, const plan_result *res, int64_t done, int64_t total, int pass,
                  int n_passes, double t0) {
    if (!progress) return 0;
    plan_progress p = {done, total, pass, n_passes, res->considered, res->pruned_memory, res->pruned_bound,
                       res->simulated, res->n_top > 0 ? &res->top[0] : NULL, (pl_now_us() - t0) / 1e6};
    return progress(ctx, &p) != 0;
}

static pl_status search_one(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_progress_fn progress,
                            void *progress_ctx, int pass, int n_passes, plan_result *res, char *msg, size_t len) {
    memset(res, 0, sizeof *res);
    res->min_mem_bytes = INT64_MAX;
    const double t0 = pl_now_us();
    layout_sim_params dflt;
    const layout_sim_params *prm = o->sim;
    if (!prm) {
        layout_sim_params_default(&dflt);
        prm = &dflt;
    }
    const int64_t N = o->gpus, total = total_gpus(c);
    const int L = cfg->n_layers, B = o->global_batch;
    if (N < 1 || N > total)
        return pl_fail(msg, len, PL_ERR_INVALID, "--gpus %lld is not in 1..%lld (the cluster's GPUs)", (long long)N,
                       (long long)total);
    if (B < 1) return pl_fail(msg, len, PL_ERR_INVALID, "the global batch must be at least 1, not %d", B);
    if (o->top_k < 1 || o->top_k > PLAN_MAX_TOP)
        return pl_fail(msg, len, PL_ERR_INVALID, "top must be in 1..%d, not %d", PLAN_MAX_TOP, o->top_k);
    if (o->max_vp < 1 || o->max_mbs < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "max_vp and max_mbs must be at least 1");
    const cluster_gpu *fast = fastest_gpu(c, o->prec);
    if (!fast || fast->peak_flops[o->prec] <= 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "no GPU of cluster %s runs %s", c->name, precision_name(o->prec));
    if (o->prec == PRECISION_FP8)
        for (int t = 0; t < c->n_gpu_types; t++)
            if (fp8_check_gpu(&c->gpus[t], o->fp8, msg, len) != PL_OK) return PL_ERR_INVALID;
    const int64_t cap_all = largest_memory(c) - (o->reserve_bytes > 0 ? o->reserve_bytes : 0);

    search_ctx sc = {cfg, c, prm, res, NULL, 0, 0, cap_all};
    pl_status st = plan_enumerate(cfg, c, o, on_layout, &sc, msg, len);
    plan_cand *cands = sc.cands;
    const int64_t n_cands = sc.n;
    if (st != PL_OK) goto out;
    if (res->considered == 0) {
        st = pl_fail(msg, len, PL_ERR_INVALID,
                     "no layout of %lld GPUs fits the model (%d layers, %d heads) and batch %d: try another --gpus or "
                     "--global-batch",
                     (long long)N, L, cfg->n_heads, B);
        goto out;
    }
    if (n_cands > 0) qsort(cands, (size_t)n_cands, sizeof *cands, cand_cmp);

    plan_entry *e = calloc(1, sizeof *e), *u = calloc(1, sizeof *u);
    if (!e || !u) {
        free(e);
        free(u);
        st = PL_ERR_NOMEM;
        goto out;
    }
    for (int64_t i = 0; i < n_cands; i++) {
        const plan_cand *k = &cands[i];
        if (res->n_top == o->top_k && k->lb_us >= res->top[o->top_k - 1].res.step_us) {
            res->pruned_bound += n_cands - i;
            break;
        }
        if (i % 8 == 0 && report(progress, progress_ctx, res, i, n_cands, pass, n_passes, t0)) {
            st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "the search was stopped after %lld of %lld candidates",
                         (long long)i, (long long)n_cands);
            break;
        }
        /* the DP split, and the uniform one */
        cand_layout(k, o, &e->l);
        e->lb_us = k->lb_us;
        e->split_dp = 1;
        e->refined = 0;
        int have_dp = plan_stage_split(cfg, c, prm, &e->l, NULL, NULL, 0) == PL_OK;
        if (have_dp) {
            int chunks[LAYOUT_MAX_CHUNKS];
            /* a DP split that is the uniform one is simulated once */
            if (layout_chunk_layers(&(layout){.pp = e->l.pp, .vp = e->l.vp}, L, chunks, NULL, 0) == PL_OK &&
                !memcmp(chunks, e->l.stage_layers, sizeof *chunks * (size_t)(e->l.pp * e->l.vp)))
                e->l.n_stage_layers = 0;
            st = plan_simulate(cfg, c, &e->l, prm, &e->res, msg, len);
            if (st != PL_OK) break;
            res->sim_runs++;
        }
        const int want_uniform = !have_dp || (!o->no_uniform && e->l.n_stage_layers != 0);
        if (want_uniform) {
            cand_layout(k, o, &u->l);
            u->lb_us = k->lb_us;
            u->split_dp = 0;
            u->refined = 0;
            st = plan_simulate(cfg, c, &u->l, prm, &u->res, msg, len);
            if (st != PL_OK) break;
            res->sim_runs++;
            /* keep the uniform split when it fits and the DP one does not,
             * or when it is faster with the same verdict */
            if (!have_dp || (e->res.oom && !u->res.oom) ||
                (e->res.oom == u->res.oom && u->res.step_us < e->res.step_us))
                *e = *u;
        }
        res->simulated++;
        if (e->res.mem.total < res->min_mem_bytes) res->min_mem_bytes = e->res.mem.total;
        if (o->reserve_bytes > 0 && e->res.mem.total + o->reserve_bytes > e->res.mem_cap) e->res.oom = 1;
        if (e->res.oom) {
            res->sim_oom++;
            if (!res->have_oom_best || e->res.step_us < res->oom_best.res.step_us) {
                res->oom_best = *e;
                res->have_oom_best = 1;
            }
            continue;
        }
        top_insert(res, o->top_k, e);
    }
    if (st == PL_OK && report(progress, progress_ctx, res, n_cands, n_cands, pass, n_passes, t0))
        st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "the search was stopped before refining the top splits");
    /* the refinement spends at most as many runs as the search did */
    for (int i = 0; st == PL_OK && i < res->n_top && res->refine_runs < res->sim_runs; i++)
        st = refine_entry(cfg, c, prm, o, &res->top[i], res, res->sim_runs - res->refine_runs, msg, len);
    if (st == PL_OK) { /* insertion sort again: refinement only shortens */
        for (int i = 1; i < res->n_top; i++)
            for (int j = i; j > 0 && entry_before(&res->top[j], &res->top[j - 1]); j--) {
                *e = res->top[j];
                res->top[j] = res->top[j - 1];
                res->top[j - 1] = *e;
            }
    }
    free(e);
    free(u);
out:
    free(cands);
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

/* Every GPU type of c runs precision p (recipe r when fp8). */
static int cluster_runs(const cluster *c, precision p, fp8_recipe r) {
    for (int t = 0; t < c->n_gpu_types; t++) {
        if (!(c->gpus[t].peak_flops[p] > 0)) return 0;
        if (p == PRECISION_FP8 && fp8_check_gpu(&c->gpus[t], r, NULL, 0) != PL_OK) return 0;
    }
    return 1;
}

pl_status plan_search(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_progress_fn progress,
                      void *progress_ctx, plan_result *res, char *msg, size_t len) {
    if (o->n_prec <= 0) return search_one(cfg, c, o, progress, progress_ctx, 0, 1, res, msg, len);
    /* one search per precision the cluster runs; the top lists merged */
    if (o->n_prec > PLAN_MAX_PRECISIONS)
        return pl_fail(msg, len, PL_ERR_INVALID, "more than %d precisions", PLAN_MAX_PRECISIONS);
    plan_result *one = malloc(sizeof *one);
    plan_options *oi = malloc(sizeof *oi);
    if (!one || !oi) {
        free(one);
        free(oi);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    memset(res, 0, sizeof *res);
    res->min_mem_bytes = INT64_MAX;
    pl_status st = PL_OK;
    int ran = 0, n_passes = 0, pass = 0;
    for (int i = 0; i < o->n_prec; i++) n_passes += cluster_runs(c, o->precs[i], o->fp8s[i]);
    for (int i = 0; i < o->n_prec && st == PL_OK; i++) {
        if (!cluster_runs(c, o->precs[i], o->fp8s[i])) continue;
        *oi = *o;
        oi->n_prec = 0;
        oi->prec = o->precs[i];
        oi->fp8 = o->fp8s[i];
        st = search_one(cfg, c, oi, progress, progress_ctx, pass++, n_passes, one, msg, len);
        if (st != PL_OK && st != PL_ERR_INTERRUPTED) break;
        ran++; /* an interrupted pass still gives what it found */
        res->considered += one->considered;
        res->pruned_memory += one->pruned_memory;
        res->pruned_bound += one->pruned_bound;
        res->simulated += one->simulated;
        res->sim_runs += one->sim_runs;
        res->sim_oom += one->sim_oom;
        res->refine_runs += one->refine_runs;
        res->wall_s += one->wall_s;
        for (int k = 0; k < one->n_top; k++) top_insert(res, o->top_k, &one->top[k]);
        if (one->have_oom_best && (!res->have_oom_best || one->oom_best.res.step_us < res->oom_best.res.step_us)) {
            res->oom_best = one->oom_best;
            res->have_oom_best = 1;
        }
        if (one->min_mem_bytes > 0 && one->min_mem_bytes < res->min_mem_bytes) res->min_mem_bytes = one->min_mem_bytes;
    }
    free(one);
    free(oi);
    if (res->min_mem_bytes == INT64_MAX) res->min_mem_bytes = 0;
    if (st == PL_OK && ran == 0)
        st = pl_fail(msg, len, PL_ERR_INVALID, "no GPU of cluster %s runs any of the precisions asked", c->name);
    return st;
}

/* ---- the best layout under each pipeline order --------------------------- */

pl_status plan_schedule_rows(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, const layout *best,
                             plan_sched_row rows[PLAN_SCHED_ROWS], char *msg, size_t len) {
    static const schedule_order ord[PLAN_SCHED_ROWS] = {SCHED_1F1B, SCHED_INTERLEAVED, SCHED_ZB_H1,
                                                        SCHED_ZB_H2, SCHED_ZB_V, SCHED_DUALPIPEV};
    const int64_t N = layout_world_size(best);
    for (int i = 0; i < PLAN_SCHED_ROWS; i++) {
        plan_sched_row *w = &rows[i];
        memset(w, 0, sizeof *w);
        w->sched = ord[i];
        w->l = *best;
        w->l.sched = ord[i] == SCHED_INTERLEAVED ? SCHED_1F1B : ord[i];
        w->l.vp = ord[i] == SCHED_INTERLEAVED ? 2 : schedule_v_chunks(ord[i]);
        if (w->l.vp != best->vp || w->l.sched != best->sched) w->l.n_stage_layers = 0; /* uniform chunks */
        if (layout_validate(&w->l, cfg, N, w->why, sizeof w->why) != PL_OK) continue;
        layout_result r;
        pl_status st = plan_simulate(cfg, c, &w->l, prm, &r, w->why, sizeof w->why);
        if (st == PL_ERR_NOMEM) return pl_fail(msg, len, st, "%s", w->why);
        if (st != PL_OK) continue;
        w->ok = 1;
        w->step_us = r.step_us;
        w->bubble_us = r.parts_us[LAYOUT_T_BUBBLE];
        w->peak_bytes = r.mem.total;
        w->fits = !r.oom;
    }
    return PL_OK;
}
