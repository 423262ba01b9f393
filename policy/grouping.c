/*
 * grouping.c: co-location groups (see grouping.h) and their features.
 *
 * Groups come from a union-find pass: node i with exactly one consumer c is
 * merged with c. The features of a group, the placer network's input, are
 * (GROUP_N_FEATURES doubles, all O(1) in magnitude):
 *    0..6   member count per op kind (embedding, layernorm, ..., loss)
 *    7      log(1 + bytes per sample the group sends to other groups) / 20
 *    8      log(1 + parameters) / 20
 *    9      log(1 + forward + backward FLOPs per sample) / 25
 *    10     log(1 + activation bytes kept per sample) / 20
 *    11     members / 4
 *    12     position g / (G - 1)  (0 for a single group)
 *    13     producer groups (distinct) / 2
 *    14     consumer groups (distinct) / 2
 *    15     span of the longest incoming edge in groups / 4
 * Only graph facts go in: the same net can place a graph on any profile,
 * and a graph of any length (generalisation from 6 to 12 layers).
 */
#include "grouping.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pl_status grouping_parse_mode(const char *text, grouping_mode *out, char *msg, size_t len) {
    if (text && !strcmp(text, "colocate")) { *out = GROUPING_COLOCATE; return PL_OK; }
    if (text && !strcmp(text, "none")) { *out = GROUPING_NONE; return PL_OK; }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown grouping '%s' (use colocate or none)", text ? text : "");
}

const char *grouping_mode_name(grouping_mode m) { return m == GROUPING_NONE ? "none" : "colocate"; }

static int uf_find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

void grouping_destroy(grouping *gr) {
    if (!gr) return;
    free(gr->node_group);
    free(gr->group_start);
    free(gr->members);
    free(gr->features);
    free(gr);
}

pl_status grouping_build(const graph *g, grouping_mode mode, grouping **out, char *msg, size_t len) {
    *out = NULL;
    if (!g || g->n_nodes <= 0) return pl_fail(msg, len, PL_ERR_INVALID, "empty graph");
    const int n = g->n_nodes;
    pl_status st = PL_ERR_NOMEM;
    int *parent = malloc(sizeof *parent * (size_t)n);
    int *root_group = malloc(sizeof *root_group * (size_t)n);
    int *fill = NULL;
    grouping *gr = calloc(1, sizeof *gr);
    if (!parent || !root_group || !gr) goto out_free;
    gr->mode = mode;
    gr->n_nodes = n;
    gr->node_group = malloc(sizeof *gr->node_group * (size_t)n);
    gr->members = malloc(sizeof *gr->members * (size_t)n);
    if (!gr->node_group || !gr->members) goto out_free;

    for (int i = 0; i < n; i++) parent[i] = i;
    if (mode == GROUPING_COLOCATE) {
        for (int i = 0; i < n; i++) {
            if (graph_n_consumers(g, i) != 1) continue;
            int c = g->cons[g->cons_start[i]];
            int a = uf_find(parent, i), b = uf_find(parent, c);
            if (a != b) parent[a] = b;
        }
    }
    /* number groups by their first node: scanning nodes in order, a root
     * gets the next number the first time one of its nodes appears */
    for (int i = 0; i < n; i++) root_group[i] = -1;
    int G = 0;
    for (int i = 0; i < n; i++) {
        int r = uf_find(parent, i);
        if (root_group[r] < 0) root_group[r] = G++;
        gr->node_group[i] = root_group[r];
    }
    gr->n_groups = G;
    gr->group_start = calloc((size_t)G + 1, sizeof *gr->group_start);
    fill = calloc((size_t)G, sizeof *fill);
    gr->features = calloc((size_t)G * GROUP_N_FEATURES, sizeof *gr->features);
    if (!gr->group_start || !fill || !gr->features) goto out_free;
    for (int i = 0; i < n; i++) gr->group_start[gr->node_group[i] + 1]++;
    for (int k = 0; k < G; k++) gr->group_start[k + 1] += gr->group_start[k];
    for (int i = 0; i < n; i++) {
        int k = gr->node_group[i];
        gr->members[gr->group_start[k] + fill[k]++] = i;
    }

    /* features and the chain property */
    gr->chain = 1;
    for (int k = 0; k < G; k++) {
        double *f = gr->features + (size_t)k * GROUP_N_FEATURES;
        double sent = 0, params = 0, flops = 0, act = 0;
        int n_prod = 0, n_cons = 0, span = 0;
        int prod_seen[64], cons_seen[64]; /* distinct neighbour groups, bounded */
        for (int q = gr->group_start[k]; q < gr->group_start[k + 1]; q++) {
            int i = gr->members[q];
            const graph_node *nd = &g->nodes[i];
            f[nd->kind] += 1.0;
            params += (double)nd->params;
            flops += nd->fwd_flops_per_sample + nd->bwd_flops_per_sample;
            act += (double)nd->act_bytes_per_sample;
            int leaves = 0;
            for (int e = g->cons_start[i]; e < g->cons_start[i + 1]; e++) {
                int cg = gr->node_group[g->cons[e]];
                if (cg == k) continue;
                leaves = 1;
                int seen = 0;
                for (int s = 0; s < n_cons; s++) seen |= cons_seen[s] == cg;
                if (!seen && n_cons < 64) cons_seen[n_cons++] = cg;
                if (cg != k + 1) gr->chain = 0;
            }
            if (leaves) sent += (double)nd->out_bytes_per_sample;
            for (int j = 0; j < nd->n_inputs; j++) {
                int pg = gr->node_group[nd->inputs[j]];
                if (pg == k) continue;
                int seen = 0;
                for (int s = 0; s < n_prod; s++) seen |= prod_seen[s] == pg;
                if (!seen && n_prod < 64) prod_seen[n_prod++] = pg;
                if (k - pg > span) span = k - pg;
            }
        }
        f[OP_KIND_COUNT + 0] = log1p(sent) / 20.0;
        f[OP_KIND_COUNT + 1] = log1p(params) / 20.0;
        f[OP_KIND_COUNT + 2] = log1p(flops) / 25.0;
        f[OP_KIND_COUNT + 3] = log1p(act) / 20.0;
        f[OP_KIND_COUNT + 4] = (gr->group_start[k + 1] - gr->group_start[k]) / 4.0;
        f[OP_KIND_COUNT + 5] = G > 1 ? (double)k / (double)(G - 1) : 0.0;
        f[OP_KIND_COUNT + 6] = n_prod / 2.0;
        f[OP_KIND_COUNT + 7] = n_cons / 2.0;
        f[OP_KIND_COUNT + 8] = span / 4.0;
    }
    free(parent);
    free(root_group);
    free(fill);
    *out = gr;
    return PL_OK;

out_free:
    free(parent);
    free(root_group);
    free(fill);
    grouping_destroy(gr);
    return pl_fail(msg, len, st, "out of memory building groups");
}

void grouping_expand(const grouping *gr, const int *group_dev, int *node_dev) {
    for (int i = 0; i < gr->n_nodes; i++) node_dev[i] = group_dev[gr->node_group[i]];
}

int grouping_collapse(const grouping *gr, const int *node_dev, int *group_dev) {
    for (int k = 0; k < gr->n_groups; k++) group_dev[k] = -1;
    for (int i = 0; i < gr->n_nodes; i++) {
        int k = gr->node_group[i];
        if (group_dev[k] < 0) group_dev[k] = node_dev[i];
        else if (group_dev[k] != node_dev[i]) return 0;
    }
    return 1;
}
