/*
 * test_layout_confirm.c: `placer confirm --layout` with tp x dp > 1 on the
 * CPU backend (issue 17): each layout timed over forked ranks against the
 * layout simulator's prediction on the CPU profile (calib/layout_confirm.h).
 *
 * The prediction's fitted rates are checked for consistency: at
 * tp = dp = pp = 1 and an anchor's own micro-batch size the prediction
 * misses that anchor by at most the fit's reported residual, the largest
 * miss is that residual, and every layout uses the same rates. The end-to-end run checks that every layout gets a row with
 * a measured time and a finite prediction and that its timings are stored;
 * no band on the error (a loaded 2-core machine under ASan; the ranks share
 * its cores).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../profile/helpers.h"
#include "calib_db.h"
#include "coll_fit.h"
#include "layout_confirm.h"
#include "store.h"

static int run(const char *args, char *out, size_t len) {
    char cmd[4096], op[64];
    snprintf(op, sizeof op, "/tmp/placer-layconf-%d.out", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", PLACER_BIN, args, op);
    int rc = system(cmd);
    size_t n = 0;
    unsigned char *b = th_read(op, &n);
    snprintf(out, len, "%.*s", (int)n, b ? (const char *)b : "");
    free(b);
    unlink(op);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A CPU profile of the tiny graph with 2-rank collective curves in dir. */
static void cpu_profile(const char *dir, char *db, size_t len, int curves) {
    char args[1024], out[8192];
    snprintf(db, len, "%s/cpu.db", dir);
    snprintf(args, sizeof args, "profile --db '%s' --cpu 1 --config tiny%s", db,
             curves ? " --collectives 2 --collective-max-bytes 64KiB --collective-reps 3" : "");
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
}

Test(layout_confirm, the_rates_fit_the_anchors_and_carry_to_the_layouts, .timeout = 120) {
    char dir[256], db_path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    cpu_profile(dir, db_path, sizeof db_path, 1);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    calib_model mo;
    cr_assert_eq(calib_model_load(db, NULL, &mo, msg, sizeof msg), PL_OK, "%s", msg);
    coll_measured meas;
    calib_coll_fit_result fr;
    cr_assert_eq(calib_coll_fit_db(db, NULL, &meas, &fr, msg, sizeof msg), PL_OK, "%s", msg);
    calib_coll_fit_free(&fr);
    /* at one rank and an anchor's own size the prediction misses that anchor by the fit's
     * residual: the largest miss is the reported max */
    const int sizes[3] = {1, 2, 4};
    double worst = 0, flops = 0, bw = 0;
    calib_layout_prediction pr;
    for (int i = 0; i < 3; i++) {
        double anchor = 0;
        cr_assert_eq(profile_db_get_step_anchor(db, mo.key, 0, sizes[i], &anchor, NULL), PL_OK);
        char text[64];
        snprintf(text, sizeof text, "mbs=%d,gbs=%d,precision=fp32", sizes[i], sizes[i]);
        layout l;
        cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s", msg);
        gpt_config cfg = mo.cfg;
        cfg.batch = sizes[i];
        cr_assert_eq(calib_layout_predict(db, mo.key, mo.p, &cfg, &l, &meas, &pr, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(pr.n_anchors, 3);
        cr_assert(pr.flops > 0 && pr.mem_bw > 0 && isfinite(pr.flops) && isfinite(pr.mem_bw));
        cr_assert_eq(pr.n_measured + pr.n_fitted + pr.n_model, 0, "one rank: no collectives");
        const double miss = fabs(pr.step_us - anchor) / anchor;
        cr_assert_leq(miss, pr.anchor_max + 1e-9, "mb %d: %g vs %g", sizes[i], pr.step_us, anchor);
        if (miss > worst) worst = miss;
        if (i == 0) flops = pr.flops, bw = pr.mem_bw;
        cr_assert_float_eq(pr.flops, flops, 1e-12 * flops, "the same anchors, the same rates");
        cr_assert_float_eq(pr.mem_bw, bw, 1e-12 * bw);
    }
    cr_assert_float_eq(worst, pr.anchor_max, 1e-9, "the reported max is an anchor's miss");
    fprintf(stderr, "layout_confirm: CPU rates %.3g GFLOP/s, %.3g GB/s%s; anchors rms %.1f%%, max %.1f%%\n",
            flops / 1e9, bw / 1e9, pr.one_scale ? " (one scale)" : "", 100 * pr.anchor_rms, 100 * pr.anchor_max);
    /* dp = 2: the same rates, and the gradient all-reduce from the curves */
    layout l;
    cr_assert_eq(layout_parse("dp=2,mbs=2,gbs=4,precision=fp32", &l, msg, sizeof msg), PL_OK, "%s", msg);
    calib_layout_prediction p2;
    cr_assert_eq(calib_layout_predict(db, mo.key, mo.p, &mo.cfg, &l, &meas, &p2, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(p2.n_measured + p2.n_fitted, 0);
    cr_assert_eq(p2.n_model, 0, "every group lies in the one node");
    cr_assert_float_eq(p2.flops, flops, 1e-12 * flops);
    cr_assert_gt(p2.res.parts_us[LAYOUT_T_DP] + p2.res.parts_us[LAYOUT_T_COMPUTE], 0);
    calib_model_free(&mo);
    profile_db_close(db);
    th_rmtree(dir);
}

/* The simulated single-device step of mb samples on p's cluster at known
 * rates and per-kernel overhead, as calib_layout_predict models a GPU
 * profile (tiles and the measured base efficiency on). */
static double gpu_step(const calib_model *mo, const coll_measured *meas, int mb, double flops, double bw, double o) {
    char msg[512] = "", text[64];
    cluster c;
    cr_assert_eq(calib_cpu_cluster(mo->p, 1, flops, bw, meas, &c, msg, sizeof msg), PL_OK, "%s", msg);
    snprintf(text, sizeof text, "mbs=%d,gbs=%d,precision=tf32", mb, mb);
    layout l;
    cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s", msg);
    gpt_config cfg = mo->cfg;
    cfg.batch = mb;
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create_measured(&cfg, &l, &c, meas, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    prm.compute.kernel_overhead_us = o;
    layout_result r;
    cr_assert_eq(layout_sim_run(s, &prm, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    return r.step_us;
}

Test(layout_confirm, a_gpu_profile_fit_recovers_the_rates, .timeout = 60) {
    char dir[256], db_path[512], args[1024], out[4096], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    snprintf(db_path, sizeof db_path, "%s/h200.db", dir);
    snprintf(args, sizeof args, "profile --from-spec h200x2-nvlink --config tiny --db '%s'", db_path);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    calib_model mo;
    cr_assert_eq(calib_model_load(db, NULL, &mo, msg, sizeof msg), PL_OK, "%s", msg);
    coll_measured meas;
    memset(&meas, 0, sizeof meas);
    snprintf(meas.source, sizeof meas.source, "test");
    for (int k = 0; k < COLL_KIND_COUNT; k++) meas.model[k] = (coll_ab){1, 0.0, 20.0, 2e9};
    /* anchors made by the model at 400 TFLOP/s and 4 TB/s, with its 2 us per kernel */
    const double F = 400e12, B = 4e12, O = CALIB_GPU_KERNEL_US;
    const int sizes[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        const double us = gpu_step(&mo, &meas, sizes[i], F, B, O);
        cr_assert_eq(profile_db_put_step_anchor(db, mo.p->machine, mo.key, 0, sizes[i], us, 0.0), PL_OK, "%s",
                     profile_db_last_error(db));
    }
    layout l;
    cr_assert_eq(layout_parse("dp=2,mbs=1,gbs=4,precision=tf32", &l, msg, sizeof msg), PL_OK, "%s", msg);
    calib_layout_prediction pr;
    cr_assert_eq(calib_layout_predict(db, mo.key, mo.p, &mo.cfg, &l, &meas, &pr, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(pr.n_anchors, 3);
    cr_assert(!pr.one_scale);
    cr_assert_float_eq(pr.flops, F, 1e-6 * F, "flops %g", pr.flops);
    cr_assert_float_eq(pr.mem_bw, B, 1e-6 * B, "bandwidth %g", pr.mem_bw);
    cr_assert_eq(pr.kernel_us, O);
    cr_assert_lt(pr.anchor_max, 1e-9);
    cr_assert_eq(pr.n_model, 0);
    cr_assert_gt(pr.n_fitted, 0, "dp = 2 over one node: the fitted collectives");
    calib_model_free(&mo);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(layout_confirm, each_layout_is_timed_over_its_ranks, .timeout = 180) {
    char dir[256], db[512], args[2048], out[16384];
    cr_assert_eq(th_mkdtemp(dir), 0);
    cpu_profile(dir, db, sizeof db, 1);
    snprintf(args, sizeof args,
             "confirm --db '%s' --timer cpu --layout dp=2,mbs=1 --layout tp=2,mbs=1 --confirm-rounds 2 --steps 2 "
             "--warmup 1",
             db);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    fprintf(stderr, "%s", out);
    const char *want[2] = {"tp=1,sp=0,cp=1,pp=1,vp=1,dp=2", "tp=2,sp=0,cp=1,pp=1,vp=1,dp=1"};
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(out, want[i]);
        cr_assert_not_null(at, "no row for %s: %s", want[i], out);
        const char *row = at;
        while (row > out && row[-1] != '\n') row--;
        int ranks = 0;
        double mean = 0, sd = 0, se = 0, pred = 0;
        cr_assert_eq(sscanf(row, " %d %lf +- %lf %lf %lf", &ranks, &mean, &sd, &se, &pred), 5, "%.200s", row);
        cr_assert_eq(ranks, 2);
        cr_assert(mean > 0 && isfinite(pred) && pred > 0, "%.200s", row);
    }
    cr_assert(strstr(out, "stored: 4 timings (purpose confirm-layout)"), "%s", out);
    th_rmtree(dir);
}

Test(layout_confirm, what_it_cannot_time_is_one_line_exit_2, .timeout = 120) {
    char dir[256], db[512], args[2048], out[4096];
    cr_assert_eq(th_mkdtemp(dir), 0);
    cpu_profile(dir, db, sizeof db, 0);
    static const char *cases[][2] = {
        {"--timer cpu --layout tp=2", "predicted from the profile's collective curves"},
        {"--timer cpu --layout dp=2,gbs=8", "has a batch of 4"},
        {"--timer cpu --layout tp=2 --run 3", "leave out --run"},
        {"--timer synthetic --layout tp=2", "--timer cpu times layouts"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "confirm --db '%s' %s", db, cases[i][0]);
        int rc = run(args, out, sizeof out);
        cr_expect_eq(rc, 2, "%s: exit %d: %s", args, rc, out);
        cr_expect(strstr(out, cases[i][1]) != NULL, "%s: %s", args, out);
        const char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0 && !strncmp(out, "placer confirm: ", 16), "%s: not one line: %s", args, out);
    }
    th_rmtree(dir);
}
