/*
 * score.h: a whole expert placement scored on one load window, every MoE
 * layer through the layout simulator's balance scorer (moe_balance.h), and
 * summed into what users compare: busiest/mean per layer and its mean,
 * cross-node copies per token, the worst NIC's bytes, the weights a re-plan
 * moves, and the MoE layers' simulated time on the busiest GPU.
 */
#ifndef PLACER_POLICY_EXPERTS_SCORE_H
#define PLACER_POLICY_EXPERTS_SCORE_H

#include <stddef.h>

#include "expert_load.h"
#include "expert_map.h"
#include "moe_balance.h"
#include "status.h"

typedef struct {
    double busiest_over_mean;      /* mean over layers of max GPU load / mean */
    double worst_busiest_over_mean;/* the largest layer's */
    double copies_per_token;       /* mean over layers */
    double worst_nic_bytes;        /* the largest over layers, one dispatch */
    int copies_sampled;            /* 1: copies from sampled tokens */
    double compute_us;             /* the MoE layers' compute on the busiest GPU, summed over layers (0 without a cost) */
    double comm_us;                /* their dispatch and combine */
    double balanced_us;            /* the same layers perfectly balanced (f = 1, NIC bytes as placed) */
} experts_score;

/* Score m on window w of ld (same layers and experts). cost NULL: no times.
 * layer (may be NULL) gets the n_layers per-layer scores; gpu_load (may be
 * NULL) the [n_layers][n_gpus] loads. c must be made for m's shape.
 * PL_ERR_INVALID for mismatched shapes or a map whose slots leave a loaded
 * expert out. */
pl_status experts_score_map(moe_balance_ctx *c, const expert_map *m, const expert_load *ld, int w,
                            const moe_balance_cost *cost, experts_score *out, moe_balance_layer *layer,
                            double *gpu_load, char *msg, size_t len);

#endif
