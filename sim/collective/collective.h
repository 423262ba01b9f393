/*
 * collective.h: the time of NCCL-style collectives and point-to-point sends
 * on a cluster (inputs/cluster.h), as a bandwidth / latency model of the
 * algorithm NCCL would pick.
 *
 * A group is a set of global GPU ranks (from layout_group_ranks), so where
 * its members live (one node, several nodes, several pods) follows the
 * rank grid. Figures follow nccl-tests: for a collective over n ranks of
 * S bytes (S = the full buffer: the all-reduce's input, the all-gather's
 * output, the reduce-scatter's input) taking t seconds,
 *   algbw = S / t
 *   busbw = algbw * 2(n-1)/n  (all-reduce)   algbw * (n-1)/n  (all-gather,
 *           reduce-scatter)
 * Algorithms modelled:
 *   ring       n-1 (or 2(n-1) for all-reduce) steps, each moving S/n bytes,
 *              at the slowest link of the ring (intra-node, inter-node
 *              per-GPU NIC share, or inter-pod share with oversubscription),
 *              each step paying the per-step latency of that link
 *   tree       (all-reduce across nodes) NCCL's double binary tree:
 *              log2(nodes) latency steps, bandwidth of the inter-node links
 *   hierarchical (a group spanning nodes with several members per node):
 *              intra-node reduce-scatter, inter-node ring over the nodes'
 *              shards, intra-node all-gather
 * The cheapest applicable algorithm is chosen, as NCCL's tuner does; the
 * estimate names it and gives its figures so `placer layout --explain` can
 * print them.
 */
#ifndef PLACER_SIM_COLLECTIVE_H
#define PLACER_SIM_COLLECTIVE_H

#include <stdint.h>

#include "cluster.h"
#include "coll_curves.h" /* coll_kind, coll_kind_name */
#include "status.h"

typedef struct {
    double time_us;       /* predicted time */
    const char *algo;     /* "ring", "tree", "hierarchical", "none" (n = 1); static */
    double algbw;         /* bytes/s, nccl-tests' sense */
    double busbw;         /* bytes/s, nccl-tests' sense */
    double link_bw;       /* bandwidth of the slowest link used, bytes/s */
    double latency_us;    /* the latency part of time_us */
    int n_ranks;          /* group size */
    int n_nodes;          /* nodes (hosts) the group spans */
    int n_domains;        /* NVLink domains the group spans (1: NVLink only) */
    int n_pods;           /* pods the group spans */
    const char *source;   /* where time_us came from: "model" (the cluster's figures, here),
                             "measured" or "fitted" (sim/collective/coll_measured.h); static */
} coll_estimate;

/* Time of collective k over the n ranks in ranks[] (global GPU indices,
 * distinct, each < cluster_n_gpus) moving `bytes` (the full buffer, see
 * above). n = 1 costs 0 with algo "none". PL_ERR_INVALID for a bad group
 * or negative bytes; *out written on PL_OK. */
pl_status coll_time(const cluster *c, coll_kind k, const int64_t *ranks, int n, double bytes,
                    coll_estimate *out);

/* Time of one point-to-point send of `bytes` from GPU src to GPU dst:
 * latency of the link they share plus bytes at its bandwidth (scaled by
 * the cluster's p2p_efficiency). 0 when src == dst. */
double p2p_time_us(const cluster *c, int64_t src, int64_t dst, double bytes);

#endif
