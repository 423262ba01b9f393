/*
 * search.h: the non-learned placers, all evaluated through the same
 * policy_problem (simulator, schedule, caps, parameters, OOM penalty) as
 * the RL placer, so that every figure is comparable:
 *
 *   single      every device alone
 *   human       contiguous even layer splits over 2..n devices (every
 *               device assignment), and embedding / body / head splits
 *   dp          the optimal contiguous partition for a pipeline estimate
 *               (below), its candidates then simulated
 *   random      uniform random placements of the units, same budget as RL
 *   anneal      simulated annealing over unit placements, same budget
 *   local       first-improvement hill climbing with random restarts
 *   exhaustive  every placement of the units up to device relabelling
 *               (the problem's automorphisms): the true optimum
 *
 * Results are collected in a policy_cands list: labelled placements with
 * their evaluation. Placements that respect the grouping also carry their
 * unit (group) form.
 *
 * What the DP optimises, exactly. Let the units be u = 0..U-1 in order,
 * b = batch / m the micro-batch size, and a k-stage contiguous partition
 * [0,j1) [j1,j2) ... [j_{k-1},U) placed on k distinct devices d_0..d_{k-1}.
 * With c_s the forward + backward time of stage s per micro-batch on d_s,
 * o_0 the optimizer time of stage 0 (the device that finishes last), and
 * for each boundary j the activation time xa_j (d_{s} -> d_{s+1}) and the
 * gradient time xg_j (back) of the outputs crossing it, the estimate is
 *
 *   T_est = S + (m - 1) * M + step_fixed_us,
 *   S = sum_s c_s + sum_j (xa_j + xg_j) + o_0,
 *   M = max( max_s c_s, max_j max(xa_j, xg_j) )
 *
 * (fill and drain once, then the bottleneck stage or link m - 1 more
 * times), subject to each stage's estimated peak memory fitting its cap.
 * Costs include the simulator parameters (compute and transfer scales,
 * launch overhead, transfer latency) as the simulator applies them. The DP
 * keeps, per state (units placed, devices used, last device), the Pareto
 * front of (S, M), so its minimum of T_est over all contiguous partitions
 * and injective device assignments is exact. On a chain with m = 1 and no
 * optimizer cost, T_est is the simulated step time, so the DP optimum is
 * the simulator's optimum over contiguous placements. With pipelining the
 * simulator's step time is not T_est; the DP then simulates its best
 * partition for every stage count and the best few of every final front,
 * and returns those candidates ordered by simulated cost.
 */
#ifndef PLACER_POLICY_SEARCH_H
#define PLACER_POLICY_SEARCH_H

#include <stdint.h>

#include "evaluator.h"
#include "status.h"

#define POLICY_LABEL_LEN 80

typedef struct {
    char label[POLICY_LABEL_LEN]; /* e.g. "single gpu 0", "human layers 3|3 on 0,1" */
    policy_eval ev;               /* its evaluation */
    int *node_dev;                /* n_nodes entries, owned by the list */
    int *unit_dev;                /* n_units entries, or NULL when a group is split */
    double aux;                   /* method-specific figure (DP estimate in us), 0 if none */
} policy_cand;

typedef struct {
    int n;              /* candidates */
    int cap;            /* allocated */
    int n_nodes;        /* node placement length */
    int n_units;        /* unit placement length */
    policy_cand *items; /* n entries */
} policy_cands;

pl_status policy_cands_create(int n_nodes, int n_units, policy_cands **out);
void policy_cands_destroy(policy_cands *c);
/* Append a copy of a placement. unit_dev may be NULL (then it is derived
 * from node_dev when every group is on one device). */
pl_status policy_cands_add(policy_cands *c, const grouping *gr, const char *label, const int *node_dev,
                           const int *unit_dev, const policy_eval *ev, double aux);
/* Index of the lowest-cost candidate (first on ties), -1 when empty. */
int policy_cands_best(const policy_cands *c);
/* Stable sort by cost. */
void policy_cands_sort(policy_cands *c);

/* Each device alone; labels "single gpu d". */
pl_status search_single(policy_evaluator *ev, policy_cands *out);

/* Human splits (node placements; see the file comment); labels name the
 * split and the devices. */
pl_status search_human(policy_evaluator *ev, policy_cands *out);

typedef struct {
    double best_estimate_us;  /* min T_est over feasible partitions (NAN if none) */
    int best_estimate_k;      /* its stage count */
    int n_candidates;         /* distinct partitions simulated */
    int mem_feasible;         /* 0: no partition fit the estimated caps; the DP then ignored memory */
} search_dp_info;

/* The DP over contiguous partitions of the units into 1..n stages. Adds its
 * simulated candidates to out (best first; the estimate in aux). info may be
 * NULL. */
pl_status search_dp(policy_evaluator *ev, policy_cands *out, search_dp_info *info);

/* The DP's estimate T_est of a contiguous unit placement (each device used
 * by at most one contiguous run). Returns NAN for a placement that is not
 * contiguous that way. mem_ok (may be NULL) gets 1 when every stage's
 * estimated peak fits its cap. Exposed for tests. */
double search_dp_estimate(const policy_problem *pb, const int *unit_dev, int *mem_ok);

/* Best-so-far trace of a budgeted search: curve[i] = lowest cost after
 * i + 1 evaluations. */
typedef struct {
    int budget;        /* evaluations to spend */
    int batch;         /* evaluations per parallel batch (random search) */
    uint64_t seed;     /* every random choice */
    double *curve;     /* budget entries, or NULL */
} search_budget;

/* Uniform random unit placements; adds the best as "random". */
pl_status search_random(policy_evaluator *ev, const search_budget *b, policy_cands *out);

/* Simulated annealing from a random start; moves change one unit's device,
 * or extend a neighbour's run by one unit; geometric temperature from 5%
 * to 0.01% in log-cost. Adds the best as "anneal". */
pl_status search_anneal(policy_evaluator *ev, const search_budget *b, policy_cands *out);

/* First-improvement hill climbing over single-unit moves, restarting from
 * a random placement at each local optimum. Adds the best as "local". */
pl_status search_local(policy_evaluator *ev, const search_budget *b, policy_cands *out);

typedef struct {
    double space;           /* unit placements n^U */
    double orbits;          /* distinct placements up to relabelling (evaluated) */
    int n_automorphisms;    /* device relabellings that leave the problem unchanged */
    int64_t evaluated;      /* simulations run */
    double wall_s;          /* seconds */
} search_exhaustive_info;

/* Every unit placement up to device relabelling, in parallel on the
 * evaluator's threads. Adds the optimum (lowest cost; the
 * lexicographically smallest canonical placement on ties) as "exhaustive",
 * and when that is an OOM, the best placement that fits as
 * "exhaustive (fits)" if any fits. Refuses with PL_ERR_INVALID when the
 * number of orbits exceeds max_evals. info may be NULL. */
pl_status search_exhaustive(policy_evaluator *ev, double max_evals, policy_cands *out,
                            search_exhaustive_info *info, char *msg, size_t len);

/* The device permutations (as n-entry rows) under which the problem is
 * unchanged: equal costs, memory, caps and links (exact comparison).
 * *perms is malloc'd (caller frees) with *n_perms rows, the identity first.
 * Only the identity for more than 8 devices. */
pl_status policy_device_automorphisms(const policy_problem *pb, int **perms, int *n_perms);

#endif
