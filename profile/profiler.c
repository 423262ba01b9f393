/*
 * profiler.c: measures a machine on the engine into a profile database,
 * one committed unit at a time (profiler.h says what and in which order),
 * and reads profiles back for the run-to-run comparison and the sanity
 * check of node sums against whole steps.
 */
#include "profiler.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dist_group.h"
#include "launcher.h"
#include "param_memory.h"
#include "schedule.h"
#include "util.h"

#define KIB 1024LL
#define MIB (1024LL * 1024LL)
#define GIB (1024LL * MIB)

profiler_opts profiler_opts_default(void) {
    profiler_opts o;
    memset(&o, 0, sizeof o);
    o.nodes = hw_probe_opts_default();
    o.xfer = hw_probe_opts_default();
    o.xfer.warmup = 2;
    o.xfer.reps = 15;
    o.anchor_warmup = 3;
    o.anchor_steps = 20;
    o.link_min_bytes = 4 * KIB;
    o.link_max_bytes = 0;
    o.points_per_octave = 2;
    return o;
}

/* ---- pieces ---------------------------------------------------------------- */

void profiler_machine_name(const char *device_name, int n_devices, char *buf, size_t len) {
    char low[64] = "";
    size_t k = 0;
    const char *s = device_name ? device_name : "";
    if (!strncasecmp(s, "nvidia ", 7)) s += 7;
    for (; *s && k + 1 < sizeof low; s++) {
        unsigned char c = (unsigned char)tolower((unsigned char)*s);
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) low[k++] = (char)c;
    }
    low[k] = 0;
    snprintf(buf, len, "%sx%d", k ? low : "device", n_devices);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t round4(double x) {
    int64_t v = (int64_t)llround(x / 4.0) * 4;
    return v < 4 ? 4 : v;
}

pl_status profiler_link_sizes(const graph *g, const int *mb_sizes, int n_mb, int64_t min_bytes, int64_t max_bytes,
                              int points_per_octave, int64_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!g || min_bytes < 4 || max_bytes < min_bytes || points_per_octave < 2 || n_mb < 0 || (n_mb && !mb_sizes))
        return PL_ERR_INVALID;
    const double octaves = log2((double)max_bytes / (double)min_bytes);
    const int n_grid = (int)ceil(octaves * points_per_octave - 1e-9) + 1;
    const int cap = n_grid + 1 + 3 * n_mb * g->n_nodes;
    int64_t *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return PL_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < n_grid; i++) {
        double s = (double)min_bytes * exp2((double)i / points_per_octave);
        if (s > (double)max_bytes) s = (double)max_bytes;
        v[k++] = round4(s);
    }
    v[k++] = round4((double)max_bytes) > max_bytes ? max_bytes / 4 * 4 : round4((double)max_bytes);
    for (int j = 0; j < n_mb; j++)
        for (int i = 0; i < g->n_nodes; i++) {
            if (graph_n_consumers(g, i) == 0) continue; /* nothing sends the loss */
            hw_node_mem m;
            hw_node_mem_floats(g, i, mb_sizes[j], &m);
            const double s = (double)m.out * 4.0;
            const double near[3] = {s, s * exp2(-0.25), s * exp2(0.25)};
            for (int q = 0; q < 3; q++) {
                int64_t x = q == 0 ? (int64_t)s : round4(near[q]);
                if (x >= 1 && x <= max_bytes) v[k++] = x;
            }
        }
    qsort(v, (size_t)k, sizeof *v, cmp_i64);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || v[i] != v[u - 1]) v[u++] = v[i];
    *out = v;
    *n = u;
    return PL_OK;
}

void profiler_fit_link(int n, const double *bytes, const double *us, double *latency_us, double *bandwidth) {
    *latency_us = n > 0 ? us[0] : 0.0;
    *bandwidth = 0.0;
    if (n <= 0) return;
    if (n == 1) {
        if (us[0] > 0) *bandwidth = bytes[0] / (us[0] * 1e-6);
        return;
    }
    int first = n - 2;
    while (first > 0 && bytes[first - 1] >= bytes[n - 1] / 4.0) first--;
    const int m = n - first;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = first; i < n; i++) {
        sx += bytes[i];
        sy += us[i];
        sxx += bytes[i] * bytes[i];
        sxy += bytes[i] * us[i];
    }
    const double den = m * sxx - sx * sx;
    if (den <= 0) return;
    const double slope = (m * sxy - sx * sy) / den; /* us per byte */
    if (slope > 0) *bandwidth = 1e6 / slope;
}

void profiler_node_mem(const graph *g, int i, int max_mb, int64_t ws_bytes, profile_node_mem *m) {
    profiler_node_mem_prec(g, i, max_mb, ws_bytes, 0, m);
}

void profiler_node_mem_prec(const graph *g, int i, int max_mb, int64_t ws_bytes, int bf16, profile_node_mem *m) {
    const graph_node *n = &g->nodes[i];
    if (max_mb < 1) max_mb = 1;
    hw_node_mem one, big;
    hw_node_mem_floats_prec(g, i, 1, bf16, &one);
    hw_node_mem_floats_prec(g, i, max_mb, bf16, &big);
    int keep_out = 0;
    for (int c = g->cons_start[i]; c < g->cons_start[i + 1]; c++) {
        op_kind k = g->nodes[g->cons[c]].kind;
        if (hw_kind_bwd_reads_input(k) || k == OP_LOSS) keep_out = 1;
    }
    memset(m, 0, sizeof *m);
    m->param_bytes = 4 * n->params;
    m->out_bytes_per_sample = one.out * 4;
    const int64_t act = 4 * (big.saved + (keep_out ? big.out : 0));
    m->act_bytes_per_sample = (act + max_mb - 1) / max_mb;
    m->fwd_workspace_bytes = 4 * big.fwd_scratch + ws_bytes;
    m->bwd_workspace_bytes = 4 * big.bwd_scratch + ws_bytes;
    m->workspace_bytes = m->fwd_workspace_bytes > m->bwd_workspace_bytes ? m->fwd_workspace_bytes
                                                                         : m->bwd_workspace_bytes;
}

pl_status profiler_engine_node_mem(const graph *g, const profile_data *p, profile_node_mem *out, char *msg,
                                   size_t len) {
    if (!g || !p || !out || p->n_nodes != g->n_nodes || p->n_nodes < 1 || p->n_mb < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile is not one of this graph (%d nodes against %d)",
                       p ? p->n_nodes : 0, g ? g->n_nodes : 0);
    const int64_t ws = profile_backend_workspace(p);
    for (int i = 0; i < g->n_nodes; i++)
        profiler_node_mem_prec(g, i, p->mb_sizes[p->n_mb - 1], ws, p->bf16, &out[i]);
    return PL_OK;
}

/* ---- the run ------------------------------------------------------------------ */

typedef struct {
    profiler_unit_kind kind;
    int dev, peer, mb;
    int64_t bytes;
} unit;

typedef struct {
    hw_engine *e;
    profile_db *db;
    const graph *g;
    const profiler_opts *o;
    profiler_result *r;
    char machine[PROFILE_NAME_LEN];
    char key[PROFILE_NAME_LEN];
    float *model;      /* model view for the anchors and node probes, made on first need */
    int n_units;
    int measured;
    char *msg;
    size_t len;
} run_ctx;

static void unit_label(const unit *u, char *buf, size_t len) {
    char b[32];
    switch (u->kind) {
    case PROFILER_UNIT_MACHINE: snprintf(buf, len, "machine"); break;
    case PROFILER_UNIT_LINK_POINT:
        pl_format_bytes((double)u->bytes, b, sizeof b);
        snprintf(buf, len, "link %d->%d %s", u->dev, u->peer, b);
        break;
    case PROFILER_UNIT_ANCHOR: snprintf(buf, len, "step dev %d mb %d", u->dev, u->mb); break;
    case PROFILER_UNIT_ADAMW: snprintf(buf, len, "adamw dev %d", u->dev); break;
    case PROFILER_UNIT_NODES: snprintf(buf, len, "nodes dev %d mb %d", u->dev, u->mb); break;
    case PROFILER_UNIT_COLLECTIVE: snprintf(buf, len, "collective"); break;
    }
}

/* Tell the callback; non-zero means stop. */
static int notify(run_ctx *c, const unit *u, int index, profiler_stage stage, const hw_probe_stats *stats) {
    if (!c->o->progress) return 0;
    char label[96];
    unit_label(u, label, sizeof label);
    profiler_progress p = {stage, u->kind, index, c->n_units, c->measured, u->dev, u->peer, u->mb, u->bytes, label,
                           stats};
    return c->o->progress(c->o->progress_ctx, &p);
}

static pl_status db_error(run_ctx *c, pl_status st, const char *what) {
    return pl_fail(c->msg, c->len, st, "%s: %s", what, profile_db_last_error(c->db));
}

/* Is the unit already in the file? */
static pl_status unit_present(run_ctx *c, const unit *u, int *has) {
    *has = 0;
    pl_status st = PL_OK;
    switch (u->kind) {
    case PROFILER_UNIT_MACHINE:
    case PROFILER_UNIT_COLLECTIVE: break; /* not a unit of profiler_run */
    case PROFILER_UNIT_LINK_POINT:
        st = profile_db_has_link_point(c->db, c->machine, u->dev, u->peer, (double)u->bytes, has);
        break;
    case PROFILER_UNIT_ANCHOR: {
        double us;
        st = profile_db_get_step_anchor(c->db, c->key, u->dev, u->mb, &us, NULL);
        if (st == PL_OK) *has = 1;
        if (st == PL_ERR_NOT_FOUND) st = PL_OK;
        break;
    }
    case PROFILER_UNIT_ADAMW:
    case PROFILER_UNIT_NODES: {
        int all = 1;
        for (int i = 0; i < c->g->n_nodes && all && st == PL_OK; i++)
            for (int ph = 0; ph < PHASE_COUNT && all && st == PL_OK; ph++) {
                if ((u->kind == PROFILER_UNIT_ADAMW) != (ph == PHASE_OPT)) continue;
                int h = 0;
                st = profile_db_has_node_cost(c->db, c->machine, c->key, u->dev, i, (cost_phase)ph, u->mb, &h);
                all = h;
            }
        *has = st == PL_OK && all;
        break;
    }
    }
    return st == PL_OK ? PL_OK : db_error(c, st, "reading the file");
}

/* Write rows[0..n) of a unit in one transaction, telling the callback when
 * half are written. Each row is (phase, node, us, spread, b_us, w_us) for
 * node costs (b_us, w_us: a backward's B and W parts, NaN where not timed
 * apart); link points and anchors pass one row with node = -1. */
typedef struct {
    cost_phase ph;
    int node;
    double us, spread;
    double b_us, w_us;
} row;

static pl_status write_unit(run_ctx *c, const unit *u, int index, const row *rows, int n) {
    pl_status st = profile_db_begin(c->db);
    if (st != PL_OK) return db_error(c, st, "starting a transaction");
    for (int i = 0; i < n; i++) {
        const row *w = &rows[i];
        switch (u->kind) {
        case PROFILER_UNIT_LINK_POINT:
            st = profile_db_put_link_point(c->db, c->machine, u->dev, u->peer, (double)u->bytes, w->us, w->spread);
            break;
        case PROFILER_UNIT_ANCHOR:
            st = profile_db_put_step_anchor(c->db, c->machine, c->key, u->dev, u->mb, w->us, w->spread);
            break;
        default:
            if (w->ph == PHASE_BWD)
                st = profile_db_put_bwd_cost(c->db, c->machine, c->key, u->dev, w->node, u->mb, w->us, w->spread,
                                             w->b_us, w->w_us);
            else
                st = profile_db_put_node_cost(c->db, c->machine, c->key, u->dev, w->node, w->ph, u->mb, w->us,
                                              w->spread);
            break;
        }
        if (st != PL_OK) {
            db_error(c, st, "writing a unit");
            profile_db_rollback(c->db);
            return st;
        }
        if (i == n / 2 && notify(c, u, index, PROFILER_WRITING, NULL)) {
            profile_db_rollback(c->db);
            return pl_fail(c->msg, c->len, PL_ERR_INTERRUPTED, "stopped while writing a unit (rolled back)");
        }
    }
    if ((st = profile_db_commit(c->db)) != PL_OK) {
        db_error(c, st, "committing a unit");
        profile_db_rollback(c->db);
        return st;
    }
    return PL_OK;
}

static pl_status need_model(run_ctx *c) {
    if (c->model) return PL_OK;
    int64_t *off = malloc(sizeof *off * (size_t)(c->g->n_nodes + 1));
    if (!off) return pl_fail(c->msg, c->len, PL_ERR_NOMEM, "out of host memory");
    int64_t total = hw_model_param_offsets(c->g, off);
    free(off);
    c->model = malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
    if (!c->model) return pl_fail(c->msg, c->len, PL_ERR_NOMEM, "out of host memory for the parameters");
    hw_params_init(c->g, c->o->nodes.seed, c->model);
    return PL_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of sorted v[0..n) with linear interpolation (n >= 1). */
static double quantile_sorted(const double *v, int n, double q) {
    double at = q * (double)(n - 1);
    int lo = (int)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (at - (double)lo);
}

/* A whole single-device step of a batch of mb samples on the engine's plan. */
static pl_status measure_anchor(run_ctx *c, const unit *u, row *w) {
    char m2[512] = "";
    gpt_config cfg = c->g->cfg;
    cfg.batch = u->mb;
    graph *g = NULL;
    hw_program *plan = NULL;
    int *place = NULL, *tok = NULL, *tgt = NULL;
    pl_status st = graph_build_gpt(&cfg, &g, m2, sizeof m2);
    if (st == PL_OK) st = need_model(c);
    if (st != PL_OK) goto out;
    place = malloc(sizeof(int) * (size_t)g->n_nodes);
    tok = malloc(sizeof(int) * (size_t)cfg.batch * cfg.seq_len);
    tgt = malloc(sizeof(int) * (size_t)cfg.batch * cfg.seq_len);
    if (!place || !tok || !tgt) {
        st = pl_fail(m2, sizeof m2, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    for (int i = 0; i < g->n_nodes; i++) place[i] = u->dev;
    hw_program_opts po = {.placement = place, .sched = schedule_make(1, SCHED_GPIPE), .caps = NULL,
                       .seed = c->o->nodes.seed, .init_params = c->model, .adamw = hw_adamw_default()};
    if ((st = hw_program_create(c->e, g, &po, &plan, NULL, m2, sizeof m2)) != PL_OK) goto out;
    hw_make_batch(&cfg, c->o->nodes.seed, tok, tgt);
    if ((st = hw_program_set_batch(plan, tok, tgt, m2, sizeof m2)) != PL_OK) goto out;
    hw_timing t;
    if ((st = hw_program_time(plan, c->o->anchor_warmup, c->o->anchor_steps, &t, m2, sizeof m2)) != PL_OK) goto out;
    int k = t.steps < 64 ? t.steps : 64;
    double v[64];
    memcpy(v, t.step_us, sizeof(double) * (size_t)k);
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    w->ph = PHASE_FWD;
    w->node = -1;
    w->us = t.median_us;
    w->spread = quantile_sorted(v, k, 0.75) - quantile_sorted(v, k, 0.25);
out:
    if (st != PL_OK) pl_fail(c->msg, c->len, st, "step on device %d at micro-batch %d: %s", u->dev, u->mb, m2);
    hw_program_destroy(plan);
    graph_destroy(g);
    free(place);
    free(tok);
    free(tgt);
    return st;
}

/* Measure one unit into rows (*n of them); stats gets the probe's figures. */
static pl_status measure_unit(run_ctx *c, const unit *u, row *rows, int *n, hw_probe_stats *stats) {
    const graph *g = c->g;
    const int nn = g->n_nodes;
    char m2[512] = "";
    pl_status st = PL_OK;
    *n = 0;
    memset(stats, 0, sizeof *stats);
    switch (u->kind) {
    case PROFILER_UNIT_MACHINE:
    case PROFILER_UNIT_COLLECTIVE: return PL_OK; /* not a unit of profiler_run */
    case PROFILER_UNIT_LINK_POINT: {
        double us = 0, spread = 0;
        st = hw_probe_transfer(c->e, u->dev, u->peer, 1, &u->bytes, &c->o->xfer, &us, &spread, stats, m2, sizeof m2);
        if (st != PL_OK) return pl_fail(c->msg, c->len, st, "transfer %d -> %d: %s", u->dev, u->peer, m2);
        rows[0] = (row){PHASE_FWD, -1, us, spread, NAN, NAN};
        *n = 1;
        return PL_OK;
    }
    case PROFILER_UNIT_ANCHOR:
        if ((st = measure_anchor(c, u, &rows[0])) == PL_OK) *n = 1;
        return st;
    case PROFILER_UNIT_ADAMW:
    case PROFILER_UNIT_NODES: {
        double *v = malloc(sizeof *v * (size_t)nn * 6);
        if (!v) return pl_fail(c->msg, c->len, PL_ERR_NOMEM, "out of host memory");
        if (u->kind == PROFILER_UNIT_ADAMW) {
            st = hw_probe_adamw(c->e, g, u->dev, &c->o->nodes, v, v + nn, stats, m2, sizeof m2);
            for (int i = 0; i < nn && st == PL_OK; i++) rows[(*n)++] = (row){PHASE_OPT, i, v[i], v[nn + i], NAN, NAN};
        } else if ((st = need_model(c)) == PL_OK) {
            /* B and W apart, for the nodes whose backward splits */
            st = hw_probe_nodes_split(c->e, g, u->dev, u->mb, c->model, &c->o->nodes, v, v + nn, v + 2 * nn,
                                      v + 3 * nn, v + 4 * nn, v + 5 * nn, stats, m2, sizeof m2);
            for (int i = 0; i < nn && st == PL_OK; i++) {
                rows[(*n)++] = (row){PHASE_FWD, i, v[i], v[nn + i], NAN, NAN};
                rows[(*n)++] = (row){PHASE_BWD, i, v[2 * nn + i], v[3 * nn + i], v[4 * nn + i], v[5 * nn + i]};
            }
        } else {
            free(v);
            return st;
        }
        free(v);
        if (st != PL_OK) {
            char label[96];
            unit_label(u, label, sizeof label);
            return pl_fail(c->msg, c->len, st, "%s: %s", label, m2);
        }
        return PL_OK;
    }
    }
    return PL_OK;
}

/* The machine, its devices, link kinds (for links not yet stored) and the
 * graph with the engine's node memory, in one transaction. */
static pl_status write_machine(run_ctx *c, const hw_machine_info *mi, int max_mb) {
    const graph *g = c->g;
    const int nd = mi->n_devices;
    char topo[256] = "", msg2[256] = "";
    size_t off = 0;
#define TOPO(...)                                                                                  \
    do {                                                                                           \
        if (off < sizeof topo) {                                                                   \
            int w_ = snprintf(topo + off, sizeof topo - off, __VA_ARGS__);                        \
            if (w_ > 0) off += (size_t)w_;                                                         \
        }                                                                                          \
    } while (0)
    if (!strcmp(mi->backend, "cpu")) {
        TOPO("%d CPU virtual device%s (host memory; transfers are memcpy)", nd, nd > 1 ? "s" : "");
    } else {
        char mem[32];
        pl_format_bytes((double)mi->dev[0].mem_bytes, mem, sizeof mem);
        TOPO("%d x %s (%s, %d SMs, sm_%d%d)", nd, mi->dev[0].name, mem, mi->dev[0].sm_count, mi->dev[0].cc_major,
             mi->dev[0].cc_minor);
    }
    hw_link_kind *kinds = calloc((size_t)nd * nd, sizeof *kinds);
    int *links = calloc((size_t)nd * nd, sizeof *links);
    profile_node_mem *mem = NULL;
    pl_status st = PL_OK;
    if (!kinds || !links) {
        st = pl_fail(c->msg, c->len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            if (a == b) continue;
            int rank = -1;
            if ((st = hw_probe_link(c->e, a, b, &kinds[a * nd + b], &links[a * nd + b], &rank, msg2, sizeof msg2)) !=
                PL_OK) {
                pl_fail(c->msg, c->len, st, "link %d -> %d: %s", a, b, msg2);
                goto out;
            }
            if (a < b && strcmp(mi->backend, "cpu") != 0) {
                if (kinds[a * nd + b] == HW_LINK_NVLINK)
                    TOPO("; %d-%d NVLink x%d", a, b, links[a * nd + b]);
                else
                    TOPO("; %d-%d %s", a, b, hw_link_kind_name(kinds[a * nd + b]));
                if (rank >= 0) TOPO(" (P2P rank %d)", rank);
            }
        }
    if (strcmp(mi->backend, "cpu") != 0 && !mi->nvml) TOPO("; NVML unavailable");
#undef TOPO
    /* the engine's memory figures of the graph's nodes */
    mem = malloc(sizeof *mem * (size_t)g->n_nodes);
    if (!mem) {
        st = pl_fail(c->msg, c->len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    const int64_t ws_bytes = hw_engine_backend(c->e)->ops->workspace_bytes;
    for (int i = 0; i < g->n_nodes; i++)
        profiler_node_mem_prec(g, i, max_mb, ws_bytes, hw_engine_precision(c->e) == HW_PREC_BF16, &mem[i]);
    if ((st = profile_db_begin(c->db)) != PL_OK) {
        db_error(c, st, "starting a transaction");
        goto out;
    }
    profile_machine_info info = {.name = c->machine, .source = "measured", .host = mi->host, .driver = mi->driver,
                                 .cuda = mi->cuda, .topology = topo};
    if ((st = profile_db_put_machine(c->db, &info)) != PL_OK) goto out_rollback;
    for (int d = 0; d < nd; d++) {
        profile_device pd;
        memset(&pd, 0, sizeof pd);
        snprintf(pd.name, sizeof pd.name, "%s", mi->dev[d].name);
        pd.mem_bytes = mi->dev[d].mem_bytes;
        pd.sm_count = mi->dev[d].sm_count;
        if ((st = profile_db_put_device(c->db, c->machine, d, &pd)) != PL_OK) goto out_rollback;
    }
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            if (a == b) continue;
            char kind[32];
            st = profile_db_link_kind(c->db, a, b, kind, sizeof kind);
            if (st == PL_OK) continue; /* keep its fitted latency and bandwidth */
            if (st != PL_ERR_NOT_FOUND) goto out_rollback;
            if ((st = profile_db_put_link(c->db, c->machine, a, b, 0.0, 0.0, hw_link_kind_name(kinds[a * nd + b]))) !=
                PL_OK)
                goto out_rollback;
        }
    if ((st = profile_db_put_graph(c->db, g, mem)) != PL_OK) goto out_rollback;
    if ((st = profile_db_commit(c->db)) != PL_OK) goto out_rollback;
    goto out;
out_rollback:
    db_error(c, st, "writing the machine");
    profile_db_rollback(c->db);
out:
    free(mem);
    free(kinds);
    free(links);
    return st;
}

/* Fit every link's latency and bandwidth from its stored curve. */
static pl_status fit_links(run_ctx *c) {
    char m2[1024] = "";
    profile_data *p = NULL;
    pl_status st = profile_db_load_profile(c->db, &c->g->cfg, &p, NULL, m2, sizeof m2);
    if (st != PL_OK) return pl_fail(c->msg, c->len, st, "reading the profile back: %s", m2);
    if ((st = profile_db_begin(c->db)) != PL_OK) {
        profile_data_destroy(p);
        return db_error(c, st, "starting a transaction");
    }
    for (int a = 0; a < p->n_devices && st == PL_OK; a++)
        for (int b = 0; b < p->n_devices && st == PL_OK; b++) {
            if (a == b) continue;
            const profile_link *l = &p->links[a * p->n_devices + b];
            double lat = 0, bw = 0;
            profiler_fit_link(l->n_points, l->bytes, l->us, &lat, &bw);
            st = profile_db_put_link(c->db, c->machine, a, b, lat, bw, NULL);
        }
    profile_data_destroy(p);
    if (st == PL_OK) st = profile_db_commit(c->db);
    if (st != PL_OK) {
        db_error(c, st, "writing the link fits");
        profile_db_rollback(c->db);
    }
    return st;
}

pl_status profiler_run(hw_engine *e, profile_db *db, const gpt_config *cfg, const profiler_opts *o,
                       profiler_result *r, char *msg, size_t len) {
    profiler_result local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    if (!e || !db || !cfg || !o) return pl_fail(msg, len, PL_ERR_INVALID, "profiler_run: NULL argument");
    if (o->n_mb < 1 || !o->mb_sizes) return pl_fail(msg, len, PL_ERR_INVALID, "no micro-batch sizes to profile");
    for (int k = 0; k < o->n_mb; k++)
        if (o->mb_sizes[k] < 1 || (k && o->mb_sizes[k] <= o->mb_sizes[k - 1]))
            return pl_fail(msg, len, PL_ERR_INVALID, "micro-batch sizes must be ascending and positive");
    if (o->anchor_steps < 1 || o->anchor_warmup < 0 || o->points_per_octave < 2 || o->link_min_bytes < 4 ||
        o->link_max_bytes < 0 || o->nodes.reps < 1 || o->xfer.reps < 1)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "profiler options: need anchor steps >= 1, 2+ points per octave, sizes >= 4 bytes, reps >= 1");
    const double t0 = pl_now_us();
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.db = db;
    c.o = o;
    c.r = r;
    c.msg = msg;
    c.len = len;
    graph *g = NULL;
    unit *units = NULL;
    int64_t *sizes = NULL;
    row *rows = NULL;
    int n_sizes = 0;
    pl_status st = graph_build_gpt(cfg, &g, msg, len);
    if (st != PL_OK) return st;
    c.g = g;
    gpt_config_key(cfg, c.key, sizeof c.key);
    hw_machine_info mi;
    if ((st = hw_probe_machine(e, &mi, msg, len)) != PL_OK) goto out;
    if (o->machine && *o->machine) {
        if (strlen(o->machine) >= PROFILE_NAME_LEN) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "machine name '%s' is too long", o->machine);
            goto out;
        }
        snprintf(c.machine, sizeof c.machine, "%s", o->machine);
    } else {
        profiler_machine_name(mi.dev[0].name, mi.n_devices, c.machine, sizeof c.machine);
    }
    snprintf(r->machine, sizeof r->machine, "%s", c.machine);
    snprintf(r->graph_key, sizeof r->graph_key, "%s", c.key);

    const int nd = mi.n_devices;
    const int64_t max_bytes = o->link_max_bytes > 0 ? o->link_max_bytes
                              : strcmp(mi.backend, "cpu") == 0 ? 16 * MIB
                                                               : GIB;
    if (max_bytes < o->link_min_bytes) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "the link sweep's largest size is below its smallest");
        goto out;
    }
    if (nd > 1 && (st = profiler_link_sizes(g, o->mb_sizes, o->n_mb, o->link_min_bytes, max_bytes,
                                            o->points_per_octave, &sizes, &n_sizes)) != PL_OK) {
        pl_fail(msg, len, st, "could not plan the link sweep");
        goto out;
    }
    const int n_units = nd * (nd - 1) * n_sizes + nd * o->n_mb * 2 + nd;
    units = malloc(sizeof *units * (size_t)(n_units > 0 ? n_units : 1));
    rows = malloc(sizeof *rows * (size_t)(2 * g->n_nodes + 1));
    if (!units || !rows) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    int k = 0;
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++)
            if (a != b)
                for (int i = 0; i < n_sizes; i++) units[k++] = (unit){PROFILER_UNIT_LINK_POINT, a, b, 0, sizes[i]};
    for (int d = 0; d < nd; d++)
        for (int j = 0; j < o->n_mb; j++) units[k++] = (unit){PROFILER_UNIT_ANCHOR, d, -1, o->mb_sizes[j], 0};
    for (int d = 0; d < nd; d++) units[k++] = (unit){PROFILER_UNIT_ADAMW, d, -1, 0, 0};
    for (int d = 0; d < nd; d++)
        for (int j = 0; j < o->n_mb; j++) units[k++] = (unit){PROFILER_UNIT_NODES, d, -1, o->mb_sizes[j], 0};
    c.n_units = k;
    r->units_total = k;

    if ((st = write_machine(&c, &mi, o->mb_sizes[o->n_mb - 1])) != PL_OK) goto out;

    for (int i = 0; i < c.n_units; i++) {
        const unit *u = &units[i];
        int has = 0;
        if (!o->force && (st = unit_present(&c, u, &has)) != PL_OK) goto out;
        if (has) {
            r->units_skipped++;
            if (notify(&c, u, i, PROFILER_SKIPPED, NULL)) {
                st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "stopped by request");
                goto out;
            }
            continue;
        }
        if (notify(&c, u, i, PROFILER_START, NULL)) {
            st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "stopped by request");
            goto out;
        }
        int n_rows = 0;
        hw_probe_stats stats;
        if ((st = measure_unit(&c, u, rows, &n_rows, &stats)) != PL_OK) goto out;
        if ((st = write_unit(&c, u, i, rows, n_rows)) != PL_OK) goto out;
        c.measured++;
        r->units_measured++;
        r->starved_reps += stats.starved;
        r->unclean_units += stats.unclean;
        const int probe = u->kind != PROFILER_UNIT_ANCHOR && u->kind != PROFILER_UNIT_MACHINE;
        if (notify(&c, u, i, PROFILER_DONE, probe ? &stats : NULL)) {
            st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "stopped by request");
            goto out;
        }
    }
    if (nd > 1 && (st = fit_links(&c)) != PL_OK) goto out;
    st = PL_OK;
out:
    r->wall_us = pl_now_us() - t0;
    free(c.model);
    free(units);
    free(rows);
    free(sizes);
    graph_destroy(g);
    return st;
}

/* ---- collective curves ---------------------------------------------------------- */

profiler_coll_opts profiler_coll_opts_default(void) {
    profiler_coll_opts o;
    memset(&o, 0, sizeof o);
    o.ranks = 2;
    o.min_bytes = 4;
    o.max_bytes = 64 * MIB;
    o.warmup = 3;
    o.reps = 15;
    o.timeout_s = 30.0;
    return o;
}

pl_status profiler_coll_sizes(int64_t min_bytes, int64_t max_bytes, int64_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (min_bytes < 4 || min_bytes % 4 || max_bytes < min_bytes || max_bytes > ((int64_t)1 << 40))
        return PL_ERR_INVALID;
    int k = 0;
    for (int64_t b = min_bytes; b <= max_bytes; b *= 4) k++;
    int64_t top = min_bytes;
    while (top * 4 <= max_bytes) top *= 4;
    const int extra = top != max_bytes;
    int64_t *v = malloc(sizeof *v * (size_t)(k + extra));
    if (!v) return PL_ERR_NOMEM;
    int i = 0;
    for (int64_t b = min_bytes; b <= max_bytes; b *= 4) v[i++] = b;
    if (extra) v[i++] = max_bytes / 4 * 4;
    *out = v;
    *n = i;
    return PL_OK;
}

/* "4 B", "64 KiB", "1 MiB": a size in the largest binary unit dividing it. */
static void coll_size_label(int64_t bytes, char *buf, size_t len) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, u++;
    snprintf(buf, len, "%lld %s", (long long)bytes, unit[u]);
}

/* One unit's job for the ranks; times is a shared mapping the parent reads. */
typedef struct {
    profile_coll_op op;
    int64_t bytes;
    int warmup, reps;
    double *times; /* reps entries: rank 0 writes the max over the ranks */
} coll_job;

/* The bytes a collective of nominally `bytes` really moves over `ranks`:
 * all-reduce the buffer rounded down to floats, all-gather and
 * reduce-scatter ranks equal shards of at least one float each. */
static int64_t coll_actual_bytes(profile_coll_op op, int64_t bytes, int ranks) {
    if (op == PROFILE_COLL_ALL_REDUCE) return bytes / 4 * 4;
    int64_t shard = bytes / 4 / ranks;
    return 4 * ranks * (shard > 0 ? shard : 1);
}

/* A rank of one collective unit (hw_rank_fn). The input holds rank + 1 in
 * every element before each call, so the result is known exactly: the
 * all-reduce and reduce-scatter sum is size (size + 1) / 2 everywhere
 * (exact in float32 for the group sizes allowed), the all-gather's shard r
 * is r + 1. The first and last element are checked after every call. */
static int coll_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    const coll_job *j = ctx;
    const int size = dist_size(g);
    const int64_t total = j->bytes / 4, shard = total / size; /* floats: whole buffer, one rank's shard */
    const float sum = (float)(size * (size + 1) / 2);
    int rc = 1;
    float *in = malloc(sizeof *in * (size_t)total), *out = malloc(sizeof *out * (size_t)total);
    double *t = calloc((size_t)j->reps, sizeof *t);
    if (!in || !out || !t) {
        snprintf(err, errlen, "rank %d: out of host memory for a %lld-byte buffer", rank, (long long)j->bytes);
        goto out;
    }
    for (int i = -j->warmup; i < j->reps; i++) {
        const int64_t n_in = j->op == PROFILE_COLL_ALL_GATHER ? shard : total;
        for (int64_t k = 0; k < n_in; k++) in[k] = (float)(rank + 1);
        if (dist_barrier(g, err, errlen) != PL_OK) goto out;
        const double t0 = pl_now_us();
        pl_status st;
        float got_first, got_last, want_first, want_last;
        if (j->op == PROFILE_COLL_ALL_REDUCE) {
            st = dist_allreduce_f32(g, in, total, DIST_SUM, err, errlen);
            got_first = in[0], got_last = in[total - 1], want_first = want_last = sum;
        } else if (j->op == PROFILE_COLL_ALL_GATHER) {
            st = dist_allgather_f32(g, in, out, shard, err, errlen);
            got_first = out[0], got_last = out[total - 1], want_first = 1.0f, want_last = (float)size;
        } else {
            st = dist_reduce_scatter_f32(g, in, out, shard, err, errlen);
            got_first = out[0], got_last = out[shard - 1], want_first = want_last = sum;
        }
        const double t1 = pl_now_us();
        if (st != PL_OK) goto out;
        if (got_first != want_first || got_last != want_last) {
            snprintf(err, errlen, "rank %d: %s of %lld bytes gave %g .. %g, not %g .. %g", rank,
                     profile_coll_op_name(j->op), (long long)j->bytes, (double)got_first, (double)got_last,
                     (double)want_first, (double)want_last);
            goto out;
        }
        if (i >= 0) t[i] = t1 - t0;
    }
    if (dist_allreduce_f64(g, t, j->reps, DIST_MAX, err, errlen) != PL_OK) goto out;
    if (rank == 0) memcpy(j->times, t, sizeof *t * (size_t)j->reps);
    rc = 0;
out:
    free(in);
    free(out);
    free(t);
    return rc;
}

/* One measured (op, size): the median and interquartile range of the reps
 * times (sorted into sorted), stored as a point of the collective curves;
 * the unit's label gets the median appended, for --verbose. PL_ERR_INVALID
 * when the median is not above zero, the store's status when writing fails. */
static pl_status coll_store_point(profile_db *db, const char *machine, profile_coll_op op, int ranks,
                                  const char *transport, int64_t bytes, const double *times, double *sorted, int reps,
                                  char *label, size_t label_len, char *msg, size_t len) {
    memcpy(sorted, times, sizeof *sorted * (size_t)reps);
    qsort(sorted, (size_t)reps, sizeof *sorted, cmp_double);
    profile_coll_point p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.ranks = ranks;
    snprintf(p.transport, sizeof p.transport, "%s", transport);
    p.bytes = (double)bytes;
    p.us = quantile_sorted(sorted, reps, 0.5);
    p.spread_us = quantile_sorted(sorted, reps, 0.75) - quantile_sorted(sorted, reps, 0.25);
    p.reps = reps;
    if (!(p.us > 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "%s: median time %g us, below the clock's resolution", label, p.us);
    pl_status st = profile_db_put_collective_point(db, machine, &p);
    if (st != PL_OK) return pl_fail(msg, len, st, "writing a collective point: %s", profile_db_last_error(db));
    const size_t k = strlen(label);
    snprintf(label + k, label_len - k, ": %.1f us (iqr %.1f)", p.us, p.spread_us);
    return PL_OK;
}

pl_status profiler_collectives(profile_db *db, const char *machine, const profiler_coll_opts *o,
                               profiler_result *r, char *msg, size_t len) {
    profiler_result local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    if (!db || !machine || !o) return pl_fail(msg, len, PL_ERR_INVALID, "profiler_collectives: NULL argument");
    if (o->ranks < 2 || o->ranks > DIST_MAX_RANKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "collectives need 2 to %d ranks, got %d", DIST_MAX_RANKS, o->ranks);
    if (o->warmup < 0 || o->reps < 1 || !(o->timeout_s > 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "collective options: need warm-up >= 0, reps >= 1, a timeout > 0");
    int64_t *sizes = NULL;
    int n_sizes = 0;
    pl_status st = profiler_coll_sizes(o->min_bytes, o->max_bytes, &sizes, &n_sizes);
    if (st != PL_OK)
        return pl_fail(msg, len, st, "collective sizes: need 4 <= min <= max, min a multiple of 4 (got %lld .. %lld)",
                       (long long)o->min_bytes, (long long)o->max_bytes);
    snprintf(r->machine, sizeof r->machine, "%s", machine);
    const double t0 = pl_now_us();
    static const profile_coll_op ops[] = {PROFILE_COLL_ALL_REDUCE, PROFILE_COLL_ALL_GATHER,
                                          PROFILE_COLL_REDUCE_SCATTER};
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    const char *transport = "sockets"; /* the fork launcher's group (dist_transport_name) */
    double *times = mmap(NULL, sizeof *times * (size_t)o->reps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    double *sorted = malloc(sizeof *sorted * (size_t)o->reps);
    if (times == MAP_FAILED || !sorted) {
        if (times == MAP_FAILED) times = NULL;
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for the collective timings");
        goto out;
    }
    r->units_total = n_ops * n_sizes;
    for (int a = 0; a < n_ops; a++)
        for (int i = 0; i < n_sizes; i++) {
            const int index = a * n_sizes + i;
            const int64_t bytes = coll_actual_bytes(ops[a], sizes[i], o->ranks);
            char label[160], b[32];
            coll_size_label(bytes, b, sizeof b);
            snprintf(label, sizeof label, "%s x%d %s", profile_coll_op_name(ops[a]), o->ranks, b);
            profiler_progress pr = {PROFILER_START, PROFILER_UNIT_COLLECTIVE, index, r->units_total, r->units_measured,
                                    o->ranks, -1, 0, bytes, label, NULL};
            int has = 0;
            if (i > 0 && bytes == coll_actual_bytes(ops[a], sizes[i - 1], o->ranks)) has = 1; /* rounded together */
            else if (!o->force &&
                (st = profile_db_has_collective_point(db, machine, ops[a], o->ranks, transport, (double)bytes,
                                                      &has)) != PL_OK) {
                pl_fail(msg, len, st, "reading the file: %s", profile_db_last_error(db));
                goto out;
            }
            if (has) {
                r->units_skipped++;
                pr.stage = PROFILER_SKIPPED;
                if (o->progress && o->progress(o->progress_ctx, &pr)) goto stopped;
                continue;
            }
            if (o->progress && o->progress(o->progress_ctx, &pr)) goto stopped;
            coll_job j = {ops[a], bytes, o->warmup, o->reps, times};
            memset(times, 0, sizeof *times * (size_t)o->reps);
            if ((st = hw_launch(o->ranks, o->timeout_s, coll_rank, &j, NULL, msg, len)) != PL_OK) goto out;
            if ((st = coll_store_point(db, machine, ops[a], o->ranks, transport, bytes, times, sorted, o->reps, label,
                                       sizeof label, msg, len)) != PL_OK)
                goto out;
            r->units_measured++;
            pr.stage = PROFILER_DONE;
            pr.measured = r->units_measured;
            if (o->progress && o->progress(o->progress_ctx, &pr)) goto stopped;
        }
    st = PL_OK;
    goto out;
stopped:
    st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "stopped by request");
out:
    r->wall_us = pl_now_us() - t0;
    if (times) munmap(times, sizeof *times * (size_t)o->reps);
    free(sorted);
    free(sizes);
    return st;
}

/* What rank 0 tells the group before each unit of profiler_collectives_group. */
enum { COLL_MEASURE = 0, COLL_SKIP = 1, COLL_STOP = 2 };

pl_status profiler_collectives_group(dist_group *g, profile_db *db, const char *machine, const profiler_coll_opts *o,
                                     profiler_result *r, char *msg, size_t len) {
    profiler_result local;
    if (!r) r = &local;
    memset(r, 0, sizeof *r);
    if (!g || !o) return pl_fail(msg, len, PL_ERR_INVALID, "profiler_collectives_group: NULL argument");
    const int rank = dist_rank(g), size = dist_size(g);
    if (rank == 0 && (!db || !machine))
        return pl_fail(msg, len, PL_ERR_INVALID, "profiler_collectives_group: rank 0 needs the database");
    if (size < 2 || o->warmup < 0 || o->reps < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "collectives need 2 or more ranks, warm-up >= 0 and reps >= 1");
    int64_t *sizes = NULL;
    int n_sizes = 0;
    pl_status st = profiler_coll_sizes(o->min_bytes, o->max_bytes, &sizes, &n_sizes);
    if (st != PL_OK)
        return pl_fail(msg, len, st, "collective sizes: need 4 <= min <= max, min a multiple of 4 (got %lld .. %lld)",
                       (long long)o->min_bytes, (long long)o->max_bytes);
    if (machine) snprintf(r->machine, sizeof r->machine, "%s", machine);
    const double t0 = pl_now_us();
    static const profile_coll_op ops[] = {PROFILE_COLL_ALL_REDUCE, PROFILE_COLL_ALL_GATHER,
                                          PROFILE_COLL_REDUCE_SCATTER};
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    const char *transport = dist_transport_name(g);
    double *times = malloc(sizeof *times * (size_t)o->reps), *sorted = malloc(sizeof *sorted * (size_t)o->reps);
    if (!times || !sorted) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for the collective timings");
        goto out; /* every rank fails the same way only by chance: the group's timeout bounds the others */
    }
    r->units_total = n_ops * n_sizes;
    for (int a = 0; a < n_ops; a++)
        for (int i = 0; i < n_sizes; i++) {
            const int index = a * n_sizes + i;
            const int64_t bytes = coll_actual_bytes(ops[a], sizes[i], size);
            char label[160], b[32];
            coll_size_label(bytes, b, sizeof b);
            snprintf(label, sizeof label, "%s x%d %s", profile_coll_op_name(ops[a]), size, b);
            profiler_progress pr = {PROFILER_START, PROFILER_UNIT_COLLECTIVE, index, r->units_total, r->units_measured,
                                    size, -1, 0, bytes, label, NULL};
            int action = COLL_MEASURE;
            pl_status st0 = PL_OK; /* rank 0's own failure, told to the group as COLL_STOP */
            if (rank == 0) {
                int has = 0;
                if (i > 0 && bytes == coll_actual_bytes(ops[a], sizes[i - 1], size)) has = 1;
                else if (!o->force && (st0 = profile_db_has_collective_point(db, machine, ops[a], size, transport,
                                                                             (double)bytes, &has)) != PL_OK)
                    pl_fail(msg, len, st0, "reading the file: %s", profile_db_last_error(db));
                if (st0 == PL_OK && has) {
                    r->units_skipped++;
                    pr.stage = PROFILER_SKIPPED;
                    action = COLL_SKIP;
                }
                if (st0 == PL_OK && o->progress && o->progress(o->progress_ctx, &pr))
                    st0 = pl_fail(msg, len, PL_ERR_INTERRUPTED, "stopped by request");
                if (st0 != PL_OK) action = COLL_STOP;
            }
            if ((st = dist_broadcast(g, &action, sizeof action, 0, msg, len)) != PL_OK) goto out;
            if (action == COLL_STOP) {
                st = rank == 0 ? st0 : pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank 0 stopped the collective sweep");
                goto out;
            }
            if (action == COLL_SKIP) continue;
            coll_job j = {ops[a], bytes, o->warmup, o->reps, times};
            char err[512] = "";
            if (coll_rank(g, rank, &j, err, sizeof err) != 0) {
                st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "%s", err);
                goto out;
            }
            if (rank != 0) continue;
            /* on failure the other ranks stop at the next broadcast's timeout */
            if ((st = coll_store_point(db, machine, ops[a], size, transport, bytes, times, sorted, o->reps, label,
                                       sizeof label, msg, len)) != PL_OK)
                goto out;
            r->units_measured++;
            pr.stage = PROFILER_DONE;
            pr.measured = r->units_measured;
            if (o->progress) o->progress(o->progress_ctx, &pr);
        }
    st = PL_OK;
out:
    r->wall_us = pl_now_us() - t0;
    free(times);
    free(sorted);
    free(sizes);
    return st;
}

/* ---- reading back ---------------------------------------------------------------- */

pl_status profile_compare(const profile_data *a, const profile_data *b, double min_us, int phase,
                          profile_compare_result *r, char *msg, size_t len) {
    memset(r, 0, sizeof *r);
    r->worst_dev = r->worst_node = -1;
    if (strcmp(a->graph_key, b->graph_key) != 0 || a->n_nodes != b->n_nodes)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profiles are of different graphs (%s, %s)", a->graph_key,
                       b->graph_key);
    if (a->n_devices != b->n_devices)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profiles have %d and %d devices", a->n_devices, b->n_devices);
    size_t cap = (size_t)a->n_devices * a->n_mb * a->n_nodes * PHASE_COUNT;
    double *rel = malloc(sizeof *rel * (cap ? cap : 1));
    if (!rel) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    int n = 0;
    for (int d = 0; d < a->n_devices; d++)
        for (int k = 0; k < a->n_mb; k++) {
            int kb = profile_mb_index(b, a->mb_sizes[k]);
            if (kb < 0) continue;
            for (int i = 0; i < a->n_nodes; i++)
                for (int ph = 0; ph < PHASE_COUNT; ph++) {
                    if (phase >= 0 && ph != phase) continue;
                    if (ph == PHASE_OPT && k != 0) continue; /* AdamW once per device */
                    double x = a->cost_us[profile_cost_index(a, d, k, i, ph)];
                    double y = b->cost_us[profile_cost_index(b, d, ph == PHASE_OPT ? 0 : kb, i, ph)];
                    if (!(x >= min_us) || !(x > 0) || !isfinite(y)) continue;
                    double v = fabs(y - x) / x;
                    rel[n++] = v;
                    if (n == 1 || v > r->max_rel) {
                        r->max_rel = v;
                        r->worst_dev = d;
                        r->worst_node = i;
                        r->worst_mb = ph == PHASE_OPT ? 0 : a->mb_sizes[k];
                        r->worst_phase = (cost_phase)ph;
                        r->worst_a = x;
                        r->worst_b = y;
                    }
                }
        }
    r->n = n;
    if (n > 0) {
        qsort(rel, (size_t)n, sizeof *rel, cmp_double);
        r->median_rel = quantile_sorted(rel, n, 0.5);
        r->p90_rel = quantile_sorted(rel, n, 0.9);
    }
    free(rel);
    return PL_OK;
}

pl_status profile_node_sums(const profile_data *p, int dev, int mb_size, double *fwd_us, double *bwd_us,
                            double *opt_us) {
    int k = profile_mb_index(p, mb_size);
    if (k < 0 || dev < 0 || dev >= p->n_devices) return PL_ERR_NOT_FOUND;
    double f = 0, b = 0, o = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        f += p->cost_us[profile_cost_index(p, dev, k, i, PHASE_FWD)];
        b += p->cost_us[profile_cost_index(p, dev, k, i, PHASE_BWD)];
        o += p->cost_us[profile_cost_index(p, dev, k, i, PHASE_OPT)];
    }
    *fwd_us = f;
    *bwd_us = b;
    *opt_us = o;
    return PL_OK;
}
