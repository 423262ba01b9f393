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
    if (text && !strcmp(text, "learned")) { *out = GROUPING_LEARNED; return PL_OK; }
    if (text && !strcmp(text, "eagle")) { *out = GROUPING_EAGLE; return PL_OK; }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown grouping '%s' (use colocate, none, learned or eagle)",
                   text ? text : "");
}

const char *grouping_mode_name(grouping_mode m) {
    switch (m) {
    case GROUPING_NONE: return "none";
    case GROUPING_LEARNED: return "learned";
    case GROUPING_EAGLE: return "eagle";
    default: return "colocate";
    }
}

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

pl_status grouping_alloc(int n_nodes, grouping **out) {
    *out = NULL;
    if (n_nodes < 1) return PL_ERR_INVALID;
    grouping *gr = calloc(1, sizeof *gr);
    if (!gr) return PL_ERR_NOMEM;
    gr->n_nodes = n_nodes;
    gr->node_group = malloc(sizeof *gr->node_group * (size_t)n_nodes);
    gr->members = malloc(sizeof *gr->members * (size_t)n_nodes);
    gr->group_start = calloc((size_t)n_nodes + 1, sizeof *gr->group_start);
    gr->features = calloc((size_t)n_nodes * GROUP_N_FEATURES, sizeof *gr->features);
    if (!gr->node_group || !gr->members || !gr->group_start || !gr->features) {
        grouping_destroy(gr);
        return PL_ERR_NOMEM;
    }
    *out = gr;
    return PL_OK;
}

void grouping_assign(grouping *gr, const graph *g, const int *labels, grouping_mode mode) {
    const int n = gr->n_nodes;
    gr->mode = mode;
    /* number groups by their first node: the representative label of group
     * k is kept in members[k] while numbering (members is rebuilt below) */
    int G = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < G && gr->members[k] != labels[i]) k++;
        if (k == G) gr->members[G++] = labels[i];
        gr->node_group[i] = k;
    }
    gr->n_groups = G;
    memset(gr->group_start, 0, sizeof *gr->group_start * ((size_t)G + 1));
    for (int i = 0; i < n; i++) gr->group_start[gr->node_group[i] + 1]++;
    for (int k = 0; k < G; k++) gr->group_start[k + 1] += gr->group_start[k];
    /* members in ascending node order: a group's next slot is group_start[k]
     * plus the members placed so far, counted by scanning backwards */
    for (int i = n - 1; i >= 0; i--) gr->members[--gr->group_start[gr->node_group[i] + 1]] = i;
    /* the decrements above moved each group_start[k+1] down to group k's
     * first slot; restore the offsets */
    for (int k = 0; k < G; k++) gr->group_start[k] = gr->group_start[k + 1];
    gr->group_start[G] = n;
    memset(gr->features, 0, sizeof *gr->features * (size_t)G * GROUP_N_FEATURES);

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
}

pl_status grouping_build(const graph *g, grouping_mode mode, grouping **out, char *msg, size_t len) {
    *out = NULL;
    if (!g || g->n_nodes <= 0) return pl_fail(msg, len, PL_ERR_INVALID, "empty graph");
    const int n = g->n_nodes;
    int *parent = malloc(sizeof *parent * (size_t)n);
    grouping *gr = NULL;
    if (!parent || grouping_alloc(n, &gr) != PL_OK) {
        free(parent);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory building groups");
    }
    for (int i = 0; i < n; i++) parent[i] = i;
    if (mode == GROUPING_COLOCATE) {
        for (int i = 0; i < n; i++) {
            if (graph_n_consumers(g, i) != 1) continue;
            int c = g->cons[g->cons_start[i]];
            int a = uf_find(parent, i), b = uf_find(parent, c);
            if (a != b) parent[a] = b;
        }
    }
    for (int i = 0; i < n; i++) parent[i] = uf_find(parent, i);
    grouping_assign(gr, g, parent, mode);
    free(parent);
    *out = gr;
    return PL_OK;
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
