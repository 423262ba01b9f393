/* profile_data.c: allocation, interpolation and copying of profiles. */
#include "profile_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pl_status profile_data_create(int n_devices, int n_nodes, int n_mb, const int *mb_sizes,
                              profile_data **out) {
    *out = NULL;
    if (n_devices <= 0 || n_nodes <= 0 || n_mb <= 0 || !mb_sizes) return PL_ERR_INVALID;
    for (int k = 0; k < n_mb; k++)
        if (mb_sizes[k] <= 0 || (k && mb_sizes[k] <= mb_sizes[k - 1])) return PL_ERR_INVALID;
    profile_data *p = calloc(1, sizeof *p);
    if (!p) return PL_ERR_NOMEM;
    p->n_devices = n_devices;
    p->n_nodes = n_nodes;
    p->n_mb = n_mb;
    p->devices = calloc((size_t)n_devices, sizeof *p->devices);
    p->node_mem = calloc((size_t)n_nodes, sizeof *p->node_mem);
    p->mb_sizes = malloc(sizeof *p->mb_sizes * (size_t)n_mb);
    p->cost_us = calloc((size_t)n_devices * n_mb * n_nodes * PHASE_COUNT, sizeof *p->cost_us);
    p->links = calloc((size_t)n_devices * n_devices, sizeof *p->links);
    if (!p->devices || !p->node_mem || !p->mb_sizes || !p->cost_us || !p->links) {
        profile_data_destroy(p);
        return PL_ERR_NOMEM;
    }
    memcpy(p->mb_sizes, mb_sizes, sizeof *mb_sizes * (size_t)n_mb);
    *out = p;
    return PL_OK;
}

void profile_data_destroy(profile_data *p) {
    if (!p) return;
    if (p->links)
        for (int i = 0; i < p->n_devices * p->n_devices; i++) {
            free(p->links[i].bytes);
            free(p->links[i].us);
        }
    free(p->links);
    free(p->devices);
    free(p->node_mem);
    free(p->mb_sizes);
    free(p->cost_us);
    free(p->w_frac);
    free(p);
}

int profile_mb_index(const profile_data *p, int mb_size) {
    for (int k = 0; k < p->n_mb; k++)
        if (p->mb_sizes[k] == mb_size) return k;
    return -1;
}

double profile_node_cost(const profile_data *p, int dev, int mb_size, int node, cost_phase ph) {
    if (ph == PHASE_OPT) return p->cost_us[profile_cost_index(p, dev, 0, node, ph)];
    int k = profile_mb_index(p, mb_size);
    if (k >= 0) return p->cost_us[profile_cost_index(p, dev, k, node, ph)];
    if (p->n_mb == 1) /* proportional scaling from the only size */
        return p->cost_us[profile_cost_index(p, dev, 0, node, ph)] * mb_size / p->mb_sizes[0];
    int hi = 1;
    while (hi < p->n_mb - 1 && p->mb_sizes[hi] < mb_size) hi++;
    int lo = hi - 1;
    double x0 = p->mb_sizes[lo], x1 = p->mb_sizes[hi];
    double y0 = p->cost_us[profile_cost_index(p, dev, lo, node, ph)];
    double y1 = p->cost_us[profile_cost_index(p, dev, hi, node, ph)];
    double y = y0 + (y1 - y0) * (mb_size - x0) / (x1 - x0);
    return y > 0 ? y : 0;
}

pl_status profile_link_set_curve(profile_link *l, int n, const double *bytes, const double *us) {
    if (n < 1) return PL_ERR_INVALID;
    for (int i = 1; i < n; i++)
        if (bytes[i] <= bytes[i - 1]) return PL_ERR_INVALID;
    double *b = malloc(sizeof *b * (size_t)n), *u = malloc(sizeof *u * (size_t)n);
    if (!b || !u) {
        free(b);
        free(u);
        return PL_ERR_NOMEM;
    }
    memcpy(b, bytes, sizeof *b * (size_t)n);
    memcpy(u, us, sizeof *u * (size_t)n);
    free(l->bytes);
    free(l->us);
    l->bytes = b;
    l->us = u;
    l->n_points = n;
    return PL_OK;
}

double profile_transfer_us(const profile_data *p, int src, int dst, double bytes) {
    if (src == dst || bytes <= 0) return 0.0;
    const profile_link *l = &p->links[src * p->n_devices + dst];
    int n = l->n_points;
    if (n == 0) return l->latency_us + (l->bandwidth > 0 ? bytes / l->bandwidth * 1e6 : 0);
    if (bytes <= l->bytes[0]) return l->us[0];
    if (n == 1) return l->us[0] + (l->bandwidth > 0 ? (bytes - l->bytes[0]) / l->bandwidth * 1e6 : 0);
    /* binary search for the segment */
    int lo = 0, hi = n - 1;
    if (bytes >= l->bytes[n - 1]) {
        lo = n - 2;
        hi = n - 1;
    } else {
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (l->bytes[mid] <= bytes) lo = mid;
            else hi = mid;
        }
    }
    double t = (bytes - l->bytes[lo]) / (l->bytes[hi] - l->bytes[lo]);
    double y = l->us[lo] + t * (l->us[hi] - l->us[lo]);
    return y > l->us[0] ? y : l->us[0];
}

pl_status profile_data_clone(const profile_data *p, profile_data **out) {
    profile_data *q = NULL;
    pl_status st = profile_data_create(p->n_devices, p->n_nodes, p->n_mb, p->mb_sizes, &q);
    if (st != PL_OK) return st;
    memcpy(q->machine, p->machine, sizeof q->machine);
    memcpy(q->source, p->source, sizeof q->source);
    memcpy(q->graph_key, p->graph_key, sizeof q->graph_key);
    q->bf16 = p->bf16;
    memcpy(q->devices, p->devices, sizeof *p->devices * (size_t)p->n_devices);
    memcpy(q->node_mem, p->node_mem, sizeof *p->node_mem * (size_t)p->n_nodes);
    memcpy(q->cost_us, p->cost_us,
           sizeof *p->cost_us * (size_t)p->n_devices * p->n_mb * p->n_nodes * PHASE_COUNT);
    if (p->w_frac) {
        q->w_frac = malloc(sizeof *q->w_frac * (size_t)p->n_nodes);
        if (!q->w_frac) {
            profile_data_destroy(q);
            return PL_ERR_NOMEM;
        }
        memcpy(q->w_frac, p->w_frac, sizeof *q->w_frac * (size_t)p->n_nodes);
    }
    for (int i = 0; i < p->n_devices * p->n_devices; i++) {
        const profile_link *a = &p->links[i];
        profile_link *b = &q->links[i];
        b->latency_us = a->latency_us;
        b->bandwidth = a->bandwidth;
        if (a->n_points > 0 && (st = profile_link_set_curve(b, a->n_points, a->bytes, a->us)) != PL_OK) {
            profile_data_destroy(q);
            return st;
        }
    }
    *out = q;
    return PL_OK;
}

int64_t profile_backend_workspace(const profile_data *p) {
    int64_t ws = -1;
    for (int i = 0; i < p->n_nodes; i++)
        for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
            const int64_t w = profile_node_call_workspace(&p->node_mem[i], (cost_phase)ph);
            if (ws < 0 || w < ws) ws = w;
        }
    return ws > 0 ? ws : 0;
}

double profile_w_frac(const profile_data *p, const graph *g, int i) {
    if (p && p->w_frac && i >= 0 && i < p->n_nodes && !isnan(p->w_frac[i])) return p->w_frac[i];
    if (!g || i < 0 || i >= g->n_nodes) return 0.0;
    const graph_node *nd = &g->nodes[i];
    if (nd->kind != OP_ATTENTION && nd->kind != OP_MLP && nd->kind != OP_HEAD) return 0.0;
    if (nd->params <= 0 || nd->bwd_flops_per_sample <= 0) return 0.0;
    const double w = 2.0 * (double)nd->params * (double)g->cfg.seq_len / nd->bwd_flops_per_sample;
    return w < 1.0 ? w : 1.0;
}
