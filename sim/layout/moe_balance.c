/*
 * moe_balance.c: an expert placement's per-layer cost (moe_balance.h): per-GPU
 * tokens, cross-node copies per token, the worst NIC's bytes, and the MoE
 * layer's time on the busiest GPU.
 *
 * The layer's compute goes through one function, layer_compute_us: the
 * measured MoE layer of issue 33 (moe_compute.h: moe_layer_time_us) at the
 * busiest rank's rows.
 */
#include "moe_balance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expert_map.h"
#include "model_params.h"
#include "moe_compute.h"

struct moe_balance_ctx {
    moe_balance_group g;
    int n_experts, n_slots, n_nodes, slots_per_gpu;
    int *cnt;          /* [n_experts] replicas */
    int *nrep;         /* [n_experts] distinct nodes of its replicas */
    int *stamp;        /* [n_nodes] the last sampled token (+1) that reached the node */
    int *head;         /* [n_experts + 1] offsets into rep_node / rep_frac */
    int *rep_node;     /* [n_slots] the nodes of each expert's replicas, grouped by expert */
    double *rep_frac;  /* [n_slots] their shares (merged per node) */
    double *miss;      /* [n_nodes] per-token scratch: the chance the node is not reached */
    int *touched;      /* [n_nodes] */
    double *q;         /* [n_nodes] sum over tokens of the reach probability */
};

pl_status moe_balance_ctx_create(const moe_balance_group *g, int n_experts, int n_slots, moe_balance_ctx **out,
                                 char *msg, size_t len) {
    if (!g || !out) return pl_fail(msg, len, PL_ERR_INVALID, "moe_balance_ctx_create: no group or output");
    *out = NULL;
    pl_status st = expert_map_check_shape(1, n_experts, n_slots, g->n_gpus, g->gpus_per_node, msg, len);
    if (st != PL_OK) return st;
    if (g->top_k < 1 || !(g->tokens_per_gpu >= 0) || !(g->row_bytes >= 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "the group needs top_k >= 1 and tokens, row bytes >= 0");
    moe_balance_ctx *c = calloc(1, sizeof *c);
    if (!c) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for a balance scorer");
    c->g = *g;
    c->n_experts = n_experts;
    c->n_slots = n_slots;
    c->n_nodes = g->n_gpus / g->gpus_per_node;
    c->slots_per_gpu = n_slots / g->n_gpus;
    c->cnt = malloc((size_t)n_experts * sizeof *c->cnt);
    c->head = malloc((size_t)(n_experts + 1) * sizeof *c->head);
    c->nrep = malloc((size_t)n_experts * sizeof *c->nrep);
    c->stamp = malloc((size_t)c->n_nodes * sizeof *c->stamp);
    c->rep_node = malloc((size_t)n_slots * sizeof *c->rep_node);
    c->rep_frac = malloc((size_t)n_slots * sizeof *c->rep_frac);
    c->miss = malloc((size_t)c->n_nodes * sizeof *c->miss);
    c->touched = malloc((size_t)c->n_nodes * sizeof *c->touched);
    c->q = malloc((size_t)c->n_nodes * sizeof *c->q);
    if (!c->cnt || !c->head || !c->rep_node || !c->rep_frac || !c->miss || !c->touched || !c->q || !c->nrep || !c->stamp) {
        moe_balance_ctx_destroy(c);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for a balance scorer");
    }
    *out = c;
    return PL_OK;
}

void moe_balance_ctx_destroy(moe_balance_ctx *c) {
    if (!c) return;
    free(c->cnt);
    free(c->head);
    free(c->nrep);
    free(c->stamp);
    free(c->rep_node);
    free(c->rep_frac);
    free(c->miss);
    free(c->touched);
    free(c->q);
    free(c);
}

pl_status moe_balance_score_layer(moe_balance_ctx *c, const int32_t *phy2log, const double *load,
                                  const int16_t *samples, int n_samples, int sample_k, double *gpu_load,
                                  moe_balance_layer *out) {
    if (!c || !phy2log || !load || !out) return PL_ERR_INVALID;
    const int E = c->n_experts, P = c->n_slots, S = c->slots_per_gpu, N = c->n_nodes, G = c->g.n_gpus;
    const int spn = S * c->g.gpus_per_node; /* slots a node holds */
    memset(c->cnt, 0, (size_t)E * sizeof *c->cnt);
    for (int s = 0; s < P; s++) {
        if (phy2log[s] < 0 || phy2log[s] >= E) return PL_ERR_INVALID;
        c->cnt[phy2log[s]]++;
    }
    /* each expert's replicas by node: a counting sort of the slots by expert (slots ascend, so one
     * node's replicas of an expert are adjacent and merge into one entry of their summed share) */
    c->head[0] = 0;
    for (int e = 0; e < E; e++) {
        if (!c->cnt[e] && load[e] > 0) return PL_ERR_INVALID; /* routed tokens with nowhere to go */
        c->head[e + 1] = c->head[e] + c->cnt[e];
        c->nrep[e] = 0;
    }
    for (int s = 0; s < P; s++) {
        const int e = phy2log[s], node = s / spn, at = c->head[e] + c->nrep[e];
        if (c->nrep[e] > 0 && c->rep_node[at - 1] == node) {
            c->rep_frac[at - 1] += 1.0 / c->cnt[e];
        } else {
            c->rep_node[at] = node;
            c->rep_frac[at] = 1.0 / c->cnt[e];
            c->nrep[e]++;
        }
    }
    /* per-GPU loads */
    double tot = 0, mx = 0;
    for (int g = 0; g < G; g++) {
        double v = 0;
        for (int j = 0; j < S; j++) {
            const int e = phy2log[g * S + j];
            v += load[e] / c->cnt[e];
        }
        if (gpu_load) gpu_load[g] = v;
        tot += v;
        if (v > mx) mx = v;
    }
    out->mean = tot / G;
    out->busiest = mx;
    out->busiest_over_mean = out->mean > 0 ? mx / out->mean : 1.0;
    /* reach per node */
    for (int n = 0; n < N; n++) c->q[n] = 0.0, c->stamp[n] = 0;
    double tokens = 0;
    if (samples && n_samples > 0 && sample_k > 0) {
        out->copies_sampled = 1;
        for (int t = 0; t < n_samples; t++) {
            const int16_t *tk = samples + (size_t)t * sample_k;
            int nt = 0, any = 0;
            for (int j = 0; j < sample_k; j++) {
                const int e = tk[j];
                if (e < 0 || e >= E) continue;
                any = 1;
                for (int i = c->head[e]; i < c->head[e] + c->nrep[e]; i++) {
                    const int n = c->rep_node[i];
                    if (c->stamp[n] != t + 1) {
                        c->stamp[n] = t + 1;
                        c->miss[n] = 1.0;
                        c->touched[nt++] = n;
                    }
                    c->miss[n] *= 1.0 - c->rep_frac[i];
                }
            }
            for (int i = 0; i < nt; i++) c->q[c->touched[i]] += 1.0 - c->miss[c->touched[i]];
            tokens += any;
        }
    } else {
        out->copies_sampled = 0;
        double all = 0;
        for (int e = 0; e < E; e++) all += load[e];
        if (all > 0) {
            for (int e = 0; e < E; e++)
                for (int i = c->head[e]; i < c->head[e] + c->nrep[e]; i++) c->q[c->rep_node[i]] += load[e] / all * c->rep_frac[i];
            for (int n = 0; n < N; n++) c->q[n] = 1.0 - pow(1.0 - (c->q[n] < 1.0 ? c->q[n] : 1.0), c->g.top_k);
            tokens = 1.0;
        }
    }
    double sq = 0, qmax = 0, qmin = INFINITY;
    for (int n = 0; n < N; n++) {
        if (tokens > 0) c->q[n] /= tokens;
        sq += c->q[n];
        if (c->q[n] > qmax) qmax = c->q[n];
        if (c->q[n] < qmin) qmin = c->q[n];
    }
    out->copies_per_token = N > 1 ? (double)(N - 1) / N * sq : 0.0;
    double worst = 0;
    if (N > 1) {
        const double in = (N - 1) * qmax, outb = sq - qmin;
        worst = (in > outb ? in : outb) * c->g.tokens_per_gpu * c->g.row_bytes;
    }
    out->worst_nic_bytes = worst;
    return PL_OK;
}

/* The MoE block's compute on the busiest GPU: the measured MoE layer
 * (moe_compute.h, moe_layer_time_us) at the busiest rank's routed rows, f
 * times the mean n k etp (gpu_load, when given, the per-GPU loads f came
 * from: their largest over their mean is f), its experts spread by the
 * parameters' expert_cv. */
static double layer_compute_us(const moe_balance_cost *m, double f, const double *gpu_load, int n_gpus) {
    if (gpu_load && n_gpus > 0) {
        double s = 0, mx = 0;
        for (int g = 0; g < n_gpus; g++) {
            s += gpu_load[g];
            if (gpu_load[g] > mx) mx = gpu_load[g];
        }
        if (s > 0) f = mx / (s / n_gpus);
    }
    if (f < 1.0) f = 1.0;
    const cluster_gpu *gpu = cluster_gpu_of(m->clu, 0);
    const double rows = moe_tokens_in(m->cfg, m->lay) * m->cfg->top_k * (m->lay->etp > 0 ? m->lay->etp : 1) * f;
    moe_loads ld = {&rows, 1, NULL, 0, -1.0};
    moe_layer_time t;
    if (moe_layer_time_us(gpu, m->cfg, m->lay, &m->moe, &m->compute, &ld, &t) != PL_OK) {
        /* the closed form at f (a fit the measured layer refuses) */
        moe_params mp = m->moe;
        mp.imbalance = f;
        mp.capacity_factor = 0.0;
        layer_cost lc;
        moe_block_compute_cost(gpu, m->cfg, m->lay, &m->compute, &mp, &lc);
        return m->training ? lc.fwd_us + lc.bwd_us + lc.recompute_us : lc.fwd_us;
    }
    const double rec = m->lay->recompute == RECOMPUTE_FULL ? t.fwd_us : 0.0;
    return m->training ? t.fwd_us + t.bwd_us + rec : t.fwd_us;
}

pl_status moe_balance_layer_time(const moe_balance_cost *m, double load_factor, const double *gpu_load, int n_gpus,
                                 double worst_nic_bytes, double *compute_us, double *comm_us) {
    if (!m || !m->clu || !m->cfg || !m->lay || !gpt_is_moe(m->cfg) || !(load_factor >= 1.0) || !(worst_nic_bytes >= 0))
        return PL_ERR_INVALID;
    const cluster *c = m->clu;
    const layout *l = m->lay;
    moe_balance_group g;
    moe_balance_group_of(c, m->cfg, l, &g);
    const double eff = c->collective_efficiency > 0 ? c->collective_efficiency : 1.0;
    const double nv = cluster_intra_bw_of(c, 0) * eff, nic = cluster_nic_bw_per_gpu_of(c, 0) * eff;
    const int multi = g.n_gpus > g.gpus_per_node;
    const double base = c->coll_base_latency_us > 0 ? c->coll_base_latency_us : 0.0;
    const double lat = base + (multi ? c->inter_latency_us : cluster_intra_latency_of(c, 0));
    const double on = load_factor * g.tokens_per_gpu * m->cfg->top_k * g.row_bytes;
    const double t_on = on > 0 && nv > 0 ? on / nv * 1e6 : 0.0;
    const double t_off = multi && worst_nic_bytes > 0 && nic > 0 ? worst_nic_bytes / nic * 1e6 : 0.0;
    const double one = g.n_gpus > 1 ? lat + (t_on > t_off ? t_on : t_off) : 0.0;
    const double n_coll = m->training ? (l->recompute == RECOMPUTE_FULL ? 6.0 : 4.0) : 2.0;
    if (compute_us) *compute_us = layer_compute_us(m, load_factor, gpu_load, n_gpus);
    if (comm_us) *comm_us = n_coll * one;
    return PL_OK;
}

void moe_balance_group_of(const cluster *clu, const gpt_config *cfg, const layout *lay, moe_balance_group *g) {
    memset(g, 0, sizeof *g);
    const int ep = lay->ep > 0 ? lay->ep : 1;
    g->n_gpus = ep;
    int64_t dom = clu ? cluster_domain_gpus(clu) : ep;
    if (dom < 1) dom = 1;
    /* the ep group is ep consecutive ranks (etp = 1): a node holds min(ep, domain) of them */
    g->gpus_per_node = (int)(dom < ep ? dom : ep);
    while (g->gpus_per_node > 1 && ep % g->gpus_per_node) g->gpus_per_node--;
    g->top_k = cfg && cfg->top_k > 0 ? cfg->top_k : 1;
    g->tokens_per_gpu = cfg ? moe_tokens_in(cfg, lay) : 0.0;
    const double e = lay->prec == PRECISION_FP8 ? 2.0 : (double)precision_act_bytes(lay->prec);
    g->row_bytes = cfg ? (double)cfg->d_model * e : 0.0;
}
