/*
 * baechi.c: m-ETF and m-SCT (see baechi.h for the model and the LP).
 */
#include "baechi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placer_config.h"

#if PLACER_HAVE_GLPK
#include <glpk.h>
#endif

/* Work, memory and edge costs of the problem, per node and device. */
typedef struct {
    int N, D, mb;      /* nodes, devices, micro-batches */
    double *w;       /* (N, D) forward + backward per micro-batch */
    double *mem;     /* (N) bytes the node holds on its device for the whole step */
    double *trans;   /* (N) bytes it needs only while it runs */
    double *bytes;   /* (N) output bytes per micro-batch */
} ls_model;

static void ls_model_free(ls_model *m) {
    free(m->w);
    free(m->mem);
    free(m->trans);
    free(m->bytes);
}

static double node_work(const policy_problem *pb, int dev, int node, int b) {
    double t = 0;
    for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++)
        t += pb->prm.compute_scale * profile_node_cost(pb->p, dev, b, node, (cost_phase)ph) +
             pb->prm.launch_overhead_us;
    return t;
}

static double xfer(const policy_problem *pb, int a, int b, double bytes) {
    if (a == b) return 0.0;
    return pb->prm.transfer_scale * profile_transfer_us(pb->p, a, b, bytes) + pb->prm.transfer_latency_us;
}

/* Activation there and gradient back. */
static double edge_cost(const policy_problem *pb, const ls_model *m, int producer, int a, int b) {
    if (a == b) return 0.0;
    return xfer(pb, a, b, m->bytes[producer]) + xfer(pb, b, a, m->bytes[producer]);
}

static pl_status ls_model_build(const policy_problem *pb, ls_model *m) {
    memset(m, 0, sizeof *m);
    const int N = pb->g->n_nodes, D = pb->p->n_devices, mb = pb->sched.micro_batches, b = pb->g->cfg.batch / mb;
    m->N = N;
    m->D = D;
    m->mb = mb;
    m->w = malloc(sizeof *m->w * (size_t)N * D);
    m->mem = malloc(sizeof *m->mem * (size_t)N);
    m->trans = malloc(sizeof *m->trans * (size_t)N);
    m->bytes = malloc(sizeof *m->bytes * (size_t)N);
    if (!m->w || !m->mem || !m->trans || !m->bytes) {
        ls_model_free(m);
        return PL_ERR_NOMEM;
    }
    for (int i = 0; i < N; i++) {
        const profile_node_mem *nm = &pb->p->node_mem[i];
        for (int d = 0; d < D; d++) m->w[(size_t)i * D + d] = node_work(pb, d, i, b);
        m->mem[i] = 4.0 * (double)nm->param_bytes + (double)mb * b * (double)nm->act_bytes_per_sample;
        m->bytes[i] = (double)nm->out_bytes_per_sample * b;
        m->trans[i] = (double)nm->workspace_bytes + 2.0 * m->bytes[i];
    }
    return PL_OK;
}

/* Bytes node i would receive from producers on other devices than d and
 * keep for its backward, for the m micro-batches. */
static double recv_bytes(const graph *g, const ls_model *m, const int *node_dev, int i, int d) {
    double r = 0;
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
        int p = g->nodes[i].inputs[k];
        if (node_dev[p] != d) r += m->bytes[p] * m->mb;
    }
    return r;
}

/* List scheduling (m-ETF; with fav_parent, m-SCT's preference). Writes
 * node_dev (N). */
static pl_status list_schedule(const policy_problem *pb, const ls_model *m, const int *fav_parent, int *node_dev) {
    const graph *g = pb->g;
    const int N = m->N, D = m->D;
    int *waiting = malloc(sizeof *waiting * (size_t)N);
    double *finish = malloc(sizeof *finish * (size_t)N);
    double *dev_free = calloc((size_t)D, sizeof *dev_free), *used = calloc((size_t)D, sizeof *used);
    double *peak_t = calloc((size_t)D, sizeof *peak_t);
    if (!waiting || !finish || !dev_free || !used || !peak_t) {
        free(waiting);
        free(finish);
        free(dev_free);
        free(used);
        free(peak_t);
        return PL_ERR_NOMEM;
    }
#define ROOM(d, i)                                                                                  \
    ((double)pb->caps[d] - used[d] - m->mem[i] - recv_bytes(g, m, node_dev, i, d) -                   \
     (peak_t[d] > m->trans[i] ? peak_t[d] : m->trans[i]))
    for (int i = 0; i < N; i++) {
        waiting[i] = g->nodes[i].n_inputs;
        node_dev[i] = -1;
    }
    for (int step = 0; step < N; step++) {
        int bi = -1, bd = -1;
        double best_s = INFINITY, best_f = INFINITY;
        for (int i = 0; i < N; i++) {
            if (node_dev[i] >= 0 || waiting[i] > 0) continue;
            /* candidate devices: those with room; the favourite parent's
             * device alone when it has room */
            int only = -1;
            if (fav_parent && fav_parent[i] >= 0) {
                int d = node_dev[fav_parent[i]];
                if (ROOM(d, i) >= 0) only = d;
            }
            int any_room = 0;
            for (int d = 0; d < D; d++) any_room |= ROOM(d, i) >= 0;
            int fallback = 0;
            if (!any_room) /* nothing fits: the device with the most room left */
                for (int d = 1; d < D; d++)
                    if (ROOM(d, i) > ROOM(fallback, i)) fallback = d;
            for (int d = 0; d < D; d++) {
                if (only >= 0 && d != only) continue;
                if (only < 0 && any_room && ROOM(d, i) < 0) continue;
                if (!any_room && d != fallback) continue;
                double s = dev_free[d];
                const graph_node *nd = &g->nodes[i];
                for (int k = 0; k < nd->n_inputs; k++) {
                    int p = nd->inputs[k];
                    double a = finish[p] + edge_cost(pb, m, p, node_dev[p], d);
                    if (a > s) s = a;
                }
                double f = s + m->w[(size_t)i * D + d];
                if (s < best_s || (s == best_s && f < best_f)) {
                    best_s = s;
                    best_f = f;
                    bi = i;
                    bd = d;
                }
            }
        }
        if (bi < 0) break; /* cannot happen for a DAG in topological order */
        node_dev[bi] = bd;
        finish[bi] = best_f;
        dev_free[bd] = best_f;
        used[bd] += m->mem[bi] + recv_bytes(g, m, node_dev, bi, bd);
        if (m->trans[bi] > peak_t[bd]) peak_t[bd] = m->trans[bi];
        for (int e = g->cons_start[bi]; e < g->cons_start[bi + 1]; e++) waiting[g->cons[e]]--;
    }
    free(waiting);
    free(finish);
    free(dev_free);
    free(used);
    free(peak_t);
#undef ROOM
    for (int i = 0; i < N; i++)
        if (node_dev[i] < 0) return PL_ERR_INVALID;
    return PL_OK;
}

static pl_status add_result(policy_evaluator *ev, policy_cands *out, const int *node_dev, const char *label) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    policy_eval e;
    pl_status st = policy_evaluate_nodes(ev, node_dev, 1, &e);
    if (st == PL_OK) st = policy_cands_add(out, pb->gr, label, node_dev, NULL, &e, 0);
    return st;
}

pl_status search_etf(policy_evaluator *ev, policy_cands *out) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    ls_model m;
    pl_status st = ls_model_build(pb, &m);
    if (st != PL_OK) return st;
    int *nd = malloc(sizeof *nd * (size_t)m.N);
    st = nd ? list_schedule(pb, &m, NULL, nd) : PL_ERR_NOMEM;
    if (st == PL_OK) st = add_result(ev, out, nd, "m-etf");
    free(nd);
    ls_model_free(&m);
    return st;
}

#if PLACER_HAVE_GLPK
int search_sct_available(void) { return 1; }

/* The LP of baechi.h; fav_parent[j] gets i for x_ij < 1/2, else -1. */
static pl_status sct_favourites(const policy_problem *pb, const ls_model *m, int *fav_parent, char *msg,
                                size_t len) {
    const graph *g = pb->g;
    const int N = m->N, D = m->D;
    int E = 0;
    for (int j = 0; j < N; j++) E += g->nodes[j].n_inputs;
    /* mean work and mean edge cost (over ordered pairs of distinct devices) */
    double *p = malloc(sizeof *p * (size_t)N), *c = malloc(sizeof *c * (size_t)(E > 0 ? E : 1));
    int *ei = malloc(sizeof *ei * (size_t)(E > 0 ? E : 1)), *ej = malloc(sizeof *ej * (size_t)(E > 0 ? E : 1));
    /* nonzeros: 3 per edge row, 1 per edge in a succ row and in a pred row, 2 per makespan row */
    const int nz = 3 * E + 2 * E + 2 * N;
    int *ia = malloc(sizeof *ia * (size_t)(nz + 1)), *ja = malloc(sizeof *ja * (size_t)(nz + 1));
    double *ar = malloc(sizeof *ar * (size_t)(nz + 1));
    pl_status st = PL_ERR_NOMEM;
    glp_prob *lp = NULL;
    if (!p || !c || !ei || !ej || !ia || !ja || !ar) goto out;
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += m->w[(size_t)i * D + d];
        p[i] = s / D;
    }
    E = 0;
    for (int j = 0; j < N; j++)
        for (int k = 0; k < g->nodes[j].n_inputs; k++) {
            int i = g->nodes[j].inputs[k];
            double s = 0;
            int n = 0;
            for (int a = 0; a < D; a++)
                for (int b = 0; b < D; b++)
                    if (a != b) {
                        s += edge_cost(pb, m, i, a, b);
                        n++;
                    }
            ei[E] = i;
            ej[E] = j;
            c[E++] = n ? s / n : 0.0;
        }
    lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    /* columns: t_0..t_{N-1}, x_0..x_{E-1}, W */
    glp_add_cols(lp, N + E + 1);
    for (int i = 0; i < N; i++) glp_set_col_bnds(lp, 1 + i, GLP_LO, 0.0, 0.0);
    for (int e = 0; e < E; e++) glp_set_col_bnds(lp, 1 + N + e, GLP_DB, 0.0, 1.0);
    const int cW = 1 + N + E;
    glp_set_col_bnds(lp, cW, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(lp, cW, 1.0);
    int row = 0, k = 0;
    /* t_j - t_i - c x >= p_i */
    for (int e = 0; e < E; e++) {
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_LO, p[ei[e]], 0.0);
        ia[++k] = row; ja[k] = 1 + ej[e]; ar[k] = 1.0;
        ia[++k] = row; ja[k] = 1 + ei[e]; ar[k] = -1.0;
        ia[++k] = row; ja[k] = 1 + N + e; ar[k] = -c[e];
    }
    /* at most one favourite child per node, one favourite parent per node */
    for (int side = 0; side < 2; side++)
        for (int v = 0; v < N; v++) {
            int cnt = 0;
            for (int e = 0; e < E; e++) cnt += (side ? ej[e] : ei[e]) == v;
            if (cnt < 2) continue;
            row = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, row, GLP_LO, cnt - 1.0, 0.0);
            for (int e = 0; e < E; e++)
                if ((side ? ej[e] : ei[e]) == v) {
                    ia[++k] = row; ja[k] = 1 + N + e; ar[k] = 1.0;
                }
        }
    /* W - t_i >= p_i */
    for (int i = 0; i < N; i++) {
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_LO, p[i], 0.0);
        ia[++k] = row; ja[k] = cW; ar[k] = 1.0;
        ia[++k] = row; ja[k] = 1 + i; ar[k] = -1.0;
    }
    glp_load_matrix(lp, k, ia, ja, ar);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    int rc = glp_simplex(lp, &parm);
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "m-sct: GLPK's simplex failed (code %d, status %d)", rc,
                     glp_get_status(lp));
        goto out;
    }
    double *best = p; /* reuse: smallest x seen per child */
    for (int j = 0; j < N; j++) {
        fav_parent[j] = -1;
        best[j] = 0.5;
    }
    for (int e = 0; e < E; e++) {
        double x = glp_get_col_prim(lp, 1 + N + e);
        if (x < best[ej[e]]) {
            best[ej[e]] = x;
            fav_parent[ej[e]] = ei[e];
        }
    }
    st = PL_OK;
out:
    if (lp) glp_delete_prob(lp);
    free(p);
    free(c);
    free(ei);
    free(ej);
    free(ia);
    free(ja);
    free(ar);
    return st;
}

pl_status search_sct(policy_evaluator *ev, policy_cands *out, char *msg, size_t len) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    ls_model m;
    pl_status st = ls_model_build(pb, &m);
    if (st != PL_OK) return pl_fail(msg, len, st, "out of memory");
    int *nd = malloc(sizeof *nd * (size_t)m.N), *fav = malloc(sizeof *fav * (size_t)m.N);
    st = nd && fav ? sct_favourites(pb, &m, fav, msg, len) : pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    if (st == PL_OK) st = list_schedule(pb, &m, fav, nd);
    if (st == PL_OK) st = add_result(ev, out, nd, "m-sct");
    free(nd);
    free(fav);
    ls_model_free(&m);
    return st;
}
#else
int search_sct_available(void) { return 0; }

pl_status search_sct(policy_evaluator *ev, policy_cands *out, char *msg, size_t len) {
    (void)ev;
    (void)out;
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "m-sct needs GLPK (libglpk-dev) at build time");
}
#endif
