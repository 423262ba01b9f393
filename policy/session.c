/*
 * session.c: placer sessions from a profile database, and the closing table
 * (see session.h).
 */
#include "session.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "util.h"

void policy_session_options_default(policy_session_options *o) {
    memset(o, 0, sizeof *o);
    o->groups = GROUPING_COLOCATE;
    o->micro_batches = 1;
    o->order = SCHED_GPIPE;
    o->calibrated = 1;
}

void policy_session_close(policy_session *s) {
    if (!s) return;
    policy_evaluator_destroy(s->ev);
    profile_data_destroy(s->p);
    grouping_destroy(s->gr);
    graph_destroy(s->g);
    profile_db_close(s->db);
    free(s);
}

pl_status policy_profile_subset(const profile_data *p, int n, profile_data **out) {
    *out = NULL;
    if (n < 1 || n > p->n_devices) return PL_ERR_INVALID;
    profile_data *q = NULL;
    pl_status st = profile_data_create(n, p->n_nodes, p->n_mb, p->mb_sizes, &q);
    if (st != PL_OK) return st;
    memcpy(q->machine, p->machine, sizeof q->machine);
    memcpy(q->source, p->source, sizeof q->source);
    memcpy(q->graph_key, p->graph_key, sizeof q->graph_key);
    memcpy(q->devices, p->devices, sizeof *q->devices * (size_t)n);
    memcpy(q->node_mem, p->node_mem, sizeof *q->node_mem * (size_t)p->n_nodes);
    for (int d = 0; d < n; d++)
        for (int k = 0; k < p->n_mb; k++)
            for (int i = 0; i < p->n_nodes; i++)
                for (int ph = 0; ph < PHASE_COUNT; ph++)
                    q->cost_us[profile_cost_index(q, d, k, i, ph)] = p->cost_us[profile_cost_index(p, d, k, i, ph)];
    for (int a = 0; a < n && st == PL_OK; a++)
        for (int b = 0; b < n && st == PL_OK; b++) {
            if (a == b) continue;
            const profile_link *src = &p->links[a * p->n_devices + b];
            profile_link *dst = &q->links[a * n + b];
            dst->latency_us = src->latency_us;
            dst->bandwidth = src->bandwidth;
            if (src->n_points > 0) st = profile_link_set_curve(dst, src->n_points, src->bytes, src->us);
        }
    if (st != PL_OK) {
        profile_data_destroy(q);
        return st;
    }
    *out = q;
    return PL_OK;
}

/* Build graph, grouping, problem and evaluator around s->p and s->cfg. */
static pl_status finish_session(policy_session *s, const policy_session_options *o, const sim_params *prm, char *msg,
                                size_t len) {
    pl_status st = graph_build_gpt(&s->cfg, &s->g, msg, len);
    if (st != PL_OK) return st;
    if (s->g->n_nodes != s->p->n_nodes)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile has %d nodes but the graph has %d", s->p->n_nodes,
                       s->g->n_nodes);
    if (o->devices > 0) {
        if (o->devices > s->p->n_devices)
            return pl_fail(msg, len, PL_ERR_INVALID, "--devices %d: the profile has only %d device%s", o->devices,
                           s->p->n_devices, s->p->n_devices == 1 ? "" : "s");
        profile_data *q = NULL;
        st = policy_profile_subset(s->p, o->devices, &q);
        if (st != PL_OK) return pl_fail(msg, len, st, "cannot take the first %d devices", o->devices);
        profile_data_destroy(s->p);
        s->p = q;
    }
    if (s->p->n_devices > SIM_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile has %d devices; at most %d are supported",
                       s->p->n_devices, SIM_MAX_DEVICES);
    if (o->mem_cap) {
        st = pl_parse_mem_cap(o->mem_cap, s->p->devices[0].mem_bytes, &s->cap_bytes, msg, len);
        if (st != PL_OK) return st;
    }
    st = grouping_build(s->g, o->groups, &s->gr, msg, len);
    if (st != PL_OK) return st;
    schedule sch = schedule_make(o->micro_batches, o->order);
    st = policy_problem_init(&s->pb, s->g, s->gr, s->p, &sch, s->cap_bytes, prm, msg, len);
    if (st != PL_OK) return st;
    st = policy_evaluator_create(&s->pb, o->threads, &s->ev);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot start the simulator threads");
    return PL_OK;
}

pl_status policy_session_open(const policy_session_options *o, policy_session **out, char *msg, size_t len) {
    *out = NULL;
    if (!o->db_path) return pl_fail(msg, len, PL_ERR_INVALID, "no profile database (give --db FILE)");
    policy_session *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    pl_status st = profile_db_open(o->db_path, o->write ? PROFILE_DB_WRITE : PROFILE_DB_READ, &s->db, msg, len);
    if (st != PL_OK) goto fail;
    gpt_config want;
    if (o->config) {
        st = gpt_config_parse(o->config, &want, msg, len);
        if (st != PL_OK) goto fail;
    }
    st = profile_db_load_profile(s->db, o->config ? &want : NULL, &s->p, &s->cfg, msg, len);
    if (st != PL_OK) goto fail;
    /* the store keeps the six basic sizes of a graph; a graph with other
     * options (parallel residual, ...) is known by its key: take the
     * options from --config when its key is the profile's, and refuse to
     * build another graph than the profile's otherwise */
    {
        char have[128], want_key[128];
        gpt_config_key(&s->cfg, have, sizeof have);
        if (strcmp(have, s->p->graph_key) != 0) {
            if (o->config) gpt_config_key(&want, want_key, sizeof want_key);
            if (o->config && !strcmp(want_key, s->p->graph_key)) {
                s->cfg = want;
            } else {
                st = pl_fail(msg, len, PL_ERR_INVALID,
                             "the profile is for graph %s, whose options the database does not keep; give "
                             "--config with them (e.g. default,parallel=1)",
                             s->p->graph_key);
                goto fail;
            }
        }
    }
    /* calibrated simulator parameters for this machine and graph */
    sim_params prm;
    sim_params_default(&prm);
    if (o->calibrated) {
        const char *names[SIM_N_PARAMS];
        double vals[SIM_N_PARAMS];
        for (int i = 0; i < SIM_N_PARAMS; i++) {
            names[i] = sim_param_name(i);
            vals[i] = *sim_param_ptr(&prm, i);
        }
        char key[128];
        gpt_config_key(&s->cfg, key, sizeof key);
        int found = 0;
        st = profile_db_load_sim_params(s->db, key, SIM_N_PARAMS, names, vals, &found);
        if (st != PL_OK) {
            pl_fail(msg, len, st, "cannot read the simulator parameters: %s", profile_db_last_error(s->db));
            goto fail;
        }
        for (int i = 0; i < SIM_N_PARAMS; i++) *sim_param_ptr(&prm, i) = vals[i];
        s->n_sim_params = found;
    }
    st = finish_session(s, o, &prm, msg, len);
    if (st != PL_OK) goto fail;
    *out = s;
    return PL_OK;
fail:
    policy_session_close(s);
    return st;
}

pl_status policy_session_from_profile(const policy_session_options *o, const gpt_config *cfg,
                                      const profile_data *p, policy_session **out, char *msg, size_t len) {
    *out = NULL;
    policy_session *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    s->cfg = *cfg;
    pl_status st = profile_data_clone(p, &s->p);
    if (st != PL_OK) {
        policy_session_close(s);
        return pl_fail(msg, len, st, "out of memory");
    }
    st = finish_session(s, o, NULL, msg, len);
    if (st != PL_OK) {
        policy_session_close(s);
        return st;
    }
    *out = s;
    return PL_OK;
}

int policy_cands_best_with_prefix(const policy_cands *c, const char *prefix) {
    int best = -1;
    size_t n = strlen(prefix);
    for (int i = 0; i < c->n; i++) {
        if (strncmp(c->items[i].label, prefix, n) != 0) continue;
        if (best < 0 || c->items[i].ev.cost_us < c->items[best].ev.cost_us) best = i;
    }
    return best;
}

/* A growing string. */
typedef struct {
    char *p;
    size_t n, cap;
    int fail;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->fail) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->fail = 1; return; }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->fail = 1; return; }
        b->p = p;
        b->cap = cap;
    }
}

char *policy_format_table(const policy_cands *c, double ref_us) {
    sbuf b = {0};
    int w = 6;
    for (int i = 0; i < c->n; i++) {
        int l = (int)strlen(c->items[i].label);
        if (l > w) w = l;
    }
    sb_printf(&b, "%-*s %10s %9s %8s %-6s %4s  %s\n", w, "placer", "step (ms)", "peak (GB)", "speed-up", "memory",
              "gpus", "placement");
    int n_units = c->n_units, n_nodes = c->n_nodes;
    size_t tl = (size_t)(n_nodes > n_units ? n_nodes : n_units) * 4 + 16;
    char *text = malloc(tl);
    if (!text) b.fail = 1;
    for (int i = 0; i < c->n && !b.fail; i++) {
        const policy_cand *x = &c->items[i];
        char speed[16];
        if (ref_us > 0 && isfinite(ref_us) && !x->ev.oom) snprintf(speed, sizeof speed, "%.3fx", ref_us / x->ev.step_us);
        else snprintf(speed, sizeof speed, "-");
        if (x->unit_dev) placement_format(x->unit_dev, n_units, text, tl);
        else {
            int k = snprintf(text, tl, "nodes ");
            placement_format(x->node_dev, n_nodes, text + k, tl - (size_t)k);
        }
        sb_printf(&b, "%-*s %10.3f %9.2f %8s %-6s %4d  %s\n", w, x->label, x->ev.step_us * 1e-3,
                  (double)x->ev.peak_bytes * 1e-9, speed, x->ev.oom ? "OOM" : "fits", x->ev.devices_used, text);
    }
    free(text);
    if (b.fail) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
