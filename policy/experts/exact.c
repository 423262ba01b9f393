/*
 * exact.c: the mixed-integer program of one small layer's placement (GLPK)
 * and the lower bounds (exact.h).
 */
#include "exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placer_config.h"
#include "util.h"

#if PLACER_HAVE_GLPK
#include <glpk.h>
#endif

double experts_lower_bound(const eplb_shape *s, const double *w) {
    const int E = s->n_experts, P = s->n_slots, G = s->n_gpus, S = P / G;
    double tot = 0;
    for (int e = 0; e < E; e++) tot += w[e];
    double lb = tot / G;
    /* replica bound: greedy replication minimises the largest per-replica load */
    int *cnt = malloc((size_t)E * sizeof *cnt);
    double *v = malloc((size_t)E * sizeof *v);
    if (!cnt || !v) {
        free(cnt);
        free(v);
        return lb;
    }
    for (int e = 0; e < E; e++) cnt[e] = 1;
    for (int i = E; i < P; i++) {
        int b = 0;
        for (int e = 1; e < E; e++)
            if (w[e] / cnt[e] > w[b] / cnt[b]) b = e;
        cnt[b]++;
    }
    double r = 0;
    for (int e = 0; e < E; e++)
        if (w[e] / cnt[e] > r) r = w[e] / cnt[e];
    if (r > lb) lb = r;
    if (P == E && S > 1) {
        /* pigeonhole over the heaviest experts */
        for (int e = 0; e < E; e++) v[e] = w[e];
        for (int i = 1; i < E; i++) { /* sort descending */
            const double x = v[i];
            int j = i;
            while (j > 0 && v[j - 1] < x) v[j] = v[j - 1], j--;
            v[j] = x;
        }
        for (int j = 1; j < S; j++) {
            const int top = j * G + 1;
            if (top > E) break;
            double sum = 0;
            for (int i = top - 1 - j; i < top; i++) sum += v[i];
            if (sum > lb) lb = sum;
        }
    }
    free(cnt);
    free(v);
    return lb;
}

#if PLACER_HAVE_GLPK
int experts_exact_available(void) { return 1; }

#define EXACT_MAX_PATTERNS 150000
#define EXACT_MAX_ITEMS 2048
#define EXACT_GAP 1e-3 /* proven optimal to 0.1%: loads closer than that are not told apart */

/* One GPU's content: S items, each an (expert, replica count) pair. */
typedef struct {
    int n_items;       /* item types */
    int *ie, *ic;      /* [n_items] expert and count of each item */
    double *iv;        /* [n_items] its per-replica load w_e / c */
    int S;
    int np, cap;
    int *pat;          /* [cap][S] item ids, ascending */
    double *load;      /* [cap] */
} patterns;

static int pat_push(patterns *p, const int *items, double load) {
    if (p->np == p->cap) {
        if (p->cap >= EXACT_MAX_PATTERNS) return -1;
        const int nc = p->cap ? 2 * p->cap : 1024;
        int *np_ = realloc(p->pat, (size_t)nc * p->S * sizeof *np_);
        if (!np_) return -2;
        p->pat = np_;
        double *nl = realloc(p->load, (size_t)nc * sizeof *nl);
        if (!nl) return -2;
        p->load = nl;
        p->cap = nc;
    }
    memcpy(p->pat + (size_t)p->np * p->S, items, (size_t)p->S * sizeof *items);
    p->load[p->np++] = load;
    return 0;
}

/* Every multiset of S items (ascending ids) of load <= ub, no expert at two counts, an item at most c times. */
static int enumerate(patterns *p, int *cur, int depth, int from, double load, double ub) {
    if (depth == p->S) return pat_push(p, cur, load);
    for (int i = from; i < p->n_items; i++) {
        const double nl = load + p->iv[i];
        if (nl > ub * (1 + 1e-12)) continue;
        int ok = 1, same = 0;
        for (int j = 0; j < depth; j++) {
            if (p->ie[cur[j]] == p->ie[i] && p->ic[cur[j]] != p->ic[i]) ok = 0;
            if (cur[j] == i) same++;
        }
        if (!ok || same + 1 > p->ic[i]) continue;
        cur[depth] = i;
        const int r = enumerate(p, cur, depth + 1, i, nl, ub);
        if (r) return r;
    }
    return 0;
}

/* Is there a placement using only patterns 0..n_use-1 (sorted by load)? On success the GPUs' patterns into gp[G]. */
static int feasible(const patterns *p, const int *order, int n_use, int E, int G, double time_limit_s, int *gp,
                    int *timed_out) {
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    const int ni = p->n_items;
    glp_add_cols(lp, n_use + ni);
    for (int j = 0; j < n_use; j++) {
        glp_set_col_kind(lp, 1 + j, GLP_IV);
        glp_set_col_bnds(lp, 1 + j, GLP_DB, 0.0, (double)G);
    }
    for (int i = 0; i < ni; i++) glp_set_col_kind(lp, 1 + n_use + i, GLP_BV); /* y of item i: its expert has that count */
    const size_t cap = (size_t)n_use * (p->S + 1) + 2 * (size_t)ni + 16;
    int *ia = malloc((cap + 1) * sizeof *ia), *ja = malloc((cap + 1) * sizeof *ja);
    double *ar = malloc((cap + 1) * sizeof *ar);
    int *rowof = malloc((size_t)ni * sizeof *rowof);
    if (!ia || !ja || !ar || !rowof) {
        free(ia), free(ja), free(ar), free(rowof);
        glp_delete_prob(lp);
        return -1;
    }
    int k = 0;
    int row = glp_add_rows(lp, 1); /* G GPUs */
    glp_set_row_bnds(lp, row, GLP_FX, (double)G, (double)G);
    for (int j = 0; j < n_use; j++) ia[++k] = row, ja[k] = 1 + j, ar[k] = 1.0;
    for (int e = 0; e < E; e++) { /* one count per expert */
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_FX, 1.0, 1.0);
        for (int i = 0; i < ni; i++)
            if (p->ie[i] == e) ia[++k] = row, ja[k] = 1 + n_use + i, ar[k] = 1.0;
    }
    for (int i = 0; i < ni; i++) { /* the patterns hold c replicas of the chosen count's expert */
        rowof[i] = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, rowof[i], GLP_FX, 0.0, 0.0);
        ia[++k] = rowof[i], ja[k] = 1 + n_use + i, ar[k] = -(double)p->ic[i];
    }
    for (int j = 0; j < n_use; j++) {
        const int *pt = p->pat + (size_t)order[j] * p->S;
        for (int a = 0; a < p->S;) {
            int b = a;
            while (b < p->S && pt[b] == pt[a]) b++;
            ia[++k] = rowof[pt[a]], ja[k] = 1 + j, ar[k] = (double)(b - a);
            a = b;
        }
    }
    glp_load_matrix(lp, k, ia, ja, ar);
    free(ia), free(ja), free(ar), free(rowof);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = (int)(time_limit_s * 1000.0) > 1 ? (int)(time_limit_s * 1000.0) : 1;
    parm.fp_heur = GLP_ON;
    parm.mir_cuts = GLP_ON;
    const int ret = glp_intopt(lp, &parm);
    const int mst = glp_mip_status(lp);
    int res = 0;
    if (mst == GLP_OPT || mst == GLP_FEAS) {
        int g = 0;
        for (int j = 0; j < n_use && g <= G; j++) {
            const int n = (int)llround(glp_mip_col_val(lp, 1 + j));
            for (int r = 0; r < n && g < G; r++) gp[g++] = order[j];
        }
        res = g == G ? 1 : 0;
    }
    *timed_out = ret == GLP_ETMLIM && mst != GLP_OPT && mst != GLP_FEAS;
    glp_delete_prob(lp);
    return res;
}

static const double *sort_key;
static int by_load(const void *a, const void *b) {
    const double x = sort_key[*(const int *)a], y = sort_key[*(const int *)b];
    return (x > y) - (x < y);
}

pl_status experts_exact(const eplb_shape *s, const double *w, double time_limit_s, int32_t *phy2log,
                        double *busiest, double *bound, int *proven, char *msg, size_t len) {
    const int E = s->n_experts, P = s->n_slots, G = s->n_gpus;
    if (E < 1 || G < 1 || P < E || P % G) return pl_fail(msg, len, PL_ERR_INVALID, "bad shape for the exact program");
    const int S = P / G;
    if (time_limit_s <= 0) time_limit_s = 60;
    /* an upper bound: EPLB's global policy */
    eplb_work *wk = NULL;
    if (eplb_work_create(s, &wk) != PL_OK) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    int32_t *best = malloc((size_t)P * sizeof *best);
    int *cmin = malloc((size_t)E * sizeof *cmin);
    patterns pt = {0};
    pt.S = S;
    pl_status st = PL_OK;
    if (!best || !cmin) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    eplb_global(wk, s, w, best, NULL);
    double ub = 0;
    {
        int *cnt = calloc((size_t)E, sizeof *cnt);
        if (!cnt) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < P; i++) cnt[best[i]]++;
        for (int g = 0; g < G; g++) {
            double v = 0;
            for (int j = 0; j < S; j++) v += w[best[g * S + j]] / cnt[best[g * S + j]];
            if (v > ub) ub = v;
        }
        free(cnt);
    }
    const double lb = experts_lower_bound(s, w);
    /* the items: counts from ceil(w / ub) up to what the other experts' least counts leave */
    int sum_min = 0;
    for (int e = 0; e < E; e++) {
        int c = ub > 0 ? (int)ceil(w[e] / ub - 1e-9) : 1;
        if (c < 1) c = 1;
        cmin[e] = c;
        sum_min += c;
    }
    int n_items = 0;
    for (int e = 0; e < E; e++) n_items += P - sum_min + 1;
    if (n_items > EXACT_MAX_ITEMS) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "%d experts with %d spare slots is too big for the exact program", E, P - E);
        goto out;
    }
    pt.ie = malloc((size_t)n_items * sizeof *pt.ie);
    pt.ic = malloc((size_t)n_items * sizeof *pt.ic);
    pt.iv = malloc((size_t)n_items * sizeof *pt.iv);
    if (!pt.ie || !pt.ic || !pt.iv) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int e = 0; e < E; e++)
        for (int c = cmin[e]; c <= cmin[e] + (P - sum_min); c++) {
            if (c > G * S) break;
            pt.ie[pt.n_items] = e, pt.ic[pt.n_items] = c, pt.iv[pt.n_items] = w[e] / c;
            pt.n_items++;
        }
    int cur[64];
    if (S > 64) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "%d slots a GPU is too many for the exact program", S);
        goto out;
    }
    const int er = enumerate(&pt, cur, 0, 0, 0.0, ub);
    if (er == -1) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "more than %d GPU patterns: too big for the exact program", EXACT_MAX_PATTERNS);
        goto out;
    }
    if (er == -2) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory enumerating patterns");
        goto out;
    }
    {
        int *order = malloc((size_t)pt.np * sizeof *order), *gp = malloc((size_t)G * sizeof *gp);
        int *gbest = malloc((size_t)G * sizeof *gbest);
        if (!order || !gp || !gbest) {
            free(order), free(gp), free(gbest);
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int i = 0; i < pt.np; i++) order[i] = i;
        sort_key = pt.load;
        qsort(order, (size_t)pt.np, sizeof *order, by_load);
        /* binary search for the fewest patterns (by load) that still place the layer */
        int lo = 0, hi = pt.np; /* hi: feasible (EPLB's placement uses only patterns of load <= ub) */
        while (lo < hi && pt.load[order[lo]] < lb * (1 - 1e-12)) lo++;
        int have = 0, timed = 0;
        double floor_load = lb; /* the optimum is at least this: the bound, then the loads proven infeasible */
        /* each probe may take a third of the time left; the search stops at the deadline */
        const double t_start = pl_now_us();
        double t_each = time_limit_s / 3.0;
        while (lo < hi) {
            const double left = time_limit_s - (pl_now_us() - t_start) / 1e6;
            if (left <= 0.002) {
                timed = 1;
                break;
            }
            t_each = left / 3.0 > 0.002 ? left / 3.0 : 0.002;
            /* within EXACT_GAP of what is proven below: stop (the placement in hand is optimal to that gap) */
            if (pt.load[order[hi < pt.np ? hi : pt.np - 1]] <= floor_load * (1 + EXACT_GAP)) break;
            int mid = lo + (hi - lo) / 2; /* use every pattern of load <= that of order[mid] */
            while (mid + 1 < pt.np && pt.load[order[mid + 1]] == pt.load[order[mid]]) mid++;
            if (mid >= hi) mid = hi - 1;
            int to = 0;
            const int f = feasible(&pt, order, mid + 1, E, G, t_each, gp, &to);
            if (f < 0) {
                st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory building the exact program");
                break;
            }
            if (to) timed = 1;
            if (f == 1) {
                hi = mid;
                memcpy(gbest, gp, (size_t)G * sizeof *gp);
                have = 1;
            } else {
                lo = mid + 1;
                if (!to && pt.load[order[mid]] > floor_load) floor_load = pt.load[order[mid]];
            }
        }
        if (st == PL_OK) {
            if (!have) { /* the last feasible set is the full list: solve it once to read a placement */
                int to = 0;
                if (feasible(&pt, order, pt.np, E, G, t_each, gp, &to) == 1) memcpy(gbest, gp, (size_t)G * sizeof *gp), have = 1;
            }
            if (have) {
                for (int g = 0; g < G; g++)
                    for (int j = 0; j < S; j++) best[g * S + j] = pt.ie[pt.pat[(size_t)gbest[g] * S + j]];
            }
            double mx = 0;
            int *cnt = calloc((size_t)E, sizeof *cnt);
            if (cnt) {
                for (int i = 0; i < P; i++) cnt[best[i]]++;
                for (int g = 0; g < G; g++) {
                    double v = 0;
                    for (int j = 0; j < S; j++) v += w[best[g * S + j]] / cnt[best[g * S + j]];
                    if (v > mx) mx = v;
                }
            }
            free(cnt);
            memcpy(phy2log, best, (size_t)P * sizeof *best);
            if (busiest) *busiest = mx;
            if (proven) *proven = !timed || mx <= floor_load * (1 + EXACT_GAP);
            if (bound) *bound = floor_load < mx ? floor_load : mx;
        }
        free(order), free(gp), free(gbest);
    }
out:
    eplb_work_destroy(wk);
    free(best);
    free(cmin);
    free(pt.ie), free(pt.ic), free(pt.iv), free(pt.pat), free(pt.load);
    return st;
}
#else
int experts_exact_available(void) { return 0; }

pl_status experts_exact(const eplb_shape *s, const double *w, double time_limit_s, int32_t *phy2log,
                        double *busiest, double *bound, int *proven, char *msg, size_t len) {
    (void)s, (void)w, (void)time_limit_s, (void)phy2log, (void)busiest, (void)bound, (void)proven;
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the exact program needs GLPK (libglpk-dev) at build time");
}
#endif
