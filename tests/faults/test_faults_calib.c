/*
 * test_faults_calib.c: calibration with its n-th allocation failing, for
 * n = 0, 1, ... up to every allocation of the call: loading the model from
 * the store, then a whole calibration (24 synthetic timings stored as
 * measurements, the GSL fit, the evaluation, the fit and the parameters
 * stored), a refit from the stored measurements, and a head-to-head
 * confirmation (calib/confirm_session.h: sides, predictions, the synthetic
 * timer, the protocol, the stored confirmation).
 *
 * Each failure must come back as PL_ERR_NOMEM with nothing leaked (GSL is
 * linked statically, so its allocations are swept too), and leave the
 * database intact: integrity_check ok, the profile untouched, and every
 * stored fit with all of its points.
 */
#include <criterion/criterion.h>

#include "calib_db.h"
#include "calibrate.h"
#include "confirm_session.h"
#include "fault_db.h"
#include "fault_sweep.h"
#include "timer.h"

static fault_db F;
static char *costs_before;

static void setup(void) {
    fault_db_init(&F, "calib.db");
    fault_db_save(&F);
    costs_before = fault_db_dump(F.path, "SELECT * FROM node_cost ORDER BY device, node, phase, mb_size");
}

static void teardown(void) {
    free(costs_before);
    fault_db_fini(&F);
}

static pl_status op_calibrate(void *ctx) {
    int from_measurements = *(int *)ctx;
    profile_db *db = NULL;
    calib_model m;
    memset(&m, 0, sizeof m);
    calib_sim_timer *syn = NULL;
    calib_timer t;
    memset(&t, 0, sizeof t);
    char msg[512] = "";
    pl_status st = profile_db_open(F.path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
    if (st == PL_OK) st = calib_model_load(db, NULL, &m, msg, sizeof msg);
    if (st == PL_OK && !from_measurements) {
        sim_params truth;
        sim_params_default(&truth);
        truth.launch_overhead_us = 3.0;
        truth.compute_scale = 1.1;
        st = calib_sim_timer_create(m.g, m.p, &truth, 0.01, 5, m.cfg.batch, &syn, &t);
    }
    if (st == PL_OK) {
        calib_calibrate_options o;
        calib_calibrate_options_default(&o);
        o.count = 24;
        o.steps = 2;
        o.warmup = 0;
        o.from_measurements = from_measurements;
        o.fit.max_iter = 5; /* the same allocation sites as a full fit, in less time */
        calib_calibrate_result r;
        st = calib_calibrate(db, &m, from_measurements ? NULL : &t, &o, &r, msg, sizeof msg);
        if (st != PL_OK && st != PL_ERR_NOMEM && getenv("PLACER_FAULTS_VERBOSE")) fprintf(stderr, "calibrate: %s\n", msg);
    }
    calib_sim_timer_destroy(syn);
    calib_model_free(&m);
    profile_db_close(db);
    return st;
}

static void check_calib(void *ctx, long n, pl_status st) {
    (void)ctx, (void)st;
    fault_db_assert_intact(F.path, n);
    char *now = fault_db_dump(F.path, "SELECT * FROM node_cost ORDER BY device, node, phase, mb_size");
    cr_assert_str_eq(now, costs_before, "the profile changed after failing allocation %ld", n);
    free(now);
    if (fault_db_query(F.path, "SELECT count(*) FROM sqlite_master WHERE name = 'calib_fit'") > 0) {
        long long bad = fault_db_query(F.path, "SELECT count(*) FROM calib_fit f WHERE (SELECT count(*) FROM "
                                               "calib_fit_point p WHERE p.fit_id = f.id) != f.n_train + f.n_test");
        cr_assert_eq(bad, 0, "a stored fit lacks points after failing allocation %ld", n);
    }
}

Test(faults_calib, calibration_with_a_synthetic_timer_fails_cleanly_at_every_allocation, .init = setup,
     .fini = teardown, .timeout = 600) {
    int from = 0;
    long n = fault_sweep("calib: model + measure 24 + fit + store", op_calibrate, check_calib, &from);
    cr_assert_gt(n, 20);
    cr_assert_geq(fault_db_query(F.path, "SELECT count(*) FROM calib_fit"), 1);
}

Test(faults_calib, refit_from_stored_measurements_fails_cleanly_at_every_allocation, .init = setup,
     .fini = teardown, .timeout = 600) {
    int from = 0;
    cr_assert_eq(op_calibrate(&from), PL_OK); /* 24 measurements to refit */
    from = 1;
    long n = fault_sweep("calib: refit from stored measurements", op_calibrate, check_calib, &from);
    cr_assert_gt(n, 20);
}

/* ---- a head-to-head confirmation (calib/confirm_session.h) ---- */

/* Prepare (sides, predictions, the synthetic timer) and run (protocol,
 * stored confirmation) a small confirmation of the single and human
 * sides, as `placer confirm --run 0 --timer synthetic --no-dp --no-search`. */
static pl_status op_session(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    calib_model m;
    memset(&m, 0, sizeof m);
    calib_session s;
    memset(&s, 0, sizeof s);
    char msg[512] = "";
    pl_status st = profile_db_open(F.path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
    if (st == PL_OK) st = calib_model_load(db, NULL, &m, msg, sizeof msg);
    if (st == PL_OK) {
        calib_session_opts o;
        memset(&o, 0, sizeof o);
        calib_confirm_config_default(&o.cfg);
        o.cfg.selection_rounds = 1;
        o.cfg.confirm_rounds = 2;
        o.cfg.steps = 1;
        o.cfg.warmup = 0;
        o.cfg.sched = schedule_make(1, SCHED_GPIPE);
        calib_sides_options_default(&o.so);
        o.so.dp = o.so.search = 0;
        o.so.threads = 1;
        int gpus[PLACEMENT_MAX_DEVICES];
        for (int i = 0; i < m.p->n_devices; i++) gpus[i] = i;
        o.gpus = gpus;
        o.n_gpus = m.p->n_devices;
        o.timer_kind = "synthetic";
        st = calib_session_prepare(db, &m, &o, &s, msg, sizeof msg);
        if (st == PL_OK) st = calib_session_run(&s, db, &m, &o, msg, sizeof msg);
        if (st != PL_OK && st != PL_ERR_NOMEM && getenv("PLACER_FAULTS_VERBOSE")) fprintf(stderr, "session: %s\n", msg);
    }
    calib_session_free(&s);
    calib_model_free(&m);
    profile_db_close(db);
    return st;
}

Test(faults_calib, a_confirmation_session_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown,
     .timeout = 600) {
    long n = fault_sweep("calib: confirm session (sides, predict, synthetic timer, protocol, store)", op_session,
                         check_calib, NULL);
    cr_assert_gt(n, 20);
    cr_assert_geq(fault_db_query(F.path, "SELECT count(*) FROM measurement WHERE purpose = 'confirm'"), 2);
}
