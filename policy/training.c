/*
 * training.c: a `placer train` run set up and closed around reinforce_train
 * (training.h).
 */
#include "training.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

void policy_training_close(policy_training *t) {
    if (!t) return;
    reinforce_destroy(t->r);
    policy_session_close(t->ss);
    free(t);
}

/* The canonical arguments stored with a run (everything but --db, --resume
 * and --threads), from which a resume rebuilds the same problem. */
static void canonical_args(const policy_session_options *so, const reinforce_options *ro, const gpt_config *cfg,
                           char *buf, size_t len) {
    char devs[32] = "", pipe[192] = "";
    if (so->devices > 0) snprintf(devs, sizeof devs, " --devices %d", so->devices);
    size_t pn = 0;
    if (ro->pipe_prior > 0) pn += (size_t)snprintf(pipe + pn, sizeof pipe - pn, " --pipe-prior %.17g", ro->pipe_prior);
    if (ro->pipe_devices != PIPE_DEVICES_ALL)
        pn += (size_t)snprintf(pipe + pn, sizeof pipe - pn, " --pipe-devices %s",
                               reinforce_pipe_devices_name(ro->pipe_devices));
    if (ro->pipe_anneal) pn += (size_t)snprintf(pipe + pn, sizeof pipe - pn, " --pipe-anneal");
    if (ro->lr_decay > 0) pn += (size_t)snprintf(pipe + pn, sizeof pipe - pn, " --lr-decay %.17g", ro->lr_decay);
    if (ro->entropy_decay > 0)
        pn += (size_t)snprintf(pipe + pn, sizeof pipe - pn, " --entropy-decay %.17g", ro->entropy_decay);
    snprintf(buf, len,
             "--config default,vocab=%d,d_model=%d,heads=%d,layers=%d,seq=%d,batch=%d%s --groups %s "
             "--micro-batches %d --schedule %s%s%s%s --updates %d --samples %d --baseline %s "
             "--entropy %.17g --lr %.17g --seed %llu --prior-stay %.17g --logit-clip %.17g --hidden %d --top-k %d "
             "--algo %s --ppo-epochs %d --ppo-clip %.17g --n-groups %d --group-prior %.17g --link-hidden %d%s%s",
             cfg->vocab, cfg->d_model, cfg->n_heads, cfg->n_layers, cfg->seq_len, cfg->batch,
             cfg->parallel_residual ? ",parallel=1" : "", grouping_mode_name(so->groups), so->micro_batches, schedule_order_name(so->order),
             so->mem_cap ? " --mem-cap " : "", so->mem_cap ? so->mem_cap : "", devs,
             ro->updates, ro->samples, reinforce_baseline_name(ro->baseline), ro->entropy, ro->lr,
             (unsigned long long)ro->seed, ro->stay, ro->logit_clip, ro->hidden, ro->top_k,
             reinforce_algo_name(ro->algo), ro->ppo_epochs, ro->ppo_clip, ro->n_groups, ro->group_prior,
             ro->link_hidden, pipe, so->calibrated ? "" : " --uncalibrated");
}


/* The placer from run resume's last checkpoint. */
static pl_status restore(policy_training *t, int64_t resume, int updates, char *msg, size_t len) {
    size_t n = 0;
    int upd = -1;
    void *blob = NULL;
    pl_status st = reinforce_load_checkpoint(t->ss->db, resume, &blob, &n, &upd, msg, len);
    if (st == PL_OK) st = reinforce_create_from_checkpoint(t->ss->ev, blob, n, updates, &t->r, msg, len);
    free(blob);
    if (st != PL_OK) return st;
    t->run_id = resume;
    t->start_update = reinforce_updates_done(t->r);
    return PL_OK;
}

pl_status policy_training_start(policy_session_options *so, const reinforce_options *ro, int64_t resume, int updates, policy_training **out, char *msg, size_t len) {
    *out = NULL;
    policy_training *t = calloc(1, sizeof *t);
    if (!t) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    so->write = 0;
    pl_status st = policy_session_open(so, &t->ss, msg, len);
    if (st != PL_OK) goto fail;
    policy_session_close(t->ss);
    t->ss = NULL;
    so->write = 1;
    if ((st = policy_session_open(so, &t->ss, msg, len)) != PL_OK) goto fail;
    if (resume) {
        st = restore(t, resume, updates, msg, len);
    } else if ((st = reinforce_create(t->ss->ev, ro, &t->r, msg, len)) == PL_OK) {
        char args[2048];
        canonical_args(so, ro, &t->ss->cfg, args, sizeof args);
        if ((st = profile_db_run_create(t->ss->db, "reinforce", args, &t->run_id)) != PL_OK)
            pl_fail(msg, len, st, "%s", profile_db_last_error(t->ss->db));
    }
    if (st != PL_OK) goto fail;
    *out = t;
    return PL_OK;
fail:
    policy_training_close(t);
    return st;
}

pl_status policy_training_start_transfer(policy_session_options *so, const char *src_path, int64_t src_run,
                                         const transfer_run_args *src, transfer_map m, int updates, int *dev_map,
                                         char *src_machine, size_t machine_len, policy_training **out, char *msg,
                                         size_t len) {
    *out = NULL;
    policy_training *t = calloc(1, sizeof *t);
    if (!t) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    policy_session *ss = NULL;
    void *blob = NULL;
    size_t n = 0;
    char m2[512] = "";
    /* the source: its profile and the run's problem there */
    policy_session_options s2;
    policy_session_options_default(&s2);
    s2.db_path = src_path;
    s2.config = src->config;
    s2.groups = src->groups;
    s2.micro_batches = src->micro_batches;
    s2.order = src->order;
    s2.mem_cap = src->mem_cap[0] ? src->mem_cap : NULL;
    s2.devices = src->devices;
    s2.calibrated = src->calibrated;
    s2.threads = 1;
    pl_status st = policy_session_open(&s2, &ss, m2, sizeof m2);
    if (st != PL_OK) {
        pl_fail(msg, len, st, "--from %s: %s", src_path, m2);
        goto fail;
    }
    if (src_machine) snprintf(src_machine, machine_len, "%s", ss->p->machine);
    st = reinforce_load_checkpoint(ss->db, src_run, &blob, &n, NULL, m2, sizeof m2);
    if (st != PL_OK) {
        pl_fail(msg, len, st, "%s in %s", m2, src_path);
        goto fail;
    }
    /* the devices the run's best placement uses order the source's ties */
    double use[SIM_MAX_DEVICES] = {0};
    transfer_shortlist top;
    if (transfer_run_shortlist(ss->db, src_run, &ss->pb, 1, &top, NULL, 0) == PL_OK) {
        for (int i = 0; i < top.n_nodes; i++) use[top.node_dev[i]] += 1;
        transfer_shortlist_free(&top);
    }
    /* this machine: everything checked on a read-only open first (a write
     * open turns a portable file to WAL, and bad input must leave the file
     * as it was), then opened for writing */
    int perm[SIM_MAX_DEVICES];
    for (int pass = 0; pass < 2; pass++) {
        so->write = pass;
        if ((st = policy_session_open(so, &t->ss, msg, len)) != PL_OK) goto fail;
        if ((st = transfer_policy_map(m, &ss->pb, &t->ss->pb, use, perm, msg, len)) != PL_OK) goto fail;
        if ((st = reinforce_create_transferred(t->ss->ev, blob, n, perm, updates, &t->r, m2, sizeof m2)) != PL_OK) {
            pl_fail(msg, len, st, "run %lld of %s: %s", (long long)src_run, src_path, m2);
            goto fail;
        }
        if (pass == 0) {
            reinforce_destroy(t->r);
            t->r = NULL;
            policy_session_close(t->ss);
            t->ss = NULL;
        }
    }
    char args[2048];
    canonical_args(so, reinforce_get_options(t->r), &t->ss->cfg, args, sizeof args);
    if ((st = profile_db_run_create(t->ss->db, "reinforce", args, &t->run_id)) != PL_OK) {
        pl_fail(msg, len, st, "%s", profile_db_last_error(t->ss->db));
        goto fail;
    }
    if (dev_map) memcpy(dev_map, perm, sizeof perm);
    free(blob);
    policy_session_close(ss);
    *out = t;
    return PL_OK;
fail:
    free(blob);
    policy_session_close(ss);
    policy_training_close(t);
    return st;
}

pl_status policy_training_shortlist(policy_training *t, policy_cands **rows, double *ref_us, char *msg, size_t len) {
    policy_session *ss = t->ss;
    policy_cands *base = NULL;
    *rows = NULL;
    *ref_us = NAN;
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, rows) != PL_OK ||
        policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &base) != PL_OK) {
        policy_cands_destroy(*rows);
        *rows = NULL;
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st;
    if ((st = reinforce_shortlist(t->r, *rows)) != PL_OK || (st = search_single(ss->ev, base)) != PL_OK ||
        (st = search_human(ss->ev, base)) != PL_OK || (st = search_dp(ss->ev, base, NULL)) != PL_OK) {
        pl_fail(msg, len, st, "cannot evaluate the baselines");
        goto out;
    }
    static const char *const prefixes[] = {"single", "human", "dp ("};
    for (int i = 0; i < 3 && st == PL_OK; i++) {
        int j = policy_cands_best_with_prefix(base, prefixes[i]);
        if (j >= 0)
            st = policy_cands_add(*rows, ss->gr, base->items[j].label, base->items[j].node_dev,
                                  base->items[j].unit_dev, &base->items[j].ev, 0);
    }
    int bs = policy_cands_best_with_prefix(base, "single");
    *ref_us = bs >= 0 && !base->items[bs].ev.oom ? base->items[bs].ev.step_us : NAN;
    if (st != PL_OK) pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
out:
    policy_cands_destroy(base);
    if (st != PL_OK) {
        policy_cands_destroy(*rows);
        *rows = NULL;
    }
    return st;
}
