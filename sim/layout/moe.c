/*
 * moe.c: mixture-of-experts costs of a layout step (moe.h has the model):
 * tokens per expert, the token dispatcher's all-to-all, the grouped expert
 * GEMMs, router and permutations, expert parameters and the MoE activation
 * terms.
 *
 * Where the constants come from:
 *   the layer's compute   moe_compute.c (the measured MoE layer: the sweep's fit)
 *   the spread, imbalance moe_params.c
 * The rest (peaks, bandwidths, latencies) is the cluster file's.
 */
#include "moe.h"

#include <math.h>
#include <stdlib.h>

#include "model_params.h"
#include "moe_compute.h"

#include <string.h>

static int cmp_rank(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double act_bytes(precision prec) { return prec == PRECISION_FP8 ? 2.0 : (double)precision_act_bytes(prec); }

static double tokens_gpu(const gpt_config *cfg, const layout *l) {
    const double cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
    return b * ceil(cfg->seq_len / cp);
}

double moe_tokens_in(const gpt_config *cfg, const layout *l) {
    return tokens_gpu(cfg, l) / (l->tp > 0 ? l->tp : 1);
}

double moe_tokens_per_expert(const gpt_config *cfg, const layout *l, const moe_params *p) {
    if (!gpt_is_moe(cfg)) return 0.0;
    return moe_load_factor(p, cfg, l) * moe_tokens_in(cfg, l) * cfg->top_k * l->ep * l->etp / cfg->n_experts;
}

pl_status moe_all_to_all_us(const cluster *c, const int64_t *ranks, int n, double bytes_per_rank, double *us,
                            coll_estimate *out) {
    if (!c || !ranks || !us || n < 1 || !(bytes_per_rank >= 0) || c->gpus_per_node < 1 ||
        !(c->collective_efficiency > 0))
        return PL_ERR_INVALID;
    /* "node" here is the NVLink domain (cluster_domain_gpus: the node, or a
     * whole NVL72 rack of 4-GPU trays): members inside one reach each other
     * at intra_bw through the NVLink switches; only traffic between domains
     * takes the NICs. (Counting 4-GPU trays as nodes sent a GB200 rack's
     * all-to-all over the NICs: Llama 4 Scout's EP 16 on 64 GB200 ran its
     * dispatch at ~51 GB/s a GPU instead of NVLink's.) Members per domain:
     * the group's ranks are distinct; count the fewest on any domain it
     * touches (the busiest NIC share) */
    const int64_t world = cluster_n_gpus(c), gpn = cluster_domain_gpus(c);
    int q_min = n, nodes = 0, pods = 0;
    double intra = INFINITY, nic = INFINITY, lat_intra = 0;
    /* the ranks in order (a copy: n log n, where a pairwise scan was n^2 on
     * ep 256 groups): a domain's members, then a pod's, are consecutive */
    int64_t small[256], *r = n <= 256 ? small : malloc(sizeof *r * (size_t)n);
    if (!r) return PL_ERR_NOMEM;
    memcpy(r, ranks, sizeof *r * (size_t)n);
    qsort(r, (size_t)n, sizeof *r, cmp_rank);
    pl_status st = PL_OK;
    for (int i = 0; i < n && st == PL_OK; i++)
        if (r[i] < 0 || r[i] >= world || (i > 0 && r[i] == r[i - 1])) st = PL_ERR_INVALID;
    for (int i = 0; i < n && st == PL_OK;) {
        int j = i + 1;
        while (j < n && r[j] / gpn == r[i] / gpn) j++;
        nodes++;
        if (j - i < q_min) q_min = j - i;
        if (c->pod_gpus > 0 && (i == 0 || r[i] / c->pod_gpus != r[i - 1] / c->pod_gpus)) pods++;
        const double bw = cluster_intra_bw_of(c, r[i]), lt = cluster_intra_latency_of(c, r[i]),
                     nb = cluster_nic_bw_per_gpu_of(c, r[i]);
        if (bw < intra) intra = bw;
        if (nb < nic) nic = nb;
        if (lt > lat_intra) lat_intra = lt;
        i = j;
    }
    if (r != small) free(r);
    if (st != PL_OK) return st;
    if (pods < 1) pods = 1;
    const double eff = c->collective_efficiency, base = c->coll_base_latency_us > 0 ? c->coll_base_latency_us : 0;
    double t = 0, lat = 0, link = 0;
    if (n > 1) {
        const double S = bytes_per_rank;
        const double on = S * (q_min - 1) / n, off = S * (double)(n - q_min) / n;
        const double t_on = on > 0 ? on / (intra * eff) * 1e6 : 0.0;
        double nic_eff = nic * eff / (pods > 1 ? c->pod_oversubscription : 1.0);
        const double t_off = off > 0 ? off / nic_eff * 1e6 : 0.0;
        if ((on > 0 && !(intra > 0)) || (off > 0 && !(nic > 0))) return PL_ERR_INVALID;
        lat = base + (nodes > 1 ? c->inter_latency_us : lat_intra);
        t = lat + (t_on > t_off ? t_on : t_off);
        link = nodes > 1 ? nic_eff : intra * eff;
    }
    *us = t;
    if (out) {
        *out = (coll_estimate){0};
        out->time_us = t;
        out->algo = n > 1 ? "alltoall" : "none";
        out->latency_us = lat;
        out->link_bw = link;
        out->algbw = t > 0 ? bytes_per_rank / (t * 1e-6) : 0.0;
        out->busbw = out->algbw * (n > 1 ? (double)(n - 1) / n : 0.0);
        out->n_ranks = n;
        out->n_nodes = nodes;
        out->n_pods = pods;
        out->source = "model";
    }
    return PL_OK;
}

void moe_block_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                            const compute_params *cpp, const moe_params *mpp, layer_cost *out) {
    *out = (layer_cost){0};
    moe_layer_time t;
    if (!gpt_is_moe(cfg)) return;
    if (!mpp) { /* a lower bound over the stacks and spreads: balanced, fused, the cheapest implementation */
        static const int impls[] = {MOE_IMPL_CUBLAS_LOOP, MOE_IMPL_TORCH_GROUPED_MM, MOE_IMPL_CUBLAS_GROUPED};
        moe_params b;
        moe_params_default(&b);
        b.imbalance = 1.0;
        b.expert_cv = 0.0;
        b.fused_permute = 1;
        b.fp32_act = b.weight_cast = b.fp32_gemm = 0;
        double f = INFINITY, w = INFINITY, fl = 0;
        for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
            b.gemm_impl = impls[i];
            if (moe_layer_time_us(gpu, cfg, l, &b, cpp, NULL, &t) != PL_OK) continue;
            if (t.fwd_us < f) f = t.fwd_us;
            if (t.bwd_us < w) w = t.bwd_us;
            fl = t.fwd_flops;
        }
        if (!isfinite(f) || !isfinite(w)) return;
        out->fwd_us = f;
        out->bwd_us = w;
        out->fwd_flops = fl;
        out->recompute_us = l->recompute == RECOMPUTE_FULL ? f : 0.0;
        return;
    }
    if (moe_layer_time_us(gpu, cfg, l, mpp, cpp, NULL, &t) != PL_OK) return;
    out->fwd_us = t.fwd_us;
    out->bwd_us = t.bwd_us;
    out->fwd_flops = t.fwd_flops;
    out->recompute_us = l->recompute == RECOMPUTE_FULL ? t.fwd_us : 0.0;
}

double moe_dispatch_bytes(const gpt_config *cfg, const layout *l, const moe_params *mp) {
    if (!gpt_is_moe(cfg)) return 0.0;
    const double e = act_bytes(l->prec), n = moe_tokens_in(cfg, l), h = cfg->d_model;
    if (l->dispatcher == MOE_DISPATCH_ALLGATHER) return (double)l->ep * n * h * e;
    return moe_load_factor(mp, cfg, l) * n * cfg->top_k * h * e;
}

double moe_dispatch_buffer_bytes(const gpt_config *cfg, const layout *l, const moe_params *mp) {
    return 2.0 * moe_dispatch_bytes(cfg, l, mp);
}

int64_t moe_layer_dense_params_per_gpu(const gpt_config *cfg, const layout *l, int is_moe) {
    const int64_t t = l->tp > 0 ? l->tp : 1, h = cfg->d_model;
    int64_t w = gpt_attn_params(cfg) / t + (cfg->norm == NORM_LAYERNORM ? 2 : 1) * 2 * h;
    if (is_moe) w += gpt_router_params(cfg) + gpt_shared_expert_params(cfg) / t;
    else w += gpt_dense_mlp_params(cfg) / t;
    return w;
}

int64_t moe_layer_expert_params_per_gpu(const gpt_config *cfg, const layout *l) {
    if (!gpt_is_moe(cfg)) return 0;
    return (int64_t)(cfg->n_experts / l->ep) * gpt_expert_params(cfg) / l->etp;
}

moe_act_parts moe_activation_parts(const gpt_config *cfg, const layout *l, const moe_params *mp) {
    moe_act_parts a = {0, 0, 0, 0};
    if (!gpt_is_moe(cfg) || l->recompute == RECOMPUTE_FULL) return a;
    const double e = act_bytes(l->prec), n = moe_tokens_in(cfg, l), h = cfg->d_model;
    const double El = (double)(cfg->n_experts / l->ep), m = moe_tokens_per_expert(cfg, l, mp);
    const double Fl = (double)cfg->moe_d_ff / l->etp, g = cfg->mlp == MLP_SWIGLU ? 3.0 : 2.0;
    a.router = 2.0 * 4.0 * n * cfg->n_experts;
    a.routed = 2.0 * El * m * h * e;
    a.expert_mlp = g * e * El * m * Fl;
    if (l->mem & LAYOUT_MEM_FP8_ACT) {
        /* DeepSeek-V3's FP8 activation caching (report, section 3.3.3): the experts' input rows and
         * SwiGLU's inputs are kept in FP8 (1 byte and a scale per 128), SwiGLU's output recomputed */
        const double q = 1.0 + 4.0 / 128;
        a.routed = El * m * h * (q + e);
        a.expert_mlp = (g - 1.0) * q * El * m * Fl;
    }
    if (cfg->shared_d_ff > 0) a.shared = g * e * tokens_gpu(cfg, l) * ((double)cfg->shared_d_ff / (l->tp > 0 ? l->tp : 1));
    return a;
}

int moe_stage_moe_layers(const gpt_config *cfg, const layout *l, int stage, int layers) {
    if (!gpt_is_moe(cfg) || layers <= 0) return 0;
    static const int max_chunks = LAYOUT_MAX_CHUNKS;
    int cl[LAYOUT_MAX_CHUNKS];
    const int K = l->pp * l->vp;
    if (K < 1 || K > max_chunks || layout_chunk_layers(l, cfg->n_layers, cl, NULL, 0) != PL_OK)
        return (int)llround((double)layers * gpt_moe_layers_in(cfg, 0, cfg->n_layers) / cfg->n_layers);
    /* the stage's chunks: schedule_stage_of over its vp chunks (the V orders: stages r and 2p-1-r) */
    int mine[LAYOUT_MAX_CHUNKS] = {0};
    const schedule_order o = l->sched == SCHED_1F1B && l->vp > 1 ? SCHED_INTERLEAVED : l->sched;
    for (int c = 0; c < l->vp; c++) {
        const int k = schedule_stage_of(o, l->pp, stage, c);
        if (k >= 0 && k < K) mine[k] = 1;
    }
    int first = 0, have = 0, moe = 0;
    const int Sp = K / schedule_pipelines(o);
    for (int k = 0; k < K; k++) {
        if (k % Sp == 0) first = 0; /* dualpipe: each pipeline runs the whole model */
        if (mine[k]) {
            have += cl[k];
            moe += gpt_moe_layers_in(cfg, first, cl[k]);
        }
        first += cl[k];
    }
    if (have == layers) return moe;
    return (int)llround((double)layers * gpt_moe_layers_in(cfg, 0, cfg->n_layers) / cfg->n_layers);
}

pl_status moe_flex_dispatch_us(const cluster *c, const gpt_config *cfg, const int64_t *ranks, int n, double tokens,
                               double row_bytes, double load_factor, double *us, coll_estimate *out) {
    double t0 = 0;
    coll_estimate e;
    /* the group's shape (nodes, links) from the plain all-to-all's estimate */
    pl_status st = moe_all_to_all_us(c, ranks, n, 0.0, &t0, &e);
    if (st != PL_OK) return st;
    const double G = e.n_nodes > 0 ? e.n_nodes : 1, k = cfg->top_k > 0 ? cfg->top_k : 1;
    double Gr = G;
    if (cfg->router_topk_groups > 0 && cfg->router_topk_groups < Gr) Gr = cfg->router_topk_groups;
    const double hit = Gr * (1.0 - pow(1.0 - 1.0 / Gr, k)); /* distinct nodes per token */
    const double remote = G > 1 ? hit * (G - 1) / G : 0.0;
    const double eff = c->collective_efficiency, base = c->coll_base_latency_us > 0 ? c->coll_base_latency_us : 0;
    const double nv = cluster_intra_bw_of(c, ranks[0]) * eff;
    const double nic = e.n_nodes > 1 ? e.link_bw : 0.0; /* the NIC share at the collective efficiency */
    const double on = load_factor * tokens * k * row_bytes, off = load_factor * tokens * remote * row_bytes;
    double t = 0, lat = 0;
    if (n > 1) {
        const double t_on = on > 0 && nv > 0 ? on / nv * 1e6 : 0.0, t_off = off > 0 && nic > 0 ? off / nic * 1e6 : 0.0;
        lat = base + (e.n_nodes > 1 ? c->inter_latency_us : cluster_intra_latency_of(c, ranks[0]));
        t = lat + (t_on > t_off ? t_on : t_off);
    }
    *us = t;
    if (out) {
        *out = e;
        out->algo = n > 1 ? "flex" : "none";
        out->time_us = t;
        out->latency_us = lat;
        out->algbw = t > 0 ? on / (t * 1e-6) : 0.0;
        out->busbw = out->algbw * (n > 1 ? (double)(n - 1) / n : 0.0);
    }
    return PL_OK;
}
