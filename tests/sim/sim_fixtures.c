/* sim_fixtures.c: hand-made graphs, profiles and a trace checker for the
 * simulator's tests and benchmark. */
#include "sim_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

graph *simfix_chain_graph(int n, int batch) {
    graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = (gpt_config){64, 16, 2, n, 8, batch};
    g->n_nodes = n;
    g->nodes = calloc((size_t)n, sizeof *g->nodes);
    g->cons_start = calloc((size_t)n + 1, sizeof *g->cons_start);
    g->cons = calloc((size_t)(n > 1 ? n - 1 : 1), sizeof *g->cons);
    if (!g->nodes || !g->cons_start || !g->cons) {
        graph_destroy(g);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        graph_node *nd = &g->nodes[i];
        nd->kind = OP_LAYERNORM;
        snprintf(nd->name, sizeof nd->name, "c%d", i);
        nd->layer = i;
        if (i > 0) {
            nd->n_inputs = 1;
            nd->inputs[0] = i - 1;
        }
        nd->out_rank = 1;
        nd->out_shape[0] = batch;
        nd->out_bytes_per_sample = 4;
        nd->act_bytes_per_sample = 4;
        nd->fwd_kernels = 1;
        nd->bwd_kernels = 1;
    }
    /* consumers: node i feeds node i+1 */
    for (int i = 0; i < n; i++) g->cons_start[i + 1] = g->cons_start[i] + (i + 1 < n);
    for (int i = 0; i + 1 < n; i++) g->cons[g->cons_start[i]] = i + 1;
    return g;
}

profile_data *simfix_unit_profile(const graph *g, int n_devices, int mb, double fwd_us, double bwd_us,
                                  double opt_us, int64_t mem_bytes) {
    profile_data *p = NULL;
    if (profile_data_create(n_devices, g->n_nodes, 1, &mb, &p) != PL_OK) return NULL;
    snprintf(p->machine, sizeof p->machine, "unit");
    snprintf(p->source, sizeof p->source, "spec");
    for (int d = 0; d < n_devices; d++) {
        snprintf(p->devices[d].name, sizeof p->devices[d].name, "unit%d", d);
        p->devices[d].mem_bytes = mem_bytes;
        for (int i = 0; i < g->n_nodes; i++) {
            p->cost_us[profile_cost_index(p, d, 0, i, PHASE_FWD)] = fwd_us;
            p->cost_us[profile_cost_index(p, d, 0, i, PHASE_BWD)] = bwd_us;
            p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)] = opt_us;
        }
    }
    return p;
}

profile_data *simfix_roofline_profile(const graph *g, int n_devices) {
    int sizes[5] = {1, 2, 4, 8, 16};
    profile_data *p = NULL;
    if (profile_data_create(n_devices, g->n_nodes, 5, sizes, &p) != PL_OK) return NULL;
    snprintf(p->machine, sizeof p->machine, "roofline-x%d", n_devices);
    snprintf(p->source, sizeof p->source, "spec");
    gpt_config_key(&g->cfg, p->graph_key, sizeof p->graph_key);
    for (int d = 0; d < n_devices; d++) {
        profile_device *dv = &p->devices[d];
        snprintf(dv->name, sizeof dv->name, "Roofline GPU");
        dv->mem_bytes = 16LL << 30;
        dv->peak_flops = 20e12;
        dv->mem_bw = 3e12;
        dv->launch_us = 4;
        for (int k = 0; k < 5; k++)
            for (int i = 0; i < g->n_nodes; i++) {
                const graph_node *nd = &g->nodes[i];
                double b = sizes[k];
                p->cost_us[profile_cost_index(p, d, k, i, PHASE_FWD)] =
                    nd->fwd_flops_per_sample * b / 20e12 * 1e6 + nd->fwd_kernels * 4.0;
                p->cost_us[profile_cost_index(p, d, k, i, PHASE_BWD)] =
                    nd->bwd_flops_per_sample * b / 20e12 * 1e6 + nd->bwd_kernels * 4.0;
                p->cost_us[profile_cost_index(p, d, k, i, PHASE_OPT)] =
                    nd->params > 0 ? (double)nd->params * 28.0 / 3e12 * 1e6 + 4.0 : 0.0;
            }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        p->node_mem[i].param_bytes = graph_param_bytes(nd);
        p->node_mem[i].act_bytes_per_sample = nd->act_bytes_per_sample;
        p->node_mem[i].out_bytes_per_sample = nd->out_bytes_per_sample;
        p->node_mem[i].workspace_bytes =
            (nd->kind == OP_ATTENTION || nd->kind == OP_MLP || nd->kind == OP_HEAD) ? 32 << 20 : 0;
    }
    double bytes[3] = {4096, 1 << 20, 1 << 30};
    double us[3];
    for (int k = 0; k < 3; k++) us[k] = 8.0 + bytes[k] / 100e9 * 1e6;
    for (int s = 0; s < n_devices; s++)
        for (int t = 0; t < n_devices; t++) {
            if (s == t) continue;
            profile_link *l = &p->links[s * n_devices + t];
            l->latency_us = 8.0;
            l->bandwidth = 100e9;
            if (profile_link_set_curve(l, 3, bytes, us) != PL_OK) {
                profile_data_destroy(p);
                return NULL;
            }
        }
    return p;
}

/* ---- trace checker ------------------------------------------------------ */

#define CHK_FAIL(...)                               \
    do {                                            \
        if (msg && len) snprintf(msg, len, __VA_ARGS__); \
        ok = 0;                                     \
        goto out;                                   \
    } while (0)

/* Devices are tracks 0..63, links 64 + src*64 + dst. */
static int track_of(const sim_event *x) {
    return x->dst_device < 0 ? x->device : SIM_MAX_DEVICES + x->device * SIM_MAX_DEVICES + x->dst_device;
}

static int by_track_start(const void *a, const void *b) {
    const sim_event *x = *(const sim_event *const *)a, *y = *(const sim_event *const *)b;
    int tx = track_of(x), ty = track_of(y);
    if (tx != ty) return tx < ty ? -1 : 1;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    return (x->end_us > y->end_us) - (x->end_us < y->end_us);
}

int simfix_check_trace(const graph *g, const int *dev, int m, const sim_event *ev, int n_ev, double eps,
                       char *msg, size_t len) {
    const int n = g->n_nodes, D = SIM_MAX_DEVICES;
    int ok = 1;
    const sim_event **F = calloc((size_t)n * m, sizeof *F), **B = calloc((size_t)n * m, sizeof *B);
    const sim_event **A = calloc((size_t)n * D * m, sizeof *A), **G = calloc((size_t)n * D * m, sizeof *G);
    const sim_event *O[SIM_MAX_DEVICES] = {0};
    const sim_event **sorted = calloc((size_t)n_ev + 1, sizeof *sorted);
    if (!F || !B || !A || !G || !sorted) CHK_FAIL("out of memory in the checker");
    for (int e = 0; e < n_ev; e++) {
        const sim_event *x = &ev[e];
        if (x->end_us < x->start_us - eps || x->start_us < -eps) CHK_FAIL("event %d has a negative span", e);
        if (x->kind == SIM_EV_OPT) {
            if (O[x->device]) CHK_FAIL("two AdamW steps on device %d", x->device);
            O[x->device] = x;
            continue;
        }
        if (x->node < 0 || x->node >= n || x->micro_batch < 0 || x->micro_batch >= m)
            CHK_FAIL("event %d names node %d mb %d", e, x->node, x->micro_batch);
        size_t fi = (size_t)x->micro_batch * n + x->node;
        if (x->kind == SIM_EV_FWD || x->kind == SIM_EV_BWD) {
            const sim_event **slot = x->kind == SIM_EV_FWD ? &F[fi] : &B[fi];
            if (*slot) CHK_FAIL("%s of node %d mb %d appears twice", sim_event_kind_name(x->kind), x->node,
                                x->micro_batch);
            if (x->device != dev[x->node]) CHK_FAIL("node %d ran on device %d, placed on %d", x->node,
                                                    x->device, dev[x->node]);
            *slot = x;
        } else {
            int remote = x->kind == SIM_EV_SEND_ACT ? x->dst_device : x->device;
            int home = x->kind == SIM_EV_SEND_ACT ? x->device : x->dst_device;
            if (home != dev[x->node] || remote == home)
                CHK_FAIL("transfer of node %d between %d and %d does not leave its device %d", x->node, x->device,
                         x->dst_device, dev[x->node]);
            int cut = 0;
            for (int q = g->cons_start[x->node]; q < g->cons_start[x->node + 1]; q++)
                cut |= dev[g->cons[q]] == remote;
            if (!cut) CHK_FAIL("node %d sent to device %d where none of its consumers is", x->node, remote);
            size_t ti = ((size_t)x->node * D + remote) * m + x->micro_batch;
            const sim_event **slot = x->kind == SIM_EV_SEND_ACT ? &A[ti] : &G[ti];
            if (*slot) CHK_FAIL("transfer %s of node %d to %d mb %d sent twice", sim_event_kind_name(x->kind),
                                x->node, remote, x->micro_batch);
            *slot = x;
        }
    }
    /* completeness and dependencies */
    for (int j = 0; j < m; j++)
        for (int i = 0; i < n; i++) {
            const sim_event *f = F[(size_t)j * n + i], *b = B[(size_t)j * n + i];
            if (!f || !b) CHK_FAIL("node %d mb %d misses its %s", i, j, f ? "backward" : "forward");
            const graph_node *nd = &g->nodes[i];
            for (int s = 0; s < nd->n_inputs; s++) {
                int k = nd->inputs[s];
                const sim_event *src = dev[k] == dev[i] ? F[(size_t)j * n + k]
                                                        : A[((size_t)k * D + dev[i]) * m + j];
                if (!src) CHK_FAIL("input %d of node %d mb %d never arrives", k, i, j);
                if (f->start_us < src->end_us - eps)
                    CHK_FAIL("F node %d mb %d starts at %.3f before input %d is there (%.3f)", i, j, f->start_us,
                             k, src->end_us);
            }
            if (b->start_us < f->end_us - eps) CHK_FAIL("B before F for node %d mb %d", i, j);
            for (int q = g->cons_start[i]; q < g->cons_start[i + 1]; q++) {
                int c = g->cons[q];
                const sim_event *src = dev[c] == dev[i] ? B[(size_t)j * n + c] : G[((size_t)i * D + dev[c]) * m + j];
                if (!src) CHK_FAIL("gradient from consumer %d of node %d mb %d never arrives", c, i, j);
                if (b->start_us < src->end_us - eps)
                    CHK_FAIL("B node %d mb %d starts before the gradient from %d", i, j, c);
                if (dev[c] != dev[i]) {
                    const sim_event *a = A[((size_t)i * D + dev[c]) * m + j];
                    if (!a) CHK_FAIL("node %d mb %d never sent to device %d", i, j, dev[c]);
                    if (a->start_us < f->end_us - eps) CHK_FAIL("node %d mb %d sent before computed", i, j);
                    if (src->start_us < B[(size_t)j * n + c]->end_us - eps)
                        CHK_FAIL("gradient of node %d mb %d sent before consumer %d's backward", i, j, c);
                }
            }
        }
    /* every transfer is a needed one: counted above by the slot check, and
     * every needed one was found; now AdamW and overlaps */
    for (int d = 0; d < D; d++) {
        int has = 0;
        for (int i = 0; i < n; i++) has |= dev[i] == d;
        if (has != (O[d] != NULL)) CHK_FAIL("device %d %s an AdamW step", d, has ? "misses" : "has");
        if (!has) continue;
        for (int e = 0; e < n_ev; e++)
            if (ev[e].kind == SIM_EV_BWD && ev[e].device == d && O[d]->start_us < ev[e].end_us - eps)
                CHK_FAIL("AdamW on device %d before its last backward", d);
    }
    /* tracks: sort by (track, start); no overlap, and no idle without a
     * reason (device: its previous item or an input; link: its trigger or
     * its previous transfer) */
    for (int e = 0; e < n_ev; e++) sorted[e] = &ev[e];
    qsort(sorted, (size_t)n_ev, sizeof *sorted, by_track_start);
    for (int e = 0; e < n_ev; e++) {
        const sim_event *x = sorted[e];
        int first = e == 0 || track_of(sorted[e - 1]) != track_of(x);
        double prev = first ? 0.0 : sorted[e - 1]->end_us;
        int j = x->micro_batch, d = x->device;
        if (x->start_us < prev - eps)
            CHK_FAIL("track of device %d (dst %d) runs two things at %.3f", d, x->dst_device, x->start_us);
        int why = fabs(x->start_us - prev) <= eps;
        if (x->dst_device < 0) {
            if (!why && x->kind == SIM_EV_FWD) {
                const graph_node *nd = &g->nodes[x->node];
                for (int s = 0; s < nd->n_inputs; s++) {
                    int kq = nd->inputs[s];
                    const sim_event *src = dev[kq] == d ? F[(size_t)j * n + kq] : A[((size_t)kq * D + d) * m + j];
                    why |= fabs(src->end_us - x->start_us) <= eps;
                }
            } else if (!why && x->kind == SIM_EV_BWD) {
                for (int q = g->cons_start[x->node]; q < g->cons_start[x->node + 1]; q++) {
                    int c = g->cons[q];
                    const sim_event *src = dev[c] == d ? B[(size_t)j * n + c] : G[((size_t)x->node * D + dev[c]) * m + j];
                    why |= fabs(src->end_us - x->start_us) <= eps;
                }
            }
        } else {
            double trig = 0.0;
            if (x->kind == SIM_EV_SEND_ACT) {
                trig = F[(size_t)j * n + x->node]->end_us;
            } else {
                for (int q = g->cons_start[x->node]; q < g->cons_start[x->node + 1]; q++) {
                    int c = g->cons[q];
                    if (dev[c] == d && B[(size_t)j * n + c]->end_us > trig) trig = B[(size_t)j * n + c]->end_us;
                }
            }
            why |= fabs(x->start_us - trig) <= eps;
        }
        if (!why)
            CHK_FAIL("%s of node %d mb %d on device %d (dst %d) waits until %.3f for no reason",
                     sim_event_kind_name(x->kind), x->node, j, d, x->dst_device, x->start_us);
    }
out:
    free(F);
    free(B);
    free(A);
    free(G);
    free(sorted);
    return ok;
}
