/*
 * eplb.c: EPLB's hierarchical and global policies and the load-unaware
 * baselines (eplb.h), written from the algorithm of deepseek-ai/EPLB's
 * module eplb (balanced_packing, replicate_experts,
 * rebalance_experts_hierarchical) with its tie-breaking.
 */
#include "eplb.h"

#include <stdlib.h>
#include <string.h>

struct eplb_work {
    int cap_e, cap_p;
    double *gw;        /* group / item weights to pack */
    int *order;        /* sort order */
    int *pack, *rank;  /* packing result per item */
    double *pw;        /* pack weights */
    int *pn;           /* pack item counts */
    int *log2mlog, *mlog2log;
    double *mw;        /* node-local expert weights */
    int *phy2mlog, *phyrank, *mlogcnt;
    double *tphy;
    int *pphy2phy;
};

pl_status eplb_work_create(const eplb_shape *s, eplb_work **out) {
    *out = NULL;
    if (!s || s->n_experts < 1 || s->n_slots < s->n_experts || s->n_gpus < 1) return PL_ERR_INVALID;
    eplb_work *w = calloc(1, sizeof *w);
    if (!w) return PL_ERR_NOMEM;
    const int E = s->n_experts, P = s->n_slots, n = P > E ? P : E;
    w->cap_e = E;
    w->cap_p = P;
    w->gw = malloc((size_t)n * sizeof *w->gw);
    w->order = malloc((size_t)n * sizeof *w->order);
    w->pack = malloc((size_t)n * sizeof *w->pack);
    w->rank = malloc((size_t)n * sizeof *w->rank);
    w->pw = malloc((size_t)n * sizeof *w->pw);
    w->pn = malloc((size_t)n * sizeof *w->pn);
    w->log2mlog = malloc((size_t)E * sizeof *w->log2mlog);
    w->mlog2log = malloc((size_t)E * sizeof *w->mlog2log);
    w->mw = malloc((size_t)E * sizeof *w->mw);
    w->phy2mlog = malloc((size_t)P * sizeof *w->phy2mlog);
    w->phyrank = malloc((size_t)P * sizeof *w->phyrank);
    w->mlogcnt = malloc((size_t)E * sizeof *w->mlogcnt);
    w->tphy = malloc((size_t)P * sizeof *w->tphy);
    w->pphy2phy = malloc((size_t)P * sizeof *w->pphy2phy);
    if (!w->gw || !w->order || !w->pack || !w->rank || !w->pw || !w->pn || !w->log2mlog || !w->mlog2log || !w->mw ||
        !w->phy2mlog || !w->phyrank || !w->mlogcnt || !w->tphy || !w->pphy2phy) {
        eplb_work_destroy(w);
        return PL_ERR_NOMEM;
    }
    *out = w;
    return PL_OK;
}

void eplb_work_destroy(eplb_work *w) {
    if (!w) return;
    free(w->gw);
    free(w->order);
    free(w->pack);
    free(w->rank);
    free(w->pw);
    free(w->pn);
    free(w->log2mlog);
    free(w->mlog2log);
    free(w->mw);
    free(w->phy2mlog);
    free(w->phyrank);
    free(w->mlogcnt);
    free(w->tphy);
    free(w->pphy2phy);
    free(w);
}

/* Stable sort of idx[0..n) by weight, heaviest first (insertion-merge: n is small, a few hundred). */
static void sort_desc(const double *wt, int *idx, int n) {
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++) {
        const int v = idx[i];
        int j = i;
        while (j > 0 && wt[idx[j - 1]] < wt[v]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

/* balanced_packing of n items of weight wt into `packs` packs of n / packs
 * items: pack[i], rank[i] (the item's position in its pack). */
static void balanced_packing(eplb_work *w, const double *wt, int n, int packs, int *pack, int *rank) {
    const int per = n / packs;
    if (per == 1) {
        for (int i = 0; i < n; i++) pack[i] = i, rank[i] = 0;
        return;
    }
    sort_desc(wt, w->order, n);
    for (int p = 0; p < packs; p++) w->pw[p] = 0, w->pn[p] = 0;
    for (int i = 0; i < n; i++) {
        const int it = w->order[i];
        int best = -1;
        for (int p = 0; p < packs; p++)
            if (w->pn[p] < per && (best < 0 || w->pw[p] < w->pw[best])) best = p;
        pack[it] = best;
        rank[it] = w->pn[best]++;
        w->pw[best] += wt[it];
    }
}

/* replicate_experts over n experts of weight wt into m slots: phy2log[m]
 * (local ids), rank[m], cnt[n]. */
static void replicate(const double *wt, int n, int m, int *phy2log, int *rank, int *cnt) {
    for (int i = 0; i < n; i++) phy2log[i] = i, rank[i] = 0, cnt[i] = 1;
    for (int i = n; i < m; i++) {
        int best = 0;
        double bv = wt[0] / cnt[0];
        for (int e = 1; e < n; e++) {
            const double v = wt[e] / cnt[e];
            if (v > bv) bv = v, best = e;
        }
        phy2log[i] = best;
        rank[i] = cnt[best]++;
    }
}

static pl_status hierarchical(eplb_work *w, const eplb_shape *s, const double *wt, int groups, int nodes,
                              int32_t *out, int32_t *out_rank) {
    const int E = s->n_experts, P = s->n_slots, G = s->n_gpus;
    if (E > w->cap_e || P > w->cap_p) return PL_ERR_INVALID;
    if (groups < 1 || nodes < 1 || E % groups || groups % nodes || G % nodes || P % G || P / nodes < E / nodes ||
        E % nodes)
        return PL_ERR_INVALID;
    const int gsize = E / groups, gpn = groups / nodes, spg = P / G, el = E / nodes, pl = P / nodes, gl = G / nodes;
    /* 1: groups onto nodes */
    for (int g = 0; g < groups; g++) {
        double t = 0;
        for (int j = 0; j < gsize; j++) t += wt[g * gsize + j];
        w->gw[g] = t;
    }
    int *gp = w->pack, *gr = w->rank; /* the groups' packing (w->pack is free again before step 3) */
    balanced_packing(w, w->gw, groups, nodes, gp, gr);
    for (int e = 0; e < E; e++) {
        const int g = e / gsize;
        w->log2mlog[e] = (gp[g] * gpn + gr[g]) * gsize + e % gsize;
    }
    for (int e = 0; e < E; e++) w->mlog2log[w->log2mlog[e]] = e;
    for (int i = 0; i < E; i++) w->mw[i] = wt[w->mlog2log[i]];
    /* 2 and 3 per node */
    for (int n = 0; n < nodes; n++) {
        const double *nw = w->mw + (size_t)n * el;
        int *p2m = w->phy2mlog + (size_t)n * pl, *pr = w->phyrank + (size_t)n * pl, *mc = w->mlogcnt + (size_t)n * el;
        replicate(nw, el, pl, p2m, pr, mc);
        for (int j = 0; j < pl; j++) w->tphy[j] = nw[p2m[j]] / mc[p2m[j]];
        balanced_packing(w, w->tphy, pl, gl, w->pack, w->rank);
        for (int j = 0; j < pl; j++) w->pphy2phy[w->pack[j] * spg + w->rank[j]] = j;
        for (int k = 0; k < pl; k++) {
            const int j = w->pphy2phy[k];
            out[(size_t)n * pl + k] = w->mlog2log[p2m[j] + n * el];
            if (out_rank) out_rank[(size_t)n * pl + k] = pr[j];
        }
    }
    return PL_OK;
}

pl_status eplb_hierarchical(eplb_work *wk, const eplb_shape *s, const double *w, int32_t *phy2log, int32_t *phyrank) {
    if (!wk || !s || !w || !phy2log || s->gpus_per_node < 1 || s->n_gpus % s->gpus_per_node) return PL_ERR_INVALID;
    const int groups = s->n_groups > 1 ? s->n_groups : 1;
    return hierarchical(wk, s, w, groups, s->n_gpus / s->gpus_per_node, phy2log, phyrank);
}

pl_status eplb_global(eplb_work *wk, const eplb_shape *s, const double *w, int32_t *phy2log, int32_t *phyrank) {
    if (!wk || !s || !w || !phy2log) return PL_ERR_INVALID;
    return hierarchical(wk, s, w, 1, 1, phy2log, phyrank);
}

pl_status eplb_auto(eplb_work *wk, const eplb_shape *s, const double *w, int32_t *phy2log, int32_t *phyrank,
                    int *hier) {
    if (!s || s->gpus_per_node < 1) return PL_ERR_INVALID;
    const int groups = s->n_groups > 1 ? s->n_groups : 1, nodes = s->n_gpus / s->gpus_per_node;
    const int h = groups % nodes == 0;
    if (hier) *hier = h;
    return h ? eplb_hierarchical(wk, s, w, phy2log, phyrank) : eplb_global(wk, s, w, phy2log, phyrank);
}

void eplb_contiguous(const eplb_shape *s, int32_t *phy2log) {
    for (int p = 0; p < s->n_slots; p++) phy2log[p] = p % s->n_experts;
}

void eplb_round_robin(const eplb_shape *s, int32_t *phy2log) {
    const int G = s->n_gpus, S = s->n_slots / s->n_gpus;
    for (int i = 0; i < s->n_slots; i++) phy2log[(i % G) * S + i / G] = i % s->n_experts;
}
