/*
 * grouper.h: the learned grouping of the hierarchical planner (Mirhoseini
 * et al., ICLR 2018) and EAGLE's grouper-to-placer link (Lan et al. 2021).
 *
 * The grouper is a feed-forward network over per-node features (graph
 * facts only, node_features below):
 *
 *   h_n   = tanh(W1 f_n + b1)                       (N, Hg)
 *   z_n   = W2 h_n + b2 + prior_n                   (N, G)
 *   P_n   = softmax(z_n)                            node n's group distribution
 *   g_n   ~ P_n                                     sampled, independently per node
 *
 * prior_n[g] = -prior * (x_n G - g - 1/2)^2 with x_n = n / (N - 1) the
 * node's position in topological order (or its position in work,
 * grouper_acts_set_positions): a fixed (not learned) term that
 * makes the first grouper prefer contiguous chunks of the topological
 * order, as the placer's "stay" prior makes its first policy prefer runs
 * (prior = 0: the paper's uniform start, every node's group uniform).
 *
 * The sampled labels become groups (grouping_assign: equal labels form a
 * group; empty labels vanish; groups are numbered by their first node), and
 * the seq2seq placer (placer_net.h) places the groups. Its input for group
 * t is the group's feature vector (grouping.h's GROUP_N_FEATURES: op kinds,
 * sizes, position, neighbours), as the paper's group embeddings are
 * made of the member ops' types, output shapes and adjacency.
 *
 * One policy-gradient loss trains both networks: the probability of a
 * sample is p(labels) p(devices | groups), so
 *   log p = sum_n log P_n(g_n) + sum_t log p_t(a_t)
 * and REINFORCE's (or PPO's) per-sample weight multiplies the gradient of
 * the whole sum. In the hierarchical planner the placer's input depends
 * on the grouper only through the sampled labels (not differentiable),
 * so the grouper learns only from the first term.
 *
 * EAGLE's link. The abstract says that EAGLE "feeds the grouper's
 * parameters [outputs] into the placer's inputs through an extra RNN" so
 * that the placer's gradient reaches the grouper; it leaves the RNN's
 * input, its order and how its states become the placer's inputs open.
 * What is implemented here:
 *   - an LSTM of width Hl runs over the nodes in topological order; its
 *     input at node n is [P_n ; f_n], the grouper's soft output (all G
 *     probabilities, differentiable) and the node's features;
 *   - group t's placer input is [group features (as above) ; the mean of
 *     the link states l_n over t's sampled members], so the placer sees
 *     GROUP_N_FEATURES + Hl numbers per group;
 *   - the loss is the same joint log-probability; its gradient now also
 *     flows from the placer's log-probabilities through the placer's input
 *     (placer_net_backward_input), the mean, the LSTM and P_n into W1, b1,
 *     W2, b2, besides the score-function term of the labels. This is
 *     exact: the placer's distribution is a function of theta_grouper
 *     through its input, and the estimator differentiates log p of the
 *     whole sample with respect to every parameter it depends on.
 *   - the prior enters only z_n (it has no parameters).
 * Gradients are checked against finite differences in
 * tests/policy/test_grouper.c.
 */
#ifndef PLACER_POLICY_GROUPER_H
#define PLACER_POLICY_GROUPER_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "grouping.h"
#include "placer_net.h"
#include "status.h"
#include "util.h"

/* Per-node features: op kind one-hot (OP_KIND_COUNT), then
 * log(1 + output bytes per sample) / 20, log(1 + parameters) / 20,
 * log(1 + fwd + bwd FLOPs per sample) / 25, log(1 + activation bytes kept
 * per sample) / 20, position n / (N - 1), inputs / 2, consumers / 2. */
#define NODE_N_FEATURES (OP_KIND_COUNT + 7)

/* Fill out (N, NODE_N_FEATURES) for graph g. */
void node_features(const graph *g, double *out);

typedef struct {
    int eagle;        /* 1: with EAGLE's link LSTM */
    int n_features;   /* Fn, per-node inputs */
    int n_groups;     /* G */
    int hidden;       /* Hg */
    int link_hidden;  /* Hl (used when eagle) */
    double prior;     /* contiguity prior strength (>= 0) */
} grouper_config;

enum {
    GR_W1 = 0, /* (Hg, Fn) */
    GR_B1,     /* (Hg) */
    GR_W2,     /* (G, Hg) */
    GR_B2,     /* (G) */
    GR_LW,     /* (4Hl, G + Fn + Hl) link LSTM, input [P_n ; f_n ; l_{n-1}]; 0 without EAGLE */
    GR_LB,     /* (4Hl) */
    GR_N_TENSORS
};

typedef struct {
    grouper_config cfg;
    size_t n_params;
    size_t offset[GR_N_TENSORS];
    size_t size[GR_N_TENSORS];
    double *params;
    double *grads;
} grouper_net;

typedef struct grouper_acts grouper_acts;

/* Allocate and initialise (uniform +-1/sqrt(fan_in); W2 scaled by 0.1 so
 * that the first grouper is the prior; link forget-gate biases 1).
 * PL_ERR_INVALID for non-positive sizes or a negative prior; PL_ERR_NOMEM. */
pl_status grouper_net_create(const grouper_config *cfg, uint64_t seed, grouper_net **out);
void grouper_net_destroy(grouper_net *net);
void grouper_net_zero_grad(grouper_net *net);

static inline double *grouper_param(const grouper_net *net, int k) { return net->params + net->offset[k]; }
static inline double *grouper_grad(const grouper_net *net, int k) { return net->grads + net->offset[k]; }

/* Workspace for a graph of N nodes. */
pl_status grouper_acts_create(const grouper_net *net, int N, grouper_acts **out);
void grouper_acts_destroy(grouper_acts *a);

/* Measure the contiguity prior's positions in work instead of node count:
 * x_n = (w_0 + ... + w_{n-1} + w_n / 2) / (w_0 + ... + w_{N-1}) for the
 * N non-negative node weights w (the trainer passes each node's forward +
 * backward time), so the first grouper prefers chunks of equal work, not of
 * equal node count. PL_ERR_INVALID (prior unchanged) when a weight is
 * negative or not finite or all are zero. */
pl_status grouper_acts_set_positions(const grouper_net *net, grouper_acts *a, const double *w);

/* Forward pass over the N nodes' features (N, Fn): P and, with EAGLE, the
 * link states. Also clears the gradient accumulators of the workspace (a
 * forward pass starts a new loss). */
void grouper_forward(const grouper_net *net, grouper_acts *a, const double *nfeat);

/* P of the last forward pass, (N, G). */
const double *grouper_probs(const grouper_acts *a);

/* Draw labels (N) from P; returns their log-probability. */
double grouper_sample(const grouper_acts *a, pl_rng *rng, int *labels);
/* The most likely label of every node; returns the log-probability. */
double grouper_greedy(const grouper_acts *a, int *labels);
/* log-probability of given labels under P. */
double grouper_logp(const grouper_acts *a, const int *labels);

/* Placer inputs of the groups of gr (built from labels with
 * grouping_assign): feat (gr->n_groups, grouper_input_width) gets each
 * group's GROUP_N_FEATURES and, with EAGLE, the mean link state of its
 * members. */
int grouper_input_width(const grouper_net *net);
void grouper_group_inputs(const grouper_net *net, const grouper_acts *a, const grouping *gr, double *feat);

/* Loss terms, accumulated into the workspace (call grouper_backward after
 * all of them):
 *   label term    scale * (-w log P(labels))
 *   entropy term  scale * (-beta sum_n H(P_n)); returns the mean H(P_n)
 *   input term    dfeat (gr->n_groups, input width), the loss's gradient
 *                 with respect to grouper_group_inputs' output (only its
 *                 link columns matter) */
void grouper_add_label_grad(grouper_acts *a, const int *labels, double w, double scale);
double grouper_add_entropy_grad(grouper_acts *a, double beta, double scale);
void grouper_add_input_grad(const grouper_net *net, grouper_acts *a, const grouping *gr, const double *dfeat);

/* Backward pass of the last forward pass from the accumulated terms;
 * parameter gradients accumulate into net->grads. */
void grouper_backward(grouper_net *net, grouper_acts *a, const double *nfeat);

/* A batch of K samples of the joint policy (grouper, then placer over the
 * sampled groups): the networks and the per-sample buffers, all borrowed
 * (the trainer owns them). */
typedef struct {
    int K, N, G, W;          /* samples, nodes, groups, placer input width */
    const graph *g;          /* the graph (N nodes) */
    grouper_net *gnet;       /* grouper */
    grouper_acts *gacts;     /* its workspace for N nodes */
    const double *nfeat;     /* (N, Fn) node features */
    placer_net *pnet;        /* placer, input width W */
    placer_acts **sacts;     /* K workspaces, T_cap >= G, B_cap >= 1 */
    grouping **sgr;          /* K groupings (grouping_alloc(N)) */
    int *labels;             /* (K, N) group labels */
    double *sfeat;           /* (K, G, W) placer inputs */
    int *sdev;               /* (K, G) each sample's group devices */
    double *dfeat;           /* (G, W) scratch */
} hier_batch;

/* Sample K placements: every sample's labels first (rng order: k, then
 * node), then each sample's devices. node_dev (K, N) gets the node
 * placements, logp (K) the joint log-probabilities. */
pl_status hier_sample(hier_batch *b, pl_rng *rng, int *node_dev, double *logp);

/* The greedy decode: likeliest labels, then likeliest devices (uses
 * sample 0's buffers). node_dev (N). */
pl_status hier_greedy(hier_batch *b, int *node_dev);

/* Forward pass of the batch's labels and devices under the current
 * parameters; logp (K, may be NULL) gets the joint log-probabilities. */
pl_status hier_forward_given(hier_batch *b, double *logp);

/* After a forward pass (hier_sample or hier_forward_given): the loss
 *   L = (1/K) sum_k -w_k [log P(labels_k) + log p(devices_k | groups_k)]
 *       - beta sum_n H(P_n) - (beta/K) sum_k sum_t H(p_kt)
 * is returned and its gradient accumulated into both networks' grads
 * (zero them first). *entropy (may be NULL) gets the placer's mean
 * per-decision entropy. */
double hier_loss_backward(hier_batch *b, const double *w, double beta, double *entropy);

#endif
