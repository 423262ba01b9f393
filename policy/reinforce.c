/*
 * reinforce.c: REINFORCE training of the placer network against the
 * simulator (see reinforce.h), with per-update logging and checkpoints.
 *
 * Checkpoint blob layout (native byte order; a checkpoint is for resuming
 * on the machine that wrote it): magic "PLRL", version, the network sizes,
 * the unit and device counts, the options, updates done, generator state,
 * baseline, Adam step, parameters, Adam moments, the best-so-far list and
 * the evaluation count.
 */
#include "reinforce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouper.h"
#include "nn.h"
#include "placement.h"

#define BLOB_MAGIC 0x4c524c50u /* "PLRL" */
#define BLOB_VERSION 4u /* 2 adds blob_ext after the header, 3 blob_ext3, 4 blob_ext4; 1..3 are still read */

struct reinforce {
    policy_evaluator *ev;     /* borrowed */
    const policy_problem *pb; /* the evaluator's problem */
    reinforce_options opt;    /* options */
    placer_net *net;          /* the policy */
    adam_state *adam;         /* its optimiser */
    placer_acts *acts;        /* forward/backward workspace, (U, K) */
    int U, D, K;              /* units, devices, samples */
    int done;                 /* updates done */
    pl_rng rng;               /* every sampling choice */
    double ema;               /* EMA baseline (sqrt-seconds) */
    int ema_init;             /* 1 once ema holds a value */
    int n_top;                /* entries in the best-so-far list */
    policy_eval top_ev[REINFORCE_MAX_TOP]; /* their evaluations, by cost */
    int *top_dev;             /* (top_k, U) their unit placements */
    int64_t evals;            /* placements evaluated */
    int *perms;               /* (n_perms, D) device relabellings that leave the problem unchanged */
    int n_perms;
    /* scratch */
    int *actions;             /* (K, U) */
    int *node_dev;            /* n_nodes */
    int *canon_a, *canon_b;   /* U each: canonical forms being compared */
    policy_eval *res;         /* K */
    double *cost, *adv;       /* K */
    double *logp_old, *logp_new, *w; /* K: PPO's log-probabilities and per-sample weights */
    double entropy_now;       /* the entropy bonus of this update (entropy_decay) */
    /* learned grouping (opt.grouper != GROUPER_NONE; the problem's units are then its nodes) */
    grouper_net *gnet;        /* the grouper (and EAGLE's link) */
    adam_state *gadam;        /* its optimiser */
    grouper_acts *gacts;      /* its workspace */
    double *nfeat;            /* (N, NODE_N_FEATURES) */
    int *labels;              /* (K, N) sampled group labels */
    grouping **sgr;           /* K: the groups of each sample */
    placer_acts **sacts;      /* K: placer workspaces, one sequence each */
    double *sfeat;            /* (K, G, W) the placer's inputs per sample */
    int *sdev;                /* (K, G) device of each sample's groups */
    double *dfeat;            /* (G, W) gradient of the placer's inputs */
    int W;                    /* placer input width */
    hier_batch hb;            /* views of the above for the joint policy */
    char *text;               /* placement text */
    size_t text_len;
};

void reinforce_options_default(reinforce_options *o) {
    o->updates = 250;
    o->samples = 8;
    o->baseline = BASELINE_EMA;
    o->ema_decay = 0.9;
    o->entropy = 0.02;
    o->lr = 0.003;
    o->clip = 1.0;
    o->seed = 1;
    o->hidden = 64;
    o->top_k = 5;
    o->stay = 0.75;
    o->logit_clip = 0.0;
    o->algo = ALGO_REINFORCE;
    o->ppo_epochs = 4;
    o->ppo_clip = 0.2;
    o->grouper = GROUPER_NONE;
    o->n_groups = 16;
    o->grouper_hidden = 64;
    o->link_hidden = 16;
    o->group_prior = 2.0;
    o->pipe_prior = 0.0;
    o->pipe_devices = PIPE_DEVICES_ALL;
    o->pipe_anneal = 0;
    o->lr_decay = 0.0;
    o->entropy_decay = 0.0;
}

pl_status reinforce_parse_pipe_devices(const char *text, reinforce_pipe_devices *out, char *msg, size_t len) {
    if (text && !strcmp(text, "all")) { *out = PIPE_DEVICES_ALL; return PL_OK; }
    if (text && !strcmp(text, "estimate")) { *out = PIPE_DEVICES_ESTIMATE; return PL_OK; }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown pipeline devices '%s' (use all or estimate)", text ? text : "");
}

const char *reinforce_pipe_devices_name(reinforce_pipe_devices p) {
    return p == PIPE_DEVICES_ESTIMATE ? "estimate" : "all";
}

pl_status reinforce_parse_algo(const char *text, reinforce_algo *out, char *msg, size_t len) {
    if (text && !strcmp(text, "reinforce")) { *out = ALGO_REINFORCE; return PL_OK; }
    if (text && !strcmp(text, "ppo")) { *out = ALGO_PPO; return PL_OK; }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown algorithm '%s' (use reinforce or ppo)", text ? text : "");
}

const char *reinforce_algo_name(reinforce_algo a) { return a == ALGO_PPO ? "ppo" : "reinforce"; }

double ppo_surrogate(double ratio, double adv, double eps) {
    double rc = ratio < 1.0 - eps ? 1.0 - eps : ratio > 1.0 + eps ? 1.0 + eps : ratio;
    double a = ratio * adv, b = rc * adv;
    return a < b ? a : b;
}

double ppo_weight(double ratio, double adv, double eps) {
    /* the clipped term is the min (and constant in theta) exactly when the
     * ratio has left the interval in the direction the advantage rewards */
    if ((adv > 0 && ratio > 1.0 + eps) || (adv < 0 && ratio < 1.0 - eps)) return 0.0;
    return ratio * adv;
}

pl_status reinforce_parse_baseline(const char *text, reinforce_baseline *out, char *msg, size_t len) {
    if (text && !strcmp(text, "ema")) { *out = BASELINE_EMA; return PL_OK; }
    if (text && !strcmp(text, "loo")) { *out = BASELINE_LOO; return PL_OK; }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown baseline '%s' (use ema or loo)", text ? text : "");
}

const char *reinforce_baseline_name(reinforce_baseline b) { return b == BASELINE_LOO ? "loo" : "ema"; }

static pl_status check_options(const reinforce_options *o, char *msg, size_t len) {
    if (o->updates < 0) return pl_fail(msg, len, PL_ERR_INVALID, "--updates must be >= 0");
    if (o->samples < 1 || o->samples > 4096) return pl_fail(msg, len, PL_ERR_INVALID, "--samples must be 1..4096");
    if (o->baseline == BASELINE_LOO && o->samples < 2)
        return pl_fail(msg, len, PL_ERR_INVALID, "the leave-one-out baseline needs --samples >= 2");
    if (!(o->lr > 0) || !isfinite(o->lr)) return pl_fail(msg, len, PL_ERR_INVALID, "--lr must be positive");
    if (!(o->entropy >= 0) || !isfinite(o->entropy))
        return pl_fail(msg, len, PL_ERR_INVALID, "--entropy must be >= 0");
    if (!(o->ema_decay >= 0 && o->ema_decay < 1)) return pl_fail(msg, len, PL_ERR_INVALID, "EMA decay must be in [0,1)");
    if (o->hidden < 1 || o->hidden > 1024) return pl_fail(msg, len, PL_ERR_INVALID, "hidden size must be 1..1024");
    if (!(o->stay >= 0 && o->stay < 1)) return pl_fail(msg, len, PL_ERR_INVALID, "--prior-stay must be in [0,1)");
    if (!(o->logit_clip >= 0) || !isfinite(o->logit_clip))
        return pl_fail(msg, len, PL_ERR_INVALID, "--logit-clip must be >= 0");
    if (o->top_k < 1 || o->top_k > REINFORCE_MAX_TOP)
        return pl_fail(msg, len, PL_ERR_INVALID, "top-k must be 1..%d", REINFORCE_MAX_TOP);
    if (o->algo != ALGO_REINFORCE && o->algo != ALGO_PPO)
        return pl_fail(msg, len, PL_ERR_INVALID, "unknown algorithm %d", (int)o->algo);
    if (!(o->pipe_prior >= 0 && o->pipe_prior <= 100))
        return pl_fail(msg, len, PL_ERR_INVALID, "--pipe-prior must be in [0,100]");
    if (o->ppo_epochs < 1 || o->ppo_epochs > 100)
        return pl_fail(msg, len, PL_ERR_INVALID, "--ppo-epochs must be 1..100");
    if (!(o->ppo_clip > 0 && o->ppo_clip < 1)) return pl_fail(msg, len, PL_ERR_INVALID, "--ppo-clip must be in (0,1)");
    if (o->grouper != GROUPER_NONE && o->grouper != GROUPER_HIER && o->grouper != GROUPER_EAGLE)
        return pl_fail(msg, len, PL_ERR_INVALID, "unknown grouper %d", (int)o->grouper);
    if (o->n_groups < 1 || o->n_groups > 4096) return pl_fail(msg, len, PL_ERR_INVALID, "--n-groups must be 1..4096");
    if (o->grouper_hidden < 1 || o->grouper_hidden > 1024 || o->link_hidden < 1 || o->link_hidden > 1024)
        return pl_fail(msg, len, PL_ERR_INVALID, "grouper and link widths must be 1..1024");
    if (!(o->group_prior >= 0 && o->group_prior <= 100))
        return pl_fail(msg, len, PL_ERR_INVALID, "--group-prior must be in [0,100]");
    if (o->pipe_devices != PIPE_DEVICES_ALL && o->pipe_devices != PIPE_DEVICES_ESTIMATE)
        return pl_fail(msg, len, PL_ERR_INVALID, "unknown pipeline devices %d", (int)o->pipe_devices);
    if (o->pipe_anneal != 0 && o->pipe_anneal != 1) return pl_fail(msg, len, PL_ERR_INVALID, "pipe_anneal must be 0 or 1");
    if (!(o->lr_decay >= 0 && o->lr_decay <= 1)) return pl_fail(msg, len, PL_ERR_INVALID, "--lr-decay must be in [0,1]");
    if (!(o->entropy_decay >= 0 && o->entropy_decay <= 1))
        return pl_fail(msg, len, PL_ERR_INVALID, "--entropy-decay must be in [0,1]");
    return PL_OK;
}

static void free_grouper_buffers(reinforce *r) {
    grouper_acts_destroy(r->gacts);
    r->gacts = NULL;
    if (r->sgr)
        for (int k = 0; k < r->K; k++) grouping_destroy(r->sgr[k]);
    if (r->sacts)
        for (int k = 0; k < r->K; k++) placer_acts_destroy(r->sacts[k]);
    free(r->sgr);
    free(r->sacts);
    free(r->nfeat);
    free(r->labels);
    free(r->sfeat);
    free(r->sdev);
    free(r->dfeat);
    r->sgr = NULL; r->sacts = NULL; r->nfeat = NULL; r->labels = NULL; r->sfeat = NULL; r->sdev = NULL;
    r->dfeat = NULL;
}

/* The grouper's buffers for the problem's graph. */
static pl_status size_grouper_buffers(reinforce *r) {
    free_grouper_buffers(r);
    if (!r->gnet) return PL_OK;
    const graph *g = r->pb->g;
    const int N = g->n_nodes, G = r->opt.n_groups, K = r->K, W = r->W;
    pl_status st = grouper_acts_create(r->gnet, N, &r->gacts);
    if (st != PL_OK) return st;
    r->sgr = calloc((size_t)K, sizeof *r->sgr);
    r->sacts = calloc((size_t)K, sizeof *r->sacts);
    r->nfeat = malloc(sizeof *r->nfeat * (size_t)N * NODE_N_FEATURES);
    r->labels = calloc((size_t)K * N, sizeof *r->labels);
    r->sfeat = calloc((size_t)K * G * W, sizeof *r->sfeat);
    r->sdev = calloc((size_t)K * G, sizeof *r->sdev);
    r->dfeat = calloc((size_t)G * W, sizeof *r->dfeat);
    if (!r->sgr || !r->sacts || !r->nfeat || !r->labels || !r->sfeat || !r->sdev || !r->dfeat) return PL_ERR_NOMEM;
    for (int k = 0; k < K; k++) {
        if ((st = grouping_alloc(N, &r->sgr[k])) != PL_OK) return st;
        if ((st = placer_acts_create(r->net, G, 1, &r->sacts[k])) != PL_OK) return st;
    }
    node_features(g, r->nfeat);
    if (r->opt.pipe_prior > 0) {
        /* the pipeline-shaped start: chunks of equal work, each device's
         * stage sized by its speed (set_pipe_shares) */
        double *w = malloc(sizeof *w * (size_t)N);
        if (!w) return PL_ERR_NOMEM;
        const policy_problem *pb = r->pb;
        const int mb = g->cfg.batch / (pb->sched.micro_batches > 0 ? pb->sched.micro_batches : 1);
        for (int n = 0; n < N; n++) {
            w[n] = 0;
            for (int d = 0; d < r->D; d++)
                w[n] += profile_node_cost(pb->p, d, mb, n, PHASE_FWD) + profile_node_cost(pb->p, d, mb, n, PHASE_BWD);
        }
        (void)grouper_acts_set_positions(r->gnet, r->gacts, w); /* PL_ERR_INVALID: node-count positions */
        free(w);
    }
    hier_batch hb = {K, N, G, W, g, r->gnet, r->gacts, r->nfeat, r->net, r->sacts, r->sgr, r->labels, r->sfeat,
                     r->sdev, r->dfeat};
    r->hb = hb;
    return PL_OK;
}

void reinforce_destroy(reinforce *r) {
    if (!r) return;
    placer_net_destroy(r->net);
    adam_destroy(r->adam);
    placer_acts_destroy(r->acts);
    free(r->top_dev);
    free(r->actions);
    free(r->node_dev);
    free(r->canon_a);
    free(r->canon_b);
    free(r->perms);
    free(r->res);
    free(r->cost);
    free(r->adv);
    free(r->logp_old);
    free(r->logp_new);
    free(r->w);
    free(r->text);
    grouper_net_destroy(r->gnet);
    adam_destroy(r->gadam);
    free_grouper_buffers(r);
    free(r);
}

/* (Re)allocate what depends on the problem's size. */
static pl_status size_buffers(reinforce *r) {
    placer_acts_destroy(r->acts);
    r->acts = NULL;
    free(r->top_dev);
    free(r->actions);
    free(r->node_dev);
    free(r->text);
    free(r->canon_a);
    free(r->canon_b);
    free(r->perms);
    r->top_dev = NULL; r->actions = NULL; r->node_dev = NULL; r->text = NULL;
    r->canon_a = NULL; r->canon_b = NULL; r->perms = NULL;
    pl_status st = placer_acts_create(r->net, r->U, r->K, &r->acts);
    if (st != PL_OK) return st;
    r->top_dev = calloc((size_t)REINFORCE_MAX_TOP * (size_t)r->U, sizeof *r->top_dev);
    r->actions = calloc((size_t)r->K * (size_t)r->U, sizeof *r->actions);
    r->node_dev = calloc((size_t)r->pb->g->n_nodes, sizeof *r->node_dev);
    r->text_len = (size_t)r->pb->g->n_nodes * 4 + 16;
    r->text = malloc(r->text_len);
    r->canon_a = malloc(sizeof *r->canon_a * (size_t)r->U);
    r->canon_b = malloc(sizeof *r->canon_b * (size_t)r->U);
    if (!r->top_dev || !r->actions || !r->node_dev || !r->text || !r->canon_a || !r->canon_b) return PL_ERR_NOMEM;
    return policy_device_automorphisms(r->pb, &r->perms, &r->n_perms);
}

/* The pipeline prior's stage shares: each device's speed on this graph,
 * 1 / (its forward + backward time of every node at the schedule's
 * micro-batch size), from the profile. Equal shares stay when a cost is
 * missing. */
static int pipe_speeds(const reinforce *r, double *w) {
    const policy_problem *pb = r->pb;
    const int D = r->D, mb = pb->g->cfg.batch / (pb->sched.micro_batches > 0 ? pb->sched.micro_batches : 1);
    if (D > PN_MAX_PIPE_DEVICES) return 0;
    for (int d = 0; d < D; d++) {
        double t = 0;
        for (int n = 0; n < pb->g->n_nodes; n++)
            t += profile_node_cost(pb->p, d, mb, n, PHASE_FWD) + profile_node_cost(pb->p, d, mb, n, PHASE_BWD);
        w[d] = t > 0 && isfinite(t) ? 1.0 / t : NAN;
        if (isnan(w[d])) return 0;
    }
    return 1;
}

/* The prior's own placement of the units under the shares s (D entries,
 * summing to 1): unit u at position x_u on the device whose interval of
 * [0, 1) (in device order, share-0 devices skipped) holds it. With a
 * grouper the units are nodes and x is the centre of the node's chunk
 * (floor(G x_work) + 1/2) / G, x_work its work position; without one,
 * (u + 1/2) / U. */
static void prior_mode(const reinforce *r, const double *s, const double *work, int *unit_dev) {
    const int U = r->U, D = r->D, G = r->opt.n_groups;
    double total = 0, before = 0;
    if (work)
        for (int u = 0; u < U; u++) total += work[u];
    for (int u = 0; u < U; u++) {
        double x = (u + 0.5) / U;
        if (work && total > 0) {
            double xw = (before + 0.5 * work[u]) / total;
            before += work[u];
            int g = (int)floor(xw * G);
            if (g >= G) g = G - 1;
            x = (g + 0.5) / G;
        }
        double c = 0;
        int dev = -1;
        for (int d = 0; d < D; d++) {
            if (!(s[d] > 0)) continue;
            dev = d;
            if (x < c + s[d]) break;
            c += s[d];
        }
        unit_dev[u] = dev;
    }
}

/* The pipeline prior's stage shares (reinforce.h, reinforce_pipe_devices):
 * each device's speed on this graph, 1 / (its forward + backward time of
 * every node at the schedule's micro-batch size), from the profile, over
 * the devices the rule picks. Equal shares stay when a cost is missing. */
static pl_status set_pipe_shares(reinforce *r) {
    const int D = r->D;
    double w[PN_MAX_PIPE_DEVICES];
    if (!pipe_speeds(r, w)) return PL_OK;
    if (r->opt.pipe_devices == PIPE_DEVICES_ESTIMATE && D > 1) {
        const policy_problem *pb = r->pb;
        const int mb = pb->g->cfg.batch / (pb->sched.micro_batches > 0 ? pb->sched.micro_batches : 1);
        int order[PN_MAX_PIPE_DEVICES];
        for (int d = 0; d < D; d++) order[d] = d;
        for (int i = 1; i < D; i++) /* by speed, fastest first; stable */
            for (int j = i; j > 0 && w[order[j]] > w[order[j - 1]]; j--) {
                int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
            }
        double *work = NULL;
        int *ud = malloc(sizeof *ud * (size_t)r->U);
        if (r->opt.grouper != GROUPER_NONE) {
            work = malloc(sizeof *work * (size_t)r->U);
            if (work)
                for (int n = 0; n < r->U; n++) {
                    work[n] = 0;
                    for (int d = 0; d < D; d++)
                        work[n] += profile_node_cost(pb->p, d, mb, n, PHASE_FWD) +
                                   profile_node_cost(pb->p, d, mb, n, PHASE_BWD);
                }
        }
        if (!ud || (r->opt.grouper != GROUPER_NONE && !work)) {
            free(ud);
            free(work);
            return PL_ERR_NOMEM;
        }
        /* types: order[i] starts a new one when it is slower than 98% of
         * the speed of the current type's fastest */
        int starts[PN_MAX_PIPE_DEVICES + 1], lead = 0;
        for (int i = 0; i < D; i++) {
            starts[i] = i == 0 || w[order[i]] < 0.98 * w[order[lead]];
            if (starts[i]) lead = i;
        }
        starts[D] = 1;
        double best_est = INFINITY, best_s[PN_MAX_PIPE_DEVICES];
        int best_fit = 0, have = 0;
        for (int n = 1; n <= D; n++) {
            if (!starts[n]) continue; /* candidate: the n fastest devices, n at the end of a type */
            double s[PN_MAX_PIPE_DEVICES], sum = 0;
            for (int d = 0; d < D; d++) s[d] = 0;
            for (int i = 0; i < n; i++) sum += w[order[i]];
            for (int i = 0; i < n; i++) s[order[i]] = w[order[i]] / sum;
            prior_mode(r, s, work, ud);
            int fit = 0;
            double est = search_dp_estimate(pb, ud, &fit);
            if (isnan(est)) continue;
            if (!have || (fit && !best_fit) || (fit == best_fit && est < best_est)) {
                have = 1;
                best_est = est;
                best_fit = fit;
                memcpy(best_s, s, sizeof s);
            }
        }
        free(ud);
        free(work);
        if (have) memcpy(w, best_s, sizeof(double) * (size_t)D);
    }
    (void)placer_net_set_pipe_shares(r->net, w); /* PL_ERR_INVALID: keep equal shares */
    return PL_OK;
}

void reinforce_pipe_stage_devices(const reinforce *r, int *mask) {
    for (int d = 0; d < r->D; d++)
        mask[d] = !(r->opt.pipe_prior > 0) || r->D > PN_MAX_PIPE_DEVICES || r->net->pipe_share[d] > 0;
}

/* The schedules of update r->done (of r->opt.updates): the pipeline
 * prior's strength (pipe_anneal), Adam's step sizes (lr_decay) and the
 * entropy bonus (entropy_decay). A function of the update count only, so
 * a resumed run continues the same schedule. */
static void set_schedule(reinforce *r) {
    const double f = r->opt.updates > 0 ? (double)r->done / (double)r->opt.updates : 0.0;
    const double g = f < 1 ? 1.0 - f : 0.0;
    r->net->cfg.pipe = r->opt.pipe_anneal ? r->opt.pipe_prior * g : r->opt.pipe_prior;
    const double lr = r->opt.lr_decay > 0 ? r->opt.lr * (1.0 - r->opt.lr_decay * (1.0 - g)) : r->opt.lr;
    r->adam->lr = lr;
    if (r->gadam) r->gadam->lr = lr;
    r->entropy_now = r->opt.entropy_decay > 0 ? r->opt.entropy * (1.0 - r->opt.entropy_decay * (1.0 - g))
                                              : r->opt.entropy;
}

/* Allocate a trainer around a network of the given options, without
 * initialising the training state. */
static pl_status alloc_trainer(policy_evaluator *ev, const reinforce_options *o, reinforce **out) {
    *out = NULL;
    reinforce *r = calloc(1, sizeof *r);
    if (!r) return PL_ERR_NOMEM;
    r->ev = ev;
    r->pb = policy_evaluator_problem(ev);
    r->opt = *o;
    r->U = policy_units(r->pb);
    r->D = policy_devices(r->pb);
    r->K = o->samples;
    pl_status st = PL_OK;
    r->W = GROUP_N_FEATURES;
    if (o->grouper != GROUPER_NONE) {
        grouper_config gc = {o->grouper == GROUPER_EAGLE, NODE_N_FEATURES, o->n_groups, o->grouper_hidden,
                             o->link_hidden, o->group_prior};
        st = grouper_net_create(&gc, o->seed, &r->gnet);
        if (st == PL_OK) st = adam_create(r->gnet->n_params, o->lr, &r->gadam);
        if (st == PL_OK) r->W = grouper_input_width(r->gnet);
    }
    placer_net_config cfg = placer_net_default_config(r->W, r->D);
    cfg.hidden = o->hidden;
    cfg.stay = o->stay;
    cfg.clip = o->logit_clip;
    cfg.pipe = o->pipe_prior;
    if (st == PL_OK) st = placer_net_create(&cfg, o->seed, &r->net);
    if (st == PL_OK && o->pipe_prior > 0) st = set_pipe_shares(r);
    if (st == PL_OK) st = adam_create(r->net->n_params, o->lr, &r->adam);
    if (st == PL_OK) set_schedule(r);
    if (st == PL_OK) st = size_buffers(r);
    if (st == PL_OK) st = size_grouper_buffers(r);
    if (st == PL_OK) {
        r->res = calloc((size_t)r->K, sizeof *r->res);
        r->cost = calloc((size_t)r->K, sizeof *r->cost);
        r->adv = calloc((size_t)r->K, sizeof *r->adv);
        r->logp_old = calloc((size_t)r->K, sizeof *r->logp_old);
        r->logp_new = calloc((size_t)r->K, sizeof *r->logp_new);
        r->w = calloc((size_t)r->K, sizeof *r->w);
        if (!r->res || !r->cost || !r->adv || !r->logp_old || !r->logp_new || !r->w) st = PL_ERR_NOMEM;
    }
    if (st != PL_OK) {
        reinforce_destroy(r);
        return st;
    }
    *out = r;
    return PL_OK;
}

/* A grouper places nodes: the problem's units must be its nodes. */
static pl_status check_problem(const reinforce_options *o, policy_evaluator *ev, char *msg, size_t len) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    if (o->grouper != GROUPER_NONE && policy_units(pb) != pb->g->n_nodes)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "a learned grouping places the %d nodes, but this problem has %d units (use --groups "
                       "learned or eagle, which make the nodes the units)",
                       pb->g->n_nodes, policy_units(pb));
    return PL_OK;
}

pl_status reinforce_create(policy_evaluator *ev, const reinforce_options *o, reinforce **out, char *msg,
                           size_t len) {
    *out = NULL;
    pl_status st = check_options(o, msg, len);
    if (st == PL_OK) st = check_problem(o, ev, msg, len);
    if (st != PL_OK) return st;
    reinforce *r = NULL;
    st = alloc_trainer(ev, o, &r);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot allocate the placer network");
    /* the sampling stream is separate from the init stream */
    pl_rng_seed(&r->rng, o->seed ^ 0x9e3779b97f4a7c15ull);
    *out = r;
    return PL_OK;
}

int reinforce_updates_done(const reinforce *r) { return r->done; }
const reinforce_options *reinforce_get_options(const reinforce *r) { return &r->opt; }
const placer_net *reinforce_get_net(const reinforce *r) { return r->net; }
double reinforce_best_cost(const reinforce *r) { return r->n_top > 0 ? r->top_ev[0].cost_us : INFINITY; }

/* The lexicographically smallest relabelling of a placement under the
 * problem's automorphisms: equal for placements that only swap identical
 * devices. */
static void canonical(const reinforce *r, const int *unit_dev, int *out) {
    memcpy(out, unit_dev, sizeof *out * (size_t)r->U);
    for (int q = 1; q < r->n_perms; q++) {
        const int *pi = r->perms + (size_t)q * r->D;
        int less = 0;
        for (int u = 0; u < r->U; u++) {
            int v = pi[unit_dev[u]];
            if (v != out[u]) {
                less = v < out[u];
                break;
            }
        }
        if (less)
            for (int u = 0; u < r->U; u++) out[u] = pi[unit_dev[u]];
    }
}

/* Insert a sampled placement into the best-so-far list (distinct up to
 * relabelling identical devices, by cost; on equal cost the earlier entry
 * stays first). */
static void note_top(reinforce *r, const int *unit_dev, const policy_eval *e) {
    const int U = r->U, k = r->opt.top_k;
    canonical(r, unit_dev, r->canon_a);
    for (int i = 0; i < r->n_top; i++) {
        canonical(r, r->top_dev + (size_t)i * U, r->canon_b);
        if (!memcmp(r->canon_a, r->canon_b, sizeof *unit_dev * (size_t)U)) return;
    }
    if (r->n_top == k && e->cost_us >= r->top_ev[k - 1].cost_us) return;
    int pos = r->n_top < k ? r->n_top++ : k - 1;
    while (pos > 0 && r->top_ev[pos - 1].cost_us > e->cost_us) {
        r->top_ev[pos] = r->top_ev[pos - 1];
        memcpy(r->top_dev + (size_t)pos * U, r->top_dev + (size_t)(pos - 1) * U, sizeof *unit_dev * (size_t)U);
        pos--;
    }
    r->top_ev[pos] = *e;
    memcpy(r->top_dev + (size_t)pos * U, unit_dev, sizeof *unit_dev * (size_t)U);
}

/* Write one update's samples and the checkpoint in one transaction. */
static pl_status log_update(reinforce *r, profile_db *db, int64_t run_id, int update, char *msg, size_t len) {
    pl_status st = profile_db_begin(db);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot begin a transaction: %s", profile_db_last_error(db));
    const int N = r->pb->g->n_nodes;
    for (int k = 0; k < r->K && st == PL_OK; k++) {
        grouping_expand(r->pb->gr, r->actions + (size_t)k * r->U, r->node_dev);
        placement_format(r->node_dev, N, r->text, r->text_len);
        st = profile_db_run_add_sample(db, run_id, update, k, r->text, r->res[k].step_us, r->res[k].peak_bytes,
                                       r->res[k].oom);
    }
    void *blob = NULL;
    size_t n = 0;
    if (st == PL_OK) st = reinforce_serialize(r, &blob, &n);
    if (st == PL_OK) st = profile_db_checkpoint_save(db, run_id, update, blob, n);
    free(blob);
    if (st == PL_OK) st = profile_db_checkpoint_prune(db, run_id, update); /* only the latest is kept */
    if (st != PL_OK) {
        pl_fail(msg, len, st, "cannot log update %d of run %lld: %s", update, (long long)run_id,
                profile_db_last_error(db));
        profile_db_rollback(db);
        return st;
    }
    st = profile_db_commit(db);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot commit update %d: %s", update, profile_db_last_error(db));
    return PL_OK;
}

/* ---- one update ------------------------------------------------------------ */

/* Sample K placements into r->actions (node placements with a grouper,
 * unit placements otherwise) and their log-probabilities into r->logp_old.
 * Every random choice comes from r->rng: with a grouper, all K samples'
 * labels first, then each sample's devices. */
static pl_status sample_batch(reinforce *r) {
    if (!r->gnet)
        return placer_net_forward(r->net, r->acts, r->pb->gr->features, r->U, r->K, PN_SAMPLE, &r->rng, r->actions,
                                  r->logp_old);
    return hier_sample(&r->hb, &r->rng, r->actions, r->logp_old);
}

/* Forward pass of the batch's placements under the current parameters,
 * log-probabilities into r->logp_new (PPO's later epochs). */
static pl_status reforward_batch(reinforce *r) {
    if (!r->gnet)
        return placer_net_forward(r->net, r->acts, r->pb->gr->features, r->U, r->K, PN_GIVEN, NULL, r->actions,
                                  r->logp_new);
    return hier_forward_given(&r->hb, r->logp_new);
}

/* Gradient of L = (1/K) sum_k [-w_k log p(x_k)] - beta H of the last
 * forward pass into the networks' gradients (zeroed first). Returns the
 * mean per-decision entropy of the placer in *entropy. */
static void batch_gradient(reinforce *r, const double *w, double *entropy) {
    placer_net_zero_grad(r->net);
    if (!r->gnet) {
        placer_net_policy_loss(r->acts, w, r->entropy_now, 1.0 / r->K, entropy);
        placer_net_backward(r->net, r->acts, r->pb->gr->features);
        return;
    }
    grouper_net_zero_grad(r->gnet);
    hier_loss_backward(&r->hb, w, r->entropy_now, entropy);
}

/* Global-norm clipping over both networks, then one Adam step each.
 * Returns the norm before clipping. */
static double batch_step(reinforce *r) {
    double ss = 0;
    for (size_t i = 0; i < r->net->n_params; i++) ss += r->net->grads[i] * r->net->grads[i];
    if (r->gnet)
        for (size_t i = 0; i < r->gnet->n_params; i++) ss += r->gnet->grads[i] * r->gnet->grads[i];
    double norm = sqrt(ss);
    if (r->opt.clip > 0 && norm > r->opt.clip) {
        double sc = r->opt.clip / norm;
        for (size_t i = 0; i < r->net->n_params; i++) r->net->grads[i] *= sc;
        if (r->gnet)
            for (size_t i = 0; i < r->gnet->n_params; i++) r->gnet->grads[i] *= sc;
    }
    adam_step(r->adam, r->net->params, r->net->grads, r->net->n_params);
    if (r->gnet) adam_step(r->gadam, r->gnet->params, r->gnet->grads, r->gnet->n_params);
    return norm;
}

static pl_status train_loop(reinforce *r, profile_db *db, int64_t run_id, reinforce_progress_cb cb, void *ud,
                            char *msg, size_t len);

pl_status reinforce_train(reinforce *r, profile_db *db, int64_t run_id, reinforce_progress_cb cb, void *ud,
                          char *msg, size_t len) {
    /* a learned grouping runs the placer one sequence at a time: plain
     * loops beat BLAS there (nn.h) */
    int prev = nn_set_loops(r->gnet != NULL);
    pl_status st = train_loop(r, db, run_id, cb, ud, msg, len);
    nn_set_loops(prev);
    return st;
}

static pl_status train_loop(reinforce *r, profile_db *db, int64_t run_id, reinforce_progress_cb cb, void *ud,
                            char *msg, size_t len) {
    const int U = r->U, K = r->K;
    double t0 = pl_now_us();
    while (r->done < r->opt.updates) {
        int update = r->done;
        set_schedule(r);
        pl_status st = sample_batch(r);
        if (st != PL_OK) return pl_fail(msg, len, st, "policy forward pass failed");
        st = policy_evaluate(r->ev, r->actions, K, r->res);
        if (st != PL_OK) return pl_fail(msg, len, st, "simulation of a sampled placement failed");
        r->evals += K;
        /* costs, baseline, advantages */
        double mean = 0, best = INFINITY;
        int n_oom = 0;
        for (int k = 0; k < K; k++) {
            r->cost[k] = sqrt(r->res[k].cost_us * 1e-6);
            mean += r->cost[k];
            if (r->res[k].cost_us < best) best = r->res[k].cost_us;
            n_oom += r->res[k].oom;
            note_top(r, r->actions + (size_t)k * U, &r->res[k]);
        }
        mean /= K;
        double var = 0;
        for (int k = 0; k < K; k++) var += (r->cost[k] - mean) * (r->cost[k] - mean);
        double sd = K > 1 ? sqrt(var / (K - 1)) : 0.0;
        double scale = sd > 1e-3 * mean ? sd : 1e-3 * mean;
        if (!(scale > 0)) scale = 1.0;
        if (r->opt.baseline == BASELINE_EMA) {
            if (!r->ema_init) {
                r->ema = mean;
                r->ema_init = 1;
            }
            for (int k = 0; k < K; k++) r->adv[k] = (r->ema - r->cost[k]) / scale;
            r->ema = r->opt.ema_decay * r->ema + (1.0 - r->opt.ema_decay) * mean;
        } else {
            for (int k = 0; k < K; k++) {
                double b = (mean * K - r->cost[k]) / (K - 1);
                r->adv[k] = (b - r->cost[k]) / scale;
            }
            r->ema = mean;
            r->ema_init = 1;
        }
        /* gradient steps: one for REINFORCE; ppo_epochs for PPO, the first
         * on the sampling pass itself (ratio 1), the others after a forward
         * pass of the same placements under the updated policy */
        double entropy = 0, gnorm = 0;
        int epochs = r->opt.algo == ALGO_PPO ? r->opt.ppo_epochs : 1;
        for (int e = 0; e < epochs; e++) {
            const double *w = r->adv;
            if (e > 0) {
                st = reforward_batch(r);
                if (st != PL_OK) return pl_fail(msg, len, st, "policy forward pass failed");
                for (int k = 0; k < K; k++)
                    r->w[k] = ppo_weight(exp(r->logp_new[k] - r->logp_old[k]), r->adv[k], r->opt.ppo_clip);
                w = r->w;
            }
            double ent = 0;
            batch_gradient(r, w, &ent);
            double gn = batch_step(r);
            if (e == 0) {
                entropy = ent;
                gnorm = gn;
            }
        }
        r->done++;
        set_schedule(r); /* the favourite after the last update decodes under its final prior */
        if (db) {
            st = log_update(r, db, run_id, update, msg, len);
            if (st != PL_OK) return st;
        }
        if (cb) {
            reinforce_progress p = {update, r->opt.updates, 0, best, reinforce_best_cost(r), entropy, r->ema,
                                    gnorm, n_oom, (pl_now_us() - t0) * 1e-6};
            double mc = 0;
            for (int k = 0; k < K; k++) mc += r->res[k].cost_us;
            p.mean_cost_us = mc / K;
            if (cb(ud, &p) && r->done < r->opt.updates)
                return pl_fail(msg, len, PL_ERR_INTERRUPTED, "stopped after update %d", update);
        }
    }
    return PL_OK;
}

pl_status reinforce_retarget(reinforce *r, policy_evaluator *ev, int updates_target) {
    const policy_problem *pb = policy_evaluator_problem(ev);
    if (policy_devices(pb) != r->D) return PL_ERR_INVALID;
    r->ev = ev;
    r->pb = pb;
    r->U = policy_units(pb);
    r->n_top = 0;
    r->opt.updates = updates_target;
    if (r->gnet && policy_units(pb) != pb->g->n_nodes) return PL_ERR_INVALID;
    pl_status st = size_buffers(r);
    if (st == PL_OK) st = size_grouper_buffers(r);
    return st;
}

pl_status reinforce_favourite(reinforce *r, int *unit_dev, policy_eval *e) {
    pl_status st;
    if (!r->gnet) {
        st = placer_net_forward(r->net, r->acts, r->pb->gr->features, r->U, 1, PN_GREEDY, NULL, unit_dev, NULL);
    } else {
        /* the likeliest group of every node, then the likeliest devices
         * (the units are the nodes); the batch's buffers are free now */
        int prev = nn_set_loops(1);
        st = hier_greedy(&r->hb, unit_dev);
        nn_set_loops(prev);
    }
    if (st != PL_OK) return st;
    return policy_evaluate(r->ev, unit_dev, 1, e);
}

pl_status reinforce_shortlist(reinforce *r, policy_cands *out) {
    const int N = r->pb->g->n_nodes;
    int *nd = malloc(sizeof *nd * (size_t)N), *fav = malloc(sizeof *fav * (size_t)r->U);
    pl_status st = PL_ERR_NOMEM;
    if (!nd || !fav) goto out;
    st = PL_OK;
    for (int i = 0; i < r->n_top && st == PL_OK; i++) {
        char label[POLICY_LABEL_LEN];
        snprintf(label, sizeof label, i == 0 ? "rl best found" : "rl top %d", i + 1);
        grouping_expand(r->pb->gr, r->top_dev + (size_t)i * r->U, nd);
        st = policy_cands_add(out, r->pb->gr, label, nd, r->top_dev + (size_t)i * r->U, &r->top_ev[i], 0);
    }
    if (st == PL_OK) {
        policy_eval e;
        st = reinforce_favourite(r, fav, &e);
        if (st == PL_OK) {
            grouping_expand(r->pb->gr, fav, nd);
            st = policy_cands_add(out, r->pb->gr, "rl favourite", nd, fav, &e, 0);
        }
    }
out:
    free(nd);
    free(fav);
    return st;
}

/* ---- checkpoints ------------------------------------------------------------ */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int fail;
} wbuf;

static void put(wbuf *b, const void *x, size_t n) {
    if (b->fail) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->fail = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}

typedef struct {
    const unsigned char *p;
    size_t n, off;
    int fail;
} rbuf;

static void get(rbuf *b, void *x, size_t n) {
    if (b->fail || b->off + n > b->n) { b->fail = 1; memset(x, 0, n); return; }
    memcpy(x, b->p + b->off, n);
    b->off += n;
}

/* The fields of the header, in order. */
typedef struct {
    uint32_t magic, version;
    int32_t F, D, E, H, A, De, U;
    int32_t updates, samples, baseline, hidden, top_k;
    double ema_decay, entropy, lr, clip, stay, logit_clip;
    uint64_t seed;
    int32_t done, ema_init, n_top, pad;
    double ema;
    int64_t adam_t, evals;
    uint64_t rng[4];
    uint64_t n_params;
} blob_header;

/* Version 2's options after the header: the algorithm and the grouper. */
typedef struct {
    int32_t algo, ppo_epochs, grouper, n_groups, grouper_hidden, link_hidden;
    double ppo_clip, group_prior;
    uint64_t n_gparams; /* grouper parameters (0 without a grouper) */
    int64_t gadam_t;    /* the grouper's Adam steps */
} blob_ext;

/* Version 3's options after blob_ext. */
typedef struct {
    double pipe_prior;
    double pad;
} blob_ext3;

/* Version 4's options after blob_ext3. */
typedef struct {
    int32_t pipe_devices, pipe_anneal;
    double lr_decay, entropy_decay;
} blob_ext4;

pl_status reinforce_serialize(const reinforce *r, void **blob, size_t *n) {
    *blob = NULL;
    *n = 0;
    const placer_net_config *c = &r->net->cfg;
    blob_header h;
    memset(&h, 0, sizeof h);
    h.magic = BLOB_MAGIC;
    h.version = BLOB_VERSION;
    h.F = c->n_features; h.D = c->n_devices; h.E = c->embed; h.H = c->hidden; h.A = c->attn; h.De = c->dev_embed;
    h.U = r->U;
    h.updates = r->opt.updates; h.samples = r->opt.samples; h.baseline = (int32_t)r->opt.baseline;
    h.hidden = r->opt.hidden; h.top_k = r->opt.top_k;
    h.ema_decay = r->opt.ema_decay; h.entropy = r->opt.entropy; h.lr = r->opt.lr; h.clip = r->opt.clip;
    h.stay = r->opt.stay; h.logit_clip = r->opt.logit_clip;
    h.seed = r->opt.seed;
    h.done = r->done; h.ema_init = r->ema_init; h.n_top = r->n_top;
    h.ema = r->ema;
    h.adam_t = r->adam->t;
    h.evals = r->evals;
    memcpy(h.rng, r->rng.s, sizeof h.rng);
    h.n_params = r->net->n_params;
    blob_ext x;
    memset(&x, 0, sizeof x);
    x.algo = (int32_t)r->opt.algo; x.ppo_epochs = r->opt.ppo_epochs; x.ppo_clip = r->opt.ppo_clip;
    x.grouper = (int32_t)r->opt.grouper; x.n_groups = r->opt.n_groups; x.grouper_hidden = r->opt.grouper_hidden;
    x.link_hidden = r->opt.link_hidden; x.group_prior = r->opt.group_prior;
    x.n_gparams = r->gnet ? r->gnet->n_params : 0;
    x.gadam_t = r->gadam ? r->gadam->t : 0;
    blob_ext3 x3;
    memset(&x3, 0, sizeof x3);
    x3.pipe_prior = r->opt.pipe_prior;
    blob_ext4 x4;
    memset(&x4, 0, sizeof x4);
    x4.pipe_devices = (int32_t)r->opt.pipe_devices;
    x4.pipe_anneal = r->opt.pipe_anneal;
    x4.lr_decay = r->opt.lr_decay;
    x4.entropy_decay = r->opt.entropy_decay;
    wbuf b = {0};
    put(&b, &h, sizeof h);
    put(&b, &x, sizeof x);
    put(&b, &x3, sizeof x3);
    put(&b, &x4, sizeof x4);
    put(&b, r->net->params, sizeof(double) * r->net->n_params);
    put(&b, r->adam->m, sizeof(double) * r->net->n_params);
    put(&b, r->adam->v, sizeof(double) * r->net->n_params);
    put(&b, r->top_ev, sizeof(policy_eval) * (size_t)r->n_top);
    put(&b, r->top_dev, sizeof(int) * (size_t)r->n_top * (size_t)r->U);
    if (r->gnet) {
        put(&b, r->gnet->params, sizeof(double) * r->gnet->n_params);
        put(&b, r->gadam->m, sizeof(double) * r->gnet->n_params);
        put(&b, r->gadam->v, sizeof(double) * r->gnet->n_params);
    }
    if (b.fail) {
        free(b.p);
        return PL_ERR_NOMEM;
    }
    *blob = b.p;
    *n = b.n;
    return PL_OK;
}

pl_status reinforce_create_from_checkpoint(policy_evaluator *ev, const void *blob, size_t n, int updates_target,
                                           reinforce **out, char *msg, size_t len) {
    *out = NULL;
    rbuf b = {blob, n, 0, 0};
    blob_header h;
    get(&b, &h, sizeof h);
    if (b.fail || h.magic != BLOB_MAGIC || h.version < 1u || h.version > BLOB_VERSION)
        return pl_fail(msg, len, PL_ERR_INVALID, "the checkpoint is not a placer checkpoint of version 1..%u",
                       BLOB_VERSION);
    blob_ext x;
    memset(&x, 0, sizeof x);
    x.algo = ALGO_REINFORCE; x.ppo_epochs = 4; x.ppo_clip = 0.2; x.grouper = GROUPER_NONE; x.n_groups = 16;
    x.grouper_hidden = 64; x.link_hidden = 16; x.group_prior = 2.0;
    if (h.version >= 2u) get(&b, &x, sizeof x);
    blob_ext3 x3;
    memset(&x3, 0, sizeof x3);
    if (h.version >= 3u) get(&b, &x3, sizeof x3);
    blob_ext4 x4;
    memset(&x4, 0, sizeof x4);
    if (h.version >= 4u) get(&b, &x4, sizeof x4);
    if (b.fail) return pl_fail(msg, len, PL_ERR_INVALID, "the checkpoint is truncated or damaged");
    const policy_problem *pb = policy_evaluator_problem(ev);
    const int F = x.grouper == GROUPER_EAGLE ? GROUP_N_FEATURES + x.link_hidden : GROUP_N_FEATURES;
    if (h.U != policy_units(pb) || h.D != policy_devices(pb) || h.F != F)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "the checkpoint is for %d units on %d devices, this problem has %d units on %d devices", h.U,
                       h.D, policy_units(pb), policy_devices(pb));
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = updates_target > 0 ? updates_target : h.updates;
    o.samples = h.samples;
    o.baseline = (reinforce_baseline)h.baseline;
    o.hidden = h.hidden;
    o.top_k = h.top_k;
    o.ema_decay = h.ema_decay;
    o.entropy = h.entropy;
    o.lr = h.lr;
    o.clip = h.clip;
    o.stay = h.stay;
    o.logit_clip = h.logit_clip;
    o.seed = h.seed;
    o.algo = (reinforce_algo)x.algo;
    o.ppo_epochs = x.ppo_epochs;
    o.ppo_clip = x.ppo_clip;
    o.grouper = (grouper_kind)x.grouper;
    o.n_groups = x.n_groups;
    o.grouper_hidden = x.grouper_hidden;
    o.link_hidden = x.link_hidden;
    o.group_prior = x.group_prior;
    o.pipe_prior = x3.pipe_prior;
    o.pipe_devices = (reinforce_pipe_devices)x4.pipe_devices;
    o.pipe_anneal = x4.pipe_anneal;
    o.lr_decay = x4.lr_decay;
    o.entropy_decay = x4.entropy_decay;
    pl_status st = check_options(&o, msg, len);
    if (st == PL_OK) st = check_problem(&o, ev, msg, len);
    if (st != PL_OK) return st;
    if (h.n_top < 0 || h.n_top > o.top_k || h.done < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "the checkpoint is damaged");
    reinforce *r = NULL;
    st = alloc_trainer(ev, &o, &r);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot allocate the placer network");
    const placer_net_config *c = &r->net->cfg;
    if (c->embed != h.E || c->attn != h.A || c->dev_embed != h.De || r->net->n_params != h.n_params) {
        reinforce_destroy(r);
        return pl_fail(msg, len, PL_ERR_INVALID, "the checkpoint's network shape differs from this build's");
    }
    get(&b, r->net->params, sizeof(double) * r->net->n_params);
    get(&b, r->adam->m, sizeof(double) * r->net->n_params);
    get(&b, r->adam->v, sizeof(double) * r->net->n_params);
    get(&b, r->top_ev, sizeof(policy_eval) * (size_t)h.n_top);
    get(&b, r->top_dev, sizeof(int) * (size_t)h.n_top * (size_t)r->U);
    if ((r->gnet ? r->gnet->n_params : 0) != x.n_gparams) {
        reinforce_destroy(r);
        return pl_fail(msg, len, PL_ERR_INVALID, "the checkpoint's grouper shape differs from this build's");
    }
    if (r->gnet) {
        get(&b, r->gnet->params, sizeof(double) * r->gnet->n_params);
        get(&b, r->gadam->m, sizeof(double) * r->gnet->n_params);
        get(&b, r->gadam->v, sizeof(double) * r->gnet->n_params);
        r->gadam->t = x.gadam_t;
    }
    if (b.fail || b.off != b.n) {
        reinforce_destroy(r);
        return pl_fail(msg, len, PL_ERR_INVALID, "the checkpoint is truncated or damaged");
    }
    r->done = h.done;
    r->ema = h.ema;
    r->ema_init = h.ema_init;
    r->n_top = h.n_top;
    r->adam->t = h.adam_t;
    r->evals = h.evals;
    memcpy(r->rng.s, h.rng, sizeof h.rng);
    set_schedule(r);
    *out = r;
    return PL_OK;
}

pl_status reinforce_create_transferred(policy_evaluator *ev, const void *blob, size_t n, const int *dev_map,
                                       int updates_target, reinforce **out, char *msg, size_t len) {
    *out = NULL;
    reinforce *r = NULL;
    pl_status st = reinforce_create_from_checkpoint(ev, blob, n, updates_target, &r, msg, len);
    if (st != PL_OK) return st;
    if (dev_map && (st = placer_net_permute_devices(r->net, dev_map)) != PL_OK) {
        const int D = r->D; /* read before the trainer goes */
        reinforce_destroy(r);
        return pl_fail(msg, len, st, st == PL_ERR_NOMEM ? "out of memory"
                                                        : "the device map is not a permutation of the %d devices",
                       D);
    }
    r->done = 0;
    r->ema = 0;
    r->ema_init = 0;
    r->n_top = 0;
    r->evals = 0;
    r->adam->t = 0;
    memset(r->adam->m, 0, sizeof(double) * r->net->n_params);
    memset(r->adam->v, 0, sizeof(double) * r->net->n_params);
    if (r->gadam) {
        r->gadam->t = 0;
        memset(r->gadam->m, 0, sizeof(double) * r->gnet->n_params);
        memset(r->gadam->v, 0, sizeof(double) * r->gnet->n_params);
    }
    pl_rng_seed(&r->rng, r->opt.seed ^ 0x9e3779b97f4a7c15ull);
    set_schedule(r);
    *out = r;
    return PL_OK;
}

pl_status reinforce_load_checkpoint(profile_db *db, int64_t run_id, void **blob, size_t *n, int *update,
                                    char *msg, size_t len) {
    pl_status st = profile_db_checkpoint_load(db, run_id, -1, update, blob, n);
    if (st == PL_ERR_NOT_FOUND)
        return pl_fail(msg, len, st, "run %lld has no checkpoint to resume from", (long long)run_id);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot load the checkpoint of run %lld: %s", (long long)run_id,
                                    profile_db_last_error(db));
    return PL_OK;
}
