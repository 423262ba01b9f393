/*
 * test_coll_measured.c: the layout simulator following measured
 * collectives (sim/collective/coll_measured.h, issue 17 item 7). Interpolation hits
 * the measured points exactly, is log-log between them and continuous into
 * the fitted model's extrapolation; the fitted model at a group's size is
 * the closed form; a group inside one node takes its time from the
 * measurements and says so, a group across nodes keeps the cluster model;
 * and the layout's step time moves with the curves: slower measured
 * collectives give a slower step, the tensor-parallel part most.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cluster_file.h"
#include "coll_measured.h"
#include "layout_sim.h"
#include "model_config.h"

/* A model over all three kinds and one all-reduce curve over 2 ranks at
 * 4 KiB .. 4 MiB (factors of 4) that runs `slow` times the model. */
static void make(coll_measured *m, double alpha_us, double busbw, double slow) {
    memset(m, 0, sizeof *m);
    snprintf(m->source, sizeof m->source, "test");
    for (int k = 0; k < COLL_KIND_COUNT; k++) m->model[k] = (coll_ab){1, 0.0, alpha_us, busbw};
    coll_curve *c = &m->curves[m->n_curves++];
    c->kind = COLL_ALL_REDUCE;
    c->ranks = 2;
    for (double b = 4096; b <= 4194304; b *= 4) {
        c->bytes[c->n] = b;
        c->us[c->n] = slow * coll_ab_time_us(&m->model[0], COLL_ALL_REDUCE, 2, b);
        c->n++;
    }
}

Test(coll_measured, curves_interpolate_log_log_and_extrapolate_continuously) {
    coll_measured m;
    make(&m, 5.0, 10e9, 2.0);
    m.use_curves = 1;
    char msg[256] = "";
    cr_assert_eq(coll_measured_validate(&m, msg, sizeof msg), PL_OK, "%s", msg);
    const coll_curve *c = coll_measured_curve(&m, COLL_ALL_REDUCE, 2);
    cr_assert_not_null(c);
    double us;
    const char *src;
    for (int j = 0; j < c->n; j++) {
        cr_assert(coll_measured_time(&m, COLL_ALL_REDUCE, 2, c->bytes[j], &us, &src));
        cr_assert_str_eq(src, "measured");
        cr_assert_float_eq(us, c->us[j], 1e-9 * c->us[j]);
    }
    /* the geometric middle of two sizes: the geometric mean of their times */
    cr_assert(coll_measured_time(&m, COLL_ALL_REDUCE, 2, sqrt(c->bytes[1] * c->bytes[2]), &us, &src));
    cr_assert_float_eq(us, sqrt(c->us[1] * c->us[2]), 1e-9 * us);
    /* beyond the last size: the model's shape through the end point */
    const double big = 4.0 * c->bytes[c->n - 1];
    cr_assert(coll_measured_time(&m, COLL_ALL_REDUCE, 2, big, &us, &src));
    cr_assert_float_eq(us, 2.0 * coll_ab_time_us(&m.model[0], COLL_ALL_REDUCE, 2, big), 1e-9 * us);
    double just;
    cr_assert(coll_measured_time(&m, COLL_ALL_REDUCE, 2, c->bytes[c->n - 1] * (1 + 1e-9), &just, &src));
    cr_assert_float_eq(just, c->us[c->n - 1], 1e-6 * just, "continuous at the last measured size");
    /* other group sizes, other kinds, or curves off: the fitted model */
    cr_assert(coll_measured_time(&m, COLL_ALL_REDUCE, 4, 1e6, &us, &src));
    cr_assert_str_eq(src, "fitted");
    cr_assert_float_eq(us, 6 * 5.0 + 1.5 * 1e6 / 10e9 * 1e6, 1e-9 * us);
    cr_assert(coll_measured_time(&m, COLL_ALL_GATHER, 2, 1e6, &us, &src));
    cr_assert_float_eq(us, 5.0 + 0.5 * 1e6 / 10e9 * 1e6, 1e-9 * us);
    m.use_curves = 0;
    cr_assert(coll_measured_time(&m, COLL_ALL_REDUCE, 2, c->bytes[2], &us, &src));
    cr_assert_str_eq(src, "fitted");
    cr_assert_float_eq(us, c->us[2] / 2.0, 1e-9 * us);
    /* a kind with no fit: nothing, the caller keeps the cluster model */
    m.model[COLL_REDUCE_SCATTER].fitted = 0;
    cr_assert_eq(coll_measured_time(&m, COLL_REDUCE_SCATTER, 2, 1e6, &us, &src), 0);
}

/* One step of the default GPT under text on cluster name with meas (or NULL). */
static layout_result step(const char *cluster_name, const char *text, const coll_measured *meas, int *src) {
    cluster c;
    char msg[512] = "";
    cr_assert_eq(cluster_load(cluster_name, NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    gpt_config cfg;
    cr_assert_eq(model_config_load("default", &cfg, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
    layout l;
    cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create_measured(&cfg, &l, &c, meas, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    cr_assert_eq(layout_sim_run(s, NULL, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_coll_sources(s, &src[0], &src[1], &src[2]);
    layout_sim_destroy(s);
    return r;
}

Test(coll_measured, the_step_follows_the_measured_curves) {
    int src[3];
    const char *lay = "tp=2,mbs=1,gbs=8,precision=bf16";
    layout_result base = step("h200x2", lay, NULL, src);
    cr_assert_eq(src[1] + src[2], 0, "no measurements: the cluster model only");
    cr_assert_gt(src[0], 0);
    cr_assert_str_eq(base.tp_allreduce.source, "model");
    /* the pair's own figures (6 us, 373.3 GB/s) as a fitted model: close to the cluster model */
    coll_measured m;
    make(&m, 6.0, 373.3e9, 1.0);
    layout_result same = step("h200x2", lay, &m, src);
    cr_assert_eq(src[0], 0, "every tp group lies in the node");
    cr_assert_gt(src[1], 0);
    cr_assert_str_eq(same.tp_allreduce.source, "fitted");
    cr_assert_float_eq(same.tp_allreduce.time_us, base.tp_allreduce.time_us, 1e-9 * base.tp_allreduce.time_us,
                       "the same constants give the same time");
    /* curves 3x slower than that model: the tp part and the step grow */
    make(&m, 6.0, 373.3e9, 3.0);
    m.use_curves = 1;
    layout_result slow = step("h200x2", lay, &m, src);
    cr_assert_gt(src[2], 0, "the 2-rank all-reduces come from the curve");
    cr_assert_str_eq(slow.tp_allreduce.source, "measured");
    /* 384 KiB lies between two measured sizes: log-log between 3x the model there, within a few % of 3x */
    const double ratio = slow.tp_allreduce.time_us / base.tp_allreduce.time_us;
    cr_assert(ratio > 2.8 && ratio < 3.2, "measured / model %g", ratio);
    cr_assert_gt(slow.parts_us[LAYOUT_T_TP], 2.5 * base.parts_us[LAYOUT_T_TP]);
    cr_assert_gt(slow.step_us, base.step_us + 1.5 * base.parts_us[LAYOUT_T_TP], "step %g -> %g (tp %g)",
                 base.step_us, slow.step_us, base.parts_us[LAYOUT_T_TP]);
    /* a placement (tp = dp = 1) has no collectives: unchanged bit for bit */
    layout_result p0 = step("h200x2", "pp=2,mbs=1,gbs=8", NULL, src);
    layout_result p1 = step("h200x2", "pp=2,mbs=1,gbs=8", &m, src);
    cr_assert_eq(p0.step_us, p1.step_us);
}

Test(coll_measured, groups_across_nodes_keep_the_cluster_model) {
    int src[3];
    coll_measured m;
    make(&m, 50.0, 1e9, 1.0); /* very slow: would show if it were used */
    const char *lay = "tp=2,dp=8,mbs=1,gbs=16,precision=bf16"; /* dp groups {0,2,..,14} span two nodes */
    layout_result base = step("dgx-h100", lay, NULL, src);
    layout_result r = step("dgx-h100", lay, &m, src);
    cr_assert_str_eq(r.tp_allreduce.source, "fitted", "tp = 2 inside a node");
    cr_assert_str_eq(r.dp_reduce.source, "model", "dp = 8 spans two nodes");
    cr_assert_float_eq(r.dp_reduce.time_us, base.dp_reduce.time_us, 1e-12 * base.dp_reduce.time_us);
    cr_assert_gt(src[0], 0);
    cr_assert_gt(src[1], 0);
    cr_assert_gt(r.tp_allreduce.time_us, 10 * base.tp_allreduce.time_us);
}
