/*
 * transfer.c: device maps between machines, runs read from another
 * database, and the measures of a transfer (transfer.h).
 */
#include "transfer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "search.h"
#include "sim.h"

pl_status transfer_parse_map(const char *text, transfer_map *out, char *msg, size_t len) {
    if (text && !strcmp(text, "speed")) *out = TRANSFER_MAP_SPEED;
    else if (text && !strcmp(text, "rank")) *out = TRANSFER_MAP_RANK;
    else
        return pl_fail(msg, len, PL_ERR_INVALID, "unknown device map '%s' (use speed or rank)", text ? text : "");
    return PL_OK;
}

const char *transfer_map_name(transfer_map m) { return m == TRANSFER_MAP_RANK ? "rank" : "speed"; }

void transfer_device_speeds(const policy_problem *pb, double *speed) {
    const int mb = pb->g->cfg.batch / (pb->sched.micro_batches > 0 ? pb->sched.micro_batches : 1);
    for (int d = 0; d < pb->p->n_devices; d++) {
        double t = 0;
        for (int n = 0; n < pb->g->n_nodes; n++)
            t += profile_node_cost(pb->p, d, mb, n, PHASE_FWD) + profile_node_cost(pb->p, d, mb, n, PHASE_BWD);
        speed[d] = t > 0 && isfinite(t) ? 1.0 / t : NAN;
    }
}

/* Devices within this fraction of a faster type's leader join its type. */
#define SAME_TYPE 0.98

void transfer_device_order(transfer_map m, int n, const double *speed, const double *use, int *order) {
    for (int d = 0; d < n; d++) order[d] = d;
    if (m == TRANSFER_MAP_RANK || !speed) return;
    for (int i = 1; i < n; i++) /* by speed, fastest first; stable */
        for (int j = i; j > 0 && speed[order[j]] > speed[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    /* types: a device slower than SAME_TYPE x its type's leader starts a new
     * one; within a type, index order */
    for (int lead = 0; lead < n;) {
        int end = lead + 1;
        while (end < n && speed[order[end]] >= SAME_TYPE * speed[order[lead]]) end++;
        for (int i = lead + 1; i < end; i++)
            for (int j = i; j > lead; j--) {
                const double uj = use ? use[order[j]] : 0, uk = use ? use[order[j - 1]] : 0;
                if (!(uj > uk || (uj == uk && order[j] < order[j - 1]))) break;
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        lead = end;
    }
}

static pl_status check_speeds(int n, const double *speed, const char *which, char *msg, size_t len) {
    for (int d = 0; d < n; d++)
        if (!speed || !(speed[d] > 0) || !isfinite(speed[d]))
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "the %s machine's device %d has no speed on this graph (a missing cost in its profile); "
                           "map by rank instead", which, d);
    return PL_OK;
}

/* transfer_device_map with the source's ties broken by use. */
static pl_status device_map(transfer_map m, int n_src, const double *src_speed, const double *src_use,
                            const int *used, int n_dst, const double *dst_speed, int *map, char *msg, size_t len) {
    if (n_src < 1 || n_src > SIM_MAX_DEVICES || n_dst < 1 || n_dst > SIM_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "cannot map %d devices to %d: each side needs 1..%d devices", n_src,
                       n_dst, SIM_MAX_DEVICES);
    pl_status st;
    if (m == TRANSFER_MAP_SPEED && ((st = check_speeds(n_src, src_speed, "source", msg, len)) != PL_OK ||
                                    (st = check_speeds(n_dst, dst_speed, "target", msg, len)) != PL_OK))
        return st;
    int so[SIM_MAX_DEVICES], to[SIM_MAX_DEVICES], u[SIM_MAX_DEVICES], k = 0;
    transfer_device_order(m, n_src, src_speed, src_use, so);
    transfer_device_order(m, n_dst, dst_speed, NULL, to);
    for (int i = 0; i < n_src; i++)
        if (!used || used[so[i]]) u[k++] = so[i];
    if (k == 0) return pl_fail(msg, len, PL_ERR_INVALID, "the placement uses no device");
    for (int d = 0; d < n_src; d++) map[d] = -1;
    for (int j = 0; j < k; j++) map[u[j]] = to[k <= n_dst ? j : (int)((int64_t)j * n_dst / k)];
    return PL_OK;
}

pl_status transfer_device_map(transfer_map m, int n_src, const double *src_speed, const int *used, int n_dst,
                              const double *dst_speed, int *map, char *msg, size_t len) {
    return device_map(m, n_src, src_speed, NULL, used, n_dst, dst_speed, map, msg, len);
}

pl_status transfer_map_placement(transfer_map m, const policy_problem *src, const policy_problem *dst,
                                 const int *src_node_dev, int *dst_node_dev, int *map, char *msg, size_t len) {
    const int N = src->g->n_nodes, ns = src->p->n_devices, nd = dst->p->n_devices;
    if (dst->g->n_nodes != N)
        return pl_fail(msg, len, PL_ERR_INVALID, "the source graph has %d nodes and this one %d: a placement "
                       "transfers only between profiles of the same graph", N, dst->g->n_nodes);
    if (ns < 1 || ns > SIM_MAX_DEVICES || nd < 1 || nd > SIM_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "cannot map %d devices to %d", ns, nd);
    int used[SIM_MAX_DEVICES] = {0}, mp[SIM_MAX_DEVICES];
    for (int i = 0; i < N; i++) {
        if (src_node_dev[i] < 0 || src_node_dev[i] >= ns)
            return pl_fail(msg, len, PL_ERR_INVALID, "node %d is on device %d, but the source has devices 0..%d", i,
                           src_node_dev[i], ns - 1);
        used[src_node_dev[i]] = 1;
    }
    double ss[SIM_MAX_DEVICES], ds[SIM_MAX_DEVICES];
    transfer_device_speeds(src, ss);
    transfer_device_speeds(dst, ds);
    pl_status st = transfer_device_map(m, ns, ss, used, nd, ds, mp, msg, len);
    if (st != PL_OK) return st;
    for (int i = 0; i < N; i++) dst_node_dev[i] = mp[src_node_dev[i]];
    if (map) memcpy(map, mp, sizeof *map * (size_t)ns);
    return PL_OK;
}

pl_status transfer_policy_map(transfer_map m, const policy_problem *src, const policy_problem *dst,
                              const double *src_use, int *perm, char *msg, size_t len) {
    const int ns = src->p->n_devices, nd = dst->p->n_devices;
    if (ns != nd)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "the source machine has %d devices and this one %d: a policy fine-tunes only between equal "
                       "device counts (score its placements with placer search --from instead)", ns, nd);
    double ss[SIM_MAX_DEVICES], ds[SIM_MAX_DEVICES];
    if (ns > SIM_MAX_DEVICES) return pl_fail(msg, len, PL_ERR_INVALID, "cannot map %d devices", ns);
    transfer_device_speeds(src, ss);
    transfer_device_speeds(dst, ds);
    return device_map(m, ns, ss, src_use, NULL, nd, ds, perm, msg, len);
}

pl_status transfer_profile_relabel(const profile_data *p, const int *perm, profile_data **out) {
    *out = NULL;
    const int n = p->n_devices;
    int seen[SIM_MAX_DEVICES] = {0};
    if (n > SIM_MAX_DEVICES) return PL_ERR_INVALID;
    for (int d = 0; d < n; d++) {
        if (perm[d] < 0 || perm[d] >= n || seen[perm[d]]) return PL_ERR_INVALID;
        seen[perm[d]] = 1;
    }
    profile_data *q = NULL;
    pl_status st = profile_data_clone(p, &q);
    if (st != PL_OK) return st;
    for (int d = 0; d < n; d++) {
        q->devices[perm[d]] = p->devices[d];
        for (int k = 0; k < p->n_mb; k++)
            for (int i = 0; i < p->n_nodes; i++)
                for (int ph = 0; ph < PHASE_COUNT; ph++)
                    q->cost_us[profile_cost_index(q, perm[d], k, i, ph)] =
                        p->cost_us[profile_cost_index(p, d, k, i, ph)];
    }
    for (int a = 0; a < n && st == PL_OK; a++)
        for (int b = 0; b < n && st == PL_OK; b++) {
            if (a == b) continue;
            const profile_link *s = &p->links[a * n + b];
            profile_link *t = &q->links[perm[a] * n + perm[b]];
            t->latency_us = s->latency_us;
            t->bandwidth = s->bandwidth;
            if (s->n_points > 0) st = profile_link_set_curve(t, s->n_points, s->bytes, s->us);
        }
    if (st != PL_OK) {
        profile_data_destroy(q);
        return st;
    }
    *out = q;
    return PL_OK;
}

/* ---- runs of another database ------------------------------------------ */

static int copy_value(char *dst, size_t n, const char *v) {
    size_t l = strlen(v);
    if (l >= n) return 0;
    memcpy(dst, v, l + 1);
    return 1;
}

pl_status transfer_parse_run_args(const char *args, transfer_run_args *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    out->groups = GROUPING_COLOCATE;
    out->micro_batches = 1;
    out->order = SCHED_GPIPE;
    out->calibrated = 1;
    if (!args) return pl_fail(msg, len, PL_ERR_INVALID, "the run has no stored arguments");
    char *buf = strdup(args);
    if (!buf) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    char *words[128];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
        if (n == 128) {
            free(buf);
            return pl_fail(msg, len, PL_ERR_INVALID, "the run's arguments have more than 128 words");
        }
        words[n++] = t;
    }
    pl_status st = PL_OK;
    char m2[256] = "";
    int have_config = 0;
    for (int i = 0; i < n && st == PL_OK; i++) {
        const char *w = words[i];
        if (strncmp(w, "--", 2) != 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "the run's arguments have a stray word '%.40s'", w);
            break;
        }
        const char *v = i + 1 < n && strncmp(words[i + 1], "--", 2) != 0 ? words[i + 1] : NULL;
        if (v) i++;
        if (!strcmp(w, "--uncalibrated")) {
            if (v) st = pl_fail(msg, len, PL_ERR_INVALID, "the run's --uncalibrated takes no value");
            out->calibrated = 0;
            continue;
        }
        const int known = !strcmp(w, "--config") || !strcmp(w, "--groups") || !strcmp(w, "--micro-batches") ||
                          !strcmp(w, "--schedule") || !strcmp(w, "--mem-cap") || !strcmp(w, "--devices") ||
                          !strcmp(w, "--updates");
        if (!known) continue;
        if (!v) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "the run's %s has no value", w);
            break;
        }
        char *end = NULL;
        long x;
        if (!strcmp(w, "--config")) {
            if (!copy_value(out->config, sizeof out->config, v))
                st = pl_fail(msg, len, PL_ERR_INVALID, "the run's --config is too long");
            have_config = 1;
        } else if (!strcmp(w, "--groups")) {
            if (grouping_parse_mode(v, &out->groups, m2, sizeof m2) != PL_OK)
                st = pl_fail(msg, len, PL_ERR_INVALID, "the run's --groups: %s", m2);
        } else if (!strcmp(w, "--micro-batches")) {
            if (schedule_parse_micro_batches(v, &out->micro_batches, m2, sizeof m2) != PL_OK)
                st = pl_fail(msg, len, PL_ERR_INVALID, "the run's --micro-batches: %s", m2);
        } else if (!strcmp(w, "--schedule")) {
            if (schedule_parse_order(v, &out->order, m2, sizeof m2) != PL_OK)
                st = pl_fail(msg, len, PL_ERR_INVALID, "the run's --schedule: %s", m2);
        } else if (!strcmp(w, "--mem-cap")) {
            if (!copy_value(out->mem_cap, sizeof out->mem_cap, v))
                st = pl_fail(msg, len, PL_ERR_INVALID, "the run's --mem-cap is too long");
        } else {
            x = strtol(v, &end, 10);
            const int upd = !strcmp(w, "--updates");
            if (!*v || *end || x < (upd ? 0 : 1) || x > (upd ? 10000000 : 64))
                st = pl_fail(msg, len, PL_ERR_INVALID, "the run's %s '%.40s' is not a count", w, v);
            else if (upd) out->updates = (int)x;
            else out->devices = (int)x;
        }
    }
    free(buf);
    if (st == PL_OK && !have_config)
        st = pl_fail(msg, len, PL_ERR_INVALID, "the run's arguments name no --config");
    return st;
}

typedef struct {
    int64_t id;
    int found;
    char method[32];
    char *args;
} run_find;

static int find_run(void *ctx, const profile_run_info *r) {
    run_find *f = ctx;
    if (r->id != f->id) return 0;
    f->found = 1;
    snprintf(f->method, sizeof f->method, "%s", r->method ? r->method : "");
    f->args = strdup(r->args ? r->args : "");
    return 1;
}

pl_status transfer_read_run(profile_db *db, int64_t run, transfer_run_args *out, char *msg, size_t len) {
    run_find f = {run, 0, "", NULL};
    pl_status st = profile_db_runs(db, find_run, &f);
    if (st != PL_OK) {
        free(f.args);
        return pl_fail(msg, len, st, "cannot list the runs: %s", profile_db_last_error(db));
    }
    if (!f.found) return pl_fail(msg, len, PL_ERR_NOT_FOUND, "run %lld is not in the database", (long long)run);
    if (!f.args) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    if (strcmp(f.method, "reinforce") != 0) {
        free(f.args);
        return pl_fail(msg, len, PL_ERR_INVALID, "run %lld is a '%s' run, not a placer training run", (long long)run,
                       f.method);
    }
    char m2[256] = "";
    st = transfer_parse_run_args(f.args, out, m2, sizeof m2);
    free(f.args);
    if (st != PL_OK) return pl_fail(msg, len, st, "run %lld: %s", (long long)run, m2);
    return PL_OK;
}

pl_status transfer_source_run(const char *src_path, int64_t run, transfer_run_args *out, char *msg, size_t len) {
    profile_db *db = NULL;
    char m2[512] = "";
    pl_status st = profile_db_open(src_path, PROFILE_DB_READ, &db, m2, sizeof m2);
    if (st != PL_OK) return pl_fail(msg, len, st, "--from: %s", m2);
    st = transfer_read_run(db, run, out, m2, sizeof m2);
    profile_db_close(db);
    if (st == PL_ERR_NOT_FOUND)
        return pl_fail(msg, len, st, "run %lld is not in %s; give an id placer train printed there",
                       (long long)run, src_path);
    if (st != PL_OK) return pl_fail(msg, len, st, "%s of %s", m2, src_path);
    return PL_OK;
}

typedef struct {
    const policy_problem *pb;
    int top_k, N, D, n_perms;
    const int *perms;
    int n;           /* kept */
    int *pl;         /* top_k * N */
    double *cost;    /* top_k */
    double *step;    /* top_k */
    int *oom;        /* top_k */
    int *tmp, *ca, *cb;
    int n_samples;
} top_ctx;

/* The smallest relabelling of a node placement under the perms. */
static void canonical(const top_ctx *t, const int *dev, int *out) {
    memcpy(out, dev, sizeof *out * (size_t)t->N);
    for (int q = 1; q < t->n_perms; q++) {
        const int *pi = t->perms + (size_t)q * t->D;
        for (int i = 0; i < t->N; i++) {
            int v = pi[dev[i]];
            if (v != out[i]) {
                if (v < out[i])
                    for (int j = 0; j < t->N; j++) out[j] = pi[dev[j]];
                break;
            }
        }
    }
}

static int top_sample(void *ctx, const profile_run_sample *s) {
    top_ctx *t = ctx;
    t->n_samples++;
    if (placement_parse(s->placement, t->N, t->D, t->tmp, NULL, 0) != PL_OK) return 0;
    const double cost = s->oom ? t->pb->oom_penalty_us : s->step_us;
    if (!(cost >= 0)) return 0;
    canonical(t, t->tmp, t->ca);
    for (int i = 0; i < t->n; i++) {
        canonical(t, t->pl + (size_t)i * t->N, t->cb);
        if (!memcmp(t->ca, t->cb, sizeof *t->ca * (size_t)t->N)) return 0;
    }
    if (t->n == t->top_k && cost >= t->cost[t->top_k - 1]) return 0;
    int pos = t->n < t->top_k ? t->n++ : t->top_k - 1;
    while (pos > 0 && t->cost[pos - 1] > cost) {
        t->cost[pos] = t->cost[pos - 1];
        t->step[pos] = t->step[pos - 1];
        t->oom[pos] = t->oom[pos - 1];
        memcpy(t->pl + (size_t)pos * t->N, t->pl + (size_t)(pos - 1) * t->N, sizeof *t->pl * (size_t)t->N);
        pos--;
    }
    t->cost[pos] = cost;
    t->step[pos] = s->step_us;
    t->oom[pos] = s->oom != 0;
    memcpy(t->pl + (size_t)pos * t->N, t->tmp, sizeof *t->pl * (size_t)t->N);
    return 0;
}

void transfer_shortlist_free(transfer_shortlist *s) {
    if (!s) return;
    free(s->node_dev);
    free(s->step_us);
    free(s->oom);
    memset(s, 0, sizeof *s);
}

pl_status transfer_run_shortlist(profile_db *db, int64_t run, const policy_problem *src, int top_k,
                                 transfer_shortlist *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    if (top_k < 1) return pl_fail(msg, len, PL_ERR_INVALID, "the shortlist needs at least one placement");
    top_ctx t;
    memset(&t, 0, sizeof t);
    t.pb = src;
    t.top_k = top_k;
    t.N = src->g->n_nodes;
    t.D = src->p->n_devices;
    int *perms = NULL;
    pl_status st = policy_device_automorphisms(src, &perms, &t.n_perms);
    if (st != PL_OK) return pl_fail(msg, len, st, "out of memory");
    t.perms = perms;
    t.pl = malloc(sizeof *t.pl * (size_t)top_k * (size_t)t.N);
    t.cost = malloc(sizeof *t.cost * (size_t)top_k);
    t.step = malloc(sizeof *t.step * (size_t)top_k);
    t.oom = malloc(sizeof *t.oom * (size_t)top_k);
    t.tmp = malloc(sizeof *t.tmp * (size_t)t.N);
    t.ca = malloc(sizeof *t.ca * (size_t)t.N);
    t.cb = malloc(sizeof *t.cb * (size_t)t.N);
    if (!t.pl || !t.cost || !t.step || !t.oom || !t.tmp || !t.ca || !t.cb) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = profile_db_run_samples(db, run, top_sample, &t);
    if (st == PL_ERR_NOT_FOUND) {
        pl_fail(msg, len, st, "run %lld is not in the database", (long long)run);
        goto out;
    }
    if (st != PL_OK) {
        pl_fail(msg, len, st, "cannot read run %lld: %s", (long long)run, profile_db_last_error(db));
        goto out;
    }
    if (t.n == 0) {
        st = pl_fail(msg, len, PL_ERR_NOT_FOUND, "run %lld has no sample that places this graph's %d nodes on %d "
                     "devices (%d samples)", (long long)run, t.N, t.D, t.n_samples);
        goto out;
    }
    out->n = t.n;
    out->n_nodes = t.N;
    out->node_dev = t.pl;
    out->step_us = t.step;
    out->oom = t.oom;
    t.pl = NULL;
    t.step = NULL;
    t.oom = NULL;
out:
    free(perms);
    free(t.pl);
    free(t.cost);
    free(t.step);
    free(t.oom);
    free(t.tmp);
    free(t.ca);
    free(t.cb);
    return st;
}

/* ---- measures ------------------------------------------------------------ */

double transfer_gain_retained(double base_us, double placed_us, double best_us) {
    if (!isfinite(base_us) || !isfinite(placed_us) || !isfinite(best_us)) return NAN;
    const double lead = base_us - best_us;
    if (!(lead > TRANSFER_NA_FRACTION * base_us)) return NAN;
    return (base_us - placed_us) / lead;
}

double transfer_updates_saved(const double *ft, int n_ft, const double *scratch, int n_scratch, int *u_ft,
                              int *u_scratch) {
    *u_ft = -1;
    *u_scratch = -1;
    if (n_ft < 1 || n_scratch < 1) return NAN;
    const double L = scratch[n_scratch - 1];
    int a = -1, b = n_scratch;
    for (int i = 0; i < n_scratch; i++)
        if (scratch[i] <= L) {
            b = i + 1;
            break;
        }
    for (int i = 0; i < n_ft; i++)
        if (ft[i] <= L) {
            a = i + 1;
            break;
        }
    *u_ft = a;
    *u_scratch = b;
    const int f = a > 0 ? a : n_ft + 1;
    return (double)(b - f) / (double)(b > f ? b : f);
}
