/*
 * nodelpt.c: node-aware longest-processing-time packing (nodelpt.h).
 */
#include "nodelpt.h"

#include <stdlib.h>
#include <string.h>

struct nodelpt_work {
    int E, P, G, N, S, gpn;
    double W, k;
    int *cnt;        /* [E] replicas */
    int *home;       /* [E] home node */
    double *R;       /* [E][N] */
    int *tok;        /* [E] sampled tokens that chose e */
    int *order;      /* [P] replicas by load, heaviest first: expert ids */
    double *x;       /* [P] their loads */
    double *load;    /* [G] */
    int *fill;       /* [G] */
    const double *w;
    int *seen;       /* [N] scratch */
    int *holds;      /* [G] the last expert placed on each GPU's slots while packing (replicas of one expert
                        are adjacent in the order: equal loads), to keep a GPU from a second replica */
    eplb_work *ew;
};

pl_status nodelpt_work_create(const eplb_shape *s, nodelpt_work **out) {
    *out = NULL;
    if (!s || s->n_experts < 1 || s->n_slots < s->n_experts || s->n_gpus < 1 || s->gpus_per_node < 1 ||
        s->n_gpus % s->gpus_per_node || s->n_slots % s->n_gpus)
        return PL_ERR_INVALID;
    nodelpt_work *w = calloc(1, sizeof *w);
    if (!w) return PL_ERR_NOMEM;
    w->E = s->n_experts, w->P = s->n_slots, w->G = s->n_gpus, w->gpn = s->gpus_per_node;
    w->N = w->G / w->gpn, w->S = w->P / w->G;
    w->cnt = malloc((size_t)w->E * sizeof *w->cnt);
    w->home = malloc((size_t)w->E * sizeof *w->home);
    w->R = malloc((size_t)w->E * w->N * sizeof *w->R);
    w->tok = malloc((size_t)w->E * sizeof *w->tok);
    w->order = malloc((size_t)w->P * sizeof *w->order);
    w->x = malloc((size_t)w->P * sizeof *w->x);
    w->load = malloc((size_t)w->G * sizeof *w->load);
    w->fill = malloc((size_t)w->G * sizeof *w->fill);
    w->seen = malloc((size_t)w->N * sizeof *w->seen);
    w->holds = malloc((size_t)w->G * sizeof *w->holds);
    if (!w->cnt || !w->home || !w->R || !w->tok || !w->order || !w->x || !w->load || !w->fill || !w->seen || !w->holds ||
        eplb_work_create(s, &w->ew) != PL_OK) {
        nodelpt_work_destroy(w);
        return PL_ERR_NOMEM;
    }
    *out = w;
    return PL_OK;
}

void nodelpt_work_destroy(nodelpt_work *w) {
    if (!w) return;
    free(w->cnt);
    free(w->home);
    free(w->R);
    free(w->tok);
    free(w->order);
    free(w->x);
    free(w->load);
    free(w->fill);
    free(w->seen);
    free(w->holds);
    eplb_work_destroy(w->ew);
    free(w);
}

pl_status nodelpt_prepare(nodelpt_work *wk, const eplb_shape *s, const double *w, const int16_t *samples,
                          int n_samples, int sample_k, int top_k) {
    if (!wk || !s || !w || s->n_experts != wk->E || s->n_slots != wk->P || s->n_gpus != wk->G) return PL_ERR_INVALID;
    const int E = wk->E, P = wk->P, N = wk->N;
    wk->w = w;
    wk->k = top_k > 0 ? top_k : 1;
    /* replica counts: the greedy of EPLB's step 2 over all slots */
    double W = 0;
    for (int e = 0; e < E; e++) wk->cnt[e] = 1, W += w[e];
    wk->W = W > 0 ? W : 1.0;
    for (int i = E; i < P; i++) {
        int b = 0;
        for (int e = 1; e < E; e++)
            if (w[e] * wk->cnt[b] > w[b] * wk->cnt[e]) b = e;
        wk->cnt[b]++;
    }
    /* home nodes: the groups packed onto the nodes as EPLB's step 1 (through its hierarchical policy's
     * placement of the first replicas), else contiguous ranges of experts */
    const int groups = s->n_groups > 1 ? s->n_groups : 1;
    if (groups > 1 && groups % N == 0 && E % groups == 0) {
        int32_t *tmp = malloc((size_t)P * sizeof *tmp);
        if (!tmp) return PL_ERR_NOMEM;
        if (eplb_hierarchical(wk->ew, s, w, tmp, NULL) == PL_OK) {
            const int spn = P / N;
            for (int p = P - 1; p >= 0; p--) wk->home[tmp[p]] = p / spn;
        } else {
            for (int e = 0; e < E; e++) wk->home[e] = (int)((long)e * N / E);
        }
        free(tmp);
    } else {
        for (int e = 0; e < E; e++) wk->home[e] = (int)((long)e * N / E);
    }
    /* R: which other homes the tokens of e reach */
    memset(wk->R, 0, (size_t)E * N * sizeof *wk->R);
    memset(wk->tok, 0, (size_t)E * sizeof *wk->tok);
    if (samples && n_samples > 0 && sample_k > 0 && N > 1) {
        for (int t = 0; t < n_samples; t++) {
            const int16_t *tk = samples + (size_t)t * sample_k;
            for (int n = 0; n < N; n++) wk->seen[n] = 0;
            for (int j = 0; j < sample_k; j++)
                if (tk[j] >= 0 && tk[j] < E) wk->seen[wk->home[tk[j]]]++;
            for (int j = 0; j < sample_k; j++) {
                const int e = tk[j];
                if (e < 0 || e >= E) continue;
                wk->tok[e]++;
                for (int n = 0; n < N; n++) {
                    const int others = wk->seen[n] - (wk->home[e] == n);
                    if (others > 0) wk->R[(size_t)e * N + n] += 1.0;
                }
            }
        }
        for (int e = 0; e < E; e++)
            if (wk->tok[e])
                for (int n = 0; n < N; n++) wk->R[(size_t)e * N + n] /= wk->tok[e];
    }
    /* replicas heaviest first (stable by expert) */
    int m = 0;
    for (int e = 0; e < E; e++)
        for (int r = 0; r < wk->cnt[e]; r++) wk->order[m] = e, wk->x[m] = w[e] / wk->cnt[e], m++;
    for (int i = 1; i < m; i++) {
        const int oe = wk->order[i];
        const double ox = wk->x[i];
        int j = i;
        while (j > 0 && wk->x[j - 1] < ox) wk->order[j] = wk->order[j - 1], wk->x[j] = wk->x[j - 1], j--;
        wk->order[j] = oe, wk->x[j] = ox;
    }
    return PL_OK;
}

void nodelpt_pack(nodelpt_work *wk, double mu, int32_t *phy2log) {
    const int G = wk->G, S = wk->S, N = wk->N, gpn = wk->gpn;
    const double mean = wk->W / G, fk = wk->k * (double)(N - 1) / (N > 0 ? N : 1) / wk->W;
    for (int g = 0; g < G; g++) wk->load[g] = 0, wk->fill[g] = 0, wk->holds[g] = -1;
    for (int i = 0; i < wk->P; i++) {
        const int e = wk->order[i];
        const double x = wk->x[i];
        int best = -1, best_dup = -1;
        double bc = 0, bcd = 0;
        for (int g = 0; g < G; g++) {
            if (wk->fill[g] >= S) continue;
            const int n = g / gpn;
            const double d = n == wk->home[e] || N < 2 ? 0.0 : fk * x * (1.0 - wk->R[(size_t)e * N + n]);
            const double c = (wk->load[g] + x) / mean + mu * d;
            if (wk->holds[g] == e) {
                if (best_dup < 0 || c < bcd) best_dup = g, bcd = c;
            } else if (best < 0 || c < bc) {
                best = g, bc = c;
            }
        }
        if (best < 0) best = best_dup;
        phy2log[best * S + wk->fill[best]++] = e;
        wk->holds[best] = e;
        wk->load[best] += x;
    }
}
