/*
 * refine.h: local search over one MoE layer's slots, from a starting
 * placement (EPLB's, usually): the "swap refinement" baseline and the
 * search the learned placer steers.
 *
 * The objective, over H load scenarios w^h (the prediction first; recent
 * windows after it, each with a weight) and the layer's sampled tokens:
 *   F = sum_h a_h max_g L^h_g / mean L^h  +  lambda copies
 * L^h_g the GPU loads under the even split (moe_balance.h), copies the
 * distinct remote nodes per sampled token (the same formula). A move that
 * would push copies above copies_cap is refused.
 *
 * Moves, each tried from the busiest GPU of the first scenario (ties: the
 * lowest index), the best improving one taken, until none improves F or the
 * time or move budget is spent:
 *   swap       two slots on different GPUs exchange experts;
 *   replicate  (when allowed) a slot of an expert with two or more replicas
 *              becomes a replica of an expert on the busiest GPU (replica
 *              counts change; the total stays).
 *   replicate  also the other way: a replica on the busiest GPU (of an
 *              expert with two or more) becomes a replica of an expert
 *              that one more replica would leave light.
 * A swap never puts a second replica of an expert on a GPU that holds one.
 * With kicks > 0, iterated local search: the best placement so far is
 * kicked (a random swap, or a random replica move, from a fixed seed) and
 * descended again, kicks times, the best kept. Deterministic.
 */
#ifndef PLACER_POLICY_EXPERTS_REFINE_H
#define PLACER_POLICY_EXPERTS_REFINE_H

#include <stdint.h>

#include "eplb.h"
#include "status.h"

#define REFINE_MAX_SCENARIOS 8

typedef struct {
    int n_scen;                                /* 1..REFINE_MAX_SCENARIOS */
    const double *scen[REFINE_MAX_SCENARIOS];  /* [n_experts] loads per scenario; scen[0] the prediction */
    double scen_weight[REFINE_MAX_SCENARIOS];  /* a_h, >= 0 (all 0: a_0 = 1) */
    const int16_t *samples;                    /* [n_samples][sample_k] sampled tokens' experts, or NULL */
    int n_samples, sample_k;
    double copies_weight;                      /* lambda, >= 0 */
    double copies_cap;                         /* most copies per token allowed (INFINITY: no cap) */
    int replicate;                             /* 1: replica counts may change */
    double time_budget_us;                     /* stop after this long (<= 0: no limit) */
    int max_moves;                             /* stop a descent after this many moves (<= 0: no limit) */
    int kicks;                                 /* iterated local search: kicks of the best placement, each
                                                  followed by a descent (0: one descent) */
} refine_opts;

typedef struct {
    int moves;           /* moves taken */
    double f_start;      /* F before and after */
    double f_end;
    double copies_end;   /* copies per token after (0 without samples) */
} refine_stats;

typedef struct refine_work refine_work;
pl_status refine_work_create(const eplb_shape *s, int max_samples, int max_k, refine_work **out);
void refine_work_destroy(refine_work *w);

/* Improve phy2log[n_slots] in place under o. stats may be NULL.
 * PL_ERR_INVALID for a bad map (an id out of range, an expert with load and
 * no slot) or options. */
pl_status experts_refine(refine_work *wk, const eplb_shape *s, const refine_opts *o, int32_t *phy2log,
                         refine_stats *stats);

/* F of phy2log under o (the objective above), for callers that compare
 * candidates; copies (may be NULL) gets the copies per token. */
double experts_refine_objective(refine_work *wk, const eplb_shape *s, const refine_opts *o, const int32_t *phy2log,
                                double *copies);

#endif
