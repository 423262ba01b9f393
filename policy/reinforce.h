/*
 * reinforce.h: training the seq2seq placer with REINFORCE against the
 * simulator, as Mirhoseini et al. (2017) did against real hardware.
 *
 * One update:
 *   1. sample K placements of the units from the policy (one encoder pass,
 *      K decoder sequences in parallel);
 *   2. evaluate them in parallel on the evaluator's threads (one simulator
 *      context each);
 *   3. cost c_k = sqrt(T_k / 1 s), T_k the simulated step time, or the OOM
 *      penalty (10 s by default) when the placement does not fit;
 *   4. advantage A_k = (b_k - c_k) / s, with the baseline b_k an
 *      exponential moving average of past mean costs (EMA) or the mean of
 *      the other K - 1 samples (leave-one-out), and s = max(sd of the K
 *      costs, 0.1% of their mean) so the step does not depend on the
 *      machine's speed;
 *   5. loss = (1/K) sum_k sum_t [ -A_k log p(a_kt) - beta H(p_t) ], gradient
 *      by the hand-written backward pass, global-norm clipping, Adam.
 *
 * Every sampled placement (as a node placement) and its predicted time,
 * peak memory and OOM verdict is written to the store's run_sample table,
 * and a checkpoint (network, Adam state, generator state, baseline,
 * best-so-far list) to its checkpoint table, in one transaction per update.
 * Only the latest checkpoint of a run is kept. Restoring that checkpoint
 * continues the identical trajectory: every random choice comes from the
 * one generator, and evaluation order never affects results.
 *
 * The prior. The paper's policy starts uniform. Here the first policy
 * repeats the previous unit's device with probability `stay` (0.75 by
 * default; 0 gives the paper's uniform start): good placements are mostly
 * runs of consecutive units, and a uniform start on 4 devices spends the
 * whole budget unlearning scattered placements. The benchmark
 * (benchmarks/policy) reports both, and the prior alone (no learning) as
 * an ablation.
 *
 * The shortlist is the top-k distinct placements sampled so far (distinct
 * up to relabelling identical devices), plus the
 * final favourite (the greedy decode of the final policy), as the paper
 * reports the best placement found and not only the last policy.
 */
#ifndef PLACER_POLICY_REINFORCE_H
#define PLACER_POLICY_REINFORCE_H

#include <stddef.h>
#include <stdint.h>

#include "evaluator.h"
#include "placer_net.h"
#include "search.h"
#include "status.h"
#include "store.h"

typedef enum { BASELINE_EMA = 0, BASELINE_LOO } reinforce_baseline;

/* The policy-gradient estimator. REINFORCE takes one gradient step per
 * batch of K samples on  L = (1/K) sum_k -A_k log p(x_k)  (plus the entropy
 * bonus). PPO (Schulman et al. 2017, the clipped objective) takes
 * ppo_epochs steps on the same batch, each on
 *   L = -(1/K) sum_k min(r_k A_k, clip(r_k, 1 - eps, 1 + eps) A_k) - beta H,
 *   r_k = p_theta(x_k) / p_old(x_k),
 * where x_k is the whole sampled placement (the joint probability of every
 * decision of sample k: the ratio is per sequence, not per token), p_old
 * the policy that drew the batch, and A_k the same advantage as
 * REINFORCE's (baseline, cost = sqrt(step), OOM penalty). Its gradient is
 * the REINFORCE gradient with A_k replaced by r_k A_k where the min picks
 * the unclipped term and by 0 where it picks the clipped one (the ratio
 * has left [1 - eps, 1 + eps] in the advantage's direction). In the first
 * epoch r_k = 1, so that epoch's step equals REINFORCE's. */
typedef enum { ALGO_REINFORCE = 0, ALGO_PPO } reinforce_algo;

/* What the placer places. GROUPER_NONE: the problem's units (co-location
 * groups, or nodes), as in Mirhoseini et al. 2017. GROUPER_HIER: the
 * hierarchical planner (Mirhoseini et al. 2018): a feed-forward grouper
 * assigns every node to one of n_groups groups, and the seq2seq placer
 * places the groups; both are trained by the one policy-gradient loss.
 * GROUPER_EAGLE: the same with EAGLE's link (grouper.h). */
typedef enum { GROUPER_NONE = 0, GROUPER_HIER, GROUPER_EAGLE } grouper_kind;

#define REINFORCE_MAX_TOP 32

/* Which devices the pipeline prior gives a stage (pipe_prior > 0).
 * PIPE_DEVICES_ALL: every device, shares from their speeds. PIPE_DEVICES_
 * ESTIMATE, the rule for machines whose devices differ: the devices are
 * sorted by speed (1 / their forward + backward time of every node) and
 * cut into types (a device within 2% of the speed of the type's fastest
 * joins it); for t = 1..types the candidate set is the t fastest types,
 * and its prior's own placement (each node at its work position, through
 * the grouper's chunk when there is one, on the device whose share
 * interval holds it; shares by speed over the set, 0 elsewhere) is costed
 * by the DP's estimate T_est (search_dp_estimate: no simulation). The
 * candidate of the lowest estimate among those that fit the estimated
 * memory caps wins (the fewest types on a tie; when none fits, the lowest
 * estimate). On a machine of one device type it is PIPE_DEVICES_ALL. */
typedef enum { PIPE_DEVICES_ALL = 0, PIPE_DEVICES_ESTIMATE } reinforce_pipe_devices;

typedef struct {
    int updates;                 /* updates to reach in total (250) */
    int samples;                 /* K placements per update (8) */
    reinforce_baseline baseline; /* EMA (default) or leave-one-out */
    double ema_decay;            /* EMA baseline decay (0.9) */
    double entropy;              /* entropy bonus beta */
    double lr;                   /* Adam step size */
    double clip;                 /* global gradient-norm clip (<= 0: none) */
    uint64_t seed;               /* network init and sampling */
    int hidden;                  /* LSTM width H */
    int top_k;                   /* distinct placements kept for the shortlist */
    double stay;                 /* initial probability of repeating the previous device */
    double logit_clip;           /* C in C tanh(z / C) (0: none) */
    reinforce_algo algo;         /* REINFORCE (default) or PPO */
    int ppo_epochs;              /* PPO: gradient steps per batch (4) */
    double ppo_clip;             /* PPO: eps of the clipped ratio (0.2) */
    grouper_kind grouper;        /* none (default), hierarchical or EAGLE */
    int n_groups;                /* grouper: groups G (16) */
    int grouper_hidden;          /* grouper: hidden width (64) */
    int link_hidden;             /* EAGLE: link LSTM width (16) */
    double group_prior;          /* grouper: contiguity prior strength (2; 0: uniform start) */
    double pipe_prior;           /* pipeline-shaped start (0: none, the default): the placer's
                                  * pipeline prior of this strength (placer_net.h) with stage
                                  * shares from the devices' speeds, and with a grouper its
                                  * contiguity prior measured in work (grouper_acts_set_positions) */
    reinforce_pipe_devices pipe_devices; /* which devices get a pipeline stage (PIPE_DEVICES_ALL) */
    int pipe_anneal;             /* 1: the pipeline prior's strength falls linearly from pipe_prior
                                  * at the first update to 0 at the last (0: constant, the default) */
    double lr_decay;             /* in [0,1]: Adam's step size at update u of n is
                                  * lr (1 - lr_decay u / n) (0: constant, the default) */
    double entropy_decay;        /* in [0,1]: the entropy bonus likewise (0: constant) */
} reinforce_options;

/* The defaults: 250 updates of 8 samples, EMA baseline (decay 0.9),
 * entropy 0.02, Adam lr 0.003, gradient clip 1, seed 1, H 64, top 5,
 * stay prior 0.75, no logit clipping, REINFORCE (PPO: 4 epochs, clip 0.2),
 * no grouper (grouper: 16 groups, hidden 64, link 16, prior 2). These were picked by a sweep on the
 * spec profiles (benchmarks/policy/README.md has the figures). */
void reinforce_options_default(reinforce_options *o);

/* Parse "all" / "estimate". */
pl_status reinforce_parse_pipe_devices(const char *text, reinforce_pipe_devices *out, char *msg, size_t len);
const char *reinforce_pipe_devices_name(reinforce_pipe_devices p);

/* Parse "ema" / "loo". */
pl_status reinforce_parse_baseline(const char *text, reinforce_baseline *out, char *msg, size_t len);
const char *reinforce_baseline_name(reinforce_baseline b);

/* Parse "reinforce" / "ppo". */
pl_status reinforce_parse_algo(const char *text, reinforce_algo *out, char *msg, size_t len);
const char *reinforce_algo_name(reinforce_algo a);

/* The PPO weight of one sample: the factor that replaces A in the
 * REINFORCE gradient -A grad log p (see reinforce_algo): ratio * adv when
 * the unclipped term is the min, 0 otherwise. Exposed for tests. */
double ppo_weight(double ratio, double adv, double eps);
/* The PPO surrogate of one sample, min(r A, clip(r, 1-eps, 1+eps) A). */
double ppo_surrogate(double ratio, double adv, double eps);

typedef struct {
    int update;             /* update just finished, 0-based */
    int updates;            /* target */
    double mean_cost_us;    /* mean cost of this update's samples */
    double best_sample_us;  /* lowest cost among them */
    double best_us;         /* lowest cost seen so far */
    double entropy;         /* mean per-step policy entropy (nats) */
    double baseline;        /* baseline after the update (sqrt-seconds) */
    double grad_norm;       /* before clipping */
    int n_oom;              /* samples that ran out of memory */
    double elapsed_s;       /* wall time of this process's training so far */
} reinforce_progress;

/* Called after each committed update; return non-zero to stop training
 * (reinforce_train then returns PL_ERR_INTERRUPTED; the run can resume). */
typedef int (*reinforce_progress_cb)(void *ud, const reinforce_progress *p);

typedef struct reinforce reinforce;

/* The devices with a pipeline stage after the pipe_devices rule: mask
 * (n_devices entries) gets 1 for each, 0 otherwise. With pipe_prior 0
 * every device gets 1. Exposed for tests and the CLI's report. */
void reinforce_pipe_stage_devices(const reinforce *r, int *mask);

/* A fresh trainer for the evaluator's problem (borrowed; must outlive it).
 * PL_ERR_INVALID for bad options, PL_ERR_NOMEM. */
pl_status reinforce_create(policy_evaluator *ev, const reinforce_options *o, reinforce **out, char *msg,
                           size_t len);

/* A trainer restored from a checkpoint blob made by reinforce_serialize,
 * for the same problem shape (units, devices). Options come from the blob;
 * updates_target > 0 replaces the blob's target. PL_ERR_INVALID for a
 * foreign or damaged blob or a shape mismatch. */
pl_status reinforce_create_from_checkpoint(policy_evaluator *ev, const void *blob, size_t n, int updates_target,
                                           reinforce **out, char *msg, size_t len);

void reinforce_destroy(reinforce *r);

/* A trainer that starts from another machine's checkpoint (a blob of
 * reinforce_serialize, made on a problem of the same units and the same
 * number of devices): the network (and grouper) as trained there with its
 * devices relabelled by dev_map (the source's device d is this problem's
 * dev_map[d]; placer_net_permute_devices), and everything that belongs to
 * the source machine dropped: Adam's moments, the baseline, the best-so-far
 * list, the update count (0, so the schedules start again) and the
 * evaluation count; the sampling stream starts from the stored seed as a
 * fresh run's does. The options are the blob's, with updates_target (> 0)
 * the new target; the pipeline prior's shares are this problem's devices'
 * speeds. dev_map NULL: no relabelling. PL_ERR_INVALID for a foreign or
 * damaged blob, another shape, or a dev_map that is not a permutation. */
pl_status reinforce_create_transferred(policy_evaluator *ev, const void *blob, size_t n, const int *dev_map,
                                       int updates_target, reinforce **out, char *msg, size_t len);

/* Train until updates_done reaches the target, or cb asks to stop. With db
 * (may be NULL) every update's samples and a checkpoint are committed
 * under run_id in one transaction. */
pl_status reinforce_train(reinforce *r, profile_db *db, int64_t run_id, reinforce_progress_cb cb, void *ud,
                          char *msg, size_t len);

/* Switch to another problem with the same number of devices (a graph of
 * another length: generalisation). Keeps the network and Adam state, clears
 * the best-so-far list, and sets a new update target (updates done keep
 * counting). */
pl_status reinforce_retarget(reinforce *r, policy_evaluator *ev, int updates_target);

int reinforce_updates_done(const reinforce *r);
const reinforce_options *reinforce_get_options(const reinforce *r);
const placer_net *reinforce_get_net(const reinforce *r);
/* Lowest cost seen so far (INFINITY before any update). */
double reinforce_best_cost(const reinforce *r);

/* Serialize the full training state into a malloc'd blob (*blob, *n). */
pl_status reinforce_serialize(const reinforce *r, void **blob, size_t *n);

/* The greedy decode of the current policy, evaluated. unit_dev has
 * n_units entries. */
pl_status reinforce_favourite(reinforce *r, int *unit_dev, policy_eval *e);

/* Shortlist: the top-k distinct placements seen ("rl top i"), then the
 * favourite ("rl favourite"). */
pl_status reinforce_shortlist(reinforce *r, policy_cands *out);

/* Load the latest checkpoint of run_id from the store. *blob malloc'd. */
pl_status reinforce_load_checkpoint(profile_db *db, int64_t run_id, void **blob, size_t *n, int *update,
                                    char *msg, size_t len);

#endif
