/*
 * plan_profile.h: the layout problem on a measured profile.
 *
 * A profile database (placer profile) knows what each node of one model
 * costs on each of a few real GPUs and what every transfer between them
 * costs, measured; it knows nothing of tensor, context or data
 * parallelism, which split a node over several GPUs. On a profile the
 * layouts are therefore the tp = cp = dp = 1 ones: a pipeline of pp stages
 * over pp of the profile's devices, m micro-batches of batch / m sequences,
 * the GPipe or 1F1B order, and the stage boundaries. That is exactly the
 * placement problem of `placer search` restricted to contiguous stages, so
 * here the plan is, for every m that divides the profile's batch and both
 * orders, the exact DP over contiguous partitions and device assignments of
 * policy/search.h (search_dp: every stage count, simulated) on the
 * profile's own calibrated simulator; the plans are then ranked by
 * simulated step time. Stage boundaries may fall inside a transformer
 * block (the DP works on the grouping's units), which a layout's layer
 * counts cannot say; stage_layers counts a block where its attention is.
 */
#ifndef PLACER_PLAN_PLAN_PROFILE_H
#define PLACER_PLAN_PLAN_PROFILE_H

#include <stddef.h>

#include "evaluator.h"
#include "sim.h"
#include "status.h"

typedef struct {
    const char *db_path;  /* profile database */
    const char *config;   /* graph config in it (NULL: its graph) */
    int micro_batches;    /* 0: every m dividing the batch; else only this m */
    int schedule;         /* -1: both; 0 GPipe; 1 1F1B */
    int devices;          /* 0: all of the profile's */
    const char *mem_cap;  /* per-device cap text, NULL: device memory */
    int threads;          /* simulator threads, 0: all cores */
} plan_profile_options;

typedef struct {
    int micro_batches;    /* m */
    int schedule;         /* 0 GPipe, 1 1F1B */
    policy_eval ev;       /* simulated step, peak, OOM */
    int pp;               /* devices used = stages */
    int stage_dev[SIM_MAX_DEVICES];    /* the device of each stage, pipeline order */
    int stage_layers[SIM_MAX_DEVICES]; /* transformer blocks per stage */
    int n_nodes;
    int *node_dev;        /* the placement, n_nodes entries (owned) */
    int order;            /* found order, for stable ranking */
} plan_profile_entry;

typedef struct {
    int n;                       /* entries, fastest first */
    plan_profile_entry *items;
    int batch;                   /* the profile graph's batch */
    int simulated;               /* partitions the DPs simulated */
    double wall_s;
} plan_profile_result;

/* Plan on the profile. *out filled (caller frees with
 * plan_profile_result_free) or empty on failure, with the session's
 * one-line message (bad database, config, cap, ...). */
pl_status plan_profile_search(const plan_profile_options *o, plan_profile_result *out, char *msg, size_t len);
void plan_profile_result_free(plan_profile_result *r);

#endif
