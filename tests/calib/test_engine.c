/* test_engine.c: the protocol and the calibration on timings from the real
 * engine's CPU reference backend (virtual devices, no GPU): a cap between
 * the split's and the single device's need makes the single device an OOM
 * side that is never picked, every timing is stored, and a measured trace
 * of the winner reaches the report. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "calib_db.h"
#include "calib_fixture.h"
#include "calibrate.h"
#include "confirm.h"
#include "hw_timer.h"
#include "report.h"

Test(calib_engine, cpu_backend_confirmation_never_picks_the_single_device_that_runs_out_of_memory) {
    fx_model m;
    fx_model_make(&m, "tiny", "h200x2-nvlink");
    int n = m.g->n_nodes;
    char path[256], msg[512] = "";
    profile_db *db = fx_db_make(&m, path, sizeof path);
    calib_hw_timer *hw = NULL;
    calib_timer t;
    int gpus[2] = {0, 1};
    cr_assert_eq(calib_hw_timer_create("cpu", m.g, gpus, 2, 1, 0, HW_PREC_DEFAULT, &hw, &t, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_str_eq(t.name, "cpu");
    int single[64], split[64];
    for (int i = 0; i < n; i++) {
        single[i] = 0;
        split[i] = i >= n / 2;
    }
    schedule s = schedule_make(2, SCHED_1F1B);
    double steps[3];
    int64_t p1 = 0, p2 = 0;
    int oom = 0;
    cr_assert_eq(calib_timer_run(&t, single, &s, 0, 1, 3, steps, &p1, &oom, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(oom, 0);
    cr_assert(steps[0] > 0 && isfinite(steps[0]));
    cr_assert_eq(calib_timer_run(&t, split, &s, 0, 1, 3, steps, &p2, &oom, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_lt(p2, p1, "the split's largest device (%lld B) should need less than one device (%lld B)",
                 (long long)p2, (long long)p1);
    int64_t cap = (p1 + p2) / 2;
    cr_assert_eq(calib_timer_run(&t, single, &s, cap, 1, 3, steps, &p1, &oom, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(oom, 1);
    cr_assert(isnan(steps[0]));

    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(n, 2, &c), PL_OK);
    int single1[64];
    for (int i = 0; i < n; i++) single1[i] = 1;
    cr_assert_eq(calib_confirm_add(c, "single", "gpu 0", single, NULL, msg, sizeof msg), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "single", "gpu 1", single1, NULL, msg, sizeof msg), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "human", "half", split, NULL, msg, sizeof msg), PL_OK);
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    cfg.sched = s;
    cfg.mem_cap = cap;
    cfg.selection_rounds = 2;
    cfg.confirm_rounds = 3;
    cfg.steps = 3;
    cfg.warmup = 1;
    cfg.graph_key = m.key;
    cfg.label = "C";
    cr_assert_eq(calib_confirm_run(c, &t, &cfg, db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(c->sides[0].pick, -1);
    cr_assert_eq(c->cands[0].oom, 1);
    cr_assert_eq(c->cands[1].oom, 1);
    cr_assert_eq(c->sides[1].pick, 2);
    cr_assert_eq(c->sides[1].summary.n, 3);
    cr_assert_eq(c->n_timings, 2 * 3 + 3);
    for (int i = 0; i < c->n_timings; i++) cr_assert_gt(c->timings[i].measurement_id, 0);
    cr_assert_eq(calib_confirm_winner(c), 1);
    int64_t cid = 0;
    cr_assert_eq(calib_db_save_confirm(db, c, &cfg, t.name, &cid, msg, sizeof msg), PL_OK, "%s", msg);
    char *json = NULL;
    cr_assert_eq(calib_hw_timer_trace(hw, split, &s, cap, 1, &json, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(json && strstr(json, "traceEvents"));
    cr_assert_eq(calib_db_save_trace(db, cid, "human", "x", json, msg, sizeof msg), PL_OK, "%s", msg);
    free(json);

    char dir[300];
    snprintf(dir, sizeof dir, "%s-report", path);
    calib_report_options ro;
    memset(&ro, 0, sizeof ro);
    ro.out_dir = dir;
    calib_report_summary sum;
    cr_assert_eq(calib_report_write(db, &ro, &sum, msg, sizeof msg), PL_OK, "%s", msg);
    char f[400];
    snprintf(f, sizeof f, "%s/trace-C-measured.json", dir);
    cr_assert_eq(access(f, R_OK), 0, "%s missing", f);
    snprintf(f, sizeof f, "%s/trace-C-sim.json", dir);
    cr_assert_eq(access(f, R_OK), 0, "%s missing", f);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    calib_confirm_destroy(c);
    calib_hw_timer_destroy(hw);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}

Test(calib_engine, cpu_backend_calibration_measures_stores_and_fits) {
    fx_model m;
    fx_model_make(&m, "tiny", "h200x2-nvlink");
    char path[256], msg[512] = "";
    profile_db *db = fx_db_make(&m, path, sizeof path);
    calib_model mo = {0};
    cr_assert_eq(calib_model_load(db, NULL, &mo, msg, sizeof msg), PL_OK, "%s", msg);
    calib_hw_timer *hw = NULL;
    calib_timer t;
    cr_assert_eq(calib_hw_timer_create("cpu", mo.g, NULL, 2, 1, 0, HW_PREC_DEFAULT, &hw, &t, msg, sizeof msg), PL_OK, "%s", msg);
    calib_calibrate_options o;
    calib_calibrate_options_default(&o);
    o.count = 16;
    o.steps = 2;
    o.warmup = 1;
    calib_calibrate_result r;
    cr_assert_eq(calib_calibrate(db, &mo, &t, &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r.n_measured, 16);
    cr_assert_eq(r.n_oom, 0);
    cr_assert_eq(r.n_train + r.n_test, 16);
    cr_assert_gt(r.fit_id, 0);
    /* the engine's CPU backend is far from the H200 spec profile: the fit
     * (which minimises squared log error, not MAPE) must reduce that error */
    cr_assert_lt(r.fit.chisq, 0.8 * r.fit.chisq0);
    /* refit from what was stored, without timing anything */
    calib_calibrate_options o2 = o;
    o2.from_measurements = 1;
    calib_calibrate_result r2;
    cr_assert_eq(calib_calibrate(db, &mo, NULL, &o2, &r2, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r2.n_measured, 0);
    cr_assert_eq(r2.n_data, 16);
    for (int i = 0; i < SIM_N_PARAMS; i++)
        cr_assert(ieee_ulp_eq(dbl, *sim_param_ptr(&r2.fit.params, i), *sim_param_ptr(&r.fit.params, i), 64),
                  "%s differs after a refit from the store", sim_param_name(i));
    calib_hw_timer_destroy(hw);
    calib_model_free(&mo);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}

/* confirm and calibrate run the engine in the precision the profile was
 * measured in: a file without the key reads as tf32 (every profile before
 * issue 16), a bf16 profile gives a bf16 engine, an unknown value is refused */
Test(calib_engine, the_timer_runs_in_the_profiles_precision) {
    fx_model m;
    fx_model_make(&m, "tiny", "h200x2-nvlink");
    char path[256], msg[512] = "";
    profile_db *db = fx_db_make(&m, path, sizeof path);
    hw_precision p = HW_PREC_DEFAULT;
    cr_assert_eq(calib_db_precision(db, &p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(p, HW_PREC_TF32, "a file without the key was measured in the engine's default, tf32");
    cr_assert_eq(profile_db_set_precision(db, "bf16"), PL_OK);
    cr_assert_eq(calib_db_precision(db, &p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(p, HW_PREC_BF16);
    calib_hw_timer *hw = NULL;
    calib_timer t;
    cr_assert_eq(calib_hw_timer_create("cpu", m.g, NULL, 2, 1, 0, p, &hw, &t, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(calib_hw_timer_precision(hw), HW_PREC_BF16);
    int split[64];
    for (int i = 0; i < m.g->n_nodes; i++) split[i] = i >= m.g->n_nodes / 2;
    schedule s = schedule_make(2, SCHED_1F1B);
    double steps[2];
    int64_t peak = 0;
    int oom = 0;
    cr_assert_eq(calib_timer_run(&t, split, &s, 0, 1, 2, steps, &peak, &oom, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(oom, 0);
    cr_assert_gt(steps[0], 0.0);
    calib_hw_timer_destroy(hw);
    cr_assert_eq(profile_db_set_precision(db, "int4"), PL_OK);
    msg[0] = 0;
    cr_assert_eq(calib_db_precision(db, &p, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "int4") != NULL, "the message names the value: %s", msg);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}
