/*
 * predict.c: one placement's prediction from a profile database (predict.h),
 * in the order `placer simulate` has always checked things: the profile and
 * its graph, the placement, the schedule against the batch, the caps, the
 * simulator parameters; then the run and its summaries.
 */
#include "predict.h"

#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "store.h"
#include "util.h"

void policy_prediction_destroy(policy_prediction *r) {
    if (!r) return;
    free(r->placement_text);
    free(r->links);
    free(r->dev);
    sim_ctx_destroy(r->ctx);
    graph_destroy(r->g);
    profile_data_destroy(r->p);
    free(r);
}

/* Load the profile and build its graph into r. */
static pl_status load_problem(profile_db *db, const gpt_config *want, policy_prediction *r, char *msg, size_t len) {
    pl_status st = profile_db_load_profile(db, want, &r->p, &r->cfg, msg, len);
    if (st == PL_OK) st = graph_build_gpt(&r->cfg, &r->g, msg, len);
    if (st != PL_OK) return st;
    if (r->g->n_nodes != r->p->n_nodes)
        return pl_fail(msg, len, PL_ERR_INVALID, "the stored profile does not match its graph's node count");
    gpt_config_key(&r->cfg, r->key, sizeof r->key);
    return PL_OK;
}

/* The simulator parameters: the store's fitted ones for this graph unless
 * neutral ones are asked for (o->params 0); asking for calibrated ones
 * (1) that are not stored is bad input. */
static pl_status pick_params(profile_db *db, const policy_predict_options *o, policy_prediction *r, char *msg,
                             size_t len) {
    sim_params_default(&r->prm);
    r->calibrated = 0;
    if (o->params == 0) return PL_OK;
    const char *names[SIM_N_PARAMS];
    double vals[SIM_N_PARAMS];
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        names[i] = sim_param_name(i);
        vals[i] = *sim_param_ptr(&r->prm, i);
    }
    int found = 0;
    pl_status st = profile_db_load_sim_params(db, r->key, SIM_N_PARAMS, names, vals, &found);
    if (st != PL_OK) return pl_fail(msg, len, st, "%s", profile_db_last_error(db));
    if (found > 0) {
        for (int i = 0; i < SIM_N_PARAMS; i++) *sim_param_ptr(&r->prm, i) = vals[i];
        r->calibrated = 1;
    } else if (o->params == 1) {
        return pl_fail(msg, len, PL_ERR_NOT_FOUND,
                       "no calibrated simulator parameters stored for %s in %s; run placer calibrate, or use "
                       "--params neutral",
                       r->key, o->db_path);
    }
    return PL_OK;
}

/* Run the simulator with its event trace on. */
static pl_status run_sim(policy_prediction *r, const int64_t *caps, char *msg, size_t len) {
    pl_status st = sim_ctx_create(r->g, r->p, r->sched.micro_batches, &r->ctx);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot create the simulator for this profile");
    if ((st = sim_ctx_set_trace(r->ctx, 1)) != PL_OK)
        return pl_fail(msg, len, st, "out of memory for the simulator's event trace");
    if ((st = sim_run(r->ctx, r->dev, &r->sched, caps, &r->prm, &r->res)) != PL_OK)
        return pl_fail(msg, len, st, "%s", sim_last_error(r->ctx));
    return PL_OK;
}

/* Per-link sums and the critical path's compute per device, from the events;
 * the placement in canonical text. */
static pl_status summarise(policy_prediction *r, char *msg, size_t len) {
    const int D = r->p->n_devices;
    for (int i = 0; i < r->g->n_nodes; i++) r->used[r->dev[i]] = 1;
    r->mb_size = r->cfg.batch / r->sched.micro_batches;
    r->mb_profiled = profile_mb_index(r->p, r->mb_size) >= 0;
    int n_ev = 0;
    const sim_event *ev = sim_events(r->ctx, &n_ev);
    for (int e = 0; e < n_ev; e++) {
        if (ev[e].dst_device < 0) continue;
        policy_link_sum *l = &r->links[ev[e].device * D + ev[e].dst_device];
        l->count++;
        l->acts += ev[e].kind == SIM_EV_SEND_ACT;
        l->bytes += (double)r->p->node_mem[ev[e].node].out_bytes_per_sample * r->mb_size;
        l->busy_us += ev[e].end_us - ev[e].start_us;
    }
    int n_crit = 0;
    const sim_event *cp = sim_critical_path(r->ctx, &n_crit);
    for (int k = 0; k < n_crit; k++)
        if (cp[k].dst_device < 0) r->crit_dev_us[cp[k].device] += cp[k].end_us - cp[k].start_us;
    size_t plen = (size_t)placement_format(r->dev, r->g->n_nodes, NULL, 0) + 1;
    if (!(r->placement_text = malloc(plen))) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    placement_format(r->dev, r->g->n_nodes, r->placement_text, plen);
    return PL_OK;
}

pl_status policy_predict(const policy_predict_options *o, policy_prediction **out, char *msg, size_t len) {
    if (out) *out = NULL;
    if (!o || !out || !o->db_path || !o->placement)
        return pl_fail(msg, len, PL_ERR_INVALID, "policy_predict: NULL argument");
    policy_prediction *r = calloc(1, sizeof *r);
    if (!r) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    r->sched = o->sched;
    profile_db *db = NULL;
    int64_t *caps = NULL;
    pl_status st = profile_db_open(o->db_path, PROFILE_DB_READ, &db, msg, len);
    if (st != PL_OK || (st = load_problem(db, o->config, r, msg, len)) != PL_OK) goto out;
    const int D = r->p->n_devices;
    r->dev = malloc(sizeof *r->dev * (size_t)r->g->n_nodes);
    caps = malloc(sizeof *caps * (size_t)D);
    r->links = calloc((size_t)D * D, sizeof *r->links);
    if (!r->dev || !caps || !r->links) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = placement_parse(o->placement, r->g->n_nodes, D, r->dev, msg, len)) != PL_OK ||
        (st = schedule_validate(&r->sched, r->cfg.batch, msg, len)) != PL_OK)
        goto out;
    for (int d = 0; d < D; d++) {
        caps[d] = r->p->devices[d].mem_bytes;
        if (o->mem_cap && (st = pl_parse_mem_cap(o->mem_cap, r->p->devices[d].mem_bytes, &caps[d], msg, len)) != PL_OK)
            goto out;
    }
    if ((st = pick_params(db, o, r, msg, len)) != PL_OK || (st = run_sim(r, caps, msg, len)) != PL_OK ||
        (st = summarise(r, msg, len)) != PL_OK)
        goto out;
    *out = r;
    r = NULL;
out:
    free(caps);
    policy_prediction_destroy(r);
    profile_db_close(db);
    return st;
}
