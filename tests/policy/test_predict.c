/*
 * test_predict.c: policy_predict (the library half of placer simulate) and
 * search_suite (placer search's methods) on the shipped profiles, held
 * against the simulator and the searches called directly.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "placement.h"
#include "predict.h"
#include "search_suite.h"
#include "store.h"

static const char *shipped(const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/data/%s", PLACER_SOURCE_DIR, name);
    return path;
}

/* 20 nodes on device 0, 20 on device 1 (the default GPT has 40). */
#define HALVES "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"

static policy_predict_options halves(const char *db) {
    policy_predict_options o = {db, HALVES, {4, SCHED_1F1B, 1}, NULL, NULL, -1};
    return o;
}

Test(predict, matches_the_simulator_run_directly_and_sums_every_transfer) {
    char msg[512] = "";
    policy_predict_options o = halves(shipped("h200x2.db"));
    o.params = 0;
    policy_prediction *r = NULL;
    cr_assert_eq(policy_predict(&o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_not(r->calibrated);
    cr_assert(r->used[0] && r->used[1]);
    cr_assert_eq(r->mb_size, 4);
    cr_assert(r->mb_profiled, "4 samples is a profiled size of h200x2.db");
    cr_assert_str_eq(r->placement_text, HALVES);

    /* the same run by hand: load, build, simulate with neutral parameters */
    profile_db *db = NULL;
    profile_data *p = NULL;
    graph *g = NULL;
    sim_ctx *ctx = NULL;
    gpt_config cfg;
    cr_assert_eq(profile_db_open(shipped("h200x2.db"), PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_load_profile(db, NULL, &p, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK);
    int dev[64];
    cr_assert_eq(placement_parse(HALVES, g->n_nodes, p->n_devices, dev, msg, sizeof msg), PL_OK);
    int64_t caps[2] = {p->devices[0].mem_bytes, p->devices[1].mem_bytes};
    sim_params prm;
    sim_params_default(&prm);
    schedule sc = {4, SCHED_1F1B, 1};
    sim_result res;
    cr_assert_eq(sim_ctx_create(g, p, 4, &ctx), PL_OK);
    cr_assert_eq(sim_run(ctx, dev, &sc, caps, &prm, &res), PL_OK);
    cr_assert_eq(memcmp(&r->res.step_us, &res.step_us, sizeof res.step_us), 0, "bit for bit: %.17g vs %.17g",
                 r->res.step_us, res.step_us);
    cr_assert_eq(r->res.n_transfers, res.n_transfers);

    /* the per-link sums cover every transfer, activations one way and
     * gradients the other */
    int count = 0;
    for (int i = 0; i < 4; i++) count += r->links[i].count;
    cr_assert_eq(count, res.n_transfers);
    cr_assert(r->links[0 * 2 + 1].acts > 0 && r->links[0 * 2 + 1].acts == r->links[0 * 2 + 1].count,
              "0 -> 1 carries activations only");
    cr_assert(r->links[1 * 2 + 0].count > 0 && r->links[1 * 2 + 0].acts == 0, "1 -> 0 carries gradients only");
    double crit = r->crit_dev_us[0] + r->crit_dev_us[1];
    cr_assert(crit > 0 && crit <= r->res.critical_compute_us * (1 + 1e-9), "%g vs %g", crit,
              r->res.critical_compute_us);
    sim_ctx_destroy(ctx);
    graph_destroy(g);
    profile_data_destroy(p);
    profile_db_close(db);
    policy_prediction_destroy(r);
}

Test(predict, takes_the_stored_calibration_unless_asked_for_neutral) {
    char msg[512] = "";
    policy_predict_options o = halves(shipped("h200x2.db"));
    policy_prediction *cal = NULL, *neu = NULL;
    cr_assert_eq(policy_predict(&o, &cal, msg, sizeof msg), PL_OK, "%s", msg);
    o.params = 0;
    cr_assert_eq(policy_predict(&o, &neu, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(cal->calibrated, "h200x2.db holds fitted parameters");
    cr_assert_not(neu->calibrated);
    sim_params d;
    sim_params_default(&d);
    cr_assert_eq(memcmp(&neu->prm, &d, sizeof d), 0, "neutral is the defaults");
    cr_assert(cal->res.step_us != neu->res.step_us, "the fitted parameters change the prediction");
    policy_prediction_destroy(cal);
    policy_prediction_destroy(neu);
}

Test(predict, bad_input_is_a_status_and_one_line_and_leaves_nothing) {
    char msg[512] = "";
    policy_prediction *r = (policy_prediction *)&msg; /* must come back NULL */
    policy_predict_options o = halves(shipped("h200x2.db"));
    o.placement = "0,0";
    cr_assert_eq(policy_predict(&o, &r, msg, sizeof msg), PL_ERR_PLACEMENT_LENGTH, "%s", msg);
    cr_assert_null(r);
    cr_assert(msg[0] && !strchr(msg, '\n'), "%s", msg);

    o = halves(shipped("h200x2.db"));
    o.sched.micro_batches = 3;
    cr_assert_eq(policy_predict(&o, &r, msg, sizeof msg), PL_ERR_SCHEDULE, "%s", msg);

    o = halves(shipped("h200x2.db"));
    o.mem_cap = "lots";
    cr_assert_neq(policy_predict(&o, &r, msg, sizeof msg), PL_OK);
    cr_assert_null(r);

    /* calibrated parameters asked for but not stored: not found, naming the file */
    o = halves(shipped("t4x4-pcie.db"));
    o.placement = "0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,2,2,2,2,2,2,2,2,2,2,3,3,3,3,3,3,3,3,3,3";
    o.params = 1;
    cr_assert_eq(policy_predict(&o, &r, msg, sizeof msg), PL_ERR_NOT_FOUND, "%s", msg);
    cr_assert(strstr(msg, "no calibrated simulator parameters") && strstr(msg, "t4x4-pcie.db"), "%s", msg);
    cr_assert_null(r);

    o = halves("/nonexistent/x.db");
    cr_assert_neq(policy_predict(&o, &r, msg, sizeof msg), PL_OK);
    cr_assert_null(r);
}

Test(search_suite, parses_method_lists) {
    int m = 0;
    cr_assert_eq(search_suite_parse_methods("dp,random", &m), 0);
    cr_assert_eq(m, SEARCH_SUITE_DP | SEARCH_SUITE_RANDOM);
    cr_assert_eq(search_suite_parse_methods("all", &m), 0);
    cr_assert_eq(m, SEARCH_SUITE_ALL);
    cr_assert_eq(search_suite_parse_methods("sct,etf,etf", &m), 0);
    cr_assert_eq(m, SEARCH_SUITE_SCT | SEARCH_SUITE_ETF);
    cr_assert_eq(search_suite_parse_methods("dp,annealing", &m), -1);
    cr_assert_eq(search_suite_parse_methods("", &m), -1);
    cr_assert_eq(search_suite_parse_methods(",", &m), -1);
}

Test(search_suite, rows_hold_each_methods_best_and_the_single_device_reference) {
    char msg[512] = "";
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = shipped("h200x2-spec.db");
    so.micro_batches = 4;
    so.order = SCHED_1F1B;
    so.threads = 1;
    policy_session *ss = NULL;
    cr_assert_eq(policy_session_open(&so, &ss, msg, sizeof msg), PL_OK, "%s", msg);
    search_suite_options o = {SEARCH_SUITE_DP | SEARCH_SUITE_EXHAUSTIVE, 0, 100, 1, 5e7, NULL, NULL};
    search_suite_result r;
    cr_assert_eq(search_suite_run(ss, &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_not(r.exhaustive_skipped);
    /* single (always), dp, exhaustive */
    cr_assert_geq(r.rows->n, 3);
    cr_assert(!strncmp(r.rows->items[0].label, "single", 6), "%s", r.rows->items[0].label);
    cr_assert(!strncmp(r.rows->items[1].label, "dp (", 4), "%s", r.rows->items[1].label);
    cr_assert(!strncmp(r.rows->items[2].label, "exhaustive", 10), "%s", r.rows->items[2].label);
    cr_assert_eq(memcmp(&r.ref_us, &r.rows->items[0].ev.step_us, sizeof r.ref_us), 0, "the reference is the best single");
    /* the exhaustive optimum is no slower than the DP's best nor any single device */
    cr_assert_leq(r.rows->items[2].ev.step_us, r.rows->items[1].ev.step_us * (1 + 1e-12));
    cr_assert_leq(r.rows->items[2].ev.step_us, r.ref_us);
    search_suite_result_free(&r);

    /* an exhaustive search over the limit is skipped under "all" with a note,
     * and refused when asked for by name */
    o.max_evals = 10;
    cr_assert_eq(search_suite_run(ss, &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(r.exhaustive_skipped && strstr(r.note, "max-evals"), "%s", r.note);
    search_suite_result_free(&r);
    o.explicit_methods = 1;
    cr_assert_eq(search_suite_run(ss, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "max-evals"), "%s", msg);
    search_suite_result_free(&r);
    policy_session_close(ss);
}
