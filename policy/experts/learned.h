/*
 * learned.h: training the learned expert placer against the simulator's
 * cost.
 *
 * The model (experts.h, experts_model) is a set model: one small head
 * shared by every expert of every layer, reading the expert's recent load
 * windows (and its group's) into the load the placement plans for, plus the
 * weights of the recent windows as scenarios, the scale of the copies'
 * exchange rate and the node-aware packing's copies weight. Its 14
 * parameters are trained by evolution strategies (antithetic Gaussian
 * perturbations, rank-normalised returns: Salimans et al. 2017) against
 *   cost = mean over the training problems of T(model) / T(EPLB)
 * T the simulated MoE layers' time on the busiest GPU (moe_balance.h:
 * compute at the placement's load factor plus dispatch and combine with its
 * NIC bytes) on window t + 1 of a plan made on window t, summed over the
 * layers; EPLB's own choice of policy is the reference. Plans are
 * deterministic (move budgets, no clocks), so one candidate's cost is a
 * number, not a sample. The training problems are the caller's: loads from
 * the generator on seeds of their own, with a shape and cost model each.
 */
#ifndef PLACER_POLICY_EXPERTS_LEARNED_H
#define PLACER_POLICY_EXPERTS_LEARNED_H

#include <stdint.h>

#include "experts.h"
#include "score.h"

typedef struct {
    const expert_load *ld;      /* windows 0 .. last_pair + 1 at least */
    experts_options opts;       /* shape, top_k, cost (required), margin < 0 */
} experts_train_problem;

typedef struct {
    const experts_train_problem *problems;
    int n_problems;
    int first_pair, last_pair;  /* plan on t, score on t + 1, t in first_pair .. last_pair */
    int iters;                  /* ES iterations (default 12) */
    int pairs;                  /* antithetic pairs per iteration (default 6) */
    double sigma;               /* perturbation sd in parameter space (default 0.15) */
    double lr;                  /* step (default 0.1) */
    uint64_t seed;
    /* progress (may be NULL): after each iteration; non-zero stops with the best so far */
    int (*progress)(void *ctx, int iter, int iters, double cost_now, double cost_best);
    void *progress_ctx;
} experts_train_options;

/* Train from *model (the start; experts_model_default is a fair one) into
 * *model, the best candidate met. *cost_start / *cost_end (may be NULL) get
 * the cost of the start and of the result. */
pl_status experts_train(const experts_train_options *o, experts_model *model, double *cost_start, double *cost_end,
                        char *msg, size_t len);

/* The cost above of one model over o's problems. */
pl_status experts_train_cost(const experts_train_options *o, const experts_model *m, double *cost, char *msg,
                             size_t len);

#endif
