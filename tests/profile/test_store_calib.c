/* test_store_calib.c: calib's tables in the profile store (store_calib.h)
 * round-trip through a READ reopen, read as empty in a file never
 * calibrated, and refuse writes on a READ handle. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "helpers.h"
#include "store.h"
#include "store_calib.h"

static profile_db *open_db(const char *path, profile_db_mode mode) {
    profile_db *db = NULL;
    char msg[512] = "";
    pl_status st = profile_db_open(path, mode, &db, msg, sizeof msg);
    cr_assert_eq(st, PL_OK, "open %s: %s", path, msg);
    return db;
}

/* What the readers saw. */
typedef struct {
    int n;
    profile_calib_confirm c[4];
    char label[4][16], key[4][16], timer[4][16];
    profile_calib_side s[4];
    char side[4][16], cand[4][16], placement[4][16], rounds[4][32];
    int has_cand[4], has_placement[4];
} seen;

static int on_confirm(void *ctx, const profile_calib_confirm *c) {
    seen *v = ctx;
    cr_assert_lt(v->n, 4);
    v->c[v->n] = *c;
    snprintf(v->label[v->n], 16, "%s", c->label);
    snprintf(v->key[v->n], 16, "%s", c->graph_key);
    snprintf(v->timer[v->n], 16, "%s", c->timer);
    v->n++;
    return 0;
}

static int on_side(void *ctx, const profile_calib_side *s) {
    seen *v = ctx;
    cr_assert_lt(v->n, 4);
    v->s[v->n] = *s;
    snprintf(v->side[v->n], 16, "%s", s->side);
    v->has_cand[v->n] = s->candidate != NULL;
    v->has_placement[v->n] = s->placement != NULL;
    snprintf(v->cand[v->n], 16, "%s", s->candidate ? s->candidate : "");
    snprintf(v->placement[v->n], 16, "%s", s->placement ? s->placement : "");
    snprintf(v->rounds[v->n], 32, "%s", s->rounds ? s->rounds : "");
    v->n++;
    return 0;
}

Test(store_calib, confirmations_round_trip_with_their_sides_latest_per_label) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "c.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_calib_confirm c = {.label = "B", .run_id = 7, .graph_key = "tiny", .micro_batches = 4,
                               .schedule = "1f1b", .mem_cap = 1LL << 33, .selection_rounds = 4,
                               .confirm_rounds = 8, .steps = 10, .warmup = 2, .seed = UINT64_C(0xfedcba9876543210),
                               .timer = "table"};
    profile_calib_side sides[2] = {
        {.side = "rl", .candidate = "top1", .placement = "0,1,1", .n_candidates = 3, .n_oom = 1, .n = 8,
         .mean_us = 1500.5, .sd_us = 12.25, .se_us = 4.5, .pred_us = 1400.0, .pred_peak = 1000, .peak_bytes = 2000,
         .rounds = "[1.5,1.6]"},
        /* no pick: candidate and what belongs to it stay NULL; NaN and inf are stored as NULL */
        {.side = "human", .candidate = NULL, .placement = "ignored", .n_candidates = 2, .n_oom = 2, .n = 0,
         .mean_us = NAN, .sd_us = INFINITY, .se_us = NAN, .pred_us = 5.0, .pred_peak = 9, .peak_bytes = 9,
         .rounds = "[]"},
    };
    int64_t id_old = 0, id_b = 0, id_a = 0;
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, sides, 2, &id_old), PL_OK, "%s", profile_db_last_error(db));
    c.micro_batches = 8; /* a later confirmation of the same label replaces it in the listing */
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, sides, 2, &id_b), PL_OK);
    profile_calib_confirm a = c;
    a.label = NULL; /* stored as "" and listed first */
    a.run_id = 0;
    a.timer = NULL;
    cr_assert_eq(profile_db_calib_save_confirm(db, &a, sides, 1, &id_a), PL_OK);
    cr_assert(id_old < id_b && id_b < id_a);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    seen v = {0};
    cr_assert_eq(profile_db_calib_confirms(db, on_confirm, &v), PL_OK, "%s", profile_db_last_error(db));
    cr_assert_eq(v.n, 2);
    cr_assert_str_eq(v.label[0], "");
    cr_assert_eq(v.c[0].id, id_a);
    cr_assert_eq(v.c[0].run_id, 0, "no run reads back as 0");
    cr_assert_str_eq(v.timer[0], "");
    cr_assert_str_eq(v.label[1], "B");
    cr_assert_eq(v.c[1].id, id_b);
    cr_assert_eq(v.c[1].micro_batches, 8);
    cr_assert_eq(v.c[1].run_id, 7);
    cr_assert_eq(v.c[1].mem_cap, 1LL << 33);
    cr_assert_eq(v.c[1].seed, UINT64_C(0xfedcba9876543210), "the seed's 64 bits survive");
    cr_assert_eq(v.c[1].selection_rounds, 4);
    cr_assert_eq(v.c[1].confirm_rounds, 8);
    cr_assert_eq(v.c[1].steps, 10);
    cr_assert_eq(v.c[1].warmup, 2);
    cr_assert_str_eq(v.key[1], "tiny");
    cr_assert_str_eq(v.timer[1], "table");

    seen w = {0};
    cr_assert_eq(profile_db_calib_sides(db, id_b, on_side, &w), PL_OK);
    cr_assert_eq(w.n, 2);
    cr_assert_str_eq(w.side[0], "rl");
    cr_assert_str_eq(w.cand[0], "top1");
    cr_assert_str_eq(w.placement[0], "0,1,1");
    cr_assert_str_eq(w.rounds[0], "[1.5,1.6]");
    cr_assert_eq(w.s[0].n_candidates, 3);
    cr_assert_eq(w.s[0].n_oom, 1);
    cr_assert_eq(w.s[0].n, 8);
    cr_assert(ieee_ulp_eq(dbl, w.s[0].mean_us, 1500.5, 0));
    cr_assert(ieee_ulp_eq(dbl, w.s[0].sd_us, 12.25, 0));
    cr_assert(ieee_ulp_eq(dbl, w.s[0].se_us, 4.5, 0));
    cr_assert(ieee_ulp_eq(dbl, w.s[0].pred_us, 1400.0, 0));
    cr_assert_eq(w.s[0].pred_peak, 1000);
    cr_assert_eq(w.s[0].peak_bytes, 2000);
    cr_assert_str_eq(w.side[1], "human");
    cr_assert_not(w.has_cand[1], "no pick: candidate NULL");
    cr_assert_not(w.has_placement[1], "no pick: placement NULL");
    cr_assert(isnan(w.s[1].mean_us) && isnan(w.s[1].sd_us) && isnan(w.s[1].se_us) && isnan(w.s[1].pred_us));
    cr_assert_eq(w.s[1].pred_peak, 0);
    cr_assert_eq(w.s[1].peak_bytes, 0);
    seen none = {0};
    cr_assert_eq(profile_db_calib_sides(db, id_a + 100, on_side, &none), PL_OK);
    cr_assert_eq(none.n, 0, "an unknown confirmation has no sides");
    profile_db_close(db);
    th_rmtree(dir);
}

/* The latest fit as read back (strings copied). */
typedef struct {
    int calls;
    profile_calib_fit f;
    char key[16], timer[16], params[64], errors[64], before[64];
} fit_seen;

static int on_fit(void *ctx, const profile_calib_fit *f) {
    fit_seen *v = ctx;
    v->calls++;
    v->f = *f;
    snprintf(v->key, sizeof v->key, "%s", f->graph_key);
    snprintf(v->timer, sizeof v->timer, "%s", f->timer);
    snprintf(v->params, sizeof v->params, "%s", f->params);
    snprintf(v->errors, sizeof v->errors, "%s", f->errors);
    snprintf(v->before, sizeof v->before, "%s", f->before_params);
    return 0;
}

typedef struct {
    int n;
    profile_calib_fit_point p[4];
    char split[4][8], placement[4][16], schedule[4][16];
} points_seen;

static int on_point(void *ctx, const profile_calib_fit_point *p) {
    points_seen *v = ctx;
    cr_assert_lt(v->n, 4);
    v->p[v->n] = *p;
    snprintf(v->split[v->n], 8, "%s", p->split);
    snprintf(v->placement[v->n], 16, "%s", p->placement);
    snprintf(v->schedule[v->n], 16, "%s", p->schedule);
    v->n++;
    return 0;
}

Test(store_calib, calibrations_round_trip_with_their_points_latest_first) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "f.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_calib_fit f = {.graph_key = "tiny", .timer = "engine", .seed = 3, .holdout = 0.25, .n_train = 6,
                           .n_test = 2, .iterations = 17, .chisq0 = 9.5, .chisq = INFINITY,
                           .before = {10.5, 20.5, 0.75, 1.5, 2.5}, .after = {1.25, 2.25, 0.875, NAN, 0.5},
                           .train_before_mape = 11.0, .train_after_mape = 1.0, .params = "{\"a\":1}",
                           .errors = "{\"a\":null}", .before_params = "{\"a\":2}"};
    profile_calib_fit_point pts[2] = {
        {.measurement_id = 41, .split = "train", .placement = "0,0,1", .micro_batches = 2, .schedule = "gpipe",
         .measured_us = 100.5, .pred_before_us = 90.25, .pred_after_us = 99.75, .measured_peak = 5000,
         .pred_peak = 4000},
        {.measurement_id = 0, .split = "test", .placement = "1,1,1", .micro_batches = 4, .schedule = "1f1b",
         .measured_us = 200.0, .pred_before_us = NAN, .pred_after_us = 201.0, .measured_peak = 6000, .pred_peak = 0},
    };
    int64_t first = 0, second = 0;
    cr_assert_eq(profile_db_calib_save_fit(db, &f, pts, 1, &first), PL_OK, "%s", profile_db_last_error(db));
    cr_assert_eq(profile_db_calib_save_fit(db, &f, pts, 2, &second), PL_OK);
    cr_assert_gt(second, first);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    fit_seen v = {0};
    cr_assert_eq(profile_db_calib_last_fit(db, on_fit, &v), PL_OK);
    cr_assert_eq(v.calls, 1);
    cr_assert_eq(v.f.id, second);
    cr_assert_str_eq(v.key, "tiny");
    cr_assert_str_eq(v.timer, "engine");
    cr_assert_eq(v.f.seed, 3);
    cr_assert(ieee_ulp_eq(dbl, v.f.holdout, 0.25, 0));
    cr_assert_eq(v.f.n_train, 6);
    cr_assert_eq(v.f.n_test, 2);
    cr_assert_eq(v.f.iterations, 17);
    cr_assert(ieee_ulp_eq(dbl, v.f.chisq0, 9.5, 0));
    cr_assert(isnan(v.f.chisq), "an infinite chisq is stored as NULL");
    cr_assert(ieee_ulp_eq(dbl, v.f.before.mape, 10.5, 0));
    cr_assert(ieee_ulp_eq(dbl, v.f.before.mem_max_ape, 2.5, 0));
    cr_assert(ieee_ulp_eq(dbl, v.f.after.tau, 0.875, 0));
    cr_assert(isnan(v.f.after.mem_mape));
    cr_assert(ieee_ulp_eq(dbl, v.f.after.mem_max_ape, 0.5, 0));
    cr_assert(ieee_ulp_eq(dbl, v.f.train_before_mape, 11.0, 0));
    cr_assert(ieee_ulp_eq(dbl, v.f.train_after_mape, 1.0, 0));
    cr_assert_str_eq(v.params, "{\"a\":1}");
    cr_assert_str_eq(v.errors, "{\"a\":null}");
    cr_assert_str_eq(v.before, "{\"a\":2}");

    points_seen p = {0};
    cr_assert_eq(profile_db_calib_fit_points(db, second, on_point, &p), PL_OK);
    cr_assert_eq(p.n, 2);
    cr_assert_eq(p.p[0].measurement_id, 41);
    cr_assert_str_eq(p.split[0], "train");
    cr_assert_str_eq(p.placement[0], "0,0,1");
    cr_assert_str_eq(p.schedule[0], "gpipe");
    cr_assert_eq(p.p[0].micro_batches, 2);
    cr_assert(ieee_ulp_eq(dbl, p.p[0].measured_us, 100.5, 0));
    cr_assert(ieee_ulp_eq(dbl, p.p[0].pred_before_us, 90.25, 0));
    cr_assert(ieee_ulp_eq(dbl, p.p[0].pred_after_us, 99.75, 0));
    cr_assert_eq(p.p[0].measured_peak, 5000);
    cr_assert_eq(p.p[0].pred_peak, 4000);
    cr_assert_eq(p.p[1].measurement_id, 0, "no measurement reads back as 0");
    cr_assert_str_eq(p.split[1], "test");
    cr_assert(isnan(p.p[1].pred_before_us));
    points_seen q = {0};
    cr_assert_eq(profile_db_calib_fit_points(db, first, on_point, &q), PL_OK);
    cr_assert_eq(q.n, 1, "each calibration keeps its own points");
    profile_db_close(db);
    th_rmtree(dir);
}

Test(store_calib, traces_read_back_the_latest_of_a_confirmation) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "t.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_calib_confirm c = {.graph_key = "tiny", .schedule = "gpipe"};
    int64_t id1 = 0, id2 = 0, id3 = 0;
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, NULL, 0, &id1), PL_OK);
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, NULL, 0, &id2), PL_OK);
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, NULL, 0, &id3), PL_OK);
    cr_assert_eq(profile_db_calib_save_trace(db, id1, "rl", "0,1", "[1]"), PL_OK, "%s", profile_db_last_error(db));
    cr_assert_eq(profile_db_calib_save_trace(db, id1, "rl", "0,1", "[2]"), PL_OK);
    cr_assert_eq(profile_db_calib_save_trace(db, id2, "dp", "1,1", "[3]"), PL_OK);
    cr_assert_eq(profile_db_calib_save_trace(db, id3 + 1, "dp", "1,1", "[4]"), PL_ERR_DB,
                 "a trace of no confirmation is refused");
    char *json = NULL;
    cr_assert_eq(profile_db_calib_trace(db, id1, &json), PL_OK);
    cr_assert_str_eq(json, "[2]");
    free(json);
    cr_assert_eq(profile_db_calib_trace(db, id2, &json), PL_OK);
    cr_assert_str_eq(json, "[3]");
    free(json);
    cr_assert_eq(profile_db_calib_trace(db, id3, &json), PL_OK);
    cr_assert_null(json, "no trace for that confirmation");
    profile_db_close(db);
    th_rmtree(dir);
}

static int count_call(void *ctx, const void *row) {
    (void)row;
    (*(int *)ctx)++;
    return 0;
}
static int count_confirm(void *ctx, const profile_calib_confirm *c) { return count_call(ctx, c); }
static int count_fit(void *ctx, const profile_calib_fit *f) { return count_call(ctx, f); }

Test(store_calib, a_file_never_calibrated_reads_as_empty_and_stays_unchanged) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "e.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_db_close(db);
    size_t n0 = 0, n1 = 0;
    unsigned char *before = th_read(path, &n0);
    db = open_db(path, PROFILE_DB_READ);
    int calls = 0;
    char *json = (char *)"x";
    cr_assert_eq(profile_db_calib_confirms(db, count_confirm, &calls), PL_OK);
    cr_assert_eq(profile_db_calib_last_fit(db, count_fit, &calls), PL_OK);
    cr_assert_eq(profile_db_calib_trace(db, 1, &json), PL_OK);
    cr_assert_eq(calls, 0);
    cr_assert_null(json);
    /* a write on a READ handle is refused, and creates no table */
    profile_calib_confirm c = {.graph_key = "tiny", .schedule = "gpipe"};
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, NULL, 0, NULL), PL_ERR_INVALID);
    cr_assert(th_has(profile_db_last_error(db), "read-only"), "%s", profile_db_last_error(db));
    cr_assert_eq(profile_db_calib_save_trace(db, 1, "rl", "0", "[]"), PL_ERR_INVALID);
    profile_db_close(db);
    unsigned char *after = th_read(path, &n1);
    cr_assert_eq(n0, n1);
    cr_assert_eq(memcmp(before, after, n0), 0, "the main file is byte for byte as it was");
    free(before);
    free(after);
    th_rmtree(dir);
}

Test(store_calib, a_confirmation_without_its_required_fields_is_refused) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "r.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_calib_confirm c = {.graph_key = "tiny", .schedule = NULL};
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, NULL, 0, NULL), PL_ERR_INVALID);
    c.schedule = "gpipe";
    profile_calib_side nameless = {.side = NULL};
    cr_assert_eq(profile_db_calib_save_confirm(db, &c, &nameless, 1, NULL), PL_ERR_INVALID);
    profile_calib_fit f = {.graph_key = "tiny", .params = "{}", .errors = NULL, .before_params = "{}"};
    cr_assert_eq(profile_db_calib_save_fit(db, &f, NULL, 0, NULL), PL_ERR_INVALID);
    int calls = 0;
    cr_assert_eq(profile_db_calib_confirms(db, count_confirm, &calls), PL_OK);
    cr_assert_eq(calls, 0, "nothing was stored");
    profile_db_close(db);
    th_rmtree(dir);
}
