/*
 * refine.c: local search over one layer's slots (refine.h).
 *
 * The max over GPUs is flat (many moves change a GPU that is not the
 * busiest, or leave a tie), so moves are judged on a smooth stand-in for it,
 * the log-sum-exp (1/beta) log sum_g exp(beta L_g / mean) with beta = 200 (a
 * GPU 1% below the busiest weighs e^-2 of it), kept per scenario as the sum
 * Z_h so that a move that changes two GPUs costs O(1) to judge; F is
 * recomputed with the true max at the end. Copies are kept per sampled token
 * (its reach per node); a move that changes where an expert's replicas are
 * recomputes the tokens that chose it (the inverse index tok_of).
 */
#include "refine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define BETA 200.0

#define REFINE_MAX_CAND 8192
#define EXPERTS_KICK_MAX_E 4096
#define REFINE_LIGHTEST 8    /* swap partners beyond the busiest GPU's node: the lightest GPUs */
#define REFINE_COPIES_EVAL 6  /* candidates whose copies are computed per round, once one is acceptable */
#define REFINE_DONORS 24      /* replicate moves take a slot from the lightest replicas of scenario 0 */

typedef struct {
    double df;
    int s1, s2, kind; /* kind 1 swap, 2 replicate */
} cand;

static int cand_cmp(const void *a, const void *b) {
    const double x = ((const cand *)a)->df, y = ((const cand *)b)->df;
    return (x > y) - (x < y);
}

struct refine_work {
    int cap_e, cap_p, cap_g, cap_t, cap_k, cap_n, cap_c;
    int *cnt;          /* [E] replicas */
    int *nodecnt;      /* [E][N] replicas per node */
    int *rep;          /* [E][cap_c] the slots of each expert */
    double *L;         /* [H][G] GPU loads */
    double *Z;         /* [H] sum of exp(BETA (L / mean - x0)) */
    double mean[REFINE_MAX_SCENARIOS], x0[REFINE_MAX_SCENARIOS];
    int *tok_head, *tok_list;  /* [E + 1], [T k] tokens that chose each expert */
    double *reach;     /* [T] sum over nodes of the token's reach probability */
    double *miss;      /* [N] scratch */
    int *mark, *touched, reach_id; /* [N] scratch of token_reach */
    int *nz, *nzn;     /* [E], [E][N]: the nodes holding each expert's replicas */
    int *stamp;        /* [T] scratch for the union of two experts' tokens */
    int stamp_id;
    int *affected;     /* [T] */
    double *new_reach; /* [T] */
    double reach_sum;
    int t_valid;
    double *ez;        /* [H][G] zterm of each GPU's load (cached) */
    cand *cand;        /* [REFINE_MAX_CAND] moves judged this round */
    int donor[REFINE_DONORS];
    double donor_v[REFINE_DONORS];
    int light[REFINE_DONORS];      /* slots of the experts lightest with one more replica */
    double light_v[REFINE_DONORS];
    int *part;         /* [G] swap partners */
    int *part_mark;    /* [G] */
    double max_gain;   /* the largest copies decrease one move may bring (per token) */
    const int16_t *idx_samples; /* the samples tok_head / tok_list index (a cache key, with the sizes) */
    int idx_T, idx_K, idx_E;
    int *gl;           /* [2 cap_c + 2] GPUs a replicate move changes */
    double *gd;        /* their load changes */
};

pl_status refine_work_create(const eplb_shape *s, int max_samples, int max_k, refine_work **out) {
    *out = NULL;
    if (!s || s->n_experts < 1 || s->n_slots < s->n_experts || s->n_gpus < 1 || s->gpus_per_node < 1 ||
        max_samples < 0 || max_k < 0)
        return PL_ERR_INVALID;
    refine_work *w = calloc(1, sizeof *w);
    if (!w) return PL_ERR_NOMEM;
    const int E = s->n_experts, P = s->n_slots, G = s->n_gpus, N = G / s->gpus_per_node, T = max_samples;
    w->cap_e = E, w->cap_p = P, w->cap_g = G, w->cap_t = T, w->cap_k = max_k, w->cap_n = N;
    w->cap_c = P - E + 1;
    w->cnt = malloc((size_t)E * sizeof *w->cnt);
    w->nodecnt = malloc((size_t)E * N * sizeof *w->nodecnt);
    w->rep = malloc((size_t)E * w->cap_c * sizeof *w->rep);
    w->L = malloc((size_t)REFINE_MAX_SCENARIOS * G * sizeof *w->L);
    w->Z = malloc(REFINE_MAX_SCENARIOS * sizeof *w->Z);
    w->tok_head = malloc((size_t)(E + 1) * sizeof *w->tok_head);
    w->tok_list = malloc((size_t)(T * max_k + 1) * sizeof *w->tok_list);
    w->reach = malloc((size_t)(T + 1) * sizeof *w->reach);
    w->miss = malloc((size_t)N * sizeof *w->miss);
    w->mark = calloc((size_t)N, sizeof *w->mark);
    w->touched = malloc((size_t)N * sizeof *w->touched);
    w->nz = malloc((size_t)E * sizeof *w->nz);
    w->nzn = malloc((size_t)E * N * sizeof *w->nzn);
    w->stamp = calloc((size_t)(T + 1), sizeof *w->stamp);
    w->affected = malloc((size_t)(T + 1) * sizeof *w->affected);
    w->new_reach = malloc((size_t)(T + 1) * sizeof *w->new_reach);
    w->ez = malloc((size_t)REFINE_MAX_SCENARIOS * G * sizeof *w->ez);
    w->cand = malloc(REFINE_MAX_CAND * sizeof *w->cand);
    w->part = malloc((size_t)G * sizeof *w->part);
    w->part_mark = malloc((size_t)G * sizeof *w->part_mark);
    w->gl = malloc((size_t)(2 * w->cap_c + 2) * sizeof *w->gl);
    w->gd = malloc((size_t)(2 * w->cap_c + 2) * sizeof *w->gd);
    if (!w->mark || !w->touched || !w->nz || !w->nzn || !w->ez || !w->gl || !w->gd || !w->cand || !w->part || !w->part_mark || !w->cnt || !w->nodecnt || !w->rep || !w->L || !w->Z || !w->tok_head || !w->tok_list || !w->reach || !w->miss ||
        !w->stamp || !w->affected || !w->new_reach) {
        refine_work_destroy(w);
        return PL_ERR_NOMEM;
    }
    *out = w;
    return PL_OK;
}

void refine_work_destroy(refine_work *w) {
    if (!w) return;
    free(w->cnt);
    free(w->nodecnt);
    free(w->rep);
    free(w->L);
    free(w->Z);
    free(w->tok_head);
    free(w->tok_list);
    free(w->reach);
    free(w->miss);
    free(w->mark);
    free(w->touched);
    free(w->nz);
    free(w->nzn);
    free(w->stamp);
    free(w->affected);
    free(w->new_reach);
    free(w->ez);
    free(w->cand);
    free(w->part);
    free(w->part_mark);
    free(w->gl);
    free(w->gd);
    free(w);
}

typedef struct {
    int E, P, G, S, N, spn, H, T, K;
    const refine_opts *o;
    double a[REFINE_MAX_SCENARIOS];
    int32_t *slot;
} ctx;

/* The nodes holding e's replicas, from nodecnt (after e's counts change). */
static void refresh_nz(refine_work *w, const ctx *c, int e) {
    const int *nc = w->nodecnt + (size_t)e * c->N;
    int *z = w->nzn + (size_t)e * c->N, k = 0;
    for (int n = 0; n < c->N; n++)
        if (nc[n]) z[k++] = n;
    w->nz[e] = k;
}

static double token_reach(refine_work *w, const ctx *c, int t) {
    const int16_t *tk = c->o->samples + (size_t)t * c->K;
    int nt = 0;
    const int id = ++w->reach_id;
    for (int j = 0; j < c->K; j++) {
        const int e = tk[j];
        if (e < 0 || e >= c->E) continue;
        const int *nc = w->nodecnt + (size_t)e * c->N, *z = w->nzn + (size_t)e * c->N;
        const double inv = 1.0 / w->cnt[e];
        for (int i = 0; i < w->nz[e]; i++) {
            const int n = z[i];
            if (w->mark[n] != id) w->mark[n] = id, w->miss[n] = 1.0, w->touched[nt++] = n;
            w->miss[n] *= 1.0 - nc[n] * inv;
        }
    }
    double r = 0;
    for (int i = 0; i < nt; i++) r += 1.0 - w->miss[w->touched[i]];
    return r;
}

static double copies_of(const refine_work *w, const ctx *c, double reach_sum) {
    if (c->N < 2 || w->t_valid < 1) return 0.0;
    return (double)(c->N - 1) / c->N * reach_sum / w->t_valid;
}

/* The tokens of experts e1 and e2 (e2 may be -1) into w->affected; count returned. */
static int gather_tokens(refine_work *w, const ctx *c, int e1, int e2) {
    if (!c->o->samples || c->N < 2) return 0;
    w->stamp_id++;
    int na = 0;
    const int es[2] = {e1, e2};
    for (int i = 0; i < 2; i++) {
        const int e = es[i];
        if (e < 0) continue;
        for (int j = w->tok_head[e]; j < w->tok_head[e + 1]; j++) {
            const int t = w->tok_list[j];
            if (w->stamp[t] != w->stamp_id) w->stamp[t] = w->stamp_id, w->affected[na++] = t;
        }
    }
    return na;
}

/* Reach change of the affected tokens under the current (trial) counts. */
static double trial_reach_delta(refine_work *w, const ctx *c, int na) {
    double d = 0;
    for (int i = 0; i < na; i++) {
        const int t = w->affected[i];
        w->new_reach[i] = token_reach(w, c, t);
        d += w->new_reach[i] - w->reach[t];
    }
    return d;
}

static void commit_reach(refine_work *w, int na) {
    for (int i = 0; i < na; i++) {
        const int t = w->affected[i];
        w->reach_sum += w->new_reach[i] - w->reach[t];
        w->reach[t] = w->new_reach[i];
    }
}

static inline double zterm(const refine_work *w, int h, double L) { return exp(BETA * (L / w->mean[h] - w->x0[h])); }

/* Set GPU g's load in scenario h, keeping Z and the cached term. */
static inline void set_load(refine_work *w, const ctx *c, int h, int g, double v) {
    double *ez = w->ez + (size_t)h * c->G + g;
    const double nz = zterm(w, h, v);
    w->Z[h] += nz - *ez;
    *ez = nz;
    w->L[(size_t)h * c->G + g] = v;
}

static double f_true(const refine_work *w, const ctx *c, double *copies) {
    double f = 0;
    for (int h = 0; h < c->H; h++) {
        double mx = 0;
        for (int g = 0; g < c->G; g++)
            if (w->L[(size_t)h * c->G + g] > mx) mx = w->L[(size_t)h * c->G + g];
        f += c->a[h] * (w->mean[h] > 0 ? mx / w->mean[h] : 1.0);
    }
    const double cp = copies_of(w, c, w->reach_sum);
    if (copies) *copies = cp;
    return f + c->o->copies_weight * cp;
}

static int gpu_holds(const ctx *c, int g, int e) {
    const int32_t *s = c->slot + (size_t)g * c->S;
    for (int j = 0; j < c->S; j++)
        if (s[j] == e) return 1;
    return 0;
}

static void rep_remove(refine_work *w, int e, int slot) {
    int *r = w->rep + (size_t)e * w->cap_c;
    for (int i = 0; i < w->cnt[e]; i++)
        if (r[i] == slot) {
            r[i] = r[w->cnt[e] - 1];
            break;
        }
}

static pl_status setup(refine_work *w, ctx *c, const eplb_shape *s, const refine_opts *o, int32_t *slot) {
    c->E = s->n_experts, c->P = s->n_slots, c->G = s->n_gpus, c->S = s->n_slots / s->n_gpus;
    c->N = s->n_gpus / s->gpus_per_node, c->spn = c->S * s->gpus_per_node;
    c->H = o->n_scen, c->o = o, c->slot = slot;
    c->T = o->samples ? o->n_samples : 0, c->K = o->samples ? o->sample_k : 0;
    if (c->E > w->cap_e || c->P > w->cap_p || c->G > w->cap_g || c->T > w->cap_t || c->K > w->cap_k || c->H < 1 ||
        c->H > REFINE_MAX_SCENARIOS)
        return PL_ERR_INVALID;
    double asum = 0;
    for (int h = 0; h < c->H; h++) asum += (c->a[h] = o->scen_weight[h] > 0 ? o->scen_weight[h] : 0);
    if (!(asum > 0)) c->a[0] = 1.0, asum = 1.0;
    for (int h = 0; h < c->H; h++) c->a[h] /= asum;
    memset(w->cnt, 0, (size_t)c->E * sizeof *w->cnt);
    memset(w->nodecnt, 0, (size_t)c->E * c->N * sizeof *w->nodecnt);
    for (int p = 0; p < c->P; p++) {
        const int e = slot[p];
        if (e < 0 || e >= c->E) return PL_ERR_INVALID;
        w->rep[(size_t)e * w->cap_c + w->cnt[e]++] = p;
        w->nodecnt[(size_t)e * c->N + p / c->spn]++;
    }
    for (int e = 0; e < c->E; e++) refresh_nz(w, c, e);
    for (int h = 0; h < c->H; h++) {
        const double *ld = o->scen[h];
        double tot = 0, mx = 0;
        for (int e = 0; e < c->E; e++) {
            if (!w->cnt[e] && ld[e] > 0) return PL_ERR_INVALID;
            tot += ld[e];
        }
        double *L = w->L + (size_t)h * c->G;
        for (int g = 0; g < c->G; g++) {
            double v = 0;
            for (int j = 0; j < c->S; j++) {
                const int e = slot[g * c->S + j];
                v += ld[e] / w->cnt[e];
            }
            L[g] = v;
            if (v > mx) mx = v;
        }
        w->mean[h] = tot > 0 ? tot / c->G : 1.0;
        w->x0[h] = mx / w->mean[h];
        double z = 0;
        for (int g = 0; g < c->G; g++) z += (w->ez[(size_t)h * c->G + g] = zterm(w, h, L[g]));
        w->Z[h] = z;
    }
    /* tokens */
    w->reach_sum = 0;
    w->t_valid = 0;
    w->max_gain = 0;
    if (c->T > 0 && c->N > 1) {
        /* the inverse index depends on the samples alone: kept while the caller scores the same layer */
        const int same = w->idx_samples == o->samples && w->idx_T == c->T && w->idx_K == c->K && w->idx_E == c->E;
        if (!same) {
            memset(w->tok_head, 0, (size_t)(c->E + 1) * sizeof *w->tok_head);
            for (int t = 0; t < c->T; t++)
                for (int j = 0; j < c->K; j++) {
                    const int e = o->samples[(size_t)t * c->K + j];
                    if (e >= 0 && e < c->E) w->tok_head[e + 1]++;
                }
            for (int e = 0; e < c->E; e++) w->tok_head[e + 1] += w->tok_head[e];
            int *cur = malloc((size_t)c->E * sizeof *cur);
            if (!cur) return PL_ERR_NOMEM;
            memcpy(cur, w->tok_head, (size_t)c->E * sizeof *cur);
            for (int t = 0; t < c->T; t++)
                for (int j = 0; j < c->K; j++) {
                    const int e = o->samples[(size_t)t * c->K + j];
                    if (e >= 0 && e < c->E) w->tok_list[cur[e]++] = t;
                }
            free(cur);
            w->idx_samples = o->samples, w->idx_T = c->T, w->idx_K = c->K, w->idx_E = c->E;
        }
        for (int t = 0; t < c->T; t++) {
            int any = 0;
            for (int j = 0; j < c->K; j++) {
                const int e = o->samples[(size_t)t * c->K + j];
                if (e >= 0 && e < c->E) any = 1;
            }
            w->reach[t] = any ? token_reach(w, c, t) : 0.0;
            w->reach_sum += w->reach[t];
            w->t_valid += any;
        }
        int mt = 0;
        for (int e = 0; e < c->E; e++)
            if (w->tok_head[e + 1] - w->tok_head[e] > mt) mt = w->tok_head[e + 1] - w->tok_head[e];
        /* a move changes the reach of the tokens of two experts, each by at most 2 nodes */
        if (w->t_valid > 0) w->max_gain = 4.0 * mt / w->t_valid;
    }
    return PL_OK;
}

double experts_refine_objective(refine_work *wk, const eplb_shape *s, const refine_opts *o, const int32_t *phy2log,
                                double *copies) {
    ctx c;
    if (setup(wk, &c, s, o, (int32_t *)phy2log) != PL_OK) return INFINITY;
    return f_true(wk, &c, copies);
}

/* The change of the smooth max when slot s2 (its expert with two or more replicas) becomes a replica of
 * expert e: e's holders lose w_e / c_e - w_e / (c_e + 1) a replica, s2's GPU gains w_e / (c_e + 1) and
 * loses w_e2 / c2, e2's other holders gain w_e2 / (c2 - 1) - w_e2 / c2. */
static double replicate_df(refine_work *w, const ctx *c, int e, int s2) {
    const int e2 = c->slot[s2], d = s2 / c->S, ce = w->cnt[e], c2 = w->cnt[e2];
    const int *re = w->rep + (size_t)e * w->cap_c, *r2 = w->rep + (size_t)e2 * w->cap_c;
    double df = 0;
    for (int h = 0; h < c->H; h++) {
        const double *ld = c->o->scen[h];
        const double *L = w->L + (size_t)h * c->G, *ez = w->ez + (size_t)h * c->G;
        const double le = ld[e] / ce - ld[e] / (ce + 1), ge2 = ld[e2] / (c2 - 1) - ld[e2] / c2;
        int *gl = w->gl, ng = 0;
        double *gd = w->gd;
#define ADD_G(G_, D_)                                                                                                  \
    do {                                                                                                               \
        int k_ = 0;                                                                                                    \
        while (k_ < ng && gl[k_] != (G_)) k_++;                                                                        \
        if (k_ == ng) gl[ng] = (G_), gd[ng++] = 0;                                                                     \
        gd[k_] += (D_);                                                                                                \
    } while (0)
        for (int i = 0; i < ce; i++) ADD_G(re[i] / c->S, -le);
        ADD_G(d, ld[e] / (ce + 1) - ld[e2] / c2);
        for (int i = 0; i < c2; i++)
            if (r2[i] != s2) ADD_G(r2[i] / c->S, ge2);
#undef ADD_G
        double z = w->Z[h];
        for (int i = 0; i < ng; i++) z += zterm(w, h, L[gl[i]] + gd[i]) - ez[gl[i]];
        df += c->a[h] * (log(z > 1e-300 ? z : 1e-300) - log(w->Z[h])) / BETA;
    }
    return df;
}

/* The copies change of a move (kind 1: swap s1, s2; kind 2: s2 becomes a replica of s1's expert), tried on
 * the counts and undone. */
static double trial_copies(refine_work *w, const ctx *c, int kind, int s1, int s2, double copies_now) {
    const int N = c->N;
    if (kind == 1) {
        const int e1 = c->slot[s1], e2 = c->slot[s2], n1 = s1 / c->spn, n2 = s2 / c->spn;
        if (n1 == n2) return 0.0;
        int *a1 = w->nodecnt + (size_t)e1 * N, *a2 = w->nodecnt + (size_t)e2 * N;
        a1[n1]--, a1[n2]++, a2[n2]--, a2[n1]++;
        refresh_nz(w, c, e1), refresh_nz(w, c, e2);
        const int na = gather_tokens(w, c, e1, e2);
        const double dr = trial_reach_delta(w, c, na);
        a1[n1]++, a1[n2]--, a2[n2]++, a2[n1]--;
        refresh_nz(w, c, e1), refresh_nz(w, c, e2);
        return copies_of(w, c, w->reach_sum + dr) - copies_now;
    }
    const int e = c->slot[s1], e2 = c->slot[s2], nd = s2 / c->spn;
    w->cnt[e]++, w->cnt[e2]--;
    w->nodecnt[(size_t)e * N + nd]++, w->nodecnt[(size_t)e2 * N + nd]--;
    refresh_nz(w, c, e), refresh_nz(w, c, e2);
    const int na = gather_tokens(w, c, e, e2);
    const double dr = trial_reach_delta(w, c, na);
    w->cnt[e]--, w->cnt[e2]++;
    w->nodecnt[(size_t)e * N + nd]--, w->nodecnt[(size_t)e2 * N + nd]++;
    refresh_nz(w, c, e), refresh_nz(w, c, e2);
    return copies_of(w, c, w->reach_sum + dr) - copies_now;
}

/* Best-improvement descent from the state set up in w / c, until no move improves, max_moves moves or the
 * time budget; returns the moves taken. */
static int descend(refine_work *w, ctx *cc, const refine_opts *o, double t0) {
    ctx c = *cc;
    const double lam = o->copies_weight, cap = o->copies_cap;
    const int use_copies = c.T > 0 && c.N > 1 && (lam > 0 || isfinite(cap));
    int moves = 0;
    for (;;) {
        if (o->max_moves > 0 && moves >= o->max_moves) break;
        if (o->time_budget_us > 0 && pl_now_us() - t0 > o->time_budget_us) break;
        /* the busiest GPU of scenario 0 */
        const double *L0 = w->L;
        int a = 0;
        for (int g = 1; g < c.G; g++)
            if (L0[g] > L0[a]) a = g;
        const double copies_now = use_copies ? copies_of(w, &c, w->reach_sum) : 0.0;
        /* candidates, judged on balance alone first (cheap), the copies of the most promising after */
        int nc = 0;
        /* swap partners: the GPUs of a's node and the lightest GPUs of scenario 0 */
        int np_ = 0;
        for (int g = 0; g < c.G; g++) w->part_mark[g] = 0;
        const int na0 = (a * c.S) / c.spn;
        for (int g = 0; g < c.G; g++)
            if ((g * c.S) / c.spn == na0 && g != a) w->part[np_++] = g, w->part_mark[g] = 1;
        for (int r = 0; r < REFINE_LIGHTEST && r < c.G; r++) {
            int lg = -1;
            for (int g = 0; g < c.G; g++)
                if (!w->part_mark[g] && g != a && (lg < 0 || L0[g] < L0[lg])) lg = g;
            if (lg < 0) break;
            w->part[np_++] = lg, w->part_mark[lg] = 1;
        }
        for (int j1 = 0; j1 < c.S; j1++) {
            const int s1 = a * c.S + j1, e1 = c.slot[s1];
            for (int pi = 0; pi < np_; pi++) {
                const int b = w->part[pi];
                for (int j2 = 0; j2 < c.S; j2++) {
                    const int s2 = b * c.S + j2, e2 = c.slot[s2];
                    if (e2 == e1) continue;
                    /* scenario 0 filter: the swap must take load off a and leave b below a's load */
                    const double d0 = o->scen[0][e2] / w->cnt[e2] - o->scen[0][e1] / w->cnt[e1];
                    if (d0 >= 0 || L0[b] - d0 >= L0[a]) continue;
                    double df = 0;
                    for (int h = 0; h < c.H; h++) {
                        const double *ld = o->scen[h];
                        const double d = ld[e2] / w->cnt[e2] - ld[e1] / w->cnt[e1];
                        const double *L = w->L + (size_t)h * c.G, *ez = w->ez + (size_t)h * c.G;
                        const double z = w->Z[h] - ez[a] - ez[b] + zterm(w, h, L[a] + d) + zterm(w, h, L[b] - d);
                        df += c.a[h] * (log(z > 1e-300 ? z : 1e-300) - log(w->Z[h])) / BETA;
                    }
                    if (df >= -1e-12 && lam == 0) continue;
                    if (gpu_holds(&c, b, e1) || gpu_holds(&c, a, e2)) continue;
                    if (nc < REFINE_MAX_CAND) w->cand[nc++] = (cand){df, s1, s2, 1};
                }
            }
        }
        /* replicate: a slot of an expert with >= 2 replicas becomes a replica of an expert on a */
        if (o->replicate) {
            /* donors: the slots of replicated experts with the lightest replicas */
            int nd_ = 0;
            for (int s2 = 0; s2 < c.P; s2++) {
                const int e2 = c.slot[s2];
                if (w->cnt[e2] < 2) continue;
                const double v = o->scen[0][e2] / w->cnt[e2];
                int pos = nd_ < REFINE_DONORS ? nd_++ : REFINE_DONORS;
                if (pos == REFINE_DONORS) {
                    if (v >= w->donor_v[REFINE_DONORS - 1]) continue;
                    pos = REFINE_DONORS - 1;
                }
                while (pos > 0 && w->donor_v[pos - 1] > v) w->donor_v[pos] = w->donor_v[pos - 1], w->donor[pos] = w->donor[pos - 1], pos--;
                w->donor_v[pos] = v, w->donor[pos] = s2;
            }
            /* (a) an expert on a gets another replica, taken from a donor slot elsewhere */
            for (int j1 = 0; j1 < c.S; j1++) {
                const int e = c.slot[a * c.S + j1];
                if (w->cnt[e] >= w->cap_c) continue;
                for (int di = 0; di < nd_; di++) {
                    const int s2 = w->donor[di];
                    const int e2 = c.slot[s2], d = s2 / c.S;
                    if (e2 == e || w->cnt[e2] < 2 || gpu_holds(&c, d, e)) continue;
                    /* scenario 0 filter: the donor GPU must stay below a's load */
                    if (L0[d] + o->scen[0][e] / (w->cnt[e] + 1) - o->scen[0][e2] / w->cnt[e2] >= L0[a]) continue;
                    const double df = replicate_df(w, &c, e, s2);
                    if (df >= -1e-12 && lam == 0) continue;
                    if (nc < REFINE_MAX_CAND) w->cand[nc++] = (cand){df, a * c.S + j1, s2, 2};
                }
            }
            /* (b) a replica on a (of an expert with two or more) becomes a replica of a light expert: the
             * candidates are the experts whose replicas would be lightest with one more */
            int nl_ = 0;
            for (int x = 0; x < c.P; x++) {
                const int e = c.slot[x];
                if (w->cnt[e] >= w->cap_c || gpu_holds(&c, a, e)) continue;
                int dup = 0;
                for (int i = 0; i < nl_; i++)
                    if (c.slot[w->light[i]] == e) dup = 1;
                if (dup) continue;
                const double v = o->scen[0][e] / (w->cnt[e] + 1);
                int pos = nl_ < REFINE_DONORS ? nl_++ : REFINE_DONORS;
                if (pos == REFINE_DONORS) {
                    if (v >= w->light_v[REFINE_DONORS - 1]) continue;
                    pos = REFINE_DONORS - 1;
                }
                while (pos > 0 && w->light_v[pos - 1] > v) w->light_v[pos] = w->light_v[pos - 1], w->light[pos] = w->light[pos - 1], pos--;
                w->light_v[pos] = v, w->light[pos] = x;
            }
            for (int j1 = 0; j1 < c.S; j1++) {
                const int s2 = a * c.S + j1, e2 = c.slot[s2];
                if (w->cnt[e2] < 2) continue;
                for (int li = 0; li < nl_; li++) {
                    const int x = w->light[li], e = c.slot[x];
                    if (e == e2) continue;
                    if (o->scen[0][e] / (w->cnt[e] + 1) - o->scen[0][e2] / w->cnt[e2] >= 0) continue; /* a must lose */
                    const double df = replicate_df(w, &c, e, s2);
                    if (df >= -1e-12 && lam == 0) continue;
                    if (nc < REFINE_MAX_CAND) w->cand[nc++] = (cand){df, x, s2, 2};
                }
            }
        }
        /* best first on balance; the copies (when they count) of up to REFINE_COPIES_EVAL of them */
        qsort(w->cand, (size_t)nc, sizeof *w->cand, cand_cmp);
        double best = -1e-12;
        int kind = 0, b_s1 = -1, b_s2 = -1, evals = 0;
        for (int i = 0; i < nc; i++) {
            const cand *cd = &w->cand[i];
            if (cd->df >= best + (use_copies && lam > 0 ? lam * w->max_gain : 0.0)) break; /* nothing further can win */
            double dcp = 0;
            if (use_copies) {
                if (evals >= (kind ? REFINE_COPIES_EVAL : 2 * REFINE_COPIES_EVAL)) break;
                dcp = trial_copies(w, &c, cd->kind, cd->s1, cd->s2, copies_now);
                evals++;
                if (copies_now + dcp > cap + 1e-12 && dcp > 0) continue;
            }
            if (cd->df + lam * dcp < best) best = cd->df + lam * dcp, kind = cd->kind, b_s1 = cd->s1, b_s2 = cd->s2;
        }
        if (!kind) break;
        /* commit */
        if (kind == 1) {
            const int s1 = b_s1, s2 = b_s2, e1 = c.slot[s1], e2 = c.slot[s2], ga = s1 / c.S, gb = s2 / c.S;
            const int n1 = s1 / c.spn, n2 = s2 / c.spn;
            for (int h = 0; h < c.H; h++) {
                const double *ld = o->scen[h];
                const double *L = w->L + (size_t)h * c.G;
                const double d = ld[e2] / w->cnt[e2] - ld[e1] / w->cnt[e1];
                set_load(w, &c, h, ga, L[ga] + d);
                set_load(w, &c, h, gb, L[gb] - d);
            }
            rep_remove(w, e1, s1);
            w->rep[(size_t)e1 * w->cap_c + w->cnt[e1] - 1] = s2;
            rep_remove(w, e2, s2);
            w->rep[(size_t)e2 * w->cap_c + w->cnt[e2] - 1] = s1;
            c.slot[s1] = e2, c.slot[s2] = e1;
            if (n1 != n2) {
                w->nodecnt[(size_t)e1 * c.N + n1]--, w->nodecnt[(size_t)e1 * c.N + n2]++;
                w->nodecnt[(size_t)e2 * c.N + n2]--, w->nodecnt[(size_t)e2 * c.N + n1]++;
                refresh_nz(w, &c, e1), refresh_nz(w, &c, e2);
                if (c.T > 0 && c.N > 1) {
                    const int na = gather_tokens(w, &c, e1, e2);
                    trial_reach_delta(w, &c, na);
                    commit_reach(w, na);
                }
            }
        } else {
            const int e = c.slot[b_s1], s2 = b_s2, e2 = c.slot[s2], d = s2 / c.S, nd = s2 / c.spn;
            const int ce = w->cnt[e], c2 = w->cnt[e2];
            for (int h = 0; h < c.H; h++) {
                const double *ld = o->scen[h];
                const double *L = w->L + (size_t)h * c.G;
                const double le = ld[e] / ce - ld[e] / (ce + 1), ge2 = ld[e2] / (c2 - 1) - ld[e2] / c2;
                const int *re = w->rep + (size_t)e * w->cap_c, *r2 = w->rep + (size_t)e2 * w->cap_c;
                for (int i = 0; i < ce; i++) {
                    const int g = re[i] / c.S;
                    set_load(w, &c, h, g, L[g] - le);
                }
                for (int i = 0; i < c2; i++) {
                    if (r2[i] == s2) continue;
                    const int g = r2[i] / c.S;
                    set_load(w, &c, h, g, L[g] + ge2);
                }
                const double dd = ld[e] / (ce + 1) - ld[e2] / c2;
                set_load(w, &c, h, d, L[d] + dd);
            }
            rep_remove(w, e2, s2);
            w->cnt[e2]--;
            w->rep[(size_t)e * w->cap_c + w->cnt[e]++] = s2;
            c.slot[s2] = e;
            w->nodecnt[(size_t)e * c.N + nd]++, w->nodecnt[(size_t)e2 * c.N + nd]--;
            refresh_nz(w, &c, e), refresh_nz(w, &c, e2);
            if (c.T > 0 && c.N > 1) {
                const int na = gather_tokens(w, &c, e, e2);
                trial_reach_delta(w, &c, na);
                commit_reach(w, na);
            }
        }
        moves++;
        /* keep the sums from drifting: recompute Z now and then */
        if (moves % 64 == 0)
            for (int h = 0; h < c.H; h++) {
                double z = 0;
                for (int g = 0; g < c.G; g++) z += w->ez[(size_t)h * c.G + g];
                w->Z[h] = z;
            }
    }
    return moves;
}

pl_status experts_refine(refine_work *wk, const eplb_shape *s, const refine_opts *o, int32_t *phy2log,
                         refine_stats *stats) {
    if (!wk || !s || !o || !phy2log || !(o->copies_weight >= 0) || o->kicks < 0) return PL_ERR_INVALID;
    ctx c;
    pl_status st = setup(wk, &c, s, o, phy2log);
    if (st != PL_OK) return st;
    refine_work *w = wk;
    const double t0 = pl_now_us();
    double cp0 = 0;
    const double f0 = f_true(w, &c, &cp0);
    int moves = descend(w, &c, o, t0);
    if (o->kicks > 0) {
        /* iterated local search: kick the best placement so far (a random swap or replica move, from a fixed
         * seed), descend again, keep the result when it is better within the cap */
        int32_t *best = malloc((size_t)c.P * sizeof *best);
        if (!best) return PL_ERR_NOMEM;
        double cb = 0;
        double fb = f_true(w, &c, &cb);
        memcpy(best, phy2log, (size_t)c.P * sizeof *best);
        pl_rng rng;
        pl_rng_seed(&rng, 0x6b69636bULL);
        for (int k = 0; k < o->kicks; k++) {
            if (o->time_budget_us > 0 && pl_now_us() - t0 > o->time_budget_us) break;
            memcpy(phy2log, best, (size_t)c.P * sizeof *best);
            int cnt[EXPERTS_KICK_MAX_E];
            const int small = c.E <= EXPERTS_KICK_MAX_E;
            if (small) {
                memset(cnt, 0, sizeof(int) * (size_t)c.E);
                for (int i = 0; i < c.P; i++) cnt[phy2log[i]]++;
            }
            const int x = pl_rng_int(&rng, c.P), y = pl_rng_int(&rng, c.P);
            if (small && o->replicate && (k & 1) && cnt[phy2log[x]] >= 2) {
                phy2log[x] = phy2log[y]; /* x's replica goes to y's expert */
            } else if (x / c.S != y / c.S) {
                const int32_t t = phy2log[x];
                phy2log[x] = phy2log[y], phy2log[y] = t;
            } else {
                continue;
            }
            if ((st = setup(w, &c, s, o, phy2log)) != PL_OK) break;
            moves += 1 + descend(w, &c, o, t0);
            double ck = 0;
            const double fk = f_true(w, &c, &ck);
            if (fk < fb - 1e-12 && (ck <= o->copies_cap + 1e-12 || ck <= cb)) {
                fb = fk, cb = ck;
                memcpy(best, phy2log, (size_t)c.P * sizeof *best);
            }
        }
        memcpy(phy2log, best, (size_t)c.P * sizeof *best);
        free(best);
        if (st == PL_OK) st = setup(w, &c, s, o, phy2log);
        if (st != PL_OK) return st;
    }
    if (stats) {
        stats->moves = moves;
        stats->f_start = f0;
        stats->f_end = f_true(w, &c, &stats->copies_end);
    }
    return PL_OK;
}
