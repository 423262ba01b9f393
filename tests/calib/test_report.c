/* test_report.c: the confirmation's sides from the placers and a stored
 * run, and the report's files, on a spec profile with synthetic timings. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "calib_db.h"
#include "calib_fixture.h"
#include "calibrate.h"
#include "confirm.h"
#include "placement.h"
#include "report.h"
#include "sides.h"
#include "timer.h"

/* A fake RL run: 3 updates x 4 samples; update u sample k is contiguous
 * with its cut after node 10 + 5k, time 1000 - 10 u - k (us), and sample 3
 * of update 2 (the "fastest") is an OOM. Returns the run id. */
static int64_t fake_run(profile_db *db, int n_nodes) {
    int64_t run = 0;
    cr_assert_eq(profile_db_run_create(db, "rl", "--micro-batches 1", &run), PL_OK);
    int pl[64];
    char text[256];
    for (int u = 0; u < 3; u++)
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < n_nodes; i++) pl[i] = i >= 10 + 5 * k;
            placement_format(pl, n_nodes, text, sizeof text);
            int oom = u == 2 && k == 3;
            cr_assert_eq(profile_db_run_add_sample(db, run, u, k, text, oom ? 500.0 : 1000.0 - 10 * u - k, 1000, oom),
                         PL_OK);
        }
    cr_assert_eq(profile_db_run_finish(db, run), PL_OK);
    return run;
}

Test(calib_sides, rl_side_from_samples_is_the_top_k_distinct_without_oom_and_baselines_follow) {
    fx_model m;
    fx_model_make(&m, "default", "h200x2-nvlink");
    char path[256], msg[256] = "";
    profile_db *db = fx_db_make(&m, path, sizeof path);
    int64_t run = fake_run(db, m.g->n_nodes);
    calib_model mo = {0};
    cr_assert_eq(calib_model_load(db, NULL, &mo, msg, sizeof msg), PL_OK, "%s", msg);
    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(mo.g->n_nodes, mo.p->n_devices, &c), PL_OK);
    calib_sides_options o;
    calib_sides_options_default(&o);
    o.run_id = run;
    o.top_k = 2;
    o.threads = 1;
    schedule s = schedule_make(1, SCHED_GPIPE);
    calib_sides_info info;
    cr_assert_eq(calib_sides_add(c, db, &mo, &s, 0, NULL, &o, &info, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(info.rl_from_checkpoint, 0);
    cr_assert_eq(info.n_added[0], 2);
    /* the OOM sample (cut at 25) is skipped: best are cut 20 (k=2), then 15 (k=1) */
    cr_assert_str_eq(c->sides[0].name, "rl");
    cr_assert_eq(c->cands[0].placement[19], 0);
    cr_assert_eq(c->cands[0].placement[20], 1);
    cr_assert_eq(c->cands[1].placement[14], 0);
    cr_assert_eq(c->cands[1].placement[15], 1);
    cr_assert_eq(info.n_added[1], 2); /* each GPU alone */
    cr_assert_gt(info.n_added[2], 1); /* several human splits */
    /* the DP and search winners come on their own devices and swapped */
    cr_assert_eq(info.n_added[3], 2);
    cr_assert_eq(info.n_added[4], 2);
    cr_assert_eq(c->n_sides, 5);
    for (int side = 3; side <= 4; side++) {
        int first = -1, second = -1;
        for (int i = 0; i < c->n_cand; i++)
            if (c->cands[i].side == side) {
                if (first < 0) first = i;
                else second = i;
            }
        cr_assert(first >= 0 && second >= 0, "side %d has two candidates", side);
        for (int v = 0; v < mo.g->n_nodes; v++)
            cr_assert_eq(c->cands[second].placement[v], 1 - c->cands[first].placement[v], "side %d node %d", side, v);
        cr_assert(strstr(c->cands[second].label, ", devices +1") != NULL, "%s", c->cands[second].label);
    }
    /* a run that does not exist is a clear error */
    calib_confirm *c2 = NULL;
    cr_assert_eq(calib_confirm_create(mo.g->n_nodes, mo.p->n_devices, &c2), PL_OK);
    o.run_id = run + 100;
    cr_assert_eq(calib_sides_add(c2, db, &mo, &s, 0, NULL, &o, &info, msg, sizeof msg), PL_ERR_NOT_FOUND);
    calib_confirm_destroy(c2);
    calib_confirm_destroy(c);
    calib_model_free(&mo);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}

static int file_nonempty(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0 && st.st_size > 0;
}

Test(calib_report, writes_figures_tables_and_traces) {
    fx_model m;
    fx_model_make(&m, "default", "h200x2-nvlink");
    char path[256], msg[512] = "";
    profile_db *db = fx_db_make(&m, path, sizeof path);
    int64_t run = fake_run(db, m.g->n_nodes);
    calib_model mo = {0};
    cr_assert_eq(calib_model_load(db, NULL, &mo, msg, sizeof msg), PL_OK, "%s", msg);

    /* a calibration on synthetic timings */
    sim_params truth;
    sim_params_default(&truth);
    truth.step_fixed_us = 120;
    truth.compute_scale = 1.1;
    calib_sim_timer *st = NULL;
    calib_timer t;
    cr_assert_eq(calib_sim_timer_create(mo.g, mo.p, &truth, 0.01, 3, 16, &st, &t), PL_OK);
    calib_calibrate_options co;
    calib_calibrate_options_default(&co);
    co.count = 30;
    calib_calibrate_result cr;
    cr_assert_eq(calib_calibrate(db, &mo, &t, &co, &cr, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cr.n_measured, 30);
    cr_assert_gt(cr.fit_id, 0);
    int found = 0;
    sim_params stored;
    cr_assert_eq(calib_db_load_params(db, mo.key, &stored, &found, msg, sizeof msg), PL_OK);
    cr_assert_eq(found, SIM_N_PARAMS);
    cr_assert(ieee_ulp_eq(dbl, stored.compute_scale, cr.fit.params.compute_scale, 4));

    /* a confirmation labelled T */
    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(mo.g->n_nodes, mo.p->n_devices, &c), PL_OK);
    calib_sides_options so;
    calib_sides_options_default(&so);
    so.run_id = run;
    so.threads = 1;
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    cfg.graph_key = mo.key;
    cfg.label = "T";
    cfg.run_id = run;
    cr_assert_eq(calib_sides_add(c, db, &mo, &cfg.sched, 0, &stored, &so, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(calib_confirm_run(c, &t, &cfg, db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(calib_db_save_confirm(db, c, &cfg, t.name, NULL, msg, sizeof msg), PL_OK, "%s", msg);

    char dir[300];
    snprintf(dir, sizeof dir, "%s-report", path);
    calib_report_options ro;
    memset(&ro, 0, sizeof ro);
    ro.out_dir = dir;
    calib_report_summary sum;
    cr_assert_eq(calib_report_write(db, &ro, &sum, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(sum.n_confirms, 1);
    cr_assert_eq(sum.has_fit, 1);
    cr_assert_eq(sum.n_learning, 1);
    cr_assert_eq(sum.n_traces, 1);
    cr_assert_eq(sum.n_figures, 4); /* learning curve, calibration, head to head, placement map */
    const char *files[] = {"calibration.png", "calibration.svg", "h2h-T.png", "h2h-T.svg", "placement-T.png",
                           "placement-T.svg", "trace-T-sim.json", "results.md"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        cr_assert(file_nonempty(dir, files[i]), "%s missing", files[i]);
    char lc[64];
    snprintf(lc, sizeof lc, "learning-%lld.png", (long long)run);
    cr_assert(file_nonempty(dir, lc), "%s missing", lc);
    char mdp[512];
    snprintf(mdp, sizeof mdp, "%s/results.md", dir);
    FILE *f = fopen(mdp, "r");
    cr_assert_not_null(f);
    static char md[1 << 16];
    size_t n = fread(md, 1, sizeof md - 1, f);
    md[n] = 0;
    fclose(f);
    cr_assert(strstr(md, "| setting | best single GPU | best human split | RL placer | DP | search |") != NULL);
    cr_assert(strstr(md, "### Setting T") != NULL);
    cr_assert(strstr(md, "after calibration") != NULL);
    cr_assert(strstr(md, "Verdict:") != NULL);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    calib_confirm_destroy(c);
    calib_sim_timer_destroy(st);
    calib_model_free(&mo);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}
