/*
 * grouping.h: co-location groups, the units the placers assign to devices.
 *
 * The 2017 paper's co-location heuristic: an op whose output has exactly one
 * consumer joins its consumer's group (they would only pay a transfer if they
 * were split, and nothing else needs the output). On the default GPT this
 * turns 40 nodes into 13 groups: the embedding, per block {ln1, attn, res1}
 * and {ln2, mlp, res2}, the last of which also takes ln_f, head and loss
 * (the last residual has a single consumer, ln_f).
 *
 * With GROUPING_NONE every node is its own group, so the same placers can
 * work on nodes. Groups are numbered in topological order (by their first
 * node), so a group placement reads left to right like a node placement.
 *
 * A grouping also carries a fixed-size feature vector per group, the
 * placer network's input (see grouping_features).
 */
#ifndef PLACER_POLICY_GROUPING_H
#define PLACER_POLICY_GROUPING_H

#include <stddef.h>

#include "graph.h"
#include "status.h"

/* GROUPING_LEARNED and GROUPING_EAGLE name the trainer's learned groupings
 * (grouper.h); the problem's units are then the nodes, as with NONE. */
typedef enum { GROUPING_COLOCATE = 0, GROUPING_NONE, GROUPING_LEARNED, GROUPING_EAGLE } grouping_mode;

/* Features per group, see grouping.c for the list. */
#define GROUP_N_FEATURES (OP_KIND_COUNT + 9)

typedef struct {
    grouping_mode mode;  /* how it was built */
    int n_nodes;         /* nodes of the graph */
    int n_groups;        /* groups, 1..n_nodes */
    int *node_group;     /* n_nodes: group of each node */
    int *group_start;    /* n_groups + 1 offsets into members */
    int *members;        /* nodes of group g: members[group_start[g] .. group_start[g+1]), ascending */
    double *features;    /* n_groups * GROUP_N_FEATURES, row-major */
    int chain;           /* 1 when every group edge joins consecutive groups g -> g+1 */
} grouping;

/* Parse "colocate", "none", "learned" or "eagle". PL_ERR_INVALID with a
 * message otherwise. */
pl_status grouping_parse_mode(const char *text, grouping_mode *out, char *msg, size_t len);
const char *grouping_mode_name(grouping_mode m);

/* Group the nodes of g. On success *out owns a new grouping (grouping_destroy).
 * g is only read during the call. PL_ERR_NOMEM on allocation failure (nothing
 * leaks), PL_ERR_INVALID for an empty graph. */
pl_status grouping_build(const graph *g, grouping_mode mode, grouping **out, char *msg, size_t len);

/* Free. Accepts NULL. */
void grouping_destroy(grouping *gr);

/* A grouping with room for any grouping of n_nodes nodes (up to n_nodes
 * groups), for grouping_assign. PL_ERR_INVALID for n_nodes < 1, PL_ERR_NOMEM. */
pl_status grouping_alloc(int n_nodes, grouping **out);

/* Make gr (from grouping_alloc for g's node count) the grouping in which
 * nodes with equal labels (any ints) share a group; groups are numbered by
 * their first node, and their features and the chain flag computed as
 * grouping_build does. mode is recorded. Allocates nothing. */
void grouping_assign(grouping *gr, const graph *g, const int *labels, grouping_mode mode);

/* Expand a group placement (n_groups entries) to a node placement (n_nodes). */
void grouping_expand(const grouping *gr, const int *group_dev, int *node_dev);

/* Collapse a node placement to a group placement when every group's nodes
 * share one device. Returns 1 and fills group_dev on success, 0 when some
 * group is split (group_dev is then unspecified). */
int grouping_collapse(const grouping *gr, const int *node_dev, int *group_dev);

#endif
