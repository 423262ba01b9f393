/*
 * store_runs.c: simulator parameters, runs and checkpoints in the profile
 * store.
 *
 * Fitted simulator parameters are kept per machine and graph key. A placer
 * run is one row (method, arguments) with one row per sampled placement; a
 * checkpoint is the policy's opaque blob saved at an update of a run (a
 * training run prunes the older ones as it goes).
 */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- simulator parameters ---------------------------------------------- */

pl_status profile_db_save_sim_params(profile_db *db, const char *graph_key, int n, const char *const *names,
                                     const double *vals, const char *label) {
    if (!graph_key || n < 0 || (n > 0 && (!names || !vals)))
        return db_fail(db, PL_ERR_INVALID, "%s: bad simulator parameters", db->path);
    int kind;
    int64_t mid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = file_machine_id(db, &mid)) != PL_OK) goto out;
    sqlite3_stmt *s = stmt_get(db, S_SIM_CLEAR);
    if (!s) {
        st = PL_ERR_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_text(s, 2, graph_key, -1, SQLITE_TRANSIENT);
    if ((st = step_done(db, s, "clearing simulator parameters")) != PL_OK) goto out;
    for (int i = 0; i < n; i++) {
        if (!names[i]) {
            st = db_fail(db, PL_ERR_INVALID, "%s: simulator parameter %d has no name", db->path, i);
            goto out;
        }
        if (!(s = stmt_get(db, S_SIM_PUT))) {
            st = PL_ERR_DB;
            goto out;
        }
        sqlite3_bind_int64(s, 1, mid);
        sqlite3_bind_text(s, 2, graph_key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 3, names[i], -1, SQLITE_TRANSIENT);
        bind_double_or_null(s, 4, vals[i]);
        bind_text_or_null(s, 5, label);
        if ((st = step_done(db, s, "writing a simulator parameter")) != PL_OK) goto out;
    }
out:
    return wtx_end(db, kind, st);
}

pl_status profile_db_load_sim_params(profile_db *db, const char *graph_key, int n, const char *const *names,
                                     double *vals, int *found) {
    *found = 0;
    if (!graph_key || n < 0 || (n > 0 && (!names || !vals)))
        return db_fail(db, PL_ERR_INVALID, "%s: bad simulator parameters", db->path);
    int64_t mid;
    pl_status st = file_machine_id(db, &mid);
    if (st == PL_ERR_NOT_FOUND) return PL_OK;
    if (st != PL_OK) return st;
    for (int i = 0; i < n; i++) {
        if (!names[i]) continue;
        sqlite3_stmt *s = stmt_get(db, S_SIM_GET);
        if (!s) return PL_ERR_DB;
        sqlite3_bind_int64(s, 1, mid);
        sqlite3_bind_text(s, 2, graph_key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 3, names[i], -1, SQLITE_TRANSIENT);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            vals[i] = col_double_or_nan(s, 0);
            (*found)++;
        }
        stmt_done(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sql_fail(db, "reading a simulator parameter");
    }
    return PL_OK;
}

/* ---- runs -------------------------------------------------------------------- */

pl_status profile_db_run_create(profile_db *db, const char *method, const char *args, int64_t *run_id) {
    if (!method || !*method || !run_id) return db_fail(db, PL_ERR_INVALID, "%s: a run needs a method", db->path);
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_RUN_CREATE);
    if (!s) {
        st = PL_ERR_DB;
    } else {
        sqlite3_bind_text(s, 1, method, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, args ? args : "", -1, SQLITE_TRANSIENT);
        if ((st = step_done(db, s, "creating a run")) == PL_OK) *run_id = sqlite3_last_insert_rowid(db->h);
    }
    return wtx_end(db, kind, st);
}

pl_status profile_db_run_add_sample(profile_db *db, int64_t run_id, int update, int sample, const char *placement,
                                    double step_us, int64_t peak_bytes, int oom) {
    if (!placement) return db_fail(db, PL_ERR_INVALID, "%s: a sample needs a placement", db->path);
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_SAMPLE_PUT);
    if (!s) {
        st = PL_ERR_DB;
    } else {
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int(s, 2, update);
        sqlite3_bind_int(s, 3, sample);
        sqlite3_bind_text(s, 4, placement, -1, SQLITE_TRANSIENT);
        bind_double_or_null(s, 5, step_us);
        sqlite3_bind_int64(s, 6, peak_bytes);
        sqlite3_bind_int(s, 7, oom ? 1 : 0);
        st = step_done(db, s, "writing a run sample");
    }
    return wtx_end(db, kind, st);
}

pl_status profile_db_run_finish(profile_db *db, int64_t run_id) {
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_RUN_FINISH);
    if (!s) {
        st = PL_ERR_DB;
    } else {
        sqlite3_bind_int64(s, 1, run_id);
        st = step_done(db, s, "finishing a run");
        if (st == PL_OK && sqlite3_changes(db->h) == 0)
            st = db_fail(db, PL_ERR_NOT_FOUND, "%s: no run %lld", db->path, (long long)run_id);
    }
    return wtx_end(db, kind, st);
}

static pl_status run_exists(profile_db *db, int64_t run_id) {
    sqlite3_stmt *s = stmt_get(db, S_RUN_EXISTS);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, run_id);
    int rc = sqlite3_step(s);
    stmt_done(s);
    if (rc == SQLITE_ROW) return PL_OK;
    if (rc == SQLITE_DONE) return db_fail(db, PL_ERR_NOT_FOUND, "%s: no run %lld", db->path, (long long)run_id);
    return sql_fail(db, "looking up a run");
}

pl_status profile_db_run_samples(profile_db *db, int64_t run_id, profile_run_sample_cb cb, void *ctx) {
    pl_status st = run_exists(db, run_id);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_SAMPLE_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, run_id);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        profile_run_sample r = {
            .update = sqlite3_column_int(s, 0),
            .sample = sqlite3_column_int(s, 1),
            .placement = col_text(s, 2),
            .step_us = col_double_or_nan(s, 3),
            .peak_bytes = sqlite3_column_int64(s, 4),
            .oom = sqlite3_column_int(s, 5),
        };
        if (cb && cb(ctx, &r)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) st = sql_fail(db, "reading run samples");
    stmt_done(s);
    return st;
}

pl_status profile_db_runs(profile_db *db, profile_run_cb cb, void *ctx) {
    sqlite3_stmt *s = stmt_get(db, S_RUN_LIST);
    if (!s) return PL_ERR_DB;
    int rc;
    pl_status st = PL_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        profile_run_info r = {
            .id = sqlite3_column_int64(s, 0),
            .method = col_text(s, 1),
            .args = col_text(s, 2),
            .created_at = col_text(s, 3),
            .finished = sqlite3_column_int(s, 4),
            .n_samples = sqlite3_column_int64(s, 5),
        };
        if (cb && cb(ctx, &r)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) st = sql_fail(db, "listing runs");
    stmt_done(s);
    return st;
}

pl_status profile_db_checkpoint_save(profile_db *db, int64_t run_id, int update, const void *blob, size_t n) {
    if (n > 0 && !blob) return db_fail(db, PL_ERR_INVALID, "%s: checkpoint without data", db->path);
    if (n > (size_t)0x7fffffff) return db_fail(db, PL_ERR_INVALID, "%s: checkpoint too large", db->path);
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_CKPT_PUT);
    if (!s) {
        st = PL_ERR_DB;
    } else {
        static const char empty = 0;
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int(s, 2, update);
        sqlite3_bind_blob(s, 3, n ? blob : &empty, (int)n, SQLITE_STATIC);
        st = step_done(db, s, "writing a checkpoint");
    }
    return wtx_end(db, kind, st);
}

pl_status profile_db_checkpoint_load(profile_db *db, int64_t run_id, int update, int *update_out, void **blob,
                                     size_t *n) {
    *blob = NULL;
    *n = 0;
    sqlite3_stmt *s = stmt_get(db, update < 0 ? S_CKPT_LATEST : S_CKPT_GET);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, run_id);
    if (update >= 0) sqlite3_bind_int(s, 2, update);
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) {
        int size = sqlite3_column_bytes(s, 1);
        const void *data = sqlite3_column_blob(s, 1);
        void *copy = malloc(size > 0 ? (size_t)size : 1);
        if (!copy) {
            st = db_fail(db, PL_ERR_NOMEM, "out of memory reading a checkpoint");
        } else {
            if (size > 0) memcpy(copy, data, (size_t)size);
            *blob = copy;
            *n = (size_t)size;
            if (update_out) *update_out = sqlite3_column_int(s, 0);
        }
    } else if (rc == SQLITE_DONE) {
        st = db_fail(db, PL_ERR_NOT_FOUND, "%s: no checkpoint for run %lld%s", db->path, (long long)run_id,
                     update < 0 ? "" : " at that update");
    } else {
        st = sql_fail(db, "reading a checkpoint");
    }
    stmt_done(s);
    return st;
}

pl_status profile_db_checkpoint_prune(profile_db *db, int64_t run_id, int update) {
    int kind;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_CKPT_PRUNE);
    if (!s) {
        st = PL_ERR_DB;
    } else {
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int(s, 2, update);
        st = step_done(db, s, "pruning checkpoints");
    }
    return wtx_end(db, kind, st);
}
