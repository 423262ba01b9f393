/*
 * learned.c: evolution strategies over the learned placer's parameters
 * against the simulated MoE layer time (learned.h).
 */
#include "learned.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define N_THETA (EXPERTS_FEATURES + EXPERTS_HISTORY + 2)

/* theta -> model: w as is, scenario weights exp(theta) (below 5% of the largest: off), copies scale
 * exp(theta), mu exp(theta) - 1 (>= 0). */
static void to_model(const double *th, experts_model *m) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < EXPERTS_FEATURES; i++) m->w[i] = th[i];
    double mx = 0;
    for (int h = 0; h < EXPERTS_HISTORY; h++) {
        m->scen_weight[h] = exp(th[EXPERTS_FEATURES + h]);
        if (m->scen_weight[h] > mx) mx = m->scen_weight[h];
    }
    for (int h = 0; h < EXPERTS_HISTORY; h++) {
        m->scen_weight[h] /= mx;
        if (m->scen_weight[h] < 0.05) m->scen_weight[h] = 0.0;
    }
    m->copies_scale = exp(th[EXPERTS_FEATURES + EXPERTS_HISTORY]);
    const double mu = exp(th[EXPERTS_FEATURES + EXPERTS_HISTORY + 1]) - 1.0;
    m->mu = mu > 0 ? mu : 0.0;
}

static void from_model(const experts_model *m, double *th) {
    for (int i = 0; i < EXPERTS_FEATURES; i++) th[i] = m->w[i];
    double mx = 0;
    for (int h = 0; h < EXPERTS_HISTORY; h++)
        if (m->scen_weight[h] > mx) mx = m->scen_weight[h];
    for (int h = 0; h < EXPERTS_HISTORY; h++)
        th[EXPERTS_FEATURES + h] = m->scen_weight[h] > 0 && mx > 0 ? log(m->scen_weight[h] / mx) : -4.0;
    th[EXPERTS_FEATURES + EXPERTS_HISTORY] = log(m->copies_scale > 1e-6 ? m->copies_scale : 1e-6);
    th[EXPERTS_FEATURES + EXPERTS_HISTORY + 1] = log(1.0 + (m->mu >= 0 ? m->mu : 8.0));
}

typedef struct {
    experts_planner *pl;
    moe_balance_ctx *bc;
    expert_map *map;
    double *ref;      /* EPLB's time per pair */
} prob_state;

static void states_free(prob_state *ps, int n) {
    if (!ps) return;
    for (int i = 0; i < n; i++) {
        experts_planner_destroy(ps[i].pl);
        moe_balance_ctx_destroy(ps[i].bc);
        expert_map_destroy(ps[i].map);
        free(ps[i].ref);
    }
    free(ps);
}

static pl_status time_of(const experts_train_problem *pb, prob_state *s, experts_placer pl, int t, double *us,
                         char *msg, size_t len) {
    pl_status st = experts_plan(s->pl, pl, pb->ld, t, NULL, s->map, NULL, msg, len);
    if (st != PL_OK) return st;
    experts_score sc;
    if ((st = experts_score_map(s->bc, s->map, pb->ld, t + 1, pb->opts.cost, &sc, NULL, NULL, msg, len)) != PL_OK)
        return st;
    *us = sc.compute_us + sc.comm_us;
    return PL_OK;
}

static pl_status states_make(const experts_train_options *o, prob_state **out, char *msg, size_t len) {
    prob_state *ps = calloc((size_t)o->n_problems, sizeof *ps);
    if (!ps) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    const int np = o->last_pair - o->first_pair + 1;
    for (int i = 0; i < o->n_problems; i++) {
        const experts_train_problem *pb = &o->problems[i];
        const expert_load *ld = pb->ld;
        if (!pb->opts.cost || ld->n_windows <= o->last_pair + 1) {
            states_free(ps, o->n_problems);
            return pl_fail(msg, len, PL_ERR_INVALID, "training problem %d needs a cost model and %d windows", i,
                           o->last_pair + 2);
        }
        moe_balance_group g;
        moe_balance_group_of(pb->opts.cost->clu, pb->opts.cost->cfg, pb->opts.cost->lay, &g);
        const eplb_shape *s = &pb->opts.shape;
        g.n_gpus = s->n_gpus, g.gpus_per_node = s->gpus_per_node;
        pl_status st;
        if ((st = experts_planner_create(&pb->opts, ld->n_samples, ld->sample_k, &ps[i].pl, msg, len)) != PL_OK ||
            (st = moe_balance_ctx_create(&g, s->n_experts, s->n_slots, &ps[i].bc, msg, len)) != PL_OK ||
            (st = expert_map_create(ld->n_layers, s->n_experts, s->n_slots, s->n_gpus, s->gpus_per_node, &ps[i].map,
                                    msg, len)) != PL_OK) {
            states_free(ps, o->n_problems);
            return st;
        }
        ps[i].ref = malloc((size_t)np * sizeof *ps[i].ref);
        if (!ps[i].ref) {
            states_free(ps, o->n_problems);
            return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        }
        for (int t = o->first_pair; t <= o->last_pair; t++)
            if ((st = time_of(pb, &ps[i], EXPERTS_EPLB, t, &ps[i].ref[t - o->first_pair], msg, len)) != PL_OK) {
                states_free(ps, o->n_problems);
                return st;
            }
    }
    *out = ps;
    return PL_OK;
}

static pl_status cost_of(const experts_train_options *o, prob_state *ps, const experts_model *m, double *cost,
                         char *msg, size_t len) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < o->n_problems; i++) {
        experts_planner_set_model(ps[i].pl, m);
        for (int t = o->first_pair; t <= o->last_pair; t++) {
            double us = 0;
            pl_status st = time_of(&o->problems[i], &ps[i], EXPERTS_LEARNED, t, &us, msg, len);
            if (st != PL_OK) return st;
            const double ref = ps[i].ref[t - o->first_pair];
            sum += ref > 0 ? us / ref : 1.0;
            n++;
        }
    }
    *cost = n ? sum / n : 1.0;
    return PL_OK;
}

pl_status experts_train_cost(const experts_train_options *o, const experts_model *m, double *cost, char *msg,
                             size_t len) {
    if (!o || !m || !cost || o->n_problems < 1 || o->first_pair < 0 || o->last_pair < o->first_pair)
        return pl_fail(msg, len, PL_ERR_INVALID, "experts_train_cost: bad options");
    prob_state *ps = NULL;
    pl_status st = states_make(o, &ps, msg, len);
    if (st != PL_OK) return st;
    st = cost_of(o, ps, m, cost, msg, len);
    states_free(ps, o->n_problems);
    return st;
}

static int by_value(const void *a, const void *b) {
    const double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x > y) - (x < y);
}

pl_status experts_train(const experts_train_options *o, experts_model *model, double *cost_start, double *cost_end,
                        char *msg, size_t len) {
    if (!o || !model || o->n_problems < 1 || o->first_pair < 0 || o->last_pair < o->first_pair)
        return pl_fail(msg, len, PL_ERR_INVALID, "experts_train: bad options");
    const int iters = o->iters > 0 ? o->iters : 12, P = o->pairs > 0 ? o->pairs : 6;
    const double sigma = o->sigma > 0 ? o->sigma : 0.15, lr = o->lr > 0 ? o->lr : 0.1;
    prob_state *ps = NULL;
    pl_status st = states_make(o, &ps, msg, len);
    if (st != PL_OK) return st;
    double th[N_THETA], best_th[N_THETA], eps[64][N_THETA], ret[128][2];
    if (P > 64) {
        states_free(ps, o->n_problems);
        return pl_fail(msg, len, PL_ERR_INVALID, "at most 64 pairs");
    }
    from_model(model, th);
    memcpy(best_th, th, sizeof th);
    experts_model m;
    to_model(th, &m);
    double c0 = 0, best = 0;
    if ((st = cost_of(o, ps, &m, &c0, msg, len)) != PL_OK) goto out;
    best = c0;
    pl_rng rng;
    pl_rng_seed(&rng, o->seed);
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < P; i++) {
            for (int k = 0; k < N_THETA; k++) eps[i][k] = pl_rng_normal(&rng);
            for (int sgn = 0; sgn < 2; sgn++) {
                double x[N_THETA];
                for (int k = 0; k < N_THETA; k++) x[k] = th[k] + (sgn ? -sigma : sigma) * eps[i][k];
                to_model(x, &m);
                double c = 0;
                if ((st = cost_of(o, ps, &m, &c, msg, len)) != PL_OK) goto out;
                ret[2 * i + sgn][0] = c;
                ret[2 * i + sgn][1] = 2 * i + sgn;
                if (c < best) best = c, memcpy(best_th, x, sizeof x);
            }
        }
        /* centred ranks: the lowest cost gets +0.5 */
        qsort(ret, (size_t)(2 * P), sizeof ret[0], by_value);
        double util[128];
        for (int r = 0; r < 2 * P; r++) util[(int)ret[r][1]] = 0.5 - (double)r / (2 * P - 1);
        for (int k = 0; k < N_THETA; k++) {
            double g = 0;
            for (int i = 0; i < P; i++) g += (util[2 * i] - util[2 * i + 1]) * eps[i][k];
            th[k] += lr * g / (P * sigma) * sigma; /* a step in units of sigma */
        }
        to_model(th, &m);
        double c = 0;
        if ((st = cost_of(o, ps, &m, &c, msg, len)) != PL_OK) goto out;
        if (c < best) best = c, memcpy(best_th, th, sizeof th);
        if (o->progress && o->progress(o->progress_ctx, it + 1, iters, c, best)) break;
    }
    to_model(best_th, model);
    if (cost_start) *cost_start = c0;
    if (cost_end) *cost_end = best;
out:
    states_free(ps, o->n_problems);
    return st;
}
