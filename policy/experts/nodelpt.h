/*
 * nodelpt.h: a node-aware longest-processing-time packing of one layer's
 * replicas, the constructive start of the search (experts.h).
 *
 * EPLB's global policy packs every replica, heaviest first, onto the
 * lightest GPU with room, blind to nodes: balanced, but a token's experts
 * scatter over about a third more nodes than under the hierarchical policy,
 * which keeps each group on its node. This packing keeps the global
 * policy's order and replica counts and charges each choice of GPU g on
 * node n for the nodes it adds:
 *   cost(g) = (L_g + x) / mean + mu * d(e, n)
 *   d(e, n) = k (x / W) (N - 1) / N (1 - R_{e,n})   for n not e's home node, else 0
 * x = w_e / c_e the replica's load, W the layer's load, k experts a token,
 * N nodes, e's home node the node EPLB's step 1 packs its group onto, R_{e,n}
 * the share of the sampled tokens that chose e which also chose an expert
 * whose home is n (such tokens reach n anyway; without samples R = 0). d is
 * the remote copies per token the replica adds; mu = 0 is EPLB's global
 * policy, a large mu keeps replicas home while home GPUs have room. A GPU
 * takes no second replica of an expert while another GPU with room can.
 */
#ifndef PLACER_POLICY_EXPERTS_NODELPT_H
#define PLACER_POLICY_EXPERTS_NODELPT_H

#include <stdint.h>

#include "eplb.h"
#include "status.h"

typedef struct nodelpt_work nodelpt_work;
pl_status nodelpt_work_create(const eplb_shape *s, nodelpt_work **out);
void nodelpt_work_destroy(nodelpt_work *w);

/* Prepare layer w (tokens per expert) with its samples (may be NULL):
 * replica counts (greedy, as EPLB's step 2 over all slots), home nodes,
 * R. Then nodelpt_pack may be called for several mu. */
pl_status nodelpt_prepare(nodelpt_work *wk, const eplb_shape *s, const double *w, const int16_t *samples,
                          int n_samples, int sample_k, int top_k);

/* Pack the prepared layer at mu into phy2log[n_slots]. */
void nodelpt_pack(nodelpt_work *wk, double mu, int32_t *phy2log);

#endif
