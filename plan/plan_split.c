/*
 * plan_split.c: how layers are assigned to pipeline stages, without the
 * simulator: the planner's exact DP split over stage costs, and DeepSpeed's
 * `parameters` split reproduced for comparison (plan.h says what each
 * computes).
 *
 * The DP. State (s, j): stages 0..s-1 hold j layers. Every way of reaching
 * a state leaves a pair (M, S) = (heaviest stage so far, sum so far); the
 * objective w M + S is increasing in both, and later stages only raise M to
 * max(M, c) and S by c, so a pair dominated in both coordinates can never
 * lead to a better final objective and is dropped. What remains per state
 * is the Pareto front of (M, S), usually one or two pairs (with identical
 * middle stages the sum depends on j alone), and the minimum of w M + S
 * over the front of (S_stages, L) is the exact optimum.
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_model.h"
#include "layout_memory.h"
#include "model_params.h"
#include "moe.h"
#include "plan_search_internal.h"

typedef struct {
    double mx;   /* heaviest stage so far */
    double sum;  /* sum of the stages so far */
    int prev;    /* index in the front of (s - 1, j - n) */
    int n;       /* layers of stage s - 1 */
} split_pair;

typedef struct {
    split_pair *p; /* n entries */
    int n;
    int cap;
} split_front;

/* Insert (mx, sum) unless dominated; drop the pairs it dominates.
 * Returns 0, or -1 on allocation failure. */
static int front_insert(split_front *f, double mx, double sum, int prev, int n) {
    for (int i = 0; i < f->n; i++)
        if (f->p[i].mx <= mx && f->p[i].sum <= sum) return 0;
    int k = 0;
    for (int i = 0; i < f->n; i++)
        if (!(mx <= f->p[i].mx && sum <= f->p[i].sum)) f->p[k++] = f->p[i];
    f->n = k;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 4;
        split_pair *q = realloc(f->p, sizeof *q * (size_t)cap);
        if (!q) return -1;
        f->p = q;
        f->cap = cap;
    }
    f->p[f->n++] = (split_pair){mx, sum, prev, n};
    return 0;
}

double plan_split_dp(int S, int L, int min_n, const double *cost, double w, int *n) {
    if (S < 1 || L < 1 || min_n < 0 || !cost || !n || !(w >= 0)) return INFINITY;
    if ((int64_t)S * min_n > L) return INFINITY;
    const int W = L + 1;
    split_front *fr = calloc((size_t)(S + 1) * (size_t)W, sizeof *fr);
    if (!fr) return NAN;
    double result = INFINITY;
    if (front_insert(&fr[0], 0.0, 0.0, -1, 0) != 0) goto nomem;
    for (int s = 0; s < S; s++) {
        const int rest = (S - s - 1) * min_n; /* layers the later stages need at least */
        for (int j = 0; j <= L; j++) {
            const split_front *src = &fr[(size_t)s * W + j];
            if (src->n == 0) continue;
            for (int k = (min_n > 0 ? min_n : 0); j + k + rest <= L; k++) {
                /* the last stage takes exactly what is left */
                if (s == S - 1 && j + k != L) continue;
                const double c = cost[(size_t)s * W + k];
                if (!isfinite(c)) continue;
                split_front *dst = &fr[(size_t)(s + 1) * W + j + k];
                for (int i = 0; i < src->n; i++) {
                    const split_pair *p = &src->p[i];
                    if (front_insert(dst, p->mx > c ? p->mx : c, p->sum + c, i, k) != 0) goto nomem;
                }
            }
        }
    }
    const split_front *last = &fr[(size_t)S * W + L];
    int best = -1;
    for (int i = 0; i < last->n; i++) {
        const double v = w * last->p[i].mx + last->p[i].sum;
        if (v < result) {
            result = v;
            best = i;
        }
    }
    if (best >= 0) {
        int j = L, i = best;
        for (int s = S; s >= 1; s--) {
            const split_pair *p = &fr[(size_t)s * W + j].p[i];
            n[s - 1] = p->n;
            j -= p->n;
            i = p->prev;
        }
    }
    goto out;
nomem:
    result = NAN;
out:
    for (size_t i = 0; i < (size_t)(S + 1) * (size_t)W; i++) free(fr[i].p);
    free(fr);
    return result;
}

/* ds_utils.partition_uniform */
static void partition_uniform(int n_items, int S, int *parts) {
    if (n_items <= S) {
        for (int p = 0; p <= S; p++) parts[p] = p < n_items ? p : n_items;
        return;
    }
    const int chunk = n_items / S, residual = n_items - chunk * S;
    for (int p = 0; p <= S; p++) parts[p] = p * chunk;
    for (int i = 0; i < residual; i++)
        for (int p = i + 1; p <= S; p++) parts[p] += 1;
}

pl_status plan_partition_balanced(const double *weights, int n_items, int S, int *parts) {
    if (S < 1 || n_items < 1 || !weights || !parts) return PL_ERR_INVALID;
    if (n_items <= S) {
        partition_uniform(n_items, S, parts);
        return PL_OK;
    }
    const int n = n_items, m = S;
    const size_t cols = (size_t)m + 1, cells = ((size_t)n + 1) * cols;
    double *dmax = malloc(sizeof *dmax * cells), *dmin = malloc(sizeof *dmin * cells);
    double *dcost = malloc(sizeof *dcost * cells), *prefix = malloc(sizeof *prefix * ((size_t)n + 1));
    int *pos = calloc(cells, sizeof *pos);
    pl_status st = PL_ERR_NOMEM;
    if (!dmax || !dmin || !dcost || !prefix || !pos) goto out;
    for (size_t i = 0; i < cells; i++) dmax[i] = dmin[i] = dcost[i] = INFINITY;
    prefix[0] = 0;
    for (int i = 0; i < n; i++) prefix[i + 1] = prefix[i] + weights[i]; /* np.cumsum */
    dmax[0] = 0;
    dcost[0] = 0;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= (i < m ? i : m); j++)
            for (int k = 0; k < i; k++) {
                const double seg = prefix[i] - prefix[k];
                const double a = dmax[(size_t)k * cols + j - 1], b = dmin[(size_t)k * cols + j - 1];
                const double mx = a > seg ? a : seg, mn = b < seg ? b : seg;
                const double cost = mx - mn;
                const size_t c = (size_t)i * cols + j;
                if (dcost[c] >= cost) { /* ">=": the last k of equal cost wins, as in DeepSpeed */
                    dcost[c] = cost;
                    dmax[c] = mx;
                    dmin[c] = mn;
                    pos[c] = k;
                }
            }
    parts[m] = n;
    for (int j = m; j >= 1; j--) parts[j - 1] = pos[(size_t)parts[j] * cols + j];
    st = PL_OK;
out:
    free(dmax);
    free(dmin);
    free(dcost);
    free(prefix);
    free(pos);
    return st;
}

/* Parameters of the pieces DeepSpeed's layer specs would hold, from the
 * config (the same formulas as the graph builder: biases unless no_bias,
 * layernorm with a bias, RMSNorm scale only, GQA key / value width). */
static void piece_params(const gpt_config *c, double *embed, double *layer, double *head) {
    const double d = c->d_model, hd = (double)c->d_model / c->n_heads;
    const double kv = c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads;
    const double dff = c->d_ff > 0 ? c->d_ff : 4.0 * c->d_model;
    double V = c->vocab;
    if (c->vocab_multiple > 0) V = ceil(V / c->vocab_multiple) * c->vocab_multiple;
    const int bias = !c->no_bias;
    const double norm = c->norm == NORM_RMSNORM ? d : 2 * d;
    const double qkv = d * (d + 2 * kv * hd) + (bias ? d + 2 * kv * hd : 0);
    const double proj = d * d + (bias ? d : 0);
    const double mlp = c->mlp == MLP_SWIGLU ? 3 * d * dff + (bias ? 2 * dff + d : 0)
                                            : 2 * d * dff + (bias ? dff + d : 0);
    *layer = 2 * norm + qkv + proj + mlp;
    *embed = V * d + (c->pos == POS_LEARNED ? (double)c->seq_len * d : 0);
    *head = norm + V * d; /* tied: TiedLayerSpec holds the matrix again */
}

pl_status plan_deepspeed_parameters_split(const gpt_config *cfg, int pp, int *stage_layers, char *msg, size_t len) {
    const int L = cfg->n_layers;
    if (pp < 1 || pp > L) return pl_fail(msg, len, PL_ERR_INVALID, "pp=%d must be in 1..%d layers", pp, L);
    double e, l, h;
    piece_params(cfg, &e, &l, &h);
    double *w = malloc(sizeof *w * (size_t)(L + 2));
    int *parts = malloc(sizeof *parts * (size_t)(pp + 1));
    pl_status st = PL_ERR_NOMEM;
    if (!w || !parts) goto out;
    w[0] = e;
    for (int i = 0; i < L; i++) w[1 + i] = l;
    w[L + 1] = h;
    st = plan_partition_balanced(w, L + 2, pp, parts);
    if (st != PL_OK) goto out;
    for (int s = 0; s < pp; s++) {
        /* transformer layers are items 1..L */
        int lo = parts[s] < 1 ? 1 : parts[s], hi = parts[s + 1] > L + 1 ? L + 1 : parts[s + 1];
        stage_layers[s] = hi > lo ? hi - lo : 0;
        if (stage_layers[s] == 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "DeepSpeed's parameters split leaves stage %d without a transformer layer", s);
            goto out;
        }
    }
    st = PL_OK;
out:
    free(w);
    free(parts);
    return st;
}

/* ---- the stage split of a layout (plan_stage_split) ---------------------- */

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

/* Micro-batches stage s stashes at the peak, in chunk forwards (the unit
 * of layout_stage_memory): 1F1B min(m, pp - s); interleaved Megatron's
 * warm-up 2 (pp - s - 1) + (vp - 1) pp + 1, at most m vp. */
static int stage_in_flight(const layout *l, int m, int s) {
    if (l->sched != SCHED_1F1B) return schedule_peak_stash_rule(l->sched, l->pp, s, m); /* schedule.h's rules */
    if (l->vp == 1) return m < l->pp - s ? m : l->pp - s;
    int64_t n = 2 * (int64_t)(l->pp - s - 1) + (int64_t)(l->vp - 1) * l->pp + 1, cap = (int64_t)m * l->vp;
    return (int)(n < cap ? n : cap);
}

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
    /* one GPU type's costs are the same on every stage: computed once */
    double type_cost[CLUSTER_MAX_GPU_TYPES][3];
    int type_done[CLUSTER_MAX_GPU_TYPES] = {0};
    for (int s = 0; s < S; s++) {
        /* the stage's GPUs: every group its ranks touch; cost on the
         * slowest, memory against the smallest */
        const int64_t lo = (int64_t)s * R, hi = lo + R;
        double layer = 0, embed = 0, head = 0;
        int64_t cap = INT64_MAX;
        for (int g = 0; g < c->n_groups; g++) {
            int64_t glo, ghi;
            plan_group_range(c, g, &glo, &ghi);
            if (ghi <= lo || glo >= hi) continue;
            const int t = c->groups[g].gpu_type;
            const cluster_gpu *gpu = &c->gpus[t];
            if (!type_done[t]) {
                layer_costs(gpu, cfg, &plain, &prm->compute, &type_cost[t][0], NULL, &type_cost[t][1], &type_cost[t][2]);
                type_done[t] = 1;
            }
            const double a = type_cost[t][0], e = type_cost[t][1], h = type_cost[t][2];
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
