/*
 * confirm_session.c: a head-to-head confirmation of placements from a
 * profile database (confirm_session.h): the sides, the predictions and the
 * timer, then the protocol, the store and the trace.
 */
#include "confirm_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

pl_status calib_session_prepare(profile_db *db, const calib_model *mo, const calib_session_opts *o, calib_session *s,
                                char *msg, size_t len) {
    if (!s) return pl_fail(msg, len, PL_ERR_INVALID, "calib_session_prepare: NULL session");
    memset(s, 0, sizeof *s);
    s->winner = -1;
    if (!db || !mo || !o || !o->timer_kind || !o->gpus)
        return pl_fail(msg, len, PL_ERR_INVALID, "calib_session_prepare: NULL argument");
    s->cfg = o->cfg;
    const schedule *sched = &s->cfg.sched;
    const int m = sched->micro_batches;
    sim_params prm;
    pl_status st = calib_db_load_params(db, mo->key, &prm, &s->n_calibrated, msg, len);
    if (st != PL_OK) return st;
    if ((st = calib_confirm_create(mo->g->n_nodes, mo->p->n_devices, &s->cf)) != PL_OK) return st;
    if ((st = calib_sides_add(s->cf, db, mo, sched, s->cfg.mem_cap, &prm, &o->so, &s->info, msg, len)) != PL_OK)
        return st;
    if (o->layout_placement && /* the layout's pipeline split competes as its own side */
        (st = calib_confirm_add(s->cf, "layout", o->layout_label, o->layout_placement, NULL, msg, len)) != PL_OK)
        return st;
    if ((st = sim_ctx_create(mo->g, mo->p, m, &s->ctx)) != PL_OK) return st;
    if ((st = calib_confirm_predict(s->cf, s->ctx, sched, s->cfg.mem_cap, &prm, msg, len)) != PL_OK) return st;
    if (!strcmp(o->timer_kind, "synthetic")) {
        sim_params truth = prm; /* the "hardware" is the simulator with some extra cost per step */
        truth.step_fixed_us += 100.0;
        truth.launch_overhead_us += 1.0;
        st = calib_sim_timer_create(mo->g, mo->p, &truth, 0.01, s->cfg.seed + 1000, m, &s->syn, &s->t);
    } else {
        st = calib_hw_timer_create(o->timer_kind, mo->g, o->gpus, o->n_gpus, s->cfg.seed, o->graphs, o->prec, &s->hw,
                                   &s->t, msg, len);
    }
    if (st != PL_OK) return st;
    if (!s->cfg.label) {
        snprintf(s->label, sizeof s->label, "run %lld", (long long)o->so.run_id);
        s->cfg.label = s->label;
    }
    s->cfg.graph_key = mo->key;
    s->cfg.run_id = o->so.run_id;
    return PL_OK;
}

pl_status calib_session_run(calib_session *s, profile_db *db, const calib_model *mo, const calib_session_opts *o,
                            char *msg, size_t len) {
    if (!s || !s->cf || !db || !mo || !o) return pl_fail(msg, len, PL_ERR_INVALID, "calib_session_run: not prepared");
    pl_status st = calib_confirm_run(s->cf, &s->t, &s->cfg, db, msg, len);
    if (st != PL_OK) return st;
    if ((st = calib_db_save_confirm(db, s->cf, &s->cfg, s->t.name, &s->confirm_id, msg, len)) != PL_OK) return st;
    s->winner = calib_confirm_winner(s->cf);
    if (s->hw && s->winner >= 0 && o->trace) { /* one traced step of the winner, kept for the report */
        const calib_candidate *k = &s->cf->cands[s->cf->sides[s->winner].pick];
        char *json = NULL, ptext[4096];
        placement_format(k->placement, mo->g->n_nodes, ptext, sizeof ptext);
        st = calib_hw_timer_trace(s->hw, k->placement, &s->cfg.sched, s->cfg.mem_cap, s->cfg.warmup, &json, msg, len);
        if (st == PL_OK)
            st = calib_db_save_trace(db, s->confirm_id, s->cf->sides[s->winner].name, ptext, json, msg, len);
        free(json);
        if (st != PL_OK) return st;
        s->traced = 1;
    }
    return PL_OK;
}

void calib_session_free(calib_session *s) {
    if (!s) return;
    sim_ctx_destroy(s->ctx);
    calib_hw_timer_destroy(s->hw);
    calib_sim_timer_destroy(s->syn);
    calib_confirm_destroy(s->cf);
    memset(s, 0, sizeof *s);
}
