/*
 * plan_search_internal.h: what the planner's search files share (plan.h
 * says what the search does):
 *   plan_enumerate.c  the layouts, in a fixed order
 *   plan_bound.c      the step-time and memory lower bounds, with the costs
 *                     a shape shares cached across its recipes and orders
 *   plan_threads.c    a parallel loop with a deterministic result
 *   plan_simulate.c   one layout simulated as the search does
 *   plan_search.c     the search: candidates, waves, the top list, the
 *                     refinement of splits
 */
#ifndef PLACER_PLAN_PLAN_SEARCH_INTERNAL_H
#define PLACER_PLAN_PLAN_SEARCH_INTERNAL_H

#include <stdint.h>

#include "plan.h"

/* One enumerated layout that passed the memory bound, as the search keeps
 * it until it is simulated (a layout is 5 kB; this is 56 bytes). */
typedef struct {
    int tp, cp, pp, vp, dp, mbs;
    int ep, etp;              /* the expert grid (1, 1 for a dense model) */
    signed char recompute, zero, sched;
    signed char pass;         /* index into the search's precisions */
    signed char over_mem;     /* over the memory bound (only an exhaustive search keeps these) */
    double lb_us;             /* the step-time lower bound */
    int64_t index;            /* enumeration index over all passes (pass-major): ties and order */
} plan_cand;

/* The layout of candidate k (uniform stages) for o's global batch and
 * stack settings (plan_stack_apply), precision prec with recipe fp8. */
void plan_cand_layout(const plan_cand *k, const plan_options *o, precision prec, fp8_recipe fp8, layout *l);

/* Give l the stack settings o holds for every layout (fix_dispatcher,
 * fix_mem); nothing when they are unset. */
void plan_stack_apply(const plan_options *o, layout *l);

/* ---- plan_bound.c ---- */

/* The lower bounds of one search: the model, cluster and parameters
 * (borrowed), and caches of what a shape shares (per-layer compute costs
 * by tp/cp/mbs/recompute/precision/expert grid; collective times by
 * tp/cp/dp/pp/mbs/precision/expert grid). Not thread-safe: one per thread. */
typedef struct plan_bounds plan_bounds;

/* A bounds object; NULL when out of memory. prm NULL: defaults (copied). */
plan_bounds *plan_bounds_new(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm);
void plan_bounds_free(plan_bounds *b);

/* plan_step_lower_bound_us for l, from the caches. */
double plan_bounds_step_us(plan_bounds *b, const layout *l);

/* 1 when the simulator will find layout l OOM under its uniform split, by
 * the memory the simulator gives each rank with the order's stash rule
 * (schedule_peak_stash_rule; tests/plan/test_plan_search.c checks the
 * verdict against the simulator): for the V-shaped orders, which have no
 * DP split, the only split the search simulates. 0 when it cannot say
 * (several GPU types, a framework profile with its own memory rules for a
 * dense model). prm not NULL. */
int plan_uniform_certainly_oom(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, const layout *l);

/* The fastest GPU type of c for prec (largest peak; ties: larger
 * bandwidth); NULL for an empty cluster. */
const cluster_gpu *plan_fastest_gpu(const cluster *c, precision prec);

/* GPU index range [lo, hi) of node group g of c. */
void plan_group_range(const cluster *c, int g, int64_t *lo, int64_t *hi);

/* ---- plan_threads.c ---- */

/* The threads a search uses for threads_opt (plan_options.threads): the
 * value itself when >= 1, else the online cores (at least 1). */
int plan_threads_resolve(int threads_opt);

/* fn(ctx, i) for i in [0, n) on up to `threads` threads (the caller's
 * included, at most 65), each i exactly once, in no particular order;
 * returns when all are done. fn must write only to its own i's slots:
 * results are then the same for any thread count. Always PL_OK: a helper
 * thread that cannot be started leaves its share to the others. */
typedef void (*plan_job_fn)(void *ctx, int64_t i);
pl_status plan_parallel_for(int threads, int64_t n, plan_job_fn fn, void *ctx);

#endif
