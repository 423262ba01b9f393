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

#define CHK_FAIL(...)                                    \
    do {                                                 \
        if (msg && len) snprintf(msg, len, __VA_ARGS__); \
        ok = 0;                                          \
        goto out;                                        \
    } while (0)

static int is_xfer(const sim_event *x) { return x->kind == SIM_EV_SEND_ACT || x->kind == SIM_EV_SEND_GRAD; }

static int by_start(const void *a, const void *b) {
    const sim_event *x = *(const sim_event *const *)a, *y = *(const sim_event *const *)b;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    return (x->end_us > y->end_us) - (x->end_us < y->end_us);
}

static int by_device_start(const void *a, const void *b) {
    const sim_event *x = *(const sim_event *const *)a, *y = *(const sim_event *const *)b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    return (x->end_us > y->end_us) - (x->end_us < y->end_us);
}

int simfix_check_trace(const graph *g, const int *dev, int m, int ideal_links, const sim_event *ev, int n_ev,
                       double eps, char *msg, size_t len) {
    const int n = g->n_nodes, D = SIM_MAX_DEVICES;
    int ok = 1;
    const sim_event **F = calloc((size_t)n * m, sizeof *F), **B = calloc((size_t)n * m, sizeof *B);
    const sim_event **A = calloc((size_t)n * D * m, sizeof *A), **G = calloc((size_t)n * D * m, sizeof *G);
    int *adds = calloc((size_t)n * m, sizeof *adds);
    const sim_event *O[SIM_MAX_DEVICES] = {0};
    int zeros[SIM_MAX_DEVICES] = {0}, used[SIM_MAX_DEVICES] = {0}, n_used = 0, loss_dev = -1;
    const sim_event **sorted = calloc((size_t)n_ev + 1, sizeof *sorted);
    if (!F || !B || !A || !G || !adds || !sorted) CHK_FAIL("out of memory in the checker");
    for (int i = 0; i < n; i++) {
        if (!used[dev[i]]) n_used++;
        used[dev[i]] = 1;
        if (g->nodes[i].kind == OP_LOSS) loss_dev = dev[i];
    }
    for (int e = 0; e < n_ev; e++) {
        const sim_event *x = &ev[e];
        if (x->end_us < x->start_us - eps || x->start_us < -eps) CHK_FAIL("event %d has a negative span", e);
        if (x->kind == SIM_EV_OPT || x->kind == SIM_EV_ZERO) {
            if (x->device < 0 || x->device >= D || !used[x->device])
                CHK_FAIL("%s on unused device %d", sim_event_kind_name(x->kind), x->device);
            if (x->kind == SIM_EV_ZERO) {
                zeros[x->device]++;
                continue;
            }
            if (O[x->device]) CHK_FAIL("two AdamW steps on device %d", x->device);
            O[x->device] = x;
            continue;
        }
        if (x->node < 0 || x->node >= n || x->micro_batch < 0 || x->micro_batch >= m)
            CHK_FAIL("event %d names node %d mb %d", e, x->node, x->micro_batch);
        size_t fi = (size_t)x->micro_batch * n + x->node;
        if (x->kind == SIM_EV_FWD || x->kind == SIM_EV_BWD) {
            const sim_event **slot = x->kind == SIM_EV_FWD ? &F[fi] : &B[fi];
            if (*slot)
                CHK_FAIL("%s of node %d mb %d appears twice", sim_event_kind_name(x->kind), x->node, x->micro_batch);
            if (x->device != dev[x->node])
                CHK_FAIL("node %d ran on device %d, placed on %d", x->node, x->device, dev[x->node]);
            if (x->kind == SIM_EV_BWD && g->nodes[x->node].kind == OP_LOSS)
                CHK_FAIL("the loss (node %d) has a backward of its own", x->node);
            *slot = x;
        } else if (x->kind == SIM_EV_ADD) {
            if (x->device != dev[x->node]) CHK_FAIL("ADD of node %d on device %d", x->node, x->device);
            adds[fi]++;
        } else if (is_xfer(x)) {
            int remote = x->kind == SIM_EV_SEND_ACT ? x->dst_device : x->device;
            int home = x->kind == SIM_EV_SEND_ACT ? x->device : x->dst_device;
            if (home != dev[x->node] || remote == home)
                CHK_FAIL("transfer of node %d between %d and %d does not leave its device %d", x->node, x->device,
                         x->dst_device, dev[x->node]);
            int cut = 0;
            for (int q = g->cons_start[x->node]; q < g->cons_start[x->node + 1]; q++) cut |= dev[g->cons[q]] == remote;
            if (!cut) CHK_FAIL("node %d sent to device %d where none of its consumers is", x->node, remote);
            size_t ti = ((size_t)x->node * D + remote) * m + x->micro_batch;
            const sim_event **slot = x->kind == SIM_EV_SEND_ACT ? &A[ti] : &G[ti];
            if (*slot)
                CHK_FAIL("transfer %s of node %d to %d mb %d sent twice", sim_event_kind_name(x->kind), x->node,
                         remote, x->micro_batch);
            *slot = x;
        } else {
            CHK_FAIL("event %d has an unknown kind %d", e, (int)x->kind);
        }
    }
    /* completeness and dependencies */
    for (int j = 0; j < m; j++)
        for (int i = 0; i < n; i++) {
            const int loss = g->nodes[i].kind == OP_LOSS;
            const sim_event *f = F[(size_t)j * n + i], *b = B[(size_t)j * n + i];
            if (!f || (!b && !loss)) CHK_FAIL("node %d mb %d misses its %s", i, j, f ? "backward" : "forward");
            const graph_node *nd = &g->nodes[i];
            for (int s = 0; s < nd->n_inputs; s++) {
                int k = nd->inputs[s];
                const sim_event *src = dev[k] == dev[i] ? F[(size_t)j * n + k] : A[((size_t)k * D + dev[i]) * m + j];
                if (!src) CHK_FAIL("input %d of node %d mb %d never arrives", k, i, j);
                if (f->start_us < src->end_us - eps)
                    CHK_FAIL("F node %d mb %d starts at %.3f before input %d is there (%.3f)", i, j, f->start_us, k,
                             src->end_us);
            }
            if (b && b->start_us < f->end_us - eps) CHK_FAIL("B before F for node %d mb %d", i, j);
            int remote_devs = 0;
            for (int q = g->cons_start[i]; q < g->cons_start[i + 1]; q++) {
                int c = g->cons[q];
                int first = 1;
                for (int q2 = g->cons_start[i]; q2 < q; q2++) first &= dev[g->cons[q2]] != dev[c];
                if (dev[c] != dev[i] && first) remote_devs++;
                const sim_event *cb = B[(size_t)j * n + c];
                const int closs = g->nodes[c].kind == OP_LOSS;
                const sim_event *src = dev[c] == dev[i] ? (closs ? F[(size_t)j * n + c] : cb)
                                                        : G[((size_t)i * D + dev[c]) * m + j];
                if (!src) CHK_FAIL("gradient from consumer %d of node %d mb %d never arrives", c, i, j);
                if (b && b->start_us < src->end_us - eps)
                    CHK_FAIL("B node %d mb %d starts before the gradient from %d", i, j, c);
                if (dev[c] != dev[i]) {
                    const sim_event *a = A[((size_t)i * D + dev[c]) * m + j];
                    if (!a) CHK_FAIL("node %d mb %d never sent to device %d", i, j, dev[c]);
                    if (a->start_us < f->end_us - eps) CHK_FAIL("node %d mb %d sent before computed", i, j);
                    const sim_event *after = closs ? F[(size_t)j * n + c] : cb;
                    if (src->start_us < after->end_us - eps)
                        CHK_FAIL("gradient of node %d mb %d sent before consumer %d's backward", i, j, c);
                }
            }
            if (adds[(size_t)j * n + i] > remote_devs)
                CHK_FAIL("node %d mb %d has %d ADDs for %d remote contributions", i, j, adds[(size_t)j * n + i],
                         remote_devs);
        }
    for (int e = 0; e < n_ev; e++)
        if (ev[e].kind == SIM_EV_ADD) {
            const sim_event *b = B[(size_t)ev[e].micro_batch * n + ev[e].node];
            if (b && b->start_us < ev[e].end_us - eps) CHK_FAIL("ADD of node %d after its backward", ev[e].node);
        }
    /* ZERO and AdamW */
    for (int d = 0; d < D; d++) {
        if (!used[d]) continue;
        if (zeros[d] != 1 + (d == loss_dev)) CHK_FAIL("device %d has %d ZERO ops", d, zeros[d]);
        if (!O[d]) CHK_FAIL("device %d misses its AdamW step", d);
        for (int e = 0; e < n_ev; e++) {
            if (ev[e].device != d || is_xfer(&ev[e])) continue;
            if (ev[e].kind == SIM_EV_BWD && O[d]->start_us < ev[e].end_us - eps)
                CHK_FAIL("AdamW on device %d before its last backward", d);
            if (ev[e].kind != SIM_EV_ZERO && ev[e].start_us < -eps) CHK_FAIL("negative start");
        }
    }
    /* compute tracks: no overlap, no idle without a reason (the end of a
     * transfer to or from the device counts as one, and the end of its
     * gradients' zero on the comm stream) */
    {
        int k = 0;
        for (int e = 0; e < n_ev; e++) {
            if (ev[e].stream == 1 && !is_xfer(&ev[e]) && ev[e].kind != SIM_EV_ZERO)
                CHK_FAIL("%s on the comm stream of device %d", sim_event_kind_name(ev[e].kind), ev[e].device);
            if (is_xfer(&ev[e]) && ev[e].stream != 1) CHK_FAIL("a transfer of node %d on a compute stream", ev[e].node);
            if (ev[e].stream == 0) sorted[k++] = &ev[e];
        }
        qsort(sorted, (size_t)k, sizeof *sorted, by_device_start);
        int nt = 0;
        for (int e = 0; e < n_ev; e++) nt += ev[e].stream == 1;
        double *ends = calloc((size_t)2 * nt + 1, sizeof *ends);
        int *edev = calloc((size_t)2 * nt + 1, sizeof *edev);
        if (!ends || !edev) {
            free(ends);
            free(edev);
            CHK_FAIL("out of memory in the checker");
        }
        int ne = 0;
        for (int e = 0; e < n_ev; e++)
            if (is_xfer(&ev[e])) {
                ends[ne] = ev[e].end_us;
                edev[ne++] = ev[e].device;
                ends[ne] = ev[e].end_us;
                edev[ne++] = ev[e].dst_device;
            } else if (ev[e].stream == 1) { /* the gradients' zero */
                ends[ne] = ev[e].end_us;
                edev[ne++] = ev[e].device;
            }
        for (int e = 0; e < k && ok; e++) {
            const sim_event *x = sorted[e];
            int first = e == 0 || sorted[e - 1]->device != x->device;
            double prev = first ? 0.0 : sorted[e - 1]->end_us;
            if (x->start_us < prev - eps) {
                snprintf(msg, len, "device %d runs two things at %.3f", x->device, x->start_us);
                ok = 0;
                break;
            }
            int why = fabs(x->start_us - prev) <= eps || x->kind == SIM_EV_OPT;
            for (int t = 0; t < ne && !why; t++)
                why = edev[t] == x->device && fabs(ends[t] - x->start_us) <= eps;
            if (!why) {
                snprintf(msg, len, "%s of node %d mb %d on device %d waits until %.3f for no reason",
                         sim_event_kind_name(x->kind), x->node, x->micro_batch, x->device, x->start_us);
                ok = 0;
            }
        }
        free(ends);
        free(edev);
        if (!ok) goto out;
    }
    /* transfer tracks: into a device, never two at once (with two devices:
     * never two of a device's transfers at once) */
    for (int d = 0; d < D * (ideal_links ? D : 1); d++) {
        int k = 0;
        for (int e = 0; e < n_ev; e++) {
            if (!is_xfer(&ev[e])) continue;
            if (ideal_links ? ev[e].device * D + ev[e].dst_device == d
                            : (ev[e].dst_device == d || (n_used == 2 && ev[e].device == d)))
                sorted[k++] = &ev[e];
        }
        qsort(sorted, (size_t)k, sizeof *sorted, by_start);
        for (int a = 1; a < k; a++)
            if (sorted[a]->start_us < sorted[a - 1]->end_us - eps)
                CHK_FAIL("transfers of node %d and node %d overlap on %s %d", sorted[a - 1]->node, sorted[a]->node,
                         ideal_links ? "link" : "the comm stream of device", d);
    }
out:
    free(F);
    free(B);
    free(A);
    free(G);
    free(adds);
    free(sorted);
    return ok;
}
