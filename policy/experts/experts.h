/*
 * experts.h: expert placement for a whole model: which experts (and how many
 * replicas of each) live on which GPU, every MoE layer, planned on the load
 * windows seen so far and judged on the next one.
 *
 * Placers (experts_placer):
 *   contiguous, round-robin   load-unaware baselines (eplb.h)
 *   eplb                      DeepSeek's EPLB as its entry point chooses
 *                             (hierarchical when the nodes divide the groups)
 *   eplb-hierarchical, eplb-global   the two policies forced
 *   eplb-swap                 EPLB (its own choice), then swap refinement on
 *                             the same window (refine.h: swaps and replica
 *                             moves; copies held to EPLB hierarchical's)
 *   search                    the search: EPLB's two policies and the
 *                             node-aware packing (nodelpt.h) at a grid of its
 *                             copies weight as candidates, the best on the
 *                             planning window kept and refined (refine.h);
 *                             "best": the least busiest/mean within the copies
 *                             cap when one is set, else the least busiest/mean
 *                             + lambda copies, lambda the MoE layer's own
 *                             exchange rate (the simulated time's change with
 *                             copies over its change with the load factor);
 *                             a small layer (64 experts, 16 GPUs, 128 slots
 *                             at most) also tries the exact program (1 s)
 *                             and keeps its optimum when it scores better
 *   learned                   the set model (learned.h): per-expert features
 *                             of the recent windows into the planning load and
 *                             the search's weights, trained against the
 *                             scorer's cost on generator seeds of its own
 *   exact                     the proven optimum of the busiest GPU (small
 *                             layers; exact.h), on the planning window
 * All plan on window t of a load (and, for search and learned, the windows
 * before it); the caller scores on t + 1 (moe_balance.h).
 *
 * After placing, every placer but the load-unaware ones keeps as much of the
 * previous plan's slots in place as a relabelling of GPUs allows (nodes as
 * wholes, then GPUs inside a node, then slots inside a GPU): the loads and
 * nodes reached do not change, the weights a re-plan moves drop
 * (experts_relabel). EPLB's own output is kept as it is (eplb*), as vLLM and
 * SGLang run it.
 */
#ifndef PLACER_POLICY_EXPERTS_EXPERTS_H
#define PLACER_POLICY_EXPERTS_EXPERTS_H

#include <stddef.h>
#include <stdint.h>

#include "eplb.h"
#include "expert_load.h"
#include "expert_map.h"
#include "expert_model_file.h"
#include "moe_balance.h"
#include "status.h"

typedef enum {
    EXPERTS_CONTIGUOUS = 0,
    EXPERTS_ROUND_ROBIN,
    EXPERTS_EPLB,
    EXPERTS_EPLB_HIER,
    EXPERTS_EPLB_GLOBAL,
    EXPERTS_EPLB_SWAP,
    EXPERTS_SEARCH,
    EXPERTS_LEARNED,
    EXPERTS_EXACT,
    EXPERTS_PLACER_COUNT
} experts_placer;

/* "contiguous", "round-robin", "eplb", "eplb-hierarchical", "eplb-global",
 * "eplb-swap", "search", "learned", "exact". */
const char *experts_placer_name(experts_placer p);
/* The placer named s; -1 when none. */
int experts_placer_parse(const char *s);

/* The learned placer's parameters (learned.h trains them; data/experts/
 * learned-*.json ships them: inputs/expert_model_file.h). The planning load
 * of expert e is max(w . f_e, 1e-3) times the layer's mean, f_e its features
 * over windows t .. t-3 relative to each window's mean: x_t, x_{t-1}, an
 * EMA (weights 1/2, 1/4, ...), the mean, the max, its group's mean at t,
 * |x_t - x_{t-1}|, 1. */
#define EXPERTS_FEATURES EXPERT_MODEL_FEATURES
#define EXPERTS_HISTORY EXPERT_MODEL_HISTORY
typedef expert_model_params experts_model;

/* The model the placer falls back to when none is given (what "search"
 * runs): the planning load is the last window, scenarios it alone, the
 * simulator's lambda as it is, the packing's grid of mu. */
void experts_model_default(experts_model *m);

typedef struct {
    eplb_shape shape;          /* experts, slots, GPUs, GPUs a node, groups */
    int top_k;                 /* experts per token (the copies estimate without samples) */
    double copies_margin;      /* >= 0: search, learned and eplb-swap keep copies within EPLB hierarchical's
                                  x (1 + margin) on the planning window (where hierarchical runs); < 0: no
                                  cap, the simulator's lambda trades balance for copies */
    int max_moves;             /* refinement moves per layer (<= 0: 32) */
    int no_small_exact;        /* 1: the search skips the exact program on small layers (its local search alone) */
    int threads;               /* layers planned at once (<= 0: the online CPUs, at most 16); the plan does
                                  not depend on it */
    double exact_time_s;       /* exact: per layer (<= 0: 60) */
    const experts_model *model;/* learned (NULL: experts_model_default) */
    const moe_balance_cost *cost; /* the MoE layer's cost (may be NULL: lambda 0.05): what the search
                                  trades balance against copies with; borrowed for the planner's life */
} experts_options;

/* What a plan did. */
typedef struct {
    double plan_us;            /* wall time of the whole plan */
    int layers;
    int exact_proven;          /* exact: layers proven optimal */
    int hierarchical;          /* eplb: 1 when EPLB chose its hierarchical policy */
} experts_plan_info;

typedef struct experts_planner experts_planner;

/* A planner for shape o->shape and loads of up to max_samples sampled
 * tokens of max_k experts (scratch for every placer). o is copied. */
pl_status experts_planner_create(const experts_options *o, int max_samples, int max_k, experts_planner **out,
                                 char *msg, size_t len);
void experts_planner_destroy(experts_planner *p);

/* Use m (copied) as the learned placer's parameters from now on. */
void experts_planner_set_model(experts_planner *p, const experts_model *m);

/* Plan every layer of load ld on window t (0 <= t < ld->n_windows) with
 * placer pl into out (a map of ld's layers and the planner's shape); prev
 * (may be NULL) is the plan in force, whose slots the relabelling keeps.
 * PL_ERR_INVALID with one line for a load whose experts differ from the
 * shape, a window out of range, a shape the placer cannot take (EPLB
 * hierarchical's rules, exact's size). */
pl_status experts_plan(experts_planner *p, experts_placer pl, const expert_load *ld, int t, const expert_map *prev,
                       expert_map *out, experts_plan_info *info, char *msg, size_t len);

/* Relabel layer `cur` (n_slots) to keep prev's slots in place: nodes as
 * wholes (greedy on the most slots kept), then GPUs inside each node, then
 * slots inside each GPU. Loads and the nodes each expert reaches are
 * unchanged. */
void experts_relabel(const eplb_shape *s, const int32_t *prev, int32_t *cur);

/* The planning load of expert e in layer l from windows <= t under model m
 * (the learned head), into plan[n_experts]; exposed for the trainer. */
void experts_planning_load(const experts_model *m, const expert_load *ld, int t, int l, int n_groups, double *plan);

#endif
