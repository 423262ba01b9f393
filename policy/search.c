/*
 * search.c: baselines and searches (see search.h for what each does and
 * what the DP optimises).
 */
#include "search.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- candidate lists ---------------------------------------------------- */

pl_status policy_cands_create(int n_nodes, int n_units, policy_cands **out) {
    *out = NULL;
    policy_cands *c = calloc(1, sizeof *c);
    if (!c) return PL_ERR_NOMEM;
    c->n_nodes = n_nodes;
    c->n_units = n_units;
    *out = c;
    return PL_OK;
}

void policy_cands_destroy(policy_cands *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->items[i].node_dev);
        free(c->items[i].unit_dev);
    }
    free(c->items);
    free(c);
}

pl_status policy_cands_add(policy_cands *c, const grouping *gr, const char *label, const int *node_dev,
                           const int *unit_dev, const policy_eval *ev, double aux) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        policy_cand *items = realloc(c->items, sizeof *items * (size_t)cap);
        if (!items) return PL_ERR_NOMEM;
        c->items = items;
        c->cap = cap;
    }
    policy_cand *x = &c->items[c->n];
    memset(x, 0, sizeof *x);
    snprintf(x->label, sizeof x->label, "%s", label);
    x->ev = *ev;
    x->aux = aux;
    x->node_dev = malloc(sizeof *x->node_dev * (size_t)c->n_nodes);
    x->unit_dev = malloc(sizeof *x->unit_dev * (size_t)c->n_units);
    if (!x->node_dev || !x->unit_dev) {
        free(x->node_dev);
        free(x->unit_dev);
        return PL_ERR_NOMEM;
    }
    memcpy(x->node_dev, node_dev, sizeof *x->node_dev * (size_t)c->n_nodes);
    if (unit_dev) memcpy(x->unit_dev, unit_dev, sizeof *x->unit_dev * (size_t)c->n_units);
    else if (!gr || gr->n_groups != c->n_units || !grouping_collapse(gr, node_dev, x->unit_dev)) {
        free(x->unit_dev);
        x->unit_dev = NULL;
    }
    c->n++;
    return PL_OK;
}

int policy_cands_best(const policy_cands *c) {
    int best = -1;
    for (int i = 0; i < c->n; i++)
        if (best < 0 || c->items[i].ev.cost_us < c->items[best].ev.cost_us) best = i;
    return best;
}

void policy_cands_sort(policy_cands *c) {
    /* insertion sort: stable, and lists are short */
    for (int i = 1; i < c->n; i++) {
        policy_cand x = c->items[i];
        int j = i - 1;
        while (j >= 0 && c->items[j].ev.cost_us > x.ev.cost_us) {
            c->items[j + 1] = c->items[j];
            j--;
        }
        c->items[j + 1] = x;
    }
}

/* ---- single device and human splits -------------------------------------- */

pl_status search_single(policy_evaluator *ev, policy_cands *out) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int N = pb->g->n_nodes, D = pb->p->n_devices;
    int *rows = malloc(sizeof *rows * (size_t)N * (size_t)D);
    policy_eval *res = malloc(sizeof *res * (size_t)D);
    pl_status st = PL_ERR_NOMEM;
    if (!rows || !res) goto out;
    for (int d = 0; d < D; d++)
        for (int i = 0; i < N; i++) rows[(size_t)d * N + i] = d;
    st = policy_evaluate_nodes(ev, rows, D, res);
    for (int d = 0; d < D && st == PL_OK; d++) {
        char label[POLICY_LABEL_LEN];
        snprintf(label, sizeof label, "single gpu %d", d);
        st = policy_cands_add(out, pb->gr, label, rows + (size_t)d * N, NULL, &res[d], 0);
    }
out:
    free(rows);
    free(res);
    return st;
}

/* Next injective assignment of s stages to D devices (lexicographic over
 * arrangements). Returns 0 after the last. */
static int next_arrangement(int *a, int s, int D) {
    for (int i = s - 1; i >= 0; i--) {
        for (int v = a[i] + 1; v < D; v++) {
            int used = 0;
            for (int j = 0; j < i; j++) used |= a[j] == v;
            if (used) continue;
            a[i] = v;
            /* fill the rest with the smallest unused values */
            for (int k = i + 1; k < s; k++) {
                for (int w = 0; w < D; w++) {
                    int u2 = 0;
                    for (int j = 0; j < k; j++) u2 |= a[j] == w;
                    if (!u2) { a[k] = w; break; }
                }
            }
            return 1;
        }
    }
    return 0;
}

/* A human split: stage_of(node) -> stage in 0..s-1, tried on every
 * arrangement of s devices. */
typedef int (*stage_fn)(const graph_node *n, int L, int s);

static int stage_layers(const graph_node *n, int L, int s) {
    if (n->layer < 0) return 0;
    if (n->layer >= L) return s - 1;
    return n->layer * s / L;
}
static int stage_emb_body_head(const graph_node *n, int L, int s) {
    (void)s;
    return n->layer < 0 ? 0 : n->layer >= L ? 2 : 1;
}
static int stage_emb_rest(const graph_node *n, int L, int s) { (void)L; (void)s; return n->layer < 0 ? 0 : 1; }
static int stage_body_head(const graph_node *n, int L, int s) { (void)s; return n->layer >= L ? 1 : 0; }

static pl_status add_split(policy_evaluator *ev, policy_cands *out, stage_fn fn, int s, const char *name) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int N = pb->g->n_nodes, D = pb->p->n_devices, L = pb->g->cfg.n_layers;
    if (s > D || s < 2) return PL_OK;
    int a[SIM_MAX_DEVICES];
    for (int i = 0; i < s; i++) a[i] = i;
    int *stage = malloc(sizeof *stage * (size_t)N), *node_dev = malloc(sizeof *node_dev * (size_t)N);
    pl_status st = PL_ERR_NOMEM;
    if (!stage || !node_dev) goto out;
    for (int i = 0; i < N; i++) stage[i] = fn(&pb->g->nodes[i], L, s);
    st = PL_OK;
    do {
        for (int i = 0; i < N; i++) node_dev[i] = a[stage[i]];
        policy_eval e;
        st = policy_evaluate_nodes(ev, node_dev, 1, &e);
        if (st != PL_OK) break;
        char label[POLICY_LABEL_LEN];
        int off = snprintf(label, sizeof label, "human %s on ", name);
        for (int i = 0; i < s && off < (int)sizeof label; i++)
            off += snprintf(label + off, sizeof label - (size_t)off, i ? ",%d" : "%d", a[i]);
        st = policy_cands_add(out, pb->gr, label, node_dev, NULL, &e, 0);
    } while (st == PL_OK && next_arrangement(a, s, D));
out:
    free(stage);
    free(node_dev);
    return st;
}

pl_status search_human(policy_evaluator *ev, policy_cands *out) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int D = pb->p->n_devices, L = pb->g->cfg.n_layers;
    pl_status st = PL_OK;
    for (int s = 2; s <= D && s <= L && st == PL_OK; s++) {
        char name[48];
        int off = snprintf(name, sizeof name, "layers ");
        for (int k = 0; k < s; k++) {
            int cnt = 0;
            for (int l = 0; l < L; l++) cnt += (l * s / L) == k;
            off += snprintf(name + off, sizeof name - (size_t)off, k ? "|%d" : "%d", cnt);
        }
        st = add_split(ev, out, stage_layers, s, name);
    }
    if (st == PL_OK) st = add_split(ev, out, stage_emb_body_head, 3, "emb|body|head");
    if (st == PL_OK) st = add_split(ev, out, stage_emb_rest, 2, "emb|body+head");
    if (st == PL_OK) st = add_split(ev, out, stage_body_head, 2, "emb+body|head");
    return st;
}

/* ---- the DP over contiguous partitions ------------------------------------ */

/* Per-problem tables: prefix sums per device over units, and boundary
 * transfer times per ordered device pair. */
typedef struct {
    int U, D, m, b;            /* units, devices, micro-batches, micro-batch size */
    double *fb;                /* (D, U+1) prefix of fwd+bwd per micro-batch */
    double *opt;               /* (D, U+1) prefix of optimizer time */
    double *xa, *xg;           /* (U+1, D, D) act / grad time of boundary j from a to b */
    double *stat;              /* (U+1) prefix of static bytes (4 x params) */
    double *act;               /* (U+1) prefix of activation bytes per micro-batch */
    double *ws;                /* (U) max workspace of a unit */
    double *recv;              /* (U+1) bytes arriving at boundary j per micro-batch */
} dp_tables;

static void dp_tables_free(dp_tables *t) {
    free(t->fb); free(t->opt); free(t->xa); free(t->xg); free(t->stat); free(t->act); free(t->ws); free(t->recv);
}

static double compute_us(const policy_problem *pb, int dev, int node, cost_phase ph, int b) {
    return pb->prm.compute_scale * profile_node_cost(pb->p, dev, b, node, ph) + pb->prm.launch_overhead_us;
}

static double xfer_us(const policy_problem *pb, int a, int b, double bytes) {
    if (a == b) return 0.0;
    return pb->prm.transfer_scale * profile_transfer_us(pb->p, a, b, bytes) + pb->prm.transfer_latency_us;
}

static pl_status dp_tables_build(const policy_problem *pb, dp_tables *t) {
    memset(t, 0, sizeof *t);
    const grouping *gr = pb->gr;
    const graph *g = pb->g;
    const int U = gr->n_groups, D = pb->p->n_devices;
    t->U = U;
    t->D = D;
    t->m = pb->sched.micro_batches;
    t->b = g->cfg.batch / t->m;
    t->fb = calloc((size_t)D * (U + 1), sizeof(double));
    t->opt = calloc((size_t)D * (U + 1), sizeof(double));
    t->xa = calloc((size_t)(U + 1) * D * D, sizeof(double));
    t->xg = calloc((size_t)(U + 1) * D * D, sizeof(double));
    t->stat = calloc((size_t)U + 1, sizeof(double));
    t->act = calloc((size_t)U + 1, sizeof(double));
    t->ws = calloc((size_t)U, sizeof(double));
    t->recv = calloc((size_t)U + 1, sizeof(double));
    if (!t->fb || !t->opt || !t->xa || !t->xg || !t->stat || !t->act || !t->ws || !t->recv) {
        dp_tables_free(t);
        return PL_ERR_NOMEM;
    }
    for (int d = 0; d < D; d++)
        for (int u = 0; u < U; u++) {
            double fb = 0, o = 0;
            for (int q = gr->group_start[u]; q < gr->group_start[u + 1]; q++) {
                int i = gr->members[q];
                fb += compute_us(pb, d, i, PHASE_FWD, t->b) + compute_us(pb, d, i, PHASE_BWD, t->b);
                o += compute_us(pb, d, i, PHASE_OPT, t->b);
            }
            t->fb[(size_t)d * (U + 1) + u + 1] = t->fb[(size_t)d * (U + 1) + u] + fb;
            t->opt[(size_t)d * (U + 1) + u + 1] = t->opt[(size_t)d * (U + 1) + u] + o;
        }
    for (int u = 0; u < U; u++) {
        double st = 0, ac = 0, ws = 0;
        for (int q = gr->group_start[u]; q < gr->group_start[u + 1]; q++) {
            int i = gr->members[q];
            const profile_node_mem *nm = &pb->p->node_mem[i];
            st += 4.0 * (double)nm->param_bytes;
            ac += (double)nm->act_bytes_per_sample * t->b;
            if ((double)nm->workspace_bytes > ws) ws = (double)nm->workspace_bytes;
        }
        t->stat[u + 1] = t->stat[u] + st;
        t->act[u + 1] = t->act[u] + ac;
        t->ws[u] = ws;
    }
    /* boundary j (1..U-1): producers before j with a consumer at or after j */
    for (int i = 0; i < g->n_nodes; i++) {
        int gi = gr->node_group[i], far = gi;
        for (int e = g->cons_start[i]; e < g->cons_start[i + 1]; e++)
            if (gr->node_group[g->cons[e]] > far) far = gr->node_group[g->cons[e]];
        double bytes = (double)pb->p->node_mem[i].out_bytes_per_sample * t->b;
        for (int j = gi + 1; j <= far; j++) {
            t->recv[j] += bytes;
            for (int a = 0; a < D; a++)
                for (int c = 0; c < D; c++) {
                    t->xa[((size_t)j * D + a) * D + c] += xfer_us(pb, a, c, bytes);
                    t->xg[((size_t)j * D + a) * D + c] += xfer_us(pb, c, a, bytes);
                }
        }
    }
    return PL_OK;
}

static double stage_fb(const dp_tables *t, int j0, int j1, int d) {
    return t->fb[(size_t)d * (t->U + 1) + j1] - t->fb[(size_t)d * (t->U + 1) + j0];
}
static double stage_opt(const dp_tables *t, int j0, int j1, int d) {
    return t->opt[(size_t)d * (t->U + 1) + j1] - t->opt[(size_t)d * (t->U + 1) + j0];
}

/* Estimated peak bytes of stage s of k holding units [j0, j1), after the
 * simulator's memory model (sim/placement/sim_core.c): static state (4 x parameter bytes),
 * activations and received inputs of the micro-batches in flight (m for
 * GPipe, min(m, k - s) for 1F1B), the output gradients received during one
 * backward, and the largest workspace. */
static double stage_mem(const policy_problem *pb, const dp_tables *t, int j0, int j1, int s, int k) {
    int inflight = t->m;
    if (pb->sched.order != SCHED_GPIPE && k - s < inflight) inflight = k - s;
    double ws = 0;
    for (int u = j0; u < j1; u++) ws = t->ws[u] > ws ? t->ws[u] : ws;
    double recv = j0 > 0 ? t->recv[j0] : 0.0;        /* inputs received, per micro-batch */
    double grad_in = j1 < t->U ? t->recv[j1] : 0.0;   /* output gradients received during a backward */
    return (t->stat[j1] - t->stat[j0]) + inflight * (t->act[j1] - t->act[j0] + recv) + grad_in + ws;
}

double search_dp_estimate(const policy_problem *pb, const int *unit_dev, int *mem_ok) {
    dp_tables t;
    if (dp_tables_build(pb, &t) != PL_OK) return NAN;
    const int U = t.U;
    int starts[SIM_MAX_DEVICES + 1], devs[SIM_MAX_DEVICES], k = 0;
    uint64_t used = 0;
    double T = NAN;
    for (int u = 0; u < U; u++) {
        if (u == 0 || unit_dev[u] != unit_dev[u - 1]) {
            int d = unit_dev[u];
            if (d < 0 || d >= t.D || (used >> d & 1)) goto out; /* not contiguous on distinct devices */
            used |= 1ull << d;
            starts[k] = u;
            devs[k++] = d;
        }
    }
    starts[k] = U;
    double S = 0, M = 0;
    int ok = 1;
    for (int s = 0; s < k; s++) {
        double c = stage_fb(&t, starts[s], starts[s + 1], devs[s]);
        S += c;
        if (c > M) M = c;
        if (s == 0) S += stage_opt(&t, starts[0], starts[1], devs[0]);
        if (s > 0) {
            int j = starts[s];
            double xa = t.xa[((size_t)j * t.D + devs[s - 1]) * t.D + devs[s]];
            double xg = t.xg[((size_t)j * t.D + devs[s - 1]) * t.D + devs[s]];
            S += xa + xg;
            if (xa > M) M = xa;
            if (xg > M) M = xg;
        }
        if (stage_mem(pb, &t, starts[s], starts[s + 1], s, k) > (double)pb->caps[devs[s]]) ok = 0;
    }
    T = S + (t.m - 1) * M + pb->prm.step_fixed_us;
    if (mem_ok) *mem_ok = ok;
out:
    dp_tables_free(&t);
    return T;
}

typedef struct {
    double S, M;   /* see search.h */
    int prev;      /* entry this one extends, -1 for the first stage */
    int start;     /* first unit of the last stage */
    int dev;       /* device of the last stage */
} dp_entry;

typedef struct {
    int n, cap;
    int *e;        /* entry indices, sorted by S ascending, M strictly descending */
} dp_front;

typedef struct {
    dp_entry *e;
    int n, cap;
} dp_pool;

static int pool_add(dp_pool *p, dp_entry x) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 1024;
        dp_entry *e = realloc(p->e, sizeof *e * (size_t)cap);
        if (!e) return -1;
        p->e = e;
        p->cap = cap;
    }
    p->e[p->n] = x;
    return p->n++;
}

/* Insert (S, M) into a Pareto front unless dominated. Returns 0, or -1 on
 * allocation failure. */
static int front_insert(dp_front *f, dp_pool *pool, dp_entry x) {
    for (int i = 0; i < f->n; i++) {
        const dp_entry *y = &pool->e[f->e[i]];
        if (y->S <= x.S && y->M <= x.M) return 0; /* dominated (or equal) */
    }
    int idx = pool_add(pool, x);
    if (idx < 0) return -1;
    int w = 0;
    for (int i = 0; i < f->n; i++) {
        const dp_entry *y = &pool->e[f->e[i]];
        if (!(x.S <= y->S && x.M <= y->M)) f->e[w++] = f->e[i];
    }
    f->n = w;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        int *e = realloc(f->e, sizeof *e * (size_t)cap);
        if (!e) return -1;
        f->e = e;
        f->cap = cap;
    }
    f->e[f->n++] = idx;
    return 0;
}

static int popcount64(uint64_t x) { return __builtin_popcountll(x); }

typedef struct {
    double T;
    int entry;
} dp_final;

static int cmp_final(const void *a, const void *b) {
    const dp_final *x = a, *y = b;
    return (x->T > y->T) - (x->T < y->T);
}

/* 1 when every device permutation leaves the problem unchanged. */
static pl_status fully_symmetric(const policy_problem *pb, int *sym) {
    int *perms = NULL, n = 0;
    *sym = 0;
    pl_status st = policy_device_automorphisms(pb, &perms, &n);
    if (st != PL_OK) return st; /* out of memory: reported, not taken for "asymmetric" */
    int D = pb->p->n_devices, fact = 1;
    for (int i = 2; i <= D; i++) fact *= i;
    free(perms);
    *sym = D <= 8 && n == fact;
    return PL_OK;
}

/* Run the DP for every stage count. Final entries go to *finals. */
static pl_status dp_run(const policy_problem *pb, const dp_tables *t, int use_mem, int sym, dp_pool *pool,
                        dp_final **finals, int *n_finals) {
    const int U = t->U, D = t->D;
    const int n_masks = sym ? 1 : 1 << D; /* symmetric: mask implied by the stage count */
    const size_t n_states = (size_t)(U + 1) * (size_t)n_masks * (size_t)D;
    dp_front *fr = calloc(n_states, sizeof *fr);
    if (!fr) return PL_ERR_NOMEM;
    pl_status st = PL_OK;
    int nf = 0, capf = 0;
    dp_final *fin = NULL;
#define STATE(j, mask, d) (((size_t)(j) * n_masks + (size_t)(sym ? 0 : (mask))) * D + (size_t)(d))
    int kmax = D < U ? D : U;
    for (int k = 1; k <= kmax && st == PL_OK; k++) {
        for (size_t i = 0; i < n_states; i++) fr[i].n = 0;
        /* first stage [0, j1) */
        for (int d = 0; d < D; d++) {
            if (sym && d != 0) continue;
            for (int j1 = 1; j1 <= U - (k - 1); j1++) {
                if (k == 1 && j1 != U) continue;
                if (use_mem && stage_mem(pb, t, 0, j1, 0, k) > (double)pb->caps[d]) continue;
                double c = stage_fb(t, 0, j1, d);
                dp_entry x = {c + stage_opt(t, 0, j1, d), c, -1, 0, d};
                if (front_insert(&fr[STATE(j1, 1u << d, d)], pool, x) < 0) { st = PL_ERR_NOMEM; goto out; }
            }
        }
        /* later stages, in order of units placed */
        for (int j = 1; j < U; j++)
            for (int mask = 0; mask < (sym ? 1 : 1 << D); mask++)
                for (int d = 0; d < D; d++) {
                    dp_front *f = &fr[STATE(j, mask, d)];
                    if (f->n == 0) continue;
                    /* in the symmetric case the stage count is recovered from the entry chain */
                    for (int q = 0; q < f->n; q++) {
                        int ei = f->e[q];
                        int s = 0; /* stages so far */
                        for (int w = ei; w >= 0; w = pool->e[w].prev) s++;
                        if (s >= k) continue;
                        uint64_t used = sym ? 0 : (uint64_t)mask;
                        for (int d2 = 0; d2 < D; d2++) {
                            if (sym ? d2 != s : (used >> d2 & 1)) continue;
                            double xa = t->xa[((size_t)j * D + d) * D + d2], xg = t->xg[((size_t)j * D + d) * D + d2];
                            for (int j2 = j + 1; j2 <= U - (k - s - 1); j2++) {
                                if (s + 1 == k && j2 != U) continue;
                                if (use_mem && stage_mem(pb, t, j, j2, s, k) > (double)pb->caps[d2]) continue;
                                double c = stage_fb(t, j, j2, d2);
                                const dp_entry *y = &pool->e[ei];
                                double M = y->M;
                                if (c > M) M = c;
                                if (xa > M) M = xa;
                                if (xg > M) M = xg;
                                dp_entry x = {y->S + c + xa + xg, M, ei, j, d2};
                                int nmask = sym ? 0 : (int)(used | 1u << d2);
                                if (front_insert(&fr[STATE(j2, nmask, d2)], pool, x) < 0) {
                                    st = PL_ERR_NOMEM;
                                    goto out;
                                }
                                f = &fr[STATE(j, mask, d)]; /* pool may have moved; front did not */
                            }
                        }
                    }
                }
        /* finals with exactly k stages */
        for (int mask = 0; mask < (sym ? 1 : 1 << D); mask++) {
            if (!sym && popcount64((uint64_t)mask) != k) continue;
            for (int d = 0; d < D; d++) {
                dp_front *f = &fr[STATE(U, mask, d)];
                for (int q = 0; q < f->n; q++) {
                    int ei = f->e[q], s = 0;
                    for (int w = ei; w >= 0; w = pool->e[w].prev) s++;
                    if (s != k) continue;
                    if (nf == capf) {
                        capf = capf ? 2 * capf : 64;
                        dp_final *nfin = realloc(fin, sizeof *nfin * (size_t)capf);
                        if (!nfin) { st = PL_ERR_NOMEM; goto out; }
                        fin = nfin;
                    }
                    fin[nf].T = pool->e[ei].S + (t->m - 1) * pool->e[ei].M + pb->prm.step_fixed_us;
                    fin[nf].entry = ei;
                    nf++;
                }
            }
        }
    }
#undef STATE
out:
    for (size_t i = 0; i < n_states; i++) free(fr[i].e);
    free(fr);
    if (st != PL_OK) {
        free(fin);
        return st;
    }
    if (nf > 1) qsort(fin, (size_t)nf, sizeof *fin, cmp_final); /* fin is NULL when nothing fits */
    *finals = fin;
    *n_finals = nf;
    return PL_OK;
}

/* Unit placement of a final entry. Returns its stage count. */
static int dp_unroll(const dp_pool *pool, int ei, int U, int *unit_dev) {
    int end = U, k = 0;
    for (int w = ei; w >= 0; w = pool->e[w].prev) {
        for (int u = pool->e[w].start; u < end; u++) unit_dev[u] = pool->e[w].dev;
        end = pool->e[w].start;
        k++;
    }
    return k;
}

pl_status search_dp(policy_evaluator *ev, policy_cands *out, search_dp_info *info) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    dp_tables t;
    pl_status st = dp_tables_build(pb, &t);
    if (st != PL_OK) return st;
    const int U = t.U, D = t.D;
    int sym = 0;
    dp_pool pool = {0};
    dp_final *fin = NULL;
    int nf = 0, mem_feasible = 1;
    int *rows = NULL;
    double *est = NULL;
    policy_eval *res = NULL;
    st = fully_symmetric(pb, &sym);
    if (st == PL_OK) st = dp_run(pb, &t, 1, sym, &pool, &fin, &nf);
    if (st == PL_OK && nf == 0) {
        mem_feasible = 0;
        st = dp_run(pb, &t, 0, sym, &pool, &fin, &nf);
    }
    if (st != PL_OK) goto out;
    /* candidates: the best per stage count, then the best overall, up to 16 */
    const int max_c = 16;
    rows = malloc(sizeof *rows * (size_t)U * max_c);
    est = malloc(sizeof *est * max_c);
    res = malloc(sizeof *res * max_c);
    if (!rows || !est || !res) { st = PL_ERR_NOMEM; goto out; }
    int nc = 0;
    int seen_k[SIM_MAX_DEVICES + 1] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nf && nc < max_c; i++) {
            int *row = rows + (size_t)nc * U;
            int k = dp_unroll(&pool, fin[i].entry, U, row);
            if (pass == 0 && seen_k[k]) continue;
            if (pass == 0) seen_k[k] = 1;
            int dup = 0;
            for (int c = 0; c < nc && !dup; c++) dup = !memcmp(rows + (size_t)c * U, row, sizeof *row * (size_t)U);
            if (dup) continue;
            est[nc++] = fin[i].T;
        }
    st = policy_evaluate(ev, rows, nc, res);
    if (st != PL_OK) goto out;
    /* add in order of simulated cost */
    int order[16];
    for (int i = 0; i < nc; i++) order[i] = i;
    for (int i = 1; i < nc; i++) {
        int x = order[i], j = i - 1;
        while (j >= 0 && res[order[j]].cost_us > res[x].cost_us) { order[j + 1] = order[j]; j--; }
        order[j + 1] = x;
    }
    int *node_dev = malloc(sizeof *node_dev * (size_t)pb->g->n_nodes);
    if (!node_dev) { st = PL_ERR_NOMEM; goto out; }
    for (int r = 0; r < nc && st == PL_OK; r++) {
        int i = order[r];
        const int *row = rows + (size_t)i * U;
        int k = 1;
        for (int u = 1; u < U; u++) k += row[u] != row[u - 1];
        char label[POLICY_LABEL_LEN];
        snprintf(label, sizeof label, r == 0 ? "dp (%d stage%s)" : "dp candidate (%d stage%s)", k, k > 1 ? "s" : "");
        grouping_expand(pb->gr, row, node_dev);
        st = policy_cands_add(out, pb->gr, label, node_dev, row, &res[i], est[i]);
    }
    free(node_dev);
    if (info) {
        info->best_estimate_us = nf > 0 ? fin[0].T : NAN;
        info->best_estimate_k = 0;
        if (nf > 0) {
            int *tmp = malloc(sizeof *tmp * (size_t)U);
            if (tmp) info->best_estimate_k = dp_unroll(&pool, fin[0].entry, U, tmp);
            free(tmp);
        }
        info->n_candidates = nc;
        info->mem_feasible = mem_feasible;
    }
    (void)D;
out:
    free(rows);
    free(est);
    free(res);
    free(fin);
    free(pool.e);
    dp_tables_free(&t);
    return st;
}

/* ---- budgeted searches ------------------------------------------------------ */

static void curve_note(const search_budget *b, int i, double best) {
    if (b->curve && i < b->budget) b->curve[i] = best;
}

pl_status search_random(policy_evaluator *ev, const search_budget *b, policy_cands *out) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int U = policy_units(pb), D = policy_devices(pb);
    int batch = b->batch > 0 ? b->batch : 8;
    if (b->budget <= 0) return PL_ERR_INVALID;
    pl_rng rng;
    pl_rng_seed(&rng, b->seed);
    int *rows = malloc(sizeof *rows * (size_t)U * batch), *best = malloc(sizeof *best * (size_t)U);
    policy_eval *res = malloc(sizeof *res * (size_t)batch), best_ev = {0};
    pl_status st = PL_ERR_NOMEM;
    if (!rows || !best || !res) goto out;
    double best_cost = INFINITY;
    st = PL_OK;
    for (int done = 0; done < b->budget && st == PL_OK;) {
        int n = b->budget - done < batch ? b->budget - done : batch;
        for (int i = 0; i < n * U; i++) rows[i] = pl_rng_int(&rng, D);
        st = policy_evaluate(ev, rows, n, res);
        for (int i = 0; i < n && st == PL_OK; i++) {
            if (res[i].cost_us < best_cost) {
                best_cost = res[i].cost_us;
                best_ev = res[i];
                memcpy(best, rows + (size_t)i * U, sizeof *best * (size_t)U);
            }
            curve_note(b, done + i, best_cost);
        }
        done += n;
    }
    if (st == PL_OK) {
        int *nd = malloc(sizeof *nd * (size_t)pb->g->n_nodes);
        if (!nd) { st = PL_ERR_NOMEM; goto out; }
        grouping_expand(pb->gr, best, nd);
        st = policy_cands_add(out, pb->gr, "random", nd, best, &best_ev, 0);
        free(nd);
    }
out:
    free(rows);
    free(best);
    free(res);
    return st;
}

/* Evaluate one unit placement on the calling thread. */
static pl_status eval1(policy_evaluator *ev, const int *unit_dev, policy_eval *e) {
    return policy_evaluate(ev, unit_dev, 1, e);
}

static pl_status add_best(policy_evaluator *ev, policy_cands *out, const char *label, const int *unit_dev,
                          const policy_eval *e) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    int *nd = malloc(sizeof *nd * (size_t)pb->g->n_nodes);
    if (!nd) return PL_ERR_NOMEM;
    grouping_expand(pb->gr, unit_dev, nd);
    pl_status st = policy_cands_add(out, pb->gr, label, nd, unit_dev, e, 0);
    free(nd);
    return st;
}

pl_status search_anneal(policy_evaluator *ev, const search_budget *b, policy_cands *out) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int U = policy_units(pb), D = policy_devices(pb);
    if (b->budget <= 0) return PL_ERR_INVALID;
    pl_rng rng;
    pl_rng_seed(&rng, b->seed);
    int *cur = malloc(sizeof *cur * (size_t)U), *cand = malloc(sizeof *cand * (size_t)U),
        *best = malloc(sizeof *best * (size_t)U);
    pl_status st = PL_ERR_NOMEM;
    if (!cur || !cand || !best) goto out;
    for (int u = 0; u < U; u++) cur[u] = pl_rng_int(&rng, D);
    policy_eval ce, be, ne;
    st = eval1(ev, cur, &ce);
    if (st != PL_OK) goto out;
    be = ce;
    memcpy(best, cur, sizeof *best * (size_t)U);
    curve_note(b, 0, be.cost_us);
    const double T0 = 0.05, T1 = 1e-4;
    for (int i = 1; i < b->budget; i++) {
        double temp = T0 * pow(T1 / T0, (double)i / (double)b->budget);
        memcpy(cand, cur, sizeof *cand * (size_t)U);
        int u = pl_rng_int(&rng, U);
        if (D > 1) {
            if (pl_rng_uniform(&rng) < 0.3 && U > 1) {
                /* extend a neighbour's run over u */
                int nb = u == 0 ? 1 : u == U - 1 ? U - 2 : (pl_rng_int(&rng, 2) ? u + 1 : u - 1);
                cand[u] = cand[nb];
                if (cand[u] == cur[u]) cand[u] = (cur[u] + 1 + pl_rng_int(&rng, D - 1)) % D;
            } else {
                cand[u] = (cur[u] + 1 + pl_rng_int(&rng, D - 1)) % D;
            }
        }
        st = eval1(ev, cand, &ne);
        if (st != PL_OK) goto out;
        double delta = log(ne.cost_us / ce.cost_us);
        if (delta <= 0 || pl_rng_uniform(&rng) < exp(-delta / temp)) {
            int *tmp = cur;
            cur = cand;
            cand = tmp;
            ce = ne;
            if (ce.cost_us < be.cost_us) {
                be = ce;
                memcpy(best, cur, sizeof *best * (size_t)U);
            }
        }
        curve_note(b, i, be.cost_us);
    }
    st = add_best(ev, out, "anneal", best, &be);
out:
    free(cur);
    free(cand);
    free(best);
    return st;
}

pl_status search_local(policy_evaluator *ev, const search_budget *b, policy_cands *out) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int U = policy_units(pb), D = policy_devices(pb);
    if (b->budget <= 0) return PL_ERR_INVALID;
    pl_rng rng;
    pl_rng_seed(&rng, b->seed);
    const int n_moves = U * (D > 1 ? D - 1 : 1);
    int *cur = malloc(sizeof *cur * (size_t)U), *cand = malloc(sizeof *cand * (size_t)U),
        *best = malloc(sizeof *best * (size_t)U), *moves = malloc(sizeof *moves * (size_t)n_moves);
    pl_status st = PL_ERR_NOMEM;
    if (!cur || !cand || !best || !moves) goto out;
    policy_eval ce, be = {0}, ne;
    be.cost_us = INFINITY;
    int used = 0;
    st = PL_OK;
    while (used < b->budget && st == PL_OK) {
        for (int u = 0; u < U; u++) cur[u] = pl_rng_int(&rng, D);
        st = eval1(ev, cur, &ce);
        if (st != PL_OK) break;
        if (ce.cost_us < be.cost_us) { be = ce; memcpy(best, cur, sizeof *best * (size_t)U); }
        curve_note(b, used++, be.cost_us);
        int improved = 1;
        while (improved && used < b->budget && D > 1) {
            improved = 0;
            for (int i = 0; i < n_moves; i++) moves[i] = i;
            pl_rng_shuffle(&rng, moves, n_moves);
            for (int q = 0; q < n_moves && used < b->budget; q++) {
                int u = moves[q] / (D - 1), shift = 1 + moves[q] % (D - 1);
                memcpy(cand, cur, sizeof *cand * (size_t)U);
                cand[u] = (cur[u] + shift) % D;
                st = eval1(ev, cand, &ne);
                if (st != PL_OK) goto out;
                if (ne.cost_us < be.cost_us) { be = ne; memcpy(best, cand, sizeof *best * (size_t)U); }
                curve_note(b, used++, be.cost_us);
                if (ne.cost_us < ce.cost_us) {
                    memcpy(cur, cand, sizeof *cur * (size_t)U);
                    ce = ne;
                    improved = 1;
                    break;
                }
            }
        }
    }
    if (st == PL_OK) st = add_best(ev, out, "local", best, &be);
out:
    free(cur);
    free(cand);
    free(best);
    free(moves);
    return st;
}

/* ---- symmetry and exhaustive search ----------------------------------------- */

static int same_link(const profile_link *a, const profile_link *b) {
    if (a->n_points != b->n_points || a->latency_us != b->latency_us || a->bandwidth != b->bandwidth) return 0;
    for (int i = 0; i < a->n_points; i++)
        if (a->bytes[i] != b->bytes[i] || a->us[i] != b->us[i]) return 0;
    return 1;
}

/* 1 when device x behaves exactly like device y (costs, memory, cap). */
static int same_device(const policy_problem *pb, int x, int y) {
    const profile_data *p = pb->p;
    if (pb->caps[x] != pb->caps[y] || p->devices[x].mem_bytes != p->devices[y].mem_bytes) return 0;
    for (int k = 0; k < p->n_mb; k++)
        for (int i = 0; i < p->n_nodes; i++)
            for (int ph = 0; ph < PHASE_COUNT; ph++)
                if (p->cost_us[profile_cost_index(p, x, k, i, ph)] != p->cost_us[profile_cost_index(p, y, k, i, ph)])
                    return 0;
    return 1;
}

pl_status policy_device_automorphisms(const policy_problem *pb, int **perms, int *n_perms) {
    const profile_data *p = pb->p;
    const int D = p->n_devices;
    *perms = NULL;
    *n_perms = 0;
    int fact = 1;
    for (int i = 2; i <= D && D <= 8; i++) fact *= i;
    if (D > 8) fact = 1;
    int *out = malloc(sizeof *out * (size_t)fact * (size_t)D);
    if (!out) return PL_ERR_NOMEM;
    int n = 0;
    for (int i = 0; i < D; i++) out[i] = i; /* identity first */
    n = 1;
    if (D <= 8) {
        /* same[x][y]: x and y are interchangeable as compute devices */
        int same[8][8];
        for (int x = 0; x < D; x++)
            for (int y = 0; y < D; y++) same[x][y] = x == y || same_device(pb, x, y);
        int a[8];
        for (int i = 0; i < D; i++) a[i] = i;
        while (next_arrangement(a, D, D)) {
            int ok = 1;
            for (int x = 0; x < D && ok; x++) ok = same[x][a[x]];
            for (int x = 0; x < D && ok; x++)
                for (int y = 0; y < D && ok; y++)
                    if (x != y) ok = same_link(&p->links[x * D + y], &p->links[a[x] * D + a[y]]);
            if (ok) {
                memcpy(out + (size_t)n * D, a, sizeof *a * (size_t)D);
                n++;
            }
        }
    }
    *perms = out;
    *n_perms = n;
    return PL_OK;
}

typedef struct {
    double cost;        /* best cost found */
    policy_eval ev;     /* its evaluation */
    double fit_cost;    /* best cost among placements that fit */
    policy_eval fit_ev; /* its evaluation */
    int64_t count;      /* leaves evaluated */
    pl_status st;       /* first failure */
    int *best;          /* U */
    int *fit;           /* U */
    int *p;             /* U, current placement */
    int *live;          /* (U+1) * n_perms live permutation lists */
    int *n_live;        /* U+1 */
} exh_local;

typedef struct {
    const policy_problem *pb;
    int U, D;
    const int *perms;
    int n_perms;
    const int *prefixes;  /* n_prefixes * depth0 */
    int n_prefixes;
    int depth0;
    atomic_int next;
    exh_local *loc;       /* per worker */
} exh_job;

/* Lexicographic comparison of two placements. */
static int lex_less(const int *a, const int *b, int U) {
    for (int i = 0; i < U; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return 0;
}

/* Try value v at depth i given live[i]: fills live[i+1]; 0 when the prefix
 * stops being canonical (some relabelling maps it to a smaller one). */
static int extend_canonical(const exh_job *j, exh_local *l, int i, int v) {
    const int *L = l->live + (size_t)i * j->n_perms;
    int *L2 = l->live + (size_t)(i + 1) * j->n_perms, n2 = 0;
    for (int q = 0; q < l->n_live[i]; q++) {
        int pi = L[q];
        int img = j->perms[(size_t)pi * j->D + v];
        if (img < v) return 0;
        if (img == v) L2[n2++] = pi;
    }
    l->n_live[i + 1] = n2;
    return 1;
}

static void exh_leaf(const exh_job *j, exh_local *l, policy_worker *w) {
    policy_eval e;
    pl_status st = policy_eval_unit(j->pb, w, l->p, &e);
    if (st != PL_OK) {
        if (l->st == PL_OK) l->st = st;
        return;
    }
    l->count++;
    if (e.cost_us < l->cost || (e.cost_us == l->cost && lex_less(l->p, l->best, j->U))) {
        l->cost = e.cost_us;
        l->ev = e;
        memcpy(l->best, l->p, sizeof *l->best * (size_t)j->U);
    }
    if (!e.oom && (e.cost_us < l->fit_cost || (e.cost_us == l->fit_cost && lex_less(l->p, l->fit, j->U)))) {
        l->fit_cost = e.cost_us;
        l->fit_ev = e;
        memcpy(l->fit, l->p, sizeof *l->fit * (size_t)j->U);
    }
}

static void exh_dfs(const exh_job *j, exh_local *l, policy_worker *w, int i) {
    if (l->st != PL_OK) return;
    if (i == j->U) {
        exh_leaf(j, l, w);
        return;
    }
    for (int v = 0; v < j->D; v++) {
        if (!extend_canonical(j, l, i, v)) continue;
        l->p[i] = v;
        exh_dfs(j, l, w, i + 1);
    }
}

/* Set up live[0] = all permutations. */
static void exh_root(const exh_job *j, exh_local *l) {
    for (int q = 0; q < j->n_perms; q++) l->live[q] = q;
    l->n_live[0] = j->n_perms;
}

static void exh_worker(void *arg, policy_worker *w) {
    exh_job *j = arg;
    exh_local *l = &j->loc[w->index];
    for (;;) {
        int t = atomic_fetch_add(&j->next, 1);
        if (t >= j->n_prefixes) break;
        const int *pre = j->prefixes + (size_t)t * j->depth0;
        exh_root(j, l);
        int ok = 1;
        for (int i = 0; i < j->depth0 && ok; i++) {
            ok = extend_canonical(j, l, i, pre[i]);
            l->p[i] = pre[i];
        }
        if (ok) exh_dfs(j, l, w, j->depth0);
    }
}

/* Collect canonical prefixes of length depth into an array. */
static pl_status collect_prefixes(const exh_job *j, exh_local *l, int depth, int i, int **arr, int *n, int *cap) {
    if (i == depth) {
        if (*n == *cap) {
            int nc = *cap ? 2 * *cap : 256;
            int *a = realloc(*arr, sizeof *a * (size_t)nc * (size_t)(depth ? depth : 1));
            if (!a) return PL_ERR_NOMEM;
            *arr = a;
            *cap = nc;
        }
        memcpy(*arr + (size_t)*n * depth, l->p, sizeof(int) * (size_t)depth);
        (*n)++;
        return PL_OK;
    }
    for (int v = 0; v < j->D; v++) {
        if (!extend_canonical(j, l, i, v)) continue;
        l->p[i] = v;
        pl_status st = collect_prefixes(j, l, depth, i + 1, arr, n, cap);
        if (st != PL_OK) return st;
    }
    return PL_OK;
}

pl_status search_exhaustive(policy_evaluator *ev, double max_evals, policy_cands *out,
                            search_exhaustive_info *info, char *msg, size_t len) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int U = policy_units(pb), D = policy_devices(pb), NT = policy_evaluator_threads(ev);
    int *perms = NULL, n_perms = 0;
    pl_status st = policy_device_automorphisms(pb, &perms, &n_perms);
    if (st != PL_OK) return st;
    /* Burnside: orbits = (1/|G|) sum over g of fix(g)^U */
    double orbits = 0.0;
    for (int q = 0; q < n_perms; q++) {
        int fix = 0;
        for (int d = 0; d < D; d++) fix += perms[(size_t)q * D + d] == d;
        orbits += pow((double)fix, (double)U);
    }
    orbits /= n_perms;
    double space = pow((double)D, (double)U);
    if (info) {
        memset(info, 0, sizeof *info);
        info->space = space;
        info->orbits = orbits;
        info->n_automorphisms = n_perms;
    }
    if (orbits > max_evals) {
        free(perms);
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "exhaustive search needs %.3g simulations (%d units on %d devices, %d relabellings), "
                       "over the limit of %.3g; raise --max-evals or use --groups colocate",
                       orbits, U, D, n_perms, max_evals);
    }
    double t0 = pl_now_us();
    exh_job j = {pb, U, D, perms, n_perms, NULL, 0, 0, 0, NULL};
    atomic_init(&j.next, 0);
    j.loc = calloc((size_t)NT, sizeof *j.loc);
    st = PL_ERR_NOMEM;
    if (!j.loc) goto out;
    for (int t = 0; t < NT; t++) {
        exh_local *l = &j.loc[t];
        l->cost = l->fit_cost = INFINITY;
        l->best = calloc((size_t)U, sizeof *l->best);
        l->fit = calloc((size_t)U, sizeof *l->fit);
        l->p = calloc((size_t)U, sizeof *l->p);
        l->live = malloc(sizeof *l->live * (size_t)(U + 1) * (size_t)n_perms);
        l->n_live = calloc((size_t)U + 1, sizeof *l->n_live);
        if (!l->best || !l->fit || !l->p || !l->live || !l->n_live) goto out;
    }
    /* split the tree at the shallowest depth that gives 32 tasks per thread */
    int depth = 0, cap = 0;
    int *pre = NULL, npre = 0;
    for (depth = 0; depth <= U; depth++) {
        free(pre); /* rows grow with the depth */
        pre = NULL;
        npre = cap = 0;
        exh_root(&j, &j.loc[0]);
        st = collect_prefixes(&j, &j.loc[0], depth, 0, &pre, &npre, &cap);
        if (st != PL_OK) { free(pre); goto out; }
        if (npre >= 32 * NT || depth == U) break;
    }
    j.prefixes = pre;
    j.n_prefixes = npre;
    j.depth0 = depth;
    policy_evaluator_run_all(ev, exh_worker, &j);
    free(pre);
    /* merge: lowest cost, then lexicographically smallest */
    exh_local *b = NULL, *f = NULL;
    int64_t count = 0;
    st = PL_OK;
    for (int t = 0; t < NT; t++) {
        exh_local *l = &j.loc[t];
        count += l->count;
        if (l->st != PL_OK && st == PL_OK) st = l->st;
        if (l->cost < INFINITY &&
            (!b || l->cost < b->cost || (l->cost == b->cost && lex_less(l->best, b->best, U))))
            b = l;
        if (l->fit_cost < INFINITY &&
            (!f || l->fit_cost < f->fit_cost || (l->fit_cost == f->fit_cost && lex_less(l->fit, f->fit, U))))
            f = l;
    }
    if (st != PL_OK) goto out;
    if (info) {
        info->evaluated = count;
        info->wall_s = (pl_now_us() - t0) * 1e-6;
    }
    if (b) st = add_best(ev, out, "exhaustive", b->best, &b->ev);
    if (st == PL_OK && b && b->ev.oom && f) st = add_best(ev, out, "exhaustive (fits)", f->fit, &f->fit_ev);
out:
    if (j.loc)
        for (int t = 0; t < NT; t++) {
            free(j.loc[t].best);
            free(j.loc[t].fit);
            free(j.loc[t].p);
            free(j.loc[t].live);
            free(j.loc[t].n_live);
        }
    free(j.loc);
    free(perms);
    return st;
}
