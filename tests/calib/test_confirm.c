/* test_confirm.c: the head-to-head protocol's selection and confirmation
 * logic, on a table timer (known times) and on the simulator-backed
 * synthetic timer. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "calib_db.h"
#include "calib_fixture.h"
#include "confirm.h"
#include "timer.h"

#define NN 4 /* nodes of the table-timer placements */

/* Seven candidates over three sides:
 *   rl     0:100  1:90  2:95
 *   single 3:120  4:130
 *   human  5:OOM (and would be fastest) 6:105 */
static const int PL[7][NN] = {{0, 0, 1, 1}, {0, 1, 1, 1}, {0, 0, 0, 1}, {0, 0, 0, 0},
                              {1, 1, 1, 1}, {1, 0, 0, 0}, {1, 1, 0, 0}};
static const double TRUE_US[7] = {100, 90, 95, 120, 130, NAN, 105};
static const char *SIDE[7] = {"rl", "rl", "rl", "single", "single", "human", "human"};

static calib_confirm *make_protocol(void) {
    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(NN, 2, &c), PL_OK);
    for (int i = 0; i < 7; i++) {
        char label[8];
        snprintf(label, sizeof label, "c%d", i);
        int added = 0;
        cr_assert_eq(calib_confirm_add(c, SIDE[i], label, PL[i], &added, NULL, 0), PL_OK);
        cr_assert_eq(added, 1);
    }
    return c;
}

static void run_table(calib_confirm *c, double noise, uint64_t seed, calib_table_timer **tt, profile_db *db,
                      const char *key) {
    calib_timer t;
    cr_assert_eq(calib_table_timer_create(7, NN, &PL[0][0], TRUE_US, noise, seed + 100, tt, &t), PL_OK);
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    cfg.seed = seed;
    cfg.graph_key = key;
    cfg.label = "T";
    char msg[256] = "";
    cr_assert_eq(calib_confirm_run(c, &t, &cfg, db, msg, sizeof msg), PL_OK, "%s", msg);
}

Test(calib_confirm, makes_the_right_number_of_rounds_and_timings) {
    calib_confirm *c = make_protocol();
    calib_table_timer *tt = NULL;
    run_table(c, 0.01, 1, &tt, NULL, NULL);
    /* 4 selection rounds x 7 candidates, then 8 rounds x 3 picks */
    cr_assert_eq(c->n_timings, 4 * 7 + 8 * 3);
    int sel = 0, conf = 0;
    for (int i = 0; i < c->n_timings; i++) {
        if (c->timings[i].phase) conf++;
        else sel++;
    }
    cr_assert_eq(sel, 28);
    cr_assert_eq(conf, 24);
    /* selection timings come first; each selection round holds every candidate once */
    for (int r = 0; r < 4; r++) {
        int seen[7] = {0};
        for (int j = 0; j < 7; j++) {
            const calib_timing *t = &c->timings[r * 7 + j];
            cr_assert_eq(t->phase, 0);
            cr_assert_eq(t->round, r);
            cr_assert_eq(t->order, j);
            seen[t->cand]++;
        }
        for (int k = 0; k < 7; k++) cr_assert_eq(seen[k], 1);
    }
    /* the timer saw each candidate 4 times, picks 8 more */
    for (int k = 0; k < 7; k++) {
        int picked = k == 1 || k == 3 || k == 6;
        cr_assert_eq(calib_table_timer_calls(tt, k), 4 + (picked ? 8 : 0), "candidate %d", k);
    }
    for (int s = 0; s < c->n_sides; s++) cr_assert_eq(c->sides[s].summary.n, 8);
    calib_table_timer_destroy(tt);
    calib_confirm_destroy(c);
}

Test(calib_confirm, picks_the_fastest_candidate_of_each_side_and_never_an_oom) {
    calib_confirm *c = make_protocol();
    calib_table_timer *tt = NULL;
    run_table(c, 0.005, 7, &tt, NULL, NULL);
    cr_assert_eq(c->n_sides, 3);
    cr_assert_str_eq(c->sides[0].name, "rl");
    cr_assert_eq(c->sides[0].pick, 1);
    cr_assert_eq(c->sides[1].pick, 3);
    cr_assert_eq(c->sides[2].pick, 6); /* 5 is OOM although "fastest" */
    cr_assert_eq(c->cands[5].oom, 1);
    cr_assert(isnan(c->cands[5].select_median));
    cr_assert_eq(calib_confirm_winner(c), 0);
    /* confirmed means near the true times; se = sd / sqrt(8) */
    cr_assert(epsilon_eq(dbl, c->sides[0].summary.mean, 90.0, 0.5));
    cr_assert(epsilon_eq(dbl, c->sides[1].summary.mean, 120.0, 0.6));
    cr_assert(epsilon_eq(dbl, c->sides[2].summary.mean, 105.0, 0.6));
    cr_assert(epsilon_eq(dbl, c->sides[0].summary.se, c->sides[0].summary.sd / sqrt(8.0), 1e-12));
    /* confirmation reports only confirmation rounds: its values are the
     * confirmation timings of the pick, in round order */
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < c->n_timings; i++) {
            const calib_timing *t = &c->timings[i];
            if (t->phase == 1 && t->cand == c->sides[s].pick)
                cr_assert(ieee_ulp_eq(dbl, c->sides[s].confirm_us[t->round], t->median_us, 0));
        }
    calib_table_timer_destroy(tt);
    calib_confirm_destroy(c);
}

Test(calib_confirm, a_side_with_only_oom_candidates_has_no_pick_and_no_confirmation) {
    int pl[2][NN] = {{0, 0, 0, 0}, {1, 1, 1, 1}};
    double us[2] = {100, -1};
    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(NN, 2, &c), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "single", "gpu0", pl[0], NULL, NULL, 0), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "capped", "gpu1", pl[1], NULL, NULL, 0), PL_OK);
    calib_table_timer *tt = NULL;
    calib_timer t;
    cr_assert_eq(calib_table_timer_create(2, NN, &pl[0][0], us, 0.0, 1, &tt, &t), PL_OK);
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    cr_assert_eq(calib_confirm_run(c, &t, &cfg, NULL, NULL, 0), PL_OK);
    cr_assert_eq(c->sides[1].pick, -1);
    cr_assert_eq(c->sides[1].summary.n, 0);
    cr_assert_eq(calib_table_timer_calls(tt, 1), 4); /* selection only */
    cr_assert_eq(c->n_timings, 2 * 4 + 8);
    cr_assert_eq(calib_confirm_winner(c), 0);
    calib_table_timer_destroy(tt);
    calib_confirm_destroy(c);
}

/* The sequence of candidates timed, as a string, for a seed. */
static void order_of(uint64_t seed, char *buf, size_t len) {
    calib_confirm *c = make_protocol();
    calib_table_timer *tt = NULL;
    run_table(c, 0.01, seed, &tt, NULL, NULL);
    size_t k = 0;
    for (int i = 0; i < c->n_timings && k + 1 < len; i++) buf[k++] = (char)('0' + c->timings[i].cand);
    buf[k] = 0;
    calib_table_timer_destroy(tt);
    calib_confirm_destroy(c);
}

Test(calib_confirm, shuffles_are_deterministic_per_seed) {
    char a[128], b[128], d[128];
    order_of(11, a, sizeof a);
    order_of(11, b, sizeof b);
    order_of(12, d, sizeof d);
    cr_assert_str_eq(a, b);
    cr_assert_str_neq(a, d);
    /* rounds are shuffled afresh: the four selection rounds are not all alike */
    cr_assert(strncmp(a, a + 7, 7) || strncmp(a + 7, a + 14, 7) || strncmp(a + 14, a + 21, 7));
}

Test(calib_confirm, duplicate_placements_on_a_side_are_added_once) {
    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(NN, 2, &c), PL_OK);
    int added = -1;
    cr_assert_eq(calib_confirm_add(c, "rl", "top1", PL[0], &added, NULL, 0), PL_OK);
    cr_assert_eq(added, 1);
    cr_assert_eq(calib_confirm_add(c, "rl", "favourite", PL[0], &added, NULL, 0), PL_OK);
    cr_assert_eq(added, 0);
    cr_assert_eq(calib_confirm_add(c, "single", "gpu0", PL[0], &added, NULL, 0), PL_OK);
    cr_assert_eq(added, 1);
    int bad[NN] = {0, 2, 0, 0};
    cr_assert_eq(calib_confirm_add(c, "rl", "bad", bad, &added, NULL, 0), PL_ERR_PLACEMENT_RANGE);
    cr_assert_eq(c->n_cand, 2);
    calib_confirm_destroy(c);
}

typedef struct {
    int select, confirm, other;
} purpose_count;

static int count_purpose(void *ctx, int64_t id, const profile_measurement *m, const char *at) {
    purpose_count *pc = ctx;
    (void)id;
    (void)at;
    if (!strcmp(m->purpose, "confirm-select")) pc->select++;
    else if (!strcmp(m->purpose, "confirm")) pc->confirm++;
    else pc->other++;
    cr_assert_not_null(m->extra);
    cr_assert(strstr(m->extra, "\"label\":\"T\"") != NULL);
    return 0;
}

Test(calib_confirm, every_timing_is_stored_with_its_purpose) {
    fx_model m;
    fx_model_make(&m, "tiny", "h200x2-nvlink");
    char path[256], msg[256] = "";
    profile_db *db = fx_db_make(&m, path, sizeof path);
    calib_confirm *c = make_protocol();
    calib_table_timer *tt = NULL;
    run_table(c, 0.01, 3, &tt, db, m.key);
    purpose_count pc = {0, 0, 0};
    cr_assert_eq(profile_db_measurements(db, NULL, count_purpose, &pc), PL_OK);
    cr_assert_eq(pc.select, 28);
    cr_assert_eq(pc.confirm, 24);
    cr_assert_eq(pc.other, 0);
    for (int i = 0; i < c->n_timings; i++) cr_assert_gt(c->timings[i].measurement_id, 0);
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    cfg.graph_key = m.key;
    cfg.label = "T";
    int64_t cid = 0;
    cr_assert_eq(calib_db_save_confirm(db, c, &cfg, "table", &cid, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(cid, 0);
    calib_table_timer_destroy(tt);
    calib_confirm_destroy(c);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}

Test(calib_confirm, synthetic_timer_confirms_the_simulated_fastest_side) {
    fx_model m;
    fx_model_make(&m, "default", "h200x2-nvlink");
    int n = m.g->n_nodes;
    int *single0 = calloc((size_t)n, sizeof(int)), *single1 = calloc((size_t)n, sizeof(int));
    int *split = calloc((size_t)n, sizeof(int)), *alternate = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        single1[i] = 1;
        split[i] = i >= n / 2;
        alternate[i] = i % 2; /* every edge cut: slow */
    }
    calib_confirm *c = NULL;
    cr_assert_eq(calib_confirm_create(n, 2, &c), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "single", "gpu0", single0, NULL, NULL, 0), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "single", "gpu1", single1, NULL, NULL, 0), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "human", "half", split, NULL, NULL, 0), PL_OK);
    cr_assert_eq(calib_confirm_add(c, "odd", "alternate", alternate, NULL, NULL, 0), PL_OK);
    sim_params truth;
    sim_params_default(&truth);
    truth.step_fixed_us = 200;
    truth.launch_overhead_us = 2;
    calib_sim_timer *st = NULL;
    calib_timer t;
    cr_assert_eq(calib_sim_timer_create(m.g, m.p, &truth, 0.002, 5, 4, &st, &t), PL_OK);
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    cfg.sched = schedule_make(4, SCHED_1F1B);
    char msg[256] = "";
    cr_assert_eq(calib_confirm_run(c, &t, &cfg, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(calib_sim_timer_calls(st), 4 * 4 + 8 * 3);
    /* the simulator with the true parameters says which side is fastest */
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(m.g, m.p, 4, &ctx), PL_OK);
    cr_assert_eq(calib_confirm_predict(c, ctx, &cfg.sched, 0, &truth, msg, sizeof msg), PL_OK, "%s", msg);
    int best = -1;
    for (int s = 0; s < c->n_sides; s++) {
        double pu = c->cands[c->sides[s].pick].pred_us;
        if (best < 0 || pu < c->cands[c->sides[best].pick].pred_us) best = s;
        /* confirmed mean within 0.5% of the truth (noise sd 0.2% per step) */
        cr_assert(epsilon_eq(dbl, c->sides[s].summary.mean, pu, pu * 0.005), "side %s", c->sides[s].name);
    }
    cr_assert_eq(calib_confirm_winner(c), best);
    sim_ctx_destroy(ctx);
    calib_sim_timer_destroy(st);
    calib_confirm_destroy(c);
    free(single0);
    free(single1);
    free(split);
    free(alternate);
    fx_model_free(&m);
}
