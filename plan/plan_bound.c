/*
 * plan_bound.c: the lower bounds the planner prunes with (plan.h gives the
 * formulas): a layout's step time under its order and recipe, and its
 * peak memory.
 *
 * Why it is a bound. Every op of a stage runs on that stage's compute
 * stream, one after the other, and the layout simulator puts a layer's
 * tensor-parallel collectives and context parallel's key/value exchange on
 * that stream too (layout_sim.c: "blocking on this stream"), so a stage is
 * busy at least for the compute and those collectives of its layers, each
 * micro-batch. Summed over the stages that is m times every layer's cost,
 * whatever the split; the busiest stage does at least the average. Each
 * layer's costs are taken at their cheapest: compute on the fastest GPU at
 * the layout's own recipe (for an MoE model the cheaper of a dense and an
 * MoE layer), collectives on the stage whose groups are fastest, times the
 * simulator's collective_scale. DualPipeV runs one micro-batch's forward
 * beside another's backward and hides each one's collectives under the
 * other's compute, so under it only compute counts. Stage s cannot start
 * before s one-layer forwards ran upstream; under 1F1B (and interleaving)
 * its last op is a backward that s one-layer backwards still follow; the
 * average over the stages gives the idle terms. Nothing here is copied
 * from the simulator without tests/plan/test_plan.c checking, on every
 * layout of several small cases (orders, recipes, MoE, mixed GPUs), that
 * the bound is at most the simulated step.
 *
 * Under ZeRO 3 every forward and backward first gathers its layers'
 * parameters over dp on the stage's gather stream, one gather after
 * another, and reduces every micro-batch's gradients on its reduction
 * stream; the step lasts at least as long as the busiest such stream.
 *
 * Reuse. What the bound needs of a layout depends on few of its fields:
 * the per-layer compute on (tp, cp, mbs, recompute, precision, recipe,
 * ep, etp), the collectives on (tp, cp, dp, pp, mbs, precision, recipe,
 * ep, etp). Both are cached in small hash tables, so the ZeRO stages,
 * virtual chunks and orders of one shape share one computation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_model.h"
#include "framework.h"
#include "layout_memory.h"
#include "model_params.h"
#include "moe.h"
#include "plan_search_internal.h"

/* ---- the cluster ---------------------------------------------------------- */

void plan_group_range(const cluster *c, int g, int64_t *lo, int64_t *hi) {
    int64_t start = 0;
    for (int i = 0; i < g; i++) start += (int64_t)c->groups[i].n_nodes * c->gpus_per_node;
    *lo = start;
    *hi = start + (int64_t)c->groups[g].n_nodes * c->gpus_per_node;
}

const cluster_gpu *plan_fastest_gpu(const cluster *c, precision prec) {
    const cluster_gpu *best = NULL;
    for (int g = 0; g < c->n_groups; g++) {
        const cluster_gpu *x = &c->gpus[c->groups[g].gpu_type];
        if (!best || x->peak_flops[prec] > best->peak_flops[prec] ||
            (x->peak_flops[prec] == best->peak_flops[prec] && x->hbm_bw > best->hbm_bw))
            best = x;
    }
    return best;
}

/* ---- the caches ----------------------------------------------------------- */

#define KEY_INTS 10

typedef struct {
    int used;
    int key[KEY_INTS];
    double v[6];
} slot;

typedef struct {
    slot *s;
    int cap, n; /* cap a power of two */
} table;

static uint64_t key_hash(const int *k) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < KEY_INTS; i++) {
        h ^= (uint64_t)(uint32_t)k[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* The slot of key (found: *found 1; else an empty one to fill, or NULL when
 * the table cannot grow). */
static slot *table_find(table *t, const int *key, int *found) {
    if (2 * (t->n + 1) > t->cap) {
        const int cap = t->cap ? 2 * t->cap : 256;
        slot *s = calloc((size_t)cap, sizeof *s);
        if (!s) return NULL;
        for (int i = 0; i < t->cap; i++) {
            if (!t->s[i].used) continue;
            uint64_t h = key_hash(t->s[i].key) & (uint64_t)(cap - 1);
            while (s[h].used) h = (h + 1) & (uint64_t)(cap - 1);
            s[h] = t->s[i];
        }
        free(t->s);
        t->s = s;
        t->cap = cap;
    }
    uint64_t h = key_hash(key) & (uint64_t)(t->cap - 1);
    while (t->s[h].used) {
        if (!memcmp(t->s[h].key, key, sizeof t->s[h].key)) {
            *found = 1;
            return &t->s[h];
        }
        h = (h + 1) & (uint64_t)(t->cap - 1);
    }
    *found = 0;
    return &t->s[h];
}

/* Fill slot s, which table_find returned for key (not found): the key
 * kept, the slot counted; its values to write. */
static double *table_claim(table *t, slot *s, const int *key) {
    memcpy(s->key, key, sizeof s->key);
    s->used = 1;
    t->n++;
    return s->v;
}

struct plan_bounds {
    const gpt_config *cfg;
    const cluster *c0;        /* the caller's cluster (compute) */
    cluster cl;               /* the same as the simulator sees it for collectives */
    layout_sim_params prm;
    int comm;                 /* 1: the collective terms are used */
    int n_moe;                /* the model's MoE layers */
    int placed_ep;            /* an expert placement's ep (layout_sim_params.moe_layer_load); 0: none */
    double placed_lf;         /* the least of its per-layer load factors (>= 1) */
    table compute, colls, dispatch, gathers, reduces;
    int64_t *grp;             /* scratch: one group's ranks */
    int grp_cap;
};

plan_bounds *plan_bounds_new(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm) {
    plan_bounds *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->cfg = cfg;
    b->c0 = c;
    b->cl = *c;
    if (prm) b->prm = *prm;
    else layout_sim_params_default(&b->prm);
    /* the simulator gives a one-domain cluster without a network the
     * domain's own fabric (layout_sim_create): the same here */
    if (cluster_n_gpus(c) <= cluster_domain_gpus(c) && (b->cl.nics_per_node < 1 || !(b->cl.nic_bw > 0))) {
        b->cl.nics_per_node = 1;
        b->cl.nic_bw = c->intra_bw;
    }
    b->comm = b->prm.collective_scale > 0;
    b->n_moe = gpt_is_moe(cfg) ? gpt_moe_layers_in(cfg, 0, cfg->n_layers) : 0;
    /* an expert placement: the simulator gives each MoE layer of a layout of
     * the placement's ep its own factor (layout_expand.c, unless a capacity
     * factor is set), which may be below the expert_cv factor; its least
     * layer bounds them all */
    const layout_sim_params *q = &b->prm;
    if (q->moe_layer_load && q->moe_layer_load_n == b->n_moe && b->n_moe > 0 && q->moe_layer_load_ep > 0 &&
        !(q->moe.capacity_factor > 0)) {
        double lo = INFINITY;
        for (int i = 0; i < q->moe_layer_load_n; i++)
            if (!(q->moe_layer_load[i] >= lo)) lo = q->moe_layer_load[i]; /* a NaN stays */
        b->placed_ep = q->moe_layer_load_ep;
        b->placed_lf = lo >= 1.0 && isfinite(lo) ? lo : 1.0; /* the simulator refuses factors below 1 */
    }
    b->prm.moe_layer_load = NULL; /* borrowed: not kept past this call */
    return b;
}

void plan_bounds_free(plan_bounds *b) {
    if (!b) return;
    free(b->compute.s);
    free(b->colls.s);
    free(b->dispatch.s);
    free(b->gathers.s);
    free(b->reduces.s);
    free(b->grp);
    free(b);
}

/* ---- per-layer compute ------------------------------------------------------ */

/* v, on the fastest GPU for l's precision: [0] every layer's forward +
 * backward + recompute, summed (an MoE layer as the simulator costs it:
 * the dense layer with its MLP swapped for the MoE block), [1] the
 * embedding's, [2] the head's, [3] the cheapest layer's forward and [4]
 * its backward (for the idle terms) */
static const double *compute_costs(plan_bounds *b, const layout *l) {
    const int key[KEY_INTS] = {l->tp, l->cp, l->micro_batch, (int)l->recompute, (int)l->prec, (int)l->fp8,
                               l->ep, l->etp, l->sp, (int)l->dispatcher};
    int found = 0;
    slot *s = table_find(&b->compute, key, &found);
    static const double zero[6] = {0};
    if (!s) return zero; /* out of memory: 0 is still a bound */
    if (found) return s->v;
    const cluster_gpu *gpu = plan_fastest_gpu(b->c0, l->prec);
    const compute_params *cp = &b->prm.compute;
    const gpt_config *cfg = b->cfg;
    layer_cost lc, ec, hc;
    layer_compute_cost(gpu, cfg, l, cp, &lc);
    const int L = cfg->n_layers, n_moe = gpt_is_moe(cfg) ? gpt_moe_layers_in(cfg, 0, L) : 0;
    double all = (double)(L - n_moe) * (lc.fwd_us + lc.bwd_us + lc.recompute_us), f1 = lc.fwd_us, b1 = lc.bwd_us;
    if (n_moe > 0) { /* layout_sim's MoE layer: lc - with + without + the block (layout_expand.c) */
        layer_cost with, without, blk;
        layer_compute_cost_mlp(gpu, cfg, l, cp, 1, &with);
        layer_compute_cost_mlp(gpu, cfg, l, cp, 0, &without);
        moe_block_compute_cost(gpu, cfg, l, cp, NULL, &blk); /* NULL: the lower bound over stacks and spreads */
        const double mf = lc.fwd_us + without.fwd_us + blk.fwd_us - with.fwd_us;
        const double mb = lc.bwd_us + without.bwd_us + blk.bwd_us - with.bwd_us;
        const double mr = lc.recompute_us + without.recompute_us + blk.recompute_us - with.recompute_us;
        all += (double)n_moe * (mf + mb + mr);
        if (n_moe == L || mf < f1) f1 = mf;
        if (n_moe == L || mb < b1) b1 = mb;
    }
    embedding_compute_cost(gpu, cfg, l, cp, &ec);
    head_compute_cost(gpu, cfg, l, cp, &hc);
    double *v = table_claim(&b->compute, s, key);
    v[0] = all;
    v[1] = ec.fwd_us + ec.bwd_us + ec.recompute_us;
    v[2] = hc.fwd_us + hc.bwd_us + hc.recompute_us;
    v[3] = f1;
    v[4] = b1;
    v[5] = 0;
    return s->v;
}

/* ---- collectives -------------------------------------------------------------- */

static double group_time(plan_bounds *b, const layout *l, int64_t rank, layout_dim d, coll_kind k, double bytes) {
    const int n = layout_group_ranks(l, rank, d, b->grp);
    coll_estimate e;
    if (n < 2 || coll_time(&b->cl, k, b->grp, n, bytes, &e) != PL_OK) return 0.0;
    return e.time_us;
}

/* v (unscaled by collective_scale): the least over the stages of one
 * layer's [0] forward collectives (tp + cp), [1] backward ones without
 * recomputation, [2] what full recomputation adds to the backward (the
 * forward's again) -- each the sum for one stage, minimised over stages */
static const double *coll_costs(plan_bounds *b, const layout *l) {
    /* pp follows from tp, cp, dp on the search's GPUs; the expert grid
     * does not change these groups (the dispatch has its own table) */
    const int key[KEY_INTS] = {l->tp, l->cp, l->dp, l->pp, l->micro_batch, (int)l->prec, (int)l->fp8, l->sp, 0, 0};
    int found = 0;
    slot *s = table_find(&b->colls, key, &found);
    static const double zero[6] = {0};
    if (!s) return zero;
    if (found) return s->v;
    const gpt_config *cfg = b->cfg;
    const int64_t gmax = (int64_t)l->tp * l->cp * l->dp + 1; /* any group of a stage */
    if (gmax > b->grp_cap) {
        int64_t *g = realloc(b->grp, sizeof *g * (size_t)gmax);
        if (!g) return zero;
        b->grp = g;
        b->grp_cap = (int)gmax;
    }
    /* the simulator's message sizes (layout_sim.c: FP8 runs move bf16 activations) */
    const double ab = l->prec == PRECISION_FP8 ? 2.0 : precision_act_bytes(l->prec);
    const double tok = (double)l->micro_batch * cfg->seq_len / l->cp;
    const double act = tok * cfg->d_model * ab;
    const double hd = (double)cfg->d_model / cfg->n_heads;
    const double kv_full = (double)l->micro_batch * cfg->seq_len * 2.0 * ((double)gpt_kv_heads(cfg) / l->tp) * hd * ab;
    const int sp = l->sp && l->tp > 1, fp8_ag = l->prec == PRECISION_FP8 && sp;
    double fwd = INFINITY, bwd = INFINITY, full = INFINITY;
    for (int r = 0; r < l->pp; r++) {
        layout_coords co;
        memset(&co, 0, sizeof co);
        co.c[LAYOUT_DIM_PP] = r;
        const int64_t rank = layout_rank_of(l, &co);
        double tf = 0, tb = 0;
        if (l->tp > 1) {
            if (sp) {
                const double ag = group_time(b, l, rank, LAYOUT_DIM_TP, COLL_ALL_GATHER, act);
                const double rs = group_time(b, l, rank, LAYOUT_DIM_TP, COLL_REDUCE_SCATTER, act);
                const double ag_f = fp8_ag ? group_time(b, l, rank, LAYOUT_DIM_TP, COLL_ALL_GATHER, act / ab) : ag;
                tf = 2.0 * (ag_f + rs);
                tb = 2.0 * (ag + rs);
            } else {
                tf = tb = 2.0 * group_time(b, l, rank, LAYOUT_DIM_TP, COLL_ALL_REDUCE, act);
            }
        }
        double cf = 0, cb = 0;
        if (l->cp > 1) {
            cf = group_time(b, l, rank, LAYOUT_DIM_CP, COLL_ALL_GATHER, kv_full);
            cb = group_time(b, l, rank, LAYOUT_DIM_CP, COLL_REDUCE_SCATTER, kv_full);
        }
        if (tf + cf < fwd) fwd = tf + cf;
        if (tb + cb < bwd) bwd = tb + cb;
        if (tf + cf < full) full = tf + cf;
    }
    double *v = table_claim(&b->colls, s, key);
    v[0] = isfinite(fwd) ? fwd : 0;
    v[1] = isfinite(bwd) ? bwd : 0;
    v[2] = isfinite(full) ? full : 0;
    v[3] = v[4] = v[5] = 0;
    return s->v;
}

/* One MoE dispatch of a micro-batch (unscaled): the all-to-all over the
 * stage's ep group (layout_expand.c adds the etp gather), its bytes as the
 * simulator sizes them (default MoE parameters); the least over the
 * stages. 0 for a dense model or another dispatcher. */
static double dispatch_cost(plan_bounds *b, const layout *l) {
    const gpt_config *cfg = b->cfg;
    if (!gpt_is_moe(cfg) || l->ep < 2 || l->dispatcher != MOE_DISPATCH_ALLTOALL) return 0.0;
    const int key[KEY_INTS] = {l->tp, l->cp, l->dp, l->pp, l->micro_batch, (int)l->prec, (int)l->fp8, l->sp, l->ep,
                               l->etp};
    int found = 0;
    slot *s = table_find(&b->dispatch, key, &found);
    if (!s) return 0.0;
    if (found) return s->v[0];
    const int64_t gmax = (int64_t)l->tp * l->cp * l->dp + 1;
    if (gmax > b->grp_cap) {
        int64_t *g = realloc(b->grp, sizeof *g * (size_t)gmax);
        if (!g) return 0.0;
        b->grp = g;
        b->grp_cap = (int)gmax;
    }
    double a2a = 0;
    {
        /* one dispatch of a micro-batch: the all-to-all over the stage's ep
         * group (layout_expand.c adds the etp gather), its bytes as the
         * simulator sizes them (default MoE parameters); least over stages */
        moe_params mp; /* balanced: the load factor multiplies the time (plan_bounds_step_us) */
        moe_params_default(&mp);
        mp.imbalance = 1.0;
        const double bytes = moe_dispatch_bytes(cfg, l, &mp);
        a2a = INFINITY;
        for (int r = 0; r < l->pp; r++) {
            layout_coords co;
            memset(&co, 0, sizeof co);
            co.c[LAYOUT_DIM_PP] = r;
            const int n = layout_expert_group_ranks(l, layout_rank_of(l, &co), LAYOUT_EDIM_EP, b->grp);
            double t = 0;
            if (n < 2 || moe_all_to_all_us(&b->cl, b->grp, n, bytes, &t, NULL) != PL_OK) t = 0;
            if (t < a2a) a2a = t;
        }
        if (!isfinite(a2a)) a2a = 0;
    }
    table_claim(&b->dispatch, s, key)[0] = a2a;
    return a2a;
}

/* One layer's parameters as the simulator's gathers and buckets count them
 * (layout_expand.c: an MoE model's mean replicated part, experts apart),
 * before tp. */
static double sim_layer_params(const gpt_config *cfg, const layout *l) {
    if (!gpt_is_moe(cfg)) return (double)layout_layer_params(cfg);
    double sum = 0;
    for (int i = 0; i < cfg->n_layers; i++)
        sum += (double)moe_layer_dense_params_per_gpu(cfg, l, gpt_layer_is_moe(cfg, i)) * l->tp;
    return (double)llround(sum / cfg->n_layers);
}

/* ZeRO 3's gathers (unscaled): one layer's parameters all-gathered over
 * the stage's dp group, the least over the stages; the bytes as the
 * simulator sizes them (layout_expand.c: a layer's parameters, an MoE
 * model's mean replicated part, over tp, at >= 2 bytes each). */
static double gather_cost(plan_bounds *b, const layout *l) {
    const gpt_config *cfg = b->cfg;
    const int key[KEY_INTS] = {l->tp, l->cp, l->dp, l->pp, (int)l->prec, (int)l->fp8, l->sp, l->ep, l->etp, 0};
    int found = 0;
    slot *s = table_find(&b->gathers, key, &found);
    if (!s) return 0.0;
    if (found) return s->v[0];
    const int64_t gmax = (int64_t)l->tp * l->cp * l->dp + 1;
    if (gmax > b->grp_cap) {
        int64_t *g = realloc(b->grp, sizeof *g * (size_t)gmax);
        if (!g) return 0.0;
        b->grp = g;
        b->grp_cap = (int)gmax;
    }
    const double layer_params = sim_layer_params(cfg, l);
    const double ab = l->prec == PRECISION_FP8 ? 2.0 : precision_act_bytes(l->prec);
    const double bytes = layer_params / l->tp * (ab < 2 ? 2 : ab);
    double g = INFINITY;
    for (int r = 0; r < l->pp; r++) {
        layout_coords co;
        memset(&co, 0, sizeof co);
        co.c[LAYOUT_DIM_PP] = r;
        const double t = group_time(b, l, layout_rank_of(l, &co), LAYOUT_DIM_DP, COLL_ALL_GATHER, bytes);
        if (t < g) g = t;
    }
    if (!isfinite(g)) g = 0;
    table_claim(&b->gathers, s, key)[0] = g;
    return g;
}

/* ZeRO 3's gradient reduction after every micro-batch (unscaled, per
 * micro-batch, summed over the stages): the simulator reduces each
 * stage's gradients in buckets of at most X bytes (dp_bucket_bytes plus
 * one unit: layout_expand.c) over the stage's dp group, and an MoE chunk's
 * expert gradients in pieces of at most dp_bucket_bytes over its edp
 * group. A collective's time per byte does not grow with its size (checked
 * by tests/plan/test_plan_search.c), so n bytes in pieces of at most X take
 * at least n t(X) / X; the stages' dp groups are taken at their cheapest. */
static double reduce_cost(plan_bounds *b, const layout *l) {
    const gpt_config *cfg = b->cfg;
    const int key[KEY_INTS] = {l->tp, l->cp, l->dp, l->pp, (int)l->prec, (int)l->fp8, l->sp, l->ep, l->etp, (int)l->zero};
    int found = 0;
    slot *s = table_find(&b->reduces, key, &found);
    if (!s) return 0.0;
    if (found) return s->v[0];
    const int64_t gmax = (int64_t)l->tp * l->cp * l->dp + 1;
    if (gmax > b->grp_cap) {
        int64_t *g = realloc(b->grp, sizeof *g * (size_t)gmax);
        if (!g) return 0.0;
        b->grp = g;
        b->grp_cap = (int)gmax;
    }
    const double gb = b->prm.grad_comm_bytes, bucket = b->prm.dp_bucket_bytes;
    const coll_kind kind = l->zero == ZERO_NONE ? COLL_ALL_REDUCE : COLL_REDUCE_SCATTER;
    const double layer = sim_layer_params(cfg, l) / l->tp * gb;
    const double V = gpt_vocab_padded(cfg), d = cfg->d_model;
    const double unit = (layer > (2 * V * d + (double)cfg->seq_len * d + 2 * d) / l->tp * gb
                             ? layer
                             : (2 * V * d + (double)cfg->seq_len * d + 2 * d) / l->tp * gb);
    const double X = bucket + unit;
    const int n_moe = gpt_is_moe(cfg) ? gpt_moe_layers_in(cfg, 0, cfg->n_layers) : 0;
    const int edp = n_moe > 0 ? (int)layout_expert_dim_size(l, LAYOUT_EDIM_EDP) : 1;
    const double experts = n_moe > 0 ? (double)n_moe * (double)moe_layer_expert_params_per_gpu(cfg, l) * gb : 0.0;
    double rho = INFINITY, rho_e = INFINITY;
    for (int r = 0; r < l->pp; r++) {
        layout_coords co;
        memset(&co, 0, sizeof co);
        co.c[LAYOUT_DIM_PP] = r;
        const int64_t rank = layout_rank_of(l, &co);
        const double t = group_time(b, l, rank, LAYOUT_DIM_DP, kind, X);
        if (t / X < rho) rho = t / X;
        if (edp > 1 && experts > 0 && bucket > 0) {
            const int n = layout_expert_group_ranks(l, rank, LAYOUT_EDIM_EDP, b->grp);
            coll_estimate e;
            const double te = n > 1 && coll_time(&b->cl, kind, b->grp, n, bucket, &e) == PL_OK ? e.time_us : 0.0;
            if (te / bucket < rho_e) rho_e = te / bucket;
        }
    }
    double v = 0;
    if (isfinite(rho) && X > 0) v += (double)cfg->n_layers * layer * rho;
    if (isfinite(rho_e)) v += experts * rho_e;
    table_claim(&b->reduces, s, key)[0] = v;
    return v;
}

/* ---- the bounds ------------------------------------------------------------------ */

/* The least load factor the simulator gives an MoE layer's dispatch of
 * layout l: an expert placement's least layer where it applies (its ep),
 * 1 under a histogram (each layer's factor is >= 1), else the uniform
 * factor (moe_load_factor). */
static double dispatch_load_factor(const plan_bounds *b, const layout *l) {
    if (b->placed_ep > 0 && l->ep == b->placed_ep) return b->placed_lf;
    if (b->prm.moe.hist) return 1.0;
    return moe_load_factor(&b->prm.moe, b->cfg, l);
}

double plan_bounds_step_us(plan_bounds *b, const layout *l) {
    const gpt_config *cfg = b->cfg;
    const double *cc = compute_costs(b, l);
    const int m = layout_micro_batches(l);
    const double cs = b->prm.collective_scale;
    /* collectives on the compute stream, except what an order's paired ops
     * may hide (DualPipe, DualPipeV, overlap=ep: each pair hides the kinds
     * the stack overlaps, as layout_sim.c's run_op does; a hidden kind
     * counts 0 here, so the bound stays below the simulator) */
    const int pairs = l->sched == SCHED_DUALPIPEV || l->sched == SCHED_DUALPIPE || l->ep_overlap;
    unsigned ov = b->prm.framework ? b->prm.framework->overlap : FW_OVERLAP_EP;
    if (l->ep_overlap) ov |= FW_OVERLAP_EP;
    const int hide = pairs && (ov & FW_OVERLAP_TP), hide_ep = pairs && (ov & FW_OVERLAP_EP);
    double comm_f = 0, comm_b = 0, ep = 0;
    if (b->comm) {
        const double *co = coll_costs(b, l);
        if (!hide) {
            comm_f = cs * co[0];
            comm_b = cs * (co[1] + (l->recompute == RECOMPUTE_FULL ? co[2] : 0.0));
        }
        /* the MoE dispatch and combine: 2 forward, 2 backward (4 under full
         * recomputation) per MoE layer and micro-batch, at the load factor */
        const double d = hide_ep ? 0.0 : dispatch_cost(b, l);
        if (d > 0)
            ep = b->n_moe * (l->recompute == RECOMPUTE_FULL ? 6.0 : 4.0) * cs * dispatch_load_factor(b, l) * d;
    }
    /* an MoE layer without shared experts under sequence parallelism keeps only its attention's
     * tensor-parallel collectives, half the dense layer's (layout_expand.c's moe_chunk_costs) */
    const int moe_half = l->sp && l->tp > 1 && b->n_moe > 0 && cfg->shared_d_ff == 0;
    const double tp_layers = cfg->n_layers - (moe_half ? 0.5 * b->n_moe : 0.0);
    const double busy =
        (double)m * (cc[0] + tp_layers * (comm_f + comm_b) + ep + b->prm.emb_head_scale * (cc[1] + cc[2])) / l->pp;
    /* idle: stage s starts after s one-layer forwards upstream; under 1F1B
     * (interleaved too) s one-layer backwards follow its last op; the
     * split orders may run weight gradients there, so only the start */
    const double f1 = cc[3] + (moe_half ? 0.5 : 1.0) * comm_f, b1 = cc[4] + (moe_half ? 0.5 : 1.0) * comm_b;
    const double idle = 0.5 * (l->pp - 1) * (l->sched == SCHED_1F1B ? f1 + b1 : f1);
    double lb = busy + idle;
    /* ZeRO 3 gathers every layer's parameters before each forward and each
     * backward of every micro-batch, one after another on the stage's gather
     * stream: the busiest stream takes at least the average */
    if (b->comm && l->zero == ZERO_3 && l->dp > 1) {
        const double g = (double)m * 2.0 * cfg->n_layers * b->prm.collective_scale * b->prm.zero3_gather_scale *
                         gather_cost(b, l) / l->pp;
        if (g > lb) lb = g;
        /* and reduces every micro-batch's gradients on the stage's
         * reduction stream, one bucket after another */
        const double red = (double)m * b->prm.collective_scale * reduce_cost(b, l) / l->pp;
        if (red > lb) lb = red;
    }
    return lb + b->prm.step_fixed_us;
}

double plan_step_lower_bound_us(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm,
                                const layout *l) {
    plan_bounds *b = plan_bounds_new(cfg, c, prm);
    if (!b) return 0.0;
    const double lb = plan_bounds_step_us(b, l);
    plan_bounds_free(b);
    return lb;
}

int64_t plan_memory_lower_bound(const gpt_config *cfg, const layout_sim_params *prm, const layout *l) {
    /* the stage holding the most layers has at least ceil(L / pp) of them
     * and at least one micro-batch stashed; it is one of the stages, so its
     * memory is at least the smallest of these over the stage kinds
     * (first, middle, last: the only ones that differ). DualPipe: a rank
     * holds two stages (2L layers over the ranks) and every rank stashes
     * min(pp + 1, m) micro-batches (its down stage pp - r, its up stage
     * r + 1; tests/plan/test_plan_search.c holds it below the simulator) */
    const int dualpipe = l->sched == SCHED_DUALPIPE && l->vp == 2;
    const int per = dualpipe ? (2 * cfg->n_layers + l->pp - 1) / l->pp : (cfg->n_layers + l->pp - 1) / l->pp;
    const int in_flight = dualpipe ? schedule_peak_stash_rule(SCHED_DUALPIPE, l->pp, 0, layout_micro_batches(l)) : 1;
    int64_t lb = INT64_MAX;
    const int kinds[3] = {0, l->pp > 2 ? 1 : 0, l->pp - 1};
    for (int i = 0; i < 3; i++) {
        if (i > 0 && kinds[i] == kinds[i - 1]) continue;
        layout_memory m;
        layout_stage_memory_moe(cfg, l, prm ? &prm->compute : NULL, prm ? &prm->moe : NULL, kinds[i], per,
                                in_flight > 1 ? in_flight : 1, &m);
        if (m.total < lb) lb = m.total;
    }
    return lb;
}

int plan_uniform_certainly_oom(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, const layout *l) {
    if (c->n_gpu_types != 1 || c->gpus[0].hbm_bytes <= 0) return 0; /* one cap for every stage: kept simple */
    if (!gpt_is_moe(cfg) && prm->framework && !framework_is_neutral(prm->framework)) return 0;
    const int P = l->pp, K = l->pp * l->vp, m = layout_micro_batches(l);
    const int vshape = schedule_v_chunks(l->sched) == 2;
    if (K > LAYOUT_MAX_CHUNKS || m < 1) return 0;
    int chunks[LAYOUT_MAX_CHUNKS], per_rank[LAYOUT_MAX_CHUNKS] = {0};
    if (layout_chunk_layers(l, cfg->n_layers, chunks, NULL, 0) != PL_OK) return 0;
    for (int k = 0; k < K; k++) per_rank[vshape ? (k < P ? k : 2 * P - 1 - k) : k % P] += chunks[k];
    for (int r = 0; r < P; r++) {
        const int stash = schedule_peak_stash_rule(l->sched, P, r, m);
        if (stash < 1) return 0;
        layout_memory mem;
        layout_stage_memory_moe(cfg, l, &prm->compute, &prm->moe, r, per_rank[r], stash, &mem);
        if (mem.total > c->gpus[0].hbm_bytes) return 1;
    }
    return 0;
}
