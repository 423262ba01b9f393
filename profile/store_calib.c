/*
 * store_calib.c: calib's five tables in the profile store (store_calib.h):
 * confirmations with their sides and measured traces, calibrations with
 * their points; written in one transaction each, read back through
 * callbacks.
 *
 * The tables are not part of the versioned schema: each write creates them
 * when missing (store_calib_schema, inside its transaction), and each
 * reader first asks sqlite_master whether its table exists, so a file that
 * was never calibrated, opened READ, reads as holding nothing.
 */
#include "store_calib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* Bind a real, NULL when it is not finite (NaN or infinite). */
static void bind_finite_or_null(sqlite3_stmt *s, int i, double v) {
    if (isfinite(v)) sqlite3_bind_double(s, i, v);
    else sqlite3_bind_null(s, i);
}

/* Create calib's tables when missing. Call inside a write transaction. */
static pl_status ensure_tables_in_tx(profile_db *db) {
    char *e = NULL;
    if (sqlite3_exec(db->h, store_calib_schema, NULL, NULL, &e) != SQLITE_OK) {
        db_fail(db, PL_ERR_DB, "%s: cannot create the calibration tables (%s)", db->path,
                e ? e : sqlite3_errmsg(db->h));
        sqlite3_free(e);
        return PL_ERR_DB;
    }
    return PL_OK;
}

/* *yes = 1 when the table exists, else 0. */
static pl_status table_exists(profile_db *db, const char *name, int *yes) {
    *yes = 0;
    sqlite3_stmt *s = stmt_get(db, S_TABLE_EXISTS);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc == SQLITE_ROW) *yes = 1;
    else if (rc != SQLITE_DONE) return sql_fail(db, "looking up a table");
    return PL_OK;
}

/* ---- writes ------------------------------------------------------------------ */

/* One side row of confirmation cid. */
static pl_status put_side_in_tx(profile_db *db, int64_t cid, int idx, const profile_calib_side *sd) {
    sqlite3_stmt *s = stmt_get(db, S_CALIB_SIDE_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, cid);
    sqlite3_bind_int(s, 2, idx);
    sqlite3_bind_text(s, 3, sd->side, -1, SQLITE_TRANSIENT);
    if (sd->candidate) {
        sqlite3_bind_text(s, 4, sd->candidate, -1, SQLITE_TRANSIENT);
        bind_text_or_null(s, 5, sd->placement);
    }
    sqlite3_bind_int(s, 6, sd->n_candidates);
    sqlite3_bind_int(s, 7, sd->n_oom);
    sqlite3_bind_int(s, 8, sd->n);
    bind_finite_or_null(s, 9, sd->mean_us);
    bind_finite_or_null(s, 10, sd->sd_us);
    bind_finite_or_null(s, 11, sd->se_us);
    if (sd->candidate) {
        bind_finite_or_null(s, 12, sd->pred_us);
        sqlite3_bind_int64(s, 13, sd->pred_peak);
        sqlite3_bind_int64(s, 14, sd->peak_bytes);
    }
    bind_text_or_null(s, 15, sd->rounds);
    return step_done(db, s, "storing a confirmation side");
}

pl_status profile_db_calib_save_confirm(profile_db *db, const profile_calib_confirm *c,
                                        const profile_calib_side *sides, int n_sides, int64_t *id) {
    if (!c || !c->graph_key || !c->schedule || n_sides < 0 || (n_sides > 0 && !sides))
        return db_fail(db, PL_ERR_INVALID, "%s: a confirmation needs a graph key, a schedule and its sides",
                       db->path);
    for (int i = 0; i < n_sides; i++)
        if (!sides[i].side) return db_fail(db, PL_ERR_INVALID, "%s: confirmation side %d has no name", db->path, i);
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = ensure_tables_in_tx(db)) != PL_OK) goto out;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_CONFIRM_PUT);
    if (!s) {
        st = PL_ERR_DB;
        goto out;
    }
    sqlite3_bind_text(s, 1, c->label ? c->label : "", -1, SQLITE_TRANSIENT);
    if (c->run_id) sqlite3_bind_int64(s, 2, c->run_id);
    sqlite3_bind_text(s, 3, c->graph_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 4, c->micro_batches);
    sqlite3_bind_text(s, 5, c->schedule, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 6, c->mem_cap);
    sqlite3_bind_int(s, 7, c->selection_rounds);
    sqlite3_bind_int(s, 8, c->confirm_rounds);
    sqlite3_bind_int(s, 9, c->steps);
    sqlite3_bind_int(s, 10, c->warmup);
    sqlite3_bind_int64(s, 11, (sqlite3_int64)c->seed);
    sqlite3_bind_text(s, 12, c->timer ? c->timer : "", -1, SQLITE_TRANSIENT);
    if ((st = step_done(db, s, "storing a confirmation")) != PL_OK) goto out;
    const int64_t cid = sqlite3_last_insert_rowid(db->h);
    for (int i = 0; i < n_sides && st == PL_OK; i++) st = put_side_in_tx(db, cid, i, &sides[i]);
    if (st == PL_OK && id) *id = cid;
out:
    return wtx_end(db, kind, st);
}

pl_status profile_db_calib_save_trace(profile_db *db, int64_t confirm_id, const char *side, const char *placement,
                                      const char *json) {
    if (!side || !placement || !json)
        return db_fail(db, PL_ERR_INVALID, "%s: a trace needs its side, placement and JSON", db->path);
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = ensure_tables_in_tx(db)) != PL_OK) goto out;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_TRACE_PUT);
    if (!s) {
        st = PL_ERR_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, confirm_id);
    sqlite3_bind_text(s, 2, side, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, placement, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 4, json, -1, SQLITE_TRANSIENT);
    st = step_done(db, s, "storing a trace");
out:
    return wtx_end(db, kind, st);
}

/* One point row of calibration fid. */
static pl_status put_fit_point_in_tx(profile_db *db, int64_t fid, const profile_calib_fit_point *p) {
    sqlite3_stmt *s = stmt_get(db, S_CALIB_POINT_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, fid);
    if (p->measurement_id) sqlite3_bind_int64(s, 2, p->measurement_id);
    sqlite3_bind_text(s, 3, p->split, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 4, p->placement, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 5, p->micro_batches);
    sqlite3_bind_text(s, 6, p->schedule, -1, SQLITE_TRANSIENT);
    bind_finite_or_null(s, 7, p->measured_us);
    bind_finite_or_null(s, 8, p->pred_before_us);
    bind_finite_or_null(s, 9, p->pred_after_us);
    sqlite3_bind_int64(s, 10, p->measured_peak);
    sqlite3_bind_int64(s, 11, p->pred_peak);
    return step_done(db, s, "storing a calibration point");
}

/* The calib_fit row of f. */
static pl_status put_fit_in_tx(profile_db *db, const profile_calib_fit *f) {
    sqlite3_stmt *s = stmt_get(db, S_CALIB_FIT_PUT);
    if (!s) return PL_ERR_DB;
    int k = 1;
    sqlite3_bind_text(s, k++, f->graph_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, k++, f->timer ? f->timer : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, k++, (sqlite3_int64)f->seed);
    sqlite3_bind_double(s, k++, f->holdout);
    sqlite3_bind_int(s, k++, f->n_train);
    sqlite3_bind_int(s, k++, f->n_test);
    sqlite3_bind_int(s, k++, f->iterations);
    bind_finite_or_null(s, k++, f->chisq0);
    bind_finite_or_null(s, k++, f->chisq);
    const profile_calib_accuracy *e[2] = {&f->before, &f->after};
    for (int j = 0; j < 2; j++) {
        bind_finite_or_null(s, k++, e[j]->mape);
        bind_finite_or_null(s, k++, e[j]->max_ape);
        bind_finite_or_null(s, k++, e[j]->tau);
        bind_finite_or_null(s, k++, e[j]->mem_mape);
        bind_finite_or_null(s, k++, e[j]->mem_max_ape);
    }
    bind_finite_or_null(s, k++, f->train_before_mape);
    bind_finite_or_null(s, k++, f->train_after_mape);
    sqlite3_bind_text(s, k++, f->params, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, k++, f->errors, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, k++, f->before_params, -1, SQLITE_TRANSIENT);
    return step_done(db, s, "storing a calibration");
}

pl_status profile_db_calib_save_fit(profile_db *db, const profile_calib_fit *f, const profile_calib_fit_point *points,
                                    int n, int64_t *id) {
    if (!f || !f->graph_key || !f->params || !f->errors || !f->before_params || n < 0 || (n > 0 && !points))
        return db_fail(db, PL_ERR_INVALID, "%s: a calibration needs a graph key, its parameters and its points",
                       db->path);
    for (int i = 0; i < n; i++)
        if (!points[i].split || !points[i].placement || !points[i].schedule)
            return db_fail(db, PL_ERR_INVALID, "%s: calibration point %d lacks its split, placement or schedule",
                           db->path, i);
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = ensure_tables_in_tx(db)) != PL_OK || (st = put_fit_in_tx(db, f)) != PL_OK) goto out;
    const int64_t fid = sqlite3_last_insert_rowid(db->h);
    for (int i = 0; i < n && st == PL_OK; i++) st = put_fit_point_in_tx(db, fid, &points[i]);
    if (st == PL_OK && id) *id = fid;
out:
    return wtx_end(db, kind, st);
}

/* ---- reads ------------------------------------------------------------------- */

/* Text of column i, NULL when the value is NULL. */
static const char *col_text_or_null(sqlite3_stmt *s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NULL : col_text(s, i);
}

/* Step s (bound, from stmt_get) through its rows, calling row(s) until it
 * returns non-zero; reset s. PL_ERR_DB naming what on an SQLite failure. */
static pl_status each_row(profile_db *db, sqlite3_stmt *s, int (*row)(sqlite3_stmt *, void *), void *ctx,
                          const char *what) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (row(s, ctx)) {
            rc = SQLITE_DONE;
            break;
        }
    pl_status st = rc == SQLITE_DONE ? PL_OK : sql_fail(db, what);
    stmt_done(s);
    return st;
}

typedef struct {
    profile_calib_confirm_cb cb;
    void *ctx;
} confirm_reader;

static int confirm_row(sqlite3_stmt *s, void *vr) {
    const confirm_reader *r = vr;
    profile_calib_confirm c = {
        .id = sqlite3_column_int64(s, 0),
        .label = col_text(s, 1),
        .run_id = sqlite3_column_int64(s, 2),
        .graph_key = col_text(s, 3),
        .micro_batches = sqlite3_column_int(s, 4),
        .schedule = col_text(s, 5),
        .mem_cap = sqlite3_column_int64(s, 6),
        .selection_rounds = sqlite3_column_int(s, 7),
        .confirm_rounds = sqlite3_column_int(s, 8),
        .steps = sqlite3_column_int(s, 9),
        .warmup = sqlite3_column_int(s, 10),
        .seed = (uint64_t)sqlite3_column_int64(s, 11),
        .timer = col_text(s, 12),
        .created_at = col_text(s, 13),
    };
    return r->cb ? r->cb(r->ctx, &c) : 0;
}

pl_status profile_db_calib_confirms(profile_db *db, profile_calib_confirm_cb cb, void *ctx) {
    int yes;
    pl_status st = table_exists(db, "calib_confirm", &yes);
    if (st != PL_OK || !yes) return st;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_CONFIRM_LIST);
    if (!s) return PL_ERR_DB;
    confirm_reader r = {cb, ctx};
    return each_row(db, s, confirm_row, &r, "reading confirmations");
}

typedef struct {
    profile_calib_side_cb cb;
    void *ctx;
} side_reader;

static int side_row(sqlite3_stmt *s, void *vr) {
    const side_reader *r = vr;
    profile_calib_side w = {
        .side = col_text(s, 0),
        .candidate = col_text_or_null(s, 1),
        .placement = col_text_or_null(s, 2),
        .n_candidates = sqlite3_column_int(s, 3),
        .n_oom = sqlite3_column_int(s, 4),
        .n = sqlite3_column_int(s, 5),
        .mean_us = col_double_or_nan(s, 6),
        .sd_us = col_double_or_nan(s, 7),
        .se_us = col_double_or_nan(s, 8),
        .pred_us = col_double_or_nan(s, 9),
        .pred_peak = sqlite3_column_int64(s, 10),
        .peak_bytes = sqlite3_column_int64(s, 11),
        .rounds = col_text_or_null(s, 12),
    };
    return r->cb ? r->cb(r->ctx, &w) : 0;
}

pl_status profile_db_calib_sides(profile_db *db, int64_t confirm_id, profile_calib_side_cb cb, void *ctx) {
    int yes;
    pl_status st = table_exists(db, "calib_confirm_side", &yes);
    if (st != PL_OK || !yes) return st;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_SIDE_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, confirm_id);
    side_reader r = {cb, ctx};
    return each_row(db, s, side_row, &r, "reading confirmation sides");
}

typedef struct {
    profile_calib_fit_cb cb;
    void *ctx;
} fit_reader;

/* Five accuracy columns from i on. */
static profile_calib_accuracy col_accuracy(sqlite3_stmt *s, int i) {
    profile_calib_accuracy a = {col_double_or_nan(s, i), col_double_or_nan(s, i + 1), col_double_or_nan(s, i + 2),
                                col_double_or_nan(s, i + 3), col_double_or_nan(s, i + 4)};
    return a;
}

static int fit_row(sqlite3_stmt *s, void *vr) {
    const fit_reader *r = vr;
    profile_calib_fit f = {
        .id = sqlite3_column_int64(s, 0),
        .graph_key = col_text(s, 1),
        .timer = col_text(s, 2),
        .created_at = col_text(s, 3),
        .seed = (uint64_t)sqlite3_column_int64(s, 4),
        .holdout = col_double_or_nan(s, 5),
        .n_train = sqlite3_column_int(s, 6),
        .n_test = sqlite3_column_int(s, 7),
        .iterations = sqlite3_column_int(s, 8),
        .chisq0 = col_double_or_nan(s, 9),
        .chisq = col_double_or_nan(s, 10),
        .before = col_accuracy(s, 11),
        .after = col_accuracy(s, 16),
        .train_before_mape = col_double_or_nan(s, 21),
        .train_after_mape = col_double_or_nan(s, 22),
        .params = col_text(s, 23),
        .errors = col_text(s, 24),
        .before_params = col_text(s, 25),
    };
    return r->cb ? r->cb(r->ctx, &f) : 0;
}

pl_status profile_db_calib_last_fit(profile_db *db, profile_calib_fit_cb cb, void *ctx) {
    int yes;
    pl_status st = table_exists(db, "calib_fit", &yes);
    if (st != PL_OK || !yes) return st;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_FIT_LAST);
    if (!s) return PL_ERR_DB;
    fit_reader r = {cb, ctx};
    return each_row(db, s, fit_row, &r, "reading calibrations");
}

typedef struct {
    profile_calib_fit_point_cb cb;
    void *ctx;
} point_reader;

static int point_row(sqlite3_stmt *s, void *vr) {
    const point_reader *r = vr;
    profile_calib_fit_point p = {
        .measurement_id = sqlite3_column_int64(s, 0),
        .split = col_text(s, 1),
        .placement = col_text(s, 2),
        .micro_batches = sqlite3_column_int(s, 3),
        .schedule = col_text(s, 4),
        .measured_us = col_double_or_nan(s, 5),
        .pred_before_us = col_double_or_nan(s, 6),
        .pred_after_us = col_double_or_nan(s, 7),
        .measured_peak = sqlite3_column_int64(s, 8),
        .pred_peak = sqlite3_column_int64(s, 9),
    };
    return r->cb ? r->cb(r->ctx, &p) : 0;
}

pl_status profile_db_calib_fit_points(profile_db *db, int64_t fit_id, profile_calib_fit_point_cb cb, void *ctx) {
    int yes;
    pl_status st = table_exists(db, "calib_fit_point", &yes);
    if (st != PL_OK || !yes) return st;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_POINT_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, fit_id);
    point_reader r = {cb, ctx};
    return each_row(db, s, point_row, &r, "reading calibration points");
}

pl_status profile_db_calib_trace(profile_db *db, int64_t confirm_id, char **json) {
    *json = NULL;
    int yes;
    pl_status st = table_exists(db, "calib_trace", &yes);
    if (st != PL_OK || !yes) return st;
    sqlite3_stmt *s = stmt_get(db, S_CALIB_TRACE_GET);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, confirm_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const char *t = col_text(s, 0);
        size_t n = strlen(t);
        char *copy = malloc(n + 1);
        if (!copy) st = db_fail(db, PL_ERR_NOMEM, "out of memory reading a trace");
        else {
            memcpy(copy, t, n + 1);
            *json = copy;
        }
    } else if (rc != SQLITE_DONE) {
        st = sql_fail(db, "reading a trace");
    }
    stmt_done(s);
    return st;
}
