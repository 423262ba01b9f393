/*
 * plan_profile.c: `placer plan --db`, the layout problem on a measured
 * profile (plan_profile.h says what it searches and why it is a special
 * case of the cluster search).
 */
#include "plan_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"
#include "session.h"
#include "util.h"

void plan_profile_result_free(plan_profile_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->items[i].node_dev);
    free(r->items);
    memset(r, 0, sizeof *r);
}

static int entry_cmp(const void *a, const void *b) {
    const plan_profile_entry *x = a, *y = b;
    if (x->ev.cost_us != y->ev.cost_us) return x->ev.cost_us < y->ev.cost_us ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* Layers of each stage of a node placement: a block's layer goes to the
 * device that holds its attention (node kind OP_ATTENTION), stages in the
 * order their first node appears. */
static void stage_layers_of(const graph *g, const int *node_dev, plan_profile_entry *e) {
    int order[SIM_MAX_DEVICES], seen[SIM_MAX_DEVICES] = {0}, n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const int d = node_dev[i];
        if (d >= 0 && d < SIM_MAX_DEVICES && !seen[d]) {
            seen[d] = 1;
            order[n++] = d;
        }
    }
    e->pp = n;
    for (int s = 0; s < n; s++) {
        e->stage_dev[s] = order[s];
        e->stage_layers[s] = 0;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].kind == OP_ATTENTION && node_dev[i] == order[s]) e->stage_layers[s]++;
    }
}

pl_status plan_profile_search(const plan_profile_options *o, plan_profile_result *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    const double t0 = pl_now_us();
    pl_status st = PL_OK;
    int cap = 0, order = 0, batch = -1;
    for (int m = 1; batch < 0 || m <= batch; m++) {
        if (batch > 0 && batch % m) continue;
        for (int sch = 0; sch < 2; sch++) {
            policy_session_options so;
            policy_session_options_default(&so);
            so.db_path = o->db_path;
            so.config = o->config;
            so.micro_batches = m;
            so.order = sch ? SCHED_1F1B : SCHED_GPIPE;
            so.threads = o->threads;
            so.devices = o->devices;
            so.mem_cap = o->mem_cap;
            policy_session *ss = NULL;
            char m2[512];
            st = policy_session_open(&so, &ss, m2, sizeof m2);
            if (st == PL_ERR_SCHEDULE || (st != PL_OK && m > 1)) {
                /* m does not divide the batch, or the profile has no such
                 * micro-batch size: not a layout of this profile */
                st = PL_OK;
                continue;
            }
            if (st != PL_OK) {
                snprintf(msg, len, "%s", m2);
                goto done;
            }
            batch = out->batch = ss->cfg.batch;
            if ((o->micro_batches > 0 && m != o->micro_batches) || (o->schedule >= 0 && sch != o->schedule)) {
                policy_session_close(ss);
                continue;
            }
            policy_cands *c = NULL;
            search_dp_info info;
            st = policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c);
            if (st == PL_OK) st = search_dp(ss->ev, c, &info);
            int b = st == PL_OK ? policy_cands_best(c) : -1;
            if (b >= 0) {
                if (out->n == cap) {
                    cap = cap ? 2 * cap : 16;
                    plan_profile_entry *q = realloc(out->items, sizeof *q * (size_t)cap);
                    if (!q) st = PL_ERR_NOMEM;
                    else out->items = q;
                }
                if (st == PL_OK) {
                    plan_profile_entry *e = &out->items[out->n];
                    memset(e, 0, sizeof *e);
                    e->micro_batches = m;
                    e->schedule = sch;
                    e->ev = c->items[b].ev;
                    e->order = order++;
                    e->n_nodes = ss->g->n_nodes;
                    e->node_dev = malloc(sizeof *e->node_dev * (size_t)e->n_nodes);
                    if (!e->node_dev) st = PL_ERR_NOMEM;
                    else {
                        memcpy(e->node_dev, c->items[b].node_dev, sizeof *e->node_dev * (size_t)e->n_nodes);
                        stage_layers_of(ss->g, e->node_dev, e);
                        out->n++;
                        out->simulated += info.n_candidates;
                    }
                }
            }
            policy_cands_destroy(c);
            policy_session_close(ss);
            if (st != PL_OK) goto done;
        }
    }
done:
    if (st == PL_OK && out->n == 0)
        st = pl_fail(msg, len, PL_ERR_INVALID, "no pipeline of this profile matches (micro-batches %d)", o->micro_batches);
    if (st == PL_OK) qsort(out->items, (size_t)out->n, sizeof *out->items, entry_cmp);
    else if (st == PL_ERR_NOMEM && msg && len && !*msg) snprintf(msg, len, "out of memory");
    out->wall_s = (pl_now_us() - t0) / 1e6;
    if (st != PL_OK) plan_profile_result_free(out);
    return st;
}
