/*
 * calibrate_run.c: `placer calibrate` as one library call on a file
 * (calibrate_run.h).
 */
#include "calibrate_run.h"

#include <stdio.h>
#include <string.h>

#include "hw_timer.h"
#include "placement.h"

/* The timers a run may hold; destroy accepts the empty one. */
typedef struct {
    calib_hw_timer *hw;
    calib_sim_timer *syn;
    calib_timer t;
} run_timers;

/* The synthetic timer: the simulator with parameters away from neutral
 * (known, so a check can see the fit find them) plus noise. */
static pl_status make_synthetic(const calib_run_options *o, const calib_model *m, run_timers *tm, char *msg,
                                size_t len) {
    sim_params truth;
    sim_params_default(&truth);
    truth.launch_overhead_us = 3.0;
    truth.transfer_latency_us = 8.0;
    truth.contention = 0.2;
    truth.step_fixed_us = 150.0;
    truth.compute_scale = 1.12;
    truth.transfer_scale = 1.35;
    pl_status st = calib_sim_timer_create(m->g, m->p, &truth, o->noise, o->o.seed + 1000, m->cfg.batch, &tm->syn, &tm->t);
    if (st != PL_OK) snprintf(msg, len, "cannot create the synthetic timer");
    return st;
}

/* The engine's timer on gpus, in the precision the profile was measured in. */
static pl_status make_engine(profile_db *db, const calib_run_options *o, const calib_model *m, const int *gpus,
                             int n_gpus, run_timers *tm, char *msg, size_t len) {
    hw_precision prec;
    pl_status st = calib_db_precision(db, &prec, msg, len);
    if (st == PL_OK)
        st = calib_hw_timer_create(o->timer_kind, m->g, gpus, n_gpus, o->o.seed, o->graphs, prec, &tm->hw, &tm->t, msg,
                                   len);
    if (st == PL_ERR_NO_DEVICE) {
        char m2[512], *semi = strchr(msg, ';'); /* drop the engine's own hint */
        if (semi) *semi = 0;
        snprintf(m2, sizeof m2, "no usable GPU (%.300s); --timer cpu uses the engine's CPU backend, "
                                "--from-measurements refits stored timings", msg);
        snprintf(msg, len, "%s", m2);
    }
    return st;
}

/* The GPU of each profile device: o->devices, or 0, 1, ... */
static pl_status map_devices(const calib_run_options *o, const calib_model *m, int *gpus, int *n_gpus, char *msg,
                             size_t len) {
    *n_gpus = m->p->n_devices;
    for (int i = 0; i < *n_gpus; i++) gpus[i] = i;
    if (!o->devices) return PL_OK;
    pl_status st = calib_parse_int_list(o->devices, gpus, PLACEMENT_MAX_DEVICES, n_gpus, msg, len);
    if (st != PL_OK) return st;
    if (*n_gpus != m->p->n_devices)
        return pl_fail(msg, len, PL_ERR_INVALID, "--devices lists %d devices but the profile has %d", *n_gpus,
                       m->p->n_devices);
    return PL_OK;
}

pl_status calib_run(const calib_run_options *o, calib_run_result *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    profile_db *db = NULL;
    calib_model m = {0};
    run_timers tm = {0};
    int gpus[PLACEMENT_MAX_DEVICES], n_gpus = 0;
    pl_status st = profile_db_open(o->db_path, PROFILE_DB_READ, &db, msg, len);
    if (st == PL_ERR_INVALID) st = profile_db_open(o->db_path, PROFILE_DB_WRITE, &db, msg, len);
    if (st != PL_OK) return st;
    if ((st = calib_model_load(db, o->config, &m, msg, len)) != PL_OK ||
        (st = map_devices(o, &m, gpus, &n_gpus, msg, len)) != PL_OK)
        goto out;
    if (!o->o.from_measurements) {
        st = !strcmp(o->timer_kind, "synthetic") ? make_synthetic(o, &m, &tm, msg, len)
                                                 : make_engine(db, o, &m, gpus, n_gpus, &tm, msg, len);
        if (st != PL_OK) goto out;
    }
    if (o->o.from_measurements && o->o.save) {
        /* a dry run on the read-only handle first: too few measurements (or
         * any other refusal) must leave the file as it was */
        calib_calibrate_options dry = o->o;
        dry.save = 0;
        if ((st = calib_calibrate(db, &m, NULL, &dry, &out->r, msg, len)) != PL_OK) goto out;
    }
    if (!o->o.from_measurements || o->o.save) {
        profile_db_close(db);
        db = NULL;
        if ((st = profile_db_open(o->db_path, PROFILE_DB_WRITE, &db, msg, len)) != PL_OK) goto out;
    }
    st = calib_calibrate(db, &m, o->o.from_measurements ? NULL : &tm.t, &o->o, &out->r, msg, len);
    if (st != PL_OK) goto out;
    snprintf(out->key, sizeof out->key, "%s", m.key);
    if (!o->o.from_measurements) snprintf(out->timer, sizeof out->timer, "%s", tm.t.name);
    if (tm.hw) snprintf(out->precision, sizeof out->precision, "%s", hw_precision_name(calib_hw_timer_precision(tm.hw)));
out:
    calib_hw_timer_destroy(tm.hw);
    calib_sim_timer_destroy(tm.syn);
    calib_model_free(&m);
    profile_db_close(db);
    return st;
}
