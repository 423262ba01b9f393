/*
 * experts.c: planning every MoE layer's expert placement with one of the
 * placers of experts.h, and the relabelling that keeps a re-plan's slots in
 * place.
 */
#include "experts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exact.h"
#include "refine.h"
#include "util.h"

static const char *const NAMES[EXPERTS_PLACER_COUNT] = {"contiguous", "round-robin", "eplb", "eplb-hierarchical",
                                                        "eplb-global", "eplb-swap", "search", "learned", "exact"};

const char *experts_placer_name(experts_placer p) {
    return p >= 0 && p < EXPERTS_PLACER_COUNT ? NAMES[p] : "unknown";
}

int experts_placer_parse(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < EXPERTS_PLACER_COUNT; i++)
        if (!strcmp(s, NAMES[i])) return i;
    return -1;
}

void experts_model_default(experts_model *m) {
    memset(m, 0, sizeof *m);
    m->w[0] = 1.0;
    m->scen_weight[0] = 1.0;
    m->copies_weight = 0.0;
    m->copies_margin = 0.03;
}

struct experts_planner {
    experts_options o;
    experts_model model;
    eplb_work *ew;
    refine_work *rw;
    double *plan;              /* [E] planning load */
    double *hist[EXPERTS_HISTORY]; /* [E] scenario loads */
    int32_t *a, *b, *c;        /* [P] candidate placements */
    int32_t *tmp;              /* [P] */
    int *ov;                   /* overlap scratch */
    int max_samples, max_k;
};

pl_status experts_planner_create(const experts_options *o, int max_samples, int max_k, experts_planner **out,
                                 char *msg, size_t len) {
    if (!o || !out) return pl_fail(msg, len, PL_ERR_INVALID, "experts_planner_create: no options or output");
    *out = NULL;
    const eplb_shape *s = &o->shape;
    pl_status st = expert_map_check_shape(1, s->n_experts, s->n_slots, s->n_gpus, s->gpus_per_node, msg, len);
    if (st != PL_OK) return st;
    if (s->n_groups > 1 && s->n_experts % s->n_groups)
        return pl_fail(msg, len, PL_ERR_INVALID, "%d groups do not divide %d experts", s->n_groups, s->n_experts);
    experts_planner *p = calloc(1, sizeof *p);
    if (!p) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for a planner");
    p->o = *o;
    if (o->model) p->model = *o->model;
    else experts_model_default(&p->model);
    p->o.model = NULL;
    if (!(p->o.time_budget_us > 0)) p->o.time_budget_us = 1500.0;
    if (!(p->o.exact_time_s > 0)) p->o.exact_time_s = 60.0;
    if (p->o.top_k < 1) p->o.top_k = 1;
    p->max_samples = max_samples;
    p->max_k = max_k;
    const int E = s->n_experts, P = s->n_slots;
    if (eplb_work_create(s, &p->ew) != PL_OK || refine_work_create(s, max_samples, max_k, &p->rw) != PL_OK) {
        experts_planner_destroy(p);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for a planner");
    }
    p->plan = malloc((size_t)E * sizeof *p->plan);
    for (int h = 0; h < EXPERTS_HISTORY; h++) p->hist[h] = malloc((size_t)E * sizeof *p->hist[h]);
    p->a = malloc((size_t)P * sizeof *p->a);
    p->b = malloc((size_t)P * sizeof *p->b);
    p->c = malloc((size_t)P * sizeof *p->c);
    p->tmp = malloc((size_t)P * sizeof *p->tmp);
    const int G = s->n_gpus;
    p->ov = malloc((size_t)G * G * sizeof *p->ov);
    int bad = !p->plan || !p->a || !p->b || !p->c || !p->tmp || !p->ov;
    for (int h = 0; h < EXPERTS_HISTORY; h++) bad |= !p->hist[h];
    if (bad) {
        experts_planner_destroy(p);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for a planner");
    }
    *out = p;
    return PL_OK;
}

void experts_planner_destroy(experts_planner *p) {
    if (!p) return;
    eplb_work_destroy(p->ew);
    refine_work_destroy(p->rw);
    free(p->plan);
    for (int h = 0; h < EXPERTS_HISTORY; h++) free(p->hist[h]);
    free(p->a);
    free(p->b);
    free(p->c);
    free(p->tmp);
    free(p->ov);
    free(p);
}

/* ---- the learned head's planning load ------------------------------------ */

void experts_planning_load(const experts_model *m, const expert_load *ld, int t, int l, int n_groups, double *plan) {
    const int E = ld->n_experts, G = n_groups > 1 ? n_groups : 1, per = E / G;
    double mean[EXPERTS_HISTORY];
    const double *row[EXPERTS_HISTORY];
    for (int h = 0; h < EXPERTS_HISTORY; h++) {
        const int w = t - h >= 0 ? t - h : 0;
        row[h] = expert_load_row_c(ld, w, l);
        double s = 0;
        for (int e = 0; e < E; e++) s += row[h][e];
        mean[h] = s > 0 ? s / E : 1.0;
    }
    for (int e = 0; e < E; e++) {
        double x[EXPERTS_HISTORY];
        for (int h = 0; h < EXPERTS_HISTORY; h++) x[h] = row[h][e] / mean[h];
        double ema = 0, wsum = 0, mx = 0, avg = 0;
        for (int h = 0; h < EXPERTS_HISTORY; h++) {
            const double a = pow(0.5, h + 1);
            ema += a * x[h], wsum += a;
            avg += x[h];
            if (x[h] > mx) mx = x[h];
        }
        double gm = 0;
        const int g0 = (e / per) * per;
        for (int j = 0; j < per; j++) gm += row[0][g0 + j] / mean[0];
        const double f[EXPERTS_FEATURES] = {x[0], x[1], ema / wsum, avg / EXPERTS_HISTORY, mx, gm / per,
                                            fabs(x[0] - x[1]), 1.0};
        double v = 0;
        for (int k = 0; k < EXPERTS_FEATURES; k++) v += m->w[k] * f[k];
        plan[e] = (v > 1e-3 ? v : 1e-3) * mean[0];
    }
}

/* ---- relabelling ---------------------------------------------------------- */

/* Slots two multisets of experts share (a, b of n entries each; b is sorted into tmp). */
static int shared(const int32_t *a, const int32_t *b, int n, int32_t *tmp) {
    memcpy(tmp, b, (size_t)n * sizeof *tmp);
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = k; j < n; j++)
            if (tmp[j] == a[i]) {
                const int32_t x = tmp[k];
                tmp[k] = tmp[j];
                tmp[j] = x;
                k++;
                break;
            }
    return k;
}

/* Greedy matching of n items to n targets on overlap ov[i][j]: map[i] = j. */
static void greedy_match(const int *ov, int n, int *map) {
    int used_i[1024], used_j[1024];
    for (int i = 0; i < n; i++) used_i[i] = used_j[i] = 0, map[i] = -1;
    for (int r = 0; r < n; r++) {
        int bi = -1, bj = -1, bv = -1;
        for (int i = 0; i < n; i++)
            if (!used_i[i])
                for (int j = 0; j < n; j++)
                    if (!used_j[j] && ov[i * n + j] > bv) bv = ov[i * n + j], bi = i, bj = j;
        map[bi] = bj;
        used_i[bi] = used_j[bj] = 1;
    }
}

void experts_relabel(const eplb_shape *s, const int32_t *prev, int32_t *cur) {
    const int G = s->n_gpus, S = s->n_slots / G, gpn = s->gpus_per_node, N = G / gpn, spn = S * gpn, P = s->n_slots;
    if (N > 1024 || gpn > 1024) return;
    int32_t *tmp = malloc((size_t)P * sizeof *tmp), *out = malloc((size_t)P * sizeof *out);
    int *ov = calloc((size_t)(N > gpn ? N : gpn) * (N > gpn ? N : gpn), sizeof *ov);
    int *nmap = malloc((size_t)N * sizeof *nmap), *gmap = malloc((size_t)gpn * sizeof *gmap);
    if (!tmp || !out || !ov || !nmap || !gmap) goto done;
    /* nodes */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) ov[i * N + j] = shared(cur + (size_t)i * spn, prev + (size_t)j * spn, spn, tmp);
    greedy_match(ov, N, nmap);
    for (int i = 0; i < N; i++) {
        const int j = nmap[i];
        const int32_t *cn = cur + (size_t)i * spn, *pn = prev + (size_t)j * spn;
        /* GPUs inside */
        for (int a = 0; a < gpn; a++)
            for (int b = 0; b < gpn; b++) ov[a * gpn + b] = shared(cn + (size_t)a * S, pn + (size_t)b * S, S, tmp);
        greedy_match(ov, gpn, gmap);
        for (int a = 0; a < gpn; a++) {
            const int b = gmap[a];
            const int32_t *cg = cn + (size_t)a * S, *pg = pn + (size_t)b * S;
            int32_t *og = out + (size_t)j * spn + (size_t)b * S;
            /* slots: an expert the previous GPU had keeps its position */
            int taken[256] = {0};
            int placed[256] = {0};
            if (S > 256) {
                memcpy(og, cg, (size_t)S * sizeof *og);
                continue;
            }
            for (int x = 0; x < S; x++) og[x] = -1;
            for (int x = 0; x < S; x++)
                for (int y = 0; y < S; y++)
                    if (!taken[y] && !placed[x] && pg[y] == cg[x]) {
                        og[y] = cg[x];
                        taken[y] = placed[x] = 1;
                        break;
                    }
            int y = 0;
            for (int x = 0; x < S; x++) {
                if (placed[x]) continue;
                while (y < S && og[y] >= 0) y++;
                og[y] = cg[x];
            }
        }
    }
    memcpy(cur, out, (size_t)P * sizeof *cur);
done:
    free(tmp);
    free(out);
    free(ov);
    free(nmap);
    free(gmap);
}

/* ---- planning ------------------------------------------------------------- */

static void set_scen(refine_opts *ro, const double *load, double wgt) {
    if (ro->n_scen >= REFINE_MAX_SCENARIOS) return;
    ro->scen[ro->n_scen] = load;
    ro->scen_weight[ro->n_scen] = wgt;
    ro->n_scen++;
}

/* EPLB hierarchical's copies on the planning load (the cap's reference); INFINITY when it cannot run. */
static double hier_copies(experts_planner *p, const refine_opts *ro, const double *w) {
    const eplb_shape *s = &p->o.shape;
    if (eplb_hierarchical(p->ew, s, w, p->tmp, NULL) != PL_OK) return INFINITY;
    refine_opts r = *ro;
    r.copies_cap = INFINITY;
    double cp = 0;
    experts_refine_objective(p->rw, s, &r, p->tmp, &cp);
    return cp;
}

static pl_status plan_layer(experts_planner *p, experts_placer pl, const expert_load *ld, int t, int l, int32_t *out,
                            experts_plan_info *info, char *msg, size_t len) {
    const eplb_shape *s = &p->o.shape;
    const int E = s->n_experts, P = s->n_slots;
    const double *wt = expert_load_row_c(ld, t, l);
    pl_status st = PL_OK;
    refine_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.samples = expert_load_samples_c(ld, t, l);
    ro.n_samples = ro.samples ? ld->n_samples : 0;
    ro.sample_k = ro.samples ? ld->sample_k : 0;
    ro.copies_cap = INFINITY;
    switch (pl) {
    case EXPERTS_CONTIGUOUS: eplb_contiguous(s, out); return PL_OK;
    case EXPERTS_ROUND_ROBIN: eplb_round_robin(s, out); return PL_OK;
    case EXPERTS_EPLB: {
        int h = 0;
        st = eplb_auto(p->ew, s, wt, out, NULL, &h);
        if (info) info->hierarchical = h;
        break;
    }
    case EXPERTS_EPLB_HIER: st = eplb_hierarchical(p->ew, s, wt, out, NULL); break;
    case EXPERTS_EPLB_GLOBAL: st = eplb_global(p->ew, s, wt, out, NULL); break;
    case EXPERTS_EPLB_SWAP: {
        int h = 0;
        if ((st = eplb_auto(p->ew, s, wt, out, NULL, &h)) != PL_OK) break;
        set_scen(&ro, wt, 1.0);
        double cp0 = 0;
        experts_refine_objective(p->rw, s, &ro, out, &cp0);
        ro.copies_cap = cp0 * (1.0 + p->o.copies_margin);
        ro.replicate = 0;
        ro.time_budget_us = p->o.time_budget_us;
        st = experts_refine(p->rw, s, &ro, out, NULL);
        break;
    }
    case EXPERTS_SEARCH:
    case EXPERTS_LEARNED: {
        const experts_model *m = &p->model;
        experts_model dm;
        if (pl == EXPERTS_SEARCH) experts_model_default(&dm), m = &dm;
        experts_planning_load(m, ld, t, l, s->n_groups, p->plan);
        set_scen(&ro, p->plan, m->scen_weight[0]);
        for (int h = 1; h < EXPERTS_HISTORY; h++) {
            if (!(m->scen_weight[h] > 0)) continue;
            const int w = t - (h - 1) >= 0 ? t - (h - 1) : 0;
            memcpy(p->hist[h], expert_load_row_c(ld, w, l), (size_t)E * sizeof *p->hist[h]);
            set_scen(&ro, p->hist[h], m->scen_weight[h]);
        }
        ro.copies_weight = m->copies_weight;
        ro.replicate = P > E;
        const double cap_ref = hier_copies(p, &ro, p->plan);
        const double margin = pl == EXPERTS_SEARCH ? p->o.copies_margin : m->copies_margin;
        ro.copies_cap = isfinite(cap_ref) ? cap_ref * (1.0 + margin) : INFINITY;
        ro.time_budget_us = p->o.time_budget_us / 2;
        /* two starts: EPLB hierarchical (when it runs) and global, each refined; the better kept */
        double fa = INFINITY, fb = INFINITY;
        if (eplb_hierarchical(p->ew, s, p->plan, p->a, NULL) == PL_OK) {
            if ((st = experts_refine(p->rw, s, &ro, p->a, NULL)) != PL_OK) break;
            double cp = 0;
            fa = experts_refine_objective(p->rw, s, &ro, p->a, &cp);
            if (cp > ro.copies_cap + 1e-9) fa = INFINITY;
        }
        if ((st = eplb_global(p->ew, s, p->plan, p->b, NULL)) != PL_OK) break;
        if ((st = experts_refine(p->rw, s, &ro, p->b, NULL)) != PL_OK) break;
        double cpb = 0;
        fb = experts_refine_objective(p->rw, s, &ro, p->b, &cpb);
        if (cpb > ro.copies_cap + 1e-9) fb = INFINITY;
        if (!isfinite(fa) && !isfinite(fb)) fb = 0; /* neither meets the cap: take the global start's refinement */
        memcpy(out, fa <= fb ? p->a : p->b, (size_t)P * sizeof *out);
        break;
    }
    case EXPERTS_EXACT: {
        double busiest = 0, bound = 0;
        int proven = 0;
        st = experts_exact(s, wt, p->o.exact_time_s, out, &busiest, &bound, &proven, msg, len);
        if (st == PL_OK && info) info->exact_proven += proven;
        return st;
    }
    default: return pl_fail(msg, len, PL_ERR_INVALID, "unknown placer %d", (int)pl);
    }
    if (st != PL_OK)
        return pl_fail(msg, len, st, "layer %d: %s cannot place %d experts on %d slots of %d GPUs in %d nodes with %d groups",
                       l, experts_placer_name(pl), E, P, s->n_gpus, s->n_gpus / s->gpus_per_node, s->n_groups);
    return PL_OK;
}

pl_status experts_plan(experts_planner *p, experts_placer pl, const expert_load *ld, int t, const expert_map *prev,
                       expert_map *out, experts_plan_info *info, char *msg, size_t len) {
    if (!p || !ld || !out) return pl_fail(msg, len, PL_ERR_INVALID, "experts_plan: no planner, load or output");
    const eplb_shape *s = &p->o.shape;
    if (ld->n_experts != s->n_experts)
        return pl_fail(msg, len, PL_ERR_INVALID, "the load has %d experts but the model %d", ld->n_experts, s->n_experts);
    if (t < 0 || t >= ld->n_windows)
        return pl_fail(msg, len, PL_ERR_INVALID, "window %d is outside the load's 0..%d", t, ld->n_windows - 1);
    if (out->n_layers != ld->n_layers || out->n_slots != s->n_slots || out->n_experts != s->n_experts ||
        out->n_gpus != s->n_gpus || out->gpus_per_node != s->gpus_per_node)
        return pl_fail(msg, len, PL_ERR_INVALID, "the output map's shape differs from the plan's");
    if (ld->n_samples > p->max_samples || ld->sample_k > p->max_k)
        return pl_fail(msg, len, PL_ERR_INVALID, "the load's sampled tokens exceed the planner's scratch");
    if (prev && (prev->n_layers != out->n_layers || prev->n_slots != out->n_slots || prev->n_gpus != out->n_gpus))
        prev = NULL;
    if (info) memset(info, 0, sizeof *info);
    const double t0 = pl_now_us();
    for (int l = 0; l < ld->n_layers; l++) {
        int32_t *o = expert_map_layer(out, l);
        pl_status st = plan_layer(p, pl, ld, t, l, o, info, msg, len);
        if (st != PL_OK) return st;
        const int keep_as_is = pl == EXPERTS_CONTIGUOUS || pl == EXPERTS_ROUND_ROBIN || pl == EXPERTS_EPLB ||
                               pl == EXPERTS_EPLB_HIER || pl == EXPERTS_EPLB_GLOBAL;
        if (prev && !keep_as_is) experts_relabel(s, expert_map_layer_c(prev, l), o);
    }
    if (info) {
        info->plan_us = pl_now_us() - t0;
        info->layers = ld->n_layers;
    }
    return PL_OK;
}
