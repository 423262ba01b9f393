/*
 * experts.c: planning every MoE layer's expert placement with one of the
 * placers of experts.h, and the relabelling that keeps a re-plan's slots in
 * place.
 */
#include "experts.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exact.h"
#include "nodelpt.h"
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
    m->copies_scale = 1.0;
    m->mu = -1.0;
}

/* Layers this small also try the exact program (exact.h) within a second. */
#define EXPERTS_SMALL_E 64
#define EXPERTS_SMALL_G 16
#define EXPERTS_SMALL_P 128
#define EXPERTS_SMALL_TIME_S 1.0

/* The packing's grid of mu (nodelpt.h): from EPLB's global policy (0) to nearly hierarchical. */
static const double MU_GRID[] = {0.0, 4.0, 16.0, 64.0};
#define N_MU (int)(sizeof MU_GRID / sizeof MU_GRID[0])

/* One thread's scratch: layers are planned independently, a lane each at a time. */
typedef struct {
    eplb_work *ew;
    refine_work *rw;
    nodelpt_work *nw;
    double *plan;              /* [E] planning load */
    double *hist[EXPERTS_HISTORY]; /* [E] scenario loads */
    int32_t *a, *b;            /* [P] candidate placements */
    int32_t *tmp;              /* [P] */
    int hierarchical, proven;  /* the lane's share of experts_plan_info */
} lane;

#define EXPERTS_MAX_LANES 16

struct experts_planner {
    experts_options o;
    experts_model model;
    double lambda;             /* busiest/mean traded for one copy per token (the simulator's rate) */
    int n_lanes;
    lane lanes[EXPERTS_MAX_LANES];
    int max_samples, max_k;
};

static void lane_free(lane *ln) {
    eplb_work_destroy(ln->ew);
    refine_work_destroy(ln->rw);
    nodelpt_work_destroy(ln->nw);
    free(ln->plan);
    for (int h = 0; h < EXPERTS_HISTORY; h++) free(ln->hist[h]);
    free(ln->a);
    free(ln->b);
    free(ln->tmp);
    memset(ln, 0, sizeof *ln);
}

static int lane_init(lane *ln, const eplb_shape *s, int max_samples, int max_k) {
    memset(ln, 0, sizeof *ln);
    const int E = s->n_experts, P = s->n_slots;
    if (eplb_work_create(s, &ln->ew) != PL_OK || refine_work_create(s, max_samples, max_k, &ln->rw) != PL_OK ||
        nodelpt_work_create(s, &ln->nw) != PL_OK)
        return -1;
    ln->plan = malloc((size_t)E * sizeof *ln->plan);
    for (int h = 0; h < EXPERTS_HISTORY; h++)
        if (!(ln->hist[h] = malloc((size_t)E * sizeof *ln->hist[h]))) return -1;
    ln->a = malloc((size_t)P * sizeof *ln->a);
    ln->b = malloc((size_t)P * sizeof *ln->b);
    ln->tmp = malloc((size_t)P * sizeof *ln->tmp);
    return ln->plan && ln->a && ln->b && ln->tmp ? 0 : -1;
}

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
    if (p->o.max_moves <= 0) p->o.max_moves = 32;
    if (!(p->o.exact_time_s > 0)) p->o.exact_time_s = 60.0;
    if (p->o.top_k < 1) p->o.top_k = 1;
    p->max_samples = max_samples;
    p->max_k = max_k;
    int nl = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nl < 1) nl = 1;
    if (nl > EXPERTS_MAX_LANES) nl = EXPERTS_MAX_LANES;
    p->n_lanes = nl;
    for (int i = 0; i < nl; i++)
        if (lane_init(&p->lanes[i], s, max_samples, max_k)) {
            experts_planner_destroy(p);
            return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for a planner");
        }
    p->lambda = 0.05;
    if (o->cost) {
        /* the simulated layer's exchange rate of copies for balance, at f = 1.15 and 3.5 copies (the worst
         * NIC carries about tokens x copies rows: moe_balance.h) */
        moe_balance_group g;
        moe_balance_group_of(o->cost->clu, o->cost->cfg, o->cost->lay, &g);
        const double f0 = 1.15, c0 = 3.5, nic = g.tokens_per_gpu * g.row_bytes;
        double a = 0, b = 0, cc = 0, d = 0;
        if (moe_balance_layer_time(o->cost, f0, NULL, 0, c0 * nic, &a, &b) == PL_OK &&
            moe_balance_layer_time(o->cost, f0 + 0.01, NULL, 0, c0 * nic, &cc, &d) == PL_OK) {
            const double dtf = (cc + d - a - b) / 0.01;
            double e1 = 0, e2 = 0;
            moe_balance_layer_time(o->cost, f0, NULL, 0, (c0 + 0.1) * nic, &e1, &e2);
            const double dtc = (e1 + e2 - a - b) / 0.1;
            p->lambda = dtf > 0 ? dtc / dtf : 0.0;
        }
    }
    *out = p;
    return PL_OK;
}

void experts_planner_set_model(experts_planner *p, const experts_model *m) {
    if (p && m) p->model = *m;
}

void experts_planner_destroy(experts_planner *p) {
    if (!p) return;
    for (int i = 0; i < EXPERTS_MAX_LANES; i++) lane_free(&p->lanes[i]);
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
static double hier_copies(const experts_planner *p, lane *ln, const refine_opts *ro, const double *w) {
    const eplb_shape *s = &p->o.shape;
    if (eplb_hierarchical(ln->ew, s, w, ln->tmp, NULL) != PL_OK) return INFINITY;
    refine_opts r = *ro;
    r.copies_cap = INFINITY;
    double cp = 0;
    experts_refine_objective(ln->rw, s, &r, ln->tmp, &cp);
    return cp;
}

static pl_status plan_layer(const experts_planner *p, lane *ln, experts_placer pl, const expert_load *ld, int t, int l,
                            int32_t *out, char *msg, size_t len) {
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
        st = eplb_auto(ln->ew, s, wt, out, NULL, &h);
        ln->hierarchical += h;
        break;
    }
    case EXPERTS_EPLB_HIER: st = eplb_hierarchical(ln->ew, s, wt, out, NULL); break;
    case EXPERTS_EPLB_GLOBAL: st = eplb_global(ln->ew, s, wt, out, NULL); break;
    case EXPERTS_EPLB_SWAP: {
        int h = 0;
        if ((st = eplb_auto(ln->ew, s, wt, out, NULL, &h)) != PL_OK) break;
        set_scen(&ro, wt, 1.0);
        double cp0 = 0;
        experts_refine_objective(ln->rw, s, &ro, out, &cp0);
        ro.copies_cap = p->o.copies_margin >= 0 ? cp0 * (1.0 + p->o.copies_margin) : INFINITY;
        ro.copies_weight = p->o.copies_margin >= 0 ? 0.0 : p->lambda;
        ro.replicate = 0;
        ro.max_moves = p->o.max_moves;
        st = experts_refine(ln->rw, s, &ro, out, NULL);
        break;
    }
    case EXPERTS_SEARCH:
    case EXPERTS_LEARNED: {
        const experts_model *m = &p->model; /* read only: shared by the lanes */
        experts_model dm;
        if (pl == EXPERTS_SEARCH) experts_model_default(&dm), m = &dm;
        experts_planning_load(m, ld, t, l, s->n_groups, ln->plan);
        set_scen(&ro, ln->plan, m->scen_weight[0]);
        for (int h = 1; h < EXPERTS_HISTORY; h++) {
            if (!(m->scen_weight[h] > 0)) continue;
            const int w = t - (h - 1) >= 0 ? t - (h - 1) : 0;
            memcpy(ln->hist[h], expert_load_row_c(ld, w, l), (size_t)E * sizeof *ln->hist[h]);
            set_scen(&ro, ln->hist[h], m->scen_weight[h]);
        }
        const int capped = p->o.copies_margin >= 0;
        ro.copies_weight = capped ? 0.0 : p->lambda * (m->copies_scale > 0 ? m->copies_scale : 0.0);
        ro.replicate = P > E;
        ro.max_moves = p->o.max_moves;
        if (capped) {
            const double ref = hier_copies(p, ln, &ro, ln->plan);
            ro.copies_cap = isfinite(ref) ? ref * (1.0 + p->o.copies_margin) : INFINITY;
        }
        /* candidates: EPLB's two policies, the node-aware packing over its grid (or the model's mu) */
        if ((st = nodelpt_prepare(ln->nw, s, ln->plan, ro.samples, ro.n_samples, ro.sample_k, p->o.top_k)) != PL_OK) break;
        double best_f = INFINITY, best_excess = INFINITY;
        const int n_c = 2 + (m->mu >= 0 ? 1 : N_MU);
        for (int ci = 0; ci < n_c; ci++) {
            if (ci == 0) {
                if (eplb_hierarchical(ln->ew, s, ln->plan, ln->a, NULL) != PL_OK) continue;
            } else if (ci == 1) {
                if (eplb_global(ln->ew, s, ln->plan, ln->a, NULL) != PL_OK) continue;
            } else {
                nodelpt_pack(ln->nw, m->mu >= 0 ? m->mu : MU_GRID[ci - 2], ln->a);
            }
            double cp = 0;
            const double f = experts_refine_objective(ln->rw, s, &ro, ln->a, &cp);
            const double excess = cp > ro.copies_cap ? cp - ro.copies_cap : 0.0;
            /* within the cap the objective decides; outside it, the least excess */
            if (excess < best_excess - 1e-12 || (excess <= best_excess + 1e-12 && f < best_f)) {
                best_f = f, best_excess = excess;
                memcpy(ln->b, ln->a, (size_t)P * sizeof *ln->b);
            }
        }
        if (!isfinite(best_f)) {
            st = PL_ERR_INVALID;
            break;
        }
        if ((st = experts_refine(ln->rw, s, &ro, ln->b, NULL)) != PL_OK) break;
        /* a small layer: the exact program's optimum of the busiest GPU on the planning load, when it scores
         * better than the search on the objective (within the cap) */
        if (!p->o.no_small_exact && E <= EXPERTS_SMALL_E && s->n_gpus <= EXPERTS_SMALL_G && P <= EXPERTS_SMALL_P) {
            double bx = 0;
            int proven = 0;
            char xm[128];
            if (experts_exact(s, ln->plan, EXPERTS_SMALL_TIME_S, ln->a, &bx, NULL, &proven, xm, sizeof xm) == PL_OK) {
                double ca = 0, cb = 0;
                const double fa = experts_refine_objective(ln->rw, s, &ro, ln->a, &ca);
                const double fb = experts_refine_objective(ln->rw, s, &ro, ln->b, &cb);
                if (fa < fb && ca <= ro.copies_cap + 1e-12) memcpy(ln->b, ln->a, (size_t)P * sizeof *ln->b);
            }
        }
        memcpy(out, ln->b, (size_t)P * sizeof *out);
        break;
    }
    case EXPERTS_EXACT: {
        double busiest = 0, bound = 0;
        int proven = 0;
        st = experts_exact(s, wt, p->o.exact_time_s, out, &busiest, &bound, &proven, msg, len);
        if (st == PL_OK) ln->proven += proven;
        return st;
    }
    default: return pl_fail(msg, len, PL_ERR_INVALID, "unknown placer %d", (int)pl);
    }
    if (st != PL_OK)
        return pl_fail(msg, len, st, "layer %d: %s cannot place %d experts on %d slots of %d GPUs in %d nodes with %d groups",
                       l, experts_placer_name(pl), E, P, s->n_gpus, s->n_gpus / s->gpus_per_node, s->n_groups);
    return PL_OK;
}

typedef struct {
    const experts_planner *p;
    lane *ln;
    experts_placer pl;
    const expert_load *ld;
    int t;
    const expert_map *prev;
    expert_map *out;
    int first, step;
    pl_status st;
    char msg[256];
} lane_job;

/* Layers first, first + step, ... of a plan. */
static void *lane_run(void *arg) {
    lane_job *j = arg;
    const eplb_shape *s = &j->p->o.shape;
    const int keep_as_is = j->pl == EXPERTS_CONTIGUOUS || j->pl == EXPERTS_ROUND_ROBIN || j->pl == EXPERTS_EPLB ||
                           j->pl == EXPERTS_EPLB_HIER || j->pl == EXPERTS_EPLB_GLOBAL;
    for (int l = j->first; l < j->ld->n_layers; l += j->step) {
        int32_t *o = expert_map_layer(j->out, l);
        j->st = plan_layer(j->p, j->ln, j->pl, j->ld, j->t, l, o, j->msg, sizeof j->msg);
        if (j->st != PL_OK) break;
        if (j->prev && !keep_as_is) experts_relabel(s, expert_map_layer_c(j->prev, l), o);
    }
    return NULL;
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
    int nl = p->n_lanes < ld->n_layers ? p->n_lanes : ld->n_layers;
    lane_job jobs[EXPERTS_MAX_LANES];
    pthread_t th[EXPERTS_MAX_LANES];
    int started[EXPERTS_MAX_LANES] = {0};
    for (int i = 0; i < nl; i++) {
        p->lanes[i].hierarchical = p->lanes[i].proven = 0;
        jobs[i] = (lane_job){p, &p->lanes[i], pl, ld, t, prev, out, i, nl, PL_OK, ""};
    }
    for (int i = 1; i < nl; i++) started[i] = pthread_create(&th[i], NULL, lane_run, &jobs[i]) == 0;
    lane_run(&jobs[0]);
    for (int i = 1; i < nl; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else lane_run(&jobs[i]); /* no thread: run it here */
    }
    for (int i = 0; i < nl; i++)
        if (jobs[i].st != PL_OK) return pl_fail(msg, len, jobs[i].st, "%s", jobs[i].msg);
    if (info)
        for (int i = 0; i < nl; i++) info->hierarchical += p->lanes[i].hierarchical, info->exact_proven += p->lanes[i].proven;
    if (info) {
        info->plan_us = pl_now_us() - t0;
        info->layers = ld->n_layers;
    }
    return PL_OK;
}
